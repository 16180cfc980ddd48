/*
 * matmul.c — threaded matrix products and gated MLPs over the pool.
 *
 * Determinism rule: every output element y[t, r] is ONE dot product of W's
 * row r with x[t] over the full row (the dispatched ISA's kernel, bitwise the
 * reference vec_dot), computed by exactly one thread.
 * Threads split the output (rows, and tokens), never the reduction axis, so
 * neither the thread count nor the number of tokens changes any element's
 * value. For block-type weights each activation row is first quantized on its
 * own (per block, independent of the other rows), so that holds for them too.
 * Exact mode (ctx->exact) skips that quantization: for one token the ISA's
 * dot_rows_exact dequantizes each block-type row in registers as it dots it; for
 * several, each thread dequantizes its rows into its own scratch and runs the F32
 * gemm on them; either way bitwise the F32 dot of the dequantized row.
 *
 * How a run is split (docs/KERNELS.md, "Splitting the work"): each job is
 * cut into units of a row group (4 rows for one token, where the row kernel
 * streams; 16 for several, the multi-token kernels' panels; a whole block of
 * the epilogue's quantized type when there is one) by a chunk of up to 64
 * tokens. A unit costs its weight bytes (times COLIBRI_BYTE_COST) plus its
 * multiply-adds, so decode balances bytes and prefill arithmetic, over every
 * job of the run as one pool of work: experts with more tokens, or heavier
 * types, spread over more threads. Thread i takes the units that start in
 * its equal share of the total cost, row groups outside and token chunks
 * inside, so a thread's units are mostly whole row groups run in one kernel
 * call, and jobs with few rows and many tokens still feed every thread.
 */
#include <string.h>

#include "internal.h"
#include "profile.h"
#include "../kernels/isa.h"
#include "../kernels/kernels.h"
#include "../kernels/quant.h"

#define COLIBRI_BYTE_COST 8       /* multiply-adds one weight byte from memory costs, about (decode's
                                     ~25 GB/s per core against ~200 G multiply-adds/s in cache) */
#define COLIBRI_TOKEN_CHUNK 64    /* tokens per unit of work: the AVX-512 gemm's panel reuse */
#define COLIBRI_ROWS_ONE 4        /* row group for one token: the row kernels' group */
#define COLIBRI_ROWS_MANY 16      /* row group for several tokens: the gemm panels' rows */
#define COLIBRI_GEMV_TILE_BYTES 40960   /* rows that several tokens' row kernels pass in turn: within
                                           L1d (48 KiB a core here); 36 KiB tiles measured best */
#define COLIBRI_EPILOGUE_BLOCKS_PER_THREAD 4   /* quantize in the gate/up epilogue only with this many
                                                  row groups (blocks) per thread to deal out */

/* ---- the plan of a run ----------------------------------------------------------- */

typedef struct colibri_matmul_task {
    const colibri_hparams *hp;   /* the model's: ffn_act of the gated epilogues */
    const colibri_matmul_job *jobs;
    const void *const *job_x;    /* job_x: [n_jobs] the rows each job's kernel reads (quantized or f32) */
    const int64_t *job_x_bytes;  /* job_x_bytes: [n_jobs] bytes between those rows */
    const colibri_job_cut *cuts; /* cuts: [n_jobs] */
    int32_t n_jobs;
    double total;                /* total cost of the run */
    double *job_seconds;         /* job_seconds: [n_threads, n_jobs] while profiling, else NULL */
    float *wdeq;                 /* wdeq: [n_threads, COLIBRI_EXACT_ROWS, wdeq_cols] exact mode's scratch, else NULL */
    int64_t wdeq_cols;
} colibri_matmul_task;

/* The activation type w's kernel reads: its type's act_type, or f32 in exact mode. */
static int32_t colibri_act_type(int exact, const colibri_tensor *w) {
    return exact ? COLIBRI_DTYPE_F32 : colibri_type_traits_of(w->dtype)->act_type;
}

