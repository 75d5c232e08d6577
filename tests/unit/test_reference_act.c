/* The expert MLP activation rows (relu2, swiglu): their fp32 references
 * against values worked out by hand and against the fp64 oracles, and their
 * tolerances against host emulations of the GPU paths, including the
 * fallback's rounded intermediate and a GPU expf off by its documented
 * 2 ulp. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/check.h"
#include "reference/reference.h"
#include "refcheck.h"
#include "testutil.h"

/* The GPU's expf is within this many ulp of exp (CUDA's documented bound;
 * the swiglu tolerance is derived from it). */
#define GPU_EXPF_ULP 2
/* The fused fp16/bf16 kernels use __expf (2 + floor(1.173 |x|) ulp, 11 for
 * |x| < 8) and __fdividef (2 ulp). */
#define GPU_FAST_EXPF_ULP 11
#define GPU_FAST_DIV_ULP 2

static void relu2_by_hand(void)
{
	/* R=2, C=3: x = (-2, 0.5, 3 | -0.25, 1.5, -1e-3)
	 * y = (0, 0.25, 9 | 0, 2.25, 0): negatives clamp to 0, positives square
	 * exactly (these squares are representable). */
	int64_t axis[2] = {2, 3};
	float x[6] = {-2, 0.5f, 3, -0.25f, 1.5f, -1e-3f}, y[6];
	const float *in[1] = {x};
	float *out[1] = {y};
	double yd[6];
	double *outd[1] = {yd};
	int64_t second[1] = {1};

	memset(y, 0, sizeof(y));
	mb_ref_relu2(axis, in, out, second, 1); /* row 1 only */
	CHECK(y[0] == 0 && y[1] == 0 && y[2] == 0);
	CHECK(y[3] == 0 && y[4] == 2.25f && y[5] == 0);
	mb_ref_relu2(axis, in, out, NULL, 2);
	CHECK(y[0] == 0 && y[1] == 0.25f && y[2] == 9.0f);
	mb_oracle_relu2(axis, in, outd, NULL, 2);
	CHECK(yd[0] == 0 && yd[1] == 0.25 && yd[2] == 9.0 && yd[3] == 0 && yd[4] == 2.25 && yd[5] == 0);
}

static void swiglu_by_hand(void)
{
	/* T=2, F=2, gu rows = (g0, g1, u0, u1):
	 * row 0 = (0, ln 3, 5, 2):  silu(0) = 0 / 2 = 0 -> y0 = 0;
	 *   silu(ln 3) = ln 3 / (1 + 1/3) = 0.75 ln 3 -> y1 = 1.5 ln 3.
	 * row 1 = (-ln 3, 2, -4, 0.5): silu(-ln 3) = -ln 3 / (1 + 3) -> y0 = ln 3;
	 *   silu(2) = 2 / (1 + e^-2) -> y1 = 1 / (1 + e^-2).
	 * g comes from the first F columns and u from the last F: swapping
	 * halves would give silu(5) * 0 = 0 for row 0's first element too, but
	 * y1 of row 0 would be silu(2) * ln 3 = 1.930..., not 1.6479... */
	const float ln3 = (float)log(3.0);
	int64_t axis[2] = {2, 2};
	float gu[8] = {0, ln3, 5, 2, -ln3, 2, -4, 0.5f}, y[4];
	const float *in[1] = {gu};
	float *out[1] = {y};
	double yd[4];
	double *outd[1] = {yd};
	int64_t second[1] = {1};
	/* ln3 is ln 3 rounded to fp32: 2^-24 relative; the products and quotient
	 * add a few more roundings; 1e-6 absolute is well over both. */
	const double tol = 1e-6;

	memset(y, 0, sizeof(y));
	mb_ref_swiglu(axis, in, out, second, 1); /* row 1 only */
	CHECK(y[0] == 0 && y[1] == 0);
	CHECK(fabs(y[2] - log(3.0)) < tol && fabs(y[3] - 1 / (1 + exp(-2.0))) < tol);
	mb_ref_swiglu(axis, in, out, NULL, 2);
	CHECK(y[0] == 0 && fabs(y[1] - 1.5 * log(3.0)) < tol);
	mb_oracle_swiglu(axis, in, outd, NULL, 2);
	CHECK(yd[0] == 0 && fabs(yd[1] - 1.5 * log(3.0)) < tol && fabs(yd[2] - log(3.0)) < tol);
}

