/*
 * x86_avx2/quantize.c — activation rows into Q8_H / Q8_S blocks with AVX2,
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

/* The max of the 8 lanes of m (no NaN among them). */
static inline float colibri_hmax_avx2(__m256 m) {
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    return _mm_cvtss_f32(m4);
}

/* The running max of |v| over m's lanes: max_ps returns its second operand, m,
 * for a NaN |v|, as the reference's `ax > m ? ax : m` keeps m. */
static inline __m256 colibri_amax_step_avx2(__m256 v, __m256 m) {
    return _mm256_max_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), v), m);
}

/* roundf(v * id) as int32, clamped to ±127, NaN to 0: trunc, then ±1 where the
 * exact fraction reaches ±0.5 (colibri_round_i8). */
static inline __m256i colibri_round8_avx2(__m256 v, __m256 id) {
    __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
    __m256 lim = _mm256_set1_ps(127.0f);
    __m256 x_id = _mm256_mul_ps(v, id);
    __m256 t = _mm256_round_ps(x_id, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m256 frac = _mm256_sub_ps(x_id, t);
    t = _mm256_add_ps(t, _mm256_and_ps(_mm256_cmp_ps(frac, half, _CMP_GE_OQ), one));
    t = _mm256_sub_ps(t, _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_xor_ps(half, sign), _CMP_LE_OQ), one));
    t = _mm256_min_ps(_mm256_max_ps(t, _mm256_xor_ps(lim, sign)), lim);
    t = _mm256_andnot_ps(_mm256_cmp_ps(x_id, x_id, _CMP_UNORD_Q), t);   /* NaN → +0 */
    return _mm256_cvtps_epi32(t);   /* integral values: exact */
}

/* q: [4][8] int32 in [-127, 127] → qs: [32] int8 in order. */
static inline void colibri_store_q32_avx2(const __m256i q[4], int8_t *qs) {
    /* packs interleave 128-bit lanes: [q0 lo, q1 lo, q0 hi, q1 hi]; the permute restores order */
    __m256i q01 = _mm256_packs_epi32(q[0], q[1]), q23 = _mm256_packs_epi32(q[2], q[3]);
    __m256i bytes = _mm256_packs_epi16(q01, q23);
    bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)qs, bytes);
}

/* The sum of the 8 int32 lanes of s. */
static inline int32_t colibri_hsum_avx2(__m256i s) {
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    return _mm_cvtsi128_si32(s4);
}

/* Quantizes x: [32] into qs: [32]; returns d and sets *sum to the sum of qs. */
static inline float colibri_q8_block_avx2(const float *x, int8_t *qs, int32_t *sum) {
    __m256 m = _mm256_setzero_ps(), v[4];   /* v: [4][8] */
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        m = colibri_amax_step_avx2(v[k], m);
    }
    float d = colibri_hmax_avx2(m) / 127.0f;
    __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    __m256i q[4];   /* q: [4][8] int32 */
    for (int k = 0; k < 4; k++) q[k] = colibri_round8_avx2(v[k], id);
    colibri_store_q32_avx2(q, qs);
    *sum = colibri_hsum_avx2(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
    return d;
}

/* Q8_H (quant.h): each half's max by vector, d and the multipliers in scalar as
 * the reference computes them, then each half rounded with its own 1/step. */
static inline void colibri_q8_h_block_avx2(const float *x, colibri_block_q8_h *b) {
    __m256 v[4];   /* v: [4][8], halves v[0..1] and v[2..3] */
    for (int k = 0; k < 4; k++) v[k] = _mm256_loadu_ps(x + 8 * k);
    float amax_h[2];
    for (int h = 0; h < 2; h++) {
        amax_h[h] = colibri_hmax_avx2(colibri_amax_step_avx2(v[2 * h + 1], colibri_amax_step_avx2(v[2 * h], _mm256_setzero_ps())));
    }
    float amax = amax_h[0] > amax_h[1] ? amax_h[0] : amax_h[1];
    b->d = amax / 1016.0f;
    __m256i q[4];   /* q: [4][8] int32 */
    for (int h = 0; h < 2; h++) {
        int16_t k = colibri_q8_h_mult(amax_h[h], amax);
        float step = b->d * (float)k;
        __m256 id = _mm256_set1_ps(step != 0.0f ? 1.0f / step : 0.0f);
        q[2 * h] = colibri_round8_avx2(v[2 * h], id);
        q[2 * h + 1] = colibri_round8_avx2(v[2 * h + 1], id);
        b->k[h] = k;
        b->sum[h] = (int16_t)(k * colibri_hsum_avx2(_mm256_add_epi32(q[2 * h], q[2 * h + 1])));
    }
    colibri_store_q32_avx2(q, b->qs);
}

void colibri_quantize_q8_h_avx2(const float *x, void *dst, int64_t n) {
    colibri_block_q8_h *b = (colibri_block_q8_h *)dst;   /* b: [n/32] */
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) colibri_q8_h_block_avx2(x + i * COLIBRI_QK, &b[i]);
}

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
