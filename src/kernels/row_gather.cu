/* row_gather: out[b, i, :] = src[b, idx[b, i], :].
 *
 * src [B,S,D] in the case dtype, idx [B,N] int32 with every index in
 * [0, S), out [B,N,D]. Axes, in catalog order: B, S, N, D. A copy needs no
 * element type, only its width: both kernels move raw words, so one
 * instantiation per word width serves every dtype of that size, and the
 * output is bit for bit the input.
 *
 * An index outside [0, S) traps, as a framework's device-side bounds
 * assert does: it must never turn into a read outside src.
 */
#include "kernels/launch.h"
#include "kernels/vec.cuh"

enum { AX_B, AX_S, AX_N, AX_D };
enum { IN_SRC, IN_IDX };
enum { OUT_ROWS };

#define FUSED_THREADS 256
#define FUSED_WARPS (FUSED_THREADS / MB_WARP_THREADS)
/* Words each lane loads before it stores any: 4 x 16 B per lane at 40
 * warps per SM (48 registers) is 80 KiB in flight per SM, about twice the
 * ~40 KB that ~4.8 TB/s times ~1 us of latency asks of each of 132 SMs. */
#define FUSED_UNROLL 4

/* Copy words [c, c + FUSED_UNROLL * 32) of a row, lane by lane: every load
 * issued before the first store. Only a row's last chunk can run past its
 * end (GUARD), so whole chunks carry no bounds test between the loads. */
template <typename W, bool GUARD>
__device__ __forceinline__ void copy_chunk(const W *__restrict__ from, W *__restrict__ to, int c, int lane,
	int row_words)
{
	W buf[FUSED_UNROLL];
#pragma unroll
	for (int u = 0; u < FUSED_UNROLL; u++) {
		const int w = c + u * MB_WARP_THREADS + lane;
		if (!GUARD || w < row_words)
			buf[u] = from[w];
	}
#pragma unroll
	for (int u = 0; u < FUSED_UNROLL; u++) {
		const int w = c + u * MB_WARP_THREADS + lane;
		if (!GUARD || w < row_words)
			to[w] = buf[u];
	}
}

/* One warp per output row at a time, the warps striding over the rows of
 * a grid that fills the device once. The next row's index is loaded
 * before the current row is copied, so its latency hides behind the copy;
 * all lanes read the same index word, which the memory system serves as
 * one request. Each lane then moves the row in W-sized words. */
template <typename W>
__global__ void __launch_bounds__(FUSED_THREADS) mb_row_gather_fused_kernel(const W *__restrict__ src,
	const int32_t *__restrict__ idx, W *__restrict__ out, int64_t rows, int64_t n, int32_t s,
	int row_words)
{
	constexpr int chunk = FUSED_UNROLL * MB_WARP_THREADS;
	const int lane = threadIdx.x % MB_WARP_THREADS;
	const int64_t stride = (int64_t)gridDim.x * FUSED_WARPS;
	int64_t row = (int64_t)blockIdx.x * FUSED_WARPS + threadIdx.x / MB_WARP_THREADS;
	int32_t pick = row < rows ? idx[row] : 0;

	for (; row < rows; row += stride) {
		const int64_t next = row + stride;
		const int32_t pick_next = next < rows ? idx[next] : 0;
		if ((uint32_t)pick >= (uint32_t)s)
			__trap();
		const W *from = src + ((row / n) * s + pick) * row_words;
		W *to = out + row * row_words;
		int c = 0;
		for (; c + chunk <= row_words; c += chunk)
			copy_chunk<W, false>(from, to, c, lane, row_words);
		if (c < row_words)
			copy_chunk<W, true>(from, to, c, lane, row_words);
		pick = pick_next;
	}
}

/* Blocks that fill the device once: more would only queue, and the
 * stride loop covers any row count. The blocks per SM are the kernel's
 * own (registers decide them), asked once per instantiation on the first
 * call, which the harness makes before any graph capture. */
template <typename W>
static cudaError_t resident_blocks(unsigned *out, int64_t blocks_wanted)
{
	static int per_sm = 0;
	int dev = 0, sms = 0;
	cudaError_t ce;
	if ((ce = cudaGetDevice(&dev)) != cudaSuccess ||
	    (ce = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess)
		return ce;
	if (per_sm == 0 && (ce = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm,
		mb_row_gather_fused_kernel<W>, FUSED_THREADS, 0)) != cudaSuccess)
		return ce;
	int64_t cap = (int64_t)sms * (per_sm > 0 ? per_sm : 1);
	int64_t blocks = blocks_wanted < cap ? blocks_wanted : cap;
	*out = blocks < 1 ? 1u : (unsigned)blocks;
	return cudaSuccess;
}

template <typename W>
static int fused_launch(cudaStream_t stream, const int64_t *axis, size_t elem_bytes, const void *const *in,
	void *const *out)
{
	const int64_t rows = axis[AX_B] * axis[AX_N];
	const int row_words = (int)((size_t)axis[AX_D] * elem_bytes / sizeof(W));
	unsigned blocks = 0;
	cudaError_t ce = resident_blocks<W>(&blocks, (rows + FUSED_WARPS - 1) / FUSED_WARPS);
	if (ce != cudaSuccess)
		return (int)ce;
	mb_row_gather_fused_kernel<W><<<blocks, FUSED_THREADS, 0, stream>>>((const W *)in[IN_SRC],
		(const int32_t *)in[IN_IDX], (W *)out[OUT_ROWS], rows, axis[AX_N], (int32_t)axis[AX_S], row_words);
	return (int)cudaGetLastError();
}

/* The widest word, 16 bytes down to one element, that divides a row and
 * the address of every tensor, so every word access is aligned; a row
 * width that is no multiple of 16 bytes takes narrower words rather than
 * a separate tail loop. */
static size_t widest_word(size_t row_bytes, size_t elem_bytes, const void *const *ptrs, int n_ptrs)
{
	for (size_t w = MB_VEC_BYTES; w > elem_bytes; w /= 2) {
		bool ok = row_bytes % w == 0;
		for (int i = 0; ok && i < n_ptrs; i++)
			ok = (uintptr_t)ptrs[i] % w == 0;
		if (ok)
			return w;
	}
	return elem_bytes;
}

template <typename T>
static int fused_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	const void *ptrs[2] = {in[IN_SRC], out[OUT_ROWS]};
	if (axis[AX_S] > INT32_MAX || axis[AX_D] * (int64_t)sizeof(T) > INT32_MAX)
		return (int)cudaErrorInvalidValue; /* int32 indices and word counts */
	switch (widest_word((size_t)axis[AX_D] * sizeof(T), sizeof(T), ptrs, 2)) {
	case 16: return fused_launch<uint4>(stream, axis, sizeof(T), in, out);
	case 8: return fused_launch<uint2>(stream, axis, sizeof(T), in, out);
	case 4: return fused_launch<uint32_t>(stream, axis, sizeof(T), in, out);
	case 2: return fused_launch<uint16_t>(stream, axis, sizeof(T), in, out);
	default: return (int)cudaErrorInvalidValue;
	}
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
