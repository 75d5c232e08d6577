/* Rotate-half RoPE on Q [T, Hq, D] and K [T, Hk, D] with per-token
 * cos/sin [T, D/2]: for i < D/2, with x1 = x[i] and x2 = x[i + D/2],
 *   out[i] = x1 * cos[i] - x2 * sin[i],  out[i + D/2] = x2 * cos[i] + x1 * sin[i].
 * One body serves both precisions; REAL is the arithmetic type. */
#include "reference/reference.h"

enum { AX_T, AX_HQ, AX_HK, AX_D };
enum { IN_Q, IN_K, IN_COS, IN_SIN };
enum { OUT_Q, OUT_K };

#define DEFINE_ROTATE(fn, REAL, OUT) \
	static void fn(const float *x, const float *c, const float *s, OUT *y, int64_t heads, int64_t d) \
	{ \
		int64_t half = d / 2; \
		for (int64_t h = 0; h < heads; h++) { \
			const float *xh = x + h * d; \
			OUT *yh = y + h * d; \
			for (int64_t i = 0; i < half; i++) { \
				REAL x1 = xh[i], x2 = xh[i + half]; \
				yh[i] = (OUT)(x1 * (REAL)c[i] - x2 * (REAL)s[i]); \
				yh[i + half] = (OUT)(x2 * (REAL)c[i] + x1 * (REAL)s[i]); \
			} \
		} \
	}

DEFINE_ROTATE(rotate_f32, float, float)
DEFINE_ROTATE(rotate_f64, double, double)

#define DEFINE_ROPE(fn, rotate, OUT) \
	void fn(const int64_t *axis, const float *const *in, OUT *const *out, \
		const int64_t *rows, int64_t n_rows) \
	{ \
		int64_t hq = axis[AX_HQ], hk = axis[AX_HK], d = axis[AX_D]; \
		for (int64_t i = 0; i < n_rows; i++) { \
			int64_t t = mb_ref_row(rows, i); \
			const float *c = in[IN_COS] + t * (d / 2), *s = in[IN_SIN] + t * (d / 2); \
			rotate(in[IN_Q] + t * hq * d, c, s, out[OUT_Q] + t * hq * d, hq, d); \
			rotate(in[IN_K] + t * hk * d, c, s, out[OUT_K] + t * hk * d, hk, d); \
		} \
	}

DEFINE_ROPE(mb_ref_rope_qk, rotate_f32, float)
DEFINE_ROPE(mb_oracle_rope_qk, rotate_f64, double)
