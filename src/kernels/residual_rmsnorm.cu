/* residual_rmsnorm: h = x + r; y = h / sqrt(mean(h^2) + eps) * w.
 *
 * in x[T,H], r[T,H], w[1,H]; out y[T,H], h[T,H]. Math in fp32, storage in
 * the case dtype. Axes, in catalog order: T, H.
 */
#include "kernels/launch.h"
#include "kernels/vec.cuh"

enum { AX_T, AX_H };

/* Must equal the reference's epsilon (src/reference/residual_rmsnorm.c). */
#define RMSNORM_EPS 1e-6f
/* Each fused thread keeps up to MAX_ITEMS vectors of h in registers, so H
 * is at most MAX_THREADS * MAX_ITEMS vectors (32768 bf16, 16384 fp32).
 * 512 threads leave 128 registers per thread: 1024 made the 8-item bf16
 * kernel spill. */
#define FUSED_MAX_THREADS 512
#define FUSED_MAX_ITEMS 8
#define NORM_THREADS 256

/* Sum over the block; every thread gets the total. `scratch` holds one
 * float per warp. */
__device__ __forceinline__ float block_sum(float v, float *scratch)
{
	const int lane = threadIdx.x % MB_WARP_THREADS, warp = threadIdx.x / MB_WARP_THREADS;
	const int warps = (blockDim.x + MB_WARP_THREADS - 1) / MB_WARP_THREADS;
#pragma unroll
	for (int off = MB_WARP_THREADS / 2; off > 0; off /= 2)
		v += __shfl_xor_sync(0xffffffffu, v, off);
	if (lane == 0)
		scratch[warp] = v;
	__syncthreads();
	v = lane < warps ? scratch[lane] : 0.0f;
#pragma unroll
	for (int off = MB_WARP_THREADS / 2; off > 0; off /= 2)
		v += __shfl_xor_sync(0xffffffffu, v, off);
	return v;
}

/* One block per token; h stays in registers in fp32 between the sum of
 * squares and the scaling, so y is computed from the unrounded h. */
template <typename T, int VEC, int ITEMS>
__global__ void __launch_bounds__(FUSED_MAX_THREADS) mb_residual_rmsnorm_fused_kernel(
	const T *__restrict__ x, const T *__restrict__ r, const T *__restrict__ w,
	T *__restrict__ y, T *__restrict__ h_out, int hidden)
{
	__shared__ float scratch[FUSED_MAX_THREADS / MB_WARP_THREADS];
	const int64_t base = (int64_t)blockIdx.x * hidden;
	const int nvec = hidden / VEC;
	float h[ITEMS][VEC];
	float ss = 0.0f;
#pragma unroll
	for (int it = 0; it < ITEMS; it++) {
		const int j = threadIdx.x + it * blockDim.x;
		if (j < nvec) {
			float a[VEC], b[VEC];
			mb_load_f32<T, VEC>(a, x + base + (int64_t)j * VEC);
			mb_load_f32<T, VEC>(b, r + base + (int64_t)j * VEC);
#pragma unroll
			for (int i = 0; i < VEC; i++) {
				h[it][i] = a[i] + b[i];
				ss += h[it][i] * h[it][i];
			}
			mb_store_f32<T, VEC>(h_out + base + (int64_t)j * VEC, h[it]);
		}
	}
	const float inv = 1.0f / sqrtf(block_sum(ss, scratch) / (float)hidden + RMSNORM_EPS);
#pragma unroll
	for (int it = 0; it < ITEMS; it++) {
		const int j = threadIdx.x + it * blockDim.x;
		if (j < nvec) {
			float wv[VEC], out[VEC];
			mb_load_f32<T, VEC>(wv, w + (int64_t)j * VEC);
#pragma unroll
			for (int i = 0; i < VEC; i++)
				out[i] = h[it][i] * inv * wv[i];
			mb_store_f32<T, VEC>(y + base + (int64_t)j * VEC, out);
		}
	}
}

static unsigned round_up_warp(int n)
{
	return (unsigned)((n + MB_WARP_THREADS - 1) / MB_WARP_THREADS * MB_WARP_THREADS);
}

