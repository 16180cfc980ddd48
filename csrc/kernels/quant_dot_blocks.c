/*
 * quant_dot_blocks.c — scalar reference dot products of the types of
 * quant_blocks.h with a Q8_0 activation row (Q5_1: Q8_1), the contract stated
 * there: per group of 32 elements an exact integer sum, then one float step,
 * groups in order.
 *
 * Each type has a group reader that unpacks group g of a weight row into the
 * signed integer quants, the integer scales and mins of its two halves (a
 * 32-element sub-block gives both halves the same), and the f32 block scales;
 * one loop (colibri_dot_groups) then does the arithmetic for every type.
 */
#include "quant.h"

typedef struct colibri_group {
    int8_t q[32];    /* q: [32] signed integer quants of the group's elements */
    int32_t sc[2];   /* integer scales of elements 0..15 and 16..31 */
    int32_t m[2];    /* integer mins of the two halves (0 for types without mins) */
    float d, dmin;   /* the f32 block scales the integer sums are multiplied by */
} colibri_group;

typedef void (*colibri_group_fn)(const void *row, int64_t g, colibri_group *out);

/* acc += (float)isum_g * (d * d_a) [- (float)msum_g * (dmin * d_a)] over the n/32
 * groups, with isum_g = sum_h sc[h] * sum_{j in half h} q_j a_j and
 * msum_g = sum_h m[h] * sum_{j in half h} a_j (computed only when has_min). */
static float colibri_dot_groups(colibri_group_fn read, int has_min, const void *w, const void *av, int64_t n) {
    const colibri_block_q8_0 *a = (const colibri_block_q8_0 *)av;   /* a: [n/32] */
    float acc = 0.0f;
    colibri_group grp;
    for (int64_t g = 0; g < n / COLIBRI_QK; g++) {
        read(w, g, &grp);
        int32_t isum = 0, msum = 0;
        for (int h = 0; h < 2; h++) {
            int32_t dot = 0, sum = 0;
            for (int j = 16 * h; j < 16 * h + 16; j++) dot += grp.q[j] * a[g].qs[j], sum += a[g].qs[j];
            isum += grp.sc[h] * dot;
            msum += grp.m[h] * sum;
        }
        float da = colibri_f16_to_f32(a[g].d);
        if (has_min) {
            acc += (float)isum * (grp.d * da) - (float)msum * (grp.dmin * da);
        } else {
            acc += (float)isum * (grp.d * da);
        }
    }
    return acc;
}

/* Scales and mins of a group whose two halves share them. */
static void colibri_group_whole(colibri_group *out, int32_t sc, int32_t m, float d, float dmin) {
    out->sc[0] = out->sc[1] = sc;
    out->m[0] = out->m[1] = m;
    out->d = d;
    out->dmin = dmin;
}

static uint8_t colibri_nibble_of(const uint8_t qs[16], int j) {
    return j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4;
}

/* ---- group readers ---------------------------------------------------------------- */

static void colibri_group_q5_0(const void *row, int64_t g, colibri_group *out) {
    const colibri_block_q5_0 *b = (const colibri_block_q5_0 *)row + g;
    for (int j = 0; j < 32; j++) out->q[j] = (int8_t)(colibri_q5_quant(b->qh, b->qs, j) - 16);
    colibri_group_whole(out, 1, 0, colibri_f16_to_f32(b->d), 0.0f);
}

static void colibri_group_iq4_nl(const void *row, int64_t g, colibri_group *out) {
    const colibri_block_iq4_nl *b = (const colibri_block_iq4_nl *)row + g;
    for (int j = 0; j < 32; j++) out->q[j] = colibri_iq4_values[colibri_nibble_of(b->qs, j)];
    colibri_group_whole(out, 1, 0, colibri_f16_to_f32(b->d), 0.0f);
}

static void colibri_group_mxfp4(const void *row, int64_t g, colibri_group *out) {
    const colibri_block_mxfp4 *b = (const colibri_block_mxfp4 *)row + g;
    for (int j = 0; j < 32; j++) out->q[j] = colibri_fp4_values[colibri_nibble_of(b->qs, j)];
    colibri_group_whole(out, 1, 0, colibri_e8m0_half(b->e), 0.0f);
}

static void colibri_group_iq4_xs(const void *row, int64_t g, colibri_group *out) {
    const colibri_block_iq4_xs *b = (const colibri_block_iq4_xs *)row + g / 8;
    int s = (int)(g % 8);
    for (int j = 0; j < 32; j++) out->q[j] = colibri_iq4_values[colibri_nibble_of(b->qs + 16 * s, j)];
    colibri_group_whole(out, colibri_iq4_xs_scale(b, s) - 32, 0, colibri_f16_to_f32(b->d), 0.0f);
}

static void colibri_group_q2_k(const void *row, int64_t g, colibri_group *out) {
    const colibri_block_q2_k *b = (const colibri_block_q2_k *)row + g / 8;
    int base = 32 * (int)(g % 8);
    for (int j = 0; j < 32; j++) out->q[j] = (int8_t)colibri_q2_bits(b->qs, base + j);
    for (int h = 0; h < 2; h++) {
        out->sc[h] = b->scales[base / 16 + h] & 0x0f;
        out->m[h] = b->scales[base / 16 + h] >> 4;
    }
    out->d = colibri_f16_to_f32(b->d);
    out->dmin = colibri_f16_to_f32(b->dmin);
}

