/*
 * arm_neon/block_core.h — the 4-row loop over blocks of 32 shared by the ARM
 * block kernels (arm_neon/dot.c: widening multiplies; arm_dotprod/dot.c:
 * sdot); included only by files compiled for AArch64 Advanced SIMD. It serves
 * the 32-element types without sub-block scales: Q8_0, Q4_0, Q4_1, Q5_0,
 * Q5_1, IQ4_NL (Q8_H activations) and MXFP4 (Q8_S); kquant_core.h the
 * 256-element ones.
 *
 * Per block b the 4 rows' exact integer block dots isum_r (q0, q1: the
 * weight block's 32 quants as signed bytes, PREP's): against Q8_H, the two
 * halves' sums apart (HALVES4: ISUM16 per half and row, the 4 rows' partials
 * reduced together by pairwise adds), isum_r = k_0 I_0r + k_1 I_1r; against
 * Q8_S, one ISUM of the 32 pairs per row, reduced likewise. Then lane r does
 * exactly the reference's float step for row r, the 4 rows' scales widened
 * exactly (DW4: f16 by the hardware's vcvt_f32_f16, or MXFP4's powers of
 * two), the activation's f32 d_a:
 *   acc_r += (float)isum_r * (d_w_r * d_a)   [+ m_w_r * (d_a * (float)(A_0 + A_1)) for Q4_1]
 *                                            [- (float)(A_0 + A_1) * (-m_w_r * d_a) for Q5_1]
 * (A_h: the activation's stored half sums, which carry k).
 * The next group's rows are prefetched as one sweep in address order (isa.h).
 * The gemm core prepares a block's 4 rows once for 4 tokens (activation rows).
 */
#ifndef COLIBRI_ARM_BLOCK_CORE_H
#define COLIBRI_ARM_BLOCK_CORE_H

#include <arm_neon.h>

#include "../isa.h"
#include "../quant.h"
#include "blocks_unpack.h"

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
static inline void colibri_prep_q4_0_neon(const colibri_block_q4_0 *w, int8x16_t *q0, int8x16_t *q1) {
    colibri_nibbles_neon(w->qs, 8, q0, q1);
}
static inline void colibri_prep_q4_1_neon(const colibri_block_q4_1 *w, int8x16_t *q0, int8x16_t *q1) {
    colibri_nibbles_neon(w->qs, 0, q0, q1);
}

/* The 4 rows' weight scales of block b (w0..w3 in scope): f16 d, or MXFP4's 2^(e - 128). */
#define COLIBRI_NEON_DW_F16(b) colibri_f16x4_neon(w0[b].d, w1[b].d, w2[b].d, w3[b].d)
#define COLIBRI_NEON_DW_E8M0(b) colibri_e8m0_half4_neon(w0[b].e, w1[b].e, w2[b].e, w3[b].e)
/* Q4_1's offset term m_w_r * (d_a * (float)(A_0 + A_1)) added to v (lanes = rows); Q5_1's min
 * form (quant_blocks.h: M = 1, DMIN = -m) subtracted; others: v. */
#define COLIBRI_NEON_NO_OFFSET(v, b) (v)
#define COLIBRI_NEON_Q4_1_OFFSET(v, b)                                                              \
    vaddq_f32((v), vmulq_f32(colibri_f16x4_neon(w0[b].m, w1[b].m, w2[b].m, w3[b].m),                \
                             vdupq_n_f32(a[b].d * (float)(a[b].sum[0] + a[b].sum[1]))))
#define COLIBRI_NEON_Q5_1_OFFSET(v, b)                                                              \
    vsubq_f32((v), vmulq_f32(vdupq_n_f32((float)(a[b].sum[0] + a[b].sum[1])),                       \
                             vmulq_f32(vnegq_f32(colibri_f16x4_neon(w0[b].m, w1[b].m, w2[b].m, w3[b].m)), \
                                       vdupq_n_f32(a[b].d))))

/* Defines NAME(q, qs): the 4 rows' exact block sums [row] against the
 * activation quants qs: [32] (q: [row][2] the rows' prepared quants), each
 * row's ISUM partials reduced together by pairwise adds. */
#define COLIBRI_NEON_ISUM4_DEFINE(NAME, ISUM)                                                       \
    static inline int32x4_t NAME(int8x16_t q[4][2], const int8_t *qs) {                             \
        int8x16_t a0 = vld1q_s8(qs), a1 = vld1q_s8(qs + 16);                                        \
        return vpaddq_s32(vpaddq_s32(ISUM(q[0][0], q[0][1], a0, a1), ISUM(q[1][0], q[1][1], a0, a1)), \
                          vpaddq_s32(ISUM(q[2][0], q[2][1], a0, a1), ISUM(q[3][0], q[3][1], a0, a1))); \
    }

