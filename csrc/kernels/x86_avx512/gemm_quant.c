/*
 * x86_avx512/gemm_quant.c — the multi-token kernels (gemm) of the block types
 * with AVX-512 VNNI: weight rows in the vector lanes, tokens broadcast, free
 * of horizontal sums.
 *
 * For a group of 16 weight rows and a chunk of blocks, the weights are
 * transposed once into a row panel: vector (block b, group g) holds bytes
 * 4g..4g+3 of block b of each of the 16 rows, as unsigned bytes (Q8_0: w ^
 * 0x80 = w + 128; Q4_0 / Q4_1: the nibbles, low ones for groups 0..3, high
 * ones for 4..7), and the rows' f16 scales (and Q4_1 mins) widened. Then 8
 * tokens at a time, their 16-row accumulators held in registers: token t's 4
 * activation bytes (Q8_H) of group g are broadcast and vpdpbusd adds each
 * row's 4 products to its lane; after a half's 4 groups lane r holds the
 * half's exact int32 dot, times the token's multiplier k_h added to the
 * block's sum, which starts from the token's -c·(sum_0 + sum_1) correction of
 * the weight offset c (the sums carry k; precomputed per token and block for
 * the chunk, as are its f32 unit and k). That sum is taken in float, by two
 * FMAs (cheaper than vpmulld): every operand and partial sum is an integer
 * below 2^24 (|half| <= 16·255·127, k <= 8, |c·sum| <= 128·2·8·16·127: under
 * 1.3·10^7 in all), so each step is exact and the float is the int32 sum's.
 * The reference's float step then runs lane by lane:
 *   acc_r += (float)isum_r * (d_w,r * d_a)   [+ m_w,r * (d_a·(sum_0 + sum_1)) for Q4_1]
 * blocks in order, so every y[t, r] is bitwise the reference dot
 * (quant_dot.c). Between block chunks a row's running sums rest in y (a
 * float store and load are exact). Rows past the last real one repeat it and
 * tokens past the last one repeat it; their results are dropped.
 *
 * The row panel is amortized over every token of the chunk (up to 64): per
 * token and block the work is 8 vpdpbusd and 7 float operations for 16
 * rows. Each tile of tokens pulls into L2 its share of the next 16 rows'
 * bytes of the chunk (colibri_p8_prefetch_next, as AVX2's panels do): the
 * fill reads 16 short row streams the hardware prefetcher misses. Without it
 * (colibri bench, mixtral-small Q4_0, 2 threads, AMX Xeon VM) the experts of
 * a 512-token prefill took 494 ms against 410, of a 64-token one 106 against
 * 77, and AVX2's panels beat these on the same CPU up to 128 tokens.
 * (The kernel before this one broadcast the weights against a panel of 16
 * tokens' activations; it paid 8 weight-unpacking operations per row and
 * block and idled lanes below 16 tokens: 2-3 times slower from 2 tokens on.)
 */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../isa.h"
#include "../quant.h"
#include "../x86_avx2/gemm_panel.h"   /* the activation side (colibri_token_side) */
#include "transpose16.h"

#define COLIBRI_RP_ROWS 16     /* weight rows per vector: the lanes of a 512-bit int32 vector */
#define COLIBRI_RP_TILE 8      /* tokens whose accumulators stay in registers */
#define COLIBRI_RP_TOKENS COLIBRI_PANEL_TOKENS   /* tokens per chunk (64): the row panel's reuse */
#define COLIBRI_RP_BLOCKS COLIBRI_PANEL_BLOCKS   /* blocks per chunk (32): a 16 KiB row panel of quants */

typedef struct colibri_row_panel {
    __m512i qs[COLIBRI_RP_BLOCKS][8];   /* qs: [block, group] 16 rows' 4 unsigned weight bytes */
    __m512 d[COLIBRI_RP_BLOCKS];        /* d: [block] 16 rows' scales */
    __m512 m[COLIBRI_RP_BLOCKS];        /* m: [block] 16 rows' mins (Q4_1) */
} colibri_row_panel;

/* Lane r: the first dword of blk[r] (d, and m above it for Q4_1). */
static inline __m512i colibri_rp_heads(const char *const blk[16]) {
    uint32_t head[COLIBRI_RP_ROWS];   /* head: [row] */
    for (int r = 0; r < COLIBRI_RP_ROWS; r++) memcpy(&head[r], blk[r], sizeof head[r]);
    return _mm512_loadu_si512((const void *)head);
}

