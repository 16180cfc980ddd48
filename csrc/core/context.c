/*
 * context.c — colibri_context: ONE arena allocation holding the KV cache of
 * every sequence and all the scratch a step needs, sized from n_ctx, n_seq,
 * n_batch and the hyperparameters; the thread pool; per-sequence lengths.
 */
#define _DEFAULT_SOURCE 1   /* MAP_ANONYMOUS, madvise */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"
#include "paging.h"
#include "profile.h"
#include "topology.h"
#include "../kernels/quant.h"

#define COLIBRI_ALIGN 64
#define COLIBRI_HUGE_PAGE ((size_t)2 << 20)   /* x86-64 / arm64 PMD size: arena lengths round up to it */

/* An anonymous, zero-filled, lazily mapped region of at least `bytes`
 * (rounded up to COLIBRI_HUGE_PAGE), with transparent huge pages asked for
 * where the system has them; *huge says whether the kernel accepted. NULL if
 * the mapping fails. */
static void *colibri_arena_map(size_t bytes, size_t *mapped, int *huge) {
    size_t len = (bytes + COLIBRI_HUGE_PAGE - 1) & ~(COLIBRI_HUGE_PAGE - 1);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    *mapped = len;
    *huge = 0;
#ifdef MADV_HUGEPAGE
    *huge = madvise(p, len, MADV_HUGEPAGE) == 0;
#endif
    return p;
}

/* A bump layout over the arena. With base == NULL it only measures. */
typedef struct colibri_arena_plan {
    char *base;
    size_t used;
    int overflow;
} colibri_arena_plan;

/* Reserves elem*a*b*c*d bytes at the next 64-byte boundary (overflow-checked). */
static void *colibri_arena_take(colibri_arena_plan *p, size_t elem, size_t a, size_t b, size_t c,
                                size_t d) {
    size_t factors[4] = {a, b, c, d};
    size_t bytes = elem;
    for (int i = 0; i < 4; i++) {
        if (factors[i] != 0 && bytes > SIZE_MAX / factors[i]) p->overflow = 1;
        bytes *= factors[i];
    }
    size_t start = (p->used + (COLIBRI_ALIGN - 1)) & ~(size_t)(COLIBRI_ALIGN - 1);
    if (start < p->used || start + bytes < start) p->overflow = 1;
    if (p->overflow) return NULL;
    p->used = start + bytes;
    return p->base ? p->base + start : NULL;
}

static size_t colibri_max3(size_t a, size_t b, size_t c) {
    size_t ab = a > b ? a : b;
    return ab > c ? ab : c;
}

/* a*b*c, flagging p->overflow when size_t cannot hold it. */
static size_t colibri_size_mul3(colibri_arena_plan *p, size_t a, size_t b, size_t c) {
    size_t factors[3] = {a, b, c}, product = 1;
    for (int i = 0; i < 3; i++) {
        if (factors[i] != 0 && product > SIZE_MAX / factors[i]) p->overflow = 1;
        product *= factors[i];
    }
    return product;
}

/* Bytes of quantized activations one matmul run can need: at most T*(k+1)
 * distinct rows (the routed experts' gathered rows plus the shared expert's)
 * of at most X elements, once per quantized activation type the model uses. */
static size_t colibri_xq_bytes_per_row(const colibri_model *m, size_t X) {
    size_t bytes = 0;
    for (int32_t act = 0; act < COLIBRI_TYPE_COUNT; act++) {
        if (m->act_types & (1u << act)) bytes += (size_t)colibri_row_bytes(act, (int64_t)X);
    }
    return bytes;
}