template <typename T, int VEC, int ITEMS>
static int fused_items(cudaStream_t stream, const int64_t *axis, const void *const *in,
	void *const *out, unsigned threads)
{
	mb_residual_rmsnorm_fused_kernel<T, VEC, ITEMS><<<(unsigned)axis[AX_T], threads, 0, stream>>>(
		(const T *)in[0], (const T *)in[1], (const T *)in[2], (T *)out[0], (T *)out[1],
		(int)axis[AX_H]);
	return (int)cudaGetLastError();
}

template <typename T, int VEC>
static int fused_vec(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	const int nvec = (int)(axis[AX_H] / VEC);
	/* The fewest items per thread that fit one block; beyond the largest
	 * H does not fit in registers. */
	if (nvec <= FUSED_MAX_THREADS)
		return fused_items<T, VEC, 1>(stream, axis, in, out, round_up_warp(nvec));
	if (nvec <= 2 * FUSED_MAX_THREADS)
		return fused_items<T, VEC, 2>(stream, axis, in, out, round_up_warp((nvec + 1) / 2));
	if (nvec <= 4 * FUSED_MAX_THREADS)
		return fused_items<T, VEC, 4>(stream, axis, in, out, round_up_warp((nvec + 3) / 4));
	if (nvec <= FUSED_MAX_ITEMS * FUSED_MAX_THREADS)
		return fused_items<T, VEC, FUSED_MAX_ITEMS>(stream, axis, in, out,
			round_up_warp((nvec + FUSED_MAX_ITEMS - 1) / FUSED_MAX_ITEMS));
	return (int)cudaErrorInvalidValue;
}

template <typename T>
static int fused_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	constexpr int vec = mb_vec16_elems<T>();
	bool aligned = mb_aligned16(in[0]) && mb_aligned16(in[1]) && mb_aligned16(in[2]) &&
		mb_aligned16(out[0]) && mb_aligned16(out[1]);
	if (aligned && axis[AX_H] % vec == 0)
		return fused_vec<T, vec>(stream, axis, in, out);
	return fused_vec<T, 1>(stream, axis, in, out);
}

extern "C" MB_DECLARE_LAUNCH(mb_residual_rmsnorm_fused_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fused_dispatch, (cudaStream_t)stream, axis, in, out);
}

/* Fallback step 1: h = x + r, stored in the case dtype. */
template <typename T>
__global__ void mb_residual_add_kernel(const T *__restrict__ x, const T *__restrict__ r,
	T *__restrict__ h, int64_t n)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x)
		h[i] = mb_from_f32<T>(mb_to_f32<T>(x[i]) + mb_to_f32<T>(r[i]));
}

/* Fallback step 2: RMSNorm of the stored (rounded) h, as a separate norm
 * layer would see it. One block per token, scalar accesses. */
template <typename T>
__global__ void __launch_bounds__(NORM_THREADS) mb_rmsnorm_kernel(const T *__restrict__ h,
	const T *__restrict__ w, T *__restrict__ y, int hidden)
{
	__shared__ float scratch[NORM_THREADS / MB_WARP_THREADS];
	const int64_t base = (int64_t)blockIdx.x * hidden;
	float ss = 0.0f;
	for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
		const float v = mb_to_f32<T>(h[base + i]);
		ss += v * v;
	}
	const float inv = 1.0f / sqrtf(block_sum(ss, scratch) / (float)hidden + RMSNORM_EPS);
	for (int i = threadIdx.x; i < hidden; i += blockDim.x)
		y[base + i] = mb_from_f32<T>(mb_to_f32<T>(h[base + i]) * inv * mb_to_f32<T>(w[i]));
}

template <typename T>
static int fallback_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	const int64_t n = axis[AX_T] * axis[AX_H];
	mb_residual_add_kernel<T><<<mb_elemwise_blocks(n), MB_ELEMWISE_THREADS, 0, stream>>>(
		(const T *)in[0], (const T *)in[1], (T *)out[1], n);
	cudaError_t ce = cudaGetLastError();
	if (ce != cudaSuccess)
		return (int)ce;
	mb_rmsnorm_kernel<T><<<(unsigned)axis[AX_T], NORM_THREADS, 0, stream>>>(
		(const T *)out[1], (const T *)in[2], (T *)out[0], (int)axis[AX_H]);
	return (int)cudaGetLastError();
}

/* The plain path: an add launch writing h, then an RMSNorm launch reading it
 * back: two launches and one extra round trip of h through memory. */
extern "C" MB_DECLARE_LAUNCH(mb_residual_rmsnorm_fallback_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fallback_dispatch, (cudaStream_t)stream, axis, in, out);
}
