/*
 * quant_search.c — the rounding searches of the block quantizers (see
 * quant_search.h for the contracts and the idea).
 */
#include <math.h>

#include "quant_search.h"

#define COLIBRI_FAN_STEPS 9        /* starting scales tried on each side of the plain one */
#define COLIBRI_FAN_STEP 0.1f      /* in units of the top level */

void colibri_default_weights(const float *x, int n, float *w) {
    float sum2 = 0.0f;
    for (int i = 0; i < n; i++) sum2 += x[i] * x[i];
    float rms = sqrtf(sum2 / (float)n);
    for (int i = 0; i < n; i++) w[i] = rms + fabsf(x[i]);
}

/* ---- symmetric grid --------------------------------------------------------------- */

/* Levels of x for scale s (nearest, clamped); returns the fit quality
 * (sum w x L)^2 / sum w L^2 (larger is better: the error is sum w x^2 minus it)
 * and the least-squares scale in *best_s. */
static float colibri_levels_fit(const float *x, const float *w, int n, int lo, int hi, float s, int8_t *L,
                                float *best_s) {
    float inv = 1.0f / s, sxl = 0.0f, sll = 0.0f;
    for (int i = 0; i < n; i++) {
        int32_t q = colibri_round_nearest(x[i] * inv);
        q = q < lo ? lo : q > hi ? hi : q;
        L[i] = (int8_t)q;
        sxl += w[i] * x[i] * (float)q;
        sll += w[i] * (float)q * (float)q;
    }
    if (sll <= 0.0f) {
        *best_s = 0.0f;
        return 0.0f;
    }
    *best_s = sxl / sll;
    return sxl * sxl / sll;
}

float colibri_fit_scale(const float *x, const float *w, int n, int lo, int hi, int8_t *L) {
    float amax = 0.0f, xm = 0.0f;   /* xm: the signed value of largest |x| */
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]), xm = x[i];
    }
    if (amax == 0.0f) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.0f;
    }
    int8_t trial[256];   /* trial: [n] levels of the scale being tried (n <= 256) */
    float best = -1.0f, best_s = 0.0f;
    const int ends[2] = {hi, lo};   /* the largest value maps near either end of the grid */
    for (int e = 0; e < 2; e++) {
        for (int k = -COLIBRI_FAN_STEPS; k <= COLIBRI_FAN_STEPS; k++) {
            float top = (float)ends[e] + COLIBRI_FAN_STEP * (float)k * (ends[e] > 0 ? 1.0f : -1.0f);
            if (top == 0.0f) continue;
            float s, quality = colibri_levels_fit(x, w, n, lo, hi, xm / top, trial, &s);
            if (quality > best && s != 0.0f) best = quality, best_s = s;
        }
    }
    for (int iter = 0; iter < 4; iter++) {   /* nearest levels, refit, until nothing improves */
        float s, quality = colibri_levels_fit(x, w, n, lo, hi, best_s, trial, &s);
        if (!(quality > best) || s == 0.0f) break;
        best = quality, best_s = s;
    }
    float s;
    colibri_levels_fit(x, w, n, lo, hi, best_s, L, &s);   /* the nearest levels of best_s */
    return best_s;
}

/* ---- offset grid ---------------------------------------------------------------------- */

/* Levels of x for y = s L - m (nearest, clamped to [0, hi]); then the
 * weighted least-squares (s, m) for those levels (m >= 0 enforced) and its
 * error. Returns the error; *s, *m updated to the fit. */
static float colibri_levels_fit_min(const float *x, const float *w, int n, int hi, float *s, float *m,
                                    uint8_t *L) {
    float inv = 1.0f / *s;
    float sw = 0.0f, sl = 0.0f, sll = 0.0f, sx = 0.0f, slx = 0.0f;
    for (int i = 0; i < n; i++) {
        int32_t q = colibri_round_nearest((x[i] + *m) * inv);
        q = q < 0 ? 0 : q > hi ? hi : q;
        L[i] = (uint8_t)q;
        float fq = (float)q;
        sw += w[i], sl += w[i] * fq, sll += w[i] * fq * fq, sx += w[i] * x[i], slx += w[i] * fq * x[i];
    }
    float det = sw * sll - sl * sl;
    float fs, b;   /* x ~ fs * L + b, b = -m */
    if (det > 0.0f) {
        fs = (sw * slx - sl * sx) / det;
        b = (sll * sx - sl * slx) / det;
        if (b > 0.0f) b = 0.0f, fs = sll > 0.0f ? slx / sll : 0.0f;
    } else {
        b = sw > 0.0f ? sx / sw : 0.0f;
        if (b > 0.0f) b = 0.0f;
        fs = *s;
    }
    if (!(fs > 0.0f)) fs = *s;
    float err = 0.0f;
    for (int i = 0; i < n; i++) {
        float d = x[i] - (fs * (float)L[i] + b);
        err += w[i] * d * d;
    }
    *s = fs;
    *m = -b;
    return err;
}

