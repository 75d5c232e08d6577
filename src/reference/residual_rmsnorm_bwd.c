/* Backward of residual_rmsnorm (h = x + r; y = h * rstd * w with
 * rstd = 1 / sqrt(mean(h^2) + eps)) over the hidden axis:
 *   g = dy * w
 *   dh = dh_in + rstd * (g - h * rstd^2 * mean(g * h))
 *   dx = dr = dh                  (h = x + r passes dh to both unchanged)
 *   dw[j] = sum over tokens t of dy[t,j] * h[t,j] * rstd[t]
 * on dy, dh_in, h [T, H] and w [H]; outputs dx [T, H] and dw [1, H].
 * dh_in is the gradient that reaches h from the residual stream downstream.
 *
 * Reductions are pairwise: over the hidden axis per token (error grows with
 * log2(H)) and over tokens for dw (with log2(T)), so the fp32 reference sits
 * far inside the GPU variants' tolerance. dx is computed only for the listed
 * rows; dw is always reduced over all T tokens, whatever rows were asked
 * for. One body serves both precisions. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference/row_common.h"
#include "reference/pairwise.h"
#include "reference/reference.h"
#include "reference/traffic.h"

/* The GPU variants the descriptor names, defined in src/kernels/residual_rmsnorm_bwd.cu:
 * in dy, dh_in, h [T,H], w [1,H]; out dx [T,H], dw [1,H]. */
MB_DECLARE_LAUNCH(mb_residual_rmsnorm_bwd_fused_launch);
MB_DECLARE_LAUNCH(mb_residual_rmsnorm_bwd_fallback_launch);

enum { AX_T, AX_H };
enum { IN_DY, IN_DH, IN_H, IN_W };
enum { OUT_DX, OUT_DW };


/* acc[j] = sum over tokens t0 .. t0+n-1 of dy*h*rstd, pairwise over tokens.
 * `spare` holds one H-row per remaining recursion level. */
#define DEFINE_DW(fn, REAL) \
	static void fn(const float *dy, const float *h, const REAL *rstd, int64_t t0, int64_t n, \
		int64_t hidden, REAL *acc, REAL *spare) \
	{ \
		if (n <= MB_PAIRWISE_LEAF) { \
			for (int64_t j = 0; j < hidden; j++) \
				acc[j] = 0; \
			for (int64_t t = t0; t < t0 + n; t++) { \
				const float *dyt = dy + t * hidden, *ht = h + t * hidden; \
				for (int64_t j = 0; j < hidden; j++) \
					acc[j] += (REAL)dyt[j] * (REAL)ht[j] * rstd[t]; \
			} \
			return; \
		} \
		fn(dy, h, rstd, t0, n / 2, hidden, acc, spare); \
		fn(dy, h, rstd, t0 + n / 2, n - n / 2, hidden, spare, spare + hidden); \
		for (int64_t j = 0; j < hidden; j++) \
			acc[j] += spare[j]; \
	}

DEFINE_DW(dw_f32, float)
DEFINE_DW(dw_f64, double)

/* Recursion levels of DEFINE_DW over n tokens (one spare row each). */
static int64_t dw_levels(int64_t n)
{
	int64_t levels = 0;

	for (; n > MB_PAIRWISE_LEAF; n -= n / 2)
		levels++;
	return levels;
}

/* `scratch` holds one row of products in REAL precision; rstd[T] every
 * token's 1/rms, since dw needs all of them. */
#define DEFINE_RMSNORM_BWD(fn, REAL, OUT, sum, dw_sum, SQRT) \
	void fn(const int64_t *axis, const float *const *in, OUT *const *out, \
		const int64_t *rows, int64_t n_rows) \
	{ \
		int64_t tokens = axis[AX_T], hidden = axis[AX_H]; \
		int64_t levels = dw_levels(tokens); \
		REAL *scratch = malloc((size_t)hidden * sizeof(REAL)); \
		REAL *rstd = malloc((size_t)tokens * sizeof(REAL)); \
		REAL *dw = malloc((size_t)(hidden * (levels + 1)) * sizeof(REAL)); \
		if (!scratch || !rstd || !dw) \
			abort(); /* the harness sized host memory before calling */ \
		for (int64_t t = 0; t < tokens; t++) { \
			const float *h = in[IN_H] + t * hidden; \
			for (int64_t j = 0; j < hidden; j++) \
				scratch[j] = (REAL)h[j] * (REAL)h[j]; \
			rstd[t] = (REAL)1 / SQRT(sum(scratch, hidden) / (REAL)hidden + (REAL)MB_RMSNORM_EPS); \
		} \
		for (int64_t i = 0; i < n_rows; i++) { \
			int64_t t = mb_ref_row(rows, i); \
			const float *dy = in[IN_DY] + t * hidden, *dh = in[IN_DH] + t * hidden; \
			const float *h = in[IN_H] + t * hidden, *w = in[IN_W]; \
			for (int64_t j = 0; j < hidden; j++) \
				scratch[j] = (REAL)dy[j] * (REAL)w[j] * (REAL)h[j]; \
			REAL r = rstd[t], c = r * r * (sum(scratch, hidden) / (REAL)hidden); \
			for (int64_t j = 0; j < hidden; j++) { \
				REAL g = (REAL)dy[j] * (REAL)w[j]; \
				out[OUT_DX][t * hidden + j] = (OUT)((REAL)dh[j] + r * (g - (REAL)h[j] * c)); \
			} \
		} \
		dw_sum(in[IN_DY], in[IN_H], rstd, 0, tokens, hidden, dw, dw + hidden); \
		for (int64_t j = 0; j < hidden; j++) \
			out[OUT_DW][j] = (OUT)dw[j]; \
		free(scratch); \
		free(rstd); \
		free(dw); \
	}

