/*
 * x86_amx/gemm_halves.c — the multi-token kernels (gemm) of Q2_K, Q3_K and Q6_K,
 * whose groups have an integer scale per half, with AMX-BF16 tiles for the
 * integer dots and AVX-512 for the float step (Intel since Sapphire Rapids).
 *
 * A group's dot is isum = S_0 h_0 + S_1 h_1 = sum_j w_j a_j with w_j = S_h(j) q_j:
 * the scales fold into the weights. Q2_K's |w_j| <= 15 * 3 = 45 and Q3_K's
 * <= 32 * 4 = 128 are bf16 (one part, one tdpbf16ps a group); Q6_K's <= 128 * 32
 * = 4096 is neither an int8 nor a bf16 (8 significant bits), but two bf16 hold
 * it: hi_j is w_j as an f32 with its low 16 bits cleared (its top 8 significant
 * bits) and lo_j = w_j - hi_j (the rest: at most 5 significant bits, the same
 * sign), both exact. Two tdpbf16ps add HI·B and LO·B into one f32 tile, B the
 * tokens' activation bytes as bf16 (exact). Every product and partial sum is an
 * integer of magnitude at most sum_j (|hi_j| + |lo_j|) |a_j| = sum_j |w_j| |a_j|
 * <= 32·4096·128 = 2^24, which f32 holds exactly whatever order the tile adds
 * in: the tile's [row, token] is isum, exactly, as a float. One tile store a
 * group (where AMX-INT8 needs a tile and a store per half: gemm_blocks.c), then
 * the reference's float step, tokens in the lanes, one row at a time:
 *   acc += isum * (D * d_a)  [ - (M_0 A_0 + M_1 A_1) * (DMIN * d_a) ]  (Q2_K's mins)
 * groups in order, so every y[t, r] is bitwise quant_dot_blocks.c's dot.
 *
 * For 16 weight rows and a chunk of groups the panel holds each group's HI (and
 * LO) tiles (16 rows x 32 bf16, [group, part, row, element]); the chunk's
 * tokens' activations are laid once, 16 tokens at a time, as B tiles [group,
 * pair, token x 2] (the VNNI pairs tdpbf16ps takes): 380 KiB of stack, under
 * the 512 KiB every thread that runs kernels has (core/threadpool.h). The rest
 * is gemm_blocks.c's driver, with a pipeline one stage deeper (Q6_K's two tiles
 * a group are a chain): the accumulators transposed to y's [token, row] at the
 * end of a chunk of groups and resting in y between chunks, rows and tokens
 * past the last real one repeating it.
 *
 * kernels_bench 4096 4096 64 128 (in cache, one thread, 3 runs): Q6_K 186-203
 * GMAC/s against the AVX-512 vpdpbusd panel's 152-159, Q3_K 252 against 147-159;
 * in a slower phase Q2_K 136-142 against 116-117.
 * Tried for Q6_K and slower: the next panel's fill spread over this one's groups
 * (two panels; 158-171), two groups' tdpbf16ps interleaved (158-167), 16-group
 * chunks (145-153: the chunk's transposes and pipeline fill and drain cost more
 * than the smaller frame gains).
 */
#include <immintrin.h>

#define COLIBRI_BP_TOKENS 128   /* tokens per chunk: the panel's reuse */

#include "../x86_avx512/block_panel.h"
#include "tiles.h"

typedef struct colibri_amx_bf16_panel {
    uint16_t w[COLIBRI_BP_GROUPS][2][COLIBRI_BP_ROWS][32];   /* w: [group, part (hi, lo), row, element] bf16 */
    __m512 d[COLIBRI_BP_GROUPS];                             /* d: [group] 16 rows' block scales D */
    __m512 dm[COLIBRI_BP_GROUPS];                            /* dm: [group] 16 rows' DMIN (types with mins) */
    float m[COLIBRI_BP_GROUPS][2][COLIBRI_BP_ROWS];          /* m: [group, half, row] integer mins M (types with mins) */
} colibri_amx_bf16_panel;

typedef struct colibri_amx_bf16_tokens {
    uint16_t b[COLIBRI_BP_TOKENS / COLIBRI_AMX_TOKENS][COLIBRI_BP_GROUPS][16][32];   /* b: [token tile, group, pair, token x 2] bf16 */
    float d[COLIBRI_BP_GROUPS][COLIBRI_BP_TOKENS];                                   /* d: [group, token] activation scales */
    float a[COLIBRI_BP_GROUPS][2][COLIBRI_BP_TOKENS];                                /* a: [group, half, token] half sums A_h */
} colibri_amx_bf16_tokens;

