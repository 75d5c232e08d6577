/* Element types a case can run in, and their host-side rounding. */
#ifndef MB_KERNELS_DTYPE_H
#define MB_KERNELS_DTYPE_H

#include <stddef.h>
#include <stdint.h>

typedef enum mb_dtype {
	MB_FP32,
	MB_FP16,
	MB_BF16,
	MB_DTYPE_COUNT
} mb_dtype;

#define MB_DTYPE_ALL ((1u << MB_FP32) | (1u << MB_FP16) | (1u << MB_BF16))

const char *mb_dtype_name(mb_dtype dtype);
/* 0 and *out set, or -1 for an unknown name. */
int mb_dtype_parse(const char *name, mb_dtype *out);
size_t mb_dtype_size(mb_dtype dtype);

/* Round-to-nearest-even conversions, NaN preserved. */
uint16_t mb_f32_to_bf16(float x);
float mb_bf16_to_f32(uint16_t x);
uint16_t mb_f32_to_f16(float x);
float mb_f16_to_f32(uint16_t x);

/* Round a float to what `dtype` can store, and back. */
float mb_dtype_round(mb_dtype dtype, float x);

/* Pack `n` floats into `dtype` storage at `dst`, and unpack. */
void mb_dtype_pack(mb_dtype dtype, const float *src, void *dst, size_t n);
void mb_dtype_unpack(mb_dtype dtype, const void *src, float *dst, size_t n);

#endif
