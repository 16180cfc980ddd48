/*
 * arm_dotprod/dot.c — the block types' kernels with the ARMv8.2 dot product
 * extension: block_core.h's and kquant_core.h's 4-row loops with each
 * block's partial sums from
 * two sdot instructions (4 int8 products summed into each int32 lane,
 * exact), where baseline NEON needs four widening multiplies and two
 * pairwise adds. Bitwise the reference, as every table is.
 */
#include <arm_neon.h>

#include "../arm_neon/kquant_core.h"

/* The 4 partial int32 sums of sum_j q[j]·a[j] over one block's 32 int8 pairs. */
static inline int32x4_t colibri_isum32x4_dotprod(int8x16_t q0, int8x16_t q1, int8x16_t a0, int8x16_t a1) {
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), q0, a0), q1, a1);
}

/* The same over 16 pairs (one half of a group; kquant_core.h). */
static inline int32x4_t colibri_isum16x4_dotprod(int8x16_t q, int8x16_t a) {
    return vdotq_s32(vdupq_n_s32(0), q, a);
}

COLIBRI_NEON_ALL_BLOCK_KERNELS(neon_dotprod, colibri_isum32x4_dotprod, colibri_isum16x4_dotprod)
