/*
 * quant.h — the weight-type table of libcolibri (internal) and the scalar
 * references of the GGUF block types Q8_0, Q4_0 and Q4_1 (the other block
 * types are in quant_blocks.h).
 *
 * Block types store 32 consecutive elements of a row as one fixed struct, in
 * exactly the byte layout GGUF / ggml use, so GGUF tensors are used in place:
 * a row of n elements is n/32 blocks back to back (n must be a multiple of 32).
 *
 *   Q8_0  {f16 d; int8 qs[32]}           34 bytes   x[j] = d * qs[j]
 *   Q4_0  {f16 d; uint8 qs[16]}          18 bytes   x[j] = d * (nib[j] - 8)
 *   Q4_1  {f16 d; f16 m; uint8 qs[16]}   20 bytes   x[j] = d * nib[j] + m
 *   Q8_H  {f32 d; i16 k[2]; i16 sum[2];  44 bytes   x[j] = d * k[j/16] * qs[j],
 *          int8 qs[32]}                             sum[h] = k[h] * (sum of qs over half h)
 * where nib[j] is the low nibble of qs[j] for j < 16 and the high nibble of
 * qs[j - 16] for j >= 16. Q8_H (and Q8_S below) are activation-only types
 * (not colibri_dtypes).
 *
 * Dot products run in the integers, as llama.cpp does: the activation row is
 * first quantized per block to the weight type's activation type (Q8_H for
 * Q8_0 / Q4_0 / Q4_1 and Q5_0 / Q5_1 / IQ4_NL weights: a unit d per 32 and a
 * small integer multiplier k per half of 16, so a half whose values are much
 * smaller than the other's keeps up to 8x the resolution, for the price of one
 * integer multiply per half in the dot; its sums carry the offsets and mins
 * those types need); each block's int32 sum of products is exact, then scaled
 * and added in block order (see docs/KERNELS.md).
 */
#ifndef COLIBRI_QUANT_H
#define COLIBRI_QUANT_H

#include <math.h>
#include <stdint.h>

#include "colibri.h"
#include "kernels.h"
#include "quant_blocks.h"

#define COLIBRI_QK 32   /* elements per block of Q8_0 / Q4_0 / Q4_1 / Q8_H, and per dot group of every block type */

/* The activation-only type ids, after the public colibri_dtype values. */
#define COLIBRI_TYPE_Q8_H 16
#define COLIBRI_TYPE_Q8_S 17
#define COLIBRI_TYPE_COUNT 18

typedef struct colibri_block_q8_0 {
    uint16_t d;                  /* f16 scale */
    int8_t qs[COLIBRI_QK];       /* x[j] = d * qs[j] */
} colibri_block_q8_0;

typedef struct colibri_block_q4_0 {
    uint16_t d;                  /* f16 scale */
    uint8_t qs[COLIBRI_QK / 2];  /* element j: low nibble of qs[j], element j+16: high nibble */
} colibri_block_q4_0;

typedef struct colibri_block_q4_1 {
    uint16_t d;                  /* f16 scale */
    uint16_t m;                  /* f16 offset (the block minimum) */
    uint8_t qs[COLIBRI_QK / 2];  /* nibbles as in Q4_0 */
} colibri_block_q4_1;

/* The activations of the 32-element weight types: x[j] ~ d * k[j/16] * qs[j].
 * k[h] in 1..8 is the smallest integer multiplier of the unit d = amax/1016
 * (127 * 8) that covers half h's amax_h: ceil(8 amax_h / amax), so each half
 * is rounded with the step d * k[h], at most 8x finer than one scale for the
 * block would give the smaller half. sum[h] = k[h] * (sum of qs over half h),
 * exact (|sum| <= 8 * 16 * 127), which the offset / min terms need. */
typedef struct colibri_block_q8_h {
    float d;                     /* f32 unit */
    int16_t k[2];                /* per-half multipliers, 1..8 */
    int16_t sum[2];              /* k[h] * sum of qs over half h */
    int8_t qs[COLIBRI_QK];
} colibri_block_q8_h;

/* The activations of the 256-element types and MXFP4: Q8_0's quants (bitwise), its
 * scale in f32 (before Q8_0's f16 rounding), and the exact sums of the two
 * halves' quants, which the offset and min terms of those types' dots need. */
