/*
 * quant_blocks.c — the scalar references of Q5_0, Q5_1, IQ4_NL, MXFP4 and
 * IQ4_XS (quant_blocks.h): dequantize (bitwise what ggml and gguf-py compute)
 * and quantize.
 *
 * Quantizers: Q5_0 / Q5_1 round as ggml's reference functions do (Q4_0 /
 * Q4_1's recipe with 32 levels); MXFP4 takes the OCP recipe (shared exponent
 * floor(log2 amax) - 2, each value to the nearest E2M1 level); IQ4_NL and
 * IQ4_XS search their scales (quant_search.h).
 */
#include <math.h>
#include <string.h>

#include "quant.h"
#include "quant_search.h"

const int8_t colibri_iq4_values[16] = COLIBRI_IQ4_VALUES;
const int8_t colibri_fp4_values[16] = COLIBRI_FP4_VALUES;

/* min(hi, trunc(v)) for v >= 0, 0 for v <= 0 or NaN (ggml's (int8_t) cast then MIN,
 * kept defined for non-finite input). */
static uint8_t colibri_trunc_level(float v, int hi) {
    if (v > 0.0f) return v < (float)hi ? (uint8_t)(int)v : (uint8_t)hi;
    return 0;
}

/* Packs 32 5-bit quants into qh / qs (quant_blocks.h's layout). */
static void colibri_q5_pack(const uint8_t q[32], uint8_t qh[4], uint8_t qs[16]) {
    memset(qh, 0, 4);
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)((q[j] & 0x0f) | (q[j + 16] & 0x0f) << 4);
    for (int j = 0; j < 32; j++) qh[j / 8] |= (uint8_t)(((q[j] >> 4) & 1) << (j % 8));
}

/* Packs 32 nibbles: element j < 16 low nibble of qs[j], j + 16 high. */
static void colibri_nibbles_pack(const uint8_t q[32], uint8_t qs[16]) {
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(q[j] | q[j + 16] << 4);
}

static uint8_t colibri_nibble_at(const uint8_t qs[16], int j) {
    return j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4;
}

/* ---- Q5_0 ----------------------------------------------------------------------------- */

void colibri_quantize_row_q5_0(const float *x, void *dst, int64_t n) {
    colibri_block_q5_0 *b = (colibri_block_q5_0 *)dst;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        const float *xb = x + i * COLIBRI_QK;   /* xb: [32] */
        float amax = 0.0f, max = 0.0f;          /* max: the signed element of largest |x| */
        for (int j = 0; j < COLIBRI_QK; j++) {
            if (amax < fabsf(xb[j])) amax = fabsf(xb[j]), max = xb[j];
        }
        float d = max / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        uint8_t q[COLIBRI_QK];
        for (int j = 0; j < COLIBRI_QK; j++) q[j] = colibri_trunc_level(xb[j] * id + 16.5f, 31);
        b[i].d = colibri_f32_to_f16(d);
        colibri_q5_pack(q, b[i].qh, b[i].qs);
    }
}

void colibri_dequantize_row_q5_0(const void *src, float *y, int64_t n) {
    const colibri_block_q5_0 *b = (const colibri_block_q5_0 *)src;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        float d = colibri_f16_to_f32(b[i].d);
        for (int j = 0; j < COLIBRI_QK; j++) {
            y[i * COLIBRI_QK + j] = d * (float)(colibri_q5_quant(b[i].qh, b[i].qs, j) - 16);
        }
    }
}

/* ---- Q5_1 ----------------------------------------------------------------------------- */

void colibri_quantize_row_q5_1(const float *x, void *dst, int64_t n) {
    colibri_block_q5_1 *b = (colibri_block_q5_1 *)dst;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        const float *xb = x + i * COLIBRI_QK;   /* xb: [32] */
        float min = xb[0], max = xb[0];
        for (int j = 1; j < COLIBRI_QK; j++) {
            if (xb[j] < min) min = xb[j];
            if (xb[j] > max) max = xb[j];
        }
        float d = (max - min) / 31.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        uint8_t q[COLIBRI_QK];
        for (int j = 0; j < COLIBRI_QK; j++) q[j] = colibri_trunc_level((xb[j] - min) * id + 0.5f, 31);
        b[i].d = colibri_f32_to_f16(d);
        b[i].m = colibri_f32_to_f16(min);
        colibri_q5_pack(q, b[i].qh, b[i].qs);
    }
}

