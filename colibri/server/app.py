"""The HTTP API (FastAPI): a thin layer over colibri.serving.Engine.

Handlers validate and tokenize, submit to the engine, and turn its outputs into OpenAI's
JSON or server-sent events. The engine steps on its own thread; outputs cross to the event
loop through call_soon_threadsafe, so HTTP I/O never waits on a forward step (ctypes
releases the GIL for the step itself).
"""
from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import uuid
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from .. import __version__
from ..serving import Engine, GenerationParams, QueueFull
from . import protocol as P
from .errors import (APIError, ApiKey, BodyLimit, RequestLog, api_error_handler, error_body, http_error_handler,
                     unexpected_error_handler, validation_error_handler, value_error_handler)
from .metrics import EngineCollector, Metrics, PagingCollector
from .openai_format import ChatFormat, ChoiceState, CompletionFormat, Format

log = logging.getLogger("colibri.server")
STATIC = Path(str(resources.files("colibri.server") / "static"))


@dataclass
class ServerConfig:
    model: Path                   # what colibri.load opens
    model_name: str               # the id clients send as `model`
    parallel: int = 4             # slots: sequences generating at once
    n_ctx: int | None = None      # positions per slot (None: the model's, at most 4096)
    threads: int | None = None
    kv_type: str = "f32"
    numa: str | None = None       # thread placement (colibri.load's numa)
    api_key: str | None = None
    max_queue: int = 64           # sequences waiting for a slot; beyond: 429
    timeout: float = 600.0        # seconds per request, queueing included
    max_tokens: int | None = None  # cap on max_tokens (None: the context length)
    max_body: int = 1 << 20       # bytes
    batch: int = 256              # most tokens of one forward step
    prefill_chunk: int = 64       # most prompt tokens per step while others decode
    prefill_slack: float | None = 0.7   # layer-sliced prefill pacing (serving/pacing.py); None: whole chunks
    prefill_layers: int | None = None   # a fixed number of chunk layers per step instead
    mem_budget: int | str | None = "auto"   # paging (docs/PAGING.md): as colibri.load's
    expert_slots: int | None = None
    expert_profile: Path | None = None
    prefetch: bool = True


class ServerState:
    """The model and engine, once loaded (a thread loads them while /health says 503)."""

    def __init__(self, config: ServerConfig):
        self.config = config
        self.metrics = Metrics(config.model_name)
        self.model = None
        self.engine: Engine | None = None
        self.ready = threading.Event()
        self.load_error: str | None = None
        self.on_load_failed = lambda: None   # serve() stops the server
        self.created = int(time.time())
        self.outbox: _Outbox | None = None   # engine outputs to the server's event loop, set at startup

    def load(self) -> None:
        import colibri

        c = self.config
        try:
            model = colibri.load(c.model, threads=c.threads, n_ctx=c.n_ctx, n_seq=c.parallel,
                                 n_batch=max(c.batch, c.parallel + 1), kv_type=c.kv_type, numa=c.numa,
                                 mem_budget=c.mem_budget, expert_slots=c.expert_slots,
                                 expert_profile=c.expert_profile, prefetch=c.prefetch)
            try:
                engine = Engine(model, max_queue=c.max_queue, prefill_chunk=c.prefill_chunk,
                                prefill_slack=c.prefill_slack, prefill_layers=c.prefill_layers,
                                observer=self.metrics,
                                after_outputs=self.outbox)
            except BaseException:
                model.close()
                raise
        except Exception as exc:
            self.load_error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            log.error("could not load %s: %s", c.model, self.load_error)
            self.on_load_failed()
            return
        self.metrics.add(EngineCollector(engine, c.model_name, list(model.config.moe_layers)))
        if model.paging is not None:
            self.metrics.add(PagingCollector(model, c.model_name))
        engine.start()
        self.model, self.engine = model, engine
        self.ready.set()
        log.info("ready: %s (%s), %d slots of %d positions, %d threads", c.model_name, c.model, c.parallel,
                 model.n_ctx, model.threads)

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
        if self.model is not None:
            self.model.close()

    def require_engine(self) -> Engine:
        if not self.ready.is_set():
            raise APIError(503, "the model is still loading", headers={"Retry-After": "5"})
        return self.engine

    def check_model(self, name: str | None) -> None:
        if name is not None and name != self.config.model_name:
            raise APIError(404, f"model '{name}' does not exist; this server serves '{self.config.model_name}'",
                           param="model", code="model_not_found")


