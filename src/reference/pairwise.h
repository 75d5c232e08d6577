/* Pairwise summation for the references: halves until a run of at most
 * MB_PAIRWISE_LEAF terms, which a plain loop adds; the error grows as
 * log2(n) roundings rather than n. Included only by reference files. */
#ifndef MB_REFERENCE_PAIRWISE_H
#define MB_REFERENCE_PAIRWISE_H

#include <stdint.h>

/* Below this many terms a plain loop is as accurate as it needs to be. */
#define MB_PAIRWISE_LEAF 8

#define MB_DEFINE_PAIRWISE_SUM(fn, REAL) \
	static inline REAL fn(const REAL *v, int64_t n) \
	{ \
		REAL acc = 0; \
		if (n <= MB_PAIRWISE_LEAF) { \
			for (int64_t i = 0; i < n; i++) \
				acc += v[i]; \
			return acc; \
		} \
		return fn(v, n / 2) + fn(v + n / 2, n - n / 2); \
	}

MB_DEFINE_PAIRWISE_SUM(mb_pairwise_sum_f32, float)
MB_DEFINE_PAIRWISE_SUM(mb_pairwise_sum_f64, double)

#endif
