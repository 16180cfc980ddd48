/*
 * arm_neon/blocks_unpack.h — unpacking of the types of quant_blocks.h for the
 * ARM kernels (block_core.h, kquant_core.h); included only by files compiled
 * for AArch64 Advanced SIMD. Everything here is exact integer work, so the
 * kernels' results are bitwise the reference's (quant_dot_blocks.c) whatever
 * the unpacking.
 *
 * A group is 32 elements of a row (one Q8_S activation block); a half is 16
 * of them. Unlike x86 (unsigned x signed byte products) the ARM products are
 * signed x signed, so every type's quants are unpacked straight to the signed
 * integers q_j of the dot contract (all within [-127, 113]): q0 elements 0..15
 * of the group, q1 elements 16..31. The 256-element types also give, per
 * block, their 16 per-half integer scales S_h and mins M_h as signed bytes
 * (sub-blocks of 32 give both their halves the same value).
 */
#ifndef COLIBRI_ARM_BLOCKS_UNPACK_H
#define COLIBRI_ARM_BLOCKS_UNPACK_H

#include <arm_neon.h>

#include "../quant.h"

/* ---- bytes and bits ------------------------------------------------------------------ */

/* Bits [shift, shift + log2(mask + 1)) of each of the 32 bytes at p, as signed bytes
 * (u0: bytes 0..15, u1: 16..31). */
static inline void colibri_bits32_neon(const uint8_t *p, int shift, uint8_t mask, int8x16_t *u0, int8x16_t *u1) {
    int8x16_t by = vdupq_n_s8((int8_t)-shift);   /* vshl by a negative count shifts right */
    uint8x16_t m = vdupq_n_u8(mask);
    *u0 = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(vld1q_u8(p), by), m));
    *u1 = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(vld1q_u8(p + 16), by), m));
}

/* `value` where bit s of each of the 32 bytes at p is set, else 0 (u0, u1 as above). */
static inline void colibri_bit32_neon(const uint8_t *p, int s, uint8_t value, int8x16_t *u0, int8x16_t *u1) {
    uint8x16_t bit = vdupq_n_u8((uint8_t)(1u << s)), v = vdupq_n_u8(value);
    *u0 = vreinterpretq_s8_u8(vandq_u8(vtstq_u8(vld1q_u8(p), bit), v));
    *u1 = vreinterpretq_s8_u8(vandq_u8(vtstq_u8(vld1q_u8(p + 16), bit), v));
}

/* 16 bytes of nibbles (element j < 16 the low nibble of qs[j], j + 16 the high) minus offset. */
static inline void colibri_nibbles_neon(const uint8_t *qs, uint8_t offset, int8x16_t *lo, int8x16_t *hi) {
    uint8x16_t q = vld1q_u8(qs);
    *lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f))), vdupq_n_s8((int8_t)offset));
    *hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vdupq_n_s8((int8_t)offset));
}

/* The same nibbles looked up in
 * table[16] (COLIBRI_IQ4_VALUES or COLIBRI_FP4_VALUES). */
static inline void colibri_lut_nibbles_neon(const uint8_t *qs, const int8_t table[16], int8x16_t *q0, int8x16_t *q1) {
    uint8x16_t q = vld1q_u8(qs);
    int8x16_t kv = vld1q_s8(table);
    *q0 = vqtbl1q_s8(kv, vandq_u8(q, vdupq_n_u8(0x0f)));
    *q1 = vqtbl1q_s8(kv, vshrq_n_u8(q, 4));
}

/* ---- quants of the 32-element types ---------------------------------------------------- */

