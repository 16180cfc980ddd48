/*
 * test_isa.c — every SIMD kernel table this build has and this CPU can run
 * (amx, avx512, avx_vnni, avx2, neon_dotprod, neon), forced one after the other, against the scalar
 * reference (quant.h's type table), for every weight dtype:
 *   - bitwise equal to the reference vec_dot on odd shapes: rows 1..67, cols
 *     1..2048 with tails for F32/F16/BF16 and whole blocks up to 2048 for the
 *     block types; a row stride wider than the row; Q8_0 weights that hold
 *     -128 (GGUF files may); the types of quant_blocks.h as random bytes (every
 *     quant, sub-block scale and min value) with sane f16 scales;
 *   - integer parts exact: with unit scales the result is the exact integer
 *     sum of products, checked against an int64 sum;
 *   - quantized matmul vs a float64 dot of the dequantized weights with the
 *     UNquantized activations: NMSE <= 5e-4;
 *   - the multi-token gemm kernel (and the scalar table's) and the few-token
 *     gemm_few where the table has one: every y[t, r] bitwise the reference
 *     vec_dot, for 1..130 tokens, odd row counts, wide weight / activation /
 *     output strides;
 *   - every block type on edge-case blocks (every byte one bit
 *     pattern, f16 scales from 0 and subnormals to ±65504, ±inf and NaN,
 *     MXFP4 exponents 0..255) against extreme activations: decode and gemm
 *     bitwise the reference (a NaN result may differ in its payload only);
 *   - exact mode's dequantize and fused dot (every block type) on random and
 *     edge-case blocks: bitwise to_f32 and colibri_dot_f32 of it;
 *   - the KV cache's f16 narrowing: bitwise colibri_f32_to_f16 on every
 *     f32 exponent with several mantissas, both signs, each side of every
 *     rounding tie, f16 subnormals, overflow, ±inf and NaN payloads;
 *   - attention's weighted sum over f32 and f16 rows: bitwise the reference for column counts
 *     around every vector width up to 256, 0..300 rows (around every row tile), a row stride
 *     wider than a row;
 *   - softmax and SiLU·up (colibri_expf inside): bitwise the reference on
 *     lengths around every vector width, values from -120 to 100 (under- and
 *     overflowing exp), ±inf and NaN;
 *   - the activation quantizers (Q8_H, Q8_S): every byte equal to the
 *     reference's, on random rows of several magnitudes and on blocks of
 *     exact halves, values beyond ±127·d, zeros, denormals, ±inf and NaN,
 *     halves of unequal magnitude (every Q8_H multiplier, integer ratios).
 * Prints "N passed, M failed"; exit 1 on failure.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri.h"
#include "isa.h"
#include "kernels.h"
#include "quant.h"

#include "check.h"

static uint64_t rng = 7;
static int n_mismatched;   /* shapes whose result differs bitwise from the reference */

static const char *const isa_names[] = {"amx", "avx512", "avx_vnni", "avx2", "neon_dotprod", "neon"};
static const int64_t row_counts[] = {1, 2, 3, 4, 5, 7, 13, 31, 67};
static const int64_t float_cols[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 100, 255, 1000, 2047, 2048};
static const int64_t block_cols[] = {32, 64, 96, 160, 256, 480, 768, 1024, 1280, 2016, 2048};   /* those that are
                                                                                   whole blocks of the type */

#define N_ROWS (int64_t)(sizeof(row_counts) / sizeof(row_counts[0]))
#define MAX_ROWS 67
#define MAX_COLS 2048
#define PAD 64   /* extra bytes between weight rows in the wide-stride case */

/* Random blocks of the types of quant_blocks.h (their searching quantizers are
 * too slow for thousands of shapes): every byte random, so that every quant,
 * sub-block scale and min takes extreme values, but the f16 scales, random
 * finite values of either sign in [2^-10, 2^-4) (or 0, one block in 16), and
 * MXFP4's exponent, in [110, 130] (finite products). */
static void test_random_blocks(int32_t dtype, char *row, int64_t cols) {
    const colibri_type_traits *t = colibri_type_traits_of(dtype);
    for (int64_t b = 0; b < cols / t->block_elems; b++) {
        unsigned char *blk = (unsigned char *)row + b * t->block_bytes;
        for (int64_t k = 0; k < t->block_bytes; k++) blk[k] = (unsigned char)(test_rand(&rng) * 256.0f + 128.0f);
        for (int f = 0; f < 2; f++) {
            float v = (b % 16 == 5) ? 0.0f : ldexpf(1.0f + test_rand(&rng), -10 + (int)(b % 6)) * (b % 3 ? 1.0f : -1.0f);
            uint16_t h = colibri_f32_to_f16(v);
            if (t->f16_at[f] >= 0) memcpy(blk + t->f16_at[f], &h, sizeof h);
        }
        if (dtype == COLIBRI_DTYPE_MXFP4) blk[0] = (unsigned char)(110 + b % 21);
    }
}

/* Fills w: [rows] rows of `stride` bytes with random weights of dtype (cols
 * each), keeping their f32 values in wf: [rows, cols] (dequantized); x: [cols]
 * random f32, xq its activation-type copy. Q8_0 rows get some -128 bytes. */
