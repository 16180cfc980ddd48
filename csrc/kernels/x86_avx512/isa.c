/*
 * x86_avx512/isa.c — the AVX-512 kernel table (AVX-512 F, BW, VL, VNNI):
 * x86_avx512/table.h's, with the vpdpbusd panels for the gemm of the types of
 * quant_blocks.h.
 */
#include "table.h"

COLIBRI_AVX512_TABLE(colibri_isa_avx512, "avx512", colibri_cpu_has_avx512, avx512)
