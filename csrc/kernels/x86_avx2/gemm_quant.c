/*
 * x86_avx2/gemm_quant.c — the multi-token kernels (gemm) of the block types
 * with AVX2: 8 weight rows in the lanes, 2 panels (16 rows) against 2 tokens
 * at a time through the panel driver (gemm_panel.h). Weights and activations
 * are both in the paired layout (COLIBRI_P8_FILL_PAIRED, colibri_token_pairs):
 * each 4-byte group holds two values of half 0 then two of half 1, so
 * vpmaddubsw (unsigned × signed bytes
 * → int16 pair sums) leaves half 0's sums in the even words and half 1's in
 * the odd ones, and one vpmaddwd against the token's (k0, k1) word pair
 * widens a row's two halves times their multipliers into int32:
 *   Q4_0 / Q4_1: nibbles (0..15) times activations (-127..127) make pair sums
 *     of at most 3810 in magnitude, so the block's 8 groups add up in int16
 *     (8 · 3810 < 32768) before the one vpmaddwd; Q4_0's -8 offset is the
 *     token's start (-8 · (sum_0 + sum_1));
 *   Q8_0: |w| (up to 128) times a·sign(w) (vpsignb per lane: the weights'
 *     signs differ by row), pair sums up to 32512, widened group by group.
 * Per token, block and 8 rows: 8 vpmaddubsw + 8 vpaddw + 1 vpmaddwd (Q4) or
 * 8 × 4 (Q8_0) integer operations and 4 float ones, against the 4-row core's
 * (dot_rows) 4 × 4 plus a horizontal sum of 4 rows; the panel and the pairing
 * are amortized over up to 64 tokens and the chunk's rows. Bitwise equal to
 * quant_dot.c.
 */
#include "gemm_panel.h"

/* Token j's (k0, k1) as the word pair of every dword. */
static inline __m256i colibri_p8_k_pair(const int16_t k[2]) {
    int32_t pair;
    memcpy(&pair, k, sizeof pair);
    return _mm256_set1_epi32(pair);
}

/* The panel's block b in the paired layout from each row's two halves of 16
 * values as bytes: HALF(k, h) gives rows k and k + 4's half h (the lanes of
 * colibri_p8_rows2). Group 2g + e, lane r: row r's word 2g + e of half 0, then
 * of half 1. */
#define COLIBRI_P8_FILL_PAIRED(p, b, HALF)                                                      \
    do {                                                                                        \
        __m256i groups03[4], groups47[4];   /* [k]: rows k and k + 4, groups 0..3 / 4..7 */     \
        COLIBRI_P8_UNROLL                                                                       \
        for (int k = 0; k < 4; k++) {                                                           \
            __m256i h0 = HALF(k, 0), h1 = HALF(k, 1);                                           \
            groups03[k] = _mm256_unpacklo_epi16(h0, h1);                                        \
            groups47[k] = _mm256_unpackhi_epi16(h0, h1);                                        \
        }                                                                                       \
        colibri_p8_transpose4(groups03, (p)->qs[b]);                                            \
        colibri_p8_transpose4(groups47, (p)->qs[b] + 4);                                        \
    } while (0)

/* Q8_0: the weights as stored (their signs), paired, and their absolute values. */
static inline void colibri_p8_fill_q8_0(colibri_panel8 *p, int64_t b, const char *const blk[8]) {
    p->d[b] = colibri_p8_f16(blk, 0);
#define COLIBRI_Q8_0_HALF(k, h) colibri_p8_rows2(blk, k, 2 + 16 * (h))
    COLIBRI_P8_FILL_PAIRED(p, b, COLIBRI_Q8_0_HALF);
#undef COLIBRI_Q8_0_HALF
    for (int g = 0; g < 8; g++) p->qa[b][g] = _mm256_abs_epi8(p->qs[b][g]);
}

/* The tile's 2 tokens on the 2 panels (16 rows): each activation broadcast feeds both
 * panels' products, so a block takes 16 broadcasts for 16 rows and 2 tokens, where 8 rows
 * and 4 tokens took 32. llvm-mca (znver3) expected 11-18% fewer cycles from that; this
 * Zen 3 measured Q4_1 +6-8% and Q8_0 / Q4_0 level (docs/KERNELS.md). isum[p][j]: panel p,
 * token j. */
