"""GGUF files of the block types beyond Q8_0/Q4_0/Q4_1 (K types, Q5_0/Q5_1, IQ4_NL, IQ4_XS, MXFP4),
alone and mixed in one file as llama.cpp's recipes mix them, run by Colibri against transformers
reading the same file in f32 (its GGUF loader dequantizes with the gguf package).

A tiny Qwen3-MoE whose every matrix is whole 256-element blocks (conftest.WIDE_MODELS).
  precision="exact" (f32 activations): the dequantized model, so max |Δ| <= 1e-4 × max |logit|
      (measured <= 2.2e-6 on every type and the mixed file), bitwise the same on 1 and 2 threads,
      and its single-token decode steps (the ISA's fused dot_rows_exact) bitwise its prefill's
      logits for the same positions (dequantize + the F32 gemm);
  the default (activations quantized per block of 32): that rounding moves the logits of this
      random model, whose routing flips at near-ties, so the measure is the argmax agreement
      (>= 85% of positions; measured 88-100%) and the median over positions of max |Δ| /
      max |logit| (<= 0.1; measured 0.025-0.06; Q8_0 weights on the same model: 0.025).
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest
import torch

import colibri
from colibri.convert import convert

from conftest import token_ids
from gguf_export import export_gguf
from test_quant_oracle import NEW_TYPES, colibri_quantize

transformers = pytest.importorskip("transformers")
MODEL = "qwen3_moe-wide"


def _quantizer(name: str, rows: np.ndarray) -> np.ndarray:
    return colibri_quantize(name, rows.reshape(-1)).reshape(rows.shape[0], -1)


def _write(tiny, path, recipe) -> None:
    """recipe(gguf tensor name, array) -> ggml type name."""
    export_gguf(tiny.reference, tiny.path, path, recipe, quantizer=_quantizer)


def _uniform(type_name):
    return lambda name, a: type_name if a.ndim >= 2 and a.shape[-1] % 256 == 0 else "F32"


def mixed_recipe(name: str, array: np.ndarray) -> str:
    """A Q4_K_M-like mix: Q6_K for token_embd / attn_v / ffn_down, Q4_K elsewhere, MXFP4 routed
    gate and up experts (GPT-OSS style), IQ4_XS for attn_output, Q5_0 for attn_k, F32 vectors."""
    if array.ndim < 2 or "ffn_gate_inp" in name:
        return "F32"
    for part, kind in (("token_embd", "Q6_K"), ("attn_v", "Q6_K"), ("ffn_down", "Q6_K"), ("attn_output", "IQ4_XS"),
                       ("attn_k", "Q5_0"), ("ffn_gate_exps", "MXFP4"), ("ffn_up_exps", "MXFP4")):
        if part in name:
            return kind
    return "Q4_K"


def _transformers_logits(tiny, path, ids) -> np.ndarray:
    ref = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                            config=tiny.reference.config, dtype=torch.float32).eval()
    with torch.no_grad():
        return ref(torch.tensor([ids])).logits[0].float().numpy()


def _agreement(got: np.ndarray, want: np.ndarray) -> tuple[float, float]:
    """(share of positions with the same argmax, median over positions of max |Δ| / max |logit|)."""
    per_position = np.abs(got - want).max(-1) / np.abs(want).max(-1)
    return float((got.argmax(-1) == want.argmax(-1)).mean()), float(np.median(per_position))


@pytest.fixture(scope="module")
def wide(tiny_model_factory):
    return tiny_model_factory(MODEL)


def _check_against(tiny, path, ids, want_types) -> None:
    want = _transformers_logits(tiny, path, ids)
    with colibri.load(path, threads=2, precision="exact") as m:
        assert {ref.dtype for _, ref in m.weights} == want_types
        exact = m.logits(ids)
        # decode steps (the fused dot_rows_exact) against the prefill's rows (dequantize + F32 gemm)
        n = len(ids) - 4
        m.forward(ids[:n], list(range(n)), [0] * n)
        steps = np.concatenate([m.forward([ids[p]], [p], [0]) for p in range(n, len(ids))])
        assert steps.tobytes() == exact[n:].tobytes()
    with colibri.load(path, threads=1, precision="exact") as m:
        assert np.array_equal(m.logits(ids), exact)
    assert np.abs(exact - want).max() <= 1e-4 * np.abs(want).max(), np.abs(exact - want).max() / np.abs(want).max()
    with colibri.load(path, threads=2) as m:
        argmax, median = _agreement(m.logits(ids), want)
    assert argmax >= 0.85 and median <= 0.1, f"argmax agreement {argmax:.2f}, median rel {median:.3f}"


@pytest.mark.parametrize("type_name", NEW_TYPES)
def test_every_matrix_of_one_type_runs_like_transformers(wide, type_name, tmp_path):
    path = tmp_path / f"wide-{type_name}.gguf"
    _write(wide, path, _uniform(type_name))
    _check_against(wide, path, token_ids(128, 40, seed=3), {type_name, "F32"})


@pytest.fixture(scope="module")
def mixed(wide, tmp_path_factory):
    path = tmp_path_factory.mktemp("mixed") / "wide-mixed.gguf"
    _write(wide, path, mixed_recipe)
    return path


def test_mixed_file_runs_like_transformers(wide, mixed):
    _check_against(wide, mixed, token_ids(128, 40, seed=4), {"F32", "Q6_K", "Q4_K", "MXFP4", "IQ4_XS", "Q5_0"})


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "colibri", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ), cwd=tempfile.gettempdir())


def test_inspect_shows_the_type_histogram(mixed):
    r = _cli("inspect", mixed)
    assert r.returncode == 0, r.stderr
    lines = [line.removeprefix("dtype histogram").split() for line in r.stdout.splitlines() if "bits/weight" in line]
    assert r.stdout.count("dtype histogram") == 1, r.stdout
    assert {words[0] for words in lines} == {"F32", "Q6_K", "Q4_K", "MXFP4", "IQ4_XS", "Q5_0"}, r.stdout
    q4k = " ".join(next(words for words in lines if words[0] == "Q4_K"))
    assert "4.50 bits/weight" in q4k, q4k   # 144 bytes per 256 weights


def test_check_reports_nan_and_inf_block_scales(mixed, tmp_path):
    r = _cli("check", mixed)
    assert r.returncode == 0 and "NaN/Inf scan: clean" in r.stdout, r.stdout + r.stderr
    from colibri.formats.gguf import GGUFFile
    with GGUFFile(mixed) as g:
        q6k = g.tensors["blk.0.attn_v.weight"]        # Q6_K: d at byte 208 of each 210-byte block
        mx = g.tensors["blk.1.ffn_up_exps.weight"]     # MXFP4: the E8M0 exponent first in each 17-byte block
        q6k_at, mx_at = q6k.offset, mx.offset
    data = bytearray(mixed.read_bytes())
    data[q6k_at + 208:q6k_at + 210] = b"\x00\x7c"                  # +inf
    data[q6k_at + 210 + 208:q6k_at + 210 + 210] = b"\x01\xfe"      # a NaN
    data[mx_at + 17 * 3] = 0xFF                                      # E8M0 NaN
    bad = tmp_path / "bad-scales.gguf"
    bad.write_bytes(bytes(data))
    r = _cli("check", bad)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "tensor 'model.layers.0.self_attn.v_proj.weight': 2 NaN/Inf Q6_K block scales" in r.stderr, r.stderr
    assert "tensor 'model.layers.1.mlp.experts.0.up_proj.weight': 1 NaN/Inf MXFP4 block scales" in r.stderr, r.stderr
    assert "2 tensors with non-finite values" in r.stdout


def test_native_file_keeps_every_type_and_the_logits(mixed, tmp_path):
    dst = convert(mixed, tmp_path / "mixed.colibri", "keep", progress=False)
    ids = token_ids(128, 24, seed=5)
    with colibri.load(mixed, threads=2) as g, colibri.load(dst, threads=2) as n:
        assert sorted((s.name, r.dtype) for s, r in g.weights) == sorted((s.name, r.dtype) for s, r in n.weights)
        assert np.array_equal(g.logits(ids), n.logits(ids))


def test_exact_mode_through_the_api_and_the_cli(mixed):
    """precision="exact" is reported back; an unknown precision is one ValueError line;
    `colibri bench --exact` runs and says so."""
    with colibri.load(mixed, threads=1, precision="exact") as m:
        assert m.precision == "exact"
    with pytest.raises(ValueError, match="precision must be one of default, exact, got 'fast'"):
        colibri.load(mixed, precision="fast")
    r = _cli("bench", mixed, "--exact", "--prompt", "8", "--gen", "4", "--repeat", "1", "-t", "1", "--bandwidth", "10")
    assert r.returncode == 0 and "exact (f32 activations)" in r.stdout, r.stdout + r.stderr
