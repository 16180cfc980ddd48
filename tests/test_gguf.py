"""GGUFFile and tokenizer_from_gguf against files written by the independent `gguf` package (llama.cpp's writer)."""
from __future__ import annotations

import json
import re

import gguf   # test-only dependency: llama.cpp's own writer (pip install gguf)
import numpy as np
import pytest
import tokenizers
from gguf import GGMLQuantizationType, GGUFValueType, GGUFWriter
from gguf.quants import dequantize, quantize
from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers, trainers

from colibri.errors import ModelError
from colibri.formats.gguf import GGML_TYPES, GGUFFile
from colibri.formats.gguf_tokenizer import tokenizer_from_gguf
from harmony import O200K_REGEX


def write_gguf(path, *, arch="llama", kv=(), tensors=(), alignment=None):
    """A GGUF file by gguf.GGUFWriter. kv: (key, value, GGUFValueType, sub_type); tensors: (name, array, raw_dtype)."""
    writer = GGUFWriter(str(path), arch)
    if alignment is not None:
        writer.add_custom_alignment(alignment)
    for key, value, value_type, sub_type in kv:
        writer.add_key_value(key, value, value_type, sub_type)
    for name, array, raw_dtype in tensors:
        writer.add_tensor(name, array, raw_dtype=raw_dtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


# ------------------------------------------------------------------------------------------ metadata

# (key, value written, GGUF type, array element type, value expected back)
METADATA = [
    ("t.uint8", 250, GGUFValueType.UINT8, None, 250),
    ("t.int8", -7, GGUFValueType.INT8, None, -7),
    ("t.uint16", 65000, GGUFValueType.UINT16, None, 65000),
    ("t.int16", -30000, GGUFValueType.INT16, None, -30000),
    ("t.uint32", 4_000_000_000, GGUFValueType.UINT32, None, 4_000_000_000),
    ("t.int32", -2_000_000_000, GGUFValueType.INT32, None, -2_000_000_000),
    ("t.float32", 0.1, GGUFValueType.FLOAT32, None, float(np.float32(0.1))),
    ("t.bool_true", True, GGUFValueType.BOOL, None, True),
    ("t.bool_false", False, GGUFValueType.BOOL, None, False),
    ("t.string", "héllo ✓ 世界", GGUFValueType.STRING, None, "héllo ✓ 世界"),
    ("t.uint64", 2**63 + 5, GGUFValueType.UINT64, None, 2**63 + 5),
    ("t.int64", -(2**62), GGUFValueType.INT64, None, -(2**62)),
    ("t.float64", 1e300, GGUFValueType.FLOAT64, None, 1e300),
    ("t.array_int32", [1, -2, 3], GGUFValueType.ARRAY, GGUFValueType.INT32, [1, -2, 3]),
    ("t.array_uint64", [2**64 - 1, 0], GGUFValueType.ARRAY, GGUFValueType.UINT64, [2**64 - 1, 0]),
    ("t.array_float32", [0.5, -1.25], GGUFValueType.ARRAY, GGUFValueType.FLOAT32, [0.5, -1.25]),
    ("t.array_bool", [True, False, True], GGUFValueType.ARRAY, GGUFValueType.BOOL, [True, False, True]),
    ("t.array_string", ["a", "", "ü ü"], GGUFValueType.ARRAY, GGUFValueType.STRING, ["a", "", "ü ü"]),
    ("t.array_uint8", [0, 255], GGUFValueType.ARRAY, GGUFValueType.UINT8, [0, 255]),
    ("t.array_int16", [-1, 2], GGUFValueType.ARRAY, GGUFValueType.INT16, [-1, 2]),
]


def test_metadata_of_every_value_type_reads_back_equal(tmp_path):
    path = write_gguf(tmp_path / "meta.gguf", kv=[(k, v, t, s) for k, v, t, s, _ in METADATA])
    with GGUFFile(path) as g:
        assert g.version == 3
        assert g.metadata["general.architecture"] == "llama"
        assert g.alignment == 32
        assert g.tensors == {}
        for key, _, value_type, sub_type, expected in METADATA:
            assert g.metadata[key] == expected, key
            assert type(g.metadata[key]) is type(expected), key
            expected_type = f"ARRAY[{sub_type.name}]" if sub_type is not None else value_type.name
            assert g.metadata_types[key] == expected_type, key
        assert list(g.metadata)[1:] == [key for key, *_ in METADATA]   # file order kept


# ------------------------------------------------------------------------------------------ tensors

def _tensor_cases():
    rng = np.random.default_rng(0)
    f32 = rng.standard_normal((3, 64), dtype=np.float32)
    f16 = rng.standard_normal((5, 32)).astype(np.float16)
    q8 = rng.standard_normal((4, 96), dtype=np.float32)
    q4 = rng.standard_normal((2, 3, 64), dtype=np.float32)
    bf16 = rng.standard_normal((7, 8), dtype=np.float32)
    vec = rng.standard_normal(10, dtype=np.float32)
    # name -> (logical shape, type name, raw bytes written, raw_dtype, float values for a dequant check)
    return {
        "f32.weight": (f32.shape, "F32", f32, None, f32),
        "f16.weight": (f16.shape, "F16", f16, None, f16.astype(np.float32)),
        "q8.weight": (q8.shape, "Q8_0", quantize(q8, GGMLQuantizationType.Q8_0), GGMLQuantizationType.Q8_0, q8),
        "q4.weight": (q4.shape, "Q4_0", quantize(q4, GGMLQuantizationType.Q4_0), GGMLQuantizationType.Q4_0, q4),
        "bf16.weight": (bf16.shape, "BF16", quantize(bf16, GGMLQuantizationType.BF16),
                        GGMLQuantizationType.BF16, bf16),
        "norm.bias": (vec.shape, "F32", vec, None, vec),
    }


@pytest.mark.parametrize("alignment", [None, 64])
def test_tensors_read_back_as_zero_copy_views(tmp_path, alignment):
    cases = _tensor_cases()
    path = write_gguf(tmp_path / "t.gguf", tensors=[(n, raw, dt) for n, (_, _, raw, dt, _) in cases.items()],
                      alignment=alignment)
    file_bytes = path.read_bytes()
    with GGUFFile(path) as g:
        assert g.alignment == (alignment or 32)
        assert list(g.tensors) == list(cases)
        bases = set()
        for name, (shape, type_name, raw, raw_dtype, values) in cases.items():
            t = g.tensors[name]
            assert (t.name, t.type_name, t.file) == (name, type_name, str(path))
            assert t.shape == shape and t.dims == shape[::-1]
            assert t.nbytes == raw.nbytes and t.array.dtype == np.uint8 and t.array.shape == (raw.nbytes,)
            assert t.array.tobytes() == raw.tobytes()                               # the bytes written
            assert file_bytes[t.offset:t.offset + t.nbytes] == raw.tobytes()        # at the offset reported
            assert (t.offset - (t.offset % g.alignment)) == t.offset                # aligned
            assert not t.array.flags.writeable                                      # read-only mapping
            assert t.address == t.array.__array_interface__["data"][0]
            bases.add(t.address - t.offset)                 # one mapping: address - file offset is constant
            view = t.view()
            assert np.shares_memory(view, t.array)
            if raw_dtype is None:
                np.testing.assert_array_equal(view, raw)                           # typed zero-copy view
            else:   # BF16 as uint16 bits of `shape`; quantized as [*shape[:-1], bytes per row]
                assert view.shape == (shape if type_name == "BF16" else raw.shape)
                np.testing.assert_array_equal(view.reshape(-1).view(np.uint8), raw.reshape(-1).view(np.uint8))
                np.testing.assert_allclose(dequantize(t.array.reshape(*shape[:-1], -1), raw_dtype), values,
                                           atol=0.2 if type_name == "Q4_0" else 0.03)
        assert len(bases) == 1


def test_type_table():
    assert {t.name: (i, t.block_size, t.block_bytes) for i, t in GGML_TYPES.items()} == {
        "F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20),
        "Q8_0": (8, 32, 34), "BF16": (30, 1, 2), "Q5_0": (6, 32, 22), "Q5_1": (7, 32, 24), "Q2_K": (10, 256, 84),
        "Q3_K": (11, 256, 110), "Q4_K": (12, 256, 144), "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210),
        "IQ4_NL": (20, 32, 18), "IQ4_XS": (23, 256, 136), "MXFP4": (39, 32, 17)}
    for type_id, t in GGML_TYPES.items():   # agrees with the gguf package's own table
        assert gguf.GGML_QUANT_SIZES[GGMLQuantizationType(type_id)] == (t.block_size, t.block_bytes)


def test_arrays_stay_valid_after_close(tmp_path):
    cases = _tensor_cases()
    path = write_gguf(tmp_path / "t.gguf", tensors=[(n, raw, dt) for n, (_, _, raw, dt, _) in cases.items()])
    g = GGUFFile(path)
    kept = g.tensors["f32.weight"].view()
    g.close()
    assert g.tensors == {}
    np.testing.assert_array_equal(kept, cases["f32.weight"][2])   # the mapping lives while a view does
    g.close()   # idempotent


# ------------------------------------------------------------------------------------------ byte-level BPE

CORPUS = [
    "The quick brown fox jumps over the lazy dog. It's 2024; we'll see what you've got!",
    "Mixture-of-Experts models route each token to k of E experts: 12 + 345 = 357, 3.14159...",
    "Ünïcödé tëxt: naïve café, Straße, Ωmega, 日本語のテキスト, 中文文本, emoji 🙂🚀 and tabs\tand\nnewlines",
    "    indented code: def f(x):\n        return x ** 2  # square\n\n\n",
    "I'M SHOUTING, YOU'RE RIGHT, THEY'VE GONE, HE'D SAY, SHE'LL COME, IT'S FINE",
] * 3

TEXTS = [
    "Hello world",
    "The quick brown fox, it's here! They'RE here; we'LL go.",
    "numbers 1 22 333 4444 55555 3.14159 and 1,000,000",
    "whitespace   runs\t\ttabs\n\n\nnewlines  \n  trailing   ",
    "   leading spaces",
    "naïve café Straße Ωmega 日本語 中文 🙂🚀 ﬁ",
    "mixed<|im_start|>user\nhi there<|im_end|>\n<think>hmm</think>done<|endoftext|>",
    "",
    " ",
    "a",
]

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
USER_DEFINED = ["<think>", "</think>"]

# The Hugging Face pipelines each llama.cpp `tokenizer.ggml.pre` name stands for, as tokenizer.json spells them.
HF_LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                   r"|\s*[\r\n]+|\s+(?!\S)|\s+")
HF_QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
HF_PIPELINES = {
    "gpt-2": (lambda: pre_tokenizers.ByteLevel(add_prefix_space=False), False),
    "olmo": (lambda: pre_tokenizers.ByteLevel(add_prefix_space=False), False),
    "llama-bpe": (lambda: pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(HF_LLAMA3_REGEX), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), True),
    "qwen2": (lambda: pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(HF_QWEN2_REGEX), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), False),
    "smollm": (lambda: pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False)]), False),
    "gpt-4o": (lambda: pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(O200K_REGEX), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), False),
}


