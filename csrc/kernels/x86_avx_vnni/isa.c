/*
 * x86_avx_vnni/isa.c — the AVX-VNNI kernel table (AVX2 + FMA + F16C +
 * AVX-VNNI: Intel since Alder Lake, AMD since Zen 5): the kernels of
 * Q8_0 / Q4_0 / Q4_1 with vpdpbusd (this folder); everything else is AVX2's.
 */
#include "../x86_avx2/table.h"
#include "vnni.h"

COLIBRI_AVX2_TABLE(colibri_isa_avx_vnni, "avx_vnni", COLIBRI_CPU_HAS_AVX_VNNI, avx_vnni)
