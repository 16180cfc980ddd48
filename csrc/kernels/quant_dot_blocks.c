/*
 * quant_dot_blocks.c — scalar reference dot products of the types of
 * quant_blocks.h with a Q8_H (Q5_0, Q5_1, IQ4_NL) or Q8_S (the others)
 * activation row (quant.h), the contract stated in quant_blocks.h: per group
 * of 32 elements an exact integer sum, then one float step, groups in order.
 *
 * Each type has a group reader that unpacks group g of a weight row into the
 * signed integer quants and (quant_blocks.h's colibri_group_scales) the
 * integer scales and mins of its two halves and the f32 block scales; one
 * loop (colibri_dot_groups) then does the arithmetic for every type.
 */
#include "quant.h"

typedef struct colibri_group {
    int8_t q[32];                /* q: [32] signed integer quants of the group's elements */
    colibri_group_scales s;      /* S_h, M_h, D, DMIN (quant_blocks.h) */
} colibri_group;

typedef void (*colibri_group_fn)(const void *row, int64_t g, colibri_group *out);

/* acc += (float)isum_g * (d * d_a) [- (float)msum_g * (dmin * d_a)] over the n/32
 * groups, with isum_g = sum_h (sc[h] * k[h]) * sum_{j in half h} q_j a_j and
 * msum_g = sum_h m[h] * (the activation's half sum h, which carries k) (only when
 * has_min); av: [n/32] Q8_H blocks (q8h) or Q8_S blocks (k = 1). */
static float colibri_dot_groups(colibri_group_fn read, int has_min, int q8h, const void *w, const void *av,
                                int64_t n) {
    static const int16_t ones[2] = {1, 1};
    float acc = 0.0f;
    colibri_group grp;
    for (int64_t g = 0; g < n / COLIBRI_QK; g++) {
        const colibri_block_q8_h *ah = (const colibri_block_q8_h *)av + g;
        const colibri_block_q8_s *as = (const colibri_block_q8_s *)av + g;
        float da = q8h ? ah->d : as->d;
        const int16_t *k = q8h ? ah->k : ones, *sum = q8h ? ah->sum : as->sum;
        const int8_t *qs = q8h ? ah->qs : as->qs;   /* qs: [32] */
        read(w, g, &grp);
        int32_t isum = 0, msum = 0;
        for (int h = 0; h < 2; h++) {
            int32_t dot = 0;
            for (int j = 16 * h; j < 16 * h + 16; j++) dot += grp.q[j] * qs[j];
            isum += (grp.s.sc[h] * k[h]) * dot;
            msum += grp.s.m[h] * sum[h];
        }
        if (has_min) {
            acc += (float)isum * (grp.s.d * da) - (float)msum * (grp.s.dmin * da);
        } else {
            acc += (float)isum * (grp.s.d * da);
        }
    }
    return acc;
}

static uint8_t colibri_nibble_of(const uint8_t qs[16], int j) {
    return j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4;
}

/* ---- group readers: the quants here, the scales from quant_blocks.h ------------------- */

static void colibri_group_q5_0(const void *row, int64_t g, colibri_group *out) {
    const colibri_block_q5_0 *b = (const colibri_block_q5_0 *)row + g;
    for (int j = 0; j < 32; j++) out->q[j] = (int8_t)(colibri_q5_quant(b->qh, b->qs, j) - 16);
    colibri_q5_0_group_scales(row, g, &out->s);
}

static void colibri_group_q5_1(const void *row, int64_t g, colibri_group *out) {
    const colibri_block_q5_1 *b = (const colibri_block_q5_1 *)row + g;
    for (int j = 0; j < 32; j++) out->q[j] = (int8_t)colibri_q5_quant(b->qh, b->qs, j);
    colibri_q5_1_group_scales(row, g, &out->s);
}

static void colibri_group_iq4_nl(const void *row, int64_t g, colibri_group *out) {
    const colibri_block_iq4_nl *b = (const colibri_block_iq4_nl *)row + g;
    for (int j = 0; j < 32; j++) out->q[j] = colibri_iq4_values[colibri_nibble_of(b->qs, j)];
    colibri_iq4_nl_group_scales(row, g, &out->s);
}

static void colibri_group_mxfp4(const void *row, int64_t g, colibri_group *out) {
    const colibri_block_mxfp4 *b = (const colibri_block_mxfp4 *)row + g;
    for (int j = 0; j < 32; j++) out->q[j] = colibri_fp4_values[colibri_nibble_of(b->qs, j)];
    colibri_mxfp4_group_scales(row, g, &out->s);
}

static void colibri_group_iq4_xs(const void *row, int64_t g, colibri_group *out) {
    const colibri_block_iq4_xs *b = (const colibri_block_iq4_xs *)row + g / 8;
    int s = (int)(g % 8);
    for (int j = 0; j < 32; j++) out->q[j] = colibri_iq4_values[colibri_nibble_of(b->qs + 16 * s, j)];
    colibri_iq4_xs_group_scales(row, g, &out->s);
}