/* Cuts job into units and returns its cost. */
static double colibri_job_cut_make(const colibri_matmul_job *job, colibri_job_cut *cut) {
    int64_t rows = job->w->rows, cols = job->w->cols, n = job->n > 0 ? job->n : 0;
    cut->rg = n == 1 ? COLIBRI_ROWS_ONE : COLIBRI_ROWS_MANY;
    if (job->y_q) {   /* the epilogue quantizes whole blocks of a row */
        int64_t block = colibri_type_traits_of(job->y_q_type)->block_elems;
        cut->rg = block > cut->rg ? block : cut->rg;
    }
    cut->n_rg = (rows + cut->rg - 1) / cut->rg;
    cut->n_tc = n > COLIBRI_TOKEN_CHUNK ? (int32_t)((n + COLIBRI_TOKEN_CHUNK - 1) / COLIBRI_TOKEN_CHUNK) : 1;
    double mult = job->w_up ? 2.0 : 1.0;
    double bytes = (double)colibri_row_bytes(job->w->dtype, cols) * COLIBRI_BYTE_COST;
    int64_t chunk = n < COLIBRI_TOKEN_CHUNK ? n : COLIBRI_TOKEN_CHUNK;
    double row_all = n > 0 ? mult * (bytes + (double)cols * (double)n) : 0.0;   /* one row, every token */
    double row_chunk = n > 0 ? mult * (bytes / cut->n_tc + (double)cols * (double)chunk) : 0.0;
    int64_t last_rows = rows - (cut->n_rg - 1) * cut->rg;
    cut->group_cost = (double)cut->rg * row_all;
    cut->unit_cost = (double)cut->rg * row_chunk;
    cut->last_cost = (double)last_rows * row_chunk;
    return n > 0 ? (double)(cut->n_rg - 1) * cut->group_cost + (double)last_rows * row_all : 0.0;
}

/* The first unit (g * n_tc + c) of the job whose start is at or past `off`
 * (a cost offset within the job), or n_rg * n_tc if none. */
static int64_t colibri_job_unit_at(const colibri_job_cut *cut, double off) {
    int64_t end = cut->n_rg * cut->n_tc;
    if (off <= 0.0 || cut->group_cost <= 0.0) return off <= 0.0 ? 0 : end;
    int64_t g = (int64_t)(off / cut->group_cost);
    if (g >= cut->n_rg - 1) g = cut->n_rg - 1;
    double in = off - (double)g * cut->group_cost, unit = g == cut->n_rg - 1 ? cut->last_cost : cut->unit_cost;
    int64_t c = unit > 0.0 ? (int64_t)(in / unit) : 0;
    if ((double)c * unit < in) c++;   /* the first start at or past `in` */
    if (c >= cut->n_tc) {
        g++;
        c = 0;
    }
    return g >= cut->n_rg ? end : g * cut->n_tc + c;
}

/* ---- running a piece ----------------------------------------------------------- */

/* y[t, r0..r1) = W[r0..r1) . x[t] for the n tokens at x (x_row_bytes apart).
 * Fewer tokens than the table's gemm_from for this dtype: its few-token
 * kernel (gemm_few: each row group unpacked once for up to 4 tokens) where it
 * has one, else the row kernel once per token over tiles of rows that stay in
 * L1 (rows outside, tokens inside); either way the weights stream from memory
 * once and each further token costs a dot from cache. One token: the row
 * kernel over the whole range, prefetching a row group ahead. More tokens:
 * the multi-token kernel, whose row panels are worth their packing from
 * gemm_from tokens on (isa.h).
 * Every y[t, r] is bitwise the reference dot of row r with x[t] either way
 * (isa.h's contract, tests/c/test_isa.c), so which path a job takes (it
 * depends on how many tokens the batch routes to it) never changes a value. */
static void colibri_rows_run(const colibri_tensor *w, const char *x, int64_t x_row_bytes, int64_t n,
                             int64_t r0, int64_t r1, float *y, int64_t y_stride) {
    const colibri_isa_table *isa = colibri_isa_active();
    int64_t row_bytes = colibri_row_bytes(w->dtype, w->cols);
    const char *w_rows = (const char *)w->data + r0 * row_bytes;   /* w_rows: [r1 - r0, cols] */
    if (n >= isa->gemm_from[w->dtype]) {
        isa->gemm[w->dtype](w_rows, row_bytes, x, x_row_bytes, w->cols, r1 - r0, n, &y[r0], y_stride);
        return;
    }
    if (n > 1 && isa->gemm_few[w->dtype]) {
        isa->gemm_few[w->dtype](w_rows, row_bytes, x, x_row_bytes, w->cols, r1 - r0, n, &y[r0], y_stride);
        return;
    }
    int64_t tile = n == 1 ? r1 - r0 : COLIBRI_GEMV_TILE_BYTES / row_bytes / COLIBRI_DOT_ROWS * COLIBRI_DOT_ROWS;
    tile = tile > COLIBRI_DOT_ROWS ? tile : COLIBRI_DOT_ROWS;
    for (int64_t r = r0; r < r1; r += tile) {
        int64_t k = r1 - r < tile ? r1 - r : tile;
        for (int64_t t = 0; t < n; t++) {
            isa->dot_rows[w->dtype]((const char *)w->data + r * row_bytes, row_bytes, x + t * x_row_bytes, w->cols,
                                    k, &y[t * y_stride + r]);
        }
    }
}