/* Defines NAME(q, qs, h0, h1): the 4 rows' exact sums [row] of each half (h0: elements 0..15,
 * h1: 16..31) against the activation quants qs: [32], from ISUM16(q, a), 4 int32 partial sums
 * of 16 int8 pairs, reduced as above. For the halves with their own scales or multipliers. */
#define COLIBRI_NEON_HALVES4_DEFINE(NAME, ISUM16)                                                   \
    static inline void NAME(int8x16_t q[4][2], const int8_t *qs, int32x4_t *h0, int32x4_t *h1) {    \
        int8x16_t a0 = vld1q_s8(qs), a1 = vld1q_s8(qs + 16);                                        \
        *h0 = vpaddq_s32(vpaddq_s32(ISUM16(q[0][0], a0), ISUM16(q[1][0], a0)),                      \
                         vpaddq_s32(ISUM16(q[2][0], a0), ISUM16(q[3][0], a0)));                     \
        *h1 = vpaddq_s32(vpaddq_s32(ISUM16(q[0][1], a1), ISUM16(q[1][1], a1)),                      \
                         vpaddq_s32(ISUM16(q[2][1], a1), ISUM16(q[3][1], a1)));                     \
    }

/* Defines NAME(q, a): the 4 rows' exact block dots [row] against the Q8_H block a,
 * k_0 I_0 + k_1 I_1 from HALVES4's half sums I_h (|.| <= 8 * 16 * 128 * 127 each: exact). */
#define COLIBRI_NEON_BLOCK_SUM4_Q8_H_DEFINE(NAME, HALVES4)                                          \
    static inline int32x4_t NAME(int8x16_t q[4][2], const colibri_block_q8_h *a) {                  \
        int32x4_t h0, h1;                                                                           \
        HALVES4(q, a->qs, &h0, &h1);                                                                \
        return vmlaq_n_s32(vmulq_n_s32(h0, a->k[0]), h1, a->k[1]);                                  \
    }

/* Defines NAME(q, a): the same against the Q8_S block a, ISUM4's sums of its 32 pairs. */
#define COLIBRI_NEON_BLOCK_SUM4_Q8_S_DEFINE(NAME, ISUM4)                                            \
    static inline int32x4_t NAME(int8x16_t q[4][2], const colibri_block_q8_s *a) { return ISUM4(q, a->qs); }

/* The 4 rows' blocks b prepared: q[r][0], q[r][1] = PREP(&w_r[b]). */
#define COLIBRI_NEON_PREP4(PREP, q, b)                                                              \
    PREP(&w0[b], &q[0][0], &q[0][1]), PREP(&w1[b], &q[1][0], &q[1][1]);                             \
    PREP(&w2[b], &q[2][0], &q[2][1]), PREP(&w3[b], &q[3][0], &q[3][1])

/* acc += this activation row's step for block b (a: its blocks; dw: the 4
 * rows' d_w; SUM4: the block dots, BLOCK_SUM4's): lane r exactly the
 * reference's acc_r += (float)isum_r * (d_w_r * d_a) [+ OFFSET's term]. */
#define COLIBRI_NEON_BLOCK_STEP(SUM4, OFFSET, q, dw, a, b, acc)                                     \
    acc = vaddq_f32(acc, OFFSET(vmulq_f32(vcvtq_f32_s32(SUM4(q, &(a)[b])),                          \
                                          vmulq_f32(dw, vdupq_n_f32((a)[b].d))),                    \
                                b))

/* out[r] = w[r] . a for 4 rows of WBLOCK against ABLOCK activations, block
 * after block (the file comment's step), prefetching the group ahead. */