typedef struct colibri_block_q8_s {
    float d;                     /* f32 scale: x[j] ~ d * qs[j] */
    int16_t sum[2];              /* sum of qs[0..15], of qs[16..31] */
    int8_t qs[COLIBRI_QK];
} colibri_block_q8_s;

_Static_assert(sizeof(colibri_block_q8_0) == 34, "Q8_0 block is 34 bytes (GGUF)");
_Static_assert(sizeof(colibri_block_q8_s) == 40, "Q8_S block is 40 bytes");
_Static_assert(sizeof(colibri_block_q4_0) == 18, "Q4_0 block is 18 bytes (GGUF)");
_Static_assert(sizeof(colibri_block_q4_1) == 20, "Q4_1 block is 20 bytes (GGUF)");
_Static_assert(sizeof(colibri_block_q8_h) == 44, "Q8_H block is 44 bytes");

/* ---- the type table ---------------------------------------------------------
 * One entry per type id (colibri_dtype values, then COLIBRI_TYPE_Q8_H, COLIBRI_TYPE_Q8_S).
 * n is always a multiple of block_elems. */
typedef void (*colibri_to_f32_fn)(const void *src, float *dst, int64_t n);    /* src: [n] of the type */
typedef void (*colibri_from_f32_fn)(const float *src, void *dst, int64_t n);  /* dst: [n] of the type */

typedef struct colibri_type_traits {
    const char *name;             /* "F32", "Q4_0", ... as GGUF spells it */
    int64_t block_elems;          /* elements per block: 1 for float types, 32 or 256 for block types */
    int64_t block_bytes;          /* bytes per block */
    int32_t act_type;             /* what vec_dot's activation row is: F32, Q8_H or Q8_S */
    colibri_to_f32_fn to_f32;     /* dequantize / widen a row */
    colibri_from_f32_fn from_f32; /* quantize / narrow a row */
    colibri_dot_fn vec_dot;       /* weight row . activation row (act_type); NULL: not a weight type */
    int16_t f16_at[2];            /* byte offsets in a block of its f16 fields (-1: none), which a
                                     big-endian host byte-swaps; F32 words are swapped whole */
} colibri_type_traits;

/* The entry of a type id; NULL if there is none. */
const colibri_type_traits *colibri_type_traits_of(int32_t type);
/* Whether dtype can be a weight (it has a vec_dot). */
int colibri_type_is_weight(int32_t dtype);
/* Bytes of a row of n elements of the type (n a multiple of its block_elems). */
int64_t colibri_row_bytes(int32_t type, int64_t n);

/* The 4 f16 values a..d (4 rows' block scales) packed in a general register,
 * a lowest: what the SIMD kernels move to a vector to widen all four at once. */
static inline uint64_t colibri_f16x4_u64(uint16_t a, uint16_t b, uint16_t c, uint16_t d) {
    return (uint64_t)a | (uint64_t)b << 16 | (uint64_t)c << 32 | (uint64_t)d << 48;
}

/* ---- quantize (ggml's reference rounding, bit for bit) ----------------------
 * Q8_0 / Q8_S: d = amax/127, qs = roundf(x / d) (halves away from zero).
 * Q8_H, per block of 32 (every operation in f32, in this order):
 *       amax_h = max |x| over half h (NaN ignored), amax = max(amax_0, amax_1),
 *       d = amax / 1016; per half r = (8 * amax_h) / amax,
 *       k_h = r > 1 ? (r < 8 ? ceilf(r) : 8) : 1 (NaN: 1), step = d * k_h,
 *       id = step != 0 ? 1 / step : 0, qs = roundf(x * id) clamped to
 *       [-127, 127] (NaN: 0), sum[h] = k_h * (sum of qs over half h).
 * Q4_0: d = -(the signed element of largest |x|)/8 (first one on ties),
 *       nib = min(15, trunc(x/d + 8.5)): range [-8, 7]·d, the element opposite
 *       the maximum's sign at 8·|d| clamps to 7.
 * Q4_1: d = (max - min)/15, m = min, nib = min(15, trunc((x - min)/d + 0.5)).
 * The scale is rounded to f16 after quantizing, as ggml does. */
