/*
 * isa.h — the SIMD kernel tables of libcolibri (internal) and the run-time
 * choice between them.
 *
 * Every instruction set (ISA) the build supports has ONE table: a dot_rows
 * kernel per weight dtype, each taking the same activation row as the
 * reference vec_dot of quant.h (f32 for F32/F16/BF16, Q8_H for Q8_0 / Q4_0 /
 * Q4_1 / Q5_0 / Q5_1 / IQ4_NL, Q8_S for the other block types). The table of each ISA lives in its own
 * folder (x86_avx2/, x86_avx_vnni/, x86_avx512/, x86_amx/, arm_neon/, arm_dotprod/),
 * compiled with that ISA's flags; dispatch.c picks the best one the CPU and
 * OS can run, once, or the one COLIBRI_ISA names. A kernel a table leaves NULL is the scalar
 * table's (dispatch.c fills it in), so an ISA can gain its types one by one.
 *
 * Contract of every kernel (tested in tests/c/test_isa.c): each y[r] is
 * BITWISE equal to the scalar reference vec_dot of row r — the integer parts
 * of block types are exact and the float additions happen in the reference's
 * order (docs/KERNELS.md) — so results never depend on the ISA, the batch
 * size or the thread count.
 */
#ifndef COLIBRI_ISA_H
#define COLIBRI_ISA_H

#include <stdint.h>

#include "colibri.h"

#define COLIBRI_WEIGHT_TYPES 16  /* colibri_dtype F32 .. MXFP4 */
#define COLIBRI_DOT_ROWS 4       /* rows per group that SIMD kernels share activation loads over */

/* y[r] = W[r, :] . x for r in [0, rows): w points at row 0, row r starts
 * w_stride bytes after row r-1; x: [n] in the weight type's activation type;
 * y: [rows]. */
typedef void (*colibri_dot_rows_fn)(const void *w, int64_t w_stride, const void *x, int64_t n,
                                    int64_t rows, float *y);

/* Y[t, r] = W[r, :] . X[t, :] for r in [0, rows), t in [0, n_tok): the
 * same weights against several activation rows (prefill, batched decode).
 * x row t starts x_stride bytes after row t-1 (the activation type, as for
 * dot_rows); y: [n_tok, y_stride] floats, y[t * y_stride + r]. Each y[t, r]
 * is bitwise dot_rows' value for row r and x row t. */
typedef void (*colibri_gemm_fn)(const void *w, int64_t w_stride, const void *x, int64_t x_stride,
                                int64_t n, int64_t rows, int64_t n_tok, float *y, int64_t y_stride);

/* x: [n] f32 (n a multiple of 32) → dst: [n/32] activation blocks, bitwise
 * the reference quantizer of that block type (quant.h). */
typedef void (*colibri_quantize_fn)(const float *x, void *dst, int64_t n);

/* src: n elements of a block type (n a multiple of its block) → y: [n] f32, bitwise the
 * type's scalar to_f32 (quant.h: colibri_dequantize, the gguf package's values). */
typedef void (*colibri_dequantize_fn)(const void *src, float *y, int64_t n);

/* colibri_weighted_sum_f32's / _f16's contract (kernels.h), bitwise its result. */
typedef void (*colibri_weighted_sum_fn)(float *restrict out, const float *restrict w, const void *restrict rows,
                                        int64_t stride, int32_t n, int64_t n_cols);

typedef struct colibri_isa_table {
    const char *name;                                 /* "scalar", "avx2", "avx_vnni", "avx512", "amx", "neon", "neon_dotprod" */
    int (*cpu_supports)(void);                        /* CPU and OS can run it */
    colibri_dot_rows_fn dot_rows[COLIBRI_WEIGHT_TYPES];   /* by colibri_dtype */
    colibri_gemm_fn gemm[COLIBRI_WEIGHT_TYPES];           /* by colibri_dtype */
    colibri_quantize_fn quantize_q8_h;                /* activations of the 32-element types but MXFP4 */
    colibri_quantize_fn quantize_q8_s;                /* activations of the other block types */
    colibri_weighted_sum_fn weighted_sum[2];          /* attention's value sum, by KV dtype (F32, F16) */
    /* a row narrowed into the KV cache's type (F32, F16), bitwise quant.h's
     * colibri_f32_row_from_f32 / colibri_f16_row_from_f32 */
    void (*kv_from_f32[2])(const float *src, void *dst, int64_t n);
    void (*softmax)(float *x, int64_t n);             /* colibri_softmax_apply, bitwise */
    void (*silu_mul)(float *g, const float *u, int64_t n);   /* colibri_silu_mul, bitwise */
    /* by colibri_dtype: the fewest tokens for which gemm beats dot_rows run once per
     * token over the same cached rows (measured; 0: COLIBRI_GEMM_FROM_DEFAULT). Either
     * gives bitwise the same y, so this choice is speed only (matmul.c). */
    uint8_t gemm_from[COLIBRI_WEIGHT_TYPES];
    /* by colibri_dtype: a colibri_gemm_fn for 2 .. gemm_from - 1 tokens that unpacks each
     * row group's weights once for up to COLIBRI_FEW_TOKENS of them (COLIBRI_GEMM_FEW_DEFINE),
     * bitwise dot_rows' values; NULL (never filled in): dot_rows once per token (matmul.c). */
    colibri_gemm_fn gemm_few[COLIBRI_WEIGHT_TYPES];
    /* Exact mode's kernels (matmul.c), by block colibri_dtype (NULL for the float types).
     * dequantize: bitwise the type's to_f32. dot_rows_exact: a colibri_dot_rows_fn with
     * f32 x whose y[r] is bitwise colibri_dot_f32(to_f32(W[r]), x) (kernels.h: 8 partial
     * sums, blocks of 8 in order, combined pairwise, + the empty tail's 0), i.e. the F32
     * dot_rows of the dequantized rows, each row dequantized on the fly, never stored. */
    colibri_dequantize_fn dequantize[COLIBRI_WEIGHT_TYPES];
    colibri_dot_rows_fn dot_rows_exact[COLIBRI_WEIGHT_TYPES];
} colibri_isa_table;

