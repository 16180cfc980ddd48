"""Errors in OpenAI's JSON shape, and the ASGI middlewares that guard every request:
body size (413), API key (401), one log line per request.

Every error the server sends is {"error": {"message", "type", "param", "code"}} with one
line of message; no traceback ever reaches a client.
"""
from __future__ import annotations

import hmac
import json
import logging
import time

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

log = logging.getLogger("colibri.server")

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
               405: "invalid_request_error", 413: "invalid_request_error", 429: "rate_limit_error",
               500: "server_error", 503: "server_error", 504: "timeout_error"}


class APIError(Exception):
    """An error response: status, one-line message, OpenAI's type/param/code, extra headers."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = headers or {}


def error_body(status: int, message: str, param: str | None = None, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": ERROR_TYPES.get(status, "invalid_request_error"),
                      "param": param, "code": code}}


def error_response(status: int, message: str, *, param=None, code=None, headers=None) -> JSONResponse:
    return JSONResponse(error_body(status, message, param, code), status_code=status, headers=headers)


_TYPE_TAGS = frozenset({"str", "int", "float", "bool", "none", "list", "dict"})


def _where(loc, keep_last: bool = False) -> str:
    """('body', 'messages', 0, 'content') -> 'messages[0].content'. pydantic's union-member tags
    ('list[int]', 'constrained-str', 'TextPart', ...) are not fields and are left out."""
    parts = list(loc[1:] if loc and loc[0] == "body" else loc)
    text = ""
    for i, part in enumerate(parts):
        if isinstance(part, int):
            text += f"[{part}]"
            continue
        name = str(part)
        last = keep_last and i == len(parts) - 1
        if not last and (name in _TYPE_TAGS or not name.replace("_", "a").isalnum() or not name.islower()):
            continue
        text += ("." if text else "") + name
    return text


def validation_message(exc: RequestValidationError) -> tuple[str, str | None]:
    """One line for the first validation error, and the field it names."""
    errors = exc.errors()
    first = next((e for e in errors if e.get("type") == "extra_forbidden"), errors[0] if errors else None)
    if first is None:
        return "invalid request", None
    kind = first.get("type", "")
    where = _where(first.get("loc", ()), keep_last=kind == "extra_forbidden")
    if kind == "extra_forbidden":
        return f"unsupported field '{where}': Colibri does not support it", where or None
    if kind == "missing":
        return f"missing field '{where}'", where or None
    if kind == "json_invalid":
        return f"invalid JSON: {first.get('ctx', {}).get('error', first.get('msg', ''))}", None
    message = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
    if not where:
        return ("the body must be a JSON object" if kind in ("model_type", "model_attributes_type", "dict_type")
                else message), None
    return f"{where}: {message}", where


async def api_error_handler(request: Request, exc: APIError) -> JSONResponse:
    return error_response(exc.status, exc.message, param=exc.param, code=exc.code, headers=exc.headers)


async def validation_error_handler(request: Request, exc: RequestValidationError) -> JSONResponse:
    message, param = validation_message(exc)
    return error_response(400, message, param=param)


async def http_error_handler(request: Request, exc: HTTPException) -> JSONResponse:
    message = exc.detail if isinstance(exc.detail, str) else "request failed"
    return error_response(exc.status_code, message.splitlines()[0] if message else "request failed",
                          headers=getattr(exc, "headers", None))


async def value_error_handler(request: Request, exc: ValueError) -> JSONResponse:
    """A ValueError out of tokenizing or validating is the request's fault (the house rule): 400."""
    message = str(exc).splitlines()[0] if str(exc) else "invalid request"
    return error_response(400, message)


async def unexpected_error_handler(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    return error_response(500, "internal error (see the server's log)")


# ---- ASGI middlewares ------------------------------------------------------------------------------
async def _send_error(send, status: int, message: str, headers: dict[str, str] | None = None) -> None:
    body = json.dumps(error_body(status, message)).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """413 for a body over `limit` bytes: at once from Content-Length, or as it streams in."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            return await _send_error(send, 413, f"the request body exceeds {self.limit} bytes")
        seen = 0

        async def limited():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise HTTPException(413, f"the request body exceeds {self.limit} bytes")
            return message

        await self.app(scope, limited, send)


class ApiKey:
    """401 unless `Authorization: Bearer KEY` on the protected paths (checked before the body is read)."""

    PROTECTED = ("/v1/", "/tokenize", "/detokenize")

    def __init__(self, app, key: str | None):
        self.app, self.key = app, key.encode() if key else None

    async def __call__(self, scope, receive, send):
        if self.key is None or scope["type"] != "http" or not scope["path"].startswith(self.PROTECTED):
            return await self.app(scope, receive, send)
        auth = dict(scope.get("headers") or []).get(b"authorization", b"")
        scheme, _, token = auth.partition(b" ")
        if scheme.lower() != b"bearer" or not hmac.compare_digest(token.strip(), self.key):
            return await _send_error(send, 401, "invalid or missing API key (send Authorization: Bearer KEY)",
                                     {"WWW-Authenticate": "Bearer"})
        await self.app(scope, receive, send)


class RequestLog:
    """One log line per request: method, path, status, seconds, and what the handler noted
    (request.state.log: id, tokens, times, finish reason)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start, status = time.monotonic(), 0

        async def watched(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            note = scope.get("state", {}).get("log", "")
            log.info("%s %s %d %.3fs%s", scope.get("method", ""), scope.get("path", ""), status,
                     time.monotonic() - start, f" {note}" if note else "")
