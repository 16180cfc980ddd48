/*
 * kernels.h — the scalar reference kernels of libcolibri (internal).
 *
 * Every op here is plain portable C99 written so that compilers can
 * vectorise it, with ONE fixed accumulation order that never depends on the
 * batch size or the thread count (see docs/KERNELS.md). The per-type table
 * (weight types F32, F16, BF16, Q8_0, Q4_0, Q4_1) is in quant.h; the SIMD
 * tables that matmul dispatches to, bitwise equal to these, are in isa.h.
 */
#ifndef COLIBRI_KERNELS_H
#define COLIBRI_KERNELS_H

#include <stdint.h>

/* ---- f16 / bf16 <-> f32, bit-exact, round-to-nearest-even ------------- */
float colibri_f16_to_f32(uint16_t h) __attribute__((const));   /* pure: callers may drop unused results */
uint16_t colibri_f32_to_f16(float f);
float colibri_bf16_to_f32(uint16_t h);
uint16_t colibri_f32_to_bf16(float f);

/* dst[i] = (float) src[offset + i] for i in [0, n); src has element type dtype
 * (a colibri_dtype; for block types offset and n are multiples of 32). Used
 * for embedding rows and 1-D weights (norms, biases). Defined in quant.c. */
void colibri_row_to_f32(const void *src, int32_t dtype, int64_t offset, int64_t n, float *dst);

/* ---- dot products: weight row . activation row ------------------------------
 * x is f32 for the float weight types and a quantized row for block types
 * (quant.h). Float types, fixed order: 8 partial sums over blocks of 8
 * elements, combined as ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)), then the scalar
 * tail added last. */
typedef float (*colibri_dot_fn)(const void *w, const void *x, int64_t n);
float colibri_dot_f32(const void *w, const void *x, int64_t n);   /* w, x: [n] f32 */
float colibri_dot_f16(const void *w, const void *x, int64_t n);   /* w: [n] f16, x: [n] f32 */
float colibri_dot_bf16(const void *w, const void *x, int64_t n);  /* w: [n] bf16, x: [n] f32 */

/* ---- exp ---------------------------------------------------------------------
 * colibri_expf(x): e^x in f32 from IEEE multiplies, adds and subtracts only
 * (no FMA, no libm), so every platform and every ISA's vector version
 * (x86_avx512/ops.c, x86_avx2/ops.c) gives the same bits:
 *   x > EXP_MAX → +inf;  x < EXP_MIN → 0 (the result is below 2^-150);  NaN → NaN;
 *   n = (x·LOG2E + ROUND) − ROUND          round(x / ln 2), ties to even
 *   r = (x − n·LN2_HI) − n·LN2_LO          LN2_HI has 15 significant bits: n·LN2_HI exact
 *   p = Horner(C7, C6, …, C2, 1, 1)(r)     Taylor's 1/k!: e^r within ~1e-9 on |r| <= ln2/2
 *   e^x = (p · 2^h) · 2^(n−h),  h = n >> 1  (both powers normal; one rounding at most)
 * Measured against double exp: within 2 ulp over [-87, 88.7] (tests/c/test_core.c). */
#define COLIBRI_EXP_MAX 88.72283172607421875f   /* the largest f32 whose e^x is finite */
#define COLIBRI_EXP_MIN -104.0f
#define COLIBRI_EXP_LOG2E 1.44269502162933349609375f
#define COLIBRI_EXP_ROUND 12582912.0f        /* 1.5 · 2^23 */
#define COLIBRI_EXP_LN2_HI 0.693145751953125f
#define COLIBRI_EXP_LN2_LO 1.428606765330187045e-6f
#define COLIBRI_EXP_C7 (1.0f / 5040.0f)
#define COLIBRI_EXP_C6 (1.0f / 720.0f)
#define COLIBRI_EXP_C5 (1.0f / 120.0f)
#define COLIBRI_EXP_C4 (1.0f / 24.0f)
#define COLIBRI_EXP_C3 (1.0f / 6.0f)
#define COLIBRI_EXP_C2 0.5f
float colibri_expf(float x);

/* 2^k as a float for k in [-126, 127]. */
static inline float colibri_exp2i(int32_t k) {
    union { uint32_t u; float f; } v = {(uint32_t)(k + 127) << 23};
    return v.f;
}

/* Sum of x: [n] in dot order (8 partial sums, combined pairwise, tail last). */
float colibri_sum_f32(const float *x, int64_t n);

/* ---- row-wise ops --------------------------------------------------------- */
/* y = (x * 1/sqrt(mean(x^2) + eps)) * w ; x, w, y: [n]; y may alias x. */
void colibri_rmsnorm_apply(const float *x, const float *w, int64_t n, float eps, float *y);
/* In place softmax over x: [n]: subtract the max, colibri_expf, multiply by
 * 1/sum (colibri_sum_f32's order). */
void colibri_softmax_apply(float *x, int64_t n);
/* cos_sin: [head_dim] = cos[0..hd/2) then sin[0..hd/2) for this position.
 * Rotates u: [head_dim] in place in the rotate-half (NeoX / HF) layout. */
void colibri_rope_apply(float *u, const float *cos_sin, int32_t head_dim);
/* The same rotation on adjacent pairs (u[2i], u[2i+1]) (GGUF llama q/k row order). */
void colibri_rope_apply_interleaved(float *u, const float *cos_sin, int32_t head_dim);
/* cos_sin: [head_dim] for position pos: theta_i = (float)pos * inv_freq[i]
 * in f32, cos_sin[i] = cosf(theta_i)*factor, cos_sin[hd/2+i] = sinf(theta_i)*factor. */
void colibri_rope_table(const float *inv_freq, int32_t head_dim, int32_t pos, float factor,
                        float *cos_sin);
/* g: [n] <- silu(g) * u, silu(z) = z / (1 + exp(-z)). */
void colibri_silu_mul(float *g, const float *u, int64_t n);
/* g: [n] <- c * sigmoid(alpha * c) * (v + 1) with c = min(g, limit) and
 * v = clamp(u, -limit, limit) (gpt-oss's clamped SwiGLU; NaN stays NaN). */
void colibri_swiglu_clamped(float *g, const float *u, int64_t n, float alpha, float limit);
/* out: [n_cols] = sum over j of w[j] * rows[j], rows[j] = rows + j * stride
 * elements (f32, or f16 widened exactly), each element summed from 0 in j
 * order with a product then a sum (exactly `memset 0; for j: out += w[j] *
 * row j`). Nothing may overlap out. */
void colibri_weighted_sum_f32(float *restrict out, const float *restrict w, const void *restrict rows,
                              int64_t stride, int32_t n, int64_t n_cols);
void colibri_weighted_sum_f16(float *restrict out, const float *restrict w, const void *restrict rows,
                              int64_t stride, int32_t n, int64_t n_cols);
/* 1 / (1 + exp(-z)). */
float colibri_sigmoid(float z);

#endif /* COLIBRI_KERNELS_H */
