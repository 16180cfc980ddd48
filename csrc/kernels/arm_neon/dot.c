/*
 * arm_neon/dot.c — every weight type's dot product with AArch64 Advanced SIMD
 * (baseline ARMv8-A: no dotprod or fp16 arithmetic extensions), one row at a
 * time. Bitwise equal to the reference: float types keep two 4-lane
 * accumulators as the reference's acc[0..7] with separate multiply and add
 * (no FMA) and its pairwise combine; block types compute each block's exact
 * int32 sum with widening int8 multiplies, then the reference's float step.
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

#define COLIBRI_NEON_FLOAT_DOT(NAME, LOAD4, LOAD1)                                    \
    static float NAME(const void *w, const void *xv, int64_t n) {                     \
        const float *x = (const float *)xv;                                           \
        float32x4_t lo = vdupq_n_f32(0.0f), hi = lo;   /* acc[0..3], acc[4..7] */     \
        int64_t i = 0;                                                                \
        for (; i + 8 <= n; i += 8) {                                                  \
            lo = vaddq_f32(lo, vmulq_f32(LOAD4(w, i), vld1q_f32(x + i)));             \
            hi = vaddq_f32(hi, vmulq_f32(LOAD4(w, i + 4), vld1q_f32(x + i + 4)));     \
        }                                                                             \
        float32x4_t pairs = vpaddq_f32(lo, hi);   /* a0+a1, a2+a3, a4+a5, a6+a7 */    \
        float32x4_t quads = vpaddq_f32(pairs, pairs);                                 \
        float tail = 0.0f;                                                            \
        for (; i < n; i++) tail += LOAD1(w, i) * x[i];                                \
        return (vgetq_lane_f32(quads, 0) + vgetq_lane_f32(quads, 1)) + tail;          \
    }

COLIBRI_NEON_FLOAT_DOT(colibri_dot_f32_neon, colibri_load4_f32, colibri_load1_f32)
COLIBRI_NEON_FLOAT_DOT(colibri_dot_f16_neon, colibri_load4_f16, colibri_load1_f16)
COLIBRI_NEON_FLOAT_DOT(colibri_dot_bf16_neon, colibri_load4_bf16, colibri_load1_bf16)

/* ---- block types ---------------------------------------------------------------- */

/* sum_j q[j]·a[j] over 32 int8 pairs, exact: q = (q0, q1), a: [32]. Each int16
 * lane adds two products, |.| <= 2·128·127 < 2^15. */
static inline int32_t colibri_isum32(int8x16_t q0, int8x16_t q1, const int8_t *a) {
    int8x16_t a0 = vld1q_s8(a), a1 = vld1q_s8(a + 16);
    int16x8_t p0 = vmlal_s8(vmull_s8(vget_low_s8(q0), vget_low_s8(a0)), vget_high_s8(q0), vget_high_s8(a0));
    int16x8_t p1 = vmlal_s8(vmull_s8(vget_low_s8(q1), vget_low_s8(a1)), vget_high_s8(q1), vget_high_s8(a1));
    return vaddvq_s32(vaddq_s32(vpaddlq_s16(p0), vpaddlq_s16(p1)));
}

/* qs: [16] packed nibbles → their low (elements 0..15) and high (16..31) nibbles. */
static inline void colibri_nibbles(const uint8_t *qs, int8x16_t *lo, int8x16_t *hi) {
    uint8x16_t q = vld1q_u8(qs);
    *lo = vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f)));
    *hi = vreinterpretq_s8_u8(vshrq_n_u8(q, 4));
}

static float colibri_dot_q8_0_neon(const void *wv, const void *av, int64_t n) {
    const colibri_block_q8_0 *w = (const colibri_block_q8_0 *)wv;   /* w: [n/32] */
    const colibri_block_q8_0 *a = (const colibri_block_q8_0 *)av;   /* a: [n/32] */
    float acc = 0.0f;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        int32_t isum = colibri_isum32(vld1q_s8(w[i].qs), vld1q_s8(w[i].qs + 16), a[i].qs);
        float scale = colibri_f16_to_f32(w[i].d) * colibri_f16_to_f32(a[i].d);
        acc += (float)isum * scale;
    }
    return acc;
}

static float colibri_dot_q4_0_neon(const void *wv, const void *av, int64_t n) {
    const colibri_block_q4_0 *w = (const colibri_block_q4_0 *)wv;   /* w: [n/32] */
    const colibri_block_q8_0 *a = (const colibri_block_q8_0 *)av;   /* a: [n/32] */
    float acc = 0.0f;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        int8x16_t lo, hi;
        colibri_nibbles(w[i].qs, &lo, &hi);
        int8x16_t eight = vdupq_n_s8(8);
        int32_t isum = colibri_isum32(vsubq_s8(lo, eight), vsubq_s8(hi, eight), a[i].qs);
        float scale = colibri_f16_to_f32(w[i].d) * colibri_f16_to_f32(a[i].d);
        acc += (float)isum * scale;
    }
    return acc;
}

static float colibri_dot_q4_1_neon(const void *wv, const void *av, int64_t n) {
    const colibri_block_q4_1 *w = (const colibri_block_q4_1 *)wv;   /* w: [n/32] */
    const colibri_block_q8_1 *a = (const colibri_block_q8_1 *)av;   /* a: [n/32] */
    float acc = 0.0f;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        int8x16_t lo, hi;
        colibri_nibbles(w[i].qs, &lo, &hi);
        int32_t isum = colibri_isum32(lo, hi, a[i].qs);
        float scale = colibri_f16_to_f32(w[i].d) * colibri_f16_to_f32(a[i].d);
        float offset = colibri_f16_to_f32(w[i].m) * colibri_f16_to_f32(a[i].s);
        acc += (float)isum * scale + offset;
    }
    return acc;
}

COLIBRI_DOT_ROWS_EACH_DEFINE(void colibri_dot_rows_f32_neon, colibri_dot_f32_neon)
COLIBRI_DOT_ROWS_EACH_DEFINE(void colibri_dot_rows_f16_neon, colibri_dot_f16_neon)
COLIBRI_DOT_ROWS_EACH_DEFINE(void colibri_dot_rows_bf16_neon, colibri_dot_bf16_neon)
COLIBRI_DOT_ROWS_EACH_DEFINE(void colibri_dot_rows_q8_0_neon, colibri_dot_q8_0_neon)
COLIBRI_DOT_ROWS_EACH_DEFINE(void colibri_dot_rows_q4_0_neon, colibri_dot_q4_0_neon)
COLIBRI_DOT_ROWS_EACH_DEFINE(void colibri_dot_rows_q4_1_neon, colibri_dot_q4_1_neon)

COLIBRI_GEMM_EACH_DEFINE(void colibri_gemm_f32_neon, colibri_dot_rows_f32_neon)
COLIBRI_GEMM_EACH_DEFINE(void colibri_gemm_f16_neon, colibri_dot_rows_f16_neon)
COLIBRI_GEMM_EACH_DEFINE(void colibri_gemm_bf16_neon, colibri_dot_rows_bf16_neon)
COLIBRI_GEMM_EACH_DEFINE(void colibri_gemm_q8_0_neon, colibri_dot_rows_q8_0_neon)
COLIBRI_GEMM_EACH_DEFINE(void colibri_gemm_q4_0_neon, colibri_dot_rows_q4_0_neon)
COLIBRI_GEMM_EACH_DEFINE(void colibri_gemm_q4_1_neon, colibri_dot_rows_q4_1_neon)