@pytest.fixture(scope="module")
def trained_byte_level():
    """(vocab, merges) of a small byte-level BPE trained on CORPUS, special tokens first."""
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    model = json.loads(tok.to_str())["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return model["vocab"], merges


def hf_byte_level(vocab, merges, pre):
    """The original Hugging Face tokenizer: BPE + the pre-tokenizer named `pre`, added tokens, ByteLevel decoder."""
    make_pre, ignore_merges = HF_PIPELINES[pre]
    tok = tokenizers.Tokenizer(models.BPE(vocab=dict(vocab), merges=[tuple(m.split(" ")) for m in merges],
                                          ignore_merges=ignore_merges))
    tok.pre_tokenizer = make_pre()
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in USER_DEFINED])
    return tok


def llama_cpp_vocab_metadata(tok, merges):
    """tokens / token types as llama.cpp's convert_hf_to_gguf writes them for a byte-level BPE."""
    vocab = tok.get_vocab(with_added_tokens=True)
    by_id = {i: t for t, i in vocab.items()}
    added = {t.content: t for t in tok.get_added_tokens_decoder().values()}
    tokens = [by_id[i] for i in range(len(by_id))]
    types = [(3 if added[t].special else 4) if t in added else 1 for t in tokens]
    return tokens, types, merges