#define COLIBRI_GEMM_FROM_DEFAULT 4   /* where a table sets none: AVX2's Q4_0 with its earlier 4x4 gemm core
                                         measured dot_rows per token faster at 2-3 tokens, even at 4 */

/* The table's quantizer of activation type act (Q8_H or Q8_S); NULL for others. */
colibri_quantize_fn colibri_isa_quantizer(const colibri_isa_table *isa, int32_t act);

/* The tables (which exist depends on the build: COLIBRI_HAVE_AVX2 ...). */
extern const colibri_isa_table colibri_isa_scalar;
extern const colibri_isa_table colibri_isa_avx2;
extern const colibri_isa_table colibri_isa_avx_vnni;
extern const colibri_isa_table colibri_isa_avx512;
extern const colibri_isa_table colibri_isa_amx;
extern const colibri_isa_table colibri_isa_neon;
extern const colibri_isa_table colibri_isa_neon_dotprod;

/* The table in use: chosen once (thread-safe) from COLIBRI_ISA or the CPU. */
const colibri_isa_table *colibri_isa_active(void);
/* The table called name if this build has it and this CPU can run it, else NULL. */
const colibri_isa_table *colibri_isa_find(const char *name);

/* CPU + OS feature probes, compiled without any ISA flags (cpu_x86.c, cpu_arm.c).
 * avx2: AVX2, FMA, F16C and the OS saving YMM state; avx_vnni: avx2 plus
 * AVX-VNNI (the VEX vpdpbusd); avx512: avx2 plus AVX-512 F, BW, VL, VNNI and
 * the OS saving ZMM and opmask state. */
int colibri_cpu_has_avx2(void);
int colibri_cpu_has_avx_vnni(void);
int colibri_cpu_has_avx512(void);
int colibri_cpu_has_amx(void);   /* avx512 plus AMX-TILE, AMX-INT8 and AMX-BF16, the tile state granted by the OS */
int colibri_cpu_has_neon(void);
int colibri_cpu_has_neon_dotprod(void);   /* neon plus the ARMv8.2 dot product instructions */

/* ---- the row-group driver shared by the ISA files ---------------------------
 * Defines NAME (a colibri_dot_rows_fn) from CORE4(const char *const w[4],
 * const char *ahead, const void *x, int64_t n, float out[4]), which computes
 * 4 rows at once with each lane's arithmetic exactly that of a single row,
 * and prefetches as it goes, in address order, the 4 rows' worth of bytes
 * that start at `ahead` (a later group's first row; in a matrix of contiguous
 * rows, that group's 4 rows): each step of k bytes per row prefetches the
 * next 4k bytes of that span (COLIBRI_PREFETCH_SPAN), a step at a time: the
 * 256-element types' cores prefetch one block's bytes in each of a
 * super-block's 4 steps, not the super-block's 4 blocks at its start (a burst
 * of 9-13 lines then; kernels_bench 4096 4096 2048 1, one thread from DRAM,
 * AMX Xeon VM, 3 alternating runs, GB/s: AVX-512 Q4_K 8.8-9.7 -> 9.9, Q5_K
 * 8.5-9.0 -> 9.4-9.7, Q6_K 9.1-9.5 -> 9.5-10.3; AVX2 Q4_K 8.7-9.1 -> 9.4-9.8,
 * Q6_K 8.5-8.8 -> 9.2-9.7; in cache level). The last group prefetches
 * itself. A last group of k < 4 rows repeats its last row in the spare lanes
 * and keeps k outputs.
 *
 * One sweep in address order, not the 4 rows' same offsets side by side:
 * the hardware prefetcher follows a sweep but not 4 interleaved streams a
 * row apart. Streaming 1 GiB of 1024-column rows on a 2-core AMD EPYC VM
 * (alternating runs, GB/s with 1 / 2 threads): Q8_0 34 / 38-39 → 39-41 /
 * 46-49, BF16 28 / 32-33 → 31-38 / 42-45, F32 (left to the hardware
 * prefetcher before) 25-26 / 37-40 → 35-36 / 47, Q4_0 24 / 39-43 → 26 / 45-47
 * (one thread is bound by the nibble arithmetic there). */
