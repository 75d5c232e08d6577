/* Row gather: out[b, i, :] = src[b, idx[b, i], :] on src [B, S, D] and
 * idx [B, N] with every index in [0, S); out is [B, N, D]. This is how
 * document masking and mixture-of-depths pick the tokens a layer sees.
 * The reference's row unit is the output row b*N + i, so a checked sample
 * of rows costs D elements each whatever S is. One body serves both
 * precisions; a copy is exact in either, so the oracle differs from the
 * reference only in the type it writes. */
#include <stdlib.h>

#include "kernels/row_common.h"
#include "reference/reference.h"

enum { AX_B, AX_S, AX_N, AX_D };
enum { IN_SRC, IN_IDX };
enum { OUT_ROWS };

/* fp32 holds every integer up to 2^24 exactly: the largest S whose row
 * indices survive the host's fp32 copy of idx. */
#define INDEX_EXACT_LIMIT (1 << 24)

/* The source row of output row r = b*N + i. Indices live in fp32 on the
 * host (exact below 2^24, and S is far below); one outside [0, S) is a
 * broken input, not a case to compute. */
static int64_t source_row(const int64_t *axis, const float *idx, int64_t r)
{
	int64_t n = axis[AX_N], s = axis[AX_S];
	float f = idx[r];

	if (!(f >= 0.0f && f < (float)s))
		abort(); /* the harness draws indices in [0, S) */
	return (r / n) * s + (int64_t)f;
}

#define DEFINE_ROW_GATHER(fn, OUT) \
	void fn(const int64_t *axis, const float *const *in, OUT *const *out, \
		const int64_t *rows, int64_t n_rows) \
	{ \
		int64_t d = axis[AX_D]; \
		for (int64_t i = 0; i < n_rows; i++) { \
			int64_t r = mb_ref_row(rows, i); \
			const float *from = in[IN_SRC] + source_row(axis, in[IN_IDX], r) * d; \
			OUT *to = out[OUT_ROWS] + r * d; \
			for (int64_t j = 0; j < d; j++) \
				to[j] = (OUT)from[j]; \
		} \
	}

DEFINE_ROW_GATHER(mb_ref_row_gather, float)
DEFINE_ROW_GATHER(mb_oracle_row_gather, double)

/* ---- the row_gather catalog row: shapes, bytes, tolerances, variants ------------------------------------------------------ */

static int gather_check(const int64_t *axis, char *why, size_t len)
{
	/* the host keeps indices in fp32 (and fills them from fp32 bounds) */
	if (axis[AX_S] > INDEX_EXACT_LIMIT) {
		snprintf(why, len, "S must be at most %d so that every index is exact in fp32, got %lld",
			INDEX_EXACT_LIMIT, (long long)axis[AX_S]);
		return -1;
	}
	return 0;
}

static int gather_tensors(const int64_t *a, mb_tensor_spec *t)
{
	int64_t b = a[AX_B];

	t[0] = (mb_tensor_spec){"src", false, b * a[AX_S], a[AX_D], MB_FILL_NORMAL, 0, 1};
	t[1] = (mb_tensor_spec){"idx", false, b, a[AX_N], MB_FILL_INDEX, 0, (float)a[AX_S]};
	t[2] = (mb_tensor_spec){"out", true, b * a[AX_N], a[AX_D], MB_FILL_NORMAL, 0, 0};
	return 3;
}

static uint64_t gather_bytes(const int64_t *a, mb_dtype dtype)
{
	uint64_t picked = (uint64_t)a[AX_B] * (uint64_t)a[AX_N];
	/* only the B*N gathered rows of src are read, and the out rows written
	 * once: 2*B*N*D elements; plus the index, int32 in every dtype */
	return 2 * picked * (uint64_t)a[AX_D] * mb_dtype_size(dtype) + picked * sizeof(int32_t);
}

static uint64_t gather_flops(const int64_t *a)
{
	(void)a;
	return 0; /* a copy: no arithmetic */
}

const mb_row mb_row_row_gather = {
	.name = "row_gather",
	.block = 'A',
	.status = MB_ROW_EXPERIMENTAL,
	.summary = "out[b,i,:] = src[b,idx[b,i],:] on src [B,S,D], idx [B,N] int32 (document masking, mixture-of-depths)",
	.n_axes = 4,
	.axes = {"B", "S", "N", "D"},
	.check_shape = gather_check,
	.tensors = gather_tensors,
	.bytes = gather_bytes,
	.flops = gather_flops,
	.reference = mb_ref_row_gather,
	.oracle = mb_oracle_row_gather,
	.reference_name = "mb_ref_row_gather (fp32, src/reference/row_gather.c)",
	.source_files = {"src/kernels/row_gather.cu", "src/reference/row_gather.c"},
	.tolerance = {
		[MB_FP32] = {0, 0, "a copy: every output is one input moved unchanged, so it must match bit for bit"},
		[MB_FP16] = {0, 0, "a copy: the fp16 input is stored unchanged, exact in fp32 too, so it must match bit for bit"},
		[MB_BF16] = {0, 0, "a copy: the bf16 input is stored unchanged, exact in fp32 too, so it must match bit for bit"},
	},
	.n_variants = 3,
	.variants = {
		{"fused", MB_VARIANT_FUSED, "cuda",
			"one launch: a warp per output row reads its index once and copies the row with 16-byte accesses",
			1, {"row_gather_fused"}, GPU_LAUNCH(mb_row_gather_fused_launch), MB_DTYPE_ALL},
		{"fallback", MB_VARIANT_FALLBACK, "cuda",
			"plain path: an element-wise gather, one thread per output element reading its own index "
			"(torch.gather with the index expanded to [B,N,D])",
			1, {"row_gather_fallback"}, GPU_LAUNCH(mb_row_gather_fallback_launch), MB_DTYPE_ALL},
		MB_REFERENCE_VARIANT,
	},
};
