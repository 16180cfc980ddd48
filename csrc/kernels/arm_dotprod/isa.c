/* arm_dotprod/isa.c — the NEON table with the dot product extension (ARMv8.2
 * sdot) for the block types; every other kernel is baseline NEON's. */
#include "../arm_neon/table.h"

COLIBRI_NEON_TABLE(colibri_isa_neon_dotprod, "neon_dotprod", colibri_cpu_has_neon_dotprod, neon_dotprod)
