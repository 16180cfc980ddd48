/*
 * x86_avx2/gemm_panel.h — the tiled multi-token driver of the x86 block-type
 * gemm kernels on 256-bit vectors (x86_avx2/gemm_quant.c, and with vpdpbusd
 * x86_avx_vnni/gemm_quant.c), and the activation side that the AVX-512 row
 * panel shares; included only by files compiled with at least AVX2 + F16C.
 *
 * Weight rows go in the vector lanes, activation bytes are broadcast, so no
 * horizontal sum is needed. For a group of 8 weight rows and a chunk of
 * blocks, FILL transposes the rows' blocks once into a row panel: vector
 * qs[b][g] holds bytes 4g..4g+3 of block b of each of the 8 rows (as the
 * type's integer step wants them: unsigned nibbles, or signed / offset Q8_0
 * bytes) beside the rows' widened scales d (and Q4_1 mins m). Then a tile of
 * tokens at a time (PANELS panels x TILE tokens: 2 x 2 on AVX2, 1 x 4 on
 * AVX-VNNI), their accumulators in registers: DOT turns the panels' block b
 * and the tile's activation bytes into vectors of exact int32 block dots
 * k0·I_0 + k1·I_1 (lane r: a panel's row r; k_h the token's Q8_H
 * multipliers), starting from each token's per-block correction `start`
 * (-c · (sum_0 + sum_1) for a weight offset c, from the activation side);
 * the reference's float step then runs lane-wise:
 *   acc_r += (float)isum_r * (d_w,r * d_a)   [+ m_w,r * (d_a * (sum_0 + sum_1)) for Q4_1]
 * blocks in order, so every y[t, r] is bitwise the reference dot
 * (quant_dot.c). Between block chunks a row's running sums rest in y (a float
 * store and load are exact). Rows past the last one repeat it and tokens
 * past the last one repeat it; their results are dropped.
 *
 * A new block type plugs in with its FILL, its DOT (per ISA) and the
 * driver below, as the float types do with COLIBRI_GEMM_FLOAT_TILED_DEFINE.
 */
#ifndef COLIBRI_X86_GEMM_PANEL_H
#define COLIBRI_X86_GEMM_PANEL_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../isa.h"
#include "../quant.h"

#define COLIBRI_PANEL_TOKENS 64   /* tokens per chunk: the row panel's reuse */
#define COLIBRI_PANEL_BLOCKS 32   /* blocks per chunk */
#define COLIBRI_P8_ROWS 8         /* weight rows per 256-bit panel vector */
#define COLIBRI_P8_TILE 4         /* tokens whose accumulators stay in registers */

/* ---- the activation side: per token and block of a chunk ---------------------- */

typedef struct colibri_token_side {
    float d[COLIBRI_PANEL_BLOCKS][COLIBRI_PANEL_TOKENS];       /* d: [block, token] activation units */
    float s[COLIBRI_PANEL_BLOCKS][COLIBRI_PANEL_TOKENS];       /* s: [block, token] d·(sum_0 + sum_1) (Q4_1 only) */
    int32_t start[COLIBRI_PANEL_BLOCKS][COLIBRI_PANEL_TOKENS]; /* start: [block, token] -c·(sum_0 + sum_1) */
    int16_t k[COLIBRI_PANEL_BLOCKS][COLIBRI_PANEL_TOKENS][2];  /* k: [block, token, half] multipliers */
    float start_f[COLIBRI_PANEL_BLOCKS][COLIBRI_PANEL_TOKENS]; /* start_f: [block, token] start as a float (exact), */
    float k_f[COLIBRI_PANEL_BLOCKS][COLIBRI_PANEL_TOKENS][2];  /* k_f: k as floats: x86_avx512/gemm_quant.c's FMA halves */
} colibri_token_side;

/* The activation sides of tokens t0.. (nt of them, real ones kt) for blocks
 * [b0, b0 + nb): rows of Q8_H blocks, x_stride bytes apart; has_s: Q4_1's
 * offset factor wanted; c is the weight offset whose correction
 * -c·(sum_0 + sum_1) (the sums carry k) starts each block's integer dot. */