def _text(value: str, where: str) -> str:
    """Strings must be valid Unicode (JSON lets lone surrogates through)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise APIError(400, f"{where}: invalid Unicode (a lone surrogate)", param=where) from None
    return value


def _messages(messages: list[P.ChatMessage]) -> list[dict]:
    out = []
    for i, m in enumerate(messages):
        entry = {"role": m.role, "content": _text(m.text(), f"messages[{i}].content")}
        if m.name is not None:
            entry["name"] = _text(m.name, f"messages[{i}].name")
        out.append(entry)
    return out


def _render_chat(model, messages: list[dict], add_generation_prompt: bool = True) -> list[int]:
    tok = model.tokenizer
    if not tok.chat_template:
        raise APIError(400, "the model has no chat template; use /v1/completions", param="messages")
    try:
        text = tok.render_chat(messages, add_generation_prompt=add_generation_prompt)
    except ValueError as exc:
        raise APIError(400, f"messages: {exc}", param="messages") from None
    return tok.encode(text, add_special_tokens=False)


def _params(state: ServerState, body: P.GenerationFields, max_tokens: int | None, top_logprobs: int | None,
            prompt_lens: list[int]) -> GenerationParams:
    """The engine's parameters; max_tokens defaults to what the context leaves, and is capped."""
    n_ctx = state.model.n_ctx
    cap = state.config.max_tokens or n_ctx
    if max_tokens is not None and max_tokens > cap:
        raise APIError(400, f"max_tokens is {max_tokens}; this server allows at most {cap}", param="max_tokens")
    if max_tokens is None:
        max_tokens = max(1, min(cap, n_ctx - max(prompt_lens)))
    stop = [body.stop] if isinstance(body.stop, str) else body.stop
    for s in stop or ():
        _text(s, "stop")
    top_k = None if body.top_k is None else max(body.top_k, 0)
    return GenerationParams(max_tokens=max_tokens, temperature=body.temperature, top_k=top_k, top_p=body.top_p,
                            min_p=body.min_p, repetition_penalty=body.repetition_penalty,
                            presence_penalty=body.presence_penalty or 0.0,
                            frequency_penalty=body.frequency_penalty or 0.0, seed=body.seed, stop=stop or [],
                            ignore_eos=body.ignore_eos, logprobs=top_logprobs,
                            routes=bool(body.colibri and body.colibri.routes), timeout=state.config.timeout)


class _Outbox:
    """Engine outputs to the event loop, one hand-off per engine step. A request's sinks (sink())
    collect the step's outputs on the stepping thread; the engine's after_outputs (__call__) posts
    them to the loop in one callback, which puts each request's list on its queue, and waits (at
    most `timeout` s) until the loop has also run the stream tasks those woke (the sends), so a
    token goes out before the next forward step rather than during it. During a step every
    thread of the forward is busy; a loop woken then may not get a CPU before the step ends, and
    that token would reach its client together with the next."""

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float = 0.002):
        self.loop, self.timeout = loop, timeout
        self._step: dict[asyncio.Queue, list] = {}   # this step's (prompt index, Output)s by request queue

    def sink(self, queue: asyncio.Queue, prompt_index: int):
        def put(out):
            self._step.setdefault(queue, []).append((prompt_index, out))
        return put

    def __call__(self) -> None:
        outputs, self._step = self._step, {}
        sent = threading.Lock()   # held until the loop releases it (a Lock's release is one C call)
        sent.acquire()
        try:
            self.loop.call_soon_threadsafe(self._deliver, outputs, sent)
        except RuntimeError:   # the loop is closed: the server is stopping
            return
        sent.acquire(timeout=self.timeout)

    def _deliver(self, outputs: dict, sent: threading.Lock) -> None:
        for queue, outs in outputs.items():
            queue.put_nowait(outs)
        self.loop.call_soon(sent.release)   # queued behind the tasks the puts woke


