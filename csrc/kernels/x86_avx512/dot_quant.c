/*
 * x86_avx512/dot_quant.c — Q8_0 / Q4_0 / Q4_1 × Q8_H with AVX-512
 * VNNI (vpdpbusd: unsigned × signed bytes summed in groups of 4 straight into
 * int32, no saturation), 4 rows at a time: Q8_0 on 256-bit vectors through
 * ../x86_avx2/block_core.h, Q4_0 / Q4_1 two blocks per 512-bit step (below).
 * Signed weights are made unsigned by an offset whose correction (offset ·
 * sum a) is computed once per activation block and is the accumulator's
 * starting value; the Q8_H multipliers k apply to the 4 rows' half sums at
 * once in the reduction. Bitwise equal to quant_dot.c.
 */
#include "../x86_avx2/block_core.h"

/* -(c · sum a) per lane: the starting value that removes an offset c. */
static inline __m256i colibri_neg_offset(__m256i av, char c) {
    __m256i sum = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(c), av);
    return _mm256_sub_epi32(_mm256_setzero_si256(), sum);
}

static inline __m256i colibri_shared_q8_0(__m256i av, __m256i kv) {
    (void)kv;
    return colibri_neg_offset(av, (char)0x80);
}

/* Q8_0: w + 128 = w ^ 0x80 as uint8; sum (w + 128)·a - 128·sum a. */
static inline __m256i colibri_prep_q8_0(const colibri_block_q8_0 *w) {
    return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)w->qs), _mm256_set1_epi8((char)0x80));
}

/* shared + sum of the unsigned weight bytes times the signed activation bytes. */
static inline __m256i colibri_mac(__m256i wu, __m256i av, __m256i kv, __m256i shared) {
    (void)kv;
    return _mm256_dpbusd_epi32(shared, wu, av);
}

/* ---- Q4_0 / Q4_1: two blocks per 512-bit step ---------------------------------
 * The nibble types are compute-bound on one core (unpacking, then reducing 8
 * lanes to each row's block sum), so they take blocks b and b+1 together:
 * the activation vector holds both blocks' 32 bytes, each row's vector both
 * blocks' unpacked nibbles (128-bit lanes: b low, b high, b+1 low, b+1 high),
 * and one unpack-and-add tree reduces the 4 rows' vectors to the 8 exact
 * block sums at once — half the reduction work per block of the 256-bit
 * core. The float steps stay one block at a time, in order; an odd last
 * block runs alone with its partner's lanes zero and unused. */

/* Row r's unpacked nibbles of blocks b (lanes 0-1) and b+1 (lanes 2-3; zero
 * when pair is 0). */
static inline __m512i colibri_nibbles2(const uint8_t *qs_b, const uint8_t *qs_b1, int pair) {
    __m512i v = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)qs_b));
    v = pair ? _mm512_mask_broadcast_i32x4(v, 0xff00, _mm_loadu_si128((const __m128i *)qs_b1))
             : _mm512_maskz_mov_epi32(0x00ff, v);
    v = _mm512_srlv_epi64(v, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4));
    return _mm512_and_si512(v, _mm512_set1_epi8(0x0f));
}

/* The multipliers of blocks b and b1 as 16 int32 lanes [b's k[0] x4, b's k[1] x4, b1's k[0] x4,
 * b1's k[1] x4], one per 128-bit lane of colibri_hsum4x2_epi32's sums. */
static inline __m512i colibri_q8_h_k32x2(const colibri_block_q8_h *a, const colibri_block_q8_h *a1) {
    int32_t k, k1;
    memcpy(&k, a->k, sizeof k);
    memcpy(&k1, a1->k, sizeof k1);
    __m128i k4 = _mm_cvtepi16_epi32(_mm_insert_epi32(_mm_cvtsi32_si128(k), k1, 1));   /* [b: k0, k1, b1: k0, k1] */
    return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                                    _mm512_castsi128_si512(k4));
}

/* The 8 exact block sums k0·I_0 + k1·I_1 of s0..s3 (lanes 0-3 half 0 and 4-7 half 1 of
 * block b, 8-15 the same of block b+1): [r0..r3 of b, r0..r3 of b+1]. After two
 * unpack-and-add levels each 128-bit lane holds the 4 rows' sums of one half-block, so
 * one vpmulld by kv (colibri_q8_h_k32x2) applies every multiplier of both blocks. */
