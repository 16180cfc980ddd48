"""gpt-oss: a router with a bias, top-k on its logits then a softmax over the chosen; attention
sinks; sliding-window and full layers as layer_types says; YaRN; q/k/v/o biases; experts with a
clamped SwiGLU (gate <= limit, |up| <= limit, (up + 1) * gate * sigmoid(alpha * gate)) and biases.

Hugging Face stores each layer's experts stacked and transposed (x @ W): gate_up_proj
[E, D, 2F] with gate and up interleaved along the last axis (gate the even columns),
down_proj [E, F, D]; they are rearranged once at load into the [rows, cols] layout the C core
reads (``Derived``), never per step. Released checkpoints keep the experts in MXFP4 instead
(``*_blocks`` [E, rows, cols/32, 16] and ``*_scales`` [E, rows, cols/32], rows in the C core's
order with gate and up rows interleaved): those are repacked into GGUF's MXFP4 block, the same
codes and exponents, never dequantized.
"""
from __future__ import annotations

import numpy as np

from ..errors import ModelError
from .spec import (FFN_SWIGLU_CLAMPED, LLAMA_NAMES, ROUTER_TOPK_SOFTMAX, Architecture, ConfigReader, Derived,
                   GGUFMapping, ModelConfig, TensorSlot, read_common, shape_text)

LAYER_TYPES = ("sliding_attention", "full_attention")
FLOAT_DTYPES = ("F32", "F16", "BF16")
EXPERTS = "model.layers.{l}.mlp.experts."


def layer_windows(cfg: ConfigReader, layers: int, window: int) -> tuple[int, ...]:
    """Each layer's sliding window (0 = full attention) from layer_types; without it, transformers'
    default for gpt-oss: sliding on even layers, full on odd ones."""
    types = cfg.raw.get("layer_types")
    if types is None:
        types = [LAYER_TYPES[l % 2] for l in range(layers)]
    if not isinstance(types, list) or len(types) != layers or any(t not in LAYER_TYPES for t in types):
        raise cfg.error("layer_types", f"must list num_hidden_layers={layers} entries of "
                                       f"{' / '.join(LAYER_TYPES)}, got {types!r}")
    if window == 0 and "sliding_attention" in types:
        raise cfg.error("sliding_window", "is missing or 0, but layer_types has sliding_attention layers")
    return tuple(window if t == "sliding_attention" else 0 for t in types)


def read_config(cfg: ConfigReader) -> ModelConfig:
    quantization = cfg.raw.get("quantization_config")
    mxfp4 = isinstance(quantization, dict) and quantization.get("quant_method") == "mxfp4"
    if quantization is not None and not mxfp4:
        raise cfg.error("quantization_config", f"= {quantization!r} is not supported (only quant_method mxfp4)")
    layers = cfg.int("num_hidden_layers", max=4096)
    window = cfg.int("sliding_window", 0, min=0, max=1 << 24)
    bias = cfg.bool("attention_bias", True)
    return read_common(
        cfg, "gpt_oss",
        intermediate_size=0,
        num_experts=cfg.int("num_local_experts", max=4096),
        top_k=cfg.int("num_experts_per_tok", max=4096),
        expert_intermediate_size=cfg.int("intermediate_size", max=1 << 20),
        shared_expert_intermediate_size=0,
        moe_layers=tuple(range(layers)),
        router_score=ROUTER_TOPK_SOFTMAX,   # top-k of the logits, softmax over the k chosen
        router_bias=True,
        router_renormalize=False,
        attention_bias=bias,
        attention_out_bias=bias,
        attention_sinks=True,
        sliding_window=window,
        layer_windows=layer_windows(cfg, layers, window),
        expert_bias=True,
        ffn_act=FFN_SWIGLU_CLAMPED,
        ffn_alpha=cfg.float("swiglu_alpha", 1.702, min=1e-6, max=1e6),
        ffn_limit=cfg.float("swiglu_limit", 7.0, min=1e-6, max=1e6),
    )


# ---- the experts' stacked tensors, rearranged at load ------------------------------------------

def _stacked(read, slot: TensorSlot, suffix: str, shape: tuple[int, ...]) -> tuple[str, np.ndarray]:
    """Layer slot.layer's stacked expert tensor `suffix` (a float type, of exactly `shape`)."""
    name = (EXPERTS + suffix).format(l=slot.layer)
    dtype, array = read(name)
    if dtype not in FLOAT_DTYPES:
        raise ModelError(f"tensor '{name}': dtype {dtype} is not supported here "
                         f"(expected one of {', '.join(FLOAT_DTYPES)})")
    if array.shape != shape:
        raise ModelError(f"tensor '{name}': shape {shape_text(array.shape)}, expected {shape_text(shape)}")
    return dtype, array


def mxfp4_to_gguf(scales: np.ndarray, blocks: np.ndarray) -> np.ndarray:
    """Hugging Face MXFP4 rows as GGUF MXFP4 rows: the same 4-bit codes and E8M0 exponents.
    scales: [rows, n/32] exponents; blocks: [rows, n/32, 16], element 2b of a block in the low
    nibble of its byte b, 2b+1 in the high one. Returns [rows, n/32 * 17]: per block the
    exponent, then 16 bytes holding element j in the low nibble of byte j, j+16 in the high one."""
    codes = np.stack((blocks & 0x0F, blocks >> 4), axis=-1).reshape(*blocks.shape[:-1], 32)   # [rows, n/32, 32]
    packed = codes[..., :16] | (codes[..., 16:] << 4)                                          # [rows, n/32, 16]
    return np.concatenate((scales[..., None], packed), axis=-1).reshape(scales.shape[0], -1)


