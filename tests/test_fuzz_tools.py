"""The fuzzing tools themselves: the structure-aware GGUF mutator keeps files parseable, and a
mutated file still reaches colibri's reader past the header most of the time."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from colibri.errors import ModelError
from colibri.formats.gguf import GGUFFile

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fuzz" / "python"))
import gguf_mutator  # noqa: E402


@pytest.fixture(scope="module")
def gguf_bytes(tmp_path_factory) -> bytes:
    from gguf import GGUFValueType, GGUFWriter

    path = tmp_path_factory.mktemp("mutator") / "m.gguf"
    writer = GGUFWriter(str(path), "llama")
    writer.add_block_count(2)
    writer.add_key_value("tokenizer.ggml.model", "gpt2", GGUFValueType.STRING)
    writer.add_array("tokenizer.ggml.tokens", ["a", "b", "ab"])
    writer.add_tensor("token_embd.weight", np.arange(3 * 32, dtype=np.float32).reshape(3, 32))
    writer.add_tensor("output_norm.weight", np.ones(32, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path.read_bytes()


def test_parse_and_serialize_round_trip(gguf_bytes):
    parsed = gguf_mutator.parse(gguf_bytes)
    assert parsed is not None and len(parsed["tensors"]) == 2
    assert gguf_mutator.serialize(parsed) == gguf_bytes


def test_mutations_keep_the_header_parseable(gguf_bytes, tmp_path):
    """Structural mutations change the file but keep it a GGUF colibri reads past the header
    (or refuses with ModelError) far more often than byte flips would."""
    def never(data, max_size):
        raise AssertionError("structured mutation expected")

    changed = parsed_again = 0
    for seed in range(300):
        try:
            out = gguf_mutator.mutate(gguf_bytes, 1 << 20, seed, never)
        except AssertionError:
            continue   # the quarter of seeds that asks for byte mutations
        changed += out != gguf_bytes
        parsed_again += gguf_mutator.parse(out) is not None
        path = tmp_path / "mutant.gguf"
        path.write_bytes(out)
        try:
            GGUFFile(path).close()
        except ModelError:
            pass
    assert changed >= 150 and parsed_again >= 0.6 * changed, (changed, parsed_again)
