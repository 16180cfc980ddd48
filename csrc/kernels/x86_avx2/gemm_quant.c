/*
 * x86_avx2/gemm_quant.c — the multi-token kernels (gemm) of the block types
 * with AVX2: 8 weight rows in the lanes, 4 tokens at a time through the
 * panel driver (gemm_panel.h). Without VNNI the integer block dot is
 * vpmaddubsw (unsigned × signed bytes → int16 pairs) then vpmaddwd against
 * the token's multiplier of the half (groups 0-3: k0, 4-7: k1):
 *   Q4_0 / Q4_1: nibbles (0..15) times activations (-127..127) make pairs of
 *     at most 3810 in magnitude, so a half's 4 groups add up in int16
 *     (4 · 3810 < 32768) and one vpmaddwd per half widens them times k;
 *     Q4_0's -8 offset is the token's start (-8 · (sum_0 + sum_1));
 *   Q8_0: |w| (up to 128) times a·sign(w) (vpsignb per lane: the weights'
 *     signs differ by row), pairs up to 32512, widened times k group by group.
 * Per token, block and 8 rows: 8 vpmaddubsw + 8 vpaddw (Q4) or 8 × 4 (Q8_0)
 * integer operations and 4 float ones, against the 4-row core's (dot_rows)
 * 4 × 4 plus a horizontal sum of 4 rows; the panel is amortized over up to
 * 64 tokens. Bitwise equal to quant_dot.c.
 */
#include "gemm_panel.h"

/* Q8_0: the weights as stored (their signs) and their absolute values. */
static inline void colibri_p8_fill_q8_0(colibri_panel8 *p, int64_t b, const char *const blk[8]) {
    p->d[b] = colibri_p8_f16(blk, 0);
    colibri_p8_transpose(blk, 2, p->qs[b]);
    colibri_p8_transpose(blk, 18, p->qs[b] + 4);
    for (int g = 0; g < 8; g++) p->qa[b][g] = _mm256_abs_epi8(p->qs[b][g]);
}

static inline void colibri_p8_dot4_q8_0(const colibri_panel8 *p, int64_t b, const char *const a[4],
                                        const int32_t start[4], const int16_t k[4][2], __m256i isum[4]) {
    __m256i s0 = _mm256_set1_epi32(start[0]), s1 = _mm256_set1_epi32(start[1]);
    __m256i s2 = _mm256_set1_epi32(start[2]), s3 = _mm256_set1_epi32(start[3]);
#define COLIBRI_Q8_STEP(acc, j)                                                                              \
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(wa, _mm256_sign_epi8(colibri_p8_bcast(a[j], g), w)), \
                                                  _mm256_set1_epi16(k[j][g / 4])));                          \
    COLIBRI_IN_REGISTER(acc)
    COLIBRI_P8_UNROLL
    for (int g = 0; g < 8; g++) {
        __m256i w = p->qs[b][g], wa = p->qa[b][g];
        COLIBRI_Q8_STEP(s0, 0);
        COLIBRI_Q8_STEP(s1, 1);
        COLIBRI_Q8_STEP(s2, 2);
        COLIBRI_Q8_STEP(s3, 3);
    }
#undef COLIBRI_Q8_STEP
    isum[0] = s0, isum[1] = s1, isum[2] = s2, isum[3] = s3;
}

/* Q4_0 / Q4_1: each half's int16 pair sums, widened once times its k. */
static inline void colibri_p8_dot4_nibbles(const colibri_panel8 *p, int64_t b, const char *const a[4],
                                           const int32_t start[4], const int16_t k[4][2], __m256i isum[4]) {
    for (int j = 0; j < 4; j++) isum[j] = _mm256_set1_epi32(start[j]);
    COLIBRI_P8_UNROLL
    for (int h = 0; h < 2; h++) {
        __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;   /* pair sums of the half so far */
        COLIBRI_P8_UNROLL
        for (int g = 4 * h; g < 4 * h + 4; g++) {
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
        isum[0] = _mm256_add_epi32(isum[0], _mm256_madd_epi16(s0, _mm256_set1_epi16(k[0][h])));
        isum[1] = _mm256_add_epi32(isum[1], _mm256_madd_epi16(s1, _mm256_set1_epi16(k[1][h])));
        isum[2] = _mm256_add_epi32(isum[2], _mm256_madd_epi16(s2, _mm256_set1_epi16(k[2][h])));
        isum[3] = _mm256_add_epi32(isum[3], _mm256_madd_epi16(s3, _mm256_set1_epi16(k[3][h])));
    }
}

COLIBRI_PANEL8_GEMM(colibri_gemm_q8_0_avx2, colibri_block_q8_0, 0, 0, colibri_p8_fill_q8_0, colibri_p8_dot4_q8_0,
                    COLIBRI_P8_NO_OFFSET)
COLIBRI_PANEL8_GEMM(colibri_gemm_q4_0_avx2, colibri_block_q4_0, 0, 8, colibri_p8_fill_q4_0, colibri_p8_dot4_nibbles,
                    COLIBRI_P8_NO_OFFSET)
COLIBRI_PANEL8_GEMM(colibri_gemm_q4_1_avx2, colibri_block_q4_1, 1, 0, colibri_p8_fill_q4_1, colibri_p8_dot4_nibbles,
                    COLIBRI_P8_Q4_1_OFFSET)