def write_byte_level_gguf(path, tokens, types, merges, pre, *, add_bos=None, template=None, extra=()):
    kv = [("tokenizer.ggml.model", "gpt2", GGUFValueType.STRING, None)]
    if pre is not None:
        kv.append(("tokenizer.ggml.pre", pre, GGUFValueType.STRING, None))
    kv += [("tokenizer.ggml.tokens", tokens, GGUFValueType.ARRAY, GGUFValueType.STRING),
          ("tokenizer.ggml.token_type", types, GGUFValueType.ARRAY, GGUFValueType.INT32),
          ("tokenizer.ggml.merges", merges, GGUFValueType.ARRAY, GGUFValueType.STRING),
          ("tokenizer.ggml.bos_token_id", tokens.index("<|endoftext|>"), GGUFValueType.UINT32, None),
          ("tokenizer.ggml.eos_token_id", tokens.index("<|im_end|>"), GGUFValueType.UINT32, None), *extra]
    if add_bos is not None:
        kv.append(("tokenizer.ggml.add_bos_token", add_bos, GGUFValueType.BOOL, None))
    if template is not None:
        kv.append(("tokenizer.chat_template", template, GGUFValueType.STRING, None))
    return write_gguf(path, arch="qwen2moe", kv=kv)


@pytest.mark.parametrize("pre", sorted(HF_PIPELINES))
def test_byte_level_bpe_matches_the_original(tmp_path, trained_byte_level, pre):
    vocab, merges = trained_byte_level
    original = hf_byte_level(vocab, merges, pre)
    tokens, types, merges = llama_cpp_vocab_metadata(original, merges)
    template = "{% for m in messages %}<|im_start|>{{ m.content }}<|im_end|>{% endfor %}"
    path = write_byte_level_gguf(tmp_path / "tok.gguf", tokens, types, merges, pre, add_bos=False,
                                 template=template)
    with GGUFFile(path) as g:
        tok = tokenizer_from_gguf(g.metadata, str(path))
    assert tok.vocab_size == original.get_vocab_size(with_added_tokens=True) == len(tokens)
    for text in TEXTS + CORPUS[:5]:
        expected = original.encode(text, add_special_tokens=False).ids
        assert tok.encode(text) == expected, (pre, text)
        assert tok.decode(expected) == original.decode(expected, skip_special_tokens=False) == text
        assert tok.decode(expected, skip_special_tokens=True) == original.decode(expected)
    assert tok.bos_token == "<|endoftext|>" and tok.bos_id == tokens.index("<|endoftext|>")
    assert tok.eos_token == "<|im_end|>" and tok.eos_ids == {tokens.index("<|im_end|>")}
    assert tok.chat_template == template
    stream = tok.stream()
    ids = tok.encode(TEXTS[5])
    assert "".join(stream.push(i) for i in ids) + stream.flush() == TEXTS[5]


