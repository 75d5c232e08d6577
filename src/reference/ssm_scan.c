/* A Mamba-3-style selective state-space scan with trapezoidal
 * discretisation, forward. Per batch b and head h (axes B, L, NH, P, N):
 *   dt_t     = softplus(dt_raw[t] + dt_bias[h])           (> 0)
 *   lambda_t = sigmoid(lambda_raw[t])                     (in (0, 1))
 *   a_t = exp(dt_t A[h]),  b_t = (1 - lambda_t) dt_t a_t,  c_t = lambda_t dt_t
 *   h_t = a_t h_{t-1} + b_t x_{t-1} B_{t-1}^T + c_t x_t B_t^T     ([P, N])
 *   y_t[p] = sum_n C_t[n] h_t[p, n]
 * with h_{-1} = 0 and no t-1 term at t = 0. x_t is the head's [P] vector,
 * B_t and C_t are [N] vectors shared by every head (one group, G = 1, as
 * Mamba's ngroups = 1), A[h] < 0. Storage in the case dtype, state and
 * math in fp32 (double in the oracle).
 *
 * Tensors, row-major [rows, row_elems]:
 *   x [B*NH, L*P], dt_raw [B*NH, L], lambda_raw [B*NH, L],
 *   B_ssm [B, L*N], C_ssm [B, L*N], A [1, NH], dt_bias [1, NH]; out y [B*NH, L*P].
 * The layout is head-major: a row of y is one (b, head) sequence, the
 * unit the reference samples. A token-major layout as a model holds it,
 * y [B*L, NH*P], would make a sampled row one token of every head, whose
 * value needs the whole recurrence of all heads up to it: up to
 * L*NH*P*N = 4.3e9 multiply-adds per sampled row at L = 16384. Head-major,
 * a row costs L*P*N (1.3e8) and needs only its own rows of x, dt_raw and
 * lambda_raw (MB_READS_AUTO) besides B, C, A and dt_bias (read whole).
 * For the scan itself the layout costs nothing: each (b, head) reads its
 * x and writes its y as one contiguous run along t. A model whose
 * activations are token-major ([B, L, NH, P]) would pay a transpose on
 * either side, which is outside this row.
 *
 * The reference is the definition, step by step, on up to all the host's
 * cores: work items are (sampled row, block of 8 of P), which are
 * independent (each p has its own [N] state), each recomputing its row's
 * dt, lambda, a, b, c. Within an item the state is held [N][8] so that
 * the update and the sum over n run along the 8 p's (vectorisable with
 * no reassociation); y sums over n in order.
 *
 * Worked by hand (B = NH = 1, L = 2, P = 8, N = 8; only p = 0 and n = 0
 * non-zero): dt_raw + dt_bias = ln(e - 1) gives dt = ln(1 + e - 1) = 1;
 * lambda_raw = 0 gives lambda = 1/2; A = -ln 2 gives a = 1/2, so
 * b = (1 - 1/2) * 1 * 1/2 = 1/4, c = 1/2. With x_0 = 2, x_1 = 4,
 * B_0 = B_1 = 1, C_0 = 3, C_1 = 1:
 *   h_0 = c x_0 B_0 = 1,             y_0 = 3 * 1 = 3
 *   h_1 = a h_0 + b x_0 B_0 + c x_1 B_1 = 1/2 + 1/2 + 2 = 3,   y_1 = 3.
 */
#include <math.h>
#include <string.h>

#include "reference/row_common.h"
#include "reference/parallel.h"
#include "reference/reference.h"
#include "reference/traffic.h"

/* The GPU variants the descriptor names, defined in src/kernels/ssm_scan.cu:
 * in x, dt_raw, lambda_raw, B_ssm, C_ssm, A, dt_bias; out y (shapes above). */
MB_DECLARE_LAUNCH(mb_ssm_scan_fused_launch);
MB_DECLARE_LAUNCH(mb_ssm_scan_fallback_launch);

enum { AX_B, AX_L, AX_NH, AX_P, AX_N };
enum { IN_X, IN_DT, IN_LAMBDA, IN_B, IN_C, IN_A, IN_DT_BIAS };
enum { OUT_Y };

/* softplus(z) = z above this, as PyTorch's F.softplus (threshold 20):
 * log1p(exp(z)) - z < 2.1e-9 there. The fills keep z under 0. */
