/*
 * x86_avx512/dot_quant.c — Q8_0 / Q4_0 × Q8_0 and Q4_1 × Q8_1 with AVX-512
 * VNNI (vpdpbusd on 256-bit vectors: unsigned × signed bytes summed in groups
 * of 4 straight into int32, no saturation), 4 rows at a time
 * (../x86_avx2/block_core.h). Signed weights are made unsigned by an offset
 * whose correction (offset · sum a) is computed once per activation block and
 * is the accumulator's starting value. Bitwise equal to quant_dot.c.
 */
#include "../x86_avx2/block_core.h"

/* -(c · sum a) per lane: the starting value that removes an offset c. */
static inline __m256i colibri_neg_offset(__m256i av, char c) {
    __m256i sum = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(c), av);
    return _mm256_sub_epi32(_mm256_setzero_si256(), sum);
}

static inline __m256i colibri_shared_q8_0(__m256i av) { return colibri_neg_offset(av, (char)0x80); }
static inline __m256i colibri_shared_q4_0(__m256i av) { return colibri_neg_offset(av, 8); }
static inline __m256i colibri_no_shared(__m256i av) {
    (void)av;
    return _mm256_setzero_si256();
}

/* Q8_0: w + 128 = w ^ 0x80 as uint8; sum (w + 128)·a - 128·sum a. */
static inline __m256i colibri_prep_q8_0(const colibri_block_q8_0 *w) {
    return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)w->qs), _mm256_set1_epi8((char)0x80));
}

/* Q4_0: sum nib·a - 8·sum a. Q4_1: sum nib·a. */
static inline __m256i colibri_prep_q4_0(const colibri_block_q4_0 *w) { return colibri_unpack_nibbles(w->qs); }
static inline __m256i colibri_prep_q4_1(const colibri_block_q4_1 *w) { return colibri_unpack_nibbles(w->qs); }

/* shared + sum of the unsigned weight bytes times the signed activation bytes. */
static inline __m256i colibri_mac(__m256i wu, __m256i av, __m256i shared) {
    return _mm256_dpbusd_epi32(shared, wu, av);
}

/* The one-token kernels; the multi-token ones are gemm_quant.c's. */
COLIBRI_X86_BLOCK_CORE(colibri_dot4_q8_0_avx512, colibri_block_q8_0, colibri_block_q8_0, colibri_shared_q8_0,
                       colibri_prep_q8_0, colibri_mac, COLIBRI_NO_OFFSET)
COLIBRI_X86_BLOCK_CORE(colibri_dot4_q4_0_avx512, colibri_block_q4_0, colibri_block_q8_0, colibri_shared_q4_0,
                       colibri_prep_q4_0, colibri_mac, COLIBRI_NO_OFFSET)
COLIBRI_X86_BLOCK_CORE(colibri_dot4_q4_1_avx512, colibri_block_q4_1, colibri_block_q8_1, colibri_no_shared,
                       colibri_prep_q4_1, colibri_mac, COLIBRI_Q4_1_OFFSET)
COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_q8_0_avx512, colibri_dot4_q8_0_avx512)
COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_q4_0_avx512, colibri_dot4_q4_0_avx512)
COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_q4_1_avx512, colibri_dot4_q4_1_avx512)