void colibri_dequantize_row_q5_1(const void *src, float *y, int64_t n) {
    const colibri_block_q5_1 *b = (const colibri_block_q5_1 *)src;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        float d = colibri_f16_to_f32(b[i].d), m = colibri_f16_to_f32(b[i].m);
        for (int j = 0; j < COLIBRI_QK; j++) {
            y[i * COLIBRI_QK + j] = d * (float)colibri_q5_quant(b[i].qh, b[i].qs, j) + m;
        }
    }
}

/* ---- IQ4_NL ----------------------------------------------------------------------------- */

/* The f16 scale and nibbles of one group of 32 on the IQ4 grid; levels are chosen
 * for the f16-rounded scale that is stored. */
static uint16_t colibri_iq4_group(const float *x, uint8_t q[32]) {
    float w[COLIBRI_QK];
    colibri_default_weights(x, COLIBRI_QK, w);
    uint16_t d = colibri_f32_to_f16(colibri_fit_scale_table(x, w, COLIBRI_QK, colibri_iq4_values, q));
    float dq = colibri_f16_to_f32(d);
    if (dq != 0.0f) {
        for (int j = 0; j < COLIBRI_QK; j++) q[j] = colibri_nearest_value(colibri_iq4_values, x[j] / dq);
    }
    return d;
}

void colibri_quantize_row_iq4_nl(const float *x, void *dst, int64_t n) {
    colibri_block_iq4_nl *b = (colibri_block_iq4_nl *)dst;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        uint8_t q[COLIBRI_QK];
        b[i].d = colibri_iq4_group(x + i * COLIBRI_QK, q);
        colibri_nibbles_pack(q, b[i].qs);
    }
}

void colibri_dequantize_row_iq4_nl(const void *src, float *y, int64_t n) {
    const colibri_block_iq4_nl *b = (const colibri_block_iq4_nl *)src;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        float d = colibri_f16_to_f32(b[i].d);
        for (int j = 0; j < COLIBRI_QK; j++) {
            y[i * COLIBRI_QK + j] = d * (float)colibri_iq4_values[colibri_nibble_at(b[i].qs, j)];
        }
    }
}

/* ---- MXFP4 ---------------------------------------------------------------------------- */

/* The nearest E2M1 code to v (in units of half the scale: the doubled values);
 * ties to the smaller magnitude, the sign kept (-0 as 0). */
static uint8_t colibri_fp4_code(float v) {
    float a = fabsf(v);
    uint8_t k = 0;   /* index into the positive half of COLIBRI_FP4_VALUES */
    while (k < 7 && a > 0.5f * (float)(colibri_fp4_values[k] + colibri_fp4_values[k + 1])) k++;
    return (uint8_t)(k == 0 ? 0 : v < 0.0f ? k + 8 : k);
}

void colibri_quantize_row_mxfp4(const float *x, void *dst, int64_t n) {
    colibri_block_mxfp4 *b = (colibri_block_mxfp4 *)dst;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        const float *xb = x + i * COLIBRI_QK;   /* xb: [32] */
        float amax = 0.0f;
        for (int j = 0; j < COLIBRI_QK; j++) amax = fabsf(xb[j]) > amax ? fabsf(xb[j]) : amax;
        /* e = floor(log2 amax) - 2 + 127 from the bits (exact, no libm), at least 0 */
        int32_t e = 0;
        if (amax > 0.0f) {
            union { float f; uint32_t u; } v = {amax};
            int32_t biased = (int32_t)(v.u >> 23);
            if (biased == 0) {   /* subnormal: the exponent of its leading bit */
                biased = -22;
                for (uint32_t m = v.u; m >>= 1;) biased++;
            }
            e = biased - 2;
            e = e < 0 ? 0 : e;
        }
        float half = colibri_e8m0_half((uint8_t)e);   /* divided by, never inverted: 1 / 2^-128 overflows */
        uint8_t q[COLIBRI_QK];
        for (int j = 0; j < COLIBRI_QK; j++) q[j] = colibri_fp4_code(xb[j] / half);
        b[i].e = (uint8_t)e;
        colibri_nibbles_pack(q, b[i].qs);
    }
}

