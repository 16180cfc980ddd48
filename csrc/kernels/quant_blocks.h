/*
 * quant_blocks.h — the GGUF block types beyond Q8_0 / Q4_0 / Q4_1 (internal):
 * their structs (byte for byte the ggml / GGUF layouts, a static_assert on
 * every size), the unpacking of their scales and quants shared by the scalar
 * references and the SIMD kernels, and the references' declarations.
 *
 *   type    elems  bytes  element j (q: the j-th quant, as unpacked below)
 *   Q5_0      32    22    d * (q - 16)                    q: 5 bits
 *   Q5_1      32    24    d * q + m                       q: 5 bits
 *   IQ4_NL    32    18    d * kv[q]                       q: 4 bits, kv: COLIBRI_IQ4_VALUES
 *   MXFP4     32    17    e8m0_half(e) * fp4x2[q]         q: 4 bits, fp4x2: E2M1 values doubled
 *   Q2_K     256    84    d * sc_s * q - dmin * m_s       q: 2 bits, 16 sub-blocks s of 16
 *   Q3_K     256   110    d * (sc_s - 32) * q             q: 3 bits signed [-4, 3], 16 sub-blocks of 16
 *   Q4_K     256   144    d * sc_s * q - dmin * m_s       q: 4 bits, 8 sub-blocks of 32
 *   Q5_K     256   176    d * sc_s * q - dmin * m_s       q: 5 bits, 8 sub-blocks of 32
 *   Q6_K     256   210    d * sc_s * (q - 32)             q: 6 bits, 16 sub-blocks of 16, sc int8
 *   IQ4_XS   256   136    d * (ls_s - 32) * kv[q]         q: 4 bits, 8 sub-blocks of 32
 *
 * d, dmin, m of the f16 fields are host-order f16 bits (the .colibri loader
 * byte-swaps them on big-endian hosts, as it does Q4_1's); every other
 * multi-byte field is read byte by byte, little-endian, as the file stores it.
 *
 * Dot products (quant_dot_blocks.c): the activation row is Q8_H for the
 * 32-element types Q5_0, Q5_1, IQ4_NL (quant.h: blocks of 32 int8 values, an
 * f32 unit d, a multiplier k_h per half and the half sums times k_h) and Q8_S
 * for the others (Q8_0's blocks of 32 int8 values, the scale in f32, the exact
 * half sums; a finer grid than ggml's Q8_K, one scale per 256, for the
 * 256-element types; read as k_h = 1). A row is walked in groups of 32
 * elements, group g against activation block g:
 *   isum_g = sum over the group's halves h (16 elements) of (S_h * k_h) * sum_j q_j * a_j   (exact int32)
 *   msum_g = sum over h of M_h * A_h,  A_h = the activation's half sum      (types with mins)
 *   acc += (float)isum_g * (D * d_a)        [ - (float)msum_g * (DMIN * d_a) ]
 * groups in order from acc = 0, where S_h, M_h are the integer scale and min
 * of the sub-block holding half h (1 and 0 where the type has none), q_j the
 * signed integer quant (q - 16, kv[q], q - 32, ...) and D, DMIN the f32 block
 * scales. Q5_1's d q + m takes the min form with M = 1 and DMIN = -m. Every
 * |isum_g| stays below 2^24, so its conversion to float is exact.
 */
#ifndef COLIBRI_QUANT_BLOCKS_H
#define COLIBRI_QUANT_BLOCKS_H

#include <stdint.h>
#include <string.h>

#include "kernels.h"

#define COLIBRI_QK_K 256   /* elements per super-block of the K types and IQ4_XS */

/* ---- 32-element types ----------------------------------------------------------- */

typedef struct colibri_block_q5_0 {
    uint16_t d;          /* f16 scale */
    uint8_t qh[4];       /* bit j (little-endian u32): bit 4 of element j's quant */
    uint8_t qs[16];      /* low 4 bits: element j in the low nibble of qs[j], j+16 in the high */
} colibri_block_q5_0;

typedef struct colibri_block_q5_1 {
    uint16_t d;          /* f16 scale */
    uint16_t m;          /* f16 offset */
    uint8_t qh[4];
    uint8_t qs[16];      /* as Q5_0 */
} colibri_block_q5_1;

