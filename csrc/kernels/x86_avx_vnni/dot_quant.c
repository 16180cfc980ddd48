/*
 * x86_avx_vnni/dot_quant.c — the one-token block kernels (dot_rows) with
 * AVX-VNNI: ../x86_avx2/block_core.h's 4-row loop with vpdpbusd (unsigned ×
 * signed bytes summed in groups of 4 straight into int32, no saturation) as
 * the integer step. Signed weights are made unsigned by an offset (Q8_0:
 * w ^ 0x80 = w + 128; Q4_0: the nibbles, offset 8) whose correction -c · sum a
 * is computed once per activation block, for the 4 rows, and is each row's
 * starting value. One vpdpbusd per row and block where AVX2 needs vpmaddubsw
 * and vpmaddwd (and for Q8_0 vpabsb and vpsignb); the Q8_H multipliers k
 * apply to the 4 rows' half sums at once in the reduction (one vpmulld per
 * block, colibri_hsum4_k_epi32). Bitwise equal to quant_dot.c.
 */
#include "../x86_avx2/block_core.h"
#include "vnni.h"

/* -(c · sum a) per lane. */
static inline __m256i colibri_vnni_neg_offset(__m256i av, char c) {
    __m256i sum = COLIBRI_DPBUSD(_mm256_setzero_si256(), _mm256_set1_epi8(c), av);
    return _mm256_sub_epi32(_mm256_setzero_si256(), sum);
}

static inline __m256i colibri_vnni_shared_q8_0(__m256i av, __m256i kv) {
    (void)kv;
    return colibri_vnni_neg_offset(av, (char)0x80);
}
static inline __m256i colibri_vnni_shared_q4_0(__m256i av, __m256i kv) {
    (void)kv;
    return colibri_vnni_neg_offset(av, 8);
}
static inline __m256i colibri_vnni_no_shared(__m256i av, __m256i kv) {
    (void)av, (void)kv;
    return _mm256_setzero_si256();
}

static inline __m256i colibri_vnni_prep_q8_0(const colibri_block_q8_0 *w) {
    return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)w->qs), _mm256_set1_epi8((char)0x80));
}
static inline __m256i colibri_vnni_prep_q4_0(const colibri_block_q4_0 *w) { return colibri_unpack_nibbles(w->qs); }
static inline __m256i colibri_vnni_prep_q4_1(const colibri_block_q4_1 *w) { return colibri_unpack_nibbles(w->qs); }

/* shared + sum of the unsigned weight bytes times the signed activation bytes. */
static inline __m256i colibri_vnni_mac(__m256i wu, __m256i av, __m256i kv, __m256i shared) {
    (void)kv;
    return COLIBRI_DPBUSD(shared, wu, av);
}

COLIBRI_X86_BLOCK_KERNELS(q8_0, avx_vnni, colibri_block_q8_0, colibri_q8_h_k32, colibri_vnni_shared_q8_0,
                          colibri_vnni_prep_q8_0, colibri_vnni_mac, colibri_hsum4_k_epi32, COLIBRI_NO_OFFSET)
COLIBRI_X86_BLOCK_KERNELS(q4_0, avx_vnni, colibri_block_q4_0, colibri_q8_h_k32, colibri_vnni_shared_q4_0,
                          colibri_vnni_prep_q4_0, colibri_vnni_mac, colibri_hsum4_k_epi32, COLIBRI_NO_OFFSET)
COLIBRI_X86_BLOCK_KERNELS(q4_1, avx_vnni, colibri_block_q4_1, colibri_q8_h_k32, colibri_vnni_no_shared,
                          colibri_vnni_prep_q4_1, colibri_vnni_mac, colibri_hsum4_k_epi32, COLIBRI_Q4_1_OFFSET)
