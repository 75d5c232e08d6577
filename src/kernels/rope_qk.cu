/* rope_qk: rotate-half rotary embedding of Q and K.
 *
 * q[T,Hq,D], k[T,Hk,D], cos[T,D/2], sin[T,D/2] -> q_out, k_out, with, for
 * i < D/2:  out[i]       = x[i] * cos[i] - x[i + D/2] * sin[i]
 *           out[i + D/2] = x[i + D/2] * cos[i] + x[i] * sin[i]
 * Math in fp32, storage in the case dtype. Axes, in catalog order:
 * T, Hq, Hk, D. The bodies and launchers are rope.cuh's, shared with the
 * backward (rope_qk_bwd.cu); the kernels keep their names here, which the
 * catalog's kernel_patterns match.
 */
#include "kernels/rope.cuh"

template <typename T, int VEC>
__global__ void __launch_bounds__(ROPE_FUSED_THREADS) mb_rope_qk_fused_kernel(const T *__restrict__ q,
	const T *__restrict__ k, const T *__restrict__ cos_t, const T *__restrict__ sin_t,
	T *__restrict__ q_out, T *__restrict__ k_out, int hq, int hk, int d)
{
	rope_fused_body<ROPE_FWD, T, VEC>(q, k, cos_t, sin_t, q_out, k_out, hq, hk, d);
}

template <typename T>
static int fused_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	return rope_fused_dispatch<T>(mb_rope_qk_fused_kernel<T, mb_vec16_elems<T>()>, mb_rope_qk_fused_kernel<T, 1>,
		stream, axis, in, out);
}

extern "C" MB_DECLARE_LAUNCH(mb_rope_qk_fused_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fused_dispatch, (cudaStream_t)stream, axis, in, out);
}

/* Fallback step 1: out = rotate_half(x), i.e. (-x[D/2:], x[:D/2]). */
template <typename T, int VEC, typename IDX>
__global__ void __launch_bounds__(MB_FLAT_THREADS) mb_rope_rotate_half_kernel(const T *__restrict__ x,
	T *__restrict__ out, int64_t n, int64_t d)
{
	rope_rotate_half_body<ROPE_FWD, T, VEC, IDX>(x, out, (IDX)n, (IDX)d);
}

/* Fallback step 2: out = x * cos + out * sin, in place over the rotated
 * copy. */
template <typename T, int VEC, typename IDX>
__global__ void __launch_bounds__(MB_FLAT_THREADS) mb_rope_mul_add_kernel(const T *__restrict__ x,
	const T *__restrict__ cos_t, const T *__restrict__ sin_t, T *__restrict__ out, int64_t n, int64_t heads,
	int64_t d)
{
	rope_mul_add_body<T, VEC, IDX>(x, cos_t, sin_t, out, (IDX)n, (IDX)heads, (IDX)d);
}

template <typename T>
static int fallback_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	return rope_fallback_dispatch<T>(ROPE_FALLBACK_KERNELS(T, mb_rope_rotate_half_kernel, mb_rope_mul_add_kernel),
		stream, axis, in, out);
}

/* The plain path: Q and K separately, each as rotate-half then multiply-add:
 * four launches, the output written twice and read once more. */
extern "C" MB_DECLARE_LAUNCH(mb_rope_qk_fallback_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fallback_dispatch, (cudaStream_t)stream, axis, in, out);
}
