/* relu2: squared ReLU, y = relu(x)^2 on x [R, C].
 *
 * Math in fp32, storage in the case dtype. Axes, in catalog order: R, C.
 * The op is elementwise, so both variants treat x and y as flat arrays of
 * R * C elements.
 */
#include <limits.h>

#include "kernels/launch.h"
#include "kernels/vec.cuh"

enum { AX_R, AX_C };

/* Fused: each thread loads FUSED_VECS_PER_THREAD 16-byte vectors before it
 * uses the first, so several loads are in flight per thread (64 bytes);
 * with 256-thread blocks that is far over what the memory system needs to
 * stay busy. One block covers FUSED_THREADS * FUSED_VECS_PER_THREAD
 * consecutive vectors, each unrolled step a coalesced 4 KB run. */
#define FUSED_THREADS 256
#define FUSED_VECS_PER_THREAD 4
#define FUSED_VECS_PER_BLOCK (FUSED_THREADS * FUSED_VECS_PER_THREAD)

__device__ __forceinline__ float relu2_f32(float v)
{
	/* relu then square; the comparison is the reference's (x > 0) */
	return v > 0.0f ? v * v : 0.0f;
}

/* Vectors first, then the n % VEC trailing elements, which block 0 takes
 * one per thread (fewer than VEC <= 8 of them). 64-bit indices: the largest
 * case has 470M elements. */
template <typename T, int VEC>
__global__ void __launch_bounds__(FUSED_THREADS) mb_relu2_fused_kernel(const T *__restrict__ x,
	T *__restrict__ y, int64_t n)
{
	const int64_t nvec = n / VEC;
	const int64_t first = (int64_t)blockIdx.x * FUSED_VECS_PER_BLOCK + threadIdx.x;
	float v[FUSED_VECS_PER_THREAD][VEC];
#pragma unroll
	for (int k = 0; k < FUSED_VECS_PER_THREAD; k++) {
		const int64_t i = first + (int64_t)k * FUSED_THREADS;
		if (i < nvec)
			mb_load_f32<T, VEC>(v[k], x + i * VEC);
	}
#pragma unroll
	for (int k = 0; k < FUSED_VECS_PER_THREAD; k++) {
		const int64_t i = first + (int64_t)k * FUSED_THREADS;
		if (i < nvec) {
#pragma unroll
			for (int e = 0; e < VEC; e++)
				v[k][e] = relu2_f32(v[k][e]);
			mb_store_f32<T, VEC>(y + i * VEC, v[k]);
		}
	}
	if (VEC > 1 && blockIdx.x == 0 && threadIdx.x < n - nvec * VEC) {
		const int64_t i = nvec * VEC + threadIdx.x;
		y[i] = mb_from_f32<T>(relu2_f32(mb_to_f32<T>(x[i])));
	}
}

template <typename T, int VEC>
static int fused_launch(cudaStream_t stream, const void *x, void *y, int64_t n)
{
	const int64_t nvec = n / VEC;
	/* at least one block: it also owns the scalar tail */
	int64_t blocks = (nvec + FUSED_VECS_PER_BLOCK - 1) / FUSED_VECS_PER_BLOCK;
	if (blocks < 1)
		blocks = 1;
	if (blocks > INT_MAX)
		return (int)cudaErrorInvalidValue;
	mb_relu2_fused_kernel<T, VEC><<<(unsigned)blocks, FUSED_THREADS, 0, stream>>>(
		(const T *)x, (T *)y, n);
	return (int)cudaGetLastError();
}

template <typename T>
static int fused_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	const int64_t n = axis[AX_R] * axis[AX_C];
	/* 16-byte accesses need 16-byte aligned bases; otherwise the same
	 * kernel runs one element per access rather than failing. */
	if (mb_aligned16(in[0]) && mb_aligned16(out[0]))
		return fused_launch<T, mb_vec16_elems<T>()>(stream, in[0], out[0], n);
	return fused_launch<T, 1>(stream, in[0], out[0], n);
}

extern "C" MB_DECLARE_LAUNCH(mb_relu2_fused_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fused_dispatch, (cudaStream_t)stream, axis, in, out);
}

/* ---- fallback: torch.relu, then .square(): two elementwise launches ---- */

