"""Colibri against Hugging Face transformers on tiny random checkpoints of every architecture.

Tolerances (stated once, used below):
  f32 logits      max |Δ| <= 1e-4 × max |logit| over a 40-token sequence
  bf16 weights    same argmax as transformers at >= 99% of 200 positions, where transformers
                  runs the bf16 checkpoint with f32 activations as Colibri does; and against
                  transformers computing in bf16, at least its own f32-vs-bf16 agreement
                  minus 1% (bf16 activations flip near-ties in transformers itself)
  router          identical experts (as sets per token); gates within 1e-5
  greedy          32 generated tokens identical to transformers' generate
"""
from __future__ import annotations

import numpy as np
import torch

import colibri

from conftest import token_ids

SEQ_LEN = 40


def _hf_logits(model, ids) -> np.ndarray:
    with torch.no_grad():
        out = model(torch.tensor([ids]))
    return out.logits[0].float().numpy()


def _router_modules(model):
    """The router (gate) module of every MoE layer, by layer index."""
    routers = {}
    for i, layer in enumerate(model.model.layers):
        block = getattr(layer, "block_sparse_moe", None) or getattr(layer, "mlp", None)
        gate = getattr(block, "gate", None) or getattr(block, "router", None)
        if gate is not None and hasattr(gate, "top_k"):
            routers[i] = gate
    return routers


def _hf_routes(model, ids) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per MoE layer: router logits [T, E], experts [T, k], gates [T, k] as transformers computes them."""
    captured, hooks = {}, []
    for i, gate in _router_modules(model).items():
        def hook(_module, _inputs, output, i=i):
            logits, weights, indices = output
            captured[i] = (logits.float().numpy(), indices.numpy(), weights.float().numpy())
        hooks.append(gate.register_forward_hook(hook))
    try:
        _hf_logits(model, ids)
    finally:
        for h in hooks:
            h.remove()
    return captured


def test_f32_logits_match(tiny):
    ids = token_ids(tiny.reference.config.vocab_size, SEQ_LEN, seed=1)
    expected = _hf_logits(tiny.reference, ids)
    with colibri.load(tiny.path, threads=2) as m:
        got = m.logits(ids)
    assert got.shape == expected.shape
    err = np.abs(got - expected).max()
    assert err <= 1e-4 * np.abs(expected).max(), f"max |Δ| {err} vs max |logit| {np.abs(expected).max()}"


def test_bf16_argmax_agrees(tiny):
    vocab = tiny.reference.config.vocab_size
    upcast = type(tiny.reference)(tiny.reference.config).eval()   # bf16 weights, f32 compute
    upcast.load_state_dict({k: v.float() for k, v in tiny.reference_bf16.state_dict().items()})
    if tiny.model_type != "llama":
        upcast.set_experts_implementation("eager")
    agree_upcast = agree_bf16 = hf_self = total = 0
    with colibri.load(tiny.path_bf16, threads=2) as m:
        for seed in range(5):
            ids = token_ids(vocab, SEQ_LEN, seed=10 + seed)
            got = m.logits(ids).argmax(-1)
            hf_f32 = _hf_logits(upcast, ids).argmax(-1)
            hf_bf16 = _hf_logits(tiny.reference_bf16, ids).argmax(-1)
            agree_upcast += int((got == hf_f32).sum())
            agree_bf16 += int((got == hf_bf16).sum())
            hf_self += int((hf_f32 == hf_bf16).sum())
            total += len(ids)
    assert agree_upcast / total >= 0.99, f"argmax agreement {agree_upcast}/{total}"
    assert agree_bf16 / total >= hf_self / total - 0.01, f"vs bf16 compute {agree_bf16}/{total}, hf itself {hf_self}"


def _by_expert(experts: np.ndarray, gates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each token's slots ordered by expert index (the DeepSeek-style routers of transformers take
    their top-k unsorted, so only the set of experts and their gates are comparable)."""
    order = np.argsort(experts, axis=1, kind="stable")
    return np.take_along_axis(experts, order, 1), np.take_along_axis(gates, order, 1)


def test_router_matches(tiny_moe):
    tiny = tiny_moe
    ids = token_ids(tiny.reference.config.vocab_size, SEQ_LEN, seed=2)
    expected = _hf_routes(tiny.reference, ids)
    with colibri.load(tiny.path, threads=2) as m:
        routes = m.route(ids)
    assert [r.layer for r in routes] == sorted(expected)
    for r in routes:
        logits, experts, gates = expected[r.layer]
        np.testing.assert_allclose(r.router_logits, logits, rtol=0, atol=1e-5 * max(1.0, np.abs(logits).max()))
        got_experts, got_gates = _by_expert(r.experts, r.gates)
        experts, gates = _by_expert(experts, gates)
        np.testing.assert_array_equal(got_experts, experts)
        np.testing.assert_allclose(got_gates, gates, rtol=0, atol=1e-5 * max(1.0, np.abs(gates).max()))


def test_greedy_generation_matches(tiny):
    ref = tiny.reference
    prompt = token_ids(ref.config.vocab_size - 1, 7, seed=3)   # no EOS inside the prompt
    with torch.no_grad():
        out = ref.generate(torch.tensor([prompt]), max_new_tokens=32, do_sample=False,
                           eos_token_id=ref.config.eos_token_id, pad_token_id=ref.config.eos_token_id)
    expected = out[0, len(prompt):].tolist()
    if ref.config.eos_token_id in expected:
        expected = expected[:expected.index(ref.config.eos_token_id)]
    with colibri.load(tiny.path, threads=2) as m:
        got = m.generate(prompt, max_tokens=32, temperature=0.0)
    assert got.tokens == expected
    assert got.finish_reason == ("length" if len(expected) == 32 else "stop")


def test_cached_decoding_equals_full_recompute(tiny):
    ids = token_ids(tiny.reference.config.vocab_size, 24, seed=4)
    with colibri.load(tiny.path, threads=2) as m:
        full = m.logits(ids)
        m._context().clear(0)
        head = m.forward(ids[:9], range(9), [0] * 9, [True] * 9)
        steps = [m.forward([t], [p], [0])[0] for p, t in enumerate(ids[9:], start=9)]
    np.testing.assert_array_equal(np.vstack([head, np.array(steps)]), full)


def test_logits_bitwise_across_threads(tiny):
    ids = token_ids(tiny.reference.config.vocab_size, SEQ_LEN, seed=5)
    with colibri.load(tiny.path, threads=1) as m1:
        one = m1.logits(ids)
    with colibri.load(tiny.path, threads=2) as m2:
        two = m2.logits(ids)
    assert one.tobytes() == two.tobytes()


def test_logits_bitwise_alone_vs_batched(tiny):
    vocab = tiny.reference.config.vocab_size
    a = token_ids(vocab, 12, seed=6)
    b = token_ids(vocab, 12, seed=7)
    with colibri.load(tiny.path, threads=2, n_seq=2) as m:
        alone = m.logits(a)
        m._context().clear(0)
        m._context().clear(1)
        # interleave the two sequences token by token in one batch
        tokens = [t for pair in zip(a, b) for t in pair]
        positions = [p for p in range(len(a)) for _ in (0, 1)]
        seqs = [0, 1] * len(a)
        want = [s == 0 for s in seqs]
        batched = m.forward(tokens, positions, seqs, want)
    assert alone.tobytes() == batched.tobytes()
