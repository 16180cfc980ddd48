/*
 * x86_avx512/dot_blocks.c — the decode kernels (dot_rows) and few-token
 * kernels (gemm_few) of the types of quant_blocks.h with AVX-512 VNNI: 4 rows
 * at a time (8 for Q4_K, Q5_K and IQ4_XS: colibri_blocks_step8), two groups of
 * 32 elements per 512-bit step, bitwise equal to quant_dot_blocks.c.
 *
 * Each step: every row's quants of the two groups as 64 unsigned bytes u
 * (q = u - C, x86_avx2/blocks_unpack.h), one vpdpbusd each against the two
 * activation blocks (Q8_H for Q5_0 / Q5_1 / IQ4_NL, Q8_S for the others),
 * then one reduction of the 4 rows' vectors down to the sum of each 128-bit
 * lane, which is one half (16 quants) of a group: 16 int32, [group g: h0
 * r0..r3, h1 r0..r3 | group g': h0, h1]. Q8_H's multipliers k_h (one
 * vpmulld), the offset C·A_h (A_h the activation's stored half sums, which
 * carry k_h), the per-half integer scales S_h (one vpmulld) and the mins'
 * M_h·A_h all apply in that layout, exactly;
 * the two halves of each group are then added, and the reference's float
 * step runs lane-wise, group g before g':
 *   acc_r += (float)isum * (D_r * d_a)   [ - (float)msum * (DMIN_r * d_a) ]
 * The 256-element types take a super-block's 4 pairs of groups in turn, its
 * scales unpacked once for the 4 rows (colibri_rows_by_half); the
 * 32-element types take blocks b, b + 1 as the pair (an odd last block runs
 * alone, its partner's lanes unused).
 */
#include "../x86_avx2/block_core.h"   /* COLIBRI_X86_PAIR_TOKENS */
#include "blocks_quants.h"

/* ---- the shared step ------------------------------------------------------------------- */

/* Lane L (128 bits) of the result: the sums of lane L of s0..s3, [r0, r1, r2, r3]. */
static inline __m512i colibri_rows_halves(__m512i s0, __m512i s1, __m512i s2, __m512i s3) {
    __m512i t01 = _mm512_add_epi32(_mm512_unpacklo_epi32(s0, s1), _mm512_unpackhi_epi32(s0, s1));
    __m512i t23 = _mm512_add_epi32(_mm512_unpacklo_epi32(s2, s3), _mm512_unpackhi_epi32(s2, s3));
    return _mm512_add_epi32(_mm512_unpacklo_epi64(t01, t23), _mm512_unpackhi_epi64(t01, t23));
}

