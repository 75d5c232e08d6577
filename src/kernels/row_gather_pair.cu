/* row_gather_pair: k_out[b, i, :] = k[b, idx[b, i], :] and
 * v_out[b, i, :] = v[b, idx[b, i], :].
 *
 * k, v [B,S,D] in the case dtype, idx [B,N] int32 with every index in
 * [0, S), k_out, v_out [B,N,D]. Axes, in catalog order: B, S, N, D. As in
 * row_gather.cu, a copy moves raw words of the widest width that divides
 * a row and every address, so the outputs are bit for bit the inputs, and
 * an index outside [0, S) traps rather than reading outside k or v.
 */
#include "kernels/launch.h"
#include "kernels/vec.cuh"

enum { AX_B, AX_S, AX_N, AX_D };
enum { IN_K, IN_V, IN_IDX };
enum { OUT_K, OUT_V };

#define FUSED_THREADS 256
#define FUSED_WARPS (FUSED_THREADS / MB_WARP_THREADS)
/* Words of each tensor a lane loads before it stores any: K and V
 * together put 2 x 4 x 16 B in flight per lane, so at the 32 warps per SM
 * that 64 registers allow an SM has 128 KiB in flight, about three times
 * the ~40 KB that ~4.8 TB/s times ~1 us of latency asks of each of 132
 * SMs. */
#define FUSED_UNROLL 4

/* Copy words [c, c + FUSED_UNROLL * 32) of a K row and a V row, lane by
 * lane: all 2 * FUSED_UNROLL loads issued before the first store. Only a
 * row's last chunk can run past its end (GUARD). */
template <typename W, bool GUARD>
__device__ __forceinline__ void copy_chunk(const W *__restrict__ k, const W *__restrict__ v,
	W *__restrict__ k_out, W *__restrict__ v_out, int c, int lane, int row_words)
{
	W kb[FUSED_UNROLL], vb[FUSED_UNROLL];
#pragma unroll
	for (int u = 0; u < FUSED_UNROLL; u++) {
		const int w = c + u * MB_WARP_THREADS + lane;
		if (!GUARD || w < row_words) {
			kb[u] = k[w];
			vb[u] = v[w];
		}
	}
#pragma unroll
	for (int u = 0; u < FUSED_UNROLL; u++) {
		const int w = c + u * MB_WARP_THREADS + lane;
		if (!GUARD || w < row_words) {
			k_out[w] = kb[u];
			v_out[w] = vb[u];
		}
	}
}

/* One warp per output row at a time, striding over the rows of a grid
 * that fills the device once. The index is read once per row, for K and V
 * both, and the next row's index is loaded before the current row is
 * copied so that its latency hides behind the copy. */
template <typename W>
__global__ void __launch_bounds__(FUSED_THREADS) mb_row_gather_pair_fused_kernel(const W *__restrict__ k,
	const W *__restrict__ v, const int32_t *__restrict__ idx, W *__restrict__ k_out, W *__restrict__ v_out,
	int64_t rows, int64_t n, int32_t s, int row_words)
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
		const int64_t from = ((row / n) * s + pick) * row_words, to = row * row_words;
		int c = 0;
		for (; c + chunk <= row_words; c += chunk)
			copy_chunk<W, false>(k + from, v + from, k_out + to, v_out + to, c, lane, row_words);
		if (c < row_words)
			copy_chunk<W, true>(k + from, v + from, k_out + to, v_out + to, c, lane, row_words);
		pick = pick_next;
	}
}

template <typename W>
static int fused_launch(cudaStream_t stream, const int64_t *axis, size_t elem_bytes, const void *const *in,
	void *const *out)
{
	const int64_t rows = axis[AX_B] * axis[AX_N];
	const int row_words = (int)((size_t)axis[AX_D] * elem_bytes / sizeof(W));
	static int per_sm = 0;
	int dev = 0, sms = 0;
	cudaError_t ce;
	/* blocks that fill the device once: more would only queue, and the
	 * stride loop covers any row count; the blocks per SM are asked once
	 * per instantiation, on the first call, before any graph capture */
	if ((ce = cudaGetDevice(&dev)) != cudaSuccess ||
	    (ce = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess)
		return (int)ce;
	if (per_sm == 0 && (ce = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm,
		mb_row_gather_pair_fused_kernel<W>, FUSED_THREADS, 0)) != cudaSuccess)
		return (int)ce;
	int64_t blocks = (rows + FUSED_WARPS - 1) / FUSED_WARPS, cap = (int64_t)sms * (per_sm > 0 ? per_sm : 1);
	blocks = blocks < cap ? blocks : cap;
	mb_row_gather_pair_fused_kernel<W><<<(unsigned)(blocks < 1 ? 1 : blocks), FUSED_THREADS, 0, stream>>>(
		(const W *)in[IN_K], (const W *)in[IN_V], (const int32_t *)in[IN_IDX], (W *)out[OUT_K],
		(W *)out[OUT_V], rows, axis[AX_N], (int32_t)axis[AX_S], row_words);
	return (int)cudaGetLastError();
}

/* The widest word, 16 bytes down to one element, that divides a row and
 * the address of every tensor. */
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
	const void *ptrs[4] = {in[IN_K], in[IN_V], out[OUT_K], out[OUT_V]};
	if (axis[AX_S] > INT32_MAX || axis[AX_D] * (int64_t)sizeof(T) > INT32_MAX)
		return (int)cudaErrorInvalidValue; /* int32 indices and word counts */
	switch (widest_word((size_t)axis[AX_D] * sizeof(T), sizeof(T), ptrs, 4)) {
	case 16: return fused_launch<uint4>(stream, axis, sizeof(T), in, out);
	case 8: return fused_launch<uint2>(stream, axis, sizeof(T), in, out);
	case 4: return fused_launch<uint32_t>(stream, axis, sizeof(T), in, out);
	case 2: return fused_launch<uint16_t>(stream, axis, sizeof(T), in, out);
	default: return (int)cudaErrorInvalidValue;
	}
}

extern "C" MB_DECLARE_LAUNCH(mb_row_gather_pair_fused_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fused_dispatch, (cudaStream_t)stream, axis, in, out);
}

/* The plain path: row_gather's element-wise gather once for K, once for
 * V, each launch reading the index again. */
extern "C" MB_DECLARE_LAUNCH(mb_row_gather_pair_fallback_launch)
{
	const void *k_in[2] = {in[IN_K], in[IN_IDX]}, *v_in[2] = {in[IN_V], in[IN_IDX]};
	void *k_out[1] = {out[OUT_K]}, *v_out[1] = {out[OUT_V]};
	int rc = mb_row_gather_fallback_launch(stream, axis, dtype, k_in, k_out);
	return rc != 0 ? rc : mb_row_gather_fallback_launch(stream, axis, dtype, v_in, v_out);
}
