/*
 * x86_avx512/quantize.c — activation rows into Q8_H / Q8_S blocks with
 * AVX-512, bitwise the reference (quant.c), one block of 32 as two 16-lane
 * vectors (Q8_H: one per half, with its own 1/step):
 *   amax: lane-wise max_ps(|x|, m) keeps m where |x| is NaN, as the
 *         reference's `ax > amax ? ax : amax` does; max is exact, so the
 *         horizontal reduction's order does not matter;
 *   q:    roundf(x * id) as trunc + (frac >= 0.5) - (frac <= -0.5) (frac is
 *         exact), clamped to ±127, NaN to 0 — colibri_round_i8 lane by lane;
 *   d, k: the reference's scalar arithmetic, once per block (per half).
 */
#include <immintrin.h>

#include "../isa.h"
#include "../kernels.h"
#include "../quant.h"

/* roundf(v) as int32 for 16 lanes (v = x * id), clamped to ±127, NaN to 0. */
static inline __m512i colibri_round16_avx512(__m512 v) {
    __m512 one = _mm512_set1_ps(1.0f), lim = _mm512_set1_ps(127.0f);
    __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m512 frac = _mm512_sub_ps(v, t);
    t = _mm512_mask_add_ps(t, _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ), t, one);
    t = _mm512_mask_sub_ps(t, _mm512_cmp_ps_mask(frac, _mm512_set1_ps(-0.5f), _CMP_LE_OQ), t, one);
    t = _mm512_min_ps(_mm512_max_ps(t, _mm512_sub_ps(_mm512_setzero_ps(), lim)), lim);
    t = _mm512_mask_mov_ps(t, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_setzero_ps());
    return _mm512_cvtps_epi32(t);   /* integral values: exact */
}

/* The max of |x| over 16 lanes, NaN lanes ignored. */
static inline float colibri_amax16_avx512(__m512 x) {
    return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x), _mm512_setzero_ps()));
}

/* Quantizes x: [32] into qs: [32]; returns d and sets *sum to the sum of qs. */
static inline float colibri_q8_block_avx512(const float *x, int8_t *qs, int32_t *sum) {
    __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
    __m512 m = _mm512_max_ps(_mm512_abs_ps(x1), _mm512_max_ps(_mm512_abs_ps(x0), _mm512_setzero_ps()));
    float d = _mm512_reduce_max_ps(m) / 127.0f;
    __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    __m512i q[2];   /* q: [2][16] int32 */
    for (int h = 0; h < 2; h++) {
        q[h] = colibri_round16_avx512(_mm512_mul_ps(h ? x1 : x0, id));
        _mm_storeu_si128((__m128i *)(qs + 16 * h), _mm512_cvtepi32_epi8(q[h]));
    }
    *sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q[0], q[1]));
    return d;
}

/* Q8_H (quant.h): one 16-lane vector per half, its max by vector, d and k in
 * scalar as the reference computes them, the lanes rounded with the half's 1/step. */
static inline void colibri_q8_h_block_avx512(const float *x, colibri_block_q8_h *b) {
    __m512 xh[2] = {_mm512_loadu_ps(x), _mm512_loadu_ps(x + 16)};   /* xh: [half][16] */
    float amax_h[2] = {colibri_amax16_avx512(xh[0]), colibri_amax16_avx512(xh[1])};
    float amax = amax_h[0] > amax_h[1] ? amax_h[0] : amax_h[1];
    b->d = amax / 1016.0f;
    for (int h = 0; h < 2; h++) {
        int16_t k = colibri_q8_h_mult(amax_h[h], amax);
        float step = b->d * (float)k;
        __m512i q = colibri_round16_avx512(_mm512_mul_ps(xh[h], _mm512_set1_ps(step != 0.0f ? 1.0f / step : 0.0f)));
        _mm_storeu_si128((__m128i *)(b->qs + 16 * h), _mm512_cvtepi32_epi8(q));
        b->k[h] = k;
        b->sum[h] = (int16_t)(k * _mm512_reduce_add_epi32(q));
    }
}

void colibri_quantize_q8_h_avx512(const float *x, void *dst, int64_t n) {
    colibri_block_q8_h *b = (colibri_block_q8_h *)dst;   /* b: [n/32] */
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) colibri_q8_h_block_avx512(x + i * COLIBRI_QK, &b[i]);
}

COLIBRI_Q8_S_ROW_QUANTIZER(colibri_quantize_q8_s_avx512, colibri_q8_block_avx512)
