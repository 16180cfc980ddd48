/*
 * arm_neon/dot.c — every weight type's dot product with AArch64 Advanced SIMD
 * (baseline ARMv8-A: no dotprod or fp16 arithmetic extensions), 4 rows at a
 * time sharing the activation loads, prefetching the rows ahead as one sweep
 * in address order (isa.h). Bitwise equal to the reference:
 *   float types: per row two 4-lane accumulators as the reference's
 *     acc[0..7], separate multiply and add (no FMA), its pairwise combine;
 *   block types: block_core.h's and kquant_core.h's loops, each block's
 *     exact int32 partial sums per row by widening int8 multiplies (int16
 *     lanes of two products, |.| <= 2·128·127 < 2^15: activations stay
 *     within ±127).
 * One row at a time, with a horizontal add and a software f16 conversion per
 * block, took about twice the instructions per block (docs/KERNELS.md).
 */
#include <arm_neon.h>

#include "../isa.h"
#include "../quant.h"
#include "kquant_core.h"

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

/* The same over 16 pairs (one half of a group; kquant_core.h). */
static inline int32x4_t colibri_isum16x4(int8x16_t q, int8x16_t a) {
    return vpaddlq_s16(vmlal_s8(vmull_s8(vget_low_s8(q), vget_low_s8(a)), vget_high_s8(q), vget_high_s8(a)));
}

COLIBRI_NEON_ALL_BLOCK_KERNELS(neon, colibri_isum32x4, colibri_isum16x4)

COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_f32_neon, colibri_dot4_f32_neon)
COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_f16_neon, colibri_dot4_f16_neon)
COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_bf16_neon, colibri_dot4_bf16_neon)

COLIBRI_GEMM_EACH_DEFINE(void colibri_gemm_f32_neon, colibri_dot_rows_f32_neon)
COLIBRI_GEMM_EACH_DEFINE(void colibri_gemm_f16_neon, colibri_dot_rows_f16_neon)
COLIBRI_GEMM_EACH_DEFINE(void colibri_gemm_bf16_neon, colibri_dot_rows_bf16_neon)
