"""Blocks written by llama.cpp's own quantizer (llama-cpp-python's llama_model_quantize), read by
Colibri and by the gguf package's numpy dequantizers (the oracle of test_quant_oracle.py):
bitwise the same floats, every tensor of a tiny model quantized to each of llama.cpp's types
that hold the new block types (Q2_K, Q3_K_M, Q4_K_M, Q5_K_M, Q6_K, Q5_0, Q5_1, IQ4_NL, IQ4_XS,
MXFP4_MOE)."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from colibri.dtypes import BY_NAME

from gguf_export import export_gguf
from test_quant_oracle import NEW_TYPES, colibri_dequantize, oracle_dequantize

llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python (llama.cpp's quantizer) is not installed")
gguf = pytest.importorskip("gguf")

MODEL = "qwen3_moe-wide"   # every matrix whole 256-element blocks
# llama.cpp's LLAMA_FTYPE_MOSTLY_* values
FTYPES = {"Q2_K": 10, "Q3_K_M": 12, "Q4_K_M": 15, "Q5_K_M": 17, "Q6_K": 18, "Q5_0": 8, "Q5_1": 9, "IQ4_NL": 25,
          "IQ4_XS": 30, "MXFP4_MOE": 38}


@pytest.fixture(scope="module")
def quantized(tiny_model_factory, tmp_path_factory):
    tiny = tiny_model_factory(MODEL)
    root = tmp_path_factory.mktemp("llamacpp_blocks")
    export_gguf(tiny.reference, tiny.path, root / "f16.gguf", "f16")
    out = {}
    for name, ftype in FTYPES.items():
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype, params.nthread = ftype, 1
        path = root / f"{name}.gguf"
        assert llama_cpp.llama_model_quantize(str(root / "f16.gguf").encode(), str(path).encode(),
                                              ctypes.byref(params)) == 0, name
        out[name] = path
    return out


def test_llama_cpp_blocks_dequantize_bitwise_as_the_oracle(quantized):
    seen = set()
    for name, path in quantized.items():
        for t in gguf.GGUFReader(path).tensors:
            kind = t.tensor_type.name
            if kind not in NEW_TYPES:
                continue
            raw = np.ascontiguousarray(t.data).view(np.uint8).reshape(-1, BY_NAME[kind].block_bytes)   # [blocks, bytes]
            assert colibri_dequantize(kind, raw).tobytes() == oracle_dequantize(kind, raw).tobytes(), \
                f"{name} {t.name} ({kind})"
            seen.add(kind)
    assert seen == set(NEW_TYPES), sorted(set(NEW_TYPES) - seen)
