"""The C core on its own: build libcolibri with plain CMake (normal and with
ASan+UBSan), then run the C example (no Python involved) and the C test
programs (test_core, test_quant, test_isa, test_topology) in both builds.

LeakSanitizer: enabled (detect_leaks=1) when a probe shows it works here
(it needs ptrace, which some containers forbid); otherwise detect_leaks=0 and
the test says so in its output.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
CC = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")

pytestmark = pytest.mark.skipif(
    shutil.which("cmake") is None or CC is None,
    reason=f"needs cmake and a C compiler (cmake: {shutil.which('cmake')}, cc: {CC})",
)


@pytest.fixture(scope="module")
def builds(c_builds) -> dict[str, tuple[Path, dict]]:
    """Both builds (conftest.c_builds, built once per session): name → (build dir, environment)."""
    return c_builds


def _run(exe: Path, env: dict, timeout: int = 120) -> str:
    done = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=timeout)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "runtime error" not in output, output
    assert "AddressSanitizer" not in output and "LeakSanitizer" not in output, output
    return output


@pytest.mark.parametrize("variant", ["normal", "sanitize"])
def test_c_demo_generates(builds, variant):
    build_dir, env = builds[variant]
    output = _run(build_dir / "colibri_demo", env)
    generated = output.split("generated:")[1].splitlines()[0].split()
    assert len(generated) == 8 and all(0 <= int(t) < 96 for t in generated), output
    assert "cached positions: 13" in output, output


@pytest.mark.parametrize("variant", ["normal", "sanitize"])
@pytest.mark.parametrize("isa", ["scalar", "best"])
def test_c_core_tests_pass(builds, variant, isa):
    """Including bitwise determinism (threads, batching, prefill vs steps),
    with the scalar kernels forced and with the best ones this CPU runs."""
    build_dir, env = builds[variant]
    env = {**env, "COLIBRI_ISA": isa} if isa == "scalar" else {k: v for k, v in env.items() if k != "COLIBRI_ISA"}
    output = _run(build_dir / "test_core", env)
    summary = output.strip().splitlines()[-1]
    passed, failed = int(summary.split()[0]), int(summary.split()[2])
    assert failed == 0 and passed > 100, output


@pytest.mark.parametrize("variant", ["normal", "sanitize"])
def test_c_quant_tests_pass(builds, variant):
    """Block types Q8_0 / Q4_0 / Q4_1: layouts, round-trip bounds, exact integer
    parts, quantized matmul vs a float64 reference (NMSE <= 5e-4)."""
    build_dir, env = builds[variant]
    output = _run(build_dir / "test_quant", env)
    summary = output.strip().splitlines()[-1]
    passed, failed = int(summary.split()[0]), int(summary.split()[2])
    assert failed == 0 and passed > 80, output


@pytest.mark.parametrize("variant", ["normal", "sanitize"])
def test_c_quant_blocks_tests_pass(builds, variant):
    """Q5_0 .. MXFP4 (quant_blocks.h): hand-computed blocks, exact integer parts, vec_dot vs a
    float64 dot of the dequantized rows, quantized matmul NMSE <= 5e-4, round-trip bounds."""
    build_dir, env = builds[variant]
    output = _run(build_dir / "test_quant_blocks", env)
    summary = output.strip().splitlines()[-1]
    passed, failed = int(summary.split()[0]), int(summary.split()[2])
    assert failed == 0 and passed > 30, output


@pytest.mark.parametrize("variant", ["normal", "sanitize"])
def test_c_isa_tests_pass(builds, variant):
    """Every SIMD kernel table this CPU runs is bitwise equal to the scalar
    reference on odd shapes; integer parts exact; quantized NMSE <= 5e-4."""
    build_dir, env = builds[variant]
    output = _run(build_dir / "test_isa", env, timeout=600)   # every type x every table, sanitized: minutes
    summary = output.strip().splitlines()[-1]
    passed, failed = int(summary.split()[0]), int(summary.split()[2])
    assert failed == 0 and passed > 0, output


@pytest.mark.parametrize("variant", ["normal", "sanitize"])
def test_c_topology_tests_pass(builds, variant):
    """CPU topology from fake sysfs trees (two sockets with SMT, AMD numbering, hidden and
    malformed files, affinity masks) and the thread placement plans over them."""
    build_dir, env = builds[variant]
    output = _run(build_dir / "test_topology", env)
    summary = output.strip().splitlines()[-1]
    passed, failed = int(summary.split()[0]), int(summary.split()[2])
    assert failed == 0 and passed > 20, output


def test_c_demo_same_in_both_builds(builds):
    """The demo's output is fixed by its weights: the sanitizer build must match it bit for bit."""
    outputs = [_run(builds[name][0] / "colibri_demo", builds[name][1]) for name in ("normal", "sanitize")]
    assert outputs[0] == outputs[1]


def test_block_quantization_matches_gguf(tmp_path):
    """Q8_0 / Q4_0 / Q4_1 quantize and dequantize agree byte for byte with the
    gguf package's reference (the numpy port of ggml's), on varied rows."""
    gguf = pytest.importorskip("gguf", reason="the gguf package is not installed")
    from gguf import quants
    kernels = ROOT / "csrc" / "kernels"
    lib_path = tmp_path / "libquant.so"
    subprocess.run([CC, "-shared", "-fPIC", "-O2", "-ffp-contract=off", "-I", str(ROOT / "csrc" / "include"),
                    "-o", str(lib_path)] + [str(f) for f in sorted(kernels.glob("quant*.c"))]
                   + [str(kernels / f) for f in ("convert.c", "dot.c")]
                   + ["-lm"], check=True, capture_output=True)
    lib = ctypes.CDLL(str(lib_path))
    rng = np.random.default_rng(0)
    n = 32 * 64
    rows = {  # x: [n] each
        "normal": rng.standard_normal(n), "shifted": rng.random(n) * 5 + 2,
        "tiny": rng.standard_normal(n) * 1e-4, "half-steps": np.round(rng.standard_normal(n) * 4) / 2,
    }
    for name, block_bytes in (("Q8_0", 34), ("Q4_0", 18), ("Q4_1", 20)):
        qtype = getattr(gguf.GGMLQuantizationType, name)
        for kind, x in rows.items():
            x = np.ascontiguousarray(x, dtype=np.float32)
            want = quants.quantize(x.reshape(1, n), qtype).tobytes()
            got = ctypes.create_string_buffer(n // 32 * block_bytes)
            getattr(lib, f"colibri_quantize_row_{name.lower()}")(
                x.ctypes.data_as(ctypes.c_void_p), got, ctypes.c_int64(n))
            assert got.raw == want, f"{name} {kind}: quantized bytes differ from gguf's"
            y = np.zeros(n, np.float32)
            getattr(lib, f"colibri_dequantize_row_{name.lower()}")(
                got, y.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(n))
            want_y = quants.dequantize(np.frombuffer(want, dtype=np.uint8).reshape(1, -1), qtype).ravel()
            assert np.array_equal(y, want_y), f"{name} {kind}: dequantized values differ from gguf's"
