/*
 * arm_neon/exact.c — exact mode's kernels with AArch64 Advanced SIMD for every
 * block type (isa.h): dequantize, bitwise the type's to_f32, and
 * dot_rows_exact, bitwise the F32 dot_rows on the dequantized row
 * (colibri_dot_f32's order), without writing the row anywhere. The neon and
 * neon_dotprod tables share them (both dot F32 rows with arm_neon/dot.c).
 *
 * As x86_avx2/exact.c: a group's 32 signed integer quants (blocks_unpack.h,
 * block_core.h) widened to int32 and converted to f32 (exact), times the f32
 * scale of their 16-element half, minus (K types with mins) or plus (Q4_1,
 * Q5_1) its f32 min term, one rounding each (no FMA: the build passes
 * -ffp-contract=off), the scales being the references' d * (float)sc rounded
 * to f32 first. The dot keeps each row's acc[0..3] and acc[4..7] in two
 * vectors, as arm_neon/dot.c's F32 core, adds in element order, combines the
 * same way and adds the empty tail's 0 last.
 */
#include <arm_neon.h>

#include "../isa.h"
#include "../quant.h"
#include "block_core.h"

/* ---- values of a group ------------------------------------------------------------------ */

enum { COLIBRI_EXACT_SCALE = 0, COLIBRI_EXACT_SUB_MIN = 1, COLIBRI_EXACT_ADD_MIN = 2 };

/* A block's f32 scales and min terms by half (h = 0..15; the 32-element types: h = 0, 1). */
typedef struct colibri_exact_scales_neon {
    float d[16], m[16];
} colibri_exact_scales_neon;

/* v[j] = elements 4j..4j+3 of the group (q0: 0..15 of half lo_at, q1: 16..31 of half hi_at). */
static inline __attribute__((always_inline)) void colibri_exact_values_neon(int8x16_t q0, int8x16_t q1,
                                                                            const colibri_exact_scales_neon *sc,
                                                                            int lo_at, int hi_at, const int mode,
                                                                            float32x4_t v[8]) {
    int16x8_t w[4] = {vmovl_s8(vget_low_s8(q0)), vmovl_high_s8(q0), vmovl_s8(vget_low_s8(q1)), vmovl_high_s8(q1)};
    for (int k = 0; k < 4; k++) {
        float32x4_t d = vdupq_n_f32(sc->d[k < 2 ? lo_at : hi_at]);
        v[2 * k] = vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(w[k]))), d);
        v[2 * k + 1] = vmulq_f32(vcvtq_f32_s32(vmovl_high_s16(w[k])), d);
        if (mode != COLIBRI_EXACT_SCALE) {
            float32x4_t m = vdupq_n_f32(sc->m[k < 2 ? lo_at : hi_at]);
            if (mode == COLIBRI_EXACT_SUB_MIN) {
                v[2 * k] = vsubq_f32(v[2 * k], m), v[2 * k + 1] = vsubq_f32(v[2 * k + 1], m);
            } else {
                v[2 * k] = vaddq_f32(v[2 * k], m), v[2 * k + 1] = vaddq_f32(v[2 * k + 1], m);
            }
        }
    }
}

/* out[0..15] = (float)s16[h] * d (one product each). */
static inline void colibri_exact_scales16_neon(int8x16_t s16, float d, float out[16]) {
    int16x8_t w[2] = {vmovl_s8(vget_low_s8(s16)), vmovl_high_s8(s16)};
    for (int k = 0; k < 2; k++) {
        vst1q_f32(out + 8 * k, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(w[k]))), d));
        vst1q_f32(out + 8 * k + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(w[k])), d));
    }
}

static inline float colibri_exact_f16_neon(uint16_t h) { return vgetq_lane_f32(colibri_f16_dup_neon(h), 0); }

/* ---- each type: SCALES(b, sc), and QUANTS(b, s, q0, q1) for group s ------------------------ */

#define COLIBRI_NEON_D(b, sc) ((sc)->d[0] = (sc)->d[1] = colibri_exact_f16_neon((b)->d))
#define COLIBRI_NEON_DM(b, sc) \
    (COLIBRI_NEON_D(b, sc), (sc)->m[0] = (sc)->m[1] = colibri_exact_f16_neon((b)->m))
#define COLIBRI_NEON_E8M0(b, sc) ((sc)->d[0] = (sc)->d[1] = colibri_e8m0_half((b)->e))

#define COLIBRI_NEON_Q2_K_S(b, sc)                                                            \
    (colibri_exact_scales16_neon(colibri_q2_k_scales16_neon(b), colibri_exact_f16_neon((b)->d), (sc)->d), \
     colibri_exact_scales16_neon(colibri_q2_k_mins16_neon(b), colibri_exact_f16_neon((b)->dmin), (sc)->m))
#define COLIBRI_NEON_Q3_K_S(b, sc) \
    colibri_exact_scales16_neon(colibri_q3_k_scales16_neon(b), colibri_exact_f16_neon((b)->d), (sc)->d)