async def _watch_disconnect(request: Request, streams) -> None:
    """Cancel the request's sequences when the client goes away."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            for s in streams:
                s.cancel()
            return


def _log_note(request: Request, request_id: str, body: P.GenerationFields, ends, usage: dict | None) -> None:
    reasons = ",".join(sorted({e.finish_reason for e in ends if e is not None})) or "-"
    first = min((e.usage.ttft for e in ends if e is not None and e.usage.ttft is not None), default=None)
    queue = max((e.usage.queue_time for e in ends if e is not None), default=0.0)
    note = f"id={request_id}"
    if usage:
        note += (f" prompt={usage['prompt_tokens']} output={usage['completion_tokens']}"
                 f" cached={usage['prompt_tokens_details']['cached_tokens']}")
    note += f" queue={queue:.3f}s ttft={'-' if first is None else f'{first:.3f}s'} finish={reasons}"
    if body.user:
        note += f" user={body.user!r}"
    request.state.log = note


async def _generate(state: ServerState, request: Request, body: P.GenerationFields, prompts: list[list[int]],
                    params: GenerationParams, fmt: Format):
    engine = state.require_engine()
    for ids in prompts:
        try:
            engine.check_prompt(ids)
        except ValueError as exc:
            raise APIError(400, str(exc), param="prompt" if isinstance(fmt, CompletionFormat) else "messages")
    outputs = asyncio.Queue()   # lists of (prompt index, Output), one per engine step
    streams = []
    try:
        for i, ids in enumerate(prompts):
            streams.append(engine.submit(ids, params, n=body.n, sink=state.outbox.sink(outputs, i),
                                         request_id=fmt.id))
    except QueueFull as exc:
        for s in streams:
            s.cancel()
        raise APIError(429, f"the server is busy: {exc}", headers={"Retry-After": "1"}) from None
    except ValueError as exc:
        for s in streams:
            s.cancel()
        raise APIError(400, str(exc)) from None
    n_choices = len(prompts) * body.n
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        events = _events(state, request, body, streams, outputs, fmt, n_choices, include_usage)
        return StreamingResponse(events, media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    states = [ChoiceState() for _ in range(n_choices)]
    watcher = asyncio.ensure_future(_watch_disconnect(request, streams))
    try:
        remaining = n_choices
        while remaining:
            for prompt_index, out in await outputs.get():
                s = states[prompt_index * body.n + out.index]
                if out.finish_reason is None:
                    fmt.record(s, out)
                else:
                    s.end = out
                    remaining -= 1
    finally:
        watcher.cancel()
        for st in streams:
            st.cancel()
    ends = [s.end for s in states]
    usage = fmt.usage(ends, body.n)
    _log_note(request, fmt.id, body, ends, usage)
    _raise_for_failure(ends, state.config.timeout)
    return JSONResponse(fmt.response(states, usage))


def _raise_for_failure(ends, timeout: float) -> None:
    reasons = {e.finish_reason for e in ends}
    if "timeout" in reasons:
        raise APIError(504, f"the request took longer than the server's timeout ({timeout:g} s)", code="timeout")
    if "error" in reasons:
        message = next(e.error for e in ends if e.finish_reason == "error")
        raise APIError(500, f"generation failed: {message}")
    if "cancelled" in reasons:
        raise APIError(503, "the server is shutting down", headers={"Retry-After": "5"})


def _sse(payload: dict) -> bytes:
    return b"data: " + json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


async def _events(state, request, body, streams, outputs: asyncio.Queue, fmt: Format, n_choices: int,
                  include_usage: bool):
    """The server-sent events of a streamed request; cancels its sequences however it ends."""
    states = [ChoiceState() for _ in range(n_choices)]
    watcher = asyncio.ensure_future(_watch_disconnect(request, streams))
    ends = [None] * n_choices
    try:
        if isinstance(fmt, ChatFormat):
            yield b"".join(fmt.role_event(i) for i in range(n_choices))
        remaining, failed = n_choices, False
        while remaining and not failed:
            chunks = []   # one engine step's events, sent together
            for prompt_index, out in await outputs.get():
                index = prompt_index * body.n + out.index
                if out.finish_reason is None:
                    chunks.append(fmt.token_event(index, states[index], out))
                    continue
                remaining -= 1
                ends[index] = out
                if out.finish_reason in ("stop", "length"):
                    chunks.append(fmt.end_event(index, states[index], out))
                    continue
                try:
                    _raise_for_failure([out], state.config.timeout)
                except APIError as exc:   # the stream ends with the error's event
                    chunks.append(_sse(error_body(exc.status, exc.message, code=exc.code)))
                    failed = True
                    break
            yield b"".join(chunks)
        if include_usage and not failed:
            yield fmt.usage_event(fmt.usage(ends, body.n))
        yield b"data: [DONE]\n\n"
    finally:
        watcher.cancel()
        for s in streams:
            s.cancel()
        done = [e for e in ends if e is not None]
        _log_note(request, fmt.id, body, done, fmt.usage(ends, body.n) if len(done) == n_choices else None)


def _formatter(cls, state: ServerState, body: P.GenerationFields, prefix: str, top_logprobs: int | None) -> Format:
    return cls(f"{prefix}-{uuid.uuid4().hex[:24]}", state.config.model_name, int(time.time()), state.model.tokenizer,
               list(state.model.config.moe_layers), bool(body.colibri and body.colibri.routes), top_logprobs)


ERROR_RESPONSES = {status: {"model": P.ErrorResponse, "description": text} for status, text in (
    (400, "Invalid request: bad JSON, a type or range, an unsupported field, a prompt longer than the context"),
    (401, "Missing or wrong API key (when the server has one)"),
    (404, "Unknown model"),
    (413, "Request body too large"),
    (429, "The queue is full; retry after Retry-After seconds"),
    (503, "The model is still loading, or the server is stopping"),
)}
GEN_RESPONSES = {**ERROR_RESPONSES,
                 500: {"model": P.ErrorResponse, "description": "Generation failed inside the engine"},
                 504: {"model": P.ErrorResponse, "description": "The request exceeded the server's timeout"}}


def _sse_response(model, chunk_model) -> dict:
    return {"model": model, "description": "The completion; with stream: true, server-sent events: one `data:` "
            "line per chunk (the chunk's JSON, or an error object), the last `data: [DONE]`",
            "content": {"text/event-stream": {"itemSchema": {"$ref": f"#/components/schemas/{chunk_model.__name__}Event"}}}}


def _sse_event_schema(chunk_model: str) -> dict:
    """One server-sent event: its data is a chunk's JSON, an error's JSON, or [DONE] (OpenAPI 3.2's itemSchema)."""
    json_data = {"type": "string", "contentMediaType": "application/json",
                 "contentSchema": {"anyOf": [{"$ref": f"#/components/schemas/{chunk_model}"},
                                             {"$ref": "#/components/schemas/ErrorResponse"}]}}
    return {"type": "object", "required": ["data"],
            "properties": {"data": {"anyOf": [{"const": "[DONE]"}, json_data]}, "event": {"type": "string"},
                           "id": {"type": "string"}, "retry": {"type": "integer"}}}


def create_app(config: ServerConfig, *, load: bool = True) -> FastAPI:
    """The ASGI app. With load, a thread loads the model at startup (/health: 503 until ready)."""
    state = ServerState(config)

    async def lifespan(app):
        state.outbox = _Outbox(asyncio.get_running_loop())
        if load:
            threading.Thread(target=state.load, name="colibri-load", daemon=True).start()
        yield
        await anyio.to_thread.run_sync(state.close)

    app = FastAPI(title="Colibri", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="OpenAI-compatible completions from a Colibri engine: continuous batching, "
                              "batch-invariant seeded sampling, per-token expert routing.")
    app.state.colibri = state
    app.add_exception_handler(APIError, api_error_handler)
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    app.add_exception_handler(HTTPException, http_error_handler)
    app.add_exception_handler(ValueError, value_error_handler)
    app.add_exception_handler(Exception, unexpected_error_handler)
    app.add_middleware(ApiKey, key=config.api_key)
    app.add_middleware(BodyLimit, limit=config.max_body)
    app.add_middleware(RequestLog)

    @app.post("/v1/chat/completions", response_model=P.ChatCompletion, tags=["openai"],
              responses={200: _sse_response(P.ChatCompletion, P.ChatCompletionChunk), **GEN_RESPONSES})
    async def chat_completions(body: P.ChatCompletionRequest, request: Request):
        """A chat reply, rendered with the model's chat template."""
        state.require_engine()
        state.check_model(body.model)
        messages = _messages(body.messages)
        ids = await anyio.to_thread.run_sync(_render_chat, state.model, messages)
        top = (body.top_logprobs or 0) if body.logprobs else None
        params = _params(state, body, body.max_completion_tokens or body.max_tokens, top, [len(ids)])
        fmt = _formatter(ChatFormat, state, body, "chatcmpl", top)
        return await _generate(state, request, body, [ids], params, fmt)

    @app.post("/v1/completions", response_model=P.Completion, tags=["openai"],
              responses={200: _sse_response(P.Completion, P.Completion), **GEN_RESPONSES})
    async def completions(body: P.CompletionRequest, request: Request):
        """Continue a prompt (text, token ids, or several of either)."""
        state.require_engine()
        state.check_model(body.model)
        prompts = body.prompt if isinstance(body.prompt, list) and not isinstance(body.prompt[0], int) \
            else [body.prompt]
        texts = [_text(p, "prompt") if isinstance(p, str) else p for p in prompts]
        tok = state.model.tokenizer
        ids = [await anyio.to_thread.run_sync(tok.encode, p) if isinstance(p, str) else list(p) for p in texts]
        params = _params(state, body, body.max_tokens, body.logprobs, [len(i) for i in ids])
        fmt = _formatter(CompletionFormat, state, body, "cmpl", body.logprobs)
        return await _generate(state, request, body, ids, params, fmt)

    @app.get("/v1/models", response_model=P.ModelList, tags=["openai"], responses=ERROR_RESPONSES)
    async def models():
        """The served model."""
        state.require_engine()
        c = state.model.config
        card = {"id": config.model_name, "object": "model", "created": state.created, "owned_by": "colibri",
                "max_model_len": state.model.n_ctx,
                "colibri": {"layers": c.num_layers, "moe_layers": list(c.moe_layers),
                            "experts": c.num_experts if c.moe_layers else 0,
                            "top_k": c.top_k if c.moe_layers else 0}}
        return {"object": "list", "data": [card]}

    @app.post("/tokenize", response_model=P.TokenizeResponse, tags=["tokens"], responses=ERROR_RESPONSES)
    async def tokenize(body: P.TokenizeRequest):
        """Token ids of a text or of a conversation rendered with the chat template."""
        state.require_engine()
        state.check_model(body.model)
        if isinstance(body, P.TokenizeChat):
            ids = await anyio.to_thread.run_sync(_render_chat, state.model, _messages(body.messages),
                                                 body.add_generation_prompt)
        else:
            ids = await anyio.to_thread.run_sync(state.model.tokenizer.encode, _text(body.prompt, "prompt"),
                                                 body.add_special_tokens)
        return {"tokens": ids, "count": len(ids), "max_model_len": state.model.n_ctx}

    @app.post("/detokenize", response_model=P.DetokenizeResponse, tags=["tokens"], responses=ERROR_RESPONSES)
    async def detokenize(body: P.DetokenizeRequest):
        """The text of token ids."""
        state.require_engine()
        state.check_model(body.model)
        vocab = state.model.config.vocab_size
        bad = next((t for t in body.tokens if t >= vocab), None)
        if bad is not None:
            raise APIError(400, f"tokens: id {bad} is out of range [0, {vocab})", param="tokens")
        return {"prompt": state.model.tokenizer.decode(body.tokens)}

    @app.get("/health", response_model=P.Health, tags=["server"],
             responses={503: {"model": P.Health, "description": "The model is still loading"}})
    async def health():
        """200 once the model is loaded, 503 before."""
        if state.ready.is_set():
            return {"status": "ok"}
        return JSONResponse({"status": "loading"}, status_code=503, headers={"Retry-After": "5"})

    @app.get("/metrics", tags=["server"], response_class=Response,
             responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                              "description": "Prometheus text exposition"}})
    async def metrics():
        """Prometheus metrics (vLLM's names, plus colibri:*)."""
        body = await anyio.to_thread.run_sync(state.metrics.exposition)
        return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page():
        return HTMLResponse((STATIC / "index.html").read_text(encoding="utf-8"))

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    def openapi():
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = _openapi_schema(app, config, state.model if state.ready.is_set() else None)
        if state.ready.is_set():   # the model's bounds are in: keep it
            app.openapi_schema = schema
        return schema

    app.openapi = openapi
    return app