/* Fresh inputs of `row_name` at `axis` in `dtype`, and the fp32 reference
 * of every row; refcheck_case_free releases the case whatever failed. */
static int act_case_make(refcheck_case *c, const char *row_name, const int64_t *axis, mb_dtype dtype,
	uint64_t seed)
{
	const mb_row *row = mb_catalog_find(row_name);

	memset(c, 0, sizeof(*c));
	if (!row || refcheck_case_make(c, row, axis, dtype, seed) != 0)
		return -1;
	return refcheck_case_reference(c);
}

/* `got` (the only output) against the reference at `tol`. */
static bool act_case_passes(const refcheck_case *c, const float *got, const mb_tolerance *tol, mb_check *out)
{
	return refcheck_outputs_pass(out, c, &got, (const float *const *)(c->ref + c->t.n_inputs), tol);
}

/* The fp32 reference agrees with the fp64 oracle at the row's fp32
 * tolerance, for every dtype's rounded inputs; and the check can fail. */
static void against_oracle(const char *row_name, const int64_t *axis)
{
	const mb_row *row = mb_catalog_find(row_name);

	CHECK(row != NULL);
	for (int d = 0; row && d < MB_DTYPE_COUNT; d++) {
		refcheck_case c;
		mb_check chk;
		const int o = 1; /* one input, one output */

		CHECK(act_case_make(&c, row_name, axis, (mb_dtype)d, 4321 + (uint64_t)d) == 0);
		CHECK(refcheck_case_oracle(&c) == 0);
		CHECK_MSG(act_case_passes(&c, c.orc[o], &row->tolerance[MB_FP32], &chk),
			"%s %s: %llu over tolerance, max rel %g", row_name, mb_dtype_name((mb_dtype)d),
			(unsigned long long)chk.over_tolerance, chk.max_rel);
		/* one element far off is caught: a positive one, as relu2's
		 * zeros would hide a relative error */
		for (uint64_t i = 0; i < c.t.elems[o]; i++) {
			if (c.ref[o][i] > 0.5f) {
				c.orc[o][i] += 1e-3f;
				break;
			}
		}
		CHECK(!act_case_passes(&c, c.orc[o], &row->tolerance[MB_FP32], &chk) && chk.over_tolerance == 1);
		refcheck_case_free(&c);
	}
}

/* relu2's fallback stores relu(x) in the case dtype: for rounded x that is
 * exact, so both GPU paths are round(fp32 x*x) and pass the dtype's
 * tolerance. */
static void relu2_paths(const int64_t *axis)
{
	const mb_row *row = mb_catalog_find("relu2");

	for (int d = 0; row && d < MB_DTYPE_COUNT; d++) {
		mb_dtype dtype = (mb_dtype)d;
		refcheck_case c;
		mb_check chk;
		float *got;
		bool exact = true;

		CHECK(act_case_make(&c, "relu2", axis, dtype, 99 + (uint64_t)d) == 0);
		got = malloc(c.t.elems[1] * sizeof(float));
		CHECK(got != NULL);
		for (uint64_t i = 0; got && i < c.t.elems[1]; i++) {
			float x = c.t.data[0][i], r = x > 0 ? x : 0;
			exact = exact && mb_dtype_round(dtype, r) == r;
			got[i] = mb_dtype_round(dtype, r * r);
		}
		CHECK_MSG(exact, "relu2 %s: relu of a rounded input is not representable", mb_dtype_name(dtype));
		CHECK_MSG(got && act_case_passes(&c, got, &row->tolerance[d], &chk),
			"relu2 %s: %llu over tolerance, max rel %g", mb_dtype_name(dtype),
			(unsigned long long)chk.over_tolerance, chk.max_rel);
		free(got);
		refcheck_case_free(&c);
	}
}

