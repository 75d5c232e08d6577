/* Residual add then RMSNorm over the hidden axis:
 *   h = x + r;  y = h / sqrt(mean(h^2) + eps) * w
 * on x, r [T, H] and w [H]; outputs y and h.
 * The fp32 reference sums squares pairwise (error grows with log2(H), not
 * H), which is what a GPU tree reduction does too, so the fp32 tolerance can
 * stay tight. One body serves both precisions. */
#include <math.h>
#include <stdlib.h>

#include "reference/row_common.h"
#include "reference/reference.h"
#include "reference/traffic.h"

/* The GPU variants the descriptor names, defined in src/kernels/residual_rmsnorm.cu:
 * in x, r [T,H], w [1,H]; out y, h [T,H]. */
MB_DECLARE_LAUNCH(mb_residual_rmsnorm_fused_launch);
MB_DECLARE_LAUNCH(mb_residual_rmsnorm_fallback_launch);

enum { AX_T, AX_H };
enum { IN_X, IN_R, IN_W };
enum { OUT_Y, OUT_H };

/* Below this many terms a plain loop is as accurate as it needs to be. */
#define PAIRWISE_LEAF 8

#define DEFINE_SUMSQ(fn, REAL) \
	static REAL fn(const REAL *v, int64_t n) \
	{ \
		REAL acc = 0; \
		if (n <= PAIRWISE_LEAF) { \
			for (int64_t i = 0; i < n; i++) \
				acc += v[i] * v[i]; \
			return acc; \
		} \
		return fn(v, n / 2) + fn(v + n / 2, n - n / 2); \
	}

DEFINE_SUMSQ(sumsq_f32, float)
DEFINE_SUMSQ(sumsq_f64, double)

/* `scratch` holds one row of h in REAL precision. */
#define DEFINE_RMSNORM(fn, REAL, OUT, sumsq, SQRT) \
	void fn(const int64_t *axis, const float *const *in, OUT *const *out, \
		const int64_t *rows, int64_t n_rows) \
	{ \
		int64_t hidden = axis[AX_H]; \
		REAL *scratch = malloc((size_t)hidden * sizeof(REAL)); \
		if (!scratch) \
			abort(); /* the harness sized host memory before calling */ \
		for (int64_t i = 0; i < n_rows; i++) { \
			int64_t t = mb_ref_row(rows, i); \
			const float *x = in[IN_X] + t * hidden, *r = in[IN_R] + t * hidden; \
			for (int64_t j = 0; j < hidden; j++) \
				scratch[j] = (REAL)x[j] + (REAL)r[j]; \
			REAL inv = (REAL)1 / SQRT(sumsq(scratch, hidden) / (REAL)hidden + (REAL)MB_RMSNORM_EPS); \
			for (int64_t j = 0; j < hidden; j++) { \
				out[OUT_H][t * hidden + j] = (OUT)scratch[j]; \
				out[OUT_Y][t * hidden + j] = (OUT)(scratch[j] * inv * (REAL)in[IN_W][j]); \
			} \
		} \
		free(scratch); \
	}

DEFINE_RMSNORM(mb_ref_residual_rmsnorm, float, float, sumsq_f32, sqrtf)
DEFINE_RMSNORM(mb_oracle_residual_rmsnorm, double, double, sumsq_f64, sqrt)

/* ---- the residual_rmsnorm catalog row: shapes, bytes, tolerances, variants ---------------------------------------------- */

enum { RMS_T, RMS_H };

static int rms_tensors(const int64_t *a, mb_tensor_spec *t)
{
	t[0] = (mb_tensor_spec){"x", false, a[RMS_T], a[RMS_H], MB_FILL_NORMAL, 0, 1};
	t[1] = (mb_tensor_spec){"r", false, a[RMS_T], a[RMS_H], MB_FILL_NORMAL, 0, 1};
	t[2] = (mb_tensor_spec){"w", false, 1, a[RMS_H], MB_FILL_UNIFORM, 0.5f, 1.5f};
	t[3] = (mb_tensor_spec){"y", true, a[RMS_T], a[RMS_H], MB_FILL_NORMAL, 0, 0};
	t[4] = (mb_tensor_spec){"h", true, a[RMS_T], a[RMS_H], MB_FILL_NORMAL, 0, 0};
	return 5;
}