#define COLIBRI_NEON_K32_S(b, sc)                                                             \
    (colibri_exact_scales16_neon(colibri_k_scales16_neon((b)->scales), colibri_exact_f16_neon((b)->d), (sc)->d), \
     colibri_exact_scales16_neon(colibri_k_mins16_neon((b)->scales), colibri_exact_f16_neon((b)->dmin), (sc)->m))
#define COLIBRI_NEON_Q6_K_S(b, sc) \
    colibri_exact_scales16_neon(colibri_q6_k_scales16_neon(b), colibri_exact_f16_neon((b)->d), (sc)->d)
#define COLIBRI_NEON_IQ4_XS_S(b, sc) \
    colibri_exact_scales16_neon(colibri_iq4_xs_scales16_neon(b), colibri_exact_f16_neon((b)->d), (sc)->d)

/* The 32-element types' quants ignore the group index (one group a block). */
#define COLIBRI_NEON_ONE(PREP, b, s, q0, q1) PREP((b), (q0), (q1))
#define COLIBRI_NEON_K(PREP, b, s, q0, q1) PREP((b), (s), (q0), (q1))

/* ---- the kernels ------------------------------------------------------------------------- */

/* The reference's combine of 4 rows' acc[0..3] (lo) and acc[4..7] (hi), as arm_neon/dot.c's. */
static inline float32x4_t colibri_exact_combine4_neon(const float32x4_t lo[4], const float32x4_t hi[4]) {
    float32x4_t r01 = vpaddq_f32(vpaddq_f32(lo[0], hi[0]), vpaddq_f32(lo[1], hi[1]));
    float32x4_t r23 = vpaddq_f32(vpaddq_f32(lo[2], hi[2]), vpaddq_f32(lo[3], hi[3]));
    return vpaddq_f32(r01, r23);
}

/* colibri_dequantize_T_neon and colibri_dot_rows_exact_T_neon of WBLOCK (ELEMS a block):
 * scales SCALES, quants FORM(PREP, ...) (COLIBRI_NEON_ONE or _K), MODE. */
#define COLIBRI_NEON_EXACT_KERNELS(T, WBLOCK, ELEMS, SCALES, FORM, PREP, MODE)                                  \
    void colibri_dequantize_##T##_neon(const void *src, float *y, int64_t n) {                                  \
        const WBLOCK *blk = (const WBLOCK *)src;   /* blk: [n / ELEMS] */                                      \
        for (int64_t i = 0; i < n / (ELEMS); i++) {                                                             \
            colibri_exact_scales_neon sc;                                                                       \
            SCALES(&blk[i], &sc);                                                                               \
            _Pragma("GCC unroll 8")                                                                             \
            for (int s = 0; s < (ELEMS) / 32; s++) {                                                            \
                int8x16_t q0, q1;                                                                               \
                float32x4_t v[8];                                                                               \
                FORM(PREP, &blk[i], s, &q0, &q1);                                                               \
                colibri_exact_values_neon(q0, q1, &sc, 2 * s, 2 * s + 1, MODE, v);                              \
                for (int k = 0; k < 8; k++) vst1q_f32(y + i * (ELEMS) + 32 * s + 4 * k, v[k]);                  \
            }                                                                                                   \
        }                                                                                                       \
    }                                                                                                           \
    static void colibri_dot4_exact_##T##_neon(const char *const w[4], const char *ahead, const void *xv,        \
                                              int64_t n, float out[4]) {                                        \
        const float *x = (const float *)xv;   /* x: [n] */                                                     \
        float32x4_t lo[4], hi[4];             /* per row: acc[0..3], acc[4..7] */                              \
        for (int r = 0; r < 4; r++) lo[r] = hi[r] = vdupq_n_f32(0.0f);                                          \
        for (int64_t i = 0; i < n / (ELEMS); i++) {                                                             \
            if ((ELEMS) == COLIBRI_QK_K || i % 2 == 0) {                                                        \
                COLIBRI_PREFETCH_SPAN(ahead + 4 * i * (int64_t)sizeof(WBLOCK),                                  \
                                      ((ELEMS) == COLIBRI_QK_K ? 4 : 8) * sizeof(WBLOCK));                      \
            }                                                                                                   \
            colibri_exact_scales_neon sc[4];                                                                    \
            for (int r = 0; r < 4; r++) SCALES((const WBLOCK *)w[r] + i, &sc[r]);                               \
            _Pragma("GCC unroll 8")                                                                             \
            for (int s = 0; s < (ELEMS) / 32; s++) {                                                            \
                const float *xg = x + i * (ELEMS) + 32 * s;   /* xg: [32] */                                   \
                float32x4_t xv8[8];                                                                             \
                for (int k = 0; k < 8; k++) xv8[k] = vld1q_f32(xg + 4 * k);                                     \
                _Pragma("GCC unroll 4")                                                                         \
                for (int r = 0; r < 4; r++) {                                                                   \
                    int8x16_t q0, q1;                                                                           \
                    float32x4_t v[8];                                                                           \
                    FORM(PREP, (const WBLOCK *)w[r] + i, s, &q0, &q1);                                          \
                    colibri_exact_values_neon(q0, q1, &sc[r], 2 * s, 2 * s + 1, MODE, v);                       \
                    for (int k = 0; k < 4; k++) {                                                               \
                        lo[r] = vaddq_f32(lo[r], vmulq_f32(v[2 * k], xv8[2 * k]));                              \
                        hi[r] = vaddq_f32(hi[r], vmulq_f32(v[2 * k + 1], xv8[2 * k + 1]));                      \
                    }                                                                                           \
                }                                                                                               \
            }                                                                                                   \
        }                                                                                                       \
        vst1q_f32(out, colibri_exact_combine4_neon(lo, hi));                                                    \
        for (int r = 0; r < 4; r++) out[r] += 0.0f;   /* the reference's empty tail (-0 + 0 is +0) */          \
    }                                                                                                           \
    COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_exact_##T##_neon, colibri_dot4_exact_##T##_neon)

