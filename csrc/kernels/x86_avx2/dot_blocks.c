/*
 * x86_avx2/dot_blocks.c — the decode kernels (dot_rows) of the types of
 * quant_blocks.h with AVX2: 4 rows at a time, bitwise equal to
 * quant_dot_blocks.c.
 *
 * The 32-element types, one group of 32 elements per step: every row's 32
 * quants as bytes, times the activation block (Q8_H for Q5_0 / Q5_1 / IQ4_NL,
 * Q8_S for MXFP4) by vpmaddubsw (unsigned u
 * with q = u - C, or, for the IQ4 tables, |kv| against sign(kv)·a; no pair
 * can saturate: |u| <= 63 or |kv| <= 127), then vpmaddwd into int32 sums of 4
 * products (against Q8_H's multipliers [k_0 x8 | k_1 x8] as the words, so
 * that each sum carries its half's k_h; ones for Q8_S), and two vphaddd that
 * reduce the 4 rows to [half 0: r0..r3 | half 1: r0..r3]. The offset C·A_h
 * (A_h the activation's stored half sums, which carry k_h) and the per-half
 * integer scales S_h (one vpmulld) apply in that layout, exactly; the halves
 * are added, and the reference's float step runs lane-wise:
 *   acc_r += (float)isum * (D_r * d_a)   [ - (float)msum * (DMIN_r * d_a) ]
 * groups in order. The 256-element types take two groups per step (their
 * section below): unpack-and-add reductions, scales and mins by vpmaddwd
 * against the activation's (A_0, A_1) pairs, the float step on 8 lanes.
 */
#include "block_core.h"
#include "blocks_quants.h"
#include "../isa.h"

/* [half 0: r0..r3 | half 1: r0..r3] from the 4 rows' int32 vectors (lanes 0-3: half 0). */
static inline __m256i colibri_rows_halves8(__m256i s0, __m256i s1, __m256i s2, __m256i s3) {
    return _mm256_hadd_epi32(_mm256_hadd_epi32(s0, s1), _mm256_hadd_epi32(s2, s3));
}

/* [v_0 x4 | v_1 x4]: an activation block's per-half values (its half sums A_h), each
 * repeated for the 4 rows. */
static inline __m256i colibri_act_halves8(const int16_t v[2]) {
    return _mm256_setr_m128i(_mm_set1_epi32(v[0]), _mm_set1_epi32(v[1]));
}

/* The 4 rows' int32 sums of 4 products of unsigned u (<= 127) with the activation bytes,
 * times the words of kk: [k0 x8 | k1 x8] for Q8_H (colibri_q8_h_k16: the pairs of bytes
 * 0-15 are half 0's), ones for Q8_S. */
static inline __m256i colibri_maddubs4(__m256i u, __m256i av, __m256i kk) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, av), kk);
}

/* The same for signed table values kv (|kv| <= 127): |kv| times sign(kv)·a. */
static inline __m256i colibri_maddubs4_signed(__m256i kv, __m256i av, __m256i kk) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(kv), _mm256_sign_epi8(av, kv)), kk);
}

/* acc (4 rows) plus the float step of one group. s0..s3: the rows' int32 product sums
 * (colibri_maddubs4, Q8_H's multipliers applied); d_a, sum: the activation block's scale
 * and half sums; c: the quants' offset (0: none); S8, M8: per-half scales and mins in
 * colibri_rows_halves8's layout (has_s, has_m); D4, DM4: the rows' block scales. */
static inline __attribute__((always_inline)) __m128 colibri_group_step(
    __m256i s0, __m256i s1, __m256i s2, __m256i s3, float d_a, const int16_t sum[2], const int c, const int has_s,
    __m256i S8, const int has_m, __m256i M8, __m128 D4, __m128 DM4, __m128 acc) {
    __m256i h = colibri_rows_halves8(s0, s1, s2, s3);
    __m256i A = c || has_m ? colibri_act_halves8(sum) : _mm256_setzero_si256();
    if (c) h = _mm256_sub_epi32(h, _mm256_mullo_epi32(A, _mm256_set1_epi32(c)));
    if (has_s) h = _mm256_mullo_epi32(h, S8);
    __m128i isum = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    __m128 da = _mm_set1_ps(d_a);
    __m128 v = _mm_mul_ps(_mm_cvtepi32_ps(isum), _mm_mul_ps(D4, da));
    if (has_m) {
        __m256i mh = _mm256_mullo_epi32(M8, A);
        __m128i msum = _mm_add_epi32(_mm256_castsi256_si128(mh), _mm256_extracti128_si256(mh, 1));
        v = _mm_sub_ps(v, _mm_mul_ps(_mm_cvtepi32_ps(msum), _mm_mul_ps(DM4, da)));
    }
    return _mm_add_ps(acc, v);
}