static uint64_t rms_bytes(const int64_t *a, mb_dtype dtype)
{
	/* x and r read, y and h written, w read once */
	return ((uint64_t)a[RMS_T] * 4 + 1) * (uint64_t)a[RMS_H] * mb_dtype_size(dtype);
}

/* By launch, with a = [T, H] and w = [H] in bytes. Fused: x, r and w read,
 * y and h written. Fallback, as a framework runs x + r, then an RMSNorm
 * layer on the stored h: the add (x and r read, h written), then the norm
 * (h and w read, y written): 5a + w of traffic for the fused kernel's
 * 4a + w, a model speedup of 1.25. */
static int rms_traffic(const int64_t *a, mb_dtype dtype, const mb_variant *v, mb_launch_traffic *out)
{
	const uint64_t w = (uint64_t)a[RMS_H] * mb_dtype_size(dtype), t = w * (uint64_t)a[RMS_T];
	int n = 0;

	switch (v->kind) {
	case MB_VARIANT_FUSED:
	case MB_VARIANT_REFERENCE:
		return mb_traffic_one(v, 2 * t + w, 2 * t, out);
	case MB_VARIANT_FALLBACK:
		mb_traffic_add(out, &n, v->kernel_patterns[0], 2 * t, t); /* add: x, r -> h */
		mb_traffic_add(out, &n, v->kernel_patterns[1], t + w, t); /* norm: h, w -> y */
		return n;
	default:
		return -1;
	}
}

static uint64_t rms_flops(const int64_t *a)
{
	/* add, square, accumulate, scale, weight: 5 per element (the rsqrt per
	 * row is noise) */
	return 5ull * (uint64_t)a[RMS_T] * (uint64_t)a[RMS_H];
}

const mb_row mb_row_residual_rmsnorm = {
	MB_ROW_NAME(residual_rmsnorm, "fp32, pairwise sum, "),
	.block = 'X',
	.status = MB_ROW_EXPERIMENTAL,
	.summary = "h = x + r; y = h / sqrt(mean(h^2) + 1e-6) * w over the hidden axis; outputs y and h",
	.n_axes = 2,
	.axes = {"T", "H"},
	.check_shape = NULL,
	.tensors = rms_tensors,
	.bytes = rms_bytes,
	.traffic = rms_traffic,
	.flops = rms_flops,
	.source_files = {MB_ROW_FILES(residual_rmsnorm)},
	.tolerance = {
		[MB_FP32] = {16 * F32_EPS, 64 * F32_EPS,
			"sum of squares with <= 64 sequential adds per partial (2^-24*64 relative), halved by the rsqrt, plus ~4 roundings for h, scale and weight"},
		[MB_FP16] = {16 * F32_EPS, 3 * F16_HALF_ULP + 64 * F32_EPS,
			"the plain path rounds h to fp16 before the norm: half-ulp (2^-11) on h, on the mean of h^2 (worst case), and on y"},
		[MB_BF16] = {16 * F32_EPS, 3 * BF16_HALF_ULP + 64 * F32_EPS,
			"the plain path rounds h to bf16 before the norm: half-ulp (2^-8) on h, on the mean of h^2 (worst case), and on y"},
	},
	.n_variants = 3,
	.variants = {
		{.name = "fused", .kind = MB_VARIANT_FUSED, .backend = "cuda",
			.description = "one launch: add, reduce, normalise, store y and h",
			.launches_per_call = 1, .kernel_patterns = {"residual_rmsnorm_fused"},
			.launch = GPU_LAUNCH(mb_residual_rmsnorm_fused_launch), .dtype_mask = MB_DTYPE_ALL},
		{.name = "fallback", .kind = MB_VARIANT_FALLBACK, .backend = "cuda",
			.description = "plain path: an add launch writes h (a vectorized elementwise kernel), "
			"an RMSNorm launch reads it back (one block per token, the row in registers, a "
			"warp-shuffle sum)",
			.launches_per_call = 2, .kernel_patterns = {"residual_add", "rmsnorm"},
			.launch = GPU_LAUNCH(mb_residual_rmsnorm_fallback_launch), .dtype_mask = MB_DTYPE_ALL},
		MB_REFERENCE_VARIANT,
	},
};
