"""Colibri against llama.cpp (llama-cpp-python) on the same real GGUF file, SmolLM2-135M-Instruct Q4_1.

Both engines quantize activations per block of 32 and differ in how (llama.cpp: Q8_1 for Q4_1
weights, one f16 scale per block; Colibri: Q8_H, an f32 unit and an integer multiplier per half),
in accumulation order and in attention precision (llama.cpp keeps an F16 KV cache), so logits
are compared with a stated tolerance: max |Δ| <= 0.1 × max |logit| over each prompt (measured
<= 0.052 when Colibri rounded as ggml does, <= 0.087 with Q8_H). Greedy continuations of 64 steps must agree token for token except where the two
engines' picks are a near-tie in Colibri's own logits (margin <= 0.02 × max |logit|): from
such a step on, the texts may legitimately part.

How far greedy texts agree is measured against llama.cpp's agreement with itself: its
flash-attention path (the llama.cpp CLI's default on CPUs) against its default path in
llama-cpp-python, same file, same threads. The two llama.cpp paths differ by a mean 0.11-0.23
logits and part before 64 steps on most prompts, at the same near-ties where Colibri parts
(measured on these 14 prompts: llama.cpp's two paths agree over 288 steps in total, Colibri and
llama.cpp over 304). The test asks Colibri to agree with llama.cpp over at least 0.8× as many
steps as llama.cpp agrees with itself.
llama.cpp runs in a child process (its threads and ours never share a process).

The size of that disagreement is the activations' quantization noise itself, not an error of
either engine: against a third reference, transformers on the same file's dequantized weights
(f32 activations, nothing quantized at run time), Colibri's mean |Δ| over the prompts is at most
0.9 × llama.cpp's (measured 0.145 against 0.187; 0.185 when Colibri rounded as ggml does), and
the two engines differ from each other by as much. One prompt's |Δ| is one draw of that noise:
each is at most 1.75 × llama.cpp's (measured 1.63 on "In 1969, ...", where llama.cpp's draw is
its smallest; 1.46 there when Colibri rounded as ggml does). A one-ulp difference in one
activation flips its rounding to the 8-bit grid (the x86 llama.cpp quantizer multiplies by
127/amax and rounds half to even, ggml's reference and Colibri multiply by 1/d and round half
away), that flip moves later activations by whole grid steps, and after a few layers the two
engines carry independent quantization noise; token-for-token agreement past the first
near-tie would take ggml's arithmetic bit for bit, its accumulation orders included.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import colibri

from smollm2 import smollm2_path

pytest.importorskip("llama_cpp", reason="llama-cpp-python (the llama.cpp reference) is not installed; "
                    ".ci/run installs it")

NEAR_TIE = 0.02
SELF_AGREEMENT = 0.8


def _chat(question: str) -> str:
    return f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"


PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):\n    ",
    _chat("What is the capital of France?"),
    "<|im_start|>system\nAnswer in one short English sentence.<|im_end|>\n" + _chat("What is the capital of France?"),
    _chat("Name three primary colors."),
    _chat("Write a haiku about the ocean."),
    _chat("Give me a tip for learning Python."),
    "The three laws of thermodynamics are",
    "import numpy as np\n\n# Compute the mean of a list\n",
    "In 1969, the first human to walk on the Moon was",
    "The best way to make a cup of tea is",
    _chat("Explain photosynthesis in two sentences."),
    _chat("Why is the sky blue?"),
]
STEPS = 64
LOGIT_TOLERANCE = 0.1

_CHILD = r"""
import json, sys
import numpy as np
import llama_cpp
path, prompts_file, out_file, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
prompts = json.load(open(prompts_file))
result = []
for flash_attn in (False, True):   # llama-cpp-python's default path, then the llama.cpp CLI's
    llm = llama_cpp.Llama(model_path=path, n_ctx=512, n_threads=2, logits_all=True, verbose=False,
                          flash_attn=flash_attn)
    for i, ids in enumerate(prompts):
        llm.reset()
        llm.eval(ids)
        greedy = []
        for _ in range(steps):
            token = int(np.argmax(llm.scores[llm.n_tokens - 1]))
            greedy.append(token)
            if token == llm.token_eos():
                break
            llm.eval([token])
        if not flash_attn:
            logits = np.array(llm.scores[:len(ids)], dtype=np.float32)
            result.append({"logits": logits.tolist(), "greedy": greedy})
        else:
            result[i]["greedy_flash_attn"] = greedy
    del llm
