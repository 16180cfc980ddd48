"""A FIFO, a device or a directory where a model file should be: refused at once, never opened.

Opening a FIFO for reading waits for a writer forever, so an independent fuzzer hung `load`
with a FIFO as the model path or as a file inside a model directory. Each case here must raise
ModelError saying "not a regular file". A watchdog opens every FIFO for writing after 20 s, so
a regression fails (the reader then sees an empty file, not the refusal) instead of hanging.
"""
from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest

import colibri
from colibri.convert import convert
from colibri.errors import ModelError
from colibri.formats import native

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")


class _Watchdog:
    """Unblocks any reader of the given FIFOs after `seconds` by opening them for writing."""

    def __init__(self, fifos: list[Path], seconds: float = 20.0):
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(fifos, seconds), daemon=True)
        self._thread.start()

    def _run(self, fifos, seconds):
        if self._done.wait(seconds):
            return
        for fifo in fifos:
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass

    def stop(self):
        self._done.set()


def _refused(fifo_paths: list[Path], call) -> str:
    watchdog = _Watchdog(fifo_paths)
    try:
        with pytest.raises(ModelError) as error:
            call()
    finally:
        watchdog.stop()
    message = str(error.value)
    assert "not a regular file" in message and "\n" not in message, message
    return message


def _fifo(path: Path) -> Path:
    if path.exists() or path.is_symlink():
        path.unlink()
    os.mkfifo(path)
    return path


@pytest.fixture(scope="module")
def hf_model(tiny_model_factory):
    return tiny_model_factory("qwen3_moe-a").path


@pytest.fixture()
def model_dir(hf_model, tmp_path) -> Path:
    """A writable copy of a Hugging Face directory with a tokenizer and a chat template."""
    d = tmp_path / "model"
    shutil.copytree(hf_model, d)
    demo = Path(colibri.__file__).parent / "demo_model"
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(demo / name, d / name)
    (d / "generation_config.json").write_text('{"eos_token_id": 1}')
    return d


@pytest.mark.parametrize("name", ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                                  "chat_template.jinja", "generation_config.json", "special_tokens_map.json"])
def test_fifo_inside_a_model_directory(model_dir, name):
    fifo = _fifo(model_dir / name)
    message = _refused([fifo], lambda: colibri.load(model_dir, threads=1, n_ctx=16))
    assert name in message and "FIFO" in message, message


def test_fifo_as_a_shard(model_dir):
    (model_dir / "model.safetensors").rename(model_dir / "shard-1.safetensors")
    weights = __import__("safetensors.numpy", fromlist=["load_file"]).load_file(model_dir / "shard-1.safetensors")
    index = {"weight_map": {name: "shard-1.safetensors" for name in weights}}
    (model_dir / "model.safetensors.index.json").write_text(__import__("json").dumps(index))
    fifo = _fifo(model_dir / "shard-1.safetensors")
    _refused([fifo], lambda: colibri.load(model_dir, threads=1, n_ctx=16))


def test_fifo_as_the_index(model_dir):
    (model_dir / "model.safetensors").unlink()
    fifo = _fifo(model_dir / "model.safetensors.index.json")
    _refused([fifo], lambda: colibri.load(model_dir, threads=1, n_ctx=16))


@pytest.mark.parametrize("suffix", [".gguf", ".colibri"])
def test_fifo_as_the_model_path(tmp_path, suffix):
    fifo = _fifo(tmp_path / f"model{suffix}")
    _refused([fifo], lambda: colibri.load(fifo, threads=1))


def test_fifo_given_to_the_c_loader(tmp_path):
    """colibri_model_load itself (the path a C program takes) refuses before opening."""
    fifo = _fifo(tmp_path / "model.colibri")
    _refused([fifo], lambda: native.NativeFileModel(fifo))


@pytest.mark.parametrize("suffix", [".gguf", ".colibri"])
def test_device_as_the_model_path(tmp_path, suffix):
    link = tmp_path / f"zero{suffix}"
    link.symlink_to("/dev/zero")
    message = _refused([], lambda: colibri.load(link, threads=1))
    assert "character device" in message, message


def test_directory_as_the_chat_template(model_dir):
    (model_dir / "chat_template.jinja").unlink()
    (model_dir / "chat_template.jinja").mkdir()
    _refused([], lambda: colibri.load(model_dir, threads=1, n_ctx=16))


def test_fifo_side_file_when_converting(model_dir, tmp_path):
    fifo = _fifo(model_dir / "generation_config.json")
    _refused([fifo], lambda: convert(model_dir, tmp_path / "out.colibri", "f32", progress=False))
