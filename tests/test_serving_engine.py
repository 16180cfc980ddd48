"""The serving engine (colibri.serving) on the bundled demo model: continuous batching must
not change any request's tokens (batch invariance), greedy output equals Model.generate, and
cancellation, timeouts, queue limits, stop strings, penalties, logprobs and routes behave."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import colibri
from colibri.serving import Engine, GenerationParams, QueueFull

DEMO = Path(colibri.__file__).resolve().parent / "demo_model"
TEXTS = ["And it came to pass", "It is a truth universally acknowledged, that a single man",
         "In the beginning God created the heaven and the earth. And the earth was without form, and void; "
         "and darkness was upon the face of the deep.", "Elizabeth", "Mr. Darcy said",
         "And the LORD spake unto Moses, saying, Speak unto the children of Israel, and say unto them,",
         "She was", "Thou shalt not"]


def load(n_seq: int, n_ctx: int | None = None, n_batch: int = 64):
    return colibri.load(DEMO, threads=1, n_seq=n_seq, n_batch=n_batch, n_ctx=n_ctx)


@pytest.fixture(scope="module")
def lone():
    """An engine with one slot: every request runs alone."""
    with load(1) as model:
        yield Engine(model)


def tokens_of(outputs, index: int = 0) -> list[int]:
    return [o.token for o in outputs if o.index == index and o.token is not None]


def end_of(outputs, index: int = 0):
    return next(o for o in outputs if o.index == index and o.finish_reason is not None)


def run(engine: Engine, ids, params: GenerationParams, n: int = 1) -> list:
    return list(engine.submit(ids, params, n=n))


def sampled(seed: int, max_tokens: int = 24) -> GenerationParams:
    return GenerationParams(max_tokens=max_tokens, temperature=0.9, top_p=0.95, top_k=40, seed=seed)


def test_prefill_chunking_and_batch_company_keep_logits_bitwise():
    """The ground the engine stands on: a prompt's last logits are bitwise the same whole, in
    chunks of any size, and beside another sequence's tokens in the same batch."""
    with load(2) as model:
        ids = model.tokenizer.encode(TEXTS[2])
        whole = model.logits(ids)[-1]
        other = model.tokenizer.encode(TEXTS[5])
        for chunk in (1, 3, 7, len(ids) - 1):
            pos = 0
            while pos < len(ids):
                end = min(len(ids), pos + chunk)
                k = min(len(other), end - pos)      # sequence 1 re-fed alongside, from its start
                toks = ids[pos:end] + other[:k]
                poss = list(range(pos, end)) + list(range(k))
                seqs = [0] * (end - pos) + [1] * k
                want = [i == end - pos - 1 for i in range(len(toks))]
                logits = model.forward(toks, poss, seqs, want)
                pos = end
            assert np.array_equal(logits[0], whole), f"chunk {chunk}"


def test_greedy_equals_model_generate():
    with load(4) as model:
        engine = Engine(model, prefill_chunk=5)
        prompts = [model.tokenizer.encode(t) for t in TEXTS[:6]]
        params = GenerationParams(max_tokens=24, temperature=0.0)
        streams = [engine.submit(ids, params) for ids in prompts]
        results = [list(s) for s in streams]
        for ids, outs in zip(prompts, results):
            want = model.generate(ids, max_tokens=24, temperature=0.0)
            assert tokens_of(outs) == want.tokens
            assert "".join(o.text for o in outs) == want.text
            assert end_of(outs).finish_reason == want.finish_reason


def _staggered(engine: Engine, jobs, waves) -> dict[int, list]:
    """Submit jobs (i, ids, params) in waves, stepping `steps` times between waves; all outputs by i."""
    outputs: dict[int, list] = {}
    streams = {}
    for wave, steps in waves:
        for i in wave:
            _, ids, params = jobs[i]
            streams[i] = engine.submit(ids, params)
        for _ in range(steps):
            engine.step()
    for i, s in streams.items():
        outputs[i] = list(s)
    return outputs


