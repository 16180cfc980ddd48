/*
 * native_mutator.h — a structure-aware libFuzzer mutator for .colibri files (docs/FORMAT.md).
 *
 * Half the time it changes ONE field in place where the format keeps it (an hparams scalar
 * or extension field, a rope frequency, a layer_is_moe byte, a directory entry's kind / layer / expert / dtype /
 * shape / offset / size, a header count, or a value inside a tensor's bytes) to a boundary
 * value, so the file stays laid out and the loader's deeper checks, and the forward pass,
 * see the change; the other half it leaves the bytes to libFuzzer's own mutations.
 */
#ifndef COLIBRI_NATIVE_MUTATOR_H
#define COLIBRI_NATIVE_MUTATOR_H

#include <math.h>
#include <stdint.h>
#include <string.h>

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

static uint32_t colibri_rng_next(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static uint64_t colibri_get_le(const uint8_t *p, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static void colibri_put_le(uint8_t *p, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* A boundary-ish replacement for an integer field of `bytes` bytes holding `v`. */
static uint64_t colibri_interesting_int(uint64_t v, int bytes, uint32_t *s) {
    static const int64_t picks[] = {0, 1, -1, 2, 3, 7, 8, 16, 31, 32, 33, 63, 64, 65, 255, 256, 4096,
                                    65535, 1 << 24, INT32_MAX, INT32_MIN, INT64_MAX};
    switch (colibri_rng_next(s) % 4) {
    case 0: return v + 1;
    case 1: return v - 1;
    case 2: return v * 2;
    default: {
        int64_t p = picks[colibri_rng_next(s) % (sizeof picks / sizeof picks[0])];
        return bytes == 4 ? (uint64_t)(uint32_t)(int32_t)p : (uint64_t)p;
    }
    }
}

static uint32_t colibri_interesting_f32(uint32_t *s) {
    static const float picks[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 1e-30f, 1e30f, 65504.0f, 3.4e38f};
    uint32_t r = colibri_rng_next(s) % 12, bits;
    if (r == 9) return 0x7F800000u;        /* inf */
    if (r == 10) return 0xFF800000u;       /* -inf */
    if (r == 11) return 0x7FC00000u;       /* NaN */
    memcpy(&bits, &picks[r], sizeof bits);
    return bits;
}

static const uint16_t colibri_interesting_f16[] = {0x7C00, 0xFC00, 0x7E00, 0x7BFF, 0x0001, 0x8000, 0x3C00};

/* One structured mutation in place, or 0 when the bytes do not look like a .colibri file. */
static int colibri_native_mutate_field(uint8_t *d, size_t size, uint32_t *s) {
    if (size < 64 + 88 || memcmp(d, "COLIBRI", 8) != 0) return 0;
    uint64_t n_tensors = colibri_get_le(d + 16, 4), hparams_size = colibri_get_le(d + 20, 4);
    uint64_t dir = colibri_get_le(d + 24, 8);
    if (hparams_size < 88 || hparams_size > size - 64 || dir > size || n_tensors > (size - dir) / 48) return 0;
    int32_t head_dim = (int32_t)colibri_get_le(d + 64 + 20, 4);
    /* version 2: n_ext at 88, then the extension fields, then rope_inv_freq and layer_is_moe */
    uint64_t n_ext = hparams_size >= 92 ? colibri_get_le(d + 64 + 88, 4) : 0;
    if (n_ext > (hparams_size - 88) / 4) n_ext = 0;
    uint64_t rope_at = 92 + 4 * n_ext;   /* within the block */
    switch (colibri_rng_next(s) % 8) {
    case 0: case 1: {   /* an hparams integer (the 17 ints, rope_interleaved, an extension field) */
        uint32_t i = colibri_rng_next(s) % (uint32_t)(18 + n_ext);
        uint64_t at = 64 + (i < 17 ? 4 * i : i == 17 ? 84 : 92 + 4 * (uint64_t)(i - 18));
        if (i >= 18 && colibri_rng_next(s) % 2) colibri_put_le(d + at, colibri_interesting_f32(s), 4);
        else colibri_put_le(d + at, colibri_interesting_int(colibri_get_le(d + at, 4), 4, s), 4);
        if (i == 2 || i == 7) colibri_put_le(d + (i == 2 ? 56 : 60), colibri_get_le(d + at, 4), 4);  /* header copy */
        return 1;
    }
    case 2: {   /* an hparams float, or a rope frequency */
        uint32_t half = head_dim > 0 && rope_at + 2 * (uint64_t)head_dim <= hparams_size ? (uint32_t)head_dim / 2 : 0;
        uint32_t i = colibri_rng_next(s) % (4 + half);
        uint64_t at = i < 4 ? 64 + 68 + 4 * i : 64 + rope_at + 4 * (uint64_t)(i - 4);
        colibri_put_le(d + at, colibri_interesting_f32(s), 4);
        return 1;
    }
    case 3: {   /* a layer_is_moe byte */
        if (head_dim <= 0 || rope_at + 2 * (uint64_t)head_dim >= hparams_size) return 0;
        uint64_t first = 64 + rope_at + 2 * (uint64_t)head_dim, count = 64 + hparams_size - first;
        static const uint8_t picks[] = {0, 1, 2, 255};
        d[first + colibri_rng_next(s) % count] = picks[colibri_rng_next(s) % 4];
        return 1;
    }
    case 4: case 5: {   /* a directory entry field */
        if (n_tensors == 0) return 0;
        static const uint8_t offs[] = {0, 4, 8, 12, 16, 24, 32, 40}, widths[] = {4, 4, 4, 4, 8, 8, 8, 8};
        uint32_t f = colibri_rng_next(s) % 8;
        uint8_t *p = d + dir + 48 * (colibri_rng_next(s) % n_tensors) + offs[f];
        colibri_put_le(p, f == 3 ? colibri_rng_next(s) % 8 : colibri_interesting_int(colibri_get_le(p, widths[f]),
                                                                                     widths[f], s), widths[f]);
        return 1;
    }
    case 6: {   /* a value inside some tensor's bytes: f16/f32 specials, block scales */
        if (n_tensors == 0) return 0;
        const uint8_t *e = d + dir + 48 * (colibri_rng_next(s) % n_tensors);
        uint64_t offset = colibri_get_le(e + 32, 8), nbytes = colibri_get_le(e + 40, 8);
        if (offset >= size || nbytes < 4 || nbytes > size - offset) return 0;
        uint64_t at = offset + colibri_rng_next(s) % (nbytes - 3);
        if (colibri_rng_next(s) % 2) colibri_put_le(d + at, colibri_interesting_f16[colibri_rng_next(s) % 7], 2);
        else colibri_put_le(d + at, colibri_interesting_f32(s), 4);
        return 1;
    }
    default: {   /* a header field */
        static const uint8_t offs[] = {8, 12, 16, 20, 24, 32, 40, 48}, widths[] = {4, 4, 4, 4, 8, 8, 8, 8};
        uint32_t f = colibri_rng_next(s) % 8;
        colibri_put_le(d + offs[f], colibri_interesting_int(colibri_get_le(d + offs[f], widths[f]), widths[f], s),
                       widths[f]);
        return 1;
    }
    }
}

static size_t colibri_native_mutate(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
    uint32_t s = seed | 1u;
    if (colibri_rng_next(&s) % 2 && colibri_native_mutate_field(data, size, &s)) {
        if (colibri_rng_next(&s) % 4 == 0) colibri_native_mutate_field(data, size, &s);   /* sometimes two */
        return size;
    }
    return LLVMFuzzerMutate(data, size, max_size);
}

#endif /* COLIBRI_NATIVE_MUTATOR_H */
