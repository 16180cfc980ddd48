/*
 * x86_avx512/gemm_blocks.c — the multi-token kernels (gemm) of the types of
 * quant_blocks.h with AVX-512 VNNI: weight rows in the vector lanes, tokens
 * broadcast, as gemm_quant.c does for Q8_0 / Q4_0 / Q4_1.
 *
 * For 16 weight rows and a chunk of groups (32 elements each), the rows'
 * quants are unpacked to unsigned bytes u (q = u - C, blocks_quants.h) and
 * transposed once into a panel whose vector (group g, word k) holds bytes
 * 4k..4k+3 of group g of the 16 rows, beside the rows' per-half integer
 * scales and mins and block scales (colibri_group_scales, as floats: exact).
 * Then 8 tokens at a time, their 16-row accumulators in registers: each
 * half's 4 words of a token's activation are broadcast and vpdpbusd adds
 * each row's 4 products to its lane, from the token's -C·A_h (A_h its stored
 * half sum); types with one scale a group (or none) take the 8 words as one
 * chain from -C (A_0 + A_1) (S h_0 + S h_1 = S (h_0 + h_1), exact in int32).
 * Then, lane by lane, the reference's float step:
 *   isum = S_0 h_0 + S_1 h_1      (each product and the sum below 2^24: exact)
 *   acc += isum * (D * d_a)  [ - (M_0 A_0 + M_1 A_1) * (DMIN * d_a) ]
 * Q5_0, Q5_1 and IQ4_NL take Q8_H activations and have S_h = 1: their halves'
 * dots start from 0 and isum = k_0 h_0 + k_1 h_1 - C (A_0 + A_1) (its A_h carry
 * k_h), taken in float by two FMAs, cheaper than vpmulld and exact: every
 * operand and partial sum is an integer below 2^24 (|h_h| <= 16·255·127,
 * k_h <= 8, |C (A_0 + A_1)| <= 128·2·8·16·127: under 1.3·10^7 in all).
 * groups in order, so every y[t, r] is bitwise quant_dot_blocks.c's dot.
 * Between chunks a row's running sums rest in y (a float store and load are
 * exact). Rows past the last real one repeat it, tokens past the last one
 * repeat it; their results are dropped. Each tile of tokens pulls into L2 its
 * share of the next 16 rows' bytes of the chunk (colibri_p8_prefetch_next, as
 * the Q8_0 / Q4_0 panel and AVX2's do; x86_amx/gemm_blocks.c the same).
 */
#define COLIBRI_BP_TILE 8      /* tokens whose accumulators stay in registers */
#define COLIBRI_BP_TOKENS 128  /* tokens per chunk: the panel's reuse (its fill, scalar scales and transposes) */

#include "block_panel.h"
#include "transpose16.h"

typedef struct colibri_block_panel {
    __m512i qs[COLIBRI_BP_GROUPS][8];   /* qs: [group, word] 16 rows' 4 unsigned quant bytes */
    colibri_block_scales sc;            /* the 16 rows' scales */
} colibri_block_panel;

/* The tile's and the group's loops unrolled, so that the accumulators live in registers. */
#define COLIBRI_BP_UNROLL _Pragma("GCC unroll 8")

/* DECL: the gemm's storage class, type and name for the type T (its block WBLOCK, its
 * GROUP_SCALES reader): PAIR (COLIBRI_BP_PAIR_K or _32) with QUANTS2 unpacks, C the
 * quants' offset, S_AT / M_AT where its scales and mins apply (dot_blocks.c's
 * COLIBRI_NONE / PER_HALF / PER_GROUP), Q8H its activations (1: Q8_H, then S_AT is
 * COLIBRI_NONE; 0: Q8_S), D16 where the panel's D and DMIN come from (COLIBRI_BP_D_*).
 * Same contract as colibri_gemm_fn. */
