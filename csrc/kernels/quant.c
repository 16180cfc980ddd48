/*
 * quant.c — the scalar references of the block types (quantize and
 * dequantize, ggml's reference rounding bit for bit), the widening / narrowing
 * of the float types, and the one table of per-type functions that the engine
 * dispatches through (matmul, embedding rows, 1-D weights).
 */
#include <math.h>
#include <string.h>

#include "quant.h"

/* ---- Q8_0, Q8_S and Q8_H ----------------------------------------------------------- */

/* roundf(v) (halves away from zero) as int8, clamped to [-127, 127], NaN → 0,
 * without a libm call: inside (-127.5, 127.5) v - trunc(v) is exact, so
 * comparing that fraction with ±0.5 rounds exactly as roundf does. */
static int8_t colibri_round_i8(float v) {
    if (!(v > -127.5f && v < 127.5f)) return v >= 127.0f ? 127 : (v <= -127.0f ? -127 : 0);
    int32_t t = (int32_t)v;         /* truncation toward zero */
    float frac = v - (float)t;      /* exact */
    if (frac >= 0.5f) t++;
    else if (frac <= -0.5f) t--;
    return (int8_t)t;
}

/* Quantizes one block of 32 to qs; returns the f32 scale d = amax / 127. */
static float colibri_q8_block(const float *x, int8_t *qs) {
    float amax = 0.0f;
    for (int j = 0; j < COLIBRI_QK; j++) {   /* fmaxf(amax, |x|) without the call: NaN keeps amax */
        float ax = fabsf(x[j]);
        amax = ax > amax ? ax : amax;
    }
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < COLIBRI_QK; j++) qs[j] = colibri_round_i8(x[j] * id);
    return d;
}

void colibri_quantize_row_q8_0(const float *x, void *dst, int64_t n) {
    colibri_block_q8_0 *b = (colibri_block_q8_0 *)dst;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        b[i].d = colibri_f32_to_f16(colibri_q8_block(x + i * COLIBRI_QK, b[i].qs));
    }
}

/* Q8_H (quant.h): the halves' maxima, the unit d and the multipliers k, then
 * each half rounded with its step d * k. */
static void colibri_q8_h_block(const float *x, colibri_block_q8_h *b) {
    float amax_h[2] = {0.0f, 0.0f};
    for (int j = 0; j < COLIBRI_QK; j++) {   /* NaN keeps the max, as in colibri_q8_block */
        float ax = fabsf(x[j]), *m = &amax_h[j / 16];
        *m = ax > *m ? ax : *m;
    }
    float amax = amax_h[0] > amax_h[1] ? amax_h[0] : amax_h[1];
    b->d = amax / 1016.0f;
    for (int h = 0; h < 2; h++) {
        int16_t k = colibri_q8_h_mult(amax_h[h], amax);
        float step = b->d * (float)k;
        float id = step != 0.0f ? 1.0f / step : 0.0f;
        int32_t sum = 0;
        for (int j = 16 * h; j < 16 * h + 16; j++) {
            b->qs[j] = colibri_round_i8(x[j] * id);
            sum += b->qs[j];
        }
        b->k[h] = k;
        b->sum[h] = (int16_t)(k * sum);
    }
}

void colibri_quantize_row_q8_h(const float *x, void *dst, int64_t n) {
    colibri_block_q8_h *b = (colibri_block_q8_h *)dst;   /* b: [n/32] */
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) colibri_q8_h_block(x + i * COLIBRI_QK, &b[i]);
}

void colibri_quantize_row_q8_s(const float *x, void *dst, int64_t n) {
    colibri_block_q8_s *b = (colibri_block_q8_s *)dst;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        b[i].d = colibri_q8_block(x + i * COLIBRI_QK, b[i].qs);
        colibri_q8_s_sums(&b[i]);
    }
}

