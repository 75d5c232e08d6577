/* Manifold-constrained hyper-connections (mHC): per token t, n streams
 * x_t[j] of width W (x [T, n*W], stream j at columns j*W .. j*W + W-1) are
 * mixed by a doubly stochastic n x n matrix made from the token itself:
 *   xbar = (1/n) sum_j x_t[j]                         [W]
 *   phi[i][j] = dot(xbar, P[i*n + j]) / sqrt(W)        P [n*n, W]
 *   M = exp(phi), then I Sinkhorn iterations, each normalising every row
 *     to sum 1, then every column (S the result, fp32)
 *   y_t[i] = sum_j S[i][j] x_t[j]                     y [T, n*W]
 * Axes T, N (= n), W, I.
 *
 * Worked by hand: n = 2, W = 1, x = (1, 3), so xbar = 2; P = (ln 2 / 2, 0,
 * 0, ln 2 / 2) gives phi = (ln 2, 0; 0, ln 2) and M = (2, 1; 1, 2). The
 * first row step gives (2/3, 1/3; 1/3, 2/3), whose columns already sum to
 * 1: S is that, and y = (2/3 + 1, 1/3 + 2) = (5/3, 7/3).
 *
 * Sums: xbar adds the streams in order and divides by n; the dot products
 * are pairwise over W (leaves of 8); Sinkhorn's sums and the mix add in
 * index order. One body serves both precisions; tokens are split over the
 * host's cores (4096 sampled tokens of 16 dot products of 4096). */
#include <math.h>

#include "reference/row_common.h"
#include "reference/parallel.h"
#include "reference/pairwise.h"
#include "reference/reference.h"
#include "reference/traffic.h"

/* The GPU variants the descriptor names, defined in src/kernels/mhc_sinkhorn.cu:
 * in x [T,N*W], P [N*N,W]; out y [T,N*W]. */
MB_DECLARE_LAUNCH(mb_mhc_sinkhorn_fused_launch);
MB_DECLARE_LAUNCH(mb_mhc_sinkhorn_fallback_launch);

enum { AX_T, AX_N, AX_W, AX_I };
enum { IN_X, IN_P };
enum { OUT_Y };

/* Streams the reference holds an n x n matrix of on its stack. */
#define MHC_MAX_STREAMS 8
/* The fallback launches two kernels per iteration: its launch count, which
 * a variant declares once for every shape, fixes I. */
#define MHC_ITERATIONS 20
/* The tolerance below is derived for W up to this. */
#define MHC_MAX_WIDTH 8192

/* ---- tokens over the host's cores ------------------------------------------ */

/* Half the host's cores, as the input twin takes. */
#define REF_CORES_SHARE 0.5

typedef struct row_job {
	void (*fn)(const struct row_job *job, int64_t row, void *scratch);
	const int64_t *axis;
	const float *const *in;
	void *const *out;
	const int64_t *rows;
} row_job;

/* The i-th listed row, by one thread: the result does not depend on the
 * thread count. */
static void row_item(void *arg, int64_t i, void *scratch)
{
	const row_job *job = arg;

	job->fn(job, mb_ref_row(job->rows, i), scratch);
}

/* ---- one token -------------------------------------------------------------- */


/* `scratch`, the thread's, holds 2W REALs: xbar, then one dot product's
 * terms, both written before they are read. */
