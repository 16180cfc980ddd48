/*
 * x86_amx/gemm_blocks.c — the multi-token kernels (gemm) of the types of
 * quant_blocks.h with one integer scale a group or none (Q4_K, Q5_K, IQ4_XS,
 * MXFP4) with AMX-INT8 tiles for the integer dots and AVX-512 for the float
 * step (Intel since Sapphire Rapids).
 *
 * For 16 weight rows and a chunk of groups (32 elements each), the rows'
 * quants are unpacked to unsigned bytes u (q = u - C, blocks_quants.h) into a
 * panel laid [group, row, element]: group g of the 16 rows is one A tile
 * (16 rows x 32 bytes; no transpose). The chunk's tokens' activation bytes are
 * laid once, 16 tokens at a time, as B tiles [group, word, token x 4] (the
 * VNNI layout tdpbusd takes). One tdpbusd per group gives the 16 x 16 int32
 * dots [row, token], each started from the token's -C (A_0 + A_1) by a tile
 * load of stride 0 (every row the same 16 tokens' starts). The dots go
 * through memory to the float step, which runs tokens in the lanes, one row
 * at a time (the row's scales broadcast):
 *   isum = S (h_0 + h_1)      (below 2^24: exact)
 *   acc += isum * (D * d_a)  [ - (M (A_0 + A_1)) * (DMIN * d_a) ]
 * exactly as x86_avx512/gemm_blocks.c computes each lane, groups in order, so
 * every y[t, r] is bitwise quant_dot_blocks.c's dot. The 16 accumulators (one
 * a row) are transposed to y's [token, row] at the end of each chunk of
 * groups; between chunks a row's running sums rest in y. Rows past the last
 * real one repeat it, tokens past the last one repeat it; their results are
 * dropped.
 *
 * The types with scales per half (Q2_K, Q3_K, Q6_K) or Q8_H activations (Q5_0,
 * Q5_1, IQ4_NL) need the two halves' dots apart: two K = 16 tiles and two
 * tile stores a group, which made Q6_K's gemm slower than the vpdpbusd panel
 * (kernels_bench, 128 tokens: 55 against 70 GMAC/s; with this file's fixes of
 * 2026-12-07 a tie). Q2_K, Q3_K and Q6_K fold their scales into bf16 weights
 * instead (gemm_halves.c: AMX-BF16); the others keep AVX-512's.
 *
 * The tiles are configured at the start of each call and released at its
 * end (colibri_cpu_has_amx has asked Linux for the tile state once).
 */
#include <immintrin.h>

#define COLIBRI_BP_TOKENS 128   /* tokens per chunk: the panel's reuse (B tiles and side: 256 KiB of stack) */

#include "../x86_avx512/block_panel.h"
#include "tiles.h"

typedef struct colibri_amx_panel {
    uint8_t u[COLIBRI_BP_GROUPS][COLIBRI_BP_ROWS][32];   /* u: [group, row, element] unsigned quants (A tiles) */
    colibri_block_scales sc;                             /* the 16 rows' scales */
} colibri_amx_panel;

/* B tiles: for each 16 tokens of the chunk and group, word k (bytes 4k..4k+3 of the group) of
 * token n at [k][4n]. */
typedef struct colibri_amx_activations {
    int8_t b[COLIBRI_BP_TOKENS / COLIBRI_AMX_TOKENS][COLIBRI_BP_GROUPS][8][64];   /* b: [token tile, group, word, token x 4] */
} colibri_amx_activations;

/* The B tiles of tokens t0.. (nt of them, a multiple of 16; real ones kt, the last one
 * repeated) for groups [g0, g0 + ng), from their activation blocks (qs_at: the offset of
 * a block's 32 quants, a_bytes its size). */
