"""colibri convert: a Hugging Face directory or a GGUF file -> one Colibri-native file
(docs/FORMAT.md).

    convert("path/to/hf-dir", "model.colibri", "bf16")
    convert("model.Q4_0.gguf", "model.colibri", "keep")   # every tensor as stored

Matrices are stored at the requested dtype: f32, f16 or bf16 (rounded to nearest even), a
GGUF block type for every matrix (q8_0, q4_0, q4_1, q4_k, q5_k, q6_k), or a K-quant mix
(q4_k_m, q5_k_m: colibri/quant_recipes.py), quantized by the C core's quantizers; a matrix
whose rows are not whole blocks of its type takes a smaller block's type (or f16). Norms,
biases, sinks and routers stay f32 (exact for every source dtype). The architecture
machinery (colibri.models) decides which tensors exist and their shapes, so the file holds
exactly what colibri_model_set_tensor expects, in the kernel's order. The tokenizer files,
chat templates, config.json and generation_config.json travel in the metadata.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from . import __version__
from .dtypes import DTYPES
from .errors import ModelError
from .formats import native
from .formats.files import MAX_SIDE_FILE_BYTES, read_text
from .formats.hf_dir import HFCheckpoint
from .loader import checked_weight
from .native_model import require_little_endian
from .models import ConfigReader, TensorSlot, architecture, tensor_slots, tensor_supply
from .quant_recipes import TARGETS, fitting, stored_type

# keep: every tensor in its source type; the block types and mixes: quant_recipes.TARGETS
TARGET_DTYPES = ("f32", "f16", "bf16", *TARGETS, "keep")
FLOAT_TARGETS = {"f32": "F32", "f16": "F16", "bf16": "BF16"}
BLOCK_TYPES = {t.name: t for t in DTYPES if t.is_block}
# The routers' few rows stay f32 whatever the target: rounding them can change which experts run.
ROUTER_KINDS = frozenset({"ROUTER", "SHARED_ROUTER"})


def f32_kinds() -> frozenset[str]:
    """The kinds kept in f32 whatever the target: every kind the C core reads as a vector (norms,
    biases, sinks: _native.vector_kinds, so a kind added to the C core's list is covered here)
    and the routers."""
    from . import _native

    return ROUTER_KINDS | _native.vector_kinds()


def to_f32(array: np.ndarray, dtype: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """A view (F32, F16, BF16 as raw uint16 bits, or raw block bytes with `shape`) widened to float32."""
    if dtype in BLOCK_TYPES:
        return dequantize_rows(array, dtype, shape)
    if dtype == "BF16":
        return (array.astype(np.uint32) << 16).view(np.float32)
    return array.astype(np.float32)


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits, round to nearest even (NaN stays a quiet NaN), as torch rounds."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), ((bits >> 16) | 0x40).astype(np.uint16), rounded)


def quantize_rows(x: np.ndarray, target: str) -> np.ndarray:
    """x: [rows, cols] float32 (cols whole blocks) -> the block bytes [rows, bytes per row] via libcolibri."""
    import ctypes

    from . import _native

    t = BLOCK_TYPES[target]
    src = np.ascontiguousarray(x, dtype=np.float32)                                                # src: [rows, cols]
    out = np.empty((src.shape[0], src.shape[1] // t.block_elems * t.block_bytes), dtype=np.uint8)  # out: [rows, bytes]
    lib = _native.lib()
    if lib.colibri_quantize(t.colibri_id, src.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p),
                            src.size):
        raise ModelError(f"quantize to {target}: {_native.last_error()}")
    return out


def dequantize_rows(raw: np.ndarray, source: str, shape: tuple[int, ...]) -> np.ndarray:
    """Block bytes of `source` type -> float32 [*shape] via libcolibri."""
    import ctypes

    from . import _native

    out = np.empty(shape, dtype=np.float32)                                # out: [rows, cols]
    src = np.ascontiguousarray(raw)
    if _native.lib().colibri_dequantize(BLOCK_TYPES[source].colibri_id, src.ctypes.data_as(ctypes.c_void_p),
                                        out.ctypes.data_as(ctypes.c_void_p), out.size):
        raise ModelError(f"dequantize {source}: {_native.last_error()}")
    return out


def tensor_bytes(array: np.ndarray, source: str, target: str) -> np.ndarray:
    """The little-endian bytes of a tensor converted from `source` to `target` dtype.
    Block-type sources come as raw bytes; their `array` is then viewed with its shape by the caller."""
    if source == target and source in BLOCK_TYPES:
        return np.ascontiguousarray(array)
    if target in BLOCK_TYPES:
        return quantize_rows(to_f32(array, source).reshape(array.shape[0], -1), target)
    if source == target:
        little = {"F32": "<f4", "F16": "<f2", "BF16": "<u2"}[target]
        return np.ascontiguousarray(array).astype(little, copy=False)
    x = to_f32(array, source)
    if target == "F32":
        return x.astype("<f4", copy=False)
    if target == "F16":
        return x.astype("<f2")
    return f32_to_bf16_bits(x).astype("<u2", copy=False)


def _side_files(checkpoint: HFCheckpoint) -> dict[str, str]:
    """The text of every side file the tokenizer and loader read, by name."""
    files = {}
    for name in native.SIDE_FILES:
        path = checkpoint.file_path(name)
        if path is not None:
            files[name] = read_text(path, MAX_SIDE_FILE_BYTES)
    templates = checkpoint.directory / native.CHAT_TEMPLATE_DIR
    if templates.is_dir():
        for path in sorted(templates.glob("*.jinja")):
            files[f"{native.CHAT_TEMPLATE_DIR}/{path.name}"] = read_text(path, MAX_SIDE_FILE_BYTES)
    return files


class ProgressBar:
    """A one-line progress bar on stderr (redrawn on a terminal, printed per 10% otherwise)."""

    def __init__(self, label: str, stream=None):
        self.label, self.stream = label, stream or sys.stderr
        self.tty = self.stream.isatty()
        self.shown = -1

    def __call__(self, done: int, total: int) -> None:
        percent = 100 * done // max(total, 1)
        step = percent if self.tty else percent // 10 * 10
        if step == self.shown:
            return
        self.shown = step
        bar = "#" * (percent // 4)
        end = "\n" if not self.tty or done >= total else ""
        start = "\r" if self.tty else ""
        self.stream.write(f"{start}{self.label} [{bar:<25}] {percent:3d}%{end}")
        self.stream.flush()


def _hf_source(src):
    """(config, slots, tensor(slot) -> (dtype, array, shape), side files, source info, close)."""
    checkpoint = HFCheckpoint.open(src)
    try:
        source = str(checkpoint.directory / "config.json")
        arch = architecture(checkpoint.config.get("model_type"), source)
        config = arch.read_config(ConfigReader(checkpoint.config, source))

        def tensor(slot: TensorSlot):
            # dtype, shape and alignment, as colibri.load checks them
            ref = checked_weight(checkpoint, slot, arch.names[slot.kind], config)
            return ref.dtype, ref.array

        supply = tensor_supply(checkpoint.tensor(name).shape for name in checkpoint.names())
        slots = tensor_slots(arch, config, limit=supply, source=source)
        return (arch, config, slots, tensor, _side_files(checkpoint), "huggingface",
                checkpoint.close)
    except BaseException:
        checkpoint.close()
        raise


def _gguf_source(src):
    """The same for a GGUF file: its tensors as stored, its metadata as side files."""
    import json

    from .gguf_source import architecture_for, hf_config_from_gguf, open_gguf

    gguf, config, weights, tokenizer = open_gguf(src)
    try:
        arch = architecture_for(gguf)
        refs = {(slot.kind, slot.layer, slot.expert): ref for slot, ref in weights}
        files = {"config.json": json.dumps(hf_config_from_gguf(gguf, arch))}
        if tokenizer is not None:
            files["tokenizer.json"] = tokenizer.backend.to_str()
            files["tokenizer_config.json"] = json.dumps(
                {key: value for key, value in (("bos_token", tokenizer.bos_token), ("eos_token", tokenizer.eos_token),
                                               ("chat_template", tokenizer.chat_template)) if value})
            files["generation_config.json"] = json.dumps({"eos_token_id": sorted(tokenizer.eos_ids)})

        def tensor(slot: TensorSlot):
            ref = refs[slot.kind, slot.layer, slot.expert]
            return ref.dtype, ref.array

        return arch, config, [slot for slot, _ in weights], tensor, files, "gguf", gguf.close
    except BaseException:
        gguf.close()
        raise


def convert(src: str | os.PathLike, dst: str | os.PathLike, dtype: str = "bf16", *, progress: bool = True) -> Path:
    """Convert the Hugging Face directory or GGUF file `src` to the native file `dst` at `dtype`
    (one of TARGET_DTYPES; keep: every tensor in its source type)."""
    require_little_endian("colibri convert")   # libcolibri's quantizer writes host-order f16 scales
    if dtype not in TARGET_DTYPES:
        raise ModelError(f"dtype {dtype!r} is not supported (supported: {', '.join(TARGET_DTYPES)})")
    is_gguf = Path(src).is_file() and Path(src).suffix == ".gguf"
    arch, config, slots, tensor, files, kind, close = (_gguf_source if is_gguf else _hf_source)(src)
    try:
        def weight(slot: TensorSlot) -> tuple[str, np.ndarray]:
            source_dtype, array = tensor(slot)
            if dtype == "keep":
                stored = source_dtype
            elif slot.kind in f32_kinds():
                stored = "F32"
            elif dtype in FLOAT_TARGETS:
                stored = FLOAT_TARGETS[dtype]
            else:
                stored = stored_type(dtype, slot, config)
            stored = fitting(stored, slot.shape[-1])   # block types need rows that are whole blocks
            if source_dtype in BLOCK_TYPES and stored != source_dtype:
                return stored, tensor_bytes(to_f32(array, source_dtype, slot.shape), "F32", stored)
            return stored, tensor_bytes(array, source_dtype, stored)

        metadata = {
            "architecture": arch.model_type,
            "files": files,
            "source": {"format": kind, "path": str(Path(src).resolve()), "dtype": dtype,
                       "converter": f"colibri {__version__}"},
        }
        bar = ProgressBar(f"converting {Path(src).name} -> {Path(dst).name}") if progress else None
        native.write_native(dst, config, slots, weight, metadata, bar)
    finally:
        close()
    _drop_written_pages(dst)
    return Path(dst)


def _drop_written_pages(path: str | os.PathLike) -> None:
    """Write the new file back and drop its pages from the page cache (best effort), so the first
    load reads it afresh. Pages cached by writing are 4 KiB folios, mapped 4 KiB at a time, while
    a fresh read brings large folios that map as 2 MiB pages: on Linux 6.18 the same OLMoE q4_0
    file decoded 27% faster read afresh than just written (BENCHMARKS.md)."""
    if not hasattr(os, "posix_fadvise"):
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except OSError:
        pass   # a file system without fsync/fadvise: nothing to gain, nothing lost
    finally:
        os.close(fd)
