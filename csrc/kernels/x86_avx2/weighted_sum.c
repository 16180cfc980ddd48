/*
 * x86_avx2/weighted_sum.c — attention's value sum with AVX2 (+F16C), over
 * f32 or f16 rows (the KV cache's types): 32 columns at a time in four
 * 8-lane accumulators held in registers over all j, then 8, then the tail
 * one by one. Each column is its own chain, `acc += w[j] * row_j` with a
 * separate multiply and add in j order (f16 widened exactly first), so the
 * result is bitwise the reference's (ops.c) whatever the vector width.
 */
#include <immintrin.h>

#include "../isa.h"
#include "../kernels.h"

static inline __m256 colibri_ws8_f32(const void *r, int64_t i) { return _mm256_loadu_ps((const float *)r + i); }
static inline __m256 colibri_ws8_f16(const void *r, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)r + i)));
}

/* NAME over rows of RTYPE, LOAD8 widening 8 of them; TAIL: the reference. */
#define COLIBRI_WEIGHTED_SUM_AVX2(NAME, RTYPE, LOAD8, TAIL)                                                \
    void NAME(float *restrict out, const float *restrict w, const void *restrict rows, int64_t stride,     \
              int32_t n, int64_t n_cols) {                                                                 \
        int64_t c = 0;                                                                                     \
        for (; c + 32 <= n_cols; c += 32) {                                                                \
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;   /* columns c..c+31 */            \
            for (int32_t j = 0; j < n; j++) {                                                              \
                const RTYPE *r = (const RTYPE *)rows + j * stride + c;   /* r: [32] */                     \
                __m256 p = _mm256_set1_ps(w[j]);                                                           \
                a0 = _mm256_add_ps(a0, _mm256_mul_ps(p, LOAD8(r, 0)));                                     \
                a1 = _mm256_add_ps(a1, _mm256_mul_ps(p, LOAD8(r, 8)));                                     \
                a2 = _mm256_add_ps(a2, _mm256_mul_ps(p, LOAD8(r, 16)));                                    \
                a3 = _mm256_add_ps(a3, _mm256_mul_ps(p, LOAD8(r, 24)));                                    \
            }                                                                                              \
            _mm256_storeu_ps(out + c, a0);                                                                 \
            _mm256_storeu_ps(out + c + 8, a1);                                                             \
            _mm256_storeu_ps(out + c + 16, a2);                                                            \
            _mm256_storeu_ps(out + c + 24, a3);                                                            \
        }                                                                                                  \
        for (; c + 8 <= n_cols; c += 8) {                                                                  \
            __m256 a = _mm256_setzero_ps();   /* columns c..c+7 */                                         \
            for (int32_t j = 0; j < n; j++) {                                                              \
                a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_set1_ps(w[j]),                                   \
                                                   LOAD8((const RTYPE *)rows + j * stride + c, 0)));       \
            }                                                                                              \
            _mm256_storeu_ps(out + c, a);                                                                  \
        }                                                                                                  \
        if (c < n_cols) TAIL(out + c, w, (const RTYPE *)rows + c, stride, n, n_cols - c);                  \
    }

COLIBRI_WEIGHTED_SUM_AVX2(colibri_weighted_sum_f32_avx2, float, colibri_ws8_f32, colibri_weighted_sum_f32)
COLIBRI_WEIGHTED_SUM_AVX2(colibri_weighted_sum_f16_avx2, uint16_t, colibri_ws8_f16, colibri_weighted_sum_f16)