static void colibri_group_q3_k(const void *row, int64_t g, colibri_group *out) {
    const colibri_block_q3_k *b = (const colibri_block_q3_k *)row + g / 8;
    int base = 32 * (int)(g % 8);
    uint8_t sc[16];
    colibri_q3_k_scales(b->scales, sc);
    for (int j = 0; j < 32; j++) {
        int e = base + j;
        out->q[j] = (int8_t)(colibri_q2_bits(b->qs, e) - ((b->hmask[e % 32] >> (e / 32)) & 1 ? 0 : 4));
    }
    for (int h = 0; h < 2; h++) out->sc[h] = sc[base / 16 + h] - 32, out->m[h] = 0;
    out->d = colibri_f16_to_f32(b->d);
    out->dmin = 0.0f;
}

static void colibri_group_q4_k(const void *row, int64_t g, colibri_group *out) {
    const colibri_block_q4_k *b = (const colibri_block_q4_k *)row + g / 8;
    int s = (int)(g % 8);
    uint8_t sc, m;
    colibri_k_scale_min(b->scales, s, &sc, &m);
    for (int j = 0; j < 32; j++) out->q[j] = (int8_t)colibri_k_nibble(b->qs, 32 * s + j);
    colibri_group_whole(out, sc, m, colibri_f16_to_f32(b->d), colibri_f16_to_f32(b->dmin));
}

static void colibri_group_q5_k(const void *row, int64_t g, colibri_group *out) {
    const colibri_block_q5_k *b = (const colibri_block_q5_k *)row + g / 8;
    int s = (int)(g % 8);
    uint8_t sc, m;
    colibri_k_scale_min(b->scales, s, &sc, &m);
    for (int j = 0; j < 32; j++) {
        out->q[j] = (int8_t)(colibri_k_nibble(b->qs, 32 * s + j) | ((b->qh[j] >> s) & 1) << 4);
    }
    colibri_group_whole(out, sc, m, colibri_f16_to_f32(b->d), colibri_f16_to_f32(b->dmin));
}

static void colibri_group_q6_k(const void *row, int64_t g, colibri_group *out) {
    const colibri_block_q6_k *b = (const colibri_block_q6_k *)row + g / 8;
    int base = 32 * (int)(g % 8);
    for (int j = 0; j < 32; j++) out->q[j] = (int8_t)(colibri_q6_k_quant(b, base + j) - 32);
    for (int h = 0; h < 2; h++) out->sc[h] = b->scales[base / 16 + h], out->m[h] = 0;
    out->d = colibri_f16_to_f32(b->d);
    out->dmin = 0.0f;
}

/* ---- rows --------------------------------------------------------------------------- */

float colibri_vec_dot_q5_0(const void *w, const void *a, int64_t n) { return colibri_dot_groups(colibri_group_q5_0, 0, w, a, n); }
float colibri_vec_dot_iq4_nl(const void *w, const void *a, int64_t n) { return colibri_dot_groups(colibri_group_iq4_nl, 0, w, a, n); }
float colibri_vec_dot_mxfp4(const void *w, const void *a, int64_t n) { return colibri_dot_groups(colibri_group_mxfp4, 0, w, a, n); }
float colibri_vec_dot_iq4_xs(const void *w, const void *a, int64_t n) { return colibri_dot_groups(colibri_group_iq4_xs, 0, w, a, n); }
float colibri_vec_dot_q2_k(const void *w, const void *a, int64_t n) { return colibri_dot_groups(colibri_group_q2_k, 1, w, a, n); }
float colibri_vec_dot_q3_k(const void *w, const void *a, int64_t n) { return colibri_dot_groups(colibri_group_q3_k, 0, w, a, n); }
float colibri_vec_dot_q4_k(const void *w, const void *a, int64_t n) { return colibri_dot_groups(colibri_group_q4_k, 1, w, a, n); }
float colibri_vec_dot_q5_k(const void *w, const void *a, int64_t n) { return colibri_dot_groups(colibri_group_q5_k, 1, w, a, n); }
float colibri_vec_dot_q6_k(const void *w, const void *a, int64_t n) { return colibri_dot_groups(colibri_group_q6_k, 0, w, a, n); }

/* Q5_1 · Q8_1, as Q4_1: sum_j (d_w q_j + m_w)(d_a a_j) = d_w d_a sum_j q_j a_j + m_w s_a. */
float colibri_vec_dot_q5_1(const void *wv, const void *av, int64_t n) {
    const colibri_block_q5_1 *w = (const colibri_block_q5_1 *)wv;   /* w: [n/32] */
    const colibri_block_q8_1 *a = (const colibri_block_q8_1 *)av;   /* a: [n/32] */
    float acc = 0.0f;
    for (int64_t i = 0; i < n / COLIBRI_QK; i++) {
        int32_t isum = 0;
        for (int j = 0; j < 32; j++) isum += colibri_q5_quant(w[i].qh, w[i].qs, j) * a[i].qs[j];
        float scale = colibri_f16_to_f32(w[i].d) * colibri_f16_to_f32(a[i].d);
        float offset = colibri_f16_to_f32(w[i].m) * colibri_f16_to_f32(a[i].s);
        acc += (float)isum * scale + offset;
    }
    return acc;
}
