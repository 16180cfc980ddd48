/*
 * x86_avx512/block_panel.h — what the multi-token kernels of the types of
 * quant_blocks.h share on AVX-512 (x86_avx512/gemm_blocks.c with vpdpbusd,
 * x86_amx/gemm_blocks.c with AMX tiles): a chunk of tokens' side (activation
 * scales, half sums, the offset's start, Q8_H's k_h) laid [group, token] so
 * that one token is a broadcast and 16 tokens one vector load; 16 rows' scales
 * of a group as float lanes (colibri_group_scales: exact); the quants of a
 * group pair. The includer defines COLIBRI_BP_TOKENS, its chunk of tokens.
 */
#ifndef COLIBRI_X86_AVX512_BLOCK_PANEL_H
#define COLIBRI_X86_AVX512_BLOCK_PANEL_H

#include <stddef.h>
#include <string.h>

#include "blocks_quants.h"
#include "../x86_avx2/gemm_panel.h"   /* colibri_p8_prefetch_next */

#define COLIBRI_BP_ROWS 16     /* weight rows per panel: the lanes of a 512-bit int32 vector */
#define COLIBRI_BP_GROUPS 32   /* groups per chunk: a 16 KiB panel of quants (4 super-blocks) */

/* 16 rows' scales of a chunk's groups, rows in the lanes. */
typedef struct colibri_block_scales {
    __m512 s[COLIBRI_BP_GROUPS][2];     /* s: [group, half] 16 rows' integer scales */
    __m512 m[COLIBRI_BP_GROUPS][2];     /* m: [group, half] 16 rows' integer mins */
    __m512 d[COLIBRI_BP_GROUPS];        /* d: [group] 16 rows' block scales D */
    __m512 dm[COLIBRI_BP_GROUPS];       /* dm: [group] 16 rows' DMIN */
} colibri_block_scales;

typedef struct colibri_block_tokens {
    float d[COLIBRI_BP_GROUPS][COLIBRI_BP_TOKENS];          /* d: [group, token] activation scales */
    float a[COLIBRI_BP_GROUPS][2][COLIBRI_BP_TOKENS];       /* a: [group, half, token] half sums A_h, as floats */
    float a01[COLIBRI_BP_GROUPS][COLIBRI_BP_TOKENS];        /* a01: [group, token] (float)(A_0 + A_1) */
    int32_t start[COLIBRI_BP_GROUPS][2][COLIBRI_BP_TOKENS]; /* start: [group, half, token] -C A_h; one chain: [0] -C (A_0 + A_1) (Q8_H: not read) */
    float k[COLIBRI_BP_GROUPS][2][COLIBRI_BP_TOKENS];       /* k: [group, half, token] Q8_H's k_h, as floats (Q8_S: unset) */
} colibri_block_tokens;

/* The side of tokens t0.. (nt of them, real ones kt) for groups [g0, g0 + ng) from their
 * Q8_H (q8h) or Q8_S blocks, for quants of offset c whose group dot is one chain (one_chain:
 * no per-half sums) or two: what the step broadcasts, ready-made (as scalars in the step,
 * the conversions and products cost a few % of Q4_K's gemm). */
static inline void colibri_block_tokens_fill(colibri_block_tokens *side, const char *x, int64_t x_stride, int64_t t0,
                                             int64_t nt, int64_t kt, int64_t g0, int64_t ng, int q8h, int one_chain,
                                             int32_t c) {
    for (int64_t j = 0; j < nt; j++) {
        const char *row = x + (t0 + (j < kt ? j : kt - 1)) * x_stride;
        for (int64_t g = 0; g < ng; g++) {
            const colibri_block_q8_h *bh = (const colibri_block_q8_h *)row + g0 + g;
            const colibri_block_q8_s *bs = (const colibri_block_q8_s *)row + g0 + g;
            const int16_t *sum = q8h ? bh->sum : bs->sum;
            side->d[g][j] = q8h ? bh->d : bs->d;
            side->a01[g][j] = (float)(sum[0] + sum[1]);
            for (int h = 0; h < 2; h++) {
                side->a[g][h][j] = (float)sum[h];
                side->start[g][h][j] = one_chain && h == 0 ? -c * (sum[0] + sum[1]) : -c * sum[h];
                if (q8h) side->k[g][h][j] = (float)bh->k[h];
            }
        }
    }
}

/* Lane r: the f16 at byte `at` of blk[r], widened (exact). */
static inline __m512 colibri_bp_f16(const char *const blk[16], int64_t at) {
    uint16_t h[16];   /* h: [row] */
    for (int r = 0; r < 16; r++) memcpy(&h[r], blk[r] + at, sizeof h[r]);
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)h));
}

/* The D and DMIN of group g (sc: a colibri_block_scales): as GROUP_SCALES gave them (d16,
 * dm16: [row]), or for the 256-element types the f16 fields of the rows' super-blocks (sb:
 * [row]) widened 16 at once (GROUP_SCALES's f16 calls, whose results then go unused, are
 * dropped: colibri_f16_to_f32 is const). */
#define COLIBRI_BP_D_SCALES(sc, g, sb, d16, dm16) \
    ((sc).d[g] = _mm512_loadu_ps(d16), (sc).dm[g] = _mm512_loadu_ps(dm16))
