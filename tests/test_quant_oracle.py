"""Every block type's dequantization against an independent oracle, bitwise: the gguf package's
numpy dequantizers (gguf.quants, written from ggml's C reference by llama.cpp's authors, not by us).

  random blocks    every byte random except the f16 scales (random finite f16 values of every
                   magnitude, subnormals and signed zeros included): every quant, sub-block scale,
                   min and E8M0 exponent (0..255) takes every value
  our quantizer    rows of varied magnitudes quantized by colibri_quantize, read back by both

Blocks written by llama.cpp's own quantizer are checked in test_quant_llamacpp.py.
"""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="the gguf package (the dequantization oracle) is not installed")
from gguf import quants  # noqa: E402

from colibri import _native  # noqa: E402
from colibri.dtypes import DTYPES  # noqa: E402

NEW_TYPES = ["Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "MXFP4"]
BLOCK_TYPES = {t.name: t for t in DTYPES if t.is_block}


def colibri_dequantize(name: str, raw: np.ndarray) -> np.ndarray:
    """raw: [n_blocks, block_bytes] uint8 -> float32 [n_blocks * block_elems] by libcolibri."""
    t = BLOCK_TYPES[name]
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    out = np.empty(raw.shape[0] * t.block_elems, dtype=np.float32)
    assert _native.lib().colibri_dequantize(t.colibri_id, raw.ctypes.data_as(ctypes.c_void_p),
                                            out.ctypes.data_as(ctypes.c_void_p), out.size) == 0, _native.last_error()
    return out


def colibri_quantize(name: str, x: np.ndarray) -> np.ndarray:
    """x: [n] float32 (whole blocks) -> [n_blocks, block_bytes] uint8 by libcolibri."""
    t = BLOCK_TYPES[name]
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.empty((x.size // t.block_elems, t.block_bytes), dtype=np.uint8)
    assert _native.lib().colibri_quantize(t.colibri_id, x.ctypes.data_as(ctypes.c_void_p),
                                          out.ctypes.data_as(ctypes.c_void_p), x.size) == 0, _native.last_error()
    return out


def oracle_dequantize(name: str, raw: np.ndarray) -> np.ndarray:
    return quants.dequantize(raw, getattr(gguf.GGMLQuantizationType, name)).reshape(-1).astype(np.float32)


def assert_bitwise(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.shape == want.shape, what
    differ = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    assert differ.size == 0, f"{what}: {differ.size} of {got.size} values differ, first at {differ[0]}: " \
                             f"colibri {got[differ[0]]!r}, gguf {want[differ[0]]!r}"


def random_f16(rng: np.random.Generator, n: int) -> np.ndarray:
    """n finite f16 values of every magnitude (as uint16 bits): normals over 1e-7..6e4, subnormals, ±0."""
    values = rng.standard_normal(n) * 10.0 ** rng.uniform(-7, 4.5, n)
    bits = np.clip(values, -65000, 65000).astype(np.float16).view(np.uint16)
    bits[::17] = rng.integers(0, 0x400, bits[::17].size) | (rng.integers(0, 2, bits[::17].size) << 15)   # subnormals
    bits[5::97] = 0x8000
    return bits


@pytest.mark.parametrize("name", NEW_TYPES)
def test_random_blocks_dequantize_bitwise(name):
    t = BLOCK_TYPES[name]
    rng = np.random.default_rng(t.colibri_id)
    n_blocks = 4096
    raw = rng.integers(0, 256, (n_blocks, t.block_bytes), dtype=np.uint8)
    for at in t.f16_scales:
        raw[:, at:at + 2] = random_f16(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    for at in t.e8m0_scales:
        raw[:, at] = np.arange(n_blocks) % 256   # every exponent, 255 (2^127 as ggml reads it) included
    with np.errstate(over="ignore"):   # E8M0 255 times 12 overflows to inf, in both
        want = oracle_dequantize(name, raw)
    assert_bitwise(colibri_dequantize(name, raw), want, f"{name} random blocks")


@pytest.mark.parametrize("name", NEW_TYPES)
def test_our_quantizer_blocks_dequantize_bitwise(name):
    t = BLOCK_TYPES[name]
    rng = np.random.default_rng(100 + t.colibri_id)
    rows = [rng.standard_normal(4096), rng.standard_normal(4096) * 1e-3 + 0.01, rng.random(4096) * 7 - 1,
            np.round(rng.standard_normal(4096) * 3) / 4, rng.standard_t(2, 4096)]
    x = np.concatenate(rows).astype(np.float32)
    raw = colibri_quantize(name, x)
    got = colibri_dequantize(name, raw)
    assert_bitwise(got, oracle_dequantize(name, raw), f"{name} blocks of colibri_quantize")
    nmse = float(np.sum((got - x) ** 2) / np.sum(x.astype(np.float64) ** 2))
    assert nmse < 0.12, f"{name}: round trip NMSE {nmse:.3g}"   # a sanity bound; quality: test_quant_llamacpp.py
