"""The AVX-VNNI kernel table (csrc/kernels/x86_avx_vnni/) against the scalar reference on a CPU
that has AVX-512 VNNI but not AVX-VNNI: tests/c/test_isa.c built with that folder compiled for
the EVEX form of vpdpbusd (COLIBRI_AVX_VNNI_AS_AVX512: AVX-512 VNNI + VL), the same operation as
the VEX form the real table uses, so the table's data layout, offsets and float order are
checked bitwise here. On a CPU with AVX-VNNI itself the normal build's test_isa runs the real
table (tests/test_c_core.py); this test then checks the same code again.

Needs an x86-64 C compiler that takes -mavxvnni and a CPU with AVX-512 VNNI and VL; skipped,
saying which is missing, elsewhere.
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


FLAGS = cpu_flags()
pytestmark = pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64") or CC is None or not {"avx512_vnni", "avx512vl"} <= FLAGS,
    reason=f"needs x86-64, a C compiler ({CC}) and a CPU with AVX-512 VNNI and VL (this one: "
           f"{'yes' if {'avx512_vnni', 'avx512vl'} <= FLAGS else 'no'})",
)


def test_avx_vnni_table_bitwise_equal_to_the_reference(tmp_path):
    flags = [CC, "-std=c99", "-O2", "-ffp-contract=off", "-Wall", "-Wextra", "-Werror",
             "-I", str(ROOT / "csrc" / "include"), "-I", str(KERNELS)]
    objects = []
    for folder, isa_flags in (("x86_avx2", ["-mavx2", "-mfma", "-mf16c"]),
                              ("x86_avx_vnni", ["-mavx2", "-mfma", "-mf16c", "-mavx512vnni", "-mavx512vl",
                                                "-DCOLIBRI_AVX_VNNI_AS_AVX512"])):
        for src in sorted((KERNELS / folder).glob("*.c")):
            obj = tmp_path / f"{folder}_{src.stem}.o"
            built = subprocess.run([*flags, *isa_flags, "-c", str(src), "-o", str(obj)], capture_output=True,
                                   text=True)
            if built.returncode != 0 and "-mavxvnni" in built.stderr:
                pytest.skip(f"{CC} cannot compile AVX-VNNI: {built.stderr.strip().splitlines()[-1]}")
            assert built.returncode == 0, built.stderr
            objects.append(obj)
    sources = sorted(p for p in KERNELS.glob("*.c") if p.stem != "cpu_arm")   # the portable layer + x86 probes
    exe = tmp_path / "test_isa_avx_vnni"
    built = subprocess.run([*flags, "-DCOLIBRI_HAVE_AVX2", "-DCOLIBRI_HAVE_AVX_VNNI", "-o", str(exe),
                            str(ROOT / "tests" / "c" / "test_isa.c"), *map(str, sources), *map(str, objects),
                            "-lm", "-lpthread"], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    done = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "ISA tables tested against the scalar reference: 2 (in use: avx_vnni)" in output, output
    passed, failed = (int(w) for w in output.strip().splitlines()[-1].split()[0:3:2])
    assert failed == 0 and passed > 1000, output
