/*
 * quant_search.h — the rounding searches the block quantizers share
 * (quant_search.c): for a group of values x with importance weights w, the
 * scale (and offset) and integer levels that minimise sum_i w_i (x_i - y_i)^2
 * over a grid of levels. Plain f32 arithmetic and integer rounding only, so
 * every platform writes the same bytes.
 *
 * The idea (not ggml's code; its make_qx / make_qkx quantizers search the
 * same way): for a fixed scale the best levels are the nearest ones; for
 * fixed levels the best scale (and offset) is a weighted least-squares fit.
 * Trying a fan of starting scales around amax / (top level) and refitting
 * each escapes the local optimum that rounding with the plain amax scale
 * sits in.
 */
#ifndef COLIBRI_QUANT_SEARCH_H
#define COLIBRI_QUANT_SEARCH_H

#include <stdint.h>

/* nearest integer, halves away from zero (|v| < 2^30) */
static inline int32_t colibri_round_nearest(float v) {
    return v >= 0.0f ? (int32_t)(v + 0.5f) : -(int32_t)(0.5f - v);
}

/* Symmetric grid: y_i = s * L_i, L_i integers in [lo, hi] (lo < 0 < hi).
 * Writes L[n] and returns s (0 when x is all zero). */
float colibri_fit_scale(const float *x, const float *w, int n, int lo, int hi, int8_t *L);

/* Offset grid: y_i = s * L_i - m, L_i in [0, hi], s >= 0, m >= 0 (the offset
 * only shifts down: every value's group minimum is <= 0 or m is 0). Writes
 * L[n], *m, returns s. */
float colibri_fit_scale_min(const float *x, const float *w, int n, int hi, uint8_t *L, float *m);

/* Non-linear grid: y_i = s * values[L_i], L_i in [0, 16), values ascending
 * (IQ4_NL's). Writes L[n] and returns s. */
float colibri_fit_scale_table(const float *x, const float *w, int n, const int8_t values[16], uint8_t *L);

/* The index of the value of values[16] (ascending) nearest to v. */
uint8_t colibri_nearest_value(const int8_t values[16], float v);

/* The default importance of each value of a group: w_i = x_i^2 + mean(x^2)
 * (large values matter more; zeros still count). */
void colibri_default_weights(const float *x, int n, float *w);

#endif /* COLIBRI_QUANT_SEARCH_H */
