"""Hostile chat templates: bounded in size and time, refused with one ValueError line.

A template that travels in a model file is code from a stranger. Jinja's sandbox stops attribute
access, not resources: an independent fuzzer aborted a process with `'%s' | format(messages) *
10000000` (a 4 GiB allocation) and kept one busy for hours with nested range(100000) loops.
Each case below must be refused (colibri.template_limits) before it allocates or loops that much.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import colibri
from colibri import template_limits
from colibri.chat_template import render_chat
from colibri.convert import convert

import native_edit

MESSAGES = [{"role": "user", "content": "hi"}]

# template -> words the error line must hold
HOSTILE = {
    "format repeated": ("{{ '%s' | format(messages) * 10000000 }}", "a repetition would hold"),
    "namespace doubling": ("{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(60) %}"
                           "{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "concatenation would hold"),
    "set chain doubling": ("{% set a = 'xxxxxxxxxxxxxxxx' %}" + "{% set a = a ~ a %}" * 40, "concatenation would hold"),
    "ljust": ("{{ 'x'.ljust(1000000000) }}", "larger than the limit"),
    "format width": ("{{ '{:>99999999}'.format(1) }}", "str.format would hold"),
    "printf width": ("{{ '%999999999s' % 1 }}", "format would hold"),
    "printf star": ("{{ '%*s' % (999999999, 1) }}", "'*' widths"),
    "replace filter": ("{{ ('a' * 1000000) | replace('a', 'a' * 1000) }}", "replace would hold"),
    "replace method": ("{{ ('a' * 1000000).replace('a', 'a' * 1000) }}", "replace would hold"),
    "join of shared strings": ("{{ (['y' * 1000] * 100000) | join }}", "join would hold"),
    "string of shared strings": ("{{ (['y' * 100000] * 100000) | string }}", "would hold"),
    "output of shared strings": ("{{ ['y' * 100000] * 100000 }}", "an output value would hold"),
    "concat of shared strings": ("{{ (['y' * 100000] * 100000) ~ 'x' }}", "concatenation would hold"),
    "list repetition": ("{{ messages * 10000000 }}", "items"),
    "literal output loop": ("{% for i in range(100000) %}{% for j in range(100000) %}xxxxxxxxxxxxxxxx"
                            "{% endfor %}{% endfor %}", "the rendered text would hold"),
    "power": ("{{ 7 ** 1000000 }}", "a power would hold"),
    "squaring": ("{% set ns = namespace(x=3) %}{% for i in range(40) %}{% set ns.x = ns.x * ns.x %}{% endfor %}",
                 "bits"),
    "lipsum": ("{{ lipsum(1000000) }}", "lipsum"),
    "indent": ("{{ ('\\n' * 1000000) | indent(1000) }}", "indent would hold"),
    "tojson indent": ("{{ messages | tojson(indent=100000) }}", "indent is limited"),
    "center": ("{{ 'a' | center(1000000000) }}", "larger than the limit"),
    "sum of lists": ("{{ ([[1]] * 100000) | sum(start=[]) }}", "sum would hold"),
    "striptags": ("{{ ('<' * 1000000) | striptags }}", "striptags would hold"),
    "wordwrap": ("{{ ('a ' * 1000000) | wordwrap(1, wrapstring='x' * 1000) }}", "wordwrap would hold"),
    "expandtabs": ("{{ ('\\t' * 1000000).expandtabs(1000) }}", "expandtabs would hold"),
    "strftime": ("{{ strftime_now('%c' * 2000000) }}", "strftime_now"),
    "deep expression": ("{{ " + "(" * 100000 + "1" + ")" * 100000 + " }}", "cannot be compiled"),
    "nested loops in source": ("".join("{%% for x%d in [1] %%}" % i for i in range(40)) + "{% endfor %}" * 40,
                               "cannot be compiled"),
    "huge source": ("x" * (template_limits.MAX_TEMPLATE_CHARS + 1), "template source would hold"),
}

# templates that only time can stop
SLOW = {
    "nested ranges": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "exponential macro": "{% macro f(n) %}{% if n %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}{{ f(60) }}",
    "loop over a big list": "{% set l = range(100000) | list %}{% for a in l %}{% for b in l %}{% endfor %}"
                            "{% endfor %}",
    "repeated sorts": "{% for i in range(100000) %}{{ (range(1000) | list) | sort | length }}{% endfor %}",
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_oversized_template_is_refused_before_allocating(case):
    template, words = HOSTILE[case]
    with pytest.raises(ValueError) as error:
        render_chat(template, MESSAGES)
    message = str(error.value)
    assert words in message and message.startswith("chat template") and "\n" not in message, message


@pytest.mark.parametrize("case", sorted(SLOW))
def test_slow_template_stops_at_the_deadline(case, monkeypatch):
    monkeypatch.setattr(template_limits, "MAX_RENDER_SECONDS", 0.3)
    with pytest.raises(ValueError, match=r"rendering took longer than 0\.3 s"):
        render_chat(SLOW[case], MESSAGES)


def test_deeply_nested_messages_are_a_value_error():
    content: list = []
    for _ in range(5000):
        content = [content]
    with pytest.raises(ValueError, match="nested too deeply"):
        render_chat("{{ messages }}", [{"role": "user", "content": content}])


def test_ordinary_templates_are_untouched():
    """Limits cost nothing to a normal template: loops, macros, filters, namespaces, tojson."""
    template = ("{% set ns = namespace(n=0) %}{% macro tag(r) %}<{{ r | upper }}>{% endmacro %}"
                "{% for m in messages %}{% set ns.n = ns.n + 1 %}{{ tag(m.role) }}{{ m.content | trim }}"
                "{{ '%02d' % ns.n }}{% endfor %}{{ messages | tojson(indent=2) | length }}"
                "{{ (['a', 'b'] * 3) | join(',') }}{{ 'x'.center(9) }}")
    tojson_length = len(json.dumps(MESSAGES * 3, indent=2))
    assert render_chat(template, MESSAGES * 3) == ("<USER>hi01<USER>hi02<USER>hi03" + str(tojson_length)
                                                   + "a,b,a,b,a,b" + "    x    ")


@pytest.fixture(scope="module")
def native_file(tiny_model_factory, tmp_path_factory) -> bytes:
    root = tmp_path_factory.mktemp("template")
    src = root / "model"
    shutil.copytree(tiny_model_factory("qwen3_moe-a").path, src)
    demo = Path(colibri.__file__).parent / "demo_model"
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(demo / name, src / name)
    return convert(src, root / "good.colibri", "f32", progress=False).read_bytes()


@pytest.mark.parametrize("case", ["format repeated", "literal output loop"])
def test_hostile_template_inside_a_model_file(native_file, tmp_path, case):
    path = tmp_path / "hostile.colibri"
    path.write_bytes(native_edit.with_side_file(native_file, "chat_template.jinja", HOSTILE[case][0]))
    with colibri.load(path, threads=1, n_ctx=32) as model:
        with pytest.raises(ValueError, match=HOSTILE[case][1]):
            model.chat(MESSAGES, max_tokens=2)


def test_slow_template_inside_a_model_file(native_file, tmp_path, monkeypatch):
    monkeypatch.setattr(template_limits, "MAX_RENDER_SECONDS", 0.3)
    path = tmp_path / "slow.colibri"
    path.write_bytes(native_edit.with_side_file(native_file, "chat_template.jinja", SLOW["nested ranges"]))
    with colibri.load(path, threads=1, n_ctx=32) as model:
        with pytest.raises(ValueError, match="rendering took longer"):
            model.chat(MESSAGES, max_tokens=2)
