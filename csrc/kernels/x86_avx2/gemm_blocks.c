/*
 * x86_avx2/gemm_blocks.c — the multi-token kernels (gemm) of the types of
 * quant_blocks.h with AVX2 (also the AVX-VNNI table's): 8 weight rows in the
 * lanes, tiles of 2 panels x 2 tokens (the IQ4 tables 1 x 4), as gemm_panel.h
 * does for Q8_0 / Q4_0 / Q4_1.
 *
 * For 8 weight rows and a chunk of groups (32 elements each), the rows'
 * signed quants q are unpacked and transposed once into a panel whose vector
 * (group g, word k) holds bytes 4k..4k+3 of group g of the 8 rows, beside
 * per row: the integer scales S_h as int16 pairs, the mins M_h as an int16
 * pair, the correction 128 · (S_0 Q_0 + S_1 Q_1) (Q_h the half's quant sum)
 * and the block scales (colibri_group_scales; exact). The tokens' activation
 * bytes are stored biased, b = a + 128 (unsigned), so vpmaddubsw(b, q) takes
 * them against the signed quants and the bias is a per-row constant:
 *   sum_j q_j a_j = sum_j q_j b_j - 128 Q_h.
 * Per token and half, the words' int16 pair sums are added while no sum can
 * pass 32767 (WORDS words: |pair| <= 2 · 255 · max|q|), then vpmaddwd with
 * the S_h pairs gives S_h times them in int32, so
 *   isum = S_0 h_0 + S_1 h_1 - 128 (S_0 Q_0 + S_1 Q_1)       exactly
 *   msum = M_0 A_0 + M_1 A_1                                   (vpmaddwd with the A_h pair)
 * and the reference's float step runs lane by lane, groups in order:
 *   acc += (float)isum * (D * d_a) [ - (float)msum * (DMIN * d_a) ]
 * so every y[t, r] is bitwise quant_dot_blocks.c's dot. The IQ4 tables (|q|
 * up to 127) would saturate the biased pairs: they multiply |q| by sign(q)·a
 * over the unbiased bytes instead (one more operation a word, no correction,
 * every word widened). Q2_K, Q4_K and Q5_K (C = 0) take the UNSIGNED form instead:
 * vpmaddubsw(u, a) over the unbiased bytes, no correction, and more words in int16.
 * The step takes a tile's tokens word by word (colibri_gb_isum). Between chunks
 * a row's running sums rest in y.
 * Rows past the last real one repeat it, tokens past the last one repeat it;
 * their results are dropped.
 */
#include "blocks_quants.h"
#include "gemm_panel.h"

#include <stddef.h>

/* The chunks: a panel is filled once per COLIBRI_GB_TOKENS tokens (the fill, scalar scales
 * and transposes, was a fifth of the time at 64), and the tokens' side of a chunk
 * (COLIBRI_GB_TOKENS x COLIBRI_GB_GROUPS x 40 bytes: 160 KiB, on the stack) stays in L2
 * while every panel of the rows streams it. */
#define COLIBRI_GB_TOKENS 128   /* tokens per chunk */
#define COLIBRI_GB_GROUPS 32    /* groups per chunk: an 8 KiB panel of quants */
/* The tile of an integer form (below): 2 panels (16 rows) against 2 tokens, so that each
 * activation broadcast feeds both panels (as gemm_quant.c's; kernels_bench, 64 tokens in
 * cache, two series: Q5_0 +5-9%, Q5_1 +5-10%, MXFP4 +4-6%, Q3_K +2-4%, Q2_K, Q4_K, Q5_K and
 * Q6_K between -4% and +3%), but 1 panel against 4 tokens for the ABS form, whose vpsignb
 * per token and panel the broadcasts do not share (IQ4_NL / IQ4_XS 1-4% slower on 2 x 2). */
#define COLIBRI_GB_PANELS(SIGNED) ((SIGNED) == COLIBRI_GB_ABS ? 1 : 2)
#define COLIBRI_GB_TILE(SIGNED) ((SIGNED) == COLIBRI_GB_ABS ? 4 : 2)

