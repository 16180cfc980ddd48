/* arm_dotprod/isa.c — the NEON table with the dot product extension (ARMv8.2
 * sdot) for the block types; every other kernel is baseline NEON's. */
#include "../isa.h"
#include "../kernels.h"
#include "../quant.h"

const colibri_isa_table colibri_isa_neon_dotprod = {
    "neon_dotprod",
    colibri_cpu_has_neon_dotprod,
    {
        [COLIBRI_DTYPE_F32] = colibri_dot_rows_f32_neon,
        [COLIBRI_DTYPE_F16] = colibri_dot_rows_f16_neon,
        [COLIBRI_DTYPE_BF16] = colibri_dot_rows_bf16_neon,
        [COLIBRI_DTYPE_Q8_0] = colibri_dot_rows_q8_0_neon_dotprod,
        [COLIBRI_DTYPE_Q4_0] = colibri_dot_rows_q4_0_neon_dotprod,
        [COLIBRI_DTYPE_Q4_1] = colibri_dot_rows_q4_1_neon_dotprod,
    },
    {
        [COLIBRI_DTYPE_F32] = colibri_gemm_f32_neon,
        [COLIBRI_DTYPE_F16] = colibri_gemm_f16_neon,
        [COLIBRI_DTYPE_BF16] = colibri_gemm_bf16_neon,
        [COLIBRI_DTYPE_Q8_0] = colibri_gemm_q8_0_neon_dotprod,
        [COLIBRI_DTYPE_Q4_0] = colibri_gemm_q4_0_neon_dotprod,
        [COLIBRI_DTYPE_Q4_1] = colibri_gemm_q4_1_neon_dotprod,
    },
    colibri_quantize_q8_0_neon,
    colibri_quantize_q8_1_neon,
    {colibri_weighted_sum_f32_neon, colibri_weighted_sum_f16_neon},
    {colibri_f32_row_from_f32, colibri_f16_row_from_f32_neon},
    colibri_softmax_neon,
    colibri_silu_mul_neon,
};
