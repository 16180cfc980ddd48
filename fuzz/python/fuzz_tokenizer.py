"""atheris harness: a Hugging Face tokenizer directory (tokenizer.json, tokenizer_config.json,
special_tokens_map.json) through Tokenizer.from_dir, then encode, decode, stream-decode and
the chat template it brings.

    python fuzz/python/fuzz_tokenizer.py CORPUS_DIR [libFuzzer flags]

Input parts: tokenizer.json, tokenizer_config.json, special_tokens_map.json, a text.
"""
from __future__ import annotations

import shutil

from common import MESSAGES, allowed, instrumented, run, scratch, split_parts

with instrumented():
    from colibri.errors import ModelError
    from colibri.tokenizer import Tokenizer


GENERATION = 1024


def test_one_input(data: bytes) -> None:
    tokenizer_json, tokenizer_config, special_map, text = split_parts(data, 4)
    directory = scratch() / "tokenizer"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir()
    for name, content in (("tokenizer.json", tokenizer_json), ("tokenizer_config.json", tokenizer_config),
                          ("special_tokens_map.json", special_map)):
        if content:
            (directory / name).write_bytes(content)
    tok = None
    with allowed(ModelError):
        tok = Tokenizer.from_dir(directory)
    if tok is None:
        return
    string = text.decode("utf-8", "replace")
    with allowed(ValueError):
        ids = tok.encode(string)
        tok.decode(ids)
        tok.decode(ids, skip_special_tokens=True)
        stream = tok.stream()   # a generation's worth of ids (without an anchor token it is quadratic)
        "".join(stream.push(i) for i in ids[:GENERATION] + [tok.vocab_size + 3]) + stream.flush()
    if tok.chat_template:
        with allowed(ValueError):
            tok.render_chat(MESSAGES)


if __name__ == "__main__":
    run(test_one_input)
