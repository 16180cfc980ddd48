/*
 * attention.c — the attention block of one layer over a batch:
 * Q/K/V projections (+bias) → q/k RMSNorm → clip → RoPE → write K/V of every
 * batch token into its sequence's cache (f32 or f16) → causal GQA attention
 * per (query tile, head), over the layer's sliding window or everything, with
 * an optional per-head sink logit in each softmax → Wo (+bias) → residual add.
 */
#include <math.h>

#include "internal.h"
#include "../kernels/isa.h"
#include "../kernels/kernels.h"
#include "../kernels/quant.h"

/* Bytes of one cache element (ctx->kv_dtype: F32 or F16). */
static int64_t colibri_kv_elem(const colibri_context *ctx) {
    return colibri_type_traits_of(ctx->kv_dtype)->block_bytes;
}

/* The cached row [head_dim] of (seq, layer, kv_head, pos) in a
 * [n_seq, n_layer, n_head_kv, n_ctx, head_dim] cache: one head's keys (or
 * values) lie contiguous over the positions, so attention streams them. */
static char *colibri_kv_row(const colibri_context *ctx, void *cache, int32_t seq, int32_t layer, int32_t kv_head,
                            int32_t pos) {
    const colibri_hparams *hp = &ctx->model->hp;
    int64_t head_rows = ((int64_t)seq * hp->n_layer + layer) * hp->n_head_kv + kv_head;
    return (char *)cache + (head_rows * ctx->n_ctx + pos) * hp->head_dim * colibri_kv_elem(ctx);
}

/* Caches row: [n_head_kv * head_dim] f32 at (seq, layer, pos), one head row
 * at a time, in the cache's type (the ISA table's narrowing, bitwise the
 * type table's: a copy for F32, rounding to nearest even for F16). */
static void colibri_kv_store(const colibri_context *ctx, void *cache, int32_t seq, int32_t layer, int32_t pos,
                             const float *row) {
    const colibri_hparams *hp = &ctx->model->hp;
    void (*narrow)(const float *, void *, int64_t) = colibri_isa_active()->kv_from_f32[ctx->kv_dtype];
    for (int32_t h = 0; h < hp->n_head_kv; h++) {
        narrow(row + (int64_t)h * hp->head_dim, colibri_kv_row(ctx, cache, seq, layer, h, pos), hp->head_dim);
    }
}

/* ---- after the projections: bias, q/k norm, clip, RoPE, cache, token by token */

typedef struct colibri_qkv_task {
    colibri_context *ctx;
    const colibri_batch *batch;
    int32_t layer;
    const float *bias[3];   /* bias[i]: [Q], [K], [K] of q, k, v (f32), or NULL */
    const float *norm[2];   /* norm[i]: [head_dim] or the whole row, of q, k, or NULL */
} colibri_qkv_task;

/* y: [n] clamped to [-c, c]. */
static void colibri_clip_apply(float *y, int64_t n, float c) {
    for (int64_t i = 0; i < n; i++) y[i] = y[i] < -c ? -c : (y[i] > c ? c : y[i]);
}

/* Tokens [lo, hi) of the batch: + bias, q/k RMSNorm (over each head or the
 * whole row), clip (after the norm, as HF OLMoE does, the only model with
 * both), RoPE, then K and V into the cache. Each token's rows depend on that
 * token only. */
static void colibri_qkv_finish_range(void *arg, int64_t lo, int64_t hi) {
    const colibri_qkv_task *task = (const colibri_qkv_task *)arg;
    colibri_context *ctx = task->ctx;
    const colibri_hparams *hp = &ctx->model->hp;
    colibri_scratch *s = &ctx->s;
    int32_t hd = hp->head_dim, rd = ctx->model->rope_dim;
    int64_t Q = (int64_t)hp->n_head * hd, K = (int64_t)hp->n_head_kv * hd;
    int64_t span[2] = {hp->qk_norm == COLIBRI_QK_NORM_PER_HEAD ? hd : Q, hp->qk_norm == COLIBRI_QK_NORM_PER_HEAD ? hd : K};
    void (*rope)(float *, const float *, int32_t) =
        hp->rope_interleaved ? colibri_rope_apply_interleaved : colibri_rope_apply;
    for (int64_t t = lo; t < hi; t++) {
        float *rows[3] = {s->q + t * Q, s->k + t * K, s->v + t * K};   /* rows[i]: [Q], [K], [K] */
        int64_t width[3] = {Q, K, K};
        for (int i = 0; i < 3; i++) {
            if (task->bias[i]) {
                for (int64_t j = 0; j < width[i]; j++) rows[i][j] += task->bias[i][j];
            }
        }
        for (int i = 0; i < 2; i++) {
            if (!task->norm[i]) continue;
            for (int64_t j = 0; j < width[i]; j += span[i]) {
                colibri_rmsnorm_apply(rows[i] + j, task->norm[i], span[i], hp->norm_eps, rows[i] + j);
            }
        }
        if (hp->qkv_clip > 0.0f) {
            for (int i = 0; i < 3; i++) colibri_clip_apply(rows[i], width[i], hp->qkv_clip);
        }
        const float *cs = s->rope_cs + t * hd;   /* cs: [rd] of [hd]: the rotated dims at the start of each head */
        for (int32_t h = 0; h < hp->n_head; h++) rope(rows[0] + (int64_t)h * hd, cs, rd);
        for (int32_t h = 0; h < hp->n_head_kv; h++) rope(rows[1] + (int64_t)h * hd, cs, rd);
        /* every token's K/V is cached before any attention runs (prefill) */
        colibri_kv_store(ctx, ctx->k_cache, task->batch->seq[t], task->layer, task->batch->pos[t], rows[1]);
        colibri_kv_store(ctx, ctx->v_cache, task->batch->seq[t], task->layer, task->batch->pos[t], rows[2]);
    }
}

