/* recurrent_scan's fused step (src/kernels/recurrent_scan_math.h), the
 * kernel's own code compiled for the host, where its two MUFU operations
 * are the library's exp2f and 1/sqrtf: in a second pass each result is
 * moved by one more ulp up or down (a hash of its input picks the
 * direction, as the hardware's error is a function of its input), which
 * keeps them within the 2 ulps the kernel's error analysis grants MUFU.
 *
 *  1. Every step over the suites' fills (a grid of channels, x across the
 *     bell's range) against the step in fp64: 1 - a to a relative bound
 *     and a's own rounding, u to a relative bound (the counts below).
 *  2. The scaled products' range (recurrent_scan_math.h): gates far
 *     closed or open, at the fast range's edges of c16, and x at the
 *     dtypes' extremes, where a term overflows or is clamped.
 *  3. The recurrence over 16384 steps of the slowest channels, fp32 with
 *     the step as the kernel computes it, against the row's fp32
 *     reference, within the row's fp32 tolerance (the check the harness
 *     makes on the GPU's output). */
#include <math.h>
#include <stdint.h>
#include <string.h>

static int perturb_on; /* the second pass */

/* v moved by one ulp, its direction from a hash of the input's bits. */
static float perturb(float v, float in, unsigned salt)
{
	uint32_t h;

	if (!perturb_on || !isfinite(v) || v == 0.0f)
		return v;
	memcpy(&h, &in, sizeof(h));
	h = (h ^ salt) * 0x9e3779b1u;
	h ^= h >> 15;
	return nextafterf(v, (h & 1u) ? INFINITY : 0.0f);
}

#define RS_HOST_EX2(x) perturb(exp2f(x), (x), 0x51u)
#define RS_HOST_RSQRT(x) perturb(1.0f / sqrtf(x), (x), 0xa7u)
#include "kernels/recurrent_scan_math.h"

#include "harness/input_rng.h"
#include "kernels/catalog.h"
#include "reference/row_common.h"
#include "reference/reference.h"
#include "testutil.h"

#define U F32_EPS

/* The step in fp64 at the fp32 inputs. */
typedef struct truth {
	double a, one_minus_a, u;
} truth;

static truth step_truth(float x, float w_a, float b_a, float w_i, float b_i, float lambda)
{
	const double r = 1 / (1 + exp(-((double)x * w_a + b_a)));
	const double i = 1 / (1 + exp(-((double)x * w_i + b_i)));
	const double sp = lambda > 0 ? lambda + log1p(exp(-(double)lambda)) : log1p(exp((double)lambda));
	const double y = 16 * sp * r;
	truth t;

	t.one_minus_a = -expm1(-y / 2);
	t.a = exp(-y / 2);
	t.u = sqrt(-expm1(-y)) * i * x;
	return t;
}

/* The bounds of pass 1, counted in u = 2^-24 for |w|, |b| <= 1,
 * |x| <= 3.47 (|w x + b| <= 4.47, 6.45 in log2 units) and MUFU within
 * 2 ulps (4u):
 *  - e = 2^(k x + k_b): the constants' roundings (u |k x| + u |k_b|) and
 *    the multiply-add's (u |v|) move the exponent by <= 12.9u, 8.9u of e
 *    after ln 2, plus 4u: 12.9u, and (1 + e) carries e/(1 + e) of it.
 *  - ts = q 2^-32 (1 + e_i) = sqrt(c16 r): rsqrt 4u, half of
 *    (1 + e_r)'s 12.9u, half of the two roundings inside the root, the
 *    roundings of 2^-32 (1 + e_i) and of ts, k's (k sqrt(c16) = 2^-32 to
 *    u) and half of softplus's 2u: 15u; y = ts^2: 31u.
 *  - 1 - a = y Q(y): y's 31u, Q's fit 0.5u, Horner and the product 3u:
 *    35u; a's own rounding is an absolute u on top.
 *  - u = x q S: q = 1/(sqrt(1 + e_r) (1 + e_i)) takes rsqrt 4u, half of
 *    (1 + e_r)'s, all of (1 + e_i)'s (13.9u with B's rounding) and 1u of
 *    the roundings inside: 25.4u; S(y) moves by y's 31u times
 *    |d log S / d log y| <= 0.07 and by 2.3u of its own: 4.5u; two
 *    products: 32u.
 * The checks take 40u for both. */
#define STEP_OMA_REL (40 * U)
#define STEP_U_REL (40 * U)

