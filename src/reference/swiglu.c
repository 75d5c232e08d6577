/* SwiGLU on one [T, 2F] projection: with g = columns [0, F) and u = columns
 * [F, 2F) of each row,
 *   y[t, f] = silu(g) * u = g / (1 + exp(-g)) * u,   y [T, F].
 * One body serves both precisions; REAL is the arithmetic type, EXP its
 * exponential. Worked by hand: g = 0 gives silu 0; g = ln 3 gives
 * ln 3 / (1 + 1/3) = 0.75 ln 3, so with u = 2 y = 1.5 ln 3. */
#include <math.h>

#include "reference/row_common.h"
#include "reference/reference.h"
#include "reference/traffic.h"

/* The GPU variants the descriptor names, defined in src/kernels/swiglu.cu:
 * in gu [T,2F] (g = first F columns, u = last F); out y [T,F]. */
MB_DECLARE_LAUNCH(mb_swiglu_fused_launch);
MB_DECLARE_LAUNCH(mb_swiglu_fallback_launch);

enum { AX_T, AX_F };
enum { IN_GU };
enum { OUT_Y };

#define DEFINE_SWIGLU(fn, REAL, OUT, EXP) \
	void fn(const int64_t *axis, const float *const *in, OUT *const *out, \
		const int64_t *rows, int64_t n_rows) \
	{ \
		int64_t f = axis[AX_F]; \
		for (int64_t i = 0; i < n_rows; i++) { \
			int64_t t = mb_ref_row(rows, i); \
			const float *g = in[IN_GU] + t * 2 * f, *u = g + f; \
			OUT *y = out[OUT_Y] + t * f; \
			for (int64_t j = 0; j < f; j++) { \
				REAL silu = (REAL)g[j] / ((REAL)1 + EXP(-(REAL)g[j])); \
				y[j] = (OUT)(silu * (REAL)u[j]); \
			} \
		} \
	}

DEFINE_SWIGLU(mb_ref_swiglu, float, float, expf)
DEFINE_SWIGLU(mb_oracle_swiglu, double, double, exp)

/* ---- the swiglu catalog row: shapes, bytes, tolerances, variants ----------------------------------------------------------
 *
 * Error budget, in u = 2^-24 (fp32 unit roundoff), relative to the exact
 * result on the same rounded inputs. Every step is multiplicative except
 * 1 + e, and e = exp(-g) > 0 there, so nothing cancels and the bound stays
 * relative for every element; an error of k ulps in e moves 1 + e by at
 * most k ulps of e relative, since e / (1 + e) < 1; an ulp is at most 2u
 * relative.
 *   GPU:  expf <= 2 ulp (CUDA's documented bound) = 4u, then the add, the
 *         IEEE division and the multiply at u each: 7u.
 *   host: glibc expf <= 1 ulp (measured 0.502) = 2u, plus the same three
 *         roundings: 5u.
 * got vs want: 7u + 5u = 12u; the second-order products (7u * 5u, and the
 * storage roundings times 12u) stay under one more u: 13u.
 * Storage in dtype d with unit roundoff u_d: the fused kernel rounds y once
 * (u_d). The fallback also stores silu(g) in d before the multiply: a second
 * u_d, and (1 + u_d)^2 adds u_d^2. Both paths stay within
 *   2 u_d + u_d^2 + 13u  (for fp32 the temporary is exact and u_d = 0).
 * fp16 has subnormals under 2^-14 where rounding is absolute (half the
 * spacing, 2^-25): once on y, and once on silu(g) scaled by |u| < 8.
 * The fused fp16/bf16 kernels compute silu with __expf and __fdividef
 * (CUDA's documented bounds: 2 + floor(1.173 |x|) ulp, so 11 ulp = 22u for
 * |g| < 8, and 2 ulp = 4u for denominators in [1, 2^126]): 22u through
 * 1 + e (scaled by e / (1 + e) < 1), the add u, the division 4u, the
 * multiply u: 28u on the GPU, 5u on the host, 34u with second-order
 * terms. That replaces the 13u term for those dtypes; next to the storage
 * rounding (2^-7 for bf16, 2^-10 for fp16) it is a 2.6e-4 (bf16) or
 * 2.1e-3 (fp16) share of the bound. */
#define SWIGLU_F32_REL (13 * F32_EPS)
#define SWIGLU_FAST_REL (34 * F32_EPS)
#define SWIGLU_ROUNDED_TWICE(half_ulp) (2 * (half_ulp) + (half_ulp) * (half_ulp) + SWIGLU_FAST_REL)
#define F16_SUBNORMAL_HALF_SPACING 0x1p-25
/* Inputs stay under 8 in magnitude (see row_common.h). */
#define SWIGLU_INPUT_MAX 8
#define F32_NORMAL_MIN 0x1p-126

