"""Build libcolibri's model and context from a ModelConfig and tensor views.

This is the only place that turns Python-side descriptions into C objects. The
weights are passed by address: the C core uses the mmapped bytes in place.
"""
from __future__ import annotations

import ctypes
import os
import sys
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from . import _native
from .errors import ModelError
from .models.spec import (FFN_SWIGLU, FFN_SWIGLU_CLAMPED, QK_NORM_PER_HEAD, QK_NORM_WHOLE, ROUTER_SIGMOID,
                          ROUTER_SOFTMAX, ROUTER_TOPK_SOFTMAX, ModelConfig, TensorSlot)

_QK_NORM = {"none": _native.QK_NORM_NONE, QK_NORM_PER_HEAD: _native.QK_NORM_PER_HEAD,
            QK_NORM_WHOLE: _native.QK_NORM_WHOLE}
_ROUTER_SCORE = {ROUTER_SOFTMAX: _native.ROUTER_SOFTMAX, ROUTER_SIGMOID: _native.ROUTER_SIGMOID,
                 ROUTER_TOPK_SOFTMAX: _native.ROUTER_TOPK_SOFTMAX}
_FFN_ACT = {FFN_SWIGLU: _native.FFN_SWIGLU, FFN_SWIGLU_CLAMPED: _native.FFN_SWIGLU_CLAMPED}


@dataclass(frozen=True)
class WeightRef:
    """Where one tensor's bytes live, in whatever file format they came from."""

    dtype: str      # a colibri/dtypes.py name: "F32", "BF16", "Q8_0", "Q4_K", ...
    shape: tuple[int, ...]   # [rows, cols] or [n]; cols is the contiguous axis
    nbytes: int
    array: np.ndarray        # zero-copy view of the bytes (typed for float dtypes)
    in_place: bool = True    # False: a copy in another layout, made once at load (spec.Derived)

    @property
    def address(self) -> int:
        return self.array.ctypes.data


def hparams_for(config: ModelConfig) -> tuple[_native.Hparams, tuple]:
    """The C hyperparameter struct, plus the arrays it points into (keep them alive until create)."""
    inv_freq = np.ascontiguousarray(config.rope_inv_freq, dtype=np.float32)   # [head_dim/2]
    moe = set(config.moe_layers)
    layer_is_moe = np.array([1 if l in moe else 0 for l in range(config.num_layers)], dtype=np.uint8)  # [L]
    # layer_window: [L] or None (every layer uses sliding_window)
    layer_window = np.array(config.layer_windows, dtype=np.int32) if config.layer_windows else None
    hp = _native.Hparams(
        n_vocab=config.vocab_size, n_embd=config.hidden_size, n_layer=config.num_layers,
        n_head=config.num_heads, n_head_kv=config.num_kv_heads, head_dim=config.head_dim,
        n_ff=config.intermediate_size, n_expert=config.num_experts if moe else 0,
        n_expert_used=config.top_k if moe else 0, n_ff_expert=config.expert_intermediate_size if moe else 0,
        n_ff_shared=config.shared_expert_intermediate_size if moe else 0,
        shared_gated=int(config.shared_expert_gated and config.shared_expert_intermediate_size > 0),
        router_renorm=int(config.router_renormalize), qk_norm=_QK_NORM[config.qk_norm],
        attn_bias=int(config.attention_bias), tied_embeddings=int(config.tied_embeddings),
        sliding_window=config.sliding_window, rope_interleaved=int(config.rope_interleaved),
        norm_eps=config.rms_norm_eps, attn_scale=config.attention_scale,
        rope_attn_factor=config.rope_attention_factor, qkv_clip=config.qkv_clip,
        rope_inv_freq=_native.as_ptr(inv_freq, ctypes.c_float),
        layer_is_moe=_native.as_ptr(layer_is_moe, ctypes.c_uint8),
        router_score=_ROUTER_SCORE[config.router_score], router_bias=int(config.router_bias),
        router_sel_bias=int(config.router_selection_bias), router_n_group=config.router_groups,
        router_group_used=config.router_groups_used, router_group_top=config.router_group_top,
        router_norm_min=config.router_norm_min, router_norm_eps=config.router_norm_eps,
        router_scale=config.router_scale,
        layer_window=_native.as_ptr(layer_window, ctypes.c_int32),
        attn_out_bias=int(config.attention_out_bias), attn_sinks=int(config.attention_sinks),
        expert_bias=int(config.expert_bias and bool(moe)),
        ffn_act=_FFN_ACT[config.ffn_act], ffn_alpha=config.ffn_alpha, ffn_limit=config.ffn_limit,
        kv_lora_rank=config.kv_lora_rank, q_lora_rank=config.q_lora_rank,
        head_dim_nope=config.qk_nope_head_dim, head_dim_v=config.v_head_dim,
        latent_norm_eps=config.latent_norm_eps if config.is_latent else 0.0,
        rope_dim=config.rope_dim,
        embd_scale=config.embedding_scale, residual_scale=config.residual_scale, logit_scale=config.logit_scale,
    )
    return hp, (inv_freq, layer_is_moe, layer_window)