static inline void colibri_token_side_fill(colibri_token_side *side, const char *x, int64_t x_stride, int64_t t0,
                                           int64_t nt, int64_t kt, int64_t b0, int64_t nb, int has_s, int32_t c) {
    for (int64_t j = 0; j < nt; j++) {
        const colibri_block_q8_h *row = (const colibri_block_q8_h *)(x + (t0 + (j < kt ? j : kt - 1)) * x_stride);
        for (int64_t b = 0; b < nb; b++) {
            const colibri_block_q8_h *blk = &row[b0 + b];
            int32_t sum = blk->sum[0] + blk->sum[1];
            side->d[b][j] = blk->d;
            side->s[b][j] = has_s ? blk->d * (float)sum : 0.0f;
            side->start[b][j] = -c * sum;
            side->k[b][j][0] = blk->k[0];
            side->k[b][j][1] = blk->k[1];
            side->start_f[b][j] = (float)side->start[b][j];
            side->k_f[b][j][0] = (float)blk->k[0];
            side->k_f[b][j][1] = (float)blk->k[1];
        }
    }
}

/* The paired layout of a chunk's activation bytes (the AVX2 kernels without VNNI):
 * token j's block b with its halves' byte pairs interleaved, so that each 16-bit sum
 * of vpmaddubsw stays in one half and a vector's even and odd words hold the two
 * halves: bytes 4g..4g+3 are q_2g, q_2g+1, q_16+2g, q_17+2g (q: the block's qs;
 * g = 0..7). x86_avx2/gemm_quant.c lays its weight panels out the same way. */
typedef struct colibri_token_pairs {
    int8_t qs[COLIBRI_PANEL_TOKENS][COLIBRI_PANEL_BLOCKS][COLIBRI_QK];   /* qs: [token, block, byte] paired */
} colibri_token_pairs;

/* The paired bytes of the kt tokens t0.. for blocks [b0, b0 + nb) (rows of
 * Q8_H blocks, x_stride bytes apart). */
static inline void colibri_token_pairs_fill(colibri_token_pairs *pairs, const char *x, int64_t x_stride, int64_t t0,
                                            int64_t kt, int64_t b0, int64_t nb) {
    for (int64_t j = 0; j < kt; j++) {
        const colibri_block_q8_h *row = (const colibri_block_q8_h *)(x + (t0 + j) * x_stride) + b0;
        for (int64_t b = 0; b < nb; b++) {
            __m128i lo = _mm_loadu_si128((const __m128i *)row[b].qs);          /* half 0 */
            __m128i hi = _mm_loadu_si128((const __m128i *)(row[b].qs + 16));   /* half 1 */
            _mm_storeu_si128((__m128i *)pairs->qs[j][b], _mm_unpacklo_epi16(lo, hi));
            _mm_storeu_si128((__m128i *)(pairs->qs[j][b] + 16), _mm_unpackhi_epi16(lo, hi));
        }
    }
}

/* ---- the 8-row panel ---------------------------------------------------------------- */

typedef struct colibri_panel8 {
    __m256i qs[COLIBRI_PANEL_BLOCKS][8];   /* qs: [block, group] 8 rows' 4 weight bytes */
    __m256i qa[COLIBRI_PANEL_BLOCKS][8];   /* qa: [block, group] their absolute values (Q8_0 on AVX2) */
    __m256 d[COLIBRI_PANEL_BLOCKS];        /* d: [block] 8 rows' scales */
    __m256 m[COLIBRI_PANEL_BLOCKS];        /* m: [block] 8 rows' mins (Q4_1) */
} colibri_panel8;

/* Rows k and k + 4's 16 bytes at `at`: the low and the high 128-bit lane. */
static inline __m256i colibri_p8_rows2(const char *const blk[8], int k, int64_t at) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(blk[k] + at))),
                                   _mm_loadu_si128((const __m128i *)(blk[k + 4] + at)), 1);
}

