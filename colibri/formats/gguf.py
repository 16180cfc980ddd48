"""Read GGUF files (llama.cpp's format): mmapped, zero-copy, every header field validated.

Layout (versions 2 and 3, little-endian; https://github.com/ggml-org/ggml/blob/master/docs/gguf.md):

    magic "GGUF" | u32 version | u64 tensor_count | u64 kv_count
    kv_count x    string key | u32 value type | value
    tensor_count x string name | u32 n_dims | u64 dims[n_dims] | u32 ggml type | u64 offset
    padding to `general.alignment` (default 32), then the data section; offsets count from its start

    string = u64 byte length + UTF-8 bytes; array = u32 element type + u64 count + elements.

    gguf = GGUFFile("model.gguf")
    gguf.metadata["general.architecture"]        # "llama"
    t = gguf.tensors["blk.0.attn_q.weight"]      # t.shape is numpy/HF order, t.dims GGUF order
    t.array                                      # read-only uint8 view of the raw bytes in the mmap
    gguf.close()

Parsing reads only the header (struct.unpack_from on the mmap, each read bounds-checked), so it is
O(header) whatever the file size. Counts and lengths are checked against the bytes that remain
before any loop or allocation they drive; sizes are computed with Python ints and capped. Every
violation raises ModelError with one line naming the file and the field, key or tensor at fault.
"""
from __future__ import annotations

import math
import mmap
import os
import struct
from dataclasses import dataclass

import numpy as np

from ..dtypes import DTYPES
from ..errors import ModelError
from .files import open_regular
from .mapping import map_weights, mapping_address

__all__ = ["GGMLType", "GGML_TYPES", "GGUFTensor", "GGUFFile"]

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_ALIGNMENT = 1 << 20
MAX_KEY_BYTES = 65535          # metadata keys and tensor names
MAX_STRING_BYTES = 16 << 20    # string values (a chat template is a few KiB)
MAX_DIMS = 4                   # GGML_MAX_DIMS
MAX_ELEMENTS = 1 << 48         # per tensor; keeps every byte size far inside int64


@dataclass(frozen=True)
class GGMLType:
    """A ggml tensor type: ``block_size`` elements take ``block_bytes`` bytes (along ne0)."""
    name: str
    type_id: int
    block_size: int
    block_bytes: int


# The ggml types Colibri reads, by type id (colibri/dtypes.py: layouts in docs/KERNELS.md).
GGML_TYPES = {t.ggml_id: GGMLType(t.name, t.ggml_id, t.block_elems, t.block_bytes) for t in DTYPES}

# Names of the other ggml types, only to say which one a file uses.
_OTHER_GGML_TYPE_NAMES = {
    9: "Q8_1", 15: "Q8_K", 16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 21: "IQ3_S", 22: "IQ2_S",
    24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64", 29: "IQ1_M", 34: "TQ1_0", 35: "TQ2_0", 40: "NVFP4",
}

# GGUF metadata value types: id -> (name, struct format of a scalar, or None).
_STRING, _ARRAY = 8, 9
_VALUE_TYPES = {
    0: ("UINT8", "<B"), 1: ("INT8", "<b"), 2: ("UINT16", "<H"), 3: ("INT16", "<h"),
    4: ("UINT32", "<I"), 5: ("INT32", "<i"), 6: ("FLOAT32", "<f"), 7: ("BOOL", "<B"),
    8: ("STRING", None), 9: ("ARRAY", None), 10: ("UINT64", "<Q"), 11: ("INT64", "<q"), 12: ("FLOAT64", "<d"),
}
_BOOL = 7
_INTEGER_TYPES = frozenset({0, 1, 2, 3, 4, 5, 10, 11})
_FLOAT_TYPES = frozenset({6, 12})

# Smallest encodings, to bound counts before looping over them.
_MIN_KV_BYTES = 8 + 1 + 4 + 1               # key length + 1-byte key + value type + 1-byte value
_MIN_TENSOR_INFO_BYTES = 8 + 1 + 4 + 8 + 4 + 8  # name length + 1-byte name + n_dims + one dim + type + offset
_STRING_MIN_BYTES = 8


