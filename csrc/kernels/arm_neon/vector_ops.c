/*
 * arm_neon/vector_ops.c — NEON's activation quantizers (Q8_0 / Q8_1 / Q8_S),
 * attention's value sum over f32 or f16 rows, softmax and SiLU·up, bitwise
 * the reference:
 *   quantize: a block of 32 as eight 4-lane vectors; amax by a compare and
 *             select (a NaN |x| keeps the running max, as the reference's
 *             `ax > amax ? ax : amax`; NEON's vmaxq would propagate it);
 *             roundf(x * id) as truncation plus the exact fraction compared
 *             with ±0.5, clamped to ±127, NaN to 0; f16 scales by the
 *             reference's scalar conversion (quant.h's row macro);
 *   weighted sum: weighted_sum_tiled.h on 4-lane vectors (a separate
 *             multiply and add, no FMA, f16 widened exactly first);
 *   f16 rows: vcvt_f16_f32 (FPCR's default round to nearest even, NaNs
 *             quieted with their top payload bits), 4 at a time;
 *   softmax, SiLU: colibri_expf's steps lane by lane (compare-and-select
 *             for the max and the clamps, so NaN behaves as in the
 *             reference), the sum by the reference's colibri_sum_f32.
 */
#include <arm_neon.h>
#include <math.h>

#include "../isa.h"
#include "../kernels.h"
#include "../quant.h"
#include "../weighted_sum_tiled.h"

/* Quantizes x: [32] into qs: [32]; returns d and sets *sum to the sum of qs. */
static inline float colibri_q8_block_neon(const float *x, int8_t *qs, int32_t *sum) {
    float32x4_t v[8], m = vdupq_n_f32(0.0f);   /* v: [8][4] */
    for (int k = 0; k < 8; k++) {
        v[k] = vld1q_f32(x + 4 * k);
        float32x4_t ax = vabsq_f32(v[k]);
        m = vbslq_f32(vcgtq_f32(ax, m), ax, m);
    }
    float d = vmaxvq_f32(m) / 127.0f;   /* no NaN left in m */
    float32x4_t id = vdupq_n_f32(d != 0.0f ? 1.0f / d : 0.0f);
    float32x4_t one = vdupq_n_f32(1.0f), lim = vdupq_n_f32(127.0f);
    int32x4_t total = vdupq_n_s32(0);
    int32_t q32[32];   /* q32: [32] */
    for (int k = 0; k < 8; k++) {
        float32x4_t xi = vmulq_f32(v[k], id);
        float32x4_t t = vrndq_f32(xi);   /* toward zero */
        float32x4_t frac = vsubq_f32(xi, t);
        t = vaddq_f32(t, vreinterpretq_f32_u32(vandq_u32(vcgeq_f32(frac, vdupq_n_f32(0.5f)),
                                                         vreinterpretq_u32_f32(one))));
        t = vsubq_f32(t, vreinterpretq_f32_u32(vandq_u32(vcleq_f32(frac, vdupq_n_f32(-0.5f)),
                                                         vreinterpretq_u32_f32(one))));
        t = vbslq_f32(vcgtq_f32(t, lim), lim, t);
        t = vbslq_f32(vcltq_f32(t, vnegq_f32(lim)), vnegq_f32(lim), t);
        t = vbslq_f32(vceqq_f32(xi, xi), t, vdupq_n_f32(0.0f));   /* NaN → 0 */
        int32x4_t q = vcvtq_s32_f32(t);   /* integral values: exact */
        vst1q_s32(q32 + 4 * k, q);
        total = vaddq_s32(total, q);
    }
    for (int j = 0; j < 32; j++) qs[j] = (int8_t)q32[j];
    *sum = vaddvq_s32(total);
    return d;
}

COLIBRI_Q8_S_ROW_QUANTIZER(colibri_quantize_q8_s_neon, colibri_q8_block_neon)

static inline float32x4_t colibri_ws4_f32(const void *r, int64_t i) { return vld1q_f32((const float *)r + i); }
static inline float32x4_t colibri_ws4_f16(const void *r, int64_t i) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)r + i)));
}

static inline float32x4_t colibri_ws4_zero(void) { return vdupq_n_f32(0.0f); }
static inline float32x4_t colibri_ws4_muladd(float32x4_t acc, float32x4_t p, float32x4_t v) {
    return vaddq_f32(acc, vmulq_f32(p, v));
}

COLIBRI_WEIGHTED_SUM_TILED(colibri_weighted_sum_f32_neon, float, float32x4_t, 4, colibri_ws4_f32, colibri_ws4_zero,
                           vld1q_f32, vst1q_f32, vdupq_n_f32, colibri_ws4_muladd, colibri_weighted_sum_f32)
