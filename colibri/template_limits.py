"""Resource limits for chat templates: a Jinja sandbox that bounds time and size, not just attributes.

A chat template is code from whoever made the model file. Jinja's sandbox stops it from
reaching Python internals, but not from asking for gigabytes (``'%s' | format(messages) *
10000000``) or hours (nested ``range(100000)`` loops). `BoundedSandbox` adds, for one
compilation or rendering at a time (`budget`):

  time    a deadline, checked at every loop iteration, call, filter, operator, attribute or
          item access and output piece, so no template keeps a thread past MAX_RENDER_SECONDS
          plus the cost of one bounded operation;
  size    no string, output or integer may outgrow MAX_CHARS characters (MAX_INT_BITS bits),
          no container MAX_ITEMS items; operations whose result can be much larger than their
          inputs (repetition, powers, padding widths, join, replace, indent, sum, ...) are
          checked BEFORE they run, from their inputs; every other result is checked after;
  output  all text a render produces, macro bodies and captured blocks included, counts
          against MAX_CHARS.

Exceeding a limit raises TemplateLimitError (a ValueError) with one line saying which.
The hooks are Jinja's sandbox methods (call, call_binop, getattr, getitem), wrapped
filters and globals, and a code generator that routes for-loop iterables, ``~``
concatenation and every output piece through the budget.
"""
from __future__ import annotations

import functools
import re
import threading
import time
from contextlib import contextmanager

import jinja2.nodes
import jinja2.utils
from jinja2.compiler import CodeGenerator
from jinja2.sandbox import ImmutableSandboxedEnvironment

MAX_TEMPLATE_CHARS = 1 << 20      # template source
MAX_CHARS = 1 << 22               # any string, and all the output of one render (~1M tokens)
MAX_ITEMS = 1 << 18               # any list, tuple, dict or set a template builds
MAX_INT_BITS = 1 << 16            # any integer a template computes
MAX_WORK = 1 << 26                # element steps of one quadratic operation (sum of lists, striptags)
MAX_RENDER_SECONDS = 5.0          # one compilation or rendering


class TemplateLimitError(ValueError):
    """A chat template exceeded a resource limit."""


class _Budget:
    def __init__(self, seconds: float):
        self.deadline = time.monotonic() + seconds
        self.seconds = seconds
        self.produced = 0

    def tick(self) -> None:
        if time.monotonic() > self.deadline:
            raise TemplateLimitError(f"chat template: rendering took longer than {self.seconds:g} s")


_state = threading.local()


@contextmanager
def budget(seconds: float | None = None):
    """The limits of one compilation or rendering on this thread (nested uses share the outer one)."""
    if getattr(_state, "budget", None) is not None:
        yield _state.budget
        return
    _state.budget = _Budget(MAX_RENDER_SECONDS if seconds is None else seconds)
    try:
        yield _state.budget
    finally:
        _state.budget = None


def _current() -> _Budget:
    current = getattr(_state, "budget", None)
    if current is None:   # a template evaluated outside `budget` (e.g. folded at compile time)
        raise TemplateLimitError("chat template: evaluated outside a rendering budget")
    current.tick()
    return current


def _too_big(what: str, size: int, limit: int, unit: str) -> TemplateLimitError:
    return TemplateLimitError(f"chat template: {what} would hold {size} {unit}, more than the limit of {limit}")


def check_value(value, what: str = "a value"):
    """`value` unchanged if within the size limits; TemplateLimitError otherwise."""
    if isinstance(value, str):
        if len(value) > MAX_CHARS:
            raise _too_big(what, len(value), MAX_CHARS, "characters")
    elif isinstance(value, bool):
        pass
    elif isinstance(value, int):
        if value.bit_length() > MAX_INT_BITS:
            raise _too_big(what, value.bit_length(), MAX_INT_BITS, "bits")
    elif isinstance(value, (list, tuple, dict, set, frozenset, bytes)):
        if len(value) > MAX_ITEMS:
            raise _too_big(what, len(value), MAX_ITEMS, "items")
    return value