#define COLIBRI_BP_D_SUPER(sc, g, sb, WBLOCK, D_AT, DMIN_AT)                                               \
    ((sc).d[g] = colibri_bp_f16((sb), offsetof(WBLOCK, D_AT)),                                           \
     (sc).dm[g] = (DMIN_AT) < 0 ? _mm512_setzero_ps() : colibri_bp_f16((sb), (DMIN_AT) < 0 ? 0 : (DMIN_AT)))
#define COLIBRI_BP_D_Q2_K(sc, g, sb, d16, dm16) \
    COLIBRI_BP_D_SUPER(sc, g, sb, colibri_block_q2_k, d, (int)offsetof(colibri_block_q2_k, dmin))
#define COLIBRI_BP_D_Q3_K(sc, g, sb, d16, dm16) COLIBRI_BP_D_SUPER(sc, g, sb, colibri_block_q3_k, d, -1)
#define COLIBRI_BP_D_Q4_K(sc, g, sb, d16, dm16) \
    COLIBRI_BP_D_SUPER(sc, g, sb, colibri_block_q4_k, d, (int)offsetof(colibri_block_q4_k, dmin))
#define COLIBRI_BP_D_Q5_K(sc, g, sb, d16, dm16) \
    COLIBRI_BP_D_SUPER(sc, g, sb, colibri_block_q5_k, d, (int)offsetof(colibri_block_q5_k, dmin))
#define COLIBRI_BP_D_Q6_K(sc, g, sb, d16, dm16) COLIBRI_BP_D_SUPER(sc, g, sb, colibri_block_q6_k, d, -1)
#define COLIBRI_BP_D_IQ4_XS(sc, g, sb, d16, dm16) COLIBRI_BP_D_SUPER(sc, g, sb, colibri_block_iq4_xs, d, -1)

/* Group pair p's 64 unsigned bytes of a row: the 256-element types read groups 2p, 2p + 1
 * of super-block p / 4 (QUANTS2(block, p % 4)); the 32-element ones blocks 2p, 2p + 1
 * (the last one alone when the chunk's count is odd: its partner repeats it). */
#define COLIBRI_BP_PAIR_K(WBLOCK, QUANTS2, row, p, ng) QUANTS2(&((const WBLOCK *)(row))[(p) / 4], (p) % 4)
#define COLIBRI_BP_PAIR_32(WBLOCK, QUANTS2, row, p, ng) \
    QUANTS2(&((const WBLOCK *)(row))[2 * (p)], &((const WBLOCK *)(row))[2 * (p) + 1 < (ng) ? 2 * (p) + 1 : 2 * (p)])

/* row_at[r]: row r0 + r of w (rows w_stride bytes apart), the rows past the kr real ones
 * repeating the last. */
static inline void colibri_bp_rows_at(const char *row_at[COLIBRI_BP_ROWS], const void *w, int64_t w_stride, int64_t r0,
                                      int64_t kr) {
    for (int r = 0; r < COLIBRI_BP_ROWS; r++) row_at[r] = (const char *)w + (r0 + (r < kr ? r : kr - 1)) * w_stride;
}

/* Group g's scales of the 16 rows row_at[r] (each at its first group, g0 + g of the row)
 * into scales (a colibri_block_scales), by GROUP_SCALES and D16 (COLIBRI_BP_D_*). The
 * integer scales and mins go straight into their lanes, read long after, not through a
 * copy whose one vector load right after 16 scalar stores stalls on store forwarding; for
 * the 256-element types D16, whose 16-row f16 gathers stall so, runs at a super-block's
 * first group only (such stalls were ~8% of the AMX Q4_K gemm's samples in a prefill). */
#define COLIBRI_BP_FILL_SCALES(scales, g, g0, row_at, WBLOCK, ELEMS, GROUP_SCALES, D16)          \
    do {                                                                                         \
        float *s16[2] = {(float *)&(scales).s[g][0], (float *)&(scales).s[g][1]};   /* [half] lanes */ \
        float *m16[2] = {(float *)&(scales).m[g][0], (float *)&(scales).m[g][1]};                \
        float d16[COLIBRI_BP_ROWS], dm16[COLIBRI_BP_ROWS];        /* [row] */                    \
        const char *sb[COLIBRI_BP_ROWS];   /* sb: [row] the block that holds group g0 + g */     \
        for (int r = 0; r < COLIBRI_BP_ROWS; r++) {                                              \
            colibri_group_scales gs;                                                             \
            GROUP_SCALES((row_at)[r], (g0) + (g), &gs);                                          \
            for (int h = 0; h < 2; h++) s16[h][r] = (float)gs.sc[h], m16[h][r] = (float)gs.m[h]; \
            d16[r] = gs.d, dm16[r] = gs.dmin;                                                    \
            sb[r] = (row_at)[r] + ((g0) + (g)) * 32 / (ELEMS) * (int64_t)sizeof(WBLOCK);         \
        }                                                                                        \
        if ((g) > 0 && ((g0) + (g)) % ((ELEMS) / 32) != 0) {   /* the super-block's D, DMIN again */ \
            (scales).d[g] = (scales).d[(g) - 1], (scales).dm[g] = (scales).dm[(g) - 1];          \
        } else {                                                                                 \
            D16(scales, g, sb, d16, dm16);                                                       \
        }                                                                                        \
        (void)sb, (void)d16, (void)dm16;                                                         \
    } while (0)

#endif /* COLIBRI_X86_AVX512_BLOCK_PANEL_H */
