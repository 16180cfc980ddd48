/*
 * x86_avx2/dot_float.c — F32 / F16 / BF16 weight rows · f32 activations with
 * AVX2 (+F16C), 4 rows at a time sharing the activation loads (ELEM: bytes
 * per weight element, for the prefetch of the group ahead, isa.h).
 *
 * Bitwise equal to the reference (dot.c): one 8-lane accumulator per row is
 * exactly the reference's acc[0..7], updated with a separate multiply and add
 * (no FMA: the reference rounds the product first), combined pairwise with
 * two hadds as ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)), tail added last.
 * F16 → f32 (vcvtph2ps) and BF16 → f32 (shift by 16) are exact, as the
 * reference conversions are. Four independent rows hide the add latency
 * that one row's single accumulation chain cannot.
 */
#include <immintrin.h>

#include "../isa.h"
#include "../kernels.h"
#include "float_load.h"

/* out[r] += the tail (elements from i on) of w[r] . x, as the reference adds it last. */
#define COLIBRI_AVX2_FLOAT_TAILS(LOAD1, w, x, i, n, out)                                   \
    for (int r_ = 0; r_ < 4; r_++) {                                                       \
        float tail_ = 0.0f;                                                                \
        for (int64_t t_ = (i); t_ < (n); t_++) tail_ += LOAD1((w)[r_], t_) * (x)[t_];      \
        (out)[r_] += tail_;                                                                \
    }

/* out[r] = w[r] . x for 4 rows; see the file comment for the order. */
#define COLIBRI_AVX2_FLOAT_CORE(NAME, LOAD8, LOAD1, ELEM)                                  \
    static void NAME(const char *const w[4], const char *ahead, const void *xv,            \
                     int64_t n, float out[4]) {                                            \
        const float *x = (const float *)xv;                                                \
        __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;          \
        int64_t i = 0;                                                                     \
        for (; i + 8 <= n; i += 8) {                                                       \
            COLIBRI_PREFETCH_SPAN(ahead + 4 * (ELEM) * i, 32 * (ELEM));                     \
            __m256 xi = _mm256_loadu_ps(x + i);                                            \
            acc0 = _mm256_add_ps(acc0, _mm256_mul_ps(LOAD8(w[0], i), xi));                 \
            acc1 = _mm256_add_ps(acc1, _mm256_mul_ps(LOAD8(w[1], i), xi));                 \
            acc2 = _mm256_add_ps(acc2, _mm256_mul_ps(LOAD8(w[2], i), xi));                 \
            acc3 = _mm256_add_ps(acc3, _mm256_mul_ps(LOAD8(w[3], i), xi));                 \
        }                                                                                  \
        colibri_combine4_avx2(acc0, acc1, acc2, acc3, out);                                \
        COLIBRI_AVX2_FLOAT_TAILS(LOAD1, w, x, i, n, out);                                  \
    }

/* out[t][r] = w[r] . x[t] for 4 rows and 4 tokens (the first nt real), two
 * tokens per pass sharing each widened weight vector (8 accumulators and 4
 * weight vectors of AVX2's 16 registers); each (row, token) exactly the
 * one-row core's arithmetic. */
#define COLIBRI_AVX2_FLOAT_GEMM_CORE(NAME, LOAD8, LOAD1)                                   \
    static void NAME(const char *const w[4], const float *const x[4], int64_t n, float out[4][4], \
                     int64_t nt) {                                                         \
        for (int t = 0; t < nt; t += 2) {                                                  \
            const float *xa = x[t], *xb = x[t + 1];                                        \
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;   /* token t */    \
            __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0;                    /* token t + 1 */ \
            int64_t i = 0;                                                                 \
            for (; i + 8 <= n; i += 8) {                                                   \
                __m256 xva = _mm256_loadu_ps(xa + i), xvb = _mm256_loadu_ps(xb + i), wv;   \
                wv = LOAD8(w[0], i), a0 = _mm256_add_ps(a0, _mm256_mul_ps(wv, xva));       \
                b0 = _mm256_add_ps(b0, _mm256_mul_ps(wv, xvb));                            \
                wv = LOAD8(w[1], i), a1 = _mm256_add_ps(a1, _mm256_mul_ps(wv, xva));       \
                b1 = _mm256_add_ps(b1, _mm256_mul_ps(wv, xvb));                            \
                wv = LOAD8(w[2], i), a2 = _mm256_add_ps(a2, _mm256_mul_ps(wv, xva));       \
                b2 = _mm256_add_ps(b2, _mm256_mul_ps(wv, xvb));                            \
                wv = LOAD8(w[3], i), a3 = _mm256_add_ps(a3, _mm256_mul_ps(wv, xva));       \
                b3 = _mm256_add_ps(b3, _mm256_mul_ps(wv, xvb));                            \
            }                                                                              \
            colibri_combine4_avx2(a0, a1, a2, a3, out[t]);                                 \
            colibri_combine4_avx2(b0, b1, b2, b3, out[t + 1]);                             \
            COLIBRI_AVX2_FLOAT_TAILS(LOAD1, w, xa, i, n, out[t]);                          \
            COLIBRI_AVX2_FLOAT_TAILS(LOAD1, w, xb, i, n, out[t + 1]);                      \
        }                                                                                  \
    }

COLIBRI_AVX2_FLOAT_CORE(colibri_dot4_f32_avx2, colibri_load8_f32, colibri_load1_f32, 4)
COLIBRI_AVX2_FLOAT_CORE(colibri_dot4_f16_avx2, colibri_load8_f16, colibri_load1_f16, 2)
COLIBRI_AVX2_FLOAT_CORE(colibri_dot4_bf16_avx2, colibri_load8_bf16, colibri_load1_bf16, 2)

COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_f32_avx2, colibri_dot4_f32_avx2)
COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_f16_avx2, colibri_dot4_f16_avx2)
COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_bf16_avx2, colibri_dot4_bf16_avx2)

COLIBRI_AVX2_FLOAT_GEMM_CORE(colibri_gemm4x4_f32_avx2, colibri_load8_f32, colibri_load1_f32)
COLIBRI_AVX2_FLOAT_GEMM_CORE(colibri_gemm4x4_f16_avx2, colibri_load8_f16, colibri_load1_f16)
COLIBRI_AVX2_FLOAT_GEMM_CORE(colibri_gemm4x4_bf16_avx2, colibri_load8_bf16, colibri_load1_bf16)

COLIBRI_GEMM_FLOAT_TILED_DEFINE(colibri_gemm_f32_avx2, colibri_gemm4x4_f32_avx2, 4)
COLIBRI_GEMM_FLOAT_TILED_DEFINE(colibri_gemm_f16_avx2, colibri_gemm4x4_f16_avx2, 4)
COLIBRI_GEMM_FLOAT_TILED_DEFINE(colibri_gemm_bf16_avx2, colibri_gemm4x4_bf16_avx2, 4)
