"""The NEON kernels (baseline and with the dot product extension), cross-compiled for AArch64
and run under qemu user-mode emulation on a CPU with the extension and one without:
tests/c/test_isa.c (every weight dtype bitwise equal to the scalar reference on odd shapes,
decode and gemm, integer parts exact, quantized NMSE <= 5e-4; the types of quant_blocks.h also
on random and edge-case blocks; exact mode's dequantize and fused dot of every block type) with
the kernel layer built as an ARM build of libcolibri builds it. Every weight dtype must have the ARM tables' own kernels (none left to the scalar
table's).

Needs gcc-aarch64-linux-gnu and qemu-user (Debian packages); skipped, saying which is missing,
where they are not installed, unless COLIBRI_REQUIRE_CROSS=1 (.ci/run sets it once it has
installed them), where their absence fails.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "csrc" / "kernels"
CROSS_CC = shutil.which("aarch64-linux-gnu-gcc")
QEMU = shutil.which("qemu-aarch64") or shutil.which("qemu-aarch64-static")

MISSING = (f"needs an AArch64 cross compiler and qemu (aarch64-linux-gnu-gcc: {CROSS_CC}, qemu-aarch64: {QEMU}); "
           "apt-get install gcc-aarch64-linux-gnu qemu-user") if CROSS_CC is None or QEMU is None else None
REQUIRED = os.environ.get("COLIBRI_REQUIRE_CROSS") == "1"
pytestmark = pytest.mark.skipif(MISSING is not None and not REQUIRED, reason=str(MISSING))
# every weight dtype (colibri_dtype order) and those of them that quant_blocks.h holds
DTYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
          "IQ4_NL", "IQ4_XS", "MXFP4")
BLOCK_TYPES = DTYPES[6:]


@pytest.fixture(scope="module")
def test_isa_aarch64(tmp_path_factory):
    """tests/c/test_isa.c with the ARM kernel tables, built as an ARM build of libcolibri builds
    them: arm_dotprod/ with the dot product extension, everything else for baseline ARMv8-A."""
    assert MISSING is None, f"COLIBRI_REQUIRE_CROSS=1 but {MISSING}"
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
@pytest.mark.parametrize("cpu, tables", [("max", ("neon_dotprod", "neon")), ("cortex-a53", ("neon",))])
def test_neon_kernels_under_qemu(test_isa_aarch64, cpu, tables):
    done = subprocess.run([QEMU, "-cpu", cpu, str(test_isa_aarch64)], capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert f"ISA tables tested against the scalar reference: {len(tables)} (in use: {tables[0]})" in output, output
    lines = set(output.splitlines())
    for isa in tables:
        for dtype in DTYPES:   # the table's own kernels, tested
            assert f"{isa} {dtype}: the scalar table's dot_rows, not tested again" not in lines, output
            assert any(line.startswith(f"{isa} {dtype}: 0 shapes differ bitwise") for line in lines), output
        for dtype in BLOCK_TYPES:
            edge = f"{isa} {dtype}: edge-case blocks (decode, gemm) bitwise the reference"
            assert any(line.startswith(edge) for line in lines), output
        for dtype in DTYPES[3:]:   # exact mode's kernels (arm_neon/exact.c), every block type
            exact = f"{isa} {dtype}: exact mode's dequantize and dot bitwise the reference"
            assert any(line.startswith(exact) for line in lines), output
    passed, failed = (int(w) for w in output.strip().splitlines()[-1].split()[0:3:2])
    assert failed == 0 and passed > 1000 * len(tables), output
