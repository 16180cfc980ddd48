"""The tokenizer a GGUF file describes, rebuilt from its metadata as a ``tokenizers`` pipeline.

    gguf = GGUFFile("model.gguf")
    tok = tokenizer_from_gguf(gguf.metadata, source=gguf.path)   # a colibri Tokenizer

``tokenizer.ggml.model`` picks the pipeline:

  "gpt2"   byte-level BPE over ``tokens`` + ``merges`` ("left right" strings). The text is split
           by the regexes llama.cpp uses for ``tokenizer.ggml.pre`` (each applied in turn to the
           pieces of the one before, every match its own piece), then mapped to the byte alphabet;
           ByteLevel decoder.
  "llama"  SentencePiece BPE with byte fallback, as transformers' LlamaConverter builds it: a
           normalizer turns spaces into "▁" and prepends one "▁" (unless ``add_space_prefix`` is
           false); merges from the file or derived from the vocabulary and its scores; decoder
           ▁→space, ByteFallback, Fuse, and one leading space stripped when one was prepended.

Tokens of type 3 (control) become special added tokens, type 4 (user-defined) plain added
tokens: both are matched whole in the text. BOS/EOS come from the ``*_token_id`` keys and are
added per ``add_bos_token``/``add_eos_token``, with llama.cpp's defaults where those are absent.
"""
from __future__ import annotations

from dataclasses import dataclass

import tokenizers
from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers, processors

from ..errors import ModelError
from ..tokenizer import Tokenizer

__all__ = ["tokenizer_from_gguf", "PRE_TOKENIZERS"]

# Bound on sum(len(token)^2) of a SentencePiece vocabulary whose merges are derived from its
# scores (about a second; real vocabularies of 256K tokens are near 3e7).
MAX_MERGE_WORK = 200_000_000

# llama_token_type values (llama.cpp's vocabulary attributes).
_TOKEN_CONTROL = 3
_TOKEN_USER_DEFINED = 4

# llama.cpp's pre-tokenizer regexes (llm_tokenizer_bpe in src/llama-vocab.cpp).
_GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
_LLAMA3_SPLIT = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+"
                 r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_CONTRACTIONS = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_UPPER, _LOWER = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]", r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"
_GPT4O_SPLIT = (r"[^\r\n\p{L}\p{N}]?" + _UPPER + "*" + _LOWER + "+" + _CONTRACTIONS + "?"
                r"|[^\r\n\p{L}\p{N}]?" + _UPPER + "+" + _LOWER + "*" + _CONTRACTIONS + "?"
                r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2_SPLIT = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+"
                r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


@dataclass(frozen=True)
class PreTokenizer:
    """How llama.cpp treats one ``tokenizer.ggml.pre`` value."""
    splits: tuple[str, ...]      # regexes applied in turn; each match (and each gap) becomes a piece
    ignore_merges: bool = False  # a piece that is itself a token is taken whole, unmerged
    add_bos: bool = False        # llama.cpp's default when tokenizer.ggml.add_bos_token is absent


_DEFAULT = PreTokenizer((r"[\p{P}\$\+<=>\^~\|]+", _GPT2_SPLIT, r"\p{N}+", r"[0-9][0-9][0-9]"))
_GPT2 = PreTokenizer((_GPT2_SPLIT,))
_LLAMA3 = PreTokenizer((_LLAMA3_SPLIT,), ignore_merges=True, add_bos=True)
_QWEN2 = PreTokenizer((_QWEN2_SPLIT,))
_DIGITS_THEN_GPT2 = PreTokenizer((r"\p{N}", _GPT2_SPLIT))
_GPT4O = PreTokenizer((_GPT4O_SPLIT,))   # o200k (gpt-4o, gpt-oss)

# tokenizer.ggml.pre -> pre-tokenizer; a missing key means "default", as in llama.cpp.
PRE_TOKENIZERS = {
    "default": _DEFAULT,
    "gpt-2": _GPT2, "phi-2": _GPT2, "mpt": _GPT2, "olmo": _GPT2,
    "llama3": _LLAMA3, "llama-v3": _LLAMA3, "llama-bpe": _LLAMA3,
    "qwen2": _QWEN2, "deepseek-r1-qwen": _QWEN2,
    "smollm": _DIGITS_THEN_GPT2, "starcoder": _DIGITS_THEN_GPT2, "refact": _DIGITS_THEN_GPT2,
    "gpt-4o": _GPT4O,
}


def tokenizer_from_gguf(meta: dict, source: str) -> Tokenizer:
    """The colibri Tokenizer that GGUF metadata ``meta`` describes; ``source`` names the file in errors."""
    fields = _Fields(meta, source)
    model_name = fields.get("tokenizer.ggml.model", str, required=True)
    tokens = fields.get("tokenizer.ggml.tokens", list, required=True)
    vocab = _vocabulary(tokens, fields)
    if model_name == "gpt2":
        backend, add_bos_default = _byte_level_bpe(fields, vocab)
    elif model_name == "llama":
        backend, add_bos_default = _sentencepiece_bpe(fields, tokens, vocab), True
    else:
        fields.fail("tokenizer.ggml.model", f"tokenizer model {model_name!r} is not supported "
                                            "(supported: 'gpt2', 'llama')")
    _add_typed_tokens(backend, tokens, fields)

    def token(key: str) -> str | None:
        token_id = fields.token_id(key, len(tokens))
        return None if token_id is None else tokens[token_id]

    bos, eos = token("tokenizer.ggml.bos_token_id"), token("tokenizer.ggml.eos_token_id")
    named = [t for t in (bos, eos, token("tokenizer.ggml.unknown_token_id"),
                         token("tokenizer.ggml.padding_token_id")) if t is not None]
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in named])
    backend.post_processor = _post_processor(fields, vocab, bos, eos, add_bos_default=add_bos_default)
    end_ids = [fields.token_id(key, len(tokens)) for key in ("tokenizer.ggml.eot_token_id",
                                                            "tokenizer.ggml.eom_token_id")]
    eos_tokens = ([eos] if eos is not None else []) + [i for i in end_ids if i is not None]
    return Tokenizer.from_tokenizers(backend, bos_token=bos, eos_tokens=eos_tokens,
                                     chat_template=fields.get("tokenizer.chat_template", str))


