"""The later families' GGUF files as llama.cpp itself reads them: the tiny checkpoints written as
llama.cpp's converter writes them (tests/gguf_export.py, f32), run by llama.cpp (llama-cpp-python, in
a child process) and by Colibri, both against transformers. This checks the exporter's layout —
names, metadata, stacking, the Granite q/k permutation — with the program that defines it, so the
GGUF parity tests (test_gguf_model.py) read files llama.cpp would read.

Tolerances: Colibri max |Δ| <= 1e-4 × max |logit|, as everywhere; llama.cpp max |Δ| <= 2e-3 ×
max |logit| (its f16 KV cache and its own kernels; measured 1.2e-4 to 5.8e-4) with the same argmax at
>= 95% of positions. Models are the ones whose shapes llama.cpp's loaders accept: its dots1 wants as
many KV heads as query heads, its minimax-m2 an untied output, its ERNIE a shared expert of
intermediate_size / n_kv_heads and MoE layers up to the last. glm4_moe-b is left out: it rotates 6
of its 8 head dims, where llama.cpp's RoPE parts from transformers' after position 0 (measured
0.16 × max |logit|; the same model rotating 4 or 8 dims agrees to 4e-4), and Colibri follows
transformers (test_parity.py).
"""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

import colibri

from conftest import token_ids
from gguf_export import export_gguf

pytest.importorskip("llama_cpp", reason="llama-cpp-python (the llama.cpp reference) is not installed; "
                    ".ci/run installs it")

MODELS = ["glm4_moe-a", "granitemoe-a", "granitemoeshared-a", "ernie4_5_moe-a", "dots1-a",
          "minimax_m2-a"]

_LLAMA_CPP = r"""
import json, sys
import numpy as np
import llama_cpp
path, ids, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
llm = llama_cpp.Llama(model_path=path, n_ctx=64, n_batch=64, logits_all=True, verbose=False, n_threads=2)
llm.eval(ids)
np.save(out, np.array(llm.scores[:len(ids)], dtype=np.float32))
"""


@pytest.mark.parametrize("name", MODELS)
def test_llama_cpp_runs_the_gguf_as_transformers(name, tiny_model_factory, tmp_path):
    tiny = tiny_model_factory(name)
    path = tmp_path / f"{name}.gguf"
    export_gguf(tiny.reference, tiny.path, path, "f32", bare_vocab=True)
    ids = token_ids(tiny.reference.config.vocab_size, 24, seed=22)
    with torch.no_grad():
        expected = tiny.reference(torch.tensor([ids])).logits[0].float().numpy()
    scale = np.abs(expected).max()
    with colibri.load(path, threads=2) as m:
        assert m.config.architecture == tiny.model_type
        assert np.abs(m.logits(ids) - expected).max() <= 1e-4 * scale
    out = tmp_path / "llama_cpp.npy"
    done = subprocess.run([sys.executable, "-c", _LLAMA_CPP, str(path), json.dumps(ids), str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    reference = np.load(out)
    assert np.abs(reference - expected).max() <= 2e-3 * scale
    assert (reference.argmax(-1) == expected.argmax(-1)).mean() >= 0.95
