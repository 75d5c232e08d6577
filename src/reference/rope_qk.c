/* Rotate-half RoPE on Q [T, Hq, D] and K [T, Hk, D] with per-token
 * cos/sin [T, D/2]: for i < D/2, with x1 = x[i] and x2 = x[i + D/2],
 *   out[i] = x1 * cos[i] - x2 * sin[i],  out[i + D/2] = x2 * cos[i] + x1 * sin[i].
 * One body serves both precisions; REAL is the arithmetic type. It serves
 * the backward too (rope_qk_bwd.c, through rope_common.h), with sin negated:
 * negation is exact, so that is the transposed rotation to the last bit. */
#include "reference/rope_common.h"

/* The GPU variants the descriptor names, defined in src/kernels/rope_qk.cu:
 * in q [T,Hq,D], k [T,Hk,D], cos, sin [T,D/2]; out q_out, k_out. */
MB_DECLARE_LAUNCH(mb_rope_qk_fused_launch);
MB_DECLARE_LAUNCH(mb_rope_qk_fallback_launch);

enum { AX_T, AX_HQ, AX_HK, AX_D };
enum { IN_Q, IN_K, IN_COS, IN_SIN };
enum { OUT_Q, OUT_K };

#define DEFINE_ROTATE(fn, REAL, OUT) \
	static void fn(const float *x, const float *c, const float *s, OUT *y, int64_t heads, int64_t d, \
		REAL sin_sign) \
	{ \
		int64_t half = d / 2; \
		for (int64_t h = 0; h < heads; h++) { \
			const float *xh = x + h * d; \
			OUT *yh = y + h * d; \
			for (int64_t i = 0; i < half; i++) { \
				REAL x1 = xh[i], x2 = xh[i + half], si = sin_sign * (REAL)s[i]; \
				yh[i] = (OUT)(x1 * (REAL)c[i] - x2 * si); \
				yh[i + half] = (OUT)(x2 * (REAL)c[i] + x1 * si); \
			} \
		} \
	}

DEFINE_ROTATE(rotate_f32, float, float)
DEFINE_ROTATE(rotate_f64, double, double)

#define DEFINE_ROPE(fn, rotate, REAL, OUT) \
	void fn(const int64_t *axis, const float *const *in, OUT *const *out, \
		const int64_t *rows, int64_t n_rows, int sin_sign) \
	{ \
		int64_t hq = axis[AX_HQ], hk = axis[AX_HK], d = axis[AX_D]; \
		for (int64_t i = 0; i < n_rows; i++) { \
			int64_t t = mb_ref_row(rows, i); \
			const float *c = in[IN_COS] + t * (d / 2), *s = in[IN_SIN] + t * (d / 2); \
			rotate(in[IN_Q] + t * hq * d, c, s, out[OUT_Q] + t * hq * d, hq, d, (REAL)sin_sign); \
			rotate(in[IN_K] + t * hk * d, c, s, out[OUT_K] + t * hk * d, hk, d, (REAL)sin_sign); \
		} \
	}

DEFINE_ROPE(mb_rope_ref_signed, rotate_f32, float, float)
DEFINE_ROPE(mb_rope_oracle_signed, rotate_f64, double, double)

void mb_ref_rope_qk(const int64_t *axis, const float *const *in, float *const *out, const int64_t *rows,
	int64_t n_rows)
{
	mb_rope_ref_signed(axis, in, out, rows, n_rows, MB_ROPE_FWD);
}

void mb_oracle_rope_qk(const int64_t *axis, const float *const *in, double *const *out, const int64_t *rows,
	int64_t n_rows)
{
	mb_rope_oracle_signed(axis, in, out, rows, n_rows, MB_ROPE_FWD);
}

/* ---- the rope_qk catalog row: shapes, bytes, tolerances, variants -------------------------------------------------------- */

int mb_rope_check_shape(const int64_t *axis, mb_error *err)
{
	if (axis[AX_D] % 2)
		return mb_error_set(err, MB_EINVAL, NULL, "D must be even for rotate-half RoPE, got %lld",
			(long long)axis[AX_D]);
	return 0;
}

int mb_rope_tensors(mb_tensor_spec *t, const int64_t *axis, const mb_rope_names *names)
{
	int64_t tok = axis[AX_T], q = axis[AX_HQ] * axis[AX_D], k = axis[AX_HK] * axis[AX_D];

	t[0] = (mb_tensor_spec){names->x_q, false, tok, q, MB_FILL_NORMAL, 0, 1};
	t[1] = (mb_tensor_spec){names->x_k, false, tok, k, MB_FILL_NORMAL, 0, 1};
	t[2] = (mb_tensor_spec){"cos", false, tok, axis[AX_D] / 2, MB_FILL_UNIFORM, -1, 1};
	t[3] = (mb_tensor_spec){"sin", false, tok, axis[AX_D] / 2, MB_FILL_UNIFORM, -1, 1};
	t[4] = (mb_tensor_spec){names->out_q, true, tok, q, MB_FILL_NORMAL, 0, 0};
	t[5] = (mb_tensor_spec){names->out_k, true, tok, k, MB_FILL_NORMAL, 0, 0};
	return 6;
}

