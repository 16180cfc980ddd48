/*
 * x86_avx512/gemm_float.c — the multi-token kernels (gemm) of the float
 * weight types (F32, F16, BF16) and of attention's scores (keys as F32
 * "weights", queries as tokens), on 256-bit vectors: 4 rows × 4 tokens per
 * step, their 16 accumulators in AVX-512's 32 vector registers.
 *
 * Every (row, token) accumulator is exactly the reference's acc[0..7] for
 * that pair (dot.c): 8 lanes over blocks of 8 elements, a separate multiply
 * and add (no FMA), combined pairwise with two hadds as
 * ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)), the tail added last — as
 * x86_avx2/dot_float.c does for one token. Sharing each loaded weight vector
 * among 4 tokens and each activation vector among 4 rows makes it 8 loads
 * per 32 multiply-adds instead of 5 per 8. Rows come in tiles of
 * COLIBRI_GEMM_TILE_ROWS, every token against one tile before the next, so
 * a tile's weights are read from memory once and then from L2. A last group
 * of fewer rows or tokens repeats its last one; the spare results are
 * dropped.
 */
#include <immintrin.h>

#include "../isa.h"
#include "../kernels.h"
#include "../x86_avx2/float_load.h"

/* out[t][r] = w[r] . x[t] for 4 rows and 4 tokens (x: f32 rows). */
#define COLIBRI_GEMM_FLOAT_CORE(NAME, LOAD8, LOAD1)                                                   \
    static inline void NAME(const char *const w[4], const float *const x[4], int64_t n, float out[4][4]) { \
        __m256 acc[4][4];   /* acc: [row][token] 8 lanes */                                            \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {                                         \
            _Pragma("GCC unroll 4") for (int t = 0; t < 4; t++) acc[r][t] = _mm256_setzero_ps();      \
        }                                                                                             \
        int64_t i = 0;                                                                                \
        for (; i + 8 <= n; i += 8) {                                                                  \
            __m256 wv[4];   /* wv: [row] this block's 8 weights, widened */                           \
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) wv[r] = LOAD8(w[r], i);               \
            _Pragma("GCC unroll 4") for (int t = 0; t < 4; t++) {                                     \
                __m256 xv = _mm256_loadu_ps(x[t] + i);                                                \
                _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {                                 \
                    acc[r][t] = _mm256_add_ps(acc[r][t], _mm256_mul_ps(wv[r], xv));                   \
                }                                                                                     \
            }                                                                                         \
        }                                                                                             \
        _Pragma("GCC unroll 4") for (int t = 0; t < 4; t++) {                                         \
            __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(acc[0][t], acc[1][t]),                           \
                                      _mm256_hadd_ps(acc[2][t], acc[3][t]));                          \
            _mm_storeu_ps(out[t], _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1))); \
            for (int r = 0; r < 4; r++) {                                                             \
                float tail = 0.0f;                                                                    \
                for (int64_t k = i; k < n; k++) tail += LOAD1(w[r], k) * x[t][k];                     \
                out[t][r] += tail;                                                                    \
            }                                                                                         \
        }                                                                                             \
    }

COLIBRI_GEMM_FLOAT_CORE(colibri_gemm4x4_f32, colibri_load8_f32, colibri_load1_f32)
COLIBRI_GEMM_FLOAT_CORE(colibri_gemm4x4_f16, colibri_load8_f16, colibri_load1_f16)
COLIBRI_GEMM_FLOAT_CORE(colibri_gemm4x4_bf16, colibri_load8_bf16, colibri_load1_bf16)

/* NAME: a colibri_gemm_fn from CORE (4 rows × 4 tokens). */
#define COLIBRI_GEMM_FLOAT_DEFINE(NAME, CORE)                                                         \
    void NAME(const void *w, int64_t w_stride, const void *x, int64_t x_stride, int64_t n, int64_t rows, \
              int64_t n_tok, float *y, int64_t y_stride) {                                            \
        for (int64_t r0 = 0; r0 < rows; r0 += COLIBRI_GEMM_TILE_ROWS) {                               \
            int64_t r_end = rows - r0 < COLIBRI_GEMM_TILE_ROWS ? rows : r0 + COLIBRI_GEMM_TILE_ROWS;  \
            for (int64_t t0 = 0; t0 < n_tok; t0 += 4) {                                               \
                const float *xs[4];   /* xs: [token] activation rows, the last repeated */            \
                for (int t = 0; t < 4; t++) {                                                         \
                    int64_t tt = t0 + t < n_tok ? t0 + t : n_tok - 1;                                 \
                    xs[t] = (const float *)((const char *)x + tt * x_stride);                         \
                }                                                                                     \
                for (int64_t r = r0; r < r_end; r += 4) {                                             \
                    const char *ws[4];   /* ws: [row] weight rows, the last repeated */               \
                    for (int k = 0; k < 4; k++) {                                                     \
                        ws[k] = (const char *)w + (r + k < r_end ? r + k : r_end - 1) * w_stride;     \
                    }                                                                                 \
                    float out[4][4];   /* out: [token][row] */                                        \
                    CORE(ws, xs, n, out);                                                             \
                    for (int t = 0; t < 4 && t0 + t < n_tok; t++) {                                   \
                        for (int k = 0; k < 4 && r + k < r_end; k++) y[(t0 + t) * y_stride + r + k] = out[t][k]; \
                    }                                                                                 \
                }                                                                                     \
            }                                                                                         \
        }                                                                                             \
    }

COLIBRI_GEMM_FLOAT_DEFINE(colibri_gemm_f32_avx512, colibri_gemm4x4_f32)
COLIBRI_GEMM_FLOAT_DEFINE(colibri_gemm_f16_avx512, colibri_gemm4x4_f16)
COLIBRI_GEMM_FLOAT_DEFINE(colibri_gemm_bf16_avx512, colibri_gemm4x4_bf16)
