/* What rotate-half RoPE's backward row (rope_qk_bwd.c) reuses of the
 * forward's (rope_qk.c), where these are defined: the reference body with
 * the sign of sin as a parameter, the shape rule, the tensor specs, the
 * bytes and flops models and the tolerance numbers. The backward is the
 * forward with sin negated (the transposed rotation), on the same shapes.
 * Included only by those two files. */
#ifndef MB_REFERENCE_ROPE_COMMON_H
#define MB_REFERENCE_ROPE_COMMON_H

#include "reference/row_common.h"
#include "reference/traffic.h"

/* sin_sign: the forward rotation, or its transpose (the gradient). */
enum { MB_ROPE_FWD = 1, MB_ROPE_BWD = -1 };

/* Axes T, Hq, Hk, D; in x_q, x_k, cos, sin; out out_q, out_k, with
 * s = sin_sign * sin[i]:
 *   out[i] = x1 * cos[i] - x2 * s,  out[i + D/2] = x2 * cos[i] + x1 * s. */
void mb_rope_ref_signed(const int64_t *axis, const float *const *in, float *const *out, const int64_t *rows,
	int64_t n_rows, int sin_sign);
void mb_rope_oracle_signed(const int64_t *axis, const float *const *in, double *const *out, const int64_t *rows,
	int64_t n_rows, int sin_sign);

/* The row's names of the tensors that differ between the directions; cos
 * and sin are "cos" and "sin" in both. Borrowed string literals. */
typedef struct mb_rope_names {
	const char *x_q, *x_k, *out_q, *out_k;
} mb_rope_names;

int mb_rope_check_shape(const int64_t *axis, mb_error *err);
/* Fills t[0..5] (x_q, x_k, cos, sin, out_q, out_k); returns 6. */
int mb_rope_tensors(mb_tensor_spec *t, const int64_t *axis, const mb_rope_names *names);
uint64_t mb_rope_bytes(const int64_t *axis, mb_dtype dtype);
/* By launch (mb_row.traffic); the fallback's kernel_patterns are the
 * rotate's, then the multiply-add's. */
int mb_rope_traffic(const int64_t *axis, mb_dtype dtype, const mb_variant *v, mb_launch_traffic *out);
uint64_t mb_rope_flops(const int64_t *axis);

/* Both directions have two products and one sum per output, only the sign
 * of one term moved, so they carry the same bounds; each row words its own
 * rationale (one per dtype, fp32 then fp16 then bf16). */
#define MB_ROPE_TOLERANCE(why_fp32, why_fp16, why_bf16) { \
	[MB_FP32] = {16 * F32_EPS, 4 * F32_EPS, why_fp32}, \
	[MB_FP16] = {16 * F32_EPS, F16_HALF_ULP + 4 * F32_EPS, why_fp16}, \
	[MB_BF16] = {16 * F32_EPS, BF16_HALF_ULP + 4 * F32_EPS, why_bf16}, \
}

#endif
