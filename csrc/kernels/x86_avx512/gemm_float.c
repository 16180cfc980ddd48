/*
 * x86_avx512/gemm_float.c — the multi-token kernels (gemm) of the float
 * weight types (F32, F16, BF16) and of attention's scores (keys as F32
 * "weights", queries as tokens): 4 rows × 8 tokens per step (4 × 4 for the
 * last 4 or fewer), two tokens per 512-bit accumulator.
 *
 * Every (row, token) pair is exactly the reference's acc[0..7] for that pair
 * (dot.c): 8 lanes over blocks of 8 elements, a separate multiply and add (no
 * FMA), combined pairwise with two hadds as ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)),
 * the tail added last — as x86_avx2/dot_float.c does for one token. A 512-bit
 * accumulator holds the 8 lanes of token 2p in its low half and of token
 * 2p+1 in its high half, against the row's 8 weights loaded into both halves,
 * so each multiply and add serves two (row, token) pairs: 4 rows × 8 tokens
 * take 16 accumulators, 4 weight and 4 activation-pair loads per 32 pairs of
 * 8 multiply-adds (on 256-bit vectors, 4 × 4 tokens took 16 accumulators
 * for 16 pairs). Rows come in tiles of COLIBRI_GEMM_TILE_ROWS, every token
 * against one tile before the next, so a tile's weights are read from memory
 * once and then from L2. A last group of fewer rows or tokens repeats its
 * last one; the spare results are dropped.
 */
#include <immintrin.h>

#include "../isa.h"
#include "../kernels.h"
#include "../x86_avx2/float_load.h"

/* Elements i..i+7 of the row at w as floats, in both 256-bit halves. */
static inline __m512 colibri_load8x2_f32(const void *w, int64_t i) {
    return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_loadu_pd((const double *)((const float *)w + i))));
}
static inline __m512 colibri_load8x2_f16(const void *w, int64_t i) {
    return _mm512_cvtph_ps(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + i))));
}
static inline __m512 colibri_load8x2_bf16(const void *w, int64_t i) {
    __m256i h = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + i)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* The 4 row totals of token accumulators a0..a3 (8 lanes each): lane r =
 * the reference's combine of row r, ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)). */
static inline __m128 colibri_combine4x8(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}
static inline __m256 colibri_half_ps(__m512 v, int high) {
    return high ? _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)) : _mm512_castps512_ps256(v);
}

/* out[t][r] = w[r] . x[t] for 4 rows and 2·PAIRS tokens (x: f32 rows); PAIRS
 * a constant (2 or 4) once inlined, so the accumulators stay in registers. */
#define COLIBRI_GEMM_FLOAT_CORE(NAME, LOAD8X2, LOAD1)                                                 \
    static inline __attribute__((always_inline)) void NAME(const char *const w[4], const float *const x[8], \
                                                           int64_t n, float out[8][4], const int pairs) { \
        __m512 acc[4][4];   /* acc: [row][token pair] tokens 2p (lanes 0-7), 2p+1 (8-15) */            \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {                                         \
            _Pragma("GCC unroll 4") for (int p = 0; p < pairs; p++) acc[r][p] = _mm512_setzero_ps();  \
        }                                                                                             \
        int64_t i = 0;                                                                                \
        for (; i + 8 <= n; i += 8) {                                                                  \
            __m512 wv[4];   /* wv: [row] this block's 8 weights, widened, in both halves */           \
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) wv[r] = LOAD8X2(w[r], i);             \
            _Pragma("GCC unroll 4") for (int p = 0; p < pairs; p++) {                                 \
                __m512 xv = _mm512_castpd_ps(_mm512_insertf64x4(                                      \
                    _mm512_castpd256_pd512(_mm256_loadu_pd((const double *)(x[2 * p] + i))),          \
                    _mm256_loadu_pd((const double *)(x[2 * p + 1] + i)), 1));                         \
                _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {                                 \
                    acc[r][p] = _mm512_add_ps(acc[r][p], _mm512_mul_ps(wv[r], xv));                   \
                }                                                                                     \
            }                                                                                         \
        }                                                                                             \
        _Pragma("GCC unroll 8") for (int t = 0; t < 2 * pairs; t++) {                                 \
            int p = t / 2, high = t % 2;                                                              \
            _mm_storeu_ps(out[t], colibri_combine4x8(colibri_half_ps(acc[0][p], high), colibri_half_ps(acc[1][p], high), \
                                                     colibri_half_ps(acc[2][p], high), colibri_half_ps(acc[3][p], high))); \
            for (int r = 0; r < 4; r++) {                                                             \
                float tail = 0.0f;                                                                    \
                for (int64_t k = i; k < n; k++) tail += LOAD1(w[r], k) * x[t][k];                     \
                out[t][r] += tail;                                                                    \
            }                                                                                         \
        }                                                                                             \
    }

COLIBRI_GEMM_FLOAT_CORE(colibri_gemm4x8_f32, colibri_load8x2_f32, colibri_load1_f32)
COLIBRI_GEMM_FLOAT_CORE(colibri_gemm4x8_f16, colibri_load8x2_f16, colibri_load1_f16)
COLIBRI_GEMM_FLOAT_CORE(colibri_gemm4x8_bf16, colibri_load8x2_bf16, colibri_load1_bf16)

/* 4 rows × 8 tokens, or × 4 when 4 or fewer remain. */
#define COLIBRI_GEMM_FLOAT_CORE_8(NAME, CORE)                                                         \
    static void NAME(const char *const w[4], const float *const x[8], int64_t n, float out[8][4], int64_t nt) { \
        if (nt > 4) {                                                                                 \
            CORE(w, x, n, out, 4);                                                                    \
        } else {                                                                                      \
            CORE(w, x, n, out, 2);                                                                    \
        }                                                                                             \
    }

COLIBRI_GEMM_FLOAT_CORE_8(colibri_gemm_core_f32, colibri_gemm4x8_f32)
COLIBRI_GEMM_FLOAT_CORE_8(colibri_gemm_core_f16, colibri_gemm4x8_f16)
COLIBRI_GEMM_FLOAT_CORE_8(colibri_gemm_core_bf16, colibri_gemm4x8_bf16)

COLIBRI_GEMM_FLOAT_TILED_DEFINE(colibri_gemm_f32_avx512, colibri_gemm_core_f32, 8)
COLIBRI_GEMM_FLOAT_TILED_DEFINE(colibri_gemm_f16_avx512, colibri_gemm_core_f16, 8)
COLIBRI_GEMM_FLOAT_TILED_DEFINE(colibri_gemm_bf16_avx512, colibri_gemm_core_bf16, 8)
