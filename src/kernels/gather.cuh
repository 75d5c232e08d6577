/* The row copy that row_gather.cu and row_gather_pair.cu share: out_t[b,
 * i, :] = src_t[b, idx[b, i], :] for NT tensors t driven by one index.
 *
 * Both rows take src [B,S,D] in the case dtype, idx [B,N] int32 with
 * every index in [0, S), out [B,N,D]; axes, in catalog order: B, S, N, D.
 * A copy needs no element type, only its width: the kernels move raw
 * words, so one instantiation per word width serves every dtype of that
 * size, and the output is bit for bit the input. An index outside [0, S)
 * traps, as a framework's device-side bounds assert does: it must never
 * turn into a read outside a source.
 *
 * Each .cu file keeps its own __global__ kernel (CUPTI matches the
 * catalog's kernel_patterns against its name) as a thin shell over
 * gather_rows, and launches it through gather_by_word and gather_launch. */
#ifndef MB_KERNELS_GATHER_CUH
#define MB_KERNELS_GATHER_CUH

#include <stdint.h>

#include "kernels/vec.cuh"

enum { AX_B, AX_S, AX_N, AX_D };

#define GATHER_THREADS 256
#define GATHER_WARPS (GATHER_THREADS / MB_WARP_THREADS)
/* Words of each tensor a lane loads before it stores any: 4 x 16 B per
 * tensor. One tensor at the 40 warps per SM that 48 registers allow puts
 * 80 KiB in flight per SM; K and V together at the 32 warps that 64
 * registers allow, 128 KiB. Either is at least twice the ~40 KB that
 * ~4.8 TB/s times ~1 us of latency asks of each of 132 SMs. */
#define GATHER_UNROLL 4

/* Call f(t, u, w) for every tensor t < NT and every word w = c + u * 32 +
 * lane, u < GATHER_UNROLL, of a chunk that starts at word c; only a row's
 * last chunk can run past its end (GUARD), so whole chunks carry no
 * bounds test. */
template <int NT, bool GUARD, typename F>
__device__ __forceinline__ void gather_each_word(int c, int lane, int row_words, F f)
{
#pragma unroll
	for (int u = 0; u < GATHER_UNROLL; u++) {
		const int w = c + u * MB_WARP_THREADS + lane;
		if (!GUARD || w < row_words) {
#pragma unroll
			for (int t = 0; t < NT; t++)
				f(t, u, w);
		}
	}
}

/* Copy words [c, c + GATHER_UNROLL * 32) of each of NT rows, lane by lane:
 * all NT * GATHER_UNROLL loads issued before the first store. */
template <typename W, int NT, bool GUARD>
__device__ __forceinline__ void gather_chunk(const W *const (&from)[NT], W *const (&to)[NT], int c, int lane,
	int row_words)
{
	W buf[NT][GATHER_UNROLL];
	gather_each_word<NT, GUARD>(c, lane, row_words, [&](int t, int u, int w) { buf[t][u] = from[t][w]; });
	gather_each_word<NT, GUARD>(c, lane, row_words, [&](int t, int u, int w) { to[t][w] = buf[t][u]; });
}

/* The body of a fused gather kernel. One warp per output row at a time,
 * the warps striding over the rows of a grid that fills the device once.
 * The index is read once per row, for all NT tensors, and the next row's
 * index is loaded before the current row is copied, so its latency hides
 * behind the copy; all lanes read the same index word, which the memory
 * system serves as one request. Each lane then moves the rows in W-sized
 * words. The kernel's __restrict__ parameters carry over: the pointers
 * here are only copies of them. */
