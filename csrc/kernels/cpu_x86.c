/*
 * cpu_x86.c — which x86 kernel tables this CPU and OS can run (cpuid for the
 * instructions, xgetbv for the OS saving the wider register state). Compiled
 * without ISA flags: it runs before any choice is made.
 */
#define _GNU_SOURCE   /* syscall() */
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "isa.h"

/* XCR0 (which register state the OS saves); 0 without OSXSAVE. */
static unsigned long long colibri_xcr0(void) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & (1u << 27))) return 0;
    unsigned int lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

int colibri_cpu_has_avx2(void) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
    int fma = (ecx >> 12) & 1, avx = (ecx >> 28) & 1, f16c = (ecx >> 29) & 1;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return 0;
    int avx2 = (ebx >> 5) & 1;
    int ymm_saved = (colibri_xcr0() & 0x6) == 0x6;   /* SSE + AVX state */
    return fma && avx && f16c && avx2 && ymm_saved;
}

int colibri_cpu_has_avx_vnni(void) {
    unsigned int eax, ebx, ecx, edx;
    if (!colibri_cpu_has_avx2() || !__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) return 0;
    return (eax >> 4) & 1;   /* CPUID.(EAX=7, ECX=1):EAX[4] AVX-VNNI; YMM state checked by avx2 */
}

int colibri_cpu_has_avx512(void) {
    unsigned int eax, ebx, ecx, edx;
    if (!colibri_cpu_has_avx2() || !__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return 0;
    int f = (ebx >> 16) & 1, bw = (ebx >> 30) & 1, vl = (ebx >> 31) & 1, vnni = (ecx >> 11) & 1;
    int zmm_saved = (colibri_xcr0() & 0xe6) == 0xe6;   /* + opmask, ZMM_Hi256, Hi16_ZMM */
    return f && bw && vl && vnni && zmm_saved;
}

/* The OS's leave to use the AMX tile data (8 KiB of state per thread): Linux grants it per
 * process on request (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, since 5.16),
 * and refuses it where a thread's signal stack could not hold the larger frame. Asked
 * once; the answer holds for every thread of the process. */
static int colibri_amx_permitted(void) {
#if defined(__linux__) && defined(SYS_arch_prctl)
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
    return 0;
#endif
}

int colibri_cpu_has_amx(void) {
    static int answer = -1;   /* -1: not asked yet (two threads may both ask: the same answer) */
    int known = __atomic_load_n(&answer, __ATOMIC_RELAXED);
    if (known >= 0) return known;
    unsigned int eax, ebx, ecx, edx;
    int has = colibri_cpu_has_avx512() && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx);
    int tile = has && ((edx >> 24) & 1), int8 = has && ((edx >> 25) & 1);   /* AMX-TILE, AMX-INT8 */
    int bf16 = has && ((edx >> 22) & 1);                                     /* AMX-BF16 */
    int tiles_saved = (colibri_xcr0() & 0x60000) == 0x60000;                 /* XTILECFG, XTILEDATA */
    known = tile && int8 && bf16 && tiles_saved && colibri_amx_permitted();
    __atomic_store_n(&answer, known, __ATOMIC_RELAXED);
    return known;
}