/* out[g], lane r: dword g of row r, from z[k] holding rows k (low 128 bits) and
 * k + 4 (high): a 4x4 dword transpose inside each 128-bit lane. */
static inline void colibri_p8_transpose4(const __m256i z[4], __m256i out[4]) {
    __m256i t0 = _mm256_unpacklo_epi32(z[0], z[1]), t1 = _mm256_unpackhi_epi32(z[0], z[1]);
    __m256i t2 = _mm256_unpacklo_epi32(z[2], z[3]), t3 = _mm256_unpackhi_epi32(z[2], z[3]);
    out[0] = _mm256_unpacklo_epi64(t0, t2);
    out[1] = _mm256_unpackhi_epi64(t0, t2);
    out[2] = _mm256_unpacklo_epi64(t1, t3);
    out[3] = _mm256_unpackhi_epi64(t1, t3);
}

/* out[g], lane r (g < 4): dword g of the 16 bytes at blk[r] + at. */
static inline void colibri_p8_transpose(const char *const blk[8], int64_t at, __m256i out[4]) {
    __m256i z[4];   /* z: [k] row k low, row k + 4 high */
    for (int k = 0; k < 4; k++) z[k] = colibri_p8_rows2(blk, k, at);
    colibri_p8_transpose4(z, out);
}

/* Lane r: the f16 at blk[r] + at, widened (exact). The eight halves are gathered in a
 * register: stored one by one and loaded as one vector they stalled the load on store
 * forwarding (~6% of the Q4_K gemm's samples, perf). */
static inline int colibri_p8_u16(const char *at) {
    uint16_t h;
    memcpy(&h, at, sizeof h);
    return h;
}
static inline __m256 colibri_p8_f16(const char *const blk[8], int64_t at) {
    __m128i v = _mm_cvtsi32_si128(colibri_p8_u16(blk[0] + at));
    v = _mm_insert_epi16(v, colibri_p8_u16(blk[1] + at), 1);
    v = _mm_insert_epi16(v, colibri_p8_u16(blk[2] + at), 2);
    v = _mm_insert_epi16(v, colibri_p8_u16(blk[3] + at), 3);
    v = _mm_insert_epi16(v, colibri_p8_u16(blk[4] + at), 4);
    v = _mm_insert_epi16(v, colibri_p8_u16(blk[5] + at), 5);
    v = _mm_insert_epi16(v, colibri_p8_u16(blk[6] + at), 6);
    v = _mm_insert_epi16(v, colibri_p8_u16(blk[7] + at), 7);
    return _mm256_cvtph_ps(v);
}

/* The panel's block b: groups 0..3 the low nibbles of the 16 bytes at `at`,
 * groups 4..7 the high ones (Q4_0, Q4_1). */
static inline void colibri_p8_nibbles(colibri_panel8 *p, int64_t b, const char *const blk[8], int64_t at) {
    __m256i mask = _mm256_set1_epi8(0x0f);
    colibri_p8_transpose(blk, at, p->qs[b]);
    for (int g = 0; g < 4; g++) {
        p->qs[b][g + 4] = _mm256_and_si256(_mm256_srli_epi16(p->qs[b][g], 4), mask);
        p->qs[b][g] = _mm256_and_si256(p->qs[b][g], mask);
    }
}

/* The panel fillers colibri_p8_fill_q4_0##SUFFIX and _q4_1##SUFFIX: the scales (and
 * mins), then the quants by NIBBLES(p, b, blk, at) from the 16 bytes at `at`. */
#define COLIBRI_P8_Q4_FILLS(SUFFIX, NIBBLES)                                                                 \
    static inline void colibri_p8_fill_q4_0##SUFFIX(colibri_panel8 *p, int64_t b, const char *const blk[8]) { \
        p->d[b] = colibri_p8_f16(blk, 0);                                                                     \
        NIBBLES(p, b, blk, 2);                                                                                \
    }                                                                                                         \
    static inline void colibri_p8_fill_q4_1##SUFFIX(colibri_panel8 *p, int64_t b, const char *const blk[8]) { \
        p->d[b] = colibri_p8_f16(blk, 0);                                                                     \
        p->m[b] = colibri_p8_f16(blk, 2);                                                                     \
        NIBBLES(p, b, blk, 4);                                                                                \
    }