#define COLIBRI_NEON_BLOCK_CORE(NAME, WBLOCK, ABLOCK, PREP, SUM4, DW4, OFFSET)                      \
    static void NAME(const char *const w[4], const char *ahead, const void *xv, int64_t n, float out[4]) { \
        const ABLOCK *a = (const ABLOCK *)xv;   /* a: [n/32] */                                     \
        const WBLOCK *w0 = (const WBLOCK *)w[0], *w1 = (const WBLOCK *)w[1];                        \
        const WBLOCK *w2 = (const WBLOCK *)w[2], *w3 = (const WBLOCK *)w[3];                        \
        float32x4_t acc = vdupq_n_f32(0.0f);   /* acc: [4] rows */                                  \
        for (int64_t b = 0; b < n / COLIBRI_QK; b++) {                                              \
            COLIBRI_PREFETCH_SPAN(ahead + 4 * b * (int64_t)sizeof(WBLOCK), 4 * sizeof(WBLOCK));     \
            int8x16_t q[4][2];   /* q: [row] the block's quants, elements 0..15 and 16..31 */       \
            COLIBRI_NEON_PREP4(PREP, q, b);                                                         \
            float32x4_t dw = DW4(b);                                                                \
            COLIBRI_NEON_BLOCK_STEP(SUM4, OFFSET, q, dw, a, b, acc);                                \
        }                                                                                           \
        vst1q_f32(out, acc);                                                                        \
    }

/* 4 rows × 4 activation rows (tokens): each block's 4 weight rows are
 * prepared and their scales widened once, then used by every token; per
 * (token, row) lane the arithmetic is the one-row core's, so out[t][r] is
 * bitwise the reference dot. */
#define COLIBRI_NEON_BLOCK_GEMM_CORE(NAME, WBLOCK, ABLOCK, PREP, SUM4, DW4, OFFSET)                 \
    static void NAME(const char *const w[4], const char *ahead, const char *const x[4], int64_t n,  \
                     float out[4][4]) {                                                             \
        const WBLOCK *w0 = (const WBLOCK *)w[0], *w1 = (const WBLOCK *)w[1];                        \
        const WBLOCK *w2 = (const WBLOCK *)w[2], *w3 = (const WBLOCK *)w[3];                        \
        const ABLOCK *a0 = (const ABLOCK *)x[0], *a1 = (const ABLOCK *)x[1];                        \
        const ABLOCK *a2 = (const ABLOCK *)x[2], *a3 = (const ABLOCK *)x[3];                        \
        float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = acc0, acc2 = acc0, acc3 = acc0;   /* [4] rows each */ \
        for (int64_t b = 0; b < n / COLIBRI_QK; b++) {                                              \
            COLIBRI_PREFETCH_SPAN(ahead + 4 * b * (int64_t)sizeof(WBLOCK), 4 * sizeof(WBLOCK));     \
            int8x16_t q[4][2];   /* q: [row] the block's quants, elements 0..15 and 16..31 */       \
            COLIBRI_NEON_PREP4(PREP, q, b);                                                         \
            float32x4_t dw = DW4(b);                                                                \
            { const ABLOCK *a = a0; COLIBRI_NEON_BLOCK_STEP(SUM4, OFFSET, q, dw, a, b, acc0); }     \
            { const ABLOCK *a = a1; COLIBRI_NEON_BLOCK_STEP(SUM4, OFFSET, q, dw, a, b, acc1); }     \
            { const ABLOCK *a = a2; COLIBRI_NEON_BLOCK_STEP(SUM4, OFFSET, q, dw, a, b, acc2); }     \
            { const ABLOCK *a = a3; COLIBRI_NEON_BLOCK_STEP(SUM4, OFFSET, q, dw, a, b, acc3); }     \
        }                                                                                           \
        vst1q_f32(out[0], acc0), vst1q_f32(out[1], acc1), vst1q_f32(out[2], acc2), vst1q_f32(out[3], acc3); \
    }

/* The dot_rows and gemm kernels of one 32-element type against activation type ACT (q8_h,
 * q8_s) for one ARM table (its block dots colibri_block_sum4_ACT_ISA). */
#define COLIBRI_NEON_BLOCK_KERNELS(TYPE, ISA, WBLOCK, ACT, PREP, DW4, OFFSET)                       \
    COLIBRI_NEON_BLOCK_CORE(colibri_dot4_##TYPE##_##ISA, WBLOCK, colibri_block_##ACT, PREP,         \
                            colibri_block_sum4_##ACT##_##ISA, DW4, OFFSET)                          \
    COLIBRI_NEON_BLOCK_GEMM_CORE(colibri_gemm4_##TYPE##_##ISA, WBLOCK, colibri_block_##ACT, PREP,   \
                                 colibri_block_sum4_##ACT##_##ISA, DW4, OFFSET)                     \
    COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_##TYPE##_##ISA, colibri_dot4_##TYPE##_##ISA)           \
    COLIBRI_GEMM_DEFINE(colibri_gemm_##TYPE##_##ISA, colibri_gemm4_##TYPE##_##ISA)

#endif /* COLIBRI_ARM_BLOCK_CORE_H */
