"""Paging (docs/PAGING.md): models larger than memory, their experts read into a cache of slots.

  exactness   paged logits == resident logits BITWISE, with slots for 1, 2 and all experts per
              layer, read-ahead off, one and two layers ahead, prefill chunks and decode steps,
              HF / GGUF / native
  read-ahead  the prediction counters (one and two MoE layers ahead) == the routers recomputed
              on transformers' MoE inputs
  policy      which experts stay cached, hits, misses and waves == an independent simulation of
              the documented eviction rule (use counts halved every aging period, then least
              recently used, then lowest (layer, expert)); pinned experts are never evicted
  budgets     malformed budgets and too-small ones refused with one line (the latter naming the
              minimum, which then loads); `auto` pages with a one-line notice when the model
              does not fit the memory available
  failures    a file that shrinks under a paged model fails the step with ModelError
  cgroup      a paged run inside a real memory cgroup (root): same logits, no limit ever hit
"""
from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import colibri
from colibri import expert_profile, paging
from colibri.errors import ModelError
from conftest import token_ids
from gguf_export import export_gguf

ROOT = Path(__file__).resolve().parent.parent
# odd shapes: 8 experts top-4; shared expert + a dense layer; 5 experts top-2; a dense first layer;
# the other routing rules: group-limited greedy over 12 experts (V2), sigmoid + selection bias over
# groups with a dense first layer (V3); gpt-oss (expert and router biases) pages from GGUF below
MODELS = ["olmoe-c", "qwen2_moe-a", "mixtral-a", "qwen3_moe-b", "deepseek_v2-c", "deepseek_v3-a"]


def _trace(model, prompt: list[int], n_decode: int) -> np.ndarray:
    """Logits of every prompt position (prefill in n_batch chunks) then of n_decode greedy steps."""
    rows = [model.logits(prompt)]                                               # [P, V]
    token, pos = int(np.argmax(rows[0][-1])), len(prompt)
    for _ in range(n_decode):
        step = model.forward([token], [pos], [0])                               # [1, V]
        rows.append(step)
        token, pos = int(np.argmax(step[0])), pos + 1
    return np.concatenate(rows)


def _n_moe(model) -> int:
    return len(model.config.moe_layers)


# ---- exactness ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_paged_logits_equal_resident_bitwise(tiny_model_factory, name):
    tiny = tiny_model_factory(name)
    with colibri.load(tiny.path, threads=2, n_batch=5, mem_budget="off") as m:
        assert m.paging is None
        prompt = token_ids(m.config.vocab_size, 17, seed=3)
        want = _trace(m, prompt, 6)
        n_moe, E = _n_moe(m), m.config.num_experts
    for per_layer in (1, 2, E):
        for prefetch in (0, 1, 2):
            with colibri.load(tiny.path, threads=1 + per_layer % 2, n_batch=5, expert_slots=per_layer * n_moe,
                              prefetch=prefetch) as m:
                got = _trace(m, prompt, 6)
                st = m.paging_stats()
            assert np.array_equal(got, want), (per_layer, prefetch)
            assert st.n_slots == per_layer * n_moe and st.lookups == st.hits + st.misses > 0
            assert st.tokens == len(prompt) + 6 and st.reads == st.misses + st.prefetches
            assert st.bytes_read >= st.reads * 4096
            if per_layer == E:     # every expert fits: each is read at most once
                assert st.reads <= E * n_moe and st.waves == 0
            if not prefetch:
                assert st.prefetches == st.predicted == 0
            if prefetch < 2:
                assert st.predicted2 == st.needed_after_prediction2 == 0