typedef struct colibri_block_iq4_nl {
    uint16_t d;          /* f16 scale */
    uint8_t qs[16];      /* indices into COLIBRI_IQ4_VALUES, nibbles as Q4_0 */
} colibri_block_iq4_nl;

typedef struct colibri_block_mxfp4 {
    uint8_t e;           /* E8M0 shared exponent: the scale is 2^(e - 127) */
    uint8_t qs[16];      /* E2M1 codes, nibbles as Q4_0 */
} colibri_block_mxfp4;

/* ---- 256-element types ------------------------------------------------------------ */

typedef struct colibri_block_q2_k {
    uint8_t scales[16];  /* sub-block s: scale in the low nibble, min in the high */
    uint8_t qs[64];      /* 2-bit quants, see colibri_q2_k_quant */
    uint16_t d;          /* f16 super-block scale of the scales */
    uint16_t dmin;       /* f16 super-block scale of the mins */
} colibri_block_q2_k;

typedef struct colibri_block_q3_k {
    uint8_t hmask[32];   /* bit 2 of each quant, inverted: element 32i + l in bit i of hmask[l] */
    uint8_t qs[64];      /* low 2 bits, laid out as Q2_K's */
    uint8_t scales[12];  /* 16 six-bit scales, see colibri_q3_k_scales */
    uint16_t d;          /* f16 super-block scale */
} colibri_block_q3_k;

typedef struct colibri_block_q4_k {
    uint16_t d;          /* f16 super-block scale of the scales */
    uint16_t dmin;       /* f16 super-block scale of the mins */
    uint8_t scales[12];  /* 8 six-bit scales and 8 six-bit mins, see colibri_k_scale_min */
    uint8_t qs[128];     /* 64-element chunk c: qs[32c + l], low nibble element 64c + l, high 64c + 32 + l */
} colibri_block_q4_k;

typedef struct colibri_block_q5_k {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];  /* as Q4_K */
    uint8_t qh[32];      /* bit 4 of element 32i + l in bit i of qh[l] */
    uint8_t qs[128];     /* low 4 bits, as Q4_K */
} colibri_block_q5_k;

typedef struct colibri_block_q6_k {
    uint8_t ql[128];     /* low 4 bits, see colibri_q6_k_quant */
    uint8_t qh[64];      /* high 2 bits */
    int8_t scales[16];   /* sub-block scales */
    uint16_t d;          /* f16 super-block scale */
} colibri_block_q6_k;

typedef struct colibri_block_iq4_xs {
    uint16_t d;          /* f16 super-block scale */
    uint8_t scales_h[2]; /* little-endian u16: bits 2s, 2s+1 are bits 4-5 of sub-block s's scale */
    uint8_t scales_l[4]; /* bits 0-3 of sub-block s's scale: nibble s % 2 of scales_l[s / 2] */
    uint8_t qs[128];     /* sub-block s: qs[16s..16s+16) as one IQ4_NL block's nibbles */
} colibri_block_iq4_xs;

_Static_assert(sizeof(colibri_block_q5_0) == 22, "Q5_0 block is 22 bytes (GGUF)");
_Static_assert(sizeof(colibri_block_q5_1) == 24, "Q5_1 block is 24 bytes (GGUF)");
_Static_assert(sizeof(colibri_block_iq4_nl) == 18, "IQ4_NL block is 18 bytes (GGUF)");
_Static_assert(sizeof(colibri_block_mxfp4) == 17, "MXFP4 block is 17 bytes (GGUF)");
_Static_assert(sizeof(colibri_block_q2_k) == 84, "Q2_K block is 84 bytes (GGUF)");
_Static_assert(sizeof(colibri_block_q3_k) == 110, "Q3_K block is 110 bytes (GGUF)");
_Static_assert(sizeof(colibri_block_q4_k) == 144, "Q4_K block is 144 bytes (GGUF)");
_Static_assert(sizeof(colibri_block_q5_k) == 176, "Q5_K block is 176 bytes (GGUF)");
_Static_assert(sizeof(colibri_block_q6_k) == 210, "Q6_K block is 210 bytes (GGUF)");
_Static_assert(sizeof(colibri_block_iq4_xs) == 136, "IQ4_XS block is 136 bytes (GGUF)");

/* ---- value tables ------------------------------------------------------------------ */

