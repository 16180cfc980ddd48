/*
 * x86_avx2/table.h — the AVX2-class kernel tables (x86_avx2/isa.c,
 * x86_avx_vnni/isa.c): AVX2's kernels throughout, but for Q8_0 / Q4_0 / Q4_1's
 * dot_rows and gemm, whose names end in INT8 (avx2: maddubs; avx_vnni: vpdpbusd).
 * The other block types' gemm is x86_avx2/gemm_blocks.c's panel.
 */
#ifndef COLIBRI_AVX2_TABLE_H
#define COLIBRI_AVX2_TABLE_H

#include "../isa.h"
#include "../quant.h"

#define COLIBRI_AVX2_TABLE(VAR, NAME, CPU_SUPPORTS, INT8)                        \
    const colibri_isa_table VAR = {                                             \
        NAME,                                                                   \
        CPU_SUPPORTS,                                                           \
        {                                                                       \
            [COLIBRI_DTYPE_F32] = colibri_dot_rows_f32_avx2,                    \
            [COLIBRI_DTYPE_F16] = colibri_dot_rows_f16_avx2,                    \
            [COLIBRI_DTYPE_BF16] = colibri_dot_rows_bf16_avx2,                  \
            [COLIBRI_DTYPE_Q8_0] = colibri_dot_rows_q8_0_##INT8,                \
            [COLIBRI_DTYPE_Q4_0] = colibri_dot_rows_q4_0_##INT8,                \
            [COLIBRI_DTYPE_Q4_1] = colibri_dot_rows_q4_1_##INT8,                \
            [COLIBRI_DTYPE_Q5_0] = colibri_dot_rows_q5_0_avx2,                  \
            [COLIBRI_DTYPE_Q5_1] = colibri_dot_rows_q5_1_avx2,                  \
            [COLIBRI_DTYPE_Q2_K] = colibri_dot_rows_q2_k_avx2,                  \
            [COLIBRI_DTYPE_Q3_K] = colibri_dot_rows_q3_k_avx2,                  \
            [COLIBRI_DTYPE_Q4_K] = colibri_dot_rows_q4_k_avx2,                  \
            [COLIBRI_DTYPE_Q5_K] = colibri_dot_rows_q5_k_avx2,                  \
            [COLIBRI_DTYPE_Q6_K] = colibri_dot_rows_q6_k_avx2,                  \
            [COLIBRI_DTYPE_IQ4_NL] = colibri_dot_rows_iq4_nl_avx2,              \
            [COLIBRI_DTYPE_IQ4_XS] = colibri_dot_rows_iq4_xs_avx2,              \
            [COLIBRI_DTYPE_MXFP4] = colibri_dot_rows_mxfp4_avx2,                \
        },                                                                      \
        {                                                                       \
            [COLIBRI_DTYPE_F32] = colibri_gemm_f32_avx2,                        \
            [COLIBRI_DTYPE_F16] = colibri_gemm_f16_avx2,                        \
            [COLIBRI_DTYPE_BF16] = colibri_gemm_bf16_avx2,                      \
            [COLIBRI_DTYPE_Q8_0] = colibri_gemm_q8_0_##INT8,                    \
            [COLIBRI_DTYPE_Q4_0] = colibri_gemm_q4_0_##INT8,                    \
            [COLIBRI_DTYPE_Q4_1] = colibri_gemm_q4_1_##INT8,                    \
            [COLIBRI_DTYPE_Q5_0] = colibri_gemm_q5_0_avx2,                      \
            [COLIBRI_DTYPE_Q5_1] = colibri_gemm_q5_1_avx2,                      \
            [COLIBRI_DTYPE_Q2_K] = colibri_gemm_q2_k_avx2,                      \
            [COLIBRI_DTYPE_Q3_K] = colibri_gemm_q3_k_avx2,                      \
            [COLIBRI_DTYPE_Q4_K] = colibri_gemm_q4_k_avx2,                      \
            [COLIBRI_DTYPE_Q5_K] = colibri_gemm_q5_k_avx2,                      \
            [COLIBRI_DTYPE_Q6_K] = colibri_gemm_q6_k_avx2,                      \
            [COLIBRI_DTYPE_IQ4_NL] = colibri_gemm_iq4_nl_avx2,                  \
            [COLIBRI_DTYPE_IQ4_XS] = colibri_gemm_iq4_xs_avx2,                  \
            [COLIBRI_DTYPE_MXFP4] = colibri_gemm_mxfp4_avx2,                    \
        },                                                                      \
        colibri_quantize_q8_h_avx2,                                             \
        colibri_quantize_q8_s_avx2,                                             \
        {colibri_weighted_sum_f32_avx2, colibri_weighted_sum_f16_avx2},         \
        {colibri_f32_row_from_f32, colibri_f16_row_from_f32_avx2},              \
        colibri_softmax_avx2,                                                   \
        colibri_silu_mul_avx2,                                                  \
        /* gemm_blocks.c's panels pay their packing from 8 tokens on (in cache, 512 x 4096, one  \
         * thread: Q6_K 13 GMAC/s at 4 tokens against 18 per token, 20.5 against 18 at 8); the    \
         * other types: COLIBRI_GEMM_FROM_DEFAULT */                                               \
        .gemm_from = {[COLIBRI_DTYPE_Q5_0] = 8, [COLIBRI_DTYPE_Q5_1] = 8, [COLIBRI_DTYPE_Q2_K] = 8,    \
                      [COLIBRI_DTYPE_Q3_K] = 8, [COLIBRI_DTYPE_Q4_K] = 8, [COLIBRI_DTYPE_Q5_K] = 8,    \
                      [COLIBRI_DTYPE_Q6_K] = 8, [COLIBRI_DTYPE_IQ4_NL] = 8, [COLIBRI_DTYPE_IQ4_XS] = 8, \
                      [COLIBRI_DTYPE_MXFP4] = 8},                                                  \
        /* under gemm_from: each block's or group's rows unpacked once for 4 tokens */            \
        .gemm_few = {[COLIBRI_DTYPE_Q8_0] = colibri_gemm_few_q8_0_##INT8,                          \
                     [COLIBRI_DTYPE_Q4_0] = colibri_gemm_few_q4_0_##INT8,                          \
                     [COLIBRI_DTYPE_Q4_1] = colibri_gemm_few_q4_1_##INT8,                          \
                     [COLIBRI_DTYPE_Q2_K] = colibri_gemm_few_q2_k_avx2,                            \
                     [COLIBRI_DTYPE_Q3_K] = colibri_gemm_few_q3_k_avx2,                            \
                     [COLIBRI_DTYPE_Q4_K] = colibri_gemm_few_q4_k_avx2,                            \
                     [COLIBRI_DTYPE_Q5_K] = colibri_gemm_few_q5_k_avx2,                            \
                     [COLIBRI_DTYPE_Q6_K] = colibri_gemm_few_q6_k_avx2,                            \
                     [COLIBRI_DTYPE_IQ4_XS] = colibri_gemm_few_iq4_xs_avx2},                       \
        .dequantize = COLIBRI_BLOCK_ENTRIES(colibri_dequantize_, avx2),         \
        .dot_rows_exact = COLIBRI_BLOCK_ENTRIES(colibri_dot_rows_exact_, avx2), \
    };

#endif /* COLIBRI_AVX2_TABLE_H */
