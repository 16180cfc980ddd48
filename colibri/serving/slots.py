"""The KV cache's sequence slots, and the prefix cache over the idle ones.

The context holds n_seq sequences; a running Sequence owns one slot. A slot that falls
idle keeps its K/V and remembers the tokens behind it, so a new prompt that starts with
those tokens (a system prompt, the previous turns of a chat) continues from them instead
of computing them again: the C core rewinds a sequence to any position below its cached
length, and the K/V of a token depends only on the tokens before it, so a reused prefix is
bitwise what a fresh prefill would compute.
"""
from __future__ import annotations

import numpy as np


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    differ = np.flatnonzero(np.asarray(a[:n], dtype=np.int64) != np.asarray(b[:n], dtype=np.int64))
    return int(differ[0]) if differ.size else n


class SlotTable:
    """Which slots are busy, and the cached tokens of each idle one."""

    def __init__(self, n_slots: int):
        self.n_slots = n_slots
        self._cached: list[list[int]] = [[] for _ in range(n_slots)]   # tokens whose K/V the slot holds
        self._busy = [False] * n_slots
        self._released = [0] * n_slots      # release order: the least recently used idle slot is reused first
        self._clock = 0

    @property
    def free(self) -> int:
        return self._busy.count(False)

    def acquire(self, prompt: list[int]) -> tuple[int, int]:
        """(slot, reusable): the idle slot sharing the longest prefix with `prompt` (ties and
        no match: the least recently used), and how many leading prompt tokens it holds. At
        least the last prompt token is always left to compute (its logits are needed)."""
        best, best_key = -1, None
        for slot in range(self.n_slots):
            if self._busy[slot]:
                continue
            shared = min(common_prefix(self._cached[slot], prompt), len(prompt) - 1)
            key = (shared, -self._released[slot])
            if best_key is None or key > best_key:
                best, best_key = slot, key
        if best < 0:
            raise RuntimeError("no idle slot")   # the scheduler admits only while `free` > 0
        self._busy[best] = True
        self._cached[best] = []
        return best, best_key[0]

    def release(self, slot: int, cached: list[int]) -> None:
        """The slot falls idle holding the K/V of `cached` (pass [] when its cache is unknown)."""
        self._clock += 1
        self._busy[slot] = False
        self._cached[slot] = cached
        self._released[slot] = self._clock