#define COLIBRI_PREFETCH(p) __builtin_prefetch((p), 0, 3)   /* read, into every cache level */
/* Prefetches [p, p + bytes) a 64-byte line at a time in address order
 * (bytes a constant expression, so the loop unrolls). */
#define COLIBRI_PREFETCH_SPAN(p, bytes)                                                      \
    do {                                                                                     \
        for (int64_t colibri_at_ = 0; colibri_at_ < (int64_t)(bytes); colibri_at_ += 64) {    \
            COLIBRI_PREFETCH((const char *)(p) + colibri_at_);                               \
        }                                                                                    \
    } while (0)
/* COLIBRI_PREFETCH_SPAN, and each line `far` bytes later into L2 only. A core's
 * prefetches into L1 hold its line fill buffers until their lines arrive, and
 * lines already in L2 arrive sooner (see the AVX-512 K-type cores). */
#define COLIBRI_PREFETCH_SPAN_FAR(p, bytes, far)                                             \
    do {                                                                                     \
        for (int64_t colibri_at_ = 0; colibri_at_ < (int64_t)(bytes); colibri_at_ += 64) {    \
            COLIBRI_PREFETCH((const char *)(p) + colibri_at_);                               \
            __builtin_prefetch((const char *)(p) + colibri_at_ + (far), 0, 2);               \
        }                                                                                    \
    } while (0)
/* Groups between the one computed and the one prefetched: at least
 * COLIBRI_AHEAD_BYTES of rows ahead, so that short rows still cover DRAM's
 * latency (one group ahead was 2.3 KiB for a 1024-column Q4_0 matrix: one
 * thread read 15 GB/s there against 25 with 8 KiB). 16 KiB, not 8: a
 * 4096-column Q6_K group is 13 KiB, so 8 KiB meant the next group, too close
 * (kernels_bench 4096 4096 1024 1, one thread from DRAM, AVX-512, AMX Xeon
 * VM, 4 alternating runs: Q6_K 7.8-9.2 -> 10.3-10.4 GB/s, Q4_K 9.2-9.5 ->
 * 10.2-10.5, Q8_0 and Q4_0 level). */
#define COLIBRI_AHEAD_BYTES 16384
#define COLIBRI_AHEAD_GROUPS(w_stride, ROWS) \
    (1 + COLIBRI_AHEAD_BYTES / ((ROWS) * ((w_stride) > 0 ? (w_stride) : 1)))
/* Defines NAME (a colibri_dot_rows_fn) from CORE(const char *const w[ROWS], const char
 * *ahead, const void *x, int64_t n, float out[ROWS]), which computes ROWS rows against x,
 * each exactly the one-row arithmetic, and prefetches the ROWS rows from `ahead` on (a
 * span of ROWS row strides, in address order over its blocks); spare rows repeat the last
 * one. COLIBRI_DOT_ROWS_DEFINE: the 4-row cores'. */
#define COLIBRI_DOT_ROWS_N_DEFINE(NAME, CORE, ROWS)                                    \
    void NAME(const void *w, int64_t w_stride, const void *x, int64_t n, int64_t rows,  \
              float *y) {                                                               \
        for (int64_t r = 0; r < rows; r += (ROWS)) {                                    \
            int64_t k = rows - r < (ROWS) ? rows - r : (ROWS);                          \
            int64_t next = r + k * COLIBRI_AHEAD_GROUPS(w_stride, ROWS);               \
            next = next < rows ? next : (r + k < rows ? rows - 1 : r);   /* first row ahead */ \
            const char *row[ROWS];                                                      \
            float out[ROWS];                                                            \
            for (int64_t j = 0; j < (ROWS); j++) {                                      \
                row[j] = (const char *)w + (r + (j < k ? j : k - 1)) * w_stride;        \
            }                                                                           \
            CORE(row, (const char *)w + next * w_stride, x, n, out);                    \
            for (int64_t j = 0; j < k; j++) y[r + j] = out[j];                          \
        }                                                                               \
    }
#define COLIBRI_DOT_ROWS_DEFINE(NAME, CORE4) COLIBRI_DOT_ROWS_N_DEFINE(NAME, CORE4, COLIBRI_DOT_ROWS)

/* The most activation rows a few-token core (COLIBRI_GEMM_FEW_DEFINE) takes at once. */
#define COLIBRI_FEW_TOKENS 4
/* Defines NAME (a colibri_gemm_fn for the few tokens under a table's
 * gemm_from: gemm_few) from CORE##_t1 .. CORE##_t4(const char *const w[ROWS],
 * const char *ahead, const void *x, int64_t x_stride, int64_t n, float
 * out[]), which compute ROWS rows against 1 .. 4 activation rows (x, x +
 * x_stride, ...; out[token * ROWS + row]), each (row, token) exactly the one-row
 * arithmetic, with each row's weights unpacked once for all the tokens, and
 * prefetch as CORE4 above does. Row groups outside, chunks of up to 4 tokens
 * inside: a group's weights stay in L1 for its later chunks, and the first
 * chunk prefetches COLIBRI_AHEAD_GROUPS ahead as dot_rows does, so the
 * weights stream from memory once, at dot_rows' pace. */
