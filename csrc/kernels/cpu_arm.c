/*
 * cpu_arm.c — which ARM kernel tables this CPU can run (getauxval on Linux;
 * Advanced SIMD is part of every AArch64 CPU, so elsewhere it is assumed, as
 * is the dot product extension on Apple silicon, which has it from the M1 on;
 * other systems without the Linux auxiliary vector run baseline NEON).
 * Compiled without ISA flags.
 */
#include "isa.h"

#if defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>

int colibri_cpu_has_neon(void) { return (getauxval(AT_HWCAP) & HWCAP_ASIMD) != 0; }
int colibri_cpu_has_neon_dotprod(void) {
    return colibri_cpu_has_neon() && (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
}
#else
int colibri_cpu_has_neon(void) { return 1; }
#if defined(__APPLE__)
int colibri_cpu_has_neon_dotprod(void) { return 1; }
#else
int colibri_cpu_has_neon_dotprod(void) { return 0; }
#endif
#endif
