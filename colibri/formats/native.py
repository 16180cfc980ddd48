"""The Colibri-native model file (docs/FORMAT.md): writer, validating reader, C-side loading.

    64 B        header: magic "COLIBRI\\0", version, header size, counts, section offsets,
                n_layer, n_expert
    hparams     every colibri_hparams scalar (version 1's, then n_ext extension fields), rope
                inv_freq [head_dim/2] f32, layer_is_moe [n_layer] u8
    directory   n_tensors x 48 B: kind, layer, expert, dtype, rows, cols, offset, nbytes
    metadata    UTF-8 JSON object: architecture, source files (config, tokenizer, chat templates, ...)
    data        the tensors in directory order, each at the next 64-byte boundary

Everything is little-endian. The reader checks every rule the C loader (csrc/core/native_file.c)
checks and raises ModelError naming the file and the field.
"""
from __future__ import annotations

import mmap
import os
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from .. import _native
from .. import dtypes as dtype_table
from ..native_model import ModelHandle, WeightRef, hparams_for
from ..errors import ModelError
from ..models.spec import ModelConfig, TensorSlot
from .files import open_regular
from .safetensors import parse_json_object

MAGIC = b"COLIBRI\0"
VERSION = 2
HEADER_BYTES = 64
ALIGN = 64
ENTRY_BYTES = 48
HPARAMS_V1_BYTES = 88         # the scalars of version 1
HPARAMS_FIXED_BYTES = 92      # those + n_ext (u32), before the extension fields
SUFFIX = ".colibri"

_HEADER = struct.Struct("<8sIIIIQQQQii")          # see FORMAT.md "Header"
_ENTRY = struct.Struct("<iiiiqqQQ")               # see FORMAT.md "Tensor directory"
_HP_INTS = ("n_vocab", "n_embd", "n_layer", "n_head", "n_head_kv", "head_dim", "n_ff", "n_expert",
            "n_expert_used", "n_ff_expert", "n_ff_shared", "shared_gated", "router_renorm", "qk_norm",
            "attn_bias", "tied_embeddings", "sliding_window")
_HP_FLOATS = ("norm_eps", "attn_scale", "rope_attn_factor", "qkv_clip")
_HP_TAIL = ("rope_interleaved",)
_HP_FIELDS = _HP_INTS + _HP_FLOATS + _HP_TAIL
_HP_SCALARS = struct.Struct("<" + "i" * len(_HP_INTS) + "f" * len(_HP_FLOATS) + "i" * len(_HP_TAIL))
# Extension fields (FORMAT.md): after n_ext, 4 bytes each, appended to and never reordered; a file
# with fewer leaves the rest 0 (their defaults); ones this reader does not know must be 0.
_HP_EXT = (("router_score", "i"), ("router_bias", "i"), ("router_sel_bias", "i"), ("router_n_group", "i"),
           ("router_group_used", "i"), ("router_group_top", "i"), ("router_norm_min", "f"),
           ("router_norm_eps", "f"), ("router_scale", "f"),
           ("kv_lora_rank", "i"), ("q_lora_rank", "i"), ("head_dim_nope", "i"), ("head_dim_v", "i"),
           ("latent_norm_eps", "f"), ("rope_dim", "i"), ("embd_scale", "f"),
           ("residual_scale", "f"), ("logit_scale", "f"),
           ("attn_out_bias", "i"), ("attn_sinks", "i"), ("expert_bias", "i"), ("ffn_act", "i"),
           ("ffn_alpha", "f"), ("ffn_limit", "f"),
           ("layer_windows", "i"))   # not a colibri_hparams field: 1 = i32[n_layer] windows follow layer_is_moe
assert _HEADER.size == HEADER_BYTES and _ENTRY.size == ENTRY_BYTES and _HP_SCALARS.size == HPARAMS_V1_BYTES

# dtype id -> (name, elements per block, bytes per block)
DTYPES = {t.colibri_id: (t.name, t.block_elems, t.block_bytes) for t in dtype_table.DTYPES}
DTYPE_IDS = {name: i for i, (name, _, _) in DTYPES.items()}
KINDS = _native.TENSOR_KINDS
_EXPERT_KINDS = {"EXPERT_GATE", "EXPERT_UP", "EXPERT_DOWN"}

# Side files a converted model carries in metadata["files"] (name -> text).
SIDE_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
              "special_tokens_map.json", "chat_template.jinja")
CHAT_TEMPLATE_DIR = "chat_templates"