static void test_make(int32_t dtype, int64_t rows, int64_t cols, int64_t stride, char *w, float *wf,
                      float *x, char *xq) {
    const colibri_type_traits *t = colibri_type_traits_of(dtype);
    for (int64_t r = 0; r < rows; r++) {
        float *src = wf + r * cols;   /* src: [cols] */
        for (int64_t c = 0; c < cols; c++) src[c] = test_rand(&rng) * (1.0f + (float)(r % 5));
        if (dtype >= COLIBRI_DTYPE_Q5_0) {
            test_random_blocks(dtype, w + r * stride, cols);
        } else {
            t->from_f32(src, w + r * stride, cols);
        }
        if (dtype == COLIBRI_DTYPE_Q8_0) {
            colibri_block_q8_0 *b = (colibri_block_q8_0 *)(w + r * stride);
            b[r % (cols / COLIBRI_QK)].qs[r % COLIBRI_QK] = -128;
        }
        t->to_f32(w + r * stride, src, cols);
    }
    for (int64_t c = 0; c < cols; c++) x[c] = test_rand(&rng) * 2.0f;
    const colibri_type_traits *act = colibri_type_traits_of(t->act_type);
    act->from_f32(x, xq, cols);
}

/* One (isa, dtype, rows, cols, stride): bitwise vs the reference; for block
 * types accumulates the float64 error terms of the NMSE. */
static void test_shape(const colibri_isa_table *isa, int32_t dtype, int64_t rows, int64_t cols, int64_t stride,
                       double *err2, double *ref2) {
    static char w[MAX_ROWS * (MAX_COLS * 4 + PAD)];   /* w: [rows] rows of stride bytes */
    static float wf[MAX_ROWS * MAX_COLS];             /* wf: [rows, cols] dequantized */
    static float x[MAX_COLS];                         /* x: [cols] */
    static char xq[MAX_COLS * 4];                     /* xq: [cols] in the activation type */
    float y[MAX_ROWS], y_ref[MAX_ROWS];               /* y: [rows] */
    const colibri_type_traits *t = colibri_type_traits_of(dtype);
    test_make(dtype, rows, cols, stride, w, wf, x, xq);
    isa->dot_rows[dtype](w, stride, xq, cols, rows, y);
    int same = 1;
    for (int64_t r = 0; r < rows; r++) {
        y_ref[r] = t->vec_dot(w + r * stride, xq, cols);
        same &= memcmp(&y[r], &y_ref[r], sizeof(float)) == 0;
        double exact = 0.0;
        for (int64_t c = 0; c < cols; c++) exact += (double)wf[r * cols + c] * (double)x[c];
        *err2 += ((double)y[r] - exact) * ((double)y[r] - exact);
        *ref2 += exact * exact;
    }
    n_mismatched += !same;
    CHECK(same, "%s %s [%lld, %lld] stride %lld: differs from the reference", isa->name, t->name,
          (long long)rows, (long long)cols, (long long)stride);
}

/* Whether the table has its own dot_rows / gemm kernel for dtype (not the scalar table's, which
 * dispatch.c fills in for the types a table lacks: those are the reference itself). */
static int test_own_dot(const colibri_isa_table *isa, int32_t dtype) {
    return isa == &colibri_isa_scalar || isa->dot_rows[dtype] != colibri_isa_scalar.dot_rows[dtype];
}

static int test_own_gemm(const colibri_isa_table *isa, int32_t dtype) {
    return isa == &colibri_isa_scalar || isa->gemm[dtype] != colibri_isa_scalar.gemm[dtype];
}

static void test_bitwise_and_nmse(const colibri_isa_table *isa) {
    for (int32_t dtype = 0; dtype < COLIBRI_WEIGHT_TYPES; dtype++) {
        const colibri_type_traits *t = colibri_type_traits_of(dtype);
        if (!test_own_dot(isa, dtype)) {
            printf("%s %s: the scalar table's dot_rows, not tested again\n", isa->name, t->name);
            continue;
        }
        int block = t->block_elems > 1;
        const int64_t *cols = block ? block_cols : float_cols;
        int64_t n_cols = block ? (int64_t)(sizeof(block_cols) / sizeof(block_cols[0]))
                               : (int64_t)(sizeof(float_cols) / sizeof(float_cols[0]));
        double worst = 0.0;
        int mismatched_before = n_mismatched;
        for (int64_t j = 0; j < n_cols; j++) {   /* NMSE over every row count and stride of cols[j] */
            if (cols[j] % t->block_elems) continue;
            int64_t row_bytes = colibri_row_bytes(dtype, cols[j]);
            double err2 = 0.0, ref2 = 0.0;
            for (int64_t i = 0; i < N_ROWS; i++) {
                for (int wide = 0; wide < 2; wide++) {
                    test_shape(isa, dtype, row_counts[i], cols[j], row_bytes + wide * PAD, &err2, &ref2);
                }
            }
            double nmse = err2 / ref2;
            if (block) {
                CHECK(nmse <= 5e-4, "%s %s [1..67, %lld]: NMSE %.3g > 5e-4", isa->name, t->name,
                      (long long)cols[j], nmse);
            }
            if (nmse > worst) worst = nmse;
        }
        printf("%s %s: %d shapes differ bitwise from the reference; worst NMSE vs float64 %.3g\n", isa->name,
               t->name, n_mismatched - mismatched_before, worst);
    }
}