/* ---- the 256-element types: two groups per step --------------------------------------------
 * Groups g0 = 2p, g1 = 2p + 1 of a super-block at once. Each row's group sums (8 int32) are
 * reduced by unpacks and adds (vphaddd is 3 uops here) to [half 0: r0..r3 | half 1: r0..r3]
 * (colibri_rows_by_lane); types with one scale per half (Q2_K, Q3_K, Q6_K) multiply that by
 * the halves' scales, then the two groups' halves are added into [g0: r0..r3 | g1: r0..r3]
 * (types with one scale per 32-element sub-block multiply there). The activation's half sums
 * enter as int16 pairs (A_0, A_1) by lane, so C·(S_0·A_0 + S_1·A_1) and
 * M_0·A_0 + M_1·A_1 are one vpmaddwd each against the rows' (S_0, S_1) / (M_0, M_1) pairs;
 * the float step runs on 8 lanes, [g0 | g1]'s products, and the two halves are added to the
 * 4 accumulators in group order. Every integer step is exact (isum, msum < 2^24; the
 * intermediate S·Σu·a wraps nowhere a final value could not). */

/* Per 128-bit lane, [r0, r1, r2, r3]: the sums of that lane's products of the 4 rows, from
 * their vpmaddubsw int16 pairs p0..p3. Added as int16 while no sum can pass 32767 (ADD16: 2
 * levels, 8 byte products a lane, for quants u <= 31: 31·128·8 = 31744; 1 level for u <= 63:
 * 63·128·4 = 32256; 0 for the IQ4 tables' |kv| <= 127), then widened by one vpmaddwd. */
static inline __attribute__((always_inline)) __m256i colibri_rows_by_lane(__m256i p0, __m256i p1, __m256i p2, __m256i p3,
                                                                          const int add16) {
    const __m256i one = _mm256_set1_epi16(1);
    if (add16 == 0) p0 = _mm256_madd_epi16(p0, one), p1 = _mm256_madd_epi16(p1, one);
    if (add16 == 0) p2 = _mm256_madd_epi16(p2, one), p3 = _mm256_madd_epi16(p3, one);
    /* each 32-bit unit of a row with the one 4 units on: rows 0, 1 (2, 3) interleaved */
    __m256i a = _mm256_unpacklo_epi32(p0, p1), a_hi = _mm256_unpackhi_epi32(p0, p1);
    __m256i b = _mm256_unpacklo_epi32(p2, p3), b_hi = _mm256_unpackhi_epi32(p2, p3);
    if (add16 >= 1) {
        a = _mm256_add_epi16(a, a_hi), b = _mm256_add_epi16(b, b_hi);
    } else {
        a = _mm256_add_epi32(a, a_hi), b = _mm256_add_epi32(b, b_hi);
    }
    if (add16 == 1) a = _mm256_madd_epi16(a, one), b = _mm256_madd_epi16(b, one);
    __m256i lo = _mm256_unpacklo_epi64(a, b), hi = _mm256_unpackhi_epi64(a, b);
    if (add16 == 2) return _mm256_madd_epi16(_mm256_add_epi16(lo, hi), one);
    return _mm256_add_epi32(lo, hi);
}

/* [x's lane 0 + lane 1 | y's lane 0 + lane 1]. */
static inline __m256i colibri_lanes_added(__m256i x, __m256i y) {
    return _mm256_add_epi32(_mm256_permute2x128_si256(x, y, 0x20), _mm256_permute2x128_si256(x, y, 0x31));
}

/* pshufb indices into a per-half table T (both lanes colibri_rows_by_half's t[p]: byte 4i + r
 * = row r's half 4p + i, i.e. [g0 h0: r0..r3 | g0 h1 | g1 h0 | g1 h1]). Z: a zeroed byte. */
#define COLIBRI_Z -128
/* int32 lane r: the byte at its top (sign-extended by a shift of 24): [B0 + r | B1 + r]. */
#define COLIBRI_TOP32(B0, B1)                                                                          \
    _mm256_setr_epi8(COLIBRI_Z, COLIBRI_Z, COLIBRI_Z, B0, COLIBRI_Z, COLIBRI_Z, COLIBRI_Z, B0 + 1,     \
                     COLIBRI_Z, COLIBRI_Z, COLIBRI_Z, B0 + 2, COLIBRI_Z, COLIBRI_Z, COLIBRI_Z, B0 + 3, \
                     COLIBRI_Z, COLIBRI_Z, COLIBRI_Z, B1, COLIBRI_Z, COLIBRI_Z, COLIBRI_Z, B1 + 1,     \
                     COLIBRI_Z, COLIBRI_Z, COLIBRI_Z, B1 + 2, COLIBRI_Z, COLIBRI_Z, COLIBRI_Z, B1 + 3)
