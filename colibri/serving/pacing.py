"""How far a prompt chunk advances per step while other sequences decode (layer-sliced prefill).

A step that carries a whole prompt chunk costs several decode steps: the chunk's tokens touch
nearly every expert of every layer. So while sequences decode, a chunk runs only some of the
model's layers per step (colibri_forward_span) and carries its hidden states to the next step,
until it has passed the last layer. The chunk's total work is unchanged (each layer still
reads its experts once for all of the chunk's tokens); it is spread so that no step costs much
more than the decode steps around it.

The pacer picks the number of layers from measured step times: a chunk may add at most
`slack` times the decode-only step of as many sequences as hold slots (decoding or
prefilling), at the measured cost of one chunk layer. Counting the prefilling sequences keeps
prompts from starving while few decode (pacing by the decoding count would give the chunk
less, leaving fewer to decode, and so on). Aiming every chunk step at one total instead
(the chunk taking what the decoding tokens leave) replayed worse: p99/p50 ~1 + slack at light
load, where most steps decode only. Scheduling only: every sequence's logits are bitwise the
same whatever the pacing.
"""
from __future__ import annotations

EMA = 0.25          # weight of the newest measurement in the running estimates
PROBE_EVERY = 16    # steps between decode-only steps planned to measure a decoding count


class PrefillPacer:
    def __init__(self, n_layer: int, *, slack: float | None = 0.7, layers: int | None = None):
        """slack: a chunk step's extra cost as a share of the decode-only step (None: whole chunks,
        no slicing); layers: a fixed number of layers per step instead (tests, experiments)."""
        if slack is not None and not slack > 0:
            raise ValueError(f"prefill slack must be > 0, got {slack}")
        if layers is not None and not 1 <= layers:
            raise ValueError(f"prefill layers must be >= 1, got {layers}")
        self.n_layer = n_layer
        self.slack = slack
        self.fixed = layers
        self.decode_s: dict[int, float] = {}    # decoding count -> seconds of a decode-only step
        self.layer_s: dict[int, float] = {}     # chunk size class -> seconds one chunk layer adds to a step
        self.since_probe = PROBE_EVERY          # steps since the last decode-only step planned to measure

    @property
    def slicing(self) -> bool:
        return self.fixed is not None or self.slack is not None

    def layers(self, n_running: int, n_decoding: int, chunk_tokens: int, *, may_pause: bool = False) -> int:
        """Layers a chunk of chunk_tokens runs in the next step, beside n_decoding decoding
        sequences, when n_running sequences hold slots. 0 (only when may_pause): none this step,
        which then measures a decode-only step of this count, one in PROBE_EVERY steps at most,
        while prompts keep every step busy."""
        if self.fixed is not None:
            return min(self.fixed, self.n_layer)
        if self.slack is None:
            return self.n_layer
        if may_pause and n_decoding not in self.decode_s and self.since_probe >= PROBE_EVERY:
            self.since_probe = 0
            return 0
        base = self._decode_estimate(n_running)
        layer = self._layer_estimate(chunk_tokens)
        if base is None or layer is None:
            return 1                            # measure the cheapest slice first
        return max(1, min(self.n_layer, int(self.slack * base / max(layer, 1e-9))))

    def observe(self, n_decode: int, chunk_tokens: int, chunk_layers: int, seconds: float) -> None:
        """A step's forward time: n_decode decoding tokens plus a chunk of chunk_tokens tokens
        through chunk_layers layers (0, 0: a decode-only step)."""
        self.since_probe += 1
        if n_decode == 0:
            return
        if chunk_layers == 0:
            _update(self.decode_s, n_decode, seconds)
            return
        base = self._decode_estimate(n_decode)
        if base is not None:
            _update(self.layer_s, _size_class(chunk_tokens), max(0.0, seconds - base) / chunk_layers)

    def _layer_estimate(self, chunk_tokens: int) -> float | None:
        """One layer's cost for a chunk of this size: its size class's, else the nearest larger
        class's (an overestimate), else the largest measured."""
        if not self.layer_s:
            return None
        c = _size_class(chunk_tokens)
        larger = [k for k in self.layer_s if k >= c]
        return self.layer_s[min(larger)] if larger else self.layer_s[max(self.layer_s)]

    def _decode_estimate(self, n: int) -> float | None:
        """The decode-only step time of n sequences: measured, else a straight line through the
        measured counts (least squares; through the origin with one count), never below a
        smaller count's. Decode steps grow less than linearly with the count, so the line
        overestimates past the measured counts: the chunk gets more layers, not fewer, which
        keeps prompts from starving while few sequences decode."""
        if not self.decode_s:
            return None
        if n in self.decode_s:
            return self.decode_s[n]
        ds = sorted(self.decode_s)
        ts = [self.decode_s[d] for d in ds]
        if len(ds) == 1:
            line = ts[0] * n / ds[0]
        else:
            mean_d, mean_t = sum(ds) / len(ds), sum(ts) / len(ts)
            slope = sum((d - mean_d) * (t - mean_t) for d, t in zip(ds, ts)) / sum((d - mean_d) ** 2 for d in ds)
            line = mean_t + max(slope, 0.0) * (n - mean_d)
        below = [self.decode_s[d] for d in ds if d < n]
        return max([line, *below])


def _size_class(tokens: int) -> int:
    """Chunks are timed by size class: the power of two at or above their token count."""
    return 1 << max(0, tokens - 1).bit_length()


def _update(estimates: dict[int, float], key: int, value: float) -> None:
    """A running average of the measurements under key."""
    old = estimates.get(key)
    estimates[key] = value if old is None else old + EMA * (value - old)
