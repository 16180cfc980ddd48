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
    experts: np.ndarray | None  # [n_moe_layers, n_wanted, k] int32: their routing (None: no MoE layer)
    gates: np.ndarray | None    # [n_moe_layers, n_wanted, k] float32
    expert_tokens: np.ndarray | None   # [n_moe_layers, E] int64: tokens each expert took this step
    n_tokens: int               # tokens fed this step (a carried chunk's count in the step it started)


class Runner:
    """Owns the step's buffers (sized once) and calls the C core."""

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
        self._logits = np.empty(self.n_seq * self.vocab, dtype=np.float32)        # [n_seq * V]
        route_size = self.n_layer * self.n_batch * self.top_k
        self._experts = np.zeros(route_size, dtype=np.int32)                      # [L * n_batch * k]
        self._gates = np.zeros(route_size, dtype=np.float32)                      # [L * n_batch * k]
        # a layer-sliced chunk's routing at the layers it ran in earlier steps, by its token order
        self._carried_experts = np.zeros((self.n_layer, self.n_batch, max(self.top_k, 1)), np.int32)    # [L, n_batch, k]
        self._carried_gates = np.zeros((self.n_layer, self.n_batch, max(self.top_k, 1)), np.float32)    # [L, n_batch, k]
        # every step's outputs start at these buffers' first elements: one Outputs for all steps
        self._out = _native.Outputs(logits=_native.as_ptr(self._logits, ctypes.c_float))
        if self.top_k:
            self._out.experts = _native.as_ptr(self._experts, ctypes.c_int32)
            self._out.gates = _native.as_ptr(self._gates, ctypes.c_float)

    def run(self, plan: list[Work]) -> StepResult:
        """Feed every work's tokens; logits and routing of the tokens whose logits are wanted.
        Works with layers set (the plan's last ones, one layer range) run as the step's layer span."""
        tokens = np.concatenate([np.asarray(w.seq.tokens[w.start:w.end], dtype=np.int32) for w in plan])  # [T]
        positions = np.concatenate([np.arange(w.start, w.end, dtype=np.int32) for w in plan])            # [T]
        seqs = np.concatenate([np.full(w.end - w.start, w.seq.slot, dtype=np.int32) for w in plan])      # [T]
        want = np.zeros(len(tokens), dtype=np.int8)                                                       # [T]
        ends = np.cumsum([w.end - w.start for w in plan]) - 1
        wanted_rows = [int(ends[i]) for i, w in enumerate(plan) if w.wants_logits]
        want[wanted_rows] = 1
        n_tokens, n_wanted = len(tokens), len(wanted_rows)
        logits = self._logits[:n_wanted * self.vocab].reshape(n_wanted, self.vocab)   # [n_wanted, V]
        experts = gates = None
        if self.top_k:
            experts = self._experts[:self.n_layer * n_tokens * self.top_k].reshape(self.n_layer, n_tokens, self.top_k)
            gates = self._gates[:self.n_layer * n_tokens * self.top_k].reshape(self.n_layer, n_tokens, self.top_k)
        sliced = [w for w in plan if w.layers is not None]
        span = (sum(w.end - w.start for w in sliced), *sliced[0].layers) if sliced else None
        self._model._context().forward(tokens, positions, seqs, want, self._out, span)
        n_fed = n_tokens - span[0] if span and span[1] > 0 else n_tokens
        if not self.top_k:
            return StepResult(logits, None, None, None, n_fed)
        active = np.ones((len(self.moe_layers), n_tokens), dtype=bool)           # [n_moe, T]: rows each layer ran
        if span:
            n_span, begin, end = span
            full = n_tokens - n_span
            for rows, into in ((experts, self._carried_experts), (gates, self._carried_gates)):
                into[begin:end, :n_span] = rows[begin:end, full:]
                rows[:begin, full:] = into[:begin, :n_span]      # the chunk's earlier layers, for its routes
            ran = (self.moe_layers >= begin) & (self.moe_layers < end)
            active[~ran, full:] = False
        moe_experts = experts[self.moe_layers]                                    # [n_moe, T, k]
        offsets = (np.arange(len(self.moe_layers), dtype=np.int64) * self.n_expert)[:, None, None]
        pairs = np.broadcast_to(active[:, :, None], moe_experts.shape)
        counts = np.bincount((moe_experts + offsets)[pairs], minlength=len(self.moe_layers) * self.n_expert)
        return StepResult(logits, moe_experts[:, wanted_rows].copy(), gates[self.moe_layers][:, wanted_rows].copy(),
                          counts.reshape(len(self.moe_layers), self.n_expert), n_fed)