DEFINE_RMSNORM_BWD(mb_ref_residual_rmsnorm_bwd, float, float, mb_pairwise_sum_f32, dw_f32, sqrtf)
DEFINE_RMSNORM_BWD(mb_oracle_residual_rmsnorm_bwd, double, double, mb_pairwise_sum_f64, dw_f64, sqrt)

/* ---- the residual_rmsnorm_bwd catalog row: shapes, bytes, tolerances, variants ------------------------------------------ */

/* The fills: dy, dh_in and h are N(0, 1), w is U(0.5, 1.5) as in the
 * forward. Then rstd ~ 1 and each dw term dy*h*rstd has unit variance,
 * which the dw tolerance below is written in. */
#define DW_TERM_STD 1.0

/* dw in fp32 is a sum over T <= 32768 = 2^15 tokens whose longest chain of
 * sequential adds, in any variant, is at most 512 = 2^9 (the fused kernel
 * sums <= ceil(T / #SMs) tokens per block, then a tree over blocks; the
 * fallback keeps 4 accumulators per thread over at most 4096 / 16 tokens,
 * folds them, sums 16 threads as a tree and at most 128 block partials in
 * sequence: under 200; the reference is pairwise). Each add rounds by at most u * |partial sum|, the
 * partial sums are random walks of unit steps, so the error is a sum of
 * independent roundings with standard deviation
 *   u * sqrt(chain * T / 6) < u * sqrt(2^9 * 2^15) / 2 = u * 2^12 / 2.
 * Six standard deviations (2e-9 per element of passing by chance) give
 * 3 * u * 2^12 = 7.3e-4: the abs term, in dw's units. The worst-case bound
 * (chain * u * sum|terms| ~ 0.4) is not reachable by unbiased rounding. */
#define DW_SQRT_CHAIN_TIMES_TOKENS 0x1p12
#define DW_STDS 6.0
#define DW_ABS (DW_STDS / 2 * F32_EPS * DW_SQRT_CHAIN_TIMES_TOKENS * DW_TERM_STD)

enum { BWD_T, BWD_H };

static int bwd_tensors(const int64_t *a, mb_tensor_spec *t)
{
	t[0] = (mb_tensor_spec){"dy", false, a[BWD_T], a[BWD_H], MB_FILL_NORMAL, 0, 1};
	t[1] = (mb_tensor_spec){"dh_in", false, a[BWD_T], a[BWD_H], MB_FILL_NORMAL, 0, 1};
	t[2] = (mb_tensor_spec){"h", false, a[BWD_T], a[BWD_H], MB_FILL_NORMAL, 0, 1};
	t[3] = (mb_tensor_spec){"w", false, 1, a[BWD_H], MB_FILL_UNIFORM, 0.5f, 1.5f};
	t[4] = (mb_tensor_spec){"dx", true, a[BWD_T], a[BWD_H], MB_FILL_NORMAL, 0, 0};
	/* one row: reduced over every token, so the checker must compare it
	 * whole whatever token rows it samples for dx */
	t[5] = (mb_tensor_spec){"dw", true, 1, a[BWD_H], MB_FILL_NORMAL, 0, 0};
	return 6;
}

static uint64_t bwd_bytes(const int64_t *a, mb_dtype dtype)
{
	/* dy, dh_in, h read and dx written: 4 [T,H]; w read and dw written
	 * once: 2 [1,H]. The fused kernel's fp32 dw partials are extra traffic,
	 * not part of the model. */
	return ((uint64_t)a[BWD_T] * 4 + 2) * (uint64_t)a[BWD_H] * mb_dtype_size(dtype);
}

/* By launch, with a = [T, H] and w = [H] in bytes, and T fp32 rstd. Fused:
 * the pass over the tokens (dy, dh_in, h and w read, dx written; its fp32
 * dw partials, as in bwd_bytes, are outside the model), then the sum of
 * the partials (dw written). Fallback, as a framework's norm backward runs:
 * rstd recomputed from h (h read, rstd written), dx (dy, dh_in, h, w and
 * rstd read, dx written), then dw as a column sum of dy*h*rstd (dy, h and
 * rstd read, dw written): 7a + 2w + 3 rstd of traffic for the fused
 * kernel's 4a + 2w, a model speedup of about 1.75. */
