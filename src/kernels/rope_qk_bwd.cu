/* rope_qk_bwd: the backward of rotate-half RoPE on Q and K.
 *
 * The forward rotates each pair (x[i], x[i + D/2]) by the angle whose cosine
 * and sine are cos[i], sin[i]; its Jacobian is that rotation, so the
 * gradient is the transposed rotation (by minus the angle): for i < D/2,
 *   dx[i]       = dy[i] * cos[i] + dy[i + D/2] * sin[i]
 *   dx[i + D/2] = dy[i + D/2] * cos[i] - dy[i] * sin[i]
 * in dq_out[T,Hq,D], dk_out[T,Hk,D], cos[T,D/2], sin[T,D/2]; out dq, dk.
 * Math in fp32, storage in the case dtype. Axes, in catalog order:
 * T, Hq, Hk, D. That is the forward with sin negated: the bodies and
 * launchers are rope.cuh's, shared with rope_qk.cu; the kernels keep their
 * names here, which the catalog's kernel_patterns match.
 */
#include "kernels/rope.cuh"

template <typename T, int VEC>
__global__ void __launch_bounds__(ROPE_FUSED_THREADS) mb_rope_qk_bwd_fused_kernel(const T *__restrict__ dq_out,
	const T *__restrict__ dk_out, const T *__restrict__ cos_t, const T *__restrict__ sin_t,
	T *__restrict__ dq, T *__restrict__ dk, int hq, int hk, int d)
{
	rope_fused_body<ROPE_BWD, T, VEC>(dq_out, dk_out, cos_t, sin_t, dq, dk, hq, hk, d);
}

template <typename T>
static int fused_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	return rope_fused_dispatch<T>(mb_rope_qk_bwd_fused_kernel<T, mb_vec16_elems<T>()>,
		mb_rope_qk_bwd_fused_kernel<T, 1>, stream, axis, in, out);
}

extern "C" MB_DECLARE_LAUNCH(mb_rope_qk_bwd_fused_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fused_dispatch, (cudaStream_t)stream, axis, in, out);
}

/* Fallback step 1: out = rotate_half^T(g) = (g[D/2:], -g[:D/2]), the
 * backward of the forward's rotate_half (which is (-x[D/2:], x[:D/2])). */
template <typename T, int VEC, typename IDX>
__global__ void __launch_bounds__(MB_FLAT_THREADS)
	mb_rope_qk_bwd_fallback_rotate_half_t_kernel(const T *__restrict__ g, T *__restrict__ out, int64_t n, int64_t d)
{
	rope_rotate_half_body<ROPE_BWD, T, VEC, IDX>(g, out, (IDX)n, (IDX)d);
}

/* Fallback step 2: out = g * cos + out * sin, in place over the rotated
 * copy. */
template <typename T, int VEC, typename IDX>
__global__ void __launch_bounds__(MB_FLAT_THREADS) mb_rope_qk_bwd_fallback_mul_add_kernel(const T *__restrict__ g,
	const T *__restrict__ cos_t, const T *__restrict__ sin_t, T *__restrict__ out, int64_t n, int64_t heads,
	int64_t d)
{
	rope_mul_add_body<T, VEC, IDX>(g, cos_t, sin_t, out, (IDX)n, (IDX)heads, (IDX)d);
}

template <typename T>
static int fallback_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	return rope_fallback_dispatch<T>(ROPE_FALLBACK_KERNELS(T, mb_rope_qk_bwd_fallback_rotate_half_t_kernel,
						 mb_rope_qk_bwd_fallback_mul_add_kernel),
		stream, axis, in, out);
}

/* The plain path, shaped as the forward's fallback (what autograd runs
 * through x * cos + rotate_half(x) * sin, with the sin product moved after
 * the exact rotate): dQ and dK separately, each as the transposed
 * rotate-half into the output then a multiply-add over it: four launches,
 * the gradient written twice and read once more. */
extern "C" MB_DECLARE_LAUNCH(mb_rope_qk_bwd_fallback_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fallback_dispatch, (cudaStream_t)stream, axis, in, out);
}
