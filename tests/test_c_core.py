"""The C core on its own: build libcolibri with plain CMake (normal and with
ASan+UBSan), then run the C example (no Python involved) and the C test
program in both builds.

LeakSanitizer: enabled (detect_leaks=1) when a probe shows it works here
(it needs ptrace, which some containers forbid); otherwise detect_leaks=0 and
the test says so in its output.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CC = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")

pytestmark = pytest.mark.skipif(
    shutil.which("cmake") is None or CC is None,
    reason=f"needs cmake and a C compiler (cmake: {shutil.which('cmake')}, cc: {CC})",
)


def _build(build_dir: Path, sanitize: bool) -> Path:
    subprocess.run(
        ["cmake", "-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
         f"-DCOLIBRI_SANITIZE={'ON' if sanitize else 'OFF'}"],
        check=True, capture_output=True, text=True,
    )
    done = subprocess.run(["cmake", "--build", str(build_dir), "-j2"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return build_dir


def _leak_detection_works(tmp: Path) -> bool:
    """Whether LeakSanitizer can run here: a leaking probe must be reported."""
    probe = tmp / "leak.c"
    probe.write_text("#include <stdlib.h>\nint main(void){void*p=malloc(7);p=0;return p!=0;}\n")
    exe = tmp / "leak"
    built = subprocess.run([CC, "-fsanitize=address", "-o", str(exe), str(probe)], capture_output=True)
    if built.returncode != 0:
        return False
    ran = subprocess.run([str(exe)], capture_output=True, text=True,
                         env={**os.environ, "ASAN_OPTIONS": "detect_leaks=1"})
    return "LeakSanitizer: detected memory leaks" in ran.stderr


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    """Both builds, once per module: name → (build dir, environment to run in)."""
    result = {}
    for name in ("normal", "sanitize"):
        tmp = tmp_path_factory.mktemp(f"build-{name}")
        env = dict(os.environ)
        if name == "sanitize":
            leaks = _leak_detection_works(tmp)
            print(f"LeakSanitizer {'works' if leaks else 'does not work here: detect_leaks=0'}")
            env["ASAN_OPTIONS"] = f"detect_leaks={int(leaks)}:abort_on_error=1"
            env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
        result[name] = (_build(tmp, name == "sanitize"), env)
    return result


def _run(exe: Path, env: dict) -> str:
    done = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=120)
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
def test_c_core_tests_pass(builds, variant):
    build_dir, env = builds[variant]
    output = _run(build_dir / "test_core", env)
    summary = output.strip().splitlines()[-1]
    passed, failed = int(summary.split()[0]), int(summary.split()[2])
    assert failed == 0 and passed > 100, output


def test_c_demo_same_in_both_builds(builds):
    """The demo's output is fixed by its weights: the sanitizer build must match it bit for bit."""
    outputs = [_run(builds[name][0] / "colibri_demo", builds[name][1]) for name in ("normal", "sanitize")]
    assert outputs[0] == outputs[1]