/* With every scale 1 (and Q4_1's m = 0) a row's result is its exact integer
 * sum of products, the activation's multipliers k (1..8, both orders) included
 * (< 2^24 here, so exact in f32): checked against int64. */
static void test_integer_exact(const colibri_isa_table *isa) {
    enum { BLOCKS = 16, N = BLOCKS * COLIBRI_QK };
    static const int32_t types[3] = {COLIBRI_DTYPE_Q8_0, COLIBRI_DTYPE_Q4_0, COLIBRI_DTYPE_Q4_1};
    uint16_t one = colibri_f32_to_f16(1.0f);
    for (int k = 0; k < 3; k++) {
        int32_t dtype = types[k];
        if (!test_own_dot(isa, dtype)) continue;
        colibri_block_q8_h a[BLOCKS];   /* a: [BLOCKS] the activations */
        int32_t aq[N];                  /* aq: [N] activation integers k * qs */
        for (int b = 0; b < BLOCKS; b++) {
            a[b].d = 1.0f;
            a[b].k[0] = (int16_t)(1 + b % 8), a[b].k[1] = (int16_t)(8 - b % 8);
            for (int h = 0; h < 2; h++) {
                int32_t sum = 0;
                for (int j = 16 * h; j < 16 * h + 16; j++) {
                    int i = b * COLIBRI_QK + j;
                    a[b].qs[j] = (int8_t)(i % 7 == 0 ? (i % 2 ? 127 : -127) : (int)(test_rand(&rng) * 254.0f));
                    aq[i] = a[b].k[h] * a[b].qs[j];
                    sum += a[b].qs[j];
                }
                a[b].sum[h] = (int16_t)(a[b].k[h] * sum);
            }
        }
        char w[5][BLOCKS * sizeof(colibri_block_q8_0)];   /* w: [5 rows] */
        int64_t row_bytes = colibri_row_bytes(dtype, N), want[5];
        for (int r = 0; r < 5; r++) {
            want[r] = 0;
            for (int b = 0; b < BLOCKS; b++) {
                char *blk = w[r] + b * (row_bytes / BLOCKS);
                for (int j = 0; j < COLIBRI_QK; j++) {
                    int extreme = (j + r) % 5 == 0;   /* the ends of each type's range */
                    int q = dtype == COLIBRI_DTYPE_Q8_0 ? (extreme ? -128 + 255 * (j % 2) : (int)(test_rand(&rng) * 255.0f))
                                                        : (extreme ? 15 * (j % 2) : (int)((test_rand(&rng) + 0.5f) * 16.0f));
                    int q_value = dtype == COLIBRI_DTYPE_Q4_0 ? q - 8 : q;
                    want[r] += (int64_t)q_value * aq[b * COLIBRI_QK + j];
                    if (dtype == COLIBRI_DTYPE_Q8_0) {
                        ((colibri_block_q8_0 *)blk)->qs[j] = (int8_t)q;
                    } else {
                        uint8_t *qs = dtype == COLIBRI_DTYPE_Q4_0 ? ((colibri_block_q4_0 *)blk)->qs
                                                                 : ((colibri_block_q4_1 *)blk)->qs;
                        if (j < 16) qs[j] = (uint8_t)((qs[j] & 0xf0) | q);
                        else qs[j - 16] = (uint8_t)((qs[j - 16] & 0x0f) | (q << 4));
                    }
                }
                memcpy(blk, &one, sizeof(one));   /* d = 1 */
                if (dtype == COLIBRI_DTYPE_Q4_1) ((colibri_block_q4_1 *)blk)->m = 0;
            }
        }
        float y[5];
        isa->dot_rows[dtype](w, sizeof(w[0]), a, N, 5, y);
        for (int r = 0; r < 5; r++) {
            CHECK((double)y[r] == (double)want[r], "%s %s row %d: integer sum %.1f, want %lld", isa->name,
                  colibri_type_traits_of(dtype)->name, r, (double)y[r], (long long)want[r]);
        }
    }
}

/* gemm (kernel: the table's gemm or gemm_few, called `label`) over `tokens` activation rows
 * against the reference vec_dot of each (token, row); x rows and y rows wider than needed,
 * y's padding untouched. */