# What the well-known keys must hold: key -> kind (see _KIND_CHECKS). Keys under "<arch>." are in
# _ARCH_KEY_KINDS, keyed by the part after the architecture name.
_KEY_KINDS = {
    "general.architecture": "a string",
    "general.alignment": "a UINT32",
    "general.name": "a string",
    "tokenizer.ggml.model": "a string",
    "tokenizer.ggml.pre": "a string",
    "tokenizer.ggml.tokens": "an array of strings",
    "tokenizer.ggml.merges": "an array of strings",
    "tokenizer.ggml.scores": "an array of floats",
    "tokenizer.ggml.token_type": "an array of integers",
    "tokenizer.ggml.bos_token_id": "an integer",
    "tokenizer.ggml.eos_token_id": "an integer",
    "tokenizer.ggml.eot_token_id": "an integer",
    "tokenizer.ggml.eom_token_id": "an integer",
    "tokenizer.ggml.unknown_token_id": "an integer",
    "tokenizer.ggml.padding_token_id": "an integer",
    "tokenizer.ggml.add_bos_token": "a bool",
    "tokenizer.ggml.add_eos_token": "a bool",
    "tokenizer.ggml.add_space_prefix": "a bool",
    "tokenizer.chat_template": "a string",
}
_ARCH_KEY_KINDS = {
    "context_length": "an integer",
    "embedding_length": "an integer",
    "block_count": "an integer",
    "feed_forward_length": "an integer",
    "expert_count": "an integer",
    "expert_used_count": "an integer",
    "expert_feed_forward_length": "an integer",
    "expert_shared_feed_forward_length": "an integer",
    "vocab_size": "an integer",
    "rope.dimension_count": "an integer",
    "attention.head_count": "an integer or an array of integers",
    "attention.head_count_kv": "an integer or an array of integers",
    "attention.key_length": "an integer",
    "attention.value_length": "an integer",
    "attention.layer_norm_rms_epsilon": "a float",
    "rope.freq_base": "a float",
}
# kind -> predicate over (value type, array element type or None)
_KIND_CHECKS = {
    "a string": lambda t, e: t == _STRING,
    "a UINT32": lambda t, e: t == 4,
    "a bool": lambda t, e: t == _BOOL,
    "an integer": lambda t, e: t in _INTEGER_TYPES,
    "a float": lambda t, e: t in _FLOAT_TYPES,
    "an array of strings": lambda t, e: t == _ARRAY and e == _STRING,
    "an array of floats": lambda t, e: t == _ARRAY and e in _FLOAT_TYPES,
    "an array of integers": lambda t, e: t == _ARRAY and e in _INTEGER_TYPES,
    "an integer or an array of integers": lambda t, e: t in _INTEGER_TYPES or (t == _ARRAY and e in _INTEGER_TYPES),
}


