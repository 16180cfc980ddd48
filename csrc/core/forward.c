/*
 * forward.c — one forward step over a batch: validate the whole batch, embed,
 * run every layer (attention block, then dense MLP or MoE block), final norm,
 * lm_head for the wanted tokens only. Allocates nothing.
 */
#include <string.h>

#include "internal.h"
#include "paging.h"
#include "profile.h"
#include "../kernels/kernels.h"

/* Checks every token of the batch before anything is touched; fills
 * s.seq_len_next with each sequence's length after this step. Within one
 * batch a sequence's positions must also strictly increase, since all K/V of
 * the batch are written before attention reads them. */
static int colibri_batch_check(colibri_context *ctx, const colibri_batch *batch) {
    const colibri_hparams *hp = &ctx->model->hp;
    colibri_scratch *s = &ctx->s;
    if (!batch) return colibri_error_set(COLIBRI_ERR_INVALID, "forward: batch is NULL");
    if (batch->n_tokens < 1 || batch->n_tokens > ctx->n_batch) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "batch: n_tokens must be in [1, n_batch=%d], got %d",
                                 ctx->n_batch, batch->n_tokens);
    }
    if (!batch->token || !batch->pos || !batch->seq) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "batch: token, pos and seq must not be NULL");
    }
    memcpy(s->seq_len_next, ctx->seq_len, (size_t)ctx->n_seq * sizeof(int32_t));
    for (int32_t i = 0; i < ctx->n_seq; i++) s->seq_last_pos[i] = -1;
    for (int32_t i = 0; i < batch->n_tokens; i++) {
        int32_t token = batch->token[i], pos = batch->pos[i], seq = batch->seq[i];
        if (token < 0 || token >= hp->n_vocab) {
            return colibri_error_set(COLIBRI_ERR_INVALID, "batch token %d: token id %d out of range [0, %d)",
                                     i, token, hp->n_vocab);
        }
        if (seq < 0 || seq >= ctx->n_seq) {
            return colibri_error_set(COLIBRI_ERR_INVALID, "batch token %d: sequence %d out of range [0, %d)",
                                     i, seq, ctx->n_seq);
        }
        if (pos < 0 || pos >= ctx->n_ctx) {
            return colibri_error_set(COLIBRI_ERR_INVALID, "batch token %d: position %d out of range [0, n_ctx=%d)",
                                     i, pos, ctx->n_ctx);
        }
        if (pos > s->seq_len_next[seq]) {
            return colibri_error_set(COLIBRI_ERR_INVALID,
                                     "batch token %d: position %d skips ahead of sequence %d's cached length %d",
                                     i, pos, seq, s->seq_len_next[seq]);
        }
        if (pos <= s->seq_last_pos[seq]) {
            return colibri_error_set(COLIBRI_ERR_INVALID,
                                     "batch token %d: position %d of sequence %d does not follow its position %d "
                                     "earlier in this batch", i, pos, seq, s->seq_last_pos[seq]);
        }
        s->seq_last_pos[seq] = pos;
        s->seq_len_next[seq] = pos + 1;   /* a position below the cached length rewinds */
    }
    return COLIBRI_OK;
}

/* The step's layer span, checked: tokens [n_full, T) run layers [begin, end),
 * the others every layer (no span: n_full = T, begin 0, end n_layer). */
typedef struct colibri_step_span {
    int32_t n_full, begin, end;
} colibri_step_span;

/* Checks a layer span against the batch (already checked) and the carried
 * states; for a span that stops early, resets its sequences' lengths in
 * s.seq_len_next to where the span starts. */