static inline __m256i colibri_hsum4x2_epi32(__m512i s0, __m512i s1, __m512i s2, __m512i s3, __m512i kv) {
    __m512i t01 = _mm512_add_epi32(_mm512_unpacklo_epi32(s0, s1), _mm512_unpackhi_epi32(s0, s1));
    __m512i t23 = _mm512_add_epi32(_mm512_unpacklo_epi32(s2, s3), _mm512_unpackhi_epi32(s2, s3));
    __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi64(t01, t23), _mm512_unpackhi_epi64(t01, t23));
    u = _mm512_mullo_epi32(u, kv);
    u = _mm512_add_epi32(u, _mm512_shuffle_i32x4(u, u, _MM_SHUFFLE(2, 3, 0, 1)));   /* lanes 0, 2: totals */
    return _mm512_castsi512_si256(_mm512_shuffle_i32x4(u, u, _MM_SHUFFLE(2, 0, 2, 0)));
}

/* The f16 values packed in lo (lanes 0-3) and hi (lanes 4-7) as 8 floats
 * (exact): two moves and one conversion reach the vector unit. */
static inline __m256 colibri_f16x8_ps(uint64_t lo, uint64_t hi) {
    return _mm256_cvtph_ps(_mm_insert_epi64(_mm_cvtsi64_si128((long long)lo), (long long)hi, 1));
}

/* The f16 field v of rows 0..3's blocks b and b1 as 8 floats [b: r0..r3, b1: r0..r3],
 * each block's four packed in a general register (eight 16-bit inserts into a
 * vector measured 3-7% slower: the shuffle unit is the busy one here). */
#define COLIBRI_F16X8(v, b, b1)                                                                    \
    colibri_f16x8_ps(colibri_f16x4_u64(w0[b].v, w1[b].v, w2[b].v, w3[b].v),                        \
                     colibri_f16x4_u64(w0[b1].v, w1[b1].v, w2[b1].v, w3[b1].v))

/* [x x4, y x4] for the floats x and y (an activation value of blocks b and b1). */
#define COLIBRI_F32_HALVES(x, y) _mm256_setr_m128(_mm_set1_ps(x), _mm_set1_ps(y))

/* Q4_1's offset terms of both blocks (rows in lanes 0-3 for b, 4-7 for b1): m_w * (d_a * (sum_0 + sum_1)). */
/* WM2: the weights' m of both blocks (Q4_1; Q4_0: none), read once a step for every token. */
#define COLIBRI_NO_M2(b, b1) _mm256_setzero_ps()
#define COLIBRI_Q4_1_M2(b, b1) COLIBRI_F16X8(m, b, b1)
#define COLIBRI_NO_OFFSET2(v, wm, b, b1) (v)
#define COLIBRI_Q4_1_OFFSET2(v, wm, b, b1)                                                        \
    _mm256_add_ps((v), _mm256_mul_ps((wm),                                                        \
                                     COLIBRI_F32_HALVES(a[b].d * (float)(a[b].sum[0] + a[b].sum[1]), \
                                                        a[b1].d * (float)(a[b1].sum[0] + a[b1].sum[1]))))

/* NAME: the 4-row core of nibble weights WBLOCK against Q8_H activations;
 * C: the weight offset (8 for Q4_0, 0 for Q4_1) whose -C·sum(a) starts each
 * block's sum; OFFSET2: the Q4_1 term (of the weights' m, WM2). Same contract as the 256-bit core.
 * NAME##_tokens runs it against T activation rows (xv, xv + x_stride, ...;
 * out[token * 4 + row]) with each step's nibbles unpacked once for all T (the
 * rows' d and m are read in the token loop: hoisted out of it, one token read
 * Q4_1 3-8% slower from DRAM, kernels_bench 4096 4096 1024 1); it is
 * always inlined into NAME (one token) and NAME##_t1 .. _t4 (gemm_few's cores),
 * so T is a constant. */
