/*
 * x86_amx/isa.c — the AMX kernel table (AVX-512 plus AMX-TILE, AMX-INT8 and
 * AMX-BF16: Intel since Sapphire Rapids): x86_avx512/table.h's, with AMX tiles
 * for the gemm of Q4_K, Q5_K, IQ4_XS and MXFP4 (AMX-INT8, gemm_blocks.c) and
 * Q2_K, Q3_K and Q6_K (AMX-BF16, gemm_halves.c).
 */
#include "../x86_avx512/table.h"

COLIBRI_AVX512_TABLE(colibri_isa_amx, "amx", colibri_cpu_has_amx, amx)
