/*
 * quant_kquants.c — the scalar references of the K types Q2_K, Q3_K, Q4_K,
 * Q5_K and Q6_K (quant_blocks.h): dequantize (bitwise what ggml and gguf-py
 * compute: the sub-block's scale d * sc rounded to f32 first, then times the
 * quant, minus dmin * m) and quantize.
 *
 * Quantizing a super-block of 256: each sub-block's best scale (and min) by
 * the rounding search of quant_search.h; the super-block scales d (dmin) so
 * that the largest sub-block scale (min) takes the top integer code; each
 * sub-block's integer scale (min) then chosen among the codes next to its
 * rounded value by the error of the sub-block's values re-rounded with it
 * (colibri_k_refine); finally every value rounded to the nearest level of the
 * stored scales.
 */
#include <math.h>
#include <string.h>

#include "quant.h"
#include "quant_search.h"

/* ---- shared steps ---------------------------------------------------------------- */

/* The f16 super-block scale that maps the signed value v to code `top`. */
static uint16_t colibri_k_super(float v, float top) {
    return colibri_f32_to_f16(top != 0.0f ? v / top : 0.0f);
}

/* The integer code nearest to v / d, clamped to [lo, hi] (lo when d is 0). */
static int32_t colibri_k_code(float v, float d, int32_t lo, int32_t hi) {
    if (d == 0.0f) return lo > 0 ? lo : (hi < 0 ? hi : 0);
    int32_t c = colibri_round_nearest(v / d);
    return c < lo ? lo : c > hi ? hi : c;
}

/* Levels of x: [n] for y = D * L - M, L in [lo, hi] (nearest, clamped), and
 * their weighted squared error. */
static float colibri_k_levels(const float *x, const float *w, int n, float D, float M, int32_t lo, int32_t hi,
                              int8_t *L) {
    float err = 0.0f;
    for (int i = 0; i < n; i++) {
        int32_t q = D != 0.0f ? colibri_round_nearest((x[i] + M) / D) : 0;
        q = q < lo ? lo : q > hi ? hi : q;
        L[i] = (int8_t)q;
        float e = x[i] - (D * (float)q - M);
        err += w[i] * e * e;
    }
    return err;
}

/* Picks the sub-block's integer scale code *sc (and min code *m when dmin_q is
 * non-zero) among the rounded codes and their neighbours, by the error of x
 * re-rounded with them; writes the levels of the choice to L. Codes stay in
 * [sc_lo, sc_hi] and [0, m_hi]. */
static void colibri_k_refine(const float *x, const float *w, int n, float d_q, float dmin_q, int32_t lo,
                             int32_t hi, int32_t sc_lo, int32_t sc_hi, int32_t m_hi, int32_t *sc, int32_t *m,
                             int8_t *L) {
    int8_t trial[32];   /* trial: [n] levels of the codes being tried */
    int32_t sc0 = *sc, m0 = *m;
    float best = INFINITY;
    for (int ds = -1; ds <= 1; ds++) {
        for (int dm = (dmin_q != 0.0f ? -1 : 0); dm <= (dmin_q != 0.0f ? 1 : 0); dm++) {
            int32_t cs = sc0 + ds, cm = m0 + dm;
            if (cs < sc_lo || cs > sc_hi || cm < 0 || cm > m_hi) continue;
            float err = colibri_k_levels(x, w, n, d_q * (float)cs, dmin_q * (float)cm, lo, hi, trial);
            if (err < best) {
                best = err, *sc = cs, *m = cm;
                memcpy(L, trial, (size_t)n);
            }
        }
    }
}

/* The symmetric super-block fit Q3_K and Q6_K share: each of xb's 16 sub-blocks
 * of 16 gets its best scale for levels in [lo, hi]; the f16 super-scale *d16 maps
 * the largest (by magnitude, sign kept) to code sc_lo; each sub-block's integer
 * scale code sc[s] in [sc_lo, sc_hi] is then refined. Writes the levels to L. */
