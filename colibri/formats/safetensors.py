"""Read .safetensors files: mmapped, zero-copy, every header field validated.

Layout (https://github.com/huggingface/safetensors):

    8 bytes   N, u64 little-endian: header length
    N bytes   header: UTF-8 JSON object
              {"__metadata__": {str: str}?,  name: {"dtype", "shape", "data_offsets": [begin, end]}, ...}
    rest      data section; data_offsets count from its start; the tensors, sorted by offset,
              tile it exactly (no gaps, no overlap, nothing after the last one)

Every violation raises ModelError with one line naming the file, the tensor or field, and what was
expected. Tensor data is never copied: each TensorView.array is a read-only numpy view into the mmap.
"""
from __future__ import annotations

import json
import math
import mmap
import os
from dataclasses import dataclass

import numpy as np

from ..errors import ModelError
from .files import open_regular
from .mapping import map_weights, mapping_address

MAX_HEADER_BYTES = 100_000_000   # the safetensors crate's cap (MAX_HEADER_SIZE)
MAX_RANK = 8
MAX_TENSOR_BYTES = 1 << 62       # bound on prod(max(dim, 1)) * element size, so numpy can always view it

# Every dtype the safetensors format defines (its Rust `Dtype` enum) -> bits per element.
DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32,
    "I64": 64, "U64": 64, "F64": 64, "C64": 64,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}