#define DEFINE_MHC_TOKEN(fn, REAL, SUM, EXP, SQRT) \
	static void fn(const row_job *job, int64_t t, void *scratch) \
	{ \
		const int64_t n = job->axis[AX_N], w = job->axis[AX_W], iters = job->axis[AX_I]; \
		const float *x = job->in[IN_X] + t * n * w, *p = job->in[IN_P]; \
		REAL *y = (REAL *)job->out[OUT_Y] + t * n * w; \
		REAL m[MHC_MAX_STREAMS][MHC_MAX_STREAMS]; \
		REAL *xbar = scratch, *terms = xbar + w; \
		for (int64_t k = 0; k < w; k++) { \
			REAL s = 0; \
			for (int64_t j = 0; j < n; j++) \
				s += (REAL)x[j * w + k]; \
			xbar[k] = s / (REAL)n; \
		} \
		for (int64_t i = 0; i < n; i++) { \
			for (int64_t j = 0; j < n; j++) { \
				const float *pk = p + (i * n + j) * w; \
				for (int64_t k = 0; k < w; k++) \
					terms[k] = xbar[k] * (REAL)pk[k]; \
				m[i][j] = EXP(SUM(terms, w) / SQRT((REAL)w)); \
			} \
		} \
		for (int64_t it = 0; it < iters; it++) { \
			for (int64_t i = 0; i < n; i++) { \
				REAL s = 0; \
				for (int64_t j = 0; j < n; j++) \
					s += m[i][j]; \
				for (int64_t j = 0; j < n; j++) \
					m[i][j] /= s; \
			} \
			for (int64_t j = 0; j < n; j++) { \
				REAL s = 0; \
				for (int64_t i = 0; i < n; i++) \
					s += m[i][j]; \
				for (int64_t i = 0; i < n; i++) \
					m[i][j] /= s; \
			} \
		} \
		for (int64_t i = 0; i < n; i++) { \
			for (int64_t k = 0; k < w; k++) { \
				REAL s = 0; \
				for (int64_t j = 0; j < n; j++) \
					s += m[i][j] * (REAL)x[j * w + k]; \
				y[i * w + k] = s; \
			} \
		} \
	}

DEFINE_MHC_TOKEN(mhc_token_f32, float, mb_pairwise_sum_f32, expf, sqrtf)
DEFINE_MHC_TOKEN(mhc_token_f64, double, mb_pairwise_sum_f64, exp, sqrt)

void mb_ref_mhc_sinkhorn(const int64_t *axis, const float *const *in, float *const *out, const int64_t *rows,
	int64_t n_rows)
{
	row_job job = {mhc_token_f32, axis, in, (void *const *)out, rows};

	mb_ref_parallel_scratch(n_rows, REF_CORES_SHARE, 2 * (size_t)axis[AX_W] * sizeof(float), row_item, &job);
}

void mb_oracle_mhc_sinkhorn(const int64_t *axis, const float *const *in, double *const *out, const int64_t *rows,
	int64_t n_rows)
{
	row_job job = {mhc_token_f64, axis, in, (void *const *)out, rows};

	mb_ref_parallel_scratch(n_rows, REF_CORES_SHARE, 2 * (size_t)axis[AX_W] * sizeof(double), row_item, &job);
}

/* ---- the mhc_sinkhorn catalog row: shapes, bytes, tolerances, variants ----------------------------------------------------
 *
 * Fills: x and P bell-shaped N(0, 1) (|v| < 3.47). Then xbar has standard
 * deviation 1/2 (n = 4) and phi = dot(xbar, P_k)/sqrt(W) has 1/2: M's
 * entries span about e^-2 .. e^2, a well-conditioned positive matrix.
 *
 * Error analysis, in u = 2^-24, of |log S~ - log S| (relative error of
 * each entry of S) and then of y. xbar is the same on both sides (the
 * streams added in order, the division by n = 2 or 4 exact).
 *  - phi: sums of W products, the reference pairwise (chains of 8, then
 *    log2(W/8) levels), the GPU a thread's chain of <= 32, a warp's 5-level
 *    tree and the 8 warps in order. Roundings are independent with
 *    variance <= u^2/3 of each partial sum squared; a partial of m terms of
 *    standard deviation 1/2 has E partial^2 = m/4, so the two sides sum to
 *    <= (32/2 + 5 + 4.5 + 8/2 + 10) W/4 u^2/3 and phi (divided by sqrt(W))
 *    has sigma <= 1.8u: 11u at six sigma, 14u with the division's rounding.
 *  - exp: CUDA's expf <= 2 ulp, glibc's <= 1 ulp: 6u on M.
 *  - Sinkhorn: each half-step rounds every entry by <= (n-1)u in its sum
 *    of positive terms, then u for the reference's division (and the
 *    fallback's); the fused kernel keeps S as diag(r) E diag(c) and
 *    rounds a scaling by nu (its sum of n products) and u (rcp.approx,
 *    <= 1 ulp): <= 10u between the two sides for n = 4, 40 half-steps:
 *    400u; forming S at the end rounds twice more, 2u straight onto
 *    log S (not through the propagation below).
 *  - propagation: a row or column normalisation is a diagonal scaling; a
 *    relative perturbation of the entries at some half-step reaches
 *    log S through the Jacobian of the remaining steps, which tends to the
 *    oblique projector off row and column constants (infinity-norm 2.25 at
 *    the uniform fixed point, 4 (N-1)^2/N^2). Its infinity-norm over every
 *    starting half-step, measured by finite differences on random M of the
 *    fills' spread, stays under 3.43 (4.15 at twice the spread): C = 4.
 *    |log S~ - log S| <= 4 (14 + 6 + 400)u + 2u = 1682u.
 *  - y: |dy_i| <= sum_j S_ij |x_j| |d log S_ij| plus the mix's n roundings
 *    on each side: (1682 + 8)u * max|x| * (row sum of S, 1 + 1e-7 after
 *    20 iterations) <= 5900u = 3.5e-4, the absolute term (y may cancel to
 *    zero, so no relative bound holds alone).
 * The GPU variants keep every intermediate in fp32 (the fallback's [T,n,n]
 * buffer too), so fp16 and bf16 add only the output's rounding: half an
 * ulp, u_d relative. */