/* The tiles (colibri_amx_configure), a set for even groups and one for odd: tmm0 / tmm1 a
 * group's isum [row, token] as f32 (16 x 64 bytes), tmm2, tmm3 / tmm5, tmm6 its weights' HI
 * and LO (16 rows x 32 bf16), tmm4 / tmm7 its activations (16 rows of pairs x 64 bytes). */
static const uint8_t colibri_amx_bf16_rows[8] = {16, 16, 16, 16, 16, 16, 16, 16};
static const uint16_t colibri_amx_bf16_colsb[8] = {64, 64, 64, 64, 64, 64, 64, 64};

/* The 32 bf16 whose bits are the upper halves of lo's 16 floats, then hi's (exact where
 * each float is a bf16). */
static inline __m512i colibri_amx_bf16_pack(__m512 lo, __m512 hi) {
    static const uint16_t odd[32] = {1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31,
                                     33, 35, 37, 39, 41, 43, 45, 47, 49, 51, 53, 55, 57, 59, 61, 63};
    return _mm512_permutex2var_epi16(_mm512_castps_si512(lo), _mm512_loadu_si512(odd), _mm512_castps_si512(hi));
}

/* The 16 signed bytes of v as floats (exact). */
static inline __m512 colibri_amx_bytes_ps(__m128i v) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v)); }

/* The B tiles, scales and half sums of tokens t0.. (nt of them, a multiple of 16; real ones kt, the
 * last one repeated) for groups [g0, g0 + ng), from their Q8_S blocks: each token's 32
 * bytes as 16 bf16 pairs, 16 tokens transposed to [pair, token]. */
static void colibri_amx_bf16_tokens_fill(colibri_amx_bf16_tokens *tok, const char *x, int64_t x_stride, int64_t t0,
                                         int64_t nt, int64_t kt, int64_t g0, int64_t ng) {
    for (int64_t j0 = 0; j0 < nt; j0 += COLIBRI_AMX_TOKENS) {
        for (int64_t g = 0; g < ng; g++) {
            __m512 pairs[COLIBRI_AMX_TOKENS], rows[COLIBRI_AMX_TOKENS];   /* pairs: [token] its 16 pairs; rows: [pair] 16 tokens' */
            for (int i = 0; i < COLIBRI_AMX_TOKENS; i++) {
                int64_t j = j0 + i;
                const colibri_block_q8_s *b =
                    (const colibri_block_q8_s *)(x + (t0 + (j < kt ? j : kt - 1)) * x_stride) + g0 + g;
                __m512 lo = colibri_amx_bytes_ps(_mm_loadu_si128((const __m128i *)b->qs));
                __m512 hi = colibri_amx_bytes_ps(_mm_loadu_si128((const __m128i *)(b->qs + 16)));
                pairs[i] = _mm512_castsi512_ps(colibri_amx_bf16_pack(lo, hi));
                tok->d[g][j] = b->d;
                tok->a[g][0][j] = (float)b->sum[0], tok->a[g][1][j] = (float)b->sum[1];
            }
            colibri_transpose16x16_ps(pairs, rows);
            for (int k = 0; k < 16; k++) _mm512_storeu_ps(tok->b[j0 / COLIBRI_AMX_TOKENS][g][k], rows[k]);
        }
    }
}

/* NAME: super-block k of the chunk of a row (at b) as HI (and LO when PARTS is 2) into the
 * panel at row r, groups 8k..8k + 7: QUANTS2's 64 unsigned bytes u = q + C of a group pair
 * are its four halves, 16 bytes each, each times its scale S (SCALES16: the 16 signed
 * scales). The scales widened to floats once (their broadcasts then are loads), the
 * halves' bytes read back from memory by the widening loads. HAS_MIN: MINS16 gives the 16
 * integer mins, into the panel's m (else COLIBRI_AMX_NO_MINS). */
