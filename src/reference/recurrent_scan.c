/* The RG-LRU of Griffin / Hawk (De et al. 2024): a gated linear recurrence
 * per batch and channel, with diagonal (per-channel) gate weights:
 *   r_t = sigmoid(x_t * w_a + b_a)          recurrence gate
 *   i_t = sigmoid(x_t * w_i + b_i)          input gate
 *   a_t = exp(-8 * softplus(lambda) * r_t)  decay, 0 < a_t < 1
 *   h_t = a_t * h_{t-1} + sqrt(1 - a_t^2) * (i_t * x_t),  h_{-1} = 0
 *   y_t = h_t
 * with w_a, b_a, w_i, b_i, lambda [1, D] per channel. Griffin's gates are
 * block-diagonal linear maps of x; the diagonal keeps the row a scan, which
 * is what it measures.
 *
 * Layout: x and y are [B*D, L], row b*D + c the whole sequence of channel c
 * of batch b (sequence-last, as Mamba's selective_scan and the
 * accelerated-scan kernels take their inputs). A row of y is then one
 * recurrence, and the reference computes a sampled row from its own row of
 * x in O(L): token-major [B*L, D] rows would make every sampled row depend
 * on every earlier token of its batch, so the host would have to make all of
 * x for any sample (and the reference run B*L*D steps).
 *
 * sqrt(1 - a^2) is computed as sqrt(-expm1(2 log a)): 1 - a*a cancels when a
 * is near 1 (the slow channels, 1 - a down to 1e-5 here), and the input's
 * scale would carry that cancellation's error.
 *
 * Worked by hand: w_a = b_a = w_i = b_i = lambda = 0 gives r = i = 1/2,
 * softplus(0) = ln 2, a = exp(-4 ln 2) = 1/16 and m = sqrt(1 - 1/256) =
 * sqrt(255)/16. Then x = (2, -2) gives h_0 = m * (1/2 * 2) = m = 0.99804...
 * and h_1 = h_0/16 - m = -15m/16 = -0.93567....
 *
 * One body serves both precisions; rows are split over the host's cores
 * (a sample at the largest shape is 4096 rows of 16384 steps, each step
 * with four exponentials and a square root). */
#include <math.h>

#include "reference/row_common.h"
#include "reference/parallel.h"
#include "reference/reference.h"
#include "reference/traffic.h"

/* The GPU variants the descriptor names, defined in src/kernels/recurrent_scan.cu:
 * in x [B*D,L], w_a, b_a, w_i, b_i, lambda [1,D]; out y [B*D,L]. */
MB_DECLARE_LAUNCH(mb_recurrent_scan_fused_launch);
MB_DECLARE_LAUNCH(mb_recurrent_scan_fallback_launch);

enum { AX_B, AX_L, AX_D };
enum { IN_X, IN_WA, IN_BA, IN_WI, IN_BI, IN_LAMBDA };
enum { OUT_Y };

/* Griffin's constant c in a = sigmoid(lambda)^(c r), here exp(-c softplus r). */
#define RGLRU_C 8

/* ---- rows over the host's cores ------------------------------------------ */

/* Half the host's cores, as the input twin takes: the harness may be
 * making the next case's inputs meanwhile. */
#define REF_CORES_SHARE 0.5

typedef struct row_job {
	void (*fn)(const struct row_job *job, int64_t row);
	const int64_t *axis;
	const float *const *in;
	void *const *out;
	const int64_t *rows;
} row_job;

/* The i-th listed row, by one thread: the result does not depend on the
 * thread count. */
static void row_item(void *arg, int64_t i)
{
	const row_job *job = arg;

	job->fn(job, mb_ref_row(job->rows, i));
}

/* ---- the recurrence -------------------------------------------------------- */

/* softplus(l) = log(1 + e^l), without overflow for large l. */
#define DEFINE_RGLRU_ROW(fn, REAL, EXP, EXPM1, LOG1P, SQRT) \
	static void fn(const row_job *job, int64_t row) \
	{ \
		const int64_t len = job->axis[AX_L], c = row % job->axis[AX_D]; \
		const float *x = job->in[IN_X] + row * len; \
		REAL *y = (REAL *)job->out[OUT_Y] + row * len; \
		const REAL wa = job->in[IN_WA][c], ba = job->in[IN_BA][c]; \
		const REAL wi = job->in[IN_WI][c], bi = job->in[IN_BI][c], lambda = job->in[IN_LAMBDA][c]; \
		const REAL softplus = (lambda > 0 ? lambda : (REAL)0) + LOG1P(EXP(-(lambda > 0 ? lambda : -lambda))); \
		REAL h = 0; \
		for (int64_t t = 0; t < len; t++) { \
			const REAL xt = x[t]; \
			const REAL r = (REAL)1 / ((REAL)1 + EXP(-(xt * wa + ba))); \
			const REAL i = (REAL)1 / ((REAL)1 + EXP(-(xt * wi + bi))); \
			const REAL log_a = -(REAL)RGLRU_C * softplus * r; \
			h = EXP(log_a) * h + SQRT(-EXPM1(2 * log_a)) * (i * xt); \
			y[t] = h; \
		} \
	}