/* int32 lane r of lane k: int16 pair (half 0, half 1) of group k, each byte at the int16's top
 * (HI: for a signed value, shifted down by 8) or its bottom (unsigned). */
#define COLIBRI_PAIR16_HI                                                                              \
    _mm256_setr_epi8(COLIBRI_Z, 0, COLIBRI_Z, 4, COLIBRI_Z, 1, COLIBRI_Z, 5, COLIBRI_Z, 2, COLIBRI_Z, 6, \
                     COLIBRI_Z, 3, COLIBRI_Z, 7, COLIBRI_Z, 8, COLIBRI_Z, 12, COLIBRI_Z, 9, COLIBRI_Z, 13, \
                     COLIBRI_Z, 10, COLIBRI_Z, 14, COLIBRI_Z, 11, COLIBRI_Z, 15)
#define COLIBRI_PAIR16_LO                                                                              \
    _mm256_setr_epi8(0, COLIBRI_Z, 4, COLIBRI_Z, 1, COLIBRI_Z, 5, COLIBRI_Z, 2, COLIBRI_Z, 6, COLIBRI_Z, \
                     3, COLIBRI_Z, 7, COLIBRI_Z, 8, COLIBRI_Z, 12, COLIBRI_Z, 9, COLIBRI_Z, 13, COLIBRI_Z, \
                     10, COLIBRI_Z, 14, COLIBRI_Z, 11, COLIBRI_Z, 15, COLIBRI_Z)

/* The signed bytes of T at int32 lanes ([B0 + r | B1 + r]). */
static inline __m256i colibri_table32(__m256i T, __m256i top_index) {
    return _mm256_srai_epi32(_mm256_shuffle_epi8(T, top_index), 24);
}

/* A super-block's 4-row tables: d, dmin ([r0..r3 | r0..r3]) and, per group pair p, the scales
 * S[p] and mins M[p] that the type's SCALE32 / MPAIR16 read. */
typedef struct colibri_k_head {
    __m256i s[4], m[4];
    __m256 d, dmin;
} colibri_k_head;

/* The per-half tables (colibri_rows_by_half's t[p] in both 128-bit lanes) of x0..x3 (scales)
 * and y0..y3 (mins, has_m), the f16 d and dmin at d_at, dmin_at. */
static inline __attribute__((always_inline)) void colibri_head_by_half(
    __m128i x0, __m128i x1, __m128i x2, __m128i x3, const int has_m, __m128i y0, __m128i y1, __m128i y2, __m128i y3,
    const void *b0, const void *b1, const void *b2, const void *b3, size_t d_at, size_t dmin_at, colibri_k_head *h) {
    __m128i t[4];
    colibri_rows_by_half(x0, x1, x2, x3, t);
    for (int p = 0; p < 4; p++) h->s[p] = _mm256_broadcastsi128_si256(t[p]);
    __m128 d4 = colibri_f16x4_at(b0, b1, b2, b3, d_at);
    h->d = _mm256_set_m128(d4, d4);
    if (has_m) {
        colibri_rows_by_half(y0, y1, y2, y3, t);
        for (int p = 0; p < 4; p++) h->m[p] = _mm256_broadcastsi128_si256(t[p]);
        __m128 dm4 = colibri_f16x4_at(b0, b1, b2, b3, dmin_at);
        h->dmin = _mm256_set_m128(dm4, dm4);
    }
}

#define COLIBRI_HEAD_BY_HALF(SCALES16, HAS_M, MINS16, D_AT, DMIN_AT)                                       \
    colibri_head_by_half(SCALES16(b0), SCALES16(b1), SCALES16(b2), SCALES16(b3), HAS_M, MINS16(b0),        \
                         MINS16(b1), MINS16(b2), MINS16(b3), b0, b1, b2, b3, D_AT, DMIN_AT, &h)
/* per-half tables: sub-blocks of 16 (HALF) or of 32 (each value twice: SUB32) */
#define COLIBRI_HALF_SCALE32(S, p, j) colibri_table32((S), (j) ? COLIBRI_TOP32(8, 12) : COLIBRI_TOP32(0, 4))
#define COLIBRI_SUB32_SCALE32(S, p, j) colibri_table32((S), COLIBRI_TOP32(0, 8))
#define COLIBRI_HALF_MPAIR16(M, p) _mm256_shuffle_epi8((M), COLIBRI_PAIR16_LO)

