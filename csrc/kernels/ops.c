/*
 * ops.c — scalar reference row-wise ops: RMSNorm, softmax, RoPE, SiLU.
 * All in f32, fixed order, libm for exp/sqrt/cos/sin.
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

void colibri_softmax_apply(float *x, int64_t n) {
    float max = x[0];
    for (int64_t i = 1; i < n; i++) max = x[i] > max ? x[i] : max;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    float inv_sum = 1.0f / sum;
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
    for (int64_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* Unrolled by 8 so that -O2's straight-line (SLP) vectorizer packs it. */
void colibri_axpy_f32(float *restrict y, float a, const float *restrict x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        y[i + 0] += a * x[i + 0], y[i + 1] += a * x[i + 1], y[i + 2] += a * x[i + 2], y[i + 3] += a * x[i + 3];
        y[i + 4] += a * x[i + 4], y[i + 5] += a * x[i + 5], y[i + 6] += a * x[i + 6], y[i + 7] += a * x[i + 7];
    }
    for (; i < n; i++) y[i] += a * x[i];
}

float colibri_sigmoid(float z) {
    return 1.0f / (1.0f + expf(-z));
}
