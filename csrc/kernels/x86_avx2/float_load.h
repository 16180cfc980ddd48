/*
 * x86_avx2/float_load.h — widening loads of the float weight types, shared by
 * the x86 float kernels (x86_avx2/dot_float.c, x86_avx512/gemm_float.c),
 * and the combine of the 8-lane accumulators of 4 rows (x86_avx2/dot_float.c,
 * x86_avx2/exact.c); included only by files compiled with at least AVX2 + F16C. Every
 * conversion is exact: F16 by vcvtph2ps, BF16 by a 16-bit shift.
 */
#ifndef COLIBRI_X86_FLOAT_LOAD_H
#define COLIBRI_X86_FLOAT_LOAD_H

#include <immintrin.h>

#include "../kernels.h"

/* Elements i..i+7 of the row at w as 8 floats. */
static inline __m256 colibri_load8_f32(const void *w, int64_t i) {
    return _mm256_loadu_ps((const float *)w + i);
}

static inline __m256 colibri_load8_f16(const void *w, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + i)));
}

static inline __m256 colibri_load8_bf16(const void *w, int64_t i) {
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* Element i of the row at w as a float. */
static inline float colibri_load1_f32(const void *w, int64_t i) { return ((const float *)w)[i]; }
static inline float colibri_load1_f16(const void *w, int64_t i) {
    return colibri_f16_to_f32(((const uint16_t *)w)[i]);
}
static inline float colibri_load1_bf16(const void *w, int64_t i) {
    return colibri_bf16_to_f32(((const uint16_t *)w)[i]);
}

/* out[r] = the reference's combine of row r's acc[0..7] (accumulator r). */
static inline void colibri_combine4_avx2(__m256 acc0, __m256 acc1, __m256 acc2, __m256 acc3, float out[4]) {
    /* h: [r0 a0123, r1 a0123, r2 a0123, r3 a0123 | same for a4567] */
    __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(acc0, acc1), _mm256_hadd_ps(acc2, acc3));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
}

#endif /* COLIBRI_X86_FLOAT_LOAD_H */
