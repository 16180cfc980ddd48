"""Open a GGUF file as a model: metadata → config, llama.cpp tensor names → C tensor kinds.

GGUF metadata is translated to the config.json fields the architecture file
already reads, so each architecture is validated by the same code whatever the
format. Stacked expert tensors ([E, F, D]) are handed to the C core one expert
at a time, as views into the mapped file (zero-copy, quantized types included).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .dtypes import BY_NAME, DTYPES, row_bytes
from .errors import ModelError
from .formats.gguf import GGUFFile, GGUFTensor
from .formats.gguf_tokenizer import tokenizer_from_gguf
from .models import SUPPORTED, ConfigReader, ModelConfig, TensorSlot, architecture, shape_text, tensor_slots, tensor_supply
from .models.spec import Derived
from .native_model import WeightRef

# llama.cpp's tensor names, by C tensor kind ({l}: layer). Expert kinds name the stacked tensor.
GGUF_NAMES = {
    "TOKEN_EMBD": "token_embd.weight", "OUTPUT_NORM": "output_norm.weight", "OUTPUT": "output.weight",
    "ATTN_NORM": "blk.{l}.attn_norm.weight",
    "WQ": "blk.{l}.attn_q.weight", "WK": "blk.{l}.attn_k.weight", "WV": "blk.{l}.attn_v.weight",
    "WO": "blk.{l}.attn_output.weight",
    "BQ": "blk.{l}.attn_q.bias", "BK": "blk.{l}.attn_k.bias", "BV": "blk.{l}.attn_v.bias",
    "Q_NORM": "blk.{l}.attn_q_norm.weight", "K_NORM": "blk.{l}.attn_k_norm.weight",
    "FFN_NORM": "blk.{l}.ffn_norm.weight",
    "FFN_GATE": "blk.{l}.ffn_gate.weight", "FFN_UP": "blk.{l}.ffn_up.weight", "FFN_DOWN": "blk.{l}.ffn_down.weight",
    "ROUTER": "blk.{l}.ffn_gate_inp.weight",
    "EXPERT_GATE": "blk.{l}.ffn_gate_exps.weight", "EXPERT_UP": "blk.{l}.ffn_up_exps.weight",
    "EXPERT_DOWN": "blk.{l}.ffn_down_exps.weight",
    "SHARED_GATE": "blk.{l}.ffn_gate_shexp.weight", "SHARED_UP": "blk.{l}.ffn_up_shexp.weight",
    "SHARED_DOWN": "blk.{l}.ffn_down_shexp.weight", "SHARED_ROUTER": "blk.{l}.ffn_gate_inp_shexp.weight",
    "ROUTER_BIAS": "blk.{l}.ffn_gate_inp.bias", "ROUTER_SEL_BIAS": "blk.{l}.exp_probs_b.bias",
    "BO": "blk.{l}.attn_output.bias",
    "WQ_A": "blk.{l}.attn_q_a.weight", "Q_A_NORM": "blk.{l}.attn_q_a_norm.weight", "WQ_B": "blk.{l}.attn_q_b.weight",
    "WKV_A": "blk.{l}.attn_kv_a_mqa.weight", "KV_A_NORM": "blk.{l}.attn_kv_a_norm.weight",
}
EXPERT_KINDS = ("EXPERT_GATE", "EXPERT_UP", "EXPERT_DOWN")
WEIGHT_TYPES = tuple(t.name for t in DTYPES)
FLOAT_VIEWS = {"F32": "<f4", "F16": "<f2", "BF16": "<u2"}   # typed views of float tensors (BF16: raw bits)

# metadata key (after "<arch>.") -> config.json field, shared by every architecture
COMMON_KEYS = {
    "context_length": "max_position_embeddings",
    "embedding_length": "hidden_size",
    "block_count": "num_hidden_layers",
    "attention.head_count": "num_attention_heads",
    "attention.head_count_kv": "num_key_value_heads",
    "attention.layer_norm_rms_epsilon": "rms_norm_eps",
    "attention.key_length": "head_dim",
    "rope.freq_base": "rope_theta",
}


def _holds(value, want: "bool | tuple") -> bool:
    """A metadata value meets a GGUFMapping.when entry: set (True), unset or 0 (False), or one of
    a tuple's values."""
    return value in want if isinstance(want, tuple) else bool(value) == want


