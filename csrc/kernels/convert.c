/*
 * convert.c — bit-exact f16 / bf16 <-> f32 conversion in portable C.
 * No hardware conversion instructions and no float tricks that depend on the
 * rounding mode: integer bit manipulation only, round-to-nearest-even.
 */
#include <string.h>

#include "colibri.h"
#include "kernels.h"

static uint32_t colibri_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float colibri_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* IEEE binary16 → binary32: exact for every input (subnormals normalised,
 * infinities kept, NaN payload shifted into the top mantissa bits). */
float colibri_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) return colibri_f32_from_bits(sign | 0x7f800000u | (mant << 13));
    if (exp != 0) return colibri_f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
    if (mant == 0) return colibri_f32_from_bits(sign);
    /* subnormal: value = mant * 2^-24; shift mant until its leading bit is bit 10 */
    exp = 113;
    while ((mant & 0x400u) == 0) {
        mant <<= 1;
        exp--;
    }
    return colibri_f32_from_bits(sign | (exp << 23) | ((mant & 0x3ffu) << 13));
}

/* binary32 → binary16, round to nearest even; overflow → inf, NaN stays NaN. */
uint16_t colibri_f32_to_f16(float f) {
    uint32_t u = colibri_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t exp = (u >> 23) & 0xffu;
    uint32_t mant = u & 0x7fffffu;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0));
    int32_t e = (int32_t)exp - 127 + 15;           /* f16 biased exponent */
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {                                   /* f16 subnormal or zero */
        if (e < -10) return sign;                   /* below half the smallest subnormal */
        mant |= 0x800000u;                          /* implicit bit */
        uint32_t shift = (uint32_t)(14 - e);        /* 24-bit mantissa → 10-bit subnormal */
        uint32_t half = 1u << (shift - 1);
        uint32_t rest = mant & ((1u << shift) - 1);
        uint32_t out = mant >> shift;
        if (rest > half || (rest == half && (out & 1u))) out++;
        return (uint16_t)(sign | out);              /* a carry into bit 10 is the right normal */
    }
    uint32_t out = ((uint32_t)e << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (out & 1u))) out++;  /* carry may reach inf: right */
    return (uint16_t)(sign | out);
}

float colibri_bf16_to_f32(uint16_t h) {
    return colibri_f32_from_bits((uint32_t)h << 16);
}

/* binary32 → bfloat16, round to nearest even; NaN stays a quiet NaN. */
uint16_t colibri_f32_to_bf16(float f) {
    uint32_t u = colibri_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
