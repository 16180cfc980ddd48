/*
 * x86_avx2/blocks_unpack.h — unpacking of the types of quant_blocks.h shared
 * by the x86 kernels (x86_avx2/dot_blocks.c, x86_avx512/dot_blocks.c,
 * x86_avx512/gemm_blocks.c); included only by files compiled with at least
 * AVX2 + F16C. Everything here is exact integer work: the kernels' results
 * are bitwise the reference's (quant_dot_blocks.c) whatever the unpacking.
 *
 * A group is 32 elements of a row (one activation block); a half is 16 of
 * them. The kernels need, per group, the 32 quants as unsigned bytes u_j with
 * q_j = u_j - C for a per-type constant C (so that the unsigned x signed byte
 * products of vpmaddubsw / vpdpbusd apply), and per half the integer scale S
 * and min M (quant_blocks.h's contract).
 */
#ifndef COLIBRI_X86_BLOCKS_UNPACK_H
#define COLIBRI_X86_BLOCKS_UNPACK_H

#include <immintrin.h>
#include <string.h>

#include "../quant.h"

/* ---- sub-block scales and mins of one block, per half -------------------------------
 * Each returns 16 int8: byte h = the scale (min) of half h of the super-block
 * (sub-blocks of 32 give both their halves the same value). */

/* Q4_K / Q5_K: the 8 six-bit scales (low 8 bytes) and mins (high 8 bytes) of
 * scales[12] (colibri_k_scale_min_words, quant_blocks.h). */
static inline __m128i colibri_k_scale_min8(const uint8_t scales[12]) {
    uint32_t v[4];
    colibri_k_scale_min_words(scales, v);
    return _mm_setr_epi32((int)v[0], (int)v[1], (int)v[2], (int)v[3]);
}

/* Byte k of v repeated for halves 2k and 2k + 1 (k < 8), or byte 8 + k (high = 1). */
static inline __m128i colibri_per_half(__m128i v, int high) {
    const __m128i lo = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    return _mm_shuffle_epi8(v, high ? _mm_add_epi8(lo, _mm_set1_epi8(8)) : lo);
}

/* Q6_K: the signed scales as stored. */
static inline __m128i colibri_q6_k_scales16(const colibri_block_q6_k *b) {
    return _mm_loadu_si128((const __m128i *)b->scales);
}

/* Q3_K: the 16 six-bit scales minus 32 (signed). */
static inline __m128i colibri_q3_k_scales16(const colibri_block_q3_k *b) {
    __m128i x = _mm_loadl_epi64((const __m128i *)b->scales);   /* bytes 0..7: the low nibbles */
    __m128i lo = _mm_and_si128(_mm_unpacklo_epi64(x, _mm_srli_epi16(x, 4)), _mm_set1_epi8(0x0f));
    __m128i h = _mm_set1_epi32((int)colibri_u32_at(b->scales + 8));   /* scale j: bits 2 (j/4) of byte j % 4 */
    h = _mm_and_si128(_mm_srlv_epi32(h, _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(0x03));
    return _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(h, 4)), _mm_set1_epi8(32));
}

/* Q2_K: the 16 four-bit scales (low nibbles of scales[16]) and mins (high nibbles). */
static inline __m128i colibri_q2_k_scales16(const colibri_block_q2_k *b) {
    return _mm_and_si128(_mm_loadu_si128((const __m128i *)b->scales), _mm_set1_epi8(0x0f));
}
static inline __m128i colibri_q2_k_mins16(const colibri_block_q2_k *b) {
    return _mm_and_si128(_mm_srli_epi16(_mm_loadu_si128((const __m128i *)b->scales), 4), _mm_set1_epi8(0x0f));
}

/* IQ4_XS: the 8 six-bit scales minus 32, per half (colibri_iq4_xs_scale_bytes, quant_blocks.h). */
static inline __m128i colibri_iq4_xs_scales16(const colibri_block_iq4_xs *b) {
    __m128i ls = _mm_cvtsi64_si128((long long)colibri_iq4_xs_scale_bytes(b));
    return colibri_per_half(_mm_sub_epi8(ls, _mm_set1_epi8(32)), 0);
}

