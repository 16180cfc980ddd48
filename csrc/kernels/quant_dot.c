/*
 * quant_dot.c — scalar reference dot products of a Q8_0 / Q4_0 / Q4_1 weight
 * row with a Q8_H activation row: an exact int32 sum per block (each half's
 * sum of products times its multiplier k), then one fixed float order over the
 * blocks (see quant.h).
 */
#include "quant.h"

/* ---- the integer part of one block -------------------------------------------- */

/* k[0] * I_0 + k[1] * I_1 for q_w[j] = q[j]: [32] the weight's signed quants. */
static int32_t colibri_block_dot_halves(const int8_t q[32], const colibri_block_q8_h *a) {
    int32_t isum = 0;
    for (int h = 0; h < 2; h++) {
        int32_t dot = 0;
        for (int j = 16 * h; j < 16 * h + 16; j++) dot += (int32_t)q[j] * a->qs[j];
        isum += a->k[h] * dot;
    }
    return isum;
}

int32_t colibri_block_dot_q8_0(const colibri_block_q8_0 *w, const colibri_block_q8_h *a) {
    return colibri_block_dot_halves(w->qs, a);
}

int32_t colibri_block_dot_q4_0(const colibri_block_q4_0 *w, const colibri_block_q8_h *a) {
    int8_t q[COLIBRI_QK];   /* q: [32] nib - 8 in element order */
    for (int j = 0; j < COLIBRI_QK / 2; j++) {
        q[j] = (int8_t)((w->qs[j] & 0x0f) - 8);
        q[j + COLIBRI_QK / 2] = (int8_t)((w->qs[j] >> 4) - 8);
    }
    return colibri_block_dot_halves(q, a);
}

int32_t colibri_block_dot_q4_1(const colibri_block_q4_1 *w, const colibri_block_q8_h *a) {
    int8_t q[COLIBRI_QK];   /* q: [32] nib in element order */
    for (int j = 0; j < COLIBRI_QK / 2; j++) {
        q[j] = (int8_t)(w->qs[j] & 0x0f);
        q[j + COLIBRI_QK / 2] = (int8_t)(w->qs[j] >> 4);
    }
    return colibri_block_dot_halves(q, a);
}

/* ---- rows ------------------------------------------------------------------------ */

float colibri_vec_dot_q8_0_q8_h(const void *wv, const void *av, int64_t n) {
    const colibri_block_q8_0 *w = (const colibri_block_q8_0 *)wv;   /* w: [n/32] */
    const colibri_block_q8_h *a = (const colibri_block_q8_h *)av;   /* a: [n/32] */
    float acc = 0.0f;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        float scale = colibri_f16_to_f32(w[i].d) * a[i].d;
        acc += (float)colibri_block_dot_q8_0(&w[i], &a[i]) * scale;
    }
    return acc;
}

float colibri_vec_dot_q4_0_q8_h(const void *wv, const void *av, int64_t n) {
    const colibri_block_q4_0 *w = (const colibri_block_q4_0 *)wv;   /* w: [n/32] */
    const colibri_block_q8_h *a = (const colibri_block_q8_h *)av;   /* a: [n/32] */
    float acc = 0.0f;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        float scale = colibri_f16_to_f32(w[i].d) * a[i].d;
        acc += (float)colibri_block_dot_q4_0(&w[i], &a[i]) * scale;
    }
    return acc;
}

/* sum_j (d_w nib_j + m_w)(d_a k_h q_j) = d_w d_a isum + m_w (d_a (sum[0] + sum[1])),
 * the activation's sums carrying k. */
float colibri_vec_dot_q4_1_q8_h(const void *wv, const void *av, int64_t n) {
    const colibri_block_q4_1 *w = (const colibri_block_q4_1 *)wv;   /* w: [n/32] */
    const colibri_block_q8_h *a = (const colibri_block_q8_h *)av;   /* a: [n/32] */
    float acc = 0.0f;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        float scale = colibri_f16_to_f32(w[i].d) * a[i].d;
        float offset = colibri_f16_to_f32(w[i].m) * (a[i].d * (float)(a[i].sum[0] + a[i].sum[1]));
        acc += (float)colibri_block_dot_q4_1(&w[i], &a[i]) * scale + offset;
    }
    return acc;
}
