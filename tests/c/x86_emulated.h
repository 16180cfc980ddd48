/*
 * x86_emulated.h — lets the AVX-512 and AVX-VNNI kernel folders be compiled
 * for, and tested on, a CPU that has AVX2 only (tests/test_isa_emulated.py;
 * never part of a libcolibri build).
 *
 * Force-included (-include) before every file of csrc/kernels/x86_avx512/ and
 * x86_avx_vnni/, compiled with the AVX2 table's flags: GCC's own intrinsics
 * headers come first, then SIMDe (Debian's libsimde-dev) with its native
 * aliases, which turn every _mm512_* / EVEX _mm256_* / _mm_* intrinsic and
 * the __m512* types into portable code built from AVX2. Below: the intrinsics
 * these kernels use that SIMDe 0.7.4 lacks, each written lane by lane from
 * Intel's definition (and the reductions as GCC's headers order them, so a
 * float max sees the same operands as on real hardware), and the VEX
 * vpdpbusd of AVX-VNNI as SIMDe's EVEX one (the same operation).
 */
#ifndef COLIBRI_TESTS_X86_EMULATED_H
#define COLIBRI_TESTS_X86_EMULATED_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>

#define _mm256_dpbusd_avx_epi32(src, a, b) simde_mm256_dpbusd_epi32(src, a, b)

/* One lane-by-lane intrinsic over simde's private views: R result view, A argument view. */
#define COLIBRI_EMU_LANES(RT, R, AT, A, a, N, EXPR)                       \
    simde##RT##_private R = {0};                                          \
    simde##AT##_private A = simde##AT##_to_private(a);                    \
    for (int i = 0; i < (N); i++) EXPR;                                   \
    return simde##RT##_from_private(R)

static inline simde__m512 colibri_emu_cvtepi32_ps(simde__m512i a) {
    COLIBRI_EMU_LANES(__m512, r, __m512i, v, a, 16, r.f32[i] = (float)v.i32[i]);
}

/* vcvtps2dq (round to nearest even, the MXCSR default) and vcvttps2dq (toward
 * zero); out of range or NaN gives INT32_MIN, the "integer indefinite". */
static inline int32_t colibri_emu_f32_to_i32(float x, int truncate) {
    if (!(x >= -2147483648.0f && x < 2147483648.0f)) return INT32_MIN;
    return (int32_t)(truncate ? truncf(x) : nearbyintf(x));
}
static inline simde__m512i colibri_emu_cvtps_epi32(simde__m512 a) {
    COLIBRI_EMU_LANES(__m512i, r, __m512, v, a, 16, r.i32[i] = colibri_emu_f32_to_i32(v.f32[i], 0));
}
static inline simde__m512i colibri_emu_cvttps_epi32(simde__m512 a) {
    COLIBRI_EMU_LANES(__m512i, r, __m512, v, a, 16, r.i32[i] = colibri_emu_f32_to_i32(v.f32[i], 1));
}

/* vpmovdw / vpmovdb: each int32 lane truncated to its low 16 / 8 bits. */
static inline simde__m256i colibri_emu_cvtepi32_epi16(simde__m512i a) {
    COLIBRI_EMU_LANES(__m256i, r, __m512i, v, a, 16, r.i16[i] = (int16_t)v.i32[i]);
}
static inline simde__m128i colibri_emu_cvtepi32_epi8(simde__m512i a) {
    COLIBRI_EMU_LANES(__m128i, r, __m512i, v, a, 16, r.i8[i] = (int8_t)v.i32[i]);
}
/* 256-bit vpmovqw: 4 int64 lanes to int16 in the low 64 bits, the rest zero. */
static inline simde__m128i colibri_emu_cvtepi64_epi16_256(simde__m256i a) {
    COLIBRI_EMU_LANES(__m128i, r, __m256i, v, a, 4, r.i16[i] = (int16_t)v.i64[i]);
}
/* vpmovzxwd: 16 uint16 zero-extended to int32. */
static inline simde__m512i colibri_emu_cvtepu16_epi32(simde__m256i a) {
    COLIBRI_EMU_LANES(__m512i, r, __m256i, v, a, 16, r.i32[i] = (int32_t)v.u16[i]);
}
/* vpmovsxbd: 16 int8 sign-extended to int32. */
static inline simde__m512i colibri_emu_cvtepi8_epi32(simde__m128i a) {
    COLIBRI_EMU_LANES(__m512i, r, __m128i, v, a, 16, r.i32[i] = v.i8[i]);
}
/* 128-bit vpmovdw: 4 int16 in the low 64 bits, the rest zero. */
static inline simde__m128i colibri_emu_cvtepi32_epi16_128(simde__m128i a) {
    COLIBRI_EMU_LANES(__m128i, r, __m128i, v, a, 4, r.i16[i] = (int16_t)v.i32[i]);
}

/* vcvtph2ps of 16 f16 values: the two 8-value halves by F16C (exact). */
static inline simde__m512 colibri_emu_cvtph_ps(simde__m256i a) {
    __m256i h = a;   /* AVX2 is native: simde__m256i is __m256i */
    float r[16];
    _mm256_storeu_ps(r, _mm256_cvtph_ps(_mm256_castsi256_si128(h)));
    _mm256_storeu_ps(r + 8, _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)));
    return simde_mm512_loadu_ps(r);
}