#define COLIBRI_AMX_NO_MINS(b) _mm_setzero_si128()
#define COLIBRI_AMX_BF16_FILL(NAME, WBLOCK, QUANTS2, SCALES16, HAS_MIN, MINS16, C, PARTS)                    \
    static inline void NAME(colibri_amx_bf16_panel *panel, const WBLOCK *b, int64_t k, int r) {              \
        const __m512i top = _mm512_set1_epi32((int)0xffff0000u);                                            \
        float sf[16];   /* sf: [half] the super-block's scales */                                           \
        int8_t q[64];   /* q: [element] a group pair's signed quants */                                     \
        _mm512_storeu_ps(sf, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(SCALES16(b))));                         \
        if (HAS_MIN) {                                                                                      \
            float mf[16];   /* mf: [half] the super-block's mins */                                         \
            _mm512_storeu_ps(mf, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(MINS16(b))));                       \
            for (int h = 0; h < 16; h++) panel->m[8 * k + h / 2][h % 2][r] = mf[h];                        \
        }                                                                                                   \
        for (int p = 0; p < 4; p++) {                                                                       \
            _mm512_storeu_si512((void *)q, _mm512_sub_epi8(QUANTS2(b, p), _mm512_set1_epi8(C)));            \
            __m512 hi[4], lo[4];   /* [half] w = hi + lo, hi its top 8 significant bits (PARTS 1: w) */    \
            _Pragma("GCC unroll 4")                                                                         \
            for (int h = 0; h < 4; h++) {                                                                   \
                __m512 w = _mm512_mul_ps(colibri_amx_bytes_ps(_mm_loadu_si128((const __m128i *)(q + 16 * h))), \
                                         _mm512_set1_ps(sf[4 * p + h]));                                    \
                hi[h] = (PARTS) == 2 ? _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(w), top)) : w; \
                lo[h] = _mm512_sub_ps(w, hi[h]);                                                            \
            }                                                                                               \
            _Pragma("GCC unroll 2")                                                                         \
            for (int i = 0; i < 2; i++) {                                                                   \
                int64_t g = 8 * k + 2 * p + i;                                                              \
                _mm512_storeu_si512((void *)panel->w[g][0][r], colibri_amx_bf16_pack(hi[2 * i], hi[2 * i + 1])); \
                if ((PARTS) == 2) {                                                                         \
                    _mm512_storeu_si512((void *)panel->w[g][1][r], colibri_amx_bf16_pack(lo[2 * i], lo[2 * i + 1])); \
                }                                                                                           \
            }                                                                                               \
        }                                                                                                   \
    }

/* Group g's isum of the tile's 16 tokens (tok.b[jt]) into tile CT, from HI (and LO) and B
 * in tiles TH, TL, TB (the set of g's parity: the callers pass constants). */
#define COLIBRI_AMX_BF16_ISSUE_SET(g, PARTS, CT, TH, TL, TB)                \
    do {                                                                   \
        _tile_zero(CT);                                                    \
        _tile_loadd(TH, panel.w[g][0][0], 64);                             \
        _tile_loadd(TB, tok.b[jt][g][0], 64);                              \
        _tile_dpbf16ps(CT, TH, TB);                                        \
        if ((PARTS) == 2) {                                                \
            _tile_loadd(TL, panel.w[g][1][0], 64);                         \
            _tile_dpbf16ps(CT, TL, TB);                                    \
        }                                                                  \
    } while (0)
#define COLIBRI_AMX_BF16_ISSUE(g, PARTS)                                   \
    do {                                                                   \
        if ((g) % 2) COLIBRI_AMX_BF16_ISSUE_SET(g, PARTS, 1, 5, 6, 7);     \
        else COLIBRI_AMX_BF16_ISSUE_SET(g, PARTS, 0, 2, 3, 4);             \
    } while (0)
#define COLIBRI_AMX_BF16_STORE(g)                                          \
    do {                                                                   \
        if ((g) % 2) _tile_stored(1, dots3[(g) % 3], 64);                  \
        else _tile_stored(0, dots3[(g) % 3], 64);                          \
    } while (0)

/* DECL: the gemm of the type WBLOCK (256-element super-blocks), FILL its panel fill
 * (COLIBRI_AMX_BF16_FILL), PARTS its bf16 parts a weight, DMIN_AT the offset of its f16 DMIN
 * (types with mins; else -1). Same contract as colibri_gemm_fn (Q8_S
 * activations). */