static void test_gemm_shape(const colibri_isa_table *isa, colibri_gemm_fn kernel, const char *label, int32_t dtype,
                            int64_t rows, int64_t cols, int64_t tokens) {
    enum { MAX_TOK = 130, Y_PAD = 3 };
    static char w[MAX_ROWS * (MAX_COLS * 4 + PAD)];      /* w: [rows] rows of w_stride bytes */
    static float wf[MAX_ROWS * MAX_COLS];                /* wf: [rows, cols] dequantized (unused) */
    static float x[MAX_COLS];                            /* x: [cols] one token's f32 row */
    static char xq[MAX_TOK * (MAX_COLS * 4 + PAD)];      /* xq: [tokens] rows of x_stride bytes */
    static float y[MAX_TOK * (MAX_ROWS + Y_PAD)];        /* y: [tokens, rows + Y_PAD] */
    const colibri_type_traits *t = colibri_type_traits_of(dtype);
    const colibri_type_traits *act = colibri_type_traits_of(t->act_type);
    int64_t w_stride = colibri_row_bytes(dtype, cols) + PAD;
    int64_t x_stride = colibri_row_bytes(t->act_type, cols) + PAD, y_stride = rows + Y_PAD;
    test_make(dtype, rows, cols, w_stride, w, wf, x, xq);
    for (int64_t k = 1; k < tokens; k++) {
        for (int64_t c = 0; c < cols; c++) x[c] = test_rand(&rng) * 3.0f;
        act->from_f32(x, xq + k * x_stride, cols);
    }
    for (int64_t i = 0; i < tokens * y_stride; i++) y[i] = -7.0f;
    kernel(w, w_stride, xq, x_stride, cols, rows, tokens, y, y_stride);
    int same = 1;
    for (int64_t k = 0; k < tokens; k++) {
        for (int64_t r = 0; r < rows; r++) {
            float want = t->vec_dot(w + r * w_stride, xq + k * x_stride, cols);
            same &= memcmp(&y[k * y_stride + r], &want, sizeof(float)) == 0;
        }
        for (int64_t r = rows; r < y_stride; r++) same &= y[k * y_stride + r] == -7.0f;
    }
    n_mismatched += !same;
    CHECK(same, "%s %s %s [%lld, %lld] x %lld tokens: differs from the reference", isa->name, t->name, label,
          (long long)rows, (long long)cols, (long long)tokens);
}

static void test_gemm(const colibri_isa_table *isa) {
    static const int64_t rows[] = {1, 3, 4, 5, 13, 67};
    static const int64_t tokens[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 67, 130};
    static const int64_t gemm_cols[3][4] = {{7, 16, 33, 100},        /* float types */
                                            {32, 96, 1024, 2016},    /* 32-element blocks */
                                            {256, 1280, 0, 0}};      /* 256-element blocks */
    for (int32_t dtype = 0; dtype < COLIBRI_WEIGHT_TYPES; dtype++) {
        if (!test_own_gemm(isa, dtype)) {
            printf("%s %s: the scalar table's gemm, not tested again\n", isa->name, colibri_type_traits_of(dtype)->name);
            continue;
        }
        int64_t block = colibri_type_traits_of(dtype)->block_elems;
        const int64_t *cols = gemm_cols[block == 1 ? 0 : block == 32 ? 1 : 2];
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
            for (size_t k = 0; k < sizeof(tokens) / sizeof(tokens[0]); k++) {
                for (int64_t j = 0; j < 4 && cols[j]; j++) {
                    test_gemm_shape(isa, isa->gemm[dtype], "gemm", dtype, rows[i], cols[j], tokens[k]);
                    if (isa->gemm_few[dtype]) {
                        test_gemm_shape(isa, isa->gemm_few[dtype], "gemm_few", dtype, rows[i], cols[j], tokens[k]);
                    }
                }
            }
        }
    }
}

/* Whether a and b are the same float bit for bit, or both NaN (C leaves a NaN's payload to the
 * compiler, which may swap an addition's operands). */
static int test_same_float(float a, float b) {
    return memcmp(&a, &b, sizeof a) == 0 || (a != a && b != b);
}

/* Edge-case blocks of every block type, decode and gemm bitwise the reference: every
 * byte of a block one pattern (0x00, 0xff, 0x55, 0xaa, 0x0f, 0xf0, 0x80, 0x7f: every quant, scale,
 * min and mask bit at the ends of its range or alternating) or random, block after block; each
 * row's f16 scales one of 0, -0, the smallest and largest subnormals, the smallest normal, ±1,
 * ±65504, ±inf and NaN (a second f16 field another one), MXFP4's exponent one of 0, 1, 2, 127,
 * 128, 254, 255; each token's activation blocks all +127, all -127, alternating signs or random,
 * its scale 0, 1e-30, 1 or 1e30 (products that overflow to inf, and inf - inf, included). One
 * scale per row and token, so that a row's finite extremes are not lost in another block's inf.
 * 13 rows and 5 tokens (spare row and token lanes), 4 passes that shift which pattern meets
 * which row. */
