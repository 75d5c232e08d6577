/* Multi-Latent Attention's partial RoPE, split, rotate and concatenated into
 * the layout the attention kernel reads. With W = Dn + Dr:
 *   q [T, H, W]: per head, the first Dn dims (q_nope) pass through and the
 *     last Dr (q_pe) are rotated;
 *   k_nope [T, H, Dn] per head, and k_pe [T, Dr] shared by every head;
 *   cos, sin [T, Dr/2].
 * Outputs q_out [T, H, W] = concat(q_nope, rope(q_pe)) and
 * k_out [T, H, W] = concat(k_nope[h], rope(k_pe)), rope being rotate-half
 * within the Dr slice, as in src/reference/rope_qk.c: for i < Dr/2, with
 * x1 = x[i] and x2 = x[i + Dr/2],
 *   out[i] = x1 * cos[i] - x2 * sin[i],  out[i + Dr/2] = x2 * cos[i] + x1 * sin[i].
 * One body serves both precisions; REAL is the arithmetic type. */
#include "reference/row_common.h"
#include "reference/reference.h"
#include "reference/traffic.h"

/* The GPU variants the descriptor names, defined in src/kernels/mla_partial_rope.cu:
 * in q [T,H,192], k_nope [T,H,128], k_pe [T,64], cos, sin [T,32];
 * out q_out, k_out [T,H,192]. */
MB_DECLARE_LAUNCH(mb_mla_partial_rope_fused_launch);
MB_DECLARE_LAUNCH(mb_mla_partial_rope_fallback_launch);

enum { AX_T, AX_H, AX_DN, AX_DR };
enum { IN_Q, IN_K_NOPE, IN_K_PE, IN_COS, IN_SIN };
enum { OUT_Q, OUT_K };

#define DEFINE_ROTATE_SLICE(fn, REAL, OUT) \
	static void fn(const float *x, const float *c, const float *s, OUT *y, int64_t dr) \
	{ \
		int64_t half = dr / 2; \
		for (int64_t i = 0; i < half; i++) { \
			REAL x1 = x[i], x2 = x[i + half]; \
			y[i] = (OUT)(x1 * (REAL)c[i] - x2 * (REAL)s[i]); \
			y[i + half] = (OUT)(x2 * (REAL)c[i] + x1 * (REAL)s[i]); \
		} \
	}

DEFINE_ROTATE_SLICE(rotate_slice_f32, float, float)
DEFINE_ROTATE_SLICE(rotate_slice_f64, double, double)

/* The pass-through part is a copy, exact in either precision. */
#define DEFINE_MLA_ROPE(fn, rotate, OUT) \
	void fn(const int64_t *axis, const float *const *in, OUT *const *out, \
		const int64_t *rows, int64_t n_rows) \
	{ \
		int64_t heads = axis[AX_H], dn = axis[AX_DN], dr = axis[AX_DR], w = dn + dr; \
		for (int64_t i = 0; i < n_rows; i++) { \
			int64_t t = mb_ref_row(rows, i); \
			const float *c = in[IN_COS] + t * (dr / 2), *s = in[IN_SIN] + t * (dr / 2); \
			for (int64_t h = 0; h < heads; h++) { \
				const float *q = in[IN_Q] + (t * heads + h) * w; \
				const float *kn = in[IN_K_NOPE] + (t * heads + h) * dn; \
				OUT *qo = out[OUT_Q] + (t * heads + h) * w, *ko = out[OUT_K] + (t * heads + h) * w; \
				for (int64_t j = 0; j < dn; j++) { \
					qo[j] = (OUT)q[j]; \
					ko[j] = (OUT)kn[j]; \
				} \
				rotate(q + dn, c, s, qo + dn, dr); \
				rotate(in[IN_K_PE] + t * dr, c, s, ko + dn, dr); \
			} \
		} \
	}

DEFINE_MLA_ROPE(mb_ref_mla_partial_rope, rotate_slice_f32, float)
DEFINE_MLA_ROPE(mb_oracle_mla_partial_rope, rotate_slice_f64, double)