def test_byte_level_bos_defaults_and_flags(tmp_path, trained_byte_level):
    vocab, merges = trained_byte_level
    tokens, types, merges = llama_cpp_vocab_metadata(hf_byte_level(vocab, merges, "gpt-2"), merges)
    bos = tokens.index("<|endoftext|>")
    cases = [("gpt-2", None, []), ("gpt-2", True, [bos]), ("llama-bpe", None, [bos]), ("llama-bpe", False, [])]
    for index, (pre, add_bos, prefix) in enumerate(cases):
        path = write_byte_level_gguf(tmp_path / f"b{index}.gguf", tokens, types, merges, pre, add_bos=add_bos)
        with GGUFFile(path) as g:
            tok = tokenizer_from_gguf(g.metadata, str(path))
        body = tok.encode("Hi there", add_special_tokens=False)
        assert tok.encode("Hi there") == prefix + body, (pre, add_bos)


def test_byte_level_default_pre_tokenizer_and_end_of_generation_ids(tmp_path, trained_byte_level):
    vocab, merges = trained_byte_level
    tokens, types, merges = llama_cpp_vocab_metadata(hf_byte_level(vocab, merges, "gpt-2"), merges)
    eot = tokens.index("<|endoftext|>")
    path = write_byte_level_gguf(tmp_path / "d.gguf", tokens, types, merges, None,
                                 extra=[("tokenizer.ggml.eot_token_id", eot, GGUFValueType.UINT32, None)])
    with GGUFFile(path) as g:
        tok = tokenizer_from_gguf(g.metadata, str(path))   # no tokenizer.ggml.pre: llama.cpp's "default"
    assert tok.eos_ids == {tokens.index("<|im_end|>"), eot}
    for text in TEXTS + CORPUS[:5]:
        assert tok.decode(tok.encode(text)) == text
    # "default" isolates punctuation runs and splits digit runs into threes, unlike GPT-2
    pieces = [piece for piece, _ in tok.backend.pre_tokenizer.pre_tokenize_str("x=12345!? ok")]
    assert pieces == ["x", "=", "123", "45", "!?", "Ġok"]