static void test_edge_blocks(const colibri_isa_table *isa) {
    enum { ROWS = 13, TOKENS = 5, COLS = 2048, NB = COLS / COLIBRI_QK, PASSES = 4 };
    static const uint8_t patterns[] = {0x00, 0xff, 0x55, 0xaa, 0x0f, 0xf0, 0x80, 0x7f};   /* then random */
    static const uint16_t f16s[] = {0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x3c00, 0xbc00,
                                    0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00};
    static const uint8_t exps[] = {0, 1, 2, 127, 128, 254, 255};
    static const float act_scales[TOKENS] = {1.0f, 0.0f, 1e-30f, 1e30f, 1.0f};
    static char w[ROWS][COLS * 2];                /* w: [ROWS] rows (any type's row fits) */
    static colibri_block_q8_s a[TOKENS][NB];      /* a: [TOKENS] Q8_S activation rows */
    static colibri_block_q8_h ah[TOKENS][NB];     /* ah: [TOKENS] the same quants as Q8_H rows */
    float y[ROWS], g[TOKENS * ROWS];              /* y: [ROWS] one token; g: [TOKENS, ROWS] */
    const int n_pat = (int)sizeof(patterns) + 1, n_f16 = (int)(sizeof(f16s) / sizeof(f16s[0]));
    for (int k = 0; k < TOKENS; k++) {
        for (int i = 0; i < NB; i++) {
            for (int j = 0; j < COLIBRI_QK; j++) {
                int kind = (k + i) % 4;
                a[k][i].qs[j] = (int8_t)(kind == 0 ? 127 : kind == 1 ? -127 : kind == 2 ? (j % 2 ? 127 : -127)
                                                                                          : (int)(test_rand(&rng) * 254.0f));
            }
            a[k][i].d = act_scales[k];
            colibri_q8_s_sums(&a[k][i]);
            ah[k][i].d = act_scales[k];
            memcpy(ah[k][i].qs, a[k][i].qs, COLIBRI_QK);
            for (int h = 0; h < 2; h++) {   /* multipliers 1 and 8 at the block's ends, the others between */
                ah[k][i].k[h] = (int16_t)(i % 3 == 0 ? 8 : i % 3 == 1 ? 1 : 1 + (i + 5 * h + k) % 8);
                ah[k][i].sum[h] = (int16_t)(ah[k][i].k[h] * a[k][i].sum[h]);
            }
        }
    }
    for (int32_t dtype = COLIBRI_DTYPE_Q8_0; dtype < COLIBRI_WEIGHT_TYPES; dtype++) {
        const colibri_type_traits *t = colibri_type_traits_of(dtype);
        int own_dot = test_own_dot(isa, dtype), own_gemm = test_own_gemm(isa, dtype);
        if (!own_dot && !own_gemm && !isa->gemm_few[dtype]) continue;
        int q8h = t->act_type == COLIBRI_TYPE_Q8_H;
        const char *acts = q8h ? (const char *)ah : (const char *)a;   /* acts: [TOKENS] rows of act_row bytes */
        int64_t act_row = q8h ? (int64_t)sizeof ah[0] : (int64_t)sizeof a[0];
        int64_t n_blk = COLS / t->block_elems;
        int same = 1, finite = 0;   /* finite: reference results that are neither inf nor NaN */
        for (int pass = 0; pass < PASSES; pass++) {
            for (int r = 0; r < ROWS; r++) {
                for (int64_t b = 0; b < n_blk; b++) {
                    unsigned char *blk = (unsigned char *)w[r] + b * t->block_bytes;
                    int idx = (int)b + r + 3 * pass;
                    for (int64_t k = 0; k < t->block_bytes; k++) {
                        blk[k] = idx % n_pat < n_pat - 1 ? patterns[idx % n_pat]
                                                         : (unsigned char)(test_rand(&rng) * 256.0f + 128.0f);
                    }
                    for (int f = 0; f < 2; f++) {
                        if (t->f16_at[f] >= 0) memcpy(blk + t->f16_at[f], &f16s[(r + 5 * f) % n_f16], 2);
                    }
                    if (dtype == COLIBRI_DTYPE_MXFP4) blk[0] = exps[(r + pass) % (int)sizeof(exps)];
                }
            }
            for (int k = 0; k < TOKENS && own_dot; k++) {
                isa->dot_rows[dtype](w, sizeof w[0], acts + k * act_row, COLS, ROWS, y);
                for (int r = 0; r < ROWS; r++) {
                    float want = t->vec_dot(w[r], acts + k * act_row, COLS);
                    same &= test_same_float(y[r], want);
                    finite += isfinite(want) != 0;
                }
            }
            for (int few = 0; few < 2; few++) {
                colibri_gemm_fn kernel = few ? isa->gemm_few[dtype] : own_gemm ? isa->gemm[dtype] : NULL;
                if (!kernel) continue;
                kernel(w, sizeof w[0], acts, act_row, COLS, ROWS, TOKENS, g, ROWS);
                for (int k = 0; k < TOKENS; k++) {
                    for (int r = 0; r < ROWS; r++) {
                        same &= test_same_float(g[k * ROWS + r], t->vec_dot(w[r], acts + k * act_row, COLS));
                    }
                }
            }
        }
        n_mismatched += !same;
        CHECK(same, "%s %s: edge-case blocks differ from the reference", isa->name, t->name);
        printf("%s %s: edge-case blocks (decode, gemm%s) %s the reference (%d of %d results finite)\n", isa->name,
               t->name, isa->gemm_few[dtype] ? ", gemm_few" : "", same ? "bitwise" : "DIFFER from", finite,
               PASSES * TOKENS * ROWS);
    }
}

/* Exact mode's kernels (isa.h) of every block type the table has its own of, on rows of
 * random blocks (test_random_blocks) and of edge-case blocks (test_edge_blocks' byte patterns
 * and f16 scales, MXFP4's exponents 0..255): dequantize bitwise the type's to_f32, on one
 * block up to 67 rows at once; dot_rows_exact bitwise colibri_dot_f32 of the reference's
 * dequantized row, for rows 1..13 (spare lanes) and a row stride wider than the row, against
 * activations random at scales 1e-3..1e3 with zeros, -0 and (last passes) 3e30 among them (a NaN
 * result may differ in its payload only). */
