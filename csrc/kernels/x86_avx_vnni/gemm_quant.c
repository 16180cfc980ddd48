/*
 * x86_avx_vnni/gemm_quant.c — the multi-token block kernels (gemm) with
 * AVX-VNNI: the 8-row panel driver of ../x86_avx2/gemm_panel.h with one
 * vpdpbusd per token, 4-byte group and 8 rows (Q8_0 weights offset to
 * unsigned by 128, nibbles as they are), each token's accumulator starting
 * from its -c · sum a correction. Per token, block and 8 rows: 8 integer
 * operations where AVX2 needs 16 (Q4) or 32 (Q8_0). Bitwise equal to
 * quant_dot.c.
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

static inline void colibri_p8_dot4_vnni(const colibri_panel8 *p, int64_t b, const char *const a[4],
                                        const int32_t start[4], __m256i isum[4]) {
    __m256i s0 = _mm256_set1_epi32(start[0]), s1 = _mm256_set1_epi32(start[1]);
    __m256i s2 = _mm256_set1_epi32(start[2]), s3 = _mm256_set1_epi32(start[3]);
    COLIBRI_P8_UNROLL
    for (int g = 0; g < 8; g++) {
        __m256i w = p->qs[b][g];
        s0 = COLIBRI_DPBUSD(s0, w, colibri_p8_bcast(a[0], g));
        s1 = COLIBRI_DPBUSD(s1, w, colibri_p8_bcast(a[1], g));
        s2 = COLIBRI_DPBUSD(s2, w, colibri_p8_bcast(a[2], g));
        s3 = COLIBRI_DPBUSD(s3, w, colibri_p8_bcast(a[3], g));
    }
    isum[0] = s0, isum[1] = s1, isum[2] = s2, isum[3] = s3;
}

COLIBRI_PANEL8_GEMM(colibri_gemm_q8_0_avx_vnni, colibri_block_q8_0, 0, 128, colibri_p8_fill_q8_0_vnni,
                    colibri_p8_dot4_vnni, COLIBRI_P8_NO_OFFSET)
COLIBRI_PANEL8_GEMM(colibri_gemm_q4_0_avx_vnni, colibri_block_q4_0, 0, 8, colibri_p8_fill_q4_0, colibri_p8_dot4_vnni,
                    COLIBRI_P8_NO_OFFSET)
COLIBRI_PANEL8_GEMM(colibri_gemm_q4_1_avx_vnni, colibri_block_q4_1, 1, 0, colibri_p8_fill_q4_1, colibri_p8_dot4_vnni,
                    COLIBRI_P8_Q4_1_OFFSET)
