/*
 * x86_avx2/ops.c — softmax and SiLU·up with AVX2, bitwise the reference
 * (ops.c): colibri_expf's steps lane by lane (kernels.h), the max and the
 * scaling lane-wise (order-free), the softmax sum in colibri_sum_f32's
 * 8-lane order, tails through the reference's scalar code.
 */
#include <immintrin.h>
#include <math.h>

#include "../isa.h"
#include "../kernels.h"

/* colibri_expf on 8 lanes: the in-range lanes follow its steps exactly; the
 * others are replaced by its +inf, 0 and NaN. */
static inline __m256 colibri_exp8(__m256 x) {
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(COLIBRI_EXP_MIN)), _mm256_set1_ps(COLIBRI_EXP_MAX));
    __m256 round = _mm256_set1_ps(COLIBRI_EXP_ROUND);
    __m256 n = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(xc, _mm256_set1_ps(COLIBRI_EXP_LOG2E)), round), round);
    __m256 r = _mm256_sub_ps(_mm256_sub_ps(xc, _mm256_mul_ps(n, _mm256_set1_ps(COLIBRI_EXP_LN2_HI))),
                             _mm256_mul_ps(n, _mm256_set1_ps(COLIBRI_EXP_LN2_LO)));
    __m256 p = _mm256_set1_ps(COLIBRI_EXP_C7);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(COLIBRI_EXP_C6));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(COLIBRI_EXP_C5));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(COLIBRI_EXP_C4));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(COLIBRI_EXP_C3));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(COLIBRI_EXP_C2));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f));
    __m256i k = _mm256_cvttps_epi32(n), half = _mm256_srai_epi32(k, 1), bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(k, half), bias), 23));
    __m256 e = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    e = _mm256_blendv_ps(e, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, _mm256_set1_ps(COLIBRI_EXP_MAX), _CMP_GT_OQ));
    e = _mm256_blendv_ps(e, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(COLIBRI_EXP_MIN), _CMP_LT_OQ));
    return _mm256_blendv_ps(e, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

float colibri_sum_f32_avx2(const float *x, int64_t n) {
    __m256 acc = _mm256_setzero_ps();   /* colibri_sum_f32's acc[0..7] */
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(x + i));
    float tail = 0.0f;
    for (; i < n; i++) tail += x[i];
    __m128 pairs = _mm_hadd_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));   /* a0+a1 .. a6+a7 */
    __m128 quads = _mm_hadd_ps(pairs, pairs);
    return (_mm_cvtss_f32(quads) + _mm_cvtss_f32(_mm_movehdup_ps(quads))) + tail;
}

void colibri_softmax_avx2(float *x, int64_t n) {
    __m256 m = _mm256_set1_ps(x[0]);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) m = _mm256_max_ps(_mm256_loadu_ps(x + i), m);   /* NaN x keeps m, as the reference */
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    float max = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    for (; i < n; i++) max = x[i] > max ? x[i] : max;
    __m256 mv = _mm256_set1_ps(max);
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, colibri_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv)));
    for (; i < n; i++) x[i] = colibri_expf(x[i] - max);
    float inv_sum = 1.0f / colibri_sum_f32_avx2(x, n);
    __m256 inv = _mm256_set1_ps(inv_sum);
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
    for (; i < n; i++) x[i] *= inv_sum;
}

void colibri_silu_mul_avx2(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 gv = _mm256_loadu_ps(g + i);
        __m256 s = _mm256_div_ps(gv, _mm256_add_ps(one, colibri_exp8(_mm256_xor_ps(gv, sign))));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    colibri_silu_mul(g + i, u + i, n - i);
}