#define COLIBRI_GEMM_FEW_N_DEFINE(NAME, CORE, ROWS)                                                  \
    void NAME(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n,           \
              int64_t rows, int64_t n_tok, float *y, int64_t y_stride) {                             \
        for (int64_t r = 0; r < rows; r += (ROWS)) {                                                 \
            int64_t k = rows - r < (ROWS) ? rows - r : (ROWS);                                       \
            int64_t next = r + k * COLIBRI_AHEAD_GROUPS(w_stride, ROWS);                            \
            next = next < rows ? next : (r + k < rows ? rows - 1 : r);   /* first row ahead */      \
            const char *row[ROWS];                                                                   \
            for (int64_t j = 0; j < (ROWS); j++) {                                                   \
                row[j] = (const char *)w + (r + (j < k ? j : k - 1)) * w_stride;                     \
            }                                                                                        \
            for (int64_t t = 0; t < n_tok; t += COLIBRI_FEW_TOKENS) {                                \
                int64_t kt = n_tok - t < COLIBRI_FEW_TOKENS ? n_tok - t : COLIBRI_FEW_TOKENS;        \
                const char *xt = (const char *)x + t * x_stride;                                     \
                const char *ahead = t == 0 ? (const char *)w + next * w_stride : row[0];             \
                float out[COLIBRI_FEW_TOKENS * (ROWS)];   /* out: [token, row] */                    \
                switch (kt) {                                                                        \
                case 1: CORE##_t1(row, ahead, xt, x_stride, n, out); break;                         \
                case 2: CORE##_t2(row, ahead, xt, x_stride, n, out); break;                         \
                case 3: CORE##_t3(row, ahead, xt, x_stride, n, out); break;                         \
                default: CORE##_t4(row, ahead, xt, x_stride, n, out); break;                        \
                }                                                                                    \
                for (int64_t j = 0; j < kt; j++) {                                                   \
                    for (int64_t i = 0; i < k; i++) y[(t + j) * y_stride + r + i] = out[j * (ROWS) + i];  \
                }                                                                                    \
            }                                                                                        \
        }                                                                                            \
    }
#define COLIBRI_GEMM_FEW_DEFINE(NAME, CORE) COLIBRI_GEMM_FEW_N_DEFINE(NAME, CORE, COLIBRI_DOT_ROWS)   /* 4-row cores */

/* From an always-inlined NAME##_tokens(w, ahead, x, x_stride, n, T, out), whose token
 * count T is then a constant: NAME, CORE4 above (one token), and NAME##_t1 .. _t4,
 * COLIBRI_GEMM_FEW_DEFINE's cores. */
#define COLIBRI_FEW_CORE(NAME, T, ROWS)                                                            \
    static void NAME##_t##T(const char *const w[ROWS], const char *ahead, const void *x, int64_t x_stride, \
                            int64_t n, float *out) {                                               \
        NAME##_tokens(w, ahead, x, x_stride, n, T, out);                                           \
    }
#define COLIBRI_TOKEN_CORES_N(NAME, ROWS)                                                          \
    static void NAME(const char *const w[ROWS], const char *ahead, const void *x, int64_t n, float out[ROWS]) { \
        NAME##_tokens(w, ahead, x, 0, n, 1, out);                                                  \
    }                                                                                              \
    COLIBRI_FEW_CORE(NAME, 1, ROWS) COLIBRI_FEW_CORE(NAME, 2, ROWS) COLIBRI_FEW_CORE(NAME, 3, ROWS)  \
    COLIBRI_FEW_CORE(NAME, 4, ROWS)
#define COLIBRI_TOKEN_CORES(NAME) COLIBRI_TOKEN_CORES_N(NAME, COLIBRI_DOT_ROWS)

/* Defines NAME (a colibri_gemm_fn) from CORE(const char *const w[4],
 * const char *ahead, const char *const x[4], int64_t n, float out[4][4]),
 * which computes 4 rows against 4 activation rows at once (out[token][row]),
 * each lane exactly the single-row arithmetic, and prefetches the next
 * group's span as CORE4 above does. Row groups outside, token groups inside,
 * so a group's weights stay in L1 while every token passes; spare rows and
 * tokens repeat the last one. */
#define COLIBRI_GEMM_DEFINE(NAME, CORE)                                                     \
    void NAME(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n,  \
              int64_t rows, int64_t n_tok, float *y, int64_t y_stride) {                    \
        for (int64_t r = 0; r < rows; r += 4) {                                             \
            int64_t k = rows - r < 4 ? rows - r : 4;                                        \
            int64_t next = r + k < rows ? r + k : r;                                        \
            const char *row[4], *ahead = (const char *)w + next * w_stride;                 \
            for (int64_t j = 0; j < 4; j++) {                                               \
                row[j] = (const char *)w + (r + (j < k ? j : k - 1)) * w_stride;            \
            }                                                                               \
            for (int64_t t = 0; t < n_tok; t += 4) {                                        \
                int64_t kt = n_tok - t < 4 ? n_tok - t : 4;                                 \
                const char *tok[4];                                                         \
                float out[4][4];                                                            \
                for (int64_t j = 0; j < 4; j++) {                                           \
                    tok[j] = (const char *)x + (t + (j < kt ? j : kt - 1)) * x_stride;      \
                }                                                                           \
                CORE(row, ahead, tok, n, out);                                              \
                for (int64_t j = 0; j < kt; j++) {                                          \
                    for (int64_t i = 0; i < k; i++) y[(t + j) * y_stride + r + i] = out[j][i]; \
                }                                                                           \
            }                                                                               \
        }                                                                                   \
    }

