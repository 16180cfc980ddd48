/*
 * x86_avx2/exact.c — exact mode's kernels with AVX2 (+F16C) for every block
 * type (isa.h): dequantize, bitwise the type's to_f32, and dot_rows_exact,
 * the F32 dot of each dequantized row with f32 activations, bitwise the F32
 * dot_rows on the dequantized row (colibri_dot_f32's order), without writing
 * the row anywhere. The avx2, avx_vnni and avx512 tables share them (the
 * avx512 table's F32 dot_rows is AVX2's too).
 *
 * Values. A group is 32 elements (one block of the 32-element types, a
 * sub-block or two of the 256-element ones). Its 32 integer quants q_j come
 * as signed bytes (blocks_unpack.h's unpacking, the offset C subtracted;
 * kv[q] / fp4[q] by table), are widened to int32 and converted to f32
 * (exact), then multiplied by the f32 scale of their 16-element half and
 * minus (K types with mins) or plus (Q4_1, Q5_1) its f32 min term: one
 * rounding each, no FMA, as the references in quant.c, quant_blocks.c and
 * quant_kquants.c compute y = d * q [+ m] and y = dl * q - ml. The scales
 * are the references' too: d and dmin from f16 (vcvtph2ps: exact), each
 * sub-block's dl = d * (float)sc and ml = dmin * (float)m rounded to f32
 * first, eight or sixteen to a vector (the same single products).
 *
 * Dot. 4 rows at a time; per group, x's 32 values in 4 vectors of 8, and per
 * row its 4 value vectors each multiplied by x's and added to the row's one
 * 8-lane accumulator in element order: exactly the reference's acc[0..7]
 * (dot.c) and x86_avx2/dot_float.c's arithmetic, combined the same way, and
 * the empty tail's 0 added last (the rows are whole blocks, so multiples of
 * 8). The quantized rows are read once, from memory, as the block kernels
 * read them (the group ahead prefetched, isa.h).
 */
#include <immintrin.h>

#include "../isa.h"
#include "blocks_quants.h"
#include "float_load.h"

/* ---- values of a group ------------------------------------------------------------------ */

enum { COLIBRI_EXACT_SCALE = 0, COLIBRI_EXACT_SUB_MIN = 1, COLIBRI_EXACT_ADD_MIN = 2 };

/* A block's f32 scales and min terms: by half (16 scales per block: Q2_K, Q3_K, Q6_K),
 * by group (8: Q4_K, Q5_K, IQ4_XS) or one (the 32-element types); m unused where
 * the type has none. */
typedef struct colibri_exact_scales {
    float d[16], m[16];
} colibri_exact_scales;

/* The scale entry of half h (0, 1) of group s: HALVES 2 by half, 1 by group, 0 one. */
#define COLIBRI_EXACT_AT(HALVES, s, h) ((HALVES) == 2 ? 2 * (s) + (h) : (HALVES) == 1 ? (s) : 0)

/* Elements 8k..8k+7 (k constant) of the group whose quants are q: (float)q * d[at]
 * [-/+ m[at]], at the scale entry of their half. */
static inline __attribute__((always_inline)) __m256 colibri_exact_chunk(__m256i q, const int k,
                                                                        const colibri_exact_scales *sc, int at,
                                                                        const int mode) {
    __m128i half = k < 2 ? _mm256_castsi256_si128(q) : _mm256_extracti128_si256(q, 1);
    if (k % 2) half = _mm_srli_si128(half, 8);   /* a byte shift takes an immediate: k is one */
    __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(half)), _mm256_broadcast_ss(&sc->d[at]));
    if (mode == COLIBRI_EXACT_SUB_MIN) v = _mm256_sub_ps(v, _mm256_broadcast_ss(&sc->m[at]));
    if (mode == COLIBRI_EXACT_ADD_MIN) v = _mm256_add_ps(v, _mm256_broadcast_ss(&sc->m[at]));
    return v;
}

/* out[0..7] = (float)s8[k] * d for the 8 low signed bytes of s8 (one product each). */
static inline void colibri_exact_scales8(__m128i s8, float d, float out[8]) {
    _mm256_storeu_ps(out, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s8)), _mm256_set1_ps(d)));
}

/* The same for 16 signed bytes. */
static inline void colibri_exact_scales16(__m128i s16, float d, float out[16]) {
    colibri_exact_scales8(s16, d, out);
    colibri_exact_scales8(_mm_srli_si128(s16, 8), d, out + 8);
}

/* ---- each type: its scales (SCALES(b, sc)) and group s's signed quants (QUANTS(b, s)) ---- */

