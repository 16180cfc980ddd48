"""The one thin binding between Python and libcolibri (ctypes).

Mirrors csrc/include/colibri.h. ctypes releases the GIL for the duration of
every foreign call, so a forward step runs without holding it.
"""
from __future__ import annotations

import ctypes
import functools
import os
import sys
from pathlib import Path

from .dtypes import DTYPES
from .errors import ModelError

API_VERSION = 1

# colibri_dtype (every value: colibri/dtypes.py)
DTYPE_F32, DTYPE_F16, DTYPE_BF16, DTYPE_Q8_0, DTYPE_Q4_0, DTYPE_Q4_1 = 0, 1, 2, 3, 4, 5
DTYPE_BY_NAME = {t.name: t.colibri_id for t in DTYPES}

# colibri_qk_norm
QK_NORM_NONE, QK_NORM_PER_HEAD, QK_NORM_WHOLE = 0, 1, 2

# colibri_router_score
ROUTER_SOFTMAX, ROUTER_SIGMOID, ROUTER_TOPK_SOFTMAX = 0, 1, 2
# colibri_ffn_act
FFN_SWIGLU, FFN_SWIGLU_CLAMPED = 0, 1

# colibri_tensor_kind, in header order
TENSOR_KINDS = (
    "TOKEN_EMBD", "OUTPUT_NORM", "OUTPUT", "ATTN_NORM", "WQ", "WK", "WV", "WO", "BQ", "BK", "BV",
    "Q_NORM", "K_NORM", "FFN_NORM", "FFN_GATE", "FFN_UP", "FFN_DOWN", "ROUTER", "EXPERT_GATE",
    "EXPERT_UP", "EXPERT_DOWN", "SHARED_GATE", "SHARED_UP", "SHARED_DOWN", "SHARED_ROUTER",
    "ROUTER_BIAS", "ROUTER_SEL_BIAS", "BO", "ATTN_SINKS", "EXPERT_GATE_BIAS", "EXPERT_UP_BIAS",
    "EXPERT_DOWN_BIAS", "WQ_A", "Q_A_NORM", "WQ_B", "WKV_A", "KV_A_NORM", "WK_B", "WV_B",
)
KIND = {name: i for i, name in enumerate(TENSOR_KINDS)}

# colibri_stage, in header order
PROFILE_STAGES = ("attention", "router", "dispatch", "experts", "aggregation", "lm_head", "other", "expert_wait")

# colibri_status values the bindings tell apart
STATUS_IO = 6
LOAD_PAGED = 1


class Hparams(ctypes.Structure):
    _fields_ = [
        ("n_vocab", ctypes.c_int32), ("n_embd", ctypes.c_int32), ("n_layer", ctypes.c_int32),
        ("n_head", ctypes.c_int32), ("n_head_kv", ctypes.c_int32), ("head_dim", ctypes.c_int32),
        ("n_ff", ctypes.c_int32), ("n_expert", ctypes.c_int32), ("n_expert_used", ctypes.c_int32),
        ("n_ff_expert", ctypes.c_int32), ("n_ff_shared", ctypes.c_int32),
        ("shared_gated", ctypes.c_int32), ("router_renorm", ctypes.c_int32),
        ("qk_norm", ctypes.c_int32), ("attn_bias", ctypes.c_int32),
        ("tied_embeddings", ctypes.c_int32), ("sliding_window", ctypes.c_int32),
        ("rope_interleaved", ctypes.c_int32),
        ("norm_eps", ctypes.c_float), ("attn_scale", ctypes.c_float),
        ("rope_attn_factor", ctypes.c_float), ("qkv_clip", ctypes.c_float),
        ("rope_inv_freq", ctypes.POINTER(ctypes.c_float)),
        ("layer_is_moe", ctypes.POINTER(ctypes.c_uint8)),
        ("router_score", ctypes.c_int32), ("router_bias", ctypes.c_int32),
        ("router_sel_bias", ctypes.c_int32), ("router_n_group", ctypes.c_int32),
        ("router_group_used", ctypes.c_int32), ("router_group_top", ctypes.c_int32),
        ("router_norm_min", ctypes.c_float), ("router_norm_eps", ctypes.c_float),
        ("router_scale", ctypes.c_float),
        ("layer_window", ctypes.POINTER(ctypes.c_int32)),
        ("attn_out_bias", ctypes.c_int32), ("attn_sinks", ctypes.c_int32),
        ("expert_bias", ctypes.c_int32),
        ("ffn_act", ctypes.c_int32), ("ffn_alpha", ctypes.c_float), ("ffn_limit", ctypes.c_float),
        ("kv_lora_rank", ctypes.c_int32), ("q_lora_rank", ctypes.c_int32),
        ("head_dim_nope", ctypes.c_int32), ("head_dim_v", ctypes.c_int32),
        ("latent_norm_eps", ctypes.c_float),
        ("rope_dim", ctypes.c_int32),
        ("embd_scale", ctypes.c_float), ("residual_scale", ctypes.c_float), ("logit_scale", ctypes.c_float),
    ]