/* Lays out (or, with p->base NULL, measures) every buffer of ctx. */
static void colibri_context_layout(colibri_context *ctx, colibri_arena_plan *p) {
    const colibri_hparams *hp = &ctx->model->hp;
    size_t T = (size_t)ctx->n_batch, D = (size_t)hp->n_embd;
    size_t Q = (size_t)hp->n_head * (size_t)hp->head_dim;
    size_t K = (size_t)hp->n_head_kv * (size_t)hp->head_dim;
    size_t E = (size_t)hp->n_expert, k = (size_t)hp->n_expert_used, Fe = (size_t)hp->n_ff_expert;
    size_t F = colibri_max3((size_t)hp->n_ff, (size_t)hp->n_ff_shared, 0);
    size_t f = sizeof(float), i32 = sizeof(int32_t);
    size_t S = (size_t)ctx->n_seq, L = (size_t)hp->n_layer, C = (size_t)ctx->n_ctx;
    colibri_scratch *s = &ctx->s;
    /* latent attention (all 0 without): H heads, latent R, cached row Kl, queries Qm, WO input Ov */
    int latent = hp->kv_lora_rank > 0;
    size_t H = latent ? (size_t)hp->n_head : 0, R = (size_t)hp->kv_lora_rank, Rq = (size_t)hp->q_lora_rank;
    size_t Kl = latent ? R + (size_t)hp->head_dim : 0;
    size_t Qm = H * ((size_t)hp->head_dim_nope + (size_t)hp->head_dim), Ov = H * (size_t)hp->head_dim_v;

    ctx->seq_len = colibri_arena_take(p, i32, S, 1, 1, 1);
    ctx->carry = colibri_arena_take(p, f, T, D, 1, 1);
    ctx->carry_token = colibri_arena_take(p, i32, T, 1, 1, 1);
    ctx->carry_pos = colibri_arena_take(p, i32, T, 1, 1, 1);
    ctx->carry_seq = colibri_arena_take(p, i32, T, 1, 1, 1);
    size_t kv = (size_t)colibri_type_traits_of(ctx->kv_dtype)->block_bytes;   /* bytes per cache element */
    ctx->k_cache = colibri_arena_take(p, kv, S, L, C, latent ? Kl : K);
    ctx->v_cache = colibri_arena_take(p, kv, S, L, C, latent ? 0 : K);
    s->x = colibri_arena_take(p, f, T, D, 1, 1);
    s->h = colibri_arena_take(p, f, T, D, 1, 1);
    s->q = colibri_arena_take(p, f, T, Q > Qm ? Q : Qm, 1, 1);
    s->k = colibri_arena_take(p, f, T, K > Kl ? K : Kl, 1, 1);
    s->v = colibri_arena_take(p, f, T, K, 1, 1);
    s->attn = colibri_arena_take(p, f, T, Q > Ov ? Q : Ov, 1, 1);
    s->q_a = colibri_arena_take(p, f, T, Rq, 1, 1);
    s->q_lat = colibri_arena_take(p, f, T, H, Kl, 1);
    s->attn_lat = colibri_arena_take(p, f, T, H, R, 1);
    s->head_w = colibri_arena_take(p, sizeof(colibri_tensor), H, 1, 1, 1);
    s->head_jobs = colibri_arena_take(p, sizeof(colibri_matmul_job), H, 1, 1, 1);
    s->o = colibri_arena_take(p, f, T, D, 1, 1);
    s->wvec = colibri_arena_take(p, f, colibri_max3(colibri_max3(D, Q, K), colibri_max3(E, Rq, R), 0), 1, 1, 1);
    s->attn_vec_stride = (int64_t)colibri_max3(Q, K, 1);
    s->attn_vecs = colibri_arena_take(p, f, 5, colibri_max3(Q, K, 1), 1, 1);
    s->rope_cs = colibri_arena_take(p, f, T, (size_t)hp->head_dim, 1, 1);
    s->scores = colibri_arena_take(p, f, (size_t)ctx->n_threads, COLIBRI_ATTN_TILE,
                                   (size_t)colibri_score_stride(ctx->n_ctx), 1);
    s->ff_gate = colibri_arena_take(p, f, T, F, 1, 1);
    s->ff_up = colibri_arena_take(p, f, T, F, 1, 1);
    s->router_logits = colibri_arena_take(p, f, T, E, 1, 1);
    s->router_work = colibri_arena_take(p, f, T, (size_t)COLIBRI_ROUTER_WORK_FLOATS(E), 1, 1);
    s->router_iwork = colibri_arena_take(p, i32, T, (size_t)COLIBRI_ROUTER_WORK_INTS(E), 1, 1);
    s->shared_logit = colibri_arena_take(p, f, T, 1, 1, 1);
    s->sel_expert = colibri_arena_take(p, i32, T, k, 1, 1);
    s->sel_gate = colibri_arena_take(p, f, T, k, 1, 1);
    s->expert_count = colibri_arena_take(p, i32, E, 1, 1, 1);
    s->expert_start = colibri_arena_take(p, i32, E + 1, 1, 1, 1);
    s->sorted_pair = colibri_arena_take(p, i32, T, k, 1, 1);
    s->pair_row = colibri_arena_take(p, i32, T, k, 1, 1);
    s->sorted_token = colibri_arena_take(p, i32, T, k, 1, 1);
    s->xg = colibri_arena_take(p, f, T, k, D, 1);
    s->eg = colibri_arena_take(p, f, T, k, Fe, 1);
    s->eu = colibri_arena_take(p, f, T, k, Fe, 1);
    s->yg = colibri_arena_take(p, f, T, k, D, 1);
    /* one run's quantized rows: the experts' T*(k+1), or latent attention's per-head runs
     * (up to one chunk of H jobs, T rows each, of head_dim_nope or R columns) */
    size_t X = colibri_max3(colibri_max3(D, Q, F), colibri_max3(Fe, Ov, Rq), 0);
    size_t xq_moe = colibri_size_mul3(p, colibri_xq_bytes_per_row(ctx->model, X), T, k + 1);
    size_t head_chunk = (size_t)COLIBRI_MATMUL_JOBS_MAX(E) < H ? (size_t)COLIBRI_MATMUL_JOBS_MAX(E) : H;
    size_t X_head = colibri_max3((size_t)hp->head_dim_nope, R, 0);
    size_t xq_heads = colibri_size_mul3(p, colibri_xq_bytes_per_row(ctx->model, X_head), T, head_chunk);
    s->xq = colibri_arena_take(p, xq_moe > xq_heads ? xq_moe : xq_heads, 1, 1, 1, 1);
    s->aq = colibri_arena_take(p, colibri_xq_bytes_per_row(ctx->model, X), T, k + 1, 1, 1);
    s->job_xq = colibri_arena_take(p, sizeof(void *), (size_t)COLIBRI_MATMUL_JOBS_MAX(E), 1, 1, 1);
    s->xq_jobs = colibri_arena_take(p, i32, (size_t)COLIBRI_MATMUL_JOBS_MAX(E), 1, 1, 1);
    s->wdeq_cols = (int64_t)(X > X_head ? X : X_head);   /* the longest row any weight matmul reads */
    s->wdeq = colibri_arena_take(p, f, ctx->model->act_types ? (size_t)ctx->n_threads : 0, COLIBRI_EXACT_ROWS,
                                 (size_t)s->wdeq_cols, 1);
    s->job_x_bytes = colibri_arena_take(p, sizeof(int64_t), (size_t)COLIBRI_MATMUL_JOBS_MAX(E), 1, 1, 1);
    s->cuts = colibri_arena_take(p, sizeof(colibri_job_cut), (size_t)COLIBRI_MATMUL_JOBS_MAX(E), 1, 1, 1);
    s->job_seconds = colibri_arena_take(p, sizeof(double), (size_t)ctx->n_threads,
                                        (size_t)COLIBRI_MATMUL_JOBS_MAX(E), 1, 1);
    s->mlp_aq = colibri_arena_take(p, sizeof(void *), E + 1, 1, 1, 1);
    s->mlps = colibri_arena_take(p, sizeof(colibri_mlp), E + 1, 1, 1, 1);
    s->jobs = colibri_arena_take(p, sizeof(colibri_matmul_job), 2 * (E + 1), 1, 1, 1);
    s->wanted = colibri_arena_take(p, i32, T, 1, 1, 1);
    s->seq_len_next = colibri_arena_take(p, i32, S, 1, 1, 1);
    s->seq_last_pos = colibri_arena_take(p, i32, S, 1, 1, 1);
}