static int swiglu_tensors(const int64_t *a, mb_tensor_spec *t)
{
	t[0] = (mb_tensor_spec){"gu", false, a[AX_T], 2 * a[AX_F], MB_FILL_NORMAL, 0, 1};
	t[1] = (mb_tensor_spec){"y", true, a[AX_T], a[AX_F], MB_FILL_NORMAL, 0, 0};
	return 2;
}

static uint64_t swiglu_bytes(const int64_t *a, mb_dtype dtype)
{
	/* gu [T, 2F] read once, y [T, F] written once */
	return 3ull * (uint64_t)a[AX_T] * (uint64_t)a[AX_F] * mb_dtype_size(dtype);
}

/* By launch, with y = [T, F] elements: fused, gu read (2y), y written.
 * Fallback, as a framework runs silu(gu[:, :F]) * gu[:, F:]: F.silu on the
 * strided g view (g read, silu(g) written into y), then the multiply
 * (silu(g) and u read, y written), two elementwise launches: 5y of
 * traffic for the fused kernel's 3y, a model speedup of 1.67. */
static int swiglu_traffic(const int64_t *a, mb_dtype dtype, const mb_variant *v, mb_launch_traffic *out)
{
	const uint64_t y = (uint64_t)a[AX_T] * (uint64_t)a[AX_F] * mb_dtype_size(dtype);
	int n = 0;

	switch (v->kind) {
	case MB_VARIANT_FUSED:
	case MB_VARIANT_REFERENCE:
		return mb_traffic_one(v, 2 * y, y, out);
	case MB_VARIANT_FALLBACK:
		mb_traffic_add(out, &n, v->kernel_patterns[0], y, y);     /* silu: g -> silu(g) */
		mb_traffic_add(out, &n, v->kernel_patterns[1], 2 * y, y); /* mul: silu(g), u -> y */
		return n;
	default:
		return -1;
	}
}

static uint64_t swiglu_flops(const int64_t *a)
{
	/* negate, exp, add, divide, multiply: 5 per output element (exp and
	 * the division count as one each, though each is several instructions) */
	return 5ull * (uint64_t)a[AX_T] * (uint64_t)a[AX_F];
}

const mb_row mb_row_swiglu = {
	MB_ROW_NAME(swiglu, "fp32, expf, "),
	.block = 'E',
	.status = MB_ROW_EXPERIMENTAL,
	.summary = "y = silu(g) * u with g, u the two halves of each row of gu [T,2F]; y [T,F]",
	.n_axes = 2,
	.axes = {"T", "F"},
	.check_shape = NULL,
	.tensors = swiglu_tensors,
	.bytes = swiglu_bytes,
	.traffic = swiglu_traffic,
	.flops = swiglu_flops,
	.source_files = {MB_ROW_FILES(swiglu)},
	.tolerance = {
		[MB_FP32] = {F32_NORMAL_MIN, SWIGLU_F32_REL,
			"GPU expf <= 2 ulp + add, IEEE div, mul (7u) against glibc expf <= 1 ulp + the same (5u), no cancellation since 1+exp(-g) > 1: 13u with second-order terms"},
		[MB_FP16] = {F16_SUBNORMAL_HALF_SPACING * (1 + SWIGLU_INPUT_MAX), SWIGLU_ROUNDED_TWICE(F16_HALF_ULP),
			"the plain path rounds silu(g) and y to fp16: 2*2^-11 + 2^-22 relative over the fused kernel's fast exp and division (34u); in fp16's subnormal range 2^-25 on y plus |u| < 8 times 2^-25 on silu(g)"},
		[MB_BF16] = {F32_NORMAL_MIN, SWIGLU_ROUNDED_TWICE(BF16_HALF_ULP),
			"the plain path rounds silu(g) and y to bf16: 2*2^-8 + 2^-16 relative over the fused kernel's fast exp and division (34u); the fused path rounds once and sits inside"},
	},
	.n_variants = 3,
	.variants = {
		{.name = "fused", .kind = MB_VARIANT_FUSED, .backend = "cuda",
			.description = "one launch: 16-byte loads of both halves, silu and product in fp32 "
			"(accurate expf and IEEE division for fp32, __expf and __fdividef for fp16/bf16), "
			"16-byte stores",
			.launches_per_call = 1, .kernel_patterns = {"swiglu_fused"},
			.launch = GPU_LAUNCH(mb_swiglu_fused_launch), .dtype_mask = MB_DTYPE_ALL},
		{.name = "fallback", .kind = MB_VARIANT_FALLBACK, .backend = "cuda",
			.description = "plain path (F.silu on the g view, then the multiply by u): a silu "
			"launch writes silu(g) (case dtype) into y, a multiply launch scales it by u in place; "
			"each a vectorized elementwise kernel (16-byte accesses, 4 per thread, a grid that "
			"covers the data once)",
			.launches_per_call = 2,
			.kernel_patterns = {"swiglu_fallback_silu", "swiglu_fallback_mul"},
			.launch = GPU_LAUNCH(mb_swiglu_fallback_launch), .dtype_mask = MB_DTYPE_ALL},
		MB_REFERENCE_VARIANT,
	},
};
