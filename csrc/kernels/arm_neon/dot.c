/*
 * arm_neon/dot.c — every weight type's dot product with AArch64 Advanced SIMD
 * (baseline ARMv8-A: no dotprod or fp16 arithmetic extensions), 4 rows at a
 * time sharing the activation loads, prefetching the rows ahead as one sweep
 * in address order (isa.h). Bitwise equal to the reference:
 *   float types: per row two 4-lane accumulators as the reference's
 *     acc[0..7], separate multiply and add (no FMA), its pairwise combine;
 *   block types: each block's exact int32 sum per row by widening int8
 *     multiplies (int16 lanes of two products, |.| <= 2·128·127 < 2^15:
 *     activations stay within ±127), the 4 rows' sums reduced together by
 *     pairwise adds, then the reference's float step on 4 lanes, the f16
 *     scales widened exactly by the hardware (vcvt_f32_f16) four at a time.
 * One row at a time, with a horizontal add and a software f16 conversion per
 * block, took about twice the instructions per block (docs/KERNELS.md).
 */
#include <arm_neon.h>

#include "../isa.h"
#include "../quant.h"

/* ---- float types --------------------------------------------------------------- */

static inline float32x4_t colibri_load4_f32(const void *w, int64_t i) {
    return vld1q_f32((const float *)w + i);
}
static inline float32x4_t colibri_load4_f16(const void *w, int64_t i) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)w + i)));
}
static inline float32x4_t colibri_load4_bf16(const void *w, int64_t i) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)w + i), 16));
}

static inline float colibri_load1_f32(const void *w, int64_t i) { return ((const float *)w)[i]; }
static inline float colibri_load1_f16(const void *w, int64_t i) {
    return colibri_f16_to_f32(((const uint16_t *)w)[i]);
}
static inline float colibri_load1_bf16(const void *w, int64_t i) {
    return colibri_bf16_to_f32(((const uint16_t *)w)[i]);
}

/* The reference's combine of one row's acc[0..3] (lo) and acc[4..7] (hi) for
 * 4 rows at once: lane r = ((a0+a1)+(a2+a3)) + ((a4+a5)+(a6+a7)) of row r. */
static inline float32x4_t colibri_combine4(const float32x4_t lo[4], const float32x4_t hi[4]) {
    float32x4_t r01 = vpaddq_f32(vpaddq_f32(lo[0], hi[0]), vpaddq_f32(lo[1], hi[1]));   /* r0 x2, r1 x2 */
    float32x4_t r23 = vpaddq_f32(vpaddq_f32(lo[2], hi[2]), vpaddq_f32(lo[3], hi[3]));
    return vpaddq_f32(r01, r23);
}

/* out[r] = w[r] . x for 4 rows (ELEM: bytes per element, for the prefetch). */
#define COLIBRI_NEON_FLOAT_CORE(NAME, LOAD4, LOAD1, ELEM)                                      \
    static void NAME(const char *const w[4], const char *ahead, const void *xv, int64_t n,     \
                     float out[4]) {                                                           \
        const float *x = (const float *)xv;                                                    \
        float32x4_t lo[4], hi[4];   /* per row: acc[0..3], acc[4..7] */                        \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) lo[r] = hi[r] = vdupq_n_f32(0.0f);  \
        int64_t i = 0;                                                                         \
        for (; i + 8 <= n; i += 8) {                                                           \
            COLIBRI_PREFETCH_SPAN(ahead + 4 * (ELEM) * i, 32 * (ELEM));                         \
            float32x4_t x0 = vld1q_f32(x + i), x1 = vld1q_f32(x + i + 4);                      \
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {                              \
                lo[r] = vaddq_f32(lo[r], vmulq_f32(LOAD4(w[r], i), x0));                       \
                hi[r] = vaddq_f32(hi[r], vmulq_f32(LOAD4(w[r], i + 4), x1));                   \
            }                                                                                  \
        }                                                                                      \
        vst1q_f32(out, colibri_combine4(lo, hi));                                              \
        for (int r = 0; r < 4; r++) {                                                          \
            float tail = 0.0f;                                                                 \
            for (int64_t t = i; t < n; t++) tail += LOAD1(w[r], t) * x[t];                     \
            out[r] += tail;                                                                    \
        }                                                                                      \
    }

