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
 * runs it: each output element reads its own index, then its own source
 * element. Written as a framework's vectorized gather: a thread owns
 * MB_FLAT_VECS words W of the output (the widest that divides a row and
 * both addresses, 16 bytes when they allow: gather.cuh's
 * gather_widest_word), reading the index once per word (the expanded
 * index holds the same value across a row, and neighbouring words read the
 * same index word, which the cache serves), with every index load, then
 * every source load, issued before the first store; blocks that cover the
 * output once (vec.cuh's flat launch). Like a framework, it indexes in 32
 * bits whenever the tensors allow (I = uint32_t) and in 64 bits otherwise. */
template <typename W, typename I>
__global__ void __launch_bounds__(MB_FLAT_THREADS) mb_row_gather_fallback_kernel(const W *__restrict__ src,
	const int32_t *__restrict__ idx, W *__restrict__ out, I total, I n, int32_t s, I row_words)
{
	I row[MB_FLAT_VECS];
	int32_t pick[MB_FLAT_VECS];
	W v[MB_FLAT_VECS];
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const I e = mb_flat_index<I>(k);
		row[k] = e / row_words;
		if (e < total)
			pick[k] = idx[row[k]];
	}
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const I e = mb_flat_index<I>(k);
		if (e < total) {
			if ((uint32_t)pick[k] >= (uint32_t)s)
				__trap();
			v[k] = src[((row[k] / n) * (I)s + (I)pick[k]) * row_words + (e - row[k] * row_words)];
		}
	}
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const I e = mb_flat_index<I>(k);
		if (e < total)
			out[e] = v[k];
	}
}

template <typename T>
static int fallback_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	const void *ptrs[2] = {in[IN_SRC], out[OUT_ROWS]};
	return gather_by_word(axis, sizeof(T), ptrs, 2, [&](auto word, int64_t rows, int row_words) {
		using W = decltype(word);
		const int64_t total = rows * row_words, src_words = axis[AX_B] * axis[AX_S] * row_words;
		const unsigned blocks = mb_flat_blocks(total);
		const W *src = (const W *)in[IN_SRC];
		const int32_t *idx = (const int32_t *)in[IN_IDX];
		W *dst = (W *)out[OUT_ROWS];
		if (blocks == 0)
			return (int)cudaErrorInvalidValue;
		/* 32-bit indexing needs every word offset, and the flat
		 * launch's indices past the last one, below 2^32 */
		if (mb_index32_fits(src_words > total ? src_words : total))
			mb_row_gather_fallback_kernel<W, uint32_t><<<blocks, MB_FLAT_THREADS, 0, stream>>>(src, idx,
				dst, (uint32_t)total, (uint32_t)axis[AX_N], (int32_t)axis[AX_S], (uint32_t)row_words);
		else
			mb_row_gather_fallback_kernel<W, int64_t><<<blocks, MB_FLAT_THREADS, 0, stream>>>(src, idx, dst,
				total, axis[AX_N], (int32_t)axis[AX_S], (int64_t)row_words);
		return (int)cudaGetLastError();
	});
}

/* One launch; the pair row's fallback calls it once per tensor. */
extern "C" MB_DECLARE_LAUNCH(mb_row_gather_fallback_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fallback_dispatch, (cudaStream_t)stream, axis, in, out);
}
