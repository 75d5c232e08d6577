/* The backward of rotate-half RoPE (src/reference/rope_qk.c) on the
 * gradients dq_out [T, Hq, D] and dk_out [T, Hk, D] with the forward's
 * per-token cos/sin [T, D/2]. The forward maps each pair
 * (x1, x2) = (x[i], x[i + D/2]) through the matrix [[c, -s], [s, c]]; the
 * gradient goes through its transpose [[c, s], [-s, c]]:
 *   dx[i] = g1 * cos[i] + g2 * sin[i],  dx[i + D/2] = g2 * cos[i] - g1 * sin[i]
 * with g1 = g[i], g2 = g[i + D/2]. When cos^2 + sin^2 = 1 that is the inverse
 * rotation, so bwd(fwd(x)) = x (the unit test checks it); the harness draws
 * cos and sin independently, and the transpose is what the row computes
 * either way. One body serves both precisions; REAL is the arithmetic type. */
#include "kernels/row_common.h"
#include "reference/reference.h"

enum { AX_T, AX_HQ, AX_HK, AX_D };
enum { IN_DQ_OUT, IN_DK_OUT, IN_COS, IN_SIN };
enum { OUT_DQ, OUT_DK };

#define DEFINE_ROTATE_T(fn, REAL, OUT) \
	static void fn(const float *g, const float *c, const float *s, OUT *y, int64_t heads, int64_t d) \
	{ \
		int64_t half = d / 2; \
		for (int64_t h = 0; h < heads; h++) { \
			const float *gh = g + h * d; \
			OUT *yh = y + h * d; \
			for (int64_t i = 0; i < half; i++) { \
				REAL g1 = gh[i], g2 = gh[i + half]; \
				yh[i] = (OUT)(g1 * (REAL)c[i] + g2 * (REAL)s[i]); \
				yh[i + half] = (OUT)(g2 * (REAL)c[i] - g1 * (REAL)s[i]); \
			} \
		} \
	}

DEFINE_ROTATE_T(rotate_t_f32, float, float)
DEFINE_ROTATE_T(rotate_t_f64, double, double)

#define DEFINE_ROPE_BWD(fn, rotate, OUT) \
	void fn(const int64_t *axis, const float *const *in, OUT *const *out, \
		const int64_t *rows, int64_t n_rows) \
	{ \
		int64_t hq = axis[AX_HQ], hk = axis[AX_HK], d = axis[AX_D]; \
		for (int64_t i = 0; i < n_rows; i++) { \
			int64_t t = mb_ref_row(rows, i); \
			const float *c = in[IN_COS] + t * (d / 2), *s = in[IN_SIN] + t * (d / 2); \
			rotate(in[IN_DQ_OUT] + t * hq * d, c, s, out[OUT_DQ] + t * hq * d, hq, d); \
			rotate(in[IN_DK_OUT] + t * hk * d, c, s, out[OUT_DK] + t * hk * d, hk, d); \
		} \
	}

DEFINE_ROPE_BWD(mb_ref_rope_qk_bwd, rotate_t_f32, float)
DEFINE_ROPE_BWD(mb_oracle_rope_qk_bwd, rotate_t_f64, double)

/* ---- the rope_qk_bwd catalog row: shapes, bytes, tolerances, variants ---------------------------------------------------- */

static int rope_bwd_check(const int64_t *axis, char *why, size_t len)
{
	if (axis[AX_D] % 2) {
		snprintf(why, len, "D must be even for rotate-half RoPE, got %lld", (long long)axis[AX_D]);
		return -1;
	}
	return 0;
}

static int rope_bwd_tensors(const int64_t *a, mb_tensor_spec *t)
{
	int64_t tok = a[AX_T], q = a[AX_HQ] * a[AX_D], k = a[AX_HK] * a[AX_D];

	t[0] = (mb_tensor_spec){"dq_out", false, tok, q, MB_FILL_NORMAL, 0, 1};
	t[1] = (mb_tensor_spec){"dk_out", false, tok, k, MB_FILL_NORMAL, 0, 1};
	t[2] = (mb_tensor_spec){"cos", false, tok, a[AX_D] / 2, MB_FILL_UNIFORM, -1, 1};
	t[3] = (mb_tensor_spec){"sin", false, tok, a[AX_D] / 2, MB_FILL_UNIFORM, -1, 1};
	t[4] = (mb_tensor_spec){"dq", true, tok, q, MB_FILL_NORMAL, 0, 0};
	t[5] = (mb_tensor_spec){"dk", true, tok, k, MB_FILL_NORMAL, 0, 0};
	return 6;
}