/* [lane 0 + lane 1, lane 2 + lane 3]: each group's two halves added, [g: r0..r3, g': r0..r3]. */
static inline __m256i colibri_fold_halves(__m512i u) {
    u = _mm512_add_epi32(u, _mm512_shuffle_i32x4(u, u, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm512_castsi512_si256(_mm512_shuffle_i32x4(u, u, _MM_SHUFFLE(2, 0, 2, 0)));
}

/* Two activation blocks' per-half values v0[2], v1[2] (their half sums A_h, Q8_H's
 * multipliers k_h) in colibri_rows_halves' layout: each repeated for the 4 rows. */
static inline __m512i colibri_act_halves(const int16_t v0[2], const int16_t v1[2]) {
    uint32_t s0, s1;
    memcpy(&s0, v0, sizeof s0);
    memcpy(&s1, v1, sizeof s1);
    __m128i v = _mm_cvtepi16_epi32(_mm_cvtsi64_si128((long long)((uint64_t)s1 << 32 | s0)));
    return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                                    _mm512_castsi128_si512(v));
}

/* [Σa of a0 x4, Σa of a1 x4]: two activation blocks' group sums (sum0, sum1: their half
 * sums), each repeated for the 4 rows. */
static inline __m256i colibri_act_groups(const int16_t sum0[2], const int16_t sum1[2]) {
    uint32_t s0, s1;
    memcpy(&s0, sum0, sizeof s0);
    memcpy(&s1, sum1, sizeof s1);
    __m128i v = _mm_cvtepi16_epi32(_mm_cvtsi64_si128((long long)((uint64_t)s1 << 32 | s0)));
    return _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(_mm_hadd_epi32(v, v)),
                                       _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
}

/* Field f of the activation block at a: Q8_H's (q8h) or Q8_S's. */
#define COLIBRI_ACT(a, q8h, f) ((q8h) ? ((const colibri_block_q8_h *)(a))->f : ((const colibri_block_q8_s *)(a))->f)

/* acc (4 rows) plus the float steps of groups g (activation a0) and g' (a1; pair 0: g
 * only), Q8_H (q8h: their k_h times each half's sum first) or Q8_S activation blocks.
 * u0..u3: the rows' 64 unsigned quant bytes of g, g'; c_shift: log2 of the
 * quants' offset C (-1: none); s_at: where the scales S apply (COLIBRI_PER_HALF: S16
 * in colibri_rows_halves' layout, or COLIBRI_NONE; the types with a scale a group take
 * colibri_blocks_step8); m_at: where the mins M apply (COLIBRI_PER_HALF: M16;
 * COLIBRI_PER_GROUP: M8, [g: r0..r3, g': r0..r3]); D, DM: [g: r0..r3, g': r0..r3]
 * block scales.
 * Every integer product here is exact, and so are the float products of an integer
 * sum and a scale (both below 2^24, and so is their product): the reference's
 * (float)(S * sum) is (float)S * (float)sum. */
static inline __attribute__((always_inline)) __m128 colibri_blocks_step(
    __m512i u0, __m512i u1, __m512i u2, __m512i u3, const void *a0, const void *a1, const int q8h,
    const int c_shift, const int s_at, __m512i S16, const int m_at, __m512i M16, __m256i M8, __m256 D,
    __m256 DM, const int pair, __m128 acc) {
    __m512i av = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)COLIBRI_ACT(a0, q8h, qs))),
                                    _mm256_loadu_si256((const __m256i *)COLIBRI_ACT(a1, q8h, qs)), 1);
    const int16_t *sum0 = COLIBRI_ACT(a0, q8h, sum), *sum1 = COLIBRI_ACT(a1, q8h, sum);
    __m512i z = _mm512_setzero_si512();
    __m512i h = colibri_rows_halves(_mm512_dpbusd_epi32(z, u0, av), _mm512_dpbusd_epi32(z, u1, av),
                                    _mm512_dpbusd_epi32(z, u2, av), _mm512_dpbusd_epi32(z, u3, av));
    if (q8h) {
        h = _mm512_mullo_epi32(h, colibri_act_halves(((const colibri_block_q8_h *)a0)->k,
                                                     ((const colibri_block_q8_h *)a1)->k));
    }
    __m512i A = c_shift >= 0 || m_at == COLIBRI_PER_HALF ? colibri_act_halves(sum0, sum1) : z;
    if (c_shift >= 0) h = _mm512_sub_epi32(h, _mm512_sll_epi32(A, _mm_cvtsi32_si128(c_shift)));
    if (s_at == COLIBRI_PER_HALF) h = _mm512_mullo_epi32(h, S16);
    __m256 isum = _mm256_cvtepi32_ps(colibri_fold_halves(h));
    __m256 da = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_set1_ps(COLIBRI_ACT(a0, q8h, d))),
                                     _mm_set1_ps(COLIBRI_ACT(a1, q8h, d)), 1);
    __m256 v = _mm256_mul_ps(isum, _mm256_mul_ps(D, da));
    if (m_at != COLIBRI_NONE) {
        __m256 msum = m_at == COLIBRI_PER_HALF
                          ? _mm256_cvtepi32_ps(colibri_fold_halves(_mm512_mullo_epi32(M16, A)))
                          : _mm256_mul_ps(_mm256_cvtepi32_ps(M8), _mm256_cvtepi32_ps(colibri_act_groups(sum0, sum1)));
        v = _mm256_sub_ps(v, _mm256_mul_ps(msum, _mm256_mul_ps(DM, da)));
    }
    acc = _mm_add_ps(acc, _mm256_castps256_ps128(v));
    return pair ? _mm_add_ps(acc, _mm256_extractf128_ps(v, 1)) : acc;
}

/* [x for rows, x for rows]: the same 4 values for both groups of a step. */
static inline __m256 colibri_twice(__m128 x) { return _mm256_insertf128_ps(_mm256_castps128_ps256(x), x, 1); }

/* ---- super-block headers of 4 rows ----------------------------------------------------
 * Each fills D, DM ([4] f32: d and dmin of rows 0..3) and tab: the integer scales
 * and mins of the 4 rows laid out for colibri_blocks_step: per group (S at 0..31,
 * M at 32..63, group g row r at byte 4g + r) or per half (S at 0..63, M at 64..127,
 * half h row r at byte 16 (h/4) + 4 (h%4) + r). */

/* Q4_K / Q5_K, whose first 16 bytes are {f16 d, dmin; u8 scales[12]}: all four rows at
 * once, colibri_k_scale_min's bit work on each row's 128-bit lane, then one
 * transpose (vpermq, vpshufb, vpermw) to the per-group layout. */
