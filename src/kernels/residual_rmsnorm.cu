/* residual_rmsnorm: h = x + r; y = h / sqrt(mean(h^2) + eps) * w.
 *
 * in x[T,H], r[T,H], w[1,H]; out y[T,H], h[T,H]. Math in fp32, storage in
 * the case dtype. Axes, in catalog order: T, H.
 */
#include <limits.h>

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
/* The fallback's norm: at most this many threads per row's block. */
#define NORM_MAX_THREADS 512

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

/* ---- fallback: the residual add, then a separate RMSNorm layer ------------ */

/* Fallback step 1: h = x + r, stored in the case dtype: a framework's
 * vectorized elementwise kernel (vec.cuh's flat launch) over the T*H
 * elements; the n % VEC trailing elements go to block 0, one per thread. */
template <typename T, int VEC>
__global__ void __launch_bounds__(MB_FLAT_THREADS) mb_residual_add_kernel(const T *__restrict__ x,
	const T *__restrict__ r, T *__restrict__ h, int64_t n)
{
	const int64_t nvec = n / VEC;
	mb_packed<T, VEC> a[MB_FLAT_VECS], b[MB_FLAT_VECS];
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const int64_t i = mb_flat_index<int64_t>(k);
		if (i < nvec) {
			a[k].load(x + i * VEC);
			b[k].load(r + i * VEC);
		}
	}
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const int64_t i = mb_flat_index<int64_t>(k);
		if (i < nvec) {
			float out[VEC];
#pragma unroll
			for (int e = 0; e < VEC; e++)
				out[e] = a[k].get(e) + b[k].get(e);
			mb_store_f32<T, VEC>(h + i * VEC, out);
		}
	}
	if (VEC > 1 && blockIdx.x == 0 && threadIdx.x < n - nvec * VEC) {
		const int64_t i = nvec * VEC + threadIdx.x;
		h[i] = mb_from_f32<T>(mb_to_f32<T>(x[i]) + mb_to_f32<T>(r[i]));
	}
}

/* Fallback step 2: RMSNorm of the stored (rounded) h, as a separate norm
 * layer would see it, written as a framework's norm kernel: one block per
 * token, each thread holding ITEMS vectors of h (vec.cuh: mb_row_items),
 * all loaded before the sum of squares, so h crosses memory once; the
 * block sum with warp shuffles. ITEMS == 0: a row too wide for registers,
 * read twice in a loop (the second pass from cache). Each thread sums at
 * most ITEMS * VEC <= 64 squares in sequence (H / NORM_MAX_THREADS when
 * looping), the chain the tolerance allows. */
template <typename T, int VEC, int ITEMS>
__global__ void __launch_bounds__(NORM_MAX_THREADS) mb_rmsnorm_kernel(const T *__restrict__ h,
	const T *__restrict__ w, T *__restrict__ y, int hidden)
{
	__shared__ float scratch[NORM_MAX_THREADS / MB_WARP_THREADS];
	const int64_t base = (int64_t)blockIdx.x * hidden;
	const int nvec = hidden / VEC;
	float ss = 0.0f;
	if constexpr (ITEMS > 0) {
		mb_packed<T, VEC> hv[ITEMS];
#pragma unroll
		for (int it = 0; it < ITEMS; it++) {
			const int j = threadIdx.x + it * blockDim.x;
			if (j < nvec)
				hv[it].load(h + base + (int64_t)j * VEC);
		}
#pragma unroll
		for (int it = 0; it < ITEMS; it++) {
			const int j = threadIdx.x + it * blockDim.x;
			if (j < nvec) {
#pragma unroll
				for (int e = 0; e < VEC; e++)
					ss += hv[it].get(e) * hv[it].get(e);
			}
		}
		const float inv = 1.0f / sqrtf(block_sum(ss, scratch) / (float)hidden + RMSNORM_EPS);
#pragma unroll
		for (int it = 0; it < ITEMS; it++) {
			const int j = threadIdx.x + it * blockDim.x;
			if (j < nvec) {
				mb_packed<T, VEC> wv;
				float out[VEC];
				wv.load(w + (int64_t)j * VEC);
#pragma unroll
				for (int e = 0; e < VEC; e++)
					out[e] = hv[it].get(e) * inv * wv.get(e);
				mb_store_f32<T, VEC>(y + base + (int64_t)j * VEC, out);
			}
		}
	} else {
		for (int j = threadIdx.x; j < nvec; j += blockDim.x) {
			mb_packed<T, VEC> hv;
			hv.load(h + base + (int64_t)j * VEC);
#pragma unroll
			for (int e = 0; e < VEC; e++)
				ss += hv.get(e) * hv.get(e);
		}
		const float inv = 1.0f / sqrtf(block_sum(ss, scratch) / (float)hidden + RMSNORM_EPS);
		for (int j = threadIdx.x; j < nvec; j += blockDim.x) {
			mb_packed<T, VEC> hv, wv;
			float out[VEC];
			hv.load(h + base + (int64_t)j * VEC);
			wv.load(w + (int64_t)j * VEC);
#pragma unroll
			for (int e = 0; e < VEC; e++)
				out[e] = hv.get(e) * inv * wv.get(e);
			mb_store_f32<T, VEC>(y + base + (int64_t)j * VEC, out);
		}
	}
}