COLIBRI_P8_Q4_FILLS(, colibri_p8_nibbles)

/* Token j's activation bytes 4g..4g+3 of its block, in every lane: broadcast as a float
 * (the same bits), which Zen 3 runs beside the multiplies for less than vpbroadcastd
 * (a loop of 6 vpmaddubsw, 6 vpaddw and 6 broadcasts: 2.81 against 3.22 TSC ticks, about
 * 3.7 against 4.2 cycles). */
static inline __m256i colibri_p8_bcast(const char *a, int g) {
    float word;
    memcpy(&word, a + 4 * g, sizeof word);
    return _mm256_castps_si256(_mm256_set1_ps(word));
}

/* Each group's products go straight into the token's accumulator: the empty
 * asm (the vector stays in its register, unchanged) keeps GCC from
 * reassociating a block's 8 additions into a tree whose 32 pending products
 * it kept on the stack (AVX2 Q8_0, 512 x 4096 x 64: 33.4 million
 * instructions with the spills, 29.7 without, callgrind). */
#define COLIBRI_IN_REGISTER(v) __asm__("" : "+x"(v))

/* The tile's and the block's loops unrolled, so that the accumulators live in
 * registers (-O2 unrolls nothing by itself). */
#define COLIBRI_P8_UNROLL _Pragma("GCC unroll 8")

/* v + m_w * (d_a·(sum_0 + sum_1)) per row for Q4_1; v for the others. */
#define COLIBRI_P8_NO_OFFSET(v, p, b, side, j) (v)
#define COLIBRI_P8_Q4_1_OFFSET(v, p, b, side, j) \
    _mm256_add_ps((v), _mm256_mul_ps((p)->m[b], _mm256_set1_ps((side)->s[b][j])))

/* Tile i of the n tiles of the panels at rows r0.. (span rows of them): pulls into L2 its
 * share of the next panels' weight bytes (rows r0 + span + r for r = i, i + n, ... below
 * span; units [u0, u0 + nu) of the row's n_units), so that the next fill reads L2, not
 * DRAM: the hardware prefetcher misses the fills' short streams, tens of microseconds
 * apart (a tenth of a prefill's K gemm time stalled on those loads, perf). */
static inline void colibri_p8_prefetch_next(const char *w, int64_t w_stride, int64_t rows, int64_t r0, int64_t span,
                                            int64_t n_units, int64_t u0, int64_t nu, int64_t i, int64_t n) {
    int64_t lo = u0 * w_stride / n_units, hi = (u0 + nu) * w_stride / n_units;   /* the chunk's bytes of a row */
    for (int64_t r = r0 + span + i; r < r0 + 2 * span && r < rows; r += n) {
        const char *end = w + r * w_stride + hi;
        for (const char *at = (const char *)((uintptr_t)(w + r * w_stride + lo) & ~(uintptr_t)63); at < end; at += 64) {
            _mm_prefetch(at, _MM_HINT_T1);
        }
    }
}

/* A panel's 8 running sums in y at yp: plain moves when all 8 rows are real (full), else
 * only the real rows' lanes (keep); the masked moves are slow on AMD (~2% of the Q4_K
 * gemm's samples, perf), so they are kept for the last, partial panel. */
static inline __m256 colibri_p8_y_load(const float *yp, int full, __m256i keep) {
    return full ? _mm256_loadu_ps(yp) : _mm256_maskload_ps(yp, keep);
}
static inline void colibri_p8_y_store(float *yp, int full, __m256i keep, __m256 v) {
    if (full) {
        _mm256_storeu_ps(yp, v);
    } else {
        _mm256_maskstore_ps(yp, keep, v);
    }
}