static inline void colibri_k_headers(const void *b0, const void *b1, const void *b2, const void *b3, __m128 *D,
                                     __m128 *DM, int8_t tab[128]) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)b0));
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)b1), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)b2), 2);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)b3), 3);
    __m128i dd = _mm512_castsi512_si128(_mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0,
                                                                                    0, 0, 0, 0), v));
    *D = _mm_cvtph_ps(_mm_cvtepi32_epi16(dd));                          /* d | dmin << 16 per row */
    *DM = _mm_cvtph_ps(_mm_cvtepi32_epi16(_mm_srli_epi32(dd, 16)));
    /* per lane: dwords a, b, c = scales[0..3], [4..7], [8..11] → [sc 0..3, sc 4..7, m 0..3, m 4..7] */
    __m512i x = _mm512_shuffle_epi32(v, _MM_SHUFFLE(3, 2, 3, 1));   /* [a, c, b, c] */
    __m512i y = _mm512_shuffle_epi32(v, _MM_SHUFFLE(2, 2, 1, 1));   /* [a, a, b, b] */
    x = _mm512_and_si512(_mm512_srlv_epi32(x, _mm512_set4_epi32(4, 0, 0, 0)),
                         _mm512_set4_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f));
    y = _mm512_and_si512(_mm512_srlv_epi32(y, _mm512_set4_epi32(2, 0, 2, 0)),
                         _mm512_set4_epi32(0x30303030, 0, 0x30303030, 0));
    __m512i sm = _mm512_or_si512(x, y);   /* lane r: row r's sc[8] then m[8] */
    sm = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7), sm);   /* [sc r0..r3 | m r0..r3] */
    sm = _mm512_shuffle_epi8(sm, _mm512_broadcast_i32x4(_mm_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6,
                                                                      14, 7, 15)));
    sm = _mm512_permutexvar_epi16(_mm512_setr_epi32(0x00080000, 0x00090001, 0x000a0002, 0x000b0003, 0x000c0004,
                                                    0x000d0005, 0x000e0006, 0x000f0007, 0x00180010, 0x00190011,
                                                    0x001a0012, 0x001b0013, 0x001c0014, 0x001d0015, 0x001e0016,
                                                    0x001f0017), sm);
    _mm512_storeu_si512((void *)tab, sm);
}
#define COLIBRI_Q4_K_HEADERS colibri_k_headers
#define COLIBRI_Q5_K_HEADERS colibri_k_headers

/* [r][g] bytes (row r's 8 values in qword r) → [g][r] (group g row r at byte 4g + r). */
static inline __m256i colibri_rows_by_group(__m256i v) {
    v = _mm256_shuffle_epi8(v, _mm256_broadcastsi128_si256(_mm_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14,
                                                                         7, 15)));
    return _mm256_permutexvar_epi16(_mm256_setr_epi16(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15), v);
}

/* IQ4_XS, whose first 8 bytes are {f16 d; u8 scales_h[2]; u8 scales_l[4]}: the 4 rows in
 * the qwords of one vector; ls_s = nibble s%2 of scales_l[s/2] | (scales_h >> 2s & 3) << 4. */
static inline void colibri_iq4_xs_headers(const void *b0, const void *b1, const void *b2, const void *b3, __m128 *D,
                                          __m128 *DM, int8_t tab[128]) {
    (void)DM;
    uint64_t h[4];
    memcpy(&h[0], b0, 8), memcpy(&h[1], b1, 8), memcpy(&h[2], b2, 8), memcpy(&h[3], b3, 8);
    __m256i v = _mm256_loadu_si256((const __m256i *)h);
    *D = _mm_cvtph_ps(_mm256_cvtepi64_epi16(v));
    const __mmask32 odd = 0xaaaaaaaau;
    __m256i x = _mm256_shuffle_epi8(v, _mm256_broadcastsi128_si256(_mm_setr_epi8(4, 4, 5, 5, 6, 6, 7, 7, 12, 12, 13, 13,
                                                                                 14, 14, 15, 15)));
    __m256i nib = _mm256_mask_blend_epi8(odd, x, _mm256_srli_epi16(x, 4));
    __m256i y = _mm256_shuffle_epi8(v, _mm256_broadcastsi128_si256(_mm_setr_epi8(2, 2, 2, 2, 3, 3, 3, 3, 10, 10, 10, 10,
                                                                                 11, 11, 11, 11)));
    __m256i hi = _mm256_mask_blend_epi8(odd, _mm256_srlv_epi16(y, _mm256_set1_epi32(0x00040000)),
                                        _mm256_srlv_epi16(y, _mm256_set1_epi32(0x00060002)));
    __m256i ls = _mm256_or_si256(_mm256_and_si256(nib, _mm256_set1_epi8(0x0f)),
                                 _mm256_slli_epi16(_mm256_and_si256(hi, _mm256_set1_epi8(0x03)), 4));
    _mm256_storeu_si256((__m256i *)tab, colibri_rows_by_group(_mm256_sub_epi8(ls, _mm256_set1_epi8(32))));
}

/* The other types: D (and DM) from the f16 fields at D_AT (DMIN_AT), per-half tables
 * of SCALES16 (MINS16) rows. */
