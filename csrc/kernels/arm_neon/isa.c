/* arm_neon/isa.c — the NEON (AArch64 Advanced SIMD) kernel table. */
#include "../isa.h"
#include "../kernels.h"
#include "../quant.h"

const colibri_isa_table colibri_isa_neon = {
    "neon",
    colibri_cpu_has_neon,
    {
        [COLIBRI_DTYPE_F32] = colibri_dot_rows_f32_neon,
        [COLIBRI_DTYPE_F16] = colibri_dot_rows_f16_neon,
        [COLIBRI_DTYPE_BF16] = colibri_dot_rows_bf16_neon,
        [COLIBRI_DTYPE_Q8_0] = colibri_dot_rows_q8_0_neon,
        [COLIBRI_DTYPE_Q4_0] = colibri_dot_rows_q4_0_neon,
        [COLIBRI_DTYPE_Q4_1] = colibri_dot_rows_q4_1_neon,
    },
    {
        [COLIBRI_DTYPE_F32] = colibri_gemm_f32_neon,
        [COLIBRI_DTYPE_F16] = colibri_gemm_f16_neon,
        [COLIBRI_DTYPE_BF16] = colibri_gemm_bf16_neon,
        [COLIBRI_DTYPE_Q8_0] = colibri_gemm_q8_0_neon,
        [COLIBRI_DTYPE_Q4_0] = colibri_gemm_q4_0_neon,
        [COLIBRI_DTYPE_Q4_1] = colibri_gemm_q4_1_neon,
    },
    colibri_quantize_q8_0_neon,
    colibri_quantize_q8_1_neon,
    {colibri_weighted_sum_f32_neon, colibri_weighted_sum_f16_neon},
    {colibri_f32_row_from_f32, colibri_f16_row_from_f32_neon},
    colibri_softmax_neon,
    colibri_silu_mul_neon,
};