void colibri_dequantize_row_q8_s(const void *src, float *y, int64_t n) {
    const colibri_block_q8_s *b = (const colibri_block_q8_s *)src;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        for (int j = 0; j < COLIBRI_QK; j++) y[i * COLIBRI_QK + j] = b[i].d * (float)b[i].qs[j];
    }
}

void colibri_dequantize_row_q8_0(const void *src, float *y, int64_t n) {
    const colibri_block_q8_0 *b = (const colibri_block_q8_0 *)src;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        float d = colibri_f16_to_f32(b[i].d);
        for (int j = 0; j < COLIBRI_QK; j++) y[i * COLIBRI_QK + j] = d * (float)b[i].qs[j];
    }
}

void colibri_dequantize_row_q8_h(const void *src, float *y, int64_t n) {
    const colibri_block_q8_h *b = (const colibri_block_q8_h *)src;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        for (int j = 0; j < COLIBRI_QK; j++) {
            y[i * COLIBRI_QK + j] = b[i].d * (float)b[i].k[j / 16] * (float)b[i].qs[j];
        }
    }
}

/* ---- Q4_0 and Q4_1 ------------------------------------------------------------ */

/* nib = min(15, trunc(v)) for v >= 0 (ggml's (int8_t) cast, then MIN); the
 * 0 for v <= 0 or NaN only keeps the conversion defined for non-finite input. */
static uint8_t colibri_nibble(float v) {
    if (v > 0.0f) return v < 15.0f ? (uint8_t)(int)v : 15;
    return 0;
}

