/*
 * x86_avx2/block_core.h — the 4-row loop over blocks shared by the x86 block
 * kernels (x86_avx2/dot_quant.c, x86_avx512/dot_quant.c); included only by
 * files compiled with at least AVX2 + F16C.
 *
 * Per block b of Q8_H activations (quant.h), for 4 weight rows at once:
 * MAC(PREP(&w_r[b]), av, kv, shared) gives 8 int32 partial sums of row r's
 * block dot, lanes 0-3 from half 0 and 4-7 from half 1 (PREP: the weight block
 * as a vector; av: the activation block's 32 int8; kv = KV(&a[b]) the block's
 * multipliers as a vector and shared a vector SHARED(av, kv), each computed
 * once for the 4 rows); HSUM(s0..s3, kv) reduces them to the 4 exact
 * k0 * I_0 + k1 * I_1 (the MAC applies k, or HSUM does), then lane r does
 * exactly the reference's float step for row r:
 *   acc_r += (float)isum_r * (d_w_r * d_a)   [+ m_w_r * (d_a * (sum_0 + sum_1)) for Q4_1]
 * with one multiply/add per operation (no FMA), blocks in order.
 * The next group's rows are prefetched at least once per 64-byte line: on
 * every other block for 18- and 20-byte blocks, on every block for Q8_0's 34
 * (every other one, 68 bytes apart, skipped a line now and then: measured
 * 25 GB/s from DRAM on one thread against 30 with every block; prefetching
 * every Q4 block instead costs more than it brings, 23 → 20 GB/s).
 */
#ifndef COLIBRI_X86_BLOCK_CORE_H
#define COLIBRI_X86_BLOCK_CORE_H

#include <immintrin.h>
#include <string.h>

#include "../isa.h"
#include "../quant.h"

/* The 4 totals of s0..s3 (each 8 int32 lanes), in row order; kv unused (the
 * MAC has applied the multipliers). */
static inline __m128i colibri_hsum4_epi32(__m256i s0, __m256i s1, __m256i s2, __m256i s3, __m256i kv) {
    (void)kv;
    __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(s0, s1), _mm256_hadd_epi32(s2, s3));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* The 4 totals k0 * (lanes 0-3) + k1 * (lanes 4-7) of s0..s3, in row order,
 * kv = [k0 x4 | k1 x4] int32 (colibri_q8_h_k32): the two levels of hadd leave
 * the 4 rows' half-0 sums in the low 128 bits and their half-1 sums in the
 * high, so one vpmulld applies k for the 4 rows. */
static inline __m128i colibri_hsum4_k_epi32(__m256i s0, __m256i s1, __m256i s2, __m256i s3, __m256i kv) {
    __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(s0, s1), _mm256_hadd_epi32(s2, s3));
    h = _mm256_mullo_epi32(h, kv);
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* A Q8_H block's multipliers as 16 int16 lanes [k0 x8 | k1 x8]: vpmaddwd of the
 * vpmaddubsw pairs (lanes 0-7 from bytes 0-15, half 0) against it sums each
 * pair times its half's k. One 32-bit broadcast, one in-lane byte shuffle. */
static inline __m256i colibri_q8_h_k16(const colibri_block_q8_h *a) {
    int32_t k;
    memcpy(&k, a->k, sizeof k);
    return _mm256_shuffle_epi8(_mm256_set1_epi32(k), _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,
                                                                      2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3));
}