/* Defines a colibri_gemm_fn from DOT_ROWS (a colibri_dot_rows_fn), for
 * types and ISAs without a multi-token core: tiles of COLIBRI_GEMM_TILE_ROWS
 * rows, each tile once per activation row while it sits in L2. */
#define COLIBRI_GEMM_TILE_ROWS 32
#define COLIBRI_GEMM_EACH_DEFINE(DECL, DOT_ROWS)                                                 \
    DECL(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n,            \
         int64_t rows, int64_t n_tok, float *y, int64_t y_stride) {                               \
        for (int64_t r = 0; r < rows; r += COLIBRI_GEMM_TILE_ROWS) {                             \
            int64_t k = rows - r < COLIBRI_GEMM_TILE_ROWS ? rows - r : COLIBRI_GEMM_TILE_ROWS;   \
            for (int64_t t = 0; t < n_tok; t++) {                                                \
                DOT_ROWS((const char *)w + r * w_stride, w_stride, (const char *)x + t * x_stride, n, k, \
                         y + t * y_stride + r);                                                  \
            }                                                                                    \
        }                                                                                        \
    }

/* Defines NAME (a colibri_gemm_fn) for f32 activation rows from CORE(const
 * char *const w[4], const float *const x[TOKENS], int64_t n, float
 * out[TOKENS][4], int64_t nt), which computes 4 rows against the first nt
 * (<= TOKENS) of its TOKENS activation rows (spares repeat the last one; their
 * results are dropped), each (row, token) exactly the one-row arithmetic.
 * Rows come in tiles of COLIBRI_GEMM_TILE_ROWS that stay in L2; within a
 * tile, a group of tokens (its f32 rows in L1) passes every 4-row group
 * before the next group of tokens. */
#define COLIBRI_GEMM_FLOAT_TILED_DEFINE(NAME, CORE, TOKENS)                                         \
    void NAME(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, \
              int64_t n_tok, float *y, int64_t y_stride) {                                            \
        for (int64_t r0 = 0; r0 < rows; r0 += COLIBRI_GEMM_TILE_ROWS) {                               \
            int64_t r_end = rows - r0 < COLIBRI_GEMM_TILE_ROWS ? rows : r0 + COLIBRI_GEMM_TILE_ROWS;  \
            for (int64_t t0 = 0; t0 < n_tok; t0 += (TOKENS)) {                                        \
                int64_t nt = n_tok - t0 < (TOKENS) ? n_tok - t0 : (TOKENS);                           \
                const float *xs[TOKENS];   /* xs: [token] activation rows, the last repeated */       \
                for (int64_t t = 0; t < (TOKENS); t++) {                                              \
                    xs[t] = (const float *)((const char *)x + (t < nt ? t0 + t : t0 + nt - 1) * x_stride); \
                }                                                                                     \
                for (int64_t r = r0; r < r_end; r += 4) {                                             \
                    const char *ws[4];   /* ws: [row] weight rows, the last repeated */               \
                    for (int k = 0; k < 4; k++) {                                                     \
                        ws[k] = (const char *)w + (r + k < r_end ? r + k : r_end - 1) * w_stride;     \
                    }                                                                                 \
                    float out[TOKENS][4];   /* out: [token][row] */                                   \
                    CORE(ws, xs, n, out, nt);                                                         \
                    for (int64_t t = 0; t < nt; t++) {                                                \
                        for (int k = 0; k < 4 && r + k < r_end; k++) y[(t0 + t) * y_stride + r + k] = out[t][k]; \
                    }                                                                                 \
                }                                                                                     \
            }                                                                                         \
        }                                                                                             \
    }

/* Defines a colibri_dot_rows_fn as one DOT1 (a colibri_dot_fn) call per row,
 * for the scalar table and ISAs without a 4-row core. DECL is the function's
 * return type and name, with a storage class if any: `static void f`. */
#define COLIBRI_DOT_ROWS_EACH_DEFINE(DECL, DOT1)                                         \
    DECL(const void *w, int64_t w_stride, const void *x, int64_t n, int64_t rows,         \
         float *y) {                                                                      \
        for (int64_t r = 0; r < rows; r++) y[r] = DOT1((const char *)w + r * w_stride, x, n); \
    }

/* ---- kernels of each ISA (same contract as colibri_dot_rows_fn) ------------- */
void colibri_dot_rows_f32_avx2(const void *w, int64_t w_stride, const void *x, int64_t n, int64_t rows, float *y);
void colibri_dot_rows_f16_avx2(const void *w, int64_t w_stride, const void *x, int64_t n, int64_t rows, float *y);
void colibri_dot_rows_bf16_avx2(const void *w, int64_t w_stride, const void *x, int64_t n, int64_t rows, float *y);
void colibri_dot_rows_q8_0_avx2(const void *w, int64_t w_stride, const void *x, int64_t n, int64_t rows, float *y);
void colibri_dot_rows_q4_0_avx2(const void *w, int64_t w_stride, const void *x, int64_t n, int64_t rows, float *y);
void colibri_dot_rows_q4_1_avx2(const void *w, int64_t w_stride, const void *x, int64_t n, int64_t rows, float *y);
void colibri_weighted_sum_f32_avx2(float *restrict out, const float *restrict w, const void *restrict rows,
                                   int64_t stride, int32_t n, int64_t n_cols);