class ContextParams(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int32) for name in ("n_ctx", "n_seq", "n_batch", "n_threads", "kv_dtype",
                                                     "placement")]


# colibri_placement: where a context's threads run
PLACEMENTS = {"cores": 0, "distribute": 1, "isolate": 2, "none": 3}


class Batch(ctypes.Structure):
    _fields_ = [
        ("n_tokens", ctypes.c_int32),
        ("token", ctypes.POINTER(ctypes.c_int32)),
        ("pos", ctypes.POINTER(ctypes.c_int32)),
        ("seq", ctypes.POINTER(ctypes.c_int32)),
        ("want_logits", ctypes.POINTER(ctypes.c_int8)),
    ]


class LayerSpan(ctypes.Structure):
    """colibri_layer_span: the batch's last n_tokens run layers [layer_begin, layer_end) only."""
    _fields_ = [(name, ctypes.c_int32) for name in ("n_tokens", "layer_begin", "layer_end")]


class Outputs(ctypes.Structure):
    _fields_ = [
        ("logits", ctypes.POINTER(ctypes.c_float)),
        ("router_logits", ctypes.POINTER(ctypes.c_float)),
        ("experts", ctypes.POINTER(ctypes.c_int32)),
        ("gates", ctypes.POINTER(ctypes.c_float)),
    ]


class PagingSizes(ctypes.Structure):
    _fields_ = [("slot_bytes", ctypes.c_uint64), ("resident_bytes", ctypes.c_uint64),
                ("expert_bytes", ctypes.c_uint64), ("overhead_bytes", ctypes.c_uint64),
                ("n_experts", ctypes.c_int64), ("read_bytes", ctypes.c_uint64)]


class PagingOptions(ctypes.Structure):
    _fields_ = [("n_slots", ctypes.c_int64), ("n_io_threads", ctypes.c_int32), ("prefetch", ctypes.c_int32),
                ("direct_io", ctypes.c_int32), ("aging_tokens", ctypes.c_int32)]


class PagingStats(ctypes.Structure):
    _fields_ = [("n_slots", ctypes.c_int64), ("slot_bytes", ctypes.c_int64), ("pinned", ctypes.c_int64),
                ("direct_io", ctypes.c_int32), ("huge_pages", ctypes.c_int32)] + [
        (name, ctypes.c_int64) for name in (
            "tokens", "lookups", "hits", "misses", "prefetches", "prefetch_used", "predicted",
            "predicted_needed", "needed_after_prediction", "reads", "bytes_read", "waves")] + [
        ("stall_seconds", ctypes.c_double), ("predicted2", ctypes.c_int64), ("predicted2_needed", ctypes.c_int64),
        ("needed_after_prediction2", ctypes.c_int64), ("stall_ahead_seconds", ctypes.c_double),
        ("early_waves", ctypes.c_int64)]


def _library_path() -> Path:
    override = os.environ.get("COLIBRI_LIB")
    if override:
        return Path(override)
    name = {"darwin": "libcolibri.dylib", "win32": "colibri.dll"}.get(sys.platform, "libcolibri.so")
    return Path(__file__).resolve().parent / name