static const float gate_values[] = {-1.0f, -0.5f, -0.004f, 0.0f, 0.3f, 1.0f};
#define N_GATE_VALUES (int)(sizeof(gate_values) / sizeof(gate_values[0]))
/* the fills' lambda range, and lambda at the fast range's ends: c16 = 1/4
 * (softplus = 1/64) and c16 = 2^-39 */
static const float lambdas[] = {-9.0f, -7.0f, -5.5f, -4.3f, -4.1514f, -29.8f};
#define N_LAMBDAS (int)(sizeof(lambdas) / sizeof(lambdas[0]))
#define X_MAX 3.47f
#define X_STEPS 400

static void step_over_fills(void)
{
	double worst_oma = 0, worst_u = 0;
	long bad = 0;

	for (int l = 0; l < N_LAMBDAS; l++)
		for (int g = 0; g < N_GATE_VALUES * N_GATE_VALUES * N_GATE_VALUES * N_GATE_VALUES; g++) {
			const float w_a = gate_values[g % N_GATE_VALUES];
			const float b_a = gate_values[g / N_GATE_VALUES % N_GATE_VALUES];
			const float w_i = gate_values[g / (N_GATE_VALUES * N_GATE_VALUES) % N_GATE_VALUES];
			const float b_i = gate_values[g / (N_GATE_VALUES * N_GATE_VALUES * N_GATE_VALUES)];
			const rs_channel c = rs_channel_make(w_a, b_a, w_i, b_i, lambdas[l]);

			CHECK_MSG(c.fast, "lambda %g: c16 %g outside the fast range", lambdas[l], c.c16);
			if (!c.fast)
				continue;
			for (int k = -X_STEPS; k <= X_STEPS; k++) {
				const float x = X_MAX * (float)k / X_STEPS;
				const truth t = step_truth(x, w_a, b_a, w_i, b_i, lambdas[l]);
				float a, u;

				rs_step_fast(x, &c, &a, &u);
				const double e_oma = fabs((double)a - t.a) - U, e_u = fabs((double)u - t.u);
				if (e_oma > STEP_OMA_REL * t.one_minus_a || e_u > STEP_U_REL * fabs(t.u)) {
					if (bad++ < 5)
						fprintf(stderr, "lambda %g w_a %g b_a %g w_i %g b_i %g x %g: a %.9g want %.12g, "
							"u %.9g want %.12g\n", lambdas[l], w_a, b_a, w_i, b_i, x, a, t.a, u, t.u);
				}
				if (t.one_minus_a > 0 && e_oma / t.one_minus_a > worst_oma)
					worst_oma = e_oma / t.one_minus_a;
				if (t.u != 0 && e_u / fabs(t.u) > worst_u)
					worst_u = e_u / fabs(t.u);
			}
		}
	CHECK_MSG(bad == 0, "%ld steps over their bounds", bad);
	printf("step over the fills%s: 1 - a within %.1fu (bound %.0fu), u within %.1fu (bound %.0fu)\n",
		perturb_on ? " (MUFU emulated)" : "", worst_oma / U, STEP_OMA_REL / U, worst_u / U, STEP_U_REL / U);
}

/* A step whose true r or i is far under every term that matters. */
typedef struct edge {
	const char *what;
	float x, w_a, b_a, w_i, b_i, lambda;
} edge;

