"""The serving engine: continuous batching over one model context, with no HTTP in sight.

    engine = Engine(colibri.load(path, n_seq=4, n_batch=256))
    engine.start()                                    # or drive it yourself with engine.step()
    stream = engine.submit(ids, GenerationParams(max_tokens=32, seed=1))
    for out in stream:                                # Outputs; the last has finish_reason
        print(out.text, end="")
    stream.cancel()                                   # any thread; the slot is free after one step
    engine.close()

The engine owns the context. Each step is ONE forward batch (colibri_forward over every
running sequence: the next token of each decoding one and chunks of prompts, see
scheduler.py), then one sampling per sequence whose logits came back, each with its own
seeded sampler. The C core computes a sequence's logits bitwise the same whatever else is
in the batch and however its prompt is chunked, so with a fixed seed a request's tokens do
not depend on what runs beside it, when it arrived, or whether its prefix was cached.

submit() and cancel() may be called from any thread; everything else happens on the thread
that steps (the engine's own after start()). Outputs go to the stream's sink, called on the
stepping thread: a plain stream queues them for iteration, the HTTP layer passes a sink that
hands them to its event loop.
"""
from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from typing import Callable, Sequence as Seq

import numpy as np

from ..generation import eos_ids, sampling_params
from .request import GenerationParams, Output, Sequence, State
from .pacing import PrefillPacer
from .runner import Runner, StepResult
from .scheduler import Scheduler, Work
from .slots import SlotTable
from .stats import EngineStats, Observer

log = logging.getLogger("colibri.serving")

_ids = itertools.count()


ENGINE_STACK = 8 << 20   # the engine thread's stack, bytes (glibc's usual default)


class QueueFull(Exception):
    """The waiting queue cannot take the request; try again later."""


class Stream:
    """A submitted request: iterate its Outputs (when no sink was given), or cancel it."""

    def __init__(self, engine: "Engine", request_id: str, n: int):
        self.id = request_id
        self.n = n
        self.sequences: list[Sequence] = []
        self._engine = engine
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._open = n                                        # sequences not yet finished

    def cancel(self) -> None:
        self._engine.cancel(self)

    def __iter__(self):
        """Outputs of all n sequences in the order they are produced, until every one ended.
        Steps the engine itself when no engine thread runs."""
        while self._open:
            try:
                out = self._queue.get(timeout=0.05) if self._engine.running else self._queue.get_nowait()
            except queue.Empty:
                if not self._engine.running and not self._engine.step() and self._queue.empty():
                    raise RuntimeError(f"{self.id}: the engine has nothing left to run for this stream")
                continue
            if out.finish_reason is not None:
                self._open -= 1
            yield out