#define COLIBRI_HALF_HEADERS(NAME, WBLOCK, D_AT, SCALES16, MINS16, DMIN_AT)                                     \
    static inline void NAME(const void *v0, const void *v1, const void *v2, const void *v3, __m128 *D, __m128 *DM, \
                            int8_t tab[128]) {                                                                  \
        const WBLOCK *b0 = (const WBLOCK *)v0, *b1 = (const WBLOCK *)v1, *b2 = (const WBLOCK *)v2;             \
        const WBLOCK *b3 = (const WBLOCK *)v3;                                                                  \
        __m128i t[4];                                                                                           \
        *D = colibri_f16x4_at(b0, b1, b2, b3, D_AT);                                                            \
        colibri_rows_by_half(SCALES16(b0), SCALES16(b1), SCALES16(b2), SCALES16(b3), t);                        \
        for (int k = 0; k < 4; k++) _mm_storeu_si128((__m128i *)(tab + 16 * k), t[k]);                         \
        if (DMIN_AT >= 0) {                                                                                     \
            *DM = colibri_f16x4_at(b0, b1, b2, b3, DMIN_AT);                                                    \
            colibri_rows_by_half(MINS16(b0), MINS16(b1), MINS16(b2), MINS16(b3), t);                            \
            for (int k = 0; k < 4; k++) _mm_storeu_si128((__m128i *)(tab + 64 + 16 * k), t[k]);                 \
        }                                                                                                       \
    }
#define COLIBRI_NONE16(b) _mm_setzero_si128()
COLIBRI_HALF_HEADERS(colibri_q2_k_headers, colibri_block_q2_k, 80, colibri_q2_k_scales16, colibri_q2_k_mins16, 82)
COLIBRI_HALF_HEADERS(colibri_q3_k_headers, colibri_block_q3_k, 108, colibri_q3_k_scales16, COLIBRI_NONE16, -1)
COLIBRI_HALF_HEADERS(colibri_q6_k_headers, colibri_block_q6_k, 208, colibri_q6_k_scales16, COLIBRI_NONE16, -1)

/* How far beyond the sweep 16 KiB ahead (isa.h) the K-type cores also prefetch into L2.
 * One thread's sweep alone read well under the plain read loop's 16.5 GB/s on the AMX
 * Xeon VM (kernels_bench 4096 4096 2048 1, one thread from DRAM, 2 alternating runs,
 * GB/s: Q4_K 10.0-10.2 -> 10.4, Q5_K 9.7-9.9 -> 10.4-10.5, Q6_K 10.0-10.3 -> 11.3; 64
 * KiB measured the same; the L2 prefetch alone, without the sweep into L1, 0-4% less).
 * colibri bench mixtral-small, 2 threads, decode tok/s in 3 alternating pairs: Q4_K_M
 * 116-132 -> 128-137 (faster in 2), Q6_K 101-105 -> 114-119 (79-83% of the probed
 * bandwidth). The 32-element types' cores keep the sweep alone: the same L2 prefetch there
 * read Q8_0 +5% on one thread but Q4_0's decode 3% slower on two (7 pairs, in the noise). */
#define COLIBRI_K_FAR_BYTES 32768

/* NAME##_tokens: the 4-row core of the 256-element type WBLOCK with scales per half (Q2_K,
 * Q3_K, Q6_K) against T activation rows (xv, xv + x_stride, ...; out[token * 4 + row]):
 * quants by QUANTS2, unpacked once a step for all T tokens, offset 2^C_SHIFT (-1: none),
 * HEADERS' scales applied per half, mins at M_AT; each token's lanes exactly the one-token
 * arithmetic. Always inlined into NAME (one token: dot_rows' core) and NAME##_t1 .. _t4
 * (gemm_few's), so T is a constant. */