/* Exact mode's colibri_rows_run for a block-type w and f32 x rows: each y[t, r] is the F32
 * dot of dequantized row r (the type's to_f32, bitwise colibri_dequantize) with x[t], in the
 * F32 kernels' order. One token: the table's dot_rows_exact, which dequantizes each row
 * group in registers as it dots it (isa.h); several: COLIBRI_EXACT_ROWS rows at a time
 * dequantized by the table's dequantize into wdeq ([COLIBRI_EXACT_ROWS, cols], this
 * thread's), then the F32 gemm, so the dequantization is paid once for every token. */
static void colibri_rows_run_exact(const colibri_tensor *w, const char *x, int64_t x_row_bytes, int64_t n,
                                   int64_t r0, int64_t r1, float *y, int64_t y_stride, float *wdeq) {
    const colibri_isa_table *isa = colibri_isa_active();
    int64_t row_bytes = colibri_row_bytes(w->dtype, w->cols), f32_row = w->cols * (int64_t)sizeof(float);
    const char *w_rows = (const char *)w->data + r0 * row_bytes;   /* w_rows: [r1 - r0] quantized rows */
    if (n == 1) {
        isa->dot_rows_exact[w->dtype](w_rows, row_bytes, x, w->cols, r1 - r0, &y[r0]);
        return;
    }
    for (int64_t r = r0; r < r1; r += COLIBRI_EXACT_ROWS) {
        int64_t k = r1 - r < COLIBRI_EXACT_ROWS ? r1 - r : COLIBRI_EXACT_ROWS;
        /* rows are whole blocks, back to back: k rows are one run of k * cols values */
        isa->dequantize[w->dtype]((const char *)w->data + r * row_bytes, wdeq, k * w->cols);
        isa->gemm[COLIBRI_DTYPE_F32](wdeq, f32_row, x, x_row_bytes, w->cols, k, n, &y[r], y_stride);
    }
}

/* colibri_rows_run, or with wdeq (exact mode's scratch of this thread) for a block-type w,
 * colibri_rows_run_exact. */
static void colibri_rows_dispatch(const colibri_tensor *w, const char *x, int64_t x_row_bytes, int64_t n,
                                  int64_t r0, int64_t r1, float *y, int64_t y_stride, float *wdeq) {
    if (wdeq && colibri_type_traits_of(w->dtype)->block_elems > 1) {
        colibri_rows_run_exact(w, x, x_row_bytes, n, r0, r1, y, y_stride, wdeq);
    } else {
        colibri_rows_run(w, x, x_row_bytes, n, r0, r1, y, y_stride);
    }
}

/* y[t, r0..r1) += bias elements [at + r0, at + r1) for the n tokens at y (no-op without a bias). */
static void colibri_bias_rows_add(const colibri_bias *b, int64_t r0, int64_t r1, float *y, int64_t y_stride,
                                  int64_t n) {
    if (!b->t) return;
    float chunk[64];   /* chunk: [64] bias elements widened to f32 */
    for (int64_t c0 = r0; c0 < r1; c0 += 64) {
        int64_t len = r1 - c0 < 64 ? r1 - c0 : 64;
        colibri_row_to_f32(b->t->data, b->t->dtype, b->at + c0, len, chunk);
        for (int64_t t = 0; t < n; t++) {
            float *yt = y + t * y_stride + c0;   /* yt: [len] */
            for (int64_t i = 0; i < len; i++) yt[i] += chunk[i];
        }
    }
}

void colibri_ffn_act_apply(const colibri_hparams *hp, float *g, const float *u, int64_t n) {
    if (hp->ffn_act == COLIBRI_FFN_SWIGLU_CLAMPED) {
        colibri_swiglu_clamped(g, u, n, hp->ffn_alpha, hp->ffn_limit);
    } else {
        colibri_isa_active()->silu_mul(g, u, n);
    }
}

