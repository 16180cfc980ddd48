"""Text ⇄ token ids: a Hugging Face fast tokenizer plus the model directory's special tokens.

Loads a directory the way ``transformers.AutoTokenizer.from_pretrained`` (5.x) loads a
``TokenizersBackend``: ``tokenizer.json`` is authoritative for the pipeline, including its
post-processor (transformers 5 drops ``add_bos_token``/``add_eos_token`` from
``tokenizer_config.json`` whenever a ``tokenizer.json`` exists); the config's special tokens
are registered as special added tokens; chat templates come from ``chat_template.jinja``
and ``chat_templates/*.jinja`` before ``tokenizer_config.json``'s ``chat_template``.

    tok = Tokenizer.from_dir("path/to/model")
    ids = tok.encode("Hello")
    stream = tok.stream()
    text = "".join(stream.push(i) for i in ids) + stream.flush()   # == tok.decode(ids)
"""
from __future__ import annotations

import itertools

import json
import operator
from pathlib import Path

import tokenizers
from tokenizers import AddedToken, processors

from .chat_template import render_chat
from .errors import ModelError
from .formats.files import MAX_SIDE_FILE_BYTES, read_text

__all__ = ["Tokenizer", "StreamDecoder"]

# The special tokens transformers names (tokenization_utils_base.SPECIAL_TOKENS_ATTRIBUTES).
_NAMED_SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                         "mask_token")


