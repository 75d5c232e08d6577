/* dtype conversions against independent oracles: the compiler's own
 * _Float16 conversion (hardware-exact IEEE rounding) for fp16, and a
 * nearest-neighbour search in double precision for bf16. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/dtype.h"
#include "harness/rng.h"
#include "testutil.h"

/* the compiler's IEEE binary16, a GNU extension on x86-64 */
__extension__ typedef _Float16 half_t;

static uint32_t bits(float x)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	return u;
}

static float from_bits(uint32_t u)
{
	float x;
	memcpy(&x, &u, 4);
	return x;
}

/* bf16 by search: the two bf16 values around x, pick the nearer, ties to
 * the even mantissa. */
static uint16_t bf16_by_search(float x)
{
	uint32_t lo = bits(x) & 0xffff0000u;
	uint32_t hi = lo + 0x10000u;
	double dlo = fabs((double)from_bits(lo) - x), dhi = fabs((double)from_bits(hi) - x);

	if (dlo < dhi || (dlo == dhi && ((lo >> 16) & 1u) == 0))
		return (uint16_t)(lo >> 16);
	return (uint16_t)(hi >> 16);
}

int main(void)
{
	mb_rng rng;
	mb_dtype d;
	int mismatches = 0;

	/* every fp16 value round-trips, and agrees with the compiler */
	for (uint32_t h = 0; h < 0x10000u; h++) {
		float f = mb_f16_to_f32((uint16_t)h);
		half_t ref;
		if (isnan(f))
			continue;
		ref = (half_t)f;
		if (mb_f32_to_f16(f) != (uint16_t)h || (float)ref != f)
			mismatches++;
	}
	CHECK_MSG(mismatches == 0, "%d fp16 values do not round-trip", mismatches);

	/* random fp32 values (all exponents, so subnormals, overflow and ties
	 * near them are covered) against the compiler's rounding */
	mismatches = 0;
	mb_rng_seed(&rng, 7);
	for (int i = 0; i < 2000000; i++) {
		float f = from_bits((uint32_t)mb_rng_next(&rng));
		half_t ref;
		uint16_t rb;
		if (isnan(f))
			continue;
		ref = (half_t)f;
		memcpy(&rb, &ref, 2);
		if (mb_f32_to_f16(f) != rb)
			mismatches++;
	}
	CHECK_MSG(mismatches == 0, "%d of 2M random floats round to fp16 differently from the compiler", mismatches);

	/* ties: 1 + 2^-11 is halfway between 1 and 1 + 2^-10: even is 1 */
	CHECK(mb_f16_to_f32(mb_f32_to_f16(1.0f + 0x1p-11f)) == 1.0f);
	CHECK(mb_f16_to_f32(mb_f32_to_f16(1.0f + 3 * 0x1p-11f)) == 1.0f + 0x1p-9f);
	CHECK(isinf(mb_f16_to_f32(mb_f32_to_f16(65520.0f))));
	CHECK(mb_f16_to_f32(mb_f32_to_f16(65519.0f)) == 65504.0f);
	CHECK(isnan(mb_f16_to_f32(mb_f32_to_f16(NAN))));

	mismatches = 0;
	for (int i = 0; i < 2000000; i++) {
		float f = from_bits((uint32_t)mb_rng_next(&rng));
		if (isnan(f) || isinf(f) || fabsf(f) > 3.3e38f)
			continue;
		if (mb_f32_to_bf16(f) != bf16_by_search(f))
			mismatches++;
	}
	CHECK_MSG(mismatches == 0, "%d of 2M random floats round to bf16 differently from the search", mismatches);
	CHECK(mb_bf16_to_f32(mb_f32_to_bf16(1.0f + 0x1p-8f)) == 1.0f);
	CHECK(mb_bf16_to_f32(mb_f32_to_bf16(1.0f + 3 * 0x1p-8f)) == 1.0f + 0x1p-6f);
	CHECK(isnan(mb_bf16_to_f32(mb_f32_to_bf16(NAN))));

	/* names, sizes, pack and unpack */
	CHECK(mb_dtype_parse("bf16", &d) == 0 && d == MB_BF16);
	CHECK(mb_dtype_parse("fp8", &d) == -1);
	CHECK(mb_dtype_size(MB_FP32) == 4 && mb_dtype_size(MB_FP16) == 2);
	{
		float src[5] = {1.5f, -2.25f, 3.0e-3f, 1000.0f, -0.0f}, back[5];
		uint16_t packed[5];
		for (int t = MB_FP16; t <= MB_BF16; t++) {
			mb_dtype_pack((mb_dtype)t, src, packed, 5);
			mb_dtype_unpack((mb_dtype)t, packed, back, 5);
			for (int i = 0; i < 5; i++)
				CHECK(back[i] == mb_dtype_round((mb_dtype)t, src[i]));
		}
	}
	return mb_test_finish("test_dtype");
}