def _declare(lib: ctypes.CDLL) -> None:
    c_int, c_i32, c_i64, vp = ctypes.c_int, ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p
    signatures = {
        "colibri_api_version": (c_int, []),
        "colibri_last_error": (ctypes.c_char_p, []),
        "colibri_model_create": (vp, [ctypes.POINTER(Hparams)]),
        "colibri_model_set_tensor": (c_int, [vp, c_i32, c_i32, c_i32, vp, c_i32, c_i64, c_i64]),
        "colibri_tensor_kind_is_vector": (c_int, [c_i32]),
        "colibri_model_finalize": (c_int, [vp]),
        "colibri_model_free": (None, [vp]),
        "colibri_model_hparams": (ctypes.POINTER(Hparams), [vp]),
        "colibri_context_create": (vp, [vp, c_i32, c_i32, c_i32, c_i32]),
        "colibri_context_create_kv": (vp, [vp, c_i32, c_i32, c_i32, c_i32, c_i32]),
        "colibri_context_create_params": (vp, [vp, ctypes.POINTER(ContextParams)]),
        "colibri_context_pinned": (c_i32, [vp]),
        "colibri_context_kv_type": (c_i32, [vp]),
        "colibri_context_set_exact": (c_int, [vp, c_int]),
        "colibri_context_free": (None, [vp]),
        "colibri_context_threads": (c_i32, [vp]),
        "colibri_context_huge_pages": (c_i32, [vp]),
        "colibri_seq_len": (c_i32, [vp, c_i32]),
        "colibri_seq_clear": (c_int, [vp, c_i32]),
        "colibri_forward": (c_int, [vp, ctypes.POINTER(Batch), ctypes.POINTER(Outputs)]),
        "colibri_forward_span": (c_int, [vp, ctypes.POINTER(Batch), ctypes.POINTER(LayerSpan),
                                         ctypes.POINTER(Outputs)]),
        "colibri_model_load": (vp, [ctypes.c_char_p]),
        "colibri_route": (c_int, [ctypes.POINTER(Hparams), vp, vp, c_i32, vp, vp]),
        "colibri_quantize": (c_int, [c_i32, vp, vp, c_i64]),
        "colibri_dequantize": (c_int, [c_i32, vp, vp, c_i64]),
        "colibri_model_metadata": (c_int, [vp, ctypes.POINTER(vp), ctypes.POINTER(ctypes.c_size_t)]),
        "colibri_isa": (ctypes.c_char_p, []),
        "colibri_read_bandwidth": (ctypes.c_double, [c_i32, c_i64, c_i32]),
        "colibri_profile_enable": (c_int, [vp, c_int]),
        "colibri_profile_read": (c_int, [vp, c_i32, ctypes.POINTER(ctypes.c_double), c_i32]),
        "colibri_profile_read_threads": (c_int, [vp, c_i32, ctypes.POINTER(ctypes.c_double),
                                                 ctypes.POINTER(ctypes.c_double), c_i32]),
        "colibri_profile_read_experts": (c_int, [vp, c_i32, ctypes.POINTER(c_i64), ctypes.POINTER(c_i64),
                                                 ctypes.POINTER(ctypes.c_double), c_i32]),
        "colibri_model_load_flags": (vp, [ctypes.c_char_p, ctypes.c_uint32]),
        "colibri_model_add_file": (c_int, [vp, ctypes.c_char_p, vp, ctypes.c_uint64]),
        "colibri_model_paging_sizes": (c_int, [vp, c_i32, ctypes.POINTER(PagingSizes)]),
        "colibri_context_arena_bytes": (ctypes.c_uint64, [vp]),
        "colibri_context_page_experts": (c_int, [vp, ctypes.POINTER(PagingOptions)]),
        "colibri_paging_pin": (c_int, [vp, ctypes.POINTER(c_i32), ctypes.POINTER(c_i32), c_i32]),
        "colibri_paging_stats_read": (c_int, [vp, ctypes.POINTER(PagingStats), c_int]),
        "colibri_paging_residency": (c_int, [vp, ctypes.POINTER(ctypes.c_uint8)]),
    }
    for name, (restype, argtypes) in signatures.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise ModelError(f"{lib._name}: libcolibri lacks {name} (an older build?): reinstall colibri-moe "
                             "or rebuild it") from None
        fn.restype = restype
        fn.argtypes = argtypes


_lib: ctypes.CDLL | None = None


def lib() -> ctypes.CDLL:
    """The loaded libcolibri, declared and version-checked (loaded once)."""
    global _lib
    if _lib is None:
        path = _library_path()
        if not path.is_file():
            raise ModelError(f"{path}: libcolibri not found (reinstall colibri-moe, or set COLIBRI_LIB)")
        loaded = ctypes.CDLL(str(path))
        _declare(loaded)
        version = loaded.colibri_api_version()
        if version != API_VERSION:
            raise ModelError(f"{path}: libcolibri API version {version}, expected {API_VERSION}")
        _lib = loaded
    return _lib


@functools.cache
def vector_kinds() -> frozenset[str]:
    """The tensor kinds libcolibri reads as vectors (norms, biases, sinks), which block types may
    not hold: colibri_tensor_kind_is_vector, the one list of them."""
    return frozenset(kind for kind in TENSOR_KINDS if lib().colibri_tensor_kind_is_vector(KIND[kind]) == 1)


def last_error() -> str:
    message = lib().colibri_last_error()
    return message.decode("utf-8", "replace") if message else "unknown error"


def as_ptr(array, ctype):
    """ctypes pointer to a contiguous numpy array's first element (None for None)."""
    if array is None:
        return None
    return array.ctypes.data_as(ctypes.POINTER(ctype))