class Tokenizer:
    """Encode, decode and stream-decode text for one model; see the module docstring."""

    def __init__(self, backend: tokenizers.Tokenizer, *, special_tokens: dict[str, str],
                 eos_ids=(), chat_templates: dict[str, str] | None = None):
        # Use from_dir / from_tokenizers; this takes a backend whose special tokens are registered.
        self.backend = backend
        self.special_tokens = dict(special_tokens)  # e.g. {"bos_token": "<s>", "eos_token": "</s>"}
        self.bos_token = special_tokens.get("bos_token")
        self.eos_token = special_tokens.get("eos_token")
        self.bos_id = self._required_id(self.bos_token, "bos_token")
        eos_token_id = self._required_id(self.eos_token, "eos_token")
        self.eos_ids = frozenset(({eos_token_id} if eos_token_id is not None else set()) | set(eos_ids))
        self.vocab_size = backend.get_vocab_size(with_added_tokens=True)
        self.chat_templates = dict(chat_templates or {})
        self.chat_template = self.chat_templates.get("default")
        self._anchor_ids: list[int] | None = None   # found on first stream()

    # -------------------------------------------------------------------------------- loading

    @classmethod
    def from_dir(cls, directory) -> "Tokenizer":
        """Load tokenizer.json, tokenizer_config.json, chat templates and generation_config.json's EOS ids."""
        directory = Path(directory)
        tokenizer_file = directory / "tokenizer.json"
        if not tokenizer_file.exists():
            raise ModelError(f"{directory}: no tokenizer.json (a Hugging Face fast tokenizer file is required)")
        text = read_text(tokenizer_file, MAX_SIDE_FILE_BYTES)
        try:
            backend = tokenizers.Tokenizer.from_str(text)
        except Exception as exc:  # the Rust parser raises a bare Exception
            raise ModelError(f"{tokenizer_file}: cannot be read as a tokenizer: {_one_line(exc)}") from None
        config = _read_json(directory / "tokenizer_config.json") or {}
        if not isinstance(config, dict):
            raise ModelError(f"{directory / 'tokenizer_config.json'}: expected a JSON object")
        special_map_file = directory / "special_tokens_map.json"
        if "added_tokens_decoder" not in config and special_map_file.exists():
            # Legacy layout: transformers lets special_tokens_map.json override the config's tokens.
            legacy = _read_json(special_map_file)
            if isinstance(legacy, dict):
                config = {**config, **legacy}
        backend.encode_special_tokens = bool(config.get("split_special_tokens", False))
        special_tokens, extra_tokens = _special_tokens_from_config(config, directory / "tokenizer_config.json")
        _register_special_tokens(backend, config, special_tokens, extra_tokens)
        eos_ids = set()
        for name in ("generation_config.json", "config.json"):
            eos_ids |= _eos_ids_from(_read_json(directory / name), directory / name)
        templates = _chat_templates(directory, config)
        return cls(_quiet(backend), special_tokens={k: v.content for k, v in special_tokens.items()},
                   eos_ids=eos_ids, chat_templates=templates)

    @classmethod
    def from_tokenizers(cls, tok: tokenizers.Tokenizer, *, bos_token=None, eos_tokens=(), chat_template=None,
                        add_bos=None) -> "Tokenizer":
        """Wrap an already-built ``tokenizers.Tokenizer`` (e.g. one the GGUF loader made).

        ``bos_token``/``eos_tokens`` are token strings (``eos_tokens`` may also hold ids); the
        first EOS string becomes ``eos_token``. ``add_bos`` None keeps ``tok``'s post-processor;
        True/False replaces it with one that does/doesn't prepend ``bos_token``, as transformers'
        ``update_post_processor`` builds it. ``tok`` itself is not modified.
        """
        backend = tokenizers.Tokenizer.from_str(tok.to_str())
        special_tokens = {}
        if bos_token is not None:
            special_tokens["bos_token"] = bos_token
        eos_strings = [t for t in eos_tokens if isinstance(t, str)]
        if eos_strings:
            special_tokens["eos_token"] = eos_strings[0]
        eos_ids = set()
        for token in eos_tokens:
            if isinstance(token, str):
                eos_ids.add(_token_id_or_fail(backend, token, "eos token"))
            elif isinstance(token, int) and 0 <= token < backend.get_vocab_size(with_added_tokens=True):
                eos_ids.add(token)
            else:
                raise ModelError(f"tokenizer: eos token {token!r} is neither a token string nor a valid id")
        if add_bos is not None:
            if add_bos and bos_token is None:
                raise ModelError("tokenizer: add_bos is set but there is no bos_token")
            backend.post_processor = _bos_post_processor(
                (bos_token, _token_id_or_fail(backend, bos_token, "bos_token")) if add_bos else None)
        templates = {"default": chat_template} if chat_template is not None else {}
        return cls(_quiet(backend), special_tokens=special_tokens, eos_ids=eos_ids, chat_templates=templates)

    # -------------------------------------------------------------------------------- text ⇄ ids

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of ``text``; ``add_special_tokens`` runs the post-processor (BOS/EOS if it adds them)."""
        if not isinstance(text, str):
            raise ValueError(f"encode expects a str, got {type(text).__name__}")
        return self.backend.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        """Text of ``ids`` (ids out of the vocabulary raise ValueError)."""
        return self.backend.decode(self._checked_ids(ids), skip_special_tokens=skip_special_tokens)

    def token_to_id(self, token: str) -> int | None:
        return self.backend.token_to_id(token)

    def stream(self, skip_special_tokens: bool = False) -> "StreamDecoder":
        """A decoder that turns ids pushed one at a time into text as soon as it is complete."""
        return StreamDecoder(self, skip_special_tokens)

    def render_chat(self, messages: list[dict], *, add_generation_prompt: bool = True, tools=None,
                    **extra) -> str:
        """This model's chat template rendered over ``messages``, as ``apply_chat_template(tokenize=False)``.

        Picks the ``tool_use`` template when tools are given and one exists, else ``default``;
        passes every named special token (bos_token, eos_token, pad_token ...) to the template.
        """
        template = self.chat_templates.get("tool_use") if tools is not None else None
        template = template or self.chat_template
        if template is None:
            names = sorted(self.chat_templates)
            raise ValueError("this tokenizer has no chat template" +
                             (f" named 'default' (it has {names})" if names else ""))
        variables = {**self.special_tokens, **extra}
        return render_chat(template, messages, add_generation_prompt=add_generation_prompt, tools=tools,
                           **variables)

    # -------------------------------------------------------------------------------- helpers

    def _required_id(self, token: str | None, name: str) -> int | None:
        if token is None:
            return None
        return _token_id_or_fail(self.backend, token, name)

    def _stream_anchor(self) -> list[int]:
        """``[id]`` of a plain token whose text prefixes any decode it starts, else ``[]``: a
        one-character token where the vocabulary has one, else (vocabularies of words and byte
        tokens only) the first plain multi-character token that behaves so. Byte tokens
        (<0xXX>) never anchor: byte fallback would fuse them with the bytes that follow."""
        if self._anchor_ids is None:
            special = set(self.backend.get_added_tokens_decoder())

            def candidates():   # the vocabulary is read only if no one-character token anchors
                yield from ((self.backend.token_to_id(char), char) for char in "aeiostnrxzAEOX0123456789")
                ordered = sorted((i, t) for t, i in self.backend.get_vocab().items())
                yield from itertools.islice(((i, None) for i, t in ordered if not t.startswith("<0x")), 4096)

            self._anchor_ids = []
            for token_id, char in candidates():
                if token_id is None or token_id in special:
                    continue
                one, two = (self.backend.decode([token_id] * n) for n in (1, 2))
                if (one == char if char else one and "\ufffd" not in one) \
                        and two.startswith(one) and len(two) > len(one):
                    self._anchor_ids = [token_id]
                    break
        return self._anchor_ids

    def _checked_ids(self, ids) -> list[int]:
        """``ids`` as Python ints, each a non-negative integer, else ValueError.

        Ids at or past vocab_size decode to nothing, as in HF tokenizers: models
        often pad their embedding table past the tokenizer's vocabulary, and a
        sampled padding id must not abort a generation.
        """
        try:
            checked = [operator.index(i) for i in ids]
        except TypeError:
            raise ValueError(f"token ids must be integers, got {ids!r:.80}") from None
        for token_id in checked:
            if token_id < 0:
                raise ValueError(f"token id {token_id} is negative")
        return checked


class StreamDecoder:
    """Incremental detokenizer: ``push`` returns the text each new token completes.

    Each push decodes only the pending tokens, those whose text is not yet complete, behind
    an *anchor*: a one-character token whose text stays a fixed prefix whatever follows it.
    The anchor stands in for everything already returned, so decoders that treat the start
    of a text specially (SentencePiece's leading-space strip, WordPiece's "##" joins) render
    the pending tokens as a continuation, exactly as in a full decode. Until the first text
    appears, the window is the whole stream, decoded without the anchor.
    Text ending in U+FFFD (bytes of an unfinished UTF-8 character, byte-level or
    byte-fallback) is returned up to that character, the character once a later token
    completes it; ``flush`` returns it as ``decode`` renders it.

    The concatenation of every push and ``flush`` equals ``tokenizer.decode(all ids)``. One
    exception, inherent to byte-fallback decoding: ``decode`` turns a whole run of <0xXX>
    tokens into U+FFFD when the run is invalid UTF-8, so a stray byte token can change how
    earlier, already returned characters of its run would have decoded. Text encodes to
    valid runs, so only nonsense ids meet this.
    """

    def __init__(self, tokenizer: Tokenizer, skip_special_tokens: bool = False):
        self._tokenizer = tokenizer
        self._skip_special_tokens = skip_special_tokens
        self._anchor = tokenizer._stream_anchor()   # [id] or [] when the vocabulary has none
        self._anchor_chars = len(self._decode(self._anchor)) if self._anchor else 0
        self._pending: list[int] = []   # tokens whose text is not complete yet
        self._emitted = 0               # characters of the pending text already returned
        self._started = False           # some text was returned: decode as a continuation

    def push(self, token_id: int) -> str:
        self._pending.append(self._tokenizer._checked_ids([token_id])[0])
        text = self._pending_text()
        if text.endswith("\ufffd"):
            stable = text.rstrip("\ufffd")  # the characters before the unfinished one are final
            delta = stable[self._emitted:]
            self._emitted = max(self._emitted, len(stable))
            return delta
        delta = text[self._emitted:]
        self._settle(text)
        return delta

    def flush(self) -> str:
        """Whatever is held back (an unfinished character comes out as U+FFFD); the stream stays usable."""
        text = self._pending_text()
        delta = text[self._emitted:]
        self._settle(text)
        return delta

    def _settle(self, text: str) -> None:
        """All of the pending tokens' ``text`` is returned: after the first text, start a new window."""
        self._started = self._started or bool(text)
        if self._started and self._anchor:
            self._pending, self._emitted = [], 0
        else:
            self._emitted = len(text)

    def _pending_text(self) -> str:
        if not self._pending:
            return ""
        if not self._started or not self._anchor:   # no anchor: the window is the whole stream
            return self._decode(self._pending)
        return self._decode(self._anchor + self._pending)[self._anchor_chars:]

    def _decode(self, ids: list[int]) -> str:
        return self._tokenizer.decode(ids, skip_special_tokens=self._skip_special_tokens)