static inline simde__m512i colibri_emu_srai_epi32(simde__m512i a, int n) {
    int s = n > 31 ? 31 : n;
    COLIBRI_EMU_LANES(__m512i, r, __m512i, v, a, 16, r.i32[i] = v.i32[i] >> s);
}

/* vpshufd: in each 128-bit lane, element j takes element (imm >> 2j) & 3. */
static inline simde__m512i colibri_emu_shuffle_epi32(simde__m512i a, int imm) {
    COLIBRI_EMU_LANES(__m512i, r, __m512i, v, a, 16, r.i32[i] = v.i32[(i & ~3) + ((imm >> (2 * (i & 3))) & 3)]);
}

/* vrndscaleps: x rounded to a multiple of 2^-M, M = imm[7:4], by imm[1:0]
 * (nearest even, down, up, toward zero; imm[2]: the MXCSR's, nearest even).
 * SIMDe 0.7.4's keeps fraction bits that imm does not ask for. */
static inline float colibri_emu_roundscale(float x, int imm) {
    float scale = ldexpf(1.0f, imm >> 4 & 15), v = x * scale;
    switch (imm & 4 ? 0 : imm & 3) {
    case 0: v = nearbyintf(v); break;
    case 1: v = floorf(v); break;
    case 2: v = ceilf(v); break;
    default: v = truncf(v); break;
    }
    return v / scale;
}
static inline simde__m512 colibri_emu_roundscale_ps(simde__m512 a, int imm) {
    COLIBRI_EMU_LANES(__m512, r, __m512, v, a, 16, r.f32[i] = colibri_emu_roundscale(v.f32[i], imm));
}

/* Masked loads and stores touch only the lanes whose mask bit is set (no fault elsewhere). */
static inline simde__m512 colibri_emu_maskz_loadu_ps(simde__mmask16 k, const void *p) {
    simde__m512_private r = {0};
    for (int i = 0; i < 16; i++) {
        if (k >> i & 1) r.f32[i] = ((const float *)p)[i];
    }
    return simde__m512_from_private(r);
}
static inline void colibri_emu_mask_storeu_ps(void *p, simde__mmask16 k, simde__m512 a) {
    simde__m512_private v = simde__m512_to_private(a);
    for (int i = 0; i < 16; i++) {
        if (k >> i & 1) ((float *)p)[i] = v.f32[i];
    }
}

/* The reductions in the order of GCC's avx512fintrin.h: upper 256 op lower
 * 256, upper 128 op lower 128, then [2,3,0,1], then [1,0,1,0]. */
static inline int colibri_emu_reduce_add_epi32(simde__m512i a) {
    simde__m512i_private v = simde__m512i_to_private(a);
    int32_t t[8], u[4];
    for (int i = 0; i < 8; i++) t[i] = (int32_t)((uint32_t)v.i32[8 + i] + (uint32_t)v.i32[i]);
    for (int i = 0; i < 4; i++) u[i] = (int32_t)((uint32_t)t[4 + i] + (uint32_t)t[i]);
    return (int32_t)((uint32_t)(u[0] + (uint32_t)u[2]) + (uint32_t)(u[1] + (uint32_t)u[3]));
}
static inline float colibri_emu_reduce_max_ps(simde__m512 a) {
    float v[16];
    simde_mm512_storeu_ps(v, a);
    __m256 t = _mm256_max_ps(_mm256_loadu_ps(v + 8), _mm256_loadu_ps(v));
    __m128 u = _mm_max_ps(_mm256_extractf128_ps(t, 1), _mm256_castps256_ps128(t));
    __m128 w = _mm_max_ps(u, _mm_shuffle_ps(u, u, _MM_SHUFFLE(0, 1, 3, 2)));
    w = _mm_max_ps(w, _mm_shuffle_ps(w, w, _MM_SHUFFLE(0, 1, 0, 1)));
    return _mm_cvtss_f32(w);
}

#define _mm512_cvtepi32_ps colibri_emu_cvtepi32_ps
#define _mm512_cvtps_epi32 colibri_emu_cvtps_epi32
#define _mm512_cvttps_epi32 colibri_emu_cvttps_epi32
#define _mm512_cvtepi32_epi16 colibri_emu_cvtepi32_epi16
#define _mm512_cvtepi32_epi8 colibri_emu_cvtepi32_epi8
#define _mm_cvtepi32_epi16 colibri_emu_cvtepi32_epi16_128
#define _mm256_cvtepi64_epi16 colibri_emu_cvtepi64_epi16_256
#define _mm512_cvtepu16_epi32 colibri_emu_cvtepu16_epi32
#define _mm512_cvtepi8_epi32 colibri_emu_cvtepi8_epi32
#define _mm512_cvtph_ps colibri_emu_cvtph_ps
#define _mm512_srai_epi32 colibri_emu_srai_epi32
#undef _mm512_roundscale_ps
#define _mm512_roundscale_ps(a, imm) colibri_emu_roundscale_ps((a), (imm))
#define _mm512_shuffle_epi32(a, imm) colibri_emu_shuffle_epi32((a), (imm))
#define _mm512_maskz_loadu_ps colibri_emu_maskz_loadu_ps
#define _mm512_mask_storeu_ps colibri_emu_mask_storeu_ps
#define _mm512_reduce_add_epi32 colibri_emu_reduce_add_epi32
#define _mm512_reduce_max_ps colibri_emu_reduce_max_ps

#endif /* COLIBRI_TESTS_X86_EMULATED_H */