/* Q5_0 / Q5_1: the nibbles (as Q4_0) with bit j of the little-endian qh as bit 4, minus offset. */
static inline void colibri_q5_quants_neon(const uint8_t qs[16], const uint8_t qh[4], uint8_t offset, int8x16_t *q0,
                                          int8x16_t *q1) {
    uint8x8_t h = vcreate_u8(colibri_u32_at(qh));
    const uint8x16_t bit = vreinterpretq_u8_u64(vdupq_n_u64(0x8040201008040201ull));   /* byte j: 1 << j % 8 */
    uint8x16_t h0 = vtstq_u8(vcombine_u8(vdup_lane_u8(h, 0), vdup_lane_u8(h, 1)), bit);
    uint8x16_t h1 = vtstq_u8(vcombine_u8(vdup_lane_u8(h, 2), vdup_lane_u8(h, 3)), bit);
    colibri_nibbles_neon(qs, offset, q0, q1);   /* nibble - offset; bit 4 is clear in a nibble */
    *q0 = vaddq_s8(*q0, vreinterpretq_s8_u8(vandq_u8(h0, vdupq_n_u8(0x10))));
    *q1 = vaddq_s8(*q1, vreinterpretq_s8_u8(vandq_u8(h1, vdupq_n_u8(0x10))));
}
static inline void colibri_prep_q5_0_neon(const colibri_block_q5_0 *w, int8x16_t *q0, int8x16_t *q1) {
    colibri_q5_quants_neon(w->qs, w->qh, 16, q0, q1);
}
static inline void colibri_prep_q5_1_neon(const colibri_block_q5_1 *w, int8x16_t *q0, int8x16_t *q1) {
    colibri_q5_quants_neon(w->qs, w->qh, 0, q0, q1);
}
static inline void colibri_prep_iq4_nl_neon(const colibri_block_iq4_nl *w, int8x16_t *q0, int8x16_t *q1) {
    colibri_lut_nibbles_neon(w->qs, colibri_iq4_values, q0, q1);
}
static inline void colibri_prep_mxfp4_neon(const colibri_block_mxfp4 *w, int8x16_t *q0, int8x16_t *q1) {
    colibri_lut_nibbles_neon(w->qs, colibri_fp4_values, q0, q1);
}

/* MXFP4's 2^(e - 128) (colibri_e8m0_half) of 4 exponents, exactly. */
static inline float32x4_t colibri_e8m0_half4_neon(uint8_t e0, uint8_t e1, uint8_t e2, uint8_t e3) {
    uint32_t packed = (uint32_t)e0 | (uint32_t)e1 << 8 | (uint32_t)e2 << 16 | (uint32_t)e3 << 24;
    uint32x4_t e = vmovl_u16(vget_low_u16(vmovl_u8(vcreate_u8(packed))));
    uint32x4_t small = vshlq_u32(vdupq_n_u32(0x00200000u), vreinterpretq_s32_u32(e));   /* used for e < 2 only */
    uint32x4_t large = vshlq_n_u32(vsubq_u32(e, vdupq_n_u32(1)), 23);
    return vreinterpretq_f32_u32(vbslq_u32(vcltq_u32(e, vdupq_n_u32(2)), small, large));
}

/* ---- quants of group s (0..7) of the 256-element types (quant_dot_blocks.c's layouts) ---- */

static inline void colibri_prep_q2_k_neon(const colibri_block_q2_k *b, int s, int8x16_t *q0, int8x16_t *q1) {
    colibri_bits32_neon(b->qs + 32 * (s / 4), 2 * (s % 4), 0x03, q0, q1);
}

static inline void colibri_prep_q3_k_neon(const colibri_block_q3_k *b, int s, int8x16_t *q0, int8x16_t *q1) {
    int8x16_t h0, h1;   /* 4 where the mask bit is set: q = low bits + 4 - 4 */
    colibri_bits32_neon(b->qs + 32 * (s / 4), 2 * (s % 4), 0x03, q0, q1);
    colibri_bit32_neon(b->hmask, s, 4, &h0, &h1);
    *q0 = vsubq_s8(vorrq_s8(*q0, h0), vdupq_n_s8(4)), *q1 = vsubq_s8(vorrq_s8(*q1, h1), vdupq_n_s8(4));
}

static inline void colibri_prep_q4_k_neon(const colibri_block_q4_k *b, int s, int8x16_t *q0, int8x16_t *q1) {
    colibri_bits32_neon(b->qs + 32 * (s / 2), 4 * (s % 2), 0x0f, q0, q1);
}

static inline void colibri_prep_q5_k_neon(const colibri_block_q5_k *b, int s, int8x16_t *q0, int8x16_t *q1) {
    int8x16_t h0, h1;
    colibri_bits32_neon(b->qs + 32 * (s / 2), 4 * (s % 2), 0x0f, q0, q1);
    colibri_bit32_neon(b->qh, s, 0x10, &h0, &h1);
    *q0 = vorrq_s8(*q0, h0), *q1 = vorrq_s8(*q1, h1);
}