template <typename W, int NT>
__device__ __forceinline__ void gather_rows(const W *const (&src)[NT], const int32_t *__restrict__ idx,
	W *const (&out)[NT], int64_t rows, int64_t n, int32_t s, int row_words)
{
	constexpr int chunk = GATHER_UNROLL * MB_WARP_THREADS;
	const int lane = threadIdx.x % MB_WARP_THREADS;
	const int64_t stride = (int64_t)gridDim.x * GATHER_WARPS;
	int64_t row = (int64_t)blockIdx.x * GATHER_WARPS + threadIdx.x / MB_WARP_THREADS;
	int32_t pick = row < rows ? idx[row] : 0;

	for (; row < rows; row += stride) {
		const int64_t next = row + stride;
		const int32_t pick_next = next < rows ? idx[next] : 0;
		if ((uint32_t)pick >= (uint32_t)s)
			__trap();
		const int64_t from_word = ((row / n) * s + pick) * row_words, to_word = row * row_words;
		const W *from[NT];
		W *to[NT];
#pragma unroll
		for (int t = 0; t < NT; t++) {
			from[t] = src[t] + from_word;
			to[t] = out[t] + to_word;
		}
		int c = 0;
		for (; c + chunk <= row_words; c += chunk)
			gather_chunk<W, NT, false>(from, to, c, lane, row_words);
		if (c < row_words)
			gather_chunk<W, NT, true>(from, to, c, lane, row_words);
		pick = pick_next;
	}
}

/* Launch Kernel on blocks that fill the device once: more would only
 * queue, and the stride loop covers any row count. The blocks per SM are
 * the kernel's own (registers decide them), asked once per kernel on the
 * first call, which the harness makes before any graph capture. */
template <auto Kernel, typename... Args>
static int gather_launch(cudaStream_t stream, int64_t rows, Args... args)
{
	static int per_sm = 0;
	int dev = 0, sms = 0;
	cudaError_t ce;
	if ((ce = cudaGetDevice(&dev)) != cudaSuccess ||
	    (ce = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess)
		return (int)ce;
	if (per_sm == 0 && (ce = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, Kernel, GATHER_THREADS,
		0)) != cudaSuccess)
		return (int)ce;
	int64_t blocks = (rows + GATHER_WARPS - 1) / GATHER_WARPS, cap = (int64_t)sms * (per_sm > 0 ? per_sm : 1);
	blocks = blocks < cap ? blocks : cap;
	Kernel<<<(unsigned)(blocks < 1 ? 1 : blocks), GATHER_THREADS, 0, stream>>>(args...);
	return (int)cudaGetLastError();
}

/* The widest word, 16 bytes down to one element, that divides a row and
 * the address of every tensor, so every word access is aligned; a row
 * width that is no multiple of 16 bytes takes narrower words rather than
 * a separate tail loop. */
static inline size_t gather_widest_word(size_t row_bytes, size_t elem_bytes, const void *const *ptrs, int n_ptrs)
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

template <typename W, typename Launch>
static int gather_in_words(Launch &launch, int64_t rows, size_t row_bytes)
{
	return launch(W{}, rows, (int)(row_bytes / sizeof(W)));
}

/* Call launch(W{}, rows, row_words) with the widest word W that every one
 * of the n_ptrs tensors allows; rows = B*N output rows of row_words words
 * each. Returns what launch returns, or cudaErrorInvalidValue for a shape
 * the kernels' int32 indices and word counts cannot hold. */
template <typename Launch>
static int gather_by_word(const int64_t *axis, size_t elem_bytes, const void *const *ptrs, int n_ptrs,
	Launch launch)
{
	const int64_t rows = axis[AX_B] * axis[AX_N];
	const size_t row_bytes = (size_t)axis[AX_D] * elem_bytes;
	if (axis[AX_S] > INT32_MAX || axis[AX_D] * (int64_t)elem_bytes > INT32_MAX)
		return (int)cudaErrorInvalidValue;
	switch (gather_widest_word(row_bytes, elem_bytes, ptrs, n_ptrs)) {
	case 16: return gather_in_words<uint4>(launch, rows, row_bytes);
	case 8: return gather_in_words<uint2>(launch, rows, row_bytes);
	case 4: return gather_in_words<uint32_t>(launch, rows, row_bytes);
	case 2: return gather_in_words<uint16_t>(launch, rows, row_bytes);
	default: return (int)cudaErrorInvalidValue;
	}
}

#endif
