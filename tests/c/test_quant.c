/*
 * test_quant.c — the block types Q8_0, Q4_0, Q4_1 (and the Q8_H activation
 * type) of the kernels' reference layer (the others: test_quant_blocks.c):
 *   - struct sizes and the type table agree with GGUF's block layouts (every type);
 *   - hand-computed blocks: exact bytes, nibbles and scales;
 *   - round trip on random data within each type's stated bound;
 *   - the integer part of every block dot product is exact;
 *   - vec_dot == its documented float order, bitwise;
 *   - quantized matmul (quantized activations) vs a float64 dot of the
 *     dequantized weights with the UNquantized activations: NMSE <= 5e-4 on
 *     odd shapes (rows 1..67, cols 32..1024).
 * Prints "N passed, M failed"; exit 1 on failure.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri.h"
#include "kernels.h"
#include "quant.h"

#include "check.h"

static const int32_t block_types[3] = {COLIBRI_DTYPE_Q8_0, COLIBRI_DTYPE_Q4_0, COLIBRI_DTYPE_Q4_1};

static uint64_t rng = 42;

/* x: [n] random rows with varied blocks: symmetric, shifted, tiny, wide,
 * constant and all-zero blocks, chosen by the block index. */
static void test_fill(float *x, int64_t n) {
    for (int64_t b = 0; b < n / COLIBRI_QK; b++) {
        float *xb = x + b * COLIBRI_QK;   /* xb: [32] */
        int kind = (int)(b % 6);
        for (int j = 0; j < COLIBRI_QK; j++) {
            float u = test_rand(&rng);
            xb[j] = kind == 0 ? u : kind == 1 ? 3.0f + u : kind == 2 ? 1e-3f * u
                  : kind == 3 ? 300.0f * u : kind == 4 ? -0.75f : 0.0f;
        }
    }
}

/* Nibble of element j of a Q4 block, straight from the layout description. */
static int test_nibble(const uint8_t *qs, int j) {
    return j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4;
}

/* ---- layout --------------------------------------------------------------- */

static void test_layout(void) {
    CHECK(sizeof(colibri_block_q8_0) == 34 && sizeof(colibri_block_q4_0) == 18 &&
          sizeof(colibri_block_q4_1) == 20 && sizeof(colibri_block_q8_h) == 44, "block sizes 34/18/20/44");
    const int64_t want_bytes[COLIBRI_TYPE_COUNT] = {4, 2, 2, 34, 18, 20, 22, 24, 84, 110, 144, 176, 210, 18, 136, 17, 44,
                                                    40};
    const int64_t want_elems[COLIBRI_TYPE_COUNT] = {1, 1, 1, 32, 32, 32, 32, 32, 256, 256, 256, 256, 256, 32, 256, 32, 32,
                                                    32};
    const char *want_names[COLIBRI_TYPE_COUNT] = {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K",
                                                  "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "MXFP4", "Q8_H",
                                                  "Q8_S"};
    for (int32_t t = 0; t < COLIBRI_TYPE_COUNT; t++) {
        const colibri_type_traits *type = colibri_type_traits_of(t);
        CHECK(type->block_bytes == want_bytes[t] && type->block_elems == want_elems[t] &&
              strcmp(type->name, want_names[t]) == 0, "table entry %d", t);
        CHECK(colibri_type_is_weight(t) == (t < COLIBRI_TYPE_Q8_H), "weight type %d", t);
    }
    CHECK(colibri_type_traits_of(COLIBRI_DTYPE_Q4_0)->act_type == COLIBRI_TYPE_Q8_H &&
          colibri_type_traits_of(COLIBRI_DTYPE_Q8_0)->act_type == COLIBRI_TYPE_Q8_H &&
          colibri_type_traits_of(COLIBRI_DTYPE_Q4_1)->act_type == COLIBRI_TYPE_Q8_H &&
          colibri_type_traits_of(COLIBRI_DTYPE_IQ4_NL)->act_type == COLIBRI_TYPE_Q8_H &&
          colibri_type_traits_of(COLIBRI_DTYPE_MXFP4)->act_type == COLIBRI_TYPE_Q8_S &&
          colibri_type_traits_of(COLIBRI_DTYPE_BF16)->act_type == COLIBRI_DTYPE_F32,
          "activation types: Q8_H for Q8_0/Q4_0/Q4_1/IQ4_NL, Q8_S for MXFP4, f32 for float types");
    CHECK(colibri_type_traits_of(-1) == NULL && colibri_type_traits_of(COLIBRI_TYPE_COUNT) == NULL,
          "no entry out of range");
    CHECK(colibri_row_bytes(COLIBRI_DTYPE_Q4_0, 4096) == 128 * 18 &&
          colibri_row_bytes(COLIBRI_DTYPE_BF16, 10) == 20, "row bytes");
}

