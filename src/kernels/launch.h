/* Launch entry points of the GPU variants, one pair per row, defined in the
 * row's .cu file and referenced by the catalog table (catalog.c). Each
 * follows mb_launch_fn: device pointers of the inputs then the outputs in
 * the row's tensor-spec order; returns 0 or a cudaError_t value. */
#ifndef MB_KERNELS_LAUNCH_H
#define MB_KERNELS_LAUNCH_H

#include <stdint.h>

#include "kernels/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MB_DECLARE_LAUNCH(fn) \
	int fn(void *stream, const int64_t *axis, mb_dtype dtype, const void *const *in, void *const *out)

/* rope_qk: in q[T,Hq,D], k[T,Hk,D], cos[T,D/2], sin[T,D/2]; out q_out, k_out. */
MB_DECLARE_LAUNCH(mb_rope_qk_fused_launch);
MB_DECLARE_LAUNCH(mb_rope_qk_fallback_launch);
/* residual_rmsnorm: in x[T,H], r[T,H], w[1,H]; out y[T,H], h[T,H]. */
MB_DECLARE_LAUNCH(mb_residual_rmsnorm_fused_launch);
MB_DECLARE_LAUNCH(mb_residual_rmsnorm_fallback_launch);
/* rope_qk_bwd: the inverse rotation; in dq_out[T,Hq,D], dk_out[T,Hk,D], cos, sin;
 * out dq, dk. */
MB_DECLARE_LAUNCH(mb_rope_qk_bwd_fused_launch);
MB_DECLARE_LAUNCH(mb_rope_qk_bwd_fallback_launch);
/* mla_partial_rope: in q[T,H,192], k_nope[T,H,128], k_pe[T,64], cos[T,32],
 * sin[T,32]; out q_out[T,H,192], k_out[T,H,192]. */
MB_DECLARE_LAUNCH(mb_mla_partial_rope_fused_launch);
MB_DECLARE_LAUNCH(mb_mla_partial_rope_fallback_launch);
/* row_gather: in src[B,S,D], idx[B,N] (int32); out[B,N,D]. */
MB_DECLARE_LAUNCH(mb_row_gather_fused_launch);
MB_DECLARE_LAUNCH(mb_row_gather_fallback_launch);
/* row_gather_pair: in k[B,S,D], v[B,S,D], idx[B,N]; out k_out, v_out. */
MB_DECLARE_LAUNCH(mb_row_gather_pair_fused_launch);
MB_DECLARE_LAUNCH(mb_row_gather_pair_fallback_launch);
/* residual_rmsnorm_bwd: see src/reference/residual_rmsnorm_bwd.c. */
MB_DECLARE_LAUNCH(mb_residual_rmsnorm_bwd_fused_launch);
MB_DECLARE_LAUNCH(mb_residual_rmsnorm_bwd_fallback_launch);
/* relu2: in x[R,C]; out y = relu(x)^2. */
MB_DECLARE_LAUNCH(mb_relu2_fused_launch);
MB_DECLARE_LAUNCH(mb_relu2_fallback_launch);
/* swiglu: in gu[T,2F] (g = first F columns, u = last F); out y[T,F]. */
MB_DECLARE_LAUNCH(mb_swiglu_fused_launch);
MB_DECLARE_LAUNCH(mb_swiglu_fallback_launch);

/* Test-only rows (y = 2x on in x[N,C], out y[N,C]), each breaking in one
 * way that the harness must catch: one wrong element, all zeros, an
 * illegal address, a kernel that never ends. */
MB_DECLARE_LAUNCH(mb_test_wrong_element_launch);
MB_DECLARE_LAUNCH(mb_test_zeros_launch);
MB_DECLARE_LAUNCH(mb_test_fault_launch);
MB_DECLARE_LAUNCH(mb_test_hang_launch);
MB_DECLARE_LAUNCH(mb_test_scale_launch); /* the correct one, as a control */

#ifdef __cplusplus
}
#endif

#endif
