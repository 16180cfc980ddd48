/*
 * dispatch.c — the scalar kernel table and the run-time choice of the table
 * in use: the best one this build has and this CPU can run, or the one the
 * COLIBRI_ISA environment variable names (scalar, avx2, avx_vnni, avx512, amx,
 * neon, neon_dotprod). A name this build or CPU cannot run is reported on stderr,
 * once, and the best one is used instead. Chosen once per process (pthread_once).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isa.h"
#include "quant.h"

/* ---- the scalar table: the reference vec_dot of each row ------------------- */

COLIBRI_DOT_ROWS_EACH_DEFINE(static void colibri_dot_rows_f32, colibri_dot_f32)
COLIBRI_DOT_ROWS_EACH_DEFINE(static void colibri_dot_rows_f16, colibri_dot_f16)
COLIBRI_DOT_ROWS_EACH_DEFINE(static void colibri_dot_rows_bf16, colibri_dot_bf16)
COLIBRI_DOT_ROWS_EACH_DEFINE(static void colibri_dot_rows_q8_0, colibri_vec_dot_q8_0_q8_h)
COLIBRI_DOT_ROWS_EACH_DEFINE(static void colibri_dot_rows_q4_0, colibri_vec_dot_q4_0_q8_h)
COLIBRI_DOT_ROWS_EACH_DEFINE(static void colibri_dot_rows_q4_1, colibri_vec_dot_q4_1_q8_h)
#define COLIBRI_SCALAR_BLOCK_KERNELS(T)                                          \
    COLIBRI_DOT_ROWS_EACH_DEFINE(static void colibri_dot_rows_##T, colibri_vec_dot_##T) \
    COLIBRI_GEMM_EACH_DEFINE(static void colibri_gemm_##T, colibri_dot_rows_##T)
COLIBRI_SCALAR_BLOCK_KERNELS(q5_0)
COLIBRI_SCALAR_BLOCK_KERNELS(q5_1)
COLIBRI_SCALAR_BLOCK_KERNELS(q2_k)
COLIBRI_SCALAR_BLOCK_KERNELS(q3_k)
COLIBRI_SCALAR_BLOCK_KERNELS(q4_k)
COLIBRI_SCALAR_BLOCK_KERNELS(q5_k)
COLIBRI_SCALAR_BLOCK_KERNELS(q6_k)
COLIBRI_SCALAR_BLOCK_KERNELS(iq4_nl)
COLIBRI_SCALAR_BLOCK_KERNELS(iq4_xs)
COLIBRI_SCALAR_BLOCK_KERNELS(mxfp4)

COLIBRI_GEMM_EACH_DEFINE(static void colibri_gemm_f32, colibri_dot_rows_f32)
COLIBRI_GEMM_EACH_DEFINE(static void colibri_gemm_f16, colibri_dot_rows_f16)
COLIBRI_GEMM_EACH_DEFINE(static void colibri_gemm_bf16, colibri_dot_rows_bf16)
COLIBRI_GEMM_EACH_DEFINE(static void colibri_gemm_q8_0, colibri_dot_rows_q8_0)
COLIBRI_GEMM_EACH_DEFINE(static void colibri_gemm_q4_0, colibri_dot_rows_q4_0)
COLIBRI_GEMM_EACH_DEFINE(static void colibri_gemm_q4_1, colibri_dot_rows_q4_1)

/* Exact mode's reference (isa.h's dot_rows_exact): each row's colibri_dot_f32 with the row
 * dequantized a block at a time into buf (the dot's 8 partial sums run through the row in
 * order, so taking its values block by block changes no operation). */
static void colibri_dot_rows_exact_ref(int32_t dtype, const void *w, int64_t w_stride, const void *xv, int64_t n,
                                       int64_t rows, float *y) {
    const colibri_type_traits *t = colibri_type_traits_of(dtype);
    const float *x = (const float *)xv;   /* x: [n] */
    float buf[COLIBRI_QK_K];              /* buf: [block_elems] one block's values */
    for (int64_t r = 0; r < rows; r++) {
        const char *row = (const char *)w + r * w_stride;
        float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, tail = 0.0f;
        for (int64_t b = 0; b < n / t->block_elems; b++) {
            t->to_f32(row + b * t->block_bytes, buf, t->block_elems);
            const float *xb = x + b * t->block_elems;
            for (int64_t i = 0; i < t->block_elems; i += 8) {
                for (int j = 0; j < 8; j++) acc[j] += buf[i + j] * xb[i + j];
            }
        }
        y[r] = (((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))) + tail;
    }
}

#define COLIBRI_SCALAR_EXACT(T, DTYPE)                                                                     \
    static void colibri_dot_rows_exact_##T##_scalar(const void *w, int64_t w_stride, const void *x, int64_t n, \
                                                    int64_t rows, float *y) {                              \
        colibri_dot_rows_exact_ref(DTYPE, w, w_stride, x, n, rows, y);                                     \
    }
COLIBRI_SCALAR_EXACT(q8_0, COLIBRI_DTYPE_Q8_0)
COLIBRI_SCALAR_EXACT(q4_0, COLIBRI_DTYPE_Q4_0)
COLIBRI_SCALAR_EXACT(q4_1, COLIBRI_DTYPE_Q4_1)
COLIBRI_SCALAR_EXACT(q5_0, COLIBRI_DTYPE_Q5_0)
COLIBRI_SCALAR_EXACT(q5_1, COLIBRI_DTYPE_Q5_1)
COLIBRI_SCALAR_EXACT(q2_k, COLIBRI_DTYPE_Q2_K)
COLIBRI_SCALAR_EXACT(q3_k, COLIBRI_DTYPE_Q3_K)
COLIBRI_SCALAR_EXACT(q4_k, COLIBRI_DTYPE_Q4_K)
COLIBRI_SCALAR_EXACT(q5_k, COLIBRI_DTYPE_Q5_K)
COLIBRI_SCALAR_EXACT(q6_k, COLIBRI_DTYPE_Q6_K)
COLIBRI_SCALAR_EXACT(iq4_nl, COLIBRI_DTYPE_IQ4_NL)
COLIBRI_SCALAR_EXACT(iq4_xs, COLIBRI_DTYPE_IQ4_XS)
COLIBRI_SCALAR_EXACT(mxfp4, COLIBRI_DTYPE_MXFP4)

static int colibri_cpu_any(void) { return 1; }

const colibri_isa_table colibri_isa_scalar = {
    "scalar",
    colibri_cpu_any,
    {
        [COLIBRI_DTYPE_F32] = colibri_dot_rows_f32,
        [COLIBRI_DTYPE_F16] = colibri_dot_rows_f16,
        [COLIBRI_DTYPE_BF16] = colibri_dot_rows_bf16,
        [COLIBRI_DTYPE_Q8_0] = colibri_dot_rows_q8_0,
        [COLIBRI_DTYPE_Q4_0] = colibri_dot_rows_q4_0,
        [COLIBRI_DTYPE_Q4_1] = colibri_dot_rows_q4_1,
        [COLIBRI_DTYPE_Q5_0] = colibri_dot_rows_q5_0,
        [COLIBRI_DTYPE_Q5_1] = colibri_dot_rows_q5_1,
        [COLIBRI_DTYPE_Q2_K] = colibri_dot_rows_q2_k,
        [COLIBRI_DTYPE_Q3_K] = colibri_dot_rows_q3_k,
        [COLIBRI_DTYPE_Q4_K] = colibri_dot_rows_q4_k,
        [COLIBRI_DTYPE_Q5_K] = colibri_dot_rows_q5_k,
        [COLIBRI_DTYPE_Q6_K] = colibri_dot_rows_q6_k,
        [COLIBRI_DTYPE_IQ4_NL] = colibri_dot_rows_iq4_nl,
        [COLIBRI_DTYPE_IQ4_XS] = colibri_dot_rows_iq4_xs,
        [COLIBRI_DTYPE_MXFP4] = colibri_dot_rows_mxfp4,
    },
    {
        [COLIBRI_DTYPE_F32] = colibri_gemm_f32,
        [COLIBRI_DTYPE_F16] = colibri_gemm_f16,
        [COLIBRI_DTYPE_BF16] = colibri_gemm_bf16,
        [COLIBRI_DTYPE_Q8_0] = colibri_gemm_q8_0,
        [COLIBRI_DTYPE_Q4_0] = colibri_gemm_q4_0,
        [COLIBRI_DTYPE_Q4_1] = colibri_gemm_q4_1,
        [COLIBRI_DTYPE_Q5_0] = colibri_gemm_q5_0,
        [COLIBRI_DTYPE_Q5_1] = colibri_gemm_q5_1,
        [COLIBRI_DTYPE_Q2_K] = colibri_gemm_q2_k,
        [COLIBRI_DTYPE_Q3_K] = colibri_gemm_q3_k,
        [COLIBRI_DTYPE_Q4_K] = colibri_gemm_q4_k,
        [COLIBRI_DTYPE_Q5_K] = colibri_gemm_q5_k,
        [COLIBRI_DTYPE_Q6_K] = colibri_gemm_q6_k,
        [COLIBRI_DTYPE_IQ4_NL] = colibri_gemm_iq4_nl,
        [COLIBRI_DTYPE_IQ4_XS] = colibri_gemm_iq4_xs,
        [COLIBRI_DTYPE_MXFP4] = colibri_gemm_mxfp4,
    },
    colibri_quantize_row_q8_h,
    colibri_quantize_row_q8_s,
    {colibri_weighted_sum_f32, colibri_weighted_sum_f16},
    {colibri_f32_row_from_f32, colibri_f16_row_from_f32},
    colibri_softmax_apply,
    colibri_silu_mul,
    .gemm_from = {0},   /* every type: COLIBRI_GEMM_FROM_DEFAULT */
    .dequantize = {
        [COLIBRI_DTYPE_Q8_0] = colibri_dequantize_row_q8_0,
        [COLIBRI_DTYPE_Q4_0] = colibri_dequantize_row_q4_0,
        [COLIBRI_DTYPE_Q4_1] = colibri_dequantize_row_q4_1,
        [COLIBRI_DTYPE_Q5_0] = colibri_dequantize_row_q5_0,
        [COLIBRI_DTYPE_Q5_1] = colibri_dequantize_row_q5_1,
        [COLIBRI_DTYPE_Q2_K] = colibri_dequantize_row_q2_k,
        [COLIBRI_DTYPE_Q3_K] = colibri_dequantize_row_q3_k,
        [COLIBRI_DTYPE_Q4_K] = colibri_dequantize_row_q4_k,
        [COLIBRI_DTYPE_Q5_K] = colibri_dequantize_row_q5_k,
        [COLIBRI_DTYPE_Q6_K] = colibri_dequantize_row_q6_k,
        [COLIBRI_DTYPE_IQ4_NL] = colibri_dequantize_row_iq4_nl,
        [COLIBRI_DTYPE_IQ4_XS] = colibri_dequantize_row_iq4_xs,
        [COLIBRI_DTYPE_MXFP4] = colibri_dequantize_row_mxfp4,
    },
    .dot_rows_exact = COLIBRI_BLOCK_ENTRIES(colibri_dot_rows_exact_, scalar),
};

colibri_quantize_fn colibri_isa_quantizer(const colibri_isa_table *isa, int32_t act) {
    if (act == COLIBRI_TYPE_Q8_H) return isa->quantize_q8_h;
    if (act == COLIBRI_TYPE_Q8_S) return isa->quantize_q8_s;
    return NULL;
}

/* ---- the choice ------------------------------------------------------------- */

/* The tables this build has, best first (CMake defines COLIBRI_HAVE_* for the
 * ISA folders it compiles). */
static const colibri_isa_table *const colibri_isas[] = {
#ifdef COLIBRI_HAVE_AMX
    &colibri_isa_amx,
#endif
#ifdef COLIBRI_HAVE_AVX512
    &colibri_isa_avx512,
#endif
#ifdef COLIBRI_HAVE_AVX_VNNI
    &colibri_isa_avx_vnni,
#endif
#ifdef COLIBRI_HAVE_AVX2
    &colibri_isa_avx2,
#endif
#ifdef COLIBRI_HAVE_NEON_DOTPROD
    &colibri_isa_neon_dotprod,
#endif
#ifdef COLIBRI_HAVE_NEON
    &colibri_isa_neon,
#endif
    &colibri_isa_scalar,
};
#define COLIBRI_ISA_COUNT ((int)(sizeof(colibri_isas) / sizeof(colibri_isas[0])))

/* The tables as used: each one's NULL kernels and quantizers replaced by the
 * scalar table's, its unset gemm_from by the default (by UINT8_MAX where it has
 * its own dot_rows but no gemm: more than a matmul's token chunk). */
static colibri_isa_table colibri_isas_complete[COLIBRI_ISA_COUNT];
static pthread_once_t colibri_isas_complete_once = PTHREAD_ONCE_INIT;

static void colibri_isas_complete_fill(void) {
    for (int i = 0; i < COLIBRI_ISA_COUNT; i++) {
        colibri_isa_table *t = &colibri_isas_complete[i];
        *t = *colibri_isas[i];
        if (!t->quantize_q8_h) t->quantize_q8_h = colibri_isa_scalar.quantize_q8_h;
        if (!t->quantize_q8_s) t->quantize_q8_s = colibri_isa_scalar.quantize_q8_s;
        for (int d = 0; d < COLIBRI_WEIGHT_TYPES; d++) {
            if (!t->dot_rows[d]) t->dot_rows[d] = colibri_isa_scalar.dot_rows[d];
            /* own dot_rows but no gemm: dot_rows token by token beats the scalar gemm at any count */
            if (!t->gemm[d] && t->dot_rows[d] != colibri_isa_scalar.dot_rows[d]) t->gemm_from[d] = UINT8_MAX;
            if (!t->gemm[d]) t->gemm[d] = colibri_isa_scalar.gemm[d];
            if (!t->gemm_from[d]) t->gemm_from[d] = COLIBRI_GEMM_FROM_DEFAULT;
            if (!t->dequantize[d]) t->dequantize[d] = colibri_isa_scalar.dequantize[d];
            if (!t->dot_rows_exact[d]) t->dot_rows_exact[d] = colibri_isa_scalar.dot_rows_exact[d];
        }
    }
}

const colibri_isa_table *colibri_isa_find(const char *name) {
    pthread_once(&colibri_isas_complete_once, colibri_isas_complete_fill);
    for (int i = 0; i < COLIBRI_ISA_COUNT; i++) {
        if (strcmp(colibri_isas[i]->name, name) == 0) {
            return colibri_isas[i]->cpu_supports() ? &colibri_isas_complete[i] : NULL;
        }
    }
    return NULL;
}

static const colibri_isa_table *colibri_isa_chosen;
static pthread_once_t colibri_isa_once = PTHREAD_ONCE_INIT;

static void colibri_isa_choose(void) {
    pthread_once(&colibri_isas_complete_once, colibri_isas_complete_fill);
    const colibri_isa_table *best = NULL;   /* the first one the CPU runs (scalar: any) */
    for (int i = 0; i < COLIBRI_ISA_COUNT && !best; i++) {
        if (colibri_isas[i]->cpu_supports()) best = &colibri_isas_complete[i];
    }
    const char *wanted = getenv("COLIBRI_ISA");
    const colibri_isa_table *forced = wanted && *wanted ? colibri_isa_find(wanted) : NULL;
    if (wanted && *wanted && !forced) {
        fprintf(stderr, "colibri: COLIBRI_ISA=%s is not available (this build and CPU can run:", wanted);
        for (int i = 0; i < COLIBRI_ISA_COUNT; i++) {
            if (colibri_isas[i]->cpu_supports()) fprintf(stderr, " %s", colibri_isas[i]->name);
        }
        fprintf(stderr, "); using %s\n", best->name);
    }
    colibri_isa_chosen = forced ? forced : best;
}

const colibri_isa_table *colibri_isa_active(void) {
    pthread_once(&colibri_isa_once, colibri_isa_choose);
    return colibri_isa_chosen;
}

COLIBRI_API const char *colibri_isa(void) { return colibri_isa_active()->name; }
