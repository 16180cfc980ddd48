/*
 * x86_avx2/quantize.c — activation rows into Q8_0 / Q8_1 / Q8_S blocks with AVX2,
 * bitwise the reference (quant.c), one block of 32 as four 8-lane vectors;
 * the rounding and NaN rules are those of x86_avx512/quantize.c:
 * max_ps(|x|, m) keeps m for a NaN |x|; q = trunc + (frac >= 0.5) -
 * (frac <= -0.5), clamped to ±127, NaN to 0; scalar f16 scales.
 * Also f32 rows narrowed to f16 for the KV cache (F16C).
 */
#include <immintrin.h>

#include "../isa.h"
#include "../kernels.h"
#include "../quant.h"

/* Quantizes x: [32] into qs: [32]; returns d and sets *sum to the sum of qs. */
static inline float colibri_q8_block_avx2(const float *x, int8_t *qs, int32_t *sum) {
    __m256 sign = _mm256_set1_ps(-0.0f), m = _mm256_setzero_ps(), v[4];   /* v: [4][8] */
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        m = _mm256_max_ps(_mm256_andnot_ps(sign, v[k]), m);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    float d = _mm_cvtss_f32(m4) / 127.0f;
    __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f), lim = _mm256_set1_ps(127.0f);
    __m256i q[4];   /* q: [4][8] int32 */
    for (int k = 0; k < 4; k++) {
        __m256 x_id = _mm256_mul_ps(v[k], id);
        __m256 t = _mm256_round_ps(x_id, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        __m256 frac = _mm256_sub_ps(x_id, t);
        t = _mm256_add_ps(t, _mm256_and_ps(_mm256_cmp_ps(frac, half, _CMP_GE_OQ), one));
        t = _mm256_sub_ps(t, _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_xor_ps(half, sign), _CMP_LE_OQ), one));
        t = _mm256_min_ps(_mm256_max_ps(t, _mm256_xor_ps(lim, sign)), lim);
        t = _mm256_andnot_ps(_mm256_cmp_ps(x_id, x_id, _CMP_UNORD_Q), t);   /* NaN → +0 */
        q[k] = _mm256_cvtps_epi32(t);   /* integral values: exact */
    }
    /* packs interleave 128-bit lanes: [q0 lo, q1 lo, q0 hi, q1 hi]; the permute restores order */
    __m256i q01 = _mm256_packs_epi32(q[0], q[1]), q23 = _mm256_packs_epi32(q[2], q[3]);
    __m256i bytes = _mm256_packs_epi16(q01, q23);
    bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)qs, bytes);
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    *sum = _mm_cvtsi128_si32(s4);
    return d;
}

COLIBRI_Q8_ROW_QUANTIZERS(colibri_quantize_q8_0_avx2, colibri_quantize_q8_1_avx2, colibri_q8_block_avx2)
COLIBRI_Q8_S_ROW_QUANTIZER(colibri_quantize_q8_s_avx2, colibri_q8_block_avx2)

/* dst: [n] f16 = src: [n] rounded to nearest even, 8 at a time by F16C's
 * vcvtps2ph with the rounding given in the instruction (MXCSR plays no part),
 * bitwise colibri_f32_to_f16: subnormal results kept, overflow to inf, a NaN
 * quieted with its top payload bits and sign, as the reference does. */
void colibri_f16_row_from_f32_avx2(const float *src, void *dst, int64_t n) {
    uint16_t *d = (uint16_t *)dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i *)(d + i), h);
    }
    for (; i < n; i++) d[i] = colibri_f32_to_f16(src[i]);
}