/* ---- hand-computed blocks --------------------------------------------------- */

static void test_known_blocks(void) {
    /* Q8_0: amax 127 → d = 1 exactly, qs = roundf(x), halves away from 0 */
    float x[32] = {0};
    x[0] = -127.0f; x[1] = 127.0f; x[2] = 2.5f; x[3] = -2.5f; x[4] = 0.49f; x[31] = 100.4f;
    uint8_t q8_0[34];
    colibri_quantize_row_q8_0(x, q8_0, 32);
    uint8_t want_q8_0[34] = {0x00, 0x3c, 0x81, 0x7f, 0x03, 0xfd};   /* d = f16(1) LE, then qs */
    want_q8_0[33] = 0x64;
    CHECK(memcmp(q8_0, want_q8_0, 34) == 0, "Q8_0 block bytes");

    /* Q8_H: amax 1016 → d = 1 exactly. Block 0: half 1's amax 127 → r = 1, k = 1
     * (step 1); block 1: half 1's amax 300 → r = 2.36, k = 3 (step 3); half 0 of
     * both: r = 8, k = 8 (step 8). Block 2 all zero (0/0: k = 1), block 3 with NaNs. */
    float xh[128] = {0};
    for (int b = 0; b < 2; b++) {
        float *xb = xh + 32 * b;
        xb[0] = -1016.0f; xb[1] = 20.0f; xb[2] = -20.0f; xb[3] = 3.9f;   /* q: -127, 3 (2.5), -3, 0 */
    }
    xh[16] = 127.0f; xh[17] = 2.5f; xh[18] = -2.5f; xh[31] = 100.4f;      /* q: 127, 3, -3, 100 */
    xh[48] = 300.0f; xh[49] = 4.5f; xh[50] = -4.4f;                       /* q: 100, 2 (1.5), -1 */
    xh[96] = NAN; xh[97] = 2.0f; xh[112] = 0.5f; xh[113] = -NAN;          /* NaN ignored, then q 0 */
    colibri_block_q8_h h[4];
    colibri_quantize_row_q8_h(xh, h, 128);
    CHECK(h[0].d == 1.0f && h[0].k[0] == 8 && h[0].k[1] == 1 && h[0].qs[0] == -127 && h[0].qs[1] == 3 &&
          h[0].qs[2] == -3 && h[0].qs[3] == 0 && h[0].qs[16] == 127 && h[0].qs[17] == 3 && h[0].qs[18] == -3 &&
          h[0].qs[31] == 100 && h[0].sum[0] == 8 * -127 && h[0].sum[1] == 227, "Q8_H block, k = {8, 1}");
    CHECK(h[1].d == 1.0f && h[1].k[0] == 8 && h[1].k[1] == 3 && h[1].qs[16] == 100 && h[1].qs[17] == 2 &&
          h[1].qs[18] == -1 && h[1].sum[1] == 3 * 101, "Q8_H block, k = {8, 3}");
    CHECK(h[2].d == 0.0f && h[2].k[0] == 1 && h[2].k[1] == 1 && h[2].sum[0] == 0 && h[2].sum[1] == 0,
          "Q8_H zero block: d = 0, k = 1");
    CHECK(h[3].d == 2.0f / 1016.0f && h[3].k[0] == 8 && h[3].k[1] == 2 && h[3].qs[0] == 0 && h[3].qs[1] == 127 &&
          h[3].qs[16] == 127 && h[3].qs[17] == 0, "Q8_H block with NaNs: ignored in the maxima, quantized to 0");
    float yh[128];
    colibri_dequantize_row_q8_h(h, yh, 128);
    CHECK(yh[0] == -1016.0f && yh[1] == 24.0f && yh[16] == 127.0f && yh[48] == 300.0f && yh[49] == 6.0f,
          "Q8_H dequantize: d * k * qs");

    /* Q4_0: max |x| is x[0] = -8 → d = -8/-8 = 1; nib = min(15, trunc(x + 8.5)) */
    memset(x, 0, sizeof x);
    x[0] = -8.0f; x[16] = 7.0f; x[1] = 0.0f; x[17] = -1.0f; x[2] = 2.5f; x[18] = 7.9f;
    x[3] = -7.6f; x[19] = 3.49f;
    uint8_t q4_0[18];
    colibri_quantize_row_q4_0(x, q4_0, 32);
    const uint8_t want_q4_0[18] = {0x00, 0x3c, 0xf0, 0x78, 0xfb, 0xb0, 0x88, 0x88, 0x88, 0x88,
                                   0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88};
    CHECK(memcmp(q4_0, want_q4_0, 18) == 0, "Q4_0 block bytes (7.9 clamps to nibble 15)");
    /* positive maximum: d = 16/-8 = -2, so x = 16 → nibble 0 and x = -14 → 15 */
    memset(x, 0, sizeof x);
    x[0] = 16.0f; x[16] = -14.0f;
    colibri_quantize_row_q4_0(x, q4_0, 32);
    CHECK(q4_0[0] == 0x00 && q4_0[1] == 0xc0 && q4_0[2] == 0xf0 && q4_0[3] == 0x88,
          "Q4_0 with a positive maximum: d = f16(-2), nibbles 0 and 15");
    float y[32];
    colibri_dequantize_row_q4_0(q4_0, y, 32);
    CHECK(y[0] == 16.0f && y[16] == -14.0f && y[1] == 0.0f, "Q4_0 dequantize: d*(nib - 8)");

    /* Q4_1: min -1, max 14 → d = 1, m = -1; nib = min(15, trunc(x - m + 0.5)) */
    memset(x, 0, sizeof x);
    x[0] = -1.0f; x[16] = 14.0f; x[1] = 2.5f; x[17] = 3.4f;
    uint8_t q4_1[20];
    colibri_quantize_row_q4_1(x, q4_1, 32);
    const uint8_t want_q4_1[20] = {0x00, 0x3c, 0x00, 0xbc, 0xf0, 0x44, 0x11, 0x11, 0x11, 0x11,
                                   0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11};
    CHECK(memcmp(q4_1, want_q4_1, 20) == 0, "Q4_1 block bytes");
    colibri_dequantize_row_q4_1(q4_1, y, 32);
    CHECK(y[0] == -1.0f && y[16] == 14.0f && y[1] == 3.0f && y[17] == 3.0f && y[2] == 0.0f,
          "Q4_1 dequantize: d*nib + m");

    /* the same blocks read back through colibri_row_to_f32 at a block offset */
    uint8_t two[36];
    memcpy(two, q4_0, 18);
    memcpy(two + 18, want_q4_0, 18);
    colibri_row_to_f32(two, COLIBRI_DTYPE_Q4_0, 32, 32, y);
    CHECK(y[0] == -8.0f && y[16] == 7.0f && y[18] == 7.0f && y[3] == -8.0f && y[19] == 3.0f,
          "row_to_f32 of the second Q4_0 block (embedding-row path)");
}

