/* fp32 C references and fp64 oracles, one pair per catalog row. Contracts:
 * see mb_reference_fn and mb_oracle_fn in kernels/catalog.h. */
#ifndef MB_REFERENCE_REFERENCE_H
#define MB_REFERENCE_REFERENCE_H

#include <stdint.h>

#define MB_DECLARE_REFERENCE(name) \
	void mb_ref_##name(const int64_t *axis, const float *const *in, float *const *out, \
		const int64_t *rows, int64_t n_rows); \
	void mb_oracle_##name(const int64_t *axis, const float *const *in, double *const *out, \
		const int64_t *rows, int64_t n_rows)

/* axes T, Hq, Hk, D; in q, k, cos, sin; out q_out, k_out */
MB_DECLARE_REFERENCE(rope_qk);
MB_DECLARE_REFERENCE(rope_qk_bwd); /* axes T, Hq, Hk, D; in dq_out, dk_out, cos, sin; out dq, dk */
MB_DECLARE_REFERENCE(mla_partial_rope); /* axes T, H, Dn, Dr; in q, k_nope, k_pe, cos, sin; out q_out, k_out */
/* axes T, H; in x, r, w; out y, h */
MB_DECLARE_REFERENCE(residual_rmsnorm);
MB_DECLARE_REFERENCE(residual_rmsnorm_bwd); /* axes T, H; in dy, dh_in, h, w; out dx, dw [1,H] */
/* Rows added later declare their pair here with MB_DECLARE_REFERENCE too. */
MB_DECLARE_REFERENCE(relu2); /* axes R, C; in x; out y = relu(x)^2 */
MB_DECLARE_REFERENCE(swiglu); /* axes T, F; in gu [T,2F]; out y = silu(g) * u */
MB_DECLARE_REFERENCE(row_gather); /* axes B, S, N, D; in src [B,S,D], idx [B,N]; out [B,N,D] */
MB_DECLARE_REFERENCE(row_gather_pair); /* axes B, S, N, D; in k, v [B,S,D], idx [B,N]; out k_out, v_out */
/* axes N, C; in x; out y = 2x (test rows) */
MB_DECLARE_REFERENCE(test_scale);

/* The RMSNorm epsilon every variant must use. */
#define MB_RMSNORM_EPS 1e-6

/* The row index of the i-th checked row. */
static inline int64_t mb_ref_row(const int64_t *rows, int64_t i)
{
	return rows ? rows[i] : i;
}

#endif
