/*
 * bandwidth.c — colibri_read_bandwidth: this machine's read bandwidth as the
 * kernels see it, the denominator of `colibri bench`'s roofline.
 *
 * The pool's threads stream their shares of one buffer (anonymous, huge pages
 * asked for, touched before timing) through the active ISA's F32 dot_rows
 * kernel against a row of ones: the loads, prefetch and thread split of a
 * decode step's matmul, with no arithmetic that could bound it.
 */
#define _DEFAULT_SOURCE 1   /* MAP_ANONYMOUS, madvise */
#define _POSIX_C_SOURCE 199309L   /* clock_gettime */
#include <sys/mman.h>
#include <time.h>

#include "internal.h"
#include "threadpool.h"
#include "../kernels/isa.h"

#define COLIBRI_PROBE_ROW 1024     /* floats per row: 4 KiB */
#define COLIBRI_PROBE_GROUP 64     /* rows per dot_rows call */

typedef struct colibri_probe_task {
    const float *buffer;   /* buffer: [rows, COLIBRI_PROBE_ROW] */
    int64_t rows;
    const float *ones;     /* ones: [COLIBRI_PROBE_ROW] */
    float *sink;           /* sink: [n_threads] keeps the sums alive */
} colibri_probe_task;

static void colibri_probe_task_run(void *arg, int32_t ti, int32_t nt) {
    const colibri_probe_task *task = (const colibri_probe_task *)arg;
    colibri_dot_rows_fn dot_rows = colibri_isa_active()->dot_rows[COLIBRI_DTYPE_F32];
    float y[COLIBRI_PROBE_GROUP];   /* y: [group] row sums */
    int64_t lo, hi;
    colibri_range_split(task->rows, ti, nt, &lo, &hi);
    for (int64_t r = lo; r < hi; r += COLIBRI_PROBE_GROUP) {
        int64_t n = hi - r < COLIBRI_PROBE_GROUP ? hi - r : COLIBRI_PROBE_GROUP;
        dot_rows(task->buffer + r * COLIBRI_PROBE_ROW, COLIBRI_PROBE_ROW * (int64_t)sizeof(float), task->ones,
                 COLIBRI_PROBE_ROW, n, y);
        task->sink[ti] += y[0];
    }
}

static double colibri_probe_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

COLIBRI_API double colibri_read_bandwidth(int32_t n_threads, int64_t n_bytes, int32_t passes) {
    int64_t row_bytes = COLIBRI_PROBE_ROW * (int64_t)sizeof(float);
    if (n_threads < 1 || n_threads > COLIBRI_MAX_THREADS) {
        colibri_error_set(COLIBRI_ERR_INVALID, "read_bandwidth: n_threads must be 1..%d, got %d",
                          COLIBRI_MAX_THREADS, n_threads);
        return -1.0;
    }
    if (n_bytes < (1 << 20) || n_bytes > ((int64_t)1 << 40) || passes < 1 || passes > 1000) {
        colibri_error_set(COLIBRI_ERR_INVALID, "read_bandwidth: n_bytes must be 1 MiB..1 TiB and passes 1..1000, "
                          "got %lld and %d", (long long)n_bytes, passes);
        return -1.0;
    }
    int64_t rows = n_bytes / row_bytes;
    size_t len = (size_t)(rows * row_bytes);
    float *buffer = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buffer == MAP_FAILED) {
        colibri_error_set(COLIBRI_ERR_NOMEM, "read_bandwidth: cannot map %lld bytes", (long long)len);
        return -1.0;
    }
#ifdef MADV_HUGEPAGE
    madvise(buffer, len, MADV_HUGEPAGE);   /* best effort, as the arena */
#endif
    for (int64_t i = 0; i < rows * COLIBRI_PROBE_ROW; i++) buffer[i] = 1.0f;
    float ones[COLIBRI_PROBE_ROW], sink[COLIBRI_MAX_THREADS] = {0};
    for (int i = 0; i < COLIBRI_PROBE_ROW; i++) ones[i] = 1.0f;
    colibri_threadpool *pool = colibri_threadpool_create(n_threads);
    if (!pool) {
        munmap(buffer, len);
        return -1.0;
    }
    colibri_probe_task task = {buffer, rows, ones, sink};
    double best = 0.0;
    for (int32_t p = 0; p < passes; p++) {
        double start = colibri_probe_now();
        colibri_threadpool_run(pool, colibri_probe_task_run, &task);
        double rate = (double)len / (colibri_probe_now() - start) / 1e9;
        best = rate > best ? rate : best;
    }
    colibri_threadpool_free(pool);
    munmap(buffer, len);
    return best;
}