/* ---- round trip ---------------------------------------------------------------- */

/* Max over x: [n] of |x - dequant(quant(x))| minus the stated bound of its
 * block (<= 0 means within bound). With s16 = f16 rounding error of a scale:
 *   Q8_0: d = amax/127;  |err| <= d/2 + 127*|d - d16|
 *   Q8_H: d = amax/1016 (f32), 1 <= k_h <= 8;  |err| <= d k_h / 2 in half h
 *   Q4_0: d = -max/8; |err| <= |d|/2 + 8*|d - d16| except the clamped
 *         elements (x/d > 7.5, opposite the maximum's sign): <= |d|*(x/d - 7) <= |d|
 *   Q4_1: d = (max-min)/15;  |err| <= d/2 + 15*|d - d16| + |min - m16|
 * plus a few f32 ulps of the block's magnitude. */
static double test_roundtrip_excess(int32_t type, const float *x, int64_t n) {
    const colibri_type_traits *t = colibri_type_traits_of(type);
    void *q = malloc((size_t)colibri_row_bytes(type, n));
    float *y = malloc((size_t)n * sizeof(float));
    t->from_f32(x, q, n);
    t->to_f32(q, y, n);
    double worst = -1.0;
    for (int64_t b = 0; b < n / COLIBRI_QK; b++) {
        const float *xb = x + b * COLIBRI_QK;
        double amax = 0.0, min = xb[0], max = xb[0], signed_max = 0.0;
        for (int j = 0; j < COLIBRI_QK; j++) {
            if (fabs(xb[j]) > amax) { amax = fabs(xb[j]); signed_max = xb[j]; }
            if (xb[j] < min) min = xb[j];
            if (xb[j] > max) max = xb[j];
        }
        double d = type == COLIBRI_DTYPE_Q4_0 ? signed_max / -8.0
                 : type == COLIBRI_DTYPE_Q4_1 ? (max - min) / 15.0 : amax / 127.0;
        double d16 = colibri_f16_to_f32(colibri_f32_to_f16((float)d));
        double m16 = colibri_f16_to_f32(colibri_f32_to_f16((float)min));
        double tiny = 8.0 * 1.2e-7 * (amax + fabs(d));
        for (int j = 0; j < COLIBRI_QK; j++) {
            double err = fabs((double)xb[j] - y[b * COLIBRI_QK + j]), bound;
            if (type == COLIBRI_TYPE_Q8_H) {
                const colibri_block_q8_h *h = (const colibri_block_q8_h *)q + b;
                int k = h->k[j / 16];
                bound = k >= 1 && k <= 8 && h->d == (float)amax / 1016.0f ? (double)h->d * k / 2.0 : -1.0;
            } else if (type == COLIBRI_DTYPE_Q4_0) {
                double r = d != 0.0 ? xb[j] / d : 0.0;
                bound = fabs(d) * (r > 7.5 ? r - 7.0 : 0.5) + 8.0 * fabs(d - d16);
            } else if (type == COLIBRI_DTYPE_Q4_1) {
                bound = d / 2.0 + 15.0 * fabs(d - d16) + fabs(min - m16);
            } else {
                bound = d / 2.0 + 127.0 * fabs(d - d16);
            }
            if (err - (bound + tiny) > worst) worst = err - (bound + tiny);
        }
    }
    free(q);
    free(y);
    return worst;
}

