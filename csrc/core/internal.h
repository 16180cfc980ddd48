/*
 * internal.h — structures and functions shared by the files of csrc/core/
 * (never installed). State is split three ways, as in llama2.c:
 * immutable hyperparameters + read-only weight views (colibri_model),
 * KV cache + scratch allocated once (colibri_context).
 */
#ifndef COLIBRI_INTERNAL_H
#define COLIBRI_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "colibri.h"
#include "threadpool.h"

/* ---- errors (error.c) ------------------------------------------------------ */
/* Sets this thread's last error (printf-style, one line) and returns status. */
int colibri_error_set(int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- model (model.c) ------------------------------------------------------- */
/* A view of one weight the caller keeps alive: row-major [rows, cols]. */
typedef struct colibri_tensor {
    const void *data;   /* NULL until set */
    int32_t dtype;      /* colibri_dtype */
    int64_t rows, cols;
} colibri_tensor;

#define COLIBRI_EXPERT_KINDS 3   /* EXPERT_GATE, EXPERT_UP, EXPERT_DOWN */
#define COLIBRI_ATTN_TILE 4      /* queries of one sequence that attention scores together */
#define COLIBRI_MAX_THREADS 512  /* a context's (and the bandwidth probe's) thread limit */
#define COLIBRI_EXACT_ROWS 16    /* block-type rows exact mode dequantizes at once per thread (a gemm panel) */

/* Row stride of the attention score scratch: n_ctx scores plus one attention
 * sink, rounded up to 16 floats so every row stays 64-byte aligned. */
static inline int64_t colibri_score_stride(int32_t n_ctx) {
    return ((int64_t)n_ctx + 16) & ~(int64_t)15;
}

/* A file the caller mapped at `base` from offset 0 (colibri_model_add_file):
 * where paging reads the expert tensors that point into [base, base + size). */
typedef struct colibri_source {
    char *path;
    const char *base;
    uint64_t size;
} colibri_source;

typedef struct colibri_layer {
    colibri_tensor t[COLIBRI_T_COUNT];  /* per-layer tensors by kind (expert kinds unused) */
    colibri_tensor *experts;            /* experts: [n_expert, 3] gate, up, down */
} colibri_layer;

/* A model's routing rule (colibri.h, hparams router_*), resolved once:
 * n_group == 1 means no groups, scale == 1 no scaling. */
typedef struct colibri_router {
    int32_t n_expert, k;
    int32_t score;                         /* colibri_router_score */
    int32_t n_group, group_used, group_top;
    int32_t renorm;
    float norm_min, norm_eps, scale;
} colibri_router;

/* Scratch one token's routing needs (router.c): floats s, choice and group
 * scores [3E]; ints [E]. */
#define COLIBRI_ROUTER_WORK_FLOATS(E) (3 * (int64_t)(E))
#define COLIBRI_ROUTER_WORK_INTS(E) ((int64_t)(E))

struct colibri_model {
    colibri_hparams hp;          /* the two arrays point at the copies below */
    colibri_router router;       /* from hp (MoE models) */
    int32_t rope_dim;            /* hp's, with its 0 default resolved: the rotated dims per head */
    float embd_scale, residual_scale, logit_scale;   /* hp's, with 0 resolved to 1 */
    float *rope_inv_freq;        /* rope_inv_freq: [head_dim/2] */
    uint8_t *layer_is_moe;       /* layer_is_moe: [n_layer] */
    int32_t *layer_window;       /* layer_window: [n_layer] each layer's sliding window (0 = full),
                                    hp.layer_window or else sliding_window for every layer */
    colibri_tensor global[3];    /* TOKEN_EMBD, OUTPUT_NORM, OUTPUT */
    colibri_layer *layers;       /* layers: [n_layer] */
    uint32_t act_types;          /* bit t set: some weight's vec_dot takes activations of
                                    quantized type t (Q8_H, Q8_S); sizes ctx scratch xq */
    colibri_file *file;          /* the mapped file the weights live in (colibri_model_load),
                                    or NULL when the caller owns the weights' memory */
    colibri_source *sources;     /* sources: [n_sources] files experts can be paged from */
    int32_t n_sources;
    int finalized;
};

/* The weight of (kind, layer, expert); no range checks (callers validated). */
const colibri_tensor *colibri_model_tensor(const colibri_model *m, int32_t kind, int32_t layer,
                                           int32_t expert);

/* ---- context (context.c) ---------------------------------------------------- */
/* A bias row: elements [at, at + n) of the vector tensor t (F32, F16 or BF16),
 * e.g. row e of a stacked [E, F] expert bias is at = e * F. t NULL: no bias. */
typedef struct colibri_bias {
    const colibri_tensor *t;
    int64_t at;
} colibri_bias;

/* One matrix product of a batched matmul: y[t, r] = W[r, :] . x[t, :] (+ bias[r])
 * for t in [0, n), r in [0, w->rows). */
typedef struct colibri_matmul_job {
    const colibri_tensor *w;
    const float *x;      /* x: [n, w->cols], row stride x_stride (or the rows x_rows picks) */
    int64_t x_stride;
    float *y;            /* y: [n, w->rows], row stride y_stride */
    int64_t y_stride;
    int32_t n;
    /* Optional gated-MLP pair (same dtype and shape as w): the thread that owns
     * rows [r0, r1) also computes y_up = w_up x (+ bias_up) there, then
     * y = act(y, y_up) with the model's ffn_act (colibri_ffn_act_apply). */
    const colibri_tensor *w_up;
    float *y_up;         /* y_up: [n, w->rows], row stride y_stride; scratch */
    colibri_bias bias;      /* added to y before the activation */
    colibri_bias bias_up;   /* added to y_up */
    /* Gathered input: x_rows: [n] which rows of x (stride x_stride) token t
     * is; block types quantize them straight from x, float types copy them
     * into x_gather: [n, w->cols] scratch (unused when n == 1). */
    const int32_t *x_rows;
    float *x_gather;
    /* x already quantized to the weight's activation type: [n] contiguous rows (x unused). */
    const void *xq;
    /* Epilogue: y's rows (after the bias and the activation) also quantized,
     * block by block as each thread finishes them, into y_q: [n] contiguous
     * rows of type y_q_type (a later matmul's xq). Rows are then split at
     * multiples of its block. */
    void *y_q;
    int32_t y_q_type;
    int32_t profile_id;     /* 1 + the routed expert this job is (--profile's per-expert table), 0: none */
} colibri_matmul_job;

/* One job's cut into units of work for a run (matmul.c). */
typedef struct colibri_job_cut {
    int64_t rg;          /* rows per row group */
    int64_t n_rg;        /* row groups (the last may be short) */
    int32_t n_tc;        /* token chunks (the last may be short) */
    double group_cost;   /* cost of a full row group over all its token chunks */
    double unit_cost;    /* cost of a full row group's full token chunk */
    double last_cost;    /* the last row group's full token chunk */
    double begin;        /* cost before this job in the run */
} colibri_job_cut;

/* A matmul pool run takes at most this many jobs (more are run in chunks):
 * one step's gate+up jobs of every expert and the shared expert, and >= 3 (Q, K, V). */
#define COLIBRI_MATMUL_JOBS_MAX(n_expert) (2 * ((int64_t)(n_expert) + 1) + 1)

/* One gated MLP over n rows: y = down(act(gate x + b_gate, up x + b_up)) + b_down,
 * act the model's ffn_act (silu(g) * u by default); biases optional. */
typedef struct colibri_mlp {
    const colibri_tensor *gate, *up, *down;
    const float *x;      /* x: [n, D] contiguous (or the rows x_rows picks) */
    float *act_gate;     /* act_gate: [n, F] scratch (holds the activation after) */
    float *act_up;       /* act_up: [n, F] scratch */
    float *y;            /* y: [n, D] contiguous */
    int32_t n;
    colibri_bias gate_bias, up_bias, down_bias;
    const int32_t *x_rows;   /* optional: [n] the rows of x (stride D) to use, gathered into x_gather */
    float *x_gather;         /* x_gather: [n, D] scratch for float weights when x_rows is set */
    int32_t profile_id;      /* 1 + the routed expert (--profile), 0: none */
} colibri_mlp;

/* Scratch for one step of up to T = n_batch tokens (D = n_embd, Q, K as in
 * colibri.h, E = n_expert, k = n_expert_used, Fe = n_ff_expert,
 * F = max(n_ff, n_ff_shared); latent attention: H = n_head, R = kv_lora_rank,
 * Kl = R + head_dim the cached row, Qm = H*(head_dim_nope + head_dim) the
 * queries, Rq = q_lora_rank, and q, k, attn are at least [T, Qm], [T, Kl],
 * [T, H*head_dim_v]). All inside the context's one arena. */
typedef struct colibri_scratch {
    float *x;              /* x: [T, D] residual stream */
    float *h;              /* h: [T, D] normed input of a block */
    float *q;              /* q: [T, Q] (latent attention: [T, Qm]) */
    float *k;              /* k: [T, K] (latent attention: [T, Kl] latent rows to cache) */
    float *v;              /* v: [T, K] */
    float *attn;           /* attn: [T, Q] attention output before Wo (latent: [T, H*head_dim_v]) */
    float *q_a;            /* q_a: [T, Rq] the query latent (latent attention with q_lora_rank) */
    float *q_lat;          /* q_lat: [T, H, Kl] queries with the key up-projection absorbed */
    float *attn_lat;       /* attn_lat: [T, H, R] attention output over the latent rows */
    colibri_tensor *head_w;    /* head_w: [H] one head's rows of WK_B or WV_B (latent attention) */
    colibri_matmul_job *head_jobs;   /* head_jobs: [H] one matmul per head (latent attention) */
    float *o;              /* o: [T, D] block output (Wo, dense MLP, shared expert) */
    float *wvec;           /* wvec: [max(D, Q, K, E)] a 1-D weight converted to f32 */
    float *attn_vecs;      /* attn_vecs: [5, attn_vec_stride] a layer's q/k/v biases and q/k norms in f32 */
    int64_t attn_vec_stride;   /* max(Q, K) */
    float *rope_cs;        /* rope_cs: [T, head_dim] cos | sin per token */
    float *scores;         /* scores: [n_threads, COLIBRI_ATTN_TILE, colibri_score_stride(n_ctx)]
                              attention probabilities (+ the sink) */
    float *ff_gate;        /* ff_gate: [T, F] dense / shared MLP gate activations */
    float *ff_up;          /* ff_up: [T, F] */
    float *router_logits;  /* router_logits: [T, E] */
    float *router_work;    /* router_work: [T, COLIBRI_ROUTER_WORK_FLOATS(E)] token scores (a row per
                              token that may be selected at once) */
    int32_t *router_iwork; /* router_iwork: [T, COLIBRI_ROUTER_WORK_INTS(E)] */
    float *shared_logit;   /* shared_logit: [T] shared-expert router logit */
    int32_t *sel_expert;   /* sel_expert: [T, k] top-k experts */
    float *sel_gate;       /* sel_gate: [T, k] their gates */
    int32_t *expert_count; /* expert_count: [E] pairs per expert */
    int32_t *expert_start; /* expert_start: [E + 1] first sorted slot of each expert */
    int32_t *sorted_pair;  /* sorted_pair: [T*k] pair id t*k+slot, grouped by expert */
    int32_t *pair_row;     /* pair_row: [T*k] inverse: pair id → row in xg / yg */
    int32_t *sorted_token; /* sorted_token: [T*k] the token of each sorted pair (its row of h) */
    float *xg;             /* xg: [T*k, D] h rows gathered in expert order (float expert weights) */
    float *eg;             /* eg: [T*k, Fe] routed expert gate activations */
    float *eu;             /* eu: [T*k, Fe] routed expert up activations */
    float *yg;             /* yg: [T*k, D] routed expert outputs, expert order */
    void *xq;              /* xq: one matmul run's activation rows quantized per block: at
                              most T*(k+1) rows of X = max(D, Q, F, Fe) per quantized
                              activation type in use; empty when no weight is a block type */
    void *aq;              /* aq: the same size again: MLP activations quantized in the gate/up
                              run's epilogue for the down run (which fills xq meanwhile) */
    const void **job_xq;   /* job_xq: [COLIBRI_MATMUL_JOBS_MAX(E)] the rows each job's kernel reads */
    int64_t *job_x_bytes;  /* job_x_bytes: [COLIBRI_MATMUL_JOBS_MAX(E)] bytes between those rows */
    colibri_job_cut *cuts; /* cuts: [COLIBRI_MATMUL_JOBS_MAX(E)] each job's units of work */
    double *job_seconds;   /* job_seconds: [n_threads, COLIBRI_MATMUL_JOBS_MAX(E)] thread time per job
                              (profiling only) */
    void **mlp_aq;         /* mlp_aq: [E + 1] each MLP's activations quantized in its epilogue, or NULL */
    int32_t *xq_jobs;      /* xq_jobs: [COLIBRI_MATMUL_JOBS_MAX(E)] the jobs whose rows a run quantizes */
    float *wdeq;           /* wdeq: [n_threads, COLIBRI_EXACT_ROWS, wdeq_cols] block-type weight rows
                              dequantized for exact mode; empty when no weight is a block type */
    int64_t wdeq_cols;     /* the longest row any weight matmul reads */
    colibri_mlp *mlps;     /* mlps: [E + 1] one step's MLPs (experts + shared) */
    colibri_matmul_job *jobs;  /* jobs: [2*(E + 1)] one pool run's matmuls */
    int32_t *wanted;       /* wanted: [T] token indices whose logits are wanted */
    int32_t *seq_len_next; /* seq_len_next: [n_seq] lengths while validating a batch */
    int32_t *seq_last_pos; /* seq_last_pos: [n_seq] last position seen in this batch */
} colibri_scratch;

struct colibri_context {
    const colibri_model *model;
    int32_t n_ctx, n_seq, n_batch, n_threads;
    colibri_threadpool *pool;
    int32_t pinned;         /* 1 if the pool's workers are pinned to CPUs of their own */
    void *arena;            /* the one allocation holding everything below (mmap) */
    size_t arena_bytes;     /* its mapped length */
    int huge_pages;         /* 1 if the kernel accepted MADV_HUGEPAGE for it */
    int32_t *seq_len;       /* seq_len: [n_seq] cached positions per sequence */
    float *carry;           /* carry: [n_batch, n_embd] hidden states of a layer-sliced span between steps */
    int32_t *carry_token;   /* carry_token: [n_batch] the carried tokens' ids */
    int32_t *carry_pos;     /* carry_pos: [n_batch] their positions */
    int32_t *carry_seq;     /* carry_seq: [n_batch] their sequences */
    int32_t carry_n;        /* tokens carried (0: none) */
    int32_t carry_layer;    /* the layer they run next */
    int32_t stepping;       /* 1 while a step or a call that changes what steps read runs (atomic;
                               colibri_context_claim): a second caller is refused */
    void *k_cache;          /* k_cache: [n_seq, n_layer, n_head_kv, n_ctx, head_dim] post-RoPE keys, kv_dtype;
                               latent attention: [n_seq, n_layer, n_ctx, Kl] latent rows */
    void *v_cache;          /* v_cache: [n_seq, n_layer, n_head_kv, n_ctx, head_dim] values, kv_dtype
                               (empty for latent attention) */
    int32_t kv_dtype;       /* COLIBRI_DTYPE_F32 or COLIBRI_DTYPE_F16 */
    int exact;              /* colibri_context_set_exact: block-type weights against f32 activations */
    colibri_scratch s;
    struct colibri_profile *profile;   /* stage timers while profiling (colibri_profile_enable),
                                          else NULL */
    struct colibri_paging *paging;     /* the expert cache when the context pages its experts
                                          (colibri_context_page_experts), else NULL */
};

/* One caller at a time per context (context.c): a forward step, or a call that changes what a
 * step reads (the KV lengths, the precision, paging, pins, the profile). 1: ctx is the caller's
 * until colibri_context_release; 0: a step runs on another thread, COLIBRI_ERR_STATE is set
 * (the message names `what`) and nothing may change. */
int colibri_context_claim(colibri_context *ctx, const char *what);
void colibri_context_release(colibri_context *ctx);

/* ---- compute (forward.c, attention.c, moe.c, mlp.c) -------------------------- */
/* Quantizes the activations of block-type jobs into s.xq (once per distinct
 * (x, n, activation type) in the run), then runs every job in one pool run;
 * the output is split over threads by (job, rows, tokens), so each y element
 * is computed by one thread, one dot call. */
void colibri_matmul_run(colibri_context *ctx, const colibri_matmul_job *jobs, int32_t n_jobs);
/* Runs fn(arg, lo, hi) over [0, n) items: on the calling thread alone when
 * n * item_cost (arbitrary units, ~1 per float touched) is small, else in
 * static shares over the pool. For loops whose items are independent. */
typedef void (*colibri_range_fn)(void *arg, int64_t lo, int64_t hi);
void colibri_parallel_for(colibri_context *ctx, int64_t n, int64_t item_cost, colibri_range_fn fn, void *arg);
/* Runs a set of gated MLPs with two pool runs (gate+up, then down). */
void colibri_mlp_run(colibri_context *ctx, const colibri_mlp *mlps, int32_t n_mlps);
/* g: [n] <- act(g, u) for the model's ffn_act (SWIGLU through the ISA table). */
void colibri_ffn_act_apply(const colibri_hparams *hp, float *g, const float *u, int64_t n);
/* w (any dtype, [1, n]) → ctx->s.wvec as f32; returns ctx->s.wvec. */
float *colibri_vec_load(colibri_context *ctx, const colibri_tensor *w);

/* Rows [lo, hi) of x: [T, D] += the same rows of y: [T, D] (times
 * residual_scale where it is not 1): every block's residual add. */
void colibri_residual_rows(colibri_context *ctx, const float *y, int64_t lo, int64_t hi);
/* Attention block of layer `layer` over the batch: reads s.h, adds the
 * projected attention output into s.x, writes this batch's K/V into the cache. */
void colibri_attention_block(colibri_context *ctx, int32_t layer, const colibri_batch *batch);
/* The same for latent KV attention (kv_lora_rank > 0, attention_latent.c). */
void colibri_latent_attention_block(colibri_context *ctx, int32_t layer, const colibri_batch *batch);
/* MoE block of layer `layer`: reads s.h [T, D], adds the MoE output into s.x,
 * writes route outputs for this layer when asked (rows 0..T-1 of the outputs'
 * [n_layer, out_tokens, ...] arrays: the step's batch may be longer than T). */
void colibri_moe_block(colibri_context *ctx, int32_t layer, int32_t n_tokens,
                       const colibri_outputs *out, int32_t out_tokens);

/* MoE stages, exposed for tests of the C core. */
/* The routing fields' checks (colibri_model_create's, for models with MoE
 * layers, and colibri_route's); 0 or COLIBRI_ERR_INVALID with the error set. */
int colibri_router_check(const colibri_hparams *hp);
void colibri_router_from_hparams(const colibri_hparams *hp, colibri_router *r);
/* ROUTER: one token's logits [E] → experts [k] by descending choice score
 * (ties to the lower index) and their gates [k], by the rule r (colibri.h
 * describes the steps). sel_bias: [E] or NULL; work, iwork:
 * COLIBRI_ROUTER_WORK_FLOATS / _INTS scratch. Allocates nothing. */
void colibri_router_select(const colibri_router *r, const float *logits, const float *sel_bias, float *work,
                           int32_t *iwork, int32_t *experts, float *gates);
/* DISPATCHER: counting sort of the n_tokens*k (token, slot) pairs by expert.
 * count: [E], start: [E+1], sorted_pair: [T*k], pair_row: [T*k]. */
void colibri_dispatch_build(const int32_t *experts, int32_t n_tokens, int32_t k, int32_t n_expert,
                            int32_t *count, int32_t *start, int32_t *sorted_pair,
                            int32_t *pair_row);
/* AGGREGATOR: out[t] = sum over slots in order of gate[t,slot] * y[pair_row[t*k+slot]];
 * y: [T*k, D], out: [T, D] (overwritten). */
void colibri_aggregate_slots(const float *y, const int32_t *pair_row, const float *gates,
                             int32_t n_tokens, int32_t k, int32_t n_embd, float *out);

#endif /* COLIBRI_INTERNAL_H */