/* A Q8_H block's multipliers as 8 int32 lanes [k0 x4 | k1 x4] (colibri_hsum4_k_epi32). */
static inline __m256i colibri_q8_h_k32(const colibri_block_q8_h *a) {
    int32_t k;
    memcpy(&k, a->k, sizeof k);
    __m256i k01 = _mm256_cvtepi16_epi32(_mm_cvtsi32_si128(k));   /* [k0, k1, 0 ...] */
    return _mm256_permutevar8x32_epi32(k01, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
}

/* qs: [16] packed nibbles → [32] uint8 in element order (low nibbles, then
 * high): one broadcast load (no shuffle-port work), the upper half shifted
 * right by 4 within each 64-bit lane, then masked per byte. */
static inline __m256i colibri_unpack_nibbles(const uint8_t *qs) {
    __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    both = _mm256_srlv_epi64(both, _mm256_setr_epi64x(0, 0, 4, 4));
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

/* The 4 f16 values a..d as f32 (exact): packed in a general register first,
 * so that only one move reaches the vector unit. */
static inline __m128 colibri_f16x4_ps(uint16_t a, uint16_t b, uint16_t c, uint16_t d) {
    return _mm_cvtph_ps(_mm_cvtsi64_si128((long long)colibri_f16x4_u64(a, b, c, d)));
}

/* The 4 f16 values v of blocks p0..p3 as f32 (exact). */
#define COLIBRI_F16X4(p0, p1, p2, p3, v) colibri_f16x4_ps((p0)->v, (p1)->v, (p2)->v, (p3)->v)

/* Q4_1's offset term m_w_r * (d_a * (sum_0 + sum_1)) added to v (lanes = rows); others: v. */
#define COLIBRI_NO_OFFSET(v, w0, w1, w2, w3, a) (v)
#define COLIBRI_Q4_1_OFFSET(v, w0, w1, w2, w3, a)                     \
    _mm_add_ps((v), _mm_mul_ps(COLIBRI_F16X4(w0, w1, w2, w3, m),      \
                               _mm_set1_ps((a)->d * (float)((a)->sum[0] + (a)->sum[1]))))

/* NAME##_tokens(w, ahead, xv, x_stride, n, T, out) of a 4-row core of 32-element WBLOCK
 * rows that takes blocks two at a time: NAME##_step(w0, w1, w2, w3, xv, x_stride, T, b,
 * pair, ahead, acc) adds blocks b, b + 1 (pair 1) or b alone (pair 0: an odd last block) to
 * acc[0..T), the 4 rows of each token (x86_avx512/dot_quant.c, x86_avx512/dot_blocks.c). */
#define COLIBRI_X86_PAIR_TOKENS(NAME, WBLOCK)                                                           \
    static inline __attribute__((always_inline)) void NAME##_tokens(                                    \
        const char *const w[4], const char *ahead, const void *xv, int64_t x_stride, int64_t n, const int T, \
        float *out) {                                                                                   \
        const WBLOCK *w0 = (const WBLOCK *)w[0], *w1 = (const WBLOCK *)w[1];                            \
        const WBLOCK *w2 = (const WBLOCK *)w[2], *w3 = (const WBLOCK *)w[3];                            \
        __m128 acc[COLIBRI_FEW_TOKENS];   /* acc: [token] 4 rows */                                     \
        for (int t = 0; t < T; t++) acc[t] = _mm_setzero_ps();                                          \
        int64_t nb = n / COLIBRI_QK, b = 0;                                                             \
        for (; b + 2 <= nb; b += 2) NAME##_step(w0, w1, w2, w3, (const char *)xv, x_stride, T, b, 1, ahead, acc); \
        if (b < nb) NAME##_step(w0, w1, w2, w3, (const char *)xv, x_stride, T, b, 0, ahead, acc);   /* odd last */ \
        for (int t = 0; t < T; t++) _mm_storeu_ps(out + 4 * t, acc[t]);                                 \
    }

/* NAME##_tokens: the core against T activation rows (xv, xv + x_stride, ...;
 * out[token * 4 + row]), each block's 4 weight vectors PREP'd once for all T
 * tokens, each token's lanes the one-token arithmetic above; always inlined
 * into NAME (one token: dot_rows' core) and NAME##_t1 .. _t4 (gemm_few's), so
 * T is a constant. */
#define COLIBRI_X86_BLOCK_CORE(NAME, WBLOCK, KV, SHARED, PREP, MAC, HSUM, OFFSET)         \
    static inline __attribute__((always_inline)) void NAME##_tokens(                        \
        const char *const w[4], const char *ahead, const void *xv, int64_t x_stride,        \
        int64_t n, const int T, float *out) {                                               \
        const WBLOCK *w0 = (const WBLOCK *)w[0], *w1 = (const WBLOCK *)w[1];                \
        const WBLOCK *w2 = (const WBLOCK *)w[2], *w3 = (const WBLOCK *)w[3];                \
        __m128 acc[COLIBRI_FEW_TOKENS];                          /* acc: [token] 4 rows */  \
        for (int t = 0; t < T; t++) acc[t] = _mm_setzero_ps();                              \
        for (int64_t b = 0; b < n / COLIBRI_QK; b++) {                                      \
            COLIBRI_PREFETCH_SPAN(ahead + 4 * b * (int64_t)sizeof(WBLOCK), 4 * sizeof(WBLOCK)); \
            __m256i p0 = PREP(&w0[b]), p1 = PREP(&w1[b]), p2 = PREP(&w2[b]), p3 = PREP(&w3[b]); \
            _Pragma("GCC unroll 4")                                                         \
            for (int t = 0; t < T; t++) {                                                   \
                const colibri_block_q8_h *a =                                               \
                    (const colibri_block_q8_h *)((const char *)xv + t * x_stride) + b;      \
                __m256i av = _mm256_loadu_si256((const __m256i *)a->qs);                    \
                __m256i kv = KV(a);                                                         \
                __m256i shared = SHARED(av, kv);                                            \
                __m128i isum = HSUM(MAC(p0, av, kv, shared), MAC(p1, av, kv, shared),       \
                                    MAC(p2, av, kv, shared), MAC(p3, av, kv, shared), kv);  \
                __m128 scale = _mm_mul_ps(COLIBRI_F16X4(&w0[b], &w1[b], &w2[b], &w3[b], d), \
                                          _mm_set1_ps(a->d));                               \
                __m128 v = _mm_mul_ps(_mm_cvtepi32_ps(isum), scale);                        \
                acc[t] = _mm_add_ps(acc[t], OFFSET(v, &w0[b], &w1[b], &w2[b], &w3[b], a));  \
            }                                                                               \
        }                                                                                   \
        for (int t = 0; t < T; t++) _mm_storeu_ps(out + 4 * t, acc[t]);                     \
    }                                                                                       \
    COLIBRI_TOKEN_CORES(NAME)

/* The dot_rows and gemm_few kernels of one block type for one ISA (the multi-token gemm
 * kernels are the row panels of gemm_panel.h and x86_avx512/gemm_quant.c). */
#define COLIBRI_X86_BLOCK_KERNELS(TYPE, ISA, WBLOCK, KV, SHARED, PREP, MAC, HSUM, OFFSET)             \
    COLIBRI_X86_BLOCK_CORE(colibri_dot4_##TYPE##_##ISA, WBLOCK, KV, SHARED, PREP, MAC, HSUM, OFFSET)    \
    COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_##TYPE##_##ISA, colibri_dot4_##TYPE##_##ISA)              \
    COLIBRI_GEMM_FEW_DEFINE(colibri_gemm_few_##TYPE##_##ISA, colibri_dot4_##TYPE##_##ISA)

#endif /* COLIBRI_X86_BLOCK_CORE_H */