#define COLIBRI_AVX512_K_CORE(NAME, WBLOCK, QUANTS2, C_SHIFT, HEADERS, M_AT)                                   \
    static inline __attribute__((always_inline)) void NAME##_tokens(                                           \
        const char *const w[4], const char *ahead, const void *xv, int64_t x_stride, int64_t n, const int T,   \
        float *out) {                                                                                           \
        const WBLOCK *w0 = (const WBLOCK *)w[0], *w1 = (const WBLOCK *)w[1];                                    \
        const WBLOCK *w2 = (const WBLOCK *)w[2], *w3 = (const WBLOCK *)w[3];                                    \
        __m128 acc[COLIBRI_FEW_TOKENS];  /* acc: [token] 4 rows */                                              \
        int8_t tab[128];                 /* tab: the super-block's scales and mins, HEADERS' layout */           \
        for (int t = 0; t < T; t++) acc[t] = _mm_setzero_ps();                                                  \
        for (int64_t sb = 0; sb < n / COLIBRI_QK_K; sb++) {                                                     \
            const WBLOCK *b0 = &w0[sb], *b1 = &w1[sb], *b2 = &w2[sb], *b3 = &w3[sb];                            \
            __m128 d4, dm4 = _mm_setzero_ps();                                                                  \
            HEADERS(b0, b1, b2, b3, &d4, &dm4, tab);                                                            \
            __m256 D = colibri_twice(d4), DM = colibri_twice(dm4);                                              \
            _Pragma("GCC unroll 4")   /* constant p: immediate shifts and table offsets */                      \
            for (int p = 0; p < 4; p++) {                                                                       \
                __m512i S16 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(tab + 16 * p)));           \
                __m512i M16 = _mm512_setzero_si512();                                                           \
                if (M_AT == COLIBRI_PER_HALF) M16 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(tab + 64 + 16 * p))); \
                COLIBRI_PREFETCH_SPAN_FAR(ahead + (4 * sb + p) * (int64_t)sizeof(WBLOCK), sizeof(WBLOCK),      \
                                          COLIBRI_K_FAR_BYTES);                                                 \
                __m512i u0 = QUANTS2(b0, p), u1 = QUANTS2(b1, p), u2 = QUANTS2(b2, p), u3 = QUANTS2(b3, p);     \
                _Pragma("GCC unroll 4")                                                                         \
                for (int t = 0; t < T; t++) {                                                                   \
                    const colibri_block_q8_s *as =                                                              \
                        (const colibri_block_q8_s *)((const char *)xv + t * x_stride) + 8 * sb;   /* as: [8] */ \
                    acc[t] = colibri_blocks_step(u0, u1, u2, u3, &as[2 * p], &as[2 * p + 1], 0, C_SHIFT,           \
                                                 COLIBRI_PER_HALF, S16,                                         \
                                                 M_AT, M16, _mm256_setzero_si256(), D, DM, 1, acc[t]);          \
                }                                                                                               \
            }                                                                                                   \
        }                                                                                                       \
        for (int t = 0; t < T; t++) _mm_storeu_ps(out + 4 * t, acc[t]);                                         \
    }                                                                                                           \
    COLIBRI_TOKEN_CORES(NAME)

/* ---- 8 rows a step: the types with one scale a group ------------------------------------
 * Q4_K, Q5_K and IQ4_XS: colibri_blocks_step's arithmetic for each (row, group), for 8 rows
 * whose float step fills all 16 lanes, laid [g: rows 0-3, g': rows 0-3, g: rows 4-7, g':
 * rows 4-7] (the 8-row layout), so the per-step work on the activation (its scales, group
 * sums, offset) and the reduction's last fold are paid once for 8 rows. kernels_bench, AMX
 * Xeon VM, against the 4-row core (alternating runs): gemm_few in cache, GMAC/s at 2 / 4
 * tokens: Q4_K 37 -> 41-42 / 39 -> 51, Q5_K 33 -> 35-36 / 38-39 -> 45-46, IQ4_XS 36-37 ->
 * 41 / 45-47 -> 55-56; one token in cache Q4_K 16.8-17.7 -> 18.4-19.1 GB/s; from DRAM
 * (one thread) level to -4% (Q4_K 10.9 -> 11.0-11.2, Q5_K 10.6-10.9 -> 10.3-10.4). In the
 * engine (mixtral-small Q4_K_M, 2 threads): decode level (4 pairs), serve_steps' 16 decode
 * tokens 63.7 -> 59.4 ms, 1 token + an 8-token chunk 37.1 -> 33.9 ms. The types
 * with scales per half (Q2_K, Q3_K, Q6_K) keep the 4-row core: their per-half vpmulld and
 * larger unpacks left Q6_K 20-30% slower in cache with 8 rows. */

/* [g: A r0..r3, g': A r0..r3, g: B r0..r3, g': B r0..r3] from two colibri_rows_halves results
 * (hA: rows 0-3, hB: rows 4-7): each group's two halves added. */
static inline __m512i colibri_fold_halves8(__m512i hA, __m512i hB) {
    return _mm512_add_epi32(_mm512_shuffle_i32x4(hA, hB, _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i32x4(hA, hB, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* [x0 x4, x1 x4, x0 x4, x1 x4]: a per-group value of groups g, g' in the 8-row layout. */
static inline __m512 colibri_groups8_ps(float x0, float x1) {
    return _mm512_mask_blend_ps(0xf0f0, _mm512_set1_ps(x0), _mm512_set1_ps(x1));
}

/* The 8-row layout's 16 int32 from two 4-row tables' 8 bytes at tA, tB ([g: r0..r3, g': r0..r3] each). */
static inline __m512i colibri_tab8(const int8_t *tA, const int8_t *tB) {
    return _mm512_cvtepi8_epi32(_mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)tA),
                                                   _mm_loadl_epi64((const __m128i *)tB)));
}

/* [x, x] for rows 0-3's values xA and rows 4-7's xB: a per-row value in the 8-row layout. */
static inline __m512 colibri_rows8_ps(__m128 xA, __m128 xB) {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(colibri_twice(xA))),
                                               _mm256_castps_pd(colibri_twice(xB)), 1));
}

/* acc (rows 0-7) plus the float steps of groups g (activation a0) and g' (a1) of 8 rows,
 * lane for lane colibri_blocks_step's with Q8_S activations and COLIBRI_PER_GROUP scales.
 * u[8]: the rows' quants of g, g'; c_shift: log2 of their offset C (-1: none); S16, M16:
 * the scales and mins (has_m: 1) and D, DM the block scales, in the 8-row layout. */
