/*
 * dot.c — scalar reference dot products of a float-type weight row with an
 * f32 activation row (the type table in quant.c points at them).
 *
 * One accumulation order for every dtype and every caller: 8 independent
 * partial sums over blocks of 8 (compilers vectorise this without
 * -ffast-math because the order is explicit), combined pairwise, tail last.
 */
#include "colibri.h"
#include "kernels.h"

#define COLIBRI_DOT_DEFINE(NAME, WTYPE, LOAD)                                  \
    float NAME(const void *wv, const void *xv, int64_t n) {                   \
        const WTYPE *w = (const WTYPE *)wv;                                    \
        const float *x = (const float *)xv;                                    \
        float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};       \
        int64_t i = 0;                                                         \
        for (; i + 8 <= n; i += 8) {                                           \
            for (int j = 0; j < 8; j++) acc[j] += LOAD(w[i + j]) * x[i + j];   \
        }                                                                      \
        float tail = 0.0f;                                                     \
        for (; i < n; i++) tail += LOAD(w[i]) * x[i];                          \
        return (((acc[0] + acc[1]) + (acc[2] + acc[3])) +                      \
                ((acc[4] + acc[5]) + (acc[6] + acc[7]))) + tail;               \
    }

#define COLIBRI_LOAD_F32(v) (v)

COLIBRI_DOT_DEFINE(colibri_dot_f32, float, COLIBRI_LOAD_F32)
COLIBRI_DOT_DEFINE(colibri_dot_f16, uint16_t, colibri_f16_to_f32)
COLIBRI_DOT_DEFINE(colibri_dot_bf16, uint16_t, colibri_bf16_to_f32)