static void colibri_k_fit_symmetric(const float *xb, int32_t lo, int32_t hi, int32_t sc_lo, int32_t sc_hi,
                                    uint16_t *d16, int32_t sc[16], int8_t L[COLIBRI_QK_K]) {
    float w[COLIBRI_QK_K], scale[16], max_scale = 0.0f;   /* w: [256] weights; scale: [16] */
    for (int s = 0; s < 16; s++) {
        colibri_default_weights(xb + 16 * s, 16, w + 16 * s);
        scale[s] = colibri_fit_scale(xb + 16 * s, w + 16 * s, 16, lo, hi, L + 16 * s);
        if (fabsf(scale[s]) > fabsf(max_scale)) max_scale = scale[s];
    }
    *d16 = colibri_k_super(max_scale, (float)sc_lo);
    float d = colibri_f16_to_f32(*d16);
    for (int s = 0; s < 16; s++) {
        int32_t m = 0;
        sc[s] = colibri_k_code(scale[s], d, sc_lo, sc_hi);
        colibri_k_refine(xb + 16 * s, w + 16 * s, 16, d, 0.0f, lo, hi, sc_lo, sc_hi, 0, &sc[s], &m, L + 16 * s);
    }
}

/* ---- Q2_K -------------------------------------------------------------------------- */

void colibri_quantize_row_q2_k(const float *x, void *dst, int64_t n) {
    colibri_block_q2_k *b = (colibri_block_q2_k *)dst;
    for (int64_t i = 0; i < n / COLIBRI_QK_K; i++) {
        const float *xb = x + i * COLIBRI_QK_K;   /* xb: [256] */
        float w[COLIBRI_QK_K], scale[16], min[16], max_scale = 0.0f, max_min = 0.0f;
        uint8_t u[16];
        for (int s = 0; s < 16; s++) {
            colibri_default_weights(xb + 16 * s, 16, w + 16 * s);
            scale[s] = colibri_fit_scale_min(xb + 16 * s, w + 16 * s, 16, 3, u, &min[s]);
            max_scale = scale[s] > max_scale ? scale[s] : max_scale;
            max_min = min[s] > max_min ? min[s] : max_min;
        }
        b[i].d = colibri_k_super(max_scale, 15.0f);
        b[i].dmin = colibri_k_super(max_min, 15.0f);
        float d = colibri_f16_to_f32(b[i].d), dmin = colibri_f16_to_f32(b[i].dmin);
        int8_t L[COLIBRI_QK_K];
        for (int s = 0; s < 16; s++) {
            int32_t sc = colibri_k_code(scale[s], d, 0, 15), m = colibri_k_code(min[s], dmin, 0, 15);
            colibri_k_refine(xb + 16 * s, w + 16 * s, 16, d, dmin, 0, 3, 0, 15, 15, &sc, &m, L + 16 * s);
            b[i].scales[s] = (uint8_t)(sc | m << 4);
        }
        memset(b[i].qs, 0, sizeof b[i].qs);
        for (int e = 0; e < COLIBRI_QK_K; e++) b[i].qs[32 * (e / 128) + e % 32] |= (uint8_t)(L[e] << (2 * ((e / 32) % 4)));
    }
}

void colibri_dequantize_row_q2_k(const void *src, float *y, int64_t n) {
    const colibri_block_q2_k *b = (const colibri_block_q2_k *)src;
    for (int64_t i = 0; i < n / COLIBRI_QK_K; i++) {
        float d = colibri_f16_to_f32(b[i].d), dmin = colibri_f16_to_f32(b[i].dmin);
        for (int e = 0; e < COLIBRI_QK_K; e++) {
            uint8_t sm = b[i].scales[e / 16];
            float dl = d * (float)(sm & 0x0f), ml = dmin * (float)(sm >> 4);
            y[i * COLIBRI_QK_K + e] = dl * (float)colibri_q2_bits(b[i].qs, e) - ml;
        }
    }
}

/* ---- Q3_K -------------------------------------------------------------------------- */

void colibri_quantize_row_q3_k(const float *x, void *dst, int64_t n) {
    colibri_block_q3_k *b = (colibri_block_q3_k *)dst;
    for (int64_t i = 0; i < n / COLIBRI_QK_K; i++) {
        int8_t L[COLIBRI_QK_K];   /* L: [256] levels in [-4, 3] */
        int32_t sc[16];
        colibri_k_fit_symmetric(x + i * COLIBRI_QK_K, -4, 3, -32, 31, &b[i].d, sc, L);
        uint8_t sc6[16];
        for (int s = 0; s < 16; s++) sc6[s] = (uint8_t)(sc[s] + 32);
        memset(b[i].scales, 0, sizeof b[i].scales);
        for (int s = 0; s < 16; s++) {
            b[i].scales[s % 8] |= (uint8_t)((sc6[s] & 0x0f) << (4 * (s / 8)));
            b[i].scales[8 + s % 4] |= (uint8_t)((sc6[s] >> 4) << (2 * (s / 4)));
        }
        memset(b[i].qs, 0, sizeof b[i].qs);
        memset(b[i].hmask, 0, sizeof b[i].hmask);
        for (int e = 0; e < COLIBRI_QK_K; e++) {
            int32_t q = L[e];   /* [-4, 3]: low bits q + 4 with the mask bit clear, or q with it set */
            b[i].qs[32 * (e / 128) + e % 32] |= (uint8_t)(((q < 0 ? q + 4 : q) & 3) << (2 * ((e / 32) % 4)));
            if (q >= 0) b[i].hmask[e % 32] |= (uint8_t)(1 << (e / 32));
        }
    }
}