static void test_roundtrip(void) {
    const int32_t types[4] = {COLIBRI_DTYPE_Q8_0, COLIBRI_DTYPE_Q4_0, COLIBRI_DTYPE_Q4_1, COLIBRI_TYPE_Q8_H};
    int64_t n = 32 * 240;
    float *x = malloc((size_t)n * sizeof(float));   /* x: [n] */
    test_fill(x, n);
    for (int i = 0; i < 4; i++) {
        double excess = test_roundtrip_excess(types[i], x, n);
        CHECK(excess <= 0.0, "%s round trip exceeds its bound by %g",
              colibri_type_traits_of(types[i])->name, excess);
    }
    /* constant and zero blocks come back exactly for Q4_1 (d = 0, m = the value) */
    uint8_t q[20];
    float y[32];
    colibri_quantize_row_q4_1(x + 4 * 32, q, 32);
    colibri_dequantize_row_q4_1(q, y, 32);
    CHECK(memcmp(y, x + 4 * 32, sizeof y) == 0, "Q4_1 constant block exact");
    colibri_quantize_row_q4_0(x + 5 * 32, q, 32);
    colibri_dequantize_row_q4_0(q, y, 32);
    int zeros = 1;
    for (int j = 0; j < 32; j++) zeros &= y[j] == 0.0f;
    CHECK(zeros, "Q4_0 zero block stays zero");
    /* Q8_H's sums are k_h times the half's sum of qs; k_h is the smallest multiplier
     * that covers the half: 127 d (k_h - 1) < amax_h <= 127 d k_h (up to f32 rounding) */
    colibri_block_q8_h qh[8];
    colibri_quantize_row_q8_h(x, qh, 256);
    int s_ok = 1, k_ok = 1;
    for (int b = 0; b < 8; b++) {
        for (int hh = 0; hh < 2; hh++) {
            int32_t sum = 0;
            float amax_h = 0.0f;
            for (int j = 16 * hh; j < 16 * hh + 16; j++) sum += qh[b].qs[j], amax_h = fmaxf(amax_h, fabsf(x[32 * b + j]));
            s_ok &= qh[b].sum[hh] == qh[b].k[hh] * sum;
            double cover = 127.0 * qh[b].d;
            k_ok &= qh[b].d == 0.0f ? qh[b].k[hh] == 1
                                    : (amax_h <= cover * qh[b].k[hh] * (1 + 1e-6) &&
                                       (qh[b].k[hh] == 1 || amax_h > cover * (qh[b].k[hh] - 1) * (1 - 1e-6)));
        }
    }
    CHECK(s_ok, "Q8_H block sums carry k");
    CHECK(k_ok, "Q8_H multipliers: the smallest that covers each half");
    free(x);
}