COLIBRI_API colibri_context *colibri_context_create(const colibri_model *m, int32_t n_ctx,
                                                    int32_t n_seq, int32_t n_batch,
                                                    int32_t n_threads) {
    return colibri_context_create_kv(m, n_ctx, n_seq, n_batch, n_threads, COLIBRI_DTYPE_F32);
}

COLIBRI_API colibri_context *colibri_context_create_kv(const colibri_model *m, int32_t n_ctx,
                                                       int32_t n_seq, int32_t n_batch,
                                                       int32_t n_threads, int32_t kv_dtype) {
    colibri_context_params params = {n_ctx, n_seq, n_batch, n_threads, kv_dtype, COLIBRI_PLACE_CORES};
    return colibri_context_create_params(m, &params);
}

/* On a machine of several NUMA nodes, where the arena's pages go when first
 * touched: ISOLATE binds all of it to the pool's node; otherwise each KV
 * head's rows (one contiguous span per sequence, layer and head) go to the
 * node of the thread that attends to that head in a decode step (the
 * attention task deals query group g to thread g % n_threads), and for
 * DISTRIBUTE the rest is interleaved over the nodes. A latent cache (one row
 * per position that every head reads) follows the rest. One node: nothing. */
static void colibri_context_place_memory(colibri_context *ctx, int32_t placement, const colibri_thread_plan *plan) {
    if (plan->n_nodes < 2 || placement == COLIBRI_PLACE_NONE) return;
    if (placement == COLIBRI_PLACE_ISOLATE) {
        colibri_numa_bind(ctx->arena, ctx->arena_bytes, &plan->nodes[0], 1);
        return;
    }
    if (placement == COLIBRI_PLACE_DISTRIBUTE) colibri_numa_bind(ctx->arena, ctx->arena_bytes, plan->nodes, plan->n_threads);
    const colibri_hparams *hp = &ctx->model->hp;
    if (hp->kv_lora_rank > 0) return;
    int64_t span = (int64_t)ctx->n_ctx * hp->head_dim * colibri_type_traits_of(ctx->kv_dtype)->block_bytes;
    for (int64_t r = 0; r < (int64_t)ctx->n_seq * hp->n_layer * hp->n_head_kv; r++) {
        const int32_t *node = &plan->nodes[(r % hp->n_head_kv) % plan->n_threads];
        colibri_numa_bind((char *)ctx->k_cache + r * span, (size_t)span, node, 1);
        colibri_numa_bind((char *)ctx->v_cache + r * span, (size_t)span, node, 1);
    }
}