#define COLIBRI_AVX512_NIBBLE_CORE(NAME, WBLOCK, C, WM2, OFFSET2)                                  \
    /* acc[0..T) (4 rows each) plus the float steps of blocks b and b + 1 (pair 1), or of      \
     * block b alone (pair 0: its partner's lanes zero, unused). Always inlined, so that pair   \
     * is a constant and one byte offset addresses all four rows: a third fewer instructions   \
     * per step than a loop choosing b + 1 or b at run time, which spilled its addresses (in    \
     * cache, one thread: within a few percent, Q4_1 26-28 GB/s against 24-27). */               \
    static inline __attribute__((always_inline)) void NAME##_step(                                      \
        const WBLOCK *w0, const WBLOCK *w1, const WBLOCK *w2, const WBLOCK *w3, const char *xv,        \
        int64_t x_stride, const int T, int64_t b, const int pair, const char *ahead, __m128 *acc) {    \
        int64_t b1 = b + pair;                                                                          \
        COLIBRI_PREFETCH_SPAN(ahead + 4 * b * (int64_t)sizeof(WBLOCK), 8 * sizeof(WBLOCK));             \
        __m512i u0 = colibri_nibbles2(w0[b].qs, w0[b1].qs, pair), u1 = colibri_nibbles2(w1[b].qs, w1[b1].qs, pair); \
        __m512i u2 = colibri_nibbles2(w2[b].qs, w2[b1].qs, pair), u3 = colibri_nibbles2(w3[b].qs, w3[b1].qs, pair); \
        _Pragma("GCC unroll 4")                                                                         \
        for (int t = 0; t < T; t++) {                                                                   \
            const colibri_block_q8_h *a = (const colibri_block_q8_h *)(xv + t * x_stride);   /* a: [n/32] */ \
            __m512i av = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a[b].qs)), \
                                            _mm256_loadu_si256((const __m256i *)a[b1].qs), 1);          \
            __m512i start = _mm512_sub_epi32(_mm512_setzero_si512(),                                    \
                                             _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(C), av)); \
            __m256i isum = colibri_hsum4x2_epi32(_mm512_dpbusd_epi32(start, u0, av), _mm512_dpbusd_epi32(start, u1, av), \
                                                 _mm512_dpbusd_epi32(start, u2, av), _mm512_dpbusd_epi32(start, u3, av), \
                                                 colibri_q8_h_k32x2(&a[b], &a[b1]));                   \
            __m256 scale = _mm256_mul_ps(COLIBRI_F16X8(d, b, b1), COLIBRI_F32_HALVES(a[b].d, a[b1].d));                      \
            __m256 v = OFFSET2(_mm256_mul_ps(_mm256_cvtepi32_ps(isum), scale), WM2(b, b1), b, b1);                   \
            acc[t] = _mm_add_ps(acc[t], _mm256_castps256_ps128(v));                                     \
            if (pair) acc[t] = _mm_add_ps(acc[t], _mm256_extractf128_ps(v, 1));                         \
        }                                                                                               \
    }                                                                                                   \
    COLIBRI_X86_PAIR_TOKENS(NAME, WBLOCK)                                                              \
    COLIBRI_TOKEN_CORES(NAME)

/* The one-token kernels; the multi-token ones are gemm_quant.c's. */
COLIBRI_X86_BLOCK_CORE(colibri_dot4_q8_0_avx512, colibri_block_q8_0, colibri_q8_h_k32, colibri_shared_q8_0,
                       colibri_prep_q8_0, colibri_mac, colibri_hsum4_k_epi32, COLIBRI_NO_OFFSET)
COLIBRI_AVX512_NIBBLE_CORE(colibri_dot4_q4_0_avx512, colibri_block_q4_0, 8, COLIBRI_NO_M2, COLIBRI_NO_OFFSET2)
COLIBRI_AVX512_NIBBLE_CORE(colibri_dot4_q4_1_avx512, colibri_block_q4_1, 0, COLIBRI_Q4_1_M2, COLIBRI_Q4_1_OFFSET2)
COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_q8_0_avx512, colibri_dot4_q8_0_avx512)
COLIBRI_GEMM_FEW_DEFINE(colibri_gemm_few_q8_0_avx512, colibri_dot4_q8_0_avx512)
COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_q4_0_avx512, colibri_dot4_q4_0_avx512)
COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_q4_1_avx512, colibri_dot4_q4_1_avx512)
COLIBRI_GEMM_FEW_DEFINE(colibri_gemm_few_q4_0_avx512, colibri_dot4_q4_0_avx512)
COLIBRI_GEMM_FEW_DEFINE(colibri_gemm_few_q4_1_avx512, colibri_dot4_q4_1_avx512)
