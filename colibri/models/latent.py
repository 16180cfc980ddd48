"""Latent attention's key and value up-projections, in the layout the C core multiplies.

Checkpoints store them as one joint matrix [H*(dn+dv), R] (Hugging Face ``kv_b_proj``, the
``attn_kv_b`` of older llama.cpp GGUFs): per head, dn rows of the key up-projection, then dv
rows of the value up-projection, each R (kv_lora_rank) wide. The absorbed attention of the
C core wants them apart:

    WK_B [H*R, dn]   per head the key part transposed: q_lat = WK_B[h] . q_nope
    WV_B [H*dv, R]   per head the value part as stored: o = WV_B[h] . a

llama.cpp's current converter writes exactly these (``attn_k_b`` [H, R, dn], ``attn_v_b``
[H, dv, R]), used in place. From a joint matrix the value part is a gather of whole rows (any
dtype, block types included) and the key part a transposition: a copy made once at load, in
the stored float type, or float32 for block types (whose blocks run along the rows being
transposed).
"""
from __future__ import annotations

import numpy as np

from ..dtypes import BY_NAME, FLOAT_TYPES, row_bytes
from ..errors import ModelError
from .spec import Derived, ModelConfig, TensorSlot, shape_text


def _joint(read, name: str, slot: TensorSlot, c: ModelConfig) -> tuple[str, np.ndarray]:
    """The joint matrix, its shape checked: [H*(dn+dv), R] (block types: R's bytes per row)."""
    dtype, joint = read(name)
    rows, R = c.num_heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank
    width = R if dtype in FLOAT_TYPES else (row_bytes(dtype, R) if R % BY_NAME[dtype].block_elems == 0 else -1)
    if tuple(joint.shape) != (rows, width):
        raise ModelError(f"tensor '{name}' (for {slot.kind}, layer {slot.layer}): shape {shape_text(joint.shape)}, "
                         f"expected {shape_text((rows, R))} (heads x (qk_nope_head_dim + v_head_dim), kv_lora_rank)")
    return dtype, joint


def split_joint(slot: TensorSlot, dtype: str, joint: np.ndarray, c: ModelConfig) -> tuple[str, np.ndarray]:
    """(dtype, array) of slot (WK_B or WV_B) from the joint matrix: `joint` is its typed view
    [H*(dn+dv), R] for float types (BF16 as raw uint16 bits) or its raw block bytes
    [H*(dn+dv), bytes per row]."""
    H, dn, dv, R = c.num_heads, c.qk_nope_head_dim, c.v_head_dim, c.kv_lora_rank
    per_head = joint.reshape(H, dn + dv, joint.shape[-1])   # per_head: [H, dn+dv, R or row bytes]
    if slot.kind == "WV_B":
        return dtype, np.ascontiguousarray(per_head[:, dn:, :]).reshape(H * dv, joint.shape[-1])
    if dtype not in FLOAT_TYPES:
        from ..convert import dequantize_rows

        per_head = dequantize_rows(joint, dtype, (H * (dn + dv), R)).reshape(H, dn + dv, R)
        dtype = "F32"
    return dtype, np.ascontiguousarray(per_head[:, :dn, :].transpose(0, 2, 1)).reshape(H * R, dn)


def from_joint(name: str) -> Derived:
    """WK_B or WV_B from the joint matrix called `name` ({l}: the layer)."""
    def build(read, slot: TensorSlot, c: ModelConfig):
        joint_name = name.format(l=slot.layer)
        return split_joint(slot, *_joint(read, joint_name, slot, c), c)
    return Derived(name, build)


def from_gguf(name: str, joint: str) -> Derived:
    """WK_B or WV_B from llama.cpp's per-head stack `name` ([H, rows, cols], used in place), or
    from an older file's joint matrix `joint` when the stack is absent."""
    def build(read, slot: TensorSlot, c: ModelConfig):
        stacked = read(name.format(l=slot.layer), optional=True)
        if stacked is None:
            return split_joint(slot, *_joint(read, joint.format(l=slot.layer), slot, c), c)
        dtype, array = stacked                               # array: [H, rows, cols or row bytes]
        if array.ndim != 3 or array.shape[0] != c.num_heads:
            raise ModelError(f"tensor '{name.format(l=slot.layer)}' (for {slot.kind}, layer {slot.layer}): shape "
                             f"{shape_text(array.shape)}, expected {c.num_heads} stacked heads")
        return dtype, array.reshape(array.shape[0] * array.shape[1], array.shape[2])
    return Derived(name, build)