/* The integer forms (the kernels' SIGNED argument): BIASED vpmaddubsw(a + 128, q) less the
 * correction; ABS vpmaddubsw(|q|, sign(q)·a) (the IQ4 tables); UNSIGNED vpmaddubsw(u, a), the
 * weights' unsigned quants (C = 0) against the plain signed activation bytes: no bias, no
 * correction, and |pair| <= 2 · max u · 128, so Q4_K (u <= 15: 3840) adds all 8 words of a
 * group in int16 (30720) and Q5_K (u <= 31: 7936) 4 (31744). */
#define COLIBRI_GB_BIASED 0
#define COLIBRI_GB_ABS 1
#define COLIBRI_GB_UNSIGNED 2

typedef struct colibri_group_panel8 {
    __m256i q[COLIBRI_GB_GROUPS][8];   /* q: [group, word] 8 rows' 4 signed quants */
    __m256i qa[COLIBRI_GB_GROUPS][8];  /* qa: [group, word] their absolute values (SIGNED types) */
    __m256i s[COLIBRI_GB_GROUPS][2];   /* s: [group, half] 8 rows' S_h as two equal int16 */
    __m256i m[COLIBRI_GB_GROUPS];      /* m: [group] 8 rows' (M_0, M_1) as int16 */
    __m256i corr[COLIBRI_GB_GROUPS];   /* corr: [group] 8 rows' 128 (S_0 Q_0 + S_1 Q_1) */
    __m256 d[COLIBRI_GB_GROUPS];       /* d: [group] 8 rows' D */
    __m256 dm[COLIBRI_GB_GROUPS];      /* dm: [group] 8 rows' DMIN */
} colibri_group_panel8;

/* The activation types (the kernels' ACT argument): Q8_S (k_h = 1) or Q8_H, whose types
 * (Q5_0, Q5_1, IQ4_NL) have S_h = 1, so that the token's k_h stands in for S_h · k_h. */
#define COLIBRI_GB_Q8_S 0
#define COLIBRI_GB_Q8_H 1

/* One group of a tile's 4 tokens, what the step reads of them: 208 bytes in a row. */
typedef struct colibri_group_tile {
    uint8_t b[COLIBRI_P8_TILE][32];   /* b: [token, element] a + 128 (SIGNED: a) */
    float d[COLIBRI_P8_TILE];         /* d: [token] activation scales */
    int32_t a[COLIBRI_P8_TILE];       /* a: [token] (A_0, A_1) as int16 */
    int32_t k[COLIBRI_P8_TILE][2];    /* k: [token, half] Q8_H's k_h as two equal int16 (Q8_S: unset) */
    int32_t c[COLIBRI_P8_TILE];       /* c: [token] Q8_H's -CA (A_0 + A_1), the panel's offset (Q8_S: unset) */
} colibri_group_tile;

/* The chunk's tokens, tile by tile: a tile's walk over the groups reads one stream (laid
 * [group, token] as before, the groups were 2 KiB apart at 64 tokens and 4 KiB at 128,
 * and fought over a few L1 sets). */
typedef struct colibri_group_tokens {
    colibri_group_tile t[COLIBRI_GB_TOKENS / COLIBRI_P8_TILE][COLIBRI_GB_GROUPS];   /* t: [tile, group] */
} colibri_group_tokens;

/* The side of tokens t0.. (nt of them, a multiple of the tile; real ones kt) for groups
 * [g0, g0 + ng) from their Q8_S (act COLIBRI_GB_Q8_S) or Q8_H blocks. Inline on purpose:
 * as a plain static function GCC 12.2 (-O1 and up; its IPA mod/ref analysis, gone with
 * -fno-ipa-modref -fno-ipa-pure-const) dropped every call to it. */
