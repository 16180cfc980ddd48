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
float colibri_f16_to_f32(uint16_t h);
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

/* ---- row-wise ops --------------------------------------------------------- */
/* y = (x * 1/sqrt(mean(x^2) + eps)) * w ; x, w, y: [n]; y may alias x. */
void colibri_rmsnorm_apply(const float *x, const float *w, int64_t n, float eps, float *y);
/* In place softmax over x: [n]: subtract the max, exp, multiply by 1/sum. */
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
/* out: [n_cols] = sum over j of w[j] * rows[j], rows[j] = rows + j * stride
 * (floats), each element summed from 0 in j order with a product then a sum
 * (exactly `memset 0; for j: out += w[j] * row j`). Nothing may overlap out. */
void colibri_weighted_sum_f32(float *restrict out, const float *restrict w, const float *restrict rows,
                              int64_t stride, int32_t n, int64_t n_cols);
/* 1 / (1 + exp(-z)). */
float colibri_sigmoid(float z);

#endif /* COLIBRI_KERNELS_H */