def test_read_ahead_counters_match_the_routers_on_earlier_inputs(tiny_model_factory):
    """The read-ahead's prediction for a MoE layer made d = 1 or 2 MoE layers before it is that
    layer's router (top-k) on the earlier layer's MoE input, over the step's tokens: recomputed
    here from transformers' own MoE inputs (hooks on each layer's block), the counters
    (predicted, predicted_needed, needed_after_prediction; *2 for two ahead) are those sets' sizes.
    With a slot for every expert each layer predicts (no layer lacks slots for its own); two ahead
    only while the three layers' experts fill at most half the slots (here: decode steps, not
    the prefill chunk)."""
    import torch

    tiny = tiny_model_factory("mixtral-b")   # 3 MoE layers, 4 experts, top-1: layer 2 predicted from 0 and 1
    n_decode = 12
    with colibri.load(tiny.path, threads=2, mem_budget="off") as m:
        c = m.config
        prompt = token_ids(c.vocab_size, 9, seed=13)
        rows = _trace(m, prompt, n_decode)
    fed = [int(np.argmax(rows[len(prompt) - 1 + i])) for i in range(n_decode)]   # decode inputs
    inputs = {}
    layers = tiny.reference.model.layers
    hooks = [layers[l].mlp.register_forward_pre_hook(
        lambda mod, args, l=l: inputs.__setitem__(l, args[0].reshape(-1, args[0].shape[-1]).detach().double()))
        for l in c.moe_layers]
    try:
        with torch.no_grad():
            tiny.reference(torch.tensor([prompt + fed]))
    finally:
        for h in hooks:
            h.remove()
    k, moe = c.top_k, list(c.moe_layers)
    n_slots = c.num_experts * len(moe)

    def picks(layer, source, positions):   # union over the positions of layer's top-k on source's input
        logits = inputs[source][positions] @ layers[layer].mlp.gate.weight.detach().double().T   # [T, E]
        return set(torch.topk(logits, k, dim=-1).indices.reshape(-1).tolist())

    steps = [list(range(len(prompt)))] + [[len(prompt) + i] for i in range(n_decode)]
    want = {d: [0, 0, 0] for d in (1, 2)}   # predicted, predicted_needed, needed_after_prediction
    for positions in steps:
        for i, layer in enumerate(moe):
            need = picks(layer, layer, positions)
            for d in (1, 2):
                if i >= d:
                    pred = picks(layer, moe[i - d], positions)
                    if d == 2 and 2 * (len(picks(moe[i - 2], moe[i - 2], positions)) +
                                       len(picks(moe[i - 1], moe[i - 2], positions)) + len(pred)) > n_slots:
                        continue
                    want[d][0] += len(pred)
                    want[d][1] += len(pred & need)
                    want[d][2] += len(need)
    assert 0 < want[2][1] < want[2][2]   # a test that a wrong prediction would fail
    for depth in (1, 2):
        with colibri.load(tiny.path, threads=2, expert_slots=n_slots, prefetch=depth) as m:
            assert np.array_equal(_trace(m, prompt, n_decode), rows)
            st = m.paging_stats()
        assert [st.predicted, st.predicted_needed, st.needed_after_prediction] == want[1], depth
        two = [st.predicted2, st.predicted2_needed, st.needed_after_prediction2]
        assert two == (want[2] if depth == 2 else [0, 0, 0]), depth
        assert st.prefetch2_accuracy == (want[2][1] / want[2][2] if depth == 2 else 0.0)
        assert 0.0 <= st.stall_ahead_seconds <= st.stall_seconds


def test_prefetch_depth_is_checked(tiny_model_factory):
    tiny = tiny_model_factory("olmoe-c")
    for bad in (3, -1, "2", 1.0):
        with pytest.raises(ValueError, match=r"prefetch must be True, False, 0, 1 or 2"):
            colibri.load(tiny.path, threads=1, expert_slots=4, prefetch=bad)


def test_experts_larger_than_a_read_piece_are_read_in_pieces(tiny_model_factory):
    """An expert window over 1 MiB (mixtral-wide8 in f32: gate, w2 and up adjacent, 1.5 MiB) is read
    in pieces of at most 1 MiB that the reader threads share; the slot holds the same bytes."""
    tiny = tiny_model_factory("mixtral-wide8")
    with colibri.load(tiny.path, threads=2, n_batch=4, mem_budget="off") as m:
        prompt = token_ids(m.config.vocab_size, 9, seed=5)
        want = _trace(m, prompt, 4)
        n_moe = _n_moe(m)
    for per_layer in (1, 3):
        with colibri.load(tiny.path, threads=2, n_batch=4, expert_slots=per_layer * n_moe) as m:
            assert m.paging.read_bytes <= 1 << 20 < m.paging.slot_bytes
            assert np.array_equal(_trace(m, prompt, 4), want), per_layer
            st = m.paging_stats()
            assert st.misses > 0 and st.prefetches > 0
            # a read a reader started is read whole, every piece once (a queued one may be dropped)
            assert st.bytes_read % m.paging.slot_bytes == 0 and 0 < st.bytes_read <= st.reads * m.paging.slot_bytes