/* Fills the panel's block b from the 16 rows' blocks at blk[r]. */
static inline void colibri_rp_fill_q8_0(colibri_row_panel *p, int64_t b, const char *const blk[16]) {
    __m512i flip = _mm512_set1_epi8((char)0x80);
    p->d[b] = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(colibri_rp_heads(blk)));
    colibri_transpose16(blk, 2, p->qs[b]);
    colibri_transpose16(blk, 18, p->qs[b] + 4);
    for (int g = 0; g < 8; g++) p->qs[b][g] = _mm512_xor_si512(p->qs[b][g], flip);
}

static inline void colibri_rp_nibbles(colibri_row_panel *p, int64_t b, const char *const blk[16], int64_t at) {
    __m512i mask = _mm512_set1_epi8(0x0f);
    colibri_transpose16(blk, at, p->qs[b]);
    for (int g = 0; g < 4; g++) {
        p->qs[b][g + 4] = _mm512_and_si512(_mm512_srli_epi16(p->qs[b][g], 4), mask);
        p->qs[b][g] = _mm512_and_si512(p->qs[b][g], mask);
    }
}

static inline void colibri_rp_fill_q4_0(colibri_row_panel *p, int64_t b, const char *const blk[16]) {
    p->d[b] = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(colibri_rp_heads(blk)));
    colibri_rp_nibbles(p, b, blk, 2);
}

static inline void colibri_rp_fill_q4_1(colibri_row_panel *p, int64_t b, const char *const blk[16]) {
    __m512i dm = colibri_rp_heads(blk);   /* d | m << 16 */
    p->d[b] = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dm));
    p->m[b] = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dm, 16)));
    colibri_rp_nibbles(p, b, blk, 4);
}

/* The tile's and the block's loops unrolled, so that the accumulators live in
 * registers (-O2 unrolls nothing by itself). */
#define COLIBRI_RP_UNROLL _Pragma("GCC unroll 8")

/* v + m_w * (d_a·(sum_0 + sum_1)) per row for Q4_1; v for the others. */
#define COLIBRI_RP_NO_OFFSET(v, p, b, side, j) (v)
#define COLIBRI_RP_Q4_1_OFFSET(v, p, b, side, j) \
    _mm512_add_ps((v), _mm512_mul_ps((p)->m[b], _mm512_set1_ps((side)->s[b][j])))

/* DECL: the row-panel gemm's storage class, type and name for weights of WBLOCK against Q8_H
 * activations; HAS_S: Q4_1's offset factor wanted; C: the weight offset the starts correct;
 * FILL: the row panel's block filler; OFFSET: the Q4_1 term. Same contract as colibri_gemm_fn. */