static void edges(void)
{
	static const edge cases[] = {
		/* e_i = 2^86.6 clamped to 2^40: i = 1e-26 read as 2^-40; r, a exact */
		{"input gate closed", 1.0f, 0.5f, 0.0f, 0.0f, -60.0f, -5.0f},
		/* the same at the smallest c16, where B^2 is largest (2^56) */
		{"input gate closed, c16 = 2^-39", 1.0f, 0.5f, 0.0f, 0.0f, -60.0f, -29.8f},
		/* e_r = 2^144: inf, r = 0 */
		{"recurrence gate closed", 1.0f, 0.0f, -100.0f, 0.3f, 0.2f, -5.0f},
		/* e_r = 2^86.6 finite, times B^2 = 2^56 overflows: r = 0 read for 1e-26 */
		{"both closed, c16 = 2^-39", 1.0f, 0.0f, -60.0f, 0.0f, -30.0f, -29.8f},
		/* both gates open: e = 0, r = i = 1 */
		{"both open", 1e4f, 1.0f, 0.0f, 1.0f, 0.0f, -4.3f},
		{"both open, largest c16", 1e4f, 1.0f, 0.0f, 1.0f, 0.0f, -4.1514f},
		/* x at the extremes of the dtypes */
		{"x = bf16's largest, gates open", 3.3895e38f, 1.0f, 0.0f, 1.0f, 0.0f, -5.0f},
		{"x = -bf16's largest, gates closed", -3.3895e38f, 1.0f, 0.0f, 1.0f, 0.0f, -5.0f},
		{"x = -65504, recurrence open, input closed", -65504.0f, -1.0f, 0.0f, 1.0f, 0.0f, -5.0f},
	};

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		const edge *e = &cases[k];
		const rs_channel c = rs_channel_make(e->w_a, e->b_a, e->w_i, e->b_i, e->lambda);
		const truth t = step_truth(e->x, e->w_a, e->b_a, e->w_i, e->b_i, e->lambda);
		float a, u;

		CHECK_MSG(c.fast, "%s: not a fast channel", e->what);
		rs_step_fast(e->x, &c, &a, &u);
		/* a: as over the fills, or 1 - a under a's rounding */
		CHECK_MSG(isfinite(a) && fabs((double)a - t.a) <= STEP_OMA_REL * t.one_minus_a + U, "%s: a %.9g, want %.12g",
			e->what, a, t.a);
		/* u: as over the fills, or under 2^-39 |x| where the clamp or
		 * an overflow reads a gate far under that as 0 or 2^-40 */
		CHECK_MSG(isfinite(u) && fabs((double)u - t.u) <= STEP_U_REL * fabs(t.u) + 0x1p-39 * fabs(e->x),
			"%s: u %.9g, want %.12g", e->what, u, t.u);
	}
}

/* The slowest channels of the fills (lambda at its least, the
 * recurrence gate's weight 0 and bias at its least: r = 0.269, 1 - a
 * down to 2.7e-4; and r at its least, 0.0113, through w_a x + b_a near
 * -4.47) and a fast one, each over 16384 steps of x drawn as the
 * suites' fills draw it (the harness's generator, unit variance). */
#define REC_L 16384
#define REC_SEED 12345

static void recurrence(void)
{
	static const float params[][5] = {
		/* w_a, b_a, w_i, b_i, lambda */
		{0.0f, -1.0f, 0.004f, 1.0f, -9.0f},
		{1.0f, -1.0f, 0.004f, 1.0f, -9.0f},
		{-1.0f, -1.0f, 1.0f, 0.5f, -9.0f},
		{0.3f, 0.2f, -0.5f, 0.0f, -4.3f},
	};
	const mb_tolerance *tol = &mb_row_recurrent_scan.tolerance[MB_FP32];
	static float x[REC_L], want[REC_L];
	double worst = 0;

	for (size_t p = 0; p < sizeof(params) / sizeof(params[0]); p++) {
		const float *q = params[p];
		const int64_t axis[3] = {1, REC_L, 1}; /* B, L, D */
		const float *in[6] = {x, &q[0], &q[1], &q[2], &q[3], &q[4]};
		float *out[1] = {want};
		const rs_channel c = rs_channel_make(q[0], q[1], q[2], q[3], q[4]);
		float h = 0.0f;
		long bad = 0;

		const mb_input_params fill = {mb_input_key(REC_SEED, (int)p), MB_INPUT_NORMAL, 0.0f, 1.0f};

		for (int t = 0; t < REC_L; t++)
			x[t] = mb_input_draw(&fill, (uint64_t)t, 0);
		mb_ref_recurrent_scan(axis, in, out, NULL, 1);
		for (int t = 0; t < REC_L; t++) {
			float a, u;
			rs_step_fast(x[t], &c, &a, &u);
			h = fmaf(a, h, u);
			const double bound = tol->abs + tol->rel * fabs(want[t]), err = fabs((double)h - want[t]);
			if (err > bound && bad++ < 3)
				fprintf(stderr, "channel %zu step %d: %.9g, reference %.9g\n", p, t, h, want[t]);
			if (err / bound > worst)
				worst = err / bound;
		}
		CHECK_MSG(bad == 0, "channel %zu: %ld steps over the fp32 tolerance", p, bad);
	}
	printf("recurrence against the fp32 reference%s: worst error %.3f of the fp32 tolerance\n",
		perturb_on ? " (MUFU emulated)" : "", worst);
}

int main(void)
{
	for (perturb_on = 0; perturb_on < 2; perturb_on++) {
		step_over_fills();
		edges();
		recurrence();
	}
	return mb_test_finish("test_recurrent_math");
}