@pytest.mark.parametrize("name,qtype", [("olmoe-c", "q8_0"), ("olmoe-c", "q4_0"), ("gpt_oss-a", "q8_0"),
                                        ("deepseek_v3-a", "q4_0")])
def test_paged_gguf_and_native_equal_resident(tiny_model_factory, tmp_path, name, qtype):
    """GGUF keeps an expert's gate, up and down in three [E, ...] stacks (three reads); the native
    format keeps them adjacent (one read). Either way the same bytes reach the kernels; gpt-oss's
    per-expert biases stay resident beside them."""
    from colibri.convert import convert

    tiny = tiny_model_factory(name)
    gguf = tmp_path / f"{name}-{qtype}.gguf"
    export_gguf(tiny.reference, tiny.path, gguf, qtype)
    paths = [gguf]
    if name != "gpt_oss-a":   # the .colibri format does not hold gpt-oss yet
        paths.append(convert(gguf, tmp_path / f"{name}-{qtype}.colibri", "keep", progress=False))
    for path in paths:
        with colibri.load(path, threads=2, n_batch=4, mem_budget="off") as m:
            prompt = token_ids(m.config.vocab_size, 11, seed=7)
            want = _trace(m, prompt, 5)
        with colibri.load(path, threads=2, n_batch=4, expert_slots=3) as m:
            assert np.array_equal(_trace(m, prompt, 5), want), path
            st = m.paging_stats()
            assert st.misses > 0 and st.waves > 0


def test_experts_converted_at_load_are_not_paged(tiny_model_factory, monkeypatch, capsys):
    """gpt-oss's Hugging Face experts are transposed into memory at load: nothing in the file to
    page from. An explicit request is refused with one line; `auto` says so and loads whole."""
    tiny = tiny_model_factory("gpt_oss-a")
    for kwargs in (dict(expert_slots=2), dict(mem_budget="1MiB")):
        with pytest.raises(ValueError, match=r"converted at load .* cannot be paged; page a GGUF file") as e:
            colibri.load(tiny.path, threads=1, **kwargs)
        assert "\n" not in str(e.value)
    monkeypatch.setattr(paging, "available_memory", lambda: (1 << 20, "a test limit"))
    capsys.readouterr()
    with colibri.load(tiny.path, threads=1, mem_budget="auto") as m:
        assert m.paging is None
        assert m.logits([1, 2, 3]).shape == (3, m.config.vocab_size)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "(a test limit)" in err[0] and "cannot be paged" in err[0], err


