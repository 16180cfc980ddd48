"""Chat templates: render a conversation to a prompt string exactly as transformers does.

Mirrors ``transformers.utils.chat_template_utils`` (transformers 5.x): the same sandboxed
Jinja environment (trim_blocks, lstrip_blocks, loop controls, a ``{% generation %}`` tag),
the same globals (``raise_exception``, ``strftime_now``, a restricted ``dict`` and
``namespace``), the same ``tojson`` filter, and the same clean-up of the messages before
rendering (``None`` values dropped, everything rebuilt from plain JSON types, reasoning
fields aliased). Templates are untrusted code from model repositories: the sandbox refuses
unsafe attribute access, colibri.template_limits bounds rendering time and every size
(a template cannot allocate gigabytes or loop for hours), and any error comes back as one
``ValueError`` line.

    prompt = render_chat(template, [{"role": "user", "content": "Hi"}], bos_token="<s>")
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.utils
import numpy as np

from . import template_limits

__all__ = ["render_chat"]

# Names a message's reasoning arrives under; templates read the first, gpt-oss reads "thinking".
_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


def render_chat(template: str, messages: list[dict], *, add_generation_prompt: bool = True,
                bos_token: str | None = None, eos_token: str | None = None, tools=None, **extra) -> str:
    """Render ``messages`` with the Jinja chat ``template``.

    Equals ``tokenizer.apply_chat_template(messages, tokenize=False, ...)`` for a tokenizer
    whose special tokens are ``bos_token``/``eos_token`` (``None`` leaves the variable
    undefined, as transformers does for a missing token). ``tools`` is a list of JSON-schema
    dicts; ``extra`` holds further template variables (``documents``, ``enable_thinking``,
    other special tokens ...).
    Raises ValueError with one line on a template syntax error, ``raise_exception`` in the
    template, unsafe attribute access or any other failure while rendering.
    """
    if not isinstance(template, str):
        raise ValueError(f"chat template must be a string, got {type(template).__name__}")
    variables = {name: token for name, token in (("bos_token", bos_token), ("eos_token", eos_token))
                 if token is not None}
    variables.update(extra)
    documents = variables.pop("documents", None)
    try:
        chat = _alias_reasoning_fields(_plain(_normalize_messages(messages)))
        inputs = dict(messages=chat, tools=_plain(_tool_schemas(tools)), documents=_plain(_documents(documents)),
                      add_generation_prompt=add_generation_prompt, **_plain(variables))
    except RecursionError:
        raise ValueError("chat messages, tools or variables are nested too deeply") from None
    with template_limits.budget():
        compiled = _compile(template)
        try:
            return compiled.render(**inputs)
        except ValueError as exc:   # template_limits.TemplateLimitError, or raised by the template's code
            raise ValueError(_one_line(exc) if isinstance(exc, template_limits.TemplateLimitError)
                             else f"chat template: {type(exc).__name__}: {_one_line(exc)}") from None
        except jinja2.TemplateError as exc:
            raise ValueError(f"chat template: {_one_line(exc)}") from None
        except Exception as exc:  # the template is code: any failure inside it is the template's
            raise ValueError(f"chat template: {type(exc).__name__}: {_one_line(exc)}") from None


# ---------------------------------------------------------------------------------------------
# Inputs: the same normalisation transformers applies before rendering
# ---------------------------------------------------------------------------------------------

def _normalize_messages(messages) -> list[dict]:
    """Messages as fresh dicts without ``None`` values (templates handle a missing key, not ``None``)."""
    if not isinstance(messages, (list, tuple)):
        raise ValueError(f"chat messages must be a list of dicts, got {type(messages).__name__}")
    normalized = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ValueError(f"chat message {index} must be a dict, got {type(message).__name__}")
        normalized.append({key: value for key, value in message.items() if value is not None})
    return normalized


def _tool_schemas(tools) -> list[dict] | None:
    if tools is None:
        return None
    if not isinstance(tools, (list, tuple)) or not all(isinstance(tool, Mapping) for tool in tools):
        raise ValueError("tools must be a list of JSON-schema dicts")
    return list(tools)


def _documents(documents) -> list[dict] | None:
    if documents is None:
        return None
    if not isinstance(documents, (list, tuple)) or not all(isinstance(doc, Mapping) for doc in documents):
        raise ValueError("documents must be a list of dicts with 'title' and 'text' keys")
    return list(documents)


def _plain(value):
    """Rebuild ``value`` from plain JSON types; anything else becomes an inert ``"<TypeName>"``.

    Objects handed to a template could expose methods the sandbox does not know are
    dangerous, so the template only ever sees str/int/float/bool/None, dicts, lists, tuples.
    """
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {_plain(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_plain(item) for item in value)
    if isinstance(value, np.generic):  # np.bool_(False) must not become a truthy placeholder
        return _plain(value.item())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: _plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if callable(getattr(value, "model_dump", None)):  # pydantic models, e.g. OpenAI SDK messages
        return _plain(value.model_dump())
    return f"<{type(value).__name__}>"


def _alias_reasoning_fields(chat: list[dict]) -> list[dict]:
    """Fill ``reasoning_content`` (and ``thinking``) from whichever reasoning field a message uses."""
    aliased = []
    for message in chat:
        reasoning = next((message[key] for key in _REASONING_FIELDS if message.get(key) is not None), None)
        if reasoning is not None:
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        aliased.append(message)
    return aliased


def _one_line(exc: Exception) -> str:
    message = " ".join(str(exc).split()) or type(exc).__name__
    lineno = getattr(exc, "lineno", None)
    return f"line {lineno}: {message}" if isinstance(exc, jinja2.TemplateSyntaxError) and lineno else message


# ---------------------------------------------------------------------------------------------
# The sandboxed environment
# ---------------------------------------------------------------------------------------------

class _GenerationTag(jinja2.ext.Extension):
    """``{% generation %}...{% endgeneration %}`` marks assistant text; rendering keeps the body as is."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render_body"), [], [], body).set_lineno(lineno)

    def _render_body(self, caller):
        return caller()