DEFINE_RGLRU_ROW(rglru_row_f32, float, expf, expm1f, log1pf, sqrtf)
DEFINE_RGLRU_ROW(rglru_row_f64, double, exp, expm1, log1p, sqrt)

void mb_ref_recurrent_scan(const int64_t *axis, const float *const *in, float *const *out, const int64_t *rows,
	int64_t n_rows)
{
	row_job job = {rglru_row_f32, axis, in, (void *const *)out, rows};

	mb_ref_parallel(n_rows, REF_CORES_SHARE, row_item, &job);
}

void mb_oracle_recurrent_scan(const int64_t *axis, const float *const *in, double *const *out,
	const int64_t *rows, int64_t n_rows)
{
	row_job job = {rglru_row_f64, axis, in, (void *const *)out, rows};

	mb_ref_parallel(n_rows, REF_CORES_SHARE, row_item, &job);
}

/* ---- the recurrent_scan catalog row: shapes, bytes, tolerances, variants --------------------------------------------------
 *
 * Fills: x is the bell-shaped N(0, 1) stand-in (|x| < 3.47, E x^2 = 1);
 * the gate weights and biases U(-1, 1); lambda U(-9, -4.3), so that
 * exp(-8 softplus(lambda)) spans 0.90 .. 0.999, Griffin's initial range of
 * a^c (its decays at r = 1). Then |x w + b| < 4.47, r > sigmoid(-4.47) =
 * 0.0113, and a_t = exp(-8 sp r) lies in [0.896, 1 - 1.12e-5]: the
 * slowest channel remembers ~10^5 steps.
 *
 * Error analysis. Write h_t = sum_k c_k W_k with W = i x and c_k = m_k
 * prod_{j>k} a_j, m = sqrt(1 - a^2). The weights telescope:
 *   sum_k c_k^2 = sum_k (1 - a_k^2) prod_{j>k} a_j^2 = 1 - prod_j a_j^2 <= 1,
 * but their plain sum S = sum_k c_k is large: about m / (1 - a) =
 * sqrt(2 / (1 - a)) on a slow channel. With E[r] >= sigmoid(-1) = 0.269
 * over the fills (the least at w_a = 0, b_a = -1) and softplus(lambda) >=
 * 1.23e-4, 1 - a averages >= 2.66e-4 and S <= 87. So h has a mean, S E[W]
 * (E[W] = E[x sigmoid(x w_i + b_i)] is not 0 unless w_i = 0): |h| reaches
 * 20 on slow channels, which the relative term carries, while its
 * fluctuation about the mean has variance <= sum c_k^2 Var W <= 1.
 *
 * A rounding error is taken as independent from step to step, zero mean,
 * only where the rounded value moves across many of its quanta from one
 * step to the next: fp32 library results (2^-24 quanta) and the dtype's
 * rounding of a product that carries x itself. Where the value barely
 * moves, the error repeats: a gate stored in bf16 with w_i = 0.004 stays
 * within one quantum over the whole range of x, so its rounding is an
 * affine function of x, its mean E[x d] is not 0, and that mean adds up
 * S-fold: -0.04 on such a channel (a CPU emulation of the roundings), and
 * up to (q/2) E|x| S = 0.27 for a quantum q = 2^-8 in the worst case. No
 * useful bound covers that, so neither variant stores a gate, the decay
 * or the multiplier in the dtype, and the fused kernel takes the input
 * gate from ex2 (fp32 steps), not tanh.approx (2^-11 steps). Then:
 *  (1) Input path: a relative error d_k in the k-th increment m_k W_k
 *      reaches h_t as sum_k c_k W_k d_k: independent, zero mean, at most
 *      D and of variance <= D^2/3 (uniform on +-D), so of standard
 *      deviation <= D/sqrt(3) * sqrt(sum_k c_k^2 W_k^2) <= D/sqrt(3).
 *      Nothing amplifies it: the recurrence contracts (0 < a < 1).
 *  (2) Decay path: a relative error e_k in a_k reaches h_t as
 *      sum_k (prod_{j>=k} a_j) e_k h_{k-1}, of standard deviation
 *      <= E/sqrt(3) * rms(h_{k-1}) / sqrt(1 - a_max^2): amplified by
 *      1/sqrt(1 - a_max^2) = 212 for the fills (a_max = 1 - 1.12e-5), the
 *      price of a memory of 10^5 steps. The window's rms(h_{k-1}) is at
 *      most |h_t| plus two rms of the fluctuation: <= |h_t| + 2.
 * Per step, against the reference's expf/expm1f/log1pf (<= 1 ulp each, an
 * ulp being <= 2u, u = 2^-24), CUDA's expf and MUFU within 2 ulps:
 *  - decay: the reference's a = expf(-8 sp r) is off by <= 2u (expf) plus
 *    |log a| times the relative error of sp*r (~10u; |log a| <= 0.11):
 *    3.1u. The fallback's a = expf(log a): 4u plus 0.7u. The fused
 *    kernel's 1 - a = y Q(y) is within 35u of itself, y = 16 sp r coming
 *    from two MUFU operations and the gate's exponent
 *    (src/kernels/recurrent_scan_math.h; the host test
 *    tests/unit/test_recurrent_math.c checks the count), and 1 - a <= 1/8
 *    on its channels: 4.4u of a, and a's own rounding: 5.4u. Against the
 *    reference at most 8.5u; the bound takes E = 12u:
 *    sigma_a = 12u/sqrt(3) * 212 = 1469u = 8.8e-5 per unit of rms(h).
 *  - input path in fp32 (sigmoid, expm1, sqrt, two products): the bound
 *    takes D = 25u, sigma = 14.4u. By count the reference is within 10u,
 *    the fallback 15u and the fused kernel 32u (its sqrt(r) i comes from
 *    one rsqrt over both exponentials, each carrying its exponent's
 *    roundings): D = 42u, 17u over, 6 * 17u/sqrt(3) = 59u more.
 *  - systematic: the same relative error at every step of a channel,
 *    a function of x that does not average out. The fused kernel folds
 *    log2 e into each gate's constants (rounded: up to 4.5u of e, r and
 *    i); k = 2^-32/sqrt(c16) and the polynomials' residuals add <= 1.5u.
 *    In the increments a bias adds up S-fold: <= 5u S E|W| = 5u * 87 *
 *    0.8 = 350u;
 *    in 1 - a it is the same relative bias of the state's mean: <= 8u of
 *    |h| <= 20, 160u. 510u in all.
 *    The decay's 3.5u over its count hold both: 6 * 2 * 3.5u/sqrt(3) * 212
 *    = 5140u of the absolute term against 59u + 510u.
 *  - the fallback stores the normalised input x i m in the case dtype
 *    (unit roundoff u_d): one rounding of a value that carries x,
 *    sigma = u_d/sqrt(3).
 * Bound: six standard deviations of the sum (by the triangle inequality):
 * the absolute term takes the input path and the decay path's 2 of rms(h),
 * the relative term the decay path's |h_t|, the output's own rounding
 * (u_d) and 64u for the last operations. Six sigma passes by chance with
 * probability far under 1e-9 per element. An emulation on the CPU of the
 * fallback's roundings (4096 channels of the fills, 16384 steps) comes to
 * 0.79 of the bf16 bound at worst; the host test's emulation of the fused
 * kernel's step (MUFU errors of 2 ulps) over 16384 steps of the slowest
 * channels to 0.012 of the fp32 bound. */
