/*
 * x86_avx512/weighted_sum.c — attention's value sum with AVX-512, over f32
 * or f16 rows (the KV cache's types): 64 columns at a time in four 16-lane
 * accumulators held in registers over all j, then 16, then the tail one by
 * one. Each column is its own chain, `acc += w[j] * row_j` with a separate
 * multiply and add in j order (f16 widened exactly first), so the result is
 * bitwise the reference's (ops.c) whatever the vector width.
 */
#include <immintrin.h>

#include "../isa.h"
#include "../kernels.h"

static inline __m512 colibri_ws16_f32(const void *r, int64_t i) { return _mm512_loadu_ps((const float *)r + i); }
static inline __m512 colibri_ws16_f16(const void *r, int64_t i) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)r + i)));
}

/* NAME over rows of RTYPE, LOAD16 widening 16 of them; TAIL: the reference. */
#define COLIBRI_WEIGHTED_SUM_AVX512(NAME, RTYPE, LOAD16, TAIL)                                             \
    void NAME(float *restrict out, const float *restrict w, const void *restrict rows, int64_t stride,     \
              int32_t n, int64_t n_cols) {                                                                 \
        int64_t c = 0;                                                                                     \
        for (; c + 64 <= n_cols; c += 64) {                                                                \
            __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;   /* columns c..c+63 */            \
            for (int32_t j = 0; j < n; j++) {                                                              \
                const RTYPE *r = (const RTYPE *)rows + j * stride + c;   /* r: [64] */                     \
                __m512 p = _mm512_set1_ps(w[j]);                                                           \
                a0 = _mm512_add_ps(a0, _mm512_mul_ps(p, LOAD16(r, 0)));                                    \
                a1 = _mm512_add_ps(a1, _mm512_mul_ps(p, LOAD16(r, 16)));                                   \
                a2 = _mm512_add_ps(a2, _mm512_mul_ps(p, LOAD16(r, 32)));                                   \
                a3 = _mm512_add_ps(a3, _mm512_mul_ps(p, LOAD16(r, 48)));                                   \
            }                                                                                              \
            _mm512_storeu_ps(out + c, a0);                                                                 \
            _mm512_storeu_ps(out + c + 16, a1);                                                            \
            _mm512_storeu_ps(out + c + 32, a2);                                                            \
            _mm512_storeu_ps(out + c + 48, a3);                                                            \
        }                                                                                                  \
        for (; c + 16 <= n_cols; c += 16) {                                                                \
            __m512 a = _mm512_setzero_ps();   /* columns c..c+15 */                                        \
            for (int32_t j = 0; j < n; j++) {                                                              \
                a = _mm512_add_ps(a, _mm512_mul_ps(_mm512_set1_ps(w[j]),                                   \
                                                   LOAD16((const RTYPE *)rows + j * stride + c, 0)));      \
            }                                                                                              \
            _mm512_storeu_ps(out + c, a);                                                                  \
        }                                                                                                  \
        if (c < n_cols) TAIL(out + c, w, (const RTYPE *)rows + c, stride, n, n_cols - c);                  \
    }

COLIBRI_WEIGHTED_SUM_AVX512(colibri_weighted_sum_f32_avx512, float, colibri_ws16_f32, colibri_weighted_sum_f32)
COLIBRI_WEIGHTED_SUM_AVX512(colibri_weighted_sum_f16_avx512, uint16_t, colibri_ws16_f16, colibri_weighted_sum_f16)
