/*
 * arm_neon/table.h — the ARM kernel tables (arm_neon/isa.c, arm_dotprod/isa.c):
 * NEON's kernels throughout, but for the block types' dot_rows and gemm (every
 * block type), which come from the table's own folder (their names end in BLOCKS).
 */
#ifndef COLIBRI_ARM_TABLE_H
#define COLIBRI_ARM_TABLE_H

#include "../isa.h"
#include "../quant.h"

#define COLIBRI_NEON_TABLE(VAR, NAME, CPU_SUPPORTS, BLOCKS)                      \
    const colibri_isa_table VAR = {                                             \
        NAME,                                                                   \
        CPU_SUPPORTS,                                                           \
        {                                                                       \
            [COLIBRI_DTYPE_F32] = colibri_dot_rows_f32_neon,                    \
            [COLIBRI_DTYPE_F16] = colibri_dot_rows_f16_neon,                    \
            [COLIBRI_DTYPE_BF16] = colibri_dot_rows_bf16_neon,                  \
            [COLIBRI_DTYPE_Q8_0] = colibri_dot_rows_q8_0_##BLOCKS,              \
            [COLIBRI_DTYPE_Q4_0] = colibri_dot_rows_q4_0_##BLOCKS,              \
            [COLIBRI_DTYPE_Q4_1] = colibri_dot_rows_q4_1_##BLOCKS,              \
            [COLIBRI_DTYPE_Q5_0] = colibri_dot_rows_q5_0_##BLOCKS,              \
            [COLIBRI_DTYPE_Q5_1] = colibri_dot_rows_q5_1_##BLOCKS,              \
            [COLIBRI_DTYPE_Q2_K] = colibri_dot_rows_q2_k_##BLOCKS,              \
            [COLIBRI_DTYPE_Q3_K] = colibri_dot_rows_q3_k_##BLOCKS,              \
            [COLIBRI_DTYPE_Q4_K] = colibri_dot_rows_q4_k_##BLOCKS,              \
            [COLIBRI_DTYPE_Q5_K] = colibri_dot_rows_q5_k_##BLOCKS,              \
            [COLIBRI_DTYPE_Q6_K] = colibri_dot_rows_q6_k_##BLOCKS,              \
            [COLIBRI_DTYPE_IQ4_NL] = colibri_dot_rows_iq4_nl_##BLOCKS,          \
            [COLIBRI_DTYPE_IQ4_XS] = colibri_dot_rows_iq4_xs_##BLOCKS,          \
            [COLIBRI_DTYPE_MXFP4] = colibri_dot_rows_mxfp4_##BLOCKS,            \
        },                                                                      \
        {                                                                       \
            [COLIBRI_DTYPE_F32] = colibri_gemm_f32_neon,                        \
            [COLIBRI_DTYPE_F16] = colibri_gemm_f16_neon,                        \
            [COLIBRI_DTYPE_BF16] = colibri_gemm_bf16_neon,                      \
            [COLIBRI_DTYPE_Q8_0] = colibri_gemm_q8_0_##BLOCKS,                  \
            [COLIBRI_DTYPE_Q4_0] = colibri_gemm_q4_0_##BLOCKS,                  \
            [COLIBRI_DTYPE_Q4_1] = colibri_gemm_q4_1_##BLOCKS,                  \
            [COLIBRI_DTYPE_Q5_0] = colibri_gemm_q5_0_##BLOCKS,                  \
            [COLIBRI_DTYPE_Q5_1] = colibri_gemm_q5_1_##BLOCKS,                  \
            [COLIBRI_DTYPE_Q2_K] = colibri_gemm_q2_k_##BLOCKS,                  \
            [COLIBRI_DTYPE_Q3_K] = colibri_gemm_q3_k_##BLOCKS,                  \
            [COLIBRI_DTYPE_Q4_K] = colibri_gemm_q4_k_##BLOCKS,                  \
            [COLIBRI_DTYPE_Q5_K] = colibri_gemm_q5_k_##BLOCKS,                  \
            [COLIBRI_DTYPE_Q6_K] = colibri_gemm_q6_k_##BLOCKS,                  \
            [COLIBRI_DTYPE_IQ4_NL] = colibri_gemm_iq4_nl_##BLOCKS,              \
            [COLIBRI_DTYPE_IQ4_XS] = colibri_gemm_iq4_xs_##BLOCKS,              \
            [COLIBRI_DTYPE_MXFP4] = colibri_gemm_mxfp4_##BLOCKS,                \
        },                                                                      \
        colibri_quantize_q8_h_neon,                                             \
        colibri_quantize_q8_s_neon,                                             \
        {colibri_weighted_sum_f32_neon, colibri_weighted_sum_f16_neon},         \
        {colibri_f32_row_from_f32, colibri_f16_row_from_f32_neon},              \
        colibri_softmax_neon,                                                   \
        colibri_silu_mul_neon,                                                  \
        .gemm_from = {0}, /* every type: COLIBRI_GEMM_FROM_DEFAULT */          \
        .dequantize = COLIBRI_BLOCK_ENTRIES(colibri_dequantize_, neon),         \
        .dot_rows_exact = COLIBRI_BLOCK_ENTRIES(colibri_dot_rows_exact_, neon), \
    };

#endif /* COLIBRI_ARM_TABLE_H */
