"""colibri.load: open a model path (HF directory or GGUF file), validate it, hand it to the C core."""
from __future__ import annotations

import os
from pathlib import Path

from .dtypes import BY_NAME, DTYPES, row_bytes
from .errors import ModelError
from .formats.hf_dir import PICKLE_SUFFIXES, HFCheckpoint
import numpy as np

from .models import ConfigReader, TensorSlot, architecture, shape_text, tensor_slots, tensor_supply
from .models.spec import Derived, Fused, ModelConfig
from .native_model import NativeModel, WeightRef, check_config_matches

WEIGHT_DTYPES = ("F32", "F16", "BF16")
BLOCK_DTYPES = tuple(t.name for t in DTYPES if t.is_block)   # what a Derived build may repack into
ITEM_BYTES = {"F32": 4, "F16": 2, "BF16": 2}
DEFAULT_CONTEXT = 4096


def checked_weight(checkpoint: HFCheckpoint, slot: TensorSlot, source: str | Fused | Derived | None = None,
                   config: ModelConfig | None = None) -> WeightRef:
    """The tensor for a slot, after checking its dtype and shape against the architecture.
    ``source`` is the architecture's names entry for the slot's kind: a Derived one is built
    from its checkpoint tensors (a layout change made once, here); otherwise the stored
    tensor is used in place (for a slot inside a larger tensor, Fused: that tensor's shape is
    checked, then the slot's rows of it are used)."""
    if isinstance(source, Derived):
        return _derived_weight(checkpoint, slot, source, config)
    view = checkpoint.tensor(slot.name)
    where = f"{view.file}: tensor '{slot.name}'"
    if view.dtype not in WEIGHT_DTYPES:
        raise ModelError(f"{where}: dtype {view.dtype} is not supported (expected one of {', '.join(WEIGHT_DTYPES)})")
    expected = slot.source_shape or slot.shape
    if tuple(view.shape) != expected and not (len(expected) == 1 and tuple(view.shape) == (1, *expected)):
        raise ModelError(f"{where}: shape {shape_text(view.shape)}, expected {shape_text(expected)}")
    if view.address % ITEM_BYTES[view.dtype]:
        raise ModelError(f"{where}: data offset is not aligned to its {ITEM_BYTES[view.dtype]}-byte elements")
    array = view.array[slot.source_index] if slot.source_index else view.array.reshape(slot.shape)
    return WeightRef(view.dtype, slot.shape, array.nbytes, array)


def _derived_weight(checkpoint: HFCheckpoint, slot: TensorSlot, derived: Derived, config: ModelConfig) -> WeightRef:
    """A slot built from checkpoint tensors; the result's dtype and shape are checked as a stored one's."""
    def read(name: str, optional: bool = False) -> tuple[str, np.ndarray] | None:
        if optional and name not in checkpoint:
            return None
        view = checkpoint.tensor(name)
        return view.dtype, view.array

    dtype, array = derived.build(read, slot, config)
    where = f"{checkpoint.directory}: tensor '{slot.name}' (for {slot.kind}, layer {slot.layer})"
    if dtype not in WEIGHT_DTYPES and dtype not in BLOCK_DTYPES:
        raise ModelError(f"{where}: dtype {dtype} is not supported (expected one of {', '.join(WEIGHT_DTYPES)})")
    rows, cols = slot.shape[0], slot.shape[-1]
    if dtype in BLOCK_DTYPES:   # a build may repack quantized parts into a block type (gpt-oss MXFP4): raw bytes
        width = row_bytes(dtype, cols) if len(slot.shape) == 2 and cols % BY_NAME[dtype].block_elems == 0 else -1
        if tuple(array.shape) != (rows, width):
            raise ModelError(f"{where}: {dtype} {shape_text(array.shape)} does not give {shape_text(slot.shape)}")
    elif tuple(array.shape) != slot.shape:
        raise ModelError(f"{where}: shape {shape_text(array.shape)}, expected {shape_text(slot.shape)}")
    array = np.ascontiguousarray(array)
    return WeightRef(dtype, slot.shape, array.nbytes, array, in_place=False)


def _open_hf(directory: Path):
    """(files, config, weights, tokenizer, generation_config) of a Hugging Face directory."""
    from .tokenizer import Tokenizer

    checkpoint = HFCheckpoint.open(directory)
    try:
        config_source = str(directory / "config.json")
        arch = architecture(checkpoint.config.get("model_type"), config_source)
        config = arch.read_config(ConfigReader(checkpoint.config, config_source))
        supply = tensor_supply(checkpoint.tensor(name).shape for name in checkpoint.names())
        slots = tensor_slots(arch, config, limit=supply, source=config_source)
        weights = [(slot, checked_weight(checkpoint, slot, arch.names[slot.kind], config)) for slot in slots]
        tokenizer = Tokenizer.from_dir(directory) if (directory / "tokenizer.json").exists() else None
        return checkpoint, config, weights, tokenizer, checkpoint.optional_json("generation_config.json")
    except BaseException:
        checkpoint.close()
        raise


def _open_gguf(path: Path):
    from .gguf_source import open_gguf

    gguf, config, weights, tokenizer = open_gguf(path)
    return gguf, config, weights, tokenizer, None