#define COLIBRI_BLOCK_PANEL_GEMM(DECL, WBLOCK, ELEMS, GROUP_SCALES, PAIR, QUANTS2, C, S_AT, M_AT, Q8H, D16)        \
    DECL(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, \
         float *y, int64_t y_stride) {                                                                            \
        colibri_block_panel panel;                                                                                \
        colibri_block_tokens side;                                                                                \
        uint8_t u[COLIBRI_BP_ROWS][64];   /* u: [row] one group pair's unsigned quants, before the transpose */   \
        const char *urow[COLIBRI_BP_ROWS];                                                                        \
        for (int r = 0; r < COLIBRI_BP_ROWS; r++) urow[r] = (const char *)u[r];                                   \
        const int one_chain = !(Q8H) && (S_AT) != COLIBRI_PER_HALF;   /* one int32 dot a group, no halves */   \
        int64_t n_groups = n / 32;                                                                                \
        int64_t a_bytes = Q8H ? (int64_t)sizeof(colibri_block_q8_h) : (int64_t)sizeof(colibri_block_q8_s);        \
        int64_t qs_at = Q8H ? (int64_t)offsetof(colibri_block_q8_h, qs) : (int64_t)offsetof(colibri_block_q8_s, qs); \
        for (int64_t t0 = 0; t0 < n_tok; t0 += COLIBRI_BP_TOKENS) {                                               \
            int64_t kt = n_tok - t0 < COLIBRI_BP_TOKENS ? n_tok - t0 : COLIBRI_BP_TOKENS;                         \
            int64_t nt = (kt + COLIBRI_BP_TILE - 1) / COLIBRI_BP_TILE * COLIBRI_BP_TILE;                          \
            for (int64_t g0 = 0; g0 < n_groups; g0 += COLIBRI_BP_GROUPS) {                                        \
                int64_t ng = n_groups - g0 < COLIBRI_BP_GROUPS ? n_groups - g0 : COLIBRI_BP_GROUPS;               \
                colibri_block_tokens_fill(&side, (const char *)x, x_stride, t0, nt, kt, g0, ng, Q8H, one_chain, C); \
                for (int64_t r0 = 0; r0 < rows; r0 += COLIBRI_BP_ROWS) {                                          \
                    int64_t kr = rows - r0 < COLIBRI_BP_ROWS ? rows - r0 : COLIBRI_BP_ROWS;                       \
                    const char *row_at[COLIBRI_BP_ROWS];   /* row_at: [row] the rows, the last one repeated */    \
                    colibri_bp_rows_at(row_at, w, w_stride, r0, kr);                                              \
                    for (int64_t p = 0; p < (ng + 1) / 2; p++) {   /* quants: group pair p of every row */       \
                        for (int r = 0; r < COLIBRI_BP_ROWS; r++) {                                               \
                            const char *chunk = row_at[r] + g0 * 32 / (ELEMS) * (int64_t)sizeof(WBLOCK);          \
                            _mm512_storeu_si512((void *)u[r], PAIR(WBLOCK, QUANTS2, chunk, p, ng));               \
                        }                                                                                         \
                        for (int64_t g = 2 * p; g < 2 * p + 2 && g < ng; g++) {                                   \
                            colibri_transpose16(urow, 32 * (g - 2 * p), panel.qs[g]);                             \
                            colibri_transpose16(urow, 32 * (g - 2 * p) + 16, panel.qs[g] + 4);                    \
                        }                                                                                         \
                    }                                                                                             \
                    for (int64_t g = 0; g < ng; g++) {   /* scales */                                             \
                        COLIBRI_BP_FILL_SCALES(panel.sc, g, g0, row_at, WBLOCK, ELEMS, GROUP_SCALES, D16);        \
                    }                                                                                             \
                    __mmask16 keep = (__mmask16)((1u << kr) - 1);                                                 \
                    for (int64_t j0 = 0; j0 < nt; j0 += COLIBRI_BP_TILE) {                                        \
                        colibri_p8_prefetch_next((const char *)w, w_stride, rows, r0, COLIBRI_BP_ROWS, n_groups, g0, ng, \
                                                 j0 / COLIBRI_BP_TILE, nt / COLIBRI_BP_TILE);                     \
                        const char *arow[COLIBRI_BP_TILE];   /* arow: the tile's activation quants of group g0 */ \
                        __m512 acc[COLIBRI_BP_TILE];         /* acc: [token] 16 rows' running sums */             \
                        COLIBRI_BP_UNROLL                                                                         \
                        for (int j = 0; j < COLIBRI_BP_TILE; j++) {                                               \
                            int64_t t = t0 + (j0 + j < kt ? j0 + j : kt - 1);                                      \
                            arow[j] = (const char *)x + t * x_stride + g0 * a_bytes + qs_at;                      \
                            acc[j] = g0 == 0 ? _mm512_setzero_ps()                                                \
                                             : _mm512_maskz_loadu_ps(keep, y + t * y_stride + r0);                \
                        }                                                                                         \
                        for (int64_t g = 0; g < ng; g++) {                                                        \
                            COLIBRI_BP_UNROLL                                                                     \
                            for (int j = 0; j < COLIBRI_BP_TILE; j++) {                                           \
                                const char *a = arow[j] + g * a_bytes;                                            \
                                __m512i h[2];   /* h: [half] the halves' dots, or h[0] the group's (one_chain) */ \
                                for (int hh = 0; hh < 2 - one_chain; hh++) {                                      \
                                    h[hh] = (C) == 0 || Q8H ? _mm512_setzero_si512()                              \
                                                            : _mm512_set1_epi32(side.start[g][hh][j0 + j]);       \
                                    COLIBRI_BP_UNROLL                                                             \
                                    for (int k = 4 * hh; k < (one_chain ? 8 : 4 * hh + 4); k++) {                 \
                                        int32_t word;                                                             \
                                        memcpy(&word, a + 4 * k, sizeof word);                                    \
                                        h[hh] = _mm512_dpbusd_epi32(h[hh], panel.qs[g][k], _mm512_set1_epi32(word)); \
                                    }                                                                             \
                                }                                                                                 \
                                __m512 isum;                                                                      \
                                if (Q8H) {   /* in float, exact: see the header */                                \
                                    isum = _mm512_set1_ps(-(float)(C) * side.a01[g][j0 + j]);                      \
                                    isum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(h[0]), _mm512_set1_ps(side.k[g][0][j0 + j]), isum); \
                                    isum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(h[1]), _mm512_set1_ps(side.k[g][1][j0 + j]), isum); \
                                } else if (S_AT == COLIBRI_PER_HALF) {                                            \
                                    isum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(h[1]), panel.sc.s[g][1],              \
                                                           _mm512_mul_ps(_mm512_cvtepi32_ps(h[0]), panel.sc.s[g][0])); \
                                } else {                                                                          \
                                    isum = _mm512_cvtepi32_ps(h[0]);                                              \
                                    if (S_AT == COLIBRI_PER_GROUP) isum = _mm512_mul_ps(isum, panel.sc.s[g][0]);     \
                                }                                                                                 \
                                __m512 da = _mm512_set1_ps(side.d[g][j0 + j]);                                    \
                                __m512 v = _mm512_mul_ps(isum, _mm512_mul_ps(panel.sc.d[g], da));                    \
                                if (M_AT != COLIBRI_NONE) {                                                       \
                                    __m512 msum = M_AT == COLIBRI_PER_HALF                                        \
                                        ? _mm512_fmadd_ps(panel.sc.m[g][1], _mm512_set1_ps(side.a[g][1][j0 + j]),       \
                                                          _mm512_mul_ps(panel.sc.m[g][0], _mm512_set1_ps(side.a[g][0][j0 + j]))) \
                                        : _mm512_mul_ps(panel.sc.m[g][0], _mm512_set1_ps(side.a01[g][j0 + j]));      \
                                    v = _mm512_sub_ps(v, _mm512_mul_ps(msum, _mm512_mul_ps(panel.sc.dm[g], da)));    \
                                }                                                                                 \
                                acc[j] = _mm512_add_ps(acc[j], v);                                                \
                            }                                                                                     \
                        }                                                                                         \
                        COLIBRI_BP_UNROLL                                                                         \
                        for (int j = 0; j < COLIBRI_BP_TILE; j++) {                                               \
                            if (j0 + j < kt) _mm512_mask_storeu_ps(y + (t0 + j0 + j) * y_stride + r0, keep, acc[j]); \
                        }                                                                                         \
                    }                                                                                             \
                }                                                                                                 \
            }                                                                                                     \
        }                                                                                                         \
    }

