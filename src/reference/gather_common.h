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

#include "reference/row_common.h"
#include "reference/traffic.h"

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

static inline int gather_check_shape(const int64_t *axis, mb_error *err)
{
	/* the host keeps indices in fp32 (and fills them from fp32 bounds) */
	if (axis[AX_S] > INDEX_EXACT_LIMIT)
		return mb_error_set(err, MB_EINVAL, NULL, "S must be at most %d so that every index is exact in fp32, "
			"got %lld", INDEX_EXACT_LIMIT, (long long)axis[AX_S]);
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

/* By launch (mb_row.traffic), with p = B*N*D elements per source and the
 * int32 index [B, N]. Fused: every source's gathered rows and the index
 * read once, every output written once. Fallback, as a framework runs
 * torch.gather with the index expanded, once per source: each launch
 * reads its source's gathered rows and the index (however many threads
 * read each index word, it crosses memory once) and writes its output.
 * One source: the fused kernel's bytes, a model speedup of 1.0; two: the
 * index read twice, 1.0 within B*N*4 / (4p bytes). */
static inline int gather_traffic(const int64_t *a, mb_dtype dtype, const mb_variant *v, mb_launch_traffic *out,
	uint64_t n_src)
{
	const uint64_t picked = (uint64_t)a[AX_B] * (uint64_t)a[AX_N], index = picked * sizeof(int32_t);
	const uint64_t rows = picked * (uint64_t)a[AX_D] * mb_dtype_size(dtype);
	int n = 0;

	switch (v->kind) {
	case MB_VARIANT_FUSED:
	case MB_VARIANT_REFERENCE:
		return mb_traffic_one(v, n_src * rows + index, n_src * rows, out);
	case MB_VARIANT_FALLBACK:
		for (uint64_t t = 0; t < n_src; t++)
			mb_traffic_add(out, &n, v->kernel_patterns[0], rows + index, rows);
		return n;
	default:
		return -1;
	}
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