#define MHC_ABS (5900 * F32_EPS)
#define MHC_REL_F32 (8 * F32_EPS)

static int mhc_check(const int64_t *axis, mb_error *err)
{
	if (axis[AX_N] > MHC_MAX_STREAMS)
		return mb_error_set(err, MB_EINVAL, NULL, "N must be at most %d streams, got %lld", MHC_MAX_STREAMS,
			(long long)axis[AX_N]);
	if (axis[AX_W] > MHC_MAX_WIDTH)
		return mb_error_set(err, MB_EINVAL, NULL, "W must be at most %d (the tolerance's derivation), got %lld",
			MHC_MAX_WIDTH, (long long)axis[AX_W]);
	if (axis[AX_I] != MHC_ITERATIONS)
		return mb_error_set(err, MB_EINVAL, NULL, "I must be %d: the fallback declares its launch count (two "
			"per iteration) once for every shape, got %lld", MHC_ITERATIONS, (long long)axis[AX_I]);
	return 0;
}

static int mhc_tensors(const int64_t *a, mb_tensor_spec *t)
{
	const int64_t n = a[AX_N], w = a[AX_W];

	t[0] = (mb_tensor_spec){"x", false, a[AX_T], n * w, MB_FILL_NORMAL, 0, 1};
	t[1] = (mb_tensor_spec){"P", false, n * n, w, MB_FILL_NORMAL, 0, 1};
	t[2] = (mb_tensor_spec){"y", true, a[AX_T], n * w, MB_FILL_NORMAL, 0, 0};
	return 3;
}

static uint64_t mhc_bytes(const int64_t *a, mb_dtype dtype)
{
	/* x read once, P read once, y written once */
	const uint64_t n = (uint64_t)a[AX_N], w = (uint64_t)a[AX_W];

	return (2 * (uint64_t)a[AX_T] * n * w + n * n * w) * mb_dtype_size(dtype);
}

/* By launch, with X the bytes of x (and of y), Pb of P and Mb of the fp32
 * [T, n, n] matrices. Fused: x once (held in registers from the projection
 * to the mix) and P read, y written. Fallback: the projection (x and P
 * read, M = exp(phi) written), I row and I column normalisations over M
 * (each reads and writes it; 1 MiB at T = 16384, from L2), the mix (x
 * read again with S, y written): 3X + Pb + (4I + 2) Mb for the fused
 * kernel's 2X + Pb, and 2I + 2 = 42 launches against one. */
static int mhc_traffic(const int64_t *a, mb_dtype dtype, const mb_variant *v, mb_launch_traffic *out)
{
	const uint64_t n = (uint64_t)a[AX_N], w = (uint64_t)a[AX_W], t = (uint64_t)a[AX_T];
	const uint64_t x = t * n * w * mb_dtype_size(dtype), p = n * n * w * mb_dtype_size(dtype);
	const uint64_t m = t * n * n * sizeof(float);
	int k = 0;

	switch (v->kind) {
	case MB_VARIANT_FUSED:
	case MB_VARIANT_REFERENCE:
		return mb_traffic_one(v, x + p, x, out);
	case MB_VARIANT_FALLBACK:
		mb_traffic_add(out, &k, v->kernel_patterns[0], x + p, m); /* x, P -> M */
		for (int64_t it = 0; it < a[AX_I]; it++) {
			mb_traffic_add(out, &k, v->kernel_patterns[1], m, m); /* rows */
			mb_traffic_add(out, &k, v->kernel_patterns[2], m, m); /* columns */
		}
		mb_traffic_add(out, &k, v->kernel_patterns[3], x + m, x); /* x, S -> y */
		return k;
	default:
		return -1;
	}
}

