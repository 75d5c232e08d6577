/* What the row gather descriptors (row_gather.c, row_gather_pair.c) share:
 * the axes, the index tensor and its fp32 limit, the reference body, the
 * shape check, the bytes model and the zero tolerance of a copy.
 *
 * Both rows gather n_src sources [B, S, D] with one index [B, N], every
 * index in [0, S), into n_src outputs [B, N, D]. Their tensors come in one
 * order: the sources, then the index, then the outputs in source order;
 * the reference relies on it. Included only by those two files. */
#ifndef MB_REFERENCE_GATHER_COMMON_H
#define MB_REFERENCE_GATHER_COMMON_H

#include <stdlib.h>

#include "kernels/row_common.h"

enum { AX_B, AX_S, AX_N, AX_D };

/* fp32 holds every integer up to 2^24 exactly: the largest S whose row
 * indices survive the host's fp32 copy of idx. */
#define INDEX_EXACT_LIMIT (1 << 24)

/* The source row of output row r = b*N + i. Indices live in fp32 on the
 * host (exact below 2^24, and S is far below); one outside [0, S) is a
 * broken input, not a case to compute. */
static inline int64_t gather_source_row(const int64_t *axis, const float *idx, int64_t r)
{
	int64_t n = axis[AX_N], s = axis[AX_S];
	float f = idx[r];

	if (!(f >= 0.0f && f < (float)s))
		abort(); /* the harness draws indices in [0, S) */
	return (r / n) * s + (int64_t)f;
}

/* The reference (OUT float) or oracle (OUT double) of a gather of n_src
 * sources. The row unit is the output row b*N + i, so a checked sample of
 * rows costs D elements a source whatever S is. A copy is exact in either
 * precision, so the oracle differs from the reference only in the type it
 * writes. */
#define GATHER_DEFINE_REFERENCE(fn, OUT, n_src) \
	void fn(const int64_t *axis, const float *const *in, OUT *const *out, \
		const int64_t *rows, int64_t n_rows) \
	{ \
		int64_t d = axis[AX_D]; \
		for (int64_t i = 0; i < n_rows; i++) { \
			int64_t r = mb_ref_row(rows, i), from = gather_source_row(axis, in[n_src], r) * d; \
			for (int t = 0; t < (n_src); t++) \
				for (int64_t j = 0; j < d; j++) \
					out[t][r * d + j] = (OUT)in[t][from + j]; \
		} \
	}

static inline int gather_check_shape(const int64_t *axis, char *why, size_t len)
{
	/* the host keeps indices in fp32 (and fills them from fp32 bounds) */
	if (axis[AX_S] > INDEX_EXACT_LIMIT) {
		snprintf(why, len, "S must be at most %d so that every index is exact in fp32, got %lld",
			INDEX_EXACT_LIMIT, (long long)axis[AX_S]);
		return -1;
	}
	return 0;
}

static inline mb_tensor_spec gather_source_spec(const char *name, const int64_t *a)
{
	return (mb_tensor_spec){name, false, a[AX_B] * a[AX_S], a[AX_D], MB_FILL_NORMAL, 0, 1};
}

/* idx [B, N]: integers drawn in [0, S), int32 on the device in every dtype */
static inline mb_tensor_spec gather_index_spec(const int64_t *a)
{
	return (mb_tensor_spec){"idx", false, a[AX_B], a[AX_N], MB_FILL_INDEX, 0, (float)a[AX_S]};
}

static inline mb_tensor_spec gather_output_spec(const char *name, const int64_t *a)
{
	return (mb_tensor_spec){name, true, a[AX_B] * a[AX_N], a[AX_D], MB_FILL_NORMAL, 0, 0};
}

/* Only the B*N gathered rows of each source are read, and each output's
 * rows written once: 2 * n_src * B*N*D elements, whatever S is; plus the
 * index, read once for all sources, int32 in every dtype. */
static inline uint64_t gather_bytes_moved(const int64_t *a, mb_dtype dtype, uint64_t n_src)
{
	uint64_t picked = (uint64_t)a[AX_B] * (uint64_t)a[AX_N];

	return 2 * n_src * picked * (uint64_t)a[AX_D] * mb_dtype_size(dtype) + picked * sizeof(int32_t);
}

static inline uint64_t gather_flops(const int64_t *a)
{
	(void)a;
	return 0; /* a copy: no arithmetic */
}

/* A copy moves every input unchanged: bit for bit in every dtype. */
#define GATHER_TOLERANCE { \
	[MB_FP32] = {0, 0, "a copy: every output is one input moved unchanged, so it must match bit for bit"}, \
	[MB_FP16] = {0, 0, "a copy: the fp16 input is stored unchanged, exact in fp32 too, so it must match bit for bit"}, \
	[MB_BF16] = {0, 0, "a copy: the bf16 input is stored unchanged, exact in fp32 too, so it must match bit for bit"}, \
}

#endif
