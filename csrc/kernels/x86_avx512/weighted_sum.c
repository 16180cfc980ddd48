/*
 * x86_avx512/weighted_sum.c — attention's value sum with AVX-512: 64 columns
 * at a time in four 16-lane accumulators held in registers over all j, then
 * 16, then the tail one by one. Each column is its own chain, `acc += w[j] *
 * row_j` with a separate multiply and add in j order, so the result is
 * bitwise the reference's (ops.c) whatever the vector width.
 */
#include <immintrin.h>

#include "../isa.h"
#include "../kernels.h"

void colibri_weighted_sum_f32_avx512(float *restrict out, const float *restrict w, const float *restrict rows,
                                     int64_t stride, int32_t n, int64_t n_cols) {
    int64_t c = 0;
    for (; c + 64 <= n_cols; c += 64) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;   /* columns c..c+63 */
        for (int32_t j = 0; j < n; j++) {
            const float *r = rows + j * stride + c;   /* r: [64] */
            __m512 p = _mm512_set1_ps(w[j]);
            a0 = _mm512_add_ps(a0, _mm512_mul_ps(p, _mm512_loadu_ps(r)));
            a1 = _mm512_add_ps(a1, _mm512_mul_ps(p, _mm512_loadu_ps(r + 16)));
            a2 = _mm512_add_ps(a2, _mm512_mul_ps(p, _mm512_loadu_ps(r + 32)));
            a3 = _mm512_add_ps(a3, _mm512_mul_ps(p, _mm512_loadu_ps(r + 48)));
        }
        _mm512_storeu_ps(out + c, a0);
        _mm512_storeu_ps(out + c + 16, a1);
        _mm512_storeu_ps(out + c + 32, a2);
        _mm512_storeu_ps(out + c + 48, a3);
    }
    for (; c + 16 <= n_cols; c += 16) {
        __m512 a = _mm512_setzero_ps();   /* columns c..c+15 */
        for (int32_t j = 0; j < n; j++) a = _mm512_add_ps(a, _mm512_mul_ps(_mm512_set1_ps(w[j]), _mm512_loadu_ps(rows + j * stride + c)));
        _mm512_storeu_ps(out + c, a);
    }
    for (; c < n_cols; c++) {
        float acc = 0.0f;
        for (int32_t j = 0; j < n; j++) acc += w[j] * rows[j * stride + c];
        out[c] = acc;
    }
}