/* The layer's bias and q/k norm vectors as f32 in s.attn_vecs (NULL: absent). */
static void colibri_qkv_vectors(colibri_context *ctx, const colibri_layer *L, colibri_qkv_task *task) {
    const colibri_hparams *hp = &ctx->model->hp;
    int32_t kinds[5] = {COLIBRI_T_BQ, COLIBRI_T_BK, COLIBRI_T_BV, COLIBRI_T_Q_NORM, COLIBRI_T_K_NORM};
    int present[5] = {hp->attn_bias, hp->attn_bias, hp->attn_bias, hp->qk_norm != COLIBRI_QK_NORM_NONE,
                      hp->qk_norm != COLIBRI_QK_NORM_NONE};
    const float **dst[5] = {&task->bias[0], &task->bias[1], &task->bias[2], &task->norm[0], &task->norm[1]};
    int64_t stride = ctx->s.attn_vec_stride;
    for (int i = 0; i < 5; i++) {
        float *v = ctx->s.attn_vecs + i * stride;   /* v: [cols] */
        *dst[i] = NULL;
        if (!present[i]) continue;
        colibri_row_to_f32(L->t[kinds[i]].data, L->t[kinds[i]].dtype, 0, L->t[kinds[i]].cols, v);
        *dst[i] = v;
    }
}

/* x[t] += o[t] for tokens [lo, hi) (arg: the context). */
static void colibri_attention_residual_range(void *arg, int64_t lo, int64_t hi) {
    colibri_context *ctx = (colibri_context *)arg;
    colibri_residual_rows(ctx, ctx->s.o, lo, hi);
}

/* ---- causal GQA attention, one (query tile, head) per work item ----------- */

typedef struct colibri_attention_task {
    colibri_context *ctx;
    const colibri_batch *batch;
    int32_t layer;
    int32_t window;       /* this layer's sliding window, 0 = full attention */
    float scale;
    const float *sinks;   /* sinks: [n_head] sink logits, or NULL */
} colibri_attention_task;

/* The end of the query tile that starts at batch token t: up to
 * COLIBRI_ATTN_TILE tokens of one sequence at consecutive positions. */
static int32_t colibri_attention_tile_end(const colibri_batch *batch, int32_t t) {
    int32_t end = t + 1;
    while (end < batch->n_tokens && end - t < COLIBRI_ATTN_TILE && batch->seq[end] == batch->seq[t] &&
           batch->pos[end] == batch->pos[end - 1] + 1) {
        end++;
    }
    return end;
}

/* The first cached position token pos attends to (the start of its window of
 * `window` positions; 0 = full attention). */
static int32_t colibri_attention_first(int32_t window, int32_t pos) {
    return window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
}

/* A tile's queries share every key load: their scores come from one gemm
 * over the union of their key ranges (keys past a query's own range are
 * computed and ignored); each score is bitwise the one-query dot (the gemm
 * contract), so tiling never changes a result. Work items (tile, head) are
 * dealt out by query group (the heads that share one KV head), every nt-th
 * group: a group's heads read the same cached rows, which the second head
 * finds in its thread's cache, and a causal prefill's later tiles cost more,
 * so contiguous shares would leave the first threads idle. */
