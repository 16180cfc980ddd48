"""Layer-sliced steps (colibri_forward_span): a prompt chunk that runs some layers per step beside
decoding tokens, carrying its hidden states, gives bitwise the logits and routes of the unsliced
run on every architecture; a span that does not continue the carried states is refused with one
line and changes nothing; the serving engine's sliced prefill keeps every request's tokens."""
from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

import colibri
from colibri import _native
from colibri.serving import Engine, GenerationParams

from conftest import token_ids

DEMO = Path(colibri.__file__).resolve().parent / "demo_model"


class Steps:
    """Raw forward steps on a model's context, with logits and routes back."""

    def __init__(self, model):
        self.model, self.ctx = model, model._context()
        c = model.config
        self.L, self.V, self.k = c.num_layers, c.vocab_size, max(c.top_k, 1) if c.moe_layers else 1

    def __call__(self, toks, pos, seqs, want, span=None):
        want = np.asarray(want, np.int8)
        T = len(toks)
        logits = np.empty((int(want.sum()), self.V), np.float32)           # [n_wanted, V]
        experts = np.full((self.L, T, self.k), -1, np.int32)              # [L, T, k]
        out = _native.Outputs(logits=_native.as_ptr(logits, ctypes.c_float),
                              experts=_native.as_ptr(experts, ctypes.c_int32))
        self.ctx.forward(np.asarray(toks, np.int32), np.asarray(pos, np.int32), np.asarray(seqs, np.int32),
                         want, out, span)
        return logits, experts


def sliced_matches_whole(model, prompt, other, cuts):
    """Sequence 1 decodes `other` one token a step while sequence 0's prompt runs the layer ranges
    between `cuts`; every logit and route equals the unsliced runs'."""
    steps, n = Steps(model), len(prompt)
    whole_prompt, whole_routes = steps(prompt, range(n), [0] * n, [0] * (n - 1) + [1])
    steps.ctx.clear(0)
    whole_other = model.logits(other)
    steps.ctx.clear(0)
    steps.ctx.clear(1)
    steps(other[:2], [0, 1], [1, 1], [0, 1])
    routes = np.full_like(whole_routes, -1)
    for i, (begin, end) in enumerate(zip(cuts, cuts[1:])):
        q, last = 2 + i, end == steps.L
        logits, experts = steps([other[q]] + prompt, [q] + list(range(n)), [1] + [0] * n,
                                [1] + [0] * (n - 1) + [int(last)], (n, begin, end))
        assert np.array_equal(logits[0], whole_other[q]), f"decoding token beside layers [{begin}, {end})"
        routes[begin:end] = experts[begin:end, 1:]
        assert steps.ctx.seq_len(0) == (n if last else 0), "a carried chunk counts once it passes the last layer"
        if last:
            assert np.array_equal(logits[1], whole_prompt[0])
    moe = list(model.config.moe_layers)
    assert np.array_equal(routes[moe], whole_routes[moe])


def test_sliced_prefill_is_bitwise_on_every_architecture(tiny):
    with colibri.load(tiny.path, threads=2, n_seq=2, n_batch=64) as model:
        L = model.config.num_layers
        prompt = token_ids(model.config.vocab_size, 13, seed=3)
        other = token_ids(model.config.vocab_size, 2 + L + 1, seed=4)
        sliced_matches_whole(model, prompt, other, list(range(L + 1)))      # one layer a step
        sliced_matches_whole(model, prompt, other, [0, L - 1, L])


def test_sliced_prefill_on_the_demo_model_with_f16_kv_and_threads():
    for threads, kv in ((1, "f32"), (2, "f16")):
        with colibri.load(DEMO, threads=threads, n_seq=2, n_batch=64, kv_type=kv) as model:
            prompt = model.tokenizer.encode("In the beginning God created the heaven and the earth.")
            other = model.tokenizer.encode("And it came to pass that he went up and said")
            sliced_matches_whole(model, prompt, other, [0, 1, 3, 4])


