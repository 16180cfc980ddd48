/*
 * x86_avx_vnni/gemm_quant.c — the multi-token block kernels (gemm) with
 * AVX-VNNI: the 8-row panel driver of ../x86_avx2/gemm_panel.h with one
 * vpdpbusd per token, 4-byte group and 8 rows (Q8_0 weights offset to
 * unsigned by 128, nibbles as they are), a sum per token and half, times the
 * token's multiplier of the half (vpmulld), added to its -c · (sum_0 + sum_1)
 * correction. Per token, block and 8 rows: 12 integer operations where AVX2
 * needs 18 (Q4) or 32 (Q8_0). Bitwise equal to quant_dot.c.
 */
#include "../x86_avx2/gemm_panel.h"
#include "vnni.h"

/* Q8_0: w + 128 = w ^ 0x80 as unsigned bytes. */
static inline void colibri_p8_fill_q8_0_vnni(colibri_panel8 *p, int64_t b, const char *const blk[8]) {
    __m256i flip = _mm256_set1_epi8((char)0x80);
    p->d[b] = colibri_p8_f16(blk, 0);
    colibri_p8_transpose(blk, 2, p->qs[b]);
    colibri_p8_transpose(blk, 18, p->qs[b] + 4);
    for (int g = 0; g < 8; g++) p->qs[b][g] = _mm256_xor_si256(p->qs[b][g], flip);
}

static inline void colibri_p8_dot4_vnni(const colibri_panel8 p[1], int64_t b, const char *const a[4],
                                        const int32_t start[4], const int16_t k[4][2], __m256i sums[1][4]) {
    __m256i *isum = sums[0];
    for (int j = 0; j < 4; j++) isum[j] = _mm256_set1_epi32(start[j]);
    COLIBRI_P8_UNROLL
    for (int h = 0; h < 2; h++) {
        __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;   /* the half's sums so far */
        COLIBRI_P8_UNROLL
        for (int g = 4 * h; g < 4 * h + 4; g++) {
            __m256i w = p->qs[b][g];
            s0 = COLIBRI_DPBUSD(s0, w, colibri_p8_bcast(a[0], g));
            s1 = COLIBRI_DPBUSD(s1, w, colibri_p8_bcast(a[1], g));
            s2 = COLIBRI_DPBUSD(s2, w, colibri_p8_bcast(a[2], g));
            s3 = COLIBRI_DPBUSD(s3, w, colibri_p8_bcast(a[3], g));
        }
        isum[0] = _mm256_add_epi32(isum[0], _mm256_mullo_epi32(s0, _mm256_set1_epi32(k[0][h])));
        isum[1] = _mm256_add_epi32(isum[1], _mm256_mullo_epi32(s1, _mm256_set1_epi32(k[1][h])));
        isum[2] = _mm256_add_epi32(isum[2], _mm256_mullo_epi32(s2, _mm256_set1_epi32(k[2][h])));
        isum[3] = _mm256_add_epi32(isum[3], _mm256_mullo_epi32(s3, _mm256_set1_epi32(k[3][h])));
    }
}

COLIBRI_PANEL8_GEMM(colibri_gemm_q8_0_avx_vnni, colibri_block_q8_0, 0, 128, colibri_p8_fill_q8_0_vnni,
                    colibri_p8_dot4_vnni, COLIBRI_P8_NO_OFFSET, DIRECT, 1, 4)
COLIBRI_PANEL8_GEMM(colibri_gemm_q4_0_avx_vnni, colibri_block_q4_0, 0, 8, colibri_p8_fill_q4_0, colibri_p8_dot4_vnni,
                    COLIBRI_P8_NO_OFFSET, DIRECT, 1, 4)
COLIBRI_PANEL8_GEMM(colibri_gemm_q4_1_avx_vnni, colibri_block_q4_1, 1, 0, colibri_p8_fill_q4_1, colibri_p8_dot4_vnni,
                    COLIBRI_P8_Q4_1_OFFSET, DIRECT, 1, 4)