#define SOFTPLUS_LINEAR_ABOVE 20

/* A reference work item: 8 consecutive p of one row (check_shape makes P
 * a multiple of it). */
#define REF_PBLOCK 8
/* The share of the host's cores the items run on: all of them. */
#define REF_CORES_SHARE 1.0

/* Shape limits of the GPU kernels (src/kernels/ssm_scan.cu): one CTA
 * holds a head's whole [P, N] state, tiled by 16 (N) and 8 (P). */
#define SSM_P_MAX 64
#define SSM_N_MAX 128
#define SSM_P_STEP 8
#define SSM_N_STEP 8

/* The fallback's chunk (Mamba-2's default chunk_size) and the tiles its
 * bmm launch writes (the lower-triangular 64 x 64 ones), for its bytes
 * model; src/kernels/ssm_scan.cu has the same constants. */
#define SSM_FALLBACK_CHUNK 256
#define SSM_FALLBACK_TILE 64
#define SSM_FALLBACK_TILES (SSM_FALLBACK_CHUNK / SSM_FALLBACK_TILE)
/* Grid dimensions y and z of the fallback's launches: B*NH and the chunk
 * count stay under this. */
#define SSM_GRID_YZ_MAX 65535

/* The same discretisation in both precisions; REAL is the arithmetic type,
 * EXP and LOG1P its functions. */
#define DEFINE_STEP_COEFS(fn, REAL, EXP, LOG1P) \
	static void fn(REAL z, REAL lambda_raw, REAL a_h, REAL *a, REAL *b, REAL *c) \
	{ \
		REAL dt = z > (REAL)SOFTPLUS_LINEAR_ABOVE ? z : LOG1P(EXP(z)); \
		REAL lambda = (REAL)1 / ((REAL)1 + EXP(-lambda_raw)); \
		*a = EXP(dt * a_h); \
		*b = ((REAL)1 - lambda) * dt * *a; \
		*c = lambda * dt; \
	}

DEFINE_STEP_COEFS(step_coefs_f32, float, expf, log1pf)
DEFINE_STEP_COEFS(step_coefs_f64, double, exp, log1p)

typedef struct ssm_ref_job {
	const int64_t *axis;
	const float *const *in;
	void *out;              /* float * or double *: y */
	const int64_t *rows;
	int64_t n_items;
	void (*item)(const struct ssm_ref_job *job, int64_t item, void *scratch);
} ssm_ref_job;

/* One item: rows[item / (P/8)], p in [p0, p0 + 8). scratch holds the state
 * [N][8] in REAL. */
#define DEFINE_ITEM(fn, REAL, OUT, coefs) \
	static void fn(const ssm_ref_job *job, int64_t item, void *scratch) \
	{ \
		const int64_t *axis = job->axis; \
		const int64_t seq = axis[AX_L], heads = axis[AX_NH], pdim = axis[AX_P], ndim = axis[AX_N]; \
		const int64_t blocks = pdim / REF_PBLOCK; \
		const int64_t r = mb_ref_row(job->rows, item / blocks), p0 = item % blocks * REF_PBLOCK; \
		const int64_t batch = r / heads, head = r % heads; \
		const float *x = job->in[IN_X] + r * seq * pdim + p0; \
		const float *dtr = job->in[IN_DT] + r * seq, *lr = job->in[IN_LAMBDA] + r * seq; \
		const float *bm = job->in[IN_B] + batch * seq * ndim, *cm = job->in[IN_C] + batch * seq * ndim; \
		const float a_h = job->in[IN_A][head], bias = job->in[IN_DT_BIAS][head]; \
		OUT *y = (OUT *)job->out + r * seq * pdim + p0; \
		REAL(*h)[REF_PBLOCK] = scratch; \
		memset(h, 0, (size_t)ndim * sizeof(*h)); \
		for (int64_t t = 0; t < seq; t++) { \
			REAL a, b, c, bx[REF_PBLOCK], cx[REF_PBLOCK], acc[REF_PBLOCK]; \
			const float *bt = bm + t * ndim, *ct = cm + t * ndim; \
			/* the fp32 sum of the two inputs is the argument in both \
			 * precisions: it is what a model computes before softplus */ \
			coefs((REAL)(dtr[t] + bias), (REAL)lr[t], (REAL)a_h, &a, &b, &c); \
			for (int k = 0; k < REF_PBLOCK; k++) { \
				bx[k] = t > 0 ? b * (REAL)x[(t - 1) * pdim + k] : (REAL)0; \
				cx[k] = c * (REAL)x[t * pdim + k]; \
				acc[k] = 0; \
			} \
			/* at t = 0, bx = 0: the row read for B_{t-1} adds nothing */ \
			const float *bprev = t > 0 ? bt - ndim : bt; \
			for (int64_t n = 0; n < ndim; n++) { \
				const REAL bp = (REAL)bprev[n], bn = (REAL)bt[n], cn = (REAL)ct[n]; \
				REAL *hn = h[n]; \
				for (int k = 0; k < REF_PBLOCK; k++) { \
					const REAL v = a * hn[k] + bx[k] * bp + cx[k] * bn; \
					hn[k] = v; \
					acc[k] += cn * v; \
				} \
			} \
			for (int k = 0; k < REF_PBLOCK; k++) \
				y[t * pdim + k] = (OUT)acc[k]; \
		} \
	}

