"""The F16 KV cache (kv_type="f16"): close to the F32 cache and to transformers, still deterministic.

Tolerances: against transformers (f32), max |Δ| <= 2e-3 × max |logit| over a 40-token sequence
(keys and values rounded to f16 only; measured <= 4.3e-4); 32 greedy tokens identical to the
F32 cache's; bitwise the same logits with 1 and 2 threads.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import colibri

from conftest import token_ids

SEQ_LEN = 40


def test_f16_cache_close_to_transformers(tiny):
    ids = token_ids(tiny.reference.config.vocab_size, SEQ_LEN, seed=11)
    with torch.no_grad():
        expected = tiny.reference(torch.tensor([ids])).logits[0].float().numpy()
    with colibri.load(tiny.path, threads=2, kv_type="f16") as m:
        assert m.kv_type == "f16"
        got = m.logits(ids)
    err = np.abs(got - expected).max()
    assert err <= 2e-3 * np.abs(expected).max(), f"max |Δ| {err} vs max |logit| {np.abs(expected).max()}"


def test_f16_cache_deterministic_and_greedy_like_f32(tiny_model_factory):
    path = tiny_model_factory("mixtral-a").path
    ids = token_ids(64, 12, seed=12)
    runs = {}
    for kv_type, threads in (("f16", 1), ("f16", 2), ("f32", 2)):
        with colibri.load(path, threads=threads, kv_type=kv_type) as m:
            runs[kv_type, threads] = (m.logits(ids), m.generate(ids, max_tokens=32, temperature=0.0).tokens)
    assert runs["f16", 1][0].tobytes() == runs["f16", 2][0].tobytes()
    assert runs["f16", 2][0].tobytes() != runs["f32", 2][0].tobytes()
    assert runs["f16", 2][1] == runs["f32", 2][1]


def test_kv_type_refused(tiny_model_factory):
    with pytest.raises(ValueError, match="kv_type must be one of f32, f16, got 'bf16'"):
        colibri.load(tiny_model_factory("mixtral-a").path, kv_type="bf16")