static inline __attribute__((always_inline)) __m256 colibri_blocks_step8(
    const __m512i u[8], const colibri_block_q8_s *a0, const colibri_block_q8_s *a1, const int c_shift, __m512i S16,
    const int has_m, __m512i M16, __m512 D, __m512 DM, __m256 acc) {
    __m512i av = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a0->qs)),
                                    _mm256_loadu_si256((const __m256i *)a1->qs), 1);
    __m512i z = _mm512_setzero_si512();
    __m512i hA = colibri_rows_halves(_mm512_dpbusd_epi32(z, u[0], av), _mm512_dpbusd_epi32(z, u[1], av),
                                     _mm512_dpbusd_epi32(z, u[2], av), _mm512_dpbusd_epi32(z, u[3], av));
    __m512i hB = colibri_rows_halves(_mm512_dpbusd_epi32(z, u[4], av), _mm512_dpbusd_epi32(z, u[5], av),
                                     _mm512_dpbusd_epi32(z, u[6], av), _mm512_dpbusd_epi32(z, u[7], av));
    if (c_shift >= 0) {
        __m512i CA = _mm512_sll_epi32(colibri_act_halves(a0->sum, a1->sum), _mm_cvtsi32_si128(c_shift));
        hA = _mm512_sub_epi32(hA, CA);
        hB = _mm512_sub_epi32(hB, CA);
    }
    __m512 isum = _mm512_mul_ps(_mm512_cvtepi32_ps(colibri_fold_halves8(hA, hB)), _mm512_cvtepi32_ps(S16));
    __m512 da = colibri_groups8_ps(a0->d, a1->d);
    __m512 v = _mm512_mul_ps(isum, _mm512_mul_ps(D, da));
    if (has_m) {
        __m512 msum = _mm512_mul_ps(_mm512_cvtepi32_ps(M16), colibri_groups8_ps((float)(a0->sum[0] + a0->sum[1]),
                                                                                (float)(a1->sum[0] + a1->sum[1])));
        v = _mm512_sub_ps(v, _mm512_mul_ps(msum, _mm512_mul_ps(DM, da)));
    }
    __m512i vi = _mm512_castps_si512(v);
    v = _mm512_castsi512_ps(_mm512_shuffle_i32x4(vi, vi, _MM_SHUFFLE(3, 1, 2, 0)));   /* [g: rows 0-7, g': rows 0-7] */
    acc = _mm256_add_ps(acc, _mm512_castps512_ps256(v));
    return _mm256_add_ps(acc, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

/* NAME##_tokens: COLIBRI_AVX512_K_CORE's core for 8 rows (w[8]; out[token * 8 + row]) of a
 * type with COLIBRI_PER_GROUP scales (HAS_M: and mins), HEADERS filling rows 0-3's and
 * rows 4-7's tables in turn; NAME, NAME##_t1 .. _t4 as there. */
#define COLIBRI_AVX512_K_CORE8(NAME, WBLOCK, QUANTS2, C_SHIFT, HEADERS, HAS_M)                                 \
    static inline __attribute__((always_inline)) void NAME##_tokens(                                           \
        const char *const w[8], const char *ahead, const void *xv, int64_t x_stride, int64_t n, const int T,   \
        float *out) {                                                                                           \
        __m256 acc[COLIBRI_FEW_TOKENS];  /* acc: [token] 8 rows */                                              \
        int8_t tab[2][128];              /* tab: rows 0-3's and 4-7's scales and mins, HEADERS' layout */        \
        for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_ps();                                               \
        for (int64_t sb = 0; sb < n / COLIBRI_QK_K; sb++) {                                                     \
            const WBLOCK *b[8];                                                                                 \
            for (int r = 0; r < 8; r++) b[r] = (const WBLOCK *)w[r] + sb;                                       \
            __m128 dA, dB, dmA = _mm_setzero_ps(), dmB = dmA;                                                   \
            HEADERS(b[0], b[1], b[2], b[3], &dA, &dmA, tab[0]);                                                 \
            HEADERS(b[4], b[5], b[6], b[7], &dB, &dmB, tab[1]);                                                 \
            __m512 D = colibri_rows8_ps(dA, dB), DM = colibri_rows8_ps(dmA, dmB);                               \
            _Pragma("GCC unroll 4")   /* constant p: immediate shifts and table offsets */                      \
            for (int p = 0; p < 4; p++) {                                                                       \
                __m512i S16 = colibri_tab8(tab[0] + 8 * p, tab[1] + 8 * p);                                     \
                __m512i M16 = HAS_M ? colibri_tab8(tab[0] + 32 + 8 * p, tab[1] + 32 + 8 * p) : S16;             \
                COLIBRI_PREFETCH_SPAN_FAR(ahead + (8 * sb + 2 * p) * (int64_t)sizeof(WBLOCK), 2 * sizeof(WBLOCK), \
                                          COLIBRI_K_FAR_BYTES);                                                 \
                __m512i u[8];                                                                                   \
                for (int r = 0; r < 8; r++) u[r] = QUANTS2(b[r], p);                                            \
                _Pragma("GCC unroll 4")                                                                         \
                for (int t = 0; t < T; t++) {                                                                   \
                    const colibri_block_q8_s *as =                                                              \
                        (const colibri_block_q8_s *)((const char *)xv + t * x_stride) + 8 * sb;   /* as: [8] */ \
                    acc[t] = colibri_blocks_step8(u, &as[2 * p], &as[2 * p + 1], C_SHIFT, S16, HAS_M, M16, D, DM, \
                                                  acc[t]);                                                      \
                }                                                                                               \
            }                                                                                                   \
        }                                                                                                       \
        for (int t = 0; t < T; t++) _mm256_storeu_ps(out + 8 * t, acc[t]);                                      \
    }                                                                                                           \
    COLIBRI_TOKEN_CORES_N(NAME, 8)

