"""GGUFFile refuses malformed files: each corruption, built byte by byte, gets one ModelError line naming its field."""
from __future__ import annotations

import re
import struct
import tracemalloc

import pytest

from colibri.errors import ModelError
from colibri.formats.gguf import GGUFFile

# GGUF value type ids
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
# ggml tensor type ids
T_F32, T_F16, T_Q4_0, T_Q8_0, T_IQ2_XXS = 0, 1, 2, 8, 16


def u32(x):
    return struct.pack("<I", x)


def u64(x):
    return struct.pack("<Q", x)


def string(text, length=None):
    """A GGUF string; ``length`` overrides the length field."""
    data = text if isinstance(text, bytes) else text.encode("utf-8")
    return u64(len(data) if length is None else length) + data


def kv(key, value_type, payload):
    return string(key) + u32(value_type) + payload


def kv_str(key, text):
    return kv(key, STRING, string(text))


def tensor_info(name, dims, ggml_type=T_F32, offset=0):
    return string(name) + u32(len(dims)) + b"".join(u64(d) for d in dims) + u32(ggml_type) + u64(offset)


ARCH = kv_str("general.architecture", "llama")
ONE_TENSOR = [tensor_info("w", [8])]          # F32 [8]: 32 bytes at data offset 0
ONE_TENSOR_DATA = bytes(range(32))


def gguf(*, magic=b"GGUF", version=3, kvs=(ARCH,), tensors=ONE_TENSOR, data=ONE_TENSOR_DATA, alignment=32,
         tensor_count=None, kv_count=None, cut=None):
    """A GGUF file's bytes: header, kvs, tensor infos, zero padding to ``alignment``, data; ``cut`` truncates."""
    head = magic + u32(version) + u64(len(tensors) if tensor_count is None else tensor_count) \
        + u64(len(kvs) if kv_count is None else kv_count)
    body = head + b"".join(kvs) + b"".join(tensors)
    body += bytes(-len(body) % alignment) + data
    return body if cut is None else body[:cut]


def header_len(kvs=(ARCH,), tensors=ONE_TENSOR):
    return 24 + sum(map(len, kvs)) + sum(map(len, tensors))


