/*
 * x86_avx2/dot_quant.c — Q8_0 / Q4_0 / Q4_1 × Q8_H with AVX2: int8 products
 * by vpmaddubsw (unsigned × signed → int16 pairs, which cannot saturate here:
 * |pair| <= 2·128·127), then vpmaddwd against the block's multipliers
 * [k0 x8 | k1 x8] into int32 (|lane| <= 2·32512·8), 4 rows at a time
 * (block_core.h). Bitwise equal to quant_dot.c.
 */
#include "block_core.h"

static inline __m256i colibri_no_shared(__m256i av, __m256i kv) {
    (void)av, (void)kv;
    return _mm256_setzero_si256();
}

/* Q8_0 · Q8_H: sum w·a = sum |w| · (a·sign(w)); |w| <= 128 fits uint8 and
 * a·sign(w) stays in int8 because activations are in [-127, 127]. */
static inline __m256i colibri_prep_q8_0(const colibri_block_q8_0 *w) {
    return _mm256_loadu_si256((const __m256i *)w->qs);
}

static inline __m256i colibri_mac_q8_0(__m256i wv, __m256i av, __m256i kv, __m256i shared) {
    (void)shared;
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(wv), _mm256_sign_epi8(av, wv)), kv);
}

/* Q4_0 · Q8_H: sum (nib - 8)·a·k = sum nib·a·k - shared, shared = 8·sum a·k (per lane). */
static inline __m256i colibri_shared_q4_0(__m256i av, __m256i kv) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(8), av), kv);
}

static inline __m256i colibri_prep_q4_0(const colibri_block_q4_0 *w) { return colibri_unpack_nibbles(w->qs); }

static inline __m256i colibri_mac_q4_0(__m256i nib, __m256i av, __m256i kv, __m256i shared) {
    return _mm256_sub_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(nib, av), kv), shared);
}

/* Q4_1 · Q8_H: sum nib·a·k (the offset goes through the activation's sums). */
static inline __m256i colibri_prep_q4_1(const colibri_block_q4_1 *w) { return colibri_unpack_nibbles(w->qs); }

static inline __m256i colibri_mac_q4_1(__m256i nib, __m256i av, __m256i kv, __m256i shared) {
    (void)shared;
    return _mm256_madd_epi16(_mm256_maddubs_epi16(nib, av), kv);
}

COLIBRI_X86_BLOCK_KERNELS(q8_0, avx2, colibri_block_q8_0, colibri_q8_h_k16, colibri_no_shared, colibri_prep_q8_0,
                          colibri_mac_q8_0, colibri_hsum4_epi32, COLIBRI_NO_OFFSET)
COLIBRI_X86_BLOCK_KERNELS(q4_0, avx2, colibri_block_q4_0, colibri_q8_h_k16, colibri_shared_q4_0, colibri_prep_q4_0,
                          colibri_mac_q4_0, colibri_hsum4_epi32, COLIBRI_NO_OFFSET)
COLIBRI_X86_BLOCK_KERNELS(q4_1, avx2, colibri_block_q4_1, colibri_q8_h_k16, colibri_no_shared, colibri_prep_q4_1,
                          colibri_mac_q4_1, colibri_hsum4_epi32, COLIBRI_Q4_1_OFFSET)