void colibri_dequantize_row_mxfp4(const void *src, float *y, int64_t n) {
    const colibri_block_mxfp4 *b = (const colibri_block_mxfp4 *)src;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        float d = colibri_e8m0_half(b[i].e);
        for (int j = 0; j < COLIBRI_QK; j++) {
            y[i * COLIBRI_QK + j] = d * (float)colibri_fp4_values[colibri_nibble_at(b[i].qs, j)];
        }
    }
}

/* ---- IQ4_XS --------------------------------------------------------------------------- */

void colibri_quantize_row_iq4_xs(const float *x, void *dst, int64_t n) {
    colibri_block_iq4_xs *b = (colibri_block_iq4_xs *)dst;
    for (int64_t i = 0; i < n / COLIBRI_QK_K; i++) {
        const float *xb = x + i * COLIBRI_QK_K;   /* xb: [256] */
        float scale[8], max_scale = 0.0f, amax_scale = 0.0f;   /* scale: [8] the sub-blocks' best */
        uint8_t q[COLIBRI_QK_K];
        for (int s = 0; s < 8; s++) {
            float w[COLIBRI_QK];
            colibri_default_weights(xb + 32 * s, COLIBRI_QK, w);
            scale[s] = colibri_fit_scale_table(xb + 32 * s, w, COLIBRI_QK, colibri_iq4_values, q + 32 * s);
            if (fabsf(scale[s]) > amax_scale) amax_scale = fabsf(scale[s]), max_scale = scale[s];
        }
        /* sub-block scales as (ls - 32) * d, ls in [0, 63]: the largest at -32 */
        uint16_t d16 = colibri_f32_to_f16(max_scale / -32.0f);
        float d = colibri_f16_to_f32(d16), id = d != 0.0f ? 1.0f / d : 0.0f;
        uint16_t h = 0;
        memset(b[i].scales_l, 0, sizeof b[i].scales_l);
        for (int s = 0; s < 8; s++) {
            int32_t ls = colibri_round_nearest(scale[s] * id) + 32;
            ls = ls < 0 ? 0 : ls > 63 ? 63 : ls;
            b[i].scales_l[s / 2] |= (uint8_t)((ls & 0x0f) << (4 * (s % 2)));
            h |= (uint16_t)((ls >> 4) << (2 * s));
            float dl = d * (float)(ls - 32);
            for (int j = 0; j < COLIBRI_QK; j++) {
                q[32 * s + j] = dl != 0.0f ? colibri_nearest_value(colibri_iq4_values, xb[32 * s + j] / dl) : 8;
            }
            colibri_nibbles_pack(q + 32 * s, b[i].qs + 16 * s);
        }
        b[i].d = d16;
        b[i].scales_h[0] = (uint8_t)(h & 0xff);
        b[i].scales_h[1] = (uint8_t)(h >> 8);
    }
}

void colibri_dequantize_row_iq4_xs(const void *src, float *y, int64_t n) {
    const colibri_block_iq4_xs *b = (const colibri_block_iq4_xs *)src;
    for (int64_t i = 0; i < n / COLIBRI_QK_K; i++) {
        float d = colibri_f16_to_f32(b[i].d);
        for (int s = 0; s < 8; s++) {
            float dl = d * (float)(colibri_iq4_xs_scale(&b[i], s) - 32);
            for (int j = 0; j < COLIBRI_QK; j++) {
                uint8_t q = colibri_nibble_at(b[i].qs + 16 * s, j);
                y[i * COLIBRI_QK_K + 32 * s + j] = dl * (float)colibri_iq4_values[q];
            }
        }
    }
}