COLIBRI_BLOCK_PANEL_GEMM(void colibri_gemm_q2_k_avx512, colibri_block_q2_k, 256, colibri_q2_k_group_scales,
                         COLIBRI_BP_PAIR_K, colibri_q2_k_quants2, 0, COLIBRI_PER_HALF, COLIBRI_PER_HALF, 0, COLIBRI_BP_D_Q2_K)
COLIBRI_BLOCK_PANEL_GEMM(void colibri_gemm_q3_k_avx512, colibri_block_q3_k, 256, colibri_q3_k_group_scales,
                         COLIBRI_BP_PAIR_K, colibri_q3_k_quants2, 4, COLIBRI_PER_HALF, COLIBRI_NONE, 0, COLIBRI_BP_D_Q3_K)
COLIBRI_BLOCK_PANEL_GEMM(void colibri_gemm_q4_k_avx512, colibri_block_q4_k, 256, colibri_q4_k_group_scales,
                         COLIBRI_BP_PAIR_K, colibri_q4_k_quants2, 0, COLIBRI_PER_GROUP, COLIBRI_PER_GROUP, 0, COLIBRI_BP_D_Q4_K)
COLIBRI_BLOCK_PANEL_GEMM(void colibri_gemm_q5_k_avx512, colibri_block_q5_k, 256, colibri_q5_k_group_scales,
                         COLIBRI_BP_PAIR_K, colibri_q5_k_quants2, 0, COLIBRI_PER_GROUP, COLIBRI_PER_GROUP, 0, COLIBRI_BP_D_Q5_K)
