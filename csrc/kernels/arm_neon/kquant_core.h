/*
 * arm_neon/kquant_core.h — the 4-row loop over 256-element blocks (Q2_K ..
 * Q6_K, IQ4_XS) shared by the ARM tables, and the list of every block type's
 * kernels (COLIBRI_NEON_ALL_BLOCK_KERNELS); included only by files compiled
 * for AArch64 Advanced SIMD.
 *
 * Per super-block the 4 rows' 16 per-half scales and mins are unpacked once
 * (blocks_unpack.h) and laid out by half (colibri_rows_by_half_neon), so that
 * each group's two halves are 4 lanes [row] each; per group of 32 elements
 * (one Q8_S activation block) the 4 rows' quants are unpacked once and, for
 * every activation row (token), quant_blocks.h's contract runs lane-wise:
 *   isum_r = S_0r · H_0r + S_1r · H_1r     (H_h: the exact int32 sum of half h)
 *   msum_r = M_0r · A_0 + M_1r · A_1       (A_h: the activation's stored half sums)
 *   acc_r += (float)isum_r * (D_r * d_a)   [ - (float)msum_r * (DMIN_r * d_a) ]
 * groups in order: bitwise the reference (quant_dot_blocks.c). Types with
 * sub-blocks of 32 (S_0 = S_1) take isum_r = S_r · (H_0r + H_1r) from one
 * ISUM4, the same integer.
 */
#ifndef COLIBRI_ARM_KQUANT_CORE_H
#define COLIBRI_ARM_KQUANT_CORE_H

#include <arm_neon.h>

#include "block_core.h"

/* x0..x3: 16 bytes of 4 rows (byte h: row r's value for half h) → t[p] (p = 0..3), byte 4i + r
 * = row r's value for half 4p + i; group s's halves 2s, 2s + 1 are then t[s / 2]'s bytes
 * 8 (s % 2) .. 8 (s % 2) + 7. */
static inline void colibri_rows_by_half_neon(int8x16_t x0, int8x16_t x1, int8x16_t x2, int8x16_t x3, int8x16_t t[4]) {
    int8x16x2_t z01 = vzipq_s8(x0, x1), z23 = vzipq_s8(x2, x3);
    int16x8x2_t lo = vzipq_s16(vreinterpretq_s16_s8(z01.val[0]), vreinterpretq_s16_s8(z23.val[0]));
    int16x8x2_t hi = vzipq_s16(vreinterpretq_s16_s8(z01.val[1]), vreinterpretq_s16_s8(z23.val[1]));
    t[0] = vreinterpretq_s8_s16(lo.val[0]), t[1] = vreinterpretq_s8_s16(lo.val[1]);
    t[2] = vreinterpretq_s8_s16(hi.val[0]), t[3] = vreinterpretq_s8_s16(hi.val[1]);
}

/* Group s's values of t (colibri_rows_by_half_neon's layout) as int32 [row]: v0 half 2s, v1
 * half 2s + 1. */
static inline void colibri_group_halves_neon(const int8x16_t t[4], int s, int32x4_t *v0, int32x4_t *v1) {
    int16x8_t w = vmovl_s8(s % 2 ? vget_high_s8(t[s / 2]) : vget_low_s8(t[s / 2]));
    *v0 = vmovl_s16(vget_low_s16(w)), *v1 = vmovl_s16(vget_high_s16(w));
}

/* Defines NAME(q, a, s0, s1, m0, m1, sub32, has_m, d4, dm4, acc): acc plus the file comment's
 * step of one group for the 4 rows (lanes): q: [row][2] the group's quants; a: its activation
 * block; s0, s1, m0, m1: the rows' scales and mins of its two halves (m0, m1 read only with
 * has_m); d4, dm4: the rows' D and DMIN. ISUM4 and HALVES4 are the table's integer sums
 * (block_core.h). */