def text_size(value, limit: int = MAX_CHARS) -> int:
    """About len(str(value)) (at least it), computed without building the text; stops counting
    once past `limit`. Containers sharing one big string count it each time, as str() would."""
    total, stack = 0, [value]
    while stack and total <= limit:
        v = stack.pop()
        if isinstance(v, str):
            total += len(v) + 2
        elif isinstance(v, (list, tuple, set, frozenset)):
            total += 2 + 2 * len(v)
            stack.extend(v)
        elif isinstance(v, dict):
            total += 2 + 4 * len(v)
            for pair in v.items():
                stack.extend(pair)
        elif isinstance(v, jinja2.utils.Namespace):
            total += 16
            stack.append(object.__getattribute__(v, "_Namespace__attrs"))
        elif isinstance(v, int) and not isinstance(v, bool):
            total += v.bit_length() // 3 + 2
        else:
            total += 64
        if len(stack) > 4 * MAX_ITEMS:
            return limit + 1
    return total


def _check_text(value, what: str):
    size = text_size(value)
    if size > MAX_CHARS:
        raise _too_big(what, size, MAX_CHARS, "characters")
    return value


_PRINTF_FIELD = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?")
_FORMAT_FIELD = re.compile(r"\{[^{}]*?:[^{}]*?\}")


def _check_format_string(fmt: str, args, what: str) -> None:
    """Widths and precisions of a printf- or str.format-style string, summed, plus its arguments'
    text, must fit MAX_CHARS (padding is the one way formatting multiplies its inputs)."""
    widths = 0
    for match in _PRINTF_FIELD.finditer(fmt):
        for number in match.groups():
            if number == "*":
                raise TemplateLimitError(f"chat template: {what}: '*' widths are not allowed")
            widths += int(number) if number else 0
    for field in _FORMAT_FIELD.findall(fmt):
        widths += sum(int(n) for n in re.findall(r"\d+", field.split(":", 1)[1]))
    size = widths + len(fmt) + text_size(args)
    if size > MAX_CHARS:
        raise _too_big(what, size, MAX_CHARS, "characters")


def _check_int_args(args, kwargs, what: str) -> None:
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_CHARS:
            raise TemplateLimitError(f"chat template: {what}: argument {value} is larger than the limit of {MAX_CHARS}")


def _materialized(items, what: str) -> list:
    """An iterable as a list, refused past MAX_ITEMS while it is being drawn."""
    out = []
    for item in items:
        out.append(item)
        if len(out) > MAX_ITEMS:
            raise _too_big(what, len(out), MAX_ITEMS, "items")
    return out


def _check_str_method(name: str, s: str, args: tuple, kwargs: dict) -> tuple:
    """Pre-checks of the str methods whose result can outgrow their inputs; returns args
    (join's iterable drawn into a list)."""
    where = f"str.{name}"
    if name == "join" and args:
        items = _materialized(args[0], where)
        size = sum(len(i) for i in items if isinstance(i, str)) + len(s) * len(items)   # non-str: TypeError
        if size > MAX_CHARS:
            raise _too_big(where, size, MAX_CHARS, "characters")
        return (items, *args[1:])
    if name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        count = s.count(args[0]) if args[0] else len(s) + 1
        size = len(s) + count * max(0, len(args[1]) - len(args[0]))
        if size > MAX_CHARS:
            raise _too_big(where, size, MAX_CHARS, "characters")
    if name == "expandtabs":
        tab = args[0] if args else kwargs.get("tabsize", 8)
        if isinstance(tab, int) and len(s) + s.count("\t") * max(tab, 0) > MAX_CHARS:
            raise _too_big(where, len(s) + s.count("\t") * tab, MAX_CHARS, "characters")
    if name in ("format", "format_map"):
        _check_format_string(s, (args, kwargs), where)
    return args


# ------------------------------------------------------------------------------------------------
# Filters and globals
# ------------------------------------------------------------------------------------------------

def _pre_join(value, d="", attribute=None, *rest, **kw):
    items = _materialized(value, "join")
    size = text_size(items) + text_size(d) * len(items)
    if size > MAX_CHARS:
        raise _too_big("join", size, MAX_CHARS, "characters")
    return (items, d, attribute, *rest), kw


def _pre_replace(value, old="", new="", count=None, *rest, **kw):
    s, old, new = str(value), str(old), str(new)
    n = s.count(old) if old else len(s) + 1
    if count is not None and isinstance(count, int) and count >= 0:
        n = min(n, count)
    size = len(s) + n * max(0, len(new) - len(old))
    if size > MAX_CHARS:
        raise _too_big("replace", size, MAX_CHARS, "characters")
    return (value, old, new, count, *rest), kw


