/*
 * arm_neon/vector_ops.c — NEON's activation quantizers (Q8_H / Q8_S),
 * attention's value sum over f32 or f16 rows, softmax and SiLU·up, bitwise
 * the reference:
 *   quantize: a block of 32 as eight 4-lane vectors; amax by a compare and
 *             select (a NaN |x| keeps the running max, as the reference's
 *             `ax > amax ? ax : amax`; NEON's vmaxq would propagate it), of
 *             the block (Q8_S) or of each half (Q8_H: d, the multipliers and
 *             1/step then in scalar, as the reference computes them);
 *             roundf(x * id) as truncation plus the exact fraction compared
 *             with ±0.5, clamped to ±127, NaN to 0;
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

/* The running max of |v| over m's lanes: a NaN |v| keeps m, as the
 * reference's `ax > m ? ax : m` (vmaxq would propagate it). */
static inline float32x4_t colibri_amax_step_neon(float32x4_t v, float32x4_t m) {
    float32x4_t ax = vabsq_f32(v);
    return vbslq_f32(vcgtq_f32(ax, m), ax, m);
}

/* roundf(v * id) as int32, clamped to ±127, NaN to 0: truncation, then ±1
 * where the exact fraction reaches ±0.5 (colibri_round_i8). */
static inline int32x4_t colibri_round4_neon(float32x4_t v, float32x4_t id) {
    float32x4_t one = vdupq_n_f32(1.0f), lim = vdupq_n_f32(127.0f);
    float32x4_t xi = vmulq_f32(v, id);
    float32x4_t t = vrndq_f32(xi);   /* toward zero */
    float32x4_t frac = vsubq_f32(xi, t);
    t = vaddq_f32(t, vreinterpretq_f32_u32(vandq_u32(vcgeq_f32(frac, vdupq_n_f32(0.5f)), vreinterpretq_u32_f32(one))));
    t = vsubq_f32(t, vreinterpretq_f32_u32(vandq_u32(vcleq_f32(frac, vdupq_n_f32(-0.5f)), vreinterpretq_u32_f32(one))));
    t = vbslq_f32(vcgtq_f32(t, lim), lim, t);
    t = vbslq_f32(vcltq_f32(t, vnegq_f32(lim)), vnegq_f32(lim), t);
    t = vbslq_f32(vceqq_f32(xi, xi), t, vdupq_n_f32(0.0f));   /* NaN → 0 */
    return vcvtq_s32_f32(t);   /* integral values: exact */
}

/* q: [4][4] int32 in [-127, 127] → qs: [16] int8 in order (narrowing: exact). */
static inline void colibri_store_q16_neon(const int32x4_t q[4], int8_t *qs) {
    int16x8_t lo = vcombine_s16(vmovn_s32(q[0]), vmovn_s32(q[1])), hi = vcombine_s16(vmovn_s32(q[2]), vmovn_s32(q[3]));
    vst1q_s8(qs, vcombine_s8(vmovn_s16(lo), vmovn_s16(hi)));
}

/* The sum of q: [4][4] int32. */
static inline int32_t colibri_sum16_neon(const int32x4_t q[4]) {
    return vaddvq_s32(vaddq_s32(vaddq_s32(q[0], q[1]), vaddq_s32(q[2], q[3])));
}

/* Quantizes x: [32] into qs: [32]; returns d and sets *sum to the sum of qs. */
static inline float colibri_q8_block_neon(const float *x, int8_t *qs, int32_t *sum) {
    float32x4_t v[8], m = vdupq_n_f32(0.0f);   /* v: [8][4] */
    for (int k = 0; k < 8; k++) {
        v[k] = vld1q_f32(x + 4 * k);
        m = colibri_amax_step_neon(v[k], m);
    }
    float d = vmaxvq_f32(m) / 127.0f;   /* no NaN left in m */
    float32x4_t id = vdupq_n_f32(d != 0.0f ? 1.0f / d : 0.0f);
    int32x4_t q[8];   /* q: [8][4] */
    for (int k = 0; k < 8; k++) q[k] = colibri_round4_neon(v[k], id);
    colibri_store_q16_neon(q, qs), colibri_store_q16_neon(q + 4, qs + 16);
    *sum = colibri_sum16_neon(q) + colibri_sum16_neon(q + 4);
    return d;
}

/* Q8_H (quant.h): each half's max by vector, d and the multipliers in scalar
 * as the reference computes them, then each half rounded with its own 1/step. */
static inline void colibri_q8_h_block_neon(const float *x, colibri_block_q8_h *b) {
    float32x4_t v[8];   /* v: [8][4], halves v[0..3] and v[4..7] */
    float amax_h[2];
    for (int h = 0; h < 2; h++) {
        float32x4_t m = vdupq_n_f32(0.0f);
        for (int k = 4 * h; k < 4 * h + 4; k++) {
            v[k] = vld1q_f32(x + 4 * k);
            m = colibri_amax_step_neon(v[k], m);
        }
        amax_h[h] = vmaxvq_f32(m);   /* no NaN left in m */
    }
    float amax = amax_h[0] > amax_h[1] ? amax_h[0] : amax_h[1];
    b->d = amax / 1016.0f;
    for (int h = 0; h < 2; h++) {
        int16_t k = colibri_q8_h_mult(amax_h[h], amax);
        float step = b->d * (float)k;
        float32x4_t id = vdupq_n_f32(step != 0.0f ? 1.0f / step : 0.0f);
        int32x4_t q[4];   /* q: [4][4] the half's quants */
        for (int i = 0; i < 4; i++) q[i] = colibri_round4_neon(v[4 * h + i], id);
        colibri_store_q16_neon(q, b->qs + 16 * h);
        b->k[h] = k;
        b->sum[h] = (int16_t)(k * colibri_sum16_neon(q));
    }
}

void colibri_quantize_q8_h_neon(const float *x, void *dst, int64_t n) {
    colibri_block_q8_h *b = (colibri_block_q8_h *)dst;   /* b: [n/32] */
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) colibri_q8_h_block_neon(x + i * COLIBRI_QK, &b[i]);
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
