"""Seed corpora for every fuzz harness, made from the test models (nothing big is committed).

    python fuzz/make_seeds.py OUT      # OUT/<harness>/: the seeds of each harness (tools/fuzz.sh)

The tiny random checkpoints of tests/conftest.py (built with transformers' own classes) are
converted to .colibri files and exported to GGUF (tests/gguf_export.py) at several dtypes; their
config, generation config, safetensors headers and a sharded index seed the Python harnesses;
the demo model's tokenizer and chat template, a llama.cpp byte-level and a SentencePiece
vocabulary, and common chat templates seed the rest. A harness's inputs are several parts
joined by fuzz/python/common.py's SEPARATOR where it reads more than one file.
"""
from __future__ import annotations

import json
import shutil
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "fuzz" / "python")]

from common import join_parts  # noqa: E402

MODELS = {   # tiny model -> dtypes of its .colibri seeds (each architecture, each feature, each block type)
    "mixtral-b": ("f32", "q4_0"), "qwen2_moe-c": ("bf16", "q8_0"), "qwen3_moe-b": ("f16", "q4_1"),
    "olmoe-b": ("q8_0",), "llama-b": ("q4_0", "f32"),
}
GGUF_MODELS = {"mixtral-b": ("q8_0",), "qwen2_moe-c": ("q4_0",), "qwen3_moe-b": ("f16",), "olmoe-b": ("q4_1",),
               "llama-b": ("q8_0",)}

TEMPLATES = {
    "chatml": "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
              "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
    "llama3": "{{ bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' "
              "+ m['content'] | trim + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}"
              "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}",
    "mistral": "{{ bos_token }}{% for m in messages %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
               "{{ raise_exception('roles must alternate') }}{% endif %}{% if m['role'] == 'user' %}"
               "{{ '[INST] ' + m['content'] + ' [/INST]' }}{% else %}{{ m['content'] + eos_token }}{% endif %}"
               "{% endfor %}",
    "tools": "{% set ns = namespace(system='') %}{% for m in messages %}{% if m.role == 'system' %}"
             "{% set ns.system = ns.system ~ m.content %}{% endif %}{% endfor %}{% if tools %}<tools>"
             "{% for t in tools %}{{ t | tojson(indent=2) }}{% endfor %}</tools>{% endif %}{{ ns.system }}"
             "{% for m in messages if m.role != 'system' %}{{ m.role | upper }}: {{ m.content | default('') }}"
             "{% if m.tool_calls %}{% for c in m.tool_calls %}{{ c.function.name }}({{ c.function.arguments | "
             "tojson }}){% endfor %}{% endif %}\\n{% endfor %}{{ strftime_now('%d %b %Y') }}",
    "macro": "{% macro render(m, depth=0) %}{{ '  ' * depth }}{{ m.role }}{% if m.content is string %}"
             "{{ m.content | replace('\\n', ' ') | truncate(40) }}{% else %}{{ m.content | length }}{% endif %}"
             "{% endmacro %}{% for m in messages %}{{ render(m, loop.index) }}{{ '%03d' % loop.index }}"
             "{{ m | dictsort | map('first') | join(',') }}{% endfor %}",
}
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello\nthere"},
            {"role": "assistant", "content": "Hi!", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]},
            {"role": "user", "content": "Bye"}]
JSONS = [b'{}', b'{"a": [1, 2.5e-3, true, null, "\\u00e9\\ud83d\\ude00"]}', b'{"a": {"b": {"c": []}}}  \n',
         '{"é": "ü"}'.encode()]


def _write(directory: Path, name: str, data: bytes) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_bytes(data)


def _safetensors_header(path: Path) -> bytes:
    """A safetensors file with its data cut to the first 256 bytes of each tensor's worth: the
    header is what the harness reads; the data is rebuilt to fit by the harness."""
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    return raw[:8 + n]


