/* Paired row gather for K and V: k_out[b, i, :] = k[b, idx[b, i], :] and
 * v_out[b, i, :] = v[b, idx[b, i], :] on k, v [B, S, D] and idx [B, N]
 * with every index in [0, S). Attention over a subset of tokens (document
 * masking, mixture-of-depths) gathers both with one index. The row unit is
 * the output row b*N + i, as in row_gather. One body serves both
 * precisions; a copy is exact in either. */
#include <stdlib.h>

#include "kernels/row_common.h"
#include "reference/reference.h"

enum { AX_B, AX_S, AX_N, AX_D };
enum { IN_K, IN_V, IN_IDX };
enum { OUT_K, OUT_V };

/* fp32 holds every integer up to 2^24 exactly: the largest S whose row
 * indices survive the host's fp32 copy of idx. */
#define INDEX_EXACT_LIMIT (1 << 24)

/* The source row of output row r = b*N + i; an index outside [0, S) is a
 * broken input, not a case to compute. */
static int64_t source_row(const int64_t *axis, const float *idx, int64_t r)
{
	int64_t n = axis[AX_N], s = axis[AX_S];
	float f = idx[r];

	if (!(f >= 0.0f && f < (float)s))
		abort(); /* the harness draws indices in [0, S) */
	return (r / n) * s + (int64_t)f;
}

#define DEFINE_ROW_GATHER_PAIR(fn, OUT) \
	void fn(const int64_t *axis, const float *const *in, OUT *const *out, \
		const int64_t *rows, int64_t n_rows) \
	{ \
		int64_t d = axis[AX_D]; \
		for (int64_t i = 0; i < n_rows; i++) { \
			int64_t r = mb_ref_row(rows, i), from = source_row(axis, in[IN_IDX], r) * d; \
			for (int64_t j = 0; j < d; j++) { \
				out[OUT_K][r * d + j] = (OUT)in[IN_K][from + j]; \
				out[OUT_V][r * d + j] = (OUT)in[IN_V][from + j]; \
			} \
		} \
	}

DEFINE_ROW_GATHER_PAIR(mb_ref_row_gather_pair, float)
DEFINE_ROW_GATHER_PAIR(mb_oracle_row_gather_pair, double)

/* ---- the row_gather_pair catalog row: shapes, bytes, tolerances, variants ------------------------------------------------ */

static int pair_check(const int64_t *axis, char *why, size_t len)
{
	/* the host keeps indices in fp32 (and fills them from fp32 bounds) */
	if (axis[AX_S] > INDEX_EXACT_LIMIT) {
		snprintf(why, len, "S must be at most %d so that every index is exact in fp32, got %lld",
			INDEX_EXACT_LIMIT, (long long)axis[AX_S]);
		return -1;
	}
	return 0;
}

static int pair_tensors(const int64_t *a, mb_tensor_spec *t)
{
	int64_t b = a[AX_B];

	t[0] = (mb_tensor_spec){"k", false, b * a[AX_S], a[AX_D], MB_FILL_NORMAL, 0, 1};
	t[1] = (mb_tensor_spec){"v", false, b * a[AX_S], a[AX_D], MB_FILL_NORMAL, 0, 1};
	t[2] = (mb_tensor_spec){"idx", false, b, a[AX_N], MB_FILL_INDEX, 0, (float)a[AX_S]};
	t[3] = (mb_tensor_spec){"k_out", true, b * a[AX_N], a[AX_D], MB_FILL_NORMAL, 0, 0};
	t[4] = (mb_tensor_spec){"v_out", true, b * a[AX_N], a[AX_D], MB_FILL_NORMAL, 0, 0};
	return 5;
}

static uint64_t pair_bytes(const int64_t *a, mb_dtype dtype)
{
	uint64_t picked = (uint64_t)a[AX_B] * (uint64_t)a[AX_N];
	/* the B*N gathered rows of k and of v read, k_out and v_out written:
	 * 4*B*N*D elements; the index read once, int32 in every dtype */
	return 4 * picked * (uint64_t)a[AX_D] * mb_dtype_size(dtype) + picked * sizeof(int32_t);
}

static uint64_t pair_flops(const int64_t *a)
{
	(void)a;
	return 0; /* a copy: no arithmetic */
}

const mb_row mb_row_row_gather_pair = {
	.name = "row_gather_pair",
	.block = 'A',
	.status = MB_ROW_EXPERIMENTAL,
	.summary = "k_out[b,i,:] = k[b,idx[b,i],:] and v_out likewise, on k, v [B,S,D] with one idx [B,N] int32",
	.n_axes = 4,
	.axes = {"B", "S", "N", "D"},
	.check_shape = pair_check,
	.tensors = pair_tensors,
	.bytes = pair_bytes,
	.flops = pair_flops,
	.reference = mb_ref_row_gather_pair,
	.oracle = mb_oracle_row_gather_pair,
	.reference_name = "mb_ref_row_gather_pair (fp32, src/reference/row_gather_pair.c)",
	/* the fallback launches row_gather's plain kernel */
	.source_files = {"src/kernels/row_gather_pair.cu", "src/reference/row_gather_pair.c", "src/kernels/row_gather.cu"},
	.tolerance = {
		[MB_FP32] = {0, 0, "a copy: every output is one input moved unchanged, so it must match bit for bit"},
		[MB_FP16] = {0, 0, "a copy: the fp16 input is stored unchanged, exact in fp32 too, so it must match bit for bit"},
		[MB_BF16] = {0, 0, "a copy: the bf16 input is stored unchanged, exact in fp32 too, so it must match bit for bit"},
	},
	.n_variants = 3,
	.variants = {
		{"fused", MB_VARIANT_FUSED, "cuda",
			"one launch: a warp per output row reads its index once and copies the K row and the V row "
			"with 16-byte accesses",
			1, {"row_gather_pair_fused"}, GPU_LAUNCH(mb_row_gather_pair_fused_launch), MB_DTYPE_ALL},
		{"fallback", MB_VARIANT_FALLBACK, "cuda",
			"plain path: row_gather's element-wise gather launched once for K and once for V, "
			"each thread reading its own index",
			2, {"row_gather_fallback"}, GPU_LAUNCH(mb_row_gather_pair_fallback_launch), MB_DTYPE_ALL},
		MB_REFERENCE_VARIANT,
	},
};