/* ---- the mla_partial_rope catalog row: shapes, bytes, tolerances, variants ------------------------------------------------ */

static int mla_check(const int64_t *axis, mb_error *err)
{
	if (axis[AX_DR] % 2)
		return mb_error_set(err, MB_EINVAL, NULL, "Dr must be even for rotate-half RoPE, got %lld",
			(long long)axis[AX_DR]);
	return 0;
}

static int mla_tensors(const int64_t *a, mb_tensor_spec *t)
{
	int64_t tok = a[AX_T], w = a[AX_H] * (a[AX_DN] + a[AX_DR]);

	t[0] = (mb_tensor_spec){"q", false, tok, w, MB_FILL_NORMAL, 0, 1};
	t[1] = (mb_tensor_spec){"k_nope", false, tok, a[AX_H] * a[AX_DN], MB_FILL_NORMAL, 0, 1};
	t[2] = (mb_tensor_spec){"k_pe", false, tok, a[AX_DR], MB_FILL_NORMAL, 0, 1};
	t[3] = (mb_tensor_spec){"cos", false, tok, a[AX_DR] / 2, MB_FILL_UNIFORM, -1, 1};
	t[4] = (mb_tensor_spec){"sin", false, tok, a[AX_DR] / 2, MB_FILL_UNIFORM, -1, 1};
	t[5] = (mb_tensor_spec){"q_out", true, tok, w, MB_FILL_NORMAL, 0, 0};
	t[6] = (mb_tensor_spec){"k_out", true, tok, w, MB_FILL_NORMAL, 0, 0};
	return 7;
}

static uint64_t mla_bytes(const int64_t *a, mb_dtype dtype)
{
	uint64_t h = (uint64_t)a[AX_H], dn = (uint64_t)a[AX_DN], dr = (uint64_t)a[AX_DR];
	/* per token: q read (H*W), k_nope read (H*Dn), k_pe read (Dr), cos and
	 * sin read (Dr/2 each), q_out and k_out written (H*W each); k_pe is
	 * counted once, however many heads it is broadcast to */
	uint64_t per_token = 3 * h * (dn + dr) + h * dn + 2 * dr;
	return (uint64_t)a[AX_T] * per_token * mb_dtype_size(dtype);
}

/* By launch, per token, in elements: fused as mla_bytes. Fallback, as a
 * framework runs it: q.split's contiguous copy of q_pe (H*Dr read and
 * written), RoPE of q_pe (q_pe and cos/sin read, H*Dr written) and of k_pe
 * (Dr and cos/sin read, Dr written), then torch.cat of q's nope part with
 * the rotated q_pe (H*Dn + H*Dr read, H*W written) and of k_nope with the
 * rotated k_pe expanded over the heads (H*Dn + Dr read, H*W written): five
 * launches, 5H*Dr + 2H*Dn + 2H*W + 5Dr of traffic for the fused kernel's
 * 3H*W + H*Dn + 2Dr, a model speedup of 1.38 at H 16, Dn 128, Dr 64. */
static int mla_traffic(const int64_t *a, mb_dtype dtype, const mb_variant *v, mb_launch_traffic *out)
{
	const uint64_t scale = (uint64_t)a[AX_T] * mb_dtype_size(dtype);
	const uint64_t h = (uint64_t)a[AX_H], dn = (uint64_t)a[AX_DN], dr = (uint64_t)a[AX_DR];
	const uint64_t pe = h * dr * scale, kpe = dr * scale, cs = dr * scale, nope = h * dn * scale;
	const uint64_t row = h * (dn + dr) * scale;
	int n = 0;

	switch (v->kind) {
	case MB_VARIANT_FUSED:
	case MB_VARIANT_REFERENCE:
		return mb_traffic_one(v, row + nope + kpe + cs, 2 * row, out);
	case MB_VARIANT_FALLBACK:
		mb_traffic_add(out, &n, v->kernel_patterns[0], pe, pe);          /* split: q -> q_pe */
		mb_traffic_add(out, &n, v->kernel_patterns[1], pe + cs, pe);     /* rotate q_pe */
		mb_traffic_add(out, &n, v->kernel_patterns[1], kpe + cs, kpe);   /* rotate k_pe */
		mb_traffic_add(out, &n, v->kernel_patterns[2], nope + pe, row);  /* concat q_out */
		mb_traffic_add(out, &n, v->kernel_patterns[2], nope + kpe, row); /* concat k_out */
		return n;
	default:
		return -1;
	}
}