/* IQ4_NL / IQ4_XS: the 16 non-linear levels (ggml's kvalues_iq4nl). */
#define COLIBRI_IQ4_VALUES {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
/* MXFP4: the E2M1 values 0, .5, 1, 1.5, 2, 3, 4, 6 and their negatives, doubled to integers
 * (so the block scale is half the E8M0 power of two). */
#define COLIBRI_FP4_VALUES {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}
extern const int8_t colibri_iq4_values[16];
extern const int8_t colibri_fp4_values[16];

/* Half the E8M0 scale, 2^(e - 128), as f32 (e 0 and 1 give the subnormals 2^-128,
 * 2^-127; e 255 gives 2^127, as ggml reads it). */
static inline float colibri_e8m0_half(uint8_t e) {
    union { uint32_t u; float f; } v = {e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23};
    return v.f;
}

/* ---- unpacking (shared by the references and the SIMD kernels) ----------------------- */

/* Q4_K / Q5_K: scale and min of sub-block s (0..7), 6 bits each. */
static inline void colibri_k_scale_min(const uint8_t scales[12], int s, uint8_t *sc, uint8_t *m) {
    if (s < 4) {
        *sc = scales[s] & 63;
        *m = scales[s + 4] & 63;
    } else {
        *sc = (uint8_t)((scales[s + 4] & 0x0f) | ((scales[s - 4] >> 6) << 4));
        *m = (uint8_t)((scales[s + 4] >> 4) | ((scales[s] >> 6) << 4));
    }
}

/* Q3_K: six-bit scale s (0..15), unsigned (the value uses sc - 32). */
static inline uint8_t colibri_q3_k_scale(const uint8_t scales[12], int s) {
    uint8_t lo = (uint8_t)((scales[s % 8] >> (4 * (s / 8))) & 0x0f);
    uint8_t hi = (uint8_t)((scales[8 + s % 4] >> (2 * (s / 4))) & 0x03);
    return (uint8_t)(lo | (hi << 4));
}

/* Q3_K: the 16 six-bit scales. */
static inline void colibri_q3_k_scales(const uint8_t scales[12], uint8_t sc[16]) {
    for (int s = 0; s < 16; s++) sc[s] = colibri_q3_k_scale(scales, s);
}

/* IQ4_XS: the scale of sub-block s (0..7), 6 bits unsigned (the value uses ls - 32). */
static inline uint8_t colibri_iq4_xs_scale(const colibri_block_iq4_xs *b, int s) {
    uint16_t h = (uint16_t)(b->scales_h[0] | b->scales_h[1] << 8);
    return (uint8_t)(((b->scales_l[s / 2] >> (4 * (s % 2))) & 0x0f) | (((h >> (2 * s)) & 3) << 4));
}

/* ---- whole-block unpacking in general registers (the SIMD kernels' first step) ----------
 * "Byte k" of a word is its bits 8k..8k+7, so on the little-endian hosts the SIMD kernels run
 * on a word moved into a vector register puts byte k in lane k. */