def _raise_exception(message):
    raise jinja2.TemplateError(message)


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # Unlike Jinja's own tojson: no HTML escaping, and json.dumps' options exposed.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(format):
    if not isinstance(format, str) or len(format) > 256:   # strftime is slow on huge formats
        raise ValueError("strftime_now: the format must be a string of at most 256 characters")
    return datetime.now().strftime(format)


class _TemplateDict:
    """The ``dict`` global: builds dicts but exposes no class to climb out of the sandbox from."""

    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
        return dict.fromkeys(*args, **kwargs)


class _TemplateNamespace(jinja2.utils.Namespace):
    """Jinja's ``namespace`` refusing underscore-prefixed attribute names."""

    def __init__(*args, **kwargs):
        self, args = args[0], args[1:]  # Jinja's signature trick, so namespace(self=...) still works
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
        _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"chat templates cannot store underscore-prefixed attributes on a namespace, got {name!r}")


@lru_cache(maxsize=1)
def _environment() -> template_limits.BoundedSandbox:
    env = template_limits.BoundedSandbox(trim_blocks=True, lstrip_blocks=True,
                                         extensions=[_GenerationTag, jinja2.ext.loopcontrols])
    env.add_filter("tojson", _tojson)
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = _TemplateNamespace
    return env


@lru_cache(maxsize=32)
def _compile(template: str) -> jinja2.Template:
    """Compiled template, cached by source text. Syntax errors → ValueError naming the line; so is
    a template too large or too deeply nested for Jinja's parser or Python's compiler."""
    try:
        return _environment().from_string(template)
    except template_limits.TemplateLimitError:
        raise
    except jinja2.TemplateError as exc:
        raise ValueError(f"chat template: {_one_line(exc)}") from None
    except Exception as exc:   # RecursionError, MemoryError, SyntaxError ("too many nested blocks") ...
        raise ValueError(f"chat template: cannot be compiled: {type(exc).__name__}: {_one_line(exc)}") from None
