/*
 * moe.c — the Mixture-of-Experts block, as three separate stages:
 *   ROUTER      router logits [T, E] → top-k experts [T, k] + gates [T, k]
 *               (the routing rules live in router.c)
 *   DISPATCHER  counting sort of the T*k (token, slot) pairs by expert, so
 *               each selected expert runs ONCE over all its tokens
 *   AGGREGATOR  out[t] = sum_slot gate[t, slot] * y[t, slot], slot order
 * plus the optional (gated) shared expert, added after the routed sum.
 */
#include <string.h>

#include "internal.h"
#include "paging.h"
#include "profile.h"
#include "../kernels/kernels.h"

/* ---- DISPATCHER ------------------------------------------------------------ */

void colibri_dispatch_build(const int32_t *experts, int32_t n_tokens, int32_t k, int32_t n_expert,
                            int32_t *count, int32_t *start, int32_t *sorted_pair,
                            int32_t *pair_row) {
    int32_t n_pairs = n_tokens * k;
    memset(count, 0, (size_t)n_expert * sizeof(int32_t));
    for (int32_t p = 0; p < n_pairs; p++) count[experts[p]]++;
    start[0] = 0;
    for (int32_t e = 0; e < n_expert; e++) start[e + 1] = start[e] + count[e];
    /* stable: within an expert, pairs keep batch order (token, then slot) */
    memset(count, 0, (size_t)n_expert * sizeof(int32_t));
    for (int32_t p = 0; p < n_pairs; p++) {
        int32_t e = experts[p];
        int32_t row = start[e] + count[e]++;
        sorted_pair[row] = p;
        pair_row[p] = row;
    }
}

/* ---- AGGREGATOR ------------------------------------------------------------ */

void colibri_aggregate_slots(const float *y, const int32_t *pair_row, const float *gates,
                             int32_t n_tokens, int32_t k, int32_t n_embd, float *out) {
    for (int32_t t = 0; t < n_tokens; t++) {
        float *o = out + (int64_t)t * n_embd;   /* o: [D] */
        memset(o, 0, (size_t)n_embd * sizeof(float));
        for (int32_t slot = 0; slot < k; slot++) {
            int64_t p = (int64_t)t * k + slot;
            const float *yr = y + (int64_t)pair_row[p] * n_embd;   /* yr: [D] */
            float g = gates[p];
            for (int32_t d = 0; d < n_embd; d++) o[d] += g * yr[d];
        }
    }
}

/* ---- the block ------------------------------------------------------------- */

typedef struct colibri_select_task {
    colibri_context *ctx;
    const float *sel_bias;   /* sel_bias: [E] selection-only bias, or NULL */
} colibri_select_task;

/* ROUTER's selection for tokens [lo, hi), each range with its own scratch
 * (the rows of token lo). */
static void colibri_select_range(void *arg, int64_t lo, int64_t hi) {
    const colibri_select_task *task = (const colibri_select_task *)arg;
    colibri_context *ctx = task->ctx;
    const colibri_hparams *hp = &ctx->model->hp;
    colibri_scratch *s = &ctx->s;
    int32_t E = hp->n_expert, k = hp->n_expert_used;
    float *work = s->router_work + lo * COLIBRI_ROUTER_WORK_FLOATS(E);        /* work: this range's */
    int32_t *iwork = s->router_iwork + lo * COLIBRI_ROUTER_WORK_INTS(E);
    for (int64_t t = lo; t < hi; t++) {
        colibri_router_select(&ctx->model->router, s->router_logits + t * E, task->sel_bias, work, iwork,
                              s->sel_expert + t * k, s->sel_gate + t * k);
    }
}

/* AGGREGATOR for tokens [lo, hi): h[t] = sum over slots of gate * y, then
 * + g * the shared expert's o[t], then x[t] += h[t] (arg: the context). */
static void colibri_aggregate_range(void *arg, int64_t lo, int64_t hi) {
    colibri_context *ctx = (colibri_context *)arg;
    const colibri_hparams *hp = &ctx->model->hp;
    colibri_scratch *s = &ctx->s;
    int32_t k = hp->n_expert_used;
    int64_t D = hp->n_embd;
    colibri_aggregate_slots(s->yg, s->pair_row + lo * k, s->sel_gate + lo * k, (int32_t)(hi - lo), k, (int32_t)D,
                            s->h + lo * D);   /* h: [T, D] */
    for (int64_t t = lo; t < hi; t++) {
        if (hp->n_ff_shared > 0) {
            float g = hp->shared_gated ? colibri_sigmoid(s->shared_logit[t]) : 1.0f;   /* 1*o is exact */
            for (int64_t d = 0; d < D; d++) s->h[t * D + d] += g * s->o[t * D + d];
        }
    }
    colibri_residual_rows(ctx, s->h, lo, hi);
}

/* Writes this layer's route outputs [layer, t, :] for tokens t < T of the
 * outputs' [n_layer, out_tokens, ...] arrays. */
static void colibri_route_outputs_write(const colibri_context *ctx, int32_t layer, int32_t T,
                                        const colibri_outputs *out, int64_t out_tokens) {
    const colibri_hparams *hp = &ctx->model->hp;
    const colibri_scratch *s = &ctx->s;
    int64_t E = hp->n_expert, k = hp->n_expert_used;
    if (out && out->router_logits) {
        memcpy(out->router_logits + layer * out_tokens * E, s->router_logits, (size_t)(T * E) * sizeof(float));
    }
    if (out && out->experts) {
        memcpy(out->experts + layer * out_tokens * k, s->sel_expert, (size_t)(T * k) * sizeof(int32_t));
    }
    if (out && out->gates) {
        memcpy(out->gates + layer * out_tokens * k, s->sel_gate, (size_t)(T * k) * sizeof(float));
    }
}