DEFINE_ITEM(item_f32, float, float, step_coefs_f32)
DEFINE_ITEM(item_f64, double, double, step_coefs_f64)

/* The job `arg`'s item, with its thread's scratch. Items write disjoint
 * outputs, so the result does not depend on the schedule. */
static void ssm_ref_item(void *arg, int64_t item, void *scratch)
{
	const ssm_ref_job *job = arg;

	job->item(job, item, scratch);
}

#define DEFINE_SSM_SCAN(fn, REAL, OUT, item_fn) \
	void fn(const int64_t *axis, const float *const *in, OUT *const *out, const int64_t *rows, \
		int64_t n_rows) \
	{ \
		ssm_ref_job job = {.axis = axis, .in = in, .out = out[OUT_Y], .rows = rows, \
			.n_items = n_rows * (axis[AX_P] / REF_PBLOCK), .item = item_fn}; \
		mb_ref_parallel_scratch(job.n_items, REF_CORES_SHARE, (size_t)axis[AX_N] * REF_PBLOCK * sizeof(REAL), \
			ssm_ref_item, &job); \
	}

DEFINE_SSM_SCAN(mb_ref_ssm_scan, float, float, item_f32)
DEFINE_SSM_SCAN(mb_oracle_ssm_scan, double, double, item_f64)

/* ---- the ssm_scan catalog row: shapes, bytes, tolerances, variants ------------------------------------------------------- */

/* The fills. x, B and C: bell-shaped, unit variance, |v| < 3.47
 * (input_rng.h; Mamba-3 normalises B and C, so unit-scale entries are what
 * its scan sees). dt = softplus(dt_raw + dt_bias) with dt_bias per head
 * uniform over [softplus^-1(0.00091), softplus^-1(0.100)], Mamba's dt
 * initialisation range 0.001 .. 0.1, and dt_raw bell-shaped with scale
 * 0.5 around it: dt in (1.6e-4, 0.47). lambda_raw unit scale: lambda in
 * (0.030, 0.970). A per head uniform over (-16, -1), Mamba's A_init_range.
 * The tolerances below are written in these. */
#define DT_BIAS_LO (-7.0f)
#define DT_BIAS_HI (-2.25f)
#define DT_RAW_SCALE 0.5f
#define LAMBDA_RAW_SCALE 1.0f
#define A_LO (-16.0f)
#define A_HI (-1.0f)

static int ssm_tensors(const int64_t *a, mb_tensor_spec *t)
{
	const int64_t rows = a[AX_B] * a[AX_NH];

	t[IN_X] = (mb_tensor_spec){"x", false, rows, a[AX_L] * a[AX_P], MB_FILL_NORMAL, 0, 1};
	t[IN_DT] = (mb_tensor_spec){"dt_raw", false, rows, a[AX_L], MB_FILL_NORMAL, 0, DT_RAW_SCALE};
	t[IN_LAMBDA] = (mb_tensor_spec){"lambda_raw", false, rows, a[AX_L], MB_FILL_NORMAL, 0, LAMBDA_RAW_SCALE};
	t[IN_B] = (mb_tensor_spec){"B_ssm", false, a[AX_B], a[AX_L] * a[AX_N], MB_FILL_NORMAL, 0, 1};
	t[IN_C] = (mb_tensor_spec){"C_ssm", false, a[AX_B], a[AX_L] * a[AX_N], MB_FILL_NORMAL, 0, 1};
	t[IN_A] = (mb_tensor_spec){"A", false, 1, a[AX_NH], MB_FILL_UNIFORM, A_LO, A_HI};
	t[IN_DT_BIAS] = (mb_tensor_spec){"dt_bias", false, 1, a[AX_NH], MB_FILL_UNIFORM, DT_BIAS_LO, DT_BIAS_HI};
	t[IN_DT_BIAS + 1 + OUT_Y] = (mb_tensor_spec){"y", true, rows, a[AX_L] * a[AX_P], MB_FILL_NORMAL, 0, 0};
	return IN_DT_BIAS + 2;
}

