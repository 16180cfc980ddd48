"""Text generation over a Model: prefill, sample, decode with the KV cache, stop."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np

from .sampling import Sampler, SamplingParams, load_generation_defaults

# Used when neither the call nor generation_config.json sets a value: greedy.
BUILTIN_DEFAULTS = dict(temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.0)


@dataclass
class Completion:
    text: str
    tokens: list[int]            # generated token ids (EOS excluded)
    finish_reason: str           # "stop" (EOS or stop string) or "length"
    prompt_tokens: int = 0


@dataclass
class Piece:
    text: str                    # newly completed text ("" while a character is incomplete)
    token: int | None            # the token just generated (None on the final flush)
    finish_reason: str | None = None   # set on the last piece


def sampling_params(model, seed: int | None = None, **given) -> SamplingParams:
    """SamplingParams from the values given (None: not given), then the model's
    generation_config.json, then BUILTIN_DEFAULTS; ValueError naming a field out of range."""
    settings = dict(BUILTIN_DEFAULTS)
    settings.update(load_generation_defaults(model.generation_config))
    settings.update({name: value for name, value in given.items() if value is not None})
    params = SamplingParams(seed=seed, **settings)
    params.validate()
    return params


def eos_ids(model) -> frozenset[int]:
    """Token ids that end a generation: the config's and the tokenizer's end-of-sequence ids."""
    eos = set(model.config.eos_token_ids)
    if model.tokenizer is not None:
        eos |= set(model.tokenizer.eos_ids)
    return frozenset(eos)


def stop_list(stop: str | Sequence[str] | None) -> list[str]:
    if stop is None:
        return []
    stops = [stop] if isinstance(stop, str) else list(stop)
    if any(not isinstance(s, str) or not s for s in stops):
        raise ValueError("stop must be a non-empty string or a list of them")
    return stops


def _held_back(text: str, stops: list[str]) -> int:
    """Length of the longest suffix of `text` that could still begin a stop string."""
    longest = 0
    for s in stops:
        for n in range(min(len(s) - 1, len(text)), 0, -1):
            if text.endswith(s[:n]):
                longest = max(longest, n)
                break
    return longest


def _first_stop(text: str, stops: list[str]) -> int:
    """Index of the earliest stop string in `text`, -1 if none."""
    return min((i for i in (text.find(s) for s in stops) if i >= 0), default=-1)


class TextStream:
    """The text of generated tokens as it becomes final, cut before the first stop string.

    push(token) returns (text, stopped): the text the token completes, less any tail that
    could still begin a stop string (held back until it cannot); stopped once a stop
    string appeared (the text ends before it). finish() returns what is held back, cut the
    same way. Concatenated, the pieces are the decoded text up to the first stop string.
    """

    def __init__(self, tokenizer, stops: list[str]):
        self._decoder = tokenizer.stream() if tokenizer is not None else None
        self._stops = stops
        self._pending = ""          # decoded text not yet returned (may start a stop string)

    def push(self, token: int) -> tuple[str, bool]:
        self._pending += self._decoder.push(token) if self._decoder else ""
        return self._cut(held_back=True)

    def finish(self) -> tuple[str, bool]:
        self._pending += self._decoder.flush() if self._decoder else ""
        return self._cut(held_back=False)

    def _cut(self, held_back: bool) -> tuple[str, bool]:
        hit = _first_stop(self._pending, self._stops)
        if hit >= 0:
            text, self._pending = self._pending[:hit], ""
            return text, True
        emit = len(self._pending) - (_held_back(self._pending, self._stops) if held_back else 0)
        text, self._pending = self._pending[:emit], self._pending[emit:]
        return text, False


@dataclass
class Generation:
    """One completion request; iterate `pieces()` or call `complete()` once."""

    model: object
    prompt: object
    max_tokens: int = 64
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    seed: int | None = None
    stop: str | Sequence[str] | None = None
    prompt_ids: list[int] = field(init=False)

    def __post_init__(self) -> None:
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 0:
            raise ValueError(f"max_tokens must be a non-negative integer, got {self.max_tokens!r}")
        self.stops = stop_list(self.stop)
        if isinstance(self.prompt, str):
            self.prompt_ids = self.model._require_tokenizer().encode(self.prompt)
        else:
            self.prompt_ids = [int(t) for t in self.prompt]
        if not self.prompt_ids:
            raise ValueError("the prompt is empty")
        given = {name: getattr(self, name) for name in BUILTIN_DEFAULTS}
        self.sampler = Sampler(sampling_params(self.model, seed=self.seed, **given))
        self.eos_ids = eos_ids(self.model)

    def _prefill(self) -> np.ndarray:
        """Run the prompt through sequence 0; logits [V] of its last token.

        The prefix the cache already holds from the previous generation is
        reused (the last prompt token always runs, for its logits).
        """
        model, ids = self.model, self.prompt_ids
        n_ctx, step = model.n_ctx, model._context().n_batch
        if len(ids) >= n_ctx:
            raise ValueError(f"the prompt has {len(ids)} tokens; the context holds {n_ctx}")
        cached = model._seq0_tokens
        reuse = 0
        while reuse < min(len(cached), len(ids) - 1) and cached[reuse] == ids[reuse]:
            reuse += 1
        model._seq0_tokens = []
        if reuse == 0:
            model._context().clear(0)
        logits = None
        for start in range(reuse, len(ids), step):
            chunk = ids[start:start + step]
            want = [False] * len(chunk)
            want[-1] = start + len(chunk) == len(ids)
            logits = model._forward(chunk, range(start, start + len(chunk)), [0] * len(chunk), want)
        model._seq0_tokens = list(ids)
        return logits[0]

    def _decode_step(self, token: int) -> np.ndarray:
        """Feed one generated token at the next position; its logits [V]."""
        model = self.model
        position = len(model._seq0_tokens)
        logits = model._forward([token], [position], [0])[0]
        model._seq0_tokens.append(token)
        return logits

    def pieces(self) -> Iterator[Piece]:
        """Generate, yielding text as it completes; the last piece carries finish_reason. The
        model is this generation's from the first piece until the last, or until the iterator
        is closed (Model._exclusive)."""
        with self.model._exclusive("generate"):
            yield from self._pieces()

    def _pieces(self) -> Iterator[Piece]:
        text_out = TextStream(self.model.tokenizer, self.stops)
        history = list(self.prompt_ids)
        finish = "length"
        if self.max_tokens == 0:
            yield Piece("", None, finish)
            return
        logits = self._prefill()
        for produced in range(self.max_tokens):
            token = self.sampler.sample(logits, history)
            if token in self.eos_ids:
                finish = "stop"
                break
            history.append(token)
            text, stopped = text_out.push(token)
            if stopped:
                yield Piece(text, token, "stop")
                return
            yield Piece(text, token)
            if produced + 1 == self.max_tokens or len(self.model._seq0_tokens) >= self.model.n_ctx:
                break
            logits = self._decode_step(token)
        tail, stopped = text_out.finish()
        yield Piece(tail, None, "stop" if stopped else finish)

    def complete(self) -> Completion:
        texts, tokens, finish = [], [], "length"
        for piece in self.pieces():
            texts.append(piece.text)
            if piece.token is not None:
                tokens.append(piece.token)
            if piece.finish_reason:
                finish = piece.finish_reason
        return Completion("".join(texts), tokens, finish, len(self.prompt_ids))
