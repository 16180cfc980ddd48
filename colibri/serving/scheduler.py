"""Which tokens go into the next forward step.

Every step is one batch: the next token of every decoding sequence, then chunks of the
prompts still being prefilled, oldest first, within a token budget. While any sequence
decodes the prompts get at most `prefill_chunk` tokens a step, so a long prompt never
stalls the streams for longer than one such chunk; with nothing decoding they get the
whole batch (n_batch). Waiting sequences are admitted first-come first-served as slots
free up.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .request import Sequence, State
from .slots import SlotTable


@dataclass
class Work:
    """Tokens seq.tokens[start:end] of one sequence, fed at positions start..end-1."""

    seq: Sequence
    start: int
    end: int

    @property
    def wants_logits(self) -> bool:
        return self.end == len(self.seq.tokens)   # the last token fed: its logits give the next


class Scheduler:
    def __init__(self, slots: SlotTable, *, n_batch: int, prefill_chunk: int):
        if n_batch < slots.n_slots + 1:
            raise ValueError(f"n_batch ({n_batch}) must exceed the slot count ({slots.n_slots})")
        if prefill_chunk < 1:
            raise ValueError(f"prefill_chunk must be >= 1, got {prefill_chunk}")
        self.slots = slots
        self.n_batch = n_batch
        self.prefill_chunk = prefill_chunk
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []     # in admission order

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
        budget = self.n_batch - len(work)
        if decoding:
            budget = min(budget, self.prefill_chunk)
        for seq in self.running:
            if budget <= 0:
                break
            if seq.decoding:
                continue
            end = min(len(seq.tokens), seq.computed + budget)
            work.append(Work(seq, seq.computed, end))
            budget -= end - seq.computed
        return work
