"""A real chat model end to end: SmolLM2-135M-Instruct, Q4_1 GGUF (llama architecture,
30 layers, tied embeddings, ChatML template and tokenizer embedded)."""
from __future__ import annotations

import pytest

import colibri

from smollm2 import smollm2_path


@pytest.fixture(scope="module")
def smollm2():
    with colibri.load(smollm2_path(), threads=2) as m:
        yield m


def test_shape_and_tokenizer(smollm2):
    c = smollm2.config
    assert (c.architecture, c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads, c.vocab_size) == \
        ("llama", 30, 576, 9, 3, 49152)
    assert c.tied_embeddings
    assert {ref.dtype for _, ref in smollm2.weights} >= {"Q4_1"}
    tok = smollm2.tokenizer
    assert tok.decode(tok.encode("Hello, world!", add_special_tokens=False)) == "Hello, world!"


def test_chat_knows_the_capital_of_france(smollm2):
    # With the template's default system prompt this Q4_1 file answers in French without naming
    # Paris, in llama.cpp exactly as here (tests/test_llamacpp_reference.py checks the two agree;
    # the same weights dequantized to f32 do say Paris). A one-line system message steers it.
    messages = [{"role": "system", "content": "Answer in one short English sentence."},
                {"role": "user", "content": "What is the capital of France?"}]
    out = smollm2.chat(messages, max_tokens=32, temperature=0.0)
    assert "Paris" in out.text, out.text
    assert out.finish_reason == "stop"


def test_convert_to_native_keeps_everything(smollm2, tmp_path):
    from colibri.convert import convert

    path = convert(smollm2_path(), tmp_path / "smollm2.colibri", "keep", progress=False)
    text = "Colibri runs Mixture-of-Experts models on CPUs."
    with colibri.load(path, threads=2) as native:
        ids = smollm2.tokenizer.encode(text)
        assert native.tokenizer.encode(text) == ids
        assert native.tokenizer.chat_template == smollm2.tokenizer.chat_template
        assert native.tokenizer.eos_ids == smollm2.tokenizer.eos_ids
        assert native.logits(ids).tobytes() == smollm2.logits(ids).tobytes()
