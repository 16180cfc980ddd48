"""Hostile sizes and nesting in model files end as one ModelError line, never another exception.

An independent fuzzer got a RecursionError out of `load` from a tokenizer_config.json holding a
1000-deep nested list, and a MemoryError from a header claiming 16,777,216 experts. Every JSON
file Colibri reads from a model is covered here, and every count that sizes a list.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import colibri
from colibri.convert import convert
from colibri.errors import ModelError

import native_edit

SIDE_JSON = ("config.json", "tokenizer_config.json", "generation_config.json", "special_tokens_map.json",
             "tokenizer.json")


def _nested(depth: int) -> str:
    return '{"a": ' + "[" * depth + "]" * depth + "}"


@pytest.fixture(scope="module")
def source(tiny_model_factory):
    return tiny_model_factory("olmoe-a").path


@pytest.fixture()
def model_dir(source, tmp_path) -> Path:
    d = tmp_path / "model"
    shutil.copytree(source, d)
    demo = Path(colibri.__file__).parent / "demo_model"
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(demo / name, d / name)
    return d


@pytest.mark.parametrize("depth", [1000, 100_000])
@pytest.mark.parametrize("name", SIDE_JSON + ("model.safetensors.index.json",))
def test_deeply_nested_json_in_a_directory(model_dir, name, depth):
    if name == "model.safetensors.index.json":   # read only when there is no single weights file
        (model_dir / "model.safetensors").unlink()
    (model_dir / name).write_text(_nested(depth))
    with pytest.raises(ModelError) as error:
        colibri.load(model_dir, threads=1, n_ctx=16)
    assert name in str(error.value) and "\n" not in str(error.value), error.value


@pytest.mark.parametrize("name", SIDE_JSON)
def test_deeply_nested_json_inside_a_native_file(model_dir, tmp_path, name):
    good = convert(model_dir, tmp_path / "good.colibri", "f32", progress=False).read_bytes()
    path = tmp_path / "bad.colibri"
    path.write_bytes(native_edit.with_side_file(good, name, _nested(1000)))
    with pytest.raises(ModelError) as error:
        colibri.load(path, threads=1, n_ctx=16)
    assert name in str(error.value), error.value


def test_deeply_nested_native_metadata(model_dir, tmp_path):
    good = convert(model_dir, tmp_path / "good.colibri", "f32", progress=False).read_bytes()
    path = tmp_path / "bad.colibri"
    path.write_bytes(native_edit.with_metadata(good, _nested(1000).encode()))
    with pytest.raises(ModelError, match="metadata"):
        colibri.load(path, threads=1, n_ctx=16)


@pytest.mark.parametrize("edit", [dict(num_experts=4096, num_hidden_layers=4096),
                                  dict(num_experts=4096)])
def test_config_calling_for_millions_of_tensors(model_dir, tmp_path, edit):
    """Refused once the tensor list outgrows what the files hold, not after building 50M slots."""
    config = json.loads((model_dir / "config.json").read_text())
    config.update(edit, num_experts_per_tok=1)
    (model_dir / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelError, match="calls for far more tensors than the"):
        colibri.load(model_dir, threads=1, n_ctx=16)
    with pytest.raises(ModelError, match="calls for far more tensors than the"):
        convert(model_dir, tmp_path / "out.colibri", "f32", progress=False)


def test_sentencepiece_vocabulary_too_long_to_derive_merges():
    """Deriving merges from scores slices every token at every point (quadratic in its length):
    a vocabulary of a few long tokens would take minutes, so it is refused up front."""
    from colibri.formats.gguf_tokenizer import tokenizer_from_gguf

    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + ["a"]
    tokens += ["a" * 4000 + str(i) for i in range(15)]
    meta = {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.scores": [0.0] * len(tokens)}
    with pytest.raises(ModelError, match="tokens too long to derive merges"):
        tokenizer_from_gguf(meta, "t.gguf")