def _pre_indent(value, width=4, *rest, **kw):
    s = str(value)
    w = width if isinstance(width, int) else len(str(width))
    size = len(s) + (s.count("\n") + 1) * max(w, 0)
    if size > MAX_CHARS:
        raise _too_big("indent", size, MAX_CHARS, "characters")
    return (value, width, *rest), kw


def _pre_format(value, *args, **kwargs):
    _check_format_string(str(value), (args, kwargs), "format")
    return (value, *args), kwargs


def _pre_sum(iterable, *rest, **kw):
    items = _materialized(iterable, "sum")
    if not all(isinstance(i, (int, float)) for i in items):   # sequences: quadratic copying
        work = len(items) * sum(len(i) if hasattr(i, "__len__") else 1 for i in items)
        if work > MAX_WORK:
            raise _too_big("sum", work, MAX_WORK, "element steps")
    return (items, *rest), kw


def _pre_striptags(value, *rest, **kw):
    s = str(value)
    work = (s.count("<") + 1) * len(s)   # its tag regex rescans from every '<'
    if work > MAX_WORK:
        raise _too_big("striptags", work, MAX_WORK, "element steps")
    return (value, *rest), kw


def _pre_wordwrap(value, width=79, break_long_words=True, wrapstring=None, *rest, **kw):
    s = str(value)
    joints = len(s) * len(str(wrapstring if wrapstring is not None else kw.get("wrapstring", "\n")))
    if len(s) + joints > MAX_CHARS:
        raise _too_big("wordwrap", len(s) + joints, MAX_CHARS, "characters")
    return (value, width, break_long_words, wrapstring, *rest), kw


def _pre_tojson(value, *rest, **kw):
    indent = rest[1] if len(rest) > 1 else kw.get("indent")
    width = indent if isinstance(indent, int) else (len(indent) if isinstance(indent, str) else 0)
    if width > 64:   # indentation repeats per line and nesting level
        raise TemplateLimitError("chat template: tojson: indent is limited to 64 characters")
    return _pre_text(value, *rest, **kw)


def _pre_text(value, *rest, **kw):
    _check_text(value, "the value")
    return (value, *rest), kw


def _pre_slice(value, slices, *rest, **kw):
    items = _materialized(value, "slice")
    if isinstance(slices, int) and slices > len(items) + 1:
        raise TemplateLimitError(f"chat template: slice: {slices} slices of {len(items)} items")
    return (items, slices, *rest), kw


# filter name -> pre-check returning the (possibly materialized) arguments
_FILTER_CHECKS = {
    "join": _pre_join, "replace": _pre_replace, "indent": _pre_indent, "format": _pre_format,
    "sum": _pre_sum, "striptags": _pre_striptags, "wordwrap": _pre_wordwrap, "slice": _pre_slice,
    "tojson": _pre_tojson,
    **{name: _pre_text for name in ("string", "pprint", "list", "xmlattr", "urlencode", "e", "escape",
                                    "forceescape", "safe", "urlize", "title", "capitalize", "center",
                                    "truncate", "trim", "wordcount", "upper", "lower")},
}


def _bounded_filter(name: str, func):
    pre = _FILTER_CHECKS.get(name)

    @functools.wraps(func)
    def bounded(*args, **kwargs):
        _current()
        _check_int_args(args, kwargs, f"filter '{name}'")
        if pre is not None:
            skip = 1 if getattr(func, "jinja_pass_arg", None) is not None else 0   # context / env first
            checked, kwargs = pre(*args[skip:], **kwargs)
            args = (*args[:skip], *checked)
        return check_value(func(*args, **kwargs), f"the result of filter '{name}'")

    return bounded


def _bounded_lipsum(n=5, html=True, min=20, max=100):
    if not all(isinstance(v, int) for v in (n, min, max)) or n > 100 or max > 1000:
        raise TemplateLimitError("chat template: lipsum: at most 100 paragraphs of 1000 words")
    return jinja2.utils.generate_lorem_ipsum(n=n, html=html, min=min, max=max)


# ------------------------------------------------------------------------------------------------
# The environment
# ------------------------------------------------------------------------------------------------