static void colibri_attention_task_run(void *arg, int32_t ti, int32_t nt) {
    const colibri_attention_task *task = (const colibri_attention_task *)arg;
    colibri_context *ctx = task->ctx;
    const colibri_hparams *hp = &ctx->model->hp;
    const colibri_batch *batch = task->batch;
    int32_t hd = hp->head_dim, group = hp->n_head / hp->n_head_kv;
    int64_t Q = (int64_t)hp->n_head * hd, row_bytes = hd * colibri_kv_elem(ctx);   /* a cached head row */
    int64_t kv = ctx->kv_dtype, stride = colibri_score_stride(ctx->n_ctx);
    float *scores = ctx->s.scores + (int64_t)ti * COLIBRI_ATTN_TILE * stride;   /* scores: [tile, stride] */
    const colibri_isa_table *isa = colibri_isa_active();
    int64_t item = 0;
    for (int32_t t = 0, end; t < batch->n_tokens; t = end) {
        end = colibri_attention_tile_end(batch, t);
        int32_t seq = batch->seq[t], lo = colibri_attention_first(task->window, batch->pos[t]);
        int32_t hi = batch->pos[end - 1];
        for (int32_t head = 0; head < hp->n_head; head++, item++) {
            if ((item / group) % nt != ti) continue;   /* item / group: the query group */
            int32_t kv_head = head / group;
            const float *q = ctx->s.q + (int64_t)t * Q + (int64_t)head * hd;   /* q: [end - t] rows of Q */
            const char *k0 = colibri_kv_row(ctx, ctx->k_cache, seq, task->layer, kv_head, lo);   /* [hi-lo+1, hd] */
            const char *v0 = colibri_kv_row(ctx, ctx->v_cache, seq, task->layer, kv_head, lo);
            /* scores[i, j] = k_(lo+j) . q_i */
            if (end - t == 1) {
                isa->dot_rows[kv](k0, row_bytes, q, hd, hi - lo + 1, scores);
            } else {
                isa->gemm[kv](k0, row_bytes, q, Q * (int64_t)sizeof(float), hd, hi - lo + 1, end - t, scores,
                              stride);
            }
            for (int32_t i = 0; i < end - t; i++) {
                int32_t pos = batch->pos[t + i], first = colibri_attention_first(task->window, pos) - lo;
                int32_t n = pos - lo - first + 1;
                float *p = scores + (int64_t)i * stride + first;   /* p: [n (+ 1)] this query's */
                for (int32_t j = 0; j < n; j++) p[j] *= task->scale;
                if (task->sinks) {   /* the sink joins the softmax as one more logit, then is dropped */
                    p[n] = task->sinks[head];
                    isa->softmax(p, n + 1);
                } else {
                    isa->softmax(p, n);
                }
                float *out = ctx->s.attn + (int64_t)(t + i) * Q + (int64_t)head * hd;   /* out: [hd] */
                isa->weighted_sum[kv](out, p, v0 + first * row_bytes, hd, n, hd);   /* sum_j p_j v_j */
            }
        }
    }
}

/* ---- the block ------------------------------------------------------------- */

void colibri_attention_block(colibri_context *ctx, int32_t layer, const colibri_batch *batch) {
    const colibri_model *m = ctx->model;
    const colibri_hparams *hp = &m->hp;
    colibri_scratch *s = &ctx->s;
    int32_t T = batch->n_tokens, hd = hp->head_dim;
    int64_t D = hp->n_embd, Q = (int64_t)hp->n_head * hd, K = (int64_t)hp->n_head_kv * hd;
    const colibri_layer *L = &m->layers[layer];

    colibri_matmul_job qkv[3] = {
        {.w = &L->t[COLIBRI_T_WQ], .x = s->h, .x_stride = D, .y = s->q, .y_stride = Q, .n = T},   /* q: [T, Q] */
        {.w = &L->t[COLIBRI_T_WK], .x = s->h, .x_stride = D, .y = s->k, .y_stride = K, .n = T},   /* k: [T, K] */
        {.w = &L->t[COLIBRI_T_WV], .x = s->h, .x_stride = D, .y = s->v, .y_stride = K, .n = T},   /* v: [T, K] */
    };
    colibri_matmul_run(ctx, qkv, 3);
    colibri_qkv_task finish = {ctx, batch, layer, {NULL, NULL, NULL}, {NULL, NULL}};
    colibri_qkv_vectors(ctx, L, &finish);
    colibri_parallel_for(ctx, T, 4 * (Q + 2 * K), colibri_qkv_finish_range, &finish);

    colibri_attention_task task = {ctx, batch, layer, m->layer_window[layer],
                                   hp->attn_scale > 0.0f ? hp->attn_scale : (float)(1.0 / sqrt((double)hd)),
                                   hp->attn_sinks ? colibri_vec_load(ctx, &L->t[COLIBRI_T_ATTN_SINKS]) : NULL};
    colibri_threadpool_run(ctx->pool, colibri_attention_task_run, &task);

    colibri_matmul_job wo = {.w = &L->t[COLIBRI_T_WO], .x = s->attn, .x_stride = Q, .y = s->o,   /* o: [T, D] */
                             .y_stride = D, .n = T, .bias = {hp->attn_out_bias ? &L->t[COLIBRI_T_BO] : NULL, 0}};
    colibri_matmul_run(ctx, &wo, 1);
    colibri_parallel_for(ctx, T, D, colibri_attention_residual_range, ctx);
}
