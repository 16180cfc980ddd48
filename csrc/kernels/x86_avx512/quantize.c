/*
 * x86_avx512/quantize.c — activation rows into Q8_0 / Q8_1 / Q8_S blocks with
 * AVX-512, bitwise the reference (quant.c), one block of 32 as two 16-lane
 * vectors:
 *   amax: lane-wise max_ps(|x|, m) keeps m where |x| is NaN, as the
 *         reference's `ax > amax ? ax : amax` does; max is exact, so the
 *         horizontal reduction's order does not matter;
 *   q:    roundf(x * id) as trunc + (frac >= 0.5) - (frac <= -0.5) (frac is
 *         exact), clamped to ±127, NaN to 0 — colibri_round_i8 lane by lane;
 *   d, s: the reference's scalar f32 → f16 conversion, once per block.
 */
#include <immintrin.h>

#include "../isa.h"
#include "../kernels.h"
#include "../quant.h"

/* Quantizes x: [32] into qs: [32]; returns d and sets *sum to the sum of qs. */
static inline float colibri_q8_block_avx512(const float *x, int8_t *qs, int32_t *sum) {
    __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
    __m512 m = _mm512_max_ps(_mm512_abs_ps(x1), _mm512_max_ps(_mm512_abs_ps(x0), _mm512_setzero_ps()));
    float d = _mm512_reduce_max_ps(m) / 127.0f;
    __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    __m512 one = _mm512_set1_ps(1.0f), lim = _mm512_set1_ps(127.0f);
    __m512i q[2];   /* q: [2][16] int32 */
    for (int h = 0; h < 2; h++) {
        __m512 v = _mm512_mul_ps(h ? x1 : x0, id);
        __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        __m512 frac = _mm512_sub_ps(v, t);
        t = _mm512_mask_add_ps(t, _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ), t, one);
        t = _mm512_mask_sub_ps(t, _mm512_cmp_ps_mask(frac, _mm512_set1_ps(-0.5f), _CMP_LE_OQ), t, one);
        t = _mm512_min_ps(_mm512_max_ps(t, _mm512_sub_ps(_mm512_setzero_ps(), lim)), lim);
        t = _mm512_mask_mov_ps(t, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_setzero_ps());
        q[h] = _mm512_cvtps_epi32(t);   /* integral values: exact */
        _mm_storeu_si128((__m128i *)(qs + 16 * h), _mm512_cvtepi32_epi8(q[h]));
    }
    *sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q[0], q[1]));
    return d;
}

COLIBRI_Q8_S_ROW_QUANTIZER(colibri_quantize_q8_s_avx512, colibri_q8_block_avx512)
