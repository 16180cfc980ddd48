"""Next-token selection from logits, in the order and with the semantics of HF ``generate``.

    sampler = Sampler(SamplingParams(temperature=0.7, top_p=0.9, seed=1))
    token = sampler.sample(logits, previous_tokens)     # logits: [vocab] float32

Order, as transformers builds its processor list: repetition penalty → temperature →
top-k → top-p → min-p → softmax (float64) → one draw from the sampler's own seeded numpy
Generator. Temperature 0 is greedy: repetition penalty, then argmax (ties → lowest id).
The penalty and temperature are computed in float32 like transformers' float32 scores;
filtering and the softmax run in float64.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

__all__ = ["SamplingParams", "Sampler", "load_generation_defaults"]


@dataclass
class SamplingParams:
    temperature: float = 1.0          # 0 → greedy
    top_k: int = 0                    # 0 → off
    top_p: float = 1.0                # 1 → off
    min_p: float = 0.0                # 0 → off
    repetition_penalty: float = 1.0   # 1 → off; HF semantics over the set of previous tokens
    seed: int | None = None           # None → fresh entropy

    def validate(self) -> None:
        """ValueError naming the first field out of range (NaN and infinities included)."""
        checks = [
            ("temperature", self.temperature, float, lambda v: v >= 0, "a number >= 0"),
            ("top_k", self.top_k, int, lambda v: v >= 0, "an int >= 0"),
            ("top_p", self.top_p, float, lambda v: 0 < v <= 1, "a number in (0, 1]"),
            ("min_p", self.min_p, float, lambda v: 0 <= v <= 1, "a number in [0, 1]"),
            ("repetition_penalty", self.repetition_penalty, float, lambda v: v > 0, "a number > 0"),
        ]
        for name, value, kind, in_range, expected in checks:
            if not _is_finite(value, kind) or not in_range(value):
                raise ValueError(f"sampling: {name} must be {expected}, got {value!r}")
        if self.seed is not None and not (_is_finite(self.seed, int) and self.seed >= 0):
            raise ValueError(f"sampling: seed must be None or an int >= 0, got {self.seed!r}")


def _is_finite(value, kind) -> bool:
    """``value`` is a finite int (kind int) or a finite int/float (kind float); bools are neither."""
    allowed = (int, np.integer) if kind is int else (int, float, np.integer, np.floating)
    return isinstance(value, allowed) and not isinstance(value, bool) and math.isfinite(value)


class Sampler:
    """Draws token ids for one sequence; owns its random stream (same seed + same logits → same ids)."""

    def __init__(self, params: SamplingParams):
        params.validate()
        self.params = params
        self._rng = np.random.default_rng(params.seed)

    def sample(self, logits: np.ndarray, previous_tokens: Sequence[int]) -> int:
        """The next token id given ``logits`` (``[vocab]``) and the ids seen so far (prompt included)."""
        if (self.params.temperature == 0 and self.params.repetition_penalty == 1.0
                and getattr(logits, "dtype", None) == np.float32):
            return _argmax(logits)                                 # what the float32 copy below would give
        scores = self._penalized(logits, previous_tokens)
        if self.params.temperature == 0:
            return int(np.argmax(scores))
        probs = self._filtered_softmax(scores)                     # probs: [vocab] float64
        cumulative = np.cumsum(probs)                              # cumulative: [vocab]
        target = self._rng.random() * cumulative[-1]
        index = int(np.searchsorted(cumulative, target, side="right"))
        # side="right" lands on a token with probability > 0; the clamp guards the float edge at the top.
        return min(index, int(np.flatnonzero(probs)[-1]))

    def distribution(self, logits: np.ndarray, previous_tokens: Sequence[int]) -> np.ndarray:
        """The probabilities ``sample`` draws from, ``[vocab]`` float64 (one-hot when greedy)."""
        scores = self._penalized(logits, previous_tokens)
        if self.params.temperature == 0:
            probs = np.zeros(scores.shape[0])
            probs[np.argmax(scores)] = 1.0
            return probs
        return self._filtered_softmax(scores)

    def _penalized(self, logits, previous_tokens) -> np.ndarray:
        """float32 copy of ``logits`` with the repetition penalty applied; validates the input."""
        logits = _vector(logits)
        if np.isnan(logits).any():
            raise ValueError("sampling: logits contain NaN")
        scores = logits.astype(np.float32, copy=True)              # scores: [vocab]
        if self.params.repetition_penalty != 1.0:
            _apply_repetition_penalty(scores, previous_tokens, self.params.repetition_penalty)
        return scores

    def _filtered_softmax(self, scores: np.ndarray) -> np.ndarray:
        """Temperature, top-k, top-p, min-p, then softmax in float64."""
        p = self.params
        if p.temperature != 1.0:
            scores = scores / np.float32(p.temperature)
        scores = scores.astype(np.float64)
        if p.top_k > 0:
            _keep_top_k(scores, p.top_k)
        if p.top_p < 1.0:
            _keep_top_p(scores, p.top_p)
        if p.min_p > 0.0:
            _keep_min_p(scores, p.min_p)
        return _softmax(scores)


def _vector(logits) -> np.ndarray:
    """``logits`` as an array; ValueError unless it is a non-empty [vocab] vector."""
    logits = np.asarray(logits)
    if logits.ndim != 1 or logits.size == 0:
        raise ValueError(f"sampling: logits must be a non-empty [vocab] vector, got shape {logits.shape}")
    return logits


def _argmax(logits) -> int:
    """Greedy choice straight from float32 logits: one pass, no copy. np.argmax stops at the
    first NaN, so a NaN anywhere is caught by checking the element it returns."""
    logits = _vector(logits)
    index = int(np.argmax(logits))
    if np.isnan(logits[index]):
        raise ValueError("sampling: logits contain NaN")
    return index


def _apply_repetition_penalty(scores: np.ndarray, previous_tokens: Sequence[int], penalty: float) -> None:
    """In place, as RepetitionPenaltyLogitsProcessor: each distinct previous id's score is divided
    by ``penalty`` if positive, multiplied if negative. Ids beyond the vocabulary are ignored."""
    ids = np.unique(np.asarray(previous_tokens, dtype=np.int64))  # ids: [n_distinct]
    if ids.size and ids[0] < 0:
        raise ValueError(f"sampling: previous token id {int(ids[0])} is negative")
    ids = ids[ids < scores.shape[0]]
    seen = scores[ids]
    scores[ids] = np.where(seen < 0, seen * np.float32(penalty), seen / np.float32(penalty))


def _keep_top_k(scores: np.ndarray, k: int) -> None:
    """In place: -inf below the k-th largest score (ties with it are kept, as in TopKLogitsWarper)."""
    if k >= scores.shape[0]:
        return
    kth = np.partition(scores, -k)[-k]
    scores[scores < kth] = -np.inf


def _keep_top_p(scores: np.ndarray, top_p: float) -> None:
    """In place, as TopPLogitsWarper: drop the least likely tokens whose cumulative probability
    (ascending order) is <= 1 - top_p; the most likely token always stays."""
    order = np.argsort(scores, kind="stable")                 # order: [vocab], ascending
    probs = _softmax(scores[order])
    remove = np.cumsum(probs) <= 1.0 - top_p
    remove[-1] = False
    scores[order[remove]] = -np.inf


def _keep_min_p(scores: np.ndarray, min_p: float) -> None:
    """In place, as MinPLogitsWarper: drop tokens whose probability is below min_p × the top probability."""
    probs = _softmax(scores)
    remove = probs < min_p * probs.max()
    remove[np.argmax(probs)] = False
    scores[remove] = -np.inf


def _softmax(scores: np.ndarray) -> np.ndarray:
    """Probabilities of float64 ``scores``; all -inf (or any +inf) puts all the mass on the argmax."""
    top = scores.max()
    if not np.isfinite(top):
        probs = np.zeros(scores.shape[0])
        probs[np.argmax(scores)] = 1.0
        return probs
    weights = np.exp(scores - top)
    return weights / weights.sum()


def load_generation_defaults(gen_cfg: dict | None) -> dict:
    """SamplingParams overrides from a generation_config.json dict.

    Copies temperature, top_k, top_p, min_p and repetition_penalty when present (null means
    absent); ``do_sample: false`` makes the default greedy (temperature 0), as generate does.
    Fields transformers would default (e.g. top_k=50 under do_sample) are not invented here.
    Out-of-range values raise ValueError naming the field.
    """
    if not gen_cfg:
        return {}
    names = {f.name for f in fields(SamplingParams)} - {"seed"}
    overrides = {name: gen_cfg[name] for name in sorted(names) if gen_cfg.get(name) is not None}
    if gen_cfg.get("do_sample") is False:
        overrides["temperature"] = 0.0
    try:
        SamplingParams(**overrides).validate()
    except ValueError as exc:
        raise ValueError(f"generation_config.json: {exc}") from None
    return overrides