def align64(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def tensor_nbytes(dtype: str, rows: int, cols: int) -> int:
    """Bytes of a [rows, cols] tensor of a colibri dtype (cols a multiple of the block size)."""
    _, block_elems, block_bytes = DTYPES[DTYPE_IDS[dtype]]
    return rows * (cols // block_elems) * block_bytes


@dataclass(frozen=True)
class Entry:
    """One tensor directory entry."""

    kind: int
    layer: int
    expert: int
    dtype: int
    rows: int
    cols: int
    offset: int          # absolute file offset of the first byte
    nbytes: int

    @property
    def kind_name(self) -> str:
        return KINDS[self.kind]

    @property
    def dtype_name(self) -> str:
        return DTYPES[self.dtype][0]

    def order_key(self) -> tuple:
        """Directory order: globals by kind, then per layer the kinds in enum order with the
        expert kinds grouped by expert (each expert's gate, up, down adjacent)."""
        name = KINDS[self.kind]
        if self.kind <= KINDS.index("OUTPUT"):
            return (0, 0, 0, 0, self.kind)
        section = 1 if name in _EXPERT_KINDS else (0 if self.kind < KINDS.index("EXPERT_GATE") else 2)
        return (1, self.layer, section, self.expert if section == 1 else 0, self.kind)

    def describe(self) -> str:
        return _describe(KINDS[self.kind] if 0 <= self.kind < len(KINDS) else str(self.kind), self.layer,
                         self.expert)


def _describe(kind: str, layer: int, expert: int) -> str:
    """'EXPERT_UP, layer 2, expert 5' for error lines."""
    return kind + ("" if layer < 0 else f", layer {layer}") + ("" if expert < 0 else f", expert {expert}")


# ==================================================================================== hparams

def encode_hparams(config: ModelConfig) -> bytes:
    """The hparams block of a ModelConfig, through the same mapping the C model is built with."""
    hp, (inv_freq, layer_is_moe, layer_window) = hparams_for(config)
    # every colibri_hparams field the block does not hold must be off (0 or NULL)
    beyond = [name for name, _ in hp._fields_ if name not in _HP_FIELDS and name not in dict(_HP_EXT)
              and name not in ("rope_inv_freq", "layer_is_moe", "layer_window") and getattr(hp, name)]
    if beyond:
        raise ModelError(f"{config.architecture}: the .colibri format (version {VERSION}) cannot hold "
                         f"{', '.join(beyond)} yet; load the Hugging Face directory or GGUF file instead")
    ext = {name: getattr(hp, name) for name, _ in _HP_EXT if name != "layer_windows"}
    ext["layer_windows"] = int(layer_window is not None)
    scalars = _HP_SCALARS.pack(*(getattr(hp, f) for f in _HP_FIELDS))
    ext_bytes = struct.pack("<I" + "".join(kind for _, kind in _HP_EXT), len(_HP_EXT),
                            *(ext[name] for name, _ in _HP_EXT))
    windows = b"" if layer_window is None else layer_window.astype("<i4").tobytes()
    return scalars + ext_bytes + inv_freq.astype("<f4").tobytes() + layer_is_moe.astype("u1").tobytes() + windows


def decode_hparams(block: bytes, where: str) -> dict[str, Any]:
    """Field -> value (rope_inv_freq: [head_dim/2] float32 array, layer_is_moe and layer_window:
    tuples); the block's size must be exactly 92 + 4*n_ext + 4*head_dim/2 + n_layer, plus
    4*n_layer with layer_windows."""
    values = _HP_SCALARS.unpack_from(block, 0)
    hp = dict(zip(_HP_FIELDS, values))
    head_dim, n_layer = hp["head_dim"], hp["n_layer"]
    if head_dim <= 0 or head_dim % 2 or n_layer <= 0:
        raise ModelError(f"{where}: hparams: head_dim must be even and > 0 and n_layer > 0, "
                         f"got {head_dim} and {n_layer}")
    n_ext = struct.unpack_from("<I", block, HPARAMS_V1_BYTES)[0]
    arrays = HPARAMS_FIXED_BYTES + 4 * n_ext
    for name, kind in _HP_EXT:
        hp[name] = 0.0 if kind == "f" else 0
    if len(block) >= arrays:   # the extension fields lie inside the block
        for i in range(n_ext):
            at = HPARAMS_FIXED_BYTES + 4 * i
            if i < len(_HP_EXT):
                name, kind = _HP_EXT[i]
                hp[name] = struct.unpack_from("<" + kind, block, at)[0]
            elif block[at:at + 4] != bytes(4):
                raise ModelError(f"{where}: hparams: extension field {i} is unknown to this reader (it knows "
                                 f"{len(_HP_EXT)}; a newer Colibri wrote the file) and not 0")
        if hp["layer_windows"] not in (0, 1):
            raise ModelError(f"{where}: hparams: layer_windows must be 0 or 1, got {hp['layer_windows']}")
    want = arrays + 2 * head_dim + n_layer + (4 * n_layer if hp["layer_windows"] else 0)
    if len(block) != want:
        raise ModelError(f"{where}: hparams_size: expected {want} (92 + 4*n_ext + 4*head_dim/2 + n_layer, "
                         f"+ 4*n_layer with layer_windows), got {len(block)}")
    hp["rope_inv_freq"] = np.frombuffer(block, "<f4", head_dim // 2, arrays).astype(np.float32)
    windows_at = arrays + 2 * head_dim + n_layer
    hp["layer_is_moe"] = tuple(block[arrays + 2 * head_dim:windows_at])
    hp["layer_window"] = (tuple(int(w) for w in np.frombuffer(block, "<i4", n_layer, windows_at))
                          if hp["layer_windows"] else (hp["sliding_window"],) * n_layer)
    return hp


def check_hparams(hp: dict[str, Any], where: str) -> None:
    """The checks colibri_model_create makes (csrc/core/model.c), with the same wording."""
    def require(ok: bool, message: str) -> None:
        if not ok:
            raise ModelError(f"{where}: hparams: {message}")

    for name in ("n_vocab", "n_embd", "n_layer", "n_head"):
        require(hp[name] > 0, f"{name} must be > 0, got {hp[name]}")
    require(hp["n_head_kv"] > 0 and hp["n_head"] % hp["n_head_kv"] == 0,
            f"n_head_kv must be > 0 and divide n_head={hp['n_head']}, got {hp['n_head_kv']}")
    for name in ("n_ff", "n_ff_shared", "sliding_window", "n_expert", "n_expert_used", "n_ff_expert"):
        require(hp[name] >= 0, f"{name} must be >= 0, got {hp[name]}")
    for name in ("shared_gated", "router_renorm", "attn_bias", "tied_embeddings", "rope_interleaved",
                 "attn_out_bias", "attn_sinks", "expert_bias"):
        require(hp[name] in (0, 1), f"{name} must be 0 or 1")
    require(hp["ffn_act"] in (0, 1), f"ffn_act must be 0 (SWIGLU) or 1 (SWIGLU_CLAMPED), got {hp['ffn_act']}")
    require(hp["ffn_act"] != 1 or all(np.isfinite(hp[n]) and hp[n] > 0 for n in ("ffn_alpha", "ffn_limit")),
            "SWIGLU_CLAMPED needs finite ffn_alpha > 0 and ffn_limit > 0")
    for l, window in enumerate(hp["layer_window"]):
        require(window >= 0, f"layer_window[{l}] must be >= 0, got {window}")
    require(not hp["shared_gated"] or hp["n_ff_shared"] > 0,
            "shared_gated=1 needs a shared expert (n_ff_shared > 0)")
    require(hp["qk_norm"] in (0, 1, 2), f"qk_norm must be 0, 1 or 2, got {hp['qk_norm']}")
    for name in ("norm_eps", "attn_scale", "qkv_clip"):
        require(np.isfinite(hp[name]) and hp[name] >= 0, f"{name} must be finite and >= 0")
    require(bool(np.isfinite(hp["rope_attn_factor"])), "rope_attn_factor must be finite")
    require(all(np.isfinite(hp[n]) for n in ("embd_scale", "residual_scale", "logit_scale")) and hp["logit_scale"] >= 0,
            "embd_scale, residual_scale and logit_scale must be finite, logit_scale >= 0 (0 = 1)")
    require(0 <= hp["rope_dim"] <= hp["head_dim"] and hp["rope_dim"] % 2 == 0,
            f"rope_dim must be even and in [0, head_dim={hp['head_dim']}] (0 = head_dim), got {hp['rope_dim']}")
    require(bool(np.isfinite(hp["rope_inv_freq"]).all()), "rope_inv_freq has a non-finite value")
    _check_latent(hp, require)
    moe = hp["layer_is_moe"]
    require(all(v in (0, 1) for v in moe), "layer_is_moe values must be 0 or 1")
    require(all(moe) or hp["n_ff"] > 0, "dense layers need n_ff > 0")
    require(not all(moe) or hp["n_ff"] == 0, f"n_ff must be 0 without dense layers, got {hp['n_ff']}")
    if any(moe):
        _check_router(hp, require)
        require(hp["n_ff_expert"] > 0, "MoE layers need n_ff_expert > 0")
    else:
        require(hp["n_ff_shared"] == 0, "a shared expert needs MoE layers")
        require(hp["n_expert"] == hp["n_expert_used"] == hp["n_ff_expert"] == 0,
                "n_expert, n_expert_used and n_ff_expert must be 0 without MoE layers, got "
                f"{hp['n_expert']}, {hp['n_expert_used']}, {hp['n_ff_expert']}")


def _check_latent(hp: dict[str, Any], require: Callable[[bool, str], None]) -> None:
    """colibri_hparams_check's latent attention checks (csrc/core/model.c), with the same wording."""
    require(all(0 <= hp[name] <= 1 << 20 for name in ("kv_lora_rank", "q_lora_rank", "head_dim_nope", "head_dim_v")),
            f"kv_lora_rank, q_lora_rank, head_dim_nope and head_dim_v must be in [0, {1 << 20}]")
    if hp["kv_lora_rank"] > 0:
        require(hp["head_dim_nope"] > 0 and hp["head_dim_v"] > 0,
                "latent attention (kv_lora_rank > 0) needs head_dim_nope and head_dim_v > 0")
        require(hp["n_head_kv"] == 1, f"latent attention needs n_head_kv = 1 (one latent), got {hp['n_head_kv']}")
        require(not hp["attn_bias"] and not hp["qk_norm"] and hp["qkv_clip"] == 0 and not any(hp["layer_window"])
                and not hp["attn_out_bias"] and not hp["attn_sinks"],
                "latent attention has no attn_bias, qk_norm, qkv_clip, sliding window, attn_out_bias or attn_sinks")
        require(bool(np.isfinite(hp["latent_norm_eps"])) and hp["latent_norm_eps"] >= 0,
                "latent_norm_eps must be finite and >= 0")
        require(hp["rope_dim"] in (0, hp["head_dim"]), f"latent attention rotates all head_dim={hp['head_dim']} "
                f"RoPE dims (rope_dim 0 or {hp['head_dim']}), got {hp['rope_dim']}")
    else:
        require(hp["q_lora_rank"] == 0 and hp["head_dim_nope"] == 0 and hp["head_dim_v"] == 0,
                "q_lora_rank, head_dim_nope and head_dim_v need latent attention (kv_lora_rank > 0)")


def _check_router(hp: dict[str, Any], require: Callable[[bool, str], None]) -> None:
    """colibri_router_check's checks (csrc/core/router.c), with the same wording."""
    E = hp["n_expert"]
    require(E > 0, "MoE layers need n_expert > 0")
    require(1 <= hp["n_expert_used"] <= E, f"n_expert_used must be in [1, n_expert={E}], got {hp['n_expert_used']}")
    require(hp["router_score"] in (0, 1, 2),
            f"router_score must be 0 (softmax), 1 (sigmoid) or 2 (top-k softmax), got {hp['router_score']}")
    for name in ("router_bias", "router_sel_bias"):
        require(hp[name] in (0, 1), f"{name} must be 0 or 1")
    G = hp["router_n_group"]
    require(0 <= G <= E, f"router_n_group must be in [0, n_expert={E}], got {G}")
    if G > 1:
        size = E // G
        require(E % G == 0, f"router_n_group={G} must divide n_expert={E}")
        require(1 <= hp["router_group_used"] <= G,
                f"router_group_used must be in [1, router_n_group={G}], got {hp['router_group_used']}")
        require(1 <= hp["router_group_top"] <= size,
                f"router_group_top must be in [1, n_expert/router_n_group={size}], got {hp['router_group_top']}")
        require(hp["router_group_used"] * size >= hp["n_expert_used"],
                f"router_group_used={hp['router_group_used']} groups of {size} experts cannot hold "
                f"n_expert_used={hp['n_expert_used']}")
    for name in ("router_norm_min", "router_norm_eps"):
        require(bool(np.isfinite(hp[name])) and hp[name] >= 0, f"{name} must be finite and >= 0")
    require(bool(np.isfinite(hp["router_scale"])) and hp["router_scale"] >= 0,
            "router_scale must be finite and >= 0 (0 = 1)")


def _latent_tensors(hp: dict[str, Any], l: int) -> list[tuple[str, int, int, int, int]]:
    """Layer l's latent attention tensors (colibri.h's shapes)."""
    D, H, R, Rq, hd = hp["n_embd"], hp["n_head"], hp["kv_lora_rank"], hp["q_lora_rank"], hp["head_dim"]
    Qm, dv = H * (hp["head_dim_nope"] + hd), hp["head_dim_v"]
    out = [("WQ_A", l, -1, Rq, D), ("Q_A_NORM", l, -1, 1, Rq), ("WQ_B", l, -1, Qm, Rq)] if Rq else [("WQ", l, -1, Qm, D)]
    return out + [("WO", l, -1, D, H * dv), ("WKV_A", l, -1, R + hd, D), ("KV_A_NORM", l, -1, 1, R),
                  ("WK_B", l, -1, H * R, hp["head_dim_nope"]), ("WV_B", l, -1, H * dv, R)]


def expected_tensors(hp: dict[str, Any]) -> list[tuple[str, int, int, int, int]]:
    """(kind, layer, expert, rows, cols) of every tensor the hparams call for, in directory order
    (the rules of colibri_model_set_tensor / finalize)."""
    D, V, hd = hp["n_embd"], hp["n_vocab"], hp["head_dim"]
    Q, K = hp["n_head"] * hd, hp["n_head_kv"] * hd
    out = [("TOKEN_EMBD", -1, -1, V, D), ("OUTPUT_NORM", -1, -1, 1, D)]
    if not hp["tied_embeddings"]:
        out.append(("OUTPUT", -1, -1, V, D))
    for l, moe in enumerate(hp["layer_is_moe"]):
        out.append(("ATTN_NORM", l, -1, 1, D))
        if hp["kv_lora_rank"] > 0:
            out += _latent_tensors(hp, l)
        else:
            out += [("WQ", l, -1, Q, D), ("WK", l, -1, K, D), ("WV", l, -1, K, D), ("WO", l, -1, D, Q)]
        if hp["attn_bias"]:
            out += [("BQ", l, -1, 1, Q), ("BK", l, -1, 1, K), ("BV", l, -1, 1, K)]
        if hp["attn_out_bias"]:
            out.append(("BO", l, -1, 1, D))
        if hp["attn_sinks"]:
            out.append(("ATTN_SINKS", l, -1, 1, hp["n_head"]))
        if hp["qk_norm"]:
            per_head = hp["qk_norm"] == _native.QK_NORM_PER_HEAD
            out += [("Q_NORM", l, -1, 1, hd if per_head else Q), ("K_NORM", l, -1, 1, hd if per_head else K)]
        out.append(("FFN_NORM", l, -1, 1, D))
        if not moe:
            F = hp["n_ff"]
            out += [("FFN_GATE", l, -1, F, D), ("FFN_UP", l, -1, F, D), ("FFN_DOWN", l, -1, D, F)]
            continue
        Fe, S = hp["n_ff_expert"], hp["n_ff_shared"]
        out.append(("ROUTER", l, -1, hp["n_expert"], D))
        for e in range(hp["n_expert"]):
            out += [("EXPERT_GATE", l, e, Fe, D), ("EXPERT_UP", l, e, Fe, D), ("EXPERT_DOWN", l, e, D, Fe)]
        if S:
            out += [("SHARED_GATE", l, -1, S, D), ("SHARED_UP", l, -1, S, D), ("SHARED_DOWN", l, -1, D, S)]
            if hp["shared_gated"]:
                out.append(("SHARED_ROUTER", l, -1, 1, D))
        if hp["router_bias"]:
            out.append(("ROUTER_BIAS", l, -1, 1, hp["n_expert"]))
        if hp["router_sel_bias"]:
            out.append(("ROUTER_SEL_BIAS", l, -1, 1, hp["n_expert"]))
        if hp["expert_bias"]:
            out += [("EXPERT_GATE_BIAS", l, -1, hp["n_expert"], Fe), ("EXPERT_UP_BIAS", l, -1, hp["n_expert"], Fe),
                    ("EXPERT_DOWN_BIAS", l, -1, hp["n_expert"], D)]
    return sorted(out, key=lambda t: Entry(KINDS.index(t[0]), t[1], t[2], 0, 0, 0, 0, 0).order_key())


# ==================================================================================== writer

ProgressFn = Callable[[int, int], None]   # (elements written so far, total elements)


def write_native(path: str | os.PathLike, config: ModelConfig, slots: Sequence[TensorSlot],
                 weight_bytes_fn: Callable[[TensorSlot], tuple[str, Any]], metadata: dict,
                 progress: ProgressFn | None = None) -> None:
    """Write a native file: `slots` (from tensor_slots) in directory order, one tensor at a time.

    weight_bytes_fn(slot) -> (colibri dtype name, little-endian bytes-like of exactly that
    tensor's size). metadata: a JSON-able dict. The data is streamed after a reserved directory,
    which is filled in last; the file is written under a temporary name and renamed when complete.
    """
    import json

    ordered = sorted(slots, key=lambda s: _slot_entry(s, "F32", 0).order_key())
    hparams = encode_hparams(config)
    meta = json.dumps(metadata, ensure_ascii=False, allow_nan=False, sort_keys=True).encode("utf-8")
    directory_at = align64(HEADER_BYTES + len(hparams))
    metadata_at = directory_at + ENTRY_BYTES * len(ordered)
    data_at = align64(metadata_at + len(meta))
    moe = bool(config.moe_layers) and config.num_experts > 0
    header = _HEADER.pack(MAGIC, VERSION, HEADER_BYTES, len(ordered), len(hparams), directory_at, metadata_at,
                          len(meta), data_at, config.num_layers, config.num_experts if moe else 0)
    total = sum(_slot_entry(s, "F32", 0).rows * _slot_entry(s, "F32", 0).cols for s in ordered)
    target = Path(path)
    partial = target.with_name(target.name + ".partial")
    entries: list[Entry] = []
    with open(partial, "wb") as f:
        f.write(header + hparams + bytes(directory_at - HEADER_BYTES - len(hparams)))
        f.write(bytes(ENTRY_BYTES * len(ordered)))          # the directory, filled in below
        f.write(meta + bytes(data_at - metadata_at - len(meta)))
        done = 0
        for slot in ordered:
            dtype, data = weight_bytes_fn(slot)
            entry = _slot_entry(slot, dtype, align64(f.tell()))
            view = memoryview(data).cast("B")
            if view.nbytes != entry.nbytes:
                raise ModelError(f"tensor '{slot.name}': weight_bytes_fn gave {view.nbytes} bytes, expected "
                                 f"{entry.nbytes} ({dtype} {list(slot.shape)})")
            f.write(bytes(entry.offset - f.tell()))
            f.write(view)
            entries.append(entry)
            done += entry.rows * entry.cols
            if progress:
                progress(done, total)
        f.seek(metadata_at - ENTRY_BYTES * len(ordered))
        f.write(b"".join(_ENTRY.pack(e.kind, e.layer, e.expert, e.dtype, e.rows, e.cols, e.offset, e.nbytes)
                         for e in entries))
    os.replace(partial, target)


def _slot_entry(slot: TensorSlot, dtype: str, offset: int) -> Entry:
    rows, cols = (1, slot.shape[0]) if len(slot.shape) == 1 else slot.shape
    return Entry(KINDS.index(slot.kind), slot.layer, slot.expert, DTYPE_IDS[dtype], rows, cols, offset,
                 tensor_nbytes(dtype, rows, cols))


# ==================================================================================== reader

class NativeFile:
    """A validated native file, mapped read-only. Open with NativeFile.open(path); close() unmaps."""

    def __init__(self, path: Path, mapped: mmap.mmap, header: dict, hparams: dict, entries: list[Entry],
                 metadata: dict):
        self.path = path
        self.size = len(mapped)
        self.header = header        # field -> value, as in FORMAT.md
        self.hparams = hparams      # colibri_hparams field -> value
        self.entries = entries      # in directory (= file) order
        self.metadata = metadata
        self._map = mapped

    @classmethod
    def open(cls, path: str | os.PathLike) -> "NativeFile":
        """Map and validate everything (header, hparams, directory, metadata, padding); ModelError otherwise."""
        path = Path(path)
        fd = open_regular(path)
        try:
            size = os.fstat(fd).st_size
            if size < HEADER_BYTES:
                raise ModelError(f"{path}: file is {size} bytes, smaller than the {HEADER_BYTES}-byte header")
            mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        _advise(mapped, "MADV_RANDOM")   # the checks touch single pages, not the tensors around them
        try:
            header, hparams, entries, metadata = _validate(str(path), mapped)
        except BaseException:
            mapped.close()
            raise
        _advise(mapped, "MADV_DONTNEED")   # let go of the pages checked (a paged model's experts among them)
        _advise(mapped, "MADV_NORMAL")
        return cls(path, mapped, header, hparams, entries, metadata)

    def tensor_array(self, entry: Entry) -> np.ndarray:
        """A read-only view of one tensor's bytes: [rows, cols] float32 / float16 / uint16 (BF16 bits)
        for float dtypes, flat uint8 [nbytes] for block types."""
        typed = {"F32": "<f4", "F16": "<f2", "BF16": "<u2"}.get(entry.dtype_name)
        if typed is None:
            return np.frombuffer(self._map, np.uint8, entry.nbytes, entry.offset)
        count = entry.rows * entry.cols
        return np.frombuffer(self._map, typed, count, entry.offset).reshape(entry.rows, entry.cols)

    def close(self) -> None:
        """Unmap the file (deferred to garbage collection while tensor views live)."""
        try:
            self._map.close()
        except BufferError:
            pass   # arrays still export the buffer; the mmap is released with the last of them


def _advise(mapped: mmap.mmap, name: str) -> None:
    """Linux madvise on the whole mapping, where the platform has it (best effort)."""
    advice = getattr(mmap, name, None)
    if advice is not None:
        try:
            mapped.madvise(advice)
        except OSError:
            pass


def _zeros(b: mmap.mmap, start: int, end: int) -> bool:
    return b[start:end].count(0) == end - start


def _validate(where: str, b: mmap.mmap) -> tuple[dict, dict, list[Entry], dict]:
    """Every rule of FORMAT.md "Validation", in the order the C loader applies them."""
    size = len(b)
    fields = _HEADER.unpack_from(b, 0)
    h = dict(zip(("magic", "version", "header_size", "n_tensors", "hparams_size", "directory_offset",
                  "metadata_offset", "metadata_size", "data_offset", "n_layer", "n_expert"), fields))
    if h["magic"] != MAGIC:
        raise ModelError(f'{where}: magic: not a Colibri-native file (expected "COLIBRI\\0")')
    if h["version"] != VERSION:
        raise ModelError(f"{where}: version: {h['version']} is not supported (this reader reads version {VERSION})")
    if h["header_size"] != HEADER_BYTES:
        raise ModelError(f"{where}: header_size: expected {HEADER_BYTES}, got {h['header_size']}")
    if not HPARAMS_FIXED_BYTES <= h["hparams_size"] <= size - HEADER_BYTES:
        raise ModelError(f"{where}: hparams_size: {h['hparams_size']} is not in "
                         f"[{HPARAMS_FIXED_BYTES}, {size - HEADER_BYTES}] (the file's size)")
    directory_at = align64(HEADER_BYTES + h["hparams_size"])
    if h["directory_offset"] != directory_at:
        raise ModelError(f"{where}: directory_offset: expected {directory_at} (after the hparams, 64-aligned), "
                         f"got {h['directory_offset']}")
    n = h["n_tensors"]
    if n == 0 or directory_at > size or n > (size - directory_at) // ENTRY_BYTES:
        raise ModelError(f"{where}: n_tensors: {n} entries of {ENTRY_BYTES} bytes do not fit in the file "
                         f"({size} bytes)")
    metadata_at = directory_at + n * ENTRY_BYTES
    if h["metadata_offset"] != metadata_at:
        raise ModelError(f"{where}: metadata_offset: expected {metadata_at} (right after the directory), "
                         f"got {h['metadata_offset']}")
    if h["metadata_size"] > size - metadata_at:
        raise ModelError(f"{where}: metadata_size: {h['metadata_size']} bytes at offset {metadata_at} run past "
                         f"the end of the file ({size} bytes)")
    metadata_end = metadata_at + h["metadata_size"]
    data_at = align64(metadata_end)
    if h["data_offset"] != data_at or data_at > size:
        raise ModelError(f"{where}: data_offset: expected {data_at} (after the metadata, 64-aligned, inside the "
                         f"file), got {h['data_offset']}")
    hparams_end = HEADER_BYTES + h["hparams_size"]
    if not _zeros(b, hparams_end, directory_at) or not _zeros(b, metadata_end, data_at):
        raise ModelError(f"{where}: alignment padding between sections must be zero bytes")

    hp = decode_hparams(bytes(b[HEADER_BYTES:hparams_end]), where)
    if (h["n_layer"], h["n_expert"]) != (hp["n_layer"], hp["n_expert"]):
        raise ModelError(f"{where}: header n_layer/n_expert ({h['n_layer']}, {h['n_expert']}) differ from the "
                         f"hparams block's ({hp['n_layer']}, {hp['n_expert']})")
    check_hparams(hp, where)
    moe_layers = sum(1 for v in hp["layer_is_moe"] if v)
    if moe_layers * hp["n_expert"] * len(_EXPERT_KINDS) > n:   # before listing the tensors they call for
        raise ModelError(f"{where}: hparams: n_expert={hp['n_expert']}: {moe_layers} MoE layers x "
                         f"{hp['n_expert']} experts x {len(_EXPERT_KINDS)} matrices need more tensors than the "
                         f"directory's n_tensors={n}")
    metadata = parse_json_object(bytes(b[metadata_at:metadata_end]), f"{where}: metadata")

    expected = expected_tensors(hp)
    entries: list[Entry] = []
    end = metadata_end
    for i in range(n):
        e = Entry(*_ENTRY.unpack_from(b, directory_at + i * ENTRY_BYTES))
        _check_entry(where, i, e, entries[-1] if entries else None, hp, end, size)
        if not _zeros(b, end, e.offset):
            raise ModelError(f"{where}: tensor {i}: the alignment padding before it must be zero bytes")
        want = expected[i] if i < len(expected) else None
        got = (KINDS[e.kind], e.layer, e.expert)
        if want is None or got != want[:3]:
            expected_here = "no more tensors" if want is None else _describe(*want[:3])
            raise ModelError(f"{where}: tensor {i} ({e.describe()}): not used by this model "
                             f"(expected {expected_here})")
        if (e.rows, e.cols) != want[3:]:
            raise ModelError(f"{where}: tensor {i} ({e.describe()}): expected shape [{want[3]}, {want[4]}], "
                             f"got [{e.rows}, {e.cols}]")
        if DTYPES[e.dtype][1] > 1 and got[0] in _native.vector_kinds():
            raise ModelError(f"{where}: tensor {i} ({e.describe()}): dtype {e.dtype_name} is for matrices; "
                             "norms and biases must be F32, F16 or BF16")
        entries.append(e)
        end = e.offset + e.nbytes
    if end != size:
        raise ModelError(f"{where}: {size - end} bytes after the last tensor "
                         f"(the file must end where it ends, at {end})")
    if len(entries) < len(expected):
        raise ModelError(f"{where}: tensor {_describe(*expected[len(entries)][:3])} is missing from the directory")
    return h, hp, entries, metadata


def _check_entry(where: str, i: int, e: Entry, prev: Entry | None, hp: dict, end: int, size: int) -> None:
    """Range, order, size, alignment and placement of directory entry i (prev: entry i-1)."""
    if not 0 <= e.kind < len(KINDS):
        raise ModelError(f"{where}: tensor {i}: kind {e.kind} out of range [0, {len(KINDS)})")
    name = KINDS[e.kind]
    if e.kind <= KINDS.index("OUTPUT"):
        if e.layer != -1:
            raise ModelError(f"{where}: tensor {i} ({name}): layer must be -1, got {e.layer}")
    elif not 0 <= e.layer < hp["n_layer"]:
        raise ModelError(f"{where}: tensor {i} ({name}): layer {e.layer} out of range [0, {hp['n_layer']})")
    if name in _EXPERT_KINDS:
        if not 0 <= e.expert < hp["n_expert"]:
            raise ModelError(f"{where}: tensor {i} ({name}): expert {e.expert} out of range [0, {hp['n_expert']})")
    elif e.expert != -1:
        raise ModelError(f"{where}: tensor {i} ({name}): expert must be -1, got {e.expert}")
    if prev is not None and prev.order_key() >= e.order_key():
        raise ModelError(f"{where}: tensor {i} ({e.describe()}): out of directory order or repeated "
                         f"(after {prev.describe()})")
    if e.dtype not in DTYPES:
        raise ModelError(f"{where}: tensor {i}: unknown dtype {e.dtype}")
    dtype, block_elems, _ = DTYPES[e.dtype]
    if e.rows < 1 or e.cols < 1 or e.cols % block_elems:
        raise ModelError(f"{where}: tensor {i}: shape [{e.rows}, {e.cols}] is not valid for dtype {dtype}")
    if e.nbytes != tensor_nbytes(dtype, e.rows, e.cols):
        raise ModelError(f"{where}: tensor {i}: nbytes {e.nbytes} does not match shape [{e.rows}, {e.cols}] "
                         f"of {dtype}")
    if e.offset % ALIGN:
        raise ModelError(f"{where}: tensor {i}: offset {e.offset} is not a multiple of {ALIGN}")
    if e.offset < end:
        raise ModelError(f"{where}: tensor {i}: offset {e.offset} overlaps the "
                         f"{'previous tensor' if prev else 'metadata'} (which ends at {end})")
    if e.offset + e.nbytes > size:
        raise ModelError(f"{where}: tensor {i}: bytes [{e.offset}, {e.offset} + {e.nbytes}) run past the end of "
                         f"the file ({size} bytes)")
    if e.offset != align64(end):
        raise ModelError(f"{where}: tensor {i}: offset {e.offset} leaves a gap (tensors are packed in directory "
                         f"order at 64-byte boundaries: expected {align64(end)})")


# ==================================================================================== loading through C

class NativeFileModel(ModelHandle):
    """A colibri_model loaded by the C core straight from a native file (zero-copy mmap).

    `handle` is the colibri_model*, `metadata` the file's metadata object. Same close()
    contract as native_model.NativeModel (ModelHandle), so colibri.Model can own it.
    """

    def __init__(self, path: str | os.PathLike, paged: bool = False):
        import ctypes

        lib = _native.lib()
        self.path = Path(path)
        handle = lib.colibri_model_load_flags(os.fsencode(self.path), _native.LOAD_PAGED if paged else 0)
        if not handle:
            raise ModelError(_native.last_error())
        self.handle = handle
        try:
            data, length = ctypes.c_void_p(), ctypes.c_size_t()
            if lib.colibri_model_metadata(handle, ctypes.byref(data), ctypes.byref(length)):
                raise ModelError(f"{self.path}: {_native.last_error()}")
            self.metadata = parse_json_object(ctypes.string_at(data.value, length.value), f"{self.path}: metadata")
        except BaseException:
            self.close()
            raise


def side_files(metadata: dict, where: str) -> dict[str, str]:
    """metadata["files"]: side-file name -> text, names restricted to SIDE_FILES and chat_templates/*.jinja."""
    files = metadata.get("files", {})
    if not isinstance(files, dict):
        raise ModelError(f"{where}: metadata: 'files' must be an object of file name -> text")
    for name, text in files.items():
        template = name.startswith(CHAT_TEMPLATE_DIR + "/") and name.endswith(".jinja") and name.count("/") == 1
        if (name not in SIDE_FILES and not template) or ".." in name or not isinstance(text, str):
            raise ModelError(f"{where}: metadata: files[{name!r}] is not an allowed side file with text content")
    return files


def tokenizer_from_metadata(metadata: dict, where: str):
    """The Tokenizer the source directory had (Tokenizer.from_dir over the embedded side files),
    or None when the file carries no tokenizer.json."""
    from ..tokenizer import Tokenizer

    files = side_files(metadata, where)
    if "tokenizer.json" not in files:
        return None
    with tempfile.TemporaryDirectory(prefix="colibri-tok-") as tmp:
        for name, text in files.items():
            target = Path(tmp) / name
            target.parent.mkdir(exist_ok=True)
            target.write_text(text, encoding="utf-8")
        return Tokenizer.from_dir(tmp)



def open_native(path: str | os.PathLike):
    """(file, config, weights, tokenizer, generation_config) of a native file, like the loader's other
    openers: the file validated and mapped by NativeFile, ModelConfig / tensor slots / tokenizer /
    generation defaults from the embedded side files through the same code a Hugging Face directory
    takes, weights as zero-copy views [(TensorSlot, WeightRef)] in slot order."""
    from ..models import ConfigReader, architecture, tensor_slots

    file = NativeFile.open(path)
    try:
        where = str(file.path)
        files = side_files(file.metadata, where)
        if "config.json" not in files:
            raise ModelError(f"{where}: metadata: files has no 'config.json'")
        source = f"{where}: config.json"
        raw_config = parse_json_object(files["config.json"].encode("utf-8"), source)
        arch = architecture(raw_config.get("model_type"), source)
        config = arch.read_config(ConfigReader(raw_config, source))
        by_key = {(e.kind_name, e.layer, e.expert): e for e in file.entries}
        weights = []
        for slot in tensor_slots(arch, config, limit=len(file.entries), source=source):
            entry = by_key.get((slot.kind, slot.layer, slot.expert))
            if entry is None or (entry.rows * entry.cols != int(np.prod(slot.shape))):
                raise ModelError(f"{where}: tensor {slot.kind} (layer {slot.layer}, expert {slot.expert}) does not "
                                 f"match config.json's {list(slot.shape)}")
            weights.append((slot, WeightRef(entry.dtype_name, slot.shape, entry.nbytes, file.tensor_array(entry))))
        generation = files.get("generation_config.json")
        generation_config = (parse_json_object(generation.encode("utf-8"), f"{where}: generation_config.json")
                             if generation is not None else None)
        return file, config, weights, tokenizer_from_metadata(file.metadata, where), generation_config
    except BaseException:
        file.close()
        raise