#define RS_SQRT3 1.7320508075688772
#define RS_SIGMAS 6.0
#define RS_DECAY_AMPLIFICATION 212.0 /* 1 / sqrt(1 - a_max^2) */
#define RS_DECAY_SIGMA (12.0 * F32_EPS / RS_SQRT3 * RS_DECAY_AMPLIFICATION)
#define RS_FLUCTUATION_RMS 2.0 /* rms(h_{k-1}) <= |h_t| + 2 */
#define RS_F32_INPUT_SIGMA (25.0 * F32_EPS / RS_SQRT3)
#define RS_STORED_SIGMA(u_d) ((u_d) / RS_SQRT3)
#define RS_F32_ABS (RS_SIGMAS * (RS_FLUCTUATION_RMS * RS_DECAY_SIGMA + RS_F32_INPUT_SIGMA))
#define RS_HALF_ABS(u_d) (RS_F32_ABS + RS_SIGMAS * RS_STORED_SIGMA(u_d))
#define RS_REL_F32 (64 * F32_EPS + RS_SIGMAS * RS_DECAY_SIGMA)

/* The fills (see above): lambda's range is Griffin's initial decays. */
#define RS_GATE_LO -1.0f
#define RS_GATE_HI 1.0f
#define RS_LAMBDA_LO -9.0f
#define RS_LAMBDA_HI -4.3f