COLIBRI_NEON_FLOAT_CORE(colibri_dot4_f32_neon, colibri_load4_f32, colibri_load1_f32, 4)
COLIBRI_NEON_FLOAT_CORE(colibri_dot4_f16_neon, colibri_load4_f16, colibri_load1_f16, 2)
COLIBRI_NEON_FLOAT_CORE(colibri_dot4_bf16_neon, colibri_load4_bf16, colibri_load1_bf16, 2)

/* ---- block types ---------------------------------------------------------------- */

/* The 4 partial int32 sums of sum_j q[j]·a[j] over one block's 32 int8 pairs
 * (q = q0, q1; a = a0, a1): int16 lanes of two products, then pairwise into
 * int32 — exact. */
static inline int32x4_t colibri_isum32x4(int8x16_t q0, int8x16_t q1, int8x16_t a0, int8x16_t a1) {
    int16x8_t p0 = vmlal_s8(vmull_s8(vget_low_s8(q0), vget_low_s8(a0)), vget_high_s8(q0), vget_high_s8(a0));
    int16x8_t p1 = vmlal_s8(vmull_s8(vget_low_s8(q1), vget_low_s8(a1)), vget_high_s8(q1), vget_high_s8(a1));
    return vpadalq_s16(vpaddlq_s16(p0), p1);
}

/* The f16 values a..d as 4 floats (exact). */
static inline float32x4_t colibri_f16x4_neon(uint16_t a, uint16_t b, uint16_t c, uint16_t d) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vcreate_u16(colibri_f16x4_u64(a, b, c, d))));
}

/* The f16 value h in all 4 lanes as floats (exact). */
static inline float32x4_t colibri_f16_dup_neon(uint16_t h) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h)));
}

/* A weight block's 32 quants as signed bytes: q0 elements 0..15, q1 16..31. */
static inline void colibri_prep_q8_0_neon(const colibri_block_q8_0 *w, int8x16_t *q0, int8x16_t *q1) {
    *q0 = vld1q_s8(w->qs), *q1 = vld1q_s8(w->qs + 16);
}
static inline void colibri_nibbles_neon(const uint8_t *qs, uint8_t offset, int8x16_t *lo, int8x16_t *hi) {
    uint8x16_t q = vld1q_u8(qs);
    *lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f))), vdupq_n_s8((int8_t)offset));
    *hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vdupq_n_s8((int8_t)offset));
}
static inline void colibri_prep_q4_0_neon(const colibri_block_q4_0 *w, int8x16_t *q0, int8x16_t *q1) {
    colibri_nibbles_neon(w->qs, 8, q0, q1);
}
static inline void colibri_prep_q4_1_neon(const colibri_block_q4_1 *w, int8x16_t *q0, int8x16_t *q1) {
    colibri_nibbles_neon(w->qs, 0, q0, q1);
}

/* Q4_1's offset term m_w_r * s_a added to v (lanes = rows); others: v. */
#define COLIBRI_NEON_NO_OFFSET(v, b) (v)
#define COLIBRI_NEON_Q4_1_OFFSET(v, b)                                                                  \
    vaddq_f32((v), vmulq_f32(colibri_f16x4_neon(w0[b].m, w1[b].m, w2[b].m, w3[b].m), colibri_f16_dup_neon(a[b].s)))

/* out[r] = w[r] . a for 4 rows of WBLOCK against ABLOCK activations: per
 * block, lane r does exactly the reference's step for row r,
 *   acc_r += (float)isum_r * (d_w_r * d_a)   [+ m_w_r * s_a for Q4_1]. */