static void colibri_amx_activations_fill(colibri_amx_activations *act, const char *x, int64_t x_stride, int64_t t0,
                                         int64_t nt, int64_t kt, int64_t g0, int64_t ng, int64_t a_bytes,
                                         int64_t qs_at) {
    for (int64_t j = 0; j < nt; j++) {
        const char *row = x + (t0 + (j < kt ? j : kt - 1)) * x_stride + qs_at;
        for (int64_t g = 0; g < ng; g++) {
            const char *qs = row + (g0 + g) * a_bytes;   /* qs: [32] */
            for (int k = 0; k < 8; k++) memcpy(&act->b[j / COLIBRI_AMX_TOKENS][g][k][4 * (j % COLIBRI_AMX_TOKENS)], qs + 4 * k, 4);
        }
    }
}

/* The tiles (colibri_amx_configure): tmm0, tmm1 a group's dots [row, token] as int32 (16 x
 * 64 bytes; even and odd groups), tmm2 its weights (16 rows x 32 bytes), tmm4 its
 * activations (8 rows of words x 64 bytes). */
static const uint8_t colibri_amx_int8_rows[8] = {16, 16, 16, 0, 8, 0, 0, 0};
static const uint16_t colibri_amx_int8_colsb[8] = {64, 64, 32, 0, 64, 0, 0, 0};

/* Group g's dots of the tile's 16 tokens (act.b[jt]) into tile CT, from the tokens' -C (A_0 +
 * A_1). CT is a constant: the callers alternate tmm0 / tmm1 by the group's parity. */
#define COLIBRI_AMX_ISSUE(CT, g, C)                                                                         \
    do {                                                                                                   \
        if ((C) == 0) _tile_zero(CT);                                                                      \
        else _tile_loadd(CT, &side.start[g][0][j0], 0);                                                    \
        _tile_loadd(2, panel.u[g][0], 32);                                                                 \
        _tile_loadd(4, act.b[jt][g][0], 64);                                                               \
        _tile_dpbusd(CT, 2, 4);                                                                            \
    } while (0)

/* DECL, WBLOCK, ELEMS, GROUP_SCALES, PAIR, QUANTS2, C, S_AT, M_AT, D16: as x86_avx512/gemm_blocks.c's
 * COLIBRI_BLOCK_PANEL_GEMM for its Q8_S types with S_AT COLIBRI_PER_GROUP or COLIBRI_NONE.
 * Same contract as colibri_gemm_fn. */
