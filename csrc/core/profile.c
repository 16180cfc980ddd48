/*
 * profile.c — per-stage, per-layer wall time of a context's forward steps,
 * each thread's busy and waiting time per stage, and each routed expert's
 * tokens, weight bytes and thread time per layer (see profile.h for how
 * steps charge time, colibri.h for the public switch). Each context has its
 * own timers; allocated when profiling is switched on, never inside a step.
 */
#include <stdlib.h>

#include "internal.h"
#include "profile.h"

struct colibri_profile {
    double *seconds;    /* seconds: [n_layer + 1, COLIBRI_STAGE_COUNT]; row n_layer = outside layers */
    double *busy;       /* busy: [COLIBRI_STAGE_COUNT, n_threads] thread-seconds at work */
    double *wait;       /* wait: [COLIBRI_STAGE_COUNT, n_threads] thread-seconds waiting */
    double *take;       /* take: [n_threads] the pool's busy times of one mark */
    int64_t *expert_tokens;   /* expert_tokens: [n_layer, n_expert] */
    int64_t *expert_bytes;    /* expert_bytes: [n_layer, n_expert] weight bytes read */
    double *expert_seconds;   /* expert_seconds: [n_layer, n_expert] thread-seconds */
    int32_t n_layer, n_threads, n_expert;
    int32_t layer;      /* the layer of the last mark (where expert work is charged) */
    double last_mark;   /* CLOCK_MONOTONIC seconds of the previous mark */
};

void colibri_profile_restart(const colibri_context *ctx) {
    colibri_profile *p = ctx->profile;
    double ignored;
    colibri_threadpool_take_times(ctx->pool, p->take, &ignored);   /* nothing ran since the last step */
    p->last_mark = colibri_now();
}

void colibri_profile_charge(const colibri_context *ctx, int32_t stage, int32_t layer) {
    colibri_profile *p = ctx->profile;
    double now = colibri_now(), wall = now - p->last_mark, caller_wait;
    int32_t row = layer >= 0 && layer < p->n_layer ? layer : p->n_layer;
    p->seconds[(int64_t)row * COLIBRI_STAGE_COUNT + stage] += wall;
    colibri_threadpool_take_times(ctx->pool, p->take, &caller_wait);
    p->take[0] = wall - caller_wait;   /* the caller works whenever it does not wait */
    for (int32_t i = 0; i < p->n_threads; i++) {
        double busy = p->take[i] < wall ? p->take[i] : wall;
        p->busy[(int64_t)stage * p->n_threads + i] += busy;
        p->wait[(int64_t)stage * p->n_threads + i] += wall - busy;
    }
    p->layer = layer >= 0 && layer < p->n_layer ? layer : p->layer;
    p->last_mark = now;
}

void colibri_profile_expert(colibri_profile *p, int32_t expert, int64_t tokens, int64_t bytes, double seconds) {
    if (expert < 0 || expert >= p->n_expert) return;
    int64_t at = (int64_t)p->layer * p->n_expert + expert;
    p->expert_tokens[at] += tokens;
    p->expert_bytes[at] += bytes;
    p->expert_seconds[at] += seconds;
}

void colibri_profile_free(colibri_profile *p) {
    if (!p) return;
    free(p->seconds);
    free(p->busy);
    free(p->wait);
    free(p->take);
    free(p->expert_tokens);
    free(p->expert_bytes);
    free(p->expert_seconds);
    free(p);
}

static int colibri_profile_enable_claimed(colibri_context *ctx, int on);

COLIBRI_API int colibri_profile_enable(colibri_context *ctx, int on) {
    if (!ctx) return colibri_error_set(COLIBRI_ERR_INVALID, "profile_enable: context is NULL");
    if (!colibri_context_claim(ctx, "profile_enable")) return COLIBRI_ERR_STATE;
    int rc = colibri_profile_enable_claimed(ctx, on);
    colibri_context_release(ctx);
    return rc;
}