/* Both steps are a framework's vectorized elementwise kernel (vec.cuh's
 * flat launch): 16-byte accesses when the bases allow them, MB_FLAT_VECS
 * loads in flight per thread, blocks that cover the data once; the n % VEC
 * trailing elements go to block 0, one per thread, as in the fused kernel. */

/* Fallback step 1: relu(x) stored in the case dtype. Exact: the result is
 * x or 0, both representable. */
template <typename T, int VEC>
__global__ void __launch_bounds__(MB_FLAT_THREADS) mb_relu2_fallback_relu_kernel(const T *__restrict__ x,
	T *__restrict__ r, int64_t n)
{
	const int64_t nvec = n / VEC;
	float v[MB_FLAT_VECS][VEC];
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const int64_t i = mb_flat_index<int64_t>(k);
		if (i < nvec)
			mb_load_f32<T, VEC>(v[k], x + i * VEC);
	}
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const int64_t i = mb_flat_index<int64_t>(k);
		if (i < nvec) {
#pragma unroll
			for (int e = 0; e < VEC; e++)
				v[k][e] = v[k][e] > 0.0f ? v[k][e] : 0.0f;
			mb_store_f32<T, VEC>(r + i * VEC, v[k]);
		}
	}
	if (VEC > 1 && blockIdx.x == 0 && threadIdx.x < n - nvec * VEC) {
		const int64_t i = nvec * VEC + threadIdx.x;
		const float t = mb_to_f32<T>(x[i]);
		r[i] = mb_from_f32<T>(t > 0.0f ? t : 0.0f);
	}
}

/* Fallback step 2: square the stored relu in place. Each thread reads its
 * vectors before it writes any, and no other thread touches them. */
template <typename T, int VEC>
__global__ void __launch_bounds__(MB_FLAT_THREADS) mb_relu2_fallback_square_kernel(T *__restrict__ y, int64_t n)
{
	const int64_t nvec = n / VEC;
	float v[MB_FLAT_VECS][VEC];
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const int64_t i = mb_flat_index<int64_t>(k);
		if (i < nvec)
			mb_load_f32<T, VEC>(v[k], y + i * VEC);
	}
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const int64_t i = mb_flat_index<int64_t>(k);
		if (i < nvec) {
#pragma unroll
			for (int e = 0; e < VEC; e++)
				v[k][e] = v[k][e] * v[k][e];
			mb_store_f32<T, VEC>(y + i * VEC, v[k]);
		}
	}
	if (VEC > 1 && blockIdx.x == 0 && threadIdx.x < n - nvec * VEC) {
		const int64_t i = nvec * VEC + threadIdx.x;
		const float t = mb_to_f32<T>(y[i]);
		y[i] = mb_from_f32<T>(t * t);
	}
}

template <typename T, int VEC>
static int fallback_launch(cudaStream_t stream, const T *x, T *y, int64_t n)
{
	const unsigned blocks = mb_flat_blocks(n / VEC);
	if (blocks == 0)
		return (int)cudaErrorInvalidValue;
	mb_relu2_fallback_relu_kernel<T, VEC><<<blocks, MB_FLAT_THREADS, 0, stream>>>(x, y, n);
	cudaError_t ce = cudaGetLastError();
	if (ce != cudaSuccess)
		return (int)ce;
	mb_relu2_fallback_square_kernel<T, VEC><<<blocks, MB_FLAT_THREADS, 0, stream>>>(y, n);
	return (int)cudaGetLastError();
}

template <typename T>
static int fallback_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	const int64_t n = axis[AX_R] * axis[AX_C];
	/* unaligned bases take the same kernels one element per access */
	if (mb_aligned16(in[0]) && mb_aligned16(out[0]))
		return fallback_launch<T, mb_vec16_elems<T>()>(stream, (const T *)in[0], (T *)out[0], n);
	return fallback_launch<T, 1>(stream, (const T *)in[0], (T *)out[0], n);
}

/* The plain path a framework runs for relu(x).square(): two elementwise
 * launches, the relu intermediate written and read back once. y doubles as
 * the temporary (same bytes as a separate buffer, no allocation in the
 * timed call). */
extern "C" MB_DECLARE_LAUNCH(mb_relu2_fallback_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fallback_dispatch, (cudaStream_t)stream, axis, in, out);
}