/* ---- dot products --------------------------------------------------------------- */

/* The integer part of every block, against the element-by-element reference
 * read straight from the layout, and vec_dot against its stated float order. */
static void test_integer_part(void) {
    int64_t n = 32 * 60;
    float *w = malloc((size_t)n * sizeof(float)), *x = malloc((size_t)n * sizeof(float));
    test_fill(w, n);
    test_fill(x, n);
    colibri_block_q8_0 *w8 = malloc((size_t)(n / 32) * sizeof *w8);
    colibri_block_q8_h *a8 = malloc((size_t)(n / 32) * sizeof *a8);
    colibri_block_q4_0 *w40 = malloc((size_t)(n / 32) * sizeof *w40);
    colibri_block_q4_1 *w41 = malloc((size_t)(n / 32) * sizeof *w41);
    colibri_quantize_row_q8_0(w, w8, n);
    colibri_quantize_row_q4_0(w, w40, n);
    colibri_quantize_row_q4_1(w, w41, n);
    colibri_quantize_row_q8_h(x, a8, n);
    int exact[3] = {1, 1, 1};
    float order[3] = {0.0f, 0.0f, 0.0f};
    for (int64_t b = 0; b < n / 32; b++) {
        int32_t ref8 = 0, ref40 = 0, ref41 = 0, asum = 0;   /* sums of products with k * qs */
        for (int j = 0; j < 32; j++) {
            int32_t a = a8[b].k[j / 16] * a8[b].qs[j];
            ref8 += w8[b].qs[j] * a;
            ref40 += (test_nibble(w40[b].qs, j) - 8) * a;
            ref41 += test_nibble(w41[b].qs, j) * a;
            asum += a;
        }
        exact[0] &= colibri_block_dot_q8_0(&w8[b], &a8[b]) == ref8;
        exact[1] &= colibri_block_dot_q4_0(&w40[b], &a8[b]) == ref40;
        exact[2] &= colibri_block_dot_q4_1(&w41[b], &a8[b]) == ref41 && a8[b].sum[0] + a8[b].sum[1] == asum;
        float da = a8[b].d;
        order[0] += (float)ref8 * (colibri_f16_to_f32(w8[b].d) * da);
        order[1] += (float)ref40 * (colibri_f16_to_f32(w40[b].d) * da);
        order[2] += (float)ref41 * (colibri_f16_to_f32(w41[b].d) * da) +
                    colibri_f16_to_f32(w41[b].m) * (da * (float)asum);
    }
    CHECK(exact[0] && exact[1] && exact[2], "integer parts exact: Q8_0 %d, Q4_0 %d, Q4_1 %d",
          exact[0], exact[1], exact[2]);
    CHECK(colibri_vec_dot_q8_0_q8_h(w8, a8, n) == order[0] && colibri_vec_dot_q4_0_q8_h(w40, a8, n) == order[1] &&
          colibri_vec_dot_q4_1_q8_h(w41, a8, n) == order[2], "vec_dot follows the stated float order bitwise");
    /* extremes: a full block of -8 nibbles times -127 activations with k = 8 stays exact in int32 */
    colibri_block_q4_0 wmin;
    colibri_block_q8_h amin = {.d = 1.0f, .k = {8, 8}};
    memset(wmin.qs, 0x00, sizeof wmin.qs);
    memset(amin.qs, 0x81, sizeof amin.qs);   /* -127 */
    CHECK(colibri_block_dot_q4_0(&wmin, &amin) == 32 * 8 * 127 * 8, "extreme Q4_0 block");
    free(w); free(x); free(w8); free(a8); free(w40); free(w41);
}