static int colibri_span_check(colibri_context *ctx, const colibri_batch *batch, const colibri_layer_span *span,
                              colibri_step_span *out) {
    int32_t T = batch->n_tokens, L = ctx->model->hp.n_layer;
    colibri_scratch *s = &ctx->s;
    *out = (colibri_step_span){T, 0, L};
    if (!span || span->n_tokens == 0) return COLIBRI_OK;
    int32_t n = span->n_tokens, begin = span->layer_begin, end = span->layer_end;
    if (n < 0 || n > T) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "layer span: n_tokens must be in [0, %d], got %d", T, n);
    }
    if (begin < 0 || end > L || begin >= end) {
        return colibri_error_set(COLIBRI_ERR_INVALID,
                                 "layer span: layers [%d, %d) must be a non-empty range within [0, n_layer=%d)",
                                 begin, end, L);
    }
    int32_t n_full = T - n;
    if (begin > 0) {   /* continues the carried states: the same tokens, untouched sequences */
        if (ctx->carry_n != n || ctx->carry_layer != begin) {
            return colibri_error_set(COLIBRI_ERR_INVALID,
                                     "layer span: %d tokens from layer %d continue no carried states "
                                     "(the context carries %d tokens stopped at layer %d)",
                                     n, begin, ctx->carry_n, ctx->carry_n ? ctx->carry_layer : 0);
        }
        for (int32_t i = 0; i < n; i++) {
            int32_t t = n_full + i;
            if (batch->token[t] != ctx->carry_token[i] || batch->pos[t] != ctx->carry_pos[i] ||
                batch->seq[t] != ctx->carry_seq[i]) {
                return colibri_error_set(COLIBRI_ERR_INVALID,
                                         "layer span: batch token %d is not the carried token %d (id, position "
                                         "and sequence must match)", t, i);
            }
        }
        /* s.seq_last_pos, reused: each carried sequence's first position, -1 for the others */
        for (int32_t q = 0; q < ctx->n_seq; q++) s->seq_last_pos[q] = -1;
        for (int32_t i = n - 1; i >= 0; i--) s->seq_last_pos[ctx->carry_seq[i]] = ctx->carry_pos[i];
        for (int32_t t = 0; t < n_full; t++) {
            if (s->seq_last_pos[batch->seq[t]] >= 0) {
                return colibri_error_set(COLIBRI_ERR_INVALID,
                                         "layer span: batch token %d belongs to sequence %d, whose carried "
                                         "tokens have not finished", t, batch->seq[t]);
            }
        }
        for (int32_t i = 0; i < n; i++) {
            int32_t seq = ctx->carry_seq[i];
            if (ctx->seq_len[seq] != s->seq_last_pos[seq]) {
                return colibri_error_set(COLIBRI_ERR_INVALID,
                                         "layer span: sequence %d changed (cached length %d) since its tokens "
                                         "from position %d were carried", seq, ctx->seq_len[seq],
                                         s->seq_last_pos[seq]);
            }
        }
    }
    if (end < L) {
        for (int32_t t = n_full; t < T; t++) {
            if (batch->want_logits && batch->want_logits[t]) {
                return colibri_error_set(COLIBRI_ERR_INVALID,
                                         "layer span: batch token %d wants logits but stops at layer %d of %d",
                                         t, end, L);
            }
        }
        for (int32_t t = T - 1; t >= n_full; t--) s->seq_len_next[batch->seq[t]] = batch->pos[t];
    }
    *out = (colibri_step_span){n_full, begin, end};
    return COLIBRI_OK;
}

typedef struct colibri_norm_task {
    const float *w;   /* w: [D] the norm's weight */
    const float *x;   /* x: [T, D] */
    float *h;         /* h: [T, D] */
    int64_t D;
    float eps;
} colibri_norm_task;

static void colibri_norm_range(void *arg, int64_t lo, int64_t hi) {
    const colibri_norm_task *task = (const colibri_norm_task *)arg;
    for (int64_t t = lo; t < hi; t++) colibri_rmsnorm_apply(task->x + t * task->D, task->w, task->D, task->eps,
                                                            task->h + t * task->D);
}

typedef struct colibri_embed_task {
    colibri_context *ctx;
    const colibri_batch *batch;
    int32_t n_embed;   /* tokens [0, n_embed) are embedded; the rest continue carried states */
} colibri_embed_task;

/* h: [T, D] = rmsnorm(x) * norm, for every token (over the pool for a prefill). */
static void colibri_norm_rows(colibri_context *ctx, const colibri_tensor *norm, const float *x,
                              float *h, int32_t T) {
    const colibri_hparams *hp = &ctx->model->hp;
    colibri_norm_task task = {colibri_vec_load(ctx, norm), x, h, hp->n_embd, hp->norm_eps};
    colibri_parallel_for(ctx, T, 2 * hp->n_embd, colibri_norm_range, &task);
}

void colibri_residual_rows(colibri_context *ctx, const float *y, int64_t lo, int64_t hi) {
    float r = ctx->model->residual_scale;
    int64_t D = ctx->model->hp.n_embd;
    float *x = ctx->s.x;   /* x: [T, D] */
    if (r == 1.0f) {
        for (int64_t i = lo * D; i < hi * D; i++) x[i] += y[i];
    } else {
        for (int64_t i = lo * D; i < hi * D; i++) x[i] += y[i] * r;
    }
}

/* x[t] += o[t] for tokens [lo, hi) (arg: the context). */
static void colibri_residual_range(void *arg, int64_t lo, int64_t hi) {
    colibri_context *ctx = (colibri_context *)arg;
    colibri_residual_rows(ctx, ctx->s.o, lo, hi);
}

