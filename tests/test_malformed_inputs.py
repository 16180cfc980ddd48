"""Every malformed model directory or safetensors file is refused with one clear ModelError line.

Files are written byte by byte (struct.pack('<Q', n) + header + data) so each case breaks exactly
one rule.
"""
from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from colibri.errors import ModelError
from colibri.formats.hf_dir import HFCheckpoint

CONFIG = b'{"model_type": "llama"}'
INDEX = "model.safetensors.index.json"


def entry(dtype: str, shape, begin: int, end: int) -> dict:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


GOOD_HEADER = {"a": entry("F32", [2], 0, 8), "b": entry("F16", [2], 8, 12)}
GOOD_DATA = bytes(12)


def st_bytes(header, data: bytes = GOOD_DATA, header_len: int | None = None) -> bytes:
    """A safetensors file: u64 LE header length + header (a dict as JSON, or raw bytes) + data."""
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(raw) if header_len is None else header_len) + raw + data


def model_dir(root: Path, files: dict[str, bytes | str], config: bytes | None = CONFIG) -> Path:
    """root/m with config.json and the given files; returns the directory."""
    d = root / "m"
    d.mkdir()
    if config is not None:
        (d / "config.json").write_bytes(config)
    for name, content in files.items():
        (d / name).write_bytes(content.encode() if isinstance(content, str) else content)
    return d


def weights(content: bytes):
    """Case builder: a directory whose model.safetensors holds `content`."""
    return lambda root: model_dir(root, {"model.safetensors": content})


def header(h, data: bytes = GOOD_DATA, header_len: int | None = None):
    return weights(st_bytes(h, data, header_len))


def with_tensor(name: str, info) -> dict:
    return {**GOOD_HEADER, name: info}


def sharded(weight_map, shards: dict[str, bytes] | None = None):
    """Case builder: an index with `weight_map` plus shard files (default: one good shard s1)."""
    shards = {"s1.safetensors": st_bytes(GOOD_HEADER)} if shards is None else shards
    return lambda root: model_dir(root, {INDEX: json.dumps({"weight_map": weight_map}), **shards})


def index_text(text: str):
    return lambda root: model_dir(root, {INDEX: text, "s1.safetensors": st_bytes(GOOD_HEADER)})


def symlinked_shard(root: Path) -> Path:
    (root / "outside.safetensors").write_bytes(st_bytes(GOOD_HEADER))
    d = sharded({"a": "link.safetensors", "b": "link.safetensors"}, shards={})(root)
    (d / "link.safetensors").symlink_to(root / "outside.safetensors")
    return d


def symlinked_single_file(root: Path) -> Path:
    (root / "outside.safetensors").write_bytes(st_bytes(GOOD_HEADER))
    d = model_dir(root, {})
    (d / "model.safetensors").symlink_to("../outside.safetensors")
    return d


def weights_is_a_directory(root: Path) -> Path:
    d = model_dir(root, {})
    (d / "model.safetensors").mkdir()
    return d


def a_file(root: Path) -> Path:
    (root / "model.safetensors").write_bytes(st_bytes(GOOD_HEADER))
    return root / "model.safetensors"


HALF = st_bytes({"a": entry("F32", [2], 0, 8)}, bytes(8))
OTHER_HALF = st_bytes({"b": entry("F16", [2], 0, 4)}, bytes(4))