#define COLIBRI_NEON_K_STEP_DEFINE(NAME, ISUM4, HALVES4)                                            \
    static inline __attribute__((always_inline)) float32x4_t NAME(                                  \
        int8x16_t q[4][2], const colibri_block_q8_s *a, int32x4_t s0, int32x4_t s1, int32x4_t m0,   \
        int32x4_t m1, const int sub32, const int has_m, float32x4_t d4, float32x4_t dm4,            \
        float32x4_t acc) {                                                                          \
        int32x4_t isum;                                                                             \
        if (sub32) {                                                                                \
            isum = vmulq_s32(s0, ISUM4(q, a->qs));                                                  \
        } else {                                                                                    \
            int32x4_t h0, h1;                                                                       \
            HALVES4(q, a->qs, &h0, &h1);                                                            \
            isum = vmlaq_s32(vmulq_s32(s0, h0), s1, h1);                                            \
        }                                                                                           \
        float32x4_t da = vdupq_n_f32(a->d);                                                         \
        float32x4_t v = vmulq_f32(vcvtq_f32_s32(isum), vmulq_f32(d4, da));                          \
        if (has_m) {                                                                                \
            int32x4_t msum = vmlaq_n_s32(vmulq_n_s32(m0, a->sum[0]), m1, a->sum[1]);                \
            v = vsubq_f32(v, vmulq_f32(vcvtq_f32_s32(msum), vmulq_f32(dm4, da)));                   \
        }                                                                                           \
        return vaddq_f32(acc, v);                                                                   \
    }

/* The 4 rows' f16 field F of the current super-block (b0..b3 in scope), as floats. */
#define COLIBRI_NEON_FIELD4(F) colibri_f16x4_neon(b0->F, b1->F, b2->F, b3->F)
#define COLIBRI_NEON_ZERO4 vdupq_n_f32(0.0f)
#define COLIBRI_NEON_NONE16(b) vdupq_n_s8(0)

/* NAME(w, ahead, x, n, out): out[t][r] = w[r] . x[t] for 4 rows of the 256-element type WBLOCK
 * against TOKENS Q8_S activation rows x[t], super-block after super-block: quants by PREP
 * (blocks_unpack.h), per-half scales SCALES16, mins MINS16 (HAS_M), D from the field d, DMIN
 * by DM4, SUB32 as the file comment says; each block's unpacking serves every token, each
 * (token, row) lane is exactly the one-row arithmetic. Prefetches the group ahead as
 * block_core.h's cores do. */
