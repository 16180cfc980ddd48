/*
 * attention_latent.c — latent KV attention (multi-head latent attention, as
 * DeepSeek-V2/V3 define it) for one layer over a batch, in the absorbed form
 * for every token, prefill and decode alike:
 *
 *   q    = WQ x, or WQ_B rmsnorm(WQ_A x)          [H, dn + dr] per token
 *   kv   = WKV_A x = [c | k_r]                     c: [R] latent, k_r: [dr] shared key
 *   c    = rmsnorm(c); q_r, k_r RoPE'd             (dr = head_dim, the RoPE dims)
 *   cache (seq, layer, pos) <- [c | k_r]           ONE row of R + dr per token and layer
 *   q_lat[h] = [WK_B[h] q_nope[h] | q_r[h]]        the key up-projection absorbed: [R + dr]
 *   a[h]  = softmax(scale * rows . q_lat[h]) . c   attention over the latent rows: [R]
 *   o[h]  = WV_B[h] a[h]                           the value up-projection after: [dv]
 *   x    += WO o
 *
 * Every head scores against the same cached rows, so a work item is one
 * token and up to COLIBRI_ATTN_TILE of its heads (one gemm over the shared
 * rows). Each score is bitwise the one-query dot and each projection element
 * one dot of the matmul contract, so results depend on neither the batch nor
 * the thread count, and cached decoding equals a full recompute bitwise.
 */
#include <math.h>

#include "internal.h"
#include "../kernels/isa.h"
#include "../kernels/kernels.h"
#include "../kernels/quant.h"

/* The cached latent row [R + head_dim] of (seq, layer, pos) in the
 * [n_seq, n_layer, n_ctx, R + head_dim] cache. */
static char *colibri_latent_row(const colibri_context *ctx, int32_t seq, int32_t layer, int32_t pos) {
    const colibri_hparams *hp = &ctx->model->hp;
    int64_t width = (int64_t)hp->kv_lora_rank + hp->head_dim;
    int64_t elem = colibri_type_traits_of(ctx->kv_dtype)->block_bytes;
    return (char *)ctx->k_cache + (((int64_t)seq * hp->n_layer + layer) * ctx->n_ctx + pos) * width * elem;
}

/* One matmul job per head: y[t, h*y_width ...] = W[h] . x[t, h*x_width ...], where
 * W[h] is rows [h*rows, (h+1)*rows) of w (rows = w->rows / H). The per-head
 * views live in s.head_w, the jobs in s.head_jobs. */
static void colibri_per_head_matmul(colibri_context *ctx, const colibri_tensor *w, const float *x,
                                    int64_t x_width, float *y, int64_t y_width, int32_t T) {
    colibri_scratch *s = &ctx->s;
    int32_t H = ctx->model->hp.n_head;
    int64_t rows = w->rows / H, row_bytes = colibri_row_bytes(w->dtype, w->cols);
    for (int32_t h = 0; h < H; h++) {
        s->head_w[h] = (colibri_tensor){(const char *)w->data + h * rows * row_bytes, w->dtype, rows, w->cols};
        s->head_jobs[h] = (colibri_matmul_job){.w = &s->head_w[h], .x = x + h * x_width, .x_stride = H * x_width,
                                               .y = y + h * y_width, .y_stride = H * y_width, .n = T};
    }
    colibri_matmul_run(ctx, s->head_jobs, H);
}

/* ---- attention over the latent rows, one (token, head group) per work item -- */

typedef struct colibri_latent_task {
    colibri_context *ctx;
    const colibri_batch *batch;
    int32_t layer;
    float scale;
} colibri_latent_task;

/* Items (token, group of COLIBRI_ATTN_TILE heads) are dealt out every nt-th,
 * so a causal prefill's longer later rows spread over all threads. */
static void colibri_latent_task_run(void *arg, int32_t ti, int32_t nt) {
    const colibri_latent_task *task = (const colibri_latent_task *)arg;
    colibri_context *ctx = task->ctx;
    const colibri_hparams *hp = &ctx->model->hp;
    const colibri_isa_table *isa = colibri_isa_active();
    int32_t H = hp->n_head, R = hp->kv_lora_rank;
    int64_t width = (int64_t)R + hp->head_dim, kv = ctx->kv_dtype;
    int64_t row_bytes = width * colibri_type_traits_of(ctx->kv_dtype)->block_bytes;   /* a cached latent row */
    float *scores = ctx->s.scores + (int64_t)ti * COLIBRI_ATTN_TILE * ctx->n_ctx;   /* scores: [tile, n_ctx] */
    int64_t item = 0;
    for (int32_t t = 0; t < task->batch->n_tokens; t++) {
        int32_t n = task->batch->pos[t] + 1;   /* keys 0..pos */
        const char *rows = colibri_latent_row(ctx, task->batch->seq[t], task->layer, 0);   /* rows: [n, width] */
        for (int32_t h0 = 0; h0 < H; h0 += COLIBRI_ATTN_TILE, item++) {
            if (item % nt != ti) continue;
            int32_t nh = H - h0 < COLIBRI_ATTN_TILE ? H - h0 : COLIBRI_ATTN_TILE;
            const float *q = ctx->s.q_lat + ((int64_t)t * H + h0) * width;   /* q: [nh, width] */
            /* scores[i, j] = row_j . q_i */
            if (nh == 1) {
                isa->dot_rows[kv](rows, row_bytes, q, width, n, scores);
            } else {
                isa->gemm[kv](rows, row_bytes, q, width * (int64_t)sizeof(float), width, n, nh, scores,
                              ctx->n_ctx);
            }
            for (int32_t i = 0; i < nh; i++) {
                float *p = scores + (int64_t)i * ctx->n_ctx;   /* p: [n] */
                for (int32_t j = 0; j < n; j++) p[j] *= task->scale;
                isa->softmax(p, n);
                float *out = ctx->s.attn_lat + ((int64_t)t * H + h0 + i) * R;   /* out: [R] */
                isa->weighted_sum[kv](out, p, rows, width, n, R);   /* sum_j p_j c_j */
            }
        }
    }
}