static int ssm_check_shape(const int64_t *a, mb_error *err)
{
	if (a[AX_P] % SSM_P_STEP != 0 || a[AX_P] > SSM_P_MAX || a[AX_N] % SSM_N_STEP != 0 || a[AX_N] > SSM_N_MAX)
		return mb_error_set(err, MB_EINVAL, NULL,
			"P (%lld) must be a multiple of %d up to %d and N (%lld) a multiple of %d up to %d: one CTA "
			"holds a head's [P, N] state, rows of 16 bytes",
			(long long)a[AX_P], SSM_P_STEP, SSM_P_MAX, (long long)a[AX_N], SSM_N_STEP, SSM_N_MAX);
	if (a[AX_B] * a[AX_NH] > SSM_GRID_YZ_MAX || (a[AX_L] + SSM_FALLBACK_CHUNK - 1) / SSM_FALLBACK_CHUNK > SSM_GRID_YZ_MAX)
		return mb_error_set(err, MB_EINVAL, NULL,
			"B*NH (%lld) and ceil(L/%d) (L = %lld) must be at most %d (grid dimensions)",
			(long long)(a[AX_B] * a[AX_NH]), SSM_FALLBACK_CHUNK, (long long)a[AX_L], SSM_GRID_YZ_MAX);
	return 0;
}

/* Bytes of the row's tensors at `dtype`. */
typedef struct ssm_sizes {
	uint64_t x, coef_raw, bc, head_params; /* x (= y), dt_raw (= lambda_raw), B (= C), A (= dt_bias) */
} ssm_sizes;

static ssm_sizes ssm_sizes_of(const int64_t *a, mb_dtype dtype)
{
	const uint64_t s = mb_dtype_size(dtype), bh = (uint64_t)a[AX_B] * (uint64_t)a[AX_NH];
	ssm_sizes z = {
		.x = bh * (uint64_t)a[AX_L] * (uint64_t)a[AX_P] * s,
		.coef_raw = bh * (uint64_t)a[AX_L] * s,
		.bc = (uint64_t)a[AX_B] * (uint64_t)a[AX_L] * (uint64_t)a[AX_N] * s,
		.head_params = (uint64_t)a[AX_NH] * s,
	};
	return z;
}

/* At the record shape (B 4, L 16384, NH 32, P 64, N 128, bf16) the bytes
 * model is 578.8 MB (x and y 268.4 MB each, dt_raw and lambda_raw 4.2 MB
 * each, B and C 16.8 MB each) and the FLOPs model 120.5 GFLOP. Against an
 * H100's measured ceilings (copy ~3.0 TB/s, bf16 GEMM ~700 TFLOP/s) that
 * is 0.19 ms of memory and 0.17 ms of tensor-core arithmetic: memory binds,
 * narrowly (the fused kernel's own tensor-core work, per step and head
 * Q N + Q P + 2 N P multiply-adds at Q = 64 less the skipped upper
 * triangle, comes to about the model's count). The fused kernel is bounded
 * first by shared memory: its operand and staging traffic is about 300 KB
 * per CTA and 64-step chunk of outputs (C B^T with C g_in 120 KB, M x 36,
 * the state's update 64, the staged tiles, weighted x, M and the fp16
 * state 80), about 2,400 cycles at 128 bytes a cycle, and a chunk of its
 * state-only pass (phase 1) about 100 KB. One CTA a head, the kernel
 * before (34aa3a5), ran 1.37 ms on the H200: about 10,000 cycles a chunk,
 * latency with one CTA an SM. The kernel now splits each sequence in two
 * at B*NH = 128 and holds two CTAs an SM: 151 chunks of outputs in one,
 * 151 of phase 1 and 105 of outputs in the other, about 300 chunk
 * equivalents an SM, 0.37 ms at 1.98 GHz if shared memory never idled.
 * Predicted: 0.6 to 0.9 ms, as the second CTA covers part of the first's
 * latency; the 0.45 ms target needs more than 80% of the shared-memory
 * bound, past what mma.sync's per-warp operand loads allow (wgmma, whose
 * warpgroup reads each operand from shared memory once, is the next
 * step). Phase 1 re-reads x and B of the segments before the last, which
 * this model (the row's compulsory bytes) leaves out: from L2 where the
 * two CTAs' passes run close, from memory where they drift apart (at
 * most 0.59 of x again). Not measured yet: no GPU was at hand when this
 * was written. The fused variant's warpgroup kernel (sm_90a:
 * src/kernels/ssm_scan_sm90.cuh, whose header counts it) is that step:
 * the same plan and bytes, each operand read once a warpgroup; 0.3 ms
 * was expected at this shape and 1.08 ms measured on an H200 (against
 * the mma.sync kernel's 1.23 in the same run, reports/h200 run p),
 * bound by its serial chain's latency, not by any of these three. */
