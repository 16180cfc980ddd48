"""What every architecture file fills in: its config mapping and tensor names.

An architecture module (``colibri/models/<model_type>.py``) exposes one
``ARCHITECTURE = Architecture(...)``: a function turning config.json into a
``ModelConfig`` and the Hugging Face tensor-name templates for each tensor kind
of the C core. Everything here is architecture-neutral: which tensors a model
needs follows from ``ModelConfig``'s feature flags, never from its name.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..errors import ModelError
from . import rope

_REQUIRED = object()

QK_NORM_NONE, QK_NORM_PER_HEAD, QK_NORM_WHOLE = "none", "per_head", "whole"
# how a router scores experts (colibri.h colibri_router_score)
ROUTER_SOFTMAX, ROUTER_SIGMOID, ROUTER_TOPK_SOFTMAX = "softmax", "sigmoid", "topk_softmax"
FFN_SWIGLU, FFN_SWIGLU_CLAMPED = "swiglu", "swiglu_clamped"


class ConfigReader:
    """Typed, validated access to a config.json object; errors name the field."""

    def __init__(self, raw: dict[str, Any], source: str = "config.json"):
        self.raw = raw
        self.source = source

    def error(self, key: str, message: str) -> ModelError:
        return ModelError(f"{self.source}: field '{key}' {message}")

    def get(self, key: str, default: Any = None) -> Any:
        value = self.raw.get(key, default)
        return default if value is None else value

    def int(self, key: str, default: Any = _REQUIRED, *, min: int = 1, max: int = 1 << 24) -> int:
        value = self.raw.get(key)
        if value is None:
            if default is _REQUIRED:
                raise self.error(key, "is missing")
            value = default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"must be an integer, got {value!r}")
        if not min <= value <= max:
            raise self.error(key, f"= {value} is out of range [{min}, {max}]")
        return value

    def float(self, key: str, default: Any = _REQUIRED, *, min: float = -math.inf,
              max: float = math.inf) -> float:
        value = self.raw.get(key)
        if value is None:
            if default is _REQUIRED:
                raise self.error(key, "is missing")
            value = default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.error(key, f"must be a finite number, got {value!r}")
        if not min <= value <= max:
            raise self.error(key, f"= {value} is out of range [{min}, {max}]")
        return float(value)

    def bool(self, key: str, default: bool) -> bool:
        value = self.raw.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, got {value!r}")
        return value

    def int_list(self, key: str, *, min: int, max: int) -> list[int]:
        value = self.raw.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) for v in value):
            raise self.error(key, f"must be a list of integers, got {value!r}")
        for v in value:
            if not min <= v <= max:
                raise self.error(key, f"holds {v}, out of range [{min}, {max}]")
        return value

    def require_value(self, key: str, allowed: tuple, default: Any) -> Any:
        value = self.raw.get(key, default)
        if value is None:
            value = default
        if value not in allowed:
            raise self.error(key, f"= {value!r} is not supported (supported: {', '.join(map(repr, allowed))})")
        return value


@dataclass(frozen=True)
class ModelConfig:
    """Hyperparameters and feature flags of a loaded model (``Model.config``)."""

    architecture: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int           # dense MLP width (0 when every layer is MoE)
    num_experts: int                 # 0 for a dense model
    top_k: int
    expert_intermediate_size: int
    shared_expert_intermediate_size: int  # 0 = no shared expert
    moe_layers: tuple[int, ...]      # indices of layers with routed experts
    context_length: int              # max_position_embeddings
    rms_norm_eps: float
    rope_theta: float
    rope_inv_freq: np.ndarray = field(repr=False)   # [head_dim/2] float32 (past rope_dim/2: 0, unused)
    rope_attention_factor: float = 1.0
    rope_dim: int = 0                # dims RoPE rotates at the start of each head (0: head_dim)
    attention_scale: float = 0.0     # softmax scale of the attention scores (0: 1/sqrt(head_dim))
    embedding_scale: float = 1.0     # token embeddings multiplied by this (Granite)
    residual_scale: float = 1.0      # block outputs multiplied by this before the residual add (Granite)
    logit_scale: float = 1.0         # logits divided by this (Granite's logits_scaling)
    router_renormalize: bool = True  # top-k probabilities renormalised to sum 1
    shared_expert_gated: bool = False
    qk_norm: str = QK_NORM_NONE
    attention_bias: bool = False
    tied_embeddings: bool = False
    sliding_window: int = 0
    rope_interleaved: bool = False   # q/k rows stored for adjacent-pair RoPE (GGUF llama)
    qkv_clip: float = 0.0
    # routing beyond softmax → top-k (→ renormalise): colibri.h describes the steps
    router_score: str = ROUTER_SOFTMAX
    router_bias: bool = False            # ROUTER_BIAS added to the logits
    router_selection_bias: bool = False  # ROUTER_SEL_BIAS added to the scores, for the choice only
    router_groups: int = 0               # experts in this many equal groups (0 or 1: none)
    router_groups_used: int = 0          # the best groups kept
    router_group_top: int = 0            # a group's score: the sum of its best N choices
    router_norm_min: float = 0.0         # renormalisation divides by max(sum, min) + eps
    router_norm_eps: float = 0.0
    router_scale: float = 1.0            # gates multiplied by this (routed_scaling_factor)
    # latent KV attention (multi-head latent attention): kv_lora_rank > 0 turns it on; head_dim is
    # then the RoPE part of a query/key head, qk_nope_head_dim the rest, num_kv_heads 1
    kv_lora_rank: int = 0
    q_lora_rank: int = 0             # 0: queries projected straight from the hidden state
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    latent_norm_eps: float = 1e-6    # RMSNorm epsilon of the q and kv latents
    attention_scale: float = 0.0     # softmax scale; 0 = 1/sqrt(query head width)
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()
    layer_windows: tuple[int, ...] = ()   # per-layer sliding window (0 = full); () = sliding_window everywhere
    attention_out_bias: bool = False  # o_proj has a bias
    attention_sinks: bool = False     # a learned sink logit per query head joins each softmax
    expert_bias: bool = False         # routed experts' gate, up and down have biases
    ffn_act: str = FFN_SWIGLU         # FFN_SWIGLU or FFN_SWIGLU_CLAMPED (alpha, limit)
    ffn_alpha: float = 0.0
    ffn_limit: float = 0.0

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0 and bool(self.moe_layers)

    @property
    def is_latent(self) -> bool:
        return self.kv_lora_rank > 0


def read_common(cfg: ConfigReader, architecture: str, *, head_dim: int | None = None, **moe: Any) -> ModelConfig:
    """The fields every supported decoder shares, plus the architecture's MoE fields.

    ``moe`` holds the ModelConfig fields the architecture decides itself
    (experts, top_k, widths, routing flags, qk_norm, …). ``head_dim``, when
    given, replaces config.json's head_dim (latent attention: the RoPE dims).
    Checks cross-field sanity that holds for every architecture.
    """
    act = cfg.require_value("hidden_act", ("silu",), "silu")
    del act
    hidden = cfg.int("hidden_size")
    heads = cfg.int("num_attention_heads", max=4096)
    kv_heads = cfg.int("num_key_value_heads", heads, max=4096)
    if heads % kv_heads:
        raise cfg.error("num_key_value_heads", f"= {kv_heads} must divide num_attention_heads ({heads})")
    if head_dim is None:
        if cfg.raw.get("head_dim") is None and hidden % heads:
            raise cfg.error("num_attention_heads", f"= {heads} must divide hidden_size ({hidden})")
        head_dim = cfg.int("head_dim", hidden // heads, max=4096)
    if head_dim % 2:
        raise cfg.error("head_dim", f"= {head_dim} must be even for rotary embeddings")
    layers = cfg.int("num_hidden_layers", max=4096)
    eos = cfg.get("eos_token_id")
    eos_ids = tuple(eos) if isinstance(eos, list) else ((eos,) if isinstance(eos, int) else ())
    bos = cfg.get("bos_token_id")
    rotary = rope.from_config(cfg, head_dim)
    fields = dict(
        architecture=architecture,
        vocab_size=cfg.int("vocab_size", max=1 << 22),
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        context_length=cfg.int("max_position_embeddings", 4096, max=1 << 24),
        rms_norm_eps=cfg.float("rms_norm_eps", 1e-6, min=0.0, max=1.0),
        rope_theta=rotary.theta,
        rope_inv_freq=rotary.inv_freq,
        rope_attention_factor=rotary.attention_factor,
        rope_dim=rotary.dim if rotary.dim < head_dim else 0,
        tied_embeddings=cfg.bool("tie_word_embeddings", False),
        # not a Hugging Face field: set in configs Colibri writes for GGUF-derived models
        rope_interleaved=cfg.bool("rope_interleaved", False),
        bos_token_id=bos if isinstance(bos, int) else None,
        eos_token_ids=tuple(e for e in eos_ids if isinstance(e, int)),
    )
    fields.update(moe)
    config = ModelConfig(**fields)
    if config.num_experts:
        if not 1 <= config.top_k <= config.num_experts:
            raise cfg.error("num_experts_per_tok",
                            f"= {config.top_k} must be between 1 and the number of experts ({config.num_experts})")
    for layer in config.moe_layers:
        if not 0 <= layer < layers:
            raise cfg.error("mlp_only_layers", f"leaves MoE layer {layer} outside 0..{layers - 1}")
    return config


def router_groups(cfg: ConfigReader, num_experts: int, top_k: int, group_top: int, *,
                  groups_key: str = "n_group", used_key: str = "topk_group") -> dict[str, int]:
    """Group-limited routing fields (DeepSeek's n_group / topk_group): experts in n_group equal
    groups, the topk_group best kept, a group scored by the sum of its group_top best choices.
    n_group of 1 (or absent) means no groups."""
    groups = cfg.int(groups_key, 1, max=max(num_experts, 1))
    if groups <= 1:
        return dict(router_groups=0, router_groups_used=0, router_group_top=0)
    if num_experts % groups:
        raise cfg.error(groups_key, f"= {groups} must divide the number of experts ({num_experts})")
    used = cfg.int(used_key, max=groups)
    size = num_experts // groups
    if used * size < top_k:
        raise cfg.error(used_key, f"= {used} groups of {size} experts cannot hold num_experts_per_tok={top_k}")
    if group_top > size:
        raise cfg.error(groups_key, f"= {groups} leaves {size} experts per group, fewer than the {group_top} "
                        "that score a group")
    return dict(router_groups=groups, router_groups_used=used, router_group_top=group_top)


def deepseek_moe_fields(cfg: ConfigReader, *, first_dense: int, shared: int, scale: float) -> dict[str, Any]:
    """Experts, shared experts, the gate scale, and which layers are MoE, as the DeepSeek-style
    configs (DeepSeek-V2/V3, GLM-4.5, dots.llm1) name them: layer l routes when
    l >= first_k_dense_replace and l % moe_layer_freq == 0 (DeepSeek's rule; transformers
    has no moe_layer_freq and needs it 1). The keyword arguments are the defaults of the
    architecture's transformers config class for absent fields."""
    layers = cfg.int("num_hidden_layers", max=4096)
    first = cfg.int("first_k_dense_replace", first_dense, min=0, max=layers)
    freq = cfg.int("moe_layer_freq", 1, max=layers)
    moe_layers = tuple(l for l in range(layers) if l >= first and l % freq == 0)
    width = cfg.int("moe_intermediate_size", max=1 << 20)
    router_scale = cfg.float("routed_scaling_factor", scale, min=0.0)
    if router_scale == 0.0:
        raise cfg.error("routed_scaling_factor", "= 0 would zero every routed expert")
    return dict(
        intermediate_size=cfg.int("intermediate_size", max=1 << 20) if len(moe_layers) < layers else 0,
        num_experts=cfg.int("n_routed_experts", max=4096),
        top_k=cfg.int("num_experts_per_tok", max=4096),
        expert_intermediate_size=width,
        shared_expert_intermediate_size=width * cfg.int("n_shared_experts", shared, min=0, max=4096),
        moe_layers=moe_layers,
        router_scale=router_scale,
    )


def sigmoid_group_routing(cfg: ConfigReader, moe: dict[str, Any], *, renormalize: bool) -> dict[str, Any]:
    """DeepSeek-V3's router as V3, GLM-4.5 and dots.llm1 share it: sigmoid scores, the
    e_score_correction_bias added for the choice only, n_group groups scored by their best two
    (topk_group kept), gates the unbiased scores, renormalised (sum + 1e-20) iff `renormalize`,
    times routed_scaling_factor (in `moe`, from deepseek_moe_fields)."""
    return dict(router_score=ROUTER_SIGMOID, router_selection_bias=True, router_renormalize=renormalize,
                router_norm_eps=1e-20 if renormalize else 0.0,
                **router_groups(cfg, moe["num_experts"], moe["top_k"], group_top=2))


def sparse_layers(cfg: ConfigReader, num_layers: int, num_experts: int) -> tuple[int, ...]:
    """Layers with routed experts under Qwen-style ``mlp_only_layers`` / ``decoder_sparse_step``."""
    mlp_only = set(cfg.int_list("mlp_only_layers", min=0, max=num_layers - 1))
    step = cfg.int("decoder_sparse_step", 1, max=num_layers)
    if num_experts == 0:
        return ()
    return tuple(l for l in range(num_layers) if l not in mlp_only and (l + 1) % step == 0)


def qwen_moe_fields(cfg: ConfigReader, experts_key: str) -> dict[str, Any]:
    """The MoE fields the Qwen MoE configs share: sparse layers chosen by mlp_only_layers /
    decoder_sparse_step, dense layers of intermediate_size, experts of moe_intermediate_size,
    top-k renormalised only with norm_topk_prob."""
    if cfg.bool("use_sliding_window", False):
        raise cfg.error("use_sliding_window", "= true is not supported yet")
    layers = cfg.int("num_hidden_layers", max=4096)
    experts = cfg.int(experts_key, 0, min=0, max=4096)
    moe_layers = sparse_layers(cfg, layers, experts)
    return dict(
        intermediate_size=cfg.int("intermediate_size", max=1 << 20) if len(moe_layers) < layers else 0,
        num_experts=experts,
        top_k=cfg.int("num_experts_per_tok", max=4096) if experts else 0,
        expert_intermediate_size=cfg.int("moe_intermediate_size", max=1 << 20) if experts else 0,
        moe_layers=moe_layers,
        router_renormalize=cfg.bool("norm_topk_prob", False),
    )


# Hugging Face tensor names of the llama family; architectures override entries.
# {l} is the layer index, {e} the expert index.
LLAMA_NAMES: dict[str, str] = {
    "TOKEN_EMBD": "model.embed_tokens.weight",
    "OUTPUT_NORM": "model.norm.weight",
    "OUTPUT": "lm_head.weight",
    "ATTN_NORM": "model.layers.{l}.input_layernorm.weight",
    "WQ": "model.layers.{l}.self_attn.q_proj.weight",
    "WK": "model.layers.{l}.self_attn.k_proj.weight",
    "WV": "model.layers.{l}.self_attn.v_proj.weight",
    "WO": "model.layers.{l}.self_attn.o_proj.weight",
    "BQ": "model.layers.{l}.self_attn.q_proj.bias",
    "BK": "model.layers.{l}.self_attn.k_proj.bias",
    "BV": "model.layers.{l}.self_attn.v_proj.bias",
    "BO": "model.layers.{l}.self_attn.o_proj.bias",
    "Q_NORM": "model.layers.{l}.self_attn.q_norm.weight",
    "K_NORM": "model.layers.{l}.self_attn.k_norm.weight",
    "FFN_NORM": "model.layers.{l}.post_attention_layernorm.weight",
    "FFN_GATE": "model.layers.{l}.mlp.gate_proj.weight",
    "FFN_UP": "model.layers.{l}.mlp.up_proj.weight",
    "FFN_DOWN": "model.layers.{l}.mlp.down_proj.weight",
    "ROUTER": "model.layers.{l}.mlp.gate.weight",
    "EXPERT_GATE": "model.layers.{l}.mlp.experts.{e}.gate_proj.weight",
    "EXPERT_UP": "model.layers.{l}.mlp.experts.{e}.up_proj.weight",
    "EXPERT_DOWN": "model.layers.{l}.mlp.experts.{e}.down_proj.weight",
    "SHARED_GATE": "model.layers.{l}.mlp.shared_expert.gate_proj.weight",
    "SHARED_UP": "model.layers.{l}.mlp.shared_expert.up_proj.weight",
    "SHARED_DOWN": "model.layers.{l}.mlp.shared_expert.down_proj.weight",
    "SHARED_ROUTER": "model.layers.{l}.mlp.shared_expert_gate.weight",
    "ROUTER_BIAS": "model.layers.{l}.mlp.gate.bias",
    "ROUTER_SEL_BIAS": "model.layers.{l}.mlp.gate.e_score_correction_bias",
}


@dataclass(frozen=True)
class GGUFMapping:
    """How llama.cpp stores an architecture: its ``general.architecture`` name, the metadata keys
    (after the ``<arch>.`` prefix) that map to config.json fields beyond the common ones, the
    config values llama.cpp hard-codes for it, whether its q/k rows are permuted for
    adjacent-pair RoPE, and its tensor names where they differ from the common ones
    (``gguf_source.GGUF_NAMES``).

    when: metadata keys (after the prefix) that must be set (True), unset/0 (False) or hold one
    of a tuple's values (None: absent), telling apart the architectures llama.cpp stores under
    one name (mixtral and llama: expert_count; deepseek_v2 and v3: expert_gating_func).
    adjust(metadata, prefix, tensor_names, config): the architecture's own translation, after
    the keys (fields llama.cpp stores otherwise); raises ModelError."""

    arch: str
    keys: dict[str, str] = field(default_factory=dict)
    fixed: dict[str, Any] = field(default_factory=dict)
    rope_interleaved: bool = False
    when: dict[str, "bool | tuple"] = field(default_factory=lambda: {"expert_count": True})
    names: dict[str, "str | Derived"] = field(default_factory=dict)
    rope_fixed: dict[str, Any] = field(default_factory=dict)   # rope_scaling entries GGUF metadata lacks
    adjust: Callable[[dict, str, Any, dict], None] | None = None


@dataclass(frozen=True)
class Derived:
    """A tensor the C core reads in another layout than the checkpoint stores it: built once at
    load by ``build(read, slot, config)``, where ``read(name)`` returns a checkpoint tensor as
    ``(dtype, array)`` (BF16 as raw uint16 bits, block types as raw bytes) and ModelError when it
    is missing (``read(name, optional=True)``: None). ``build`` returns ``(dtype, array)`` in the C core's layout: a permutation of the
    stored elements or blocks, never a dequantization (one exception: a transposition across
    the blocks of a block type, which yields float32; latent.py). ``name`` (with ``{l}``) names
    the main source tensor in messages. Hugging Face names and GGUFMapping.names take them."""

    name: str
    build: Callable[..., tuple[str, np.ndarray]]

    def format(self, **kw) -> str:
        return self.name.format(**kw)


@dataclass(frozen=True)
class Fused:
    """A matrix stored as row block ``index`` of ``count`` equal blocks of a larger tensor (Granite's
    gate and up projections in one ``input_linear``: [2F, D]). For the expert kinds the tensor also
    stacks the experts on its first axis ([E, count·rows, cols]), and ``count`` may be 1. Used in
    place: a block of rows of a row-major tensor is contiguous."""

    name: str
    index: int = 0
    count: int = 1


@dataclass(frozen=True)
class Architecture:
    """One supported Hugging Face ``model_type``."""

    model_type: str
    read_config: Callable[[ConfigReader], ModelConfig]
    names: dict[str, "str | Fused | Derived"] = field(default_factory=lambda: dict(LLAMA_NAMES))
    gguf: GGUFMapping | None = None


@dataclass(frozen=True)
class TensorSlot:
    """One tensor the C core needs: its kind, layer/expert (-1 = none), HF name and shape. A slot
    held inside a larger tensor (Fused) names that tensor, with its shape (source_shape) and the
    index that selects the slot from it (source_index: expert, then a row range)."""

    kind: str
    layer: int
    expert: int
    name: str
    shape: tuple[int, ...]
    source_shape: tuple[int, ...] | None = None
    source_index: tuple = ()


def shape_text(shape) -> str:
    """A shape as error messages spell it: [64, 32]."""
    return "[" + ", ".join(map(str, shape)) + "]"


def tensor_supply(shapes) -> int:
    """How many tensor slots files holding tensors of these shapes can fill at most: a stacked
    [E, ...] expert tensor E, any other tensor one (tensor_slots' `limit`)."""
    return sum(shape[0] if len(shape) == 3 else 1 for shape in shapes)


def tensor_slots(arch: Architecture, c: ModelConfig, *, limit: int | None = None,
                 source: str = "config") -> list[TensorSlot]:
    """Every tensor the model needs, derived from the config's feature flags.

    limit: how many tensors the files can supply at most. A config calling for far more (say
    4096 layers x 4096 experts: over 2 x limit + 1024) raises ModelError naming `source` before
    the list grows past that; a few missing tensors are left to the caller, which names them.
    """
    D, V = c.hidden_size, c.vocab_size
    Q, K = c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
    slots: list[TensorSlot] = []

    def add(kind: str, shape: tuple[int, ...], layer: int = -1, expert: int = -1) -> None:
        if limit is not None and len(slots) > 2 * limit + 1024:
            raise ModelError(f"{source}: calls for far more tensors than the {limit} the files hold "
                             f"({c.num_layers} layers, {c.num_experts} experts per MoE layer)")
        spec = arch.names[kind]
        if not isinstance(spec, Fused):   # a name, or a Derived tensor named by its main source
            slots.append(TensorSlot(kind, layer, expert, spec.format(l=layer, e=expert), shape))
            return
        rows = slice(spec.index * shape[0], (spec.index + 1) * shape[0])
        full = (spec.count * shape[0], *shape[1:])
        stored = ((c.num_experts, *full), (expert, rows)) if expert >= 0 else (full, (rows,))
        slots.append(TensorSlot(kind, layer, expert, spec.name.format(l=layer), shape, *stored))

    add("TOKEN_EMBD", (V, D))
    add("OUTPUT_NORM", (D,))
    if not c.tied_embeddings:
        add("OUTPUT", (V, D))
    moe_layers = set(c.moe_layers)
    for l in range(c.num_layers):
        add("ATTN_NORM", (D,), l)
        if c.is_latent:
            _latent_slots(c, l, add)
        else:
            add("WQ", (Q, D), l)
            add("WK", (K, D), l)
            add("WV", (K, D), l)
            add("WO", (D, Q), l)
        if c.attention_bias:
            add("BQ", (Q,), l)
            add("BK", (K,), l)
            add("BV", (K,), l)
        if c.attention_out_bias:
            add("BO", (D,), l)
        if c.attention_sinks:
            add("ATTN_SINKS", (c.num_heads,), l)
        if c.qk_norm == QK_NORM_PER_HEAD:
            add("Q_NORM", (c.head_dim,), l)
            add("K_NORM", (c.head_dim,), l)
        elif c.qk_norm == QK_NORM_WHOLE:
            add("Q_NORM", (Q,), l)
            add("K_NORM", (K,), l)
        add("FFN_NORM", (D,), l)
        if l in moe_layers:
            F = c.expert_intermediate_size
            add("ROUTER", (c.num_experts, D), l)
            if c.router_bias:
                add("ROUTER_BIAS", (c.num_experts,), l)
            if c.router_selection_bias:
                add("ROUTER_SEL_BIAS", (c.num_experts,), l)
            for e in range(c.num_experts):
                add("EXPERT_GATE", (F, D), l, e)
                add("EXPERT_UP", (F, D), l, e)
                add("EXPERT_DOWN", (D, F), l, e)
            if c.expert_bias:
                add("EXPERT_GATE_BIAS", (c.num_experts, F), l)
                add("EXPERT_UP_BIAS", (c.num_experts, F), l)
                add("EXPERT_DOWN_BIAS", (c.num_experts, D), l)
            if c.shared_expert_intermediate_size:
                S = c.shared_expert_intermediate_size
                add("SHARED_GATE", (S, D), l)
                add("SHARED_UP", (S, D), l)
                add("SHARED_DOWN", (D, S), l)
                if c.shared_expert_gated:
                    add("SHARED_ROUTER", (1, D), l)
        else:
            add("FFN_GATE", (c.intermediate_size, D), l)
            add("FFN_UP", (c.intermediate_size, D), l)
            add("FFN_DOWN", (D, c.intermediate_size), l)
    return slots


def _latent_slots(c: ModelConfig, l: int, add) -> None:
    """Layer l's latent attention tensors (WK_B and WV_B: see latent.py)."""
    D, H, R, dr = c.hidden_size, c.num_heads, c.kv_lora_rank, c.head_dim
    dn, dv, Rq = c.qk_nope_head_dim, c.v_head_dim, c.q_lora_rank
    Qm = H * (dn + dr)
    if Rq:
        add("WQ_A", (Rq, D), l)
        add("Q_A_NORM", (Rq,), l)
        add("WQ_B", (Qm, Rq), l)
    else:
        add("WQ", (Qm, D), l)
    add("WKV_A", (R + dr, D), l)
    add("KV_A_NORM", (R,), l)
    add("WK_B", (H * R, dn), l)
    add("WV_B", (H * dv, R), l)
    add("WO", (D, H * dv), l)
