/*
 * x86_avx512/weighted_sum.c — attention's value sum with AVX-512, over f32
 * or f16 rows (the KV cache's types), 16-lane vectors through
 * weighted_sum_tiled.h (a 128-wide head in one group of columns): bitwise
 * the reference (ops.c).
 */
#include <immintrin.h>

#include "../isa.h"
#include "../kernels.h"
#include "../weighted_sum_tiled.h"

static inline __m512 colibri_ws16_f32(const void *r, int64_t i) { return _mm512_loadu_ps((const float *)r + i); }
static inline __m512 colibri_ws16_f16(const void *r, int64_t i) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)r + i)));
}
static inline __m512 colibri_ws16_muladd(__m512 acc, __m512 p, __m512 v) {
    return _mm512_add_ps(acc, _mm512_mul_ps(p, v));
}

COLIBRI_WEIGHTED_SUM_TILED(colibri_weighted_sum_f32_avx512, float, __m512, 16, colibri_ws16_f32, _mm512_setzero_ps,
                           _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps, colibri_ws16_muladd,
                           colibri_weighted_sum_f32)
COLIBRI_WEIGHTED_SUM_TILED(colibri_weighted_sum_f16_avx512, uint16_t, __m512, 16, colibri_ws16_f16, _mm512_setzero_ps,
                           _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps, colibri_ws16_muladd,
                           colibri_weighted_sum_f16)