void colibri_dequantize_row_q3_k(const void *src, float *y, int64_t n) {
    const colibri_block_q3_k *b = (const colibri_block_q3_k *)src;
    for (int64_t i = 0; i < n / COLIBRI_QK_K; i++) {
        float d = colibri_f16_to_f32(b[i].d);
        uint8_t sc[16];
        colibri_q3_k_scales(b[i].scales, sc);
        for (int e = 0; e < COLIBRI_QK_K; e++) {
            float dl = d * (float)(sc[e / 16] - 32);
            int q = colibri_q2_bits(b[i].qs, e) - ((b[i].hmask[e % 32] >> (e / 32)) & 1 ? 0 : 4);
            y[i * COLIBRI_QK_K + e] = dl * (float)q;
        }
    }
}

/* ---- Q4_K and Q5_K ------------------------------------------------------------------- */

/* d, dmin, the packed scales and the levels L: [256] in [0, hi] of a super-block
 * with 8 sub-blocks of 32, 6-bit scales and mins. */
static void colibri_quantize_k32(const float *xb, int32_t hi, uint16_t *d16, uint16_t *dmin16, uint8_t scales[12],
                                 int8_t L[256]) {
    float w[COLIBRI_QK_K], scale[8], min[8], max_scale = 0.0f, max_min = 0.0f;
    uint8_t u[32];
    for (int s = 0; s < 8; s++) {
        colibri_default_weights(xb + 32 * s, 32, w + 32 * s);
        scale[s] = colibri_fit_scale_min(xb + 32 * s, w + 32 * s, 32, hi, u, &min[s]);
        max_scale = scale[s] > max_scale ? scale[s] : max_scale;
        max_min = min[s] > max_min ? min[s] : max_min;
    }
    *d16 = colibri_k_super(max_scale, 63.0f);
    *dmin16 = colibri_k_super(max_min, 63.0f);
    float d = colibri_f16_to_f32(*d16), dmin = colibri_f16_to_f32(*dmin16);
    uint8_t sc[8], mn[8];
    for (int s = 0; s < 8; s++) {
        int32_t c = colibri_k_code(scale[s], d, 0, 63), m = colibri_k_code(min[s], dmin, 0, 63);
        colibri_k_refine(xb + 32 * s, w + 32 * s, 32, d, dmin, 0, hi, 0, 63, 63, &c, &m, L + 32 * s);
        sc[s] = (uint8_t)c, mn[s] = (uint8_t)m;
    }
    for (int s = 0; s < 4; s++) {   /* colibri_k_scale_min's packing */
        scales[s] = (uint8_t)(sc[s] | (sc[s + 4] >> 4) << 6);
        scales[s + 4] = (uint8_t)(mn[s] | (mn[s + 4] >> 4) << 6);
        scales[s + 8] = (uint8_t)((sc[s + 4] & 0x0f) | (mn[s + 4] & 0x0f) << 4);
    }
}

void colibri_quantize_row_q4_k(const float *x, void *dst, int64_t n) {
    colibri_block_q4_k *b = (colibri_block_q4_k *)dst;
    for (int64_t i = 0; i < n / COLIBRI_QK_K; i++) {
        int8_t L[COLIBRI_QK_K];
        colibri_quantize_k32(x + i * COLIBRI_QK_K, 15, &b[i].d, &b[i].dmin, b[i].scales, L);
        memset(b[i].qs, 0, sizeof b[i].qs);
        for (int e = 0; e < COLIBRI_QK_K; e++) b[i].qs[32 * (e / 64) + e % 32] |= (uint8_t)(L[e] << (4 * ((e / 32) % 2)));
    }
}