COLIBRI_API colibri_context *colibri_context_create_params(const colibri_model *m,
                                                           const colibri_context_params *params) {
    if (!params) {
        colibri_error_set(COLIBRI_ERR_INVALID, "context_create: params is NULL");
        return NULL;
    }
    int32_t n_ctx = params->n_ctx, n_seq = params->n_seq, n_batch = params->n_batch;
    int32_t n_threads = params->n_threads, kv_dtype = params->kv_dtype;
    if (kv_dtype != COLIBRI_DTYPE_F32 && kv_dtype != COLIBRI_DTYPE_F16) {
        colibri_error_set(COLIBRI_ERR_INVALID, "context_create: kv_dtype must be F32 (%d) or F16 (%d), got %d",
                          COLIBRI_DTYPE_F32, COLIBRI_DTYPE_F16, kv_dtype);
        return NULL;
    }
    if (!m) {
        colibri_error_set(COLIBRI_ERR_INVALID, "context_create: model is NULL");
        return NULL;
    }
    if (!m->finalized) {
        colibri_error_set(COLIBRI_ERR_STATE, "context_create: model is not finalized");
        return NULL;
    }
    if (n_ctx <= 0 || n_seq <= 0 || n_batch <= 0) {
        colibri_error_set(COLIBRI_ERR_INVALID,
                          "context_create: n_ctx, n_seq and n_batch must be > 0, got %d, %d, %d",
                          n_ctx, n_seq, n_batch);
        return NULL;
    }
    if (n_threads > COLIBRI_MAX_THREADS) {
        colibri_error_set(COLIBRI_ERR_INVALID, "context_create: n_threads must be <= %d, got %d",
                          COLIBRI_MAX_THREADS, n_threads);
        return NULL;
    }
    /* the MoE block counts a step's (token, slot) pairs in int32 */
    if ((int64_t)n_batch * m->hp.n_expert_used > INT32_MAX) {
        colibri_error_set(COLIBRI_ERR_INVALID, "context_create: n_batch=%d x n_expert_used=%d (token, expert) "
                          "pairs per step exceed %d", n_batch, m->hp.n_expert_used, INT32_MAX);
        return NULL;
    }
    colibri_thread_plan plan;
    if (colibri_placement_plan(params->placement, n_threads, &plan) != COLIBRI_OK) return NULL;
    n_threads = plan.n_threads;
    colibri_context *ctx = (colibri_context *)calloc(1, sizeof *ctx);
    if (!ctx) {
        colibri_thread_plan_free(&plan);
        colibri_error_set(COLIBRI_ERR_NOMEM, "out of memory creating a context");
        return NULL;
    }
    ctx->model = m;
    ctx->n_ctx = n_ctx;
    ctx->n_seq = n_seq;
    ctx->n_batch = n_batch;
    ctx->n_threads = n_threads;
    ctx->kv_dtype = kv_dtype;

    colibri_arena_plan arena = {NULL, 0, 0};
    colibri_context_layout(ctx, &arena);
    if (arena.overflow) {
        free(ctx);
        colibri_thread_plan_free(&plan);
        colibri_error_set(COLIBRI_ERR_INVALID, "context_create: n_ctx=%d, n_seq=%d, n_batch=%d "
                          "need more memory than size_t can count", n_ctx, n_seq, n_batch);
        return NULL;
    }
    size_t total = (arena.used + (COLIBRI_ALIGN - 1)) & ~(size_t)(COLIBRI_ALIGN - 1);
    if (total > SIZE_MAX - COLIBRI_HUGE_PAGE ||
        !(ctx->arena = colibri_arena_map(total, &ctx->arena_bytes, &ctx->huge_pages))) {
        free(ctx);
        colibri_thread_plan_free(&plan);
        colibri_error_set(COLIBRI_ERR_NOMEM, "out of memory: context arena of %zu bytes "
                          "(n_ctx=%d, n_seq=%d, n_batch=%d)", total, n_ctx, n_seq, n_batch);
        return NULL;
    }
    arena = (colibri_arena_plan){(char *)ctx->arena, 0, 0};
    colibri_context_layout(ctx, &arena);
    colibri_context_place_memory(ctx, params->placement, &plan);
    /* The rest of the arena is written before it is read; leaving it untouched
     * lets the OS map the KV cache lazily (it reads as zeros until then), each
     * page on the node of the thread that first writes it. */
    memset(ctx->seq_len, 0, (size_t)n_seq * sizeof(int32_t));

    ctx->pool = colibri_threadpool_create(n_threads, plan.pin ? plan.cpus : NULL);
    ctx->pinned = ctx->pool ? colibri_threadpool_pinned(ctx->pool) : 0;
    colibri_thread_plan_free(&plan);
    if (!ctx->pool) {
        munmap(ctx->arena, ctx->arena_bytes);
        free(ctx);
        return NULL;
    }
    return ctx;
}

