"""Malformed files of the block types beyond Q8_0/Q4_0/Q4_1: each gets one error line naming the
tensor and what is wrong (wrong block sizes, truncated super-blocks, unknown or unsupported type
ids, rows that are not whole blocks, a block type where a vector belongs), and NaN/Inf block
scales are counted for `colibri check` (its end-to-end report: test_gguf_blocks.py).

GGUF cases are built byte by byte with test_gguf_malformed's helpers and read by GGUFFile;
.colibri cases mutate a converted file and must be refused by both the C loader and the Python
reader with the same words.
"""
from __future__ import annotations

import struct

import numpy as np
import pytest

import colibri
from colibri import ModelError
from colibri.convert import convert
from colibri.dtypes import DTYPES, nonfinite_scales
from colibri.formats.gguf import GGUFFile

from test_gguf_blocks import _write, mixed_recipe
from test_gguf_malformed import gguf, tensor_info
from test_native_format import assert_refused_by_c_and_python, entry_at

T_Q5_1, T_Q2_K, T_Q3_K, T_Q4_K, T_Q6_K, T_Q8_K, T_IQ2_XXS, T_IQ4_XS, T_MXFP4, T_NVFP4 = 7, 10, 11, 12, 14, 15, 16, 23, 39, 40

# id -> (file bytes, fragment the one-line error must contain)
GGUF_CASES = {
    "Q4_K row of 255": (gguf(tensors=[tensor_info("w", [255, 2], T_Q4_K)]),
                        "tensor 'w': dimension 0 (row length) 255 is not a multiple of the Q4_K block size 256"),
    "Q6_K row of one 32-block": (gguf(tensors=[tensor_info("w", [32], T_Q6_K)]),
                                 "row length) 32 is not a multiple of the Q6_K block size 256"),
    "IQ4_XS row of 128": (gguf(tensors=[tensor_info("w", [128, 4], T_IQ4_XS)]),
                          "row length) 128 is not a multiple of the IQ4_XS block size 256"),
    "Q2_K row of 320": (gguf(tensors=[tensor_info("w", [320], T_Q2_K)]),
                        "row length) 320 is not a multiple of the Q2_K block size 256"),
    "MXFP4 row of 48": (gguf(tensors=[tensor_info("w", [48, 3], T_MXFP4)]),
                        "row length) 48 is not a multiple of the MXFP4 block size 32"),
    "Q5_1 row of 16": (gguf(tensors=[tensor_info("w", [16], T_Q5_1)]),
                       "row length) 16 is not a multiple of the Q5_1 block size 32"),
    "truncated Q4_K super-block": (gguf(tensors=[tensor_info("w", [256], T_Q4_K)], data=bytes(100)),
                                   "tensor 'w': data [0, 144) runs past the end of the file (data section holds "
                                   "100 bytes)"),
    "second Q6_K super-block truncated": (gguf(tensors=[tensor_info("w", [512], T_Q6_K)], data=bytes(300)),
                                          "tensor 'w': data [0, 420) runs past the end of the file"),
    "truncated MXFP4 block": (gguf(tensors=[tensor_info("w", [32], T_MXFP4)], data=bytes(16)),
                              "tensor 'w': data [0, 17) runs past the end of the file"),
    # a writer that took Q3_K blocks for 108 bytes placed the next tensor inside this one
    "Q3_K laid out with 108-byte blocks": (gguf(tensors=[tensor_info("a", [256, 8], T_Q3_K),
                                                         tensor_info("b", [8], offset=864)], data=bytes(1024)),
                                           "tensor 'b': data starts at 864, inside tensor 'a' (which ends at 880)"),
    "unknown type 41": (gguf(tensors=[tensor_info("w", [256], 41)]), "tensor 'w': ggml type 41 (unknown) is not"),
    "unknown type 2**32-1": (gguf(tensors=[tensor_info("w", [256], 2**32 - 1)]), "ggml type 4294967295 (unknown)"),
    "unsupported IQ2_XXS": (gguf(tensors=[tensor_info("w", [256], T_IQ2_XXS)]),
                            "tensor 'w': ggml type IQ2_XXS (16) is not supported"),
    "activation-only Q8_K": (gguf(tensors=[tensor_info("w", [256], T_Q8_K)]), "ggml type Q8_K (15) is not supported"),
    "unsupported NVFP4": (gguf(tensors=[tensor_info("w", [64], T_NVFP4)]), "ggml type NVFP4 (40) is not supported"),
}


def test_there_are_enough_cases():
    assert len(GGUF_CASES) + len(NATIVE_CASES) + 1 >= 15