json.dump(result, open(out_file, "w"))
"""


@pytest.fixture(scope="module")
def both():
    path = smollm2_path()
    with colibri.load(path, threads=2, n_ctx=512) as m:
        prompt_ids = [m.tokenizer.encode(p, add_special_tokens=False) for p in PROMPTS]
        with tempfile.TemporaryDirectory() as tmp:
            prompts_file, out_file = Path(tmp) / "prompts.json", Path(tmp) / "out.json"
            prompts_file.write_text(json.dumps(prompt_ids))
            done = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(prompts_file), str(out_file),
                                   str(STEPS)], capture_output=True, text=True, timeout=900, cwd=tmp)
            assert done.returncode == 0, done.stderr[-3000:]
            reference = json.loads(out_file.read_text())
        ours = []
        for ids in prompt_ids:
            logits = m.logits(ids)
            out = m.generate(ids, max_tokens=STEPS, temperature=0.0)
            ours.append({"logits": logits, "greedy": out.tokens, "finish": out.finish_reason})
        yield prompt_ids, ours, reference, m.tokenizer


@pytest.mark.parametrize("i", range(len(PROMPTS)))
def test_prompt_logits_within_tolerance(both, i):
    _, ours, reference, _ = both
    want = np.array(reference[i]["logits"], dtype=np.float32)
    got = ours[i]["logits"]
    assert got.shape == want.shape
    err = np.abs(got - want).max()
    assert err <= LOGIT_TOLERANCE * np.abs(want).max(), f"max |Δ| {err:.3f}, max |logit| {np.abs(want).max():.2f}"
    # where the top tokens differ, they are a near-tie in Colibri's logits
    for pos in np.flatnonzero(got.argmax(-1) != want.argmax(-1)):
        margin = got[pos].max() - got[pos, want[pos].argmax()]
        assert margin <= NEAR_TIE * np.abs(got[pos]).max(), f"position {pos}: margin {margin:.3f}"


def test_as_close_to_the_dequantized_model_as_llama_cpp(both):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    pytest.importorskip("accelerate", reason="transformers' GGUF loader needs accelerate")
    path = smollm2_path()
    exact = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                              dtype=torch.float32).eval()
    prompt_ids, ours, reference, _ = both
    ours_err, theirs_err = [], []
    for i, ids in enumerate(prompt_ids):
        with torch.no_grad():
            want = exact(torch.tensor([ids])).logits[0].float().numpy()
        ours_err.append(np.abs(ours[i]["logits"] - want).mean())
        theirs_err.append(np.abs(np.array(reference[i]["logits"], dtype=np.float32) - want).mean())
    ratios = np.array(ours_err) / np.array(theirs_err)
    assert np.mean(ours_err) <= 0.9 * np.mean(theirs_err) and ratios.max() <= 1.75, (
        f"mean |Δ| from the dequantized model: colibri {np.round(ours_err, 3)}, llama.cpp {np.round(theirs_err, 3)}")


def _agreed_steps(a: list[int], b: list[int], eos_ids) -> int:
    """How many leading tokens two greedy texts share (EOS dropped)."""
    a, b = [t for t in a if t not in eos_ids], [t for t in b if t not in eos_ids]
    return next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def test_greedy_agrees_with_llama_cpp_as_often_as_llama_cpp_with_itself(both):
    _, ours, reference, tok = both
    colibri_llama = [_agreed_steps(o["greedy"], r["greedy"], tok.eos_ids) for o, r in zip(ours, reference)]
    llama_llama = [_agreed_steps(r["greedy_flash_attn"], r["greedy"], tok.eos_ids) for r in reference]
    assert sum(colibri_llama) >= SELF_AGREEMENT * sum(llama_llama), (
        f"steps agreed per prompt: colibri~llama.cpp {colibri_llama}, "
        f"llama.cpp flash-attention~default {llama_llama}")


@pytest.mark.parametrize("i", range(len(PROMPTS)))
def test_greedy_agrees_until_a_near_tie(both, i):
    prompt_ids, ours, reference, tok = both
    want = [t for t in reference[i]["greedy"] if t not in tok.eos_ids]
    got = ours[i]["greedy"]
    step = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), None)
    n = min(len(got), len(want))
    if step is None and (len(got) == len(want) or n == STEPS):
        return
    step = n if step is None else step   # one text ended (EOS) where the other goes on
    with colibri.load(smollm2_path(), threads=2, n_ctx=512) as m:
        logits = m.logits(prompt_ids[i] + got[:step])[-1]
    eos = max(tok.eos_ids, key=lambda t: logits[t])   # the EOS that Colibri scores highest
    pick = lambda text: text[step] if step < len(text) else eos
    margin = float(logits[pick(got)] - logits[pick(want)])
    assert 0 <= margin <= NEAR_TIE * float(np.abs(logits).max()), (
        f"step {step}: margin {margin:.3f}\ncolibri:   {tok.decode(got)!r}\nllama.cpp: {tok.decode(want)!r}")