#define COLIBRI_SUB8(v, c) _mm256_sub_epi8((v), _mm256_set1_epi8(c))
#define COLIBRI_FP4_I8 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12   /* COLIBRI_FP4_VALUES */

/* 32-element types: d (and m) from the block. */
#define COLIBRI_EXACT_D(b, sc) ((sc)->d[0] = _cvtsh_ss((b)->d))
#define COLIBRI_EXACT_DM(b, sc) ((sc)->d[0] = _cvtsh_ss((b)->d), (sc)->m[0] = _cvtsh_ss((b)->m))
#define COLIBRI_EXACT_E8M0(b, sc) ((sc)->d[0] = colibri_e8m0_half((b)->e))

#define COLIBRI_Q8_0_Q(b, s) colibri_load32((const uint8_t *)(b)->qs)
#define COLIBRI_Q4_0_Q(b, s) COLIBRI_SUB8(colibri_nibbles32((b)->qs), 8)
#define COLIBRI_Q4_1_Q(b, s) colibri_nibbles32((b)->qs)
#define COLIBRI_Q5_0_Q(b, s) COLIBRI_SUB8(COLIBRI_Q5_QUANTS(b), 16)
#define COLIBRI_Q5_1_Q(b, s) COLIBRI_Q5_QUANTS(b)
#define COLIBRI_IQ4_NL_Q(b, s) COLIBRI_IQ4_NL_QUANTS(b)
#define COLIBRI_MXFP4_Q(b, s) \
    _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_setr_epi8(COLIBRI_FP4_I8)), colibri_nibbles32((b)->qs))

/* 256-element types. */
static inline void colibri_exact_q2_k_scales(const colibri_block_q2_k *b, colibri_exact_scales *sc) {
    __m128i x = _mm_loadu_si128((const __m128i *)b->scales), low = _mm_set1_epi8(0x0f);
    colibri_exact_scales16(_mm_and_si128(x, low), _cvtsh_ss(b->d), sc->d);
    colibri_exact_scales16(_mm_and_si128(_mm_srli_epi16(x, 4), low), _cvtsh_ss(b->dmin), sc->m);
}

static inline void colibri_exact_q3_k_scales(const colibri_block_q3_k *b, colibri_exact_scales *sc) {
    colibri_exact_scales16(colibri_q3_k_scales16(b), _cvtsh_ss(b->d), sc->d);   /* sc - 32 */
}

static inline void colibri_exact_q6_k_scales(const colibri_block_q6_k *b, colibri_exact_scales *sc) {
    colibri_exact_scales16(colibri_q6_k_scales16(b), _cvtsh_ss(b->d), sc->d);
}

/* Q4_K / Q5_K: scales of the 8 sub-blocks in bytes 0..7, mins in 8..15 (colibri_k_scale_min8). */
#define COLIBRI_EXACT_K32_SCALES(b, sc)                                                  \
    do {                                                                                 \
        __m128i sm_ = colibri_k_scale_min8((b)->scales);                                 \
        colibri_exact_scales8(sm_, _cvtsh_ss((b)->d), (sc)->d);                          \
        colibri_exact_scales8(_mm_srli_si128(sm_, 8), _cvtsh_ss((b)->dmin), (sc)->m);    \
    } while (0)

static inline void colibri_exact_iq4_xs_scales(const colibri_block_iq4_xs *b, colibri_exact_scales *sc) {
    __m128i ls = _mm_cvtsi64_si128((long long)colibri_iq4_xs_scale_bytes(b));
    colibri_exact_scales8(_mm_sub_epi8(ls, _mm_set1_epi8(32)), _cvtsh_ss(b->d), sc->d);
}

#define COLIBRI_Q2_K_S(b, sc) colibri_exact_q2_k_scales((b), (sc))
#define COLIBRI_Q3_K_S(b, sc) colibri_exact_q3_k_scales((b), (sc))
#define COLIBRI_Q6_K_S(b, sc) colibri_exact_q6_k_scales((b), (sc))
#define COLIBRI_IQ4_XS_S(b, sc) colibri_exact_iq4_xs_scales((b), (sc))
#define COLIBRI_Q2_K_Q(b, s) colibri_q2_k_quants((b), (s))
#define COLIBRI_Q3_K_Q(b, s) COLIBRI_SUB8(colibri_q3_k_quants((b), (s)), 4)
#define COLIBRI_Q4_K_Q(b, s) colibri_q4_k_quants((b), (s))
#define COLIBRI_Q5_K_Q(b, s) colibri_q5_k_quants((b), (s))
#define COLIBRI_Q6_K_Q(b, s) COLIBRI_SUB8(colibri_q6_k_quants((b), (s)), 32)
#define COLIBRI_IQ4_XS_Q(b, s) colibri_iq4_xs_quants((b), (s))