#define COLIBRI_AMX_GEMM(DECL, WBLOCK, ELEMS, GROUP_SCALES, PAIR, QUANTS2, C, S_AT, M_AT, D16)                      \
    DECL(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, \
         float *y, int64_t y_stride) {                                                                            \
        colibri_amx_panel panel;                                                                                  \
        colibri_block_tokens side;                                                                                \
        colibri_amx_activations act;                                                                              \
        int32_t dots2[2][COLIBRI_BP_ROWS][COLIBRI_AMX_TOKENS];   /* dots2: [group % 2, row, token] int32 dots */  \
        int64_t n_groups = n / 32;                                                                                \
        int64_t a_bytes = (int64_t)sizeof(colibri_block_q8_s), qs_at = (int64_t)offsetof(colibri_block_q8_s, qs); \
        colibri_amx_configure(colibri_amx_int8_rows, colibri_amx_int8_colsb);                                     \
        for (int64_t t0 = 0; t0 < n_tok; t0 += COLIBRI_BP_TOKENS) {                                               \
            int64_t kt = n_tok - t0 < COLIBRI_BP_TOKENS ? n_tok - t0 : COLIBRI_BP_TOKENS;                         \
            int64_t nt = (kt + COLIBRI_AMX_TOKENS - 1) / COLIBRI_AMX_TOKENS * COLIBRI_AMX_TOKENS;                 \
            for (int64_t g0 = 0; g0 < n_groups; g0 += COLIBRI_BP_GROUPS) {                                        \
                int64_t ng = n_groups - g0 < COLIBRI_BP_GROUPS ? n_groups - g0 : COLIBRI_BP_GROUPS;               \
                colibri_block_tokens_fill(&side, (const char *)x, x_stride, t0, nt, kt, g0, ng, 0, 1, C);       \
                colibri_amx_activations_fill(&act, (const char *)x, x_stride, t0, nt, kt, g0, ng, a_bytes, qs_at); \
                for (int64_t r0 = 0; r0 < rows; r0 += COLIBRI_BP_ROWS) {                                          \
                    int64_t kr = rows - r0 < COLIBRI_BP_ROWS ? rows - r0 : COLIBRI_BP_ROWS;                       \
                    const char *row_at[COLIBRI_BP_ROWS];   /* row_at: [row] the rows, the last one repeated */    \
                    colibri_bp_rows_at(row_at, w, w_stride, r0, kr);                                              \
                    for (int64_t p = 0; p < (ng + 1) / 2; p++) {   /* quants: group pair p of every row */       \
                        for (int r = 0; r < COLIBRI_BP_ROWS; r++) {                                               \
                            const char *chunk = row_at[r] + g0 * 32 / (ELEMS) * (int64_t)sizeof(WBLOCK);          \
                            __m512i u2 = PAIR(WBLOCK, QUANTS2, chunk, p, ng);                                     \
                            _mm256_storeu_si256((__m256i *)panel.u[2 * p][r], _mm512_castsi512_si256(u2));        \
                            if (2 * p + 1 < ng) {                                                                 \
                                _mm256_storeu_si256((__m256i *)panel.u[2 * p + 1][r], _mm512_extracti64x4_epi64(u2, 1)); \
                            }                                                                                     \
                        }                                                                                         \
                    }                                                                                             \
                    for (int64_t g = 0; g < ng; g++) {   /* scales */                                            \
                        COLIBRI_BP_FILL_SCALES(panel.sc, g, g0, row_at, WBLOCK, ELEMS, GROUP_SCALES, D16);       \
                    }                                                                                             \
                    __mmask16 keep = (__mmask16)((1u << kr) - 1);                                                \
                    for (int64_t j0 = 0; j0 < nt; j0 += COLIBRI_AMX_TOKENS) {                                     \
                        int64_t jt = j0 / COLIBRI_AMX_TOKENS;                                                     \
                        colibri_p8_prefetch_next((const char *)w, w_stride, rows, r0, COLIBRI_BP_ROWS, n_groups, g0, ng, \
                                                 jt, nt / COLIBRI_AMX_TOKENS);                                    \
                        int64_t real = kt - j0 < COLIBRI_AMX_TOKENS ? kt - j0 : COLIBRI_AMX_TOKENS;               \
                        __m512 acc[COLIBRI_BP_ROWS];   /* acc: [row] 16 tokens' running sums */                   \
                        if (g0 == 0) {                                                                            \
                            COLIBRI_AMX_UNROLL                                                                    \
                            for (int r = 0; r < COLIBRI_BP_ROWS; r++) acc[r] = _mm512_setzero_ps();               \
                        } else {                                                                                  \
                            __m512 at[COLIBRI_AMX_TOKENS];   /* at: [token] 16 rows' sums so far */               \
                            COLIBRI_AMX_UNROLL                                                                    \
                            for (int i = 0; i < COLIBRI_AMX_TOKENS; i++) {                                        \
                                at[i] = i < real ? _mm512_maskz_loadu_ps(keep, y + (t0 + j0 + i) * y_stride + r0) \
                                                 : _mm512_setzero_ps();                                           \
                            }                                                                                     \
                            colibri_transpose16x16_ps(at, acc);                                                   \
                        }                                                                                         \
                        COLIBRI_AMX_ISSUE(0, 0, C);                                                               \
                        /* a two-stage pipeline: group g's dots stored and g + 1's issued, then group g - 1's  \
                         * float step (a tile store read back at once stalled) */                                 \
                        for (int64_t g = 0; g <= ng; g++) {                                                       \
                            if (g < ng) {                                                                         \
                                if (g % 2) _tile_stored(1, dots2[1], 64);                                         \
                                else _tile_stored(0, dots2[0], 64);                                               \
                                if (g + 1 < ng && g % 2) COLIBRI_AMX_ISSUE(0, g + 1, C);                          \
                                else if (g + 1 < ng) COLIBRI_AMX_ISSUE(1, g + 1, C);                              \
                            }                                                                                     \
                            if (g == 0) continue;                                                                 \
                            const int64_t gs = g - 1;   /* the group whose float step runs */                    \
                            int32_t(*dots)[COLIBRI_AMX_TOKENS] = dots2[gs % 2];   /* dots: [row, token] */         \
                            __m512 da = _mm512_loadu_ps(&side.d[gs][j0]);       /* da: [token] */                  \
                            __m512 a01 = _mm512_loadu_ps(&side.a01[gs][j0]);    /* a01: [token] */                 \
                            const float *s0 = (const float *)&panel.sc.s[gs][0], *m0 = (const float *)&panel.sc.m[gs][0]; \
                            const float *d = (const float *)&panel.sc.d[gs], *dm = (const float *)&panel.sc.dm[gs];  \
                            COLIBRI_AMX_UNROLL                                                                    \
                            for (int r = 0; r < COLIBRI_BP_ROWS; r++) {                                           \
                                __m512 isum = _mm512_cvtepi32_ps(_mm512_loadu_si512(dots[r]));                    \
                                if (S_AT == COLIBRI_PER_GROUP) isum = _mm512_mul_ps(isum, _mm512_set1_ps(s0[r]));     \
                                __m512 v = _mm512_mul_ps(isum, _mm512_mul_ps(_mm512_set1_ps(d[r]), da));          \
                                if (M_AT != COLIBRI_NONE) {                                                       \
                                    __m512 msum = _mm512_mul_ps(_mm512_set1_ps(m0[r]), a01);                      \
                                    v = _mm512_sub_ps(v, _mm512_mul_ps(msum, _mm512_mul_ps(_mm512_set1_ps(dm[r]), da))); \
                                }                                                                                 \
                                acc[r] = _mm512_add_ps(acc[r], v);                                                \
                            }                                                                                     \
                        }                                                                                         \
                        __m512 out[COLIBRI_AMX_TOKENS];   /* out: [token] 16 rows' sums */                        \
                        colibri_transpose16x16_ps(acc, out);                                                      \
                        for (int i = 0; i < real; i++) _mm512_mask_storeu_ps(y + (t0 + j0 + i) * y_stride + r0, keep, out[i]); \
                    }                                                                                             \
                }                                                                                                 \
            }                                                                                                     \
        }                                                                                                         \
        _tile_release();                                                                                          \
    }

