"""atheris harness: safetensors headers and the sharded index of a Hugging Face directory.

    python fuzz/python/fuzz_safetensors.py CORPUS_DIR [libFuzzer flags]

Input parts: shard a.safetensors, model.safetensors.index.json, shard b.safetensors. Each shard
gets zero bytes appended up to the largest data offset its header names (at most 1 MiB), so
mutated headers keep meeting a data section that fits them. Even inputs open the directory
through the index, odd ones open a.safetensors alone as model.safetensors.
"""
from __future__ import annotations

import json
import shutil
import struct

from common import allowed, instrumented, run, scratch, split_parts

with instrumented():
    from colibri.errors import ModelError
    from colibri.formats.hf_dir import HFCheckpoint
    from colibri.formats.safetensors import SafetensorsFile, scan_nonfinite


def _with_data(raw: bytes) -> bytes:
    """raw plus zeros up to the end offset its header asks for (when it can be read)."""
    if len(raw) < 8:
        return raw
    n = struct.unpack_from("<Q", raw)[0]
    try:
        header = json.loads(raw[8:8 + n])
        ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"]
        need = max(e for e in ends if isinstance(e, int))
    except Exception:
        return raw
    have = len(raw) - 8 - n
    return raw + bytes(max(0, min(need - have, 1 << 20)))


def test_one_input(data: bytes) -> None:
    a, index, b = split_parts(data, 3)
    directory = scratch() / "model"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir()
    (directory / "config.json").write_text('{"model_type": "llama"}')
    sharded = len(data) % 2 == 0
    if sharded:
        (directory / "model.safetensors.index.json").write_bytes(index)
        (directory / "a.safetensors").write_bytes(_with_data(a))
        (directory / "b.safetensors").write_bytes(_with_data(b))
    else:
        (directory / "model.safetensors").write_bytes(_with_data(a))
    checkpoint = None
    with allowed(ModelError):
        checkpoint = HFCheckpoint.open(directory)
    if checkpoint is not None:
        with allowed(ModelError):
            for name in checkpoint.names():
                scan_nonfinite(checkpoint.tensor(name))
        checkpoint.close()
    with allowed(ModelError):
        SafetensorsFile(directory / ("a.safetensors" if sharded else "model.safetensors")).close()


if __name__ == "__main__":
    run(test_one_input)
