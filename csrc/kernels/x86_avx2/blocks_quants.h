/*
 * x86_avx2/blocks_quants.h — the 32 unsigned quants u (q = u - C,
 * blocks_unpack.h) of one group of the types of quant_blocks.h as a 256-bit
 * vector, for the AVX2 kernels (dot_blocks.c, gemm_blocks.c); the AVX-512
 * ones build two groups per vector (x86_avx512/blocks_quants.h).
 */
#ifndef COLIBRI_X86_AVX2_BLOCKS_QUANTS_H
#define COLIBRI_X86_AVX2_BLOCKS_QUANTS_H

#include "blocks_unpack.h"

/* ---- quants of group s (0..7) of a 256-element block, as 32 bytes (u, or kv for IQ4_XS) ---- */

static inline __m256i colibri_load32(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }

static inline __m256i colibri_bits_at(__m256i v, int shift, int mask) {
    return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(shift)), _mm256_set1_epi8((char)mask));
}

static inline __m256i colibri_q2_k_quants(const colibri_block_q2_k *b, int s) {
    return colibri_bits_at(colibri_load32(b->qs + 32 * (s / 4)), 2 * (s % 4), 0x03);
}

static inline __m256i colibri_q3_k_quants(const colibri_block_q3_k *b, int s) {
    __m256i hi = _mm256_slli_epi16(colibri_bits_at(colibri_load32(b->hmask), s, 0x01), 2);
    return _mm256_or_si256(colibri_bits_at(colibri_load32(b->qs + 32 * (s / 4)), 2 * (s % 4), 0x03), hi);
}

static inline __m256i colibri_q4_k_quants(const colibri_block_q4_k *b, int s) {
    return colibri_bits_at(colibri_load32(b->qs + 32 * (s / 2)), 4 * (s % 2), 0x0f);
}

static inline __m256i colibri_q5_k_quants(const colibri_block_q5_k *b, int s) {
    __m256i hi = _mm256_slli_epi16(colibri_bits_at(colibri_load32(b->qh), s, 0x01), 4);
    return _mm256_or_si256(colibri_bits_at(colibri_load32(b->qs + 32 * (s / 2)), 4 * (s % 2), 0x0f), hi);
}

static inline __m256i colibri_q6_k_quants(const colibri_block_q6_k *b, int s) {
    __m256i lo = colibri_bits_at(colibri_load32(b->ql + 64 * (s / 4) + 32 * (s % 2)), 4 * ((s % 4) / 2), 0x0f);
    __m256i hi = colibri_bits_at(colibri_load32(b->qh + 32 * (s / 4)), 2 * (s % 4), 0x03);
    return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
}

/* 16 bytes of nibbles (element j < 16 low nibble of qs[j], j + 16 high) as 32 bytes. */
static inline __m256i colibri_nibbles32(const uint8_t *qs) {
    __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    both = _mm256_srlv_epi64(both, _mm256_setr_epi64x(0, 0, 4, 4));
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

static inline __m256i colibri_iq4_xs_quants(const colibri_block_iq4_xs *b, int s) {
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_setr_epi8(COLIBRI_IQ4_I8)),
                               colibri_nibbles32(b->qs + 16 * s));
}

/* Q5_0 / Q5_1's bit 4: bit j of the little-endian qh as 0x10 in byte j. */
static inline __m256i colibri_q5_high32(const uint8_t qh[4]) {
    __m256i v = _mm256_set1_epi32((int)colibri_u32_at(qh));
    v = _mm256_shuffle_epi8(v, _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2,
                                                 3, 3, 3, 3, 3, 3, 3, 3));
    __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), _mm256_set1_epi8(0x10));
}

#define COLIBRI_Q5_QUANTS(b) _mm256_or_si256(colibri_nibbles32((b)->qs), colibri_q5_high32((b)->qh))
#define COLIBRI_IQ4_NL_QUANTS(b) \
    _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_setr_epi8(COLIBRI_IQ4_I8)), colibri_nibbles32((b)->qs))
#define COLIBRI_MXFP4_U16 16, 17, 18, 19, 20, 22, 24, 28, 16, 15, 14, 13, 12, 10, 8, 4   /* fp4 + 16 */
#define COLIBRI_C_MXFP4_U16 16   /* the offset of COLIBRI_MXFP4_U16 */
#define COLIBRI_MXFP4_QUANTS(b) \
    _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_setr_epi8(COLIBRI_MXFP4_U16)), colibri_nibbles32((b)->qs))

#endif /* COLIBRI_X86_AVX2_BLOCKS_QUANTS_H */