#define COLIBRI_ROW_PANEL_GEMM(DECL, WBLOCK, HAS_S, C, FILL, OFFSET)                                   \
    DECL(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows,  \
              int64_t n_tok, float *y, int64_t y_stride) {                                                \
        colibri_row_panel panel;                                                                          \
        colibri_token_side side;                                                                          \
        int64_t n_blocks = n / COLIBRI_QK, a_bytes = sizeof(colibri_block_q8_h);                          \
        int64_t qs_at = offsetof(colibri_block_q8_h, qs);                                                 \
        for (int64_t t0 = 0; t0 < n_tok; t0 += COLIBRI_RP_TOKENS) {                                       \
            int64_t kt = n_tok - t0 < COLIBRI_RP_TOKENS ? n_tok - t0 : COLIBRI_RP_TOKENS;                 \
            int64_t nt = (kt + COLIBRI_RP_TILE - 1) / COLIBRI_RP_TILE * COLIBRI_RP_TILE;                  \
            for (int64_t b0 = 0; b0 < n_blocks; b0 += COLIBRI_RP_BLOCKS) {                                \
                int64_t nb = n_blocks - b0 < COLIBRI_RP_BLOCKS ? n_blocks - b0 : COLIBRI_RP_BLOCKS;       \
                colibri_token_side_fill(&side, (const char *)x, x_stride, t0, nt, kt, b0, nb, HAS_S, C);  \
                for (int64_t r0 = 0; r0 < rows; r0 += COLIBRI_RP_ROWS) {                                  \
                    int64_t kr = rows - r0 < COLIBRI_RP_ROWS ? rows - r0 : COLIBRI_RP_ROWS;               \
                    const char *blk[COLIBRI_RP_ROWS];   /* blk: [row] block b0 + b of the row */                  \
                    for (int r = 0; r < COLIBRI_RP_ROWS; r++) {                                           \
                        blk[r] = (const char *)w + (r0 + (r < kr ? r : kr - 1)) * w_stride + b0 * (int64_t)sizeof(WBLOCK); \
                    }                                                                                     \
                    for (int64_t b = 0; b < nb; b++) {                                                    \
                        FILL(&panel, b, blk);                                                             \
                        for (int r = 0; r < COLIBRI_RP_ROWS; r++) blk[r] += sizeof(WBLOCK);               \
                    }                                                                                     \
                    __mmask16 keep = (__mmask16)((1u << kr) - 1);                                        \
                    for (int64_t j0 = 0; j0 < nt; j0 += COLIBRI_RP_TILE) {                                \
                        colibri_p8_prefetch_next((const char *)w, w_stride, rows, r0, COLIBRI_RP_ROWS, n_blocks, \
                                                 b0, nb, j0 / COLIBRI_RP_TILE, nt / COLIBRI_RP_TILE);     \
                        const char *arow[COLIBRI_RP_TILE];   /* arow: the tile's activation rows */       \
                        __m512 acc[COLIBRI_RP_TILE];         /* acc: [token] 16 rows' running sums */     \
                        COLIBRI_RP_UNROLL                                                                 \
                        for (int j = 0; j < COLIBRI_RP_TILE; j++) {                                       \
                            int64_t t = t0 + (j0 + j < kt ? j0 + j : kt - 1);                              \
                            arow[j] = (const char *)x + t * x_stride + b0 * a_bytes + qs_at;              \
                            acc[j] = b0 == 0 ? _mm512_setzero_ps()                                        \
                                             : _mm512_maskz_loadu_ps(keep, y + t * y_stride + r0);        \
                        }                                                                                 \
                        for (int64_t b = 0; b < nb; b++) {                                                \
                            COLIBRI_RP_UNROLL                                                             \
                            for (int j = 0; j < COLIBRI_RP_TILE; j++) {                                   \
                                const char *a = arow[j] + b * a_bytes;                                    \
                                __m512 isum = _mm512_set1_ps(side.start_f[b][j0 + j]);                    \
                                COLIBRI_RP_UNROLL                                                         \
                                for (int h = 0; h < 2; h++) {                                             \
                                    __m512i half = _mm512_setzero_si512();   /* the half's dot */         \
                                    COLIBRI_RP_UNROLL                                                     \
                                    for (int g = 4 * h; g < 4 * h + 4; g++) {                             \
                                        int32_t word;                                                     \
                                        memcpy(&word, a + 4 * g, sizeof word);                            \
                                        half = _mm512_dpbusd_epi32(half, panel.qs[b][g], _mm512_set1_epi32(word)); \
                                    }                                                                     \
                                    __m512 k = _mm512_set1_ps(side.k_f[b][j0 + j][h]);                    \
                                    isum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(half), k, isum);            \
                                }                                                                         \
                                __m512 scale = _mm512_mul_ps(panel.d[b], _mm512_set1_ps(side.d[b][j0 + j])); \
                                __m512 v = _mm512_mul_ps(isum, scale);                                    \
                                acc[j] = _mm512_add_ps(acc[j], OFFSET(v, &panel, b, &side, j0 + j));      \
                            }                                                                             \
                        }                                                                                 \
                        COLIBRI_RP_UNROLL                                                                 \
                        for (int j = 0; j < COLIBRI_RP_TILE; j++) {                                       \
                            if (j0 + j < kt) _mm512_mask_storeu_ps(y + (t0 + j0 + j) * y_stride + r0, keep, acc[j]); \
                        }                                                                                 \
                    }                                                                                     \
                }                                                                                         \
            }                                                                                             \
        }                                                                                                 \
    }

COLIBRI_ROW_PANEL_GEMM(void colibri_gemm_q8_0_avx512, colibri_block_q8_0, 0, 128, colibri_rp_fill_q8_0,
                       COLIBRI_RP_NO_OFFSET)
COLIBRI_ROW_PANEL_GEMM(void colibri_gemm_q4_0_avx512, colibri_block_q4_0, 0, 8, colibri_rp_fill_q4_0,
                       COLIBRI_RP_NO_OFFSET)
COLIBRI_ROW_PANEL_GEMM(void colibri_gemm_q4_1_avx512, colibri_block_q4_1, 1, 0, colibri_rp_fill_q4_1,
                       COLIBRI_RP_Q4_1_OFFSET)