void colibri_quantize_row_q4_0(const float *x, void *dst, int64_t n) {
    colibri_block_q4_0 *b = (colibri_block_q4_0 *)dst;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        const float *xb = x + i * COLIBRI_QK;   /* xb: [32] */
        float amax = 0.0f, max = 0.0f;          /* max: the signed element of largest |x| */
        for (int j = 0; j < COLIBRI_QK; j++) {
            if (amax < fabsf(xb[j])) {
                amax = fabsf(xb[j]);
                max = xb[j];
            }
        }
        float d = max / -8.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = colibri_f32_to_f16(d);
        for (int j = 0; j < COLIBRI_QK / 2; j++) {
            uint8_t lo = colibri_nibble(xb[j] * id + 8.5f);
            uint8_t hi = colibri_nibble(xb[j + COLIBRI_QK / 2] * id + 8.5f);
            b[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

void colibri_quantize_row_q4_1(const float *x, void *dst, int64_t n) {
    colibri_block_q4_1 *b = (colibri_block_q4_1 *)dst;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        const float *xb = x + i * COLIBRI_QK;   /* xb: [32] */
        float min = xb[0], max = xb[0];
        for (int j = 1; j < COLIBRI_QK; j++) {
            if (xb[j] < min) min = xb[j];
            if (xb[j] > max) max = xb[j];
        }
        float d = (max - min) / 15.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = colibri_f32_to_f16(d);
        b[i].m = colibri_f32_to_f16(min);
        for (int j = 0; j < COLIBRI_QK / 2; j++) {
            uint8_t lo = colibri_nibble((xb[j] - min) * id + 0.5f);
            uint8_t hi = colibri_nibble((xb[j + COLIBRI_QK / 2] - min) * id + 0.5f);
            b[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

void colibri_dequantize_row_q4_0(const void *src, float *y, int64_t n) {
    const colibri_block_q4_0 *b = (const colibri_block_q4_0 *)src;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        float d = colibri_f16_to_f32(b[i].d);
        float *yb = y + i * COLIBRI_QK;   /* yb: [32] */
        for (int j = 0; j < COLIBRI_QK / 2; j++) {
            yb[j] = d * (float)((b[i].qs[j] & 0x0f) - 8);
            yb[j + COLIBRI_QK / 2] = d * (float)((b[i].qs[j] >> 4) - 8);
        }
    }
}

void colibri_dequantize_row_q4_1(const void *src, float *y, int64_t n) {
    const colibri_block_q4_1 *b = (const colibri_block_q4_1 *)src;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        float d = colibri_f16_to_f32(b[i].d), m = colibri_f16_to_f32(b[i].m);
        float *yb = y + i * COLIBRI_QK;   /* yb: [32] */
        for (int j = 0; j < COLIBRI_QK / 2; j++) {
            yb[j] = d * (float)(b[i].qs[j] & 0x0f) + m;
            yb[j + COLIBRI_QK / 2] = d * (float)(b[i].qs[j] >> 4) + m;
        }
    }
}

/* ---- float types: widen / narrow a row ----------------------------------------- */

static void colibri_f32_row_to_f32(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void colibri_f32_row_from_f32(const float *src, void *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static void colibri_f16_row_to_f32(const void *src, float *dst, int64_t n) {
    const uint16_t *s = (const uint16_t *)src;
    for (int64_t i = 0; i < n; i++) dst[i] = colibri_f16_to_f32(s[i]);
}

void colibri_f16_row_from_f32(const float *src, void *dst, int64_t n) {
    uint16_t *d = (uint16_t *)dst;
    for (int64_t i = 0; i < n; i++) d[i] = colibri_f32_to_f16(src[i]);
}

static void colibri_bf16_row_to_f32(const void *src, float *dst, int64_t n) {
    const uint16_t *s = (const uint16_t *)src;
    for (int64_t i = 0; i < n; i++) dst[i] = colibri_bf16_to_f32(s[i]);
}

static void colibri_bf16_row_from_f32(const float *src, void *dst, int64_t n) {
    uint16_t *d = (uint16_t *)dst;
    for (int64_t i = 0; i < n; i++) d[i] = colibri_f32_to_bf16(src[i]);
}

/* ---- the table -------------------------------------------------------------------- */

#define COLIBRI_NO_F16 {-1, -1}
/* a quant_blocks.h type; F16_A, F16_B: its f16 fields' offsets (-1: none) */
#define COLIBRI_BLOCK_ENTRY(NAME, T, ELEMS, ACT, F16_A, F16_B) \
    {NAME, ELEMS, sizeof(colibri_block_##T), ACT, colibri_dequantize_row_##T, colibri_quantize_row_##T, \
     colibri_vec_dot_##T, {F16_A, F16_B}}

static const colibri_type_traits colibri_types[COLIBRI_TYPE_COUNT] = {
    [COLIBRI_DTYPE_F32] = {"F32", 1, 4, COLIBRI_DTYPE_F32, colibri_f32_row_to_f32,
                           colibri_f32_row_from_f32, colibri_dot_f32, COLIBRI_NO_F16},
    [COLIBRI_DTYPE_F16] = {"F16", 1, 2, COLIBRI_DTYPE_F32, colibri_f16_row_to_f32,
                           colibri_f16_row_from_f32, colibri_dot_f16, {0, -1}},
    [COLIBRI_DTYPE_BF16] = {"BF16", 1, 2, COLIBRI_DTYPE_F32, colibri_bf16_row_to_f32,
                            colibri_bf16_row_from_f32, colibri_dot_bf16, {0, -1}},
    [COLIBRI_DTYPE_Q8_0] = {"Q8_0", COLIBRI_QK, sizeof(colibri_block_q8_0), COLIBRI_TYPE_Q8_H,
                            colibri_dequantize_row_q8_0, colibri_quantize_row_q8_0,
                            colibri_vec_dot_q8_0_q8_h, {0, -1}},
    [COLIBRI_DTYPE_Q4_0] = {"Q4_0", COLIBRI_QK, sizeof(colibri_block_q4_0), COLIBRI_TYPE_Q8_H,
                            colibri_dequantize_row_q4_0, colibri_quantize_row_q4_0,
                            colibri_vec_dot_q4_0_q8_h, {0, -1}},
    [COLIBRI_DTYPE_Q4_1] = {"Q4_1", COLIBRI_QK, sizeof(colibri_block_q4_1), COLIBRI_TYPE_Q8_H,
                            colibri_dequantize_row_q4_1, colibri_quantize_row_q4_1,
                            colibri_vec_dot_q4_1_q8_h, {0, 2}},
    [COLIBRI_DTYPE_Q5_0] = COLIBRI_BLOCK_ENTRY("Q5_0", q5_0, COLIBRI_QK, COLIBRI_TYPE_Q8_H, 0, -1),
    [COLIBRI_DTYPE_Q5_1] = COLIBRI_BLOCK_ENTRY("Q5_1", q5_1, COLIBRI_QK, COLIBRI_TYPE_Q8_H, 0, 2),
    [COLIBRI_DTYPE_Q2_K] = COLIBRI_BLOCK_ENTRY("Q2_K", q2_k, COLIBRI_QK_K, COLIBRI_TYPE_Q8_S, 80, 82),
    [COLIBRI_DTYPE_Q3_K] = COLIBRI_BLOCK_ENTRY("Q3_K", q3_k, COLIBRI_QK_K, COLIBRI_TYPE_Q8_S, 108, -1),
    [COLIBRI_DTYPE_Q4_K] = COLIBRI_BLOCK_ENTRY("Q4_K", q4_k, COLIBRI_QK_K, COLIBRI_TYPE_Q8_S, 0, 2),
    [COLIBRI_DTYPE_Q5_K] = COLIBRI_BLOCK_ENTRY("Q5_K", q5_k, COLIBRI_QK_K, COLIBRI_TYPE_Q8_S, 0, 2),
    [COLIBRI_DTYPE_Q6_K] = COLIBRI_BLOCK_ENTRY("Q6_K", q6_k, COLIBRI_QK_K, COLIBRI_TYPE_Q8_S, 208, -1),
    [COLIBRI_DTYPE_IQ4_NL] = COLIBRI_BLOCK_ENTRY("IQ4_NL", iq4_nl, COLIBRI_QK, COLIBRI_TYPE_Q8_H, 0, -1),
    [COLIBRI_DTYPE_IQ4_XS] = COLIBRI_BLOCK_ENTRY("IQ4_XS", iq4_xs, COLIBRI_QK_K, COLIBRI_TYPE_Q8_S, 0, -1),
    [COLIBRI_DTYPE_MXFP4] = COLIBRI_BLOCK_ENTRY("MXFP4", mxfp4, COLIBRI_QK, COLIBRI_TYPE_Q8_S, -1, -1),
    [COLIBRI_TYPE_Q8_H] = {"Q8_H", COLIBRI_QK, sizeof(colibri_block_q8_h), COLIBRI_TYPE_Q8_H,
                           colibri_dequantize_row_q8_h, colibri_quantize_row_q8_h, NULL, {-1, -1}},
    [COLIBRI_TYPE_Q8_S] = {"Q8_S", COLIBRI_QK, sizeof(colibri_block_q8_s), COLIBRI_TYPE_Q8_S,
                           colibri_dequantize_row_q8_s, colibri_quantize_row_q8_s, NULL, {-1, -1}},
};

const colibri_type_traits *colibri_type_traits_of(int32_t type) {
    if (type < 0 || type >= COLIBRI_TYPE_COUNT) return NULL;
    return &colibri_types[type];
}

int colibri_type_is_weight(int32_t dtype) {
    const colibri_type_traits *t = colibri_type_traits_of(dtype);
    return t != NULL && t->vec_dot != NULL;
}

int64_t colibri_row_bytes(int32_t type, int64_t n) {
    const colibri_type_traits *t = colibri_type_traits_of(type);
    return n / t->block_elems * t->block_bytes;
}

void colibri_row_to_f32(const void *src, int32_t dtype, int64_t offset, int64_t n, float *dst) {
    const colibri_type_traits *t = colibri_type_traits_of(dtype);
    t->to_f32((const char *)src + colibri_row_bytes(dtype, offset), dst, n);
}