void colibri_weighted_sum_f16_avx2(float *restrict out, const float *restrict w, const void *restrict rows,
                                   int64_t stride, int32_t n, int64_t n_cols);
void colibri_weighted_sum_f32_avx512(float *restrict out, const float *restrict w, const void *restrict rows,
                                     int64_t stride, int32_t n, int64_t n_cols);
void colibri_weighted_sum_f16_avx512(float *restrict out, const float *restrict w, const void *restrict rows,
                                     int64_t stride, int32_t n, int64_t n_cols);
/* colibri_sum_f32 (kernels.h) with AVX2, bitwise; both softmax versions use it. */
float colibri_sum_f32_avx2(const float *x, int64_t n);
void colibri_softmax_avx2(float *x, int64_t n);
void colibri_f16_row_from_f32_avx2(const float *src, void *dst, int64_t n);
void colibri_f16_row_from_f32_neon(const float *src, void *dst, int64_t n);
void colibri_softmax_avx512(float *x, int64_t n);
void colibri_silu_mul_avx2(float *g, const float *u, int64_t n);
void colibri_silu_mul_avx512(float *g, const float *u, int64_t n);
void colibri_quantize_q8_h_avx2(const float *x, void *dst, int64_t n);
void colibri_quantize_q8_s_avx2(const float *x, void *dst, int64_t n);
void colibri_quantize_q8_h_avx512(const float *x, void *dst, int64_t n);
void colibri_quantize_q8_s_avx512(const float *x, void *dst, int64_t n);
void colibri_dot_rows_q8_0_avx512(const void *w, int64_t w_stride, const void *x, int64_t n, int64_t rows, float *y);
void colibri_dot_rows_q4_0_avx512(const void *w, int64_t w_stride, const void *x, int64_t n, int64_t rows, float *y);
void colibri_dot_rows_q4_1_avx512(const void *w, int64_t w_stride, const void *x, int64_t n, int64_t rows, float *y);
#define COLIBRI_DECLARE_DOT_ROWS(T, ISA) \
    void colibri_dot_rows_##T##_##ISA(const void *w, int64_t w_stride, const void *x, int64_t n, int64_t rows, float *y);
#define COLIBRI_DECLARE_BLOCK_DOT_ROWS(ISA) \
    COLIBRI_DECLARE_DOT_ROWS(q5_0, ISA) COLIBRI_DECLARE_DOT_ROWS(q5_1, ISA) COLIBRI_DECLARE_DOT_ROWS(q2_k, ISA) \
    COLIBRI_DECLARE_DOT_ROWS(q3_k, ISA) COLIBRI_DECLARE_DOT_ROWS(q4_k, ISA) COLIBRI_DECLARE_DOT_ROWS(q5_k, ISA) \
    COLIBRI_DECLARE_DOT_ROWS(q6_k, ISA) COLIBRI_DECLARE_DOT_ROWS(iq4_nl, ISA) COLIBRI_DECLARE_DOT_ROWS(iq4_xs, ISA) \
    COLIBRI_DECLARE_DOT_ROWS(mxfp4, ISA)
#define COLIBRI_DECLARE_GEMM(T, ISA)                                                                         \
    void colibri_gemm_##T##_##ISA(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, \
                                  int64_t rows, int64_t n_tok, float *y, int64_t y_stride);
#define COLIBRI_DECLARE_BLOCK_GEMM(ISA)                                                                        \
    COLIBRI_DECLARE_GEMM(q5_0, ISA) COLIBRI_DECLARE_GEMM(q5_1, ISA) COLIBRI_DECLARE_GEMM(q2_k, ISA)           \
    COLIBRI_DECLARE_GEMM(q3_k, ISA) COLIBRI_DECLARE_GEMM(q4_k, ISA) COLIBRI_DECLARE_GEMM(q5_k, ISA)           \
    COLIBRI_DECLARE_GEMM(q6_k, ISA) COLIBRI_DECLARE_GEMM(iq4_nl, ISA) COLIBRI_DECLARE_GEMM(iq4_xs, ISA)       \
    COLIBRI_DECLARE_GEMM(mxfp4, ISA)