void colibri_moe_block(colibri_context *ctx, int32_t layer, int32_t T, const colibri_outputs *out,
                       int32_t out_tokens) {
    const colibri_model *m = ctx->model;
    const colibri_hparams *hp = &m->hp;
    const colibri_layer *L = &m->layers[layer];
    colibri_scratch *s = &ctx->s;
    int32_t E = hp->n_expert, k = hp->n_expert_used;
    int64_t D = hp->n_embd, Fe = hp->n_ff_expert;

    /* ROUTER (+ the shared expert's router logit, + when paging the next one
     * or two MoE layers' routers on this input, for the read-ahead, in the
     * same pool run) */
    colibri_matmul_job router[2 + COLIBRI_PREFETCH_MAX] = {
        {.w = &L->t[COLIBRI_T_ROUTER], .x = s->h, .x_stride = D, .y = s->router_logits, .y_stride = E,   /* [T, E] */
         .n = T},
        {.w = &L->t[COLIBRI_T_SHARED_ROUTER], .x = s->h, .x_stride = D, .y = s->shared_logit,   /* [T, 1] */
         .y_stride = 1, .n = T},
    };
    int32_t n_router = hp->shared_gated ? 2 : 1;
    n_router += colibri_paging_predict_jobs(ctx, layer, T, &router[n_router]);
    colibri_matmul_run(ctx, router, n_router);
    if (hp->router_bias) {
        const float *b = colibri_vec_load(ctx, &L->t[COLIBRI_T_ROUTER_BIAS]);   /* b: [E] */
        for (int64_t i = 0; i < (int64_t)T * E; i++) s->router_logits[i] += b[i % E];
    }
    colibri_select_task select = {ctx, hp->router_sel_bias ? colibri_vec_load(ctx, &L->t[COLIBRI_T_ROUTER_SEL_BIAS])
                                                           : NULL};   /* sel_bias: [E] */
    colibri_parallel_for(ctx, T, (int64_t)E * (k + 4), colibri_select_range, &select);
    colibri_route_outputs_write(ctx, layer, T, out, out_tokens);
    colibri_profile_mark(ctx, COLIBRI_STAGE_ROUTER, layer);

    /* DISPATCHER: one MLP per selected expert over its tokens' rows of h
     * (gathered, or quantized straight from h, by the expert matmul's inputs) */
    colibri_dispatch_build(s->sel_expert, T, k, E, s->expert_count, s->expert_start, s->sorted_pair,
                           s->pair_row);
    for (int32_t row = 0; row < T * k; row++) s->sorted_token[row] = s->sorted_pair[row] / k;
    colibri_profile_mark(ctx, COLIBRI_STAGE_DISPATCH, layer);
    /* EXPERTS: one MLP per selected expert, all in one pass — or, when the
     * context pages its experts, in waves of those whose weights are in the
     * expert cache (expert_cache.c); each expert runs once either way */
    colibri_paging_layer_begin(ctx, layer, T);
    int32_t wave = 0;
    do {
        int32_t n_mlps = 0;
        for (int32_t e = 0; e < E; e++) {
            int32_t row = s->expert_start[e], n = s->expert_count[e];
            const colibri_tensor *w = n ? colibri_expert_weights(ctx, layer, e) : NULL;   /* NULL: not this wave */
            if (!w) continue;
            colibri_mlp *mlp = &s->mlps[n_mlps++];
            *mlp = (colibri_mlp){.gate = &w[0], .up = &w[1], .down = &w[2], .x = s->h,
                                 .act_gate = s->eg + row * Fe, .act_up = s->eu + row * Fe, .y = s->yg + row * D,
                                 .n = n, .x_rows = s->sorted_token + row, .x_gather = s->xg + row * D,
                                 .profile_id = 1 + e};
            if (hp->expert_bias) {   /* row e of the stacked [E, Fe] / [E, D] biases */
                mlp->gate_bias = (colibri_bias){&L->t[COLIBRI_T_EXPERT_GATE_BIAS], e * Fe};
                mlp->up_bias = (colibri_bias){&L->t[COLIBRI_T_EXPERT_UP_BIAS], e * Fe};
                mlp->down_bias = (colibri_bias){&L->t[COLIBRI_T_EXPERT_DOWN_BIAS], e * D};
            }
        }
        if (wave == 0 && hp->n_ff_shared > 0) {   /* the shared expert joins the same two pool runs */
            s->mlps[n_mlps++] = (colibri_mlp){.gate = &L->t[COLIBRI_T_SHARED_GATE], .up = &L->t[COLIBRI_T_SHARED_UP],
                                              .down = &L->t[COLIBRI_T_SHARED_DOWN], .x = s->h,
                                              .act_gate = s->ff_gate, .act_up = s->ff_up, .y = s->o, .n = T};
        }
        colibri_profile_mark(ctx, COLIBRI_STAGE_DISPATCH, layer);
        colibri_mlp_run(ctx, s->mlps, n_mlps);
        colibri_profile_mark(ctx, COLIBRI_STAGE_EXPERTS, layer);
        wave++;
    } while (colibri_paging_next_wave(ctx, layer));

    /* AGGREGATOR, then + shared expert, then the residual: token by token */
    colibri_parallel_for(ctx, T, D * (k + 2), colibri_aggregate_range, ctx);
    colibri_profile_mark(ctx, COLIBRI_STAGE_AGGREGATION, layer);
}
