/*
 * x86_avx512/gemm_quant.c — the multi-token kernels (gemm) of the block types
 * with AVX-512 VNNI, free of horizontal sums.
 *
 * 16 tokens' quantized activation rows are first repacked, a chunk of blocks
 * at a time, into a panel on the stack whose 512-bit vector (block b, group g)
 * holds bytes 4g..4g+3 of block b of each of the 16 tokens. A weight row's 4
 * bytes of that group are broadcast to every lane, and vpdpbusd adds to lane t
 * token t's 4 products: after the block's 8 groups lane t holds the block's
 * exact int32 dot for token t (signed weights offset to unsigned, the offset's
 * correction -c·sum(a) precomputed per token and block as the start value, as
 * in dot_quant.c). The reference's float step follows lane by lane:
 *   acc_t += (float)isum_t * (d_w * d_a_t)   [+ m_w * s_a_t for Q4_1]
 * blocks in order, so every y[t, r] is bitwise the reference dot
 * (quant_dot.c). Between chunks a row's 8 running sums rest in y (a float
 * store and load are exact). Tokens past the last one repeat it; their lanes
 * are dropped.
 */
#include <immintrin.h>
#include <string.h>

#include "../isa.h"
#include "../quant.h"

#define COLIBRI_PANEL_TOKENS 16   /* lanes of a 512-bit int32 vector */
#define COLIBRI_PANEL_BLOCKS 16   /* blocks per chunk: an 8 KiB panel of quants */

typedef struct colibri_panel {
    int8_t qs[COLIBRI_PANEL_BLOCKS][8][COLIBRI_PANEL_TOKENS][4];  /* qs: [block, group, token, byte] */
    float d[COLIBRI_PANEL_BLOCKS][COLIBRI_PANEL_TOKENS];           /* d: [block, token] activation scale */
    float s[COLIBRI_PANEL_BLOCKS][COLIBRI_PANEL_TOKENS];           /* s: [block, token] Q8_1 s (Q4_1 only) */
    int32_t start[COLIBRI_PANEL_BLOCKS][COLIBRI_PANEL_TOKENS];     /* start: [block, token] -c·sum(a) */
} colibri_panel;

/* Fills the panel with blocks [b0, b0 + nb) of tokens t0.. (kt real ones)
 * from activation rows of Q8_0 (has_s 0) or Q8_1 (has_s 1) blocks. c: the
 * weight offset whose correction -c·sum(a) each start holds. */
static void colibri_panel_fill(colibri_panel *p, const char *x, int64_t x_stride, int64_t t0, int64_t kt,
                               int64_t b0, int64_t nb, int has_s, int32_t c) {
    int64_t block_bytes = has_s ? (int64_t)sizeof(colibri_block_q8_1) : (int64_t)sizeof(colibri_block_q8_0);
    for (int64_t j = 0; j < COLIBRI_PANEL_TOKENS; j++) {
        const char *row = x + (t0 + (j < kt ? j : kt - 1)) * x_stride;   /* row: [n/32] blocks */
        for (int64_t b = 0; b < nb; b++) {
            const char *blk = row + (b0 + b) * block_bytes;
            const int8_t *qs = has_s ? ((const colibri_block_q8_1 *)blk)->qs : ((const colibri_block_q8_0 *)blk)->qs;
            int32_t sum = 0;
            for (int g = 0; g < 8; g++) {
                for (int k = 0; k < 4; k++) {
                    p->qs[b][g][j][k] = qs[4 * g + k];
                    sum += qs[4 * g + k];
                }
            }
            p->d[b][j] = _cvtsh_ss(((const colibri_block_q8_0 *)blk)->d);   /* d comes first in both */
            p->s[b][j] = has_s ? _cvtsh_ss(((const colibri_block_q8_1 *)blk)->s) : 0.0f;
            p->start[b][j] = -c * sum;
        }
    }
}