/* colibri_profile_enable on a context this thread has claimed. */
static int colibri_profile_enable_claimed(colibri_context *ctx, int on) {
    colibri_profile_free(ctx->profile);
    ctx->profile = NULL;
    colibri_threadpool_timing(ctx->pool, on);
    if (!on) return COLIBRI_OK;
    int32_t n_layer = ctx->model->hp.n_layer, nt = ctx->n_threads, E = ctx->model->hp.n_expert;
    size_t stages = COLIBRI_STAGE_COUNT, experts = (size_t)n_layer * (size_t)(E > 0 ? E : 1);
    colibri_profile *p = calloc(1, sizeof *p);
    if (p) {
        p->seconds = calloc((size_t)(n_layer + 1) * stages, sizeof(double));
        p->busy = calloc(stages * (size_t)nt, sizeof(double));
        p->wait = calloc(stages * (size_t)nt, sizeof(double));
        p->take = calloc((size_t)nt, sizeof(double));
        p->expert_tokens = calloc(experts, sizeof(int64_t));
        p->expert_bytes = calloc(experts, sizeof(int64_t));
        p->expert_seconds = calloc(experts, sizeof(double));
    }
    if (!p || !p->seconds || !p->busy || !p->wait || !p->take || !p->expert_tokens || !p->expert_bytes ||
        !p->expert_seconds) {
        colibri_profile_free(p);
        colibri_threadpool_timing(ctx->pool, 0);
        return colibri_error_set(COLIBRI_ERR_NOMEM, "profile_enable: out of memory");
    }
    p->n_layer = n_layer;
    p->n_threads = nt;
    p->n_expert = E;
    ctx->profile = p;
    return COLIBRI_OK;
}

/* The context's timers, or NULL with the error set. */
static const colibri_profile *colibri_profile_of(const colibri_context *ctx, const char *what) {
    const colibri_profile *p = ctx ? ctx->profile : NULL;
    if (!p) colibri_error_set(COLIBRI_ERR_STATE, "%s: this context is not being profiled", what);
    return p;
}

COLIBRI_API int colibri_profile_read(const colibri_context *ctx, int32_t layer, double *seconds,
                                     int32_t n_stages) {
    const colibri_profile *p = colibri_profile_of(ctx, "profile_read");
    if (!p) return COLIBRI_ERR_STATE;
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

COLIBRI_API int colibri_profile_read_threads(const colibri_context *ctx, int32_t stage, double *busy, double *wait,
                                             int32_t n_threads) {
    const colibri_profile *p = colibri_profile_of(ctx, "profile_read_threads");
    if (!p) return COLIBRI_ERR_STATE;
    if (stage < 0 || stage >= COLIBRI_STAGE_COUNT || !busy || !wait || n_threads != p->n_threads) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "profile_read_threads: need a stage in [0, %d) and "
                                 "busy[%d], wait[%d]", COLIBRI_STAGE_COUNT, p->n_threads, p->n_threads);
    }
    for (int32_t i = 0; i < n_threads; i++) {
        busy[i] = p->busy[(int64_t)stage * n_threads + i];
        wait[i] = p->wait[(int64_t)stage * n_threads + i];
    }
    return COLIBRI_OK;
}

COLIBRI_API int colibri_profile_read_experts(const colibri_context *ctx, int32_t layer, int64_t *tokens,
                                             int64_t *bytes, double *seconds, int32_t n_expert) {
    const colibri_profile *p = colibri_profile_of(ctx, "profile_read_experts");
    if (!p) return COLIBRI_ERR_STATE;
    if (layer < 0 || layer >= p->n_layer || !tokens || !bytes || !seconds || n_expert != p->n_expert) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "profile_read_experts: need a layer in [0, %d) and "
                                 "tokens, bytes, seconds of n_expert = %d", p->n_layer, p->n_expert);
    }
    for (int32_t e = 0; e < n_expert; e++) {
        int64_t at = (int64_t)layer * n_expert + e;
        tokens[e] = p->expert_tokens[at];
        bytes[e] = p->expert_bytes[at];
        seconds[e] = p->expert_seconds[at];
    }
    return COLIBRI_OK;
}