/* The K types' group s (0..7) of a super-block, straight from quant_blocks.h's layouts:
 * element 32s + j of Q2_K / Q3_K has its 2 low bits at qs[32 (s/4) + j] >> 2 (s%4), Q3_K's
 * mask bit at hmask[j] >> s; Q4_K / Q5_K's nibble at qs[32 (s/2) + j] >> 4 (s%2), Q5_K's bit 4
 * at qh[j] >> s; Q6_K's low nibble at ql[64 (s/4) + 32 (s%2) + j] >> 4 ((s%4)/2), its high
 * bits at qh[32 (s/4) + j] >> 2 (s%4). */
static void colibri_group_q2_k(const void *row, int64_t g, colibri_group *out) {
    const colibri_block_q2_k *b = (const colibri_block_q2_k *)row + g / 8;
    int s = (int)(g % 8);
    const uint8_t *q = b->qs + 32 * (s / 4);
    for (int j = 0; j < 32; j++) out->q[j] = (int8_t)((q[j] >> (2 * (s % 4))) & 3);
    colibri_q2_k_group_scales(row, g, &out->s);
}

static void colibri_group_q3_k(const void *row, int64_t g, colibri_group *out) {
    const colibri_block_q3_k *b = (const colibri_block_q3_k *)row + g / 8;
    int s = (int)(g % 8);
    const uint8_t *q = b->qs + 32 * (s / 4);
    for (int j = 0; j < 32; j++) {
        out->q[j] = (int8_t)(((q[j] >> (2 * (s % 4))) & 3) - ((b->hmask[j] >> s) & 1 ? 0 : 4));
    }
    colibri_q3_k_group_scales(row, g, &out->s);
}

static void colibri_group_q4_k(const void *row, int64_t g, colibri_group *out) {
    const colibri_block_q4_k *b = (const colibri_block_q4_k *)row + g / 8;
    int s = (int)(g % 8);
    const uint8_t *q = b->qs + 32 * (s / 2);
    for (int j = 0; j < 32; j++) out->q[j] = (int8_t)((q[j] >> (4 * (s % 2))) & 0x0f);
    colibri_q4_k_group_scales(row, g, &out->s);
}

static void colibri_group_q5_k(const void *row, int64_t g, colibri_group *out) {
    const colibri_block_q5_k *b = (const colibri_block_q5_k *)row + g / 8;
    int s = (int)(g % 8);
    const uint8_t *q = b->qs + 32 * (s / 2);
    for (int j = 0; j < 32; j++) out->q[j] = (int8_t)(((q[j] >> (4 * (s % 2))) & 0x0f) | ((b->qh[j] >> s) & 1) << 4);
    colibri_q5_k_group_scales(row, g, &out->s);
}

static void colibri_group_q6_k(const void *row, int64_t g, colibri_group *out) {
    const colibri_block_q6_k *b = (const colibri_block_q6_k *)row + g / 8;
    int s = (int)(g % 8);
    const uint8_t *ql = b->ql + 64 * (s / 4) + 32 * (s % 2), *qh = b->qh + 32 * (s / 4);
    for (int j = 0; j < 32; j++) {
        out->q[j] = (int8_t)((((ql[j] >> (4 * ((s % 4) / 2))) & 0x0f) | ((qh[j] >> (2 * (s % 4))) & 3) << 4) - 32);
    }
    colibri_q6_k_group_scales(row, g, &out->s);
}

/* ---- rows --------------------------------------------------------------------------- */

float colibri_vec_dot_q5_0(const void *w, const void *a, int64_t n) { return colibri_dot_groups(colibri_group_q5_0, 0, 1, w, a, n); }
float colibri_vec_dot_q5_1(const void *w, const void *a, int64_t n) { return colibri_dot_groups(colibri_group_q5_1, 1, 1, w, a, n); }
float colibri_vec_dot_iq4_nl(const void *w, const void *a, int64_t n) { return colibri_dot_groups(colibri_group_iq4_nl, 0, 1, w, a, n); }
float colibri_vec_dot_mxfp4(const void *w, const void *a, int64_t n) { return colibri_dot_groups(colibri_group_mxfp4, 0, 0, w, a, n); }
float colibri_vec_dot_iq4_xs(const void *w, const void *a, int64_t n) { return colibri_dot_groups(colibri_group_iq4_xs, 0, 0, w, a, n); }
float colibri_vec_dot_q2_k(const void *w, const void *a, int64_t n) { return colibri_dot_groups(colibri_group_q2_k, 1, 0, w, a, n); }
float colibri_vec_dot_q3_k(const void *w, const void *a, int64_t n) { return colibri_dot_groups(colibri_group_q3_k, 0, 0, w, a, n); }
float colibri_vec_dot_q4_k(const void *w, const void *a, int64_t n) { return colibri_dot_groups(colibri_group_q4_k, 1, 0, w, a, n); }
float colibri_vec_dot_q5_k(const void *w, const void *a, int64_t n) { return colibri_dot_groups(colibri_group_q5_k, 1, 0, w, a, n); }
float colibri_vec_dot_q6_k(const void *w, const void *a, int64_t n) { return colibri_dot_groups(colibri_group_q6_k, 0, 0, w, a, n); }