CASES = [
    # --- the directory -----------------------------------------------------------------
    ("missing-dir", lambda root: root / "nope", r"nope: no such directory"),
    ("file-not-dir", a_file, r"is a file, expected a model directory"),
    ("no-config", lambda root: model_dir(root, {"model.safetensors": st_bytes(GOOD_HEADER)}, config=None),
     r"config\.json: missing"),
    ("config-not-json", lambda root: model_dir(root, {}, config=b'{"model_type": '), r"config\.json: not valid JSON"),
    ("config-a-list", lambda root: model_dir(root, {}, config=b"[1, 2]"),
     r"config\.json: expected a JSON object, got list"),
    ("config-not-utf8", lambda root: model_dir(root, {}, config=b'{"a": "\xff"}'), r"config\.json: not valid UTF-8"),
    ("no-weights", lambda root: model_dir(root, {"README.md": "hi"}), r"no weights: expected model\.safetensors"),
    ("only-pickle", lambda root: model_dir(root, {"pytorch_model.bin": b"\x80\x04"}),
     r"only PyTorch pickle checkpoints \(pytorch_model\.bin\); Colibri never unpickles"),
    ("only-pt", lambda root: model_dir(root, {"consolidated.00.pth": b"\x80\x04"}), r"pickle checkpoints"),
    ("shards-without-index", lambda root: model_dir(root, {"model-00001-of-00002.safetensors": st_bytes(GOOD_HEADER)}),
     r"found model-00001-of-00002\.safetensors but neither"),
    ("weights-a-directory", weights_is_a_directory, r"model\.safetensors: not a regular file"),
    # --- the 8-byte length and the header ------------------------------------------------
    ("empty-file", weights(b""), r"0 bytes, too small"),
    ("file-under-8-bytes", weights(b"\x02\x00\x00"), r"3 bytes, too small"),
    ("header-len-2**63", header(GOOD_HEADER, header_len=2**63), r"header length 9223372036854775808 exceeds"),
    ("header-len-over-cap", header(GOOD_HEADER, header_len=100_000_001), r"exceeds the 100000000-byte limit"),
    ("header-len-past-file", header(GOOD_HEADER, header_len=10_000), r"header length 10000 runs past the end"),
    ("header-not-utf8", header(b'{"a\xff": 1}'), r"header: not valid UTF-8 \(byte 0xff"),
    ("header-not-json", header(b"{not json}"), r"header: not valid JSON"),
    ("header-nan-constant", header(b'{"a": NaN}'), r"header: not valid JSON"),
    ("header-a-list", header(b"[1, 2, 3]"), r"header: expected a JSON object, got list"),
    ("header-duplicate-key",
     header(b'{"a": ' + json.dumps(entry("F32", [2], 0, 8)).encode() + b', "a": '
            + json.dumps(entry("F16", [2], 8, 12)).encode() + b"}"), r"header: duplicate key 'a'"),
    ("metadata-int-value", header({"__metadata__": {"format": 1}, **GOOD_HEADER}), r"__metadata__ must be an object"),
    ("metadata-a-list", header({"__metadata__": ["pt"], **GOOD_HEADER}), r"__metadata__ must be an object"),
    ("no-tensors", header({"__metadata__": {}}, data=b""), r"no tensors"),
    # --- tensor entries -------------------------------------------------------------------
    ("entry-not-object", header(with_tensor("c", [1, 2])), r"tensor 'c': expected an object"),
    ("entry-missing-offsets", header(with_tensor("c", {"dtype": "F32", "shape": [0]})),
     r"tensor 'c': missing data_offsets"),
    ("entry-extra-key", header(with_tensor("c", {**entry("F32", [0], 12, 12), "align": 4})),
     r"tensor 'c': unexpected key\(s\) 'align'"),
    ("unknown-dtype", header(with_tensor("a", entry("F33", [2], 0, 8))), r"tensor 'a': unknown dtype 'F33'"),
    ("dtype-not-string", header(with_tensor("a", entry(4, [2], 0, 8))), r"tensor 'a': unknown dtype 4"),
    ("shape-negative", header(with_tensor("a", entry("F32", [-2], 0, 8))), r"tensor 'a': shape \[-2\] is not a list"),
    ("shape-float", header(with_tensor("a", entry("F32", [2.0], 0, 8))), r"tensor 'a': shape \[2.0\] is not a list"),
    ("shape-bool", header(with_tensor("a", entry("F32", [True, 2], 0, 8))), r"shape \[true, 2\] is not a list"),
    ("shape-a-string", header(with_tensor("a", entry("F32", "2", 0, 8))), r"shape \"2\" is not a list"),
    ("shape-rank-9", header(with_tensor("a", entry("F32", [1] * 8 + [2], 0, 8))), r"rank 9, at most 8"),
    ("shape-huge-zero-size", header(with_tensor("c", entry("F32", [0, 2**40, 2**40], 12, 12))), r"is too large"),
    ("offsets-reversed", header(with_tensor("b", entry("F16", [2], 12, 8))), r"\[12, 8\]: expected 0 <= begin <= end"),
    ("offsets-negative", header(with_tensor("a", entry("F32", [2], -8, 0))), r"expected 0 <= begin <= end"),
    ("offsets-not-a-pair", header(with_tensor("a", {"dtype": "F32", "shape": [2], "data_offsets": [0, 4, 8]})),
     r"data_offsets \[0, 4, 8\] is not a pair of integers"),
    ("offsets-past-end", header(with_tensor("b", entry("F16", [2], 8, 16)), data=bytes(12)),
     r"tensor 'b': data_offsets \[8, 16\] run past the end of the data section \(12 bytes"),
    ("size-mismatch", header(with_tensor("a", entry("F32", [3], 0, 8))),
     r"tensor 'a': shape \[3\] of F32 needs 12 bytes, data_offsets \[0, 8\] hold 8"),
    ("sub-byte-partial", header(with_tensor("c", entry("F4", [3], 12, 13)), data=bytes(13)),
     r"3 F4 elements do not fill a whole number of bytes"),
    ("overlap", header({"a": entry("F32", [2], 0, 8), "b": entry("F32", [2], 4, 12)}),
     r"tensor 'b': data_offsets \[4, 12\] overlap tensor 'a'"),
    ("gap", header({"a": entry("F32", [2], 0, 8), "b": entry("F16", [2], 10, 14)}, data=bytes(14)),
     r"tensor 'b': gap of 2 bytes"),
    ("trailing-bytes", header(GOOD_HEADER, data=bytes(16)), r"4 bytes after the last tensor"),
    ("truncated-in-data", weights(st_bytes(GOOD_HEADER)[:-3]), r"run past the end of the data section .*truncated"),
    # --- sharded checkpoints ----------------------------------------------------------
    ("index-not-json", index_text('{"weight_map": {'), r"index\.json: not valid JSON"),
    ("index-a-list", index_text("[]"), r"index\.json: expected a JSON object, got list"),
    ("index-no-weight-map", index_text('{"metadata": {}}'), r"index\.json: weight_map must be a non-empty object"),
    ("index-empty-weight-map", index_text('{"weight_map": {}}'), r"weight_map must be a non-empty object"),
    ("shard-dotdot", sharded({"a": "../x.safetensors"}),
     r"weight_map\['a'\]: shard name '\.\./x\.safetensors' escapes"),
    ("shard-absolute", sharded({"a": "/etc/passwd"}), r"shard name '/etc/passwd' is an absolute path"),
    ("shard-subdir", sharded({"a": "sub/s1.safetensors"}), r"shard name 'sub/s1\.safetensors' is not a plain file"),
    ("shard-empty-name", sharded({"a": ""}), r"shard name '' is not a non-empty string"),
    ("shard-not-string", sharded({"a": 3}), r"shard name 3 is not a non-empty string"),
    ("shard-symlink-escapes", symlinked_shard, r"link\.safetensors: resolves to .*outside the model directory"),
    ("single-symlink-escapes", symlinked_single_file, r"model\.safetensors: resolves to .*outside the model directory"),
    ("shard-missing", sharded({"a": "s1.safetensors", "b": "s2.safetensors"}),
     r"s2\.safetensors: shard listed in model\.safetensors\.index\.json does not exist"),
    ("tensor-missing-from-shard", sharded({"a": "s1.safetensors", "b": "s1.safetensors", "z": "s1.safetensors"}),
     r"tensor 'z' missing from shard 's1\.safetensors'"),
    ("tensor-in-wrong-shard", sharded({"a": "s2.safetensors", "b": "s1.safetensors"},
                                      {"s1.safetensors": HALF, "s2.safetensors": OTHER_HALF}),
     r"tensor 'a' missing from shard 's2\.safetensors'"),
    ("tensor-in-two-shards", sharded({"a": "s1.safetensors", "b": "s2.safetensors"},
                                     {"s1.safetensors": st_bytes(GOOD_HEADER), "s2.safetensors": OTHER_HALF}),
     r"s2\.safetensors: tensor 'b' is also in .*s1\.safetensors"),
    ("tensor-not-in-index", sharded({"a": "s1.safetensors"}),
     r"s1\.safetensors: tensor 'b' is not listed in model\.safetensors\.index\.json"),
]