def _integers(node: dict) -> list[dict]:
    """The integer schemas a property's schema allows (itself, or members of its anyOf)."""
    return [n for n in node.get("anyOf", [node]) if n.get("type") == "integer"]


def _token_lists(node: dict, depth: int) -> list[dict]:
    """The schemas of lists of token ids `depth` levels deep among a property's alternatives."""
    found = []
    for n in node.get("anyOf", [node]):
        inner, ok = n, True
        for _ in range(depth):
            ok = ok and inner.get("type") == "array"
            inner = inner.get("items", {}) if ok else {}
        if ok and inner.get("type") == "integer":
            found.append(n)
    return found


def _model_bounds(schemas: dict, model, max_tokens: int | None) -> None:
    """The loaded model's limits in the request schemas: the largest token id, the max_tokens
    cap, the longest prompt of token ids."""
    top_id, longest = model.config.vocab_size - 1, model.n_ctx - 1
    for name, fields in (("ChatCompletionRequest", ("max_tokens", "max_completion_tokens")),
                         ("CompletionRequest", ("max_tokens",))):
        for field in fields:
            for n in _integers(schemas[name]["properties"][field]):
                n["maximum"] = min(max_tokens or model.n_ctx, P.INT32_MAX)
    prompt = schemas["CompletionRequest"]["properties"]["prompt"]
    for ids in _token_lists(prompt, 1):
        ids["items"]["maximum"], ids["maxItems"] = top_id, longest
    for lists in _token_lists(prompt, 2):
        lists["items"]["items"]["maximum"], lists["items"]["maxItems"] = top_id, longest
    for ids in _token_lists(schemas["DetokenizeRequest"]["properties"]["tokens"], 1):
        ids["items"]["maximum"] = top_id