def architecture_for(gguf: GGUFFile):
    name = gguf.metadata.get("general.architecture")
    for model_type in SUPPORTED:
        arch = architecture(model_type)
        if arch.gguf and arch.gguf.arch == name and all(
                _holds(gguf.metadata.get(f"{name}.{key}"), want) for key, want in arch.gguf.when.items()):
            return arch
    known = sorted({architecture(t).gguf.arch for t in SUPPORTED})
    raise ModelError(f"{gguf.path}: general.architecture {name!r} is not supported (supported: {', '.join(known)})")


def hf_config_from_gguf(gguf: GGUFFile, arch) -> dict[str, Any]:
    """The config.json an equivalent Hugging Face checkpoint would have (plus Colibri's
    rope_interleaved for llama.cpp's q/k row order)."""
    prefix = gguf.metadata["general.architecture"] + "."
    meta = gguf.metadata
    config: dict[str, Any] = {"model_type": arch.model_type, "hidden_act": "silu"}
    for key, field in {**COMMON_KEYS, **arch.gguf.keys}.items():
        if prefix + key in meta:
            config[field] = meta[prefix + key]
    config.update(arch.gguf.fixed)
    config["rope_interleaved"] = arch.gguf.rope_interleaved
    if prefix + "expert_weights_norm" in meta:
        config["norm_topk_prob"] = meta[prefix + "expert_weights_norm"]
    scaling = meta.get(prefix + "rope.scaling.type")
    if scaling not in (None, "none"):
        config["rope_scaling"] = {"rope_type": scaling, "factor": meta.get(prefix + "rope.scaling.factor"),
                                  "original_max_position_embeddings":
                                      meta.get(prefix + "rope.scaling.original_context_length"),
                                  **arch.gguf.rope_fixed}
    embd = gguf.tensors.get("token_embd.weight")
    if embd is None:
        raise ModelError(f"{gguf.path}: missing tensor 'token_embd.weight'")
    config["vocab_size"] = embd.shape[0]
    config["tie_word_embeddings"] = "output.weight" not in gguf.tensors
    layers = meta.get(prefix + "block_count")
    if isinstance(layers, int) and 0 < layers <= 4096:
        # layers without a router are dense (Qwen's mlp_only_layers)
        config["mlp_only_layers"] = [l for l in range(layers)
                                     if f"blk.{l}.ffn_gate_inp.weight" not in gguf.tensors]
    for key in ("tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"):
        if key in meta:
            config[key.split(".")[-1]] = meta[key]
    if "rope_freqs.weight" in gguf.tensors:
        raise ModelError(f"{gguf.path}: tensor 'rope_freqs.weight' (per-frequency RoPE factors) is not supported yet")
    rope_dim, heads = meta.get(prefix + "rope.dimension_count"), config.get("num_attention_heads")
    head_dim = config.get("head_dim") or (config.get("hidden_size", 0) // heads if isinstance(heads, int) and heads
                                          else None)
    if isinstance(rope_dim, int) and isinstance(head_dim, int) and 0 < rope_dim < head_dim:
        config["rotary_dim"] = rope_dim   # partial RoPE
    if arch.gguf.adjust is not None:
        try:
            arch.gguf.adjust(meta, prefix, gguf.tensors, config)
        except ModelError as e:
            raise ModelError(f"{gguf.path}: {e}") from None
    return config


def _tensor(gguf: GGUFFile, name: str) -> GGUFTensor:
    tensor = gguf.tensors.get(name)
    if tensor is None:
        raise ModelError(f"{gguf.path}: missing tensor '{name}'")
    if tensor.type_name not in WEIGHT_TYPES:
        raise ModelError(f"{gguf.path}: tensor '{name}': type {tensor.type_name} is not supported "
                         f"(expected one of {', '.join(WEIGHT_TYPES)})")
    return tensor