static int bwd_traffic(const int64_t *a, mb_dtype dtype, const mb_variant *v, mb_launch_traffic *out)
{
	const uint64_t w = (uint64_t)a[BWD_H] * mb_dtype_size(dtype), t = w * (uint64_t)a[BWD_T];
	const uint64_t rstd = (uint64_t)a[BWD_T] * sizeof(float);
	int n = 0;

	switch (v->kind) {
	case MB_VARIANT_FUSED:
		mb_traffic_add(out, &n, v->kernel_patterns[0], 3 * t + w, t); /* dy, dh_in, h, w -> dx */
		mb_traffic_add(out, &n, v->kernel_patterns[1], 0, w);         /* partials -> dw */
		return n;
	case MB_VARIANT_REFERENCE:
		return mb_traffic_one(v, 3 * t + w, t + w, out);
	case MB_VARIANT_FALLBACK:
		mb_traffic_add(out, &n, v->kernel_patterns[0], t, rstd);             /* h -> rstd */
		mb_traffic_add(out, &n, v->kernel_patterns[1], 3 * t + w + rstd, t); /* dy, dh_in, h, w, rstd -> dx */
		mb_traffic_add(out, &n, v->kernel_patterns[2], 2 * t + rstd, w);     /* dy, h, rstd -> dw */
		return n;
	default:
		return -1;
	}
}

static uint64_t bwd_flops(const int64_t *a)
{
	/* per element: h^2 and g*h accumulated (4), g = dy*w (1), dx = dh_in +
	 * rstd*(g - h*c) (4), dw term dy*h*rstd accumulated (3): 12 */
	return 12ull * (uint64_t)a[BWD_T] * (uint64_t)a[BWD_H];
}

const mb_row mb_row_residual_rmsnorm_bwd = {
	MB_ROW_NAME(residual_rmsnorm_bwd, "fp32, pairwise over H and over tokens, "),
	.block = 'X',
	.status = MB_ROW_EXPERIMENTAL,
	.summary = "backward of h = x + r; y = h * rstd * w: dx (= dr, one tensor) = dh_in + rstd*(g - h*rstd^2*mean(g*h)) "
		"with g = dy*w, and dw = sum over tokens of dy*h*rstd; in dy, dh_in, h [T,H], w [1,H]; out dx [T,H], dw [1,H]",
	.n_axes = 2,
	.axes = {"T", "H"},
	.check_shape = NULL,
	.tensors = bwd_tensors,
	.bytes = bwd_bytes,
	.traffic = bwd_traffic,
	.flops = bwd_flops,
	/* dw sums dy * h * rstd over every token, and rstd needs all of h: the
	 * reference reads every row of dy and h whatever rows of dx it checks */
	.reads = {[IN_DY] = MB_READS_ALL, [IN_H] = MB_READS_ALL},
	.source_files = {MB_ROW_FILES(residual_rmsnorm_bwd)},
	.tolerance = {
		[MB_FP32] = {DW_ABS, 64 * F32_EPS,
			"dx: terms under ~20, rstd and mean(g*h) each off by log2(H)/2+2 roundings: < 400u abs, inside; "
			"dw: T<=2^15 unit terms on chains <=2^9 adds, 6 std of the rounding walk is 3u*2^12 = 7.3e-4 abs"},
		[MB_FP16] = {DW_ABS, F16_HALF_ULP + 64 * F32_EPS,
			"the fp32 dx and dw (bounds as for fp32) rounded once to fp16: half an ulp, 2^-11 relative"},
		[MB_BF16] = {DW_ABS, BF16_HALF_ULP + 64 * F32_EPS,
			"the fp32 dx and dw (bounds as for fp32) rounded once to bf16: half an ulp, 2^-8 relative"},
	},
	.n_variants = 3,
	.variants = {
		{.name = "fused", .kind = MB_VARIANT_FUSED, .backend = "cuda",
			.description = "one pass per token for dx with fp32 dw partials per block in "
			"registers, then a launch summing the partials",
			.launches_per_call = 2,
			.kernel_patterns = {"residual_rmsnorm_bwd_fused", "residual_rmsnorm_bwd_dw_finalize"},
			.launch = GPU_LAUNCH(mb_residual_rmsnorm_bwd_fused_launch), .dtype_mask = MB_DTYPE_ALL},
		{.name = "fallback", .kind = MB_VARIANT_FALLBACK, .backend = "cuda",
			.description = "plain path: an rstd launch, a dx launch reading rstd back (each one "
			"block per token, the row in registers, warp-shuffle sums), a dw column-sum launch "
			"reading dy and h again (a grid that fills the device, fp32 partials summed by the "
			"last block of each column strip)",
			.launches_per_call = 3,
			.kernel_patterns = {"rmsnorm_bwd_rstd", "rmsnorm_bwd_dx", "rmsnorm_bwd_dw_colsum"},
			.launch = GPU_LAUNCH(mb_residual_rmsnorm_bwd_fallback_launch),
			.dtype_mask = MB_DTYPE_ALL},
		MB_REFERENCE_VARIANT,
	},
};