static void test_exact(const colibri_isa_table *isa) {
    enum { ROWS = 13, COLS = 2048, STRIDE = COLS * 2 + PAD, PASSES = 6 };
    static const uint8_t patterns[] = {0x00, 0xff, 0x55, 0xaa, 0x0f, 0xf0, 0x80, 0x7f};
    static const uint16_t f16s[] = {0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x3c00, 0xbc00,
                                    0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x7d00, 0x3555};
    static char w[ROWS * STRIDE];                       /* w: [ROWS] rows of STRIDE bytes */
    static float want[ROWS * COLS], got[ROWS * COLS];   /* [ROWS, COLS] dequantized */
    static float x[COLS];                               /* x: [COLS] activations */
    const int n_pat = (int)sizeof(patterns), n_f16 = (int)(sizeof(f16s) / sizeof(f16s[0]));
    for (int32_t dtype = COLIBRI_DTYPE_Q8_0; dtype < COLIBRI_WEIGHT_TYPES; dtype++) {
        const colibri_type_traits *t = colibri_type_traits_of(dtype);
        if (isa != &colibri_isa_scalar && isa->dequantize[dtype] == colibri_isa_scalar.dequantize[dtype] &&
            isa->dot_rows_exact[dtype] == colibri_isa_scalar.dot_rows_exact[dtype]) {
            printf("%s %s: exact mode's kernels are the scalar table's, not tested again\n", isa->name, t->name);
            continue;
        }
        int deq_same = 1, dot_same = 1, finite = 0, dots = 0;
        for (int pass = 0; pass < PASSES; pass++) {
            int64_t cols = pass % 3 == 0 ? t->block_elems : pass % 3 == 1 ? 768 : COLS;
            cols = cols < t->block_elems ? t->block_elems : cols;
            int64_t row_bytes = colibri_row_bytes(dtype, cols), n_blk = cols / t->block_elems;
            int64_t stride = pass % 2 ? row_bytes + PAD : row_bytes;
            for (int r = 0; r < ROWS; r++) {
                char *row = w + r * stride;
                if (pass < 2) {   /* random blocks (Q8_0 / Q4_0 / Q4_1 too: every byte random) */
                    for (int64_t b = 0; b < n_blk; b++) {
                        unsigned char *blk = (unsigned char *)row + b * t->block_bytes;
                        for (int64_t k = 0; k < t->block_bytes; k++) blk[k] = (unsigned char)(test_rand(&rng) * 256.0f + 128.0f);
                        for (int f = 0; f < 2; f++) {
                            uint16_t h = colibri_f32_to_f16(ldexpf(1.0f + test_rand(&rng), -10 + (int)(b % 6)));
                            if (t->f16_at[f] >= 0) memcpy(blk + t->f16_at[f], &h, sizeof h);
                        }
                        if (dtype == COLIBRI_DTYPE_MXFP4) blk[0] = (unsigned char)(110 + b % 21);
                    }
                } else {          /* edge cases */
                    for (int64_t b = 0; b < n_blk; b++) {
                        unsigned char *blk = (unsigned char *)row + b * t->block_bytes;
                        int idx = (int)b + r + 3 * pass;
                        for (int64_t k = 0; k < t->block_bytes; k++) {
                            blk[k] = idx % (n_pat + 1) < n_pat ? patterns[idx % (n_pat + 1)]
                                                               : (unsigned char)(test_rand(&rng) * 256.0f + 128.0f);
                        }
                        for (int f = 0; f < 2; f++) {
                            if (t->f16_at[f] >= 0) memcpy(blk + t->f16_at[f], &f16s[(r + 5 * f + pass) % n_f16], 2);
                        }
                        if (dtype == COLIBRI_DTYPE_MXFP4) blk[0] = (unsigned char)((r * 37 + (int)b * 11 + pass) % 256);
                    }
                }
                t->to_f32(row, want + r * cols, cols);
                for (int64_t c = 0; c < cols; c++) got[r * cols + c] = -7.0f;
                isa->dequantize[dtype](row, got + r * cols, cols);
            }
            if (stride == row_bytes) {   /* the rows back to back: one call over all of them */
                for (int64_t c = 0; c < ROWS * cols; c++) got[c] = -7.0f;
                isa->dequantize[dtype](w, got, ROWS * cols);
            }
            for (int64_t c = 0; c < ROWS * cols; c++) deq_same &= test_same_float(got[c], want[c]);
            for (int64_t c = 0; c < cols; c++) {
                float v = (test_rand(&rng) + 0.5f) * ldexpf(1.0f, (int)(c % 21) - 10) * (c % 3 ? 1.0f : -1.0f);
                x[c] = c % 17 == 0 ? 0.0f : c % 19 == 0 ? -0.0f : c % 101 == 0 && pass >= 4 ? 3e30f : v;
            }
            for (int64_t rows = 1; rows <= ROWS; rows += 3) {
                float y[ROWS];
                isa->dot_rows_exact[dtype](w, stride, x, cols, rows, y);
                for (int64_t r = 0; r < rows; r++) {
                    float ref = colibri_dot_f32(want + r * cols, x, cols);
                    dot_same &= test_same_float(y[r], ref);
                    finite += isfinite(ref) != 0;
                    dots++;
                }
            }
        }
        n_mismatched += !deq_same + !dot_same;
        CHECK(deq_same, "%s %s: dequantize differs from to_f32", isa->name, t->name);
        CHECK(dot_same, "%s %s: dot_rows_exact differs from colibri_dot_f32 of to_f32", isa->name, t->name);
        printf("%s %s: exact mode's dequantize and dot %s the reference (%d of %d dots finite)\n", isa->name, t->name,
               deq_same && dot_same ? "bitwise" : "DIFFER from", finite, dots);
    }
}