/* Rows [r0, r1) x tokens [t0, t1) of job j, with its epilogues: the bias,
 * the gated activation, the quantized copy (wdeq: this thread's exact-mode scratch or NULL). */
static void colibri_piece_run(const colibri_matmul_task *task, int32_t j, int64_t r0, int64_t r1, int64_t t0,
                              int64_t t1, float *wdeq) {
    const colibri_matmul_job *job = &task->jobs[j];
    const char *x = (const char *)task->job_x[j] + t0 * task->job_x_bytes[j];
    int64_t xb = task->job_x_bytes[j], ys = job->y_stride;
    float *y = job->y + t0 * ys;   /* y: [t1 - t0] rows of the output */
    colibri_rows_dispatch(job->w, x, xb, t1 - t0, r0, r1, y, ys, wdeq);
    colibri_bias_rows_add(&job->bias, r0, r1, y, ys, t1 - t0);
    if (job->w_up) {   /* the gated epilogue on these rows */
        float *y_up = job->y_up + t0 * ys;
        colibri_rows_dispatch(job->w_up, x, xb, t1 - t0, r0, r1, y_up, ys, wdeq);
        colibri_bias_rows_add(&job->bias_up, r0, r1, y_up, ys, t1 - t0);
        for (int64_t t = 0; t < t1 - t0; t++) colibri_ffn_act_apply(task->hp, y + t * ys + r0, y_up + t * ys + r0, r1 - r0);
    }
    if (job->y_q) {   /* whole blocks of each row: r0 is a multiple of the block, r1 too or the row's end */
        const colibri_type_traits *q = colibri_type_traits_of(job->y_q_type);
        colibri_quantize_fn quantize = colibri_isa_quantizer(colibri_isa_active(), job->y_q_type);
        int64_t q_row = colibri_row_bytes(job->y_q_type, job->w->rows);
        for (int64_t t = t0; t < t1; t++) {
            quantize(job->y + t * ys + r0, (char *)job->y_q + t * q_row + r0 / q->block_elems * q->block_bytes,
                     r1 - r0);
        }
    }
}

/* Units [u0, u1) of job j: whole row groups in one call, part groups by chunks. */
static void colibri_units_run(const colibri_matmul_task *task, int32_t j, int64_t u0, int64_t u1, float *wdeq) {
    const colibri_job_cut *cut = &task->cuts[j];
    int64_t rows = task->jobs[j].w->rows, n = task->jobs[j].n, tc = cut->n_tc;
    for (int64_t u = u0; u < u1;) {
        int64_t g = u / tc, c = u % tc;
        if (c == 0 && u + tc <= u1) {
            int64_t g_end = g + (u1 - u) / tc;
            int64_t r1 = g_end * cut->rg < rows ? g_end * cut->rg : rows;
            colibri_piece_run(task, j, g * cut->rg, r1, 0, n, wdeq);
            u = g_end * tc;
        } else {
            int64_t c_end = c + (u1 - u) < tc ? c + (u1 - u) : tc;
            int64_t r1 = (g + 1) * cut->rg < rows ? (g + 1) * cut->rg : rows;
            int64_t t1 = c_end * COLIBRI_TOKEN_CHUNK < n ? c_end * COLIBRI_TOKEN_CHUNK : n;
            colibri_piece_run(task, j, g * cut->rg, r1, c * COLIBRI_TOKEN_CHUNK, t1, wdeq);
            u += c_end - c;
        }
    }
}

/* Thread ti runs the units that start in its share [lo, hi) of the cost. */
static void colibri_matmul_task_run(void *arg, int32_t ti, int32_t nt) {
    const colibri_matmul_task *task = (const colibri_matmul_task *)arg;
    double lo = task->total * ti / nt, hi = ti + 1 == nt ? task->total + 1.0 : task->total * (ti + 1) / nt;
    float *wdeq = task->wdeq ? task->wdeq + (int64_t)ti * COLIBRI_EXACT_ROWS * task->wdeq_cols : NULL;
    for (int32_t j = 0; j < task->n_jobs; j++) {
        const colibri_job_cut *cut = &task->cuts[j];
        if (task->jobs[j].n <= 0) continue;
        int64_t u0 = colibri_job_unit_at(cut, lo - cut->begin), u1 = colibri_job_unit_at(cut, hi - cut->begin);
        if (u0 >= u1) continue;
        if (task->job_seconds) {
            double start = colibri_now();
            colibri_units_run(task, j, u0, u1, wdeq);
            task->job_seconds[(int64_t)ti * task->n_jobs + j] += colibri_now() - start;
        } else {
            colibri_units_run(task, j, u0, u1, wdeq);
        }
    }
}

