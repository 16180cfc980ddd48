"""Rotary position embedding parameters from a Hugging Face config.

Reads both config spellings: transformers 5's ``rope_parameters`` object and the
older top-level ``rope_theta`` + ``rope_scaling``. Produces the inverse
frequencies and the cos/sin attention factor that the C core applies; the
formulas follow each scaling kind's published definition (linear position
interpolation, Llama 3's frequency-band smoothing, YaRN). Partial RoPE
(``partial_rotary_factor``) rotates only the first dims of each head: the
frequencies are those of a head of that many dims.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .spec import ConfigReader

SUPPORTED_KINDS = ("default", "linear", "llama3", "yarn")


@dataclass(frozen=True)
class Rotary:
    theta: float
    inv_freq: np.ndarray          # [head_dim/2] float32; entries past dim/2 are 0 (unused)
    attention_factor: float
    dim: int                      # the rotated dims of each head (head_dim unless partial)


def _base_inv_freq(theta: float, dim: int) -> np.ndarray:
    # inv_freq: [dim/2]; exponents computed in float32 as the reference does
    exponents = np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)
    return (np.float32(1.0) / np.power(np.float32(theta), exponents, dtype=np.float32)).astype(np.float32)


def _scaling_params(cfg: "ConfigReader") -> tuple[dict, str]:
    """The rope parameter object and the field name it came from."""
    params = cfg.raw.get("rope_parameters")
    source = "rope_parameters"
    if params is None:
        params = cfg.raw.get("rope_scaling")
        source = "rope_scaling"
    if params is None:
        return {}, source
    if not isinstance(params, dict):
        raise cfg.error(source, f"must be an object, got {params!r}")
    return params, source


def _number(cfg: "ConfigReader", params: dict, source: str, key: str, default=None) -> float:
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise cfg.error(f"{source}.{key}", f"must be a positive number, got {value!r}")
    return float(value)


def from_config(cfg: "ConfigReader", head_dim: int) -> Rotary:
    """Rotary parameters for a config; ModelError names an unsupported or broken field."""
    params, source = _scaling_params(cfg)
    kind = params.get("rope_type", params.get("type", "default")) or "default"
    if kind not in SUPPORTED_KINDS:
        raise cfg.error(f"{source}.rope_type",
                        f"= {kind!r} is not supported (supported: {', '.join(SUPPORTED_KINDS)})")
    theta_value = params.get("rope_theta", cfg.raw.get("rope_theta", 10000.0))
    theta = _number(cfg, {"rope_theta": theta_value}, source, "rope_theta")
    dim = _rotary_dim(cfg, params, source, head_dim)
    inv_freq = _base_inv_freq(theta, dim)
    attention_factor = 1.0
    if kind == "linear":
        inv_freq = (inv_freq / np.float32(_number(cfg, params, source, "factor"))).astype(np.float32)
    elif kind == "llama3":
        inv_freq = _llama3(cfg, params, source, inv_freq)
    elif kind == "yarn":
        inv_freq, attention_factor = _yarn(cfg, params, source, theta, dim)
    padded = np.zeros(head_dim // 2, dtype=np.float32)
    padded[:dim // 2] = inv_freq
    return Rotary(theta, padded, attention_factor, dim)


def _rotary_dim(cfg: "ConfigReader", params: dict, source: str, head_dim: int) -> int:
    """int(head_dim * partial_rotary_factor), as transformers computes it, or the rotated dims
    themselves where a config names them (``rotary_dim``: MiniMax's released configs, and configs
    Colibri derives from GGUF's rope.dimension_count); even and at least 2."""
    if cfg.raw.get("rotary_dim") is not None:
        dim = cfg.int("rotary_dim", min=2, max=head_dim)
        if dim % 2:
            raise cfg.error("rotary_dim", f"= {dim} must be even")
        return dim
    key = f"{source}.partial_rotary_factor" if "partial_rotary_factor" in params else "partial_rotary_factor"
    factor = params.get("partial_rotary_factor", cfg.raw.get("partial_rotary_factor", 1.0))
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1:
        raise cfg.error(key, f"must be a number in (0, 1], got {factor!r}")
    dim = int(head_dim * factor)
    if dim < 2 or dim % 2:
        raise cfg.error(key, f"= {factor!r} rotates {dim} of head_dim={head_dim} dims; that must be even and >= 2")
    return dim


def softmax_mscale(cfg: "ConfigReader") -> float:
    """YaRN's ``mscale_all_dim`` as DeepSeek's latent attention applies it: the softmax scale of
    every q.k dim (not only the rotary ones) times mscale(factor, mscale_all_dim)^2; 1 for the
    default rope or without mscale_all_dim (transformers' ``yarn_apply_mscale``)."""
    params, source = _scaling_params(cfg)
    kind = params.get("rope_type", params.get("type", "default")) or "default"
    m_all = params.get("mscale_all_dim")
    if kind == "default" or not m_all:
        return 1.0
    m_all = _number(cfg, params, source, "mscale_all_dim")
    factor = _number(cfg, params, source, "factor")
    mscale = 1.0 if factor <= 1 else 0.1 * m_all * math.log(factor) + 1.0
    return mscale * mscale


def _llama3(cfg, params, source, inv_freq: np.ndarray) -> np.ndarray:
    """Llama 3.1 scaling: long wavelengths divided by `factor`, short ones kept, a smooth band between."""
    factor = _number(cfg, params, source, "factor")
    low = _number(cfg, params, source, "low_freq_factor")
    high = _number(cfg, params, source, "high_freq_factor")
    old_ctx = _number(cfg, params, source, "original_max_position_embeddings")
    if high <= low:
        raise cfg.error(f"{source}.high_freq_factor", f"= {high} must exceed low_freq_factor ({low})")
    wavelen = np.float32(2 * math.pi) / inv_freq
    scaled = np.where(wavelen > old_ctx / low, inv_freq / np.float32(factor), inv_freq).astype(np.float32)
    smooth = ((np.float32(old_ctx) / wavelen - np.float32(low)) / np.float32(high - low)).astype(np.float32)
    smoothed = ((1 - smooth) * scaled / np.float32(factor) + smooth * scaled).astype(np.float32)
    medium = ~(wavelen < old_ctx / high) & ~(wavelen > old_ctx / low)
    return np.where(medium, smoothed, scaled).astype(np.float32)


def _yarn(cfg, params, source, theta: float, dim: int) -> tuple[np.ndarray, float]:
    """YaRN: blend interpolated and extrapolated frequencies over a ramp; scale cos/sin."""
    old_ctx = _number(cfg, params, source, "original_max_position_embeddings")
    factor_value = params.get("factor")
    if factor_value is None:
        factor = cfg.int("max_position_embeddings", 4096, max=1 << 24) / old_ctx
    else:
        factor = _number(cfg, params, source, "factor")

    def mscale(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attention_factor = params.get("attention_factor")
    if attention_factor is None:
        m, m_all = params.get("mscale"), params.get("mscale_all_dim")
        attention_factor = mscale(factor, m) / mscale(factor, m_all) if m and m_all else mscale(factor)
    else:
        attention_factor = _number(cfg, params, source, "attention_factor")
    beta_fast = params.get("beta_fast") or 32
    beta_slow = params.get("beta_slow") or 1

    def correction_dim(rotations: float) -> float:
        return (dim * math.log(old_ctx / (rotations * 2 * math.pi))) / (2 * math.log(theta))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if params.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    pos_freqs = np.power(np.float32(theta), np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim),
                         dtype=np.float32)
    extrapolation = (np.float32(1.0) / pos_freqs).astype(np.float32)
    interpolation = (np.float32(1.0) / (np.float32(factor) * pos_freqs)).astype(np.float32)
    ramp = np.clip((np.arange(dim // 2, dtype=np.float32) - np.float32(low)) / np.float32(high - low), 0, 1)
    extrapolation_weight = (1 - ramp).astype(np.float32)
    inv_freq = interpolation * (1 - extrapolation_weight) + extrapolation * extrapolation_weight
    return inv_freq.astype(np.float32), float(attention_factor)