static uint64_t ssm_bytes(const int64_t *a, mb_dtype dtype)
{
	/* every input read once (B and C once, though every head reads them:
	 * the other heads' reads are L2 hits), y written once */
	const ssm_sizes z = ssm_sizes_of(a, dtype);
	return 2 * z.x + 2 * z.coef_raw + 2 * z.bc + 2 * z.head_params;
}

/* By launch. Fused: the bytes model split between its two launches, the
 * conversion of B and C to fp16 (it reads them) and the scan (the rest).
 * The fp16 copy it writes and the scan's reads of it (4 B L N bytes, 67
 * MB at the record shape, 12% of the model) are left out as phase 1's
 * re-reads are: the model is the row's compulsory bytes, so the model
 * speedup below is that much in the fused variant's favour. Fallback, as Mamba-2's
 * chunked path (mamba_chunk_scan_combined) runs it with chunks of
 * K = SSM_FALLBACK_CHUNK steps, C = ceil(L/K) chunks per sequence and
 * S = B*NH*C*P*N fp32 chunk states, and one fp32 value per (b, head, t)
 * for each of the three step coefficients (R = B*NH*L*4 bytes):
 *   discretize   dt_raw, lambda_raw, A, dt_bias -> cumulative log-decay,
 *                input and diagonal coefficients (3R)
 *   chunk_state  x, B, log-decay, input coefficient -> S (each chunk's own
 *                contribution to the state)
 *   state_pass   S and each chunk's total log-decay -> S (the state
 *                entering each chunk)
 *   bmm          B, C -> C B^T per chunk, fp32, its lower-triangular 64 x 64
 *                tiles (10 of 16; fewer in a short last chunk), shared by the heads
 *   chunk_output C, x, entering states, C B^T, the three coefficients -> y
 * At the record shape (B 4, L 16384, NH 32, P 64, N 128, bf16) that is
 * 2.11 GB against the fused kernel's 0.58: a model speedup of 3.6. */