@pytest.fixture(scope="module")
def demo():
    with colibri.load(DEMO, threads=1, n_seq=3, n_batch=64) as model:
        yield model


def test_spans_that_do_not_continue_the_carry_are_refused(demo):
    steps, L = Steps(demo), demo.config.num_layers
    P = demo.tokenizer.encode("It is a truth universally acknowledged")
    C, at = P[3:], list(range(3, len(P)))          # the carried chunk: the prompt after its first 3 tokens
    n = len(C)
    ctx = steps.ctx

    def start():
        for s in range(3):
            ctx.clear(s)
        steps([5, 6] + P[:3], [0, 1, 0, 1, 2], [1, 1, 0, 0, 0], [0, 1, 0, 0, 0])
        steps([7] + C, [2] + at, [1] + [0] * n, [1] + [0] * n, (n, 0, 1))

    def cont(toks, pos, seqs, want, span):
        return lambda: steps(toks, pos, seqs, want, span)

    bad = [
        ("continue no carried states", cont(C, at, [0] * n, [0] * n, (n, 2, L))),
        ("is not the carried token", cont([8] + C[::-1], [3] + at, [1] + [0] * n, [1] + [0] * n, (n, 1, L))),
        ("whose carried tokens have not finished", cont([8] + C, [2] + at, [0] * (n + 1), [1] + [0] * n, (n, 1, L))),
        ("wants logits but stops at layer", cont([8] + C, [3] + at, [1] + [0] * n, [1] * (n + 1), (n, 1, 2))),
        ("must be a non-empty range", cont([8] + C, [3] + at, [1] + [0] * n, [1] + [0] * n, (n, 1, 1))),
        ("must be a non-empty range", cont(C, at, [0] * n, [0] * n, (n, 0, L + 1))),
        ("n_tokens must be in", cont(C, at, [0] * n, [0] * n, (n + 1, 0, L))),
    ]
    whole = demo.logits(P)[-1]
    for words, call in bad:
        start()
        with pytest.raises(ValueError, match=words):
            call()
        # a refused step changes nothing: the chunk still continues and finishes bitwise
        logits, _ = steps([8] + C, [3] + at, [1] + [0] * n, [1] + [0] * (n - 1) + [1], (n, 1, L))
        assert np.array_equal(logits[1], whole), words
    start()
    ctx.clear(0)       # the carried sequence changed: refused by the position check or the carry's
    with pytest.raises(ValueError, match="skips ahead|continue no carried states"):
        steps([8] + C, [3] + at, [1] + [0] * n, [1] + [0] * n, (n, 1, L))
    start()
    steps([8], [3], [1], [1])     # any other step discards the carried states
    with pytest.raises(ValueError, match="continue no carried states"):
        steps([9] + C, [4] + at, [1] + [0] * n, [1] + [0] * n, (n, 1, L))


def test_engine_sliced_prefill_keeps_tokens_and_routes(demo):
    """Requests arriving while others decode: their prompts advance a layer a step (or as the
    pacer decides), and every request's tokens and per-token routes equal its lone run."""
    tok = demo.tokenizer
    texts = ["And it came to pass", "It is a truth universally acknowledged, that a single man in possession",
             "In the beginning God created the heaven and the earth.", "Mr. Darcy said"]
    jobs = [(tok.encode(t), GenerationParams(max_tokens=10, temperature=0.8, top_k=40, seed=11 + i, routes=True))
            for i, t in enumerate(texts)]
    alone = []
    for ids, params in jobs:
        outs = list(Engine(demo, prefill_slack=None).submit(ids, params))
        alone.append(outs)
    for options in ({"prefill_layers": 1}, {"prefill_layers": 3}, {"prefill_slack": 0.3}):
        engine = Engine(demo, prefill_chunk=6, **options)
        streams = [engine.submit(*jobs[0])]
        for _ in range(3):
            engine.step()
        streams += [engine.submit(*job) for job in jobs[1:]]
        sliced_steps = 0
        while engine.step():
            sliced_steps += bool(engine.scheduler.carried)
        assert sliced_steps > 0, f"{options}: no chunk was sliced"
        # every token fed is counted once, and routed once per MoE layer, however it was sliced
        routed = engine.stats.expert_tokens.sum(axis=1)                       # [n_moe]
        assert (routed == engine.stats.batch_tokens * demo.config.top_k).all(), options
        for outs, want in zip((list(s) for s in streams), alone):
            got = [(o.token, o.text) for o in outs if o.token is not None]
            assert got == [(o.token, o.text) for o in want if o.token is not None], options
            for o, w in zip((o for o in outs if o.token is not None), (w for w in want if w.token is not None)):
                assert np.array_equal(o.experts, w.experts) and np.array_equal(o.gates, w.gates), options


