/*
 * bandwidth.c — colibri_read_bandwidth: this machine's read bandwidth, the
 * denominator of `colibri bench`'s roofline.
 *
 * The pool's threads stream their shares of one buffer (anonymous, huge pages
 * asked for, touched before timing) as 64-bit words folded into 8 independent
 * XOR chains: one load per word and no arithmetic that could bound it.
 * Measured on a 2-core AMD EPYC VM: 24 GB/s with 1 thread, 46-48 with 2
 * (software prefetch and several streams per thread changed little; the
 * kernels' own prefetching rows reach 25-33 on one thread, kernels_bench).
 */
#define _DEFAULT_SOURCE 1   /* MAP_ANONYMOUS, madvise */
#define _POSIX_C_SOURCE 199309L   /* clock_gettime */
#include <sys/mman.h>
#include <time.h>

#include "internal.h"
#include "threadpool.h"

#define COLIBRI_PROBE_LINE 8   /* 64-bit words per 64-byte line: the XOR chains */

typedef struct colibri_probe_task {
    const uint64_t *buffer;   /* buffer: [lines, COLIBRI_PROBE_LINE] */
    int64_t lines;
    uint64_t *sink;           /* sink: [n_threads] keeps the reads alive */
} colibri_probe_task;

static void colibri_probe_task_run(void *arg, int32_t ti, int32_t nt) {
    const colibri_probe_task *task = (const colibri_probe_task *)arg;
    uint64_t acc[COLIBRI_PROBE_LINE] = {0};
    int64_t lo, hi;
    colibri_range_split(task->lines, ti, nt, &lo, &hi);
    for (int64_t l = lo; l < hi; l++) {
        const uint64_t *line = task->buffer + l * COLIBRI_PROBE_LINE;   /* line: [8] */
        for (int k = 0; k < COLIBRI_PROBE_LINE; k++) acc[k] ^= line[k];
    }
    for (int k = 0; k < COLIBRI_PROBE_LINE; k++) task->sink[ti] ^= acc[k];
}

static double colibri_probe_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

COLIBRI_API double colibri_read_bandwidth(int32_t n_threads, int64_t n_bytes, int32_t passes) {
    int64_t line_bytes = COLIBRI_PROBE_LINE * (int64_t)sizeof(uint64_t);
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
    int64_t lines = n_bytes / line_bytes;
    size_t len = (size_t)(lines * line_bytes);
    uint64_t *buffer = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buffer == MAP_FAILED) {
        colibri_error_set(COLIBRI_ERR_NOMEM, "read_bandwidth: cannot map %lld bytes", (long long)len);
        return -1.0;
    }
#ifdef MADV_HUGEPAGE
    madvise(buffer, len, MADV_HUGEPAGE);   /* best effort, as the arena */
#endif
    for (int64_t i = 0; i < lines * COLIBRI_PROBE_LINE; i++) buffer[i] = (uint64_t)i;
    uint64_t sink[COLIBRI_MAX_THREADS] = {0};
    colibri_threadpool *pool = colibri_threadpool_create(n_threads);
    if (!pool) {
        munmap(buffer, len);
        return -1.0;
    }
    colibri_probe_task task = {buffer, lines, sink};
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