@pytest.mark.parametrize("build, match", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_malformed_input_is_refused(tmp_path, build, match):
    path = build(tmp_path)
    with pytest.raises(ModelError, match=match) as info:
        HFCheckpoint.open(path)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("build", [weights(st_bytes(GOOD_HEADER)),
                                   sharded({"a": "s1.safetensors", "b": "s1.safetensors"})],
                         ids=["single-file", "sharded"])
def test_good_baseline_opens(tmp_path, build):
    """The cases above each break one rule of these valid directories."""
    ckpt = HFCheckpoint.open(build(tmp_path))
    assert ckpt.names() == ["a", "b"] and ckpt.total_bytes == 12
    ckpt.close()


def test_every_truncation_and_header_byte_flip_is_handled(tmp_path):
    """No prefix of a valid file and no single corrupted header byte escapes as anything but ModelError."""
    good = st_bytes(GOOD_HEADER)
    d = model_dir(tmp_path, {})
    path = d / "model.safetensors"
    for cut in range(len(good)):
        path.write_bytes(good[:cut])
        with pytest.raises(ModelError):
            HFCheckpoint.open(d)
    for pos in range(len(good) - len(GOOD_DATA)):
        for value in (0x00, 0x22, 0x39, 0x7D, 0xFF):
            path.write_bytes(good[:pos] + bytes([value]) + good[pos + 1:])
            try:
                HFCheckpoint.open(d).close()
            except ModelError as e:
                assert "\n" not in str(e)