/* Fills x: [n] with block kind (i % 8) of block i: random at scales 1e-30..1e30,
 * exact multiples of d/2 (ties), all zero, denormals, one ±inf, NaNs among values,
 * one huge value among small ones, a second half 2^-(0..4) times the first times
 * 1, 1.1 or 1.2 (Q8_H's multipliers, integer ratios among them). */
static void test_quantize_input(float *x, int64_t n) {
    static const float scales[] = {1e-30f, 1e-3f, 1.0f, 7.0f, 1e30f};
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        float *b = x + i * COLIBRI_QK;   /* b: [32] */
        for (int j = 0; j < COLIBRI_QK; j++) b[j] = test_rand(&rng) * scales[(i / 8) % 5];
        switch (i % 8) {
        case 1:   /* amax 127 → d 1: q = x exactly at the halves */
            for (int j = 0; j < COLIBRI_QK; j++) b[j] = (float)((j * 37) % 255 - 127) / 2.0f;
            b[0] = 127.0f;
            break;
        case 2: memset(b, 0, COLIBRI_QK * sizeof(float)); break;
        case 3:
            for (int j = 0; j < COLIBRI_QK; j++) b[j] = (float)(j - 16) * 1e-45f;
            break;
        case 4: b[i % COLIBRI_QK] = (i & 8) ? INFINITY : -INFINITY; break;
        case 5:
            b[3] = NAN;
            b[17] = -NAN;
            break;
        case 6: b[i % COLIBRI_QK] = 3e38f; break;
        case 7:
            b[0] = scales[(i / 8) % 5];
            for (int j = 16; j < COLIBRI_QK; j++) b[j] = b[j - 16] * ldexpf(1.0f + 0.1f * (float)(i % 3), -(int)(i % 5));
            break;
        default: break;
        }
    }
}

static void test_quantizers(const colibri_isa_table *isa) {
    static const int64_t cols[] = {32, 64, 256, 2048};
    static float x[MAX_COLS];   /* x: [n] */
    static char want[MAX_COLS / COLIBRI_QK * 44], got[MAX_COLS / COLIBRI_QK * 44];
    const int32_t acts[] = {COLIBRI_TYPE_Q8_H, COLIBRI_TYPE_Q8_S};
    for (int a = 0; a < 2; a++) {
        const colibri_type_traits *t = colibri_type_traits_of(acts[a]);
        colibri_quantize_fn quantize = colibri_isa_quantizer(isa, acts[a]);
        for (size_t k = 0; k < sizeof(cols) / sizeof(cols[0]); k++) {
            int64_t n = cols[k], bytes = colibri_row_bytes(acts[a], n);
            test_quantize_input(x, n);
            t->from_f32(x, want, n);
            memset(got, 0x5a, (size_t)bytes);
            quantize(x, got, n);
            CHECK(memcmp(want, got, (size_t)bytes) == 0, "%s quantize %s of %lld values: differs from the reference",
                  isa->name, t->name, (long long)n);
        }
    }
}

static void test_weighted_sum(const colibri_isa_table *isa) {
    static const int64_t cols[] = {1, 7, 8, 9, 16, 17, 31, 32, 33, 63, 64, 65, 100, 128, 129, 200, 256};
    static const int32_t counts[] = {0, 1, 2, 5, 31, 32, 33, 300};   /* around the row tile of 32 */
    enum { MAX_J = 300, MAX_C = 256, STRIDE = MAX_C + 3 };
    static float rows[MAX_J * STRIDE], w[MAX_J], want[MAX_C], got[MAX_C];   /* rows: [j, STRIDE] */
    static uint16_t rows_f16[MAX_J * STRIDE];                                /* rows_f16: [j, STRIDE] */
    for (int64_t i = 0; i < MAX_J * STRIDE; i++) {
        rows[i] = test_rand(&rng) * 4.0f;
        rows_f16[i] = colibri_f32_to_f16(rows[i]);
    }
    for (int32_t j = 0; j < MAX_J; j++) w[j] = test_rand(&rng) + 0.5f;
    for (size_t a = 0; a < sizeof(cols) / sizeof(cols[0]); a++) {
        for (size_t b = 0; b < sizeof(counts) / sizeof(counts[0]); b++) {
            colibri_weighted_sum_f32(want, w, rows, STRIDE, counts[b], cols[a]);
            memset(got, 0xff, sizeof got);   /* NaNs: every column must be written */
            isa->weighted_sum[0](got, w, rows, STRIDE, counts[b], cols[a]);
            CHECK(memcmp(want, got, (size_t)cols[a] * sizeof(float)) == 0,
                  "%s weighted sum of %d f32 rows x %lld columns: differs from the reference", isa->name, counts[b],
                  (long long)cols[a]);
            colibri_weighted_sum_f16(want, w, rows_f16, STRIDE, counts[b], cols[a]);
            memset(got, 0xff, sizeof got);   /* NaNs: every column must be written */
            isa->weighted_sum[1](got, w, rows_f16, STRIDE, counts[b], cols[a]);
            CHECK(memcmp(want, got, (size_t)cols[a] * sizeof(float)) == 0,
                  "%s weighted sum of %d f16 rows x %lld columns: differs from the reference", isa->name, counts[b],
                  (long long)cols[a]);
        }
    }
}

