/* x86_avx2/isa.c — the AVX2 (+FMA, F16C) kernel table. */
#include "../isa.h"
#include "../quant.h"

const colibri_isa_table colibri_isa_avx2 = {
    "avx2",
    colibri_cpu_has_avx2,
    {
        [COLIBRI_DTYPE_F32] = colibri_dot_rows_f32_avx2,
        [COLIBRI_DTYPE_F16] = colibri_dot_rows_f16_avx2,
        [COLIBRI_DTYPE_BF16] = colibri_dot_rows_bf16_avx2,
        [COLIBRI_DTYPE_Q8_0] = colibri_dot_rows_q8_0_avx2,
        [COLIBRI_DTYPE_Q4_0] = colibri_dot_rows_q4_0_avx2,
        [COLIBRI_DTYPE_Q4_1] = colibri_dot_rows_q4_1_avx2,
    },
    {
        [COLIBRI_DTYPE_F32] = colibri_gemm_f32_avx2,
        [COLIBRI_DTYPE_F16] = colibri_gemm_f16_avx2,
        [COLIBRI_DTYPE_BF16] = colibri_gemm_bf16_avx2,
        [COLIBRI_DTYPE_Q8_0] = colibri_gemm_q8_0_avx2,
        [COLIBRI_DTYPE_Q4_0] = colibri_gemm_q4_0_avx2,
        [COLIBRI_DTYPE_Q4_1] = colibri_gemm_q4_1_avx2,
    },
    colibri_quantize_q8_0_avx2,
    colibri_quantize_q8_1_avx2,
    colibri_quantize_q8_s_avx2,
    {colibri_weighted_sum_f32_avx2, colibri_weighted_sum_f16_avx2},
    {colibri_f32_row_from_f32, colibri_f16_row_from_f32_avx2},
    colibri_softmax_avx2,
    colibri_silu_mul_avx2,
};
