"""Model: a loaded model with its tokenizer, KV-cache context and the Python API."""
from __future__ import annotations

import ctypes
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from . import _native
from .native_model import NativeContext, NativeModel


@dataclass(frozen=True)
class RouteLayer:
    """How one MoE layer routed each token of a sequence."""

    layer: int
    router_logits: np.ndarray   # [T, E] float32, raw router logits
    experts: np.ndarray         # [T, k] int32, selected experts by descending probability
    gates: np.ndarray           # [T, k] float32, the weights their outputs are summed with


class Model:
    """A loaded model. Create with ``colibri.load``; release with ``close()`` (or ``with``)."""

    def __init__(self, *, directory: Path, config, checkpoint, native: NativeModel, weights, tokenizer,
                 threads: int, n_ctx: int, n_seq: int, n_batch: int, kv_type: str,
                 generation_config: dict | None, placement: str = "cores", precision: str = "default", paging=None, prefetch: bool | int = True,
                 expert_profile=None):
        self.path = directory
        self.config = config
        self.tokenizer = tokenizer
        self.generation_config = generation_config or {}
        self._checkpoint = checkpoint
        self._native = native
        # Every buffer the C core writes is sized from the C model's own numbers, never from
        # config.json (the loader checked that the two agree).
        hp = native.hparams()
        self._n_vocab, self._n_layer = hp["n_vocab"], hp["n_layer"]
        self._n_expert, self._n_expert_used = hp["n_expert"], hp["n_expert_used"]
        self._moe_layers = [l for l, moe in enumerate(hp["layer_is_moe"]) if moe]
        self.weights = weights         # [(TensorSlot, WeightRef)] the C model reads, in place
        self._ctx = NativeContext(native, n_ctx=n_ctx, n_seq=n_seq, n_batch=n_batch, threads=threads,
                                  kv_type=kv_type, placement=placement, precision=precision)
        self.paging = None             # a paging.PagingPlan when the experts are paged (docs/PAGING.md)
        if paging is not None:
            from . import paging as pager
            try:
                self.paging = pager.start(native, self._ctx, paging, top_k=config.top_k, where=str(directory),
                                          prefetch=prefetch, profile_counts=expert_profile)
            except BaseException:
                self._ctx.close()
                self._ctx = None
                raise
        # token ids whose K/V sequence 0 holds after the last generation, so a
        # follow-up prompt (the next chat turn) reuses the common prefix
        self._seq0_tokens: list[int] = []
        self._lock = threading.Lock()   # held by the one call or generation using the context
        self._owner: int | None = None  # the thread that holds it

    @contextmanager
    def _exclusive(self, what: str):
        """The context (its KV cache, sequence 0's tokens) for one call or one generation: another
        thread waits for it; the thread that holds it (an unfinished ``generate(stream=True)``
        being iterated) is refused, since the two would overwrite each other's cache."""
        if self._owner == threading.get_ident():
            raise RuntimeError(f"{what}: this model is in use by an unfinished generation on this thread "
                               "(a generate(stream=True) not yet exhausted or closed); finish or close it first, "
                               "or serve concurrent requests with colibri.serving.Engine")
        with self._lock:
            self._owner = threading.get_ident()
            try:
                yield
            finally:
                self._owner = None

    # ---- lifecycle ---------------------------------------------------------
    def close(self) -> None:
        """Free the context, the C model and the file mappings (idempotent)."""
        if self._ctx is not None:
            self._ctx.close()
            self._native.close()
            self._checkpoint.close()
            self._ctx = None

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def paging_stats(self, reset: bool = False):
        """The expert cache's counters (paging.PagingStats: hit rate, bytes read per token,
        prefetch accuracy, stall time ...) since paging began or the last reset; None when the
        model is not paged."""
        if self.paging is None:
            return None
        from . import paging as pager
        return pager.read_stats(self._context(), reset)

    def expert_residency(self):
        """[num_layers, num_experts] uint8 of a paged model: 0 not cached, 1 cached, 2 pinned."""
        if self.paging is None:
            raise ValueError(f"{self.path}: the model is not paged")
        from . import paging as pager
        return pager.residency(self._context(), self.config.num_layers, self.config.num_experts)

    @property
    def threads(self) -> int:
        return self._context().threads

    @property
    def huge_pages(self) -> bool:
        """Whether the KV cache and scratch arena got transparent huge pages."""
        return self._context().huge_pages

    @property
    def n_ctx(self) -> int:
        return self._context().n_ctx

    @property
    def precision(self) -> str:
        """How block-type weights meet the activations: "default" (activations quantized per
        block of 32) or "exact" (f32 activations: the dequantized model's logits)."""
        return self._context().precision

    @property
    def kv_type(self) -> str:
        """The KV cache's element type: "f32" or "f16"."""
        return self._context().kv_type

    def _context(self) -> NativeContext:
        if self._ctx is None:
            raise ValueError("model is closed")
        return self._ctx

    # ---- low level -----------------------------------------------------------
    def forward(self, tokens: Sequence[int], positions: Sequence[int], seqs: Sequence[int],
                want_logits: Sequence[bool] | None = None) -> np.ndarray:
        """One forward step over a batch of (token, position, sequence) triples.

        Each sequence continues from its cached length (a smaller position
        rewinds it). Returns logits [n_wanted, vocab] for the tokens flagged in
        ``want_logits`` (default: the last token only), in batch order.
        """
        with self._exclusive("forward"):
            self._seq0_tokens = []
            return self._forward(tokens, positions, seqs, want_logits)

    def _forward(self, tokens, positions, seqs, want_logits=None) -> np.ndarray:
        ctx = self._context()
        token_ids = self._token_array(tokens)                                  # [T]
        pos = np.ascontiguousarray(positions, dtype=np.int32)                   # [T]
        seq = np.ascontiguousarray(seqs, dtype=np.int32)                        # [T]
        if not (len(token_ids) == len(pos) == len(seq)):
            raise ValueError("tokens, positions and seqs must have the same length")
        if want_logits is None:
            want = None
            n_wanted = 1
        else:
            want = np.ascontiguousarray([1 if w else 0 for w in want_logits], dtype=np.int8)  # [T]
            if len(want) != len(token_ids):
                raise ValueError("want_logits must have one flag per token")
            n_wanted = int(want.sum())
        logits = np.empty((n_wanted, self._n_vocab), dtype=np.float32)  # [n_wanted, V]
        out = _native.Outputs(logits=_native.as_ptr(logits, ctypes.c_float))
        ctx.forward(token_ids, pos, seq, want, out)
        return logits

    def _token_array(self, tokens: Sequence[int]) -> np.ndarray:
        ids = np.asarray(tokens)
        if ids.ndim != 1 or len(ids) == 0:
            raise ValueError("expected a non-empty sequence of token ids")
        if not np.issubdtype(ids.dtype, np.integer):
            raise ValueError("token ids must be integers")
        if ids.min() < 0 or ids.max() >= self._n_vocab:
            raise ValueError(f"token id out of range [0, {self._n_vocab})")
        return np.ascontiguousarray(ids, dtype=np.int32)

    def _chunks(self, n: int) -> Iterator[tuple[int, int]]:
        step = self._context().n_batch
        for start in range(0, n, step):
            yield start, min(n, start + step)

    def _run_fresh(self, ids: Sequence[int], seq: int, *, logits: np.ndarray | None,
                   route: tuple[np.ndarray, np.ndarray, np.ndarray] | None) -> None:
        """Prefill `ids` into sequence `seq` from position 0, chunked by n_batch.

        logits: [T, V] or None; route: (router_logits [L, T, E], experts [L, T, k],
        gates [L, T, k]) or None — filled in place.
        """
        ctx = self._context()
        tokens = self._token_array(ids)                                         # [T]
        if len(tokens) > ctx.n_ctx:
            raise ValueError(f"{len(tokens)} tokens exceed the context length {ctx.n_ctx}")
        ctx.clear(seq)
        self._seq0_tokens = []
        L, E, k = self._n_layer, self._n_expert, self._n_expert_used
        for start, end in self._chunks(len(tokens)):
            n = end - start
            pos = np.arange(start, end, dtype=np.int32)                         # [n]
            seqs = np.full(n, seq, dtype=np.int32)                              # [n]
            out = _native.Outputs()
            want = None
            if logits is not None:
                want = np.ones(n, dtype=np.int8)                                # [n]
                out.logits = _native.as_ptr(logits[start:end], ctypes.c_float)
            if route is not None:
                chunk_router = np.zeros((L, n, E), dtype=np.float32)                        # [L, n, E]
                chunk_experts = np.zeros((L, n, k), dtype=np.int32)                         # [L, n, k]
                chunk_gates = np.zeros((L, n, k), dtype=np.float32)                         # [L, n, k]
                out.router_logits = _native.as_ptr(chunk_router, ctypes.c_float)
                out.experts = _native.as_ptr(chunk_experts, ctypes.c_int32)
                out.gates = _native.as_ptr(chunk_gates, ctypes.c_float)
            ctx.forward(tokens[start:end], pos, seqs, want, out)
            if route is not None:
                route[0][:, start:end] = chunk_router
                route[1][:, start:end] = chunk_experts
                route[2][:, start:end] = chunk_gates

    # ---- analysis ------------------------------------------------------------
    def logits(self, ids: Sequence[int]) -> np.ndarray:
        """Logits [len(ids), vocab] (float32) of a fresh context over `ids`."""
        out = np.empty((len(ids), self._n_vocab), dtype=np.float32)   # [T, V]
        with self._exclusive("logits"):
            self._run_fresh(ids, 0, logits=out, route=None)
        return out

    def route(self, ids: Sequence[int]) -> list[RouteLayer]:
        """Per MoE layer, the router logits, selected experts and gates of every token."""
        T = len(ids)
        L, E, k = self._n_layer, self._n_expert, self._n_expert_used
        router = np.zeros((L, T, E), dtype=np.float32)   # [L, T, E]
        experts = np.zeros((L, T, k), dtype=np.int32)    # [L, T, k]
        gates = np.zeros((L, T, k), dtype=np.float32)    # [L, T, k]
        with self._exclusive("route"):
            self._run_fresh(ids, 0, logits=None, route=(router, experts, gates))
        return [RouteLayer(l, router[l], experts[l], gates[l]) for l in self._moe_layers]

    # ---- text ----------------------------------------------------------------
    def generate(self, prompt, max_tokens: int = 64, *, temperature: float | None = None,
                 top_k: int | None = None, top_p: float | None = None, min_p: float | None = None,
                 repetition_penalty: float | None = None, seed: int | None = None,
                 stop: str | Sequence[str] | None = None, stream: bool = False):
        """Complete `prompt` (text or token ids). Sampling defaults come from
        generation_config.json, then greedy-free defaults; temperature 0 is greedy.

        Returns a Completion, or with stream=True an iterator of Pieces.
        """
        from .generation import Generation

        gen = Generation(self, prompt, max_tokens=max_tokens, temperature=temperature, top_k=top_k,
                         top_p=top_p, min_p=min_p, repetition_penalty=repetition_penalty, seed=seed,
                         stop=stop)
        return gen.pieces() if stream else gen.complete()

    def chat(self, messages: list[dict], max_tokens: int = 256, **kwargs):
        """Render `messages` with the model's chat template and generate the reply."""
        tok = self._require_tokenizer()
        if not tok.chat_template:
            raise ValueError(f"{self.path}: the model has no chat template")
        text = tok.render_chat(messages, add_generation_prompt=True)
        ids = tok.encode(text, add_special_tokens=False)
        return self.generate(ids, max_tokens=max_tokens, **kwargs)

    def _require_tokenizer(self):
        if self.tokenizer is None:
            raise ValueError(f"{self.path}: the model has no tokenizer (tokenizer.json)")
        return self.tokenizer