#define COLIBRI_NEON_K_CORE(NAME, TOKENS, STEP, WBLOCK, PREP, SCALES16, HAS_M, MINS16, DM4, SUB32)   \
    static void NAME(const char *const w[4], const char *ahead, const char *const x[TOKENS], int64_t n, \
                     float out[TOKENS][4]) {                                                        \
        const WBLOCK *w0 = (const WBLOCK *)w[0], *w1 = (const WBLOCK *)w[1];                        \
        const WBLOCK *w2 = (const WBLOCK *)w[2], *w3 = (const WBLOCK *)w[3];                        \
        float32x4_t acc[TOKENS];   /* acc: [token] 4 rows each */                                   \
        _Pragma("GCC unroll 4") for (int t = 0; t < (TOKENS); t++) acc[t] = vdupq_n_f32(0.0f);      \
        for (int64_t sb = 0; sb < n / COLIBRI_QK_K; sb++) {                                         \
            COLIBRI_PREFETCH_SPAN(ahead + 4 * sb * (int64_t)sizeof(WBLOCK), 4 * sizeof(WBLOCK));    \
            const WBLOCK *b0 = &w0[sb], *b1 = &w1[sb], *b2 = &w2[sb], *b3 = &w3[sb];                \
            int8x16_t S[4], M[4];   /* the rows' per-half scales and mins, by half */               \
            colibri_rows_by_half_neon(SCALES16(b0), SCALES16(b1), SCALES16(b2), SCALES16(b3), S);   \
            colibri_rows_by_half_neon(MINS16(b0), MINS16(b1), MINS16(b2), MINS16(b3), M);           \
            float32x4_t d4 = COLIBRI_NEON_FIELD4(d), dm4 = DM4;                                     \
            _Pragma("GCC unroll 8")   /* constant s: shifts and table offsets */                    \
            for (int s = 0; s < 8; s++) {                                                           \
                int8x16_t q[4][2];   /* q: [row] the group's quants, elements 0..15 and 16..31 */   \
                PREP(b0, s, &q[0][0], &q[0][1]), PREP(b1, s, &q[1][0], &q[1][1]);                   \
                PREP(b2, s, &q[2][0], &q[2][1]), PREP(b3, s, &q[3][0], &q[3][1]);                   \
                int32x4_t s0, s1, m0 = vdupq_n_s32(0), m1 = m0;   /* [row] the halves' S and M */    \
                colibri_group_halves_neon(S, s, &s0, &s1);                                          \
                if (HAS_M) colibri_group_halves_neon(M, s, &m0, &m1);                               \
                _Pragma("GCC unroll 1")   /* unrolled, the tokens' registers spill */               \
                for (int t = 0; t < (TOKENS); t++) {                                                \
                    const colibri_block_q8_s *a = (const colibri_block_q8_s *)x[t] + 8 * sb + s;    \
                    acc[t] = STEP(q, a, s0, s1, m0, m1, SUB32, HAS_M, d4, dm4, acc[t]);             \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
        _Pragma("GCC unroll 4") for (int t = 0; t < (TOKENS); t++) vst1q_f32(out[t], acc[t]);       \
    }

/* The dot_rows (one token) and gemm (4 tokens) kernels of one 256-element type for one ARM
 * table (its step colibri_k_step_ISA). */
#define COLIBRI_NEON_K_KERNELS(TYPE, ISA, WBLOCK, SCALES16, HAS_M, MINS16, DM4, SUB32)              \
    COLIBRI_NEON_K_CORE(colibri_k1_##TYPE##_##ISA, 1, colibri_k_step_##ISA, WBLOCK,                 \
                        colibri_prep_##TYPE##_neon, SCALES16, HAS_M, MINS16, DM4, SUB32)            \
    COLIBRI_NEON_K_CORE(colibri_gemm4_##TYPE##_##ISA, 4, colibri_k_step_##ISA, WBLOCK,              \
                        colibri_prep_##TYPE##_neon, SCALES16, HAS_M, MINS16, DM4, SUB32)            \
    static void colibri_dot4_##TYPE##_##ISA(const char *const w[4], const char *ahead, const void *x, \
                                            int64_t n, float out[4]) {                              \
        const char *const xs[1] = {(const char *)x};                                                \
        colibri_k1_##TYPE##_##ISA(w, ahead, xs, n, (float(*)[4])out);                               \
    }                                                                                               \
    COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_##TYPE##_##ISA, colibri_dot4_##TYPE##_##ISA)           \
    COLIBRI_GEMM_DEFINE(colibri_gemm_##TYPE##_##ISA, colibri_gemm4_##TYPE##_##ISA)

#define COLIBRI_NEON_K_SCALES16(b) colibri_k_scales16_neon((b)->scales)
#define COLIBRI_NEON_K_MINS16(b) colibri_k_mins16_neon((b)->scales)

/* Every block type's kernels for one ARM table, from its integer sums: ISUM(q0, q1, a0, a1),
 * 4 int32 partial sums of a block's 32 int8 pairs, and ISUM16(q, a), of 16 pairs. */
#define COLIBRI_NEON_ALL_BLOCK_KERNELS(ISA, ISUM, ISUM16)                                           \
    COLIBRI_NEON_ISUM4_DEFINE(colibri_isum4_##ISA, ISUM)                                            \
    COLIBRI_NEON_HALVES4_DEFINE(colibri_halves4_##ISA, ISUM16)                                      \
    COLIBRI_NEON_K_STEP_DEFINE(colibri_k_step_##ISA, colibri_isum4_##ISA, colibri_halves4_##ISA)    \
    COLIBRI_NEON_BLOCK_SUM4_Q8_H_DEFINE(colibri_block_sum4_q8_h_##ISA, colibri_halves4_##ISA)       \
    COLIBRI_NEON_BLOCK_SUM4_Q8_S_DEFINE(colibri_block_sum4_q8_s_##ISA, colibri_isum4_##ISA)         \
    COLIBRI_NEON_BLOCK_KERNELS(q8_0, ISA, colibri_block_q8_0, q8_h, colibri_prep_q8_0_neon,         \
                               COLIBRI_NEON_DW_F16, COLIBRI_NEON_NO_OFFSET)                         \
    COLIBRI_NEON_BLOCK_KERNELS(q4_0, ISA, colibri_block_q4_0, q8_h, colibri_prep_q4_0_neon,         \
                               COLIBRI_NEON_DW_F16, COLIBRI_NEON_NO_OFFSET)                         \
    COLIBRI_NEON_BLOCK_KERNELS(q4_1, ISA, colibri_block_q4_1, q8_h, colibri_prep_q4_1_neon,         \
                               COLIBRI_NEON_DW_F16, COLIBRI_NEON_Q4_1_OFFSET)                       \
    COLIBRI_NEON_BLOCK_KERNELS(q5_0, ISA, colibri_block_q5_0, q8_h, colibri_prep_q5_0_neon,         \
                               COLIBRI_NEON_DW_F16, COLIBRI_NEON_NO_OFFSET)                         \
    COLIBRI_NEON_BLOCK_KERNELS(q5_1, ISA, colibri_block_q5_1, q8_h, colibri_prep_q5_1_neon,         \
                               COLIBRI_NEON_DW_F16, COLIBRI_NEON_Q5_1_OFFSET)                       \
    COLIBRI_NEON_BLOCK_KERNELS(iq4_nl, ISA, colibri_block_iq4_nl, q8_h, colibri_prep_iq4_nl_neon,   \
                               COLIBRI_NEON_DW_F16, COLIBRI_NEON_NO_OFFSET)                         \
    COLIBRI_NEON_BLOCK_KERNELS(mxfp4, ISA, colibri_block_mxfp4, q8_s, colibri_prep_mxfp4_neon,      \
                               COLIBRI_NEON_DW_E8M0, COLIBRI_NEON_NO_OFFSET)                        \
    COLIBRI_NEON_K_KERNELS(q2_k, ISA, colibri_block_q2_k, colibri_q2_k_scales16_neon, 1,            \
                           colibri_q2_k_mins16_neon, COLIBRI_NEON_FIELD4(dmin), 0)                  \
    COLIBRI_NEON_K_KERNELS(q3_k, ISA, colibri_block_q3_k, colibri_q3_k_scales16_neon, 0,            \
                           COLIBRI_NEON_NONE16, COLIBRI_NEON_ZERO4, 0)                              \
    COLIBRI_NEON_K_KERNELS(q4_k, ISA, colibri_block_q4_k, COLIBRI_NEON_K_SCALES16, 1,               \
                           COLIBRI_NEON_K_MINS16, COLIBRI_NEON_FIELD4(dmin), 1)                     \
    COLIBRI_NEON_K_KERNELS(q5_k, ISA, colibri_block_q5_k, COLIBRI_NEON_K_SCALES16, 1,               \
                           COLIBRI_NEON_K_MINS16, COLIBRI_NEON_FIELD4(dmin), 1)                     \
    COLIBRI_NEON_K_KERNELS(q6_k, ISA, colibri_block_q6_k, colibri_q6_k_scales16_neon, 0,            \
                           COLIBRI_NEON_NONE16, COLIBRI_NEON_ZERO4, 0)                              \
    COLIBRI_NEON_K_KERNELS(iq4_xs, ISA, colibri_block_iq4_xs, colibri_iq4_xs_scales16_neon, 0,      \
                           COLIBRI_NEON_NONE16, COLIBRI_NEON_ZERO4, 1)

#endif /* COLIBRI_ARM_KQUANT_CORE_H */