COLIBRI_DECLARE_BLOCK_DOT_ROWS(avx2)
COLIBRI_DECLARE_BLOCK_GEMM(avx2)
/* the avx512 and amx tables' gemm_few (x86_avx512/dot_blocks.c; Q8_0 / Q4_0 / Q4_1: dot_quant.c) */
COLIBRI_DECLARE_GEMM(few_q2_k, avx512) COLIBRI_DECLARE_GEMM(few_q3_k, avx512) COLIBRI_DECLARE_GEMM(few_q4_k, avx512)
COLIBRI_DECLARE_GEMM(few_q5_k, avx512) COLIBRI_DECLARE_GEMM(few_q6_k, avx512) COLIBRI_DECLARE_GEMM(few_iq4_xs, avx512)
COLIBRI_DECLARE_GEMM(few_q5_0, avx512) COLIBRI_DECLARE_GEMM(few_q5_1, avx512) COLIBRI_DECLARE_GEMM(few_iq4_nl, avx512)
COLIBRI_DECLARE_GEMM(few_mxfp4, avx512) COLIBRI_DECLARE_GEMM(few_q8_0, avx512) COLIBRI_DECLARE_GEMM(few_q4_0, avx512) COLIBRI_DECLARE_GEMM(few_q4_1, avx512)
/* the avx2 and avx_vnni tables' gemm_few: Q8_0 / Q4_0 / Q4_1 (x86_avx2/block_core.h), the K types and
 * IQ4_XS (x86_avx2/dot_blocks.c) */
COLIBRI_DECLARE_GEMM(few_q2_k, avx2) COLIBRI_DECLARE_GEMM(few_q3_k, avx2) COLIBRI_DECLARE_GEMM(few_q4_k, avx2)
COLIBRI_DECLARE_GEMM(few_q5_k, avx2) COLIBRI_DECLARE_GEMM(few_q6_k, avx2) COLIBRI_DECLARE_GEMM(few_iq4_xs, avx2)
COLIBRI_DECLARE_GEMM(few_q8_0, avx2) COLIBRI_DECLARE_GEMM(few_q4_0, avx2) COLIBRI_DECLARE_GEMM(few_q4_1, avx2)
COLIBRI_DECLARE_GEMM(few_q8_0, avx_vnni) COLIBRI_DECLARE_GEMM(few_q4_0, avx_vnni) COLIBRI_DECLARE_GEMM(few_q4_1, avx_vnni)
/* exact mode's kernels (x86_avx2/exact.c), shared by the avx2, avx_vnni and avx512 tables */
#define COLIBRI_DECLARE_EXACT(T, ISA)                                                        \
    void colibri_dequantize_##T##_##ISA(const void *src, float *y, int64_t n);              \
    void colibri_dot_rows_exact_##T##_##ISA(const void *w, int64_t w_stride, const void *x, int64_t n, \
                                            int64_t rows, float *y);
#define COLIBRI_DECLARE_EXACT_ALL(ISA)                                                       \
    COLIBRI_DECLARE_EXACT(q8_0, ISA) COLIBRI_DECLARE_EXACT(q4_0, ISA) COLIBRI_DECLARE_EXACT(q4_1, ISA)     \
    COLIBRI_DECLARE_EXACT(q5_0, ISA) COLIBRI_DECLARE_EXACT(q5_1, ISA) COLIBRI_DECLARE_EXACT(q2_k, ISA)     \
    COLIBRI_DECLARE_EXACT(q3_k, ISA) COLIBRI_DECLARE_EXACT(q4_k, ISA) COLIBRI_DECLARE_EXACT(q5_k, ISA)     \
    COLIBRI_DECLARE_EXACT(q6_k, ISA) COLIBRI_DECLARE_EXACT(iq4_nl, ISA) COLIBRI_DECLARE_EXACT(iq4_xs, ISA) \
    COLIBRI_DECLARE_EXACT(mxfp4, ISA)
COLIBRI_DECLARE_EXACT_ALL(avx2)
COLIBRI_DECLARE_EXACT_ALL(neon)   /* arm_neon/exact.c, shared by the neon and neon_dotprod tables */
/* A table's entries for every block dtype, from the kernels named PREFIX<type>_ISA (exact mode's,
 * gemm_few). */
#define COLIBRI_BLOCK_ENTRIES(PREFIX, ISA)                                                   \
    {                                                                                        \
        [COLIBRI_DTYPE_Q8_0] = PREFIX##q8_0_##ISA, [COLIBRI_DTYPE_Q4_0] = PREFIX##q4_0_##ISA,           \
        [COLIBRI_DTYPE_Q4_1] = PREFIX##q4_1_##ISA, [COLIBRI_DTYPE_Q5_0] = PREFIX##q5_0_##ISA,           \
        [COLIBRI_DTYPE_Q5_1] = PREFIX##q5_1_##ISA, [COLIBRI_DTYPE_Q2_K] = PREFIX##q2_k_##ISA,           \
        [COLIBRI_DTYPE_Q3_K] = PREFIX##q3_k_##ISA, [COLIBRI_DTYPE_Q4_K] = PREFIX##q4_k_##ISA,           \
        [COLIBRI_DTYPE_Q5_K] = PREFIX##q5_k_##ISA, [COLIBRI_DTYPE_Q6_K] = PREFIX##q6_k_##ISA,           \
        [COLIBRI_DTYPE_IQ4_NL] = PREFIX##iq4_nl_##ISA, [COLIBRI_DTYPE_IQ4_XS] = PREFIX##iq4_xs_##ISA,   \
        [COLIBRI_DTYPE_MXFP4] = PREFIX##mxfp4_##ISA,                                         \
    }
