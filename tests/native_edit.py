"""Edit a Colibri-native file's bytes the way a hostile writer would (tests and fuzz seeds).

Each helper returns new bytes that still pass the layout rules of docs/FORMAT.md (offsets,
padding, sizes), so the loader's deeper checks are what they exercise.
"""
from __future__ import annotations

import json
import struct

_HEADER = struct.Struct("<8sIIIIQQQQii")
_ENTRY = struct.Struct("<iiiiqqQQ")
HPARAMS_AT = 64
# hparams field -> byte offset inside the file (FORMAT.md "Hparams block", at offset 64)
HPARAM_OFFSET = {name: HPARAMS_AT + 4 * i for i, name in enumerate((
    "n_vocab", "n_embd", "n_layer", "n_head", "n_head_kv", "head_dim", "n_ff", "n_expert",
    "n_expert_used", "n_ff_expert", "n_ff_shared", "shared_gated", "router_renorm", "qk_norm",
    "attn_bias", "tied_embeddings", "sliding_window"))}


def _align64(n: int) -> int:
    return (n + 63) // 64 * 64


def metadata(data: bytes) -> dict:
    """The file's metadata object."""
    h = _HEADER.unpack_from(data, 0)
    return json.loads(bytes(data[h[6]:h[6] + h[7]]))


def with_metadata(data: bytes, meta: dict | bytes) -> bytes:
    """The same file with another metadata block: data moved, header and directory offsets fixed."""
    raw = meta if isinstance(meta, bytes) else json.dumps(meta, ensure_ascii=False).encode("utf-8")
    h = list(_HEADER.unpack_from(data, 0))
    n, directory_at, metadata_at, old_data_at = h[3], h[5], h[6], h[8]
    new_data_at = _align64(metadata_at + len(raw))
    shift = new_data_at - old_data_at
    h[7], h[8] = len(raw), new_data_at
    out = bytearray(_HEADER.pack(*h) + bytes(data[64:metadata_at]))
    for i in range(n):
        e = list(_ENTRY.unpack_from(out, directory_at + 48 * i))
        e[6] += shift
        _ENTRY.pack_into(out, directory_at + 48 * i, *e)
    out += raw + bytes(new_data_at - metadata_at - len(raw)) + bytes(data[old_data_at:])
    return bytes(out)


def with_config(data: bytes, **changes) -> bytes:
    """The same file with the embedded config.json's fields changed (binary hparams untouched)."""
    meta = metadata(data)
    config = json.loads(meta["files"]["config.json"])
    config.update(changes)
    meta["files"]["config.json"] = json.dumps(config)
    return with_metadata(data, meta)


def with_side_file(data: bytes, name: str, text: str) -> bytes:
    """The same file with one embedded side file (metadata["files"][name]) replaced or added."""
    meta = metadata(data)
    meta["files"][name] = text
    return with_metadata(data, meta)


def with_hparam(data: bytes, name: str, value: int) -> bytes:
    """The same file with one integer hparams field rewritten (and the header's copy of
    n_layer / n_expert kept equal)."""
    out = bytearray(data)
    struct.pack_into("<i", out, HPARAM_OFFSET[name], value)
    if name in ("n_layer", "n_expert"):
        struct.pack_into("<i", out, 56 if name == "n_layer" else 60, value)
    return bytes(out)
