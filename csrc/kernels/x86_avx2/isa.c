/* x86_avx2/isa.c — the AVX2 (+FMA, F16C) kernel table. */
#include "table.h"

COLIBRI_AVX2_TABLE(colibri_isa_avx2, "avx2", colibri_cpu_has_avx2, avx2)