COLIBRI_DECLARE_BLOCK_DOT_ROWS(avx512)
COLIBRI_DECLARE_BLOCK_GEMM(avx512)
COLIBRI_DECLARE_GEMM(q4_k, amx) COLIBRI_DECLARE_GEMM(q5_k, amx) COLIBRI_DECLARE_GEMM(iq4_xs, amx)
COLIBRI_DECLARE_GEMM(mxfp4, amx) COLIBRI_DECLARE_GEMM(q2_k, amx) COLIBRI_DECLARE_GEMM(q3_k, amx)
COLIBRI_DECLARE_GEMM(q6_k, amx)
COLIBRI_DECLARE_BLOCK_DOT_ROWS(neon)
COLIBRI_DECLARE_BLOCK_GEMM(neon)
COLIBRI_DECLARE_BLOCK_DOT_ROWS(neon_dotprod)
COLIBRI_DECLARE_BLOCK_GEMM(neon_dotprod)
void colibri_dot_rows_f32_neon(const void *w, int64_t w_stride, const void *x, int64_t n, int64_t rows, float *y);
void colibri_dot_rows_f16_neon(const void *w, int64_t w_stride, const void *x, int64_t n, int64_t rows, float *y);
void colibri_dot_rows_bf16_neon(const void *w, int64_t w_stride, const void *x, int64_t n, int64_t rows, float *y);
void colibri_dot_rows_q8_0_neon(const void *w, int64_t w_stride, const void *x, int64_t n, int64_t rows, float *y);
void colibri_dot_rows_q4_0_neon(const void *w, int64_t w_stride, const void *x, int64_t n, int64_t rows, float *y);
void colibri_dot_rows_q4_1_neon(const void *w, int64_t w_stride, const void *x, int64_t n, int64_t rows, float *y);

void colibri_gemm_f32_avx2(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, float *y, int64_t y_stride);
void colibri_gemm_f16_avx2(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, float *y, int64_t y_stride);
void colibri_gemm_bf16_avx2(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, float *y, int64_t y_stride);
void colibri_gemm_q8_0_avx2(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, float *y, int64_t y_stride);
void colibri_gemm_q4_0_avx2(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, float *y, int64_t y_stride);
void colibri_gemm_q4_1_avx2(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, float *y, int64_t y_stride);
void colibri_dot_rows_q8_0_avx_vnni(const void *w, int64_t w_stride, const void *x, int64_t n, int64_t rows, float *y);
void colibri_dot_rows_q4_0_avx_vnni(const void *w, int64_t w_stride, const void *x, int64_t n, int64_t rows, float *y);
void colibri_dot_rows_q4_1_avx_vnni(const void *w, int64_t w_stride, const void *x, int64_t n, int64_t rows, float *y);
void colibri_gemm_q8_0_avx_vnni(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, float *y, int64_t y_stride);
void colibri_gemm_q4_0_avx_vnni(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, float *y, int64_t y_stride);
void colibri_gemm_q4_1_avx_vnni(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, float *y, int64_t y_stride);
void colibri_gemm_f32_avx512(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, float *y, int64_t y_stride);
void colibri_gemm_f16_avx512(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, float *y, int64_t y_stride);
void colibri_gemm_bf16_avx512(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, float *y, int64_t y_stride);
void colibri_gemm_q8_0_avx512(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, float *y, int64_t y_stride);
void colibri_gemm_q4_0_avx512(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, float *y, int64_t y_stride);
void colibri_gemm_q4_1_avx512(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, float *y, int64_t y_stride);
void colibri_softmax_neon(float *x, int64_t n);
void colibri_silu_mul_neon(float *g, const float *u, int64_t n);
void colibri_quantize_q8_h_neon(const float *x, void *dst, int64_t n);
void colibri_quantize_q8_s_neon(const float *x, void *dst, int64_t n);
void colibri_weighted_sum_f32_neon(float *restrict out, const float *restrict w, const void *restrict rows,
                                   int64_t stride, int32_t n, int64_t n_cols);
void colibri_weighted_sum_f16_neon(float *restrict out, const float *restrict w, const void *restrict rows,
                                   int64_t stride, int32_t n, int64_t n_cols);
void colibri_gemm_f32_neon(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, float *y, int64_t y_stride);
void colibri_gemm_f16_neon(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, float *y, int64_t y_stride);
void colibri_gemm_bf16_neon(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, float *y, int64_t y_stride);
void colibri_gemm_q8_0_neon(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, float *y, int64_t y_stride);
void colibri_gemm_q4_0_neon(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, float *y, int64_t y_stride);
void colibri_dot_rows_q8_0_neon_dotprod(const void *w, int64_t w_stride, const void *x, int64_t n, int64_t rows, float *y);
void colibri_dot_rows_q4_0_neon_dotprod(const void *w, int64_t w_stride, const void *x, int64_t n, int64_t rows, float *y);
void colibri_dot_rows_q4_1_neon_dotprod(const void *w, int64_t w_stride, const void *x, int64_t n, int64_t rows, float *y);
void colibri_gemm_q8_0_neon_dotprod(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, float *y, int64_t y_stride);
void colibri_gemm_q4_0_neon_dotprod(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, float *y, int64_t y_stride);
void colibri_gemm_q4_1_neon_dotprod(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, float *y, int64_t y_stride);
void colibri_gemm_q4_1_neon(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, int64_t n_tok, float *y, int64_t y_stride);

#endif /* COLIBRI_ISA_H */
