"""colibri.tokenizer against transformers.AutoTokenizer on tokenizers built here.

Two tokenizers, both trained in the test and saved with transformers' save_pretrained:
  bytelevel  GPT-2/Qwen-style byte-level BPE with ChatML special tokens, EOS from
             tokenizer_config plus generation_config.json, an extra special token not in the
             trained vocabulary and a model-specific named token (image_token);
  llama      SentencePiece-style BPE (Metaspace, byte fallback, Strip decoder) whose BOS comes
             from a TemplateProcessing post-processor; its tokenizer_config says
             add_bos_token=false / add_eos_token=true, which transformers 5 ignores when a
             tokenizer.json exists.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import tokenizers
from tokenizers import decoders, models, pre_tokenizers, processors, trainers

from colibri.errors import ModelError
from colibri.tokenizer import Tokenizer

CORPUS = ["The quick brown fox jumps over the lazy dog. Hello world, hello tokens!",
          "Tokenizers split text into pieces; streaming puts it back together.",
          "Café 你好 naïve  spaces\n\ttabs"] * 30

TEXTS = [
    "Hello world",
    "The lazy dog jumps over the quick brown fox.",
    "你好，世界。漢字とかな",                         # CJK, mostly unseen in training
    "emoji 🦜🤖👍🏽 and a family 👨‍👩‍👧",                 # 4-byte chars, skin tone, ZWJ sequence
    "combining e\u0301 a\u0308 n\u0303 and café",   # combining marks and a precomposed é
    "  leading, trailing  \n\n\t\t mixed   whitespace   ",
    "<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n",
    "special in text: </s> <s> <|endoftext|> <|tool|> <image> end",
    "",
    " ",
]

TEMPLATE_JINJA = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
TEMPLATE_CONFIG = "{{ 'this one loses to chat_template.jinja' }}"


def _bytelevel_backend() -> tokenizers.Tokenizer:
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=320, show_progress=False,
                                  special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    return tok


def _llama_backend() -> tokenizers.Tokenizer:
    """BPE over Metaspace pieces with <0xXX> byte-fallback tokens at ids 3..258, as Llama/Mixtral ship."""
    trained = tokenizers.Tokenizer(models.BPE())
    trained.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    trained.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=150, limit_alphabet=40, show_progress=False))
    spec = json.loads(trained.to_str())["model"]
    vocab = {t: i for i, t in enumerate(["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)])}
    for piece in sorted(spec["vocab"], key=spec["vocab"].get):
        vocab.setdefault(piece, len(vocab))
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in spec["merges"]]
    tok = tokenizers.Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens(["<unk>", "<s>", "</s>"])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", 1)])
    return tok


def _edit_json(path, **changes):
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    from transformers import PreTrainedTokenizerFast

    root = tmp_path_factory.mktemp("tokenizers")
    bytelevel = root / "bytelevel"
    hf = PreTrainedTokenizerFast(tokenizer_object=_bytelevel_backend(), eos_token="<|im_end|>",
                                 pad_token="<|endoftext|>")
    hf.chat_template = TEMPLATE_JINJA
    hf.save_pretrained(bytelevel)   # writes chat_template.jinja
    _edit_json(bytelevel / "tokenizer_config.json", chat_template=TEMPLATE_CONFIG,
               additional_special_tokens=["<|tool|>"], image_token="<image>")
    (bytelevel / "generation_config.json").write_text(json.dumps({"eos_token_id": [0, 2]}))

    llama = root / "llama"
    PreTrainedTokenizerFast(tokenizer_object=_llama_backend(), bos_token="<s>", eos_token="</s>",
                            unk_token="<unk>").save_pretrained(llama)
    _edit_json(llama / "tokenizer_config.json", add_bos_token=False, add_eos_token=True,
               chat_template=[{"name": "default", "template": "{{ bos_token }}{{ messages[0].content }}"},
                              {"name": "tool_use", "template": "{{ bos_token }}tools={{ tools | tojson }}"}])
    (llama / "config.json").write_text(json.dumps({"eos_token_id": 2, "bos_token_id": 1}))
    return {"bytelevel": bytelevel, "llama": llama}


@pytest.fixture(scope="module")
def pairs(dirs):
    """name -> (colibri Tokenizer, transformers tokenizer) loaded from the same directory."""
    from transformers import AutoTokenizer

    return {name: (Tokenizer.from_dir(path), AutoTokenizer.from_pretrained(path)) for name, path in dirs.items()}


KINDS = ["bytelevel", "llama"]


# ------------------------------------------------------------------------------------------
# encode / decode parity
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("text", TEXTS)
def test_encode_and_decode_match_transformers(pairs, kind, text):
    ours, ref = pairs[kind]
    for add_special in (True, False):
        ids = ours.encode(text, add_special_tokens=add_special)
        assert ids == ref(text, add_special_tokens=add_special)["input_ids"]
        for skip in (False, True):
            assert ours.decode(ids, skip_special_tokens=skip) == ref.decode(ids, skip_special_tokens=skip)


def test_llama_adds_bos_from_its_post_processor_and_ignores_config_flags(pairs):
    ours, ref = pairs["llama"]
    ids = ours.encode("Hello world")
    assert ids[0] == ours.bos_id == ours.token_to_id("<s>") == 1
    assert ids[-1] != ours.token_to_id("</s>")   # add_eos_token=true is ignored, as by transformers 5
    assert ids == ref("Hello world")["input_ids"]
    assert ours.encode("Hello world", add_special_tokens=False) == ids[1:]


def test_byte_fallback_really_happens(pairs):
    ours, ref = pairs["llama"]
    pieces = ref.convert_ids_to_tokens(ours.encode("漢", add_special_tokens=False))   # not in the corpus
    assert pieces[-3:] == ["<0xE6>", "<0xBC>", "<0xA2>"]


def test_special_tokens_vocab_and_eos_ids(pairs):
    ours, ref = pairs["bytelevel"]
    assert ours.bos_id is None and ours.bos_token is None
    assert ours.eos_token == "<|im_end|>"
    # tokenizer_config's eos (<|im_end|> = 2) merged with generation_config's [0, 2]
    assert ours.eos_ids == frozenset({0, 2})
    assert ours.vocab_size == len(ref)
    # tokens named only in tokenizer_config are registered as special tokens, as transformers does
    for token in ("<|tool|>", "<image>"):
        assert ours.token_to_id(token) == ref.convert_tokens_to_ids(token) is not None
    assert ours.special_tokens == ref.special_tokens_map
    assert ours.token_to_id("no such token") is None

    llama, llama_ref = pairs["llama"]
    assert llama.eos_ids == frozenset({2}) and llama.vocab_size == len(llama_ref)


def test_decode_of_padding_and_invalid_ids(pairs):
    ours, ref = pairs["bytelevel"]
    # ids past the tokenizer's vocabulary (a model's padded embedding rows) decode to nothing,
    # as transformers does
    assert ours.decode([40, ours.vocab_size, 41]) == ours.decode([40, 41]) == ref.decode([40, 41])
    stream = ours.stream()
    assert stream.push(ours.vocab_size + 5) + stream.flush() == ""
    with pytest.raises(ValueError, match="negative"):
        ours.decode([1, -3])
    with pytest.raises(ValueError, match="negative"):
        ours.stream().push(-1)
    with pytest.raises(ValueError, match="must be integers"):
        ours.decode([1.0])
    assert ours.decode(np.array([40, 41])) == ours.decode([40, 41])


# ------------------------------------------------------------------------------------------
# chat templates found in the directory
# ------------------------------------------------------------------------------------------

def test_chat_template_file_wins_over_config(pairs):
    ours, ref = pairs["bytelevel"]
    assert ours.chat_template == TEMPLATE_JINJA == ref.chat_template
    messages = [{"role": "user", "content": "hi"}]
    assert ours.render_chat(messages) == ref.apply_chat_template(messages, tokenize=False,
                                                                 add_generation_prompt=True)


def test_named_chat_templates_from_config(pairs):
    ours, ref = pairs["llama"]
    assert set(ours.chat_templates) == {"default", "tool_use"}
    messages = [{"role": "user", "content": "hi"}]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    assert ours.render_chat(messages) == ref.apply_chat_template(messages, tokenize=False) == "<s>hi"
    assert ours.render_chat(messages, tools=tools) == ref.apply_chat_template(messages, tools=tools, tokenize=False)


# ------------------------------------------------------------------------------------------
# streaming
# ------------------------------------------------------------------------------------------

def _streamed(tokenizer, ids, skip_special_tokens=False):
    stream = tokenizer.stream(skip_special_tokens=skip_special_tokens)
    pieces = [stream.push(i) for i in ids]
    return pieces, stream.flush()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("skip", [False, True])
def test_stream_reproduces_decode(pairs, kind, skip):
    ours, _ = pairs[kind]
    for text in TEXTS:
        ids = ours.encode(text)
        pieces, rest = _streamed(ours, ids, skip)
        assert "".join(pieces) + rest == ours.decode(ids, skip_special_tokens=skip), text
        assert rest == ""   # every text here ends on a complete character


@pytest.mark.parametrize("kind", KINDS)
def test_stream_holds_a_split_emoji_until_complete(pairs, kind):
    ours, _ = pairs[kind]
    prefix = ours.encode("ok ", add_special_tokens=False)
    emoji = ours.encode("ok 🦜", add_special_tokens=False)[len(prefix):]
    assert len(emoji) >= 2, "the emoji must be split across byte tokens for this test to mean anything"
    pieces, rest = _streamed(ours, prefix + emoji)
    emoji_pieces = pieces[len(prefix):]
    assert emoji_pieces[:-1] == [""] * (len(emoji) - 1)
    assert emoji_pieces[-1].endswith("🦜") and "\ufffd" not in "".join(pieces)
    assert "".join(pieces) + rest == ours.decode(prefix + emoji)


@pytest.mark.parametrize("kind", KINDS)
def test_flush_returns_an_unfinished_character(pairs, kind):
    ours, _ = pairs[kind]
    ids = ours.encode("ab🦜", add_special_tokens=False)[:-1]   # drop the emoji's last byte token
    pieces, rest = _streamed(ours, ids)
    assert "".join(pieces).endswith("ab") and rest and set(rest) == {"\ufffd"}
    assert "".join(pieces) + rest == ours.decode(ids)


def _random_ids(tokenizer, kind, seed, n=200):
    """Random ids. For byte-level BPE any ids (invalid UTF-8 included); for the byte-fallback
    tokenizer, random non-byte ids mixed with the <0xXX> runs of random characters, because its
    decoder renders a whole invalid run as U+FFFD (see StreamDecoder's docstring)."""
    rng = np.random.default_rng(seed)
    if kind == "bytelevel":
        return rng.integers(0, tokenizer.vocab_size, size=n).tolist()
    byte_ids = {tokenizer.token_to_id(f"<0x{b:02X}>") for b in range(256)}
    words = [i for i in range(tokenizer.vocab_size) if i not in byte_ids]
    chars = "漢字🦜é€ßД"
    ids = []
    while len(ids) < n:
        if rng.random() < 0.3:
            ids += [tokenizer.token_to_id(f"<0x{b:02X}>") for b in rng.choice(list(chars)).encode()]
        else:
            ids.append(int(rng.choice(words)))
    return ids


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(6))
def test_stream_of_random_ids_reproduces_decode(pairs, kind, seed):
    # Stray special tokens, unknown tokens, pieces glued in unlikely orders, split characters.
    ours, _ = pairs[kind]
    ids = _random_ids(ours, kind, seed)
    for skip in (False, True):
        pieces, rest = _streamed(ours, ids, skip)
        assert "".join(pieces) + rest == ours.decode(ids, skip_special_tokens=skip)