/* exp(-g) as the GPU might compute it: expf moved `ulps` ulp up (> 0) or
 * down (< 0). */
static float expf_off(float x, int ulps)
{
	float e = expf(x);
	for (int k = 0; k < abs(ulps); k++)
		e = nextafterf(e, ulps > 0 ? INFINITY : 0.0f);
	return e;
}

/* `x` moved `ulps` ulp up (> 0) or down (< 0). */
static float nudge(float x, int ulps)
{
	for (int k = 0; k < abs(ulps); k++)
		x = nextafterf(x, ulps > 0 ? INFINITY : -INFINITY);
	return x;
}

/* The fused path (fp32 math, one rounding of y) and the plain path (silu
 * rounded to the dtype, then the multiply) emulated on the host, with expf
 * off by the GPU's 2 ulp either way (and, in the fused fp16/bf16 kernels,
 * __expf off by 11 ulp and __fdividef by 2), all pass the dtype's
 * tolerance. */
static void swiglu_paths(const int64_t *axis)
{
	const mb_row *row = mb_catalog_find("swiglu");
	const int64_t t_rows = axis[0], f = axis[1];

	for (int d = 0; row && d < MB_DTYPE_COUNT; d++) {
		mb_dtype dtype = (mb_dtype)d;
		refcheck_case c;
		float *fused, *plain;

		CHECK(act_case_make(&c, "swiglu", axis, dtype, 777 + (uint64_t)d) == 0);
		fused = malloc(c.t.elems[1] * sizeof(float));
		plain = malloc(c.t.elems[1] * sizeof(float));
		CHECK(fused && plain);
		for (int ulps = -GPU_EXPF_ULP; fused && plain && ulps <= GPU_EXPF_ULP; ulps += 2 * GPU_EXPF_ULP) {
			mb_check chk;

			for (int64_t t = 0; t < t_rows; t++) {
				const float *g = c.t.data[0] + t * 2 * f, *u = g + f;
				for (int64_t j = 0; j < f; j++) {
					float silu = g[j] / (1.0f + expf_off(-g[j], ulps));
					int sign = ulps > 0 ? 1 : -1;
					float fast = nudge(g[j] / (1.0f + expf_off(-g[j], sign * GPU_FAST_EXPF_ULP)),
						-sign * GPU_FAST_DIV_ULP);
					fused[t * f + j] = mb_dtype_round(dtype, (dtype == MB_FP32 ? silu : fast) * u[j]);
					plain[t * f + j] = mb_dtype_round(dtype, mb_dtype_round(dtype, silu) * u[j]);
				}
			}
			CHECK_MSG(act_case_passes(&c, fused, &row->tolerance[d], &chk),
				"swiglu fused %s, expf %+d ulp: %llu over tolerance, max rel %g", mb_dtype_name(dtype),
				ulps, (unsigned long long)chk.over_tolerance, chk.max_rel);
			CHECK_MSG(act_case_passes(&c, plain, &row->tolerance[d], &chk),
				"swiglu plain %s, expf %+d ulp: %llu over tolerance, max rel %g", mb_dtype_name(dtype),
				ulps, (unsigned long long)chk.over_tolerance, chk.max_rel);
		}
		free(fused);
		free(plain);
		refcheck_case_free(&c);
	}
}

/* The tolerances are not vacuous: each stays under three roundings of its
 * dtype (the plain path pays for two), and a kernel that read g and u from
 * swapped halves fails. */
