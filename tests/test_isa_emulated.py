"""The AVX-512 and AVX-VNNI kernel tables (csrc/kernels/x86_avx512/, x86_avx_vnni/) against the
scalar reference on a CPU that has neither: tests/c/test_isa.c (every weight dtype bitwise equal
to the reference on odd shapes, decode and gemm; the activation quantizers; exact mode) with
those two folders compiled for AVX2 and their intrinsics emulated by SIMDe (Debian's
libsimde-dev) plus tests/c/x86_emulated.h, which adds the ones SIMDe 0.7.4 lacks or gets wrong.
The kernels' data layout, lane order, integer arithmetic and float order are what is checked; the
instructions' timing is not. On a CPU with AVX-512 VNNI the normal build's test_isa runs the real
table as well (tests/test_c_core.py).

Needs x86-64 with AVX2 + FMA + F16C, a C compiler and /usr/include/simde; skipped, saying which
is missing, elsewhere, unless COLIBRI_REQUIRE_CROSS=1 (.ci/run sets it once it has installed
libsimde-dev with the cross toolchains), where a missing SIMDe fails.
"""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path

import pytest

from cpu_flags import cpu_flags

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "csrc" / "kernels"
CC = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
SIMDE = Path("/usr/include/simde/x86/avx512.h")


X86_AVX2 = platform.machine() in ("x86_64", "AMD64") and {"avx2", "fma", "f16c"} <= cpu_flags()
REQUIRED = os.environ.get("COLIBRI_REQUIRE_CROSS") == "1"
pytestmark = [
    pytest.mark.skipif(not X86_AVX2 or CC is None,
                       reason=f"needs x86-64 with AVX2, FMA and F16C and a C compiler (cc: {CC})"),
    pytest.mark.skipif(not SIMDE.exists() and not REQUIRED,
                       reason=f"needs SIMDe ({SIMDE} missing): apt-get install libsimde-dev"),
]
FLAGS = ["-std=c99", "-O2", "-ffp-contract=off", "-Wall", "-Wextra", "-I", str(ROOT / "csrc" / "include"),
         "-I", str(KERNELS)]
AVX2 = ["-mavx2", "-mfma", "-mf16c"]


def _compile(src: Path, obj: Path, extra: list[str]) -> Path:
    built = subprocess.run([CC, *FLAGS, *extra, "-c", str(src), "-o", str(obj)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    return obj


def test_avx512_and_avx_vnni_tables_bitwise_equal_to_the_reference(tmp_path):
    assert SIMDE.exists(), f"COLIBRI_REQUIRE_CROSS=1 but {SIMDE} is missing: apt-get install libsimde-dev"
    objects = [_compile(src, tmp_path / f"avx2_{src.stem}.o", [*AVX2, "-Werror"])
               for src in sorted((KERNELS / "x86_avx2").glob("*.c"))]
    # SIMDe's headers warn about the 64-byte vector ABI; the kernels' own code is -Werror in every real build
    emulated = [*AVX2, "-Wno-psabi", "-include", str(ROOT / "tests" / "c" / "x86_emulated.h")]
    for folder in ("x86_avx512", "x86_avx_vnni"):
        objects += [_compile(src, tmp_path / f"{folder}_{src.stem}.o", emulated)
                    for src in sorted((KERNELS / folder).glob("*.c"))]
    sources = sorted(p for p in KERNELS.glob("*.c") if not p.stem.startswith("cpu_"))   # the portable layer
    sources.append(ROOT / "tests" / "c" / "cpu_x86_emulated.c")   # every x86 table reported available
    exe = tmp_path / "test_isa_emulated"
    built = subprocess.run([CC, *FLAGS, "-Werror", "-DCOLIBRI_HAVE_AVX2", "-DCOLIBRI_HAVE_AVX_VNNI",
                            "-DCOLIBRI_HAVE_AVX512", "-o", str(exe), str(ROOT / "tests" / "c" / "test_isa.c"),
                            *map(str, sources), *map(str, objects), "-lm", "-lpthread"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    done = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "ISA tables tested against the scalar reference: 3 (in use: avx512)" in output, output
    for table in ("avx512", "avx_vnni"):
        assert f"\n{table} Q4_0:" in output and f"\n{table} Q6_K:" in output, output
    passed, failed = (int(w) for w in output.strip().splitlines()[-1].split()[0:3:2])
    # every kernel of both tables against the reference: 24599 (24611 before Q8_H, whose one activation
    # type for the 32-element types left 4 quantizer checks per table fewer than Q8_0 and Q8_1 had)
    assert failed == 0 and passed >= 24599, output
