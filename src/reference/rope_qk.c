/* Rotate-half RoPE on Q [T, Hq, D] and K [T, Hk, D] with per-token
 * cos/sin [T, D/2]: for i < D/2, with x1 = x[i] and x2 = x[i + D/2],
 *   out[i] = x1 * cos[i] - x2 * sin[i],  out[i + D/2] = x2 * cos[i] + x1 * sin[i].
 * One body serves both precisions; REAL is the arithmetic type. */
#include "kernels/row_common.h"
#include "reference/reference.h"

enum { AX_T, AX_HQ, AX_HK, AX_D };
enum { IN_Q, IN_K, IN_COS, IN_SIN };
enum { OUT_Q, OUT_K };

#define DEFINE_ROTATE(fn, REAL, OUT) \
	static void fn(const float *x, const float *c, const float *s, OUT *y, int64_t heads, int64_t d) \
	{ \
		int64_t half = d / 2; \
		for (int64_t h = 0; h < heads; h++) { \
			const float *xh = x + h * d; \
			OUT *yh = y + h * d; \
			for (int64_t i = 0; i < half; i++) { \
				REAL x1 = xh[i], x2 = xh[i + half]; \
				yh[i] = (OUT)(x1 * (REAL)c[i] - x2 * (REAL)s[i]); \
				yh[i + half] = (OUT)(x2 * (REAL)c[i] + x1 * (REAL)s[i]); \
			} \
		} \
	}

DEFINE_ROTATE(rotate_f32, float, float)
DEFINE_ROTATE(rotate_f64, double, double)

#define DEFINE_ROPE(fn, rotate, OUT) \
	void fn(const int64_t *axis, const float *const *in, OUT *const *out, \
		const int64_t *rows, int64_t n_rows) \
	{ \
		int64_t hq = axis[AX_HQ], hk = axis[AX_HK], d = axis[AX_D]; \
		for (int64_t i = 0; i < n_rows; i++) { \
			int64_t t = mb_ref_row(rows, i); \
			const float *c = in[IN_COS] + t * (d / 2), *s = in[IN_SIN] + t * (d / 2); \
			rotate(in[IN_Q] + t * hq * d, c, s, out[OUT_Q] + t * hq * d, hq, d); \
			rotate(in[IN_K] + t * hk * d, c, s, out[OUT_K] + t * hk * d, hk, d); \
		} \
	}

DEFINE_ROPE(mb_ref_rope_qk, rotate_f32, float)
DEFINE_ROPE(mb_oracle_rope_qk, rotate_f64, double)

/* ---- the rope_qk catalog row: shapes, bytes, tolerances, variants -------------------------------------------------------- */

enum { ROPE_T, ROPE_HQ, ROPE_HK, ROPE_D };

static int rope_check(const int64_t *axis, char *why, size_t len)
{
	if (axis[ROPE_D] % 2) {
		snprintf(why, len, "D must be even for rotate-half RoPE, got %lld", (long long)axis[ROPE_D]);
		return -1;
	}
	return 0;
}

static int rope_tensors(const int64_t *a, mb_tensor_spec *t)
{
	int64_t tok = a[ROPE_T], q = a[ROPE_HQ] * a[ROPE_D], k = a[ROPE_HK] * a[ROPE_D];

	t[0] = (mb_tensor_spec){"q", false, tok, q, MB_FILL_NORMAL, 0, 1};
	t[1] = (mb_tensor_spec){"k", false, tok, k, MB_FILL_NORMAL, 0, 1};
	t[2] = (mb_tensor_spec){"cos", false, tok, a[ROPE_D] / 2, MB_FILL_UNIFORM, -1, 1};
	t[3] = (mb_tensor_spec){"sin", false, tok, a[ROPE_D] / 2, MB_FILL_UNIFORM, -1, 1};
	t[4] = (mb_tensor_spec){"q_out", true, tok, q, MB_FILL_NORMAL, 0, 0};
	t[5] = (mb_tensor_spec){"k_out", true, tok, k, MB_FILL_NORMAL, 0, 0};
	return 6;
}

static uint64_t rope_bytes(const int64_t *a, mb_dtype dtype)
{
	uint64_t heads = (uint64_t)(a[ROPE_HQ] + a[ROPE_HK]);
	/* q and k read and written once, cos and sin read once */
	uint64_t elems = (uint64_t)a[ROPE_T] * (2 * heads * (uint64_t)a[ROPE_D] + (uint64_t)a[ROPE_D]);
	return elems * mb_dtype_size(dtype);
}

static uint64_t rope_flops(const int64_t *a)
{
	/* two multiplies and one add per output element */
	return 3ull * (uint64_t)a[ROPE_T] * (uint64_t)(a[ROPE_HQ] + a[ROPE_HK]) * (uint64_t)a[ROPE_D];
}

const mb_row mb_row_rope_qk = {
	.name = "rope_qk",
	.block = 'A',
	.status = MB_ROW_EXPERIMENTAL,
	.summary = "rotate-half RoPE on Q [T,Hq,D] and K [T,Hk,D] with per-token cos/sin [T,D/2]",
	.n_axes = 4,
	.axes = {"T", "Hq", "Hk", "D"},
	.check_shape = rope_check,
	.tensors = rope_tensors,
	.bytes = rope_bytes,
	.flops = rope_flops,
	.reference = mb_ref_rope_qk,
	.oracle = mb_oracle_rope_qk,
	.reference_name = "mb_ref_rope_qk (fp32, src/reference/rope_qk.c)",
	.source_files = {"src/kernels/rope_qk.cu", "src/reference/rope_qk.c"},
	.tolerance = {
		[MB_FP32] = {16 * F32_EPS, 4 * F32_EPS,
			"x1*c - x2*s: two products and a sum of terms under 8, at most 3 roundings of 2^-24*8 each (FMA contraction moves them, not the bound)"},
		[MB_FP16] = {16 * F32_EPS, F16_HALF_ULP + 4 * F32_EPS,
			"the fp32 result rounded once to fp16: half an ulp is 2^-11 relative, plus the fp32 bound"},
		[MB_BF16] = {16 * F32_EPS, BF16_HALF_ULP + 4 * F32_EPS,
			"the fp32 result rounded once to bf16: half an ulp is 2^-8 relative, plus the fp32 bound"},
	},
	.n_variants = 3,
	.variants = {
		{"fused", MB_VARIANT_FUSED, "cuda", "one launch rotates Q and K, sharing the cos/sin loads",
			1, {"rope_qk_fused"}, GPU_LAUNCH(mb_rope_qk_fused_launch), MB_DTYPE_ALL},
		{"fallback", MB_VARIANT_FALLBACK, "cuda",
			"plain path: separate Q and K launches, rotate-half into a temporary, then multiply-add",
			4, {"rope_rotate_half", "rope_mul_add"}, GPU_LAUNCH(mb_rope_qk_fallback_launch), MB_DTYPE_ALL},
		MB_REFERENCE_VARIANT,
	},
};