/* Embedding rows (below n_embed) and RoPE tables of batch tokens [lo, hi). */
static void colibri_embed_range(void *arg, int64_t lo, int64_t hi) {
    const colibri_embed_task *task = (const colibri_embed_task *)arg;
    const colibri_model *m = task->ctx->model;
    const colibri_hparams *hp = &m->hp;
    const colibri_tensor *embd = &m->global[COLIBRI_T_TOKEN_EMBD];
    for (int64_t t = lo; t < hi; t++) {   /* x: [T, D] */
        float *x = task->ctx->s.x + t * hp->n_embd;
        if (t < task->n_embed) {
            colibri_row_to_f32(embd->data, embd->dtype, (int64_t)task->batch->token[t] * hp->n_embd, hp->n_embd,
                               x);
            if (m->embd_scale != 1.0f) {
                for (int64_t d = 0; d < hp->n_embd; d++) x[d] *= m->embd_scale;
            }
        }
        colibri_rope_table(m->rope_inv_freq, m->rope_dim, task->batch->pos[t], hp->rope_attn_factor,
                           task->ctx->s.rope_cs + t * hp->head_dim);   /* cos | sin of rope_dim/2 each */
    }
}

/* Dense SwiGLU MLP of layer `layer`: x += down(silu(gate h) * up h). */
static void colibri_dense_block(colibri_context *ctx, int32_t layer, int32_t T) {
    const colibri_layer *L = &ctx->model->layers[layer];
    colibri_scratch *s = &ctx->s;
    colibri_mlp mlp = {.gate = &L->t[COLIBRI_T_FFN_GATE], .up = &L->t[COLIBRI_T_FFN_UP],
                       .down = &L->t[COLIBRI_T_FFN_DOWN], .x = s->h, .act_gate = s->ff_gate, .act_up = s->ff_up,
                       .y = s->o, .n = T};
    colibri_mlp_run(ctx, &mlp, 1);
    colibri_parallel_for(ctx, T, ctx->model->hp.n_embd, colibri_residual_range, ctx);
}

/* Final norm of the wanted tokens among the first T (those that ran every
 * layer), then logits = W_out . h into out->logits. */
static void colibri_lm_head(colibri_context *ctx, const colibri_batch *batch, int32_t T,
                            const colibri_outputs *out) {
    const colibri_model *m = ctx->model;
    const colibri_hparams *hp = &m->hp;
    colibri_scratch *s = &ctx->s;
    int32_t n_wanted = 0;
    int64_t D = hp->n_embd;
    for (int32_t t = 0; t < T; t++) {
        int want = batch->want_logits ? batch->want_logits[t] != 0 : t == T - 1;
        if (want) s->wanted[n_wanted++] = t;
    }
    if (!out || !out->logits || n_wanted == 0) return;
    for (int32_t i = 0; i < n_wanted; i++) {   /* h: [n_wanted, D] wanted rows of x */
        memcpy(s->h + i * D, s->x + (int64_t)s->wanted[i] * D, (size_t)D * sizeof(float));
    }
    colibri_norm_rows(ctx, &m->global[COLIBRI_T_OUTPUT_NORM], s->h, s->h, n_wanted);
    const colibri_tensor *w_out = hp->tied_embeddings ? &m->global[COLIBRI_T_TOKEN_EMBD]
                                                      : &m->global[COLIBRI_T_OUTPUT];
    colibri_matmul_job head = {.w = w_out, .x = s->h, .x_stride = D, .y = out->logits,   /* [n_wanted, V] */
                               .y_stride = hp->n_vocab, .n = n_wanted};
    colibri_matmul_run(ctx, &head, 1);
    if (m->logit_scale != 1.0f) {
        for (int64_t i = 0; i < (int64_t)n_wanted * hp->n_vocab; i++) out->logits[i] /= m->logit_scale;
    }
}

COLIBRI_API int colibri_forward(colibri_context *ctx, const colibri_batch *batch,
                                const colibri_outputs *out) {
    return colibri_forward_span(ctx, batch, NULL, out);
}

static int colibri_forward_step(colibri_context *ctx, const colibri_batch *batch, const colibri_layer_span *span,
                                const colibri_outputs *out);

/* One step at a time per context: the step owns the context's pool, scratch and KV cache, so a
 * second thread's step at the same time is refused, never interleaved. */
COLIBRI_API int colibri_forward_span(colibri_context *ctx, const colibri_batch *batch,
                                     const colibri_layer_span *span, const colibri_outputs *out) {
    if (!ctx) return colibri_error_set(COLIBRI_ERR_INVALID, "forward: context is NULL");
    if (!colibri_context_claim(ctx, "forward")) return COLIBRI_ERR_STATE;
    int rc = colibri_forward_step(ctx, batch, span, out);
    colibri_context_release(ctx);
    return rc;
}