# ------------------------------------------------------------------------------------------
# Loading helpers
# ------------------------------------------------------------------------------------------

def _special_tokens_from_config(config: dict, path: Path) -> tuple[dict[str, AddedToken], list[AddedToken]]:
    """Named special tokens (the seven standard ones plus any other ``*_token`` string) and extra ones."""
    named = {}
    for key, value in config.items():
        is_named = key in _NAMED_SPECIAL_TOKENS or (key.endswith("_token") and _is_token_value(value))
        if is_named and value is not None:
            named[key] = _added_token(value, f"{path}: {key}")
    extra_values = config.get("extra_special_tokens", config.get("additional_special_tokens")) or []
    if isinstance(extra_values, dict):  # model-specific named tokens, e.g. {"image_token": "<image>"}
        for key, value in extra_values.items():
            named[key] = _added_token(value, f"{path}: extra_special_tokens.{key}")
        extra_values = []
    if not isinstance(extra_values, list):
        raise ModelError(f"{path}: extra_special_tokens must be a list or a dict")
    extra = [_added_token(value, f"{path}: extra_special_tokens") for value in extra_values]
    return named, extra


def _is_token_value(value) -> bool:
    return isinstance(value, str) or (isinstance(value, dict) and value.get("__type") == "AddedToken")