static int rs_tensors(const int64_t *a, mb_tensor_spec *t)
{
	const int64_t seqs = a[AX_B] * a[AX_D], d = a[AX_D];

	t[0] = (mb_tensor_spec){"x", false, seqs, a[AX_L], MB_FILL_NORMAL, 0, 1};
	t[1] = (mb_tensor_spec){"w_a", false, 1, d, MB_FILL_UNIFORM, RS_GATE_LO, RS_GATE_HI};
	t[2] = (mb_tensor_spec){"b_a", false, 1, d, MB_FILL_UNIFORM, RS_GATE_LO, RS_GATE_HI};
	t[3] = (mb_tensor_spec){"w_i", false, 1, d, MB_FILL_UNIFORM, RS_GATE_LO, RS_GATE_HI};
	t[4] = (mb_tensor_spec){"b_i", false, 1, d, MB_FILL_UNIFORM, RS_GATE_LO, RS_GATE_HI};
	t[5] = (mb_tensor_spec){"lambda", false, 1, d, MB_FILL_UNIFORM, RS_LAMBDA_LO, RS_LAMBDA_HI};
	t[6] = (mb_tensor_spec){"y", true, seqs, a[AX_L], MB_FILL_NORMAL, 0, 0};
	return 7;
}

/* Elements of x (and of y). */
static uint64_t rs_elems(const int64_t *a)
{
	return (uint64_t)a[AX_B] * (uint64_t)a[AX_D] * (uint64_t)a[AX_L];
}

#define RS_PARAMS 5 /* w_a, b_a, w_i, b_i, lambda */

static uint64_t rs_bytes(const int64_t *a, mb_dtype dtype)
{
	/* x read once, y written once, the five [D] parameters read once */
	return (2 * rs_elems(a) + RS_PARAMS * (uint64_t)a[AX_D]) * mb_dtype_size(dtype);
}

/* By launch, with n = B*D*L elements, s the dtype's size and [D] vectors
 * p = D*s. Fused: x and the parameters read, y written. Fallback, as a
 * compiled framework runs the RG-LRU written with an associative scan
 * (recurrentgemma's RGLRU under torch.compile): one elementwise kernel
 * makes the decay in fp32 (1 - a is down to 1e-5, under a bf16 quantum of
 * a) and the gated, normalised input in the dtype, then one scan kernel:
 *   gate    r, i, log a, a, m, x i m    x, w_a, b_a, w_i, b_i, lambda -> a (fp32), nx (dtype)
 *   scan    h = a h + nx                a, nx -> y                    (fp32 state)
 * 4 n s + 8 n bytes of traffic for the fused kernel's 2 n s: 4x in bf16. */
static int rs_traffic(const int64_t *a, mb_dtype dtype, const mb_variant *v, mb_launch_traffic *out)
{
	const uint64_t s = mb_dtype_size(dtype), n = rs_elems(a) * s, p = (uint64_t)a[AX_D] * s;
	const uint64_t n32 = rs_elems(a) * sizeof(float);
	int k = 0;

	switch (v->kind) {
	case MB_VARIANT_FUSED:
	case MB_VARIANT_REFERENCE:
		return mb_traffic_one(v, n + RS_PARAMS * p, n, out);
	case MB_VARIANT_FALLBACK:
		mb_traffic_add(out, &k, v->kernel_patterns[0], n + RS_PARAMS * p, n32 + n); /* x, params -> a, nx */
		mb_traffic_add(out, &k, v->kernel_patterns[1], n32 + n, n);                  /* a, nx -> y */
		return k;
	default:
		return -1;
	}
}

static uint64_t rs_flops(const int64_t *a)
{
	/* per step: two gates (multiply-add, exp, add, divide: 5 each), log a
	 * (2), exp (1), 2 log a, expm1, negate, sqrt (4), i*x and the
	 * multiplier (2), a*h + increment (2): 21, each function counted as one */
	return 21 * rs_elems(a);
}