COLIBRI_API void colibri_context_free(colibri_context *ctx) {
    if (!ctx) return;
    colibri_paging_free(ctx->paging);
    colibri_profile_free(ctx->profile);
    colibri_threadpool_free(ctx->pool);
    munmap(ctx->arena, ctx->arena_bytes);
    free(ctx);
}

COLIBRI_API int32_t colibri_context_threads(const colibri_context *ctx) {
    return ctx ? ctx->n_threads : -1;
}

COLIBRI_API int32_t colibri_context_pinned(const colibri_context *ctx) {
    return ctx ? ctx->pinned : -1;
}

int colibri_context_claim(colibri_context *ctx, const char *what) {
    if (!__atomic_exchange_n(&ctx->stepping, 1, __ATOMIC_ACQUIRE)) return 1;
    colibri_error_set(COLIBRI_ERR_STATE, "%s: the context is running a step on another thread "
                                         "(one step at a time per context)", what);
    return 0;
}

void colibri_context_release(colibri_context *ctx) {
    __atomic_store_n(&ctx->stepping, 0, __ATOMIC_RELEASE);
}

COLIBRI_API int colibri_context_set_exact(colibri_context *ctx, int exact) {
    if (!ctx) return colibri_error_set(COLIBRI_ERR_INVALID, "set_exact: context is NULL");
    if (!colibri_context_claim(ctx, "set_exact")) return COLIBRI_ERR_STATE;
    ctx->exact = exact != 0;
    colibri_context_release(ctx);
    return COLIBRI_OK;
}

COLIBRI_API int32_t colibri_context_kv_type(const colibri_context *ctx) {
    return ctx ? ctx->kv_dtype : -1;
}

COLIBRI_API uint64_t colibri_context_arena_bytes(const colibri_context *ctx) {
    return ctx ? (uint64_t)ctx->arena_bytes : 0;
}

COLIBRI_API int32_t colibri_context_huge_pages(const colibri_context *ctx) {
    return ctx ? ctx->huge_pages : -1;
}

COLIBRI_API int32_t colibri_seq_len(const colibri_context *ctx, int32_t seq) {
    if (!ctx || seq < 0 || seq >= ctx->n_seq) return -1;
    return ctx->seq_len[seq];
}

COLIBRI_API int colibri_seq_clear(colibri_context *ctx, int32_t seq) {
    if (!ctx) return colibri_error_set(COLIBRI_ERR_INVALID, "seq_clear: context is NULL");
    if (seq < 0 || seq >= ctx->n_seq) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "seq_clear: sequence %d out of range [0, %d)",
                                 seq, ctx->n_seq);
    }
    if (!colibri_context_claim(ctx, "seq_clear")) return COLIBRI_ERR_STATE;
    ctx->seq_len[seq] = 0;
    ctx->carry_n = 0;   /* a carried span may hold the sequence's tokens */
    colibri_context_release(ctx);
    return COLIBRI_OK;
}