static int rope_tensors(const int64_t *axis, mb_tensor_spec *t)
{
	return mb_rope_tensors(t, axis, &(const mb_rope_names){"q", "k", "q_out", "k_out"});
}

uint64_t mb_rope_bytes(const int64_t *a, mb_dtype dtype)
{
	uint64_t heads = (uint64_t)(a[AX_HQ] + a[AX_HK]);
	/* q and k (or their gradients) read once, the outputs written once,
	 * cos and sin (D/2 each per token) read once */
	uint64_t elems = (uint64_t)a[AX_T] * (2 * heads * (uint64_t)a[AX_D] + (uint64_t)a[AX_D]);
	return elems * mb_dtype_size(dtype);
}

/* By launch, with q = T*Hq*D, k = T*Hk*D and cs = T*D (cos and sin, D/2
 * each per token) elements. Fused: q, k, cos and sin read once, the
 * outputs written once. Fallback, as a framework runs
 * x * cos + rotate_half(x) * sin on Q then on K: rotate_half (a copy with
 * negation: x read, out written), then the multiply-add over it (x, the
 * rotated out, cos and sin read, out written): four elementwise launches,
 * 5q + 5k + 2cs of traffic for the fused kernel's 2q + 2k + cs, a model
 * speedup of 2.50 at Hq 64, Hk 8 (2.49 at Hq 32). The backward's are the
 * same tensors and launches. */
int mb_rope_traffic(const int64_t *a, mb_dtype dtype, const mb_variant *v, mb_launch_traffic *out)
{
	const uint64_t size = mb_dtype_size(dtype), tok_d = (uint64_t)a[AX_T] * (uint64_t)a[AX_D];
	const uint64_t q = tok_d * (uint64_t)a[AX_HQ] * size, k = tok_d * (uint64_t)a[AX_HK] * size, cs = tok_d * size;
	int n = 0;

	switch (v->kind) {
	case MB_VARIANT_FUSED:
	case MB_VARIANT_REFERENCE:
		return mb_traffic_one(v, q + k + cs, q + k, out);
	case MB_VARIANT_FALLBACK:
		mb_traffic_add(out, &n, v->kernel_patterns[0], q, q);          /* rotate Q */
		mb_traffic_add(out, &n, v->kernel_patterns[1], 2 * q + cs, q); /* multiply-add Q */
		mb_traffic_add(out, &n, v->kernel_patterns[0], k, k);          /* rotate K */
		mb_traffic_add(out, &n, v->kernel_patterns[1], 2 * k + cs, k); /* multiply-add K */
		return n;
	default:
		return -1;
	}
}

uint64_t mb_rope_flops(const int64_t *a)
{
	/* two multiplies and one add per output element */
	return 3ull * (uint64_t)a[AX_T] * (uint64_t)(a[AX_HQ] + a[AX_HK]) * (uint64_t)a[AX_D];
}

const mb_row mb_row_rope_qk = {
	MB_ROW_NAME(rope_qk, "fp32, "),
	.block = 'A',
	.status = MB_ROW_EXPERIMENTAL,
	.summary = "rotate-half RoPE on Q [T,Hq,D] and K [T,Hk,D] with per-token cos/sin [T,D/2]",
	.n_axes = 4,
	.axes = {"T", "Hq", "Hk", "D"},
	.check_shape = mb_rope_check_shape,
	.tensors = rope_tensors,
	.bytes = mb_rope_bytes,
	.traffic = mb_rope_traffic,
	.flops = mb_rope_flops,
	.source_files = {MB_ROW_FILES(rope_qk), "src/kernels/rope.cuh", "src/reference/rope_common.h"},
	.tolerance = MB_ROPE_TOLERANCE(
		"x1*c - x2*s: two products and a sum of terms under 8, at most 3 roundings of 2^-24*8 each (FMA contraction moves them, not the bound)",
		"the fp32 result rounded once to fp16: half an ulp is 2^-11 relative, plus the fp32 bound",
		"the fp32 result rounded once to bf16: half an ulp is 2^-8 relative, plus the fp32 bound"),
	.n_variants = 3,
	.variants = {
		{.name = "fused", .kind = MB_VARIANT_FUSED, .backend = "cuda",
			.description = "one launch rotates Q and K, sharing the cos/sin loads",
			.launches_per_call = 1, .kernel_patterns = {"rope_qk_fused"},
			.launch = GPU_LAUNCH(mb_rope_qk_fused_launch), .dtype_mask = MB_DTYPE_ALL},
		{.name = "fallback", .kind = MB_VARIANT_FALLBACK, .backend = "cuda",
			.description = "plain path: Q then K, each rotate-half into the output, then a "
			"multiply-add over it (x*cos + rotate_half(x)*sin); each a vectorized elementwise "
			"kernel (16-byte accesses, 4 per thread, a grid that covers the tensor once)",
			.launches_per_call = 4, .kernel_patterns = {"rope_rotate_half", "rope_mul_add"},
			.launch = GPU_LAUNCH(mb_rope_qk_fallback_launch), .dtype_mask = MB_DTYPE_ALL},
		MB_REFERENCE_VARIANT,
	},
};