const mb_row mb_row_recurrent_scan = {
	MB_ROW_NAME(recurrent_scan, "fp32, one sequential pass per sampled sequence, "),
	.block = 'R',
	.status = MB_ROW_EXPERIMENTAL,
	.condition = NULL,
	.summary = "RG-LRU (Griffin/Hawk) with diagonal gates: r = sigmoid(x w_a + b_a), i = sigmoid(x w_i + b_i), "
		"a = exp(-8 softplus(lambda) r), h = a h + sqrt(1 - a^2) i x, y = h; x, y [B*D, L] (one sequence a row), "
		"w_a, b_a, w_i, b_i, lambda [1, D]",
	.n_axes = 3,
	.axes = {"B", "L", "D"},
	.check_shape = NULL,
	.tensors = rs_tensors,
	.bytes = rs_bytes,
	.traffic = rs_traffic,
	.flops = rs_flops,
	/* a row of y reads its own row of x; the [1, D] parameters are read
	 * whole (B*D = 1 would otherwise make them look like per-row inputs) */
	.reads = {[IN_X] = MB_READS_AUTO, [IN_WA] = MB_READS_ALL, [IN_BA] = MB_READS_ALL, [IN_WI] = MB_READS_ALL,
		[IN_BI] = MB_READS_ALL, [IN_LAMBDA] = MB_READS_ALL},
	.source_files = {MB_ROW_FILES(recurrent_scan)},
	.tolerance = {
		[MB_FP32] = {RS_F32_ABS, RS_REL_F32,
			"6 sigma of the rounding walk: decay errors <= 12u amplified by 1/sqrt(1-a_max^2) = 212 "
			"(8.8e-5 per unit of rms(h) <= |h| + 2) plus 25u/sqrt(3) on the increments, whose squared "
			"weights telescope to <= 1"},
		[MB_FP16] = {RS_HALF_ABS(F16_HALF_ULP), F16_HALF_ULP + RS_REL_F32,
			"fp16 output rounding (2^-11 relative) over 6 sigma of the fallback's one fp16 rounding per "
			"increment (u_d/sqrt(3)) and the fp32 decay walk (8.8e-5 per unit of rms(h) <= |h| + 2); gates "
			"never stored in fp16, whose repeated rounding would add up over a slow channel's memory"},
		[MB_BF16] = {RS_HALF_ABS(BF16_HALF_ULP), BF16_HALF_ULP + RS_REL_F32,
			"bf16 output rounding (2^-8 relative) over 6 sigma of the fallback's one bf16 rounding per "
			"increment (u_d/sqrt(3)) and the fp32 decay walk (8.8e-5 per unit of rms(h) <= |h| + 2); gates "
			"never stored in bf16, whose repeated rounding would add up over a slow channel's memory"},
	},
	.n_variants = 3,
	.variants = {
		{.name = "fused", .kind = MB_VARIANT_FUSED, .backend = "cuda",
			.description = "one pass: a persistent grid of warps, each taking whole sequences in "
			"chunks of 16 steps a lane (16-byte loads, the next chunk's in flight); gates, decay "
			"and increment in registers with three MUFU operations a step, a lane-local scan and a "
			"warp-shuffle scan of the affine (decay product, state) pairs carried from chunk to "
			"chunk, then y written once",
			.launches_per_call = 1, .kernel_patterns = {"recurrent_scan_fused"},
			.launch = GPU_LAUNCH(mb_recurrent_scan_fused_launch), .dtype_mask = MB_DTYPE_ALL},
		{.name = "fallback", .kind = MB_VARIANT_FALLBACK, .backend = "cuda",
			.description = "the RG-LRU as a compiled framework runs it with an associative scan: "
			"one elementwise launch (both gates, softplus, log a, a and the multiplier in fp32; a "
			"stored in fp32, the gated, normalised input in the dtype; vectorized, 16-byte "
			"accesses) and one scan launch over (a, input) with fp32 state, the fused kernel's "
			"warp scan",
			.launches_per_call = 2,
			.kernel_patterns = {"recurrent_scan_fb_gate", "recurrent_scan_fb_scan"},
			.launch = GPU_LAUNCH(mb_recurrent_scan_fallback_launch), .dtype_mask = MB_DTYPE_ALL},
		MB_REFERENCE_VARIANT,
	},
};