# ------------------------------------------------------------------------------------------
# Pipelines
# ------------------------------------------------------------------------------------------

def _byte_level_bpe(fields: "_Fields", vocab: dict[str, int]) -> tuple[tokenizers.Tokenizer, bool]:
    """(byte-level BPE backend, llama.cpp's add_bos default) for a "gpt2" vocabulary."""
    pre_name = fields.get("tokenizer.ggml.pre", str, default="default")
    pre = PRE_TOKENIZERS.get(pre_name)
    if pre is None:
        fields.fail("tokenizer.ggml.pre", f"pre-tokenizer {pre_name!r} is not supported "
                                          f"(supported: {', '.join(sorted(PRE_TOKENIZERS))})")
    merges = _merges(fields.get("tokenizer.ggml.merges", list, required=True), fields)
    backend = tokenizers.Tokenizer(_bpe(fields, vocab, merges, ignore_merges=pre.ignore_merges))
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(pattern), behavior="isolated") for pattern in pre.splits]
        + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    backend.decoder = decoders.ByteLevel()
    return backend, pre.add_bos


def _sentencepiece_bpe(fields: "_Fields", tokens: list[str], vocab: dict[str, int]) -> tokenizers.Tokenizer:
    """SentencePiece-style BPE with byte fallback for a "llama" vocabulary (transformers' LlamaConverter)."""
    if "tokenizer.ggml.merges" in fields.meta:
        merges = _merges(fields.get("tokenizer.ggml.merges", list), fields)
    else:
        scores = fields.get("tokenizer.ggml.scores", list, required=True)
        if len(scores) != len(tokens) or not all(isinstance(s, (int, float)) for s in scores):
            fields.fail("tokenizer.ggml.scores", f"expected {len(tokens)} numbers, one per token")
        work = sum(len(t) ** 2 for t in tokens)   # the loop below slices every token at every point
        if work > MAX_MERGE_WORK:
            fields.fail("tokenizer.ggml.tokens", f"tokens too long to derive merges from their scores "
                                                 f"(sum of squared lengths {work} > {MAX_MERGE_WORK})")
        merges = _merges_from_scores(tokens, scores, vocab)
    unk_id = fields.token_id("tokenizer.ggml.unknown_token_id", len(tokens))
    add_prefix_space = fields.get("tokenizer.ggml.add_space_prefix", bool, default=True)
    backend = tokenizers.Tokenizer(_bpe(fields, vocab, merges, byte_fallback=True, fuse_unk=True,
                                        unk_token=None if unk_id is None else tokens[unk_id]))
    # Like sentencepiece and llama.cpp: spaces become "▁", and each text segment (the whole text, or
    # what follows an added token) gets a "▁" prefix, even when it already starts with a space.
    prefix = [normalizers.Prepend("▁")] if add_prefix_space else []
    backend.normalizer = normalizers.Sequence(prefix + [normalizers.Replace(" ", "▁")])
    strip_prefix = [decoders.Strip(content=" ", left=1, right=0)] if add_prefix_space else []
    backend.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
                                        + strip_prefix)
    return backend


def _bpe(fields: "_Fields", vocab: dict[str, int], merges: list[tuple[str, str]], **options) -> models.BPE:
    try:
        return models.BPE(vocab=vocab, merges=merges, dropout=None, **options)
    except Exception as exc:  # the Rust side raises a bare Exception (e.g. a merge of unknown tokens)
        fields.fail("tokenizer.ggml.merges", f"cannot build the BPE model: {' '.join(str(exc).split())}")