/* ---- the driver ----------------------------------------------------------------------
 * The loop nest of every 8-row panel gemm (COLIBRI_PANEL8_GEMM below, gemm_blocks.c's
 * COLIBRI_GROUP_PANEL8_GEMM): tokens in chunks of chunk_tokens, the row's N_UNITS
 * units (blocks, or the groups of 32 elements of the other block types) in chunks of
 * chunk_units, PANELS panels of 8 rows at a time, tiles of TILE tokens whose accumulators
 * (PANELS x TILE vectors) stay in registers and rest in y between unit chunks (a float
 * store and load are exact). Rows past the last one repeat it, tokens past the last one
 * repeat it; their results are dropped. Written inside a colibri_gemm_fn's body (its
 * parameter names, and the chunk sizes chunk_tokens, a multiple of TILE, and
 * chunk_units); the hooks are statements that use the driver's names: SIDE_FILL the
 * activation side of tokens [t0, t0 + nt) (kt real) and units [u0, u0 + nu); PANEL_FILL
 * PANEL_ARGS the panels from the 8 · PANELS rows (row_at[r]: row r's start); TILE_DECL()
 * declarations per tile of tokens t0 + j0.., TILE_J(j, t) a statement per token j of the
 * tile (token t, the last one repeated); STEP STEP_ARGS unit u of the chunk into
 * acc[p][j], panel p's accumulator of the tile's token j (lane r: the panel's row r).
 * The hooks that hold a _Pragma (the unrolled loops) come as a macro name and its
 * parenthesised arguments, so that they expand in the driver's body, never inside a
 * macro argument, where GCC may not keep a _Pragma in its place. */
#define COLIBRI_P8_DRIVER(N_UNITS, PANELS, TILE, SIDE_FILL, PANEL_FILL, PANEL_ARGS, TILE_DECL, TILE_J, STEP,       \
                          STEP_ARGS)                                                                         \
    for (int64_t t0 = 0; t0 < n_tok; t0 += chunk_tokens) {                                                   \
        int64_t kt = n_tok - t0 < chunk_tokens ? n_tok - t0 : chunk_tokens;                                  \
        int64_t nt = (kt + (TILE) - 1) / (TILE) * (TILE);                                                    \
        for (int64_t u0 = 0; u0 < (N_UNITS); u0 += chunk_units) {                                            \
            int64_t nu = (N_UNITS) - u0 < chunk_units ? (N_UNITS) - u0 : chunk_units;                        \
            SIDE_FILL;                                                                                       \
            for (int64_t r0 = 0; r0 < rows; r0 += COLIBRI_P8_ROWS * (PANELS)) {                              \
                int64_t kr = rows - r0 < COLIBRI_P8_ROWS * (PANELS) ? rows - r0 : COLIBRI_P8_ROWS * (PANELS); \
                const char *row_at[COLIBRI_P8_ROWS * (PANELS)];   /* row_at: [row] the last one repeated */ \
                for (int r = 0; r < COLIBRI_P8_ROWS * (PANELS); r++) {                                       \
                    row_at[r] = (const char *)w + (r0 + (r < kr ? r : kr - 1)) * w_stride;                   \
                }                                                                                            \
                PANEL_FILL PANEL_ARGS;                                                                       \
                __m256i keep[PANELS];   /* keep: [panel] its real rows' lanes */                             \
                int full[PANELS];       /* full: [panel] all 8 rows real (colibri_p8_y_load / _store) */     \
                for (int p = 0; p < (PANELS); p++) {                                                         \
                    full[p] = kr >= COLIBRI_P8_ROWS * (p + 1);                                               \
                    keep[p] = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)kr - COLIBRI_P8_ROWS * p),           \
                                                 _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));                 \
                }                                                                                            \
                for (int64_t j0 = 0; j0 < nt; j0 += (TILE)) {                                                \
                    colibri_p8_prefetch_next((const char *)w, w_stride, rows, r0, COLIBRI_P8_ROWS * (PANELS), \
                                             (N_UNITS), u0, nu, j0 / (TILE), nt / (TILE));                   \
                    TILE_DECL();                                                                             \
                    __m256 acc[PANELS][TILE];   /* acc: [panel, token] 8 rows' running sums */               \
                    COLIBRI_P8_UNROLL                                                                        \
                    for (int j = 0; j < (TILE); j++) {                                                       \
                        int64_t t = t0 + (j0 + j < kt ? j0 + j : kt - 1);                                    \
                        TILE_J(j, t);                                                                        \
                        COLIBRI_P8_UNROLL                                                                    \
                        for (int p = 0; p < (PANELS); p++) {                                                 \
                            acc[p][j] = u0 == 0 ? _mm256_setzero_ps()                                        \
                                                : colibri_p8_y_load(y + t * y_stride + r0 + COLIBRI_P8_ROWS * p, \
                                                                    full[p], keep[p]);                       \
                        }                                                                                    \
                    }                                                                                        \
                    for (int64_t u = 0; u < nu; u++) {                                                       \
                        STEP STEP_ARGS;                                                                      \
                    }                                                                                        \
                    COLIBRI_P8_UNROLL                                                                        \
                    for (int j = 0; j < (TILE); j++) {                                                       \
                        if (j0 + j >= kt) continue;                                                          \
                        COLIBRI_P8_UNROLL                                                                    \
                        for (int p = 0; p < (PANELS); p++) {                                                 \
                            colibri_p8_y_store(y + (t0 + j0 + j) * y_stride + r0 + COLIBRI_P8_ROWS * p,      \
                                               full[p], keep[p], acc[p][j]);                                 \
                        }                                                                                    \
                    }                                                                                        \
                }                                                                                            \
            }                                                                                                \
        }                                                                                                    \
    }