static inline void colibri_group_tokens_fill(colibri_group_tokens *side, const char *x, int64_t x_stride, int64_t t0,
                                             int64_t nt, int64_t kt, int64_t g0, int64_t ng, int biased, int act,
                                             int32_t ca) {
    __m256i flip = _mm256_set1_epi8(biased ? (char)0x80 : 0);
    for (int64_t j = 0; j < nt; j++) {
        const char *row = x + (t0 + (j < kt ? j : kt - 1)) * x_stride;
        int64_t i = j % COLIBRI_P8_TILE;
        for (int64_t g = 0; g < ng; g++) {
            const colibri_block_q8_h *bh = (const colibri_block_q8_h *)row + g0 + g;
            const colibri_block_q8_s *bs = (const colibri_block_q8_s *)row + g0 + g;
            const int8_t *qs = act == COLIBRI_GB_Q8_H ? bh->qs : bs->qs;   /* qs: [32] */
            const int16_t *sum = act == COLIBRI_GB_Q8_H ? bh->sum : bs->sum;
            colibri_group_tile *tile = &side->t[j / COLIBRI_P8_TILE][g];
            __m256i q = _mm256_loadu_si256((const __m256i *)qs);
            _mm256_storeu_si256((__m256i *)tile->b[i], _mm256_xor_si256(q, flip));
            tile->d[i] = act == COLIBRI_GB_Q8_H ? bh->d : bs->d;
            tile->a[i] = (int32_t)((uint32_t)(uint16_t)sum[0] | (uint32_t)(uint16_t)sum[1] << 16);
            if (act == COLIBRI_GB_Q8_H) {
                for (int h = 0; h < 2; h++) tile->k[i][h] = (int32_t)((uint32_t)(uint16_t)bh->k[h] * 0x10001u);
                tile->c[i] = -ca * (sum[0] + sum[1]);
            }
        }
    }
}

/* Lane r of the int16-pair vector: (lo[r], hi[r]). */
static inline __m256i colibri_pairs16(const int32_t lo[8], const int32_t hi[8]) {
    __m256i l = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)lo), _mm256_set1_epi32(0xffff));
    return _mm256_or_si256(l, _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)hi), 16));
}

/* The panel's D and DMIN of group g: as GROUP_SCALES gave them (d8, dm8: [row]), or for the
 * 256-element types the f16 fields of the rows' super-blocks widened by F16C, 8 rows at once
 * (exact, as the decode core's; GROUP_SCALES's out-of-line f16 calls, whose results go unused,
 * are dropped: colibri_f16_to_f32 is declared const below). */
#define COLIBRI_GB_D_SCALES(p, g, row_at, gq, d8, dm8) \
    ((p)->d[g] = _mm256_loadu_ps(d8), (p)->dm[g] = _mm256_loadu_ps(dm8))
#define COLIBRI_GB_D_SUPER(p, g, row_at, gq, WBLOCK, D_AT, DMIN_AT)                                            \
    do {                                                                                                      \
        const char *sb[COLIBRI_P8_ROWS];   /* sb: [row] the super-block of group gq */                       \
        for (int r = 0; r < COLIBRI_P8_ROWS; r++) sb[r] = (row_at)[r] + (gq) / 8 * (int64_t)sizeof(WBLOCK); \
        (p)->d[g] = colibri_p8_f16(sb, (D_AT));                                                               \
        (p)->dm[g] = (DMIN_AT) < 0 ? _mm256_setzero_ps() : colibri_p8_f16(sb, (DMIN_AT) < 0 ? 0 : (DMIN_AT)); \
    } while (0)
#define COLIBRI_GB_D_Q2_K(p, g, row_at, gq, d8, dm8) \
    COLIBRI_GB_D_SUPER(p, g, row_at, gq, colibri_block_q2_k, offsetof(colibri_block_q2_k, d), (int)offsetof(colibri_block_q2_k, dmin))
#define COLIBRI_GB_D_Q3_K(p, g, row_at, gq, d8, dm8) \
    COLIBRI_GB_D_SUPER(p, g, row_at, gq, colibri_block_q3_k, offsetof(colibri_block_q3_k, d), -1)
#define COLIBRI_GB_D_Q4_K(p, g, row_at, gq, d8, dm8) \
    COLIBRI_GB_D_SUPER(p, g, row_at, gq, colibri_block_q4_k, offsetof(colibri_block_q4_k, d), (int)offsetof(colibri_block_q4_k, dmin))
#define COLIBRI_GB_D_Q5_K(p, g, row_at, gq, d8, dm8) \
    COLIBRI_GB_D_SUPER(p, g, row_at, gq, colibri_block_q5_k, offsetof(colibri_block_q5_k, d), (int)offsetof(colibri_block_q5_k, dmin))
#define COLIBRI_GB_D_Q6_K(p, g, row_at, gq, d8, dm8) \
    COLIBRI_GB_D_SUPER(p, g, row_at, gq, colibri_block_q6_k, offsetof(colibri_block_q6_k, d), -1)

/* Group g of the panel from the rows' group g (row_at[r]: row r at group g0; gq: the group
 * index inside the row) — quants unpacked by UNPACK(row, gq) to unsigned u, q = u - c. */
