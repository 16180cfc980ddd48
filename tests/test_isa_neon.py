"""The NEON kernels (baseline and with the dot product extension), cross-compiled for AArch64
and run under qemu user-mode emulation on a CPU with the extension and one without:
tests/c/test_isa.c (every weight dtype bitwise equal to the scalar reference on odd shapes,
integer parts exact, quantized NMSE <= 5e-4) with the kernel layer built as an ARM build of
libcolibri builds it.

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


@pytest.fixture(scope="module")
def test_isa_aarch64(tmp_path_factory):
    """tests/c/test_isa.c with the ARM kernel tables, built as an ARM build of libcolibri builds
    them: arm_dotprod/ with the dot product extension, everything else for baseline ARMv8-A."""
    out = tmp_path_factory.mktemp("aarch64")
    flags = [CROSS_CC, "-std=c99", "-O2", "-ffp-contract=off", "-Wall", "-Wextra", "-Werror",
             "-DCOLIBRI_HAVE_NEON", "-DCOLIBRI_HAVE_NEON_DOTPROD", "-I", str(ROOT / "csrc" / "include"),
             "-I", str(KERNELS)]
    objects = []
    for src in sorted((KERNELS / "arm_dotprod").glob("*.c")):
        obj = out / (src.stem + "_dotprod.o")
        built = subprocess.run([*flags, "-march=armv8.2-a+dotprod", "-c", str(src), "-o", str(obj)],
                               capture_output=True, text=True)
        assert built.returncode == 0, built.stderr
        objects.append(obj)
    sources = [f for f in sorted(KERNELS.glob("*.c")) if f.name != "cpu_x86.c"]   # the portable layer + cpu_arm.c
    sources += sorted((KERNELS / "arm_neon").glob("*.c"))
    exe = out / "test_isa_aarch64"
    built = subprocess.run([*flags, "-static", "-o", str(exe), str(ROOT / "tests" / "c" / "test_isa.c"),
                            *map(str, sources), *map(str, objects), "-lm", "-lpthread"], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    return exe


# qemu's "max" CPU has the dot product extension, a Cortex-A53 (ARMv8.0) has not: each runs every
# table it can, and the best one is in use.
@pytest.mark.parametrize("cpu, tables, in_use", [("max", 2, "neon_dotprod"), ("cortex-a53", 1, "neon")])
def test_neon_kernels_under_qemu(test_isa_aarch64, cpu, tables, in_use):
    done = subprocess.run([QEMU, "-cpu", cpu, str(test_isa_aarch64)], capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert f"ISA tables tested against the scalar reference: {tables} (in use: {in_use})" in output, output
    passed, failed = (int(w) for w in output.strip().splitlines()[-1].split()[0:3:2])
    assert failed == 0 and passed > 1000 * tables, output