/* COLIBRI_PANEL8_GEMM's hooks (names: the driver's, and the kernel's panel, side, a_bytes
 * and ACT's). The panels: block b = u0 + b of their 8 rows each, by FILL. */
#define COLIBRI_P8_BLOCKS_PANEL(WBLOCK, FILL, PANELS)                                           \
    do {                                                                                        \
        for (int p = 0; p < (PANELS); p++) {                                                    \
            const char *blk[COLIBRI_P8_ROWS];   /* blk: [row] block u0 + b of the row */        \
            for (int r = 0; r < COLIBRI_P8_ROWS; r++) {                                         \
                blk[r] = row_at[COLIBRI_P8_ROWS * p + r] + u0 * (int64_t)sizeof(WBLOCK);        \
            }                                                                                   \
            for (int64_t b = 0; b < nu; b++) {                                                  \
                FILL(&panel[p], b, blk);                                                        \
                for (int r = 0; r < COLIBRI_P8_ROWS; r++) blk[r] += sizeof(WBLOCK);             \
            }                                                                                   \
        }                                                                                       \
    } while (0)
/* The tile's activation rows at block u0: declared per tile, row j set beside acc[.][j]. */
#define COLIBRI_P8_BLOCKS_TILE() const char *arow[COLIBRI_P8_TILE]   /* arow: the tile's activation rows */

/* Where DOT finds the activation bytes (COLIBRI_PANEL8_GEMM's ACT): DIRECT in the
 * Q8_H blocks, PAIRED in a colibri_token_pairs filled per chunk. Each names its
 * storage (_DECL), its fill per chunk (_FILL), token j's row at block u0 (_TILE_J)
 * and the bytes from one block to the next (_STRIDE). */
#define COLIBRI_P8_DIRECT_DECL
#define COLIBRI_P8_DIRECT_FILL
#define COLIBRI_P8_DIRECT_TILE_J(j, t) \
    arow[j] = (const char *)x + (t) * x_stride + u0 * a_bytes + (int64_t)offsetof(colibri_block_q8_h, qs)