#define COLIBRI_GB_FILL_GROUP(p, g, row_at, gq, UNPACK, GROUP_SCALES, c, SIGNED, D8)                                      \
    do {                                                                                                          \
        uint8_t q8[COLIBRI_P8_ROWS][32];   /* q8: [row] the group's signed quants */                              \
        const char *qrow[COLIBRI_P8_ROWS];                                                                        \
        int32_t sc0[8], sc1[8], m0[8], m1[8];   /* [row] */                                                        \
        float d8[8], dm8[8];                    /* [row] */                                                        \
        for (int r = 0; r < COLIBRI_P8_ROWS; r++) {                                                               \
            __m256i u = UNPACK((row_at)[r], (gq));                                                                \
            _mm256_storeu_si256((__m256i *)q8[r], _mm256_sub_epi8(u, _mm256_set1_epi8((char)(c))));               \
            qrow[r] = (const char *)q8[r];                                                                        \
            colibri_group_scales gs;                                                                              \
            GROUP_SCALES((row_at)[r], (gq), &gs);                                                                 \
            sc0[r] = gs.sc[0], sc1[r] = gs.sc[1], m0[r] = gs.m[0], m1[r] = gs.m[1];                               \
            d8[r] = gs.d, dm8[r] = gs.dmin;                                                                       \
        }                                                                                                         \
        colibri_p8_transpose(qrow, 0, (p)->q[g]);                                                                 \
        colibri_p8_transpose(qrow, 16, (p)->q[g] + 4);                                                            \
        __m256i one8 = _mm256_set1_epi8(1), one16 = _mm256_set1_epi16(1), qsum[2];                                \
        for (int h = 0; h < 2; h++) {                                                                             \
            qsum[h] = _mm256_setzero_si256();                                                                     \
            for (int k = 4 * h; k < 4 * h + 4; k++) {                                                             \
                qsum[h] = _mm256_add_epi32(qsum[h], _mm256_madd_epi16(_mm256_maddubs_epi16(one8, (p)->q[g][k]), one16)); \
            }                                                                                                     \
        }                                                                                                         \
        (p)->s[g][0] = colibri_pairs16(sc0, sc0);                                                                 \
        (p)->s[g][1] = colibri_pairs16(sc1, sc1);                                                                 \
        (p)->m[g] = colibri_pairs16(m0, m1);                                                                      \
        __m256i sq = _mm256_add_epi32(_mm256_mullo_epi32(qsum[0], _mm256_loadu_si256((const __m256i *)sc0)),     \
                                      _mm256_mullo_epi32(qsum[1], _mm256_loadu_si256((const __m256i *)sc1)));    \
        (p)->corr[g] = (SIGNED) ? _mm256_setzero_si256() : _mm256_slli_epi32(sq, 7);                             \
        if ((SIGNED) == COLIBRI_GB_ABS) {                                                                                             \
            for (int k = 0; k < 8; k++) (p)->qa[g][k] = _mm256_abs_epi8((p)->q[g][k]);                           \
        }                                                                                                         \
        D8(p, g, row_at, gq, d8, dm8);                                                                            \
        (void)d8, (void)dm8;                                                                                      \
    } while (0)

/* Each of a tile's tokens' exact int32 sums on each panel, isum[p][j] lane r: S_0 h_0 +
 * S_1 h_1 of panel p's row r and token j (b: token j's 32 activation bytes of the group at
 * b + 32 j, biased or not as the form wants), less the panel's corr for the BIASED form;
 * WORDS words added in int16 before each widening. Q8_H (act): k_h, token j's at k[j][h],
 * in the place of S_h (its types have S_h = 1), and the sum starts from c[j], the token's
 * -CA (A_0 + A_1) (never the BIASED form). Word by word: each weight word is loaded once
 * for the tile and each activation word broadcast once for the panels, the pair sums in
 * registers, as the Q4_0 panel's dot does. */
