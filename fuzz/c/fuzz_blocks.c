/*
 * fuzz_blocks.c — libFuzzer harness for the quantized-block readers: arbitrary bytes as rows of
 * every type in the type table (csrc/kernels/quant.h, colibri_type_traits_of: new block types
 * are covered as soon as they have a row there), read by
 *   - the type's to_f32 (dequantize / widen) and the public colibri_dequantize;
 *   - its reference vec_dot against an activation row quantized by the reference quantizer;
 *   - every ISA table this build and CPU run (scalar, avx2, avx512, neon...): dot_rows, gemm
 *     and the activation quantizers, which must equal the reference BITWISE (isa.h's
 *     contract; two NaNs count as equal), or the harness aborts.
 * Input: byte 0 picks the type, byte 1 the row length in blocks (1..8), byte 2 the rows
 * (1..5) and tokens (1..3); the rest is the weight bytes, then f32 activations (from the
 * same bytes, cycled, when the input is short).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri.h"
#include "isa.h"
#include "quant.h"

#define MAX_BLOCKS 8
#define MAX_ROWS 5
#define MAX_TOKENS 3

static int same_bits(float a, float b) {
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

static void fail(const char *what, const char *isa, const char *type, int64_t i, float got, float want) {
    fprintf(stderr, "fuzz_blocks: %s of %s on %s differs from the reference at %lld: %a vs %a\n", what, type,
            isa, (long long)i, got, want);
    abort();
}

static void fill(uint8_t *dst, size_t n, const uint8_t *src, size_t src_n) {
    for (size_t i = 0; i < n; i++) dst[i] = src_n ? src[i % src_n] : 0;
}

static const char *const isa_names[] = {"scalar", "avx2", "avx512", "neon", "neon_dotprod"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    int32_t type = data[0] % COLIBRI_TYPE_COUNT;
    const colibri_type_traits *t = colibri_type_traits_of(type);
    if (!t || !t->to_f32) return 0;
    int64_t blocks = 1 + data[1] % MAX_BLOCKS, n = blocks * (t->block_elems > 1 ? t->block_elems : 32);
    int64_t rows = 1 + data[2] % MAX_ROWS, n_tok = 1 + (data[2] / MAX_ROWS) % MAX_TOKENS;
    int64_t row_bytes = colibri_row_bytes(type, n);
    const uint8_t *rest = data + 3;
    size_t rest_n = size - 3;

    uint8_t *w = malloc((size_t)(rows * row_bytes));                 /* w: [rows, row_bytes] */
    float *x = malloc((size_t)(n_tok * n) * sizeof(float));          /* x: [n_tok, n] activations */
    float *deq = malloc((size_t)n * sizeof(float));                  /* deq: [n] */
    float *deq2 = malloc((size_t)n * sizeof(float));
    if (!w || !x || !deq || !deq2) abort();
    fill(w, (size_t)(rows * row_bytes), rest, rest_n);
    size_t w_taken = rest_n < (size_t)(rows * row_bytes) ? rest_n : (size_t)(rows * row_bytes);
    fill((uint8_t *)x, (size_t)(n_tok * n) * sizeof(float), rest + w_taken, rest_n - w_taken);

    for (int64_t r = 0; r < rows; r++) t->to_f32(w + r * row_bytes, deq, n);
    if (type < COLIBRI_WEIGHT_TYPES && colibri_dequantize(type, w, deq2, n) == COLIBRI_OK) {
        t->to_f32(w, deq, n);
        for (int64_t i = 0; i < n; i++) {
            if (!same_bits(deq[i], deq2[i])) fail("colibri_dequantize", "api", t->name, i, deq2[i], deq[i]);
        }
    }

    if (t->vec_dot && type < COLIBRI_WEIGHT_TYPES) {
        const colibri_type_traits *act = colibri_type_traits_of(t->act_type);
        int64_t x_bytes = colibri_row_bytes(t->act_type, n);
        uint8_t *xq = malloc((size_t)(n_tok * x_bytes));              /* xq: [n_tok, x_bytes] reference */
        uint8_t *xq_isa = malloc((size_t)(n_tok * x_bytes));
        float *want = malloc((size_t)(n_tok * rows) * sizeof(float));  /* want: [n_tok, rows] */
        float *got = malloc((size_t)(n_tok * rows) * sizeof(float));
        if (!xq || !xq_isa || !want || !got) abort();
        for (int64_t tok = 0; tok < n_tok; tok++) {
            act->from_f32(x + tok * n, xq + tok * x_bytes, n);
            for (int64_t r = 0; r < rows; r++) want[tok * rows + r] = t->vec_dot(w + r * row_bytes, xq + tok * x_bytes, n);
        }
        for (size_t k = 0; k < sizeof isa_names / sizeof isa_names[0]; k++) {
            const colibri_isa_table *isa = colibri_isa_find(isa_names[k]);
            if (!isa) continue;
            colibri_quantize_fn quantize = colibri_isa_quantizer(isa, t->act_type);
            if (quantize) {
                for (int64_t tok = 0; tok < n_tok; tok++) quantize(x + tok * n, xq_isa + tok * x_bytes, n);
                if (memcmp(xq, xq_isa, (size_t)(n_tok * x_bytes)) != 0) {
                    fprintf(stderr, "fuzz_blocks: %s's activation quantizer for %s differs from the reference\n",
                            isa->name, t->name);
                    abort();
                }
            }
            const void *xa = t->act_type == COLIBRI_DTYPE_F32 ? (const void *)x : (const void *)xq;
            int64_t xa_stride = t->act_type == COLIBRI_DTYPE_F32 ? n * (int64_t)sizeof(float) : x_bytes;
            for (int64_t tok = 0; tok < n_tok; tok++) {
                isa->dot_rows[type](w, row_bytes, (const char *)xa + tok * xa_stride, n, rows, got + tok * rows);
            }
            for (int64_t i = 0; i < n_tok * rows; i++) {
                if (!same_bits(got[i], want[i])) fail("dot_rows", isa->name, t->name, i, got[i], want[i]);
            }
            if (isa->gemm[type]) {
                isa->gemm[type](w, row_bytes, xa, xa_stride, n, rows, n_tok, got, rows);
                for (int64_t i = 0; i < n_tok * rows; i++) {
                    if (!same_bits(got[i], want[i])) fail("gemm", isa->name, t->name, i, got[i], want[i]);
                }
            }
        }
        free(xq);
        free(xq_isa);
        free(want);
        free(got);
    }
    free(w);
    free(x);
    free(deq);
    free(deq2);
    return 0;
}
