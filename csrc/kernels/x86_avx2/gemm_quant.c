/*
 * x86_avx2/gemm_quant.c — the multi-token kernels (gemm) of the block types
 * with AVX2: 8 weight rows in the lanes, 4 tokens at a time through the
 * panel driver (gemm_panel.h). Weights and activations are both in the paired
 * layout (colibri_p8_pair, colibri_token_pairs): each 4-byte group holds two
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

/* Token j's (k0, k1) as the word pair of every dword. */
static inline __m256i colibri_p8_k_pair(const int16_t k[2]) {
    int32_t pair;
    memcpy(&pair, k, sizeof pair);
    return _mm256_set1_epi32(pair);
}

/* Q8_0: the weights as stored (their signs) and their absolute values, paired. */
static inline void colibri_p8_fill_q8_0(colibri_panel8 *p, int64_t b, const char *const blk[8]) {
    p->d[b] = colibri_p8_f16(blk, 0);
    colibri_p8_transpose(blk, 2, p->qs[b]);
    colibri_p8_transpose(blk, 18, p->qs[b] + 4);
    colibri_p8_pair(p->qs[b]);
    for (int g = 0; g < 8; g++) p->qa[b][g] = _mm256_abs_epi8(p->qs[b][g]);
}

static inline void colibri_p8_dot4_q8_0(const colibri_panel8 *p, int64_t b, const char *const a[4],
                                        const int32_t start[4], const int16_t k[4][2], __m256i isum[4]) {
    __m256i s0 = _mm256_set1_epi32(start[0]), s1 = _mm256_set1_epi32(start[1]);
    __m256i s2 = _mm256_set1_epi32(start[2]), s3 = _mm256_set1_epi32(start[3]);
    __m256i k0 = colibri_p8_k_pair(k[0]), k1 = colibri_p8_k_pair(k[1]);
    __m256i k2 = colibri_p8_k_pair(k[2]), k3 = colibri_p8_k_pair(k[3]);
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

/* Q4_0 / Q4_1, paired: the block's int16 pair sums, widened once times (k0, k1). */
static inline void colibri_p8_fill_q4_0_paired(colibri_panel8 *p, int64_t b, const char *const blk[8]) {
    colibri_p8_fill_q4_0(p, b, blk);
    colibri_p8_pair(p->qs[b]);
}

static inline void colibri_p8_fill_q4_1_paired(colibri_panel8 *p, int64_t b, const char *const blk[8]) {
    colibri_p8_fill_q4_1(p, b, blk);
    colibri_p8_pair(p->qs[b]);
}

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
    isum[0] = _mm256_add_epi32(_mm256_set1_epi32(start[0]), _mm256_madd_epi16(s0, colibri_p8_k_pair(k[0])));
    isum[1] = _mm256_add_epi32(_mm256_set1_epi32(start[1]), _mm256_madd_epi16(s1, colibri_p8_k_pair(k[1])));
    isum[2] = _mm256_add_epi32(_mm256_set1_epi32(start[2]), _mm256_madd_epi16(s2, colibri_p8_k_pair(k[2])));
    isum[3] = _mm256_add_epi32(_mm256_set1_epi32(start[3]), _mm256_madd_epi16(s3, colibri_p8_k_pair(k[3])));
}

COLIBRI_PANEL8_GEMM(colibri_gemm_q8_0_avx2, colibri_block_q8_0, 0, 0, colibri_p8_fill_q8_0, colibri_p8_dot4_q8_0,
                    COLIBRI_P8_NO_OFFSET, PAIRED)
COLIBRI_PANEL8_GEMM(colibri_gemm_q4_0_avx2, colibri_block_q4_0, 0, 8, colibri_p8_fill_q4_0_paired,
                    colibri_p8_dot4_nibbles, COLIBRI_P8_NO_OFFSET, PAIRED)
COLIBRI_PANEL8_GEMM(colibri_gemm_q4_1_avx2, colibri_block_q4_1, 1, 0, colibri_p8_fill_q4_1_paired,
                    colibri_p8_dot4_nibbles, COLIBRI_P8_Q4_1_OFFSET, PAIRED)