COLIBRI_AVX512_K_CORE(colibri_dot4_q2_k_avx512, colibri_block_q2_k, colibri_q2_k_quants2, -1, colibri_q2_k_headers,
                      COLIBRI_PER_HALF)
COLIBRI_AVX512_K_CORE(colibri_dot4_q3_k_avx512, colibri_block_q3_k, colibri_q3_k_quants2, 2, colibri_q3_k_headers,
                      COLIBRI_NONE)
COLIBRI_AVX512_K_CORE(colibri_dot4_q6_k_avx512, colibri_block_q6_k, colibri_q6_k_quants2, 5, colibri_q6_k_headers,
                      COLIBRI_NONE)
COLIBRI_AVX512_K_CORE8(colibri_dot8_q4_k_avx512, colibri_block_q4_k, colibri_q4_k_quants2, -1, COLIBRI_Q4_K_HEADERS, 1)
COLIBRI_AVX512_K_CORE8(colibri_dot8_q5_k_avx512, colibri_block_q5_k, colibri_q5_k_quants2, -1, COLIBRI_Q5_K_HEADERS, 1)
COLIBRI_AVX512_K_CORE8(colibri_dot8_iq4_xs_avx512, colibri_block_iq4_xs, colibri_iq4_xs_quants2, 7,
                       colibri_iq4_xs_headers, 0)

/* ---- the 32-element types: blocks b, b1 as the pair ---------------------------------------- */

/* [b: r0..r3, b1: r0..r3] block scales of the 4 rows. */
#define COLIBRI_F16_PAIR(AT) \
    _mm256_insertf128_ps(_mm256_castps128_ps256(colibri_f16x4_at(&w0[b], &w1[b], &w2[b], &w3[b], AT)), \
                         colibri_f16x4_at(&w0[b1], &w1[b1], &w2[b1], &w3[b1], AT), 1)
/* MXFP4's 2^(e - 128) (colibri_e8m0_half) of the 8 exponents, exactly. */
static inline __m256 colibri_e8m0_half8(__m256i e) {
    __m256i small = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    __m256i large = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(large, small, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e)));
}
#define COLIBRI_E8M0_PAIR                                                                                \
    colibri_e8m0_half8(_mm256_setr_epi32(w0[b].e, w1[b].e, w2[b].e, w3[b].e, w0[b1].e, w1[b1].e, w2[b1].e, \
                                         w3[b1].e))
#define COLIBRI_NO_PAIR _mm256_setzero_ps()
#define COLIBRI_NEG_M_PAIR _mm256_xor_ps(COLIBRI_F16_PAIR(2), _mm256_set1_ps(-0.0f))   /* Q5_1: DMIN = -m */

/* NAME: the 4-row core of the 32-element type WBLOCK against ABLOCK activations (Q8H: 1 for
 * colibri_block_q8_h, 0 for colibri_block_q8_s): quants by QUANTS2(block b, block b1), offset
 * 2^C_SHIFT, scales D8 ([b rows, b1 rows]), Q5_1's min form (HAS_M: M = 1) with DM8.
 * NAME##_tokens runs it against T activation rows (xv, xv + x_stride, ...; out[token * 4 +
 * row]), each step's quants and scales read once for all T; always inlined into NAME (one
 * token) and NAME##_t1 .. _t4 (gemm_few's), so T is a constant. */