/* Q4_K / Q5_K: the 4 rows' 16-byte heads (d, dmin, scales[12]) transposed into words by row,
 * then colibri_k_scale_min_words on the 4 rows at once: byte k of word r of s[p] (both 128-bit
 * lanes) is row r's scale of sub-block 4 (p / 2) + k, of m[p] its min; per pair p a pshufb
 * picks sub-blocks 2p, 2p + 1. */
static inline void colibri_head_k(const void *b0, const void *b1, const void *b2, const void *b3, colibri_k_head *h) {
    __m256i x0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)b0));
    __m256i x1 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)b1));
    __m256i x2 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)b2));
    __m256i x3 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)b3));
    __m256i t0 = _mm256_unpacklo_epi32(x0, x1), t1 = _mm256_unpackhi_epi32(x0, x1);
    __m256i t2 = _mm256_unpacklo_epi32(x2, x3), t3 = _mm256_unpackhi_epi32(x2, x3);
    __m256i dd = _mm256_unpacklo_epi64(t0, t2);   /* word r: row r's d | dmin << 16 */
    __m256i wa = _mm256_unpackhi_epi64(t0, t2), wb = _mm256_unpacklo_epi64(t1, t3), wc = _mm256_unpackhi_epi64(t1, t3);
    const __m256i m6 = _mm256_set1_epi8(0x3f), m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x30);
    __m256i s_lo = _mm256_and_si256(wa, m6), m_lo = _mm256_and_si256(wb, m6);
    __m256i s_hi = _mm256_or_si256(_mm256_and_si256(wc, m4), _mm256_and_si256(_mm256_srli_epi32(wa, 2), m2));
    __m256i m_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(wc, 4), m4),
                                   _mm256_and_si256(_mm256_srli_epi32(wb, 2), m2));
    h->s[0] = h->s[1] = s_lo, h->s[2] = h->s[3] = s_hi;
    h->m[0] = h->m[1] = m_lo, h->m[2] = h->m[3] = m_hi;
    __m128i d16 = _mm_shuffle_epi8(_mm256_castsi256_si128(dd),
                                   _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15));
    __m256 ddm = _mm256_cvtph_ps(d16);   /* [d r0..r3 | dmin r0..r3] */
    h->d = _mm256_permute2f128_ps(ddm, ddm, 0x00);
    h->dmin = _mm256_permute2f128_ps(ddm, ddm, 0x11);
}

/* int32 word r: [byte 4r + K | byte 4r + K + 1] zero-extended (a scale), or in both int16
 * halves of the word (a min against (A_0, A_1)). */
#define COLIBRI_K_IDX32(K)                                                                                \
    _mm256_setr_epi8(K, COLIBRI_Z, COLIBRI_Z, COLIBRI_Z, 4 + K, COLIBRI_Z, COLIBRI_Z, COLIBRI_Z, 8 + K,  \
                     COLIBRI_Z, COLIBRI_Z, COLIBRI_Z, 12 + K, COLIBRI_Z, COLIBRI_Z, COLIBRI_Z, K + 1,      \
                     COLIBRI_Z, COLIBRI_Z, COLIBRI_Z, 5 + K, COLIBRI_Z, COLIBRI_Z, COLIBRI_Z, 9 + K,       \
                     COLIBRI_Z, COLIBRI_Z, COLIBRI_Z, 13 + K, COLIBRI_Z, COLIBRI_Z, COLIBRI_Z)
#define COLIBRI_K_IDX16(K)                                                                                \
    _mm256_setr_epi8(K, COLIBRI_Z, K, COLIBRI_Z, 4 + K, COLIBRI_Z, 4 + K, COLIBRI_Z, 8 + K, COLIBRI_Z,    \
                     8 + K, COLIBRI_Z, 12 + K, COLIBRI_Z, 12 + K, COLIBRI_Z, K + 1, COLIBRI_Z, K + 1,      \
                     COLIBRI_Z, 5 + K, COLIBRI_Z, 5 + K, COLIBRI_Z, 9 + K, COLIBRI_Z, 9 + K, COLIBRI_Z,    \
                     13 + K, COLIBRI_Z, 13 + K, COLIBRI_Z)
#define COLIBRI_K_SCALE32(S, p, j) _mm256_shuffle_epi8((S), (p) % 2 ? COLIBRI_K_IDX32(2) : COLIBRI_K_IDX32(0))
#define COLIBRI_K_MPAIR16(M, p) _mm256_shuffle_epi8((M), (p) % 2 ? COLIBRI_K_IDX16(2) : COLIBRI_K_IDX16(0))
#define COLIBRI_HEAD_K colibri_head_k(b0, b1, b2, b3, &h)