def test_engine_drops_a_chunk_whose_request_is_cancelled(demo):
    tok = demo.tokenizer
    engine = Engine(demo, prefill_chunk=8, prefill_layers=1)
    first = engine.submit(tok.encode("And it came to pass"), GenerationParams(max_tokens=12, temperature=0.0))
    for _ in range(2):
        engine.step()
    long = engine.submit(tok.encode("It is a truth universally acknowledged, that a single man"),
                         GenerationParams(max_tokens=4, temperature=0.0))
    third_ids = tok.encode("In the beginning")
    third = engine.submit(third_ids, GenerationParams(max_tokens=4, temperature=0.0))
    engine.step()
    assert engine.scheduler.carried, "the long prompt's chunk is in flight"
    long.cancel()
    while engine.step():
        pass
    assert [o.finish_reason for o in long if o.finish_reason] == ["cancelled"]
    assert [o.token for o in third if o.token is not None] == demo.generate(third_ids, max_tokens=4,
                                                                            temperature=0.0).tokens
    assert len([o for o in first if o.token is not None]) == 12


def test_pacer_rules():
    from colibri.serving.pacing import PROBE_EVERY, PrefillPacer
    pacer = PrefillPacer(24, slack=0.5)
    assert pacer.layers(4, 4, 64) == 1                      # nothing measured: one layer first
    assert pacer.layers(4, 4, 64, may_pause=True) == 0      # ... or a decode-only step to measure 4
    pacer.observe(4, 0, 0, 0.030)                           # decode-only step of 4: 30 ms
    pacer.observe(4, 64, 6, 0.030 + 6 * 0.005)              # a 64-token chunk layer adds 5 ms
    assert pacer.layers(4, 4, 64) == 3                      # 0.5 * 30 ms / 5 ms
    assert pacer.layers(8, 4, 64) == 6                      # 8 hold slots: 4's step scaled by 8/4
    assert pacer.layers(4, 4, 100) == 3                     # a larger size class: the largest measured
    pacer.observe(8, 0, 0, 0.040)                           # two counts: a line through both
    assert pacer.layers(8, 4, 64) == 4 and pacer.layers(16, 4, 64) == 6
    assert pacer.layers(2, 2, 64) == 2                      # below every count: the line too (25 ms)
    assert pacer.layers(4, 3, 64, may_pause=True) == 3      # 3 unmeasured, but a probe was just planned...
    for _ in range(PROBE_EVERY):
        pacer.observe(4, 64, 3, 0.045)
    assert pacer.layers(4, 3, 64, may_pause=True) == 0      # ... and PROBE_EVERY steps later, one is
    assert PrefillPacer(24, slack=None).layers(4, 4, 64) == 24
    assert PrefillPacer(24, layers=30).layers(4, 4, 64) == 24
    for bad in ({"slack": 0.0}, {"layers": 0}):
        with pytest.raises(ValueError):
            PrefillPacer(24, **bad)