/* The little-endian 32-bit word at p (p need not be aligned). */
static inline uint32_t colibri_u32_at(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Q4_K / Q5_K: the 8 six-bit scales and 8 mins of scales[12], colibri_k_scale_min's values
 * four sub-blocks per word: byte k of out[0] / out[1] is sub-block k / 4 + k's scale, of
 * out[2] / out[3] its min. */
static inline void colibri_k_scale_min_words(const uint8_t scales[12], uint32_t out[4]) {
    uint32_t a = colibri_u32_at(scales), b = colibri_u32_at(scales + 4), c = colibri_u32_at(scales + 8);
    out[0] = a & 0x3f3f3f3fu;
    out[1] = (c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u);
    out[2] = b & 0x3f3f3f3fu;
    out[3] = ((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u);
}

/* IQ4_XS: the 8 six-bit scales (colibri_iq4_xs_scale's values, unsigned), byte s = sub-block
 * s's: the 8 nibbles of scales_l and the 8 2-bit fields of scales_h spread to a byte each by
 * shifts and masks. */
static inline uint64_t colibri_iq4_xs_scale_bytes(const colibri_block_iq4_xs *b) {
    uint64_t lo = colibri_u32_at(b->scales_l), hi = (uint64_t)b->scales_h[0] | (uint64_t)b->scales_h[1] << 8;
    lo = (lo | lo << 16) & 0x0000ffff0000ffffull;
    lo = (lo | lo << 8) & 0x00ff00ff00ff00ffull;
    lo = (lo | lo << 4) & 0x0f0f0f0f0f0f0f0full;
    hi = (hi | hi << 24) & 0x000000ff000000ffull;
    hi = (hi | hi << 12) & 0x000f000f000f000full;
    hi = (hi | hi << 6) & 0x0303030303030303ull;
    return lo | hi << 4;
}

/* Q2_K / Q3_K low bits: element i of the super-block sits at qs[32 (i / 128) + i % 32],
 * bits 2 ((i / 32) % 4) and up. */
static inline uint8_t colibri_q2_bits(const uint8_t qs[64], int i) {
    return (uint8_t)((qs[32 * (i / 128) + i % 32] >> (2 * ((i / 32) % 4))) & 3);
}

/* Q6_K: element i's 6-bit quant (unsigned; the value uses q - 32). Half h = i / 128 holds
 * ql[64h..64h+64) and qh[32h..32h+32); within it, element l of quarter k (0..3) takes the
 * nibble k / 2 of ql[64h + 32 (k % 2) + l] and bits 2k, 2k+1 of qh[32h + l]. */
static inline uint8_t colibri_q6_k_quant(const colibri_block_q6_k *b, int i) {
    int h = i / 128, k = (i % 128) / 32, l = i % 32;
    uint8_t lo = (uint8_t)((b->ql[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0x0f);
    uint8_t hi = (uint8_t)((b->qh[32 * h + l] >> (2 * k)) & 3);
    return (uint8_t)(lo | hi << 4);
}

/* Q4_K / Q5_K low nibble of element i: qs[32 (i / 64) + i % 32], high nibble when (i / 32) is odd. */
static inline uint8_t colibri_k_nibble(const uint8_t qs[128], int i) {
    return (uint8_t)((qs[32 * (i / 64) + i % 32] >> (4 * ((i / 32) % 2))) & 0x0f);
}

/* Q5_0 / Q5_1: element j's 5-bit quant. */
static inline uint8_t colibri_q5_quant(const uint8_t qh[4], const uint8_t qs[16], int j) {
    uint8_t lo = j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4;
    return (uint8_t)(lo | ((qh[j / 8] >> (j % 8)) & 1) << 4);
}

/* ---- the dot contract's per-group scales -------------------------------------------------
 * Group g (elements 32g..32g+31) of a row of the type: S_h and M_h, the integer scale
 * and min of each half h (16 elements), and the f32 block scales D, DMIN. The scalar
 * references and the SIMD kernels that need them one group at a time read them here. */
typedef struct colibri_group_scales {
    int32_t sc[2], m[2];   /* per half: integer scale (1 where none), integer min (0 where none) */
    float d, dmin;         /* the block's f32 scales (dmin 0 where none; Q5_1: -m) */
} colibri_group_scales;

static inline void colibri_group_scales_set(colibri_group_scales *s, int32_t sc0, int32_t sc1, int32_t m0,
                                            int32_t m1, float d, float dmin) {
    s->sc[0] = sc0, s->sc[1] = sc1, s->m[0] = m0, s->m[1] = m1, s->d = d, s->dmin = dmin;
}

static inline void colibri_q5_0_group_scales(const void *row, int64_t g, colibri_group_scales *s) {
    colibri_group_scales_set(s, 1, 1, 0, 0, colibri_f16_to_f32(((const colibri_block_q5_0 *)row)[g].d), 0.0f);
}

/* Q5_1's d q + m in the min form: M = 1, DMIN = -m. */
static inline void colibri_q5_1_group_scales(const void *row, int64_t g, colibri_group_scales *s) {
    const colibri_block_q5_1 *b = (const colibri_block_q5_1 *)row + g;
    colibri_group_scales_set(s, 1, 1, 1, 1, colibri_f16_to_f32(b->d), -colibri_f16_to_f32(b->m));
}

static inline void colibri_iq4_nl_group_scales(const void *row, int64_t g, colibri_group_scales *s) {
    colibri_group_scales_set(s, 1, 1, 0, 0, colibri_f16_to_f32(((const colibri_block_iq4_nl *)row)[g].d), 0.0f);
}

static inline void colibri_mxfp4_group_scales(const void *row, int64_t g, colibri_group_scales *s) {
    colibri_group_scales_set(s, 1, 1, 0, 0, colibri_e8m0_half(((const colibri_block_mxfp4 *)row)[g].e), 0.0f);
}

static inline void colibri_iq4_xs_group_scales(const void *row, int64_t g, colibri_group_scales *s) {
    const colibri_block_iq4_xs *b = (const colibri_block_iq4_xs *)row + g / 8;
    int32_t ls = colibri_iq4_xs_scale(b, (int)(g % 8)) - 32;
    colibri_group_scales_set(s, ls, ls, 0, 0, colibri_f16_to_f32(b->d), 0.0f);
}

static inline void colibri_q2_k_group_scales(const void *row, int64_t g, colibri_group_scales *s) {
    const colibri_block_q2_k *b = (const colibri_block_q2_k *)row + g / 8;
    uint8_t s0 = b->scales[2 * (g % 8)], s1 = b->scales[2 * (g % 8) + 1];
    colibri_group_scales_set(s, s0 & 0x0f, s1 & 0x0f, s0 >> 4, s1 >> 4, colibri_f16_to_f32(b->d),
                             colibri_f16_to_f32(b->dmin));
}

static inline void colibri_q3_k_group_scales(const void *row, int64_t g, colibri_group_scales *s) {
    const colibri_block_q3_k *b = (const colibri_block_q3_k *)row + g / 8;
    int s0 = 2 * (int)(g % 8);   /* the group's two of the 16 (decoding all 16 was half a gemm's time) */
    colibri_group_scales_set(s, colibri_q3_k_scale(b->scales, s0) - 32, colibri_q3_k_scale(b->scales, s0 + 1) - 32, 0, 0,
                             colibri_f16_to_f32(b->d), 0.0f);
}

static inline void colibri_q4_k_group_scales(const void *row, int64_t g, colibri_group_scales *s) {
    const colibri_block_q4_k *b = (const colibri_block_q4_k *)row + g / 8;
    uint8_t sc, m;
    colibri_k_scale_min(b->scales, (int)(g % 8), &sc, &m);
    colibri_group_scales_set(s, sc, sc, m, m, colibri_f16_to_f32(b->d), colibri_f16_to_f32(b->dmin));
}

static inline void colibri_q5_k_group_scales(const void *row, int64_t g, colibri_group_scales *s) {
    const colibri_block_q5_k *b = (const colibri_block_q5_k *)row + g / 8;
    uint8_t sc, m;
    colibri_k_scale_min(b->scales, (int)(g % 8), &sc, &m);
    colibri_group_scales_set(s, sc, sc, m, m, colibri_f16_to_f32(b->d), colibri_f16_to_f32(b->dmin));
}

static inline void colibri_q6_k_group_scales(const void *row, int64_t g, colibri_group_scales *s) {
    const colibri_block_q6_k *b = (const colibri_block_q6_k *)row + g / 8;
    colibri_group_scales_set(s, b->scales[2 * (g % 8)], b->scales[2 * (g % 8) + 1], 0, 0, colibri_f16_to_f32(b->d),
                             0.0f);
}

/* ---- scalar references (quant_blocks.c, quant_kquants.c, quant_dot_blocks.c) ---------
 * Rows of n elements, n a multiple of the type's block size. dequantize: exactly the
 * formula of the table above in f32, operation for operation as ggml and gguf-py compute
 * it (d * sc rounded to f32 first). vec_dot: the contract above. */
#define COLIBRI_BLOCK_REFERENCES(T)                                                    \
    void colibri_dequantize_row_##T(const void *src, float *y, int64_t n);             \
    void colibri_quantize_row_##T(const float *x, void *dst, int64_t n);               \
    float colibri_vec_dot_##T(const void *w, const void *a, int64_t n);
COLIBRI_BLOCK_REFERENCES(q5_0)
COLIBRI_BLOCK_REFERENCES(q5_1)
COLIBRI_BLOCK_REFERENCES(iq4_nl)
COLIBRI_BLOCK_REFERENCES(mxfp4)
COLIBRI_BLOCK_REFERENCES(q2_k)
COLIBRI_BLOCK_REFERENCES(q3_k)
COLIBRI_BLOCK_REFERENCES(q4_k)
COLIBRI_BLOCK_REFERENCES(q5_k)
COLIBRI_BLOCK_REFERENCES(q6_k)
COLIBRI_BLOCK_REFERENCES(iq4_xs)
#undef COLIBRI_BLOCK_REFERENCES

#endif /* COLIBRI_QUANT_BLOCKS_H */