static void swiglu_tolerance_bites(void)
{
	const mb_row *row = mb_catalog_find("swiglu");
	const int64_t axis[2] = {16, 96};
	refcheck_case c;
	mb_check chk;
	float *swapped;

	CHECK(row && row->tolerance[MB_BF16].rel < 3 * 0x1p-8);
	CHECK(row && row->tolerance[MB_FP16].rel < 3 * 0x1p-11);
	CHECK(row && row->tolerance[MB_FP32].rel < 16 * 0x1p-24);
	CHECK(act_case_make(&c, "swiglu", axis, MB_BF16, 5) == 0);
	swapped = malloc(c.t.elems[1] * sizeof(float));
	CHECK(swapped != NULL);
	for (int64_t t = 0; swapped && t < axis[0]; t++) {
		const float *g = c.t.data[0] + t * 2 * axis[1], *u = g + axis[1];
		for (int64_t j = 0; j < axis[1]; j++)
			swapped[t * axis[1] + j] = mb_dtype_round(MB_BF16, u[j] / (1.0f + expf(-u[j])) * g[j]);
	}
	CHECK(swapped && !act_case_passes(&c, swapped, &row->tolerance[MB_BF16], &chk));
	free(swapped);
	refcheck_case_free(&c);
}

static void models(void)
{
	const mb_row *relu2 = mb_catalog_find("relu2"), *swiglu = mb_catalog_find("swiglu");
	uint64_t elems, bytes;

	CHECK(relu2 && swiglu);
	if (!relu2 || !swiglu)
		return;
	/* relu2 R=3, C=5: x and y 15 elements each */
	CHECK(mb_row_footprint(relu2, (int64_t[]){3, 5}, MB_FP32, &elems, &bytes) == 0);
	CHECK(elems == 30 && bytes == 120);
	CHECK(relu2->bytes((int64_t[]){3, 5}, MB_FP32) == 120);
	CHECK(relu2->bytes((int64_t[]){98304, 1408}, MB_BF16) == 2ull * 98304 * 1408 * 2);
	/* swiglu T=3, F=4: gu 3x8 = 24 read, y 3x4 = 12 written */
	CHECK(mb_row_footprint(swiglu, (int64_t[]){3, 4}, MB_BF16, &elems, &bytes) == 0);
	CHECK(elems == 36 && bytes == 72);
	CHECK(swiglu->bytes((int64_t[]){3, 4}, MB_BF16) == 72);
	CHECK(swiglu->bytes((int64_t[]){32768, 14336}, MB_BF16) == 3ull * 32768 * 14336 * 2);
	CHECK(relu2->flops((int64_t[]){3, 5}) == 30 && swiglu->flops((int64_t[]){3, 4}) == 60);
	CHECK(relu2->block == 'E' && swiglu->block == 'E');
	for (int d = 0; d < MB_DTYPE_COUNT; d++) {
		CHECK(relu2->tolerance[d].rationale && relu2->tolerance[d].rel > 0);
		CHECK(swiglu->tolerance[d].rationale && swiglu->tolerance[d].rel > 0);
	}
	CHECK(mb_row_find_variant(relu2, "fused")->launches_per_call == 1);
	CHECK(mb_row_find_variant(relu2, "fallback")->launches_per_call == 2);
	CHECK(mb_row_find_variant(swiglu, "fused")->launches_per_call == 1);
	CHECK(mb_row_find_variant(swiglu, "fallback")->launches_per_call == 2);
}

int main(void)
{
	relu2_by_hand();
	swiglu_by_hand();
	against_oracle("relu2", (int64_t[]){67, 1408});
	against_oracle("relu2", (int64_t[]){5, 13}); /* not whole 16-byte vectors */
	against_oracle("swiglu", (int64_t[]){67, 1408});
	against_oracle("swiglu", (int64_t[]){7, 13});
	relu2_paths((int64_t[]){129, 1000});
	swiglu_paths((int64_t[]){129, 1000});
	swiglu_paths((int64_t[]){33, 1408});
	swiglu_tolerance_bites();
	models();
	return mb_test_finish("test_reference_act");
}