/* The 4 bytes at p as a host-order int32 (an activation block's (A_0, A_1) int16 pair). */
static inline int colibri_i32_at(const void *p) {
    int v;
    memcpy(&v, p, 4);
    return v;
}

/* [v(g0) x4 | v(g1) x4] of two activation blocks: a broadcast each and a blend. */
#define COLIBRI_ACT_PAIR_SUMS(a0, a1) \
    _mm256_blend_epi32(_mm256_set1_epi32(colibri_i32_at((a0)->sum)), _mm256_set1_epi32(colibri_i32_at((a1)->sum)), 0xf0)
#define COLIBRI_ACT_PAIR_D(a0, a1) _mm256_blend_ps(_mm256_set1_ps((a0)->d), _mm256_set1_ps((a1)->d), 0xf0)

#define COLIBRI_NONE16(b) _mm_setzero_si128()
#define COLIBRI_UNSIGNED colibri_maddubs4
#define COLIBRI_SIGNED colibri_maddubs4_signed
#define COLIBRI_UNSIGNED16 _mm256_maddubs_epi16
#define COLIBRI_SIGNED16(kv, av) _mm256_maddubs_epi16(_mm256_abs_epi8(kv), _mm256_sign_epi8(av, kv))

/* ---- quants of group s (a constant here: every shift an immediate, none of 0) ------------------
 * The same bytes as blocks_quants.h's colibri_<type>_quants (which gemm_blocks.c and exact.c call
 * with a variable s); each high field shifted straight to its place and masked once. */

/* v's 16-bit lanes shifted left by k (right by -k), both as constants. */
static inline __attribute__((always_inline)) __m256i colibri_shl16(__m256i v, const int k) {
    return k > 0 ? _mm256_slli_epi16(v, k) : k < 0 ? _mm256_srli_epi16(v, -k) : v;
}

static inline __attribute__((always_inline)) __m256i colibri_field(const uint8_t *p, const int shl, const int mask) {
    return _mm256_and_si256(colibri_shl16(colibri_load32(p), shl), _mm256_set1_epi8((char)mask));
}

#define COLIBRI_Q2_K_QUANTS(b, s) colibri_field((b)->qs + 32 * ((s) / 4), -2 * ((s) % 4), 0x03)
#define COLIBRI_Q3_K_QUANTS(b, s) \
    _mm256_or_si256(COLIBRI_Q2_K_QUANTS(b, s), colibri_field((b)->hmask, 2 - (s), 0x04))
#define COLIBRI_Q4_K_QUANTS(b, s) colibri_field((b)->qs + 32 * ((s) / 2), -4 * ((s) % 2), 0x0f)
#define COLIBRI_Q5_K_QUANTS(b, s) _mm256_or_si256(COLIBRI_Q4_K_QUANTS(b, s), colibri_field((b)->qh, 4 - (s), 0x10))
#define COLIBRI_Q6_K_QUANTS(b, s)                                                                        \
    _mm256_or_si256(colibri_field((b)->ql + 64 * ((s) / 4) + 32 * ((s) % 2), -4 * (((s) % 4) / 2), 0x0f), \
                    colibri_field((b)->qh + 32 * ((s) / 4), 4 - 2 * ((s) % 4), 0x30))

/* NAME: the 4-row core of the 256-element type WBLOCK: quants by QUANTS (MADD: unsigned or
 * signed int16 product pairs, ADD16 colibri_rows_by_lane's), offset C, HEAD filling a
 * super-block's colibri_k_head h, scales SCALE32 (PER_HALF: 16 sub-blocks of 16; else 8 of 32),
 * mins (HAS_M) MPAIR16. */
