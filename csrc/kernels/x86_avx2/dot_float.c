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
        /* h: [r0 a0123, r1 a0123, r2 a0123, r3 a0123 | same for a4567] */                 \
        __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(acc0, acc1), _mm256_hadd_ps(acc2, acc3)); \
        _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1))); \
        for (int r = 0; r < 4; r++) {                                                      \
            float tail = 0.0f;                                                             \
            for (int64_t t = i; t < n; t++) tail += LOAD1(w[r], t) * x[t];                 \
            out[r] += tail;                                                                \
        }                                                                                  \
    }

COLIBRI_AVX2_FLOAT_CORE(colibri_dot4_f32_avx2, colibri_load8_f32, colibri_load1_f32, 4)
COLIBRI_AVX2_FLOAT_CORE(colibri_dot4_f16_avx2, colibri_load8_f16, colibri_load1_f16, 2)
COLIBRI_AVX2_FLOAT_CORE(colibri_dot4_bf16_avx2, colibri_load8_bf16, colibri_load1_bf16, 2)

COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_f32_avx2, colibri_dot4_f32_avx2)
COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_f16_avx2, colibri_dot4_f16_avx2)
COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_bf16_avx2, colibri_dot4_bf16_avx2)

COLIBRI_GEMM_EACH_DEFINE(void colibri_gemm_f32_avx2, colibri_dot_rows_f32_avx2)
COLIBRI_GEMM_EACH_DEFINE(void colibri_gemm_f16_avx2, colibri_dot_rows_f16_avx2)
COLIBRI_GEMM_EACH_DEFINE(void colibri_gemm_bf16_avx2, colibri_dot_rows_bf16_avx2)