COLIBRI_AMX_GEMM(void colibri_gemm_q4_k_amx, colibri_block_q4_k, 256, colibri_q4_k_group_scales,
                 COLIBRI_BP_PAIR_K, colibri_q4_k_quants2, 0, COLIBRI_PER_GROUP, COLIBRI_PER_GROUP, COLIBRI_BP_D_Q4_K)
COLIBRI_AMX_GEMM(void colibri_gemm_q5_k_amx, colibri_block_q5_k, 256, colibri_q5_k_group_scales,
                 COLIBRI_BP_PAIR_K, colibri_q5_k_quants2, 0, COLIBRI_PER_GROUP, COLIBRI_PER_GROUP, COLIBRI_BP_D_Q5_K)
COLIBRI_AMX_GEMM(void colibri_gemm_iq4_xs_amx, colibri_block_iq4_xs, 256, colibri_iq4_xs_group_scales,
                 COLIBRI_BP_PAIR_K, colibri_iq4_xs_quants2, 128, COLIBRI_PER_GROUP, COLIBRI_NONE, COLIBRI_BP_D_IQ4_XS)
COLIBRI_AMX_GEMM(void colibri_gemm_mxfp4_amx, colibri_block_mxfp4, 32, colibri_mxfp4_group_scales,
                 COLIBRI_BP_PAIR_32, COLIBRI_MXFP4_QUANTS2, 128, COLIBRI_NONE, COLIBRI_NONE, COLIBRI_BP_D_SCALES)
