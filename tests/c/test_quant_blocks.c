/*
 * test_quant_blocks.c — the block types of quant_blocks.h (Q5_0, Q5_1, Q2_K,
 * Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4) in the reference layer. Their
 * dequantizers are checked bitwise against the gguf package's in
 * tests/test_quant_oracle.py; here:
 *   - hand-computed blocks: MXFP4's and Q5_0's bytes and values;
 *   - integer parts exact: with every f32 scale 1 (f16 d = dmin = m = 1, E8M0
 *     128, activation d = 1, Q8_H's k random in 1..8) and random bytes everywhere else, vec_dot is the
 *     exact integer sum of products of the dequantized values, int64;
 *   - vec_dot vs a float64 dot of the dequantized weights with the
 *     dequantized (Q8_H / Q8_S) activations: relative error <= 1e-5 (the f32 group sums);
 *   - quantized matmul vs a float64 dot of the dequantized weights with the
 *     UNquantized activations: NMSE <= 5e-4 (rows 1..67, cols up to 2048);
 *   - round trip of standard normal rows: NMSE within each type's bound.
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

static uint64_t rng = 1234;

/* The types under test, with a round-trip NMSE bound on N(0, 1) rows (measured
 * values in the comments: each bound is about 1.3x the measurement). */
static const struct {
    int32_t dtype;
    double roundtrip_nmse;
} types[] = {
    {COLIBRI_DTYPE_Q5_0, 2.5e-3},     /* 1.8e-3 */
    {COLIBRI_DTYPE_Q5_1, 2.0e-3},     /* 1.4e-3 */
    {COLIBRI_DTYPE_Q2_K, 0.095},      /* 0.073 */
    {COLIBRI_DTYPE_Q3_K, 0.028},      /* 0.021 */
    {COLIBRI_DTYPE_Q4_K, 6.6e-3},     /* 5.1e-3 */
    {COLIBRI_DTYPE_Q5_K, 1.6e-3},     /* 1.2e-3 */
    {COLIBRI_DTYPE_Q6_K, 4.0e-4},     /* 2.9e-4 */
    {COLIBRI_DTYPE_IQ4_NL, 7.2e-3},   /* 5.5e-3 */
    {COLIBRI_DTYPE_IQ4_XS, 7.3e-3},   /* 5.6e-3 */
    {COLIBRI_DTYPE_MXFP4, 0.018},     /* 0.013 */
};
#define N_TYPES (int)(sizeof(types) / sizeof(types[0]))