class _BoundedCodeGenerator(CodeGenerator):
    """Routes every for-loop iterable, ``~`` concatenation and output piece through the budget."""

    def visit_For(self, node, frame):
        if not getattr(node, "_colibri_bounded", False):
            node.iter = jinja2.nodes.Call(jinja2.nodes.EnvironmentAttribute("colibri_iter"), [node.iter], [],
                                          None, None, lineno=node.lineno)
            node._colibri_bounded = True
        super().visit_For(node, frame)

    def visit_Concat(self, node, frame):
        # CodeGenerator.visit_Concat's choice of join, with the parts checked before joining
        if frame.eval_ctx.volatile:
            join = "(markup_join if context.eval_ctx.volatile else str_join)"
        else:
            join = "markup_join" if frame.eval_ctx.autoescape else "str_join"
        self.write(f"environment.colibri_concat({join}, (")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")

    def _output_const_repr(self, group):
        return f"environment.colibri_output({super()._output_const_repr(group)})"

    def _output_child_pre(self, node, frame, finalize):
        self.write("environment.colibri_output(")
        super()._output_child_pre(node, frame, finalize)

    def _output_child_post(self, node, frame, finalize):
        super()._output_child_post(node, frame, finalize)
        self.write(")")


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """ImmutableSandboxedEnvironment plus the limits of this module; use inside `budget()`."""

    code_generator_class = _BoundedCodeGenerator
    intercepted_binops = frozenset(["+", "-", "*", "/", "//", "%", "**"])

    def __init__(self, **options):
        super().__init__(finalize=self._finalize, **options)
        self.filters = {name: _bounded_filter(name, f) for name, f in self.filters.items()}
        self.globals["lipsum"] = _bounded_lipsum

    def add_filter(self, name: str, func) -> None:
        self.filters[name] = _bounded_filter(name, func)

    # ---- hooks the generated code calls
    @staticmethod
    def colibri_iter(iterable):
        """A for-loop's iterable, with the deadline checked at every step."""
        budget_now = _current()
        for item in iterable:
            budget_now.tick()
            yield item

    @staticmethod
    def colibri_output(text):
        current = _current()
        current.produced += len(text)
        if current.produced > MAX_CHARS:
            raise _too_big("the rendered text", current.produced, MAX_CHARS, "characters")
        return text

    @staticmethod
    def colibri_concat(join, parts):
        """``a ~ b ~ ...``: the parts' text must fit before they are converted and joined."""
        _current()
        size = sum(len(p) if isinstance(p, str) else text_size(p) for p in parts)
        if size > MAX_CHARS:
            raise _too_big("a ~ concatenation", size, MAX_CHARS, "characters")
        return join(parts)

    @staticmethod
    def _finalize(value):
        _current()
        return _check_text(value, "an output value")

    # ---- sandbox hooks
    def call_binop(self, context, operator, left, right):
        _current()
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(n, int) and not isinstance(n, bool) and isinstance(seq, (str, list, tuple)):
                    size, limit = len(seq) * max(n, 0), (MAX_CHARS if isinstance(seq, str) else MAX_ITEMS)
                    if size > limit:
                        raise _too_big("a repetition", size, limit, "characters" if isinstance(seq, str) else "items")
        elif operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
            if max(abs(left).bit_length(), 1) * right > MAX_INT_BITS and abs(left) > 1:
                raise _too_big("a power", left.bit_length() * right, MAX_INT_BITS, "bits")
        elif operator == "%" and isinstance(left, str):
            _check_format_string(left, right, "a % format")
        # anything else is at most about the size of its two bounded operands: checked after
        return check_value(super().call_binop(context, operator, left, right), f"the result of {operator!r}")

    def call(__self, __context, __obj, *args, **kwargs):   # noqa: N805 (Jinja's signature)
        _current()
        _check_int_args(args, kwargs, "a call")
        target = getattr(__obj, "__wrapped__", __obj)   # str.format arrives wrapped by the sandbox
        owner = getattr(target, "__self__", None)
        if isinstance(owner, str):
            args = _check_str_method(getattr(target, "__name__", ""), owner, args, kwargs)
        return check_value(super().call(__context, __obj, *args, **kwargs), "the result of a call")

    def getattr(self, obj, attribute):
        _current()
        return super().getattr(obj, attribute)

    def getitem(self, obj, argument):
        _current()
        return super().getitem(obj, argument)

    def from_string(self, source, *args, **kwargs):
        if isinstance(source, str) and len(source) > MAX_TEMPLATE_CHARS:
            raise _too_big("the template source", len(source), MAX_TEMPLATE_CHARS, "characters")
        return super().from_string(source, *args, **kwargs)