/* ---- the kernels ------------------------------------------------------------------------- */

/* Chunk k (elements 8k..8k+7, scale entry at) of the group, for the 4 rows (q0..q3, sc0..sc3,
 * acc0..acc3, xg in scope): each row's values times x's, added to its accumulator. Chunk
 * by chunk, so that few vectors are live; each row still takes its chunks in element order. */
#define COLIBRI_EXACT_STEP(k, at, MODE)                                                                \
    do {                                                                                           \
        __m256 xk = _mm256_loadu_ps(xg + 8 * (k));                                                 \
        acc0 = _mm256_add_ps(acc0, _mm256_mul_ps(colibri_exact_chunk(q0, (k), &sc0, (at), MODE), xk)); \
        acc1 = _mm256_add_ps(acc1, _mm256_mul_ps(colibri_exact_chunk(q1, (k), &sc1, (at), MODE), xk)); \
        acc2 = _mm256_add_ps(acc2, _mm256_mul_ps(colibri_exact_chunk(q2, (k), &sc2, (at), MODE), xk)); \
        acc3 = _mm256_add_ps(acc3, _mm256_mul_ps(colibri_exact_chunk(q3, (k), &sc3, (at), MODE), xk)); \
    } while (0)

/* colibri_dequantize_T_avx2 and colibri_dot_rows_exact_T_avx2 of the type WBLOCK of ELEMS
 * elements a block: scales by SCALES (HALVES: COLIBRI_EXACT_AT), quants by QUANTS, MODE. */
#define COLIBRI_EXACT_KERNELS(T, WBLOCK, ELEMS, SCALES, HALVES, QUANTS, MODE)                                   \
    void colibri_dequantize_##T##_avx2(const void *src, float *y, int64_t n) {                                  \
        const WBLOCK *blk = (const WBLOCK *)src;   /* blk: [n / ELEMS] */                                      \
        for (int64_t i = 0; i < n / (ELEMS); i++) {                                                             \
            colibri_exact_scales sc;                                                                            \
            SCALES(&blk[i], &sc);                                                                               \
            _Pragma("GCC unroll 8")   /* constant s: shifts and table offsets */                                \
            for (int s = 0; s < (ELEMS) / 32; s++) {                                                            \
                __m256i q = QUANTS(&blk[i], s);                                                                 \
                int lo = COLIBRI_EXACT_AT(HALVES, s, 0), hi = COLIBRI_EXACT_AT(HALVES, s, 1);                   \
                float *yg = y + i * (ELEMS) + 32 * s;   /* yg: [32] */                                         \
                _mm256_storeu_ps(yg, colibri_exact_chunk(q, 0, &sc, lo, MODE));                                 \
                _mm256_storeu_ps(yg + 8, colibri_exact_chunk(q, 1, &sc, lo, MODE));                             \
                _mm256_storeu_ps(yg + 16, colibri_exact_chunk(q, 2, &sc, hi, MODE));                            \
                _mm256_storeu_ps(yg + 24, colibri_exact_chunk(q, 3, &sc, hi, MODE));                            \
            }                                                                                                   \
        }                                                                                                       \
    }                                                                                                           \
    static void colibri_dot4_exact_##T##_avx2(const char *const w[4], const char *ahead, const void *xv,        \
                                              int64_t n, float out[4]) {                                        \
        const float *x = (const float *)xv;   /* x: [n] */                                                     \
        const WBLOCK *w0 = (const WBLOCK *)w[0], *w1 = (const WBLOCK *)w[1];                                    \
        const WBLOCK *w2 = (const WBLOCK *)w[2], *w3 = (const WBLOCK *)w[3];                                    \
        __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;   /* the rows' acc[0..7] */  \
        for (int64_t i = 0; i < n / (ELEMS); i++) {                                                             \
            if ((ELEMS) == COLIBRI_QK_K || i % 2 == 0) {                                                        \
                COLIBRI_PREFETCH_SPAN(ahead + 4 * i * (int64_t)sizeof(WBLOCK),                                  \
                                      ((ELEMS) == COLIBRI_QK_K ? 4 : 8) * sizeof(WBLOCK));                      \
            }                                                                                                   \
            colibri_exact_scales sc0, sc1, sc2, sc3;                                                            \
            SCALES(&w0[i], &sc0); SCALES(&w1[i], &sc1); SCALES(&w2[i], &sc2); SCALES(&w3[i], &sc3);             \
            _Pragma("GCC unroll 8")                                                                             \
            for (int s = 0; s < (ELEMS) / 32; s++) {                                                            \
                const float *xg = x + i * (ELEMS) + 32 * s;   /* xg: [32] */                                   \
                int lo = COLIBRI_EXACT_AT(HALVES, s, 0), hi = COLIBRI_EXACT_AT(HALVES, s, 1);                   \
                __m256i q0 = QUANTS(&w0[i], s), q1 = QUANTS(&w1[i], s);                                         \
                __m256i q2 = QUANTS(&w2[i], s), q3 = QUANTS(&w3[i], s);                                         \
                COLIBRI_EXACT_STEP(0, lo, MODE);                                                                 \
                COLIBRI_EXACT_STEP(1, lo, MODE);                                                                 \
                COLIBRI_EXACT_STEP(2, hi, MODE);                                                                 \
                COLIBRI_EXACT_STEP(3, hi, MODE);                                                                 \
            }                                                                                                   \
        }                                                                                                       \
        colibri_combine4_avx2(acc0, acc1, acc2, acc3, out);                                                     \
        for (int r = 0; r < 4; r++) out[r] += 0.0f;   /* the reference's empty tail (-0 + 0 is +0) */          \
    }                                                                                                           \
    COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_exact_##T##_avx2, colibri_dot4_exact_##T##_avx2)

