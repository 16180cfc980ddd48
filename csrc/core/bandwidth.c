/*
 * bandwidth.c — colibri_read_bandwidth: this machine's read bandwidth, the
 * denominator of `colibri bench`'s roofline.
 *
 * The pool's threads (placed as a context's are by default) stream their
 * shares of one buffer (anonymous, huge pages asked for, each share written
 * by its reader before timing) two ways, and the faster counts: as
 * 64-bit words folded into 8 independent XOR chains (one load per word, no
 * arithmetic that could bound it), and through the active ISA's BF16
 * dot_rows kernel, whose software prefetch sweeps COLIBRI_AHEAD_BYTES ahead (isa.h).
 * Measured on a 2-core AMD EPYC VM, one process, alternating: the plain loop
 * 22-24 GB/s with 1 thread and 44-45 with 2, the kernel 34-35 and 44-46 —
 * one core alone reaches DRAM's full rate only with the prefetch.
 */
#define _DEFAULT_SOURCE 1   /* MAP_ANONYMOUS, madvise */
#include <sys/mman.h>

#include "internal.h"
#include "threadpool.h"
#include "topology.h"
#include "../kernels/isa.h"

#define COLIBRI_PROBE_LINE 8      /* 64-bit words per 64-byte line: the XOR chains */
#define COLIBRI_PROBE_ROW 2048    /* bf16 values per kernel row: 4 KiB */
#define COLIBRI_PROBE_GROUP 64    /* rows per dot_rows call */

typedef struct colibri_probe_task {
    const uint64_t *buffer;   /* buffer: [lines, COLIBRI_PROBE_LINE], or [rows, COLIBRI_PROBE_ROW] bf16 */
    int64_t lines;
    const float *zeros;       /* zeros: [COLIBRI_PROBE_ROW] the kernel's activation row */
    uint64_t *sink;           /* sink: [n_threads] keeps the reads alive */
} colibri_probe_task;

/* The plain loop over thread ti's share. */
static void colibri_probe_words_run(void *arg, int32_t ti, int32_t nt) {
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

/* The BF16 kernel over thread ti's share. */
static void colibri_probe_kernel_run(void *arg, int32_t ti, int32_t nt) {
    const colibri_probe_task *task = (const colibri_probe_task *)arg;
    colibri_dot_rows_fn dot_rows = colibri_isa_active()->dot_rows[COLIBRI_DTYPE_BF16];
    int64_t row_bytes = COLIBRI_PROBE_ROW * 2, lo, hi;
    float y[COLIBRI_PROBE_GROUP];   /* y: [group] row dots */
    colibri_range_split(task->lines * COLIBRI_PROBE_LINE * (int64_t)sizeof(uint64_t) / row_bytes, ti, nt, &lo, &hi);
    for (int64_t r = lo; r < hi; r += COLIBRI_PROBE_GROUP) {
        int64_t n = hi - r < COLIBRI_PROBE_GROUP ? hi - r : COLIBRI_PROBE_GROUP;
        dot_rows((const char *)task->buffer + r * row_bytes, row_bytes, task->zeros, COLIBRI_PROBE_ROW, n, y);
        task->sink[ti] += y[0] != 0.0f;
    }
}

/* Thread ti writes its share (bf16 1.0s), so each page is first touched on
 * the NUMA node of the thread that reads it. */
static void colibri_probe_fill_run(void *arg, int32_t ti, int32_t nt) {
    const colibri_probe_task *task = (const colibri_probe_task *)arg;
    uint64_t *buffer = (uint64_t *)task->buffer;
    int64_t lo, hi;
    colibri_range_split(task->lines, ti, nt, &lo, &hi);
    for (int64_t i = lo * COLIBRI_PROBE_LINE; i < hi * COLIBRI_PROBE_LINE; i++) buffer[i] = 0x3f803f803f803f80u;
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
    int64_t lines = n_bytes / (2 * COLIBRI_PROBE_ROW) * (2 * COLIBRI_PROBE_ROW / line_bytes);   /* whole kernel rows */
    size_t len = (size_t)(lines * line_bytes);
    uint64_t *buffer = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buffer == MAP_FAILED) {
        colibri_error_set(COLIBRI_ERR_NOMEM, "read_bandwidth: cannot map %lld bytes", (long long)len);
        return -1.0;
    }
#ifdef MADV_HUGEPAGE
    madvise(buffer, len, MADV_HUGEPAGE);   /* best effort, as the arena */
#endif
    uint64_t sink[COLIBRI_MAX_THREADS] = {0};
    float zeros[COLIBRI_PROBE_ROW] = {0};
    colibri_thread_plan plan;   /* placed as a context's pool is by default */
    if (colibri_placement_plan(COLIBRI_PLACE_CORES, n_threads, &plan) != COLIBRI_OK) {
        munmap(buffer, len);
        return -1.0;
    }
    colibri_threadpool *pool = colibri_threadpool_create(n_threads, plan.pin ? plan.cpus : NULL);
    colibri_thread_plan_free(&plan);
    if (!pool) {
        munmap(buffer, len);
        return -1.0;
    }
    colibri_probe_task task = {buffer, lines, zeros, sink};
    colibri_threadpool_run(pool, colibri_probe_fill_run, &task);
    colibri_task_fn readers[2] = {colibri_probe_words_run, colibri_probe_kernel_run};
    double best = 0.0;
    for (int32_t p = 0; p < passes; p++) {
        for (int k = 0; k < 2; k++) {
            double start = colibri_now();
            colibri_threadpool_run(pool, readers[k], &task);
            double rate = (double)len / (colibri_now() - start) / 1e9;
            best = rate > best ? rate : best;
        }
    }
    colibri_threadpool_free(pool);
    munmap(buffer, len);
    return best;
}