# ------------------------------------------------------------------------------------------ SentencePiece BPE

SPM_TEXTS = [
    "Hello world",
    " leading space and  double  spaces",
    "The quick brown fox jumps over the lazy dog. It's 2024!",
    "naïve café 日本語 🙂 ç, unseen: ж🦜",
    "tabs\tand\nnewlines\n\n",
    "x",
]


@pytest.fixture(scope="module")
def spm_vocab():
    """(tokens, scores, types) of a SentencePiece-style BPE vocabulary: <unk> <s> </s>, 256 byte
    tokens, then pieces in merge order (score = -rank), then single characters (lowest scores)."""
    trainer_tok = tokenizers.Tokenizer(models.BPE())
    trainer_tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=400, show_progress=False)
    trainer_tok.train_from_iterator(CORPUS, trainer)
    model = json.loads(trainer_tok.to_str())["model"]
    merged = ["".join(m) if isinstance(m, list) else m.replace(" ", "") for m in model["merges"]]
    chars = sorted({t for t in model["vocab"] if len(t) == 1} - set(merged))
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    scores = [0.0] * len(tokens)
    for rank, piece in enumerate(dict.fromkeys(merged)):
        if piece not in tokens:
            tokens.append(piece), types.append(1), scores.append(-float(rank))
    for rank, char in enumerate(chars):
        tokens.append(char), types.append(1), scores.append(-1e6 - rank)
    return tokens, scores, types


def spm_reference_encode(text, tokens, scores):
    """llama.cpp's SPM tokenizer (llm_tokenizer_spm): "▁" prefix, spaces to "▁", then repeatedly merge
    the adjacent pair forming the best-scored token (leftmost on ties); leftovers as byte tokens."""
    ids = {t: i for i, t in enumerate(tokens)}
    symbols = list("▁" + text.replace(" ", "▁"))
    while True:
        best = None
        for i in range(len(symbols) - 1):
            merged = symbols[i] + symbols[i + 1]
            if merged in ids and (best is None or scores[ids[merged]] > best[0]):
                best = (scores[ids[merged]], i)
        if best is None:
            break
        i = best[1]
        symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]
    out = []
    for symbol in symbols:
        out.extend([ids[symbol]] if symbol in ids else [ids[f"<0x{b:02X}>"] for b in symbol.encode()])
    return out


def write_spm_gguf(path, tokens, scores, types, **extra_kv):
    kv = [("tokenizer.ggml.model", "llama", GGUFValueType.STRING, None),
          ("tokenizer.ggml.tokens", tokens, GGUFValueType.ARRAY, GGUFValueType.STRING),
          ("tokenizer.ggml.scores", scores, GGUFValueType.ARRAY, GGUFValueType.FLOAT32),
          ("tokenizer.ggml.token_type", types, GGUFValueType.ARRAY, GGUFValueType.INT32),
          ("tokenizer.ggml.bos_token_id", 1, GGUFValueType.UINT32, None),
          ("tokenizer.ggml.eos_token_id", 2, GGUFValueType.UINT32, None),
          ("tokenizer.ggml.unknown_token_id", 0, GGUFValueType.UINT32, None)]
    kv += [(k, v, t, None) for k, (v, t) in extra_kv.items()]
    return write_gguf(path, arch="llama", kv=kv)