static uint64_t mla_flops(const int64_t *a)
{
	/* two multiplies and one add per rotated element: H heads of q_pe and
	 * the one shared k_pe (a kernel that rotates k_pe once per head does
	 * more, which the model does not reward); the copies are free */
	return 3ull * (uint64_t)a[AX_T] * (uint64_t)(a[AX_H] + 1) * (uint64_t)a[AX_DR];
}

const mb_row mb_row_mla_partial_rope = {
	MB_ROW_NAME(mla_partial_rope, "fp32, "),
	.block = 'A',
	.status = MB_ROW_EXPERIMENTAL,
	.summary = "MLA partial RoPE: q [T,H,Dn+Dr] and k_nope [T,H,Dn] + shared k_pe [T,Dr] to "
		"q_out, k_out [T,H,Dn+Dr] = concat(nope, rotate-half rope of the last Dr)",
	.n_axes = 4,
	.axes = {"T", "H", "Dn", "Dr"},
	.check_shape = mla_check,
	.tensors = mla_tensors,
	.bytes = mla_bytes,
	.traffic = mla_traffic,
	.flops = mla_flops,
	.source_files = {MB_ROW_FILES(mla_partial_rope)},
	/* The Dn pass-through columns are copies (exact); the Dr columns are
	 * rope_qk's math, so they carry its bound. */
	.tolerance = {
		[MB_FP32] = {16 * F32_EPS, 4 * F32_EPS,
			"copies are exact; a rotated x1*c - x2*s has two products under 8 (|x| < 8, |c|, |s| <= 1) and a sum, each rounded once at 2^-24: <= 2^-24*(8+8) absolute plus 2^-24 relative"},
		[MB_FP16] = {16 * F32_EPS, F16_HALF_ULP + 4 * F32_EPS,
			"copies are exact; fp16 inputs multiply exactly in fp32 (11+11 bits), so the fp32 bound holds, then one rounding of the result to fp16: 2^-11 relative"},
		[MB_BF16] = {16 * F32_EPS, BF16_HALF_ULP + 4 * F32_EPS,
			"copies are exact; bf16 inputs multiply exactly in fp32 (8+8 bits), so the fp32 bound holds, then one rounding of the result to bf16: 2^-8 relative"},
	},
	.n_variants = 3,
	.variants = {
		{.name = "fused", .kind = MB_VARIANT_FUSED, .backend = "cuda",
			.description = "one launch: split, rotate and concatenate q and k into q_out and "
			"k_out, k_pe broadcast from cache",
			.launches_per_call = 1, .kernel_patterns = {"mla_partial_rope_fused"},
			.launch = GPU_LAUNCH(mb_mla_partial_rope_fused_launch), .dtype_mask = MB_DTYPE_ALL},
		{.name = "fallback", .kind = MB_VARIANT_FALLBACK, .backend = "cuda",
			.description = "plain path: copy q_pe out, rotate q_pe and k_pe (a launch each), "
			"concatenate q_out and k_out (a launch each); each a vectorized elementwise or copy "
			"kernel (16-byte accesses, 4 per thread, a grid that covers its output once)",
			.launches_per_call = 5,
			.kernel_patterns = {"mla_partial_rope_fallback_split", "mla_partial_rope_fallback_rotate", "mla_partial_rope_fallback_concat"},
			.launch = GPU_LAUNCH(mb_mla_partial_rope_fallback_launch), .dtype_mask = MB_DTYPE_ALL},
		MB_REFERENCE_VARIANT,
	},
};