# numpy element type of TensorView.array. BF16 is exposed as its raw bits (uint16). Types numpy
# lacks (FP8, FP6, FP4) are exposed as raw bytes (uint8); sub-byte ones as a flat [nbytes] array.
NUMPY_DTYPE = {
    "BOOL": np.dtype(np.bool_), "U8": np.dtype("u1"), "I8": np.dtype("i1"),
    "I16": np.dtype("<i2"), "U16": np.dtype("<u2"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2"),
    "I32": np.dtype("<i4"), "U32": np.dtype("<u4"), "F32": np.dtype("<f4"),
    "I64": np.dtype("<i8"), "U64": np.dtype("<u8"), "F64": np.dtype("<f8"), "C64": np.dtype("<c8"),
}
RAW_BYTES = np.dtype("u1")

# Non-finite bit patterns: a value is NaN/Inf iff (bits & mask) == pattern, read through an unsigned
# integer view of the given width. Integer, boolean, FP6 and FP4 types have no NaN/Inf.
NONFINITE_BITS = {
    "F64": (np.dtype("<u8"), 0x7FF0000000000000, 0x7FF0000000000000),
    "F32": (np.dtype("<u4"), 0x7F800000, 0x7F800000),
    "C64": (np.dtype("<u4"), 0x7F800000, 0x7F800000),   # counts real and imaginary parts separately
    "F16": (np.dtype("<u2"), 0x7C00, 0x7C00),
    "BF16": (np.dtype("<u2"), 0x7F80, 0x7F80),
    "F8_E5M2": (RAW_BYTES, 0x7C, 0x7C),
    "F8_E4M3": (RAW_BYTES, 0x7F, 0x7F),                   # e4m3fn: NaN only, no Inf
    "F8_E4M3FNUZ": (RAW_BYTES, 0xFF, 0x80),
    "F8_E5M2FNUZ": (RAW_BYTES, 0xFF, 0x80),
    "F8_E8M0": (RAW_BYTES, 0xFF, 0xFF),
}


@dataclass(frozen=True)
class TensorView:
    """One tensor of a mapped file. `array` is a read-only view into the mmap (never a copy).

    Offsets need not be aligned for the element type: numpy views unaligned memory correctly
    (array.flags.aligned tells which); files written by the safetensors package are aligned.
    """
    name: str
    dtype: str                 # safetensors dtype string: "F32", "BF16", ...
    shape: tuple[int, ...]
    file: str                  # path of the file holding it
    offset: int                # absolute byte offset of the data inside the file
    nbytes: int
    array: np.ndarray          # [*shape] (flat [nbytes] uint8 for F4/F6 types)

    @property
    def address(self) -> int:
        """Address of the first data byte, valid while the file stays mapped."""
        return self.array.ctypes.data


class _DuplicateKey(Exception):
    pass


def _reject_duplicates(pairs: list) -> dict:
    """json object_pairs_hook: a dict, or _DuplicateKey when a key repeats."""
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise _DuplicateKey(key)
        obj[key] = value
    return obj


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def parse_json_object(raw: bytes, where: str) -> dict:
    """Decode strict UTF-8 JSON text that must be an object with no repeated keys (NaN/Infinity
    rejected); anything else raises ModelError prefixed with `where`."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ModelError(f"{where}: not valid UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start})") from None
    try:
        obj = json.loads(text, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant)
    except _DuplicateKey as e:
        raise ModelError(f"{where}: duplicate key {e.args[0]!r}") from None
    except json.JSONDecodeError as e:
        raise ModelError(f"{where}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except (ValueError, RecursionError) as e:   # NaN/Infinity, >4300-digit ints, absurd nesting
        raise ModelError(f"{where}: not valid JSON ({str(e).splitlines()[0]})") from None
    if not isinstance(obj, dict):
        raise ModelError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    return obj


@dataclass(frozen=True)
class _Entry:
    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int                 # relative to the data section
    end: int


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_entry(name: str, info, data_len: int, where: str) -> _Entry:
    """Validate one header entry against the data section length; `where` is "file: tensor 'x'"."""
    if not isinstance(info, dict):
        raise ModelError(f"{where}: expected an object with dtype, shape and data_offsets, "
                         f"got {type(info).__name__}")
    keys = set(info)
    if keys != {"dtype", "shape", "data_offsets"}:
        missing = sorted({"dtype", "shape", "data_offsets"} - keys)
        extra = sorted(keys - {"dtype", "shape", "data_offsets"})
        problem = f"missing {', '.join(missing)}" if missing else f"unexpected key(s) {', '.join(map(repr, extra))}"
        raise ModelError(f"{where}: {problem} (expected exactly dtype, shape, data_offsets)")
    dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise ModelError(f"{where}: unknown dtype {dtype!r} (expected one of {', '.join(DTYPE_BITS)})")
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        raise ModelError(f"{where}: shape {json.dumps(shape)[:80]} is not a list of non-negative integers")
    if len(shape) > MAX_RANK:
        raise ModelError(f"{where}: shape has rank {len(shape)}, at most {MAX_RANK} supported")
    if math.prod(max(d, 1) for d in shape) * DTYPE_BITS[dtype] > MAX_TENSOR_BYTES * 8:
        raise ModelError(f"{where}: shape {shape} is too large")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(o) for o in offsets)):
        raise ModelError(f"{where}: data_offsets {json.dumps(offsets)[:80]} is not a pair of integers [begin, end]")
    begin, end = offsets
    if not 0 <= begin <= end:
        raise ModelError(f"{where}: data_offsets [{begin}, {end}]: expected 0 <= begin <= end")
    if end > data_len:
        raise ModelError(f"{where}: data_offsets [{begin}, {end}] run past the end of the data section "
                         f"({data_len} bytes; file truncated?)")
    bits = math.prod(shape) * DTYPE_BITS[dtype]
    if bits % 8:
        raise ModelError(f"{where}: {math.prod(shape)} {dtype} elements do not fill a whole number of bytes")
    if bits // 8 != end - begin:
        raise ModelError(f"{where}: shape {shape} of {dtype} needs {bits // 8} bytes, "
                         f"data_offsets [{begin}, {end}] hold {end - begin}")
    return _Entry(name, dtype, tuple(shape), begin, end)


def _check_tiling(entries: list[_Entry], data_len: int, path: str) -> None:
    """The tensors, sorted by offset, must cover [0, data_len) exactly: no overlap, no gap, no tail."""
    covered, previous = 0, None
    for e in sorted(entries, key=lambda e: (e.begin, e.end)):
        if e.begin < covered:
            raise ModelError(f"{path}: tensor {e.name!r}: data_offsets [{e.begin}, {e.end}] overlap "
                             f"tensor {previous.name!r} [{previous.begin}, {previous.end}]")
        if e.begin > covered:
            raise ModelError(f"{path}: tensor {e.name!r}: gap of {e.begin - covered} bytes before "
                             f"data_offsets [{e.begin}, {e.end}] (expected begin {covered})")
        covered, previous = e.end, e
    if covered != data_len:
        raise ModelError(f"{path}: {data_len - covered} bytes after the last tensor "
                         f"(data section is {data_len} bytes, tensors cover {covered})")


def _parse_header(mapped: mmap.mmap, size: int, path: str) -> tuple[dict, list[_Entry], int]:
    """(metadata, entries, absolute start of the data section) of a mapped file of `size` bytes."""
    header_len = int.from_bytes(mapped[:8], "little")
    if header_len > MAX_HEADER_BYTES:
        raise ModelError(f"{path}: header length {header_len} exceeds the {MAX_HEADER_BYTES}-byte limit")
    if header_len > size - 8:
        raise ModelError(f"{path}: header length {header_len} runs past the end of the file ({size} bytes)")
    header = parse_json_object(mapped[8:8 + header_len], f"{path}: header")
    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise ModelError(f"{path}: header: __metadata__ must be an object of string values")
    data_start = 8 + header_len
    data_len = size - data_start
    entries = [_parse_entry(name, info, data_len, f"{path}: tensor {name!r}") for name, info in header.items()]
    if not entries:
        raise ModelError(f"{path}: no tensors")
    _check_tiling(entries, data_len, path)
    return metadata, entries, data_start


def _view(mapped: mmap.mmap, entry: _Entry, data_start: int, path: str) -> TensorView:
    """Zero-copy read-only numpy view of one validated entry."""
    offset, nbytes = data_start + entry.begin, entry.end - entry.begin
    np_dtype = NUMPY_DTYPE.get(entry.dtype, RAW_BYTES)
    array = np.frombuffer(mapped, dtype=np_dtype, count=nbytes // np_dtype.itemsize, offset=offset)
    if DTYPE_BITS[entry.dtype] % 8 == 0:
        array = array.reshape(entry.shape)
    return TensorView(entry.name, entry.dtype, entry.shape, path, offset, nbytes, array)


class SafetensorsFile:
    """One mmapped, fully validated .safetensors file.

    tensors: name -> TensorView, metadata: the header's __metadata__ (str -> str, {} if absent).

    Lifetime contract: the arrays (and addresses) stay valid until close(). Call close() only once
    nothing uses them any more; if some array is still referenced at that point the mapping is not
    torn down under it (it lives until the last array is garbage-collected), but raw addresses
    handed to native code must be treated as dangling after close().
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._mmap = _map_file(self.path)
        try:
            self.metadata, entries, data_start = _parse_header(self._mmap, len(self._mmap), self.path)
            self.tensors = {e.name: _view(self._mmap, e, data_start, self.path) for e in entries}
        except BaseException:
            self._mmap.close()
            raise

    def mapping(self) -> tuple[str, int, int]:
        """(path, address, size) of the file's mapping, from its byte 0."""
        return self.path, mapping_address(self._mmap), len(self._mmap)

    def close(self) -> None:
        """Drop the views and unmap the file (deferred to garbage collection while views live)."""
        self.tensors = {}
        try:
            self._mmap.close()
        except BufferError:
            pass   # arrays still export the buffer; the mmap is released with the last of them


def _map_file(path: str) -> mmap.mmap:
    """Read-only mmap of a regular file of at least 8 bytes."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if size < 8:
            raise ModelError(f"{path}: {size} bytes, too small for a safetensors file "
                             "(expected at least the 8-byte header length)")
        return map_weights(fd)
    except OSError as e:
        raise ModelError(f"{path}: cannot map ({e.strerror or e})") from None
    finally:
        os.close(fd)


def scan_nonfinite(view: TensorView, chunk_elems: int = 1 << 22) -> int:
    """Number of NaN/Inf values in a tensor (0 for types without them), read in chunks of
    `chunk_elems` elements so temporaries stay small whatever the tensor size."""
    if view.dtype not in NONFINITE_BITS or view.nbytes == 0:
        return 0
    bits_dtype, mask, pattern = NONFINITE_BITS[view.dtype]
    bits = view.array.reshape(-1).view(bits_dtype)   # bits: [n] raw words, still the mmap
    return sum(int(np.count_nonzero((bits[i:i + chunk_elems] & mask) == pattern))
               for i in range(0, bits.size, chunk_elems))