void colibri_quantize_row_q5_k(const float *x, void *dst, int64_t n) {
    colibri_block_q5_k *b = (colibri_block_q5_k *)dst;
    for (int64_t i = 0; i < n / COLIBRI_QK_K; i++) {
        int8_t L[COLIBRI_QK_K];
        colibri_quantize_k32(x + i * COLIBRI_QK_K, 31, &b[i].d, &b[i].dmin, b[i].scales, L);
        memset(b[i].qs, 0, sizeof b[i].qs);
        memset(b[i].qh, 0, sizeof b[i].qh);
        for (int e = 0; e < COLIBRI_QK_K; e++) {
            b[i].qs[32 * (e / 64) + e % 32] |= (uint8_t)((L[e] & 0x0f) << (4 * ((e / 32) % 2)));
            b[i].qh[e % 32] |= (uint8_t)((L[e] >> 4) << (e / 32));
        }
    }
}

/* y = dl * q - ml over a super-block of 8 sub-blocks of 32; quant(b, e) the e-th quant. */
#define COLIBRI_DEQUANTIZE_K32(b, y, QUANT)                                             \
    do {                                                                                 \
        float d = colibri_f16_to_f32((b)->d), dmin = colibri_f16_to_f32((b)->dmin);      \
        for (int s = 0; s < 8; s++) {                                                    \
            uint8_t sc, m;                                                               \
            colibri_k_scale_min((b)->scales, s, &sc, &m);                                \
            float dl = d * (float)sc, ml = dmin * (float)m;                              \
            for (int j = 0; j < 32; j++) (y)[32 * s + j] = dl * (float)QUANT((b), 32 * s + j) - ml; \
        }                                                                                \
    } while (0)

#define COLIBRI_Q4_K_QUANT(b, e) colibri_k_nibble((b)->qs, (e))
#define COLIBRI_Q5_K_QUANT(b, e) (colibri_k_nibble((b)->qs, (e)) | (((b)->qh[(e) % 32] >> ((e) / 32)) & 1) << 4)

void colibri_dequantize_row_q4_k(const void *src, float *y, int64_t n) {
    const colibri_block_q4_k *b = (const colibri_block_q4_k *)src;
    for (int64_t i = 0; i < n / COLIBRI_QK_K; i++) COLIBRI_DEQUANTIZE_K32(&b[i], y + i * COLIBRI_QK_K, COLIBRI_Q4_K_QUANT);
}

void colibri_dequantize_row_q5_k(const void *src, float *y, int64_t n) {
    const colibri_block_q5_k *b = (const colibri_block_q5_k *)src;
    for (int64_t i = 0; i < n / COLIBRI_QK_K; i++) COLIBRI_DEQUANTIZE_K32(&b[i], y + i * COLIBRI_QK_K, COLIBRI_Q5_K_QUANT);
}

/* ---- Q6_K -------------------------------------------------------------------------- */

void colibri_quantize_row_q6_k(const float *x, void *dst, int64_t n) {
    colibri_block_q6_k *b = (colibri_block_q6_k *)dst;
    for (int64_t i = 0; i < n / COLIBRI_QK_K; i++) {
        int8_t L[COLIBRI_QK_K];   /* L: [256] levels in [-32, 31] */
        int32_t sc[16];
        colibri_k_fit_symmetric(x + i * COLIBRI_QK_K, -32, 31, -128, 127, &b[i].d, sc, L);
        for (int s = 0; s < 16; s++) b[i].scales[s] = (int8_t)sc[s];
        memset(b[i].ql, 0, sizeof b[i].ql);
        memset(b[i].qh, 0, sizeof b[i].qh);
        for (int e = 0; e < COLIBRI_QK_K; e++) {   /* colibri_q6_k_quant's layout */
            int h = e / 128, k = (e % 128) / 32, l = e % 32;
            uint8_t q = (uint8_t)(L[e] + 32);
            b[i].ql[64 * h + 32 * (k % 2) + l] |= (uint8_t)((q & 0x0f) << (4 * (k / 2)));
            b[i].qh[32 * h + l] |= (uint8_t)((q >> 4) << (2 * k));
        }
    }
}

void colibri_dequantize_row_q6_k(const void *src, float *y, int64_t n) {
    const colibri_block_q6_k *b = (const colibri_block_q6_k *)src;
    for (int64_t i = 0; i < n / COLIBRI_QK_K; i++) {
        float d = colibri_f16_to_f32(b[i].d);
        for (int e = 0; e < COLIBRI_QK_K; e++) {
            float dl = d * (float)b[i].scales[e / 16];
            y[i * COLIBRI_QK_K + e] = dl * (float)(colibri_q6_k_quant(&b[i], e) - 32);
        }
    }
}
