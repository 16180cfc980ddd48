/*
 * quant_dot.c — scalar reference dot products of a block-type weight row with
 * a quantized activation row: an exact int32 sum of products per block, then
 * one fixed float order over the blocks (see quant.h).
 */
#include "quant.h"

/* ---- the integer part of one block -------------------------------------------- */

int32_t colibri_block_dot_q8_0(const colibri_block_q8_0 *w, const colibri_block_q8_0 *a) {
    int32_t sum = 0;
    for (int j = 0; j < COLIBRI_QK; j++) sum += (int32_t)w->qs[j] * a->qs[j];
    return sum;
}

int32_t colibri_block_dot_q4_0(const colibri_block_q4_0 *w, const colibri_block_q8_0 *a) {
    int32_t sum = 0;
    for (int j = 0; j < COLIBRI_QK / 2; j++) {
        sum += ((w->qs[j] & 0x0f) - 8) * a->qs[j];
        sum += ((w->qs[j] >> 4) - 8) * a->qs[j + COLIBRI_QK / 2];
    }
    return sum;
}

int32_t colibri_block_dot_q4_1(const colibri_block_q4_1 *w, const colibri_block_q8_1 *a) {
    int32_t sum = 0;
    for (int j = 0; j < COLIBRI_QK / 2; j++) {
        sum += (w->qs[j] & 0x0f) * a->qs[j];
        sum += (w->qs[j] >> 4) * a->qs[j + COLIBRI_QK / 2];
    }
    return sum;
}

/* ---- rows ------------------------------------------------------------------------ */

float colibri_vec_dot_q8_0_q8_0(const void *wv, const void *av, int64_t n) {
    const colibri_block_q8_0 *w = (const colibri_block_q8_0 *)wv;   /* w: [n/32] */
    const colibri_block_q8_0 *a = (const colibri_block_q8_0 *)av;   /* a: [n/32] */
    float acc = 0.0f;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        float scale = colibri_f16_to_f32(w[i].d) * colibri_f16_to_f32(a[i].d);
        acc += (float)colibri_block_dot_q8_0(&w[i], &a[i]) * scale;
    }
    return acc;
}

float colibri_vec_dot_q4_0_q8_0(const void *wv, const void *av, int64_t n) {
    const colibri_block_q4_0 *w = (const colibri_block_q4_0 *)wv;   /* w: [n/32] */
    const colibri_block_q8_0 *a = (const colibri_block_q8_0 *)av;   /* a: [n/32] */
    float acc = 0.0f;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        float scale = colibri_f16_to_f32(w[i].d) * colibri_f16_to_f32(a[i].d);
        acc += (float)colibri_block_dot_q4_0(&w[i], &a[i]) * scale;
    }
    return acc;
}

/* sum_j (d_w nib_j + m_w)(d_a q_j) = d_w d_a sum_j nib_j q_j + m_w (d_a sum_j q_j),
 * the last factor being the activation block's s. */
float colibri_vec_dot_q4_1_q8_1(const void *wv, const void *av, int64_t n) {
    const colibri_block_q4_1 *w = (const colibri_block_q4_1 *)wv;   /* w: [n/32] */
    const colibri_block_q8_1 *a = (const colibri_block_q8_1 *)av;   /* a: [n/32] */
    float acc = 0.0f;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        float scale = colibri_f16_to_f32(w[i].d) * colibri_f16_to_f32(a[i].d);
        float offset = colibri_f16_to_f32(w[i].m) * colibri_f16_to_f32(a[i].s);
        acc += (float)colibri_block_dot_q4_1(&w[i], &a[i]) * scale + offset;
    }
    return acc;
}
