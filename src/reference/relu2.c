/* Squared ReLU on x [R, C]: y = relu(x)^2 = (x > 0 ? x : 0)^2.
 * One body serves both precisions; REAL is the arithmetic type.
 * Worked by hand: x = (-2, 0.5, 3) gives y = (0, 0.25, 9). */
#include "reference/row_common.h"
#include "reference/reference.h"
#include "reference/traffic.h"

/* The GPU variants the descriptor names, defined in src/kernels/relu2.cu:
 * in x [R,C]; out y = relu(x)^2. */
MB_DECLARE_LAUNCH(mb_relu2_fused_launch);
MB_DECLARE_LAUNCH(mb_relu2_fallback_launch);

enum { AX_R, AX_C };
enum { IN_X };
enum { OUT_Y };

#define DEFINE_RELU2(fn, REAL, OUT) \
	void fn(const int64_t *axis, const float *const *in, OUT *const *out, \
		const int64_t *rows, int64_t n_rows) \
	{ \
		int64_t cols = axis[AX_C]; \
		for (int64_t i = 0; i < n_rows; i++) { \
			int64_t r = mb_ref_row(rows, i); \
			const float *x = in[IN_X] + r * cols; \
			OUT *y = out[OUT_Y] + r * cols; \
			for (int64_t j = 0; j < cols; j++) { \
				REAL pos = x[j] > 0 ? (REAL)x[j] : (REAL)0; \
				y[j] = (OUT)(pos * pos); \
			} \
		} \
	}

DEFINE_RELU2(mb_ref_relu2, float, float)
DEFINE_RELU2(mb_oracle_relu2, double, double)

/* ---- the relu2 catalog row: shapes, bytes, tolerances, variants ----------------------------------------------------------- */

/* fp16's subnormal spacing is 2^-24: a square under 2^-14 (|x| < 2^-7)
 * rounds with an absolute error of at most half of it, where the relative
 * bound of the normal range no longer holds. */
#define F16_SUBNORMAL_HALF_SPACING 0x1p-25
/* fp32 and bf16 share the fp32 exponent range; below its normal range
 * (2^-126, |x| < 2^-63, which a N(0,1) draw never gives) the relative
 * bound gives way to an absolute one of this size. */
#define F32_NORMAL_MIN 0x1p-126

static int relu2_tensors(const int64_t *a, mb_tensor_spec *t)
{
	t[0] = (mb_tensor_spec){"x", false, a[AX_R], a[AX_C], MB_FILL_NORMAL, 0, 1};
	t[1] = (mb_tensor_spec){"y", true, a[AX_R], a[AX_C], MB_FILL_NORMAL, 0, 0};
	return 2;
}

static uint64_t relu2_bytes(const int64_t *a, mb_dtype dtype)
{
	/* x read once, y written once */
	return 2ull * (uint64_t)a[AX_R] * (uint64_t)a[AX_C] * mb_dtype_size(dtype);
}

/* By launch. Fused: x read, y written. Fallback, as a framework runs
 * relu(x).square(): torch.relu (x read, relu(x) written) then .square()
 * in place (relu(x) read, y written), two elementwise launches: 4 bytes of
 * traffic per element for the fused kernel's 2, a model speedup of 2.0. */
static int relu2_traffic(const int64_t *a, mb_dtype dtype, const mb_variant *v, mb_launch_traffic *out)
{
	const uint64_t x = (uint64_t)a[AX_R] * (uint64_t)a[AX_C] * mb_dtype_size(dtype);
	int n = 0;

	switch (v->kind) {
	case MB_VARIANT_FUSED:
	case MB_VARIANT_REFERENCE:
		return mb_traffic_one(v, x, x, out);
	case MB_VARIANT_FALLBACK:
		mb_traffic_add(out, &n, v->kernel_patterns[0], x, x); /* relu: x -> relu(x) */
		mb_traffic_add(out, &n, v->kernel_patterns[1], x, x); /* square: relu(x) -> y */
		return n;
	default:
		return -1;
	}
}

static uint64_t relu2_flops(const int64_t *a)
{
	/* a max and a multiply per element */
	return 2ull * (uint64_t)a[AX_R] * (uint64_t)a[AX_C];
}

const mb_row mb_row_relu2 = {
	MB_ROW_NAME(relu2, "fp32, "),
	.block = 'E',
	.status = MB_ROW_EXPERIMENTAL,
	.summary = "squared ReLU y = relu(x)^2 on x [R,C] (expert MLP activation)",
	.n_axes = 2,
	.axes = {"R", "C"},
	.check_shape = NULL,
	.tensors = relu2_tensors,
	.bytes = relu2_bytes,
	.traffic = relu2_traffic,
	.flops = relu2_flops,
	.source_files = {MB_ROW_FILES(relu2)},
	/* relu of a stored value is that value or 0, both representable, so
	 * the fallback's rounded temporary is exact and both paths round once:
	 * the fp32 product x*x, then the store to the case dtype. */
	.tolerance = {
		[MB_FP32] = {F32_NORMAL_MIN, F32_EPS,
			"x*x is one correctly rounded fp32 product (2^-24 relative); relu and the fallback's temporary are exact"},
		[MB_FP16] = {F16_SUBNORMAL_HALF_SPACING, F16_HALF_ULP + F32_EPS,
			"the fp32 square rounded once to fp16: 2^-11 relative, or 2^-25 absolute for squares in fp16's subnormal range; relu's temporary is exact"},
		[MB_BF16] = {F32_NORMAL_MIN, BF16_HALF_ULP + F32_EPS,
			"the fp32 square rounded once to bf16: half an ulp is 2^-8 relative; relu's temporary is exact"},
	},
	.n_variants = 3,
	.variants = {
		{.name = "fused", .kind = MB_VARIANT_FUSED, .backend = "cuda",
			.description = "one launch: 16-byte loads of x, relu and square in fp32, 16-byte "
			"stores of y",
			.launches_per_call = 1, .kernel_patterns = {"relu2_fused"},
			.launch = GPU_LAUNCH(mb_relu2_fused_launch), .dtype_mask = MB_DTYPE_ALL},
		{.name = "fallback", .kind = MB_VARIANT_FALLBACK, .backend = "cuda",
			.description = "plain path (torch.relu, then .square()): a relu launch writes relu(x) "
			"(case dtype) into y, a square launch squares it in place; each a vectorized "
			"elementwise kernel (16-byte accesses, 4 per thread, a grid that covers the data once)",
			.launches_per_call = 2,
			.kernel_patterns = {"relu2_fallback_relu", "relu2_fallback_square"},
			.launch = GPU_LAUNCH(mb_relu2_fallback_launch), .dtype_mask = MB_DTYPE_ALL},
		MB_REFERENCE_VARIANT,
	},
};
