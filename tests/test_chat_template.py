"""colibri.chat_template.render_chat against transformers' apply_chat_template(tokenize=False).

The templates are written in the style of real model repositories (ChatML/Qwen2, Llama 3,
Mixtral, Qwen3 with tools and reasoning); each is rendered over several conversations with
and without the generation prompt, and must come out byte-identical to transformers.
"""
from __future__ import annotations

import jinja2
import pytest
import tokenizers
from tokenizers import models

from colibri.chat_template import render_chat

BOS, EOS = "<|begin_of_text|>", "<|eot_id|>"

CHATML = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}"
    "{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

LLAMA3 = """{{- bos_token }}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "You are a helpful assistant." %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{%- if tools is not none %}
    {{- "Environment: ipython\\n" }}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- system_message }}
{%- if tools is not none %}
    {{- "\\nYou have these functions:\\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\\n\\n" }}
    {%- endfor %}
{%- endif %}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}
        {{- '{"name": "' + tool_call.name + '", ' }}
        {{- '"parameters": ' }}
        {{- tool_call.arguments | tojson }}
        {{- "}" }}
        {{- "<|eot_id|>" }}
    {%- else %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\\n\\n" }}
        {{- message.content | tojson }}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""

MIXTRAL = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token }}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}"
    "{% endif %}"
    "{% endfor %}"
)

QWEN3 = """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\\n\\n' }}
    {%- endif %}
    {{- "# Tools\\n\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools><|im_end|>\\n" }}
{%- elif messages[0].role == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.role == "system" and loop.first %}
        {%- continue %}
    {%- elif message.role == "user" %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {%- set content = message.content if message.content is defined else '' %}
        {{- '<|im_start|>assistant\\n' }}
        {%- generation %}
        {%- if message.reasoning_content is defined and loop.index0 > ns.last_query_index %}
            {{- '<think>\\n' + message.reasoning_content.strip('\\n') + '\\n</think>\\n\\n' }}
        {%- endif %}
        {{- content }}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {{- '\\n<tool_call>\\n{"name": "' + tool_call.function.name + '", "arguments": ' }}
                {{- tool_call.function.arguments | tojson(ensure_ascii=True, sort_keys=True) }}
                {{- '}\\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {%- endgeneration %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
    {%- if loop.index0 > 40 %}{% break %}{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}
"""

EXTRAS = (
    "{% set d = dict(a=1, b='x') %}{{ d | tojson }}|{{ dict.fromkeys(['k'], 0) | tojson }}"
    "|{{ messages | length }}|{{ messages[0].content | tojson(separators=(',', ':')) }}"
    "|{{ bos_token is defined }}|{{ pad_token is defined }}|{{ strftime_now('%Y-%m') }}"
    "|{% for m in messages %}{% if loop.last %}last={{ m.role }}{% endif %}{% endfor %}"
)

SIMPLE = [{"role": "user", "content": "Hello <b>there</b> & welcome — 你好 🦜"}]
WITH_SYSTEM = [{"role": "system", "content": "  Be terse.  "},
               {"role": "user", "content": "What is 2+2?"},
               {"role": "assistant", "content": "4"},
               {"role": "user", "content": "And 3+3?"}]
TOOLS = [{"type": "function",
          "function": {"name": "get_weather", "description": "Weather in a city — °C",
                       "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                      "required": ["city"]}}}]
WITH_TOOL_CALLS = [{"role": "user", "content": "Weather in Zürich?"},
                   {"role": "assistant", "content": None, "reasoning_content": "\nNeed the tool.\n",
                    "tool_calls": [{"type": "function",
                                    "function": {"name": "get_weather",
                                                 "arguments": {"city": "Zürich", "unit": "C"}}}]},
                   {"role": "tool", "content": "21 degrees"},
                   {"role": "tool", "content": "sunny"},
                   {"role": "assistant", "content": "21 °C and sunny.", "thinking": "easy"},
                   {"role": "user", "content": "Thanks"}]

CASES = [
    ("chatml", CHATML, SIMPLE, {}),
    ("chatml-system", CHATML, WITH_SYSTEM, {}),
    ("llama3", LLAMA3, WITH_SYSTEM, {}),
    ("llama3-tools", LLAMA3, SIMPLE, {"tools": TOOLS}),
    ("llama3-tool-calls", LLAMA3, WITH_TOOL_CALLS[:3], {"tools": TOOLS}),
    ("mixtral", MIXTRAL, WITH_SYSTEM[1:], {}),
    ("qwen3", QWEN3, WITH_SYSTEM, {}),
    ("qwen3-tools", QWEN3, WITH_TOOL_CALLS, {"tools": TOOLS}),
    ("qwen3-reasoning", QWEN3, WITH_TOOL_CALLS[:5], {"tools": TOOLS}),
    ("qwen3-no-thinking", QWEN3, SIMPLE, {"enable_thinking": False}),
    ("extras", EXTRAS, SIMPLE, {}),
]


@pytest.fixture(scope="module")
def reference():
    from transformers import PreTrainedTokenizerFast

    backend = tokenizers.Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=BOS, eos_token=EOS)


@pytest.mark.parametrize("add_generation_prompt", [True, False])
@pytest.mark.parametrize("name, template, messages, extra", CASES, ids=[c[0] for c in CASES])
def test_matches_transformers(reference, name, template, messages, extra, add_generation_prompt):
    expected = reference.apply_chat_template(messages, chat_template=template, tokenize=False,
                                             add_generation_prompt=add_generation_prompt, **extra)
    ours = render_chat(template, messages, add_generation_prompt=add_generation_prompt,
                       bos_token=BOS, eos_token=EOS, **extra)
    assert ours == expected
    assert ours  # every case renders something


def test_content_none_is_dropped_not_rendered():
    template = "{% for m in messages %}[{{ m.content if m.content is defined else 'absent' }}]{% endfor %}"
    assert render_chat(template, [{"role": "assistant", "content": None}]) == "[absent]"


def test_missing_special_tokens_are_undefined_and_extra_variables_reach_the_template():
    template = "{{ bos_token is defined }}/{{ eos_token }}/{{ image_token }}"
    assert render_chat(template, [], eos_token="</s>", image_token="<image>") == "False/</s>/<image>"


def test_raise_exception_becomes_one_line_value_error(reference):
    bad = [{"role": "system", "content": "x"}]
    with pytest.raises(jinja2.TemplateError, match="Conversation roles must alternate"):
        reference.apply_chat_template(bad, chat_template=MIXTRAL, tokenize=False)
    with pytest.raises(ValueError, match=r"^chat template: Conversation roles must alternate user/assistant"):
        render_chat(MIXTRAL, bad, bos_token=BOS, eos_token=EOS)
    with pytest.raises(ValueError, match=r"^chat template: Only user and assistant roles are supported!$"):
        render_chat(MIXTRAL, [{"role": "user", "content": "a"}, {"role": "tool", "content": "b"}],
                    bos_token=BOS, eos_token=EOS)


@pytest.mark.parametrize("template, message", [
    ("{{ ''.__class__.__mro__ }}", "access to attribute '__class__' of 'str' object is unsafe"),
    ("{{ messages.__class__.__subclasses__() }}", "unsafe"),
    ("{{ messages.append(1) }}", "access to attribute 'append' of 'list' object is unsafe"),
    ("{% set ns = namespace() %}{% set ns._x = 1 %}", "underscore"),
    ("{{ namespace(__init__=1) }}", "underscore"),
    ("{{ dict.__call__.__globals__ }}", "unsafe"),
])
def test_sandbox_refuses_unsafe_access(template, message):
    with pytest.raises(ValueError, match="^chat template: .*" + message):
        render_chat(template, [{"role": "user", "content": "hi"}])


def test_template_errors_are_one_line_value_errors():
    with pytest.raises(ValueError, match=r"^chat template: line 2: .*'endfor'"):
        render_chat("{% for m in messages %}\n{{ m }}", [])
    with pytest.raises(ValueError, match=r"^chat template: 'nothing' is undefined$"):
        render_chat("{{ nothing.at_all }}", [])
    with pytest.raises(ValueError, match=r"^chat template: TypeError: "):
        render_chat("{{ messages[0].content + 1 }}", SIMPLE)
    with pytest.raises(ValueError, match="chat message 0 must be a dict"):
        render_chat("x", ["not a dict"])
    with pytest.raises(ValueError, match="tools must be a list of JSON-schema dicts"):
        render_chat("x", SIMPLE, tools=[print])


def test_inputs_are_rebuilt_from_plain_types():
    class Sneaky(str):
        def danger(self):
            return "ran"

    template = "{{ messages[0].content }}|{{ messages[0].content.danger is defined }}|{{ messages[0].obj }}"
    out = render_chat(template, [{"role": "user", "content": Sneaky("hi"), "obj": object()}])
    assert out == "hi|False|<object>"


def test_messages_are_not_modified():
    messages = [dict(m) for m in WITH_TOOL_CALLS]
    render_chat(QWEN3, messages, tools=TOOLS)
    assert messages == WITH_TOOL_CALLS


def test_compiled_templates_are_cached():
    from colibri import chat_template

    chat_template._compile.cache_clear()
    for _ in range(3):
        render_chat(CHATML, SIMPLE)
    info = chat_template._compile.cache_info()
    assert info.misses == 1 and info.hits == 2
