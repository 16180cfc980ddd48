"""A .colibri file whose embedded config.json disagrees with its binary hparams, or whose
hparams were rewritten consistently: one source of truth for every dimension.

The C core runs the model its validated hparams block describes and writes route outputs and
logits by those numbers; Python sizes every buffer it hands over from the same numbers
(colibri_model_hparams) and refuses a config.json that says otherwise. Without that, an
independent fuzzer got heap corruption out of `route`, `generate` and `close` by editing
num_experts_per_tok or num_hidden_layers in the embedded config.json. The same mutants run
once more against the ASan+UBSan build of the library, in a subprocess.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import colibri
from colibri.convert import convert
from colibri.errors import ModelError

import native_edit

ROOT = Path(__file__).resolve().parent.parent
MODEL = "mixtral-a"          # 5 experts, top-2, 2 layers, vocab 97


@pytest.fixture(scope="module")
def good(tiny_model_factory, tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("hostile") / "good.colibri"
    return convert(tiny_model_factory(MODEL).path, path, "f32", progress=False).read_bytes()


# config.json edit -> the hparams field the error must name
DISAGREEMENTS = {
    "fewer experts per token": (dict(num_experts_per_tok=1), "n_expert_used is 2"),
    "more experts per token": (dict(num_experts_per_tok=4), "n_expert_used is 2"),
    "fewer layers": (dict(num_hidden_layers=1), "n_layer is 2"),
    "tied embeddings": (dict(tie_word_embeddings=True), "tied_embeddings is 0"),
    "norm epsilon": (dict(rms_norm_eps=0.5), "norm_eps is"),
}


@pytest.mark.parametrize("case", sorted(DISAGREEMENTS))
def test_config_disagreeing_with_hparams_is_refused(good, tmp_path, case):
    edit, words = DISAGREEMENTS[case]
    path = tmp_path / "bad.colibri"
    path.write_bytes(native_edit.with_config(good, **edit))
    with pytest.raises(ModelError) as error:
        colibri.load(path, threads=1, n_ctx=32)
    message = str(error.value)
    assert words in message and "config.json" in message and str(path) in message, message


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_top_k_rewritten_in_both_places_runs_with_that_k(good, tmp_path, k):
    """n_expert_used changed in config.json and the hparams alike is a different, valid model:
    route gives k experts per token, in range and distinct, and the whole API runs."""
    path = tmp_path / f"k{k}.colibri"
    path.write_bytes(native_edit.with_hparam(native_edit.with_config(good, num_experts_per_tok=k),
                                             "n_expert_used", k))
    ids = [3, 1, 4, 1, 5, 9, 2, 6]
    with colibri.load(path, threads=2, n_ctx=32) as model:
        assert model.config.top_k == k
        for layer in model.route(ids):
            assert layer.experts.shape == (len(ids), k) and layer.gates.shape == (len(ids), k)
            assert all(len(set(row)) == k and 0 <= min(row) and max(row) < 5 for row in layer.experts.tolist())
        assert model.logits(ids).shape == (len(ids), 97)
        assert len(model.generate(ids, max_tokens=3).tokens) <= 3


_SANITIZED_RUN = """
import sys
sys.path.insert(0, {tests!r})
import colibri, native_edit
good = open({good!r}, "rb").read()
cases = {{
    "config top_k 1": native_edit.with_config(good, num_experts_per_tok=1),
    "config 1 layer": native_edit.with_config(good, num_hidden_layers=1),
    "config vocab 50": native_edit.with_config(good, vocab_size=50),
    "both top_k 5": native_edit.with_hparam(native_edit.with_config(good, num_experts_per_tok=5), "n_expert_used", 5),
}}
for name, data in cases.items():
    path = {tmp!r} + "/case.colibri"
    open(path, "wb").write(data)
    try:
        model = colibri.load(path, threads=2, n_ctx=32)
    except colibri.ModelError as e:
        print(name, "refused:", e)
        continue
    model.route([1, 2, 3, 4, 5, 6])
    model.logits([1, 2, 3])
    model.generate([1, 2], max_tokens=3)
    model.close()
    print(name, "ran")
print("done")
"""


def _asan_runtime(library: Path) -> str | None:
    """The sanitizer runtime the library links (to preload into a Python not built with it)."""
    ldd = subprocess.run(["ldd", str(library)], capture_output=True, text=True)
    for line in ldd.stdout.splitlines():
        if "asan" in line and "=>" in line:
            return line.split("=>")[1].split()[0]
    return None


def test_mutants_under_address_sanitizer(c_builds, good, tmp_path):
    """The same mutants through the ASan+UBSan library: refused or run, never a sanitizer report."""
    build_dir, env = c_builds["sanitize"]
    library = build_dir / "libcolibri.so"
    runtime = _asan_runtime(library)
    if runtime is None:
        pytest.skip(f"{library} links no dynamic ASan runtime to preload into Python")
    good_path = tmp_path / "good.colibri"
    good_path.write_bytes(good)
    script = _SANITIZED_RUN.format(tests=str(ROOT / "tests"), good=str(good_path), tmp=str(tmp_path))
    run_env = {**env, "LD_PRELOAD": runtime, "COLIBRI_LIB": str(library), "PYTHONPATH": str(ROOT),
               "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=run_env,
                          timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "done" in done.stdout, output
    assert "AddressSanitizer" not in output and "runtime error" not in output, output
    assert "config top_k 1 refused" in output and "config 1 layer refused" in output, output
    assert "both top_k 5 ran" in output, output


@pytest.mark.parametrize("n_expert", [16_777_216, 2**31 - 1])
def test_huge_expert_count_is_refused_before_allocating(good, tmp_path, n_expert):
    """A header claiming millions of experts: ModelError naming n_expert from both readers (the
    fuzzer's MemoryError), checked against the directory's size before any table is built."""
    from colibri.formats import native

    path = tmp_path / "huge.colibri"
    path.write_bytes(native_edit.with_hparam(good, "n_expert", n_expert))
    for open_file in (native.NativeFileModel, native.NativeFile.open, colibri.load):
        with pytest.raises(ModelError, match=f"n_expert={n_expert}: 2 MoE layers"):
            open_file(path)


def test_batch_times_top_k_beyond_int32_is_refused(good, tmp_path):
    path = tmp_path / "good.colibri"
    path.write_bytes(good)
    with pytest.raises(ModelError, match=r"n_batch=1073741824 x n_expert_used=2 .* exceed 2147483647"):
        colibri.load(path, threads=1, n_ctx=32, n_batch=2**30)
