"""A tokenizer and chat template in OpenAI's harmony format (gpt-oss), built for the tests.

The template is written here from the format's description (roles between <|start|> and
<|message|>, a channel per assistant message, tool calls addressed `to=functions.NAME` on the
commentary channel, tools declared as a TypeScript namespace in the developer message); it
exercises what gpt-oss's own template does: macros, namespaces, loop controls, tojson,
reasoning fields and extra variables (reasoning_effort, model_identity).
"""
from __future__ import annotations

import tokenizers
from tokenizers import Regex, decoders, models, pre_tokenizers, trainers

SPECIAL = ["<|endoftext|>", "<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>",
           "<|call|>"]

# o200k's pre-tokenizer (tokenizer.json of gpt-oss spells it this way): words with a leading
# non-letter and case runs, contractions, 1-3 digit numbers, punctuation runs, newlines, spaces.
O200K_REGEX = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
               r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
               r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
               r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
               r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")

CORPUS = ["You are a helpful assistant. Knowledge cutoff: 2024-06. Reasoning: medium.",
          "# Valid channels: analysis, commentary, final. Channel must be included for every message.",
          "namespace functions { type get_weather = (_: { location: string, unit?: \"c\" | \"f\" }) => any; }",
          "What is the weather in Paris? It is sunny, 21 degrees. I'll check the forecast for tomorrow.",
          "The user asks about the weather; call the tool with the city name and report the result."] * 20

TEMPLATE = r"""{#- harmony: system, developer (instructions + tools), then the conversation -#}
{%- macro ts_type(p) -%}
{%- if p.enum is defined -%}{{ p.enum | map('tojson') | join(' | ') }}
{%- elif p.type == 'integer' or p.type == 'number' -%}number
{%- elif p.type == 'array' -%}{{ ts_type(p['items']) if p['items'] is defined else 'any' }}[]
{%- elif p.type in ['string', 'boolean'] -%}{{ p.type }}
{%- else -%}any{%- endif -%}
{%- endmacro -%}
{%- macro declare(tool) -%}
{%- set fn = tool.function if tool.function is defined else tool -%}
{%- if fn.description is defined %}{{ "// " ~ fn.description ~ "\n" }}{% endif -%}
{{ "type " ~ fn.name ~ " = " }}
{%- if fn.parameters is defined and fn.parameters.properties -%}
{{ "(_: {\n" }}
{%- for name, p in fn.parameters.properties | dictsort -%}
{%- if p.description is defined %}{{ "// " ~ p.description ~ "\n" }}{% endif -%}
{{ name ~ ('' if name in (fn.parameters.required or []) else '?') ~ ": " ~ ts_type(p) ~ "," }}
{%- if p.default is defined %}{{ " // default: " ~ (p.default | tojson) }}{% endif %}{{ "\n" }}
{%- endfor -%}
{{ "}) => any;" }}
{%- else -%}{{ "() => any;" }}{%- endif -%}
{%- endmacro -%}
<|start|>system<|message|>{{ model_identity | default('You are a helpful assistant.') }}
Knowledge cutoff: 2024-06

Reasoning: {{ reasoning_effort | default('medium') }}

# Valid channels: analysis, commentary, final. Channel must be included for every message.
{%- if tools %}{{ "\nCalls to these tools must go to the commentary channel: 'functions'." }}{% endif %}<|end|>
{%- set ns = namespace(instructions='', start=0) -%}
{%- if messages and messages[0].role in ['system', 'developer'] -%}
{%- set ns.instructions = messages[0].content -%}
{%- set ns.start = 1 -%}
{%- endif -%}
{%- if ns.instructions or tools -%}
<|start|>developer<|message|>
{%- if ns.instructions %}{{ "# Instructions\n\n" ~ ns.instructions }}{% endif -%}
{%- if tools -%}
{{ "\n\n" if ns.instructions else "" }}{{ "# Tools\n\n## functions\n\nnamespace functions {\n\n" }}
{%- for tool in tools %}{{ declare(tool) ~ "\n\n" }}{% endfor -%}
{{ "} // namespace functions" }}
{%- endif -%}
<|end|>
{%- endif -%}
{%- set last = namespace(tool='') -%}
{%- for message in messages[ns.start:] -%}
{%- if message.role == 'user' -%}
<|start|>user<|message|>{{ message.content }}<|end|>
{%- elif message.role == 'assistant' -%}
{%- if message.thinking is defined and (loop.last or message.tool_calls is defined) -%}
<|start|>assistant<|channel|>analysis<|message|>{{ message.thinking }}<|end|>
{%- endif -%}
{%- if message.tool_calls is defined -%}
{%- for call in message.tool_calls -%}
{%- set fn = call.function if call.function is defined else call -%}
{%- set last.tool = fn.name -%}
<|start|>assistant<|channel|>commentary to=functions.{{ fn.name }} <|constrain|>json<|message|>
{{- fn.arguments if fn.arguments is string else fn.arguments | tojson }}<|call|>
{%- endfor -%}
{%- elif message.content is defined -%}
<|start|>assistant<|channel|>final<|message|>{{ message.content }}{{ '<|return|>' if loop.last and not add_generation_prompt else '<|end|>' }}
{%- endif -%}
{%- elif message.role == 'tool' -%}
{%- if not last.tool -%}{{ raise_exception('a tool message must follow an assistant tool call') }}{%- endif -%}
<|start|>functions.{{ last.tool }} to=assistant<|channel|>commentary<|message|>
{{- message.content if message.content is string else message.content | tojson }}<|end|>
{%- else -%}
{{ raise_exception('harmony has no role ' ~ message.role ~ ' after the first message') }}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}<|start|>assistant{%- endif -%}"""


def harmony_backend(vocab_size: int = 400) -> tokenizers.Tokenizer:
    """A byte-level BPE over o200k's pre-tokenizer with harmony's special tokens (ids 0..7), trained here."""
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(O200K_REGEX), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    return tok


def save_harmony_tokenizer(directory, vocab_size: int = 400):
    """Saves the tokenizer with the template as transformers does (tokenizer.json, tokenizer_config.json,
    chat_template.jinja); returns the transformers tokenizer."""
    from transformers import PreTrainedTokenizerFast

    hf = PreTrainedTokenizerFast(tokenizer_object=harmony_backend(vocab_size), eos_token="<|return|>",
                                 pad_token="<|endoftext|>", chat_template=TEMPLATE)
    hf.save_pretrained(directory)
    return hf
