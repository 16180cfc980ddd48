"""benchmarks/fidelity_sim.py re-enacts Colibri's activation rounding in numpy; its attribution
of the divergence is only as good as that copy. Here, against the scalar reference kernels
(csrc/kernels, built as a small library):

  - its Q8_H (q8h:8) and Q8_S rounding gives the reference quantizers' scales, multipliers, sums
    and quants bitwise, on rows with ties, tiny values, zero blocks and halves of unequal size;
  - its rounded products of Q8_0, Q4_1 and Q5_1 weight rows (Q8_H activations) equal the
    reference vec_dot's to f32 rounding (the Q4_1 / Q5_1 offset terms through the exact sums).
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
CC = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
sys.path.insert(0, str(ROOT / "benchmarks"))

pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler")


@pytest.fixture(scope="module")
def ref_lib(tmp_path_factory):
    kernels = ROOT / "csrc" / "kernels"
    path = tmp_path_factory.mktemp("simref") / "libquantref.so"
    subprocess.run([CC, "-shared", "-fPIC", "-O2", "-ffp-contract=off", "-I", str(ROOT / "csrc" / "include"),
                    "-o", str(path)] + [str(f) for f in sorted(kernels.glob("quant*.c"))]
                   + [str(kernels / f) for f in ("convert.c", "dot.c")] + ["-lm"], check=True, capture_output=True)
    lib = ctypes.CDLL(str(path))
    for name in ("colibri_vec_dot_q8_0_q8_h", "colibri_vec_dot_q4_1_q8_h", "colibri_vec_dot_q5_1"):
        getattr(lib, name).restype = ctypes.c_float
    return lib


def _rows(n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    heavy = rng.standard_normal(n) * np.where(rng.random(n) < 0.03, 40.0, 1.0)   # outlier channels
    zero = rng.standard_normal(n)
    zero[:32] = 0.0
    uneven = rng.standard_normal(n) * np.repeat(2.0 ** -rng.integers(0, 5, n // 16), 16)   # halves 1..1/16
    return {"normal": rng.standard_normal(n), "heavy": heavy, "tiny": rng.standard_normal(n) * 1e-5,
            "ties": np.round(rng.standard_normal(n) * 8) / 2, "zero block": zero, "uneven halves": uneven}


def _call(lib, fn: str, x: np.ndarray, nbytes: int) -> bytes:
    out = ctypes.create_string_buffer(nbytes)
    getattr(lib, fn)(x.ctypes.data_as(ctypes.c_void_p), out, ctypes.c_int64(x.size))
    return out.raw


def test_activation_rounding_is_the_reference(ref_lib):
    from fidelity_sim import q8_blocks, q8h_blocks

    n = 32 * 48
    for kind, x in _rows(n).items():
        x = np.ascontiguousarray(x, dtype=np.float32)
        d, q = q8_blocks(x.reshape(1, n), 32)
        d, q = d.reshape(-1), q.reshape(-1, 32)
        s8 = np.frombuffer(_call(ref_lib, "colibri_quantize_row_q8_s", x, n // 32 * 40), np.uint8).reshape(-1, 40)
        assert np.array_equal(s8[:, :4].copy().view(np.float32).ravel(), d), f"Q8_S d, {kind}"
        assert np.array_equal(s8[:, 8:].view(np.int8), q.astype(np.int8)), f"Q8_S qs, {kind}"
        sums = s8[:, 4:8].copy().view(np.int16)
        assert np.array_equal(sums, np.stack([q[:, :16].sum(1), q[:, 16:].sum(1)], 1)), f"Q8_S sums, {kind}"
        d, k, q = (v.reshape(n // 32, -1) for v in q8h_blocks(x.reshape(1, n), 8))
        h = np.frombuffer(_call(ref_lib, "colibri_quantize_row_q8_h", x, n // 32 * 44), np.uint8).reshape(-1, 44)
        assert np.array_equal(h[:, :4].copy().view(np.float32).ravel(), d.ravel()), f"Q8_H d, {kind}"
        assert np.array_equal(h[:, 4:8].copy().view(np.int16), k), f"Q8_H k, {kind}"
        sums = k * np.stack([q[:, :16].sum(1), q[:, 16:].sum(1)], 1)
        assert np.array_equal(h[:, 8:12].copy().view(np.int16), sums), f"Q8_H sums, {kind}"
        assert np.array_equal(h[:, 12:].view(np.int8), q.astype(np.int8)), f"Q8_H qs, {kind}"
        assert kind != "uneven halves" or len(np.unique(k)) >= 6, f"Q8_H multipliers seen: {np.unique(k)}"


class _Weights:
    """What fidelity_sim.rounded_product reads of a model, for one quantized matrix."""

    def __init__(self, raw: np.ndarray, type_name: str, rows: int, cols: int):
        import gguf
        from gguf.quants import dequantize

        qtype = getattr(gguf.GGMLQuantizationType, type_name)
        self.raw = {"w": raw}
        self.types = {"w": type_name}
        self.w = {"w": dequantize(raw, qtype).reshape(rows, cols).astype(np.float32)}

    def block_m(self, name):
        from fidelity_sim import Model
        return Model.block_m(self, name)


@pytest.mark.parametrize("type_name,mode,dot,act,act_bytes", [
    ("Q8_0", "q8h:8", "colibri_vec_dot_q8_0_q8_h", "colibri_quantize_row_q8_h", 44),
    ("Q4_1", "q8h:8", "colibri_vec_dot_q4_1_q8_h", "colibri_quantize_row_q8_h", 44),
    ("Q5_1", "q8h:8", "colibri_vec_dot_q5_1", "colibri_quantize_row_q8_h", 44),
])
def test_rounded_products_are_the_reference_dots(ref_lib, type_name, mode, dot, act, act_bytes):
    gguf = pytest.importorskip("gguf", reason="the gguf package is not installed")
    from gguf.quants import quantize
    from fidelity_sim import rounded_product

    rows, n = 8, 32 * 24
    rng = np.random.default_rng(2)
    w = (rng.standard_normal((rows, n)) * 0.05 + 0.02).astype(np.float32)
    raw = quantize(w, getattr(gguf.GGMLQuantizationType, type_name))
    model = _Weights(raw, type_name, rows, n)
    for kind, x in _rows(n).items():
        x = np.ascontiguousarray(x, dtype=np.float32)
        got = rounded_product(model, "w", x.reshape(1, n), mode).ravel()
        a = _call(ref_lib, act, x, n // 32 * act_bytes)
        want = np.array([getattr(ref_lib, dot)(raw[r].ctypes.data_as(ctypes.c_void_p), a, ctypes.c_int64(n))
                         for r in range(rows)], dtype=np.float64)
        scale = np.abs(model.w["w"]).astype(np.float64) @ np.abs(x).astype(np.float64)
        assert np.all(np.abs(got - want) <= 1e-5 * scale + 1e-30), f"{type_name} {kind}: {got} vs {want}"