def _mxfp4_rows(read, slot: TensorSlot, suffix: str, n_experts: int, rows: int, cols: int):
    """Expert slot.expert's rows of layer slot.layer's MXFP4 tensor `suffix` (all `rows` of them),
    or None when the checkpoint stores `suffix` unquantized. Checks both parts' dtype and shape."""
    stem = (EXPERTS + suffix).format(l=slot.layer)
    found = read(stem + "_blocks", optional=True)
    if found is None:
        return None
    parts = {"_blocks": found, "_scales": read(stem + "_scales")}
    shapes = {"_blocks": (n_experts, rows, cols // 32, 16), "_scales": (n_experts, rows, cols // 32)}
    for part, (dtype, array) in parts.items():
        if dtype != "U8" or array.shape != shapes[part] or cols % 32:
            raise ModelError(f"tensor '{stem}{part}': {dtype} {shape_text(array.shape)}, expected U8 "
                             f"{shape_text(shapes[part])} (MXFP4 of [{rows}, {cols}] per expert)")
    return parts["_scales"][1][slot.expert], parts["_blocks"][1][slot.expert]


def _gate_up(column: int):
    """Gate (column 0) or up (column 1) of one expert, [F, D]: rows column::2 of its MXFP4
    gate_up_proj, or columns column::2 of its unquantized gate_up_proj[e] [D, 2F] transposed."""
    def build(read, slot: TensorSlot, config: ModelConfig):
        F, D = slot.shape
        mxfp4 = _mxfp4_rows(read, slot, "gate_up_proj", config.num_experts, 2 * F, D)
        if mxfp4 is not None:
            scales, blocks = mxfp4
            return "MXFP4", mxfp4_to_gguf(scales[column::2], blocks[column::2])
        dtype, array = _stacked(read, slot, "gate_up_proj", (config.num_experts, D, 2 * F))   # array: [E, D, 2F]
        return dtype, array[slot.expert, :, column::2].T
    return build


def _down(read, slot: TensorSlot, config: ModelConfig):
    """One expert's down projection [D, F]: its MXFP4 rows, or down_proj[e] [F, D] transposed."""
    D, F = slot.shape
    mxfp4 = _mxfp4_rows(read, slot, "down_proj", config.num_experts, D, F)
    if mxfp4 is not None:
        return "MXFP4", mxfp4_to_gguf(*mxfp4)
    dtype, array = _stacked(read, slot, "down_proj", (config.num_experts, F, D))   # array: [E, F, D]
    return dtype, array[slot.expert].T


def _gate_up_bias(column: int):
    """Gate (column 0) or up (column 1) biases of every expert: gate_up_proj_bias[:, column::2] [E, F]."""
    def build(read, slot: TensorSlot, config: ModelConfig):
        E, F = slot.shape
        dtype, array = _stacked(read, slot, "gate_up_proj_bias", (E, 2 * F))   # array: [E, 2F]
        return dtype, array[:, column::2]
    return build


ARCHITECTURE = Architecture(
    model_type="gpt_oss",
    read_config=read_config,
    names={
        **LLAMA_NAMES,
        "ATTN_SINKS": "model.layers.{l}.self_attn.sinks",
        "ROUTER": "model.layers.{l}.mlp.router.weight",
        "ROUTER_BIAS": "model.layers.{l}.mlp.router.bias",
        "EXPERT_GATE": Derived(EXPERTS + "gate_up_proj", _gate_up(0)),
        "EXPERT_UP": Derived(EXPERTS + "gate_up_proj", _gate_up(1)),
        "EXPERT_DOWN": Derived(EXPERTS + "down_proj", _down),
        "EXPERT_GATE_BIAS": Derived(EXPERTS + "gate_up_proj_bias", _gate_up_bias(0)),
        "EXPERT_UP_BIAS": Derived(EXPERTS + "gate_up_proj_bias", _gate_up_bias(1)),
        "EXPERT_DOWN_BIAS": EXPERTS + "down_proj_bias",
    },
    gguf=GGUFMapping("gpt-oss", keys={"expert_count": "num_local_experts", "expert_used_count": "num_experts_per_tok",
                                      "expert_feed_forward_length": "intermediate_size",
                                      "attention.sliding_window": "sliding_window"},
                     names={"FFN_NORM": "blk.{l}.post_attention_norm.weight", "ATTN_SINKS": "blk.{l}.attn_sinks.weight",
                            "BO": "blk.{l}.attn_output.bias", "ROUTER_BIAS": "blk.{l}.ffn_gate_inp.bias",
                            "EXPERT_GATE_BIAS": "blk.{l}.ffn_gate_exps.bias",
                            "EXPERT_UP_BIAS": "blk.{l}.ffn_up_exps.bias",
                            "EXPERT_DOWN_BIAS": "blk.{l}.ffn_down_exps.bias"},
                     # the model's YaRN ramp is not truncated (llama.cpp's always is; the model is the spec)
                     rope_fixed={"truncate": False}),
)
