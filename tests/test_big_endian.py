"""Colibri-native files on a big-endian host: libcolibri (portable kernels) and
tests/c/native_logits.c cross-compiled for s390x and run under qemu user-mode emulation
on files written here (little-endian, by `colibri convert`).

  logits   every weight dtype (F32, F16, BF16, Q8_0, Q4_0, Q4_1; norms and routers F32,
           rows that are not whole blocks F16): the s390x loader's byte-swapped
           copy-on-write mapping gives BITWISE the logits of this host's libcolibri with
           COLIBRI_ISA=scalar, and leaves the file on disk untouched
  errors   a truncated and a corrupt file: the same one-line error on s390x as here

The s390x build gets -fexcess-precision=fast, as CMakeLists.txt gives every compiler that
takes it: with -std=c99, GCC for s390x evaluates float arithmetic in double
(FLT_EVAL_METHOD 1), which moves logits by a few ulp (max abs diff ~5e-7 on these models);
with it, float arithmetic is plain binary32 as on x86-64 and AArch64.

Needs gcc-s390x-linux-gnu and qemu-user (Debian packages); skipped, saying which is
missing, where they are not installed.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from colibri import _native
from colibri.convert import convert
from colibri.formats import native

from conftest import token_ids

ROOT = Path(__file__).resolve().parent.parent
CROSS_CC = shutil.which("s390x-linux-gnu-gcc")
QEMU = shutil.which("qemu-s390x") or shutil.which("qemu-s390x-static")
HOST_CC = shutil.which("cc") or shutil.which("gcc")
CORE = ("error", "model", "context", "threadpool", "topology", "cpu_quota", "matmul", "attention", "attention_latent", "moe",
        "router", "forward", "profile", "native_file", "json_check", "quantize", "expert_layout", "expert_io",
        "expert_cache")
KERNELS = tuple(sorted(p.stem for p in (ROOT / "csrc" / "kernels").glob("*.c") if not p.stem.startswith("cpu_")))   # portable: no ISA folder
PROGRAM = ROOT / "tests" / "c" / "native_logits.c"
FLAGS = ["-std=c99", "-O2", "-ffp-contract=off", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "csrc" / "include")]
# (tiny model, colibri convert dtype): mixtral-c's rows of 64 take every block type (its expert
# down rows of 33 stay F16); qwen2_moe-a adds attention biases, a shared expert and a dense layer;
# deepseek_v3-a latent attention and sigmoid routing with a selection bias.
FILES = [("mixtral-c", d) for d in ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1")] + [("qwen2_moe-a", "bf16"),
                                                                                   ("deepseek_v3-a", "bf16")]
# and a GGUF holding every other block type (one per matrix, round robin), kept as stored
EVERY_TYPE = "every-block-type"
FILES += [("qwen3_moe-wide", EVERY_TYPE)]
N_TOKENS = 12

MISSING = (f"needs an s390x cross compiler, qemu and a host C compiler (s390x-linux-gnu-gcc: {CROSS_CC}, "
           f"qemu-s390x: {QEMU}, cc: {HOST_CC}); apt-get install gcc-s390x-linux-gnu qemu-user"
           ) if CROSS_CC is None or QEMU is None or HOST_CC is None else None
REQUIRED = os.environ.get("COLIBRI_REQUIRE_CROSS") == "1"   # .ci/run, once it has installed them: no skip
pytestmark = pytest.mark.skipif(MISSING is not None and not REQUIRED, reason=str(MISSING))


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> tuple[list[str], list[str]]:
    """(s390x command, host command): native_logits, statically linked with libcolibri's sources
    for s390x, and linked with this host's libcolibri (the library the Python package loads)."""
    assert MISSING is None, f"COLIBRI_REQUIRE_CROSS=1 but {MISSING}"
    out = tmp_path_factory.mktemp("big_endian")
    be, host = out / "native_logits_s390x", out / "native_logits_host"
    sources = [ROOT / "csrc" / "core" / f"{n}.c" for n in CORE]
    sources += [ROOT / "csrc" / "kernels" / f"{n}.c" for n in KERNELS]
    built = subprocess.run([CROSS_CC, *FLAGS, "-fexcess-precision=fast", "-static", "-o", str(be), str(PROGRAM),
                            *map(str, sources), "-lm", "-lpthread"], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    lib = _native._library_path().resolve()
    built = subprocess.run([HOST_CC, *FLAGS, "-o", str(host), str(PROGRAM), str(lib), f"-Wl,-rpath,{lib.parent}"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    return [QEMU, str(be)], [str(host)]


def _every_type_gguf(tiny, path: Path) -> Path:
    from test_gguf_blocks import _write
    from test_quant_oracle import NEW_TYPES

    names = []

    def recipe(name, array):
        if array.ndim < 2 or "ffn_gate_inp" in name:
            return "F32"
        names.append(name)
        return NEW_TYPES[(len(names) - 1) % len(NEW_TYPES)]

    _write(tiny, path, recipe)
    return path


@pytest.fixture(scope="module")
def files(tiny_model_factory, tmp_path_factory) -> dict[tuple[str, str], Path]:
    root = tmp_path_factory.mktemp("big_endian_files")
    out = {}
    for name, dtype in FILES:
        src, how = tiny_model_factory(name).path, dtype
        if dtype == EVERY_TYPE:
            src, how = _every_type_gguf(tiny_model_factory(name), root / f"{name}.gguf"), "keep"
        out[name, dtype] = convert(src, root / f"{name}-{dtype}.colibri", how, progress=False)
    return out


def _run(command: list[str], path: Path, ids: list[int]) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLIBRI_ISA": "scalar"}
    return subprocess.run([*command, str(path), *map(str, ids)], capture_output=True, text=True, env=env,
                          timeout=300)


def _logits(done: subprocess.CompletedProcess) -> np.ndarray:
    """native_logits' output -> [n_tokens, n_vocab] float32 (after checking the ISA line)."""
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "isa scalar", lines[0]
    return np.array([[int(w, 16) for w in line.split()] for line in lines[1:]], dtype=np.uint32).view(np.float32)


@pytest.mark.parametrize("name,dtype", FILES)
def test_logits_on_s390x_equal_host(programs, files, name, dtype):
    path = files[name, dtype]
    file = native.NativeFile.open(path)
    stored, n_vocab = {e.dtype_name for e in file.entries}, file.hparams["n_vocab"]
    file.close()
    if dtype == EVERY_TYPE:
        from test_quant_oracle import NEW_TYPES
        assert set(NEW_TYPES) <= stored, stored
    else:
        assert dtype.upper() in stored, stored   # the file really holds the dtype under test
    ids = token_ids(n_vocab, N_TOKENS, seed=7)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    be, host = programs
    got, want = _logits(_run(be, path, ids)), _logits(_run(host, path, ids))
    assert got.shape == want.shape == (N_TOKENS, want.shape[1])
    assert np.isfinite(want).all()
    differ = got.view(np.uint32) != want.view(np.uint32)
    assert not differ.any(), (
        f"{name} {dtype} ({sorted(stored)}): {int(differ.sum())} of {differ.size} s390x logits differ from the "
        f"host's, max abs diff {np.abs(got.astype(np.float64) - want).max():.3g}")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before   # copy-on-write: the file is unchanged


def _truncated(path: Path, out: Path) -> Path:
    out.write_bytes(path.read_bytes()[:-10])
    return out


def _unknown_dtype(path: Path, out: Path) -> Path:
    data = bytearray(path.read_bytes())
    directory = struct.unpack_from("<Q", data, 24)[0]
    struct.pack_into("<i", data, directory + 12, 99)   # entry 0's dtype
    out.write_bytes(bytes(data))
    return out


@pytest.mark.parametrize("corrupt,expect", [(_truncated, "run past the end of the file"),
                                            (_unknown_dtype, "unknown dtype 99")])
def test_bad_file_on_s390x_same_error(programs, files, tmp_path, corrupt, expect):
    path = corrupt(files["mixtral-c", "q4_1"], tmp_path / "bad.colibri")
    be, host = programs
    got, want = _run(be, path, [1, 2]), _run(host, path, [1, 2])
    assert (got.returncode, got.stdout) == (want.returncode, want.stdout) == (1, "")
    assert got.stderr == want.stderr, (got.stderr, want.stderr)
    assert got.stderr.count("\n") == 1 and str(path) in got.stderr and expect in got.stderr, got.stderr