static double test_normal(void) {   /* Box-Muller on the shared generator */
    double u1 = (test_rand(&rng) + 0.5) * 0.999999 + 1e-7, u2 = test_rand(&rng) + 0.5;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* ---- hand-computed blocks ----------------------------------------------------------- */

static void test_known_blocks(void) {
    /* MXFP4: amax 6 → floor(log2 6) = 2 → e = 127, half scale 0.5; 6 → code 7 (doubled value 12) */
    float x[32] = {0}, y[32];
    x[0] = 6.0f; x[1] = -6.0f; x[2] = 0.25f; x[3] = 0.26f; x[4] = -1.25f; x[16] = 2.5f; x[17] = 100.0f * 0.0f;
    colibri_block_mxfp4 m;
    colibri_quantize_row_mxfp4(x, &m, 32);
    CHECK(m.e == 127, "MXFP4 exponent %d, want 127", m.e);
    /* 0.25 is the tie between 0 and 0.5 (kept at 0), 0.26 goes to 0.5, -1.25 ties -1 / -1.5 (kept at -1),
       2.5 ties 2 / 3 (kept at 2) */
    CHECK(m.qs[0] == (7 | 4 << 4) && m.qs[1] == (15 | 0 << 4) && m.qs[2] == 0 && m.qs[3] == 1 && m.qs[4] == 10,
          "MXFP4 codes %02x %02x %02x %02x %02x", m.qs[0], m.qs[1], m.qs[2], m.qs[3], m.qs[4]);
    colibri_dequantize_row_mxfp4(&m, y, 32);
    CHECK(y[0] == 6.0f && y[1] == -6.0f && y[2] == 0.0f && y[3] == 0.5f && y[4] == -1.0f && y[16] == 2.0f,
          "MXFP4 values");
    m.e = 0;   /* the smallest scale is the subnormal 2^-128 (half of 2^-127) */
    colibri_dequantize_row_mxfp4(&m, y, 32);
    CHECK(y[0] == 12.0f * ldexpf(1.0f, -128), "MXFP4 e = 0: %g", (double)y[0]);

    /* Q5_0: max |x| is -16 → d = 1; q = min(31, trunc(x + 16.5)) */
    memset(x, 0, sizeof x);
    x[0] = -16.0f; x[1] = 15.9f; x[16] = 3.49f; x[31] = -0.5f;
    colibri_block_q5_0 q5;
    colibri_quantize_row_q5_0(x, &q5, 32);
    CHECK(colibri_f16_to_f32(q5.d) == 1.0f, "Q5_0 d");
    colibri_dequantize_row_q5_0(&q5, y, 32);
    CHECK(y[0] == -16.0f && y[1] == 15.0f && y[16] == 3.0f && y[31] == 0.0f && y[2] == 0.0f,
          "Q5_0 values %g %g %g %g", (double)y[0], (double)y[1], (double)y[16], (double)y[31]);
    CHECK(colibri_q5_quant(q5.qh, q5.qs, 1) == 31 && (q5.qh[0] & 2), "Q5_0 bit 4 of element 1 in qh");
}

/* ---- dot products ------------------------------------------------------------------ */

/* A row of n elements of dtype: quantized from random values, then every byte
 * but the f16 scales randomised (every quant, sub-block scale and min), f16
 * scales set to `unit` ? 1.0 : kept; MXFP4's exponent 128 (unit) or 120..135. */
static void test_random_row(int32_t dtype, int64_t n, int unit, char *row) {
    const colibri_type_traits *t = colibri_type_traits_of(dtype);
    float *x = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = (float)test_normal();
    t->from_f32(x, row, n);
    free(x);
    uint16_t one = colibri_f32_to_f16(1.0f);
    for (int64_t b = 0; b < n / t->block_elems; b++) {
        unsigned char *blk = (unsigned char *)row + b * t->block_bytes;
        for (int64_t k = 0; k < t->block_bytes; k++) {
            int f16 = 0;
            for (int f = 0; f < 2; f++) f16 |= t->f16_at[f] >= 0 && (k == t->f16_at[f] || k == t->f16_at[f] + 1);
            if (!f16) blk[k] = (unsigned char)(test_rand(&rng) * 256.0f + 128.0f);
        }
        for (int f = 0; f < 2 && unit; f++) {
            if (t->f16_at[f] >= 0) memcpy(blk + t->f16_at[f], &one, 2);
        }
        if (dtype == COLIBRI_DTYPE_MXFP4) blk[0] = (unsigned char)(unit ? 128 : 120 + b % 16);
    }
}

/* An activation row of type act (Q8_H or Q8_S): random values quantized; unit:
 * every d = 1, the quants random in [-127, 127], Q8_H's k random in 1..8 (sums
 * recomputed). */
static void test_act_row(int32_t act, int64_t n, int unit, char *a) {
    float *x = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = (float)test_normal() * (i % 7 == 0 ? 4.0f : 1.0f);
    colibri_type_traits_of(act)->from_f32(x, a, n);
    free(x);
    if (!unit) return;
    for (int64_t b = 0; b < n / COLIBRI_QK; b++) {
        int8_t qs[COLIBRI_QK];
        for (int j = 0; j < COLIBRI_QK; j++) {
            int v = (int)(test_rand(&rng) * 254.0f);
            qs[j] = (int8_t)(j == b % 32 ? (b % 2 ? 127 : -127) : v);
        }
        if (act == COLIBRI_TYPE_Q8_H) {
            colibri_block_q8_h *blk = (colibri_block_q8_h *)a + b;
            memcpy(blk->qs, qs, sizeof qs);
            blk->d = 1.0f;
            for (int h = 0; h < 2; h++) {
                int32_t sum = 0;
                for (int j = 16 * h; j < 16 * h + 16; j++) sum += qs[j];
                blk->k[h] = (int16_t)(1 + (b + 3 * h) % 8);
                blk->sum[h] = (int16_t)(blk->k[h] * sum);
            }
        } else {
            colibri_block_q8_s *blk = (colibri_block_q8_s *)a + b;
            memcpy(blk->qs, qs, sizeof qs);
            blk->d = 1.0f;
            colibri_q8_s_sums(blk);
        }
    }
}

static void test_dots(void) {
    enum { N = 2048 };
    static char w[N * 4], a[N * 2];
    static float wd[N], ad[N];
    for (int k = 0; k < N_TYPES; k++) {
        int32_t dtype = types[k].dtype;
        const colibri_type_traits *t = colibri_type_traits_of(dtype);
        const colibri_type_traits *act = colibri_type_traits_of(t->act_type);
        int exact = 1;
        double worst_rel = 0.0;
        for (int trial = 0; trial < 40; trial++) {
            int unit = trial % 2 == 0;
            int64_t n = t->block_elems * (1 + trial % 8);
            test_random_row(dtype, n, unit, w);
            int q8h = t->block_elems == COLIBRI_QK && dtype != COLIBRI_DTYPE_MXFP4;
            CHECK(t->act_type == (q8h ? COLIBRI_TYPE_Q8_H : COLIBRI_TYPE_Q8_S), "%s takes %s activations", t->name,
                  q8h ? "Q8_H" : "Q8_S");
            test_act_row(t->act_type, n, unit, a);
            t->to_f32(w, wd, n);
            act->to_f32(a, ad, n);
            double ref = 0.0, mag = 0.0;
            int64_t iref = 0;
            for (int64_t i = 0; i < n; i++) {
                ref += (double)wd[i] * (double)ad[i];
                mag += fabs((double)wd[i] * (double)ad[i]);
                iref += (int64_t)wd[i] * (int64_t)ad[i];
            }
            float got = t->vec_dot(w, a, n);
            if (unit) {
                exact &= (double)got == (double)iref;
            } else {
                double rel = fabs((double)got - ref) / (mag > 0.0 ? mag : 1.0);
                if (rel > worst_rel) worst_rel = rel;
            }
        }
        CHECK(exact, "%s: with unit scales vec_dot is not the exact integer dot", t->name);
        CHECK(worst_rel <= 1e-5, "%s: vec_dot vs float64 of the dequantized rows: relative error %.3g", t->name,
              worst_rel);
        printf("%s: integer parts exact, worst relative error vs float64 %.3g\n", t->name, worst_rel);
    }
}

/* ---- quantized matmul and round trip ------------------------------------------------ */

static double test_matmul_nmse(int32_t dtype, int64_t rows, int64_t cols) {
    const colibri_type_traits *t = colibri_type_traits_of(dtype);
    const colibri_type_traits *act = colibri_type_traits_of(t->act_type);
    int64_t w_row = colibri_row_bytes(dtype, cols);
    float *w = malloc((size_t)(rows * cols) * sizeof(float));    /* w: [rows, cols] */
    float *wd = malloc((size_t)(rows * cols) * sizeof(float));   /* wd: dequant(wq) */
    char *wq = malloc((size_t)(rows * w_row));
    float *x = malloc((size_t)cols * sizeof(float));             /* x: [cols] */
    char *xq = malloc((size_t)colibri_row_bytes(t->act_type, cols));
    for (int64_t i = 0; i < rows * cols; i++) w[i] = (float)test_normal();
    for (int64_t r = 0; r < rows; r++) t->from_f32(w + r * cols, wq + r * w_row, cols);
    for (int64_t r = 0; r < rows; r++) t->to_f32(wq + r * w_row, wd + r * cols, cols);
    double err = 0.0, ref = 0.0;
    for (int v = 0; v < 4; v++) {   /* centred vectors, and one with a mean (block sums matter) */
        for (int64_t c = 0; c < cols; c++) x[c] = v == 3 ? 0.25f + test_rand(&rng) : 4.0f * test_rand(&rng);
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

static void test_matmul_and_roundtrip(void) {
    const int64_t rows[3] = {1, 7, 67};
    const int64_t cols[3] = {256, 768, 2048};
    for (int k = 0; k < N_TYPES; k++) {
        const colibri_type_traits *t = colibri_type_traits_of(types[k].dtype);
        double worst = 0.0;
        for (int r = 0; r < 3; r++) {
            for (int c = 0; c < 3; c++) {
                double nmse = test_matmul_nmse(types[k].dtype, rows[r], cols[c]);
                CHECK(nmse <= 5e-4, "%s [%lld, %lld]: NMSE %.3g > 5e-4", t->name, (long long)rows[r],
                      (long long)cols[c], nmse);
                worst = nmse > worst ? nmse : worst;
            }
        }
        enum { N = 256 * 64 };
        static float x[N], y[N];
        static char q[N * 2];
        for (int64_t i = 0; i < N; i++) x[i] = (float)test_normal();
        t->from_f32(x, q, N);
        t->to_f32(q, y, N);
        double err = 0.0, ref = 0.0;
        for (int64_t i = 0; i < N; i++) err += ((double)y[i] - x[i]) * ((double)y[i] - x[i]), ref += (double)x[i] * x[i];
        CHECK(err / ref <= types[k].roundtrip_nmse, "%s: round trip NMSE %.3g > %.3g", t->name, err / ref,
              types[k].roundtrip_nmse);
        printf("%s: worst matmul NMSE vs float64 %.3g; round trip NMSE on N(0,1) %.3g\n", t->name, worst, err / ref);
    }
}

int main(void) {
    test_known_blocks();
    test_dots();
    test_matmul_and_roundtrip();
    printf("%d passed, %d failed\n", n_passed, n_failed);
    return n_failed == 0 ? 0 : 1;
}