def main(out: Path) -> None:
    from conftest import build_tiny_model
    from gguf_export import export_gguf

    from colibri.convert import convert

    work = out / "_models"
    if out.exists():
        shutil.rmtree(out)
    work.mkdir(parents=True)
    tiny = {name: build_tiny_model(name, work) for name in MODELS}

    for name, dtypes in MODELS.items():
        for dtype in dtypes:
            path = convert(tiny[name].path, work / f"{name}-{dtype}.colibri", dtype, progress=False)
            data = path.read_bytes()
            _write(out / "fuzz_native_load", path.name, data)
            metadata_at, metadata_size = struct.unpack_from("<QQ", data, 32)
            _write(out / "fuzz_json_check", f"{name}-{dtype}.json", data[metadata_at:metadata_at + metadata_size])
        config = (tiny[name].path / "config.json").read_bytes()
        generation = (tiny[name].path / "generation_config.json").read_bytes()
        _write(out / "fuzz_config", name, join_parts([config, generation, b"0"]))
        header = _safetensors_header(tiny[name].path / "model.safetensors")
        names = list(json.loads(header[8:]).keys() - {"__metadata__"})
        index = json.dumps({"metadata": {}, "weight_map": {n: ("a.safetensors" if i % 2 else "b.safetensors")
                                                          for i, n in enumerate(sorted(names))}}).encode()
        _write(out / "fuzz_safetensors", name, join_parts([header, index, header]))
    for i, text in enumerate(JSONS):
        _write(out / "fuzz_json_check", f"small-{i}.json", text)

    for name, dtypes in GGUF_MODELS.items():
        for dtype in dtypes:
            path = work / f"{name}-{dtype}.gguf"
            export_gguf(tiny[name].reference, tiny[name].path, path, dtype)
            _write(out / "fuzz_gguf", path.name, path.read_bytes())
    for name, data in _tokenizer_ggufs(work).items():
        _write(out / "fuzz_gguf", name, data)

    for type_id in range(8):   # byte 0: the type; 1: blocks; 2: rows and tokens; then bytes
        for k in range(3):
            _write(out / "fuzz_blocks", f"t{type_id}-{k}", bytes([type_id, k * 3, k * 7]) + bytes(range(256)) * (k + 1))

    demo = ROOT / "colibri" / "demo_model"
    tok_json, tok_config = (demo / "tokenizer.json").read_bytes(), (demo / "tokenizer_config.json").read_bytes()
    for i, text in enumerate(["Hello world, and it came to pass.", "<|im_start|>user\nÉté 😀 12345<|im_end|>"]):
        _write(out / "fuzz_tokenizer", f"demo-{i}", join_parts([tok_json, tok_config, b"{}", text.encode()]))
    small = _small_tokenizer_json()
    _write(out / "fuzz_tokenizer", "small", join_parts([small, b'{"eos_token": "</s>", "bos_token": "<s>"}', b"{}",
                                                         b"abc abd"]))

    templates = dict(TEMPLATES, demo=(demo / "chat_template.jinja").read_text())
    for name, template in templates.items():
        _write(out / "fuzz_chat_template", name, join_parts([template.encode(), json.dumps(MESSAGES).encode()]))
    shutil.rmtree(work)
    print(f"seeds in {out}: " + ", ".join(f"{d.name} {len(list(d.iterdir()))}" for d in sorted(out.iterdir())))


def _small_tokenizer_json() -> bytes:
    import tokenizers
    from tokenizers import models, pre_tokenizers

    vocab = {"<s>": 0, "</s>": 1, "a": 2, "b": 3, "c": 4, "d": 5, " ": 6, "ab": 7, "abc": 8}
    tok = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=[("a", "b"), ("ab", "c")]))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return tok.to_str().encode()


def _tokenizer_ggufs(work: Path) -> dict[str, bytes]:
    """A byte-level ("gpt2") GGUF from the demo tokenizer and a SentencePiece ("llama") one."""
    import numpy as np
    from gguf import GGUFValueType, GGUFWriter

    demo = json.loads((ROOT / "colibri" / "demo_model" / "tokenizer.json").read_text())
    vocab = dict(demo["model"]["vocab"])
    for added in demo.get("added_tokens", []):
        vocab[added["content"]] = added["id"]
    by_id = sorted(vocab, key=vocab.get)[:600]
    merges = [m if isinstance(m, str) else " ".join(m) for m in demo["model"]["merges"]]
    merges = [m for m in merges if all(part in set(by_id) for part in m.split(" ", 1))][:300]
    spm = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + ["▁a", "▁b", "ab", "▁ab", "▁"]
    files = {}
    for name, arch, kv in (
        ("tok-gpt2.gguf", "qwen2moe", [("tokenizer.ggml.model", "gpt2", GGUFValueType.STRING),
                                       ("tokenizer.ggml.pre", "qwen2", GGUFValueType.STRING),
                                       ("tokenizer.ggml.tokens", by_id, GGUFValueType.ARRAY),
                                       ("tokenizer.ggml.token_type", [1] * len(by_id), GGUFValueType.ARRAY),
                                       ("tokenizer.ggml.merges", merges, GGUFValueType.ARRAY),
                                       ("tokenizer.ggml.eos_token_id", 0, GGUFValueType.UINT32),
                                       ("tokenizer.chat_template", TEMPLATES["chatml"], GGUFValueType.STRING)]),
        ("tok-spm.gguf", "llama", [("tokenizer.ggml.model", "llama", GGUFValueType.STRING),
                                   ("tokenizer.ggml.tokens", spm, GGUFValueType.ARRAY),
                                   ("tokenizer.ggml.scores", [0.0] * 259 + [-1.0, -2.0, -3.0, -0.5, -4.0],
                                    GGUFValueType.ARRAY),
                                   ("tokenizer.ggml.token_type", [2, 3, 3] + [6] * 256 + [1] * 5, GGUFValueType.ARRAY),
                                   ("tokenizer.ggml.bos_token_id", 1, GGUFValueType.UINT32),
                                   ("tokenizer.ggml.eos_token_id", 2, GGUFValueType.UINT32),
                                   ("tokenizer.ggml.unknown_token_id", 0, GGUFValueType.UINT32)]),
    ):
        path = work / name
        writer = GGUFWriter(str(path), arch)
        for key, value, vtype in kv:
            if vtype == GGUFValueType.ARRAY:
                writer.add_array(key, value)
            else:
                writer.add_key_value(key, value, vtype)
        writer.add_tensor("token_embd.weight", np.zeros((4, 32), np.float32))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        files[name] = path.read_bytes()
    return files


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
