/*
 * quantize.c — colibri_quantize / colibri_dequantize, the public door to the
 * kernels' reference converters (used by converters, never on the inference
 * path).
 */
#include "internal.h"
#include "../kernels/quant.h"

COLIBRI_API int colibri_quantize(int32_t dtype, const float *src, void *dst, int64_t n) {
    const colibri_type_traits *t = colibri_type_traits_of(dtype);
    if (!t || !t->vec_dot) return colibri_error_set(COLIBRI_ERR_INVALID, "quantize: dtype %d is not a weight type", dtype);
    if (!src || !dst || n < 0 || n % t->block_elems) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "quantize: %s needs a multiple of %lld values, got %lld",
                                 t->name, (long long)t->block_elems, (long long)n);
    }
    t->from_f32(src, dst, n);
    return COLIBRI_OK;
}

COLIBRI_API int colibri_dequantize(int32_t dtype, const void *src, float *dst, int64_t n) {
    const colibri_type_traits *t = colibri_type_traits_of(dtype);
    if (!t || !t->vec_dot) return colibri_error_set(COLIBRI_ERR_INVALID, "dequantize: dtype %d is not a weight type", dtype);
    if (!src || !dst || n < 0 || n % t->block_elems) {
        return colibri_error_set(COLIBRI_ERR_INVALID, "dequantize: %s needs a multiple of %lld values, got %lld",
                                 t->name, (long long)t->block_elems, (long long)n);
    }
    t->to_f32(src, dst, n);
    return COLIBRI_OK;
}
