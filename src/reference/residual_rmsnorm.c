/* Residual add then RMSNorm over the hidden axis:
 *   h = x + r;  y = h / sqrt(mean(h^2) + eps) * w
 * on x, r [T, H] and w [H]; outputs y and h.
 * The fp32 reference sums squares pairwise (error grows with log2(H), not
 * H), which is what a GPU tree reduction does too, so the fp32 tolerance can
 * stay tight. One body serves both precisions. */
#include <math.h>
#include <stdlib.h>

#include "reference/reference.h"

enum { AX_T, AX_H };
enum { IN_X, IN_R, IN_W };
enum { OUT_Y, OUT_H };

/* Below this many terms a plain loop is as accurate as it needs to be. */
#define PAIRWISE_LEAF 8

#define DEFINE_SUMSQ(fn, REAL) \
	static REAL fn(const REAL *v, int64_t n) \
	{ \
		REAL acc = 0; \
		if (n <= PAIRWISE_LEAF) { \
			for (int64_t i = 0; i < n; i++) \
				acc += v[i] * v[i]; \
			return acc; \
		} \
		return fn(v, n / 2) + fn(v + n / 2, n - n / 2); \
	}

DEFINE_SUMSQ(sumsq_f32, float)
DEFINE_SUMSQ(sumsq_f64, double)

/* `scratch` holds one row of h in REAL precision. */
#define DEFINE_RMSNORM(fn, REAL, OUT, sumsq, SQRT) \
	void fn(const int64_t *axis, const float *const *in, OUT *const *out, \
		const int64_t *rows, int64_t n_rows) \
	{ \
		int64_t hidden = axis[AX_H]; \
		REAL *scratch = malloc((size_t)hidden * sizeof(REAL)); \
		if (!scratch) \
			abort(); /* the harness sized host memory before calling */ \
		for (int64_t i = 0; i < n_rows; i++) { \
			int64_t t = mb_ref_row(rows, i); \
			const float *x = in[IN_X] + t * hidden, *r = in[IN_R] + t * hidden; \
			for (int64_t j = 0; j < hidden; j++) \
				scratch[j] = (REAL)x[j] + (REAL)r[j]; \
			REAL inv = (REAL)1 / SQRT(sumsq(scratch, hidden) / (REAL)hidden + (REAL)MB_RMSNORM_EPS); \
			for (int64_t j = 0; j < hidden; j++) { \
				out[OUT_H][t * hidden + j] = (OUT)scratch[j]; \
				out[OUT_Y][t * hidden + j] = (OUT)(scratch[j] * inv * (REAL)in[IN_W][j]); \
			} \
		} \
		free(scratch); \
	}

DEFINE_RMSNORM(mb_ref_residual_rmsnorm, float, float, sumsq_f32, sqrtf)
DEFINE_RMSNORM(mb_oracle_residual_rmsnorm, double, double, sumsq_f64, sqrt)