#define COLIBRI_P8_DIRECT_STRIDE ((int64_t)sizeof(colibri_block_q8_h))
#define COLIBRI_P8_PAIRED_DECL colibri_token_pairs pairs;
#define COLIBRI_P8_PAIRED_FILL colibri_token_pairs_fill(&pairs, (const char *)x, x_stride, t0, kt, u0, nu)
#define COLIBRI_P8_PAIRED_TILE_J(j, t) arow[j] = (const char *)pairs.qs[(t) - t0]
#define COLIBRI_P8_PAIRED_STRIDE ((int64_t)COLIBRI_QK)

/* Block u: DOT's exact dots of the tile's tokens on every panel, then the float step per
 * panel and token. */
#define COLIBRI_P8_BLOCKS_STEP(DOT, OFFSET, PANELS, TILE)                                        \
    do {                                                                                         \
        const char *a[TILE];                                                                     \
        __m256i isum[PANELS][TILE];                                                              \
        COLIBRI_P8_UNROLL                                                                        \
        for (int j = 0; j < (TILE); j++) a[j] = arow[j] + u * a_bytes;                           \
        DOT(panel, u, a, &side.start[u][j0], side.k[u] + j0, isum);                              \
        COLIBRI_P8_UNROLL                                                                        \
        for (int j = 0; j < (TILE); j++) {                                                       \
            __m256 da = _mm256_set1_ps(side.d[u][j0 + j]);                                       \
            COLIBRI_P8_UNROLL                                                                    \
            for (int p = 0; p < (PANELS); p++) {                                                 \
                __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(isum[p][j]), _mm256_mul_ps(panel[p].d[u], da)); \
                acc[p][j] = _mm256_add_ps(acc[p][j], OFFSET(v, &panel[p], u, &side, j0 + j));    \
            }                                                                                    \
        }                                                                                        \
    } while (0)

/* Defines NAME (a colibri_gemm_fn) for weights of WBLOCK against Q8_H
 * activations (HAS_S: Q4_1's offset factor wanted): C the weight offset the
 * starts correct, FILL(colibri_panel8 *, b, const char *const blk[8]) a
 * panel's block b from its 8 rows' blocks, DOT(const colibri_panel8
 * panel[PANELS], b, const char *const a[TILE], const int32_t start[TILE],
 * const int16_t k[TILE][2], __m256i isum[PANELS][TILE]) the tile's exact block
 * dots on each panel (a[j]: token j's 32 activation bytes of block b, laid out
 * as ACT says; k[j] its multipliers), OFFSET the Q4_1 term, ACT DIRECT or
 * PAIRED (above), PANELS panels of 8 rows against tiles of TILE tokens. */
#define COLIBRI_PANEL8_GEMM(NAME, WBLOCK, HAS_S, C, FILL, DOT, OFFSET, ACT, PANELS, TILE)                   \
    void NAME(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows,     \
              int64_t n_tok, float *y, int64_t y_stride) {                                                   \
        colibri_panel8 panel[PANELS];                                                                        \
        colibri_token_side side;                                                                             \
        COLIBRI_P8_##ACT##_DECL                                                                              \
        const int64_t chunk_tokens = COLIBRI_PANEL_TOKENS, chunk_units = COLIBRI_PANEL_BLOCKS;               \
        const int64_t a_bytes = COLIBRI_P8_##ACT##_STRIDE;                                                   \
        COLIBRI_P8_DRIVER(n / COLIBRI_QK, PANELS, TILE,                                                      \
                          do {                                                                               \
                              colibri_token_side_fill(&side, (const char *)x, x_stride, t0, nt, kt, u0, nu,  \
                                                      HAS_S, C);                                             \
                              COLIBRI_P8_##ACT##_FILL;                                                       \
                          } while (0),                                                                       \
                          COLIBRI_P8_BLOCKS_PANEL, (WBLOCK, FILL, PANELS), COLIBRI_P8_BLOCKS_TILE,           \
                          COLIBRI_P8_##ACT##_TILE_J,                                                         \
                          COLIBRI_P8_BLOCKS_STEP, (DOT, OFFSET, PANELS, TILE))                               \
    }

#endif /* COLIBRI_X86_GEMM_PANEL_H */
