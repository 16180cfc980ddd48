"""Engine outputs in OpenAI's shapes: chat completions and text completions, whole or as
stream chunks. Whole responses are plain dicts; a stream chunk is its server-sent event's bytes,
the choice's JSON inside an envelope (id, object, created, model) serialized once per request,
as this is the hot path. Tests check both against the pydantic response models of protocol.py.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ..serving import Output

LOGPROB_FLOOR = -9999.0   # JSON has no -inf
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


@dataclass
class ChoiceState:
    """What one choice has produced so far (non-streamed responses keep everything)."""

    text: list[str] = field(default_factory=list)
    logprobs: list = field(default_factory=list)
    routes: list[dict] = field(default_factory=list)
    chars: int = 0            # characters of text sent so far (text completions' text_offset)
    started: bool = False     # its first chunk (the chat role) went out
    end: Output | None = None


class Format:
    """Shared by both endpoints: ids, token strings, routes, usage."""

    chunk_object = full_object = ""

    def __init__(self, request_id: str, model_name: str, created: int, tokenizer, moe_layers: list[int],
                 routes: bool, top_logprobs: int | None):
        self.id, self.model, self.created = request_id, model_name, created
        self.moe_layers = moe_layers
        self.routes = routes
        self.top_logprobs = top_logprobs          # None: no logprobs
        self._piece = lru_cache(maxsize=65536)(lambda t: tokenizer.decode([t]))
        empty = _dumps(self._envelope(self.chunk_object, []))   # {..., "choices":[]}
        self._event_head = b"data: " + empty[:-2].encode()       # a chunk's event up to its choices' "["

    def _event(self, choice: dict) -> bytes:
        """The server-sent event of a chunk with one choice."""
        return self._event_head + _dumps(choice).encode() + b"]}\n\n"

    def _envelope(self, obj: str, choices: list[dict]) -> dict:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model, "choices": choices}

    def _routes(self, outs: list[dict]) -> dict:
        return {"layers": self.moe_layers, "routes": outs}

    @staticmethod
    def route_step(out: Output) -> dict:
        return {"token": out.token, "experts": out.experts.tolist(),
                "gates": np.round(out.gates.astype(np.float64), 6).tolist()}

    def usage(self, ends: list[Output], n: int) -> dict:
        """Prompt tokens once per prompt (choices of one prompt share it), completion tokens of every choice."""
        prompt = sum(e.usage.prompt_tokens for i, e in enumerate(ends) if i % n == 0)
        cached = sum(e.usage.cached_tokens for i, e in enumerate(ends) if i % n == 0)
        completion = sum(e.usage.completion_tokens for e in ends)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached}}

    def usage_event(self, usage: dict) -> bytes:
        return self._event_head + b'],"usage":' + _dumps(usage).encode() + b"}\n\n"

    # ---- per endpoint ---------------------------------------------------------------------
    def token_event(self, index: int, state: ChoiceState, out: Output) -> bytes:
        """One chunk per generated token, its text possibly "" (held back: part of a character,
        or what may begin a stop string), so a client sees every token as it comes."""
        raise NotImplementedError

    def end_event(self, index: int, state: ChoiceState, out: Output) -> bytes:
        raise NotImplementedError

    def response(self, states: list[ChoiceState], usage: dict) -> dict:
        raise NotImplementedError

    def record(self, state: ChoiceState, out: Output) -> None:
        """Keep a token's output for the whole (non-streamed) response."""
        state.text.append(out.text)
        if self.top_logprobs is not None:
            state.logprobs.append(self._logprob_entry(out, state))
        if self.routes:
            state.routes.append(self.route_step(out))
        state.chars += len(out.text)

    def _logprob_entry(self, out: Output, state: ChoiceState):
        raise NotImplementedError


class ChatFormat(Format):
    chunk_object, full_object = "chat.completion.chunk", "chat.completion"

    def _logprob_entry(self, out: Output, state: ChoiceState) -> dict:
        def one(token: int, logprob: float) -> dict:
            piece = self._piece(token)
            return {"token": piece, "logprob": max(logprob, LOGPROB_FLOOR), "bytes": list(piece.encode("utf-8"))}
        return {**one(out.token, out.logprob), "top_logprobs": [one(t, lp) for t, lp in out.top_logprobs]}

    def _chunk(self, index: int, delta: dict, finish, logprobs=None, routes=None) -> bytes:
        choice = {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
        if routes is not None:
            choice["colibri"] = routes
        return self._event(choice)

    def role_event(self, index: int) -> bytes:
        return self._chunk(index, {"role": "assistant", "content": ""}, None)

    def token_event(self, index, state, out):
        logprobs = {"content": [self._logprob_entry(out, state)]} if self.top_logprobs is not None else None
        routes = self._routes([self.route_step(out)]) if self.routes else None
        return self._chunk(index, {"content": out.text}, None, logprobs, routes)

    def end_event(self, index, state, out):
        return self._chunk(index, {"content": out.text} if out.text else {}, out.finish_reason)

    def response(self, states, usage):
        choices = []
        for i, s in enumerate(states):
            choice = {"index": i, "message": {"role": "assistant", "content": "".join(s.text) + s.end.text},
                      "logprobs": {"content": s.logprobs} if self.top_logprobs is not None else None,
                      "finish_reason": s.end.finish_reason}
            if self.routes:
                choice["colibri"] = self._routes(s.routes)
            choices.append(choice)
        return {**self._envelope(self.full_object, choices), "usage": usage}


class CompletionFormat(Format):
    chunk_object = full_object = "text_completion"

    def _logprob_entry(self, out: Output, state: ChoiceState) -> tuple:
        piece = self._piece(out.token)
        top = {}
        for t, lp in out.top_logprobs:
            top.setdefault(self._piece(t), max(lp, LOGPROB_FLOOR))
        return piece, max(out.logprob, LOGPROB_FLOOR), top, state.chars

    @staticmethod
    def _logprobs(entries: list[tuple]) -> dict:
        return {"tokens": [e[0] for e in entries], "token_logprobs": [e[1] for e in entries],
                "top_logprobs": [e[2] for e in entries], "text_offset": [e[3] for e in entries]}

    def _chunk(self, index: int, text: str, finish, logprobs=None, routes=None) -> bytes:
        choice = {"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish}
        if routes is not None:
            choice["colibri"] = routes
        return self._event(choice)

    def token_event(self, index, state, out):
        logprobs = self._logprobs([self._logprob_entry(out, state)]) if self.top_logprobs is not None else None
        routes = self._routes([self.route_step(out)]) if self.routes else None
        state.chars += len(out.text)
        return self._chunk(index, out.text, None, logprobs, routes)

    def end_event(self, index, state, out):
        return self._chunk(index, out.text, out.finish_reason)

    def response(self, states, usage):
        choices = []
        for i, s in enumerate(states):
            choice = {"index": i, "text": "".join(s.text) + s.end.text,
                      "logprobs": self._logprobs(s.logprobs) if self.top_logprobs is not None else None,
                      "finish_reason": s.end.finish_reason}
            if self.routes:
                choice["colibri"] = self._routes(s.routes)
            choices.append(choice)
        return {**self._envelope(self.full_object, choices), "usage": usage}
