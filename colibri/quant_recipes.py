"""Which weight type each tensor gets when `colibri convert` quantizes: one type for every
matrix (q8_0, q4_k, ...), or a K-quant mix (q4_k_m, q5_k_m) that gives the tensors the output
is most sensitive to more bits, as llama.cpp's quantizer mixes its Q4_K_M and Q5_K_M files
(tests/test_convert_kquant.py checks the choice tensor by tensor against llama_model_quantize's
own output on the same model).

A mix, per tensor kind:
  - OUTPUT (or TOKEN_EMBD when the embeddings are tied): Q6_K;
  - WV, and every down projection (dense, routed experts, shared expert) of the layers that
    `more_bits` picks: Q6_K;
  - with exactly 8 experts (Mixtral-style), where attention is a small share of the bytes:
    WK and WV Q8_0, WO at least Q5_K;
  - everything else: the mix's base type.
Norms, biases, sinks and routers stay F32 (convert.f32_kinds()). A row that is not whole blocks of the
chosen type takes the next type that fits (FALLBACK), as llama.cpp does, then F16.
"""
from __future__ import annotations

from .dtypes import BY_NAME
from .models import ModelConfig, TensorSlot

# --dtype -> (base type, mixed: the sensitive tensors get more bits)
TARGETS = {"q8_0": ("Q8_0", False), "q4_0": ("Q4_0", False), "q4_1": ("Q4_1", False),
           "q4_k": ("Q4_K", False), "q5_k": ("Q5_K", False), "q6_k": ("Q6_K", False),
           "q4_k_m": ("Q4_K", True), "q5_k_m": ("Q5_K", True)}
# a type whose block does not divide a row -> the 32-element type of about as many bits
FALLBACK = {"Q2_K": "IQ4_NL", "Q3_K": "IQ4_NL", "IQ4_XS": "IQ4_NL", "Q4_K": "Q5_0", "Q5_K": "Q5_1",
            "Q6_K": "Q8_0"}
DOWN_KINDS = frozenset({"FFN_DOWN", "EXPERT_DOWN", "SHARED_DOWN"})
WIDER = ("Q4_K", "Q5_K", "Q6_K", "Q8_0")   # the mix's types, fewest bits first


def more_bits(layer: int, n_layers: int) -> bool:
    """The layers a mix spends more bits on: the first and last eighth, and every third one
    between them."""
    return layer < n_layers // 8 or layer >= 7 * n_layers // 8 or (layer - n_layers // 8) % 3 == 2


def _at_least(kind: str, floor: str) -> str:
    return kind if WIDER.index(kind) >= WIDER.index(floor) else floor


def mixed_type(base: str, slot: TensorSlot, config: ModelConfig) -> str:
    """The type a K-quant mix with base type `base` gives the matrix `slot`."""
    if slot.kind == "OUTPUT" or (slot.kind == "TOKEN_EMBD" and config.tied_embeddings):
        return "Q6_K"
    eight_experts = config.num_experts == 8
    if slot.kind == "WV":
        return "Q8_0" if eight_experts else "Q6_K" if more_bits(slot.layer, config.num_layers) else base
    if slot.kind == "WK" and eight_experts:
        return "Q8_0"
    if slot.kind == "WO" and eight_experts:
        return _at_least(base, "Q5_K")
    if slot.kind in DOWN_KINDS and more_bits(slot.layer, config.num_layers):
        return "Q6_K"
    return base


def fitting(kind: str, cols: int) -> str:
    """`kind`, or its fallbacks, until one whose block divides a row of `cols`; F16 if none does."""
    while cols % BY_NAME[kind].block_elems:
        kind = FALLBACK.get(kind, "F16")
    return kind


def stored_type(target: str, slot: TensorSlot, config: ModelConfig) -> str:
    """The type `colibri convert --dtype target` (a TARGETS key) stores the matrix `slot` in."""
    base, mixed = TARGETS[target]
    return fitting(mixed_type(base, slot, config) if mixed else base, slot.shape[-1])