template <typename T, int VEC>
static int fallback_launch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	const int64_t tokens = axis[AX_T], n = tokens * axis[AX_H];
	const unsigned add_blocks = mb_flat_blocks(n / VEC);
	unsigned threads = NORM_MAX_THREADS;
	if (add_blocks == 0 || axis[AX_H] > INT_MAX || tokens > INT_MAX)
		return (int)cudaErrorInvalidValue;
	/* the row kernel needs rows of whole vectors; the add does not */
	const int items = axis[AX_H] % VEC == 0 ? mb_row_items(axis[AX_H] / VEC, NORM_MAX_THREADS, &threads) : -1;
	mb_residual_add_kernel<T, VEC><<<add_blocks, MB_FLAT_THREADS, 0, stream>>>((const T *)in[0], (const T *)in[1],
		(T *)out[1], n);
	cudaError_t ce = cudaGetLastError();
	if (ce != cudaSuccess)
		return (int)ce;
	const T *h = (const T *)out[1], *w = (const T *)in[2];
	T *y = (T *)out[0];
	const int hidden = (int)axis[AX_H];
	switch (items) {
	case MB_ROW_ITEMS:
		mb_rmsnorm_kernel<T, VEC, MB_ROW_ITEMS><<<(unsigned)tokens, threads, 0, stream>>>(h, w, y, hidden);
		break;
	case MB_ROW_MAX_ITEMS:
		mb_rmsnorm_kernel<T, VEC, MB_ROW_MAX_ITEMS><<<(unsigned)tokens, threads, 0, stream>>>(h, w, y, hidden);
		break;
	case 0:
		mb_rmsnorm_kernel<T, VEC, 0><<<(unsigned)tokens, NORM_MAX_THREADS, 0, stream>>>(h, w, y, hidden);
		break;
	default:
		mb_rmsnorm_kernel<T, 1, 0><<<(unsigned)tokens, NORM_MAX_THREADS, 0, stream>>>(h, w, y, hidden);
		break;
	}
	return (int)cudaGetLastError();
}

template <typename T>
static int fallback_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	constexpr int vec = mb_vec16_elems<T>();
	if (mb_aligned16(in[0]) && mb_aligned16(in[1]) && mb_aligned16(in[2]) && mb_aligned16(out[0]) &&
		mb_aligned16(out[1]))
		return fallback_launch<T, vec>(stream, axis, in, out);
	return fallback_launch<T, 1>(stream, axis, in, out);
}

/* The plain path: an add launch writing h, then an RMSNorm launch reading it
 * back: two launches and one extra round trip of h through memory. */
extern "C" MB_DECLARE_LAUNCH(mb_residual_rmsnorm_fallback_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fallback_dispatch, (cudaStream_t)stream, axis, in, out);
}