#define COLIBRI_NEON_BLOCK_CORE(NAME, WBLOCK, ABLOCK, PREP, OFFSET)                                      \
    static void NAME(const char *const w[4], const char *ahead, const void *xv, int64_t n, float out[4]) { \
        const ABLOCK *a = (const ABLOCK *)xv;   /* a: [n/32] */                                         \
        const WBLOCK *w0 = (const WBLOCK *)w[0], *w1 = (const WBLOCK *)w[1];                            \
        const WBLOCK *w2 = (const WBLOCK *)w[2], *w3 = (const WBLOCK *)w[3];                            \
        float32x4_t acc = vdupq_n_f32(0.0f);   /* acc: [4] rows */                                      \
        for (int64_t b = 0; b < n / COLIBRI_QK; b++) {                                                  \
            COLIBRI_PREFETCH_SPAN(ahead + 4 * b * (int64_t)sizeof(WBLOCK), 4 * sizeof(WBLOCK));          \
            int8x16_t a0 = vld1q_s8(a[b].qs), a1 = vld1q_s8(a[b].qs + 16), q0, q1;                       \
            int32x4_t s[4];   /* s: [row] partial sums */                                               \
            PREP(&w0[b], &q0, &q1), s[0] = colibri_isum32x4(q0, q1, a0, a1);                            \
            PREP(&w1[b], &q0, &q1), s[1] = colibri_isum32x4(q0, q1, a0, a1);                            \
            PREP(&w2[b], &q0, &q1), s[2] = colibri_isum32x4(q0, q1, a0, a1);                            \
            PREP(&w3[b], &q0, &q1), s[3] = colibri_isum32x4(q0, q1, a0, a1);                            \
            int32x4_t isum = vpaddq_s32(vpaddq_s32(s[0], s[1]), vpaddq_s32(s[2], s[3]));   /* [row] */   \
            float32x4_t scale = vmulq_f32(colibri_f16x4_neon(w0[b].d, w1[b].d, w2[b].d, w3[b].d),         \
                                          colibri_f16_dup_neon(a[b].d));                                \
            acc = vaddq_f32(acc, OFFSET(vmulq_f32(vcvtq_f32_s32(isum), scale), b));                     \
        }                                                                                               \
        vst1q_f32(out, acc);                                                                            \
    }

COLIBRI_NEON_BLOCK_CORE(colibri_dot4_q8_0_neon, colibri_block_q8_0, colibri_block_q8_0, colibri_prep_q8_0_neon,
                        COLIBRI_NEON_NO_OFFSET)
COLIBRI_NEON_BLOCK_CORE(colibri_dot4_q4_0_neon, colibri_block_q4_0, colibri_block_q8_0, colibri_prep_q4_0_neon,
                        COLIBRI_NEON_NO_OFFSET)
COLIBRI_NEON_BLOCK_CORE(colibri_dot4_q4_1_neon, colibri_block_q4_1, colibri_block_q8_1, colibri_prep_q4_1_neon,
                        COLIBRI_NEON_Q4_1_OFFSET)

COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_f32_neon, colibri_dot4_f32_neon)
COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_f16_neon, colibri_dot4_f16_neon)
COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_bf16_neon, colibri_dot4_bf16_neon)
COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_q8_0_neon, colibri_dot4_q8_0_neon)
COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_q4_0_neon, colibri_dot4_q4_0_neon)
COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_q4_1_neon, colibri_dot4_q4_1_neon)

COLIBRI_GEMM_EACH_DEFINE(void colibri_gemm_f32_neon, colibri_dot_rows_f32_neon)
COLIBRI_GEMM_EACH_DEFINE(void colibri_gemm_f16_neon, colibri_dot_rows_f16_neon)
COLIBRI_GEMM_EACH_DEFINE(void colibri_gemm_bf16_neon, colibri_dot_rows_bf16_neon)
COLIBRI_GEMM_EACH_DEFINE(void colibri_gemm_q8_0_neon, colibri_dot_rows_q8_0_neon)
COLIBRI_GEMM_EACH_DEFINE(void colibri_gemm_q4_0_neon, colibri_dot_rows_q4_0_neon)
COLIBRI_GEMM_EACH_DEFINE(void colibri_gemm_q4_1_neon, colibri_dot_rows_q4_1_neon)