COLIBRI_EXACT_KERNELS(q8_0, colibri_block_q8_0, COLIBRI_QK, COLIBRI_EXACT_D, 0, COLIBRI_Q8_0_Q, COLIBRI_EXACT_SCALE)
COLIBRI_EXACT_KERNELS(q4_0, colibri_block_q4_0, COLIBRI_QK, COLIBRI_EXACT_D, 0, COLIBRI_Q4_0_Q, COLIBRI_EXACT_SCALE)
COLIBRI_EXACT_KERNELS(q4_1, colibri_block_q4_1, COLIBRI_QK, COLIBRI_EXACT_DM, 0, COLIBRI_Q4_1_Q, COLIBRI_EXACT_ADD_MIN)
COLIBRI_EXACT_KERNELS(q5_0, colibri_block_q5_0, COLIBRI_QK, COLIBRI_EXACT_D, 0, COLIBRI_Q5_0_Q, COLIBRI_EXACT_SCALE)
COLIBRI_EXACT_KERNELS(q5_1, colibri_block_q5_1, COLIBRI_QK, COLIBRI_EXACT_DM, 0, COLIBRI_Q5_1_Q, COLIBRI_EXACT_ADD_MIN)
COLIBRI_EXACT_KERNELS(iq4_nl, colibri_block_iq4_nl, COLIBRI_QK, COLIBRI_EXACT_D, 0, COLIBRI_IQ4_NL_Q,
                      COLIBRI_EXACT_SCALE)
COLIBRI_EXACT_KERNELS(mxfp4, colibri_block_mxfp4, COLIBRI_QK, COLIBRI_EXACT_E8M0, 0, COLIBRI_MXFP4_Q,
                      COLIBRI_EXACT_SCALE)
COLIBRI_EXACT_KERNELS(q2_k, colibri_block_q2_k, COLIBRI_QK_K, COLIBRI_Q2_K_S, 2, COLIBRI_Q2_K_Q, COLIBRI_EXACT_SUB_MIN)
COLIBRI_EXACT_KERNELS(q3_k, colibri_block_q3_k, COLIBRI_QK_K, COLIBRI_Q3_K_S, 2, COLIBRI_Q3_K_Q, COLIBRI_EXACT_SCALE)
COLIBRI_EXACT_KERNELS(q4_k, colibri_block_q4_k, COLIBRI_QK_K, COLIBRI_EXACT_K32_SCALES, 1, COLIBRI_Q4_K_Q,
                      COLIBRI_EXACT_SUB_MIN)
COLIBRI_EXACT_KERNELS(q5_k, colibri_block_q5_k, COLIBRI_QK_K, COLIBRI_EXACT_K32_SCALES, 1, COLIBRI_Q5_K_Q,
                      COLIBRI_EXACT_SUB_MIN)
COLIBRI_EXACT_KERNELS(q6_k, colibri_block_q6_k, COLIBRI_QK_K, COLIBRI_Q6_K_S, 2, COLIBRI_Q6_K_Q, COLIBRI_EXACT_SCALE)
COLIBRI_EXACT_KERNELS(iq4_xs, colibri_block_iq4_xs, COLIBRI_QK_K, COLIBRI_IQ4_XS_S, 1, COLIBRI_IQ4_XS_Q,
                      COLIBRI_EXACT_SCALE)