def _merges(merges: list, fields: "_Fields") -> list[tuple[str, str]]:
    """"left right" strings as pairs, split at the first space after the first character (as llama.cpp)."""
    pairs = []
    for index, merge in enumerate(merges):
        split_at = merge.find(" ", 1) if isinstance(merge, str) else -1
        if split_at < 0 or split_at == len(merge) - 1:
            fields.fail(f"tokenizer.ggml.merges[{index}]", f"expected 'left right', got {merge!r:.80}")
        pairs.append((merge[:split_at], merge[split_at + 1:]))
    return pairs


def _merges_from_scores(tokens: list[str], scores: list[float], vocab: dict[str, int]) -> list[tuple[str, str]]:
    """SentencePiece BPE as ranked merges: every split of a token into two tokens, ranked by the score
    of the token they form (best first), then by longer left, then longer right piece, then vocabulary
    order; as transformers' ``generate_merges`` ranks them."""
    candidates = []   # (score of the merged token, left, right), in vocabulary order
    for token, score in zip(tokens, scores):
        splits = [(token[:k], token[k:]) for k in range(1, len(token)) if token[:k] in vocab and token[k:] in vocab]
        splits.sort(key=lambda pair: (vocab[pair[0]], vocab[pair[1]]))
        candidates.extend((score, left, right) for left, right in splits)
    candidates.sort(key=lambda c: (-c[0], -len(c[1]), -len(c[2])))   # stable: ties keep vocabulary order
    return [(left, right) for _, left, right in candidates]


def _vocabulary(tokens: list, fields: "_Fields") -> dict[str, int]:
    """token -> id; every token a distinct string."""
    vocab = {}
    for token_id, token in enumerate(tokens):
        if not isinstance(token, str):
            fields.fail(f"tokenizer.ggml.tokens[{token_id}]", f"expected a string, got {type(token).__name__}")
        if token in vocab:
            fields.fail(f"tokenizer.ggml.tokens[{token_id}]", f"token {token!r} repeats token {vocab[token]}")
        vocab[token] = token_id
    return vocab


def _add_typed_tokens(backend: tokenizers.Tokenizer, tokens: list[str], fields: "_Fields") -> None:
    """Control tokens as special added tokens, user-defined ones as plain added tokens (both matched whole)."""
    token_types = fields.get("tokenizer.ggml.token_type", list, default=[])
    if token_types and len(token_types) != len(tokens):
        fields.fail("tokenizer.ggml.token_type", f"has {len(token_types)} entries for {len(tokens)} tokens")
    control = [AddedToken(t, special=True, normalized=False)
               for t, kind in zip(tokens, token_types) if kind == _TOKEN_CONTROL]
    user_defined = [AddedToken(t, special=False, normalized=False)
                    for t, kind in zip(tokens, token_types) if kind == _TOKEN_USER_DEFINED]
    if control:
        backend.add_special_tokens(control)
    if user_defined:
        backend.add_tokens(user_defined)


def _post_processor(fields: "_Fields", vocab: dict[str, int], bos: str | None, eos: str | None, *,
                    add_bos_default: bool) -> processors.TemplateProcessing:
    """``[bos] $A [eos]``, each per add_bos_token/add_eos_token, as transformers' ``update_post_processor``
    builds it; without the key, BOS is added by llama.cpp's default (when there is one) and EOS is not."""
    add_bos = fields.get("tokenizer.ggml.add_bos_token", bool, default=add_bos_default and bos is not None)
    add_eos = fields.get("tokenizer.ggml.add_eos_token", bool, default=False)
    for wanted, present, key in ((add_bos, bos, "add_bos_token"), (add_eos, eos, "add_eos_token")):
        if wanted and present is None:
            fields.fail(f"tokenizer.ggml.{key}", "is true but the file names no such token")
    prefix = [(bos, vocab[bos])] if add_bos else []   # [(token, id)]
    suffix = [(eos, vocab[eos])] if add_eos else []

    def around(sequence: str, type_id: int) -> str:
        return " ".join(f"{token}:{type_id}" for token in
                        [t for t, _ in prefix] + [sequence] + [t for t, _ in suffix])
    return processors.TemplateProcessing(single=around("$A", 0), pair=f"{around('$A', 0)} {around('$B', 1)}",
                                         special_tokens=list(dict.fromkeys(prefix + suffix)))


class _Fields:
    """Typed access to the metadata; errors name ``source`` and the key."""

    def __init__(self, meta: dict, source: str):
        self.meta = meta
        self.source = source

    def fail(self, key: str, message: str):
        raise ModelError(f"{self.source}: metadata key {key!r}: {message}")

    def get(self, key: str, kind: type, *, required: bool = False, default=None):
        if key not in self.meta:
            if required:
                self.fail(key, "missing (needed to build the tokenizer)")
            return default
        value = self.meta[key]
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            self.fail(key, f"expected {kind.__name__}, got {type(value).__name__}")
        return value

    def token_id(self, key: str, vocab_size: int) -> int | None:
        token_id = self.get(key, int)
        if token_id is not None and not 0 <= token_id < vocab_size:
            self.fail(key, f"token id {token_id} is outside the vocabulary [0, {vocab_size})")
        return token_id