/* MXFP4's 2^(e - 128) (colibri_e8m0_half) of 4 exponents, exactly. */
static inline __m128 colibri_e8m0_half4(uint8_t e0, uint8_t e1, uint8_t e2, uint8_t e3) {
    __m128i e = _mm_setr_epi32(e0, e1, e2, e3);
    __m128i small = _mm_sllv_epi32(_mm_set1_epi32(0x00200000), e);
    __m128i large = _mm_slli_epi32(_mm_sub_epi32(e, _mm_set1_epi32(1)), 23);
    return _mm_castsi128_ps(_mm_blendv_epi8(large, small, _mm_cmpgt_epi32(_mm_set1_epi32(2), e)));
}

/* ---- 4 rows' per-half values as the reduction lays out its sums ---------------------
 * x0..x3: 16 bytes of 4 rows (byte h: row r's value for half h) → t[p] (p = 0..3),
 * 16 bytes with byte 4 i + r = row r's value for half 4 p + i: the order of the 16
 * per-half sums of the 4 rows over groups 2p, 2p + 1 (x86_avx512/dot_blocks.c); the
 * first 8 bytes are group 2p's (x86_avx2/dot_blocks.c). */
static inline void colibri_rows_by_half(__m128i x0, __m128i x1, __m128i x2, __m128i x3, __m128i t[4]) {
    __m128i lo01 = _mm_unpacklo_epi8(x0, x1), hi01 = _mm_unpackhi_epi8(x0, x1);
    __m128i lo23 = _mm_unpacklo_epi8(x2, x3), hi23 = _mm_unpackhi_epi8(x2, x3);
    t[0] = _mm_unpacklo_epi16(lo01, lo23);
    t[1] = _mm_unpackhi_epi16(lo01, lo23);
    t[2] = _mm_unpacklo_epi16(hi01, hi23);
    t[3] = _mm_unpackhi_epi16(hi01, hi23);
}

/* The f16 field at byte `at` of 4 blocks as 4 floats (exact). */
static inline __m128 colibri_f16x4_at(const void *b0, const void *b1, const void *b2, const void *b3, size_t at) {
    uint16_t v[4];
    memcpy(&v[0], (const char *)b0 + at, 2), memcpy(&v[1], (const char *)b1 + at, 2);
    memcpy(&v[2], (const char *)b2 + at, 2), memcpy(&v[3], (const char *)b3 + at, 2);
    return _mm_cvtph_ps(_mm_cvtsi64_si128((long long)colibri_f16x4_u64(v[0], v[1], v[2], v[3])));
}

/* ---- quants ----------------------------------------------------------------------------
 * The 32 unsigned quants u of group s (0..7) of a 256-element block as bytes in element
 * order: q = u - C (C: COLIBRI_C_<TYPE>). These are the 256-bit versions; the AVX-512
 * file builds two groups per vector the same way. */
#define COLIBRI_C_Q2_K 0
#define COLIBRI_C_Q3_K 4
#define COLIBRI_C_Q4_K 0
#define COLIBRI_C_Q5_K 0
#define COLIBRI_C_Q6_K 32
#define COLIBRI_C_Q5_0 16
#define COLIBRI_C_Q5_1 0
#define COLIBRI_C_LUT 128   /* IQ4_NL, IQ4_XS, MXFP4: table values + 128 */

/* COLIBRI_IQ4_VALUES as a pshufb table; kv + 128 of it and of COLIBRI_FP4_VALUES, the unsigned
 * bytes written as the signed chars _mm_setr_epi8 takes (241 as -15). */
#define COLIBRI_IQ4_I8 -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113
#define COLIBRI_IQ4_U8 1, 24, 45, 63, 79, 93, 106, 118, -127, -115, -103, -90, -75, -59, -39, -15
#define COLIBRI_FP4_U8 -128, -127, -126, -125, -124, -122, -120, -116, -128, 127, 126, 125, 124, 122, 120, 116

#endif /* COLIBRI_X86_BLOCKS_UNPACK_H */