#define COLIBRI_AVX2_K_CORE(NAME, WBLOCK, QUANTS, MADD, ADD16, C, HEAD, PER_HALF, SCALE32, HAS_M, MPAIR16)       \
    /* NAME##_tokens: against T activation rows (xv, xv + x_stride, ...; out[token * 4 + row]),           \
     * each step's quants unpacked once for all T, each token's lanes the one-token arithmetic;            \
     * always inlined into NAME (one token) and NAME##_t1 .. _t4 (gemm_few's), so T is a constant. */     \
    static inline __attribute__((always_inline)) void NAME##_tokens(                                           \
        const char *const w[4], const char *ahead, const void *xv, int64_t x_stride, int64_t n, const int T,   \
        float *out) {                                                                                           \
        const WBLOCK *w0 = (const WBLOCK *)w[0], *w1 = (const WBLOCK *)w[1];                                    \
        const WBLOCK *w2 = (const WBLOCK *)w[2], *w3 = (const WBLOCK *)w[3];                                    \
        __m128 acc[COLIBRI_FEW_TOKENS];   /* acc: [token] 4 rows */                                             \
        for (int t = 0; t < T; t++) acc[t] = _mm_setzero_ps();                                                  \
        for (int64_t sb = 0; sb < n / COLIBRI_QK_K; sb++) {                                                     \
            const WBLOCK *b0 = &w0[sb], *b1 = &w1[sb], *b2 = &w2[sb], *b3 = &w3[sb];                            \
            colibri_k_head h;                                                                                   \
            HEAD;                                                                                               \
            _Pragma("GCC unroll 4")   /* constant p: shifts and table offsets */                                \
            for (int p = 0; p < 4; p++) {                                                                       \
                COLIBRI_PREFETCH_SPAN(ahead + (4 * sb + p) * (int64_t)sizeof(WBLOCK), sizeof(WBLOCK));         \
                __m256i q00 = QUANTS(b0, 2 * p), q10 = QUANTS(b1, 2 * p), q20 = QUANTS(b2, 2 * p);              \
                __m256i q30 = QUANTS(b3, 2 * p), q01 = QUANTS(b0, 2 * p + 1), q11 = QUANTS(b1, 2 * p + 1);      \
                __m256i q21 = QUANTS(b2, 2 * p + 1), q31 = QUANTS(b3, 2 * p + 1);                               \
                _Pragma("GCC unroll 4")                                                                         \
                for (int t = 0; t < T; t++) {                                                                   \
                    const colibri_block_q8_s *a0 =                                                              \
                        (const colibri_block_q8_s *)((const char *)xv + t * x_stride) + 8 * sb + 2 * p;         \
                    const colibri_block_q8_s *a1 = a0 + 1;                                                      \
                    __m256i av0 = _mm256_loadu_si256((const __m256i *)a0->qs);                                  \
                    __m256i av1 = _mm256_loadu_si256((const __m256i *)a1->qs);                                  \
                    __m256i h0 = colibri_rows_by_lane(MADD(q00, av0), MADD(q10, av0), MADD(q20, av0),           \
                                                      MADD(q30, av0), ADD16);                                   \
                    __m256i h1 = colibri_rows_by_lane(MADD(q01, av1), MADD(q11, av1), MADD(q21, av1),           \
                                                      MADD(q31, av1), ADD16);                                   \
                    __m256i isum;   /* isum: [g0: r0..r3 | g1: r0..r3] */                                       \
                    if (PER_HALF) {                                                                             \
                        h0 = _mm256_mullo_epi32(h0, SCALE32(h.s[p], p, 0));                                     \
                        h1 = _mm256_mullo_epi32(h1, SCALE32(h.s[p], p, 1));                                     \
                        isum = colibri_lanes_added(h0, h1);                                                     \
                    } else {                                                                                    \
                        isum = _mm256_mullo_epi32(colibri_lanes_added(h0, h1), SCALE32(h.s[p], p, 0));          \
                    }                                                                                           \
                    __m256i A = COLIBRI_ACT_PAIR_SUMS(a0, a1);   /* int16 pairs (A_0, A_1) */                   \
                    if (C) {   /* per-half tables only; C a power of 2: (C·S_0, C·S_1) by one shift */         \
                        __m256i cs16 = _mm256_srai_epi16(_mm256_shuffle_epi8(h.s[p], COLIBRI_PAIR16_HI), 8 - __builtin_ctz(C)); \
                        isum = _mm256_sub_epi32(isum, _mm256_madd_epi16(cs16, A));                              \
                    }                                                                                           \
                    __m256 da = COLIBRI_ACT_PAIR_D(a0, a1);                                                     \
                    __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(h.d, da));                 \
                    if (HAS_M) {                                                                                \
                        __m256i msum = _mm256_madd_epi16(MPAIR16(h.m[p], p), A);                                \
                        v = _mm256_sub_ps(v, _mm256_mul_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(h.dmin, da))); \
                    }                                                                                           \
                    acc[t] = _mm_add_ps(acc[t], _mm256_castps256_ps128(v));                                     \
                    acc[t] = _mm_add_ps(acc[t], _mm256_extractf128_ps(v, 1));                                   \
                }                                                                                               \
            }                                                                                                   \
        }                                                                                                       \
        for (int t = 0; t < T; t++) _mm_storeu_ps(out + 4 * t, acc[t]);                                         \
    }                                                                                                           \
    COLIBRI_TOKEN_CORES(NAME)

