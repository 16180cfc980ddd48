"""What `colibri inspect` reports: parameters, dtypes, memory, experts."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

EXPERT_KINDS = ("EXPERT_GATE", "EXPERT_UP", "EXPERT_DOWN")


@dataclass(frozen=True)
class Summary:
    params_total: int
    params_active: int          # per token: everything but the experts a token does not use
    weight_bytes: int           # bytes of the tensors the model uses
    bytes_per_token: int        # weight bytes one decode step reads (embedding row, not table)
    kv_bytes_per_token: int     # KV cache bytes per cached position (f32 K and V, all layers)
    kv_bytes_uncompressed: int  # the same for per-head keys and values (differs for latent attention)
    dtypes: dict[str, int]      # dtype -> tensor count
    dtype_params: dict[str, int]   # dtype -> parameters stored in it
    dtype_bytes: dict[str, int]    # dtype -> bytes stored in it
    rearranged_bytes: int = 0   # of weight_bytes, those copied into another layout at load


KV_ELEM_BYTES = {"f32": 4, "f16": 2}   # bytes of one KV cache element, by kv_type


def kv_bytes_per_position(config, kv_type: str = "f32") -> int:
    """K and V of every layer at one cached position, in kv_type (latent attention: the latent
    and the shared RoPE key of every layer)."""
    if config.is_latent:
        return config.num_layers * (config.kv_lora_rank + config.head_dim) * KV_ELEM_BYTES[kv_type]
    return 2 * config.num_layers * config.num_kv_heads * config.head_dim * KV_ELEM_BYTES[kv_type]


def kv_bytes_uncompressed(config, kv_type: str = "f32") -> int:
    """What one position would cost with every head's key and value cached (for latent attention:
    keys of qk_nope_head_dim + RoPE dims, values of v_head_dim, per head and layer)."""
    if config.is_latent:
        per_head = config.qk_nope_head_dim + config.head_dim + config.v_head_dim
        return config.num_layers * config.num_heads * per_head * KV_ELEM_BYTES[kv_type]
    return kv_bytes_per_position(config, kv_type)


def summarize(model) -> Summary:
    c = model.config
    total = active = nbytes = read = rearranged = 0
    dtypes: Counter[str] = Counter()
    dtype_params: Counter[str] = Counter()
    dtype_bytes: Counter[str] = Counter()
    unused_expert_share = (c.num_experts - c.top_k) / c.num_experts if c.num_experts else 0.0
    for slot, ref in model.weights:
        n = int(np.prod(ref.shape))
        size = ref.nbytes
        dtypes[ref.dtype] += 1
        dtype_params[ref.dtype] += n
        dtype_bytes[ref.dtype] += size
        total += n
        nbytes += size
        rearranged += 0 if ref.in_place else size
        share = (1.0 - unused_expert_share) if slot.kind in EXPERT_KINDS else 1.0
        active += round(n * share)
        if slot.kind == "TOKEN_EMBD":
            read += size // c.vocab_size          # one row per token
            if c.tied_embeddings:
                read += size                      # the whole table again as lm_head
        else:
            read += round(size * share)
    return Summary(total, active, nbytes, read, kv_bytes_per_position(c), kv_bytes_uncompressed(c), dict(dtypes),
                   dict(dtype_params), dict(dtype_bytes), rearranged)


def dtype_histogram(s: Summary) -> list[str]:
    """One line per weight type, most bytes first: tensors, share of the parameters and of the
    bytes, bits per weight (a mixed GGUF such as Q4_K_M shows its recipe here)."""
    lines = []
    for name in sorted(s.dtypes, key=lambda d: (-s.dtype_bytes[d], d)):
        params, size = s.dtype_params[name], s.dtype_bytes[name]
        lines.append(f"{name:<6} {s.dtypes[name]:>5} tensors  {100 * params / max(s.params_total, 1):5.1f}% of "
                     f"parameters  {100 * size / max(s.weight_bytes, 1):5.1f}% of bytes  "
                     f"{8 * size / max(params, 1):5.2f} bits/weight")
    return lines


_SCORES = {"softmax": "softmax", "sigmoid": "sigmoid", "topk_softmax": "softmax over the top-k logits"}


def routing_text(c) -> str:
    """A MoE config's routing rule in words: 'sigmoid, selection bias, best 2 of 4 groups, top-3,
    renormalised, x 2.5'."""
    parts = (["router bias"] if c.router_bias else []) + [_SCORES[c.router_score]]
    if c.router_selection_bias:
        parts.append("selection bias")
    if c.router_groups > 1:
        parts.append(f"best {c.router_groups_used} of {c.router_groups} groups")
    if c.router_score != "topk_softmax":
        parts += [f"top-{c.top_k}", "renormalised" if c.router_renormalize else "not renormalised"]
    if c.router_scale != 1.0:
        parts.append(f"x {c.router_scale:g}")
    return ", ".join(parts)


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} TiB"


def human_count(n: int) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f}{unit}"
    return str(n)
