"""Runs one planned step on the model's context: one colibri_forward call over the batch."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from .. import _native
from .scheduler import Work


@dataclass
class StepResult:
    logits: np.ndarray          # [n_wanted, V] float32: rows of the works that want logits, in plan order
    experts: np.ndarray | None  # [n_moe_layers, n_wanted, k] int32: their routing (None: no MoE layer or not asked)
    gates: np.ndarray | None    # [n_moe_layers, n_wanted, k] float32
    expert_tokens: np.ndarray | None   # [n_moe_layers, E] int64: tokens each expert took this step
    n_tokens: int               # tokens fed this step (a carried chunk's count in the step it started)


class Runner:
    """Owns the step's buffers (sized once, the C batch pointing at them) and calls the C core."""

    def __init__(self, model):
        c = model.config
        self._model = model
        ctx = model._context()
        self.n_batch, self.n_seq = ctx.n_batch, ctx.n_seq
        self.vocab = c.vocab_size
        self.moe_layers = np.asarray(c.moe_layers, dtype=np.int64)                # [n_moe]
        self.top_k = c.top_k if len(self.moe_layers) else 0
        self.n_expert = c.num_experts if len(self.moe_layers) else 0
        self.n_layer = c.num_layers
        self._tokens = np.zeros(self.n_batch, dtype=np.int32)                     # [n_batch]
        self._positions = np.zeros(self.n_batch, dtype=np.int32)                  # [n_batch]
        self._seqs = np.zeros(self.n_batch, dtype=np.int32)                       # [n_batch]
        self._want = np.zeros(self.n_batch, dtype=np.int8)                        # [n_batch]
        self._batch = _native.Batch(0, _native.as_ptr(self._tokens, ctypes.c_int32),
                                    _native.as_ptr(self._positions, ctypes.c_int32),
                                    _native.as_ptr(self._seqs, ctypes.c_int32),
                                    _native.as_ptr(self._want, ctypes.c_int8))
        self._logits = np.empty(self.n_seq * self.vocab, dtype=np.float32)        # [n_seq * V]
        route_size = self.n_layer * self.n_batch * self.top_k
        self._experts = np.zeros(route_size, dtype=np.int32)                      # [L * n_batch * k]
        self._gates = np.zeros(route_size, dtype=np.float32)                      # [L * n_batch * k]
        # a layer-sliced chunk's routing at the layers it ran in earlier steps, by its token order
        self._carried_experts = np.zeros((self.n_layer, self.n_batch, max(self.top_k, 1)), np.int32)    # [L, n_batch, k]
        self._carried_gates = np.zeros((self.n_layer, self.n_batch, max(self.top_k, 1)), np.float32)    # [L, n_batch, k]
        self._expert_offsets = (np.arange(len(self.moe_layers), dtype=np.int32) * self.n_expert)[:, None, None]  # [n_moe, 1, 1]
        # every step's outputs start at these buffers' first elements: one Outputs for all steps
        self._out = _native.Outputs(logits=_native.as_ptr(self._logits, ctypes.c_float))
        if self.top_k:
            self._out.experts = _native.as_ptr(self._experts, ctypes.c_int32)
            self._out.gates = _native.as_ptr(self._gates, ctypes.c_float)

    def _fill(self, plan: list[Work]) -> list[int]:
        """Write the plan's tokens into the batch buffers; the rows whose logits are wanted."""
        tokens, positions, seqs, want = self._tokens, self._positions, self._seqs, self._want
        wanted, n = [], 0
        for w in plan:
            count, last = w.end - w.start, n + w.end - w.start - 1
            if count == 1:
                tokens[n] = w.seq.tokens[w.start]
                positions[n] = w.start
            else:
                tokens[n:n + count] = w.seq.tokens[w.start:w.end]
                positions[n:n + count] = np.arange(w.start, w.end, dtype=np.int32)
                want[n:last] = 0
            seqs[n:n + count] = w.seq.slot
            want[last] = w.wants_logits
            if w.wants_logits:
                wanted.append(last)
            n += count
        self._batch.n_tokens = n
        return wanted

    def run(self, plan: list[Work]) -> StepResult:
        """Feed every work's tokens; logits of the tokens whose logits are wanted, and their routing
        when any of their sequences asked for routes. Works with layers set (the plan's last ones,
        one layer range) run as the step's layer span."""
        wanted_rows = self._fill(plan)
        n_tokens, n_wanted = self._batch.n_tokens, len(wanted_rows)
        logits = self._logits[:n_wanted * self.vocab].reshape(n_wanted, self.vocab)   # [n_wanted, V]
        sliced = [w for w in plan if w.layers is not None]
        span = (sum(w.end - w.start for w in sliced), *sliced[0].layers) if sliced else None
        self._model._context().run_batch(self._batch, self._out, span)
        n_fed = n_tokens - span[0] if span and span[1] > 0 else n_tokens
        if not self.top_k:
            return StepResult(logits, None, None, None, n_fed)
        experts = self._experts[:self.n_layer * n_tokens * self.top_k].reshape(self.n_layer, n_tokens, self.top_k)
        gates = self._gates[:self.n_layer * n_tokens * self.top_k].reshape(self.n_layer, n_tokens, self.top_k)
        if span:
            n_span, begin, end = span
            full = n_tokens - n_span
            for rows, into in ((experts, self._carried_experts), (gates, self._carried_gates)):
                into[begin:end, :n_span] = rows[begin:end, full:]
                rows[:begin, full:] = into[:begin, :n_span]      # the chunk's earlier layers, for its routes
        moe_experts = experts[self.moe_layers]                                    # [n_moe, T, k]
        keys = moe_experts + self._expert_offsets                                 # [n_moe, T, k]: layer * E + expert
        if span:   # the chunk's tokens count only at the layers this step ran
            ran = (self.moe_layers >= begin) & (self.moe_layers < end)
            keys = np.concatenate([keys[:, :full].ravel(), keys[ran, full:].ravel()])
        counts = np.bincount(keys.ravel(), minlength=len(self.moe_layers) * self.n_expert)
        routes = any(w.seq.params.routes for w in plan if w.wants_logits)
        return StepResult(logits,
                          moe_experts[:, wanted_rows] if routes else None,
                          gates[self.moe_layers][:, wanted_rows] if routes else None,
                          counts.reshape(len(self.moe_layers), self.n_expert), n_fed)