@pytest.mark.parametrize("kind", KINDS)
def test_stream_decodes_a_small_window_per_token(pairs, kind, monkeypatch):
    ours, _ = pairs[kind]
    ids = ours.encode(" ".join(TEXTS) * 10)
    assert len(ids) > 500
    window_sizes = []
    real_decode = type(ours).decode

    def counting_decode(self, token_ids, skip_special_tokens=False):
        window_sizes.append(len(token_ids))
        return real_decode(self, token_ids, skip_special_tokens)

    monkeypatch.setattr(type(ours), "decode", counting_decode)
    pieces, rest = _streamed(ours, ids)
    monkeypatch.undo()
    assert "".join(pieces) + rest == ours.decode(ids)
    assert max(window_sizes) <= 8
    assert len(window_sizes) <= 3 * len(ids)


# ------------------------------------------------------------------------------------------
# from_tokenizers (the GGUF loader's entry) and errors
# ------------------------------------------------------------------------------------------

def test_from_tokenizers_controls_bos():
    backend = _llama_backend()
    kept = Tokenizer.from_tokenizers(backend, bos_token="<s>", eos_tokens=["</s>", 0])
    with_bos = Tokenizer.from_tokenizers(backend, bos_token="<s>", eos_tokens=["</s>"], add_bos=True)
    without = Tokenizer.from_tokenizers(backend, bos_token="<s>", eos_tokens=["</s>"], add_bos=False,
                                        chat_template="{{ bos_token }}")
    plain = backend.encode("Hello world", add_special_tokens=False).ids
    assert kept.encode("Hello world") == with_bos.encode("Hello world") == [1] + plain
    assert without.encode("Hello world") == plain
    assert kept.eos_ids == frozenset({0, 2}) and kept.eos_token == "</s>" and kept.bos_id == 1
    assert without.chat_template == "{{ bos_token }}" and kept.chat_template is None
    assert backend.encode("Hello world").ids[0] == 1   # the caller's tokenizer is left alone
    with pytest.raises(ModelError, match="'<nope>' is not in the vocabulary"):
        Tokenizer.from_tokenizers(backend, eos_tokens=["<nope>"])
    with pytest.raises(ModelError, match="no bos_token"):
        Tokenizer.from_tokenizers(backend, add_bos=True)