static int ssm_traffic(const int64_t *a, mb_dtype dtype, const mb_variant *v, mb_launch_traffic *out)
{
	const ssm_sizes z = ssm_sizes_of(a, dtype);
	const uint64_t bh = (uint64_t)a[AX_B] * (uint64_t)a[AX_NH], f32 = sizeof(float);
	const uint64_t chunks = ((uint64_t)a[AX_L] + SSM_FALLBACK_CHUNK - 1) / SSM_FALLBACK_CHUNK;
	const uint64_t coef = bh * (uint64_t)a[AX_L] * f32;
	const uint64_t states = bh * chunks * (uint64_t)a[AX_P] * (uint64_t)a[AX_N] * f32;
	const uint64_t chunk_ends = bh * chunks * f32;
	/* bmm skips the tiles past the end of a short last chunk */
	const uint64_t last_steps = (uint64_t)a[AX_L] - (chunks - 1) * SSM_FALLBACK_CHUNK;
	const uint64_t last_tiles = (last_steps + SSM_FALLBACK_TILE - 1) / SSM_FALLBACK_TILE;
	const uint64_t tiles = (chunks - 1) * (SSM_FALLBACK_TILES * (SSM_FALLBACK_TILES + 1) / 2) +
		last_tiles * (last_tiles + 1) / 2;
	const uint64_t cb = (uint64_t)a[AX_B] * tiles * SSM_FALLBACK_TILE * SSM_FALLBACK_TILE * f32;
	int n = 0;

	switch (v->kind) {
	case MB_VARIANT_FUSED:
		mb_traffic_add(out, &n, v->kernel_patterns[0], 2 * z.bc, 0);
		mb_traffic_add(out, &n, v->kernel_patterns[1], z.x + 2 * z.coef_raw + 2 * z.head_params, z.x);
		return n;
	case MB_VARIANT_REFERENCE:
		return mb_traffic_one(v, z.x + 2 * z.coef_raw + 2 * z.bc + 2 * z.head_params, z.x, out);
	case MB_VARIANT_FALLBACK:
		mb_traffic_add(out, &n, v->kernel_patterns[0], 2 * z.coef_raw + 2 * z.head_params, 3 * coef);
		mb_traffic_add(out, &n, v->kernel_patterns[1], z.x + z.bc + 2 * coef, states);
		mb_traffic_add(out, &n, v->kernel_patterns[2], states + chunk_ends, states);
		mb_traffic_add(out, &n, v->kernel_patterns[3], 2 * z.bc, cb);
		mb_traffic_add(out, &n, v->kernel_patterns[1], z.bc + z.x + states + cb + 3 * coef, z.x);
		return n;
	default:
		return -1;
	}
}

/* The definition's arithmetic: per step and (p, n) the update
 * a*h + (b x_{t-1}[p]) B_{t-1}[n] + (c x_t[p]) B_t[n] (3 multiplies, 2
 * adds) and the output's C[n] h (a multiply and an add): 7; per step and
 * p the two scalings b x and c x: 2; per step and head softplus, sigmoid,
 * exp (one each) and the 7 adds and multiplies around them: 10. The
 * chunked GPU algorithms do more (their intra-chunk products), on tensor
 * cores; this counts the row's math. */
static uint64_t ssm_flops(const int64_t *a)
{
	const uint64_t p = (uint64_t)a[AX_P], n = (uint64_t)a[AX_N];
	return (uint64_t)a[AX_B] * (uint64_t)a[AX_NH] * (uint64_t)a[AX_L] * (7 * p * n + 2 * p + 10);
}