@pytest.mark.parametrize("case", sorted(GGUF_CASES))
def test_malformed_gguf_is_refused(tmp_path, case):
    content, fragment = GGUF_CASES[case]
    path = tmp_path / "bad.gguf"
    path.write_bytes(content)
    with pytest.raises(ModelError) as caught:
        GGUFFile(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and "\n" not in message and fragment in message, message


@pytest.fixture(scope="module")
def wide(tiny_model_factory):
    return tiny_model_factory("qwen3_moe-wide")


def test_block_type_norm_is_refused(wide, tmp_path):
    """A K-type vector (an RMSNorm weight) is a valid GGUF tensor, but not a valid model."""
    path = tmp_path / "q4k-norm.gguf"
    _write(wide, path, lambda name, a: "Q4_K" if name == "blk.0.attn_norm.weight" else mixed_recipe(name, a))
    with pytest.raises(ModelError) as caught:
        colibri.load(path)
    message = str(caught.value)
    assert "\n" not in message and "input_layernorm" in message and "dtype Q4_K is for matrices" in message, message


# ---- .colibri files holding the new types ---------------------------------------------------

@pytest.fixture(scope="module")
def good_native(wide, tmp_path_factory) -> bytes:
    root = tmp_path_factory.mktemp("blocks-native")
    _write(wide, root / "mixed.gguf", mixed_recipe)
    return convert(root / "mixed.gguf", root / "mixed.colibri", "keep", progress=False).read_bytes()


def _first_of(dtype: str):
    """A mutation of the first entry stored as dtype: f(data, at, entry) with `at` the entry's offset."""
    def wrap(change):
        def mutate(data: bytearray) -> None:
            entries = (entry_at(data, i) for i in range(struct.unpack_from("<I", data, 16)[0]))
            at, e = next((at, e) for at, e in entries if e.dtype_name == dtype)
            change(data, at, e)
        return mutate
    return wrap


@_first_of("Q4_K")
def _q4k_with_148_byte_blocks(data, at, e):
    struct.pack_into("<Q", data, at + 40, e.rows * (e.cols // 256) * 148)


@_first_of("Q6_K")
def _q6k_cols_not_whole_blocks(data, at, e):
    struct.pack_into("<q", data, at + 24, e.cols - 32)


@_first_of("Q4_K")
def _q4k_as_iq4_xs(data, at, e):   # same 256-element blocks, 136 bytes instead of 144
    struct.pack_into("<i", data, at + 12, 14)


@_first_of("MXFP4")
def _activation_only_dtype(data, at, e):
    struct.pack_into("<i", data, at + 12, 16)


NATIVE_CASES = {
    "Q4_K nbytes of 148-byte blocks": (_q4k_with_148_byte_blocks, "does not match shape"),
    "Q6_K cols not whole super-blocks": (_q6k_cols_not_whole_blocks, "is not valid for dtype Q6_K"),
    "Q4_K bytes labelled IQ4_XS": (_q4k_as_iq4_xs, "of IQ4_XS"),
    "dtype 16 (the activation-only Q8_H)": (_activation_only_dtype, "unknown dtype 16"),
}


@pytest.mark.parametrize("case", sorted(NATIVE_CASES))
def test_malformed_native_file_rejected_by_c_and_python(good_native, tmp_path, case):
    mutate, words = NATIVE_CASES[case]
    assert_refused_by_c_and_python(good_native, mutate, tmp_path / "bad.colibri", words)


# ---- NaN / Inf block scales ---------------------------------------------------------------------

@pytest.mark.parametrize("t", [t for t in DTYPES if t.is_block], ids=lambda t: t.name)
def test_every_scale_field_is_scanned(t):
    """Each f16 scale field (d, dmin, m) set to +inf, -inf or a NaN, and MXFP4's E8M0 0xFF, is
    counted once; finite values, f16 subnormals and E8M0 254 are not."""
    rng = np.random.default_rng(t.colibri_id)
    blocks = rng.integers(0, 256, (64, t.block_bytes), dtype=np.uint8)
    for at in t.f16_scales:
        blocks[:, at:at + 2] = np.frombuffer(struct.pack("<e", 0.5), np.uint8)
        blocks[3, at:at + 2] = np.frombuffer(struct.pack("<H", 0x03FF), np.uint8)   # subnormal: fine
    for at in t.e8m0_scales:
        blocks[:, at] = 254
    bad = 0
    for k, at in enumerate(t.f16_scales):
        for j, bits in enumerate((0x7C00, 0xFC00, 0x7E01)):
            blocks[10 * k + j, at:at + 2] = np.frombuffer(struct.pack("<H", bits), np.uint8)
            bad += 1
    for at in t.e8m0_scales:
        blocks[7, at] = 0xFF
        bad += 1
    assert nonfinite_scales(t.name, blocks.reshape(-1)) == bad