class Engine:
    def __init__(self, model, *, max_queue: int = 256, prefill_chunk: int = 64, prefill_slack: float | None = 0.7,
                 prefill_layers: int | None = None, observer: Observer | None = None,
                 after_outputs: Callable[[], None] | None = None):
        """model: a colibri Model whose context has one slot per concurrent sequence
        (colibri.load(..., n_seq=N, n_batch=B), B > N); the engine then owns its context.
        max_queue: most sequences waiting for a slot (QueueFull beyond).
        prefill_chunk: most prompt tokens a step takes while any sequence decodes.
        prefill_slack: while sequences decode, a prompt chunk runs as many of its layers a step as add
        at most slack times a decode step of all the slots' sequences (pacing.py; None: the whole
        chunk in one step); prefill_layers: a fixed number of layers a step instead.
        after_outputs: called on the stepping thread once after each step (and close()) that handed
        out outputs, after the last of them, before the next step (the HTTP layer passes that
        step's outputs to its event loop there and lets it send them, see server/app.py)."""
        if model.tokenizer is None:
            raise ValueError(f"{model.path}: the model has no tokenizer; the engine needs one for text")
        ctx = model._context()
        self.model = model
        self.n_ctx = ctx.n_ctx
        self.max_queue = max_queue
        self.slots = SlotTable(ctx.n_seq)
        self.runner = Runner(model)
        self.pacer = PrefillPacer(self.runner.n_layer, slack=prefill_slack, layers=prefill_layers)
        self.scheduler = Scheduler(self.slots, n_batch=ctx.n_batch, prefill_chunk=prefill_chunk, pacer=self.pacer)
        self.stats = EngineStats(len(self.runner.moe_layers), self.runner.n_expert)
        self.observer = observer or Observer()
        self.after_outputs = after_outputs
        self._eos = eos_ids(model)
        self._cond = threading.Condition()
        self._inbox: list[Sequence] = []        # submitted, not yet queued by the stepping thread
        self._pending = 0                       # sequences in the inbox or the waiting queue
        self._thread: threading.Thread | None = None
        self._closing = False
        self._handed_out = False                # a sink was called since the last after_outputs

    # ---- any thread --------------------------------------------------------------------------
    def submit(self, prompt: Seq[int], params: GenerationParams | None = None, *, n: int = 1,
               sink: Callable[[Output], None] | None = None, request_id: str | None = None) -> Stream:
        """Queue `n` sequences of `prompt` (token ids); sequence i samples with seed + i.
        ValueError for a bad request (one line), QueueFull when the queue is full."""
        params = params or GenerationParams()
        params.validate()
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be an integer >= 1, got {n!r}")
        ids = self.check_prompt(prompt)
        sampling = [sampling_params(self.model, seed=None if params.seed is None else params.seed + i,
                                    temperature=params.temperature, top_k=params.top_k, top_p=params.top_p,
                                    min_p=params.min_p, repetition_penalty=params.repetition_penalty)
                    for i in range(n)]
        stream = Stream(self, request_id or f"req-{next(_ids)}", n)
        deliver = sink or stream._queue.put
        tok = self.model.tokenizer
        stream.sequences = [Sequence(stream.id, i, ids, params, sampling[i], tok, self._eos, deliver)
                            for i in range(n)]
        with self._cond:
            if self._closing:
                raise QueueFull("the engine is shutting down")
            if self._pending + n > self.max_queue:
                raise QueueFull(f"the queue is full ({self._pending} waiting, at most {self.max_queue})")
            self._pending += n
            self._inbox.extend(stream.sequences)
            self._cond.notify()
        return stream

    def cancel(self, stream: Stream) -> None:
        """Cancel every sequence of `stream`; each ends with finish_reason "cancelled"."""
        with self._cond:
            for seq in stream.sequences:
                seq.cancelled = True      # the stepping thread ends it at its next step
            self._cond.notify()

    def check_prompt(self, prompt: Seq[int]) -> list[int]:
        """The prompt as a list of ids; ValueError if empty, out of the vocabulary or too long."""
        vocab = self.model.config.vocab_size
        ids = [int(t) for t in prompt]
        if not ids:
            raise ValueError("the prompt is empty")
        bad = next((t for t in ids if not 0 <= t < vocab), None)
        if bad is not None:
            raise ValueError(f"token id {bad} is out of range [0, {vocab})")
        if len(ids) >= self.n_ctx:
            raise ValueError(f"the prompt has {len(ids)} tokens; the context holds {self.n_ctx} "
                             "(including at least one generated token)")
        return ids

    @property
    def running(self) -> bool:
        """Whether the engine's own thread is stepping."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def num_waiting(self) -> int:
        return self._pending

    @property
    def num_running(self) -> int:
        return len(self.scheduler.running)

    def kv_usage(self) -> float:
        """Share of the KV cache's positions held by running sequences, in [0, 1]."""
        held = sum(s.computed for s in list(self.scheduler.running))
        return held / (self.slots.n_slots * self.n_ctx)

    def start(self) -> None:
        """Step on a thread of the engine's own until close(). The forward steps run on it, and
        the kernels want 512 KiB of its stack (colibri.h, colibri_forward): it gets ENGINE_STACK,
        not the system's default for new threads (musl's is 128 KiB, glibc's `ulimit -s`)."""
        if self._thread is None:
            previous = threading.stack_size(ENGINE_STACK)
            try:
                self._thread = threading.Thread(target=self._loop, name="colibri-engine", daemon=True)
                self._thread.start()
            finally:
                threading.stack_size(previous)

    def close(self) -> None:
        """Stop stepping; every unfinished sequence ends "cancelled". The model stays open."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._take_inbox()
        for seq in list(self.scheduler.waiting) + list(self.scheduler.running):
            self._finish(seq, "cancelled", time.monotonic())
        self._after_outputs()

    # ---- the stepping thread -------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cond:
                while not (self._closing or self._inbox or self.scheduler.running or self.scheduler.waiting):
                    self._cond.wait()
                if self._closing:
                    return
            try:
                self.step()
            except Exception:   # a bug, not a request's fault: keep serving the others
                log.exception("engine step failed")

    def step(self) -> bool:
        """One forward step over every running sequence; False when there was nothing to do."""
        try:
            return self._step()
        finally:
            self._after_outputs()

    def _step(self) -> bool:
        self._take_inbox()
        now = time.monotonic()
        for seq in list(self.scheduler.waiting) + list(self.scheduler.running):
            if seq.cancelled:
                self._finish(seq, "cancelled", now)
            elif seq.deadline is not None and now >= seq.deadline:
                self._finish(seq, "timeout", now)
        for seq in self.scheduler.admit():
            seq.scheduled = now
            self.stats.prefix_queries += seq.prompt_len
            self.stats.prefix_hits += seq.cached_tokens
        with self._cond:
            self._pending = len(self._inbox) + len(self.scheduler.waiting)
        plan = self.scheduler.plan()
        if not plan:
            return False
        n_decode = sum(1 for w in plan if w.seq.decoding)
        started = time.perf_counter()
        try:
            result = self.runner.run(plan)
        except Exception as exc:   # the C core refused the batch: fail its sequences, keep the rest
            log.exception("forward step failed")
            self.scheduler.drop_carried()
            for w in plan:
                self._finish(w.seq, "error", time.monotonic(), error=str(exc).splitlines()[0], cache_valid=False)
            return True
        seconds = time.perf_counter() - started
        chunk = plan[n_decode:]
        if not chunk or chunk[0].layers is not None:   # decode-only, or a sliced chunk beside decoding
            layers = chunk[0].layers[1] - chunk[0].layers[0] if chunk else 0
            self.pacer.observe(n_decode, sum(w.end - w.start for w in chunk), layers, seconds)
        self.stats.record_step(result.n_tokens, result.expert_tokens)
        self._advance(plan, result)
        return True

    def _after_outputs(self) -> None:
        if self._handed_out and self.after_outputs is not None:
            self.after_outputs()
        self._handed_out = False

    def _emit(self, seq: Sequence, out: Output) -> None:
        seq.sink(out)
        self._handed_out = True

    def _take_inbox(self) -> None:
        with self._cond:
            inbox, self._inbox = self._inbox, []
        for seq in inbox:
            self.scheduler.add(seq)

    def _advance(self, plan: list[Work], result: StepResult) -> None:
        """After a forward step: sample a token for every sequence whose logits came back."""
        now = time.monotonic()
        row = 0
        for w in plan:
            if w.completes:
                w.seq.computed = w.end
            if not w.wants_logits:
                continue
            experts = gates = None
            if result.experts is not None:
                experts, gates = result.experts[:, row], result.gates[:, row]     # [n_moe, k] each
            self._sample(w.seq, result.logits[row], experts, gates, now)
            row += 1

    def _sample(self, seq: Sequence, logits: np.ndarray, experts, gates, now: float) -> None:
        scores = _penalized(logits, seq)
        token = seq.sampler.sample(scores, seq.tokens)
        seq.sampled += 1
        if seq.first_token is None:
            seq.first_token = now
            self.observer.first_token(now - seq.submitted)
        else:
            self.observer.inter_token(now - seq.last_token)
        seq.last_token = now
        if token in seq.eos_ids:
            self._finish(seq, "stop", now)
            return
        seq.tokens.append(token)
        seq.counts[token] = seq.counts.get(token, 0) + 1
        text, stopped = seq.text.push(token)
        out = Output(seq.index, token, text)
        if seq.params.logprobs is not None:
            out.logprob, out.top_logprobs = _logprobs(logits, token, seq.params.logprobs)
        if seq.params.routes:
            out.experts, out.gates = experts, gates
        self._emit(seq, out)
        if stopped:
            self._finish(seq, "stop", now, flush=False)
        elif seq.sampled >= seq.params.max_tokens or len(seq.tokens) > self.n_ctx:
            self._finish(seq, "length", now)

    def _finish(self, seq: Sequence, reason: str, now: float, *, flush: bool = True, error: str | None = None,
                cache_valid: bool = True) -> None:
        """End a sequence: free its slot (keeping its K/V for the prefix cache), send the end event."""
        if seq.state is State.FINISHED:
            return
        self.scheduler.remove(seq)
        if seq.slot is not None:
            self.slots.release(seq.slot, seq.tokens[:seq.computed] if cache_valid else [])
        seq.state = State.FINISHED
        text = ""
        if flush and reason in ("stop", "length"):
            text, stopped = seq.text.finish()
            reason = "stop" if stopped else reason
        usage = seq.usage(now)
        self.observer.finished(reason, usage)
        self._emit(seq, Output(seq.index, None, text, finish_reason=reason, usage=usage, error=error))


def _penalized(logits: np.ndarray, seq: Sequence) -> np.ndarray:
    """OpenAI's presence and frequency penalties over the generated tokens (a copy when any applies)."""
    p = seq.params
    if not seq.counts or (p.presence_penalty == 0 and p.frequency_penalty == 0):
        return logits
    ids = np.fromiter(seq.counts.keys(), dtype=np.int64, count=len(seq.counts))            # [n_distinct]
    counts = np.fromiter(seq.counts.values(), dtype=np.float32, count=len(seq.counts))     # [n_distinct]
    scores = logits.copy()
    scores[ids] -= np.float32(p.frequency_penalty) * counts + np.float32(p.presence_penalty)
    return scores


def _logprobs(logits: np.ndarray, token: int, k: int) -> tuple[float, list[tuple[int, float]]]:
    """The chosen token's log-probability and the k most likely (id, logprob), from the raw logits."""
    x = logits.astype(np.float64)
    top = x.max()
    logp = x - (top + np.log(np.exp(x - top).sum()))                                        # [V]
    best = np.argpartition(-logp, k)[:k] if 0 < k < len(logp) else np.arange(len(logp))[:k]
    best = best[np.lexsort((best, -logp[best]))]           # most likely first, ties to the lower id
    return float(logp[token]), [(int(i), float(logp[i])) for i in best]
