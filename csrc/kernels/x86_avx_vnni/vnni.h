/*
 * x86_avx_vnni/vnni.h — vpdpbusd on 256-bit vectors for the AVX-VNNI table:
 * the VEX form (CPUID leaf 7 subleaf 1, EAX bit 4: Intel since Alder Lake,
 * AMD since Zen 5), which CPUs without AVX-512 have.
 *
 * COLIBRI_AVX_VNNI_AS_AVX512 (tests/test_isa_avx_vnni.py only) compiles the
 * same kernels with the EVEX form of the same instruction (AVX-512 VNNI +
 * VL), whose operation is identical, so that a machine with AVX-512 VNNI
 * but no AVX-VNNI can run this table's code against the reference.
 */
#ifndef COLIBRI_X86_VNNI_H
#define COLIBRI_X86_VNNI_H

#include <immintrin.h>

#include "../isa.h"

#ifdef COLIBRI_AVX_VNNI_AS_AVX512
#define COLIBRI_DPBUSD(acc, u, s) _mm256_dpbusd_epi32((acc), (u), (s))
#define COLIBRI_CPU_HAS_AVX_VNNI colibri_cpu_has_avx512
#else
#define COLIBRI_DPBUSD(acc, u, s) _mm256_dpbusd_avx_epi32((acc), (u), (s))
#define COLIBRI_CPU_HAS_AVX_VNNI colibri_cpu_has_avx_vnni
#endif

#endif /* COLIBRI_X86_VNNI_H */