@dataclass(frozen=True, eq=False)   # eq=False: identity, since arrays have no truth-valued ==
class GGUFTensor:
    """One tensor of a GGUF file.

    ``dims`` is GGUF/ggml order (ne0 first: the contiguous row length); ``shape`` is numpy/HF
    order (reversed dims), so a 2-D weight has shape [out_features, in_features] as in PyTorch.
    ``array`` is a read-only uint8 view of the tensor's ``nbytes`` raw bytes at absolute file
    ``offset``, inside the mmap (zero-copy); it keeps the mapping alive while referenced.
    """
    name: str
    type_name: str
    dims: tuple[int, ...]
    shape: tuple[int, ...]
    offset: int
    nbytes: int
    array: np.ndarray   # [nbytes] uint8, read-only
    file: str

    @property
    def address(self) -> int:
        """Memory address of the first byte (valid while ``array`` is referenced)."""
        return self.array.ctypes.data

    def view(self) -> np.ndarray:
        """A zero-copy typed view: F32/F16 as float32/float16 of ``shape``; BF16 as its raw bits
        (uint16) of ``shape``; quantized types as uint8 [*shape[:-1], bytes per row] of whole blocks."""
        if self.type_name in ("F32", "F16", "BF16"):
            dtype = {"F32": "<f4", "F16": "<f2", "BF16": "<u2"}[self.type_name]
            return self.array.view(dtype).reshape(self.shape)
        return self.array.reshape(*self.shape[:-1], self.nbytes // math.prod(self.shape[:-1]))


class GGUFFile:
    """A GGUF file mapped read-only and fully validated; see the module docstring.

    ``metadata`` maps keys to Python values (ints, floats, bools, strs; arrays as lists);
    ``metadata_types`` maps keys to their GGUF type names ("UINT32", "ARRAY[STRING]" ...);
    ``tensors`` maps names to GGUFTensor, in file order.
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        self._mmap = _map_read_only(self.path)
        try:
            self._reader = _Reader(self._mmap, self.path)
            self.version, tensor_count, kv_count = self._read_header()
            self.metadata: dict[str, object] = {}
            self.metadata_types: dict[str, str] = {}
            self._read_metadata(kv_count)
            self.alignment = self._alignment()
            self.tensors: dict[str, GGUFTensor] = self._read_tensors(tensor_count)
        except BaseException:
            self.close()
            raise
        finally:
            self._reader = None

    def mappings(self) -> list[tuple[str, int, int]]:
        """[(path, address, size)] of the file's mapping, from its byte 0."""
        return [(self.path, mapping_address(self._mmap), len(self._mmap))]

    def close(self) -> None:
        """Drop this object's tensors and mapping; the mapping is unmapped once no array still views it."""
        self.tensors = {}
        mapping, self._mmap = self._mmap, None
        if mapping is not None:
            try:
                mapping.close()
            except BufferError:
                pass   # arrays handed out still view it: it is unmapped when the last one goes

    def __enter__(self) -> "GGUFFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -------------------------------------------------------------------------------- header

    def _read_header(self) -> tuple[int, int, int]:
        r = self._reader
        magic = r.raw(4, "magic")
        if magic != GGUF_MAGIC:
            r.fail(f"magic: expected {GGUF_MAGIC!r}, got {magic!r} (not a GGUF file)")
        version = r.u32("version")
        if version not in SUPPORTED_VERSIONS:
            if int.from_bytes(version.to_bytes(4, "little"), "big") in SUPPORTED_VERSIONS:
                r.fail("version: the file is big-endian GGUF, only little-endian is supported")
            r.fail(f"version: {version} is not supported (expected 2 or 3)")
        tensor_count = r.u64("tensor_count")
        kv_count = r.u64("kv_count")
        if kv_count * _MIN_KV_BYTES > r.remaining:
            r.fail(f"kv_count: {kv_count} metadata entries cannot fit in the {r.remaining} bytes left")
        if tensor_count * _MIN_TENSOR_INFO_BYTES > r.remaining - kv_count * _MIN_KV_BYTES:
            r.fail(f"tensor_count: {tensor_count} tensor infos cannot fit in the {r.remaining} bytes left")
        return version, tensor_count, kv_count

    # -------------------------------------------------------------------------------- metadata

    def _read_metadata(self, kv_count: int) -> None:
        r = self._reader
        value_types = {}   # key -> (value type, array element type or None)
        for index in range(kv_count):
            key = r.string(f"metadata entry {index}: key", MAX_KEY_BYTES)
            if not key:
                r.fail(f"metadata entry {index}: empty key")
            if key in self.metadata:
                r.fail(f"metadata key {key!r}: duplicate key")
            where = f"metadata key {key!r}"
            value_type = r.u32(f"{where}: value type")
            if value_type == _ARRAY:
                element_type, value = self._read_array(where)
                self.metadata_types[key] = f"ARRAY[{_VALUE_TYPES[element_type][0]}]"
            else:
                element_type, value = None, self._read_scalar(value_type, where)
                self.metadata_types[key] = _VALUE_TYPES[value_type][0]
            self.metadata[key] = value
            value_types[key] = (value_type, element_type)
        for key, (value_type, element_type) in value_types.items():
            self._check_kind(key, value_type, element_type)

    def _read_scalar(self, value_type: int, where: str):
        """One non-array value of ``value_type``."""
        r = self._reader
        if value_type not in _VALUE_TYPES:
            r.fail(f"{where}: value type {value_type} is not a GGUF value type (0..12)")
        if value_type == _STRING:
            return r.string(where, MAX_STRING_BYTES)
        value = r.unpack(_VALUE_TYPES[value_type][1], where)
        if value_type == _BOOL:
            if value > 1:
                r.fail(f"{where}: bool value {value} is neither 0 nor 1")
            return bool(value)
        return value

    def _read_array(self, where: str) -> tuple[int, list]:
        """(element type, elements) of an array value; its count is bounded by the bytes left."""
        r = self._reader
        element_type = r.u32(f"{where}: array element type")
        if element_type == _ARRAY:
            r.fail(f"{where}: nested arrays are not allowed")
        if element_type not in _VALUE_TYPES:
            r.fail(f"{where}: array element type {element_type} is not a GGUF value type (0..12)")
        count = r.u64(f"{where}: array length")
        fmt = _VALUE_TYPES[element_type][1]
        element_bytes = _STRING_MIN_BYTES if element_type == _STRING else struct.calcsize(fmt)
        if count * element_bytes > r.remaining:
            r.fail(f"{where}: array length {count} cannot fit in the {r.remaining} bytes left")
        if element_type == _STRING:
            return element_type, [r.string(f"{where}[{i}]", MAX_STRING_BYTES) for i in range(count)]
        values = r.array(np.dtype(fmt), count, where)   # [count]
        if element_type == _BOOL:
            if count and int(values.max()) > 1:
                r.fail(f"{where}: bool array holds a value other than 0 or 1")
            values = values.astype(bool)
        return element_type, values.tolist()

    def _check_kind(self, key: str, value_type: int, element_type: int | None) -> None:
        """Refuse a well-known key whose value has the wrong type (e.g. ``<arch>.block_count`` a string)."""
        kind = _KEY_KINDS.get(key)
        architecture = self.metadata.get("general.architecture")
        if kind is None and isinstance(architecture, str) and key.startswith(architecture + "."):
            kind = _ARCH_KEY_KINDS.get(key[len(architecture) + 1:])
        if kind is not None and not _KIND_CHECKS[kind](value_type, element_type):
            self._reader.fail(f"metadata key {key!r}: expected {kind}, got {self.metadata_types[key]}")

    def _alignment(self) -> int:
        alignment = self.metadata.get("general.alignment", DEFAULT_ALIGNMENT)
        if alignment <= 0 or alignment & (alignment - 1) or alignment > MAX_ALIGNMENT:
            self._reader.fail(f"metadata key 'general.alignment': {alignment} is not a power of two "
                              f"in [1, {MAX_ALIGNMENT}]")
        return alignment

    # -------------------------------------------------------------------------------- tensors

    def _read_tensors(self, tensor_count: int) -> dict[str, GGUFTensor]:
        r = self._reader
        infos = {}   # name -> (ggml type, dims, relative offset, nbytes)
        for index in range(tensor_count):
            name = r.string(f"tensor info {index}: name", MAX_KEY_BYTES)
            if not name:
                r.fail(f"tensor info {index}: empty name")
            if name in infos:
                r.fail(f"tensor {name!r}: duplicate tensor name")
            infos[name] = self._read_tensor_info(name)
        data_start = _align_up(r.pos, self.alignment)
        if infos and data_start > r.size:
            r.fail(f"data section: starts at byte {data_start}, past the end of the file ({r.size} bytes)")
        self._check_layout(infos, data_start)
        tensors = {}
        for name, (ggml_type, dims, offset, nbytes) in infos.items():
            array = np.frombuffer(self._mmap, dtype=np.uint8, count=nbytes, offset=data_start + offset)
            tensors[name] = GGUFTensor(name=name, type_name=ggml_type.name, dims=dims, shape=dims[::-1],
                                       offset=data_start + offset, nbytes=nbytes, array=array, file=self.path)
        return tensors

    def _read_tensor_info(self, name: str) -> tuple[GGMLType, tuple[int, ...], int, int]:
        """(type, dims, offset from the data section, byte size) of one tensor info, all checked."""
        r = self._reader
        where = f"tensor {name!r}"
        n_dims = r.u32(f"{where}: n_dims")
        if not 1 <= n_dims <= MAX_DIMS:
            r.fail(f"{where}: n_dims {n_dims} is outside [1, {MAX_DIMS}]")
        dims = tuple(r.u64(f"{where}: dimension {i}") for i in range(n_dims))
        if 0 in dims:
            r.fail(f"{where}: dims {list(dims)} hold a zero dimension")
        elements = math.prod(dims)
        if elements > MAX_ELEMENTS:
            r.fail(f"{where}: dims {list(dims)} hold {elements} elements, more than the {MAX_ELEMENTS} limit")
        type_id = r.u32(f"{where}: type")
        ggml_type = GGML_TYPES.get(type_id)
        if ggml_type is None:
            known = _OTHER_GGML_TYPE_NAMES.get(type_id)
            label = f"{known} ({type_id})" if known else f"{type_id} (unknown)"
            supported = ", ".join(t.name for t in GGML_TYPES.values())
            r.fail(f"{where}: ggml type {label} is not supported (supported: {supported})")
        if dims[0] % ggml_type.block_size:
            r.fail(f"{where}: dimension 0 (row length) {dims[0]} is not a multiple of the "
                   f"{ggml_type.name} block size {ggml_type.block_size}")
        nbytes = elements // ggml_type.block_size * ggml_type.block_bytes
        offset = r.u64(f"{where}: offset")
        if offset % self.alignment:
            r.fail(f"{where}: offset {offset} is not a multiple of the alignment {self.alignment}")
        return ggml_type, dims, offset, nbytes

    def _check_layout(self, infos: dict, data_start: int) -> None:
        """Every tensor's bytes lie inside the file, and no two tensors overlap."""
        r = self._reader
        data_bytes = r.size - data_start
        for name, (_, _, offset, nbytes) in infos.items():
            if offset >= data_bytes:
                r.fail(f"tensor {name!r}: offset {offset} is past the end of the file (data section holds "
                       f"{data_bytes} bytes)")
            if offset + nbytes > data_bytes:
                r.fail(f"tensor {name!r}: data [{offset}, {offset + nbytes}) runs past the end of the file "
                       f"(data section holds {data_bytes} bytes)")
        spans = sorted((offset, offset + nbytes, name) for name, (_, _, offset, nbytes) in infos.items())
        for (_, end, before), (start, _, after) in zip(spans, spans[1:]):
            if start < end:
                r.fail(f"tensor {after!r}: data starts at {start}, inside tensor {before!r} (which ends at {end})")


class _Reader:
    """Bounds-checked little-endian reads from the mapped file, advancing ``pos``; errors name ``path``."""

    def __init__(self, buffer: mmap.mmap, path: str):
        self.buffer = buffer
        self.path = path
        self.size = len(buffer)
        self.pos = 0

    @property
    def remaining(self) -> int:
        return self.size - self.pos

    def fail(self, message: str):
        raise ModelError(f"{self.path}: {message}")

    def _advance(self, n: int, what: str) -> int:
        """Start of the next ``n`` bytes, which must lie inside the file."""
        if n > self.remaining:
            self.fail(f"{what}: truncated file (needs {n} bytes at offset {self.pos}, file has {self.size})")
        start = self.pos
        self.pos += n
        return start

    def raw(self, n: int, what: str) -> bytes:
        start = self._advance(n, what)
        return self.buffer[start:start + n]

    def unpack(self, fmt: str, what: str):
        start = self._advance(struct.calcsize(fmt), what)
        return struct.unpack_from(fmt, self.buffer, start)[0]

    def u32(self, what: str) -> int:
        return self.unpack("<I", what)

    def u64(self, what: str) -> int:
        return self.unpack("<Q", what)

    def string(self, what: str, max_bytes: int) -> str:
        """A GGUF string: u64 length (at most ``max_bytes``, inside the file) + UTF-8 bytes."""
        length = self.u64(f"{what} length")
        if length > max_bytes:
            self.fail(f"{what}: string length {length} exceeds the {max_bytes}-byte limit")
        data = self.raw(length, what)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.fail(f"{what}: not valid UTF-8 ({exc.reason} at byte {exc.start})")

    def array(self, dtype: np.dtype, count: int, what: str) -> np.ndarray:
        """A view of the next ``count`` elements of ``dtype`` (convert it, don't keep it: it pins the mapping)."""
        start = self._advance(count * dtype.itemsize, what)
        return np.frombuffer(self.buffer, dtype=dtype, count=count, offset=start)


def _map_read_only(path: str) -> mmap.mmap:
    fd = open_regular(path)
    try:
        if os.fstat(fd).st_size == 0:
            raise ModelError(f"{path}: empty file (not a GGUF file)")
        return map_weights(fd)
    except OSError as exc:
        raise ModelError(f"{path}: cannot map: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _align_up(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment
