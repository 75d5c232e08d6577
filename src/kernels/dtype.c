#include "kernels/dtype.h"

#include <math.h>
#include <string.h>

static const char *const dtype_names[MB_DTYPE_COUNT] = {"fp32", "fp16", "bf16"};

const char *mb_dtype_name(mb_dtype dtype)
{
	return (unsigned)dtype < MB_DTYPE_COUNT ? dtype_names[dtype] : "?";
}

int mb_dtype_parse(const char *name, mb_dtype *out)
{
	for (int i = 0; i < MB_DTYPE_COUNT; i++) {
		if (name && strcmp(name, dtype_names[i]) == 0) {
			*out = (mb_dtype)i;
			return 0;
		}
	}
	return -1;
}

size_t mb_dtype_size(mb_dtype dtype)
{
	return dtype == MB_FP32 ? 4 : 2;
}

static uint32_t f32_bits(float x)
{
	uint32_t u;

	memcpy(&u, &x, sizeof(u));
	return u;
}

static float bits_f32(uint32_t u)
{
	float x;

	memcpy(&x, &u, sizeof(x));
	return x;
}

uint16_t mb_f32_to_bf16(float x)
{
	uint32_t u = f32_bits(x);

	if (isnan(x))
		return (uint16_t)((u >> 16) | 0x0040u); /* keep it a quiet NaN */
	/* round to nearest, ties to even, on the 16 dropped bits */
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

float mb_bf16_to_f32(uint16_t x)
{
	return bits_f32((uint32_t)x << 16);
}

/* IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. */
#define F16_EXP_BIAS 15
#define F32_EXP_BIAS 127
#define F16_MAX_EXP 0x1f

uint16_t mb_f32_to_f16(float x)
{
	uint32_t u = f32_bits(x);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
	uint32_t abs = u & 0x7fffffffu;
	int32_t exp;
	uint32_t mant, shift, half, rest, out;

	if (abs >= 0x7f800000u) /* inf or NaN */
		return (uint16_t)(sign | 0x7c00u | (abs > 0x7f800000u ? 0x0200u : 0));
	exp = (int32_t)(abs >> 23) - F32_EXP_BIAS + F16_EXP_BIAS;
	mant = abs & 0x7fffffu;
	if (exp >= F16_MAX_EXP)
		return (uint16_t)(sign | 0x7c00u); /* overflow to inf */
	if (exp <= 0) {
		/* subnormal in fp16 (or zero): shift the full mantissa down */
		if (exp < -10)
			return sign;
		mant |= 0x800000u;
		shift = (uint32_t)(14 - exp);
		out = mant >> shift;
		rest = mant & ((1u << shift) - 1);
		half = 1u << (shift - 1);
		if (rest > half || (rest == half && (out & 1u)))
			out++;
		return (uint16_t)(sign | out);
	}
	out = ((uint32_t)exp << 10) | (mant >> 13);
	rest = mant & 0x1fffu;
	if (rest > 0x1000u || (rest == 0x1000u && (out & 1u)))
		out++; /* may carry into the exponent, up to inf: correct */
	return (uint16_t)(sign | out);
}

float mb_f16_to_f32(uint16_t x)
{
	uint32_t sign = (uint32_t)(x & 0x8000u) << 16;
	uint32_t exp = (x >> 10) & 0x1fu;
	uint32_t mant = x & 0x3ffu;

	if (exp == F16_MAX_EXP)
		return bits_f32(sign | 0x7f800000u | (mant << 13));
	if (exp == 0) {
		/* subnormal: mant * 2^-24 is exact in fp32 */
		float v = ldexpf((float)mant, -24);
		return sign ? -v : v;
	}
	return bits_f32(sign | ((exp - F16_EXP_BIAS + F32_EXP_BIAS) << 23) | (mant << 13));
}

float mb_dtype_round(mb_dtype dtype, float x)
{
	switch (dtype) {
	case MB_FP16: return mb_f16_to_f32(mb_f32_to_f16(x));
	case MB_BF16: return mb_bf16_to_f32(mb_f32_to_bf16(x));
	default: return x;
	}
}

void mb_dtype_pack(mb_dtype dtype, const float *src, void *dst, size_t n)
{
	uint16_t *d16 = dst;

	switch (dtype) {
	case MB_FP16:
		for (size_t i = 0; i < n; i++)
			d16[i] = mb_f32_to_f16(src[i]);
		break;
	case MB_BF16:
		for (size_t i = 0; i < n; i++)
			d16[i] = mb_f32_to_bf16(src[i]);
		break;
	default:
		memcpy(dst, src, n * sizeof(float));
	}
}

void mb_dtype_unpack(mb_dtype dtype, const void *src, float *dst, size_t n)
{
	const uint16_t *s16 = src;

	switch (dtype) {
	case MB_FP16:
		for (size_t i = 0; i < n; i++)
			dst[i] = mb_f16_to_f32(s16[i]);
		break;
	case MB_BF16:
		for (size_t i = 0; i < n; i++)
			dst[i] = mb_bf16_to_f32(s16[i]);
		break;
	default:
		memcpy(dst, src, n * sizeof(float));
	}
}