/* Y = W X through the table (quantized activations) vs the float64 sum of
 * dequant(W) * x with the unquantized x; NMSE over all rows and 8 vectors. */
static double test_matmul_nmse(int32_t type, int64_t rows, int64_t cols) {
    const colibri_type_traits *t = colibri_type_traits_of(type);
    const colibri_type_traits *act = colibri_type_traits_of(t->act_type);
    int64_t w_row = colibri_row_bytes(type, cols), a_row = colibri_row_bytes(t->act_type, cols);
    float *w = malloc((size_t)(rows * cols) * sizeof(float));     /* w: [rows, cols] */
    float *wd = malloc((size_t)(rows * cols) * sizeof(float));    /* wd: dequant(wq) */
    char *wq = malloc((size_t)(rows * w_row));
    float *x = malloc((size_t)cols * sizeof(float));              /* x: [cols] */
    char *xq = malloc((size_t)a_row);
    for (int64_t i = 0; i < rows * cols; i++) w[i] = test_rand(&rng);
    for (int64_t r = 0; r < rows; r++) t->from_f32(w + r * cols, wq + r * w_row, cols);
    for (int64_t r = 0; r < rows; r++) t->to_f32(wq + r * w_row, wd + r * cols, cols);
    double err = 0.0, ref = 0.0;
    for (int v = 0; v < 8; v++) {   /* centred vectors, and two with a mean (block sums matter) */
        for (int64_t c = 0; c < cols; c++) x[c] = v >= 6 ? 0.25f + test_rand(&rng) : 4.0f * test_rand(&rng);
        act->from_f32(x, xq, cols);
        for (int64_t r = 0; r < rows; r++) {
            double exact = 0.0;
            for (int64_t c = 0; c < cols; c++) exact += (double)wd[r * cols + c] * x[c];
            double got = t->vec_dot(wq + r * w_row, xq, cols);
            err += (got - exact) * (got - exact);
            ref += exact * exact;
        }
    }
    free(w); free(wd); free(wq); free(x); free(xq);
    return err / ref;
}

static void test_matmul(void) {
    const int64_t rows[4] = {1, 7, 33, 67};
    const int64_t cols[5] = {32, 96, 160, 544, 1024};
    for (int i = 0; i < 3; i++) {
        double worst = 0.0;
        for (int r = 0; r < 4; r++) {
            for (int c = 0; c < 5; c++) {
                double nmse = test_matmul_nmse(block_types[i], rows[r], cols[c]);
                CHECK(nmse <= 5e-4, "%s [%lld, %lld]: NMSE %.3g > 5e-4", colibri_type_traits_of(block_types[i])->name,
                      (long long)rows[r], (long long)cols[c], nmse);
                if (nmse > worst) worst = nmse;
            }
        }
        printf("%s: worst matmul NMSE vs float64 dequantized reference %.3g\n",
               colibri_type_traits_of(block_types[i])->name, worst);
    }
}

int main(void) {
    test_layout();
    test_known_blocks();
    test_roundtrip();
    test_integer_part();
    test_matmul();
    printf("%d passed, %d failed\n", n_passed, n_failed);
    return n_failed == 0 ? 0 : 1;
}