/* ISUM(wb, p, b): the 16 tokens' exact int32 dots with weight block wb, in two
 * independent chains of 4 vpdpbusd (their latency, not their count, bounds a
 * block) joined by one exact integer add. */
static inline __m512i colibri_panel_isum_q8_0(const colibri_block_q8_0 *wb, const colibri_panel *p, int64_t b) {
    __m512i lo = _mm512_loadu_si512((const void *)p->start[b]), hi = _mm512_setzero_si512();
    __m512i flip = _mm512_set1_epi8((char)0x80);   /* w ^ 0x80 = w + 128 as uint8 */
    for (int g = 0; g < 4; g++) {
        int32_t w_lo, w_hi;
        memcpy(&w_lo, wb->qs + 4 * g, sizeof w_lo);
        memcpy(&w_hi, wb->qs + 16 + 4 * g, sizeof w_hi);
        lo = _mm512_dpbusd_epi32(lo, _mm512_xor_si512(_mm512_set1_epi32(w_lo), flip),
                                 _mm512_loadu_si512((const void *)p->qs[b][g]));
        hi = _mm512_dpbusd_epi32(hi, _mm512_xor_si512(_mm512_set1_epi32(w_hi), flip),
                                 _mm512_loadu_si512((const void *)p->qs[b][g + 4]));
    }
    return _mm512_add_epi32(lo, hi);
}

/* Q4_0 / Q4_1: group g < 4 is the low nibbles of qs[4g..4g+3], group g + 4
 * their high nibbles; one chain each, joined as above. */
static inline __m512i colibri_panel_nibbles(const uint8_t *qs, const colibri_panel *p, int64_t b, __m512i lo) {
    __m512i mask = _mm512_set1_epi8(0x0f), hi = _mm512_setzero_si512();
    for (int g = 0; g < 4; g++) {
        int32_t word;
        memcpy(&word, qs + 4 * g, sizeof word);
        __m512i wv = _mm512_set1_epi32(word);
        lo = _mm512_dpbusd_epi32(lo, _mm512_and_si512(wv, mask), _mm512_loadu_si512((const void *)p->qs[b][g]));
        hi = _mm512_dpbusd_epi32(hi, _mm512_and_si512(_mm512_srli_epi16(wv, 4), mask),
                                 _mm512_loadu_si512((const void *)p->qs[b][g + 4]));
    }
    return _mm512_add_epi32(lo, hi);
}

static inline __m512i colibri_panel_isum_q4_0(const colibri_block_q4_0 *wb, const colibri_panel *p, int64_t b) {
    return colibri_panel_nibbles(wb->qs, p, b, _mm512_loadu_si512((const void *)p->start[b]));
}

static inline __m512i colibri_panel_isum_q4_1(const colibri_block_q4_1 *wb, const colibri_panel *p, int64_t b) {
    return colibri_panel_nibbles(wb->qs, p, b, _mm512_setzero_si512());
}

/* v + m_w * s_a per token for Q4_1; v for the others. */
#define COLIBRI_PANEL_NO_OFFSET(v, wb, p, b) (v)
#define COLIBRI_PANEL_Q4_1_OFFSET(v, wb, p, b) \
    _mm512_add_ps((v), _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss((wb)->m)), _mm512_loadu_ps((p)->s[b])))

/* The 16 running sums of row r, tokens t0.. (kt real ones): 0 at the first
 * chunk, else what the previous chunk left in y. */
static inline __m512 colibri_panel_sums_load(const float *y, int64_t y_stride, int64_t t0, int64_t kt, int64_t r,
                                             int first) {
    float sums[COLIBRI_PANEL_TOKENS] = {0};   /* sums: [16] per token */
    for (int64_t j = 0; j < kt && !first; j++) sums[j] = y[(t0 + j) * y_stride + r];
    return _mm512_loadu_ps(sums);
}

static inline void colibri_panel_sums_store(__m512 acc, float *y, int64_t y_stride, int64_t t0, int64_t kt,
                                            int64_t r) {
    float sums[COLIBRI_PANEL_TOKENS];   /* sums: [16] per token */
    _mm512_storeu_ps(sums, acc);
    for (int64_t j = 0; j < kt; j++) y[(t0 + j) * y_stride + r] = sums[j];
}