static inline __attribute__((always_inline)) void colibri_gb_isum(const colibri_group_panel8 *panel, int64_t u,
                                                                  const uint8_t *b, const int32_t k[][2],
                                                                  const int32_t c[], const int words, const int form,
                                                                  const int act, const int panels, const int tile,
                                                                  __m256i isum[2][COLIBRI_P8_TILE]) {
    COLIBRI_P8_UNROLL
    for (int p = 0; p < panels; p++) {
        COLIBRI_P8_UNROLL
        for (int j = 0; j < tile; j++) {
            isum[p][j] = form == COLIBRI_GB_BIASED ? _mm256_sub_epi32(_mm256_setzero_si256(), panel[p].corr[u])
                         : act == COLIBRI_GB_Q8_H  ? _mm256_set1_epi32(c[j])
                                                   : _mm256_setzero_si256();
        }
    }
    COLIBRI_P8_UNROLL
    for (int k0 = 0; k0 < 8; k0 += words) {
        __m256i pairs[2][COLIBRI_P8_TILE];   /* pairs: [panel, token] */
        COLIBRI_P8_UNROLL
        for (int p = 0; p < panels; p++) {
            COLIBRI_P8_UNROLL
            for (int j = 0; j < tile; j++) pairs[p][j] = _mm256_setzero_si256();
        }
        COLIBRI_P8_UNROLL
        for (int k = k0; k < k0 + words; k++) {
            __m256i q[2], qa[2];   /* [panel] the word's quants and (ABS) their absolute values */
            COLIBRI_P8_UNROLL
            for (int p = 0; p < panels; p++) {
                q[p] = panel[p].q[u][k];
                qa[p] = form == COLIBRI_GB_ABS ? panel[p].qa[u][k] : q[p];
                COLIBRI_IN_REGISTER(q[p]);   /* loaded once for the tile (GCC reloaded it per token) */
                COLIBRI_IN_REGISTER(qa[p]);
            }
            COLIBRI_P8_UNROLL
            for (int j = 0; j < tile; j++) {
                __m256i a = colibri_p8_bcast((const char *)b + 32 * j, k);
                COLIBRI_P8_UNROLL
                for (int p = 0; p < panels; p++) {
                    __m256i prod = form == COLIBRI_GB_ABS ? _mm256_maddubs_epi16(qa[p], _mm256_sign_epi8(a, q[p]))
                                   : form == COLIBRI_GB_UNSIGNED ? _mm256_maddubs_epi16(q[p], a)
                                                                 : _mm256_maddubs_epi16(a, q[p]);
                    pairs[p][j] = _mm256_add_epi16(pairs[p][j], prod);
                    COLIBRI_IN_REGISTER(pairs[p][j]);
                }
            }
        }
        COLIBRI_P8_UNROLL
        for (int p = 0; p < panels; p++) {
            COLIBRI_P8_UNROLL
            for (int j = 0; j < tile; j++) {
                __m256i mult = act == COLIBRI_GB_Q8_H ? _mm256_set1_epi32(k[j][k0 / 4]) : panel[p].s[u][k0 / 4];
                isum[p][j] = _mm256_add_epi32(isum[p][j], _mm256_madd_epi16(pairs[p][j], mult));
                COLIBRI_IN_REGISTER(isum[p][j]);
            }
        }
    }
}

/* COLIBRI_GROUP_PANEL8_GEMM's hooks (names: gemm_panel.h's driver's, and the kernel's panel
 * and side). The panels: group u0 + g of their 8 rows each. */
#define COLIBRI_GB_PANEL(UNPACK, GROUP_SCALES, C, SIGNED, D8, PANELS)                                      \
    do {                                                                                                   \
        for (int p = 0; p < (PANELS); p++) {                                                               \
            const char *const *panel_rows = row_at + COLIBRI_P8_ROWS * p;                                  \
            for (int64_t g = 0; g < nu; g++) {                                                             \
                COLIBRI_GB_FILL_GROUP(&panel[p], g, panel_rows, u0 + g, UNPACK, GROUP_SCALES, C, SIGNED, D8); \
            }                                                                                              \
        }                                                                                                  \
    } while (0)
#define COLIBRI_GB_NO_TILE() (void)0
#define COLIBRI_GB_NO_TILE_J(j, t) (void)0
/* Group u: per panel and token of the tile, the exact isum and msum, then the float step
 * (the tile's tokens j0.. are tokens j0 % 4.. of the side's 4-token tile). */
