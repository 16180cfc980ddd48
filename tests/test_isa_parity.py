"""The whole engine under each SIMD kernel set this CPU runs, forced with
COLIBRI_ISA in a fresh process (the choice is made once per process):

  - colibri_isa() reports the forced set;
  - f32 logits vs transformers: max |Δ| <= 1e-4 × max |logit| (as tests/test_parity.py);
  - F32, BF16, Q8_0, Q4_0 and Q4_1 weights, and a file holding every other block type
    (Q5_0 ... MXFP4, one per matrix round robin): logits bitwise equal to the scalar
    kernels' (every kernel set keeps the reference's arithmetic);
  - an ISA this CPU cannot run (or an unknown name) is reported on stderr
    and the best one is used.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import token_ids
from cpu_flags import cpu_flags
from gguf_export import export_gguf
from test_quant_oracle import NEW_TYPES

MODEL = "mixtral-c"   # hidden 64: every matrix's cols is a multiple of 32, so GGUF blocks apply
WIDE_MODEL = "qwen3_moe-wide"   # every matrix whole 256-element blocks: the K types apply
EVERY = "every-block-type"
WIDE_VOCAB = 128   # the wide model's vocabulary: the ids every file is run on stay below it
SEQ_LEN = 24

# What a CPU whose best set is the key can also run (each set implies the ones after it; an
# AVX-512 CPU may or may not have AVX-VNNI; amx is AVX-512 with AMX tiles).
_AVX512 = ["avx512", *(["avx_vnni"] if "avx_vnni" in cpu_flags() else []), "avx2", "scalar"]
RUNNABLE = {"amx": ["amx", *_AVX512], "avx512": _AVX512,
            "avx_vnni": ["avx_vnni", "avx2", "scalar"], "avx2": ["avx2", "scalar"],
            "neon_dotprod": ["neon_dotprod", "neon", "scalar"], "neon": ["neon", "scalar"], "scalar": ["scalar"]}

_CHILD = """
import json, sys
import numpy as np
import colibri
from colibri import _native
ids, out = json.loads(sys.argv[1]), sys.argv[2]
logits = {}
for name, path in json.loads(sys.argv[3]).items():
    with colibri.load(path, threads=2) as m:
        logits[name] = m.logits(ids)
        print("dtypes=" + name + ":" + ",".join(sorted({ref.dtype for _, ref in m.weights})))
np.savez(out, **logits)
print("isa=" + _native.lib().colibri_isa().decode())
"""


def _run_child(isa: str | None, ids: list[int], models: dict[str, str], out: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "COLIBRI_ISA"}
    if isa is not None:
        env["COLIBRI_ISA"] = isa
    done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(ids), str(out), json.dumps(models)],
                          capture_output=True, text=True, env=env, timeout=300,
                          cwd=tempfile.gettempdir())   # outside the source tree: the installed package
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _reported_isa(done: subprocess.CompletedProcess) -> str:
    return [line for line in done.stdout.splitlines() if line.startswith("isa=")][-1][4:]


@pytest.fixture(scope="module")
def models(tiny_model_factory, tmp_path_factory) -> tuple[object, dict[str, str]]:
    tiny = tiny_model_factory(MODEL)
    root = tmp_path_factory.mktemp("isa_models")
    files = {"F32": str(tiny.path), "BF16": str(tiny.path_bf16)}
    for qtype in ("q8_0", "q4_0", "q4_1"):
        path = root / f"{MODEL}-{qtype}.gguf"
        export_gguf(tiny.reference, tiny.path, path, qtype)
        files[qtype.upper()] = str(path)
    from test_big_endian import _every_type_gguf

    files[EVERY] = str(_every_type_gguf(tiny_model_factory(WIDE_MODEL), root / f"{WIDE_MODEL}-every.gguf"))
    return tiny, files


def test_every_isa_matches_transformers_and_scalar(models, tmp_path):
    tiny, files = models
    ids = token_ids(min(tiny.reference.config.vocab_size, WIDE_VOCAB), SEQ_LEN, seed=3)
    with torch.no_grad():
        expected = tiny.reference(torch.tensor([ids])).logits[0].float().numpy()
    best = _reported_isa(_run_child(None, ids, files, tmp_path / "best.npz"))
    assert best in RUNNABLE, best
    results = {}
    for isa in RUNNABLE[best]:
        done = _run_child(isa, ids, files, tmp_path / f"{isa}.npz")
        assert _reported_isa(done) == isa, done.stdout + done.stderr
        assert "not available" not in done.stderr, done.stderr
        results[isa] = np.load(tmp_path / f"{isa}.npz")
        for name in files:   # each file really holds its weight type(s)
            want = set(NEW_TYPES) if name == EVERY else {name}
            assert any(line.startswith(f"dtypes={name}:") and want <= set(line.split(":")[1].split(","))
                       for line in done.stdout.splitlines()), done.stdout
        err = np.abs(results[isa]["F32"] - expected).max()
        assert err <= 1e-4 * np.abs(expected).max(), f"{isa}: max |Δ| {err} vs max |logit| {np.abs(expected).max()}"
    print(f"kernel sets run here: {RUNNABLE[best]}")
    for isa in RUNNABLE[best]:
        for name in files:
            assert np.array_equal(results[isa][name], results["scalar"][name]), f"{isa} {name} logits differ from scalar"


def test_unavailable_isa_falls_back_to_best(models, tmp_path):
    tiny, files = models
    ids = token_ids(tiny.reference.config.vocab_size, 4, seed=4)
    best = _reported_isa(_run_child(None, ids, {"F32": files["F32"]}, tmp_path / "best.npz"))
    for wanted in ["no-such-isa"] + [isa for isa in RUNNABLE if isa not in RUNNABLE[best]]:
        done = _run_child(wanted, ids, {"F32": files["F32"]}, tmp_path / "forced.npz")
        assert _reported_isa(done) == best, done.stdout
        assert f"COLIBRI_ISA={wanted} is not available" in done.stderr and f"using {best}" in done.stderr, done.stderr