/* ---- inputs: quantized, gathered ------------------------------------------------- */

/* Whether jobs a and b read the same activation rows in the same type. */
static int colibri_same_input(const colibri_matmul_job *a, const colibri_matmul_job *b, int32_t act, int exact) {
    if (a->x != b->x || a->x_stride != b->x_stride || a->n != b->n || a->w->cols != b->w->cols ||
        colibri_act_type(exact, a->w) != act || a->xq || b->xq) {
        return 0;
    }
    for (int32_t t = 0; t < a->n; t++) {   /* the same rows of x (no x_rows: rows 0..n-1) */
        if ((a->x_rows ? a->x_rows[t] : t) != (b->x_rows ? b->x_rows[t] : t)) return 0;
    }
    return 1;
}

typedef struct colibri_prepare_task {
    const colibri_matmul_job *jobs;
    const void *const *job_x;
    const int32_t *prep_jobs;    /* prep_jobs: [n_prep] jobs whose rows are quantized or gathered here */
    int32_t n_prep;
    int exact;                   /* exact mode: every job reads f32 rows */
} colibri_prepare_task;

/* Items [lo, hi) of the flat list of every prepared job's rows: each row
 * quantized on its own from its source row (or copied, for float weights). */
static void colibri_prepare_range(void *arg, int64_t lo, int64_t hi) {
    const colibri_prepare_task *task = (const colibri_prepare_task *)arg;
    int64_t first = 0;   /* flat index of job i's row 0 */
    for (int32_t i = 0; i < task->n_prep && first < hi; i++) {
        int32_t j = task->prep_jobs[i];
        const colibri_matmul_job *job = &task->jobs[j];
        const int32_t *x_rows = job->x_rows;
        int32_t act = colibri_act_type(task->exact, job->w);
        int64_t cols = job->w->cols, row_bytes = colibri_row_bytes(act, cols);
        colibri_quantize_fn quantize = colibri_isa_quantizer(colibri_isa_active(), act);
        char *dst = (char *)task->job_x[j];   /* dst: [n, cols] in the activation type */
        for (int64_t t = lo > first ? lo - first : 0; t < job->n && first + t < hi; t++) {
            const float *src = job->x + (x_rows ? x_rows[t] : t) * job->x_stride;
            if (quantize) {
                quantize(src, dst + t * row_bytes, cols);
            } else {
                memcpy(dst + t * row_bytes, src, (size_t)row_bytes);
            }
        }
        first += job->n;
    }
}

/* Fills job_x[j] / job_x_bytes[j], the rows job j's kernel reads: its xq; a
 * quantized copy of its x rows in ctx->s.xq (once per distinct input, shared
 * by every job, and every weight row, that reads it); its gathered rows in
 * x_gather (float weights); or x itself. The rows to quantize or gather are
 * split over the pool when there are enough of them (each row depends on its
 * source row only, so the split never changes a byte). */