def _open_native(path: Path):
    from .formats.native import open_native

    return open_native(path)


def _opener(path: str | os.PathLike):
    """The path to open and the function that opens it; refuses what Colibri does not read."""
    p = Path(path)
    if not p.exists():
        raise ModelError(f"{p}: no such file or directory")
    if p.is_dir():
        return p, _open_hf
    if p.suffix in PICKLE_SUFFIXES:
        raise ModelError(f"{p}: PyTorch pickle checkpoints are refused: unpickling can run arbitrary code; "
                         "convert to safetensors first")
    if p.suffix == ".gguf":
        return p, _open_gguf
    if p.suffix == ".colibri":
        return p, _open_native
    raise ModelError(f"{p}: not a model (expected a Hugging Face directory with config.json and "
                     "*.safetensors, a .gguf file or a .colibri file)")


KV_TYPES = ("f32", "f16")
NUMA_MODES = ("distribute", "isolate", "none")
PRECISIONS = ("default", "exact")


def load(path: str | os.PathLike, threads: int | None = None, *, n_ctx: int | None = None,
         n_seq: int = 1, n_batch: int = 256, kv_type: str = "f32", numa: str | None = None,
         mem_budget: int | str | None = "auto", expert_slots: int | None = None,
         expert_profile: str | os.PathLike | None = None, prefetch: bool | int = True, precision: str = "default"):
    """Load a model (Hugging Face directory, GGUF file or .colibri file); see ``colibri.Model`` for the API.

    threads: worker threads for the forward pass (None: one per physical core, at most the
        cgroup CPU quota).
    n_ctx: context length of the KV cache (default min(config's max positions, 4096)).
    n_seq: sequences that can be cached at once (for batched use of ``Model.forward``).
    n_batch: most tokens one forward step takes (longer prompts are split).
    kv_type: the KV cache's element type: "f32" (exact, the default) or "f16" (half the memory
        and the attention reads; keys and values rounded to f16, as llama.cpp's default cache).
    numa: None (one thread per physical core, node after node), "distribute" (cores of every NUMA
        node in turn, scratch interleaved over them), "isolate" (only the calling thread's node), or
        "none" (threads left unpinned); results are bitwise the same for every choice.
    mem_budget: memory the whole process may use: bytes, or a size such as "6GiB" or "1500M"
        (docs/PAGING.md). A MoE model that would not fit pages its routed experts from the file
        into a cache of expert slots sized to the budget; the logits are the same. "auto" (the
        default): the memory available here (cgroup limit, MemAvailable), with a one-line notice
        on stderr when paging turns on; "off" or None: never page.
    expert_slots: page with exactly this many expert slots, whatever the budget.
    expert_profile: an activation profile (``colibri route --profile-out``) whose hottest experts
        a paged model pins in its slots.
    prefetch: a paged model reads ahead the experts the next layers' routers predict from each
        layer's input: True (the default depth, paging.PREFETCH_DEPTH), 1 (the next MoE layer),
        2 (the next two), False or 0 (none).
    precision: "default" (block-type weights meet activations quantized to 8 bits per block of
        32, at memory speed) or "exact" (f32 activations: the logits are the dequantized model's
        up to f32 rounding; every step dequantizes the weights it reads).
    """
    from . import paging
    from .model import Model
    from .summary import kv_bytes_per_position

    for name, value, low in (("threads", threads, 1), ("n_ctx", n_ctx, 1), ("n_seq", n_seq, 1),
                             ("n_batch", n_batch, 1), ("expert_slots", expert_slots, 1)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if kv_type not in KV_TYPES:
        raise ValueError(f"kv_type must be one of {', '.join(KV_TYPES)}, got {kv_type!r}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if numa is not None and numa not in NUMA_MODES:
        raise ValueError(f"numa must be one of {', '.join(NUMA_MODES)} or None, got {numa!r}")
    budget = paging.parse_budget(mem_budget)
    prefetch = paging.prefetch_depth(prefetch)
    path, open_source = _opener(path)
    files, config, weights, tokenizer, generation_config = open_source(path)
    native = None
    try:
        context_length = min(config.context_length, n_ctx or DEFAULT_CONTEXT)
        profile = None
        if expert_profile is not None:
            from . import expert_profile as profiles
            profile = profiles.read(expert_profile, config)
        request = paging.decide(config, weights, budget, expert_slots,
                                kv_bytes_per_position(config, kv_type) * context_length * n_seq, str(path))
        if path.suffix == ".colibri":   # the C core maps and validates the file itself
            from .formats.native import NativeFileModel
            native = NativeFileModel(path, paged=request is not None)
        else:
            native = NativeModel(config, weights)
            if request is not None:
                native.add_files(files.mappings())
        check_config_matches(config, native.hparams(), str(path))
        return Model(directory=path, config=config, checkpoint=files, native=native, weights=weights,
                     tokenizer=tokenizer, threads=threads or 0, n_ctx=context_length, n_seq=n_seq,
                     n_batch=n_batch, kv_type=kv_type, generation_config=generation_config,
                     placement=numa or "cores", precision=precision, paging=request, prefetch=prefetch, expert_profile=profile)
    except BaseException:
        if native is not None:
            native.close()
        files.close()
        raise