/* ---- the block ------------------------------------------------------------- */

void colibri_latent_attention_block(colibri_context *ctx, int32_t layer, const colibri_batch *batch) {
    const colibri_model *m = ctx->model;
    const colibri_hparams *hp = &m->hp;
    const colibri_layer *L = &m->layers[layer];
    colibri_scratch *s = &ctx->s;
    int32_t T = batch->n_tokens, H = hp->n_head, R = hp->kv_lora_rank, dr = hp->head_dim;
    int32_t dn = hp->head_dim_nope, dv = hp->head_dim_v, Rq = hp->q_lora_rank;
    int64_t D = hp->n_embd, Qh = dn + dr, Qm = (int64_t)H * Qh, width = (int64_t)R + dr;

    /* q: [T, Qm] (through q_a: [T, Rq] when q_lora_rank > 0), k: [T, width] latent rows */
    colibri_matmul_job first[2] = {
        {.w = &L->t[COLIBRI_T_WKV_A], .x = s->h, .x_stride = D, .y = s->k, .y_stride = width, .n = T},
        Rq > 0 ? (colibri_matmul_job){.w = &L->t[COLIBRI_T_WQ_A], .x = s->h, .x_stride = D, .y = s->q_a,
                                      .y_stride = Rq, .n = T}
               : (colibri_matmul_job){.w = &L->t[COLIBRI_T_WQ], .x = s->h, .x_stride = D, .y = s->q,
                                      .y_stride = Qm, .n = T},
    };
    colibri_matmul_run(ctx, first, 2);
    if (Rq > 0) {
        const float *w = colibri_vec_load(ctx, &L->t[COLIBRI_T_Q_A_NORM]);   /* w: [Rq] */
        for (int32_t t = 0; t < T; t++) colibri_rmsnorm_apply(s->q_a + (int64_t)t * Rq, w, Rq, hp->latent_norm_eps,
                                                              s->q_a + (int64_t)t * Rq);
        colibri_matmul_job qb = {.w = &L->t[COLIBRI_T_WQ_B], .x = s->q_a, .x_stride = Rq, .y = s->q, .y_stride = Qm,
                                 .n = T};
        colibri_matmul_run(ctx, &qb, 1);
    }

    /* latent norm, RoPE on the RoPE dims of k and of every query head; cache every row
     * before any attention runs (prefill) */
    const float *w = colibri_vec_load(ctx, &L->t[COLIBRI_T_KV_A_NORM]);   /* w: [R] */
    void (*rope)(float *, const float *, int32_t) =
        hp->rope_interleaved ? colibri_rope_apply_interleaved : colibri_rope_apply;
    void (*narrow)(const float *, void *, int64_t) = colibri_isa_active()->kv_from_f32[ctx->kv_dtype];
    for (int32_t t = 0; t < T; t++) {
        const float *cs = s->rope_cs + (int64_t)t * dr;   /* cs: [dr] */
        float *k = s->k + t * width;                      /* k: [width] */
        colibri_rmsnorm_apply(k, w, R, hp->latent_norm_eps, k);
        rope(k + R, cs, dr);
        for (int32_t h = 0; h < H; h++) rope(s->q + t * Qm + h * Qh + dn, cs, dr);
        narrow(k, colibri_latent_row(ctx, batch->seq[t], layer, batch->pos[t]), width);
    }

    /* q_lat: [T, H, width] = [WK_B[h] q_nope | q_rope] */
    colibri_per_head_matmul(ctx, &L->t[COLIBRI_T_WK_B], s->q, Qh, s->q_lat, width, T);
    for (int32_t t = 0; t < T; t++) {
        for (int32_t h = 0; h < H; h++) {
            const float *q_rope = s->q + t * Qm + h * Qh + dn;
            float *dst = s->q_lat + ((int64_t)t * H + h) * width + R;
            for (int32_t i = 0; i < dr; i++) dst[i] = q_rope[i];
        }
    }

    colibri_latent_task task = {ctx, batch, layer,
                                hp->attn_scale > 0.0f ? hp->attn_scale : (float)(1.0 / sqrt((double)Qh))};
    colibri_threadpool_run(ctx->pool, colibri_latent_task_run, &task);

    /* attn: [T, H*dv] = WV_B[h] a[h]; then WO and the residual */
    colibri_per_head_matmul(ctx, &L->t[COLIBRI_T_WV_B], s->attn_lat, R, s->attn, dv, T);
    colibri_matmul_job wo = {.w = &L->t[COLIBRI_T_WO], .x = s->attn, .x_stride = (int64_t)H * dv, .y = s->o,
                             .y_stride = D, .n = T};   /* o: [T, D] */
    colibri_matmul_run(ctx, &wo, 1);
    colibri_residual_rows(ctx, s->o, 0, T);
}