void colibri_quantize_row_q8_0(const float *x, void *dst, int64_t n);  /* dst: [n/32] blocks */
void colibri_quantize_row_q4_0(const float *x, void *dst, int64_t n);
void colibri_quantize_row_q4_1(const float *x, void *dst, int64_t n);
void colibri_quantize_row_q8_h(const float *x, void *dst, int64_t n);
void colibri_quantize_row_q8_s(const float *x, void *dst, int64_t n);

/* Q8_H's per-half multiplier of a half with amax_h in a block with amax (the
 * reference's formula above; the SIMD quantizers call it on their exact maxima). */
static inline int16_t colibri_q8_h_mult(float amax_h, float amax) {
    float r = 8.0f * amax_h / amax;
    if (!(r > 1.0f)) return 1;
    return r < 8.0f ? (int16_t)ceilf(r) : 8;
}

/* The half sums of a Q8_S block whose qs are set. */
static inline void colibri_q8_s_sums(colibri_block_q8_s *b) {
    int32_t s0 = 0, s1 = 0;
    for (int j = 0; j < COLIBRI_QK / 2; j++) s0 += b->qs[j], s1 += b->qs[j + COLIBRI_QK / 2];
    b->sum[0] = (int16_t)s0;
    b->sum[1] = (int16_t)s1;
}

/* Defines an ISA's Q8_S quantizer NAME from BLOCK(const float *x, int8_t *qs,
 * int32_t *sum) -> float d, its quantizer of one block of 32 into Q8_0's
 * quants and f32 scale (bitwise the reference's). */
#define COLIBRI_Q8_S_ROW_QUANTIZER(NAME, BLOCK)                                                 \
    void NAME(const float *x, void *dst, int64_t n) {                                          \
        colibri_block_q8_s *b = (colibri_block_q8_s *)dst;   /* b: [n/32] */                   \
        int32_t sum;                                                                           \
        for (int64_t i = 0; i < n / COLIBRI_QK; i++) {                                          \
            b[i].d = BLOCK(x + i * COLIBRI_QK, b[i].qs, &sum);                                  \
            colibri_q8_s_sums(&b[i]);                                                          \
        }                                                                                      \
    }

/* ---- narrow f32 rows (the type table's from_f32 of F32 and F16) -------------
 * dst: [n] of the type; f16 by colibri_f32_to_f16 (round to nearest even). */
void colibri_f32_row_from_f32(const float *src, void *dst, int64_t n);
void colibri_f16_row_from_f32(const float *src, void *dst, int64_t n);

/* ---- dequantize: y[j] = the formula above, exactly, in f32 ------------------ */
void colibri_dequantize_row_q8_0(const void *src, float *y, int64_t n);
void colibri_dequantize_row_q4_0(const void *src, float *y, int64_t n);
void colibri_dequantize_row_q4_1(const void *src, float *y, int64_t n);
void colibri_dequantize_row_q8_h(const void *src, float *y, int64_t n);
void colibri_dequantize_row_q8_s(const void *src, float *y, int64_t n);

/* ---- dot products (quant_dot.c) ---------------------------------------------
 * The integer part of one block: isum = k[0] * I_0 + k[1] * I_1 with I_h the
 * sum over half h of q_w[j] * qs[j], exact in int32 (|isum| < 2^24; q_w: qs
 * for Q8_0, nib - 8 for Q4_0, nib for Q4_1). */
int32_t colibri_block_dot_q8_0(const colibri_block_q8_0 *w, const colibri_block_q8_h *a);
int32_t colibri_block_dot_q4_0(const colibri_block_q4_0 *w, const colibri_block_q8_h *a);
int32_t colibri_block_dot_q4_1(const colibri_block_q4_1 *w, const colibri_block_q8_h *a);
/* Rows of n elements against Q8_H activations, block after block from 0:
 *   Q8_0, Q4_0: acc += (float)isum * (f16(d_w) * d_a)
 *   Q4_1:       acc += (float)isum * (f16(d_w) * d_a) + f16(m_w) * (d_a * (float)(sum[0] + sum[1]))
 * w: [n/32] weight blocks, a: [n/32] activation blocks. */
float colibri_vec_dot_q8_0_q8_h(const void *w, const void *a, int64_t n);
float colibri_vec_dot_q4_0_q8_h(const void *w, const void *a, int64_t n);
float colibri_vec_dot_q4_1_q8_h(const void *w, const void *a, int64_t n);

#endif /* COLIBRI_QUANT_H */
