"""atheris harness: config.json and generation_config.json through colibri.load and generate.

    python fuzz/python/fuzz_config.py CORPUS_DIR [libFuzzer flags]

Input parts: config.json, generation_config.json. When the config maps to a model of at most
MAX_ELEMENTS weights, the harness writes a matching model.safetensors (small random values)
so the load goes on to the C model, a forward step and a generation with the generation
config's defaults; otherwise the config must be refused with ModelError.
"""
from __future__ import annotations

import json
import shutil

import numpy as np

from common import allowed, instrumented, run, scratch, split_parts

with instrumented():
    import colibri
    from colibri.errors import ModelError
    from colibri.formats.safetensors import parse_json_object
    from colibri.models import ConfigReader, architecture, tensor_slots

MAX_ELEMENTS = 1 << 20
MAX_TENSORS = 512


def _weights(config_bytes: bytes) -> dict | None:
    """name -> array for a config the architecture code accepts and that is small enough, else None."""
    raw = parse_json_object(config_bytes, "config.json")
    arch = architecture(raw.get("model_type"))
    config = arch.read_config(ConfigReader(raw))
    slots = tensor_slots(arch, config, limit=MAX_TENSORS)
    if sum(int(np.prod(s.shape)) for s in slots) > MAX_ELEMENTS:
        return None
    rng = np.random.default_rng(len(config_bytes))
    return {s.name: (rng.standard_normal(s.shape) * 0.1).astype(np.float32) for s in slots}


def _safetensors(tensors: dict) -> bytes:
    header, offset, blobs = {}, 0, []
    for name, array in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
        blobs.append(array.tobytes())
    text = json.dumps(header).encode()
    return len(text).to_bytes(8, "little") + text + b"".join(blobs)


def test_one_input(data: bytes) -> None:
    config, generation = split_parts(data, 2)
    directory = scratch() / "model"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir()
    (directory / "config.json").write_bytes(config)
    if generation:
        (directory / "generation_config.json").write_bytes(generation)
    weights = None
    with allowed(ModelError):
        weights = _weights(config)
    if weights is None:
        return
    (directory / "model.safetensors").write_bytes(_safetensors(weights))
    with allowed(ModelError):
        with colibri.load(directory, threads=1, n_ctx=32) as model:
            with allowed(ValueError):
                model.logits([0, model.config.vocab_size - 1])
                model.route([1 % model.config.vocab_size])
                model.generate([0], max_tokens=3, seed=1)


if __name__ == "__main__":
    run(test_one_input)
