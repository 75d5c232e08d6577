/* The backward of rotate-half RoPE (src/reference/rope_qk.c) on the
 * gradients dq_out [T, Hq, D] and dk_out [T, Hk, D] with the forward's
 * per-token cos/sin [T, D/2]. The forward maps each pair
 * (x1, x2) = (x[i], x[i + D/2]) through the matrix [[c, -s], [s, c]]; the
 * gradient goes through its transpose [[c, s], [-s, c]]:
 *   dx[i] = g1 * cos[i] + g2 * sin[i],  dx[i + D/2] = g2 * cos[i] - g1 * sin[i]
 * with g1 = g[i], g2 = g[i + D/2]. When cos^2 + sin^2 = 1 that is the inverse
 * rotation, so bwd(fwd(x)) = x (the unit test checks it); the harness draws
 * cos and sin independently, and the transpose is what the row computes
 * either way. The transpose is the forward with sin negated, so the
 * forward's body computes it (rope_common.h), as it does the shapes, bytes
 * (whole and by launch), flops and tolerance numbers: the same two products and one sum per
 * output on the same tensors. */
#include "reference/rope_common.h"

/* The GPU variants the descriptor names, defined in src/kernels/rope_qk_bwd.cu:
 * in dq_out [T,Hq,D], dk_out [T,Hk,D], cos, sin; out dq, dk. */
MB_DECLARE_LAUNCH(mb_rope_qk_bwd_fused_launch);
MB_DECLARE_LAUNCH(mb_rope_qk_bwd_fallback_launch);

void mb_ref_rope_qk_bwd(const int64_t *axis, const float *const *in, float *const *out, const int64_t *rows,
	int64_t n_rows)
{
	mb_rope_ref_signed(axis, in, out, rows, n_rows, MB_ROPE_BWD);
}

void mb_oracle_rope_qk_bwd(const int64_t *axis, const float *const *in, double *const *out, const int64_t *rows,
	int64_t n_rows)
{
	mb_rope_oracle_signed(axis, in, out, rows, n_rows, MB_ROPE_BWD);
}

/* ---- the rope_qk_bwd catalog row: shapes, bytes, tolerances, variants ---------------------------------------------------- */

static int rope_bwd_tensors(const int64_t *axis, mb_tensor_spec *t)
{
	return mb_rope_tensors(t, axis, &(const mb_rope_names){"dq_out", "dk_out", "dq", "dk"});
}

const mb_row mb_row_rope_qk_bwd = {
	MB_ROW_NAME(rope_qk_bwd, "fp32, "),
	.block = 'A',
	.status = MB_ROW_EXPERIMENTAL,
	.summary = "backward of rotate-half RoPE: dQ [T,Hq,D] and dK [T,Hk,D] through the transposed rotation",
	.n_axes = 4,
	.axes = {"T", "Hq", "Hk", "D"},
	.check_shape = mb_rope_check_shape,
	.tensors = rope_bwd_tensors,
	.bytes = mb_rope_bytes,
	.traffic = mb_rope_traffic,
	.flops = mb_rope_flops,
	/* rope_common.h, the shared declarations and tolerance numbers, is
	 * listed by rope_qk's row (four entries at most; provenance takes the
	 * union of every row's). */
	.source_files = {MB_ROW_FILES(rope_qk_bwd), "src/kernels/rope.cuh", "src/reference/rope_qk.c"},
	.tolerance = MB_ROPE_TOLERANCE(
		"g1*c + g2*s: two products under 8 (|g| < 8, |c|, |s| <= 1) and their sum, each rounded once at 2^-24: <= 2^-24*(8+8) absolute plus 2^-24 relative; FMA contraction drops a rounding, never adds one",
		"fp16 inputs multiply exactly in fp32 (11+11 bits), so the fp32 bound holds, then one rounding of the result to fp16: 2^-11 relative",
		"bf16 inputs multiply exactly in fp32 (8+8 bits), so the fp32 bound holds, then one rounding of the result to bf16: 2^-8 relative"),
	.n_variants = 3,
	.variants = {
		{.name = "fused", .kind = MB_VARIANT_FUSED, .backend = "cuda",
			.description = "one launch applies the transposed rotation to dQ and dK, sharing the "
			"cos/sin loads",
			.launches_per_call = 1, .kernel_patterns = {"rope_qk_bwd_fused"},
			.launch = GPU_LAUNCH(mb_rope_qk_bwd_fused_launch), .dtype_mask = MB_DTYPE_ALL},
		{.name = "fallback", .kind = MB_VARIANT_FALLBACK, .backend = "cuda",
			.description = "plain path: dQ then dK, each the transposed rotate-half into the "
			"output, then a multiply-add over it; each a vectorized elementwise kernel (16-byte "
			"accesses, 4 per thread, a grid that covers the tensor once)",
			.launches_per_call = 4,
			.kernel_patterns = {"rope_qk_bwd_fallback_rotate_half_t", "rope_qk_bwd_fallback_mul_add"},
			.launch = GPU_LAUNCH(mb_rope_qk_bwd_fallback_launch), .dtype_mask = MB_DTYPE_ALL},
		MB_REFERENCE_VARIANT,
	},
};