/* The 32-element types keep their one d (m) in halves 0 and 1: group s = 0 reads entries 0, 1. */
COLIBRI_NEON_EXACT_KERNELS(q8_0, colibri_block_q8_0, COLIBRI_QK, COLIBRI_NEON_D, COLIBRI_NEON_ONE,
                           colibri_prep_q8_0_neon, COLIBRI_EXACT_SCALE)
COLIBRI_NEON_EXACT_KERNELS(q4_0, colibri_block_q4_0, COLIBRI_QK, COLIBRI_NEON_D, COLIBRI_NEON_ONE,
                           colibri_prep_q4_0_neon, COLIBRI_EXACT_SCALE)
COLIBRI_NEON_EXACT_KERNELS(q4_1, colibri_block_q4_1, COLIBRI_QK, COLIBRI_NEON_DM, COLIBRI_NEON_ONE,
                           colibri_prep_q4_1_neon, COLIBRI_EXACT_ADD_MIN)
COLIBRI_NEON_EXACT_KERNELS(q5_0, colibri_block_q5_0, COLIBRI_QK, COLIBRI_NEON_D, COLIBRI_NEON_ONE,
                           colibri_prep_q5_0_neon, COLIBRI_EXACT_SCALE)
COLIBRI_NEON_EXACT_KERNELS(q5_1, colibri_block_q5_1, COLIBRI_QK, COLIBRI_NEON_DM, COLIBRI_NEON_ONE,
                           colibri_prep_q5_1_neon, COLIBRI_EXACT_ADD_MIN)
COLIBRI_NEON_EXACT_KERNELS(iq4_nl, colibri_block_iq4_nl, COLIBRI_QK, COLIBRI_NEON_D, COLIBRI_NEON_ONE,
                           colibri_prep_iq4_nl_neon, COLIBRI_EXACT_SCALE)
COLIBRI_NEON_EXACT_KERNELS(mxfp4, colibri_block_mxfp4, COLIBRI_QK, COLIBRI_NEON_E8M0, COLIBRI_NEON_ONE,
                           colibri_prep_mxfp4_neon, COLIBRI_EXACT_SCALE)
COLIBRI_NEON_EXACT_KERNELS(q2_k, colibri_block_q2_k, COLIBRI_QK_K, COLIBRI_NEON_Q2_K_S, COLIBRI_NEON_K,
                           colibri_prep_q2_k_neon, COLIBRI_EXACT_SUB_MIN)
COLIBRI_NEON_EXACT_KERNELS(q3_k, colibri_block_q3_k, COLIBRI_QK_K, COLIBRI_NEON_Q3_K_S, COLIBRI_NEON_K,
                           colibri_prep_q3_k_neon, COLIBRI_EXACT_SCALE)
COLIBRI_NEON_EXACT_KERNELS(q4_k, colibri_block_q4_k, COLIBRI_QK_K, COLIBRI_NEON_K32_S, COLIBRI_NEON_K,
                           colibri_prep_q4_k_neon, COLIBRI_EXACT_SUB_MIN)
COLIBRI_NEON_EXACT_KERNELS(q5_k, colibri_block_q5_k, COLIBRI_QK_K, COLIBRI_NEON_K32_S, COLIBRI_NEON_K,
                           colibri_prep_q5_k_neon, COLIBRI_EXACT_SUB_MIN)
COLIBRI_NEON_EXACT_KERNELS(q6_k, colibri_block_q6_k, COLIBRI_QK_K, COLIBRI_NEON_Q6_K_S, COLIBRI_NEON_K,
                           colibri_prep_q6_k_neon, COLIBRI_EXACT_SCALE)
COLIBRI_NEON_EXACT_KERNELS(iq4_xs, colibri_block_iq4_xs, COLIBRI_QK_K, COLIBRI_NEON_IQ4_XS_S, COLIBRI_NEON_K,
                           colibri_prep_iq4_xs_neon, COLIBRI_EXACT_SCALE)
