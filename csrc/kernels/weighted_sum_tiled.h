/*
 * weighted_sum_tiled.h — the loop of every SIMD version of attention's value
 * sum (colibri_weighted_sum_f32 / _f16, kernels.h): out[c] = sum over j of
 * w[j] * rows[j][c], bitwise the reference (ops.c), for any vector width.
 *
 * The rows come in tiles of COLIBRI_WS_ROW_TILE. Each tile is added into
 * COLIBRI_WS_VECTORS vectors of columns at a time (accumulators held in
 * registers over the tile's rows), then 4, then 1; the last n_cols % LANES
 * columns go to the reference. A tile's rows are read from memory by its
 * first group of columns and from L1 by the others, so a head wider than
 * one group still costs one sweep over the rows. (Separate sweeps per group
 * of columns, each reading a part of every row's lines, streamed the f16
 * values of 128-wide heads at 17-18 GB/s from DRAM on one x86 thread; one
 * sweep 31-37.)
 *
 * Each column is its own chain, `acc + w[j] * row_j[c]` as a separate
 * multiply and add in j order (f16 widened exactly first), starting from
 * zero (no rows: zeros); a tile carries the running sums to the next in
 * out, exactly.
 *
 * Defines NAME over rows of RTYPE with vectors VEC of LANES floats:
 * LOAD(row, i) widens elements i.. of a row; ZERO(), LOADF(p), STOREF(p, v),
 * SPLAT(f) and MULADD(acc, p, v) = acc + p * v (rounded twice) are the
 * ISA's; TAIL is the reference for the last columns.
 */
#ifndef COLIBRI_WEIGHTED_SUM_TILED_H
#define COLIBRI_WEIGHTED_SUM_TILED_H

#define COLIBRI_WS_ROW_TILE 32   /* rows added into every column before the next rows */
#define COLIBRI_WS_VECTORS 8     /* column vectors at a time */

#define COLIBRI_WEIGHTED_SUM_TILED(NAME, RTYPE, VEC, LANES, LOAD, ZERO, LOADF, STOREF, SPLAT, MULADD, TAIL) \
    /* out[c..c + LANES*k) (+)= rows j0..j0+jn-1; k a constant once inlined */                               \
    static inline __attribute__((always_inline)) void NAME##_columns(                                         \
        float *restrict out, const float *restrict w, const RTYPE *restrict rows, int64_t stride, int32_t jn, \
        const int k, int first) {                                                                            \
        VEC acc[COLIBRI_WS_VECTORS];   /* acc: [k] LANES columns each */                                     \
        _Pragma("GCC unroll 8") for (int v = 0; v < k; v++) acc[v] = first ? ZERO() : LOADF(out + LANES * v); \
        for (int32_t j = 0; j < jn; j++) {                                                                   \
            const RTYPE *r = rows + j * stride;   /* r: [LANES*k] */                                         \
            VEC p = SPLAT(w[j]);                                                                             \
            _Pragma("GCC unroll 8") for (int v = 0; v < k; v++) acc[v] = MULADD(acc[v], p, LOAD(r, LANES * v)); \
        }                                                                                                    \
        _Pragma("GCC unroll 8") for (int v = 0; v < k; v++) STOREF(out + LANES * v, acc[v]);                 \
    }                                                                                                        \
    void NAME(float *restrict out, const float *restrict w, const void *restrict rows, int64_t stride,       \
              int32_t n, int64_t n_cols) {                                                                   \
        const RTYPE *r = (const RTYPE *)rows;   /* r: [n, stride] */                                         \
        int64_t vec_cols = n_cols / LANES * LANES;                                                           \
        for (int32_t j0 = 0; j0 == 0 || j0 < n; j0 += COLIBRI_WS_ROW_TILE) {   /* n = 0: one empty tile, zeros */ \
            int32_t jn = n - j0 < COLIBRI_WS_ROW_TILE ? n - j0 : COLIBRI_WS_ROW_TILE;                        \
            const RTYPE *tile = r + j0 * stride;   /* tile: [jn, stride] */                                  \
            int64_t c = 0;                                                                                   \
            for (; c + LANES * COLIBRI_WS_VECTORS <= vec_cols; c += LANES * COLIBRI_WS_VECTORS) {            \
                NAME##_columns(out + c, w + j0, tile + c, stride, jn, COLIBRI_WS_VECTORS, j0 == 0);          \
            }                                                                                                \
            if (c + LANES * 4 <= vec_cols) NAME##_columns(out + c, w + j0, tile + c, stride, jn, 4, j0 == 0), c += LANES * 4; \
            for (; c < vec_cols; c += LANES) NAME##_columns(out + c, w + j0, tile + c, stride, jn, 1, j0 == 0); \
        }                                                                                                    \
        if (vec_cols < n_cols) TAIL(out + vec_cols, w, r + vec_cols, stride, n, n_cols - vec_cols);          \
    }

#endif /* COLIBRI_WEIGHTED_SUM_TILED_H */