DATA_START = -(-header_len() // 32) * 32   # of the unbroken file


def arch_kv(payload_type, payload):
    return [ARCH, kv("llama.block_count", payload_type, payload)]


MiB = 1 << 20

# id -> (file bytes, fragment the error must contain)
CASES = {
    # header
    "empty file": (b"", "empty file"),
    "bad magic": (gguf(magic=b"GGML"), "magic: expected b'GGUF'"),
    "version 1": (gguf(version=1), "version: 1 is not supported"),
    "version 99": (gguf(version=99), "version: 99 is not supported"),
    "big-endian": (gguf(version=3 << 24), "big-endian"),
    "truncated in magic": (b"GG", "magic: truncated"),
    "truncated header": (gguf(cut=14), "tensor_count: truncated"),
    "truncated kv_count": (gguf(cut=20), "kv_count: truncated"),
    "tensor_count 2**63": (gguf(tensor_count=2**63), "tensor_count: 9223372036854775808 tensor infos cannot fit"),
    "tensor_count 2**64-1": (gguf(tensor_count=2**64 - 1), "tensor_count"),
    "kv_count 2**40": (gguf(kv_count=2**40), "kv_count: 1099511627776 metadata entries cannot fit"),
    "kv_count one too many": (gguf(kv_count=2, tensors=[], cut=header_len(tensors=[])),
                              "metadata entry 1: key length: truncated"),
    # metadata keys and strings
    "key length 2**40": (gguf(kvs=[string("k", 2**40) + u32(U8) + b"\0"]),
                         "metadata entry 0: key: string length 1099511627776 exceeds the 65535-byte limit"),
    "key length past EOF": (gguf(kvs=[string("k", 60000) + u32(U8) + b"\0"]), "metadata entry 0: key: truncated"),
    "empty key": (gguf(kvs=[kv("", U8, b"\0")]), "metadata entry 0: empty key"),
    "invalid UTF-8 key": (gguf(kvs=[string(b"bad\xffkey") + u32(U8) + b"\0"]),
                          "metadata entry 0: key: not valid UTF-8"),
    "duplicate key": (gguf(kvs=[ARCH, kv("x", U8, b"\1"), kv("x", U8, b"\2")]), "metadata key 'x': duplicate key"),
    "string value length past EOF": (gguf(kvs=[ARCH, kv("general.name", STRING, string("abc", 5000))]),
                                     "metadata key 'general.name': truncated"),
    "string value length 2**40": (gguf(kvs=[ARCH, kv("general.name", STRING, string("abc", 2**40))]),
                                  "metadata key 'general.name': string length 1099511627776 exceeds"),
    "string value over 16 MiB": (gguf(kvs=[ARCH, kv("general.name", STRING, string("abc", 16 * MiB + 1))]),
                                 "exceeds the 16777216-byte limit"),
    "invalid UTF-8 value": (gguf(kvs=[ARCH, kv("general.name", STRING, string(b"\xc3\x28"))]),
                            "metadata key 'general.name': not valid UTF-8"),
    "value type 13": (gguf(kvs=[ARCH, kv("x", 13, b"\0")]), "metadata key 'x': value type 13 is not"),
    "value type 2**32-1": (gguf(kvs=[ARCH, kv("x", 2**32 - 1, b"\0")]), "value type 4294967295"),
    "bool value 2": (gguf(kvs=[ARCH, kv("x", BOOL, b"\2")]), "metadata key 'x': bool value 2"),
    "scalar truncated": (gguf(kvs=[ARCH, kv("x", U64, b"\1\2")], tensors=[],
                              cut=header_len([ARCH, kv("x", U64, b"\1\2")], [])),
                         "metadata key 'x': truncated"),
    # arrays
    "array of arrays": (gguf(kvs=[ARCH, kv("x", ARRAY, u32(ARRAY) + u64(1) + u32(U8) + u64(1) + b"\0")]),
                        "metadata key 'x': nested arrays are not allowed"),
    "array length 2**60": (gguf(kvs=[ARCH, kv("x", ARRAY, u32(U8) + u64(2**60) + b"\0")]),
                           "metadata key 'x': array length 1152921504606846976 cannot fit"),
    "string array length 2**40": (gguf(kvs=[ARCH, kv("x", ARRAY, u32(STRING) + u64(2**40) + string("a"))]),
                                  "metadata key 'x': array length 1099511627776 cannot fit"),
    "bad element type": (gguf(kvs=[ARCH, kv("x", ARRAY, u32(42) + u64(1) + b"\0")]),
                         "metadata key 'x': array element type 42"),
    "string element past EOF": (gguf(kvs=[ARCH, kv("x", ARRAY, u32(STRING) + u64(2) + string("a")
                                                   + string("b", 900))]),
                                "metadata key 'x'[1]: truncated"),
    "bool array value 7": (gguf(kvs=[ARCH, kv("x", ARRAY, u32(BOOL) + u64(3) + b"\1\0\7")]),
                           "metadata key 'x': bool array holds a value other than 0 or 1"),
    # well-known keys
    "alignment 0": (gguf(kvs=[ARCH, kv("general.alignment", U32, u32(0))]), "'general.alignment': 0 is not"),
    "alignment 3": (gguf(kvs=[ARCH, kv("general.alignment", U32, u32(3))]),
                    "'general.alignment': 3 is not a power of two"),
    "alignment 2**30": (gguf(kvs=[ARCH, kv("general.alignment", U32, u32(2**30))]), "'general.alignment': 1073741824"),
    "alignment wrong type": (gguf(kvs=[ARCH, kv("general.alignment", U64, u64(32))]),
                             "'general.alignment': expected a UINT32, got UINT64"),
    "architecture not a string": (gguf(kvs=[kv("general.architecture", U32, u32(1))]),
                                  "'general.architecture': expected a string, got UINT32"),
    "block_count a string": (gguf(kvs=arch_kv(STRING, string("2"))),
                             "'llama.block_count': expected an integer, got STRING"),
    "block_count a float": (gguf(kvs=arch_kv(F32, struct.pack("<f", 2.0))),
                            "'llama.block_count': expected an integer, got FLOAT32"),
    "tokens not strings": (gguf(kvs=[ARCH, kv("tokenizer.ggml.tokens", ARRAY, u32(U32) + u64(1) + u32(5))]),
                           "'tokenizer.ggml.tokens': expected an array of strings, got ARRAY[UINT32]"),
    # tensor infos
    "n_dims 0": (gguf(tensors=[tensor_info("w", [])]), "tensor 'w': n_dims 0 is outside [1, 4]"),
    "n_dims 5": (gguf(tensors=[tensor_info("w", [1, 1, 1, 1, 8])]), "tensor 'w': n_dims 5"),
    "n_dims 2**32-1": (gguf(tensors=[string("w") + u32(2**32 - 1) + u64(8)]), "tensor 'w': n_dims 4294967295"),
    "zero dimension": (gguf(tensors=[tensor_info("w", [8, 0])]), "tensor 'w': dims [8, 0] hold a zero dimension"),
    "dims overflow 2**64": (gguf(tensors=[tensor_info("w", [2**32, 2**32, 2])]), "tensor 'w': dims"),
    "elements over cap": (gguf(tensors=[tensor_info("w", [2**24, 2**25])]), "more than the 281474976710656 limit"),
    "ne0 not a multiple of 32 for Q8_0": (gguf(tensors=[tensor_info("w", [48, 2], T_Q8_0)]),
                                          "tensor 'w': dimension 0 (row length) 48 is not a multiple of the Q8_0 "
                                          "block size 32"),
    "ne0 not a multiple of 32 for Q4_0": (gguf(tensors=[tensor_info("w", [16], T_Q4_0)]), "Q4_0 block size 32"),
    "unknown tensor type 99": (gguf(tensors=[tensor_info("w", [8], 99)]),
                               "tensor 'w': ggml type 99 (unknown) is not supported"),
    "unsupported tensor type IQ2_XXS": (gguf(tensors=[tensor_info("w", [256], T_IQ2_XXS)]),
                                        "tensor 'w': ggml type IQ2_XXS (16) is not supported"),
    "offset not aligned": (gguf(tensors=[tensor_info("w", [8], offset=4)], data=bytes(64)),
                           "tensor 'w': offset 4 is not a multiple of the alignment 32"),
    "offset past EOF": (gguf(tensors=[tensor_info("w", [8], offset=2**40)]),
                        "tensor 'w': offset 1099511627776 is past the end of the file"),
    "tensor data past EOF": (gguf(tensors=[tensor_info("w", [64])]), "tensor 'w': data [0, 256) runs past the end"),
    "overlapping tensors": (gguf(tensors=[tensor_info("a", [16]), tensor_info("b", [8], offset=32)], data=bytes(96)),
                            "tensor 'b': data starts at 32, inside tensor 'a' (which ends at 64)"),
    "duplicate tensor name": (gguf(tensors=[tensor_info("w", [8]), tensor_info("w", [8], offset=32)],
                                   data=bytes(64)), "tensor 'w': duplicate tensor name"),
    "empty tensor name": (gguf(tensors=[tensor_info("", [8])]), "tensor info 0: empty name"),
    "tensor name not UTF-8": (gguf(tensors=[string(b"w\xff") + u32(1) + u64(8) + u32(T_F32) + u64(0)]),
                              "tensor info 0: name: not valid UTF-8"),
    "truncated in the tensor infos": (gguf(cut=header_len() - 5), "tensor 'w': offset: truncated"),
    "truncated in a tensor's dims": (gguf(cut=header_len() - 20), "tensor 'w': dimension 0: truncated"),
    "data section past EOF": (gguf(cut=header_len()),
                              f"data section: starts at byte {DATA_START}, past the end of the file"),
    "truncated in the data": (gguf(cut=-1), "tensor 'w': data [0, 32) runs past the end of the file"),
}


def test_the_unbroken_file_parses(tmp_path):
    path = tmp_path / "ok.gguf"
    path.write_bytes(gguf())
    with GGUFFile(path) as g:
        assert g.metadata == {"general.architecture": "llama"}
        assert g.tensors["w"].array.tobytes() == ONE_TENSOR_DATA
        assert g.tensors["w"].offset == DATA_START == 128 and g.tensors["w"].shape == (8,)


def test_there_are_enough_cases():
    assert len(CASES) >= 30


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_file_is_refused(tmp_path, case):
    content, fragment = CASES[case]
    path = tmp_path / "bad.gguf"
    path.write_bytes(content)
    with pytest.raises(ModelError) as caught:
        GGUFFile(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: "), message
    assert "\n" not in message
    assert fragment in message, message


@pytest.mark.parametrize("case", ["tensor_count 2**63", "kv_count 2**40", "key length 2**40",
                                  "string value length 2**40", "array length 2**60", "string array length 2**40",
                                  "dims overflow 2**64", "offset past EOF"])
def test_huge_counts_allocate_nothing_large(tmp_path, case):
    path = tmp_path / "huge.gguf"
    path.write_bytes(CASES[case][0])
    tracemalloc.start()
    try:
        with pytest.raises(ModelError):
            GGUFFile(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * MiB, f"{case}: peak {peak} bytes"


def test_missing_file(tmp_path):
    with pytest.raises(ModelError, match=re.escape(f"{tmp_path / 'nope.gguf'}: cannot open")):
        GGUFFile(tmp_path / "nope.gguf")
