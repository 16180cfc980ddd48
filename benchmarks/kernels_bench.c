/*
 * kernels_bench.c — how fast each kernel table streams weights on a decode
 * shape: one activation row times a [rows, cols] weight matrix (default
 * [4096, 4096]), one thread, every weight dtype, every ISA this build and CPU
 * can run. One pass walks distinct copies of the matrix that together fill
 * MIB MiB (default 2048, well past the last-level cache — 480 MiB on some
 * servers), so DRAM is read, not cache. Prints a table and one JSON line per
 * result: GB/s of weight bytes, median of 5 passes. Then the multi-token
 * kernels (gemm, and gemm_few where the table has one): the first GEMM_ROWS
 * rows against TOKENS activation rows (default 64), in cache, as GMAC/s (multiply-adds per second). A benchmark, not a
 * test.
 *
 *   build/kernels_bench [rows cols [MIB [TOKENS [DTYPES [ISAS]]]]]
 *
 * DTYPES and ISAS: comma-separated names ("Q4_K,Q6_K", "avx2") to time only
 * those (default: all).
 */
#define _POSIX_C_SOURCE 199309L   /* clock_gettime under -std=c99 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "colibri.h"
#include "isa.h"
#include "quant.h"

#define RUNS 5
#define GEMM_ROWS 512

static double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Whether name is one of the comma-separated names of list (NULL: every name). */
static int bench_listed(const char *list, const char *name) {
    if (!list) return 1;
    size_t len = strlen(name);
    for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        if (strncmp(p, name, len) == 0 && (p[len] == ',' || p[len] == '\0')) return 1;
    }
    return 0;
}

static int bench_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One kernel to time: dot_rows (tokens == 1) on each of `copies` matrices
 * laid back to back, or gemm (few: gemm_few) against `tokens` activation rows. */
typedef struct bench_call {
    const colibri_isa_table *isa;
    int few;                     /* gemm_few, not gemm */
    int32_t dtype;
    const char *w;               /* w: [copies, rows, cols] of the dtype */
    int64_t row_bytes, copies, rows, cols;
    const char *x;               /* x: [tokens, cols] in the activation type, x_bytes apart */
    int64_t x_bytes, tokens;
    float *y;                    /* y: [tokens, rows] */
} bench_call;

/* Median over RUNS of the seconds one matrix takes. */
static double bench_median_seconds(const bench_call *c) {
    double times[RUNS];
    int64_t matrix_bytes = c->rows * c->row_bytes;
    for (int run = 0; run < RUNS; run++) {
        double t0 = bench_now();
        for (int64_t k = 0; k < c->copies; k++) {
            const char *w = c->w + k * matrix_bytes;
            if (c->tokens == 1) {
                c->isa->dot_rows[c->dtype](w, c->row_bytes, c->x, c->cols, c->rows, c->y);
            } else {
                (c->few ? c->isa->gemm_few : c->isa->gemm)[c->dtype](w, c->row_bytes, c->x, c->x_bytes, c->cols, c->rows, c->tokens, c->y, c->rows);
            }
        }
        times[run] = (bench_now() - t0) / (double)c->copies;
    }
    qsort(times, RUNS, sizeof(double), bench_cmp);
    return times[RUNS / 2];
}