#define COLIBRI_AVX512_PAIR_CORE(NAME, WBLOCK, ABLOCK, Q8H, QUANTS2, C_SHIFT, D8, HAS_M, DM8)             \
    static inline __attribute__((always_inline)) void NAME##_step(                                         \
        const WBLOCK *w0, const WBLOCK *w1, const WBLOCK *w2, const WBLOCK *w3, const char *xv,            \
        int64_t x_stride, const int T, int64_t b, const int pair, const char *ahead, __m128 *acc) {        \
        int64_t b1 = b + pair;                                                                             \
        COLIBRI_PREFETCH_SPAN(ahead + 4 * b * (int64_t)sizeof(WBLOCK), 8 * sizeof(WBLOCK));                \
        __m512i u0 = QUANTS2(&w0[b], &w0[b1]), u1 = QUANTS2(&w1[b], &w1[b1]);                             \
        __m512i u2 = QUANTS2(&w2[b], &w2[b1]), u3 = QUANTS2(&w3[b], &w3[b1]);                             \
        __m256 d8 = D8, dm8 = DM8;                                                                         \
        _Pragma("GCC unroll 4")                                                                            \
        for (int t = 0; t < T; t++) {                                                                      \
            const ABLOCK *a = (const ABLOCK *)(xv + t * x_stride);   /* a: [n/32] */                      \
            acc[t] = colibri_blocks_step(u0, u1, u2, u3, &a[b], &a[b1], Q8H, C_SHIFT, COLIBRI_NONE,        \
                                         _mm512_setzero_si512(),                                           \
                                         HAS_M ? COLIBRI_PER_GROUP : COLIBRI_NONE, _mm512_setzero_si512(), \
                                         _mm256_set1_epi32(1), d8, dm8, pair, acc[t]);                     \
        }                                                                                                  \
    }                                                                                                      \
    COLIBRI_X86_PAIR_TOKENS(NAME, WBLOCK)                                                              \
    COLIBRI_TOKEN_CORES(NAME)

COLIBRI_AVX512_PAIR_CORE(colibri_dot4_q5_0_avx512, colibri_block_q5_0, colibri_block_q8_h, 1, COLIBRI_Q5_0_QUANTS2, 4,
                         COLIBRI_F16_PAIR(0), 0, COLIBRI_NO_PAIR)
COLIBRI_AVX512_PAIR_CORE(colibri_dot4_q5_1_avx512, colibri_block_q5_1, colibri_block_q8_h, 1, COLIBRI_Q5_1_QUANTS2, -1,
                         COLIBRI_F16_PAIR(0), 1, COLIBRI_NEG_M_PAIR)
COLIBRI_AVX512_PAIR_CORE(colibri_dot4_iq4_nl_avx512, colibri_block_iq4_nl, colibri_block_q8_h, 1, COLIBRI_IQ4_NL_QUANTS2,
                         7, COLIBRI_F16_PAIR(0), 0, COLIBRI_NO_PAIR)
COLIBRI_AVX512_PAIR_CORE(colibri_dot4_mxfp4_avx512, colibri_block_mxfp4, colibri_block_q8_s, 0, COLIBRI_MXFP4_QUANTS2, 7,
                         COLIBRI_E8M0_PAIR, 0, COLIBRI_NO_PAIR)

#define COLIBRI_AVX512_BLOCK_DOT_ROWS(T) COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_##T##_avx512, colibri_dot4_##T##_avx512)
COLIBRI_AVX512_BLOCK_DOT_ROWS(q5_0)
COLIBRI_AVX512_BLOCK_DOT_ROWS(q5_1)
COLIBRI_AVX512_BLOCK_DOT_ROWS(q2_k)
COLIBRI_AVX512_BLOCK_DOT_ROWS(q3_k)
COLIBRI_AVX512_BLOCK_DOT_ROWS(q6_k)
COLIBRI_AVX512_BLOCK_DOT_ROWS(iq4_nl)
COLIBRI_AVX512_BLOCK_DOT_ROWS(mxfp4)

#define COLIBRI_AVX512_BLOCK_GEMM_FEW(T) COLIBRI_GEMM_FEW_DEFINE(colibri_gemm_few_##T##_avx512, colibri_dot4_##T##_avx512)
COLIBRI_AVX512_BLOCK_GEMM_FEW(q2_k)
COLIBRI_AVX512_BLOCK_GEMM_FEW(q3_k)
COLIBRI_AVX512_BLOCK_GEMM_FEW(q6_k)
COLIBRI_AVX512_BLOCK_GEMM_FEW(q5_0)
COLIBRI_AVX512_BLOCK_GEMM_FEW(q5_1)
COLIBRI_AVX512_BLOCK_GEMM_FEW(iq4_nl)
COLIBRI_AVX512_BLOCK_GEMM_FEW(mxfp4)

#define COLIBRI_AVX512_K8_KERNELS(T)                                                                    \
    COLIBRI_DOT_ROWS_N_DEFINE(colibri_dot_rows_##T##_avx512, colibri_dot8_##T##_avx512, 8)             \
    COLIBRI_GEMM_FEW_N_DEFINE(colibri_gemm_few_##T##_avx512, colibri_dot8_##T##_avx512, 8)
COLIBRI_AVX512_K8_KERNELS(q4_k)
COLIBRI_AVX512_K8_KERNELS(q5_k)
COLIBRI_AVX512_K8_KERNELS(iq4_xs)