COLIBRI_BLOCK_PANEL_GEMM(void colibri_gemm_q6_k_avx512, colibri_block_q6_k, 256, colibri_q6_k_group_scales,
                         COLIBRI_BP_PAIR_K, colibri_q6_k_quants2, 32, COLIBRI_PER_HALF, COLIBRI_NONE, 0, COLIBRI_BP_D_Q6_K)
COLIBRI_BLOCK_PANEL_GEMM(void colibri_gemm_iq4_xs_avx512, colibri_block_iq4_xs, 256, colibri_iq4_xs_group_scales,
                         COLIBRI_BP_PAIR_K, colibri_iq4_xs_quants2, 128, COLIBRI_PER_GROUP, COLIBRI_NONE, 0, COLIBRI_BP_D_IQ4_XS)
COLIBRI_BLOCK_PANEL_GEMM(void colibri_gemm_q5_0_avx512, colibri_block_q5_0, 32, colibri_q5_0_group_scales,
                         COLIBRI_BP_PAIR_32, COLIBRI_Q5_0_QUANTS2, 16, COLIBRI_NONE, COLIBRI_NONE, 1, COLIBRI_BP_D_SCALES)
COLIBRI_BLOCK_PANEL_GEMM(void colibri_gemm_q5_1_avx512, colibri_block_q5_1, 32, colibri_q5_1_group_scales,
                         COLIBRI_BP_PAIR_32, COLIBRI_Q5_1_QUANTS2, 0, COLIBRI_NONE, COLIBRI_PER_GROUP, 1, COLIBRI_BP_D_SCALES)
COLIBRI_BLOCK_PANEL_GEMM(void colibri_gemm_iq4_nl_avx512, colibri_block_iq4_nl, 32, colibri_iq4_nl_group_scales,
                         COLIBRI_BP_PAIR_32, COLIBRI_IQ4_NL_QUANTS2, 128, COLIBRI_NONE, COLIBRI_NONE, 1, COLIBRI_BP_D_SCALES)
COLIBRI_BLOCK_PANEL_GEMM(void colibri_gemm_mxfp4_avx512, colibri_block_mxfp4, 32, colibri_mxfp4_group_scales,
                         COLIBRI_BP_PAIR_32, COLIBRI_MXFP4_QUANTS2, 128, COLIBRI_NONE, COLIBRI_NONE, 0, COLIBRI_BP_D_SCALES)