def test_batch_invariance_seeded_staggered_any_order(lone):
    """8 seeded requests of mixed lengths, arriving in waves into 4 slots (so some queue),
    in two orders and with small prefill chunks: each one's tokens equal its lone run."""
    tok = lone.model.tokenizer
    jobs = [(i, tok.encode(TEXTS[i]), sampled(seed=100 + i, max_tokens=12 + 3 * i)) for i in range(8)]
    alone = {i: tokens_of(run(lone, ids, params)) for i, ids, params in jobs}
    assert len({tuple(t) for t in alone.values()}) == 8
    with load(4) as model:
        for order, chunk in ((list(range(8)), 4), (list(reversed(range(8))), 64)):
            engine = Engine(model, prefill_chunk=chunk)
            waves = [(order[:3], 2), (order[3:6], 5), (order[6:], 0)]
            together = _staggered(engine, jobs, waves)
            for i in range(8):
                assert tokens_of(together[i]) == alone[i], f"request {i}, order {order[:3]}..."
                assert end_of(together[i]).finish_reason == "length"


def test_prefix_cache_hit_is_bitwise_and_counted(lone):
    tok = lone.model.tokenizer
    system = tok.encode(TEXTS[5])
    follow = system + tok.encode(" and the children of Israel")
    params = sampled(seed=7)
    alone = tokens_of(run(lone, follow, params))
    with load(2) as model:
        engine = Engine(model)
        first = run(engine, system, sampled(seed=1, max_tokens=4))
        assert end_of(first).usage.cached_tokens == 0
        hits = engine.stats.prefix_hits
        again = run(engine, follow, params)
        usage = end_of(again).usage
        assert usage.cached_tokens == len(system)
        assert engine.stats.prefix_hits - hits == len(system)
        assert tokens_of(again) == alone
        # a prompt that diverges inside the cached tokens rewinds the slot and still matches
        diverge = system[:5] + tok.encode(" Aaron went up")
        want = tokens_of(run(lone, diverge, params))
        got = run(engine, diverge, params)
        assert end_of(got).usage.cached_tokens == 5
        assert tokens_of(got) == want


def test_n_sequences_use_seed_plus_index(lone):
    ids = lone.model.tokenizer.encode(TEXTS[0])
    outs = run(lone, ids, sampled(seed=40), n=3)
    for i in range(3):
        assert tokens_of(outs, i) == tokens_of(run(lone, ids, sampled(seed=40 + i)))


def test_cancel_frees_the_slot_within_one_step():
    with load(2) as model:
        engine = Engine(model)
        ids = model.tokenizer.encode(TEXTS[1])
        a = engine.submit(ids, GenerationParams(max_tokens=200, temperature=0.0))
        b = engine.submit(ids, GenerationParams(max_tokens=200, temperature=0.0))
        for _ in range(3):
            engine.step()
        assert engine.num_running == 2 and engine.slots.free == 0
        a.cancel()
        engine.step()
        assert engine.num_running == 1 and engine.slots.free == 1
        assert end_of(list(a)).finish_reason == "cancelled"
        b.cancel()
        assert end_of(list(b)).finish_reason == "cancelled"
        assert engine.num_running == 0 and engine.slots.free == 2 and engine.kv_usage() == 0


def test_cancel_while_waiting_and_queue_limit():
    with load(1) as model:
        engine = Engine(model, max_queue=2)
        ids = model.tokenizer.encode(TEXTS[0])
        params = GenerationParams(max_tokens=50, temperature=0.0)
        engine.submit(ids, params)
        queued = engine.submit(ids, params)
        with pytest.raises(QueueFull, match="queue is full"):
            engine.submit(ids, params)
        engine.step()      # the first runs, the second waits
        assert engine.num_running == 1 and engine.num_waiting == 1
        queued.cancel()
        engine.step()
        assert engine.num_waiting == 0
        assert end_of(list(queued)).finish_reason == "cancelled"
        engine.submit(ids, params)   # room again
        engine.close()