static inline void colibri_prep_q6_k_neon(const colibri_block_q6_k *b, int s, int8x16_t *q0, int8x16_t *q1) {
    int8x16_t h0, h1;
    colibri_bits32_neon(b->ql + 64 * (s / 4) + 32 * (s % 2), 4 * ((s % 4) / 2), 0x0f, q0, q1);
    colibri_bits32_neon(b->qh + 32 * (s / 4), 2 * (s % 4), 0x03, &h0, &h1);
    *q0 = vsubq_s8(vorrq_s8(*q0, vshlq_n_s8(h0, 4)), vdupq_n_s8(32));
    *q1 = vsubq_s8(vorrq_s8(*q1, vshlq_n_s8(h1, 4)), vdupq_n_s8(32));
}

static inline void colibri_prep_iq4_xs_neon(const colibri_block_iq4_xs *b, int s, int8x16_t *q0, int8x16_t *q1) {
    colibri_lut_nibbles_neon(b->qs + 16 * s, colibri_iq4_values, q0, q1);
}

/* ---- per-half scales and mins of one 256-element block: byte h = half h's ---------------- */

/* The 8 bytes of v, each repeated for the two halves of its sub-block of 32. */
static inline int8x16_t colibri_per_half_neon(int8x8_t v) {
    int8x16_t both = vcombine_s8(v, v);
    return vzip1q_s8(both, both);
}

static inline int8x16_t colibri_q2_k_scales16_neon(const colibri_block_q2_k *b) {
    return vreinterpretq_s8_u8(vandq_u8(vld1q_u8(b->scales), vdupq_n_u8(0x0f)));
}
static inline int8x16_t colibri_q2_k_mins16_neon(const colibri_block_q2_k *b) {
    return vreinterpretq_s8_u8(vshrq_n_u8(vld1q_u8(b->scales), 4));
}

/* Q3_K: the 16 six-bit scales minus 32 (colibri_q3_k_scales): scale s's low nibble from
 * scales[s % 8] (>> 4 for s >= 8), its high 2 bits at 2 (s / 4) of scales[8 + s % 4], i.e.
 * byte s % 4 of that word shifted by 2 (s / 4): 32-bit lane s / 4. */
static inline int8x16_t colibri_q3_k_scales16_neon(const colibri_block_q3_k *b) {
    static const int32_t shifts[4] = {0, -2, -4, -6};
    uint8x8_t x = vld1_u8(b->scales);
    uint8x16_t lo = vandq_u8(vcombine_u8(x, vshr_n_u8(x, 4)), vdupq_n_u8(0x0f));
    uint32x4_t h = vshlq_u32(vdupq_n_u32(colibri_u32_at(b->scales + 8)), vld1q_s32(shifts));
    uint8x16_t hi = vandq_u8(vreinterpretq_u8_u32(h), vdupq_n_u8(0x03));
    return vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, vshlq_n_u8(hi, 4))), vdupq_n_s8(32));
}

/* Q4_K / Q5_K: the 8 scales (low 8 bytes) and mins (high 8) of colibri_k_scale_min_words. */
static inline int8x16_t colibri_k_scale_min_neon(const uint8_t scales[12]) {
    uint32_t v[4];
    colibri_k_scale_min_words(scales, v);
    return vreinterpretq_s8_u32(vld1q_u32(v));
}
static inline int8x16_t colibri_k_scales16_neon(const uint8_t scales[12]) {
    return colibri_per_half_neon(vget_low_s8(colibri_k_scale_min_neon(scales)));
}
static inline int8x16_t colibri_k_mins16_neon(const uint8_t scales[12]) {
    return colibri_per_half_neon(vget_high_s8(colibri_k_scale_min_neon(scales)));
}

static inline int8x16_t colibri_q6_k_scales16_neon(const colibri_block_q6_k *b) { return vld1q_s8(b->scales); }

static inline int8x16_t colibri_iq4_xs_scales16_neon(const colibri_block_iq4_xs *b) {
    int8x8_t ls = vreinterpret_s8_u64(vcreate_u64(colibri_iq4_xs_scale_bytes(b)));
    return colibri_per_half_neon(vsub_s8(ls, vdup_n_s8(32)));
}

#endif /* COLIBRI_ARM_BLOCKS_UNPACK_H */
