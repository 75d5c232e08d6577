/* row_gather: out[b, i, :] = src[b, idx[b, i], :].
 *
 * src [B,S,D] in the case dtype, idx [B,N] int32 with every index in
 * [0, S), out [B,N,D]. The fused kernel is gather.cuh's row copy over one
 * tensor: raw words, bit for bit, and an index outside [0, S) traps.
 */
#include "kernels/gather.cuh"
#include "kernels/launch.h"

enum { IN_SRC, IN_IDX };
enum { OUT_ROWS };

template <typename W>
__global__ void __launch_bounds__(GATHER_THREADS) mb_row_gather_fused_kernel(const W *__restrict__ src,
	const int32_t *__restrict__ idx, W *__restrict__ out, int64_t rows, int64_t n, int32_t s,
	int row_words)
{
	gather_rows<W, 1>({src}, idx, {out}, rows, n, s, row_words);
}

template <typename T>
static int fused_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	const void *ptrs[2] = {in[IN_SRC], out[OUT_ROWS]};
	return gather_by_word(axis, sizeof(T), ptrs, 2, [&](auto word, int64_t rows, int row_words) {
		using W = decltype(word);
		return gather_launch<mb_row_gather_fused_kernel<W>>(stream, rows, (const W *)in[IN_SRC],
			(const int32_t *)in[IN_IDX], (W *)out[OUT_ROWS], rows, axis[AX_N], (int32_t)axis[AX_S], row_words);
	});
}

extern "C" MB_DECLARE_LAUNCH(mb_row_gather_fused_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fused_dispatch, (cudaStream_t)stream, axis, in, out);
}

/* The plain path, as torch.gather(src, 1, idx[..., None].expand(B, N, D))
 * runs it: one thread per output element, each reading its own index and
 * its own element. Like a framework, it indexes in 32 bits whenever the
 * tensors allow (I = uint32_t) and in 64 bits otherwise. */
template <typename T, typename I>
__global__ void mb_row_gather_fallback_kernel(const T *__restrict__ src, const int32_t *__restrict__ idx,
	T *__restrict__ out, I total, I n, int32_t s, I d)
{
	for (I e = (I)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (I)gridDim.x * blockDim.x) {
		const I row = e / d, col = e - row * d;
		const int32_t pick = idx[row];
		if ((uint32_t)pick >= (uint32_t)s)
			__trap();
		out[e] = src[((row / n) * (I)s + (I)pick) * d + col];
	}
}

template <typename T>
static int fallback_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	const int64_t total = axis[AX_B] * axis[AX_N] * axis[AX_D];
	const int64_t src_elems = axis[AX_B] * axis[AX_S] * axis[AX_D];
	const T *src = (const T *)in[IN_SRC];
	const int32_t *idx = (const int32_t *)in[IN_IDX];
	T *dst = (T *)out[OUT_ROWS];
	const unsigned blocks = mb_elemwise_blocks(total);
	if (axis[AX_S] > INT32_MAX)
		return (int)cudaErrorInvalidValue;
	/* 32-bit indexing needs every offset, and the stride loop's step past
	 * the last one, below 2^32 */
	const int64_t reach = (src_elems > total ? src_elems : total) + (int64_t)blocks * MB_ELEMWISE_THREADS;
	if (reach <= (int64_t)UINT32_MAX)
		mb_row_gather_fallback_kernel<T, uint32_t><<<blocks, MB_ELEMWISE_THREADS, 0, stream>>>(src, idx, dst,
			(uint32_t)total, (uint32_t)axis[AX_N], (int32_t)axis[AX_S], (uint32_t)axis[AX_D]);
	else
		mb_row_gather_fallback_kernel<T, int64_t><<<blocks, MB_ELEMWISE_THREADS, 0, stream>>>(src, idx, dst,
			total, axis[AX_N], (int32_t)axis[AX_S], axis[AX_D]);
	return (int)cudaGetLastError();
}

/* One launch; the pair row's fallback calls it once per tensor. */
extern "C" MB_DECLARE_LAUNCH(mb_row_gather_fallback_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fallback_dispatch, (cudaStream_t)stream, axis, in, out);
}