def test_timeout():
    with load(1) as model:
        engine = Engine(model)
        ids = model.tokenizer.encode(TEXTS[0])
        max_tokens = 480   # the demo model's 512 positions, less the prompt
        run(engine, ids, GenerationParams(max_tokens=8, temperature=0.0))   # warm
        whole = end_of(run(engine, ids, GenerationParams(max_tokens=max_tokens, temperature=0.0)))
        assert whole.finish_reason == "length"
        # A third of the time the whole answer took on this machine, now: the deadline falls about a
        # third of the way in, whatever the machine's speed (a fixed 0.3 s was the whole answer here).
        timeout = whole.usage.e2e / 3
        end = end_of(run(engine, ids, GenerationParams(max_tokens=max_tokens, temperature=0.0, timeout=timeout)))
        assert end.finish_reason == "timeout"
        assert 0 < end.usage.completion_tokens < max_tokens and end.usage.e2e >= timeout
        assert engine.slots.free == 1


def test_engine_thread_serves_concurrent_submitters(lone):
    import threading

    tok = lone.model.tokenizer
    jobs = [(tok.encode(TEXTS[i]), sampled(seed=i)) for i in range(6)]
    want = [tokens_of(run(lone, ids, p)) for ids, p in jobs]
    got = [None] * len(jobs)
    with load(3) as model:
        engine = Engine(model)
        engine.start()

        def client(i):
            got[i] = tokens_of(list(engine.submit(*jobs[i])))

        threads = [threading.Thread(target=client, args=(i,)) for i in range(len(jobs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        engine.close()
    assert got == want


def test_after_outputs_runs_once_after_each_step_that_handed_out_outputs():
    calls, steps_with_outputs, delivered = [], [], []
    with load(2) as model:
        engine = Engine(model, after_outputs=lambda: calls.append(len(delivered)))
        for text in TEXTS[:2]:
            engine.submit(model.tokenizer.encode(text), GenerationParams(max_tokens=4, temperature=0.0),
                          sink=delivered.append)
        while True:
            before = len(delivered)
            if not engine.step():
                break
            if len(delivered) > before:
                steps_with_outputs.append(len(delivered))
        assert len(delivered) >= 8
        # a step with nothing to run that only ends a cancelled request hands out its end too
        engine.submit(model.tokenizer.encode(TEXTS[2]), sink=delivered.append).cancel()
        assert not engine.step()
        assert delivered[-1].finish_reason == "cancelled"
        steps_with_outputs.append(len(delivered))
    # called exactly once per step that produced outputs, after all of that step's outputs
    assert calls == steps_with_outputs


def test_the_servers_outbox_hands_a_steps_outputs_to_the_loop_and_never_blocks_long():
    import asyncio
    import threading
    import time

    from colibri.server.app import _Outbox

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    queue, got = asyncio.Queue(), []

    async def stream_task():
        got.append(await queue.get())

    asyncio.run_coroutine_threadsafe(stream_task(), loop)
    outbox = _Outbox(loop, timeout=5.0)
    outbox.sink(queue, 0)("a")
    outbox.sink(queue, 1)("b")
    outbox()
    assert got == [[(0, "a"), (1, "b")]]           # one list per step, taken by the task before it returned
    loop.call_soon_threadsafe(time.sleep, 0.5)    # a loop busy elsewhere: the wait ends at the timeout
    outbox.timeout = 0.05
    start = time.monotonic()
    outbox()
    assert time.monotonic() - start < 0.4
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=5)
    loop.close()
    _Outbox(loop)()                               # a closed loop: returns at once


def test_stop_strings_max_tokens_and_usage(lone):
    ids = lone.model.tokenizer.encode(TEXTS[0])
    free = run(lone, ids, GenerationParams(max_tokens=30, temperature=0.0))
    text = "".join(o.text for o in free)
    stop = text[10:14]
    cut = run(lone, ids, GenerationParams(max_tokens=30, temperature=0.0, stop=[stop, "zzz"]))
    assert "".join(o.text for o in cut) == text[:text.index(stop)]
    assert end_of(cut).finish_reason == "stop"
    end = end_of(free)
    assert end.finish_reason == "length"
    assert end.usage.completion_tokens == 30 == len(tokens_of(free))
    assert end.usage.prompt_tokens == len(ids)


def test_context_end_finishes_with_length():
    with load(1, n_ctx=24) as model:
        engine = Engine(model)
        ids = model.tokenizer.encode(TEXTS[1])
        outs = run(engine, ids, GenerationParams(max_tokens=100, temperature=0.0, ignore_eos=True))
        assert end_of(outs).finish_reason == "length"
        assert len(tokens_of(outs)) == 24 - len(ids) + 1   # every position fed, one more sampled
        with pytest.raises(ValueError, match="the prompt has 24 tokens; the context holds 24"):
            engine.submit(list(range(5, 29)), GenerationParams())


def test_routes_are_those_of_the_step_that_produced_each_token(lone):
    ids = lone.model.tokenizer.encode(TEXTS[4])
    outs = run(lone, ids, GenerationParams(max_tokens=10, temperature=0.0, routes=True))
    gen = tokens_of(outs)
    routes = lone.model.route(ids + gen)
    for i, out in enumerate(o for o in outs if o.token is not None):
        pos = len(ids) - 1 + i
        assert out.experts.shape == (len(routes), lone.model.config.top_k)
        for l, r in enumerate(routes):
            assert np.array_equal(out.experts[l], r.experts[pos])
            assert np.array_equal(out.gates[l], r.gates[pos])


def test_logprobs_are_the_raw_log_softmax(lone):
    ids = lone.model.tokenizer.encode(TEXTS[3])
    outs = run(lone, ids, GenerationParams(max_tokens=6, temperature=0.0, logprobs=3))
    gen = tokens_of(outs)
    logits = lone.model.logits(ids + gen).astype(np.float64)
    for i, out in enumerate(o for o in outs if o.token is not None):
        row = logits[len(ids) - 1 + i]
        logp = row - row.max() - np.log(np.exp(row - row.max()).sum())
        assert out.logprob == pytest.approx(logp[out.token], abs=1e-9)
        assert [t for t, _ in out.top_logprobs] == list(np.argsort(-logp, kind="stable")[:3])
        assert out.top_logprobs[0][0] == out.token      # greedy: the chosen token is the most likely


def test_presence_and_frequency_penalties_follow_openai(lone):
    """Greedy with penalties equals a step-by-step reference over Model.logits:
    logit[t] -= frequency * count(t) + presence * (count(t) > 0), over generated tokens."""
    model = lone.model
    ids = model.tokenizer.encode(TEXTS[0])
    params = GenerationParams(max_tokens=12, temperature=0.0, presence_penalty=0.7, frequency_penalty=1.3)
    got = tokens_of(run(lone, ids, params))
    want: list[int] = []
    for _ in range(12):
        row = model.logits(ids + want)[-1].copy()
        for t in set(want):
            row[t] -= np.float32(1.3) * np.float32(want.count(t)) + np.float32(0.7)
        token = int(np.argmax(row))
        if token in model.tokenizer.eos_ids:
            break
        want.append(token)
    assert got == want
    assert got != tokens_of(run(lone, ids, GenerationParams(max_tokens=12, temperature=0.0)))


def test_stats_count_every_routed_token(lone):
    model = lone.model
    ids = model.tokenizer.encode(TEXTS[2])
    before = lone.stats.expert_tokens.copy()
    fed_before = lone.stats.batch_tokens
    run(lone, ids, GenerationParams(max_tokens=5, temperature=0.0, ignore_eos=True))
    fed = lone.stats.batch_tokens - fed_before
    delta = lone.stats.expert_tokens - before
    assert fed >= 4   # the prompt (less any cached prefix) and 4 decode steps
    assert (delta.sum(axis=1) == fed * model.config.top_k).all()
    balance = lone.stats.load_balance()
    assert balance.shape == (len(model.config.moe_layers),)
    assert ((balance > 0) & (balance <= 1)).all()


def test_a_failed_step_fails_its_sequences_and_the_engine_goes_on(monkeypatch):
    with load(2) as model:
        engine = Engine(model)
        ids = model.tokenizer.encode(TEXTS[0])
        real = engine.runner.run

        def broken(plan):
            monkeypatch.setattr(engine.runner, "run", real)
            raise ValueError("simulated failure")

        monkeypatch.setattr(engine.runner, "run", broken)
        outs = run(engine, ids, GenerationParams(max_tokens=5, temperature=0.0))
        assert end_of(outs).finish_reason == "error" and end_of(outs).error == "simulated failure"
        assert engine.slots.free == 2
        again = run(engine, ids, GenerationParams(max_tokens=5, temperature=0.0))
        assert tokens_of(again) == model.generate(ids, max_tokens=5, temperature=0.0).tokens


@pytest.mark.parametrize("prompt, params, n, message", [
    ([], GenerationParams(), 1, "the prompt is empty"),
    ([1, 99999], GenerationParams(), 1, "token id 99999 is out of range"),
    ([1, -1], GenerationParams(), 1, "token id -1 is out of range"),
    ([1], GenerationParams(max_tokens=0), 1, "max_tokens must be an integer >= 1"),
    ([1], GenerationParams(), 0, "n must be an integer >= 1"),
    ([1], GenerationParams(temperature=-1.0), 1, "temperature must be a number >= 0"),
    ([1], GenerationParams(presence_penalty=3.0), 1, "presence_penalty must be a number in"),
    ([1], GenerationParams(stop=[""]), 1, "stop must be a non-empty string"),
    ([1], GenerationParams(logprobs=21), 1, "logprobs must be None or an integer"),
    ([1], GenerationParams(timeout=0.0), 1, "timeout must be None"),
    ([1], GenerationParams(seed=-3), 1, "seed must be None or an int >= 0"),
])
def test_bad_requests_raise_one_line(lone, prompt, params, n, message):
    with pytest.raises(ValueError, match=message):
        lone.submit(prompt, params, n=n)


def test_engine_thread_has_the_stack_the_kernels_need(tmp_path):
    """The engine's forward steps run on its own thread, and the kernels want 512 KiB of a
    calling thread's stack (colibri_forward refuses less). Under `ulimit -s 256` (glibc then
    gives new threads 256 KiB; musl always gives 128 KiB) the engine still serves: its thread is
    made with a stack of its own size, and the tokens are those of an unlimited process."""
    import resource
    import subprocess
    import sys

    script = ("import json, colibri\n"
              "from colibri.serving import Engine, GenerationParams\n"
              f"with colibri.load({str(DEMO)!r}, threads=2) as model:\n"
              "    engine = Engine(model)\n"
              "    engine.start()\n"
              "    ids = model.tokenizer.encode('And it came to pass')\n"
              "    outs = list(engine.submit(ids, GenerationParams(max_tokens=8, temperature=0)))\n"
              "    print(json.dumps([o.token for o in outs if o.token is not None]))\n"
              "    engine.close()\n")
    with load(1) as model:
        ids = model.tokenizer.encode("And it came to pass")
        want = tokens_of(run(Engine(model), ids, GenerationParams(max_tokens=8, temperature=0)))

    def small_stack():
        resource.setrlimit(resource.RLIMIT_STACK, (256 << 10, resource.getrlimit(resource.RLIMIT_STACK)[1]))

    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         preexec_fn=small_stack, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert __import__("json").loads(ran.stdout.strip().splitlines()[-1]) == want
