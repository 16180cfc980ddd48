/*
 * profile.c — per-stage, per-layer wall time of a context's forward steps
 * (see profile.h for how steps charge time, colibri.h for the public switch).
 * Each context has its own timers; allocated when profiling is switched on,
 * never inside a step.
 */
#define _POSIX_C_SOURCE 199309L   /* clock_gettime */
#include <stdlib.h>
#include <time.h>

#include "internal.h"
#include "profile.h"

struct colibri_profile {
    double *seconds;    /* seconds: [n_layer + 1, COLIBRI_STAGE_COUNT]; row n_layer = outside layers */
    int32_t n_layer;
    double last_mark;   /* CLOCK_MONOTONIC seconds of the previous mark */
};

static double colibri_profile_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void colibri_profile_restart(colibri_profile *p) {
    p->last_mark = colibri_profile_now();
}

void colibri_profile_charge(colibri_profile *p, int32_t stage, int32_t layer) {
    double now = colibri_profile_now();
    int32_t row = layer >= 0 && layer < p->n_layer ? layer : p->n_layer;
    p->seconds[(int64_t)row * COLIBRI_STAGE_COUNT + stage] += now - p->last_mark;
    p->last_mark = now;
}

void colibri_profile_free(colibri_profile *p) {
    if (!p) return;
    free(p->seconds);
    free(p);
}

COLIBRI_API int colibri_profile_enable(colibri_context *ctx, int on) {
    if (!ctx) return colibri_error_set(COLIBRI_ERR_INVALID, "profile_enable: context is NULL");
    colibri_profile_free(ctx->profile);
    ctx->profile = NULL;
    if (!on) return COLIBRI_OK;
    int32_t n_layer = ctx->model->hp.n_layer;
    colibri_profile *p = calloc(1, sizeof *p);
    double *seconds = calloc((size_t)(n_layer + 1) * COLIBRI_STAGE_COUNT, sizeof(double));
    if (!p || !seconds) {
        free(p);
        free(seconds);
        return colibri_error_set(COLIBRI_ERR_NOMEM, "profile_enable: out of memory");
    }
    p->seconds = seconds;
    p->n_layer = n_layer;
    ctx->profile = p;
    return COLIBRI_OK;
}

COLIBRI_API int colibri_profile_read(const colibri_context *ctx, int32_t layer, double *seconds,
                                     int32_t n_stages) {
    const colibri_profile *p = ctx ? ctx->profile : NULL;
    if (!p) return colibri_error_set(COLIBRI_ERR_STATE, "profile_read: this context is not being profiled");
    if (!seconds || n_stages < 0 || n_stages > COLIBRI_STAGE_COUNT) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "profile_read: need seconds[n_stages], n_stages in [0, %d]",
                                 COLIBRI_STAGE_COUNT);
    }
    if (layer < -1 || layer >= p->n_layer) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "profile_read: layer %d out of range [-1, %d)",
                                 layer, p->n_layer);
    }
    for (int32_t stage = 0; stage < n_stages; stage++) {
        double sum = 0.0;
        for (int32_t row = 0; row <= p->n_layer; row++) {
            if (layer < 0 || row == layer) sum += p->seconds[(int64_t)row * COLIBRI_STAGE_COUNT + stage];
        }
        seconds[stage] = sum;
    }
    return COLIBRI_OK;
}
