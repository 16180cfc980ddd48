"""Which tokens go into the next forward step.

Every step is one batch: the next token of every decoding sequence, then chunks of the
prompts still being prefilled, oldest first, within a token budget. While any sequence
decodes the prompts get at most `prefill_chunk` tokens a step, and that chunk runs only the
layers the pacer gives it (pacing.py), carrying its hidden states from step to step until it
has passed the last layer: a long prompt never stalls the streams for longer than a slice of
one chunk. With nothing decoding the prompts get the whole batch (n_batch), every layer.
Waiting sequences are admitted first-come first-served as slots free up.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .pacing import PrefillPacer
from .request import Sequence, State
from .slots import SlotTable


@dataclass
class Work:
    """Tokens seq.tokens[start:end] of one sequence, fed at positions start..end-1, through
    layers [layers[0], layers[1]) (None: every layer)."""

    seq: Sequence
    start: int
    end: int
    layers: tuple[int, int] | None = None
    n_layer: int = 0                          # the model's, when layers is set

    @property
    def completes(self) -> bool:
        """Whether the tokens pass the last layer in this step (their K/V are then all cached)."""
        return self.layers is None or self.layers[1] == self.n_layer

    @property
    def wants_logits(self) -> bool:
        # the last token fed, through the last layer: its logits give the next
        return self.completes and self.end == len(self.seq.tokens)


class Scheduler:
    def __init__(self, slots: SlotTable, *, n_batch: int, prefill_chunk: int, pacer: PrefillPacer | None = None):
        if n_batch < slots.n_slots + 1:
            raise ValueError(f"n_batch ({n_batch}) must exceed the slot count ({slots.n_slots})")
        if prefill_chunk < 1:
            raise ValueError(f"prefill_chunk must be >= 1, got {prefill_chunk}")
        self.slots = slots
        self.n_batch = n_batch
        self.prefill_chunk = prefill_chunk
        self.pacer = pacer
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []     # in admission order
        self.carried: list[Work] = []         # the prompt chunk part-way through the layers

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def remove(self, seq: Sequence) -> None:
        """Take a sequence out of the queue or the running set (its slot is the caller's)."""
        if seq.state is State.WAITING:
            self.waiting.remove(seq)
        elif seq.state is State.RUNNING:
            self.running.remove(seq)

    def admit(self) -> list[Sequence]:
        """Give free slots to waiting sequences, in arrival order; the newly running ones."""
        admitted = []
        while self.waiting and self.slots.free:
            seq = self.waiting.popleft()
            seq.slot, seq.computed = self.slots.acquire(seq.tokens)
            seq.cached_tokens = seq.computed
            seq.state = State.RUNNING
            self.running.append(seq)
            admitted.append(seq)
        return admitted

    def plan(self) -> list[Work]:
        """The next step's batch: decode tokens first, then prompt chunks; [] when idle."""
        decoding = [s for s in self.running if s.decoding]
        work = [Work(s, s.computed, s.computed + 1) for s in decoding]
        carried, self.carried = self.carried, []
        if carried and all(w.seq.state is State.RUNNING for w in carried):
            return work + self._slice(carried, carried[0].layers[1], len(decoding))
        # (a chunk whose sequence ended is dropped: the core discards its states at this step)
        budget = self.n_batch - len(work)
        if decoding:
            budget = min(budget, self.prefill_chunk)
        chunk = []
        for seq in self.running:
            if budget <= 0:
                break
            if seq.decoding:
                continue
            end = min(len(seq.tokens), seq.computed + budget)
            chunk.append(Work(seq, seq.computed, end))
            budget -= end - seq.computed
        if decoding and chunk and self.pacer is not None and self.pacer.slicing:
            chunk = self._slice(chunk, 0, len(decoding))
        return work + chunk

    def _slice(self, chunk: list[Work], begin: int, n_decoding: int) -> list[Work]:
        """The chunk's works from layer `begin` for as many layers as the pacer allows beside
        n_decoding decoding sequences (all the rest when none decodes; none, before its first
        layer, when the pacer wants a decode-only step); remembered for the next step unless they
        finish."""
        n_layer = self.pacer.n_layer
        n = self.pacer.layers(len(self.running), n_decoding, sum(w.end - w.start for w in chunk),
                              may_pause=begin == 0)    # (a chunk in flight must go on: no other step keeps it)
        if n_decoding and n == 0:
            return []
        end = min(n_layer, begin + n) if n_decoding else n_layer
        sliced = [Work(w.seq, w.start, w.end, (begin, end), n_layer) for w in chunk]
        if end < n_layer:
            self.carried = sliced
        return sliced

    def drop_carried(self) -> None:
        """Forget the chunk in flight (its step failed)."""
        self.carried = []
