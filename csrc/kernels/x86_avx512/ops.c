/*
 * x86_avx512/ops.c — softmax and SiLU·up with AVX-512, bitwise the reference
 * (ops.c): colibri_expf's steps lane by lane (kernels.h), the max and the
 * scaling lane-wise (order-free), the softmax sum in colibri_sum_f32's
 * 8-lane order, tails through the reference's scalar code.
 */
#include <immintrin.h>
#include <math.h>

#include "../isa.h"
#include "../kernels.h"

/* colibri_expf on 16 lanes: the in-range lanes follow its steps exactly; the
 * others are replaced by its +inf, 0 and NaN. */
static inline __m512 colibri_exp16(__m512 x) {
    __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(COLIBRI_EXP_MIN)), _mm512_set1_ps(COLIBRI_EXP_MAX));
    __m512 round = _mm512_set1_ps(COLIBRI_EXP_ROUND);
    __m512 n = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(xc, _mm512_set1_ps(COLIBRI_EXP_LOG2E)), round), round);
    __m512 r = _mm512_sub_ps(_mm512_sub_ps(xc, _mm512_mul_ps(n, _mm512_set1_ps(COLIBRI_EXP_LN2_HI))),
                             _mm512_mul_ps(n, _mm512_set1_ps(COLIBRI_EXP_LN2_LO)));
    __m512 p = _mm512_set1_ps(COLIBRI_EXP_C7);
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(COLIBRI_EXP_C6));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(COLIBRI_EXP_C5));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(COLIBRI_EXP_C4));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(COLIBRI_EXP_C3));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(COLIBRI_EXP_C2));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    __m512i k = _mm512_cvttps_epi32(n), half = _mm512_srai_epi32(k, 1), bias = _mm512_set1_epi32(127);
    __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(half, bias), 23));
    __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_sub_epi32(k, half), bias), 23));
    __m512 e = _mm512_mul_ps(_mm512_mul_ps(p, s1), s2);
    e = _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(x, _mm512_set1_ps(COLIBRI_EXP_MAX), _CMP_GT_OQ),
                           _mm512_set1_ps(INFINITY));
    e = _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(x, _mm512_set1_ps(COLIBRI_EXP_MIN), _CMP_LT_OQ),
                           _mm512_setzero_ps());
    return _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

void colibri_softmax_avx512(float *x, int64_t n) {
    __m512 m = _mm512_set1_ps(x[0]);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) m = _mm512_max_ps(_mm512_loadu_ps(x + i), m);   /* NaN x keeps m, as the reference */
    float max = _mm512_reduce_max_ps(m);
    for (; i < n; i++) max = x[i] > max ? x[i] : max;
    __m512 mv = _mm512_set1_ps(max);
    for (i = 0; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, colibri_exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv)));
    for (; i < n; i++) x[i] = colibri_expf(x[i] - max);
    float inv_sum = 1.0f / colibri_sum_f32_avx2(x, n);
    __m512 inv = _mm512_set1_ps(inv_sum);
    for (i = 0; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), inv));
    for (; i < n; i++) x[i] *= inv_sum;
}

void colibri_silu_mul_avx512(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    __m512 one = _mm512_set1_ps(1.0f);
    __m512i sign = _mm512_set1_epi32((int32_t)0x80000000u);   /* -g by its sign bit, as the reference negates */
    for (; i + 16 <= n; i += 16) {
        __m512 gv = _mm512_loadu_ps(g + i);
        __m512 s = _mm512_div_ps(gv, _mm512_add_ps(one, colibri_exp16(_mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(gv), sign)))));
        _mm512_storeu_ps(g + i, _mm512_mul_ps(s, _mm512_loadu_ps(u + i)));
    }
    colibri_silu_mul(g + i, u + i, n - i);
}
