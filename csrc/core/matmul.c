/*
 * matmul.c — threaded matrix products and SwiGLU MLPs over the pool.
 *
 * Determinism rule: every output element y[t, r] is ONE dot product of W's
 * row r with x[t] over the full row (the dispatched ISA's kernel, bitwise the
 * reference vec_dot), computed by exactly one thread.
 * Threads split the output rows (never the reduction axis), so neither the
 * thread count nor the number of tokens changes any element's value. For
 * block-type weights each activation row is first quantized on its own
 * (per block, independent of the other rows), so that holds for them too.
 */
#include "internal.h"
#include "../kernels/isa.h"
#include "../kernels/kernels.h"
#include "../kernels/quant.h"

typedef struct colibri_matmul_task {
    const colibri_hparams *hp;   /* the model's: ffn_act of the gated epilogues */
    const colibri_matmul_job *jobs;
    const void *const *job_xq;   /* job_xq: [n_jobs] quantized x rows, NULL for float weights */
    int32_t n_jobs;
    int64_t total_work;          /* sum over jobs of rows * max(n, 1) */
} colibri_matmul_task;

static int64_t colibri_job_row_cost(const colibri_matmul_job *job) {
    return (job->n > 0 ? job->n : 1) * (job->w_up ? 2 : 1);
}

/* y[t, r0..r1) = W[r0..r1) . x[t] for every token of the job (x: the f32 or
 * quantized rows, x_row_bytes apart). One token: the row kernel, prefetching
 * a row group ahead. Several: the multi-token kernel, whose row groups stay
 * in L1 while every token passes (isa.h). Either way every y[t, r] is
 * bitwise the reference dot of row r with x[t]. */
static void colibri_rows_run(const colibri_tensor *w, const char *x, int64_t x_row_bytes, int32_t n,
                             int64_t r0, int64_t r1, float *y, int64_t y_stride) {
    const colibri_isa_table *isa = colibri_isa_active();
    int64_t row_bytes = colibri_row_bytes(w->dtype, w->cols);
    const char *w_rows = (const char *)w->data + r0 * row_bytes;   /* w_rows: [r1 - r0, cols] */
    if (n == 1) {
        isa->dot_rows[w->dtype](w_rows, row_bytes, x, w->cols, r1 - r0, &y[r0]);
    } else {
        isa->gemm[w->dtype](w_rows, row_bytes, x, x_row_bytes, w->cols, r1 - r0, n, &y[r0], y_stride);
    }
}

