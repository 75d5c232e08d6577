/* recurrent_scan's fused step in fp32: one RG-LRU step's decay a and
 * increment u from x and a channel's constants. Written once for the GPU
 * kernel (src/kernels/recurrent_scan.cu, with MUFU approximations) and for
 * the host test that checks its algebra (tests/unit/test_recurrent_math.c,
 * C, with the library's exp2f and 1/sqrtf in their place); every
 * multiply-add is an explicit fmaf, so both compile to the same roundings
 * but for the two approximations.
 *
 * The step, with v_r = w_a x + b_a and v_i = w_i x + b_i:
 *   r = 1 / (1 + e_r), e_r = exp(-v_r);  i = 1 / (1 + e_i), e_i = exp(-v_i)
 *   y = 16 softplus(lambda) r = c16 r = -2 log a
 *   a = exp(-y/2) = 1 - y Q(y),          Q(y) = (1 - exp(-y/2)) / y
 *   m = sqrt(1 - a^2) = sqrt(y) S(y),    S(y) = sqrt((1 - exp(-y)) / y)
 *   u = m i x
 * Three MUFU operations a step: the two exponentials and one reciprocal
 * square root that gives sqrt(r) i at once, q = 1/sqrt((1 + e_r)(1 + e_i)^2).
 * Then sqrt(r) = q (1 + e_i), y = c16 r, and i m = sqrt(c16) q S(y): no
 * division, no second square root. The products run in a scaled range,
 * with k = 2^-32 / sqrt(c16):
 *   B = k (1 + e_i), q = 1/sqrt((1 + e_r) B^2) = sqrt(r) i / k,
 *   y = (q 2^-32 (1 + e_i))^2 = (q B sqrt(c16))^2 = c16 r,
 *   i m = q 2^-32 S(y)
 * (k sqrt(c16) = 2^-32, folded into S's coefficients). For c16 in
 * [RS_FAST_C16_MIN, RS_FAST_Y_MAX] and the input gate's exponent clamped
 * at 2^RS_GATE_EXP_MAX, B^2 lies in [2^-63, 2^56], so (1 + e_r) B^2
 * overflows only where e_r > 2^72: q = 0 then gives r = 0 and u = 0 where
 * r < 2^-72 (a rounds to 1 either way, and the true u is under 2^-36 |x|).
 * The clamp moves i only where it is under 2^-40 (u under 2^-40 |x|).
 *
 * Q and S are degree-3 fits on [0, RS_FAST_Y_MAX] (fp32 coefficients, the
 * polynomial's own relative error 2.9e-8 and 4.9e-8, under an ulp; with
 * fp32 Horner 5.9e-8 and 7.9e-8). Q carries 1 - a with its relative
 * accuracy however close a is to 1, which a slow channel needs: its state
 * is about 1/(1 - a) increments, so a relative error in 1 - a is the
 * same relative error in the state. src/reference/recurrent_scan.c takes
 * these into the row's tolerance. */
#ifndef MB_KERNELS_RECURRENT_SCAN_MATH_H
#define MB_KERNELS_RECURRENT_SCAN_MATH_H

#include <math.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

#if defined(__CUDACC__)
#define RS_FN __host__ __device__ __forceinline__
#else
#define RS_FN static inline
#endif

/* Griffin's c: a = exp(-c softplus(lambda) r). */
#define RS_RGLRU_C 8.0f
#define RS_LOG2E 1.4426950408889634f

/* The fast step's channels: 16 softplus(lambda) in this range (Griffin's
 * initial decays have a^c >= 0.9 at r = 1, c16 <= 0.21; the suites' fills
 * c16 <= 0.216). Others take the library path. */
#define RS_FAST_Y_MAX 0.25f
#define RS_FAST_C16_MIN 0x1p-40f
#define RS_SCALE 0x1p-32f        /* k sqrt(c16) */
#define RS_GATE_EXP_MAX 40.0f    /* e_i <= 2^40 */

