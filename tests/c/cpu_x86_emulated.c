/*
 * cpu_x86_emulated.c — the CPU probes of csrc/kernels/cpu_x86.c for the
 * emulated test build (tests/test_isa_emulated.py): every x86 table is
 * available, the AVX-512 and AVX-VNNI ones through tests/c/x86_emulated.h on
 * a CPU with AVX2, which the test checks before it builds this.
 */
#include "isa.h"

int colibri_cpu_has_avx2(void) { return 1; }
int colibri_cpu_has_avx_vnni(void) { return 1; }
int colibri_cpu_has_avx512(void) { return 1; }