static int colibri_forward_step(colibri_context *ctx, const colibri_batch *batch, const colibri_layer_span *span,
                                const colibri_outputs *out) {
    size_t stack = colibri_thread_stack_bytes();
    if (stack < COLIBRI_THREAD_STACK_MIN) {   /* the caller runs thread 0's share: the kernels' frames */
        return colibri_error_set(COLIBRI_ERR_INVALID,
                                 "forward: the calling thread's stack is %zu KiB, the kernels need %zu KiB "
                                 "(raise `ulimit -s`, or call from a thread with a larger stack)",
                                 stack >> 10, COLIBRI_THREAD_STACK_MIN >> 10);
    }
    if (colibri_paging_check_process(ctx->paging) != COLIBRI_OK) return COLIBRI_ERR_STATE;
    colibri_profile_begin(ctx);
    colibri_step_span sp;
    int rc = colibri_batch_check(ctx, batch);
    if (rc == COLIBRI_OK) rc = colibri_span_check(ctx, batch, span, &sp);
    if (rc != COLIBRI_OK) return rc;
    const colibri_model *m = ctx->model;
    const colibri_hparams *hp = &m->hp;
    colibri_scratch *s = &ctx->s;
    int32_t T = batch->n_tokens;
    int64_t D = hp->n_embd;
    memcpy(ctx->seq_len, s->seq_len_next, (size_t)ctx->n_seq * sizeof(int32_t));

    colibri_embed_task embed = {ctx, batch, sp.begin == 0 ? T : sp.n_full};
    colibri_parallel_for(ctx, T, D + 16 * hp->head_dim, colibri_embed_range, &embed);
    if (sp.begin > 0) {   /* x: [T, D], rows [n_full, T) from carry: [T - n_full, D] */
        memcpy(s->x + (int64_t)sp.n_full * D, ctx->carry, (size_t)(T - sp.n_full) * (size_t)D * sizeof(float));
    }
    ctx->carry_n = 0;
    colibri_profile_mark(ctx, COLIBRI_STAGE_OTHER, -1);
    for (int32_t l = 0; l < hp->n_layer; l++) {
        colibri_batch part = *batch;   /* this layer's tokens: a prefix of the batch */
        part.n_tokens = l >= sp.begin && l < sp.end ? T : sp.n_full;
        if (part.n_tokens == 0) continue;
        colibri_norm_rows(ctx, &m->layers[l].t[COLIBRI_T_ATTN_NORM], s->x, s->h, part.n_tokens);
        colibri_profile_mark(ctx, COLIBRI_STAGE_OTHER, l);
        if (hp->kv_lora_rank > 0) {
            colibri_latent_attention_block(ctx, l, &part);
        } else {
            colibri_attention_block(ctx, l, &part);
        }
        colibri_profile_mark(ctx, COLIBRI_STAGE_ATTENTION, l);
        colibri_norm_rows(ctx, &m->layers[l].t[COLIBRI_T_FFN_NORM], s->x, s->h, part.n_tokens);
        colibri_profile_mark(ctx, COLIBRI_STAGE_OTHER, l);
        if (m->layer_is_moe[l]) {
            colibri_moe_block(ctx, l, part.n_tokens, out, T);   /* marks its own stages */
        } else {
            colibri_dense_block(ctx, l, part.n_tokens);
            colibri_profile_mark(ctx, COLIBRI_STAGE_EXPERTS, l);
        }
    }
    colibri_lm_head(ctx, batch, sp.end == hp->n_layer ? T : sp.n_full, out);
    colibri_profile_mark(ctx, COLIBRI_STAGE_LM_HEAD, -1);
    if (sp.end < hp->n_layer) {   /* carry: [T - n_full, D] the span's states for the next step */
        int32_t n = T - sp.n_full;
        memcpy(ctx->carry, s->x + (int64_t)sp.n_full * D, (size_t)n * (size_t)D * sizeof(float));
        memcpy(ctx->carry_token, batch->token + sp.n_full, (size_t)n * sizeof(int32_t));
        memcpy(ctx->carry_pos, batch->pos + sp.n_full, (size_t)n * sizeof(int32_t));
        memcpy(ctx->carry_seq, batch->seq + sp.n_full, (size_t)n * sizeof(int32_t));
        ctx->carry_n = n;
        ctx->carry_layer = sp.end;
    }
    return colibri_paging_step_status(ctx);   /* a failed expert read fails the step */
}
