/*
 * x86_amx/tiles.h — what the AMX gemms (gemm_blocks.c: AMX-INT8, gemm_halves.c:
 * AMX-BF16) share: the tile configuration, the 16 x 16 float transpose that
 * turns a tile's [row, token] sums into y's [token, row], and the unroll that
 * keeps 16 accumulators in registers.
 */
#ifndef COLIBRI_X86_AMX_TILES_H
#define COLIBRI_X86_AMX_TILES_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* The tile configuration, palette 1 (Intel SDM, LDTILECFG). */
typedef struct colibri_amx_config {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];   /* colsb: [tile] bytes a row */
    uint8_t rows[16];     /* rows: [tile] */
} colibri_amx_config;

/* Configures tiles tmm0..tmm7 as rows[i] x colsb[i] bytes (0 x 0: unused). */
static inline void colibri_amx_configure(const uint8_t rows[8], const uint16_t colsb[8]) {
    colibri_amx_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) cfg.rows[i] = rows[i], cfg.colsb[i] = colsb[i];
    _tile_loadconfig(&cfg);
}

/* out[t] lane r = in[r] lane t, 16 x 16 floats: unpacks of pairs, then of quads, then
 * 128-bit lanes gathered by two rounds of shuffle_f32x4. The loops unrolled: a variable
 * index keeps in and out (the float step's 16 accumulators) on the stack, a load and a
 * store each a row and group. */
static inline __attribute__((always_inline)) void colibri_transpose16x16_ps(const __m512 in[16], __m512 out[16]) {
    __m512 a[16], b[16];
    _Pragma("GCC unroll 8")
    for (int i = 0; i < 8; i++) {
        a[2 * i] = _mm512_unpacklo_ps(in[2 * i], in[2 * i + 1]);
        a[2 * i + 1] = _mm512_unpackhi_ps(in[2 * i], in[2 * i + 1]);
    }
    _Pragma("GCC unroll 4")
    for (int i = 0; i < 4; i++) {   /* b[4i + c], 128-bit lane L: column 4L + c of rows 4i..4i+3 */
        __m512d lo = _mm512_castps_pd(a[4 * i]), hi = _mm512_castps_pd(a[4 * i + 2]);
        __m512d lo1 = _mm512_castps_pd(a[4 * i + 1]), hi1 = _mm512_castps_pd(a[4 * i + 3]);
        b[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo, hi));
        b[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo, hi));
        b[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo1, hi1));
        b[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo1, hi1));
    }
    _Pragma("GCC unroll 4")
    for (int c = 0; c < 4; c++) {
        __m512 p = _mm512_shuffle_f32x4(b[c], b[4 + c], 0x88), q = _mm512_shuffle_f32x4(b[c], b[4 + c], 0xdd);
        __m512 p1 = _mm512_shuffle_f32x4(b[8 + c], b[12 + c], 0x88), q1 = _mm512_shuffle_f32x4(b[8 + c], b[12 + c], 0xdd);
        out[c] = _mm512_shuffle_f32x4(p, p1, 0x88);
        out[8 + c] = _mm512_shuffle_f32x4(p, p1, 0xdd);
        out[4 + c] = _mm512_shuffle_f32x4(q, q1, 0x88);
        out[12 + c] = _mm512_shuffle_f32x4(q, q1, 0xdd);
    }
}

/* The float step's rows (and every loop over the accumulators) unrolled, so that the 16
 * accumulators live in registers. */
#define COLIBRI_AMX_UNROLL _Pragma("GCC unroll 16")

#define COLIBRI_AMX_TOKENS 16   /* tokens per tile: the lanes of the float step */

#endif /* COLIBRI_X86_AMX_TILES_H */