/* Q(y) = (1 - exp(-y/2)) / y on [0, 1/4] */
#define RS_Q0 0.5f
#define RS_Q1 -1.249990463e-01f
#define RS_Q2 2.081372775e-02f
#define RS_Q3 -2.477611648e-03f
/* S(y) = sqrt((1 - exp(-y)) / y) on [0, 1/4], times RS_SCALE */
#define RS_S0 (1.0f * RS_SCALE)
#define RS_S1 (-2.499968261e-01f * RS_SCALE)
#define RS_S2 (5.201886222e-02f * RS_SCALE)
#define RS_S3 (-7.396202534e-03f * RS_SCALE)

/* A channel's constants. */
typedef struct rs_channel {
	float ka, kb; /* -w_a log2 e, -b_a log2 e: e_r = 2^(ka x + kb) */
	float ki, bi; /* -w_i log2 e, -b_i log2 e: e_i = 2^(ki x + bi) */
	float c16;    /* 16 softplus(lambda): y = c16 r */
	float k;      /* RS_SCALE / sqrt(c16) */
	bool fast;    /* c16 in the fast step's range */
} rs_channel;

/* The two approximations: MUFU on the GPU (each within 2 ulps), the
 * library on the host, where a test may put its own in their place (to
 * emulate the MUFU's errors) by defining RS_HOST_EX2 and RS_HOST_RSQRT. */
#ifndef RS_HOST_EX2
#define RS_HOST_EX2(x) exp2f(x)
#endif
#ifndef RS_HOST_RSQRT
#define RS_HOST_RSQRT(x) (1.0f / sqrtf(x))
#endif

RS_FN float rs_ex2(float x)
{
#if defined(__CUDA_ARCH__)
	float y;
	asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
	return y;
#else
	return RS_HOST_EX2(x);
#endif
}

RS_FN float rs_rsqrt(float x)
{
#if defined(__CUDA_ARCH__)
	float y;
	asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
	return y;
#else
	return RS_HOST_RSQRT(x);
#endif
}

/* The constants from a channel's parameters, softplus computed without
 * overflow. */
RS_FN rs_channel rs_channel_make(float w_a, float b_a, float w_i, float b_i, float lambda)
{
	const float softplus = fmaxf(lambda, 0.0f) + log1pf(expf(-fabsf(lambda)));
	rs_channel c;

	c.ka = -w_a * RS_LOG2E;
	c.kb = -b_a * RS_LOG2E;
	c.ki = -w_i * RS_LOG2E;
	c.bi = -b_i * RS_LOG2E;
	c.c16 = 2.0f * RS_RGLRU_C * softplus;
	c.fast = c.c16 >= RS_FAST_C16_MIN && c.c16 <= RS_FAST_Y_MAX;
	c.k = c.fast ? RS_SCALE / sqrtf(c.c16) : 0.0f;
	return c;
}

/* The fast step (c.fast): decay a and increment u. */
RS_FN void rs_step_fast(float x, const rs_channel *c, float *a, float *u)
{
	const float e_r = rs_ex2(fmaf(x, c->ka, c->kb));
	const float e_i = rs_ex2(fminf(fmaf(x, c->ki, c->bi), RS_GATE_EXP_MAX));
	const float b = fmaf(e_i, c->k, c->k);              /* k (1 + e_i) */
	const float bs = fmaf(e_i, RS_SCALE, RS_SCALE);     /* k sqrt(c16) (1 + e_i) */
	const float b2 = b * b;
	const float q = rs_rsqrt(fmaf(e_r, b2, b2));       /* sqrt(r) i / k */
	const float ts = q * bs;                           /* sqrt(c16 r) */
	const float y = ts * ts;
	float p = fmaf(RS_Q3, y, RS_Q2);

	p = fmaf(p, y, RS_Q1);
	p = fmaf(p, y, RS_Q0);
	*a = fmaf(-y, p, 1.0f);
	p = fmaf(RS_S3, y, RS_S2);
	p = fmaf(p, y, RS_S1);
	p = fmaf(p, y, RS_S0);
	*u = x * (q * p);
}

#endif