static void colibri_matmul_prepare_inputs(colibri_context *ctx, const colibri_matmul_job *jobs, int32_t n_jobs,
                                          const void **job_x, int64_t *job_x_bytes) {
    char *next = (char *)ctx->s.xq;   /* next free byte of xq */
    colibri_prepare_task task = {jobs, job_x, ctx->s.xq_jobs, 0, ctx->exact};
    int64_t total_rows = 0, total_cost = 0;
    for (int32_t j = 0; j < n_jobs; j++) {
        const colibri_matmul_job *job = &jobs[j];
        int32_t act = colibri_act_type(ctx->exact, job->w);
        int64_t cols = job->w->cols;
        job_x_bytes[j] = act == COLIBRI_DTYPE_F32 ? job->x_stride * (int64_t)sizeof(float)
                                                  : colibri_row_bytes(act, cols);
        job_x[j] = job->xq ? job->xq : (const void *)job->x;
        if (job->xq || job->n <= 0 || (act == COLIBRI_DTYPE_F32 && !job->x_rows)) continue;
        if (act == COLIBRI_DTYPE_F32 && job->n == 1) {   /* one gathered row: read it where it is */
            job_x[j] = job->x + job->x_rows[0] * job->x_stride;
            continue;
        }
        int32_t shared = -1;
        for (int32_t i = 0; i < j && shared < 0; i++) {
            if (colibri_same_input(&jobs[i], job, act, ctx->exact)) shared = i;
        }
        if (shared >= 0) {
            job_x[j] = job_x[shared];
            job_x_bytes[j] = job_x_bytes[shared];
            continue;
        }
        if (act == COLIBRI_DTYPE_F32) {
            job_x[j] = job->x_gather;
            job_x_bytes[j] = cols * (int64_t)sizeof(float);
        } else {
            job_x[j] = next;
            next += job->n * colibri_row_bytes(act, cols);
        }
        ctx->s.xq_jobs[task.n_prep++] = j;
        total_rows += job->n;
        total_cost = cols > total_cost ? cols : total_cost;
    }
    colibri_parallel_for(ctx, total_rows, total_cost, colibri_prepare_range, &task);
}

/* ---- the run ---------------------------------------------------------------------- */

/* Charges each routed expert's bytes and thread time of this run (profiling). */
static void colibri_matmul_profile(colibri_context *ctx, const colibri_matmul_job *jobs, int32_t n_jobs,
                                   const double *job_seconds) {
    for (int32_t j = 0; j < n_jobs; j++) {
        const colibri_matmul_job *job = &jobs[j];
        if (job->profile_id <= 0) continue;
        double seconds = 0.0;
        for (int32_t i = 0; i < ctx->n_threads; i++) seconds += job_seconds[(int64_t)i * n_jobs + j];
        int64_t bytes = job->w->rows * colibri_row_bytes(job->w->dtype, job->w->cols) * (job->w_up ? 2 : 1);
        colibri_profile_expert(ctx->profile, job->profile_id - 1, 0, bytes, seconds);
    }
}

void colibri_matmul_run(colibri_context *ctx, const colibri_matmul_job *jobs, int32_t n_jobs) {
    int32_t chunk = (int32_t)COLIBRI_MATMUL_JOBS_MAX(ctx->model->hp.n_expert);
    colibri_job_cut *cuts = ctx->s.cuts;
    for (int32_t first = 0; first < n_jobs; first += chunk) {
        int32_t n = n_jobs - first < chunk ? n_jobs - first : chunk;
        colibri_matmul_prepare_inputs(ctx, jobs + first, n, ctx->s.job_xq, ctx->s.job_x_bytes);
        double *job_seconds = ctx->profile ? ctx->s.job_seconds : NULL;
        colibri_matmul_task task = {&ctx->model->hp, jobs + first, ctx->s.job_xq, ctx->s.job_x_bytes, cuts, n, 0.0,
                                    job_seconds, ctx->exact ? ctx->s.wdeq : NULL, ctx->s.wdeq_cols};
        for (int32_t j = 0; j < n; j++) {
            cuts[j].begin = task.total;
            task.total += colibri_job_cut_make(&jobs[first + j], &cuts[j]);
        }
        if (job_seconds) memset(job_seconds, 0, (size_t)ctx->n_threads * (size_t)n * sizeof(double));
        colibri_threadpool_run(ctx->pool, colibri_matmul_task_run, &task);
        if (job_seconds) colibri_matmul_profile(ctx, jobs + first, n, job_seconds);
    }
}

/* ---- MLPs -------------------------------------------------------------------------- */

/* Gate and up of an MLP run as one fused job (bias and activation in its
 * epilogue) when they share a dtype, as every supported file lays them out;
 * otherwise as two jobs and the activation after the run. A fused job whose
 * down weight is a block type also quantizes its activation rows in the
 * epilogue (into s.aq), so the down run reads them as they are. Then the
 * down projections. */