COLIBRI_WEIGHTED_SUM_TILED(colibri_weighted_sum_f16_neon, uint16_t, float32x4_t, 4, colibri_ws4_f16, colibri_ws4_zero,
                           vld1q_f32, vst1q_f32, vdupq_n_f32, colibri_ws4_muladd, colibri_weighted_sum_f16)

/* colibri_expf on 4 lanes: the in-range lanes follow its steps exactly
 * (kernels.h); the others are replaced by its +inf, 0 and NaN. */
static inline float32x4_t colibri_exp4(float32x4_t x) {
    float32x4_t hi = vdupq_n_f32(COLIBRI_EXP_MAX), lo = vdupq_n_f32(COLIBRI_EXP_MIN);
    float32x4_t xc = vbslq_f32(vcgtq_f32(x, hi), hi, vbslq_f32(vcltq_f32(x, lo), lo, x));   /* NaN stays */
    float32x4_t round = vdupq_n_f32(COLIBRI_EXP_ROUND);
    float32x4_t n = vsubq_f32(vaddq_f32(vmulq_f32(xc, vdupq_n_f32(COLIBRI_EXP_LOG2E)), round), round);
    float32x4_t r = vsubq_f32(vsubq_f32(xc, vmulq_f32(n, vdupq_n_f32(COLIBRI_EXP_LN2_HI))),
                              vmulq_f32(n, vdupq_n_f32(COLIBRI_EXP_LN2_LO)));
    float32x4_t p = vdupq_n_f32(COLIBRI_EXP_C7);
    p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(COLIBRI_EXP_C6));
    p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(COLIBRI_EXP_C5));
    p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(COLIBRI_EXP_C4));
    p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(COLIBRI_EXP_C3));
    p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(COLIBRI_EXP_C2));
    p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(1.0f));
    p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(1.0f));
    int32x4_t k = vcvtq_s32_f32(vbslq_f32(vceqq_f32(n, n), n, vdupq_n_f32(0.0f))), half = vshrq_n_s32(k, 1);
    int32x4_t bias = vdupq_n_s32(127);
    float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(half, bias), 23));
    float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vsubq_s32(k, half), bias), 23));
    float32x4_t e = vmulq_f32(vmulq_f32(p, s1), s2);
    e = vbslq_f32(vcgtq_f32(x, hi), vdupq_n_f32(INFINITY), e);
    e = vbslq_f32(vcltq_f32(x, lo), vdupq_n_f32(0.0f), e);
    return vbslq_f32(vceqq_f32(x, x), e, x);
}

void colibri_softmax_neon(float *x, int64_t n) {
    float32x4_t m = vdupq_n_f32(x[0]);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t xi = vld1q_f32(x + i);
        m = vbslq_f32(vcgtq_f32(xi, m), xi, m);   /* NaN x keeps m, as the reference */
    }
    float lanes[4], max;   /* lanes: [4] */
    vst1q_f32(lanes, m);
    max = lanes[0];
    for (int k = 1; k < 4; k++) max = lanes[k] > max ? lanes[k] : max;
    for (; i < n; i++) max = x[i] > max ? x[i] : max;
    float32x4_t mv = vdupq_n_f32(max);
    for (i = 0; i + 4 <= n; i += 4) vst1q_f32(x + i, colibri_exp4(vsubq_f32(vld1q_f32(x + i), mv)));
    for (; i < n; i++) x[i] = colibri_expf(x[i] - max);
    float inv_sum = 1.0f / colibri_sum_f32(x, n);
    float32x4_t inv = vdupq_n_f32(inv_sum);
    for (i = 0; i + 4 <= n; i += 4) vst1q_f32(x + i, vmulq_f32(vld1q_f32(x + i), inv));
    for (; i < n; i++) x[i] *= inv_sum;
}

void colibri_silu_mul_neon(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    float32x4_t one = vdupq_n_f32(1.0f);
    for (; i + 4 <= n; i += 4) {
        float32x4_t gv = vld1q_f32(g + i);
        float32x4_t s = vdivq_f32(gv, vaddq_f32(one, colibri_exp4(vnegq_f32(gv))));
        vst1q_f32(g + i, vmulq_f32(s, vld1q_f32(u + i)));
    }
    colibri_silu_mul(g + i, u + i, n - i);
}

/* dst: [n] f16 = src: [n] rounded to nearest even, bitwise colibri_f32_to_f16. */
void colibri_f16_row_from_f32_neon(const float *src, void *dst, int64_t n) {
    uint16_t *d = (uint16_t *)dst;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(d + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + i))));
    for (; i < n; i++) d[i] = colibri_f32_to_f16(src[i]);
}