# The array fields of colibri_hparams: name -> (its length for these hparams, the value a NULL
# pointer stands for). Array fields not listed here are not compared.
_HPARAM_ARRAYS = {
    "rope_inv_freq": (lambda hp: hp.head_dim // 2, None),
    "layer_is_moe": (lambda hp: hp.n_layer, None),
    "layer_window": (lambda hp: hp.n_layer, lambda hp: (hp.sliding_window,) * hp.n_layer),
}


def hparams_values(hp: _native.Hparams) -> dict:
    """A colibri_hparams as plain values: every scalar field by name, and every array field of
    _HPARAM_ARRAYS as a tuple, read through hp's pointers (which must still point at live memory)."""
    values = {}
    for name, kind in hp._fields_:
        value = getattr(hp, name)
        if issubclass(kind, ctypes._Pointer):
            if name not in _HPARAM_ARRAYS:
                continue
            length, default = _HPARAM_ARRAYS[name]
            values[name] = (tuple(value[i] for i in range(length(hp))) if value
                            else default(hp) if default else None)
        else:
            values[name] = tuple(value) if isinstance(value, ctypes.Array) else value
    return values


# The colibri_hparams fields whose 0 stands for another value, which the C core puts in its place
# (model.c, router.c; docs/FORMAT.md): a .colibri file written before the field existed holds 0.
_ZERO_STANDS_FOR = {
    "router_scale": lambda hp: 1.0, "rope_dim": lambda hp: hp["head_dim"], "embd_scale": lambda hp: 1.0,
    "residual_scale": lambda hp: 1.0, "logit_scale": lambda hp: 1.0,
}


def _resolved(values: dict) -> dict:
    """hparams_values with every _ZERO_STANDS_FOR field's 0 replaced by the value it stands for."""
    return {name: (_ZERO_STANDS_FOR[name](values) if name in _ZERO_STANDS_FOR and value == 0 else value)
            for name, value in values.items()}


def check_config_matches(config: ModelConfig, built: dict, where: str) -> None:
    """ModelError unless `config` maps to exactly the hyperparameters the C model was built
    with (`built`, from ModelHandle.hparams()): Python describes a model (Model.config) only
    as the C core runs it, and every buffer the C core writes is sized from the C numbers.
    Floats compare as float32 values (rope frequencies included), exactly; a field whose 0
    stands for a default (_ZERO_STANDS_FOR) compares as the value the C core runs with."""
    hp, keepalive = hparams_for(config)
    expected = _resolved(hparams_values(hp))
    del keepalive
    built = _resolved(built)
    for name, want in expected.items():
        got = built.get(name)
        if want != got:
            raise ModelError(f"{where}: config.json does not match the model's hyperparameters: "
                             f"{name} is {_short(got)} in the model, config.json gives {_short(want)}")


def _short(value) -> str:
    text = str(list(value) if isinstance(value, tuple) else value)
    return text if len(text) <= 80 else text[:77] + "..."


class ModelHandle:
    """An owned colibri_model*; close() frees it (idempotent)."""

    handle = None

    def hparams(self) -> dict:
        """The hyperparameters the C model runs with (hparams_values form): the one source of
        every dimension the C core writes by."""
        if not self.handle:
            raise ValueError("model is closed")
        return hparams_values(_native.lib().colibri_model_hparams(self.handle).contents)

    def add_files(self, mappings) -> None:
        """Declares the files the weights were mapped from [(path, address, size)], for paging."""
        for path, address, size in mappings:
            if _native.lib().colibri_model_add_file(self.handle, os.fsencode(path), address, size):
                raise ModelError(f"{path}: {_native.last_error()}")

    def close(self) -> None:
        if self.handle:
            _native.lib().colibri_model_free(self.handle)
            self.handle = None


def require_little_endian(what: str) -> None:
    """Hugging Face and GGUF tensors are little-endian and handed to the C core as they lie in
    their files; on a big-endian host that would be silent garbage, so it is refused. (Native
    .colibri files load everywhere: the C loader byte-swaps them.)"""
    if sys.byteorder != "little":
        raise ModelError(f"{what} needs a little-endian host (this one is {sys.byteorder}-endian); "
                         "convert the model to a .colibri file on a little-endian machine and load that")


class NativeModel(ModelHandle):
    """A colibri_model built from tensor views: created, filled, finalized; freed by close()."""

    def __init__(self, config: ModelConfig, weights: Sequence[tuple[TensorSlot, WeightRef]]):
        require_little_endian("loading Hugging Face and GGUF weights in place")
        lib = _native.lib()
        hp, keepalive = hparams_for(config)
        handle = lib.colibri_model_create(ctypes.byref(hp))
        del keepalive
        if not handle:
            raise ModelError(f"libcolibri rejected the model: {_native.last_error()}")
        self.handle = handle
        try:
            for slot, ref in weights:
                rows, cols = (1, ref.shape[0]) if len(ref.shape) == 1 else ref.shape
                status = lib.colibri_model_set_tensor(
                    handle, _native.KIND[slot.kind], slot.layer, slot.expert, ref.address,
                    _native.DTYPE_BY_NAME[ref.dtype], rows, cols)
                if status:
                    raise ModelError(f"tensor '{slot.name}': {_native.last_error()}")
            if lib.colibri_model_finalize(handle):
                raise ModelError(f"libcolibri rejected the model: {_native.last_error()}")
        except BaseException:
            self.close()
            raise


class NativeContext:
    """An owned colibri_context (KV cache + scratch + thread pool)."""

    def __init__(self, model: NativeModel, *, n_ctx: int, n_seq: int, n_batch: int, threads: int,
                 kv_type: str = "f32", placement: str = "cores", precision: str = "default"):
        lib = _native.lib()
        params = _native.ContextParams(n_ctx, n_seq, n_batch, threads, _native.DTYPE_BY_NAME[kv_type.upper()],
                                       _native.PLACEMENTS[placement])
        handle = lib.colibri_context_create_params(model.handle, ctypes.byref(params))
        if not handle:
            raise ModelError(f"could not create a context (n_ctx={n_ctx}, n_seq={n_seq}, "
                             f"n_batch={n_batch}, kv_type={kv_type}): {_native.last_error()}")
        self.handle = handle
        self.n_ctx, self.n_seq, self.n_batch, self.kv_type = n_ctx, n_seq, n_batch, kv_type
        self.placement, self.precision = placement, precision
        lib.colibri_context_set_exact(handle, int(precision == "exact"))
        self.threads = lib.colibri_context_threads(handle)
        self.pinned = lib.colibri_context_pinned(handle) == 1   # workers pinned to CPUs of their own
        self.huge_pages = lib.colibri_context_huge_pages(handle) == 1   # KV + scratch arena on THP

    def seq_len(self, seq: int) -> int:
        return _native.lib().colibri_seq_len(self.handle, seq)

    def clear(self, seq: int) -> None:
        if _native.lib().colibri_seq_clear(self.handle, seq):
            raise ValueError(_native.last_error())

    def forward(self, tokens: np.ndarray, positions: np.ndarray, seqs: np.ndarray,
                want: np.ndarray | None, outputs: _native.Outputs,
                span: tuple[int, int, int] | None = None) -> None:
        """One step. tokens/positions/seqs: [T] int32; want: [T] int8 or None. span: (n, begin, end):
        the last n tokens run layers [begin, end) only (colibri_forward_span)."""
        batch = _native.Batch(
            n_tokens=len(tokens),
            token=_native.as_ptr(tokens, ctypes.c_int32),
            pos=_native.as_ptr(positions, ctypes.c_int32),
            seq=_native.as_ptr(seqs, ctypes.c_int32),
            want_logits=_native.as_ptr(want, ctypes.c_int8),
        )
        self.run_batch(batch, outputs, span)

    def run_batch(self, batch: _native.Batch, outputs: _native.Outputs,
                  span: tuple[int, int, int] | None = None) -> None:
        """forward() over a colibri_batch the caller built (and keeps the arrays of) itself."""
        layer_span = ctypes.byref(_native.LayerSpan(*span)) if span else None
        status = _native.lib().colibri_forward_span(self.handle, ctypes.byref(batch), layer_span,
                                                    ctypes.byref(outputs))
        if status == _native.STATUS_IO:   # a paged expert could not be read from its file
            raise ModelError(_native.last_error())
        if status:
            raise ValueError(_native.last_error())

    def close(self) -> None:
        if self.handle:
            _native.lib().colibri_context_free(self.handle)
            self.handle = None