void colibri_mlp_run(colibri_context *ctx, const colibri_mlp *mlps, int32_t n_mlps) {
    colibri_matmul_job *jobs = ctx->s.jobs;   /* jobs: [2 * n_mlps] */
    void **act_q = ctx->s.mlp_aq;   /* act_q: [n_mlps] quantized activations or NULL */
    const colibri_hparams *hp = &ctx->model->hp;
    int64_t D = hp->n_embd, blocks = 0;
    int32_t n_jobs = 0;
    char *next = (char *)ctx->s.aq;
    for (int32_t i = 0; i < n_mlps; i++) {   /* quantizing epilogues only if their blocks feed every thread */
        const colibri_type_traits *act = colibri_type_traits_of(colibri_type_traits_of(mlps[i].down->dtype)->act_type);
        blocks += mlps[i].gate->dtype == mlps[i].up->dtype && mlps[i].n > 0 ? mlps[i].gate->rows / act->block_elems : 0;
    }
    int epilogue_q = blocks >= COLIBRI_EPILOGUE_BLOCKS_PER_THREAD * (int64_t)ctx->n_threads;
    for (int32_t i = 0; i < n_mlps; i++) {
        const colibri_mlp *mlp = &mlps[i];
        int64_t F = mlp->gate->rows;
        int32_t down_act = colibri_act_type(ctx->exact, mlp->down);
        colibri_matmul_job job = {.w = mlp->gate, .x = mlp->x, .x_stride = D, .y = mlp->act_gate, .y_stride = F,
                                  .n = mlp->n, .bias = mlp->gate_bias, .x_rows = mlp->x_rows,
                                  .x_gather = mlp->x_gather, .profile_id = mlp->profile_id};
        act_q[i] = NULL;
        if (ctx->profile && mlp->profile_id > 0) colibri_profile_expert(ctx->profile, mlp->profile_id - 1, mlp->n, 0, 0.0);
        if (mlp->gate->dtype == mlp->up->dtype) {
            job.w_up = mlp->up;
            job.y_up = mlp->act_up;
            job.bias_up = mlp->up_bias;
            if (down_act != COLIBRI_DTYPE_F32 && mlp->n > 0 && epilogue_q) {
                job.y_q = act_q[i] = next;
                job.y_q_type = down_act;
                next += mlp->n * colibri_row_bytes(down_act, F);
            }
            jobs[n_jobs++] = job;
        } else {
            jobs[n_jobs++] = job;
            job.w = mlp->up;
            job.y = mlp->act_up;
            job.bias = mlp->up_bias;
            job.profile_id = 0;
            jobs[n_jobs++] = job;
        }
    }
    colibri_matmul_run(ctx, jobs, n_jobs);
    for (int32_t i = 0; i < n_mlps; i++) {
        const colibri_mlp *mlp = &mlps[i];
        int64_t F = mlp->gate->rows;
        if (mlp->gate->dtype != mlp->up->dtype) colibri_ffn_act_apply(hp, mlp->act_gate, mlp->act_up, F * mlp->n);
        jobs[i] = (colibri_matmul_job){.w = mlp->down, .x = mlp->act_gate, .x_stride = F, .y = mlp->y,
                                       .y_stride = D, .n = mlp->n, .bias = mlp->down_bias, .xq = act_q[i],
                                       .profile_id = mlp->profile_id};
    }
    colibri_matmul_run(ctx, jobs, n_mlps);
}

/* ---- parallel loops ------------------------------------------------------------- */

#define COLIBRI_PARALLEL_MIN_COST 32768   /* below this much work a loop runs on the caller alone */

typedef struct colibri_for_task {
    colibri_range_fn fn;
    void *arg;
    int64_t n;
} colibri_for_task;

static void colibri_for_task_run(void *arg, int32_t ti, int32_t nt) {
    const colibri_for_task *task = (const colibri_for_task *)arg;
    int64_t lo, hi;
    colibri_range_split(task->n, ti, nt, &lo, &hi);
    if (lo < hi) task->fn(task->arg, lo, hi);
}

void colibri_parallel_for(colibri_context *ctx, int64_t n, int64_t item_cost, colibri_range_fn fn, void *arg) {
    if (n <= 0) return;
    if (n < 2 || ctx->n_threads == 1 || n * item_cost < COLIBRI_PARALLEL_MIN_COST) {
        fn(arg, 0, n);
        return;
    }
    colibri_for_task task = {fn, arg, n};
    colibri_threadpool_run(ctx->pool, colibri_for_task_run, &task);
}

float *colibri_vec_load(colibri_context *ctx, const colibri_tensor *w) {
    colibri_row_to_f32(w->data, w->dtype, 0, w->cols, ctx->s.wvec);
    return ctx->s.wvec;
}
