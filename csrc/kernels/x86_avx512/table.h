/*
 * x86_avx512/table.h — the AVX-512-class kernel tables (x86_avx512/isa.c,
 * x86_amx/isa.c): AVX-512's kernels throughout, but for the gemm of Q4_K, Q5_K,
 * IQ4_XS and MXFP4 (one integer scale a group or none), Q2_K, Q3_K and Q6_K,
 * whose names end in GROUP_GEMM (avx512: vpdpbusd panels,
 * x86_avx512/gemm_blocks.c; amx: AMX-INT8 tiles, x86_amx/gemm_blocks.c, and for
 * the per-half types AMX-BF16 tiles, x86_amx/gemm_halves.c). The float
 * dot_rows kernels are AVX2's (a wider vector would change the reference's
 * 8-lane summation order, and vdpbf16ps rounds the activations to bf16, so
 * neither could stay bitwise equal to the reference; the float dots are
 * memory-bound at decode anyway);
 * the float gemm kernels keep those 8 lanes, two tokens to a 512-bit
 * register, in a 4 rows × 8 tokens tile (gemm_float.c).
 */
#ifndef COLIBRI_AVX512_TABLE_H
#define COLIBRI_AVX512_TABLE_H

#include "../isa.h"
#include "../quant.h"

#define COLIBRI_AVX512_TABLE(VAR, NAME, CPU_SUPPORTS, GROUP_GEMM)                                 \
const colibri_isa_table VAR = {                                                                   \
    NAME,                                                                                         \
    CPU_SUPPORTS,                                                                                 \
    {                                                                                             \
        [COLIBRI_DTYPE_F32] = colibri_dot_rows_f32_avx2,                                          \
        [COLIBRI_DTYPE_F16] = colibri_dot_rows_f16_avx2,                                          \
        [COLIBRI_DTYPE_BF16] = colibri_dot_rows_bf16_avx2,                                        \
        [COLIBRI_DTYPE_Q8_0] = colibri_dot_rows_q8_0_avx512,                                      \
        [COLIBRI_DTYPE_Q4_0] = colibri_dot_rows_q4_0_avx512,                                      \
        [COLIBRI_DTYPE_Q4_1] = colibri_dot_rows_q4_1_avx512,                                      \
        [COLIBRI_DTYPE_Q5_0] = colibri_dot_rows_q5_0_avx512,                                      \
        [COLIBRI_DTYPE_Q5_1] = colibri_dot_rows_q5_1_avx512,                                      \
        [COLIBRI_DTYPE_Q2_K] = colibri_dot_rows_q2_k_avx512,                                      \
        [COLIBRI_DTYPE_Q3_K] = colibri_dot_rows_q3_k_avx512,                                      \
        [COLIBRI_DTYPE_Q4_K] = colibri_dot_rows_q4_k_avx512,                                      \
        [COLIBRI_DTYPE_Q5_K] = colibri_dot_rows_q5_k_avx512,                                      \
        [COLIBRI_DTYPE_Q6_K] = colibri_dot_rows_q6_k_avx512,                                      \
        [COLIBRI_DTYPE_IQ4_NL] = colibri_dot_rows_iq4_nl_avx512,                                  \
        [COLIBRI_DTYPE_IQ4_XS] = colibri_dot_rows_iq4_xs_avx512,                                  \
        [COLIBRI_DTYPE_MXFP4] = colibri_dot_rows_mxfp4_avx512,                                    \
    },                                                                                            \
    {                                                                                             \
        [COLIBRI_DTYPE_F32] = colibri_gemm_f32_avx512,                                            \
        [COLIBRI_DTYPE_F16] = colibri_gemm_f16_avx512,                                            \
        [COLIBRI_DTYPE_BF16] = colibri_gemm_bf16_avx512,                                          \
        [COLIBRI_DTYPE_Q8_0] = colibri_gemm_q8_0_avx512,                                          \
        [COLIBRI_DTYPE_Q4_0] = colibri_gemm_q4_0_avx512,                                          \
        [COLIBRI_DTYPE_Q4_1] = colibri_gemm_q4_1_avx512,                                          \
        [COLIBRI_DTYPE_Q5_0] = colibri_gemm_q5_0_avx512,                                          \
        [COLIBRI_DTYPE_Q5_1] = colibri_gemm_q5_1_avx512,                                          \
        [COLIBRI_DTYPE_Q2_K] = colibri_gemm_q2_k_##GROUP_GEMM,                                    \
        [COLIBRI_DTYPE_Q3_K] = colibri_gemm_q3_k_##GROUP_GEMM,                                    \
        [COLIBRI_DTYPE_Q4_K] = colibri_gemm_q4_k_##GROUP_GEMM,                                    \
        [COLIBRI_DTYPE_Q5_K] = colibri_gemm_q5_k_##GROUP_GEMM,                                    \
        [COLIBRI_DTYPE_Q6_K] = colibri_gemm_q6_k_##GROUP_GEMM,                                    \
        [COLIBRI_DTYPE_IQ4_NL] = colibri_gemm_iq4_nl_avx512,                                      \
        [COLIBRI_DTYPE_IQ4_XS] = colibri_gemm_iq4_xs_##GROUP_GEMM,                                \
        [COLIBRI_DTYPE_MXFP4] = colibri_gemm_mxfp4_##GROUP_GEMM,                                  \
    },                                                                                            \
    colibri_quantize_q8_h_avx512,                                                                 \
    colibri_quantize_q8_s_avx512,                                                                 \
    {colibri_weighted_sum_f32_avx512, colibri_weighted_sum_f16_avx512},                           \
    {colibri_f32_row_from_f32, colibri_f16_row_from_f32_avx2},                                    \
    colibri_softmax_avx512,                                                                       \
    colibri_silu_mul_avx512,                                                                      \
    /* measured on the Mixtral-small expert shapes, one thread, weights from DRAM: Q4_0 dot_rows  \
     * per token 0.57 ms at 4 tokens against the row-panel gemm's 0.74, 0.81 / 0.74 at 6; the    \
     * other block types: gemm_few against either table's panel, kernels_bench 4096 4096 4 T in  \
     * cache, level at 8 tokens (Q4_K at 2-7 tokens: 39-46 GMAC/s against 10-30)                 \
     */                                                                                           \
    .gemm_from = {[COLIBRI_DTYPE_Q8_0] = 6, [COLIBRI_DTYPE_Q4_0] = 5, [COLIBRI_DTYPE_Q4_1] = 5,   \
                  [COLIBRI_DTYPE_Q2_K] = 8, [COLIBRI_DTYPE_Q3_K] = 8, [COLIBRI_DTYPE_Q4_K] = 8,          \
                  [COLIBRI_DTYPE_Q5_K] = 8, [COLIBRI_DTYPE_Q6_K] = 8, [COLIBRI_DTYPE_IQ4_XS] = 8,        \
                  [COLIBRI_DTYPE_Q5_0] = 8, [COLIBRI_DTYPE_Q5_1] = 8, [COLIBRI_DTYPE_IQ4_NL] = 8,        \
                  [COLIBRI_DTYPE_MXFP4] = 8},                                                     \
    .gemm_few = COLIBRI_BLOCK_ENTRIES(colibri_gemm_few_, avx512),                                 \
    /* exact mode: AVX2's (its dot is the F32 dot_rows above, AVX2's, on the dequantized rows) */ \
    .dequantize = COLIBRI_BLOCK_ENTRIES(colibri_dequantize_, avx2),                               \
    .dot_rows_exact = COLIBRI_BLOCK_ENTRIES(colibri_dot_rows_exact_, avx2),                       \
};

#endif /* COLIBRI_AVX512_TABLE_H */