def test_missing_or_broken_files_are_model_errors(tmp_path, dirs):
    with pytest.raises(ModelError, match=r"no tokenizer\.json"):
        Tokenizer.from_dir(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(ModelError, match=r"tokenizer\.json: cannot be read as a tokenizer"):
        Tokenizer.from_dir(tmp_path)
    (tmp_path / "tokenizer.json").write_text((dirs["llama"] / "tokenizer.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text('{"eos_token": ')
    with pytest.raises(ModelError, match=r"tokenizer_config\.json: cannot be read as JSON"):
        Tokenizer.from_dir(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text('{"eos_token": 7}')
    with pytest.raises(ModelError, match=r"eos_token: expected a token string"):
        Tokenizer.from_dir(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text('{}')
    (tmp_path / "generation_config.json").write_text('{"eos_token_id": "2"}')
    with pytest.raises(ModelError, match=r"generation_config\.json: eos_token_id must be"):
        Tokenizer.from_dir(tmp_path)


def test_stream_of_a_words_and_bytes_vocabulary_decodes_small_windows(monkeypatch):
    """A SentencePiece vocabulary with no one-character token (words and <0xXX> bytes only, as
    the benchmark GGUF files have): a word token anchors the window, so each push decodes a few
    tokens, not the whole stream, and the text still equals decode's."""
    from colibri.formats.gguf_tokenizer import tokenizer_from_gguf

    n = 1200
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tokens += [f"\u2581w{i}" for i in range(n - len(tokens))]
    meta = {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.scores": [0.0] * 259 + [-float(i) for i in range(n - 259)],
            "tokenizer.ggml.token_type": [2, 3, 3] + [6] * 256 + [1] * (n - 259),
            "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2,
            "tokenizer.ggml.unknown_token_id": 0}
    tok = tokenizer_from_gguf(meta, source="words-and-bytes")
    assert tok._stream_anchor() == [259]
    rng = np.random.default_rng(0)
    ids = rng.integers(259, n, 400).tolist() + tok.encode("Héllo wörld 😀 ✓", add_special_tokens=False)
    window_sizes = []
    real_decode = type(tok).decode

    def counting_decode(self, token_ids, skip_special_tokens=False):
        window_sizes.append(len(token_ids))
        return real_decode(self, token_ids, skip_special_tokens)

    monkeypatch.setattr(type(tok), "decode", counting_decode)
    pieces, rest = _streamed(tok, ids)
    monkeypatch.undo()
    assert "".join(pieces) + rest == tok.decode(ids)
    assert max(window_sizes) <= 8