float colibri_fit_scale_min(const float *x, const float *w, int n, int hi, uint8_t *L, float *m) {
    float lo_x = x[0], hi_x = x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < lo_x) lo_x = x[i];
        if (x[i] > hi_x) hi_x = x[i];
    }
    if (lo_x > 0.0f) lo_x = 0.0f;
    if (hi_x == lo_x) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *m = -lo_x;
        return 0.0f;
    }
    uint8_t trial[256];   /* trial: [n] levels of the (s, m) being tried */
    float best_err = INFINITY, best_s = (hi_x - lo_x) / (float)hi, best_m = -lo_x;
    for (int k = -COLIBRI_FAN_STEPS; k <= COLIBRI_FAN_STEPS; k++) {
        float s = (hi_x - lo_x) / ((float)hi + COLIBRI_FAN_STEP * (float)k), mm = -lo_x;
        float err = colibri_levels_fit_min(x, w, n, hi, &s, &mm, trial);
        if (err < best_err) best_err = err, best_s = s, best_m = mm;
    }
    for (int iter = 0; iter < 4; iter++) {   /* refit from the best until nothing improves */
        float s = best_s, mm = best_m;
        float err = colibri_levels_fit_min(x, w, n, hi, &s, &mm, trial);
        if (!(err < best_err)) break;
        best_err = err, best_s = s, best_m = mm;
    }
    float s = best_s, mm = best_m;
    colibri_levels_fit_min(x, w, n, hi, &s, &mm, L);   /* the nearest levels of the best (s, m) */
    *m = best_m;
    return best_s;
}

/* ---- non-linear grid ----------------------------------------------------------------- */

uint8_t colibri_nearest_value(const int8_t values[16], float v) {
    if (v <= (float)values[0]) return 0;
    if (v >= (float)values[15]) return 15;
    int k = 0;
    while (k < 14 && v > (float)values[k + 1]) k++;
    /* values[k] < v <= values[k+1] */
    return (uint8_t)(v - (float)values[k] <= (float)values[k + 1] - v ? k : k + 1);
}

float colibri_fit_scale_table(const float *x, const float *w, int n, const int8_t values[16], uint8_t *L) {
    float amax = 0.0f, xm = 0.0f;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]), xm = x[i];
    }
    if (amax == 0.0f) {
        for (int i = 0; i < n; i++) L[i] = 8;   /* any level: the scale is 0 */
        return 0.0f;
    }
    uint8_t trial[256];
    float best = -1.0f, best_s = 0.0f;
    const float ends[2] = {(float)values[0], (float)values[15]};
    for (int e = 0; e < 2; e++) {
        for (int k = -COLIBRI_FAN_STEPS; k <= COLIBRI_FAN_STEPS; k++) {
            float top = ends[e] + (ends[e] > 0.0f ? 1.0f : -1.0f) * (float)k;   /* steps of one level unit */
            float inv = top / xm, sxv = 0.0f, svv = 0.0f;
            for (int i = 0; i < n; i++) {
                trial[i] = colibri_nearest_value(values, x[i] * inv);
                float v = (float)values[trial[i]];
                sxv += w[i] * x[i] * v, svv += w[i] * v * v;
            }
            if (svv > 0.0f && sxv * sxv / svv > best) best = sxv * sxv / svv, best_s = sxv / svv;
        }
    }
    if (best_s == 0.0f) {
        for (int i = 0; i < n; i++) L[i] = 8;
        return 0.0f;
    }
    float inv = 1.0f / best_s;
    for (int i = 0; i < n; i++) L[i] = colibri_nearest_value(values, x[i] * inv);
    return best_s;
}
