/*
 * x86_avx512/transpose16.h — the row-panel gather the AVX-512 gemms share
 * (gemm_quant.c, gemm_blocks.c): 16 bytes of each of 16 weight rows into four
 * 16-lane vectors by loads and in-register transposes (vpgatherdd measured
 * about 20 cycles a vector here, 3-5 times slower).
 */
#ifndef COLIBRI_AVX512_TRANSPOSE16_H
#define COLIBRI_AVX512_TRANSPOSE16_H

#include <immintrin.h>
#include <stdint.h>

/* out[g], lane r (g < 4): dword g of the 16 bytes at blk[r] + at. Rows
 * k, k+4, k+8, k+12 fill the 128-bit lanes of z[k]; a 4x4 dword transpose
 * inside each 128-bit lane then puts row 4i+k at dword 4i+k. */
static inline void colibri_transpose16(const char *const blk[16], int64_t at, __m512i out[4]) {
    __m512i z[4];   /* z: [k] rows k + 4i in 128-bit lane i */
    for (int k = 0; k < 4; k++) {
        z[k] = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(blk[k] + at)));
        z[k] = _mm512_inserti32x4(z[k], _mm_loadu_si128((const __m128i *)(blk[k + 4] + at)), 1);
        z[k] = _mm512_inserti32x4(z[k], _mm_loadu_si128((const __m128i *)(blk[k + 8] + at)), 2);
        z[k] = _mm512_inserti32x4(z[k], _mm_loadu_si128((const __m128i *)(blk[k + 12] + at)), 3);
    }
    __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
    __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
    out[0] = _mm512_unpacklo_epi64(t0, t2);
    out[1] = _mm512_unpackhi_epi64(t0, t2);
    out[2] = _mm512_unpacklo_epi64(t1, t3);
    out[3] = _mm512_unpackhi_epi64(t1, t3);
}

#endif /* COLIBRI_AVX512_TRANSPOSE16_H */
