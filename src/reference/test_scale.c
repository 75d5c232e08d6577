/* y = 2x: the math of the test-only rows that check the harness catches
 * wrong answers, zeros, faults and hangs. Doubling is exact in binary
 * floating point, so any difference at all is a wrong answer. */
#include "reference/reference.h"

enum { AX_N, AX_C };

#define DEFINE_SCALE(fn, OUT) \
	void fn(const int64_t *axis, const float *const *in, OUT *const *out, \
		const int64_t *rows, int64_t n_rows) \
	{ \
		int64_t cols = axis[AX_C]; \
		for (int64_t i = 0; i < n_rows; i++) { \
			int64_t t = mb_ref_row(rows, i); \
			for (int64_t j = 0; j < cols; j++) \
				out[0][t * cols + j] = (OUT)2 * (OUT)in[0][t * cols + j]; \
		} \
	}

DEFINE_SCALE(mb_ref_test_scale, float)
DEFINE_SCALE(mb_oracle_test_scale, double)
