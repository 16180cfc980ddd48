/*
 * x86_avx2/weighted_sum.c — attention's value sum with AVX2 (+F16C), over
 * f32 or f16 rows (the KV cache's types), 8-lane vectors through
 * weighted_sum_tiled.h: bitwise the reference (ops.c).
 */
#include <immintrin.h>

#include "../isa.h"
#include "../kernels.h"
#include "../weighted_sum_tiled.h"

static inline __m256 colibri_ws8_f32(const void *r, int64_t i) { return _mm256_loadu_ps((const float *)r + i); }
static inline __m256 colibri_ws8_f16(const void *r, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)r + i)));
}
static inline __m256 colibri_ws8_muladd(__m256 acc, __m256 p, __m256 v) {
    return _mm256_add_ps(acc, _mm256_mul_ps(p, v));
}

COLIBRI_WEIGHTED_SUM_TILED(colibri_weighted_sum_f32_avx2, float, __m256, 8, colibri_ws8_f32, _mm256_setzero_ps,
                           _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps, colibri_ws8_muladd,
                           colibri_weighted_sum_f32)
COLIBRI_WEIGHTED_SUM_TILED(colibri_weighted_sum_f16_avx2, uint16_t, __m256, 8, colibri_ws8_f16, _mm256_setzero_ps,
                           _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps, colibri_ws8_muladd,
                           colibri_weighted_sum_f16)
