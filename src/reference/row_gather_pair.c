/* Paired row gather for K and V: k_out[b, i, :] = k[b, idx[b, i], :] and
 * v_out[b, i, :] = v[b, idx[b, i], :] on k, v [B, S, D] and idx [B, N]
 * with every index in [0, S). Attention over a subset of tokens (document
 * masking, mixture-of-depths) gathers both with one index. The reference,
 * shape check, bytes model and tolerances are gather_common.h's, over two
 * sources, as row_gather's are over one. */
#include "reference/gather_common.h"

/* The GPU variants the descriptor names, defined in src/kernels/row_gather_pair.cu:
 * in k, v [B,S,D], idx [B,N] (int32); out k_out, v_out. */
MB_DECLARE_LAUNCH(mb_row_gather_pair_fused_launch);
MB_DECLARE_LAUNCH(mb_row_gather_pair_fallback_launch);

GATHER_DEFINE_REFERENCE(mb_ref_row_gather_pair, float, 2)
GATHER_DEFINE_REFERENCE(mb_oracle_row_gather_pair, double, 2)

/* ---- the row_gather_pair catalog row: shapes, bytes, tolerances, variants ------------------------------------------------ */

static int pair_tensors(const int64_t *a, mb_tensor_spec *t)
{
	t[0] = gather_source_spec("k", a);
	t[1] = gather_source_spec("v", a);
	t[2] = gather_index_spec(a);
	t[3] = gather_output_spec("k_out", a);
	t[4] = gather_output_spec("v_out", a);
	return 5;
}

/* K and V both read and written, with the one index read once */
static uint64_t pair_bytes(const int64_t *a, mb_dtype dtype)
{
	return gather_bytes_moved(a, dtype, 2);
}

static int pair_traffic(const int64_t *a, mb_dtype dtype, const mb_variant *v, mb_launch_traffic *out)
{
	return gather_traffic(a, dtype, v, out, 2);
}

const mb_row mb_row_row_gather_pair = {
	MB_ROW_NAME(row_gather_pair, "fp32, "),
	.block = 'A',
	/* drop: against a fallback written as a framework writes it, the fused
	 * gather is slower at the largest nam56r shape (0.91x, bf16) and in fp32
	 * kv_1024 on the H200 nightlies (reports/history: drop in the last three,
	 * 525539a); the bytes model predicts no saving (1.00x). */
	.status = MB_ROW_DROP,
	.summary = "k_out[b,i,:] = k[b,idx[b,i],:] and v_out likewise, on k, v [B,S,D] with one idx [B,N] int32",
	.n_axes = 4,
	.axes = {"B", "S", "N", "D"},
	.check_shape = gather_check_shape,
	.tensors = pair_tensors,
	.bytes = pair_bytes,
	.traffic = pair_traffic,
	.flops = gather_flops,
	/* an output row reads the k and v rows its index names */
	.reads = {MB_READS_INDEXED, MB_READS_INDEXED},
	.index_input = 2,
	/* the fallback launches row_gather's plain kernel; the four slots are
	 * full, and row_gather's row lists src/reference/gather_common.h */
	.source_files = {MB_ROW_FILES(row_gather_pair), "src/kernels/row_gather.cu", "src/kernels/gather.cuh"},
	.tolerance = GATHER_TOLERANCE,
	.n_variants = 3,
	.variants = {
		{.name = "fused", .kind = MB_VARIANT_FUSED, .backend = "cuda",
			.description = "one launch: a warp per output row reads its index once and copies the "
			"K row and the V row with 16-byte accesses",
			.launches_per_call = 1, .kernel_patterns = {"row_gather_pair_fused"},
			.launch = GPU_LAUNCH(mb_row_gather_pair_fused_launch), .dtype_mask = MB_DTYPE_ALL},
		{.name = "fallback", .kind = MB_VARIANT_FALLBACK, .backend = "cuda",
			.description = "plain path: row_gather's element-wise gather launched once for K and "
			"once for V, each output word reading its own index",
			.launches_per_call = 2, .kernel_patterns = {"row_gather_fallback"},
			.launch = GPU_LAUNCH(mb_row_gather_pair_fallback_launch), .dtype_mask = MB_DTYPE_ALL},
		MB_REFERENCE_VARIANT,
	},
};
