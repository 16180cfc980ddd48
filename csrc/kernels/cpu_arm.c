/*
 * cpu_arm.c — which ARM kernel tables this CPU can run (getauxval on Linux;
 * Advanced SIMD is part of every AArch64 CPU, so elsewhere it is assumed).
 * Compiled without ISA flags.
 */
#include "isa.h"

#if defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>

int colibri_cpu_has_neon(void) { return (getauxval(AT_HWCAP) & HWCAP_ASIMD) != 0; }
#else
int colibri_cpu_has_neon(void) { return 1; }
#endif