static uint64_t rope_bwd_bytes(const int64_t *a, mb_dtype dtype)
{
	uint64_t heads = (uint64_t)(a[AX_HQ] + a[AX_HK]);
	/* dq_out and dk_out read once, dq and dk written once, cos and sin
	 * (D/2 each per token) read once */
	uint64_t elems = (uint64_t)a[AX_T] * (2 * heads * (uint64_t)a[AX_D] + (uint64_t)a[AX_D]);
	return elems * mb_dtype_size(dtype);
}

static uint64_t rope_bwd_flops(const int64_t *a)
{
	/* two multiplies and one add per output element */
	return 3ull * (uint64_t)a[AX_T] * (uint64_t)(a[AX_HQ] + a[AX_HK]) * (uint64_t)a[AX_D];
}

const mb_row mb_row_rope_qk_bwd = {
	.name = "rope_qk_bwd",
	.block = 'A',
	.status = MB_ROW_EXPERIMENTAL,
	.summary = "backward of rotate-half RoPE: dQ [T,Hq,D] and dK [T,Hk,D] through the transposed rotation",
	.n_axes = 4,
	.axes = {"T", "Hq", "Hk", "D"},
	.check_shape = rope_bwd_check,
	.tensors = rope_bwd_tensors,
	.bytes = rope_bwd_bytes,
	.flops = rope_bwd_flops,
	.reference = mb_ref_rope_qk_bwd,
	.oracle = mb_oracle_rope_qk_bwd,
	.reference_name = "mb_ref_rope_qk_bwd (fp32, src/reference/rope_qk_bwd.c)",
	.source_files = {"src/kernels/rope_qk_bwd.cu", "src/reference/rope_qk_bwd.c"},
	/* The forward's numbers (src/reference/rope_qk.c): the same two
	 * products and one sum per output, only the sign of one term moved. */
	.tolerance = {
		[MB_FP32] = {16 * F32_EPS, 4 * F32_EPS,
			"g1*c + g2*s: two products under 8 (|g| < 8, |c|, |s| <= 1) and their sum, each rounded once at 2^-24: <= 2^-24*(8+8) absolute plus 2^-24 relative; FMA contraction drops a rounding, never adds one"},
		[MB_FP16] = {16 * F32_EPS, F16_HALF_ULP + 4 * F32_EPS,
			"fp16 inputs multiply exactly in fp32 (11+11 bits), so the fp32 bound holds, then one rounding of the result to fp16: 2^-11 relative"},
		[MB_BF16] = {16 * F32_EPS, BF16_HALF_ULP + 4 * F32_EPS,
			"bf16 inputs multiply exactly in fp32 (8+8 bits), so the fp32 bound holds, then one rounding of the result to bf16: 2^-8 relative"},
	},
	.n_variants = 3,
	.variants = {
		{"fused", MB_VARIANT_FUSED, "cuda",
			"one launch applies the transposed rotation to dQ and dK, sharing the cos/sin loads",
			1, {"rope_qk_bwd_fused"}, GPU_LAUNCH(mb_rope_qk_bwd_fused_launch), MB_DTYPE_ALL},
		{"fallback", MB_VARIANT_FALLBACK, "cuda",
			"plain path: separate dQ and dK launches, transposed rotate-half into the output, then multiply-add",
			4, {"rope_qk_bwd_fallback_rotate_half_t", "rope_qk_bwd_fallback_mul_add"},
			GPU_LAUNCH(mb_rope_qk_bwd_fallback_launch), MB_DTYPE_ALL},
		MB_REFERENCE_VARIANT,
	},
};
