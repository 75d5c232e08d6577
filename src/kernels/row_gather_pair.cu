/* row_gather_pair: k_out[b, i, :] = k[b, idx[b, i], :] and
 * v_out[b, i, :] = v[b, idx[b, i], :].
 *
 * k, v [B,S,D] in the case dtype, idx [B,N] int32 with every index in
 * [0, S), k_out, v_out [B,N,D]. The fused kernel is gather.cuh's row copy
 * over two tensors, as row_gather.cu's is over one: the index is read once
 * per row for K and V both, the words are the widest that divide a row and
 * all four addresses, and an index outside [0, S) traps.
 */
#include "kernels/gather.cuh"
#include "kernels/launch.h"

enum { IN_K, IN_V, IN_IDX };
enum { OUT_K, OUT_V };

/* The fallback is row_gather's (src/kernels/row_gather.cu), twice. */
extern "C" MB_DECLARE_LAUNCH(mb_row_gather_fallback_launch);

template <typename W>
__global__ void __launch_bounds__(GATHER_THREADS) mb_row_gather_pair_fused_kernel(const W *__restrict__ k,
	const W *__restrict__ v, const int32_t *__restrict__ idx, W *__restrict__ k_out, W *__restrict__ v_out,
	int64_t rows, int64_t n, int32_t s, int row_words)
{
	gather_rows<W, 2>({k, v}, idx, {k_out, v_out}, rows, n, s, row_words);
}

template <typename T>
static int fused_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	const void *ptrs[4] = {in[IN_K], in[IN_V], out[OUT_K], out[OUT_V]};
	return gather_by_word(axis, sizeof(T), ptrs, 4, [&](auto word, int64_t rows, int row_words) {
		using W = decltype(word);
		return gather_launch<mb_row_gather_pair_fused_kernel<W>>(stream, rows, (const W *)in[IN_K],
			(const W *)in[IN_V], (const int32_t *)in[IN_IDX], (W *)out[OUT_K], (W *)out[OUT_V], rows,
			axis[AX_N], (int32_t)axis[AX_S], row_words);
	});
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