/* y[t, r0..r1) += bias elements [at + r0, at + r1) for every token (no-op without a bias). */
static void colibri_bias_rows_add(const colibri_bias *b, int64_t r0, int64_t r1, float *y, int64_t y_stride,
                                  int32_t n) {
    if (!b->t) return;
    float chunk[64];   /* chunk: [64] bias elements widened to f32 */
    for (int64_t c0 = r0; c0 < r1; c0 += 64) {
        int64_t len = r1 - c0 < 64 ? r1 - c0 : 64;
        colibri_row_to_f32(b->t->data, b->t->dtype, b->at + c0, len, chunk);
        for (int32_t t = 0; t < n; t++) {
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

/* Rows are split by work (rows x tokens) so experts with many tokens spread
 * over more threads: thread i owns the rows whose work offset falls in its
 * share [lo, hi). A row's owner depends on the batch, its value never does. */
static void colibri_matmul_task_run(void *arg, int32_t ti, int32_t nt) {
    const colibri_matmul_task *task = (const colibri_matmul_task *)arg;
    int64_t lo, hi;
    colibri_range_split(task->total_work, ti, nt, &lo, &hi);
    int64_t offset = 0;   /* work before job j */
    for (int32_t j = 0; j < task->n_jobs && offset < hi; j++) {
        const colibri_matmul_job *job = &task->jobs[j];
        int64_t cost = colibri_job_row_cost(job);
        int64_t rows = job->w->rows;
        int64_t job_end = offset + rows * cost;
        if (job_end > lo && job->n > 0) {
            /* first row r with offset + r*cost >= lo, first row at or past hi */
            int64_t r0 = lo > offset ? (lo - offset + cost - 1) / cost : 0;
            int64_t r1 = hi < job_end ? (hi - offset + cost - 1) / cost : rows;
            const colibri_type_traits *type = colibri_type_traits_of(job->w->dtype);
            /* x rows: the f32 rows, or their quantized copies (contiguous) */
            const char *x = task->job_xq[j] ? (const char *)task->job_xq[j] : (const char *)job->x;
            int64_t x_row_bytes = task->job_xq[j] ? colibri_row_bytes(type->act_type, job->w->cols)
                                                  : job->x_stride * (int64_t)sizeof(float);
            colibri_rows_run(job->w, x, x_row_bytes, job->n, r0, r1, job->y, job->y_stride);
            colibri_bias_rows_add(&job->bias, r0, r1, job->y, job->y_stride, job->n);
            if (job->w_up) {   /* the gated epilogue on this thread's rows */
                colibri_rows_run(job->w_up, x, x_row_bytes, job->n, r0, r1, job->y_up, job->y_stride);
                colibri_bias_rows_add(&job->bias_up, r0, r1, job->y_up, job->y_stride, job->n);
                for (int32_t t = 0; t < job->n; t++) {
                    colibri_ffn_act_apply(task->hp, job->y + t * job->y_stride + r0,
                                          job->y_up + t * job->y_stride + r0, r1 - r0);
                }
            }
        }
        offset = job_end;
    }
}

/* Whether jobs a and b read the same activation rows in the same type. */
static int colibri_same_input(const colibri_matmul_job *a, const colibri_matmul_job *b, int32_t act) {
    return a->x == b->x && a->x_stride == b->x_stride && a->n == b->n && a->w->cols == b->w->cols &&
           colibri_type_traits_of(a->w->dtype)->act_type == act;
}

typedef struct colibri_quantize_task {
    const colibri_matmul_job *jobs;
    const void *const *job_xq;
    const int32_t *xq_jobs;      /* xq_jobs: [n_xq_jobs] jobs whose rows are quantized */
    int32_t n_xq_jobs;
    int64_t total_rows;          /* sum of their token counts */
} colibri_quantize_task;

/* Thread ti quantizes its share of all the rows listed (each row on its own). */
static void colibri_quantize_task_run(void *arg, int32_t ti, int32_t nt) {
    const colibri_quantize_task *task = (const colibri_quantize_task *)arg;
    int64_t lo, hi, first = 0;   /* first: flat index of job i's row 0 */
    colibri_range_split(task->total_rows, ti, nt, &lo, &hi);
    for (int32_t i = 0; i < task->n_xq_jobs && first < hi; i++) {
        const colibri_matmul_job *job = &task->jobs[task->xq_jobs[i]];
        int32_t act_type = colibri_type_traits_of(job->w->dtype)->act_type;
        colibri_quantize_fn quantize = colibri_isa_quantizer(colibri_isa_active(), act_type);
        int64_t cols = job->w->cols, row_bytes = colibri_row_bytes(act_type, cols);
        char *xq = (char *)task->job_xq[task->xq_jobs[i]];   /* xq: [n, cols] in the activation type */
        for (int64_t t = lo > first ? lo - first : 0; t < job->n && first + t < hi; t++) {
            quantize(job->x + t * job->x_stride, xq + t * row_bytes, cols);
        }
        first += job->n;
    }
}

/* Fills job_xq[j] for each job: NULL for float weights, else its x rows
 * quantized to the weight's activation type in ctx->s.xq — once per distinct
 * input, shared by every job (and every weight row) that reads it. The rows
 * are split over the pool when there are several (each row's blocks depend
 * on that row only, so the split never changes a byte). */
static void colibri_matmul_quantize_inputs(colibri_context *ctx, const colibri_matmul_job *jobs,
                                           int32_t n_jobs, const void **job_xq) {
    char *next = (char *)ctx->s.xq;   /* next free byte of xq */
    colibri_quantize_task task = {jobs, job_xq, ctx->s.xq_jobs, 0, 0};
    for (int32_t j = 0; j < n_jobs; j++) {
        const colibri_matmul_job *job = &jobs[j];
        int32_t act = colibri_type_traits_of(job->w->dtype)->act_type;
        job_xq[j] = NULL;
        if (act == COLIBRI_DTYPE_F32 || job->n == 0) continue;
        for (int32_t i = 0; i < j && !job_xq[j]; i++) {
            if (job_xq[i] && colibri_same_input(&jobs[i], job, act)) job_xq[j] = job_xq[i];
        }
        if (job_xq[j]) continue;
        job_xq[j] = next;
        next += job->n * colibri_row_bytes(act, job->w->cols);
        ctx->s.xq_jobs[task.n_xq_jobs++] = j;
        task.total_rows += job->n;
    }
    if (task.total_rows > 1) {
        colibri_threadpool_run(ctx->pool, colibri_quantize_task_run, &task);
    } else if (task.total_rows == 1) {
        colibri_quantize_task_run(&task, 0, 1);
    }
}

void colibri_matmul_run(colibri_context *ctx, const colibri_matmul_job *jobs, int32_t n_jobs) {
    int32_t chunk = (int32_t)COLIBRI_MATMUL_JOBS_MAX(ctx->model->hp.n_expert);
    for (int32_t first = 0; first < n_jobs; first += chunk) {
        int32_t n = n_jobs - first < chunk ? n_jobs - first : chunk;
        colibri_matmul_quantize_inputs(ctx, jobs + first, n, ctx->s.job_xq);
        colibri_matmul_task task = {&ctx->model->hp, jobs + first, ctx->s.job_xq, n, 0};
        for (int32_t j = 0; j < n; j++) {
            task.total_work += jobs[first + j].w->rows * colibri_job_row_cost(&jobs[first + j]);
        }
        colibri_threadpool_run(ctx->pool, colibri_matmul_task_run, &task);
    }
}

/* Gate and up of an MLP run as one fused job (the activation in its
 * epilogue) when they share a dtype, as every supported file lays them out;
 * otherwise as two jobs and the activation after the run. Then the down
 * projections. */
void colibri_mlp_run(colibri_context *ctx, const colibri_mlp *mlps, int32_t n_mlps) {
    colibri_matmul_job *jobs = ctx->s.jobs;   /* jobs: [2 * n_mlps] */
    const colibri_hparams *hp = &ctx->model->hp;
    int64_t D = hp->n_embd;
    int32_t n_jobs = 0;
    for (int32_t i = 0; i < n_mlps; i++) {
        const colibri_mlp *mlp = &mlps[i];
        int64_t F = mlp->gate->rows;
        if (mlp->gate->dtype == mlp->up->dtype) {
            jobs[n_jobs++] = (colibri_matmul_job){.w = mlp->gate, .x = mlp->x, .x_stride = D, .y = mlp->act_gate,
                                                  .y_stride = F, .n = mlp->n, .w_up = mlp->up, .y_up = mlp->act_up,
                                                  .bias = mlp->gate_bias, .bias_up = mlp->up_bias};
        } else {
            jobs[n_jobs++] = (colibri_matmul_job){.w = mlp->gate, .x = mlp->x, .x_stride = D, .y = mlp->act_gate,
                                                  .y_stride = F, .n = mlp->n, .bias = mlp->gate_bias};
            jobs[n_jobs++] = (colibri_matmul_job){.w = mlp->up, .x = mlp->x, .x_stride = D, .y = mlp->act_up,
                                                  .y_stride = F, .n = mlp->n, .bias = mlp->up_bias};
        }
    }
    colibri_matmul_run(ctx, jobs, n_jobs);
    for (int32_t i = 0; i < n_mlps; i++) {
        const colibri_mlp *mlp = &mlps[i];
        int64_t F = mlp->gate->rows;
        if (mlp->gate->dtype != mlp->up->dtype) colibri_ffn_act_apply(hp, mlp->act_gate, mlp->act_up, F * mlp->n);
        jobs[i] = (colibri_matmul_job){.w = mlp->down, .x = mlp->act_gate, .x_stride = F, .y = mlp->y,
                                       .y_stride = D, .n = mlp->n, .bias = mlp->down_bias};
    }
    colibri_matmul_run(ctx, jobs, n_mlps);
}

float *colibri_vec_load(colibri_context *ctx, const colibri_tensor *w) {
    colibri_row_to_f32(w->data, w->dtype, 0, w->cols, ctx->s.wvec);
    return ctx->s.wvec;
}
