/* Row gather: out[b, i, :] = src[b, idx[b, i], :] on src [B, S, D] and
 * idx [B, N] with every index in [0, S); out is [B, N, D]. This is how
 * document masking and mixture-of-depths pick the tokens a layer sees.
 * The reference, shape check, bytes model and tolerances are
 * gather_common.h's, over one source. */
#include "reference/gather_common.h"

/* The GPU variants the descriptor names, defined in src/kernels/row_gather.cu:
 * in src [B,S,D], idx [B,N] (int32); out [B,N,D]. */
MB_DECLARE_LAUNCH(mb_row_gather_fused_launch);
MB_DECLARE_LAUNCH(mb_row_gather_fallback_launch);

GATHER_DEFINE_REFERENCE(mb_ref_row_gather, float, 1)
GATHER_DEFINE_REFERENCE(mb_oracle_row_gather, double, 1)

/* ---- the row_gather catalog row: shapes, bytes, tolerances, variants ------------------------------------------------------ */

static int gather_tensors(const int64_t *a, mb_tensor_spec *t)
{
	t[0] = gather_source_spec("src", a);
	t[1] = gather_index_spec(a);
	t[2] = gather_output_spec("out", a);
	return 3;
}

static uint64_t gather_bytes(const int64_t *a, mb_dtype dtype)
{
	return gather_bytes_moved(a, dtype, 1);
}

static int gather_row_traffic(const int64_t *a, mb_dtype dtype, const mb_variant *v, mb_launch_traffic *out)
{
	return gather_traffic(a, dtype, v, out, 1);
}

const mb_row mb_row_row_gather = {
	MB_ROW_NAME(row_gather, "fp32, "),
	.block = 'A',
	/* drop: against a fallback written as a framework writes it, the fused
	 * gather is slower at the largest nam56r shape (0.91x, bf16) and in fp32
	 * kv_1024 on the H200 nightlies (reports/history: drop in the last three,
	 * 525539a); the bytes model predicts no saving (1.00x). */
	.status = MB_ROW_DROP,
	.summary = "out[b,i,:] = src[b,idx[b,i],:] on src [B,S,D], idx [B,N] int32 (document masking, mixture-of-depths)",
	.n_axes = 4,
	.axes = {"B", "S", "N", "D"},
	.check_shape = gather_check_shape,
	.tensors = gather_tensors,
	.bytes = gather_bytes,
	.traffic = gather_row_traffic,
	.flops = gather_flops,
	/* an output row reads the source row its index names */
	.reads = {MB_READS_INDEXED},
	.index_input = 1,
	.source_files = {MB_ROW_FILES(row_gather), "src/kernels/gather.cuh", "src/reference/gather_common.h"},
	.tolerance = GATHER_TOLERANCE,
	.n_variants = 3,
	.variants = {
		{.name = "fused", .kind = MB_VARIANT_FUSED, .backend = "cuda",
			.description = "one launch: a warp per output row reads its index once and copies the "
			"row with 16-byte accesses",
			.launches_per_call = 1, .kernel_patterns = {"row_gather_fused"},
			.launch = GPU_LAUNCH(mb_row_gather_fused_launch), .dtype_mask = MB_DTYPE_ALL},
		{.name = "fallback", .kind = MB_VARIANT_FALLBACK, .backend = "cuda",
			.description = "plain path: an element-wise gather, each output element reading its "
			"own index (torch.gather with the index expanded to [B,N,D]), as a vectorized gather: "
			"a thread per 16-byte word of a row where the row and addresses allow, 4 per thread, a "
			"grid that covers the output once",
			.launches_per_call = 1, .kernel_patterns = {"row_gather_fallback"},
			.launch = GPU_LAUNCH(mb_row_gather_fallback_launch), .dtype_mask = MB_DTYPE_ALL},
		MB_REFERENCE_VARIANT,
	},
};