/* ---- tolerances ----
 *
 * In units u = 2^-24 (fp32) and u16 = 2^-11 (fp16 unit roundoff). The
 * GPU variants compute the chunked form (src/kernels/ssm_scan.cu) on
 * tensor cores with fp16 operands and fp32 accumulation (the fused
 * variant's two kernels, mma.sync and sm_90a wgmma, with the same
 * roundings: ssm_scan_sm90.cuh). x, B and C
 * convert to fp16 exactly; three kinds of fp32 operand are rounded to fp16
 * once before a product: M_ij = (C_i . B_j) L_ij, the entering state g in
 * C_i g, and the decay-weighted e^{cs_last - cs_j} kappa_j x_j in the
 * state's update. Each rounding puts a relative error |d| <= u16 on one
 * term of a sum: a term M_ij x_j[p] of y's intra-chunk part, a term
 * C_i[n] g[p, n] of its inter-chunk part, or (through the state, decayed
 * as the signal is) a term of the inter-chunk part of later outputs.
 *
 * Random part. The roundings are independent with mean 0 and variance at
 * most u16^2 / 3, and the inputs x, B, C independent with unit variance,
 * so the error of an element has variance at most
 *   (u16^2 / 3) (Var(intra) + Var(inter) + Var(inter)) <= (2/3) u16^2 Var(y),
 * the intra and inter parts being independent (disjoint inputs): standard
 * deviation sqrt(2/3) u16 y_rms, and a sum of hundreds of bounded terms,
 * so Gaussian in its tails. y_rms^2 = N sum_s coef(t, s)^2 (coef: the
 * weight of x_s B_s^T in h_t) is largest for the fills' corner head
 * (A = -1, dt_bias at its top, dt ~ 0.1): 2.87 over 4096 steps at N = 128
 * in a CPU emulation, and N is at most 128 (check_shape). Y_RMS_MAX = 3.5
 * bounds it. Eight standard deviations (P = 1.2e-15 an element, 2e-7 over
 * the 2^27 elements of the largest case) give the abs term,
 *   8 sqrt(2/3) u16 Y_RMS_MAX = 0.0112.
 * Relative part. Where one term dominates an element (fast decay, large
 * |A| dt) the element carries that term's roundings, relative to it: M's,
 * the weighted x's and the state's, at most 3 u16. The decays differ by
 * the log-decay's one fp32 rounding, u (|cs_i| + |cs_j|) <= 2 u * 256 *
 * 16 * 0.47 = 0.47 u16 at the fallback's 256-step chunk (less in the fused
 * kernel's 64, where its mask's decays are 2^{cs_i log2 e - (cs_j log2 e -
 * log2 kappa_j)}, each term rounded once: u (|cs_i| + |cs_j| + |cs_i - cs_j|
 * + 27) <= 0.18 u16, the 27 from |log2 kappa| < 13, and log2 kappa's
 * lg2.approx 2^-22 absolute, 0.0004 u16), and by __expf's (or ex2.approx's)
 * 2 ulp: 4 u16 with margin. The fp32
 * reference's own error (below) is under 0.01 u16 of y_rms, and the
 * GPU's fp32 accumulation as small. bf16 storage of y adds half an ulp,
 * 2^-8 relative:
 *   |got - want| <= 0.0112 + (2^-8 + 4 u16) |want|.
 * A CPU emulation of the fp16 roundings (both chunk lengths, 1M elements
 * including the corner heads) needed 0.0026 abs at that rel: a quarter of
 * the bound. The fused kernel's segments (src/kernels/ssm_scan.cu) add no
 * rounding to these: the state handed from one to the next is fp32, and a
 * segment's decay is one exp of its summed log-decay (u relative), against
 * the per-chunk products it replaces.
 *
 * fp32 (the reference against the oracle; no GPU variant takes fp32): per
 * step a, b and c carry glibc's expf (1 ulp) and log1pf (2 ulp) through a
 * few operations, within 8u relative, and the update 3u. Decay products
 * over s..t accumulate independent coefficient errors, a random walk of
 * sqrt(t - s) steps; weighted by coef^2 the mean lag is at most
 * 1 / (2 |A| dt) <= 1 / (2 * 1 * 1.6e-4) = 3125 steps (the fills' floor),
 * so the relative standard deviation is at most sqrt(3125) * 8u / sqrt(3)
 * plus the local roundings, under 400u of y_rms. Eight of those at
 * Y_RMS_MAX: 11200u = 6.7e-4 abs (the emulation measured 1.1e-5); a
 * dominant term's own 8u + 3u, with the in-order sum over n: 16u rel.
 * fp16 storage (CPU backend only) takes the bf16 derivation with fp16's
 * half ulp. */
#define U16 0x1p-11
#define Y_RMS_MAX 3.5
#define TAIL_STDS 8.0
#define ROUNDING_STD_PER_RMS 0.81649658 /* sqrt(2/3) */
#define SSM_GPU_ABS (TAIL_STDS * ROUNDING_STD_PER_RMS * U16 * Y_RMS_MAX)
#define SSM_GPU_REL (4 * U16)
#define SSM_F32_STD_PER_RMS (400 * F32_EPS)
#define SSM_F32_ABS (TAIL_STDS * SSM_F32_STD_PER_RMS * Y_RMS_MAX)
#define SSM_F32_REL (16 * F32_EPS)