static inline void colibri_p8_dot_q8_0(const colibri_panel8 p[2], int64_t b, const char *const a[2],
                                       const int32_t start[2], const int16_t k[2][2], __m256i isum[2][2]) {
    __m256i k0 = colibri_p8_k_pair(k[0]), k1 = colibri_p8_k_pair(k[1]);
    __m256i s00 = _mm256_set1_epi32(start[0]), s10 = s00;   /* s: [panel][token] */
    __m256i s01 = _mm256_set1_epi32(start[1]), s11 = s01;
#define COLIBRI_Q8_STEP(acc, w, wa, av, kj)                                                          \
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(wa, _mm256_sign_epi8(av, w)), kj)); \
    COLIBRI_IN_REGISTER(acc)
    COLIBRI_P8_UNROLL
    for (int g = 0; g < 8; g++) {
        __m256i w0 = p[0].qs[b][g], wa0 = p[0].qa[b][g], w1 = p[1].qs[b][g], wa1 = p[1].qa[b][g];
        __m256i a0 = colibri_p8_bcast(a[0], g), a1 = colibri_p8_bcast(a[1], g);
        COLIBRI_Q8_STEP(s00, w0, wa0, a0, k0);
        COLIBRI_Q8_STEP(s10, w1, wa1, a0, k0);
        COLIBRI_Q8_STEP(s01, w0, wa0, a1, k1);
        COLIBRI_Q8_STEP(s11, w1, wa1, a1, k1);
    }
#undef COLIBRI_Q8_STEP
    isum[0][0] = s00, isum[1][0] = s10, isum[0][1] = s01, isum[1][1] = s11;
}

/* Q4_0 / Q4_1 (the 16 bytes at `at`: half 0 in the low nibbles, half 1 in the
 * high ones), paired. */
static inline void colibri_p8_nibbles_paired(colibri_panel8 *p, int64_t b, const char *const blk[8], int64_t at) {
    __m256i mask = _mm256_set1_epi8(0x0f), bytes[4];   /* bytes: [k] rows k and k + 4 */
    for (int k = 0; k < 4; k++) bytes[k] = colibri_p8_rows2(blk, k, at);
#define COLIBRI_NIBBLE_HALF(k, h) \
    ((h) ? _mm256_and_si256(_mm256_srli_epi16(bytes[k], 4), mask) : _mm256_and_si256(bytes[k], mask))
    COLIBRI_P8_FILL_PAIRED(p, b, COLIBRI_NIBBLE_HALF);
#undef COLIBRI_NIBBLE_HALF
}

COLIBRI_P8_Q4_FILLS(_paired, colibri_p8_nibbles_paired)

/* Q4_0 / Q4_1, 2 tokens on the 2 panels: the block's int16 pair sums, widened once times
 * (k0, k1). */
static inline void colibri_p8_dot_nibbles(const colibri_panel8 p[2], int64_t b, const char *const a[2],
                                          const int32_t start[2], const int16_t k[2][2], __m256i isum[2][2]) {
    __m256i s00 = _mm256_setzero_si256(), s10 = s00, s01 = s00, s11 = s00;   /* [panel][token]: even words half 0 */
    COLIBRI_P8_UNROLL
    for (int g = 0; g < 8; g++) {
        __m256i w0 = p[0].qs[b][g], w1 = p[1].qs[b][g];
        __m256i a0 = colibri_p8_bcast(a[0], g), a1 = colibri_p8_bcast(a[1], g);
        s00 = _mm256_add_epi16(s00, _mm256_maddubs_epi16(w0, a0));
        s10 = _mm256_add_epi16(s10, _mm256_maddubs_epi16(w1, a0));
        s01 = _mm256_add_epi16(s01, _mm256_maddubs_epi16(w0, a1));
        s11 = _mm256_add_epi16(s11, _mm256_maddubs_epi16(w1, a1));
        COLIBRI_IN_REGISTER(s00);
        COLIBRI_IN_REGISTER(s10);
        COLIBRI_IN_REGISTER(s01);
        COLIBRI_IN_REGISTER(s11);
    }
    __m256i k0 = colibri_p8_k_pair(k[0]), k1 = colibri_p8_k_pair(k[1]);
    __m256i st0 = _mm256_set1_epi32(start[0]), st1 = _mm256_set1_epi32(start[1]);
    isum[0][0] = _mm256_add_epi32(st0, _mm256_madd_epi16(s00, k0));
    isum[1][0] = _mm256_add_epi32(st0, _mm256_madd_epi16(s10, k0));
    isum[0][1] = _mm256_add_epi32(st1, _mm256_madd_epi16(s01, k1));
    isum[1][1] = _mm256_add_epi32(st1, _mm256_madd_epi16(s11, k1));
}

COLIBRI_PANEL8_GEMM(colibri_gemm_q8_0_avx2, colibri_block_q8_0, 0, 0, colibri_p8_fill_q8_0, colibri_p8_dot_q8_0,
                    COLIBRI_P8_NO_OFFSET, PAIRED, 2, 2)
COLIBRI_PANEL8_GEMM(colibri_gemm_q4_0_avx2, colibri_block_q4_0, 0, 8, colibri_p8_fill_q4_0_paired,
                    colibri_p8_dot_nibbles, COLIBRI_P8_NO_OFFSET, PAIRED, 2, 2)
COLIBRI_PANEL8_GEMM(colibri_gemm_q4_1_avx2, colibri_block_q4_1, 1, 0, colibri_p8_fill_q4_1_paired,
                    colibri_p8_dot_nibbles, COLIBRI_P8_Q4_1_OFFSET, PAIRED, 2, 2)