def _openapi_schema(app: FastAPI, config: ServerConfig, model) -> dict:
    """FastAPI's schema, made true to this server: 400 (not 422) for invalid bodies, the served
    model's id as the only `model`, the bearer key where one is required, each stream event's
    shape, and (once the model is loaded) its token ids, max_tokens cap and context length."""
    schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    for path, item in schema.get("paths", {}).items():
        for operation in item.values():
            operation.get("responses", {}).pop("422", None)
            if config.api_key and path.startswith(ApiKey.PROTECTED):
                operation["security"] = [{"bearer": []}]
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    for chunk in (P.ChatCompletionChunk, P.Completion):
        chunk_schema = chunk.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, definition in chunk_schema.pop("$defs", {}).items():
            schemas.setdefault(name, definition)
        schemas.setdefault(chunk.__name__, chunk_schema)
        schemas[f"{chunk.__name__}Event"] = _sse_event_schema(chunk.__name__)
    if config.api_key:
        components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    for name, model_schema in schemas.items():
        model_prop = model_schema.get("properties", {}).get("model")
        if model_prop is not None and ("Request" in name or name.startswith(("Tokenize", "Detokenize"))):
            model_schema["properties"]["model"] = {"anyOf": [{"type": "string", "enum": [config.model_name]},
                                                             {"type": "null"}], "title": "Model",
                                                   "description": model_prop.get("description", "")}
    if model is not None:
        _model_bounds(schemas, model, config.max_tokens)
    return schema