def test_sentencepiece_bpe_matches_llama_cpp_reference(tmp_path, spm_vocab):
    tokens, scores, types = spm_vocab
    path = write_spm_gguf(tmp_path / "spm.gguf", tokens, scores, types)
    with GGUFFile(path) as g:
        tok = tokenizer_from_gguf(g.metadata, str(path))
    assert tok.vocab_size == len(tokens) and tok.bos_id == 1 and tok.eos_ids == {2}
    for text in SPM_TEXTS + CORPUS[:5]:
        expected = spm_reference_encode(text, tokens, scores)
        assert tok.encode(text, add_special_tokens=False) == expected, text
        assert tok.encode(text) == [1] + expected   # llama.cpp adds BOS to a "llama" vocabulary by default
        assert tok.decode(expected) == text
        stream = tok.stream()
        assert "".join(stream.push(i) for i in expected) + stream.flush() == text
    assert any(tokens[i].startswith("<0x") for i in tok.encode("🦜", add_special_tokens=False))  # byte fallback
    # special tokens are matched whole, and the text after one gets its own "▁" prefix (as llama.cpp does)
    assert tok.encode("<s>Hi</s>", add_special_tokens=False) == [1] + spm_reference_encode("Hi", tokens, scores) + [2]
    assert tok.decode([1, 2], skip_special_tokens=True) == ""


def test_sentencepiece_without_space_prefix(tmp_path, spm_vocab):
    tokens, scores, types = spm_vocab
    path = write_spm_gguf(tmp_path / "spm.gguf", tokens, scores, types,
                          **{"tokenizer.ggml.add_space_prefix": (False, GGUFValueType.BOOL),
                             "tokenizer.ggml.add_bos_token": (False, GGUFValueType.BOOL),
                             "tokenizer.ggml.add_eos_token": (True, GGUFValueType.BOOL)})
    with GGUFFile(path) as g:
        tok = tokenizer_from_gguf(g.metadata, str(path))
    ids = tok.encode("Hello world")
    assert ids[-1] == 2 and ids[0] != 1
    assert tokens[ids[0]][0] != "▁"
    assert tok.decode(ids, skip_special_tokens=True) == "Hello world"


# ------------------------------------------------------------------------------------------ tokenizer errors

@pytest.mark.parametrize("meta, fragment", [
    ({"tokenizer.ggml.model": "bert", "tokenizer.ggml.tokens": ["a"]}, "tokenizer model 'bert'"),
    ({"tokenizer.ggml.tokens": ["a"]}, "'tokenizer.ggml.model': missing"),
    ({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["a", "b"], "tokenizer.ggml.merges": ["a b"],
      "tokenizer.ggml.pre": "mystery"}, "pre-tokenizer 'mystery'"),
    ({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["a", "a"], "tokenizer.ggml.merges": []},
     "tokenizer.ggml.tokens[1]"),
    ({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["a", "b"], "tokenizer.ggml.merges": ["ab"]},
     "tokenizer.ggml.merges[0]"),
    ({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["a", "b"], "tokenizer.ggml.merges": ["a c"]},
     "cannot build the BPE model"),
    ({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["a", "b"], "tokenizer.ggml.merges": [],
      "tokenizer.ggml.eos_token_id": 7}, "outside the vocabulary"),
    ({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["a", "b"], "tokenizer.ggml.merges": [],
      "tokenizer.ggml.token_type": [1]}, "'tokenizer.ggml.token_type'"),
    ({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["a", "b"], "tokenizer.ggml.merges": [],
      "tokenizer.ggml.add_bos_token": True}, "'tokenizer.ggml.add_bos_token'"),
    ({"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": ["a", "b"], "tokenizer.ggml.scores": [0.0]},
     "'tokenizer.ggml.scores'"),
])
def test_bad_tokenizer_metadata(meta, fragment):
    with pytest.raises(ModelError, match="^x.gguf: .*" + re.escape(fragment)):
        tokenizer_from_gguf(meta, "x.gguf")