def _derived_weight(gguf: GGUFFile, slot: TensorSlot, derived: Derived, config: ModelConfig) -> WeightRef:
    """A slot built from the file's tensors (spec.Derived), checked as a stored one would be:
    a float type of the slot's shape, or a block type's rows of whole blocks; in place when the
    build only reshaped what it read."""
    views = []   # the file's tensors the build read

    def read(name: str, optional: bool = False) -> tuple[str, object] | None:
        if optional and name not in gguf.tensors:
            return None
        tensor = _tensor(gguf, name)
        views.append(tensor.view())
        return tensor.type_name, views[-1]

    dtype, array = derived.build(read, slot, config)
    rows, cols = slot.shape
    if dtype not in WEIGHT_TYPES or cols % BY_NAME[dtype].block_elems:
        width = -1
    else:
        width = cols if dtype in FLOAT_VIEWS else row_bytes(dtype, cols)   # elements or bytes per row
    if width < 0 or tuple(array.shape) != (rows, width):
        raise ModelError(f"{gguf.path}: tensor '{derived.format(l=slot.layer)}' (for {slot.kind}, layer {slot.layer}): "
                         f"{dtype} {shape_text(array.shape)} does not give {shape_text(slot.shape)}")
    array = np.ascontiguousarray(array)
    return WeightRef(dtype, slot.shape, array.nbytes, array, in_place=any(np.may_share_memory(array, v) for v in views))


def _weight(gguf: GGUFFile, slot: TensorSlot, config: ModelConfig, names: dict[str, str | Derived]) -> WeightRef:
    """The bytes for one slot: a whole tensor, one expert's slice of a stacked one, or one built
    from the file's tensors."""
    num_experts = config.num_experts
    if isinstance(names[slot.kind], Derived):
        return _derived_weight(gguf, slot, names[slot.kind], config)
    name = names[slot.kind].format(l=slot.layer)
    tensor = _tensor(gguf, name)
    where = f"{gguf.path}: tensor '{name}'"
    if slot.kind in EXPERT_KINDS:
        expected = (num_experts, *slot.shape)
        if tensor.shape != expected:
            raise ModelError(f"{where}: shape {shape_text(tensor.shape)}, expected {shape_text(expected)}")
        per_expert = tensor.nbytes // num_experts
        data = tensor.array[slot.expert * per_expert:(slot.expert + 1) * per_expert]   # data: [bytes] raw
        if tensor.type_name in FLOAT_VIEWS:
            data = data.view(FLOAT_VIEWS[tensor.type_name]).reshape(slot.shape)
        return WeightRef(tensor.type_name, slot.shape, per_expert, data)
    row_vector = len(slot.shape) == 1 and tensor.shape == (1, *slot.shape)   # a [1, n] vector (ERNIE's bias)
    if tensor.shape != slot.shape and not row_vector and not (len(slot.shape) == 2 and slot.shape[0] == 1
                                                              and tensor.shape == slot.shape[1:]):
        raise ModelError(f"{where}: shape {shape_text(tensor.shape)}, expected {shape_text(slot.shape)}")
    if tensor.type_name in ("F32", "F16", "BF16"):
        return WeightRef(tensor.type_name, slot.shape, tensor.nbytes, tensor.view().reshape(slot.shape))
    return WeightRef(tensor.type_name, slot.shape, tensor.nbytes, tensor.array)


def open_gguf(path) -> tuple[GGUFFile, ModelConfig, list[tuple[TensorSlot, WeightRef]], object]:
    """(file, config, weights, tokenizer) for a GGUF model; ModelError on any problem."""
    gguf = GGUFFile(path)
    try:
        arch = architecture_for(gguf)
        source = f"{gguf.path} (GGUF metadata)"
        config = arch.read_config(ConfigReader(hf_config_from_gguf(gguf, arch), source))
        names = {**GGUF_NAMES, **arch.gguf.names}
        slots = tensor_slots(arch, config, limit=tensor_supply(t.shape for t in gguf.tensors.values()),
                             source=source)
        weights = [(slot, _weight(gguf, slot, config, names)) for slot in slots]
        # llama.cpp's tokenizer model "none": a file without a vocabulary, as one without the key
        has_vocab = gguf.metadata.get("tokenizer.ggml.model", "none") != "none"
        tokenizer = tokenizer_from_gguf(gguf.metadata, gguf.path) if has_vocab else None
        return gguf, config, weights, tokenizer
    except BaseException:
        gguf.close()
        raise

