/* arm_neon/isa.c — the NEON (AArch64 Advanced SIMD, baseline ARMv8-A) kernel table. */
#include "table.h"

COLIBRI_NEON_TABLE(colibri_isa_neon, "neon", colibri_cpu_has_neon, neon)