#define COLIBRI_HEAD_Q2_K COLIBRI_HEAD_BY_HALF(colibri_q2_k_scales16, 1, colibri_q2_k_mins16, 80, 82)
#define COLIBRI_HEAD_Q3_K COLIBRI_HEAD_BY_HALF(colibri_q3_k_scales16, 0, COLIBRI_NONE16, 108, 108)
#define COLIBRI_HEAD_Q6_K COLIBRI_HEAD_BY_HALF(colibri_q6_k_scales16, 0, COLIBRI_NONE16, 208, 208)
#define COLIBRI_HEAD_IQ4_XS COLIBRI_HEAD_BY_HALF(colibri_iq4_xs_scales16, 0, COLIBRI_NONE16, 0, 0)

COLIBRI_AVX2_K_CORE(colibri_dot4_q2_k_avx2, colibri_block_q2_k, COLIBRI_Q2_K_QUANTS, COLIBRI_UNSIGNED16, 2, 0,
                    COLIBRI_HEAD_Q2_K, 1, COLIBRI_HALF_SCALE32, 1, COLIBRI_HALF_MPAIR16)
COLIBRI_AVX2_K_CORE(colibri_dot4_q3_k_avx2, colibri_block_q3_k, COLIBRI_Q3_K_QUANTS, COLIBRI_UNSIGNED16, 2, 4,
                    COLIBRI_HEAD_Q3_K, 1, COLIBRI_HALF_SCALE32, 0, COLIBRI_HALF_MPAIR16)
COLIBRI_AVX2_K_CORE(colibri_dot4_q4_k_avx2, colibri_block_q4_k, COLIBRI_Q4_K_QUANTS, COLIBRI_UNSIGNED16, 2, 0,
                    COLIBRI_HEAD_K, 0, COLIBRI_K_SCALE32, 1, COLIBRI_K_MPAIR16)
COLIBRI_AVX2_K_CORE(colibri_dot4_q5_k_avx2, colibri_block_q5_k, COLIBRI_Q5_K_QUANTS, COLIBRI_UNSIGNED16, 2, 0,
                    COLIBRI_HEAD_K, 0, COLIBRI_K_SCALE32, 1, COLIBRI_K_MPAIR16)
COLIBRI_AVX2_K_CORE(colibri_dot4_q6_k_avx2, colibri_block_q6_k, COLIBRI_Q6_K_QUANTS, COLIBRI_UNSIGNED16, 1, 32,
                    COLIBRI_HEAD_Q6_K, 1, COLIBRI_HALF_SCALE32, 0, COLIBRI_HALF_MPAIR16)
COLIBRI_AVX2_K_CORE(colibri_dot4_iq4_xs_avx2, colibri_block_iq4_xs, colibri_iq4_xs_quants, COLIBRI_SIGNED16, 0, 0,
                    COLIBRI_HEAD_IQ4_XS, 0, COLIBRI_SUB32_SCALE32, 0, COLIBRI_HALF_MPAIR16)

/* ---- the 32-element types: one block per step ------------------------------------------------- */

#define COLIBRI_F16_4(AT) colibri_f16x4_at(&w0[b], &w1[b], &w2[b], &w3[b], AT)
#define COLIBRI_E8M0_4 colibri_e8m0_half4(w0[b].e, w1[b].e, w2[b].e, w3[b].e)
#define COLIBRI_NEG_M_4 _mm_xor_ps(COLIBRI_F16_4(2), _mm_set1_ps(-0.0f))   /* Q5_1: DMIN = -m */

/* The words colibri_maddubs4 multiplies by: Q8_H's multipliers, or ones (Q8_S). */
#define COLIBRI_K_Q8_H(blk) colibri_q8_h_k16(blk)
#define COLIBRI_K_NONE(blk) _mm256_set1_epi16(1)

/* NAME: the 4-row core of the 32-element type WBLOCK against ABLOCK activations (K: the
 * words MADD multiplies by, COLIBRI_K_Q8_H or COLIBRI_K_NONE for Q8_S): quants QUANTS (MADD),
 * offset C, block scales D4, Q5_1's min form (HAS_M: M = 1) with DM4. */
