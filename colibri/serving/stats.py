"""What the engine counts as it runs, for metrics: plain numbers, no exporter in sight.

EngineStats holds totals the stepping thread updates (readers on other threads see a
consistent enough snapshot for monitoring); an Observer receives per-request timings as they
happen (the HTTP layer's Prometheus histograms subclass it).
"""
from __future__ import annotations

from collections import deque

import numpy as np

from .request import Usage

LOAD_WINDOW_TOKENS = 1024   # the load-balance figure looks at the last this-many routed tokens


class Observer:
    """Per-request events, called on the stepping thread; the base class ignores them."""

    def first_token(self, seconds: float) -> None:
        """Time to first token of one sequence."""

    def inter_token(self, seconds: float) -> None:
        """Time between two consecutive tokens of one sequence."""

    def finished(self, reason: str, usage: Usage) -> None:
        """A sequence ended (reason: one of request.FINISH_REASONS)."""


class EngineStats:
    """Totals since the engine started."""

    def __init__(self, n_moe_layers: int, n_expert: int):
        self.steps = 0
        self.batch_tokens = 0                 # tokens fed over all steps
        self.prefix_queries = 0               # prompt tokens of admitted sequences
        self.prefix_hits = 0                  # of those, tokens whose K/V the prefix cache supplied
        self.expert_tokens = np.zeros((n_moe_layers, n_expert), dtype=np.int64)   # [n_moe, E] cumulative
        self._window: deque[tuple[int, np.ndarray]] = deque()                      # (tokens, [n_moe, E]) per step
        self._window_counts = np.zeros((n_moe_layers, n_expert), dtype=np.int64)  # [n_moe, E]
        self._window_tokens = 0

    def record_step(self, n_tokens: int, expert_tokens: np.ndarray | None) -> None:
        self.steps += 1
        self.batch_tokens += n_tokens
        if expert_tokens is None:
            return
        self.expert_tokens += expert_tokens
        self._window.append((n_tokens, expert_tokens))
        self._window_counts += expert_tokens
        self._window_tokens += n_tokens
        while self._window_tokens - self._window[0][0] >= LOAD_WINDOW_TOKENS:
            n, counts = self._window.popleft()
            self._window_tokens -= n
            self._window_counts -= counts

    def load_balance(self) -> np.ndarray:
        """Per MoE layer, the entropy of the experts' shares of the recently routed tokens over
        log(E): 1 when every expert took as many tokens, toward 0 as a few take all ([n_moe])."""
        counts = self._window_counts.astype(np.float64)                            # [n_moe, E]
        n_layers, n_expert = counts.shape
        if n_expert < 2:
            return np.ones(n_layers)
        totals = counts.sum(axis=1, keepdims=True)                                 # [n_moe, 1]
        share = np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(share > 0, share * np.log(share), 0.0)
        entropy = -terms.sum(axis=1) / np.log(n_expert)
        return np.where(totals[:, 0] > 0, entropy, 1.0)
