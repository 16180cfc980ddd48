"""How far a prompt chunk advances per step while other sequences decode (layer-sliced prefill).

A step that carries a whole prompt chunk costs several decode steps: the chunk's tokens touch
nearly every expert of every layer. So while sequences decode, a chunk runs only some of the
model's layers per step (colibri_forward_span) and carries its hidden states to the next step,
until it has passed the last layer. The chunk's total work is unchanged (each layer still
reads its experts once for all of the chunk's tokens); it is spread so that no step costs much
more than the decode steps around it.

The pacer picks the number of layers from measured step times: a chunk step may cost at most
`slack` times the decode-only step of as many sequences as hold slots (decoding or prefilling:
pacing by the decoding count alone would starve the prompts, leaving fewer to decode), given
the measured cost of one chunk layer. Scheduling only: every sequence's logits are bitwise the
same whatever the pacing.
"""
from __future__ import annotations

EMA = 0.25    # weight of the newest measurement in the running estimates


class PrefillPacer:
    def __init__(self, n_layer: int, *, slack: float | None = 0.6, layers: int | None = None):
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

    @property
    def slicing(self) -> bool:
        return self.fixed is not None or self.slack is not None

    def layers(self, n_running: int, chunk_tokens: int) -> int:
        """Layers a chunk of chunk_tokens runs in the next step, beside decoding sequences, when
        n_running sequences hold slots."""
        if self.fixed is not None:
            return min(self.fixed, self.n_layer)
        if self.slack is None:
            return self.n_layer
        base = self._decode_estimate(n_running)
        layer = self._layer_estimate(chunk_tokens)
        if base is None or layer is None:
            return max(1, self.n_layer // 4)    # measure a quarter of the layers first
        return max(1, min(self.n_layer, int(self.slack * base / max(layer, 1e-9))))

    def observe(self, n_decode: int, chunk_tokens: int, chunk_layers: int, seconds: float) -> None:
        """A step's forward time: n_decode decoding tokens plus a chunk of chunk_tokens tokens
        through chunk_layers layers (0, 0: a decode-only step)."""
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
        """The decode-only step time of n sequences: measured, else that of the nearest measured
        count below n (an underestimate: fewer layers, never a costlier step), else the smallest's."""
        if not self.decode_s:
            return None
        if n in self.decode_s:
            return self.decode_s[n]
        below = [d for d in self.decode_s if d < n]
        if below:
            return self.decode_s[max(below)]
        return self.decode_s[min(self.decode_s)]


def _size_class(tokens: int) -> int:
    """Chunks are timed by size class: the power of two at or above their token count."""
    return 1 << max(0, tokens - 1).bit_length()


def _update(estimates: dict[int, float], key: int, value: float) -> None:
    """A running average of the measurements under key."""
    old = estimates.get(key)
    estimates[key] = value if old is None else old + EMA * (value - old)
