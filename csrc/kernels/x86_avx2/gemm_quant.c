/*
 * x86_avx2/gemm_quant.c — the multi-token kernels (gemm) of the block types
 * with AVX2: 8 weight rows in the lanes, 4 tokens at a time through the
 * panel driver (gemm_panel.h). Weights and activations are both in the paired
 * layout (COLIBRI_P8_FILL_PAIRED, colibri_token_pairs): each 4-byte group holds two
 * values of half 0 then two of half 1, so vpmaddubsw (unsigned × signed bytes
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

/* v[j]: dword j of the 16 bytes at p (the 4 tokens' starts, or their (k0, k1)
 * word pairs) in every dword: one load and 4 in-lane shuffles, in place of 4
 * broadcast loads (the tile's loop is bound by its loads on Zen 3, where its
 * multiplies leave the shuffle pipes idle). */
static inline void colibri_p8_spread4(const void *p, __m256i v[4]) {
    __m256i four = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
    v[0] = _mm256_shuffle_epi32(four, 0x00);
    v[1] = _mm256_shuffle_epi32(four, 0x55);
    v[2] = _mm256_shuffle_epi32(four, 0xaa);
    v[3] = _mm256_shuffle_epi32(four, 0xff);
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

static inline void colibri_p8_dot4_q8_0(const colibri_panel8 *p, int64_t b, const char *const a[4],
                                        const int32_t start[4], const int16_t k[4][2], __m256i isum[4]) {
    __m256i sv[4], kv[4];   /* sv, kv: [token] its start, its (k0, k1) */
    colibri_p8_spread4(start, sv);
    colibri_p8_spread4(k, kv);
    __m256i s0 = sv[0], s1 = sv[1], s2 = sv[2], s3 = sv[3], k0 = kv[0], k1 = kv[1], k2 = kv[2], k3 = kv[3];
#define COLIBRI_Q8_STEP(acc, j, kj)                                                                          \
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(wa, _mm256_sign_epi8(colibri_p8_bcast(a[j], g), w)), \
                                                  kj));                                                      \
    COLIBRI_IN_REGISTER(acc)
    COLIBRI_P8_UNROLL
    for (int g = 0; g < 8; g++) {
        __m256i w = p->qs[b][g], wa = p->qa[b][g];
        COLIBRI_Q8_STEP(s0, 0, k0);
        COLIBRI_Q8_STEP(s1, 1, k1);
        COLIBRI_Q8_STEP(s2, 2, k2);
        COLIBRI_Q8_STEP(s3, 3, k3);
    }
#undef COLIBRI_Q8_STEP
    isum[0] = s0, isum[1] = s1, isum[2] = s2, isum[3] = s3;
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

static inline void colibri_p8_fill_q4_0_paired(colibri_panel8 *p, int64_t b, const char *const blk[8]) {
    p->d[b] = colibri_p8_f16(blk, 0);
    colibri_p8_nibbles_paired(p, b, blk, 2);
}

static inline void colibri_p8_fill_q4_1_paired(colibri_panel8 *p, int64_t b, const char *const blk[8]) {
    p->d[b] = colibri_p8_f16(blk, 0);
    p->m[b] = colibri_p8_f16(blk, 2);
    colibri_p8_nibbles_paired(p, b, blk, 4);
}

/* Q4_0 / Q4_1: the block's int16 pair sums, widened once times (k0, k1). */
static inline void colibri_p8_dot4_nibbles(const colibri_panel8 *p, int64_t b, const char *const a[4],
                                           const int32_t start[4], const int16_t k[4][2], __m256i isum[4]) {
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;   /* pair sums so far: even words half 0 */
    COLIBRI_P8_UNROLL
    for (int g = 0; g < 8; g++) {
        __m256i w = p->qs[b][g];
        s0 = _mm256_add_epi16(s0, _mm256_maddubs_epi16(w, colibri_p8_bcast(a[0], g)));
        s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(w, colibri_p8_bcast(a[1], g)));
        s2 = _mm256_add_epi16(s2, _mm256_maddubs_epi16(w, colibri_p8_bcast(a[2], g)));
        s3 = _mm256_add_epi16(s3, _mm256_maddubs_epi16(w, colibri_p8_bcast(a[3], g)));
        COLIBRI_IN_REGISTER(s0);
        COLIBRI_IN_REGISTER(s1);
        COLIBRI_IN_REGISTER(s2);
        COLIBRI_IN_REGISTER(s3);
    }
    __m256i sv[4], kv[4];   /* sv, kv: [token] its start, its (k0, k1) */
    colibri_p8_spread4(start, sv);
    colibri_p8_spread4(k, kv);
    isum[0] = _mm256_add_epi32(sv[0], _mm256_madd_epi16(s0, kv[0]));
    isum[1] = _mm256_add_epi32(sv[1], _mm256_madd_epi16(s1, kv[1]));
    isum[2] = _mm256_add_epi32(sv[2], _mm256_madd_epi16(s2, kv[2]));
    isum[3] = _mm256_add_epi32(sv[3], _mm256_madd_epi16(s3, kv[3]));
}

COLIBRI_PANEL8_GEMM(colibri_gemm_q8_0_avx2, colibri_block_q8_0, 0, 0, colibri_p8_fill_q8_0, colibri_p8_dot4_q8_0,
                    COLIBRI_P8_NO_OFFSET, PAIRED)
COLIBRI_PANEL8_GEMM(colibri_gemm_q4_0_avx2, colibri_block_q4_0, 0, 8, colibri_p8_fill_q4_0_paired,
                    colibri_p8_dot4_nibbles, COLIBRI_P8_NO_OFFSET, PAIRED)
COLIBRI_PANEL8_GEMM(colibri_gemm_q4_1_avx2, colibri_block_q4_1, 1, 0, colibri_p8_fill_q4_1_paired,
                    colibri_p8_dot4_nibbles, COLIBRI_P8_Q4_1_OFFSET, PAIRED)