const mb_row mb_row_ssm_scan = {
	MB_ROW_NAME(ssm_scan, "fp32, the recurrence step by step, "),
	.block = 'M',
	.status = MB_ROW_KEEP,
	.condition = NULL,
	.summary = "Mamba-3 trapezoidal selective scan: h_t = a_t h_{t-1} + b_t x_{t-1} B_{t-1}^T + c_t x_t B_t^T, "
		"y_t = C_t h_t, a = exp(dt A), b = (1-lambda) dt a, c = lambda dt, dt = softplus(dt_raw + dt_bias), "
		"lambda = sigmoid(lambda_raw); in x [B*NH,L*P], dt_raw, lambda_raw [B*NH,L], B_ssm, C_ssm [B,L*N], "
		"A, dt_bias [1,NH]; out y [B*NH,L*P]",
	.n_axes = 5,
	.axes = {"B", "L", "NH", "P", "N"},
	.check_shape = ssm_check_shape,
	.tensors = ssm_tensors,
	.bytes = ssm_bytes,
	.traffic = ssm_traffic,
	.flops = ssm_flops,
	/* B, C, A and dt_bias are read whole whatever rows are sampled (their
	 * rows are batches or nothing, not (b, head) sequences) */
	.reads = {[IN_B] = MB_READS_ALL, [IN_C] = MB_READS_ALL, [IN_A] = MB_READS_ALL,
		[IN_DT_BIAS] = MB_READS_ALL},
	.source_files = {MB_ROW_FILES(ssm_scan), "src/kernels/ssm_scan_sm90.cuh", "src/kernels/ssm_scan_sm90_layout.h"},
	.tolerance = {
		[MB_FP32] = {SSM_F32_ABS, SSM_F32_REL,
			"reference vs oracle only: coefficient errors <= 8u a step random-walk over decay products of mean lag "
			"<= 3125 steps, std < 400u of y_rms; 8 std at y_rms <= 3.5 abs, a dominant term's 16u rel"},
		[MB_FP16] = {SSM_GPU_ABS, F16_HALF_ULP + SSM_GPU_REL,
			"as bf16 with fp16's half ulp (CPU backend only): fp16-operand roundings, 8 std of sqrt(2/3) u16 y_rms "
			"at y_rms <= 3.5 abs, 4 u16 rel for a dominant term"},
		[MB_BF16] = {SSM_GPU_ABS, BF16_HALF_ULP + SSM_GPU_REL,
			"tensor-core products round M, the state and weighted x to fp16 once (u16 = 2^-11 a term): 8 std of "
			"sqrt(2/3) u16 y_rms at y_rms <= 3.5 abs; a dominant term's 3 u16 + decay error, 4 u16, plus y's bf16 "
			"half ulp rel"},
	},
	.n_variants = 3,
	.variants = {
		{.name = "fused", .kind = MB_VARIANT_FUSED, .backend = "cuda",
			.description = "two launches: B and C to fp16 once a batch (every head's CTAs read "
			"them as they are), then one over chunks and (b, head): each sequence cut into segments "
			"of 64-step chunks that fill the device (two CTAs an SM), a CTA each; a segment's CTA "
			"first runs a state-only pass over the segment before it (the entering state, handed "
			"on between CTAs past two segments), then its chunks: C B^T, the masked intra-chunk "
			"product, C times the entering state and the state update on tensor cores (fp16 "
			"operands, fp32 accumulation), the [P, N] state in registers, the discretisation a "
			"chunk ahead. On compute capability 9.0 with sm_90a code, one warpgroup a CTA, each "
			"product of a chunk one chain of wgmma.mma_async (C B^T and C g_in from shared memory, "
			"M x and the state update with A from registers), the fp16 tiles in the 128-byte swizzle, "
			"B and C copied in by cp.async "
			"(kernel mb_ssm_scan_fused_wgmma_kernel); elsewhere, or with MEGABENCH_SSM_MMA=mma, 8 "
			"warps of mma.sync m16n8k16 fed by ldmatrix (kernel mb_ssm_scan_fused_kernel)",
			.launches_per_call = 2, .kernel_patterns = {"ssm_scan_bc16", "ssm_scan_fused"},
			.launch = GPU_LAUNCH(mb_ssm_scan_fused_launch), .dtype_mask = 1u << MB_BF16},
		{.name = "fallback", .kind = MB_VARIANT_FALLBACK, .backend = "cuda",
			.description = "Mamba-2's chunked path (mamba_chunk_scan_combined, chunk 256), five "
			"launches through fp32 workspace: discretize (cumulative log-decay, kappa, gamma), "
			"chunk_state, state_pass (sequential over chunks), bmm (C B^T, lower-triangular tiles) "
			"and chunk_output; tensor cores with fp16 operands where it multiplies matrices",
			.launches_per_call = /* "ssm_scan_fb_chunk" names both chunk_state (launch 2) and * chunk_output (launch 5): a variant declares at most four */ 5,
			.kernel_patterns = {"ssm_scan_fb_discretize", "ssm_scan_fb_chunk", "ssm_scan_fb_state_pass", "ssm_scan_fb_bmm"},
			.launch = GPU_LAUNCH(mb_ssm_scan_fallback_launch), .dtype_mask = 1u << MB_BF16},
		MB_REFERENCE_VARIANT,
	},
};