#define COLIBRI_GB_STEP(WORDS, HAS_M, SIGNED, ACT, PANELS, TILE)                                              \
    do {                                                                                                      \
        __m256i isum[2][COLIBRI_P8_TILE];                                                                     \
        const colibri_group_tile *tile = &side.t[j0 / COLIBRI_P8_TILE][u];                                   \
        const int jt = (int)(j0 % COLIBRI_P8_TILE);   /* the tile's first token in the side's tile */         \
        colibri_gb_isum(panel, u, tile->b[jt], tile->k + jt, tile->c + jt, WORDS, SIGNED, ACT, PANELS, TILE, isum); \
        COLIBRI_P8_UNROLL                                                                                     \
        for (int j = 0; j < (TILE); j++) {                                                                    \
            __m256 da = _mm256_set1_ps(tile->d[jt + j]);                                                      \
            COLIBRI_P8_UNROLL                                                                                 \
            for (int p = 0; p < (PANELS); p++) {                                                              \
                __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(isum[p][j]), _mm256_mul_ps(panel[p].d[u], da));   \
                if (HAS_M) {                                                                                  \
                    __m256i msum = _mm256_madd_epi16(panel[p].m[u], _mm256_set1_epi32(tile->a[jt + j]));      \
                    v = _mm256_sub_ps(v, _mm256_mul_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(panel[p].dm[u], da))); \
                }                                                                                             \
                acc[p][j] = _mm256_add_ps(acc[p][j], v);                                                      \
            }                                                                                                 \
        }                                                                                                     \
    } while (0)

/* DECL: the gemm's storage class, type and name for the type of WBLOCK: UNPACK(row, g) its
 * group g's unsigned quants (the panel's q = u - C), GROUP_SCALES its scales, WORDS (1, 2, 4 or
 * 8) the words added in int16, HAS_M whether it has mins, SIGNED its integer form, D8 its D
 * hook, ACT its activation type (COLIBRI_GB_Q8_S / Q8_H) and CA the offset of the panel's
 * quants taken off token-side (Q8_H, S_h = 1: isum -= CA (A_0 + A_1); else 0). Same contract
 * as colibri_gemm_fn; gemm_panel.h's driver, groups as its units. */
#define COLIBRI_GROUP_PANEL8_GEMM(DECL, WBLOCK, UNPACK, GROUP_SCALES, C, WORDS, HAS_M, SIGNED, D8, ACT, CA)    \
    DECL(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, \
         float *y, int64_t y_stride) {                                                                            \
        colibri_group_panel8 panel[COLIBRI_GB_PANELS(SIGNED)];                                                    \
        colibri_group_tokens side;                                                                                \
        const int64_t chunk_tokens = COLIBRI_GB_TOKENS, chunk_units = COLIBRI_GB_GROUPS;                          \
        COLIBRI_P8_DRIVER(n / COLIBRI_QK, COLIBRI_GB_PANELS(SIGNED), COLIBRI_GB_TILE(SIGNED),                     \
                          colibri_group_tokens_fill(&side, (const char *)x, x_stride, t0, nt, kt, u0, nu, !(SIGNED), ACT, CA), \
                          COLIBRI_GB_PANEL, (UNPACK, GROUP_SCALES, C, SIGNED, D8, COLIBRI_GB_PANELS(SIGNED)), COLIBRI_GB_NO_TILE, \
                          COLIBRI_GB_NO_TILE_J,                                                                   \
                          COLIBRI_GB_STEP, (WORDS, HAS_M, SIGNED, ACT, COLIBRI_GB_PANELS(SIGNED), COLIBRI_GB_TILE(SIGNED))) \
    }

/* Group g's unsigned quants of a row of the 256-element type T (block g / 8, group g % 8)
 * or of the 32-element one (block g). */
#define COLIBRI_GB_UNPACK_K(T)                                                              \
    static inline __m256i colibri_gb_##T(const char *row, int64_t g) {                      \
        return colibri_##T##_quants((const colibri_block_##T *)row + g / 8, (int)(g % 8)); \
    }