/* acc += the reference's float step for weight block wb against the panel's block b. */
#define COLIBRI_PANEL_STEP(acc, wb, ISUM, OFFSET)                                                   \
    do {                                                                                            \
        __m512 scale_ = _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss((wb)->d)), _mm512_loadu_ps(panel.d[b])); \
        __m512 v_ = _mm512_mul_ps(_mm512_cvtepi32_ps(ISUM((wb), &panel, b)), scale_);              \
        acc = _mm512_add_ps(acc, OFFSET(v_, (wb), &panel, b));                                      \
    } while (0)

/* NAME: a colibri_gemm_fn for weights of WBLOCK; HAS_S: the activation is
 * Q8_1; C: the weight offset ISUM's start corrects. Two rows at a time share
 * the panel's loads (a last odd row runs twice, one result kept). */
#define COLIBRI_PANEL_GEMM(NAME, WBLOCK, HAS_S, C, ISUM, OFFSET)                                    \
    void NAME(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n,          \
              int64_t rows, int64_t n_tok, float *y, int64_t y_stride) {                            \
        colibri_panel panel;                                                                        \
        int64_t n_blocks = n / COLIBRI_QK;                                                          \
        for (int64_t t0 = 0; t0 < n_tok; t0 += COLIBRI_PANEL_TOKENS) {                              \
            int64_t kt = n_tok - t0 < COLIBRI_PANEL_TOKENS ? n_tok - t0 : COLIBRI_PANEL_TOKENS;     \
            for (int64_t b0 = 0; b0 < n_blocks; b0 += COLIBRI_PANEL_BLOCKS) {                       \
                int64_t nb = n_blocks - b0 < COLIBRI_PANEL_BLOCKS ? n_blocks - b0 : COLIBRI_PANEL_BLOCKS; \
                colibri_panel_fill(&panel, (const char *)x, x_stride, t0, kt, b0, nb, HAS_S, C);    \
                for (int64_t r = 0; r < rows; r += 2) {                                             \
                    int64_t r2 = r + 1 < rows ? r + 1 : r;                                          \
                    const WBLOCK *w0 = (const WBLOCK *)((const char *)w + r * w_stride) + b0;       \
                    const WBLOCK *w1 = (const WBLOCK *)((const char *)w + r2 * w_stride) + b0;      \
                    __m512 acc0 = colibri_panel_sums_load(y, y_stride, t0, kt, r, b0 == 0);         \
                    __m512 acc1 = colibri_panel_sums_load(y, y_stride, t0, kt, r2, b0 == 0);        \
                    for (int64_t b = 0; b < nb; b++) {                                              \
                        COLIBRI_PANEL_STEP(acc0, &w0[b], ISUM, OFFSET);                             \
                        COLIBRI_PANEL_STEP(acc1, &w1[b], ISUM, OFFSET);                             \
                    }                                                                               \
                    colibri_panel_sums_store(acc0, y, y_stride, t0, kt, r);                         \
                    if (r2 != r) colibri_panel_sums_store(acc1, y, y_stride, t0, kt, r2);           \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
    }

COLIBRI_PANEL_GEMM(colibri_gemm_q8_0_avx512, colibri_block_q8_0, 0, 128, colibri_panel_isum_q8_0,
                   COLIBRI_PANEL_NO_OFFSET)
COLIBRI_PANEL_GEMM(colibri_gemm_q4_0_avx512, colibri_block_q4_0, 0, 8, colibri_panel_isum_q4_0,
                   COLIBRI_PANEL_NO_OFFSET)
COLIBRI_PANEL_GEMM(colibri_gemm_q4_1_avx512, colibri_block_q4_1, 1, 0, colibri_panel_isum_q4_1,
                   COLIBRI_PANEL_Q4_1_OFFSET)
