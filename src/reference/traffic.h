/* What the row descriptor files share to fill their launch-by-launch bytes
 * models (mb_row.traffic, kernels/catalog.h): the bytes each launch of a
 * variant must read and write at least, every tensor it touches counted
 * once. Included only by those files.
 *
 * A row's traffic function gives, for its fused variant, the launches of
 * the fused kernel with the row's `bytes` model split between them (their
 * totals are `bytes`); for the reference variant the same totals as one
 * launch named "reference"; for its fallback one entry per launch, in
 * launch order, each named by the variant's kernel pattern it runs. It
 * returns the entry count, or -1 for a variant kind it has no model of. */
#ifndef MB_REFERENCE_TRAFFIC_H
#define MB_REFERENCE_TRAFFIC_H

#include <stdint.h>

#include "kernels/catalog.h"

/* Append a launch to out, at *n; out NULL: only count it (mb_row.traffic
 * is asked for its count first). */
static inline void mb_traffic_add(mb_launch_traffic *out, int *n, const char *kernel, uint64_t read_bytes,
	uint64_t write_bytes)
{
	if (out)
		out[*n] = (mb_launch_traffic){kernel, read_bytes, write_bytes};
	(*n)++;
}

/* The whole computation in one launch (the fused kernel of a one-launch
 * fused variant, or the reference), named by the variant's first kernel
 * pattern, or by the variant's own name when it has none. Returns 1. */
static inline int mb_traffic_one(const mb_variant *v, uint64_t read_bytes, uint64_t write_bytes,
	mb_launch_traffic *out)
{
	int n = 0;

	mb_traffic_add(out, &n, v->kernel_patterns[0] ? v->kernel_patterns[0] : v->name, read_bytes, write_bytes);
	return n;
}

#endif
