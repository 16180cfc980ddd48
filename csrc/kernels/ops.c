/*
 * ops.c — scalar reference row-wise ops: RMSNorm, exp, softmax, RoPE, SiLU.
 * All in f32, fixed order; exp is Colibri's own (the same bits on every
 * platform and in every ISA's vector version), libm for sqrt/cos/sin.
 */
#include <math.h>

#include "kernels.h"

/* Matches HF: w * (x * rsqrt(mean(x^2) + eps)), the mean as (sum of squares
 * in dot order) / n. */
void colibri_rmsnorm_apply(const float *x, const float *w, int64_t n, float eps, float *y) {
    float mean_sq = colibri_dot_f32(x, x, n) / (float)n;
    float inv_rms = 1.0f / sqrtf(mean_sq + eps);
    for (int64_t i = 0; i < n; i++) y[i] = w[i] * (x[i] * inv_rms);
}

float colibri_expf(float x) {
    if (x > COLIBRI_EXP_MAX) return INFINITY;
    if (!(x >= COLIBRI_EXP_MIN)) return x != x ? x : 0.0f;   /* NaN stays NaN */
    float n = (x * COLIBRI_EXP_LOG2E + COLIBRI_EXP_ROUND) - COLIBRI_EXP_ROUND;   /* round(x / ln 2) */
    float r = (x - n * COLIBRI_EXP_LN2_HI) - n * COLIBRI_EXP_LN2_LO;               /* |r| <= ln 2 / 2 */
    float p = COLIBRI_EXP_C7;
    p = p * r + COLIBRI_EXP_C6;
    p = p * r + COLIBRI_EXP_C5;
    p = p * r + COLIBRI_EXP_C4;
    p = p * r + COLIBRI_EXP_C3;
    p = p * r + COLIBRI_EXP_C2;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t k = (int32_t)n, half = k >> 1;   /* 2^k = 2^half * 2^(k - half), both normal */
    return (p * colibri_exp2i(half)) * colibri_exp2i(k - half);
}

float colibri_sum_f32(const float *x, int64_t n) {
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int j = 0; j < 8; j++) acc[j] += x[i + j];
    }
    float tail = 0.0f;
    for (; i < n; i++) tail += x[i];
    return (((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))) + tail;
}

void colibri_softmax_apply(float *x, int64_t n) {
    float max = x[0];
    for (int64_t i = 1; i < n; i++) max = x[i] > max ? x[i] : max;
    for (int64_t i = 0; i < n; i++) x[i] = colibri_expf(x[i] - max);
    float inv_sum = 1.0f / colibri_sum_f32(x, n);
    for (int64_t i = 0; i < n; i++) x[i] *= inv_sum;
}

/* theta is computed like torch: f32 inv_freq times f32 position, rounded to
 * f32, then cosf/sinf of that f32 (torch uses its own vectorised cos/sin, so
 * results may differ from it by an ulp — well inside 1e-6 relative). */
void colibri_rope_table(const float *inv_freq, int32_t head_dim, int32_t pos, float factor,
                        float *cos_sin) {
    int32_t half = head_dim / 2;
    for (int32_t i = 0; i < half; i++) {
        float theta = (float)pos * inv_freq[i];
        cos_sin[i] = cosf(theta) * factor;
        cos_sin[half + i] = sinf(theta) * factor;
    }
}

void colibri_rope_apply(float *u, const float *cos_sin, int32_t head_dim) {
    int32_t half = head_dim / 2;
    const float *c = cos_sin;           /* c: [half] */
    const float *s = cos_sin + half;    /* s: [half] */
    for (int32_t i = 0; i < half; i++) {
        float a = u[i], b = u[half + i];
        u[i] = a * c[i] - b * s[i];
        u[half + i] = b * c[i] + a * s[i];
    }
}

void colibri_rope_apply_interleaved(float *u, const float *cos_sin, int32_t head_dim) {
    int32_t half = head_dim / 2;
    const float *c = cos_sin;           /* c: [half] */
    const float *s = cos_sin + half;    /* s: [half] */
    for (int32_t i = 0; i < half; i++) {
        float a = u[2 * i], b = u[2 * i + 1];
        u[2 * i] = a * c[i] - b * s[i];
        u[2 * i + 1] = b * c[i] + a * s[i];
    }
}

void colibri_silu_mul(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + colibri_expf(-g[i])) * u[i];
}

/* As transformers' GptOssExperts: glu = c * sigmoid(c * alpha), out = (v + 1) * glu;
 * the comparisons keep NaN (a NaN compares false and passes through). */
void colibri_swiglu_clamped(float *g, const float *u, int64_t n, float alpha, float limit) {
    for (int64_t i = 0; i < n; i++) {
        float c = g[i] > limit ? limit : g[i];
        float v = u[i] > limit ? limit : (u[i] < -limit ? -limit : u[i]);
        float glu = c * (1.0f / (1.0f + colibri_expf(-(c * alpha))));
        g[i] = (v + 1.0f) * glu;
    }
}

/* 16 columns at a time held in a local accumulator across all j (registers,
 * not memory), written out once; the unrolled statements are what -O2's
 * straight-line (SLP) vectorizer packs. LOAD widens one row element (exact). */
#define COLIBRI_WEIGHTED_SUM_DEFINE(NAME, RTYPE, LOAD)                                                     \
    void NAME(float *restrict out, const float *restrict w, const void *restrict rows_v, int64_t stride,  \
              int32_t n, int64_t n_cols) {                                                                \
        const RTYPE *rows = (const RTYPE *)rows_v;                                                        \
        int64_t c = 0;                                                                                    \
        for (; c + 16 <= n_cols; c += 16) {                                                               \
            float acc[16] = {0};   /* acc: [16] columns c..c+15 */                                        \
            for (int32_t j = 0; j < n; j++) {                                                             \
                const RTYPE *r = rows + j * stride + c;   /* r: [16] */                                   \
                float p = w[j];                                                                           \
                acc[0] += p * LOAD(r[0]), acc[1] += p * LOAD(r[1]), acc[2] += p * LOAD(r[2]);             \
                acc[3] += p * LOAD(r[3]), acc[4] += p * LOAD(r[4]), acc[5] += p * LOAD(r[5]);             \
                acc[6] += p * LOAD(r[6]), acc[7] += p * LOAD(r[7]), acc[8] += p * LOAD(r[8]);             \
                acc[9] += p * LOAD(r[9]), acc[10] += p * LOAD(r[10]), acc[11] += p * LOAD(r[11]);         \
                acc[12] += p * LOAD(r[12]), acc[13] += p * LOAD(r[13]), acc[14] += p * LOAD(r[14]);       \
                acc[15] += p * LOAD(r[15]);                                                               \
            }                                                                                             \
            for (int k = 0; k < 16; k++) out[c + k] = acc[k];                                             \
        }                                                                                                 \
        for (; c < n_cols; c++) {                                                                         \
            float acc = 0.0f;                                                                             \
            for (int32_t j = 0; j < n; j++) acc += w[j] * LOAD(rows[j * stride + c]);                     \
            out[c] = acc;                                                                                 \
        }                                                                                                 \
    }

#define COLIBRI_LOAD_F32(v) (v)
COLIBRI_WEIGHTED_SUM_DEFINE(colibri_weighted_sum_f32, float, COLIBRI_LOAD_F32)
COLIBRI_WEIGHTED_SUM_DEFINE(colibri_weighted_sum_f16, uint16_t, colibri_f16_to_f32)

float colibri_sigmoid(float z) {
    return 1.0f / (1.0f + colibri_expf(-z));
}
