"""The bundled demo model (colibri/demo_model, docs/DEMO_MODEL.md) against transformers.

The checkpoint is bf16; transformers runs it with the bf16 weights widened to f32, as Colibri
does, so the foundation's f32 parity tolerance applies: max |Δ| <= 1e-4 × max |logit| over a
prompt, and greedy generation identical token for token.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

import colibri

DEMO = Path(colibri.__file__).resolve().parent / "demo_model"
PROMPTS = ["And it came to pass", "It is a truth universally acknowledged, that",
           "In the beginning God created"]


@pytest.fixture(scope="module")
def reference():
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(DEMO, dtype=torch.float32).eval()
    model.set_experts_implementation("eager")
    return model


@pytest.fixture(scope="module")
def demo():
    with colibri.load(DEMO, threads=2) as m:
        yield m


@pytest.mark.parametrize("prompt", PROMPTS)
def test_logits_match_transformers(demo, reference, prompt):
    ids = demo.tokenizer.encode(prompt)
    with torch.no_grad():
        want = reference(torch.tensor([ids])).logits[0].numpy()
    got = demo.logits(ids)
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_generation_matches_transformers(demo, reference, prompt):
    ids = demo.tokenizer.encode(prompt)
    eos = sorted(demo.tokenizer.eos_ids)
    with torch.no_grad():
        out = reference.generate(torch.tensor([ids]), max_new_tokens=40, do_sample=False, eos_token_id=eos,
                                 pad_token_id=eos[0])
    want = [t for t in out[0, len(ids):].tolist() if t not in eos]
    got = demo.generate(ids, max_tokens=40, temperature=0.0)
    assert got.tokens == want


def test_routes_use_most_experts(demo):
    text = ("And the LORD spake unto Moses, saying, Speak unto the children of Israel, that they bring "
            "me an offering. Emma Woodhouse, handsome, clever, and rich, with a comfortable home and "
            "happy disposition, seemed to unite some of the best blessings of existence. Blessed are "
            "the meek: for they shall inherit the earth. She was the youngest of the two daughters of "
            "a most affectionate, indulgent father.")
    for r in demo.route(demo.tokenizer.encode(text)):
        assert len(np.unique(r.experts)) >= 6, f"layer {r.layer} uses {np.unique(r.experts)}"


def test_cli_run_without_model_uses_the_demo():
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    r = subprocess.run([sys.executable, "-m", "colibri", "run", "-p", "And it came to pass", "-n", "24",
                        "--seed", "7"], capture_output=True, text=True, timeout=300, env=env,
                       cwd=tempfile.gettempdir())
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.split()) >= 5