#define COLIBRI_AMX_BF16_GEMM(DECL, WBLOCK, FILL, PARTS, DMIN_AT)                                                                        \
DECL(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows,                         \
     int64_t n_tok, float *y, int64_t y_stride) {                                                                       \
    colibri_amx_bf16_panel panel;                                                                                       \
    colibri_amx_bf16_tokens tok;                                                                                        \
    float dots3[3][COLIBRI_BP_ROWS][COLIBRI_AMX_TOKENS];   /* dots3: [group % 3, row, token] isum */                    \
    int64_t n_groups = n / 32;                                                                                          \
    colibri_amx_configure(colibri_amx_bf16_rows, colibri_amx_bf16_colsb);                                               \
    for (int64_t t0 = 0; t0 < n_tok; t0 += COLIBRI_BP_TOKENS) {                                                         \
        int64_t kt = n_tok - t0 < COLIBRI_BP_TOKENS ? n_tok - t0 : COLIBRI_BP_TOKENS;                                   \
        int64_t nt = (kt + COLIBRI_AMX_TOKENS - 1) / COLIBRI_AMX_TOKENS * COLIBRI_AMX_TOKENS;                           \
        for (int64_t g0 = 0; g0 < n_groups; g0 += COLIBRI_BP_GROUPS) {                                                  \
            int64_t ng = n_groups - g0 < COLIBRI_BP_GROUPS ? n_groups - g0 : COLIBRI_BP_GROUPS;   /* a multiple of 8 */ \
            colibri_amx_bf16_tokens_fill(&tok, (const char *)x, x_stride, t0, nt, kt, g0, ng);                          \
            for (int64_t r0 = 0; r0 < rows; r0 += COLIBRI_BP_ROWS) {                                                    \
                int64_t kr = rows - r0 < COLIBRI_BP_ROWS ? rows - r0 : COLIBRI_BP_ROWS;                                 \
                const char *row_at[COLIBRI_BP_ROWS];   /* row_at: [row] the rows, the last one repeated */              \
                colibri_bp_rows_at(row_at, w, w_stride, r0, kr);                                                        \
                for (int r = 0; r < COLIBRI_BP_ROWS; r++) {                                                             \
                    const WBLOCK *blk = (const WBLOCK *)row_at[r] + g0 / 8;                                             \
                    for (int64_t k = 0; k < ng / 8; k++) FILL(&panel, blk + k, k, r);                                   \
                }                                                                                                       \
                for (int64_t g = 0; g < ng; g += 8) {   /* D, once a super-block */                                     \
                    const char *sb[COLIBRI_BP_ROWS];   /* sb: [row] the super-block of group g0 + g */                  \
                    for (int r = 0; r < COLIBRI_BP_ROWS; r++) sb[r] = (const char *)((const WBLOCK *)row_at[r] + (g0 + g) / 8); \
                    panel.d[g] = colibri_bp_f16(sb, offsetof(WBLOCK, d));                                               \
                    for (int i = 1; i < 8; i++) panel.d[g + i] = panel.d[g];                                            \
                    if ((DMIN_AT) >= 0) {                                                                               \
                        panel.dm[g] = colibri_bp_f16(sb, (DMIN_AT));                                                    \
                        for (int i = 1; i < 8; i++) panel.dm[g + i] = panel.dm[g];                                      \
                    }                                                                                                   \
                }                                                                                                       \
                __mmask16 keep = (__mmask16)((1u << kr) - 1);                                                           \
                for (int64_t j0 = 0; j0 < nt; j0 += COLIBRI_AMX_TOKENS) {                                               \
                    int64_t jt = j0 / COLIBRI_AMX_TOKENS;                                                               \
                    colibri_p8_prefetch_next((const char *)w, w_stride, rows, r0, COLIBRI_BP_ROWS, n_groups, g0, ng, jt, \
                                             nt / COLIBRI_AMX_TOKENS);                                                  \
                    int64_t real = kt - j0 < COLIBRI_AMX_TOKENS ? kt - j0 : COLIBRI_AMX_TOKENS;                         \
                    __m512 acc[COLIBRI_BP_ROWS];   /* acc: [row] 16 tokens' running sums */                             \
                    if (g0 == 0) {                                                                                      \
                        COLIBRI_AMX_UNROLL                                                                              \
                        for (int r = 0; r < COLIBRI_BP_ROWS; r++) acc[r] = _mm512_setzero_ps();                         \
                    } else {                                                                                            \
                        __m512 at[COLIBRI_AMX_TOKENS];   /* at: [token] 16 rows' sums so far */                         \
                        COLIBRI_AMX_UNROLL                                                                              \
                        for (int i = 0; i < COLIBRI_AMX_TOKENS; i++) {                                                  \
                            at[i] = i < real ? _mm512_maskz_loadu_ps(keep, y + (t0 + j0 + i) * y_stride + r0)           \
                                             : _mm512_setzero_ps();                                                     \
                        }                                                                                               \
                        colibri_transpose16x16_ps(at, acc);                                                             \
                    }                                                                                                   \
                    /* a three-stage pipeline: group g + 2 issued, g - 1's float step, g + 1's isum                     \
                     * stored: two float steps between a group's issue and its store (its two chained                   \
                     * tdpbf16ps), two stages between the store and the loads of its float step */                      \
                    COLIBRI_AMX_BF16_ISSUE(0, PARTS);                                                                   \
                    COLIBRI_AMX_BF16_ISSUE(1, PARTS);                                                                   \
                    COLIBRI_AMX_BF16_STORE(0);                                                                          \
                    for (int64_t g = 0; g <= ng; g++) {                                                                 \
                        if (g + 2 < ng) COLIBRI_AMX_BF16_ISSUE(g + 2, PARTS);                                           \
                        if (g >= 1) {                                                                                   \
                            const int64_t gs = g - 1;   /* the group whose float step runs */                           \
                            float(*dots)[COLIBRI_AMX_TOKENS] = dots3[gs % 3];   /* dots: [row, token] */                \
                            __m512 da = _mm512_loadu_ps(&tok.d[gs][j0]);      /* da: [token] */                         \
                            __m512 a0 = _mm512_loadu_ps(&tok.a[gs][0][j0]), a1 = _mm512_loadu_ps(&tok.a[gs][1][j0]);    \
                            const float *d = (const float *)&panel.d[gs], *dm = (const float *)&panel.dm[gs];           \
                            COLIBRI_AMX_UNROLL                                                                          \
                            for (int r = 0; r < COLIBRI_BP_ROWS; r++) {                                                 \
                                __m512 v = _mm512_mul_ps(_mm512_loadu_ps(dots[r]), _mm512_mul_ps(_mm512_set1_ps(d[r]), da)); \
                                if ((DMIN_AT) >= 0) {   /* msum = M_0 A_0 + M_1 A_1: integers below 2^24, exact */             \
                                    __m512 msum = _mm512_fmadd_ps(_mm512_set1_ps(panel.m[gs][1][r]), a1,                \
                                                                  _mm512_mul_ps(_mm512_set1_ps(panel.m[gs][0][r]), a0)); \
                                    v = _mm512_sub_ps(v, _mm512_mul_ps(msum, _mm512_mul_ps(_mm512_set1_ps(dm[r]), da))); \
                                }                                                                                       \
                                acc[r] = _mm512_add_ps(acc[r], v);                                                      \
                            }                                                                                           \
                        }                                                                                               \
                        if (g + 1 < ng) COLIBRI_AMX_BF16_STORE(g + 1);                                                  \
                    }                                                                                                   \
                    __m512 out[COLIBRI_AMX_TOKENS];   /* out: [token] 16 rows' sums */                                  \
                    colibri_transpose16x16_ps(acc, out);                                                                \
                    for (int i = 0; i < real; i++) _mm512_mask_storeu_ps(y + (t0 + j0 + i) * y_stride + r0, keep, out[i]); \
                }                                                                                                       \
            }                                                                                                           \
        }                                                                                                               \
    }                                                                                                                   \
    _tile_release();                                                                                                    \
}