# ---- the eviction rule ----------------------------------------------------------------------------
class CacheSimulation:
    """The documented policy, written independently of the C code: a step counts its tokens,
    halves every use count once per aging period crossed; each MoE layer adds its experts' token
    counts, then gives the needed experts without a slot one, in expert order: a free slot, else
    evicts the cached expert with the fewest uses, then the oldest last use, then the lowest
    (layer, expert), never a pinned one or one this layer still needs; experts left without a
    slot run in a later wave, once the earlier wave's are done."""

    def __init__(self, n_layers: int, E: int, moe_layers, n_slots: int, aging: int, pinned=()):
        self.E, self.moe_layers, self.aging = E, list(moe_layers), aging
        self.uses = np.zeros(n_layers * E, dtype=np.int64)   # [L * E]
        self.last = np.zeros(n_layers * E, dtype=np.int64)   # [L * E]
        self.pinned = set(pinned)
        self.cached = set(pinned)
        self.free = n_slots - len(self.pinned)
        self.tick = self.hits = self.misses = self.waves = 0

    def _take(self, wanted: set) -> bool:
        if self.free:
            self.free -= 1
            return True
        candidates = [o for o in self.cached if o not in wanted and o not in self.pinned]
        if not candidates:
            return False
        self.cached.remove(min(candidates, key=lambda o: (self.uses[o], self.last[o], o)))
        return True

    def step(self, selected: dict[int, np.ndarray]) -> None:
        """selected: MoE layer -> [T, k] experts of this step's tokens."""
        T = len(next(iter(selected.values())))
        before, self.tick = self.tick, self.tick + T
        self.uses >>= min(self.tick // self.aging - before // self.aging, 63)
        for layer in self.moe_layers:
            counts = np.bincount(selected[layer].reshape(-1), minlength=self.E)
            need = [layer * self.E + e for e in range(self.E) if counts[e]]
            for o in need:
                self.uses[o] = min(self.uses[o] + counts[o % self.E], 2 ** 32 - 1)
                self.last[o] = self.tick
            pending = [o for o in need if o not in self.cached]
            self.hits += len(need) - len(pending)
            self.misses += len(pending)
            wanted = set(need)
            while True:
                while pending and self._take(wanted):
                    self.cached.add(pending.pop(0))
                wanted -= self.cached
                if not pending:
                    break
                self.waves += 1

    def residency(self, n_layers: int) -> np.ndarray:
        state = np.zeros(n_layers * self.E, dtype=np.uint8)   # [L * E]
        state[list(self.cached)] = 1
        state[list(self.pinned)] = 2
        return state.reshape(n_layers, self.E)


@pytest.mark.parametrize("name,n_batch,slots_per_layer,aging", [
    ("olmoe-c", 1, 3, 4), ("olmoe-c", 3, 5, 256), ("qwen2_moe-a", 2, 2, 3), ("mixtral-a", 1, 3, 2)])
def test_eviction_follows_the_documented_rule(tiny_model_factory, monkeypatch, tmp_path, name, n_batch,
                                              slots_per_layer, aging):
    tiny = tiny_model_factory(name)
    monkeypatch.setattr(paging, "enable", functools.partial(paging.enable, aging_tokens=aging))
    with colibri.load(tiny.path, threads=2, mem_budget="off") as m:
        c = m.config
        ids = token_ids(c.vocab_size, 40, seed=11)
        profile = expert_profile.counts_from_routes(c, m.route(ids[:12]))
    expert_profile.write(tmp_path / "p.json", c, profile, 12)
    n_slots = slots_per_layer * len(c.moe_layers)
    with colibri.load(tiny.path, threads=2, n_batch=n_batch, expert_slots=n_slots, prefetch=False,
                      expert_profile=tmp_path / "p.json") as m:
        layers, experts = expert_profile.hottest(profile, n_slots)
        pins = [l * c.num_experts + e for l, e in zip(layers, experts)]
        assert 0 < len(pins) <= n_slots // 2
        start = m.expert_residency()
        assert sorted(np.flatnonzero(start.reshape(-1) == 2)) == sorted(pins)
        routes = m.route(ids)
        st = m.paging_stats()
        got = m.expert_residency()
    sim = CacheSimulation(c.num_layers, c.num_experts, c.moe_layers, n_slots, aging, pins)
    for first in range(0, len(ids), n_batch):
        sim.step({r.layer: r.experts[first:first + n_batch] for r in routes})
    assert np.array_equal(got, sim.residency(c.num_layers))
    assert (st.hits, st.misses, st.waves) == (sim.hits, sim.misses, sim.waves)
    assert st.pinned == len(pins) and (got == 2).sum() == len(pins)


def test_pinning_limits_and_profile_errors(tiny_model_factory, tmp_path):
    tiny = tiny_model_factory("olmoe-c")
    with colibri.load(tiny.path, threads=1, expert_slots=4, prefetch=False) as m:
        c = m.config
        with pytest.raises(ModelError, match="would leave no free slot"):
            paging.pin(m._context(), [0, 0, 0, 0], [0, 1, 2, 3])
        paging.pin(m._context(), [0, 1, 1], [5, 0, 7])
        state = m.expert_residency()
        assert state[0, 5] == state[1, 0] == state[1, 7] == 2 and (state == 2).sum() == 3
        m.logits(token_ids(c.vocab_size, 20, seed=1))     # one free slot serves every other expert
        assert (m.expert_residency() == 2).sum() == 3
        with pytest.raises(ModelError, match="not a routed expert"):
            paging.pin(m._context(), [0], [c.num_experts])
    bad = tmp_path / "bad.json"
    for text, message in (("{", "not JSON"), ('{"format": "x"}', "expected format"),
                          (json.dumps({"format": expert_profile.FORMAT, "version": 1, "num_layers": 2,
                                       "num_experts": 3, "counts": []}), "this model has 2 x 8"),
                          (json.dumps({"format": expert_profile.FORMAT, "version": 1, "num_layers": 2,
                                       "num_experts": 8, "counts": [[1] * 8, [-1] * 8]}), "non-negative")):
        bad.write_text(text)
        with pytest.raises(ModelError, match=message):
            colibri.load(tiny.path, expert_slots=4, expert_profile=bad)


# ---- budgets -------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["six", "", "-1", "0", "1.5XB", "12 parsecs", "GiB", True, 0, -5, 1.5, [1]])
def test_malformed_budgets_are_refused(tiny_model_factory, value):
    with pytest.raises(ValueError) as err:
        colibri.load(tiny_model_factory("olmoe-c").path, mem_budget=value)
    assert "mem_budget" in str(err.value) and "\n" not in str(err.value)


def test_budget_units():
    assert paging.parse_budget("6GiB") == paging.parse_budget("6g") == 6 << 30
    assert paging.parse_budget("1500M") == paging.parse_budget("1500 MiB") == 1500 << 20
    assert paging.parse_budget("2GB") == 2 * 10 ** 9 and paging.parse_budget("1.5k") == 1536
    assert paging.parse_budget(4096) == 4096 and paging.parse_budget("4096") == 4096
    assert paging.parse_budget("auto") == "auto" and paging.parse_budget("off") is None
    assert paging.parse_budget(None) is None


def _minimum(message: str) -> int:
    assert "\n" not in message and "too small" in message
    amount, unit = re.search(r"needs? at least ([0-9.]+) (MiB|GiB)", message).groups()
    return int(float(amount) * (1 << (20 if unit == "MiB" else 30)))


# the process's own memory counts in the budget and grows a little between the refusal and the
# retry (a whole test session in one process: tens of MiB), so the retry gets this much above it
SLACK = 128 << 20


def test_too_small_budget_names_the_minimum_which_then_loads(tiny_model_factory, monkeypatch):
    tiny = tiny_model_factory("olmoe-c")
    # a tiny model: paging costs more than holding it, so the minimum is the whole model's
    with pytest.raises(ValueError) as err:
        colibri.load(tiny.path, mem_budget="1MiB")
    assert "loaded whole" in str(err.value)
    with colibri.load(tiny.path, threads=1, mem_budget=_minimum(str(err.value)) + SLACK) as m:
        assert m.paging is None
    # as if its weights took a terabyte: the minimum is paging's, with top_k slots
    monkeypatch.setattr(paging, "model_bytes", lambda weights: 1 << 40)
    with pytest.raises(ValueError) as err:
        colibri.load(tiny.path, mem_budget="1MiB")
    assert "expert slots" in str(err.value)
    with colibri.load(tiny.path, threads=1, mem_budget=_minimum(str(err.value)) + SLACK) as m:
        assert m.paging is not None and m.paging.n_slots >= m.config.top_k
        assert m.paging.fixed_bytes + m.paging.n_slots * m.paging.slot_bytes <= m.paging.budget


def test_dense_model_over_budget_is_refused(tiny_model_factory):
    with pytest.raises(ValueError, match="no routed experts to page"):
        colibri.load(tiny_model_factory("llama-a").path, mem_budget="1MiB")
    with pytest.raises(ValueError, match="no routed experts"):
        colibri.load(tiny_model_factory("llama-a").path, expert_slots=2)


def test_auto_pages_with_a_notice_when_the_model_does_not_fit(tiny_model_factory, monkeypatch, capsys):
    """With this process's own size and the margins taken out, and the weights counted as a
    terabyte, an `auto` limit that holds the resident part, the arena and half the experts pages
    them, exactly half in memory."""
    tiny = tiny_model_factory("olmoe-c")
    monkeypatch.setattr(paging, "process_rss", lambda: 0)
    monkeypatch.setattr(paging, "model_bytes", lambda weights: 1 << 40)
    monkeypatch.setattr(paging, "margin", lambda *args: 0)
    monkeypatch.setattr(paging, "MARGIN_BYTES", 0)
    with colibri.load(tiny.path, threads=1, expert_slots=1) as m:
        p, n_experts = m.paging, m.paging.n_experts
    limit = p.resident_bytes + p.arena_bytes + p.overhead_bytes + n_experts // 2 * p.slot_bytes
    monkeypatch.setattr(paging, "available_memory", lambda: (limit, "a test limit"))
    capsys.readouterr()
    with colibri.load(tiny.path, threads=1) as m:
        assert m.paging.n_slots == n_experts // 2 and m.paging.budget == limit
        logits = m.logits(token_ids(m.config.vocab_size, 9, seed=2))
    notice = capsys.readouterr().err.strip().splitlines()
    assert len(notice) == 1 and "paging its experts" in notice[0] and "a test limit" in notice[0]
    with colibri.load(tiny.path, threads=1, mem_budget="off") as m:
        assert np.array_equal(m.logits(token_ids(m.config.vocab_size, 9, seed=2)), logits)
    monkeypatch.setattr(paging, "available_memory", lambda: (2 << 40, "plenty"))
    with colibri.load(tiny.path, threads=1) as m:
        assert m.paging is None
    assert capsys.readouterr().err == ""


# ---- failures -------------------------------------------------------------------------------
def test_a_file_that_shrinks_fails_the_step(tiny_model_factory, tmp_path):
    tiny = tiny_model_factory("olmoe-c")
    path = tmp_path / "olmoe.gguf"
    export_gguf(tiny.reference, tiny.path, path, "q8_0")
    from colibri.formats.gguf import GGUFFile

    with GGUFFile(path) as gguf:   # the file's last tensor is an expert stack: cut into it
        last = max(gguf.tensors.values(), key=lambda t: t.offset)
        assert "_exps" in last.name
        cut = last.offset + last.nbytes // 2
    with colibri.load(path, threads=1, expert_slots=1, prefetch=False) as m:
        os.truncate(path, cut)   # the resident weights (mapped) stay whole; some experts are gone
        with pytest.raises(ModelError, match="olmoe.gguf.*(ends|failed)"):
            m.logits(token_ids(m.config.vocab_size, 12, seed=4))


# ---- a real memory cgroup ------------------------------------------------------------------------
def test_paged_run_inside_a_memory_cgroup(tiny_model_factory, tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from cgroup import CgroupUnavailable, MemoryCgroup

    tiny = tiny_model_factory("qwen2_moe-a")
    limit = 600 << 20
    try:
        group = MemoryCgroup.create(f"colibri-test-{os.getpid()}", limit)
    except CgroupUnavailable as reason:
        pytest.skip(str(reason))
    try:
        with colibri.load(tiny.path, threads=2, mem_budget="off") as m:
            prompt = token_ids(m.config.vocab_size, 13, seed=9)
            want = m.logits(prompt)
        script = (
            "import json, sys, numpy as np, colibri\n"
            "from colibri import paging\n"
            "limit = paging.available_memory()\n"
            f"m = colibri.load({str(tiny.path)!r}, threads=2, expert_slots=3)\n"
            f"np.save(sys.argv[1], m.logits({prompt}))\n"
            "print(json.dumps({'limit': limit[0], 'where': limit[1], 'reads': m.paging_stats().reads}))\n")
        out = tmp_path / "logits.npy"
        # outside the source tree: the installed package (with its built library) is what runs
        ran = subprocess.run([sys.executable, "-c", script, str(out)], capture_output=True, text=True, timeout=120,
                             env=dict(os.environ), cwd=tmp_path, preexec_fn=group.join)
        assert ran.returncode == 0, ran.stderr
        info = json.loads(ran.stdout.strip().splitlines()[-1])
        assert info["limit"] == limit and "cgroup" in info["where"] and info["reads"] > 0
        assert np.array_equal(np.load(out), want)
        assert group.failcnt() == 0 and group.oom_kills() == 0 and 0 < group.peak() <= limit
    finally:
        group.remove()
