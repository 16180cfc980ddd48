"""atheris harness: GGUF files — the reader (header, metadata, tensor table), the metadata to
config mapping and tensor slots (colibri.load), and the tokenizer rebuilt from the metadata.

    python fuzz/python/fuzz_gguf.py CORPUS_DIR [libFuzzer flags]

Mutations are structure-aware (gguf_mutator.py) three times out of four.
"""
from __future__ import annotations

import atheris

from common import MESSAGES, allowed, instrumented, run, scratch
import gguf_mutator

with instrumented():
    import colibri
    from colibri.errors import ModelError
    from colibri.formats.gguf import GGUFFile
    from colibri.formats.gguf_tokenizer import tokenizer_from_gguf


def test_one_input(data: bytes) -> None:
    path = scratch() / "model.gguf"
    path.write_bytes(data)
    gguf = None
    with allowed(ModelError):
        gguf = GGUFFile(path)
    if gguf is None:
        return
    try:
        if "tokenizer.ggml.model" in gguf.metadata:
            tok = None
            with allowed(ModelError):
                tok = tokenizer_from_gguf(gguf.metadata, str(path))
            if tok is not None:
                with allowed(ValueError):
                    ids = tok.encode("Hello wörld, 12345 <|im_end|> ▁x")
                    tok.decode(ids)
                    stream = tok.stream()
                    "".join(stream.push(i) for i in ids) + stream.flush()
                if tok.chat_template:
                    with allowed(ValueError):
                        tok.render_chat(MESSAGES)
    finally:
        gguf.close()
    with allowed(ModelError):
        with colibri.load(path, threads=1, n_ctx=16) as model:
            with allowed(ValueError):
                model.logits([0, model.config.vocab_size - 1])


def custom_mutator(data: bytes, max_size: int, seed: int) -> bytes:
    return gguf_mutator.mutate(data, max_size, seed, atheris.Mutate)


if __name__ == "__main__":
    run(test_one_input, custom_mutator)
