"""The NEON kernels, cross-compiled for AArch64 and run under qemu user-mode
emulation: tests/c/test_isa.c (every weight dtype bitwise equal to the scalar
reference on odd shapes, integer parts exact, quantized NMSE <= 5e-4) with the
kernel layer built as an ARM build of libcolibri builds it.

Needs gcc-aarch64-linux-gnu and qemu-user (Debian packages); skipped, saying
which is missing, where they are not installed.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "csrc" / "kernels"
CROSS_CC = shutil.which("aarch64-linux-gnu-gcc")
QEMU = shutil.which("qemu-aarch64") or shutil.which("qemu-aarch64-static")

pytestmark = pytest.mark.skipif(
    CROSS_CC is None or QEMU is None,
    reason=f"needs an AArch64 cross compiler and qemu (aarch64-linux-gnu-gcc: {CROSS_CC}, qemu-aarch64: {QEMU}); "
           "apt-get install gcc-aarch64-linux-gnu qemu-user",
)


def test_neon_kernels_under_qemu(tmp_path):
    sources = [KERNELS / f for f in ("convert.c", "dot.c", "ops.c", "quant.c", "quant_dot.c", "dispatch.c", "cpu_arm.c")]
    sources += sorted((KERNELS / "arm_neon").glob("*.c"))
    exe = tmp_path / "test_isa_aarch64"
    built = subprocess.run(
        [CROSS_CC, "-std=c99", "-O2", "-ffp-contract=off", "-Wall", "-Wextra", "-Werror", "-static",
         "-DCOLIBRI_HAVE_NEON", "-I", str(ROOT / "csrc" / "include"), "-I", str(KERNELS), "-o", str(exe),
         str(ROOT / "tests" / "c" / "test_isa.c"), *map(str, sources), "-lm", "-lpthread"],
        capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    done = subprocess.run([QEMU, str(exe)], capture_output=True, text=True, timeout=120)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "ISA tables tested against the scalar reference: 1 (in use: neon)" in output, output
    passed, failed = (int(w) for w in output.strip().splitlines()[-1].split()[0:3:2])
    assert failed == 0 and passed > 1000, output
