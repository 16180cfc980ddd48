/*
 * x86_avx512/blocks_quants.h — the quants of the types of quant_blocks.h as
 * unsigned bytes (q = u - C, x86_avx2/blocks_unpack.h), two groups of 32 per
 * 512-bit vector, for the AVX-512 kernels (dot_blocks.c, gemm_blocks.c).
 */
#ifndef COLIBRI_X86_AVX512_BLOCKS_QUANTS_H
#define COLIBRI_X86_AVX512_BLOCKS_QUANTS_H

#include "../x86_avx2/blocks_unpack.h"
#include "../isa.h"

/* Where a type's integer scales (mins) apply: nowhere, per half (the 16-element
 * sub-blocks: before a group's two halves are added) or per group (the 32-element
 * ones: after). */
#define COLIBRI_NONE 0
#define COLIBRI_PER_HALF 1
#define COLIBRI_PER_GROUP 2

/* ---- the 256-element types: groups 2p, 2p + 1 of a super-block -------------------------- */

/* srlv counts: a for the lower 256 bits (group 2p), b for the upper (group 2p + 1). */
static inline __m512i colibri_shifts(int a, int b) {
    return _mm512_setr_epi64(a, a, a, a, b, b, b, b);
}

static inline __m512i colibri_bcast256(const uint8_t *p) {
    return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
}

/* Q2_K / Q3_K's low 2 bits: group s at qs[32 (s/4) + j] >> 2 (s%4). */
static inline __m512i colibri_k_bits2(const uint8_t qs[64], int p) {
    __m512i v = _mm512_srlv_epi64(colibri_bcast256(qs + 32 * (p / 2)), colibri_shifts(4 * (p % 2), 4 * (p % 2) + 2));
    return _mm512_and_si512(v, _mm512_set1_epi8(0x03));
}

/* Bit s of every byte of 32 bytes (Q3_K's hmask, Q5_K's qh), for s = 2p, 2p + 1, moved to bit `to`. */
static inline __m512i colibri_k_bit(const uint8_t bits[32], int p, int to) {
    __m512i v = _mm512_and_si512(_mm512_srlv_epi64(colibri_bcast256(bits), colibri_shifts(2 * p, 2 * p + 1)),
                                 _mm512_set1_epi8(0x01));
    return _mm512_sll_epi16(v, _mm_cvtsi32_si128(to));
}

static inline __m512i colibri_q2_k_quants2(const colibri_block_q2_k *b, int p) { return colibri_k_bits2(b->qs, p); }

static inline __m512i colibri_q3_k_quants2(const colibri_block_q3_k *b, int p) {
    return _mm512_or_si512(colibri_k_bits2(b->qs, p), colibri_k_bit(b->hmask, p, 2));
}

/* Q4_K / Q5_K: group s's nibble at qs[32 (s/2) + j] >> 4 (s%2): both nibbles of one 32 bytes. */
static inline __m512i colibri_k_nibbles2(const uint8_t qs[128], int p) {
    __m512i v = _mm512_srlv_epi64(colibri_bcast256(qs + 32 * p), colibri_shifts(0, 4));
    return _mm512_and_si512(v, _mm512_set1_epi8(0x0f));
}

static inline __m512i colibri_q4_k_quants2(const colibri_block_q4_k *b, int p) { return colibri_k_nibbles2(b->qs, p); }

static inline __m512i colibri_q5_k_quants2(const colibri_block_q5_k *b, int p) {
    return _mm512_or_si512(colibri_k_nibbles2(b->qs, p), colibri_k_bit(b->qh, p, 4));
}

/* Q6_K: group s's low nibble at ql[64 (s/4) + 32 (s%2) + j] >> 4 ((s%4)/2): 64 contiguous
 * bytes for s = 2p, 2p + 1; its high bits at qh[32 (s/4) + j] >> 2 (s%4). */
static inline __m512i colibri_q6_k_quants2(const colibri_block_q6_k *b, int p) {
    __m512i lo = _mm512_loadu_si512((const void *)(b->ql + 64 * (p / 2)));
    lo = _mm512_and_si512(p % 2 ? _mm512_srli_epi16(lo, 4) : lo, _mm512_set1_epi8(0x0f));
    __m512i hi = _mm512_srlv_epi64(colibri_bcast256(b->qh + 32 * (p / 2)), colibri_shifts(4 * (p % 2), 4 * (p % 2) + 2));
    hi = _mm512_slli_epi16(_mm512_and_si512(hi, _mm512_set1_epi8(0x03)), 4);
    return _mm512_or_si512(lo, hi);
}

/* IQ4_XS: sub-block s's 16 bytes at qs[16 s], low nibbles first, through the kv + 128 table. */
static inline __m512i colibri_iq4_xs_quants2(const colibri_block_iq4_xs *b, int p) {
    __m256i x0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b->qs + 32 * p)));
    __m256i x1 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b->qs + 32 * p + 16)));
    __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(x0), x1, 1);
    v = _mm512_and_si512(_mm512_srlv_epi64(v, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4)), _mm512_set1_epi8(0x0f));
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_setr_epi8(COLIBRI_IQ4_U8)), v);
}

/* ---- the 32-element types: blocks b, b1 (groups of their own) as the pair ---------------- */

/* Both blocks' nibbles (element j < 16 low nibble of qs[j], j + 16 high) as 64 bytes. */
static inline __m512i colibri_nibbles_pair(const uint8_t *qs_b, const uint8_t *qs_b1) {
    __m512i v = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)qs_b));
    v = _mm512_mask_broadcast_i32x4(v, 0xff00, _mm_loadu_si128((const __m128i *)qs_b1));
    v = _mm512_srlv_epi64(v, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4));
    return _mm512_and_si512(v, _mm512_set1_epi8(0x0f));
}

/* Q5_0 / Q5_1's bit 4: bit j of the little-endian qh, as 0x10 in byte j (block b) and 32 + j (b1). */
static inline __m512i colibri_q5_high_pair(const uint8_t qh_b[4], const uint8_t qh_b1[4]) {
    uint64_t k = (uint64_t)colibri_u32_at(qh_b) | (uint64_t)colibri_u32_at(qh_b1) << 32;
    return _mm512_maskz_mov_epi8((__mmask64)k, _mm512_set1_epi8(0x10));
}

static inline __m512i colibri_lut_pair(__m512i nibbles, __m128i table) {
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(table), nibbles);
}

#define COLIBRI_Q5_0_QUANTS2(b, b1) \
    _mm512_or_si512(colibri_nibbles_pair((b)->qs, (b1)->qs), colibri_q5_high_pair((b)->qh, (b1)->qh))
#define COLIBRI_Q5_1_QUANTS2(b, b1) COLIBRI_Q5_0_QUANTS2(b, b1)
#define COLIBRI_IQ4_NL_QUANTS2(b, b1) colibri_lut_pair(colibri_nibbles_pair((b)->qs, (b1)->qs), _mm_setr_epi8(COLIBRI_IQ4_U8))
#define COLIBRI_MXFP4_QUANTS2(b, b1) colibri_lut_pair(colibri_nibbles_pair((b)->qs, (b1)->qs), _mm_setr_epi8(COLIBRI_FP4_U8))

#endif /* COLIBRI_X86_AVX512_BLOCKS_QUANTS_H */