#define COLIBRI_GB_UNPACK_32(T, QUANTS)                                    \
    static inline __m256i colibri_gb_##T(const char *row, int64_t g) {     \
        return QUANTS((const colibri_block_##T *)row + g);                 \
    }
COLIBRI_GB_UNPACK_K(q2_k)
COLIBRI_GB_UNPACK_K(q3_k)
COLIBRI_GB_UNPACK_K(q4_k)
COLIBRI_GB_UNPACK_K(q5_k)
COLIBRI_GB_UNPACK_K(q6_k)
COLIBRI_GB_UNPACK_32(q5_0, COLIBRI_Q5_QUANTS)
COLIBRI_GB_UNPACK_32(q5_1, COLIBRI_Q5_QUANTS)
COLIBRI_GB_UNPACK_32(mxfp4, COLIBRI_MXFP4_QUANTS)
COLIBRI_GB_UNPACK_32(iq4_nl, COLIBRI_IQ4_NL_QUANTS)
static inline __m256i colibri_gb_iq4_xs(const char *row, int64_t g) {   /* the signed values themselves */
    return colibri_iq4_xs_quants((const colibri_block_iq4_xs *)row + g / 8, (int)(g % 8));
}

/* T, its offset C, the words its pairs can add in int16 (BIASED: 2 · 255 · max|q| per pair:
 * Q6_K reaches 16320, the others at most 8160; UNSIGNED: 2 · max u · 128, Q4_K 3840, Q5_K,
 * Q5_0 and Q5_1 7936; the IQ4 tables' 2 · 127 · 127 = 32258 one word only), whether it has
 * mins, its integer form (COLIBRI_GB_BIASED / ABS / UNSIGNED) and its D hook
 * (COLIBRI_GB_D_*); Q8_S activations. */
#define COLIBRI_GB_GEMM(T, C, WORDS, HAS_M, SIGNED, D8)                                                         \
    COLIBRI_GROUP_PANEL8_GEMM(void colibri_gemm_##T##_avx2, colibri_block_##T, colibri_gb_##T,                 \
                              colibri_##T##_group_scales, C, WORDS, HAS_M, SIGNED, D8, COLIBRI_GB_Q8_S, 0)
/* The same for the Q8_H types: the panel holds u, and the offset C comes off token-side. */
#define COLIBRI_GB_GEMM_Q8_H(T, C, WORDS, HAS_M, SIGNED)                                                        \
    COLIBRI_GROUP_PANEL8_GEMM(void colibri_gemm_##T##_avx2, colibri_block_##T, colibri_gb_##T,                 \
                              colibri_##T##_group_scales, 0, WORDS, HAS_M, SIGNED, COLIBRI_GB_D_SCALES,       \
                              COLIBRI_GB_Q8_H, C)
COLIBRI_GB_GEMM(q2_k, COLIBRI_C_Q2_K, 4, 1, COLIBRI_GB_UNSIGNED, COLIBRI_GB_D_Q2_K)
COLIBRI_GROUP_PANEL8_GEMM(void colibri_gemm_q3_k_avx2, colibri_block_q3_k, colibri_gb_q3_k, colibri_q3_k_group_scales,
                          COLIBRI_C_Q3_K, 4, 0, COLIBRI_GB_BIASED, COLIBRI_GB_D_Q3_K, COLIBRI_GB_Q8_S, 0)
COLIBRI_GB_GEMM(q4_k, COLIBRI_C_Q4_K, 8, 1, COLIBRI_GB_UNSIGNED, COLIBRI_GB_D_Q4_K)
COLIBRI_GB_GEMM(q5_k, COLIBRI_C_Q5_K, 4, 1, COLIBRI_GB_UNSIGNED, COLIBRI_GB_D_Q5_K)
COLIBRI_GB_GEMM(q6_k, COLIBRI_C_Q6_K, 2, 0, COLIBRI_GB_BIASED, COLIBRI_GB_D_Q6_K)
COLIBRI_GB_GEMM(mxfp4, COLIBRI_C_MXFP4_U16, 4, 0, COLIBRI_GB_BIASED, COLIBRI_GB_D_SCALES)
COLIBRI_GB_GEMM(iq4_xs, 0, 1, 0, COLIBRI_GB_ABS, COLIBRI_GB_D_SCALES)
COLIBRI_GB_GEMM_Q8_H(q5_0, COLIBRI_C_Q5_0, 4, 0, COLIBRI_GB_UNSIGNED)
COLIBRI_GB_GEMM_Q8_H(q5_1, COLIBRI_C_Q5_1, 4, 1, COLIBRI_GB_UNSIGNED)
COLIBRI_GB_GEMM_Q8_H(iq4_nl, 0, 1, 0, COLIBRI_GB_ABS)