#define COLIBRI_AVX2_BLOCK_CORE(NAME, WBLOCK, ABLOCK, K, QUANTS, MADD, C, D4, HAS_M, DM4)                         \
    static void NAME(const char *const w[4], const char *ahead, const void *xv, int64_t n, float out[4]) {      \
        const ABLOCK *a = (const ABLOCK *)xv;   /* a: [n/32] */                                                \
        const WBLOCK *w0 = (const WBLOCK *)w[0], *w1 = (const WBLOCK *)w[1];                                    \
        const WBLOCK *w2 = (const WBLOCK *)w[2], *w3 = (const WBLOCK *)w[3];                                    \
        __m128 acc = _mm_setzero_ps();   /* acc: [4] rows */                                                    \
        for (int64_t b = 0; b < n / COLIBRI_QK; b++) {                                                          \
            if (b % 2 == 0) COLIBRI_PREFETCH_SPAN(ahead + 4 * b * (int64_t)sizeof(WBLOCK), 8 * sizeof(WBLOCK)); \
            __m256i av = _mm256_loadu_si256((const __m256i *)a[b].qs);                                          \
            __m256i kk = K(&a[b]);                                                                              \
            acc = colibri_group_step(MADD(QUANTS(&w0[b]), av, kk), MADD(QUANTS(&w1[b]), av, kk),                \
                                     MADD(QUANTS(&w2[b]), av, kk), MADD(QUANTS(&w3[b]), av, kk), a[b].d, a[b].sum, \
                                     C, 0, _mm256_setzero_si256(), HAS_M,                                       \
                                     _mm256_set1_epi32(1), D4, DM4, acc);                                       \
        }                                                                                                       \
        _mm_storeu_ps(out, acc);                                                                                \
    }

COLIBRI_AVX2_BLOCK_CORE(colibri_dot4_q5_0_avx2, colibri_block_q5_0, colibri_block_q8_h, COLIBRI_K_Q8_H,
                        COLIBRI_Q5_QUANTS, COLIBRI_UNSIGNED, 16, COLIBRI_F16_4(0), 0, _mm_setzero_ps())
COLIBRI_AVX2_BLOCK_CORE(colibri_dot4_q5_1_avx2, colibri_block_q5_1, colibri_block_q8_h, COLIBRI_K_Q8_H,
                        COLIBRI_Q5_QUANTS, COLIBRI_UNSIGNED, 0, COLIBRI_F16_4(0), 1, COLIBRI_NEG_M_4)
COLIBRI_AVX2_BLOCK_CORE(colibri_dot4_iq4_nl_avx2, colibri_block_iq4_nl, colibri_block_q8_h, COLIBRI_K_Q8_H,
                        COLIBRI_IQ4_NL_QUANTS, COLIBRI_SIGNED, 0, COLIBRI_F16_4(0), 0, _mm_setzero_ps())
COLIBRI_AVX2_BLOCK_CORE(colibri_dot4_mxfp4_avx2, colibri_block_mxfp4, colibri_block_q8_s, COLIBRI_K_NONE,
                        COLIBRI_MXFP4_QUANTS, COLIBRI_UNSIGNED, COLIBRI_C_MXFP4_U16, COLIBRI_E8M0_4, 0, _mm_setzero_ps())

#define COLIBRI_AVX2_BLOCK_DOT_ROWS(T) COLIBRI_DOT_ROWS_DEFINE(colibri_dot_rows_##T##_avx2, colibri_dot4_##T##_avx2)
COLIBRI_AVX2_BLOCK_DOT_ROWS(q5_0)
COLIBRI_AVX2_BLOCK_DOT_ROWS(q5_1)
COLIBRI_AVX2_BLOCK_DOT_ROWS(q2_k)
COLIBRI_AVX2_BLOCK_DOT_ROWS(q3_k)
COLIBRI_AVX2_BLOCK_DOT_ROWS(q4_k)
COLIBRI_AVX2_BLOCK_DOT_ROWS(q5_k)
COLIBRI_AVX2_BLOCK_DOT_ROWS(q6_k)
COLIBRI_AVX2_BLOCK_DOT_ROWS(iq4_nl)
COLIBRI_AVX2_BLOCK_DOT_ROWS(iq4_xs)
COLIBRI_AVX2_BLOCK_DOT_ROWS(mxfp4)

#define COLIBRI_AVX2_BLOCK_GEMM_FEW(T) COLIBRI_GEMM_FEW_DEFINE(colibri_gemm_few_##T##_avx2, colibri_dot4_##T##_avx2)
COLIBRI_AVX2_BLOCK_GEMM_FEW(q2_k)
COLIBRI_AVX2_BLOCK_GEMM_FEW(q3_k)
COLIBRI_AVX2_BLOCK_GEMM_FEW(q4_k)
COLIBRI_AVX2_BLOCK_GEMM_FEW(q5_k)
COLIBRI_AVX2_BLOCK_GEMM_FEW(q6_k)
COLIBRI_AVX2_BLOCK_GEMM_FEW(iq4_xs)