static void test_kv_narrowing(const colibri_isa_table *isa) {
    enum { N = 256 * 64 * 2 + 7 };   /* every exponent x 64 mantissas x 2 signs, a tail of 7 */
    static float x[N];
    static char want_row[N * 4], got_row[N * 4];   /* [N] in the cache's type */
    static const uint32_t mantissas[] = {0, 1, 0xfff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3000, 0x7fe000, 0x7fefff,
                                         0x7ff000, 0x7ff001, 0x7fffff, 0x400000, 0x400001, 0x201000};
    int64_t n = 0;
    for (uint32_t e = 0; e < 256; e++) {
        for (uint32_t m = 0; m < 64; m++) {
            uint32_t mant = m < 16 ? mantissas[m] : (uint32_t)(test_rand(&rng) * 8388607.0f) & 0x7fffffu;
            for (uint32_t sign = 0; sign < 2; sign++) {
                uint32_t bits = sign << 31 | e << 23 | mant;
                memcpy(&x[n++], &bits, sizeof bits);
            }
        }
    }
    while (n < N) x[n++] = test_rand(&rng) * 70000.0f;
    for (int32_t kv = 0; kv < 2; kv++) {
        int64_t bytes = kv ? 2 : 4;
        (kv ? colibri_f16_row_from_f32 : colibri_f32_row_from_f32)(x, want_row, N);
        memset(got_row, 0xab, sizeof got_row);
        isa->kv_from_f32[kv](x, got_row, N);
        CHECK(memcmp(want_row, got_row, (size_t)(N * bytes)) == 0, "%s KV narrowing to %s: differs from the reference",
              isa->name, kv ? "f16" : "f32");
    }
}

static void test_exp_ops(const colibri_isa_table *isa) {
    static const int64_t lengths[] = {1, 5, 8, 15, 16, 17, 33, 100, 513};
    enum { MAX_N = 513 };
    static float x[MAX_N], u[MAX_N], want[MAX_N], got[MAX_N];
    for (size_t a = 0; a < sizeof(lengths) / sizeof(lengths[0]); a++) {
        int64_t n = lengths[a];
        for (int64_t i = 0; i < n; i++) {
            x[i] = test_rand(&rng) * (a % 2 ? 110.0f : 8.0f) - (a % 3 ? 0.0f : 10.0f);
            u[i] = test_rand(&rng);
        }
        if (n > 20) x[7] = -INFINITY, x[11] = INFINITY, x[19] = NAN, x[3] = -120.0f, x[4] = 100.0f;
        memcpy(want, x, (size_t)n * sizeof(float));
        memcpy(got, x, (size_t)n * sizeof(float));
        colibri_silu_mul(want, u, n);
        isa->silu_mul(got, u, n);
        CHECK(memcmp(want, got, (size_t)n * sizeof(float)) == 0, "%s silu_mul of %lld: differs from the reference",
              isa->name, (long long)n);
        if (n > 20) x[11] = 50.0f, x[19] = 2.0f;   /* softmax over +inf or NaN is NaN throughout either way */
        memcpy(want, x, (size_t)n * sizeof(float));
        memcpy(got, x, (size_t)n * sizeof(float));
        colibri_softmax_apply(want, n);
        isa->softmax(got, n);
        CHECK(memcmp(want, got, (size_t)n * sizeof(float)) == 0, "%s softmax of %lld: differs from the reference",
              isa->name, (long long)n);
    }
}

int main(void) {
    int tested = 0;
    for (size_t i = 0; i < sizeof(isa_names) / sizeof(isa_names[0]); i++) {
        const colibri_isa_table *isa = colibri_isa_find(isa_names[i]);
        if (!isa) {
            printf("%s: not in this build or not runnable on this CPU, not tested\n", isa_names[i]);
            continue;
        }
        test_bitwise_and_nmse(isa);
        test_integer_exact(isa);
        test_gemm(isa);
        test_edge_blocks(isa);
        test_exact(isa);
        test_quantizers(isa);
        test_weighted_sum(isa);
        test_kv_narrowing(isa);
        test_exp_ops(isa);
        tested++;
    }
    test_integer_exact(&colibri_isa_scalar);
    test_gemm(&colibri_isa_scalar);
    test_exact(&colibri_isa_scalar);   /* the reference fused dot, against the unfused one */
    printf("ISA tables tested against the scalar reference: %d (in use: %s)\n", tested, colibri_isa());
    printf("%d passed, %d failed\n", n_passed, n_failed);
    return n_failed ? 1 : 0;
}