static uint64_t mhc_flops(const int64_t *a)
{
	/* per token: xbar (n W adds), n^2 dot products of W (2 n^2 W), the
	 * mix (2 n^2 W); n^2 exps and 4 n^2 per Sinkhorn iteration (sums and
	 * divisions), negligible next to them but counted */
	const uint64_t n = (uint64_t)a[AX_N], w = (uint64_t)a[AX_W];

	return (uint64_t)a[AX_T] * (n * w + 4 * n * n * w + n * n + 4 * n * n * (uint64_t)a[AX_I]);
}

const mb_row mb_row_mhc_sinkhorn = {
	MB_ROW_NAME(mhc_sinkhorn, "fp32, pairwise dot products, "),
	.block = 'X',
	.status = MB_ROW_KEEP,
	.condition = NULL,
	.summary = "mHC stream mixing: per token, phi = mean of the N streams dotted with P [N*N,W] / sqrt(W), "
		"S = I Sinkhorn iterations (rows then columns) of exp(phi), y_i = sum_j S_ij x_j; x, y [T,N*W]",
	.n_axes = 4,
	.axes = {"T", "N", "W", "I"},
	.check_shape = mhc_check,
	.tensors = mhc_tensors,
	.bytes = mhc_bytes,
	.traffic = mhc_traffic,
	.flops = mhc_flops,
	/* P is read whole for every token, whatever T is (T = N*N would
	 * otherwise make it look like a per-token input) */
	.reads = {[IN_X] = MB_READS_AUTO, [IN_P] = MB_READS_ALL},
	.source_files = {MB_ROW_FILES(mhc_sinkhorn)},
	.tolerance = {
		[MB_FP32] = {MHC_ABS, MHC_REL_F32,
			"log S off by <= C(14u phi at 6 sigma + 6u exp + 40 half-steps x 10u), C = 4 the measured "
			"sensitivity of 20 Sinkhorn iterations; y = S x with |x| < 3.47: 5900u abs"},
		[MB_FP16] = {MHC_ABS, F16_HALF_ULP + MHC_REL_F32,
			"every intermediate in fp32 (bound as for fp32, 5900u abs), the output rounded once to fp16: 2^-11 relative"},
		[MB_BF16] = {MHC_ABS, BF16_HALF_ULP + MHC_REL_F32,
			"every intermediate in fp32 (bound as for fp32, 5900u abs), the output rounded once to bf16: 2^-8 relative"},
	},
	.n_variants = 3,
	.variants = {
		{.name = "fused", .kind = MB_VARIANT_FUSED, .backend = "cuda",
			.description = "one block per token, four an SM: x loaded once into registers (the last 16-byte vector of "
			"streams 1 .. N-1 of each thread into shared memory, so that the dot products do not spill), the stream mean "
			"and the N*N dot products with P (from L1), a shuffle-and-shared-memory reduction, exp and the "
			"Sinkhorn iterations in one warp's registers, then the mix from the same registers and y written "
			"once",
			.launches_per_call = 1, .kernel_patterns = {"mhc_sinkhorn_fused"},
			.launch = GPU_LAUNCH(mb_mhc_sinkhorn_fused_launch), .dtype_mask = MB_DTYPE_ALL},
		{.name = "fallback", .kind = MB_VARIANT_FALLBACK, .backend = "cuda",
			.description = "as a framework runs it: a projection reduction kernel (one block per "
			"token) writing exp(phi) to an fp32 [T,N,N] buffer, a row-normalise and a "
			"column-normalise launch per iteration over it (2I = 40), then the mixing launch "
			"reading x again",
			.launches_per_call = 2 + 2 * MHC_ITERATIONS,
			.kernel_patterns = {"mhc_sinkhorn_fb_project", "mhc_sinkhorn_fb_norm_rows", "mhc_sinkhorn_fb_norm_cols", "mhc_sinkhorn_fb_mix"},
			.launch = GPU_LAUNCH(mb_mhc_sinkhorn_fallback_launch), .dtype_mask = MB_DTYPE_ALL},
		MB_REFERENCE_VARIANT,
	},
};