int main(int argc, char **argv) {
    int64_t rows = argc > 2 ? atoll(argv[1]) : 4096, cols = argc > 2 ? atoll(argv[2]) : 4096;
    int64_t mib = argc > 3 ? atoll(argv[3]) : 2048;
    int64_t gemm_tokens = argc > 4 ? atoll(argv[4]) : 64;
    const char *dtypes = argc > 5 ? argv[5] : NULL, *isas = argc > 6 ? argv[6] : NULL;
    if (rows <= 0 || cols <= 0 || cols % 32 != 0 || rows > (1 << 20) || cols > (1 << 20) || mib <= 0 ||
        mib > (1 << 16) || gemm_tokens <= 0 || gemm_tokens > 4096) {
        fprintf(stderr, "usage: kernels_bench [rows cols [MIB [TOKENS [DTYPES [ISAS]]]]] (cols a multiple of 32, MIB <= 65536, "
                        "TOKENS <= 4096)\n");
        return 2;
    }
    int64_t pool_bytes = mib << 20;
    const char *names[] = {"scalar", "avx2", "avx_vnni", "avx512", "amx", "neon", "neon_dotprod"};
    float *src = malloc((size_t)cols * sizeof(float));          /* src: [cols] */
    float *y = malloc((size_t)rows * sizeof(float));            /* y: [rows] */
    char *w = malloc((size_t)pool_bytes);                       /* w: [copies, rows, cols] of the dtype */
    char *xq = malloc((size_t)cols * 4);                        /* xq: [cols] activation */
    if (!src || !y || !w || !xq) return 1;
    for (int64_t c = 0; c < cols; c++) src[c] = (float)((c * 7919) % 1000) / 1000.0f - 0.5f;
    printf("%-7s %-5s %8s %8s\n", "isa", "dtype", "GB/s", "ms");
    for (int32_t dtype = 0; dtype < COLIBRI_WEIGHT_TYPES; dtype++) {
        const colibri_type_traits *t = colibri_type_traits_of(dtype);
        if (!bench_listed(dtypes, t->name)) continue;
        int64_t row_bytes = colibri_row_bytes(dtype, cols), matrix_bytes = rows * row_bytes;
        int64_t copies = pool_bytes / matrix_bytes > 0 ? pool_bytes / matrix_bytes : 1;
        if (copies * matrix_bytes > pool_bytes) continue;   /* one matrix larger than the pool */
        t->from_f32(src, w, cols);   /* every row the same bytes: one (slow, searching) quantization */
        for (int64_t r = 1; r < rows; r++) memcpy(w + r * row_bytes, w, (size_t)row_bytes);
        for (int64_t c = 1; c < copies; c++) memcpy(w + c * matrix_bytes, w, (size_t)matrix_bytes);
        colibri_type_traits_of(t->act_type)->from_f32(src, xq, cols);
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
            const colibri_isa_table *isa = colibri_isa_find(names[i]);
            if (!isa || !bench_listed(isas, isa->name)) continue;
            bench_call call = {isa, 0, dtype, w, row_bytes, copies, rows, cols, xq, 0, 1, y};
            double seconds = bench_median_seconds(&call);
            double gbs = (double)(rows * row_bytes) / seconds / 1e9;
            printf("%-7s %-5s %8.2f %8.3f\n", isa->name, t->name, gbs, seconds * 1e3);
            printf("{\"isa\": \"%s\", \"dtype\": \"%s\", \"rows\": %lld, \"cols\": %lld, \"gb_per_s\": %.3f, "
                   "\"median_ms\": %.4f}\n", isa->name, t->name, (long long)rows, (long long)cols, gbs, seconds * 1e3);
        }
    }
    /* gemm: xs: [gemm_tokens] copies of the activation row, ys: [gemm_tokens, g_rows] */
    int64_t g_rows = rows < GEMM_ROWS ? rows : GEMM_ROWS;
    char *xs = malloc((size_t)(gemm_tokens * cols * 4));
    float *ys = malloc((size_t)(gemm_tokens * g_rows) * sizeof(float));
    if (!xs || !ys) return 1;
    printf("\n%-7s %-5s %8s %8s   (gemm: %lld rows x %d tokens)\n", "isa", "dtype", "GMAC/s", "ms",
           (long long)g_rows, (int)gemm_tokens);
    for (int32_t dtype = 0; dtype < COLIBRI_WEIGHT_TYPES; dtype++) {
        const colibri_type_traits *t = colibri_type_traits_of(dtype);
        if (!bench_listed(dtypes, t->name)) continue;
        int64_t row_bytes = colibri_row_bytes(dtype, cols), x_bytes = colibri_row_bytes(t->act_type, cols);
        t->from_f32(src, w, cols);
        for (int64_t r = 1; r < g_rows; r++) memcpy(w + r * row_bytes, w, (size_t)row_bytes);
        for (int64_t k = 0; k < gemm_tokens; k++) colibri_type_traits_of(t->act_type)->from_f32(src, xs + k * x_bytes, cols);
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
            const colibri_isa_table *isa = colibri_isa_find(names[i]);
            if (!isa || !bench_listed(isas, isa->name)) continue;
            for (int few = 0; few < 2; few++) {
                if (few && !isa->gemm_few[dtype]) continue;
                const char *kernel = few ? "gemm_few" : "gemm";
                bench_call call = {isa, few, dtype, w, row_bytes, 1, g_rows, cols, xs, x_bytes, gemm_tokens, ys};
                double seconds = bench_median_seconds(&call);
                double gmacs = (double)(g_rows * cols * gemm_tokens) / seconds / 1e9;
                printf("%-7s %-5s %8.2f %8.3f %s\n", isa->name, t->name, gmacs, seconds * 1e3, kernel);
                printf("{\"isa\": \"%s\", \"dtype\": \"%s\", \"kernel\": \"%s\", \"rows\": %lld, \"cols\": %lld, "
                       "\"tokens\": %d, \"gmac_per_s\": %.3f}\n", isa->name, t->name, kernel, (long long)g_rows,
                       (long long)cols, (int)gemm_tokens, gmacs);
            }
        }
    }
    free(src), free(y), free(w), free(xq), free(xs), free(ys);
    return 0;
}