def _added_token(value, where: str) -> AddedToken:
    """A special token from its config form: a string, or an AddedToken dict (``{"content": ...}``)."""
    if isinstance(value, str):
        return AddedToken(value, special=True, normalized=False)
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        fields = {k: value[k] for k in ("single_word", "lstrip", "rstrip", "normalized") if k in value}
        return AddedToken(value["content"], special=True, **fields)
    raise ModelError(f"{where}: expected a token string or an AddedToken object, got {value!r}")


def _register_special_tokens(backend: tokenizers.Tokenizer, config: dict, named: dict[str, AddedToken],
                             extra: list[AddedToken]) -> None:
    """Add the config's special tokens to ``backend`` as transformers' tokenizer __init__ does.

    A token tokenizer.json already defines keeps its definition; missing ones (the config's
    ``added_tokens_decoder`` entries in id order, then the named, then the extra tokens) are
    appended, and all named and extra tokens are then marked special.
    """
    existing = {token.content: token for token in backend.get_added_tokens_decoder().values()}
    missing: list[AddedToken] = []
    decoder_entries = config.get("added_tokens_decoder") or {}
    if isinstance(decoder_entries, dict):
        for _, entry in sorted(decoder_entries.items(), key=lambda item: int(item[0])):
            if isinstance(entry, dict) and isinstance(entry.get("content"), str) \
                    and entry["content"] not in existing:
                fields = {k: entry[k] for k in ("single_word", "lstrip", "rstrip", "normalized", "special")
                          if k in entry}
                missing.append(AddedToken(entry["content"], **fields))
    specials = [existing.get(token.content, token) for token in (*named.values(), *extra)]
    seen = {token.content for token in missing} | set(existing)
    for token in specials:
        if token.content not in seen:
            missing.append(token)
            seen.add(token.content)
    if missing:
        backend.add_tokens(missing)
    if specials:
        backend.add_special_tokens(specials)


def _eos_ids_from(config, path: Path) -> set[int]:
    """``eos_token_id`` of a generation_config.json / config.json (int, list of ints, null or absent)."""
    if config is None:
        return set()
    value = config.get("eos_token_id") if isinstance(config, dict) else None
    if value is None:
        return set()
    values = value if isinstance(value, list) else [value]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise ModelError(f"{path}: eos_token_id must be a non-negative int or a list of them, got {value!r}")
    return set(values)


def _chat_templates(directory: Path, config: dict) -> dict[str, str]:
    """Named chat templates; template files take priority over tokenizer_config.json's ``chat_template``."""
    templates = {}
    if (directory / "chat_template.jinja").exists():
        templates["default"] = read_text(directory / "chat_template.jinja", MAX_SIDE_FILE_BYTES)
    if (directory / "chat_templates").is_dir():
        for path in sorted((directory / "chat_templates").glob("*.jinja")):
            templates[path.name.removesuffix(".jinja")] = read_text(path, MAX_SIDE_FILE_BYTES)
    if templates:
        return templates
    configured = config.get("chat_template")
    if configured is None:
        return {}
    if isinstance(configured, str):
        return {"default": configured}
    if isinstance(configured, list) and all(isinstance(t, dict) and isinstance(t.get("name"), str)
                                            and isinstance(t.get("template"), str) for t in configured):
        return {t["name"]: t["template"] for t in configured}
    raise ModelError(f"{directory / 'tokenizer_config.json'}: chat_template must be a string or a list of "
                     "{name, template} objects")


def _bos_post_processor(bos: tuple[str, int] | None) -> processors.TemplateProcessing:
    """transformers' ``update_post_processor`` with add_eos_token False: ``[bos] $A`` or just ``$A``."""
    prefix = f"{bos[0]}:0 " if bos else ""
    pair_prefix = f"{bos[0]}:1 " if bos else ""
    return processors.TemplateProcessing(single=f"{prefix}$A:0", pair=f"{prefix}$A:0 {pair_prefix}$B:1",
                                         special_tokens=[bos] if bos else [])


def _token_id_or_fail(backend: tokenizers.Tokenizer, token: str, name: str) -> int:
    token_id = backend.token_to_id(token)
    if token_id is None:
        raise ModelError(f"tokenizer: {name} {token!r} is not in the vocabulary")
    return token_id


def _quiet(backend: tokenizers.Tokenizer) -> tokenizers.Tokenizer:
    """No truncation or padding, as transformers encodes one text by default."""
    backend.no_truncation()
    backend.no_padding()
    return backend


def _read_json(path: Path):
    """A side file's JSON value, None when the file does not exist; ModelError for anything
    else (a special file, oversized, not UTF-8, not JSON, nested past Python's recursion limit)."""
    if not path.exists():
        return None
    text = read_text(path, MAX_SIDE_FILE_BYTES)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:   # JSONDecodeError, >4300-digit ints, absurd nesting
        raise ModelError(f"{path}: cannot be read as JSON: {_one_line(exc)}") from None


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
