/*
 * x86_avx2/weighted_sum.c — attention's value sum with AVX2: 32 columns at a
 * time in four 8-lane accumulators held in registers over all j, then 8,
 * then the tail one by one. Each column is its own chain, `acc += w[j] *
 * row_j` with a separate multiply and add in j order, so the result is
 * bitwise the reference's (ops.c) whatever the vector width.
 */
#include <immintrin.h>

#include "../isa.h"
#include "../kernels.h"

void colibri_weighted_sum_f32_avx2(float *restrict out, const float *restrict w, const float *restrict rows,
                                   int64_t stride, int32_t n, int64_t n_cols) {
    int64_t c = 0;
    for (; c + 32 <= n_cols; c += 32) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;   /* columns c..c+31 */
        for (int32_t j = 0; j < n; j++) {
            const float *r = rows + j * stride + c;   /* r: [32] */
            __m256 p = _mm256_set1_ps(w[j]);
            a0 = _mm256_add_ps(a0, _mm256_mul_ps(p, _mm256_loadu_ps(r)));
            a1 = _mm256_add_ps(a1, _mm256_mul_ps(p, _mm256_loadu_ps(r + 8)));
            a2 = _mm256_add_ps(a2, _mm256_mul_ps(p, _mm256_loadu_ps(r + 16)));
            a3 = _mm256_add_ps(a3, _mm256_mul_ps(p, _mm256_loadu_ps(r + 24)));
        }
        _mm256_storeu_ps(out + c, a0);
        _mm256_storeu_ps(out + c + 8, a1);
        _mm256_storeu_ps(out + c + 16, a2);
        _mm256_storeu_ps(out + c + 24, a3);
    }
    for (; c + 8 <= n_cols; c += 8) {
        __m256 a = _mm256_setzero_ps();   /* columns c..c+7 */
        for (int32_t j = 0; j < n; j++) a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_set1_ps(w[j]), _mm256_loadu_ps(rows + j * stride + c)));
        _mm256_storeu_ps(out + c, a);
    }
    for (; c < n_cols; c++) {
        float acc = 0.0f;
        for (int32_t j = 0; j < n; j++) acc += w[j] * rows[j * stride + c];
        out[c] = acc;
    }
}