COLIBRI_AMX_BF16_FILL(colibri_amx_fill_q2_k, colibri_block_q2_k, colibri_q2_k_quants2, colibri_q2_k_scales16, 1,
                      colibri_q2_k_mins16, 0, 1)
COLIBRI_AMX_BF16_FILL(colibri_amx_fill_q3_k, colibri_block_q3_k, colibri_q3_k_quants2, colibri_q3_k_scales16, 0,
                      COLIBRI_AMX_NO_MINS, 4, 1)
COLIBRI_AMX_BF16_FILL(colibri_amx_fill_q6_k, colibri_block_q6_k, colibri_q6_k_quants2, colibri_q6_k_scales16, 0,
                      COLIBRI_AMX_NO_MINS, 32, 2)
COLIBRI_AMX_BF16_GEMM(void colibri_gemm_q2_k_amx, colibri_block_q2_k, colibri_amx_fill_q2_k, 1,
                      (int)offsetof(colibri_block_q2_k, dmin))
COLIBRI_AMX_BF16_GEMM(void colibri_gemm_q3_k_amx, colibri_block_q3_k, colibri_amx_fill_q3_k, 1, -1)
COLIBRI_AMX_BF16_GEMM(void colibri_gemm_q6_k_amx, colibri_block_q6_k, colibri_amx_fill_q6_k, 2, -1)
