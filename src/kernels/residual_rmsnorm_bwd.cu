/* residual_rmsnorm_bwd: the backward of h = x + r; y = h * rstd * w.
 *   g = dy * w;  dx = dr = dh_in + rstd * (g - h * rstd^2 * mean(g * h))
 *   dw[j] = sum over tokens of dy[t,j] * h[t,j] * rstd[t]
 *
 * in dy[T,H], dh_in[T,H], h[T,H], w[1,H]; out dx[T,H], dw[1,H]. Math in
 * fp32, storage in the case dtype. Axes, in catalog order: T, H.
 *
 * Workspaces (the fused variant's fp32 dw partials; the fallback's fp32
 * rstd, dw partials and column-strip counters) come from a grow-only cache
 * per process, allocated with cudaMalloc on the first call of a shape: the
 * harness makes that first call outside any graph capture, and every later
 * call of the same shape, captured or not, reuses the buffer. Growing frees the old buffer with cudaFree, which
 * waits for the device, so no queued kernel loses its buffer. The cache
 * lives until the process exits (each row runs in its own child).
 */
#include <limits.h>

#include "kernels/launch.h"
#include "kernels/vec.cuh"

enum { AX_T, AX_H };
enum { IN_DY, IN_DH, IN_H, IN_W };
enum { OUT_DX, OUT_DW };

/* Must equal the reference's epsilon (src/reference/reference.h). */
#define RMSNORM_EPS 1e-6f

/* Fused: one block walks tokens blockIdx.x, + gridDim.x, ...; its threads
 * own fixed columns, so dw accumulates in registers across tokens. A
 * thread holds ITEMS vectors of VEC elements of each of dy, dh_in and h
 * (packed, in the storage type) plus the same count of fp32 dw: at most
 * FUSED_MAX_ELEMS per tensor with 512 threads, so H <= 8192 in every dtype
 * (bf16 with 32 elements per thread spilled: 128 registers, 44 bytes). */
#define FUSED_MAX_THREADS 512
#define FUSED_MAX_ELEMS 16
/* The next token's loads are issued before this token's reduction while
 * the tiles stay this small (two tiles in registers); larger tiles load at
 * the top of each token instead, to stay clear of spills. */
#define PREFETCH_MAX_TILE_BYTES (2 * MB_VEC_BYTES)
/* Each block sums at least this many tokens, so the fp32 partials (written
 * then read once: 8 bytes per column per block) stay under 1/32 of the
 * 8 bytes per column per token that bf16 dy, dh_in, h and dx move. */
#define FUSED_MIN_TOKENS_PER_BLOCK 32

/* Finalize: FIN_COLS threads across columns (V floats each) times FIN_ROWS
 * threads down the partials, then a tree over FIN_ROWS in shared memory. */
#define FIN_COLS 8
#define FIN_ROWS 32
#define FIN_VEC 4

/* Fallback: launches written as a framework's own. rstd and dx: one block
 * per token holding its vectors in registers (vec.cuh: mb_row_items), at
 * most NORM_MAX_THREADS threads. dw: a column sum in one launch, shaped as
 * a framework's reduction over the leading dimension: COLSUM_COLS threads
 * across column vectors times COLSUM_ROWS down the tokens, each with
 * COLSUM_ACCS independent accumulators (their loads in flight together),
 * the tokens split over grid.y so that the grid fills the device once;
 * each block writes an fp32 partial, and the last block of a column strip
 * to finish (a counter per strip) sums the strip's partials and writes dw.
 * A split sums at most COLSUM_SPLIT_MAX_TOKENS tokens, so the longest
 * chain of sequential adds is that over ROWS * ACCS (64), plus the fold
 * (2), the tree over ROWS (4) and the sum over at most COLSUM_MAX_SPLITS
 * splits: under the 512 the dw tolerance allows. */
#define NORM_MAX_THREADS 512
#define COLSUM_COLS 32
#define COLSUM_ROWS 16
#define COLSUM_ACCS 4
#define COLSUM_THREADS (COLSUM_COLS * COLSUM_ROWS)
#define COLSUM_SPLIT_MAX_TOKENS 4096
#define COLSUM_MAX_SPLITS 128
/* the colsum kernel folds its accumulators as (a0 + a1) + (a2 + a3) */
static_assert(COLSUM_ACCS == 4, "mb_rmsnorm_bwd_dw_colsum_kernel folds exactly four accumulators");

#define MAX_WARPS (FUSED_MAX_THREADS / MB_WARP_THREADS)

/* ---- workspace cache ---------------------------------------------------- */

/* WS_COLSUM_DONE, the fallback's counters of finished blocks per column
 * strip, starts zeroed (a memset on the stream, with the allocation, on
 * the first call of a shape), and every call leaves it zeroed: the last
 * block of a strip resets its counter. */
enum { WS_DW_PARTIALS, WS_RSTD, WS_COLSUM_PARTIALS, WS_COLSUM_DONE, WS_COUNT };

static struct {
	void *ptr;
	size_t bytes;
} workspace_cache[WS_COUNT];

static cudaError_t workspace(int slot, size_t bytes, void **out)
{
	cudaError_t ce = cudaSuccess;

	if (bytes > workspace_cache[slot].bytes) {
		if (workspace_cache[slot].ptr != NULL)
			cudaFree(workspace_cache[slot].ptr);
		workspace_cache[slot].ptr = NULL;
		workspace_cache[slot].bytes = 0;
		if ((ce = cudaMalloc(&workspace_cache[slot].ptr, bytes)) != cudaSuccess)
			return ce;
		workspace_cache[slot].bytes = bytes;
	}
	*out = workspace_cache[slot].ptr;
	return ce;
}

/* A workspace whose bytes start at zero, for counters that every call
 * returns to zero. */
static cudaError_t workspace_zeroed(int slot, size_t bytes, cudaStream_t stream, void **out)
{
	const bool fresh = bytes > workspace_cache[slot].bytes;
	cudaError_t ce = workspace(slot, bytes, out);

	if (ce == cudaSuccess && fresh)
		ce = cudaMemsetAsync(*out, 0, workspace_cache[slot].bytes, stream);
	return ce;
}

/* ---- block reductions ----------------------------------------------------- */

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
	for (int off = MB_WARP_THREADS / 2; off > 0; off /= 2)
		v += __shfl_xor_sync(0xffffffffu, v, off);
	return v;
}

/* Two sums over the block at once; every thread gets both. `scratch` (one
 * float2 per warp) must not be written again until every thread has passed
 * the next barrier: callers alternate two of them. */
__device__ __forceinline__ float2 block_sum2(float2 v, float2 *scratch)
{
	const int lane = threadIdx.x % MB_WARP_THREADS, warp = threadIdx.x / MB_WARP_THREADS;
	const int warps = (blockDim.x + MB_WARP_THREADS - 1) / MB_WARP_THREADS;

	v.x = warp_sum(v.x);
	v.y = warp_sum(v.y);
	if (lane == 0)
		scratch[warp] = v;
	__syncthreads();
	v = lane < warps ? scratch[lane] : make_float2(0.0f, 0.0f);
	v.x = warp_sum(v.x);
	v.y = warp_sum(v.y);
	return v;
}

/* One sum over the block, for kernels that reduce once per block. */
__device__ __forceinline__ float block_sum1(float v, float *scratch)
{
	const int lane = threadIdx.x % MB_WARP_THREADS, warp = threadIdx.x / MB_WARP_THREADS;
	const int warps = (blockDim.x + MB_WARP_THREADS - 1) / MB_WARP_THREADS;

	v = warp_sum(v);
	if (lane == 0)
		scratch[warp] = v;
	__syncthreads();
	v = lane < warps ? scratch[lane] : 0.0f;
	return warp_sum(v);
}

/* ---- fused ----------------------------------------------------------------- */

/* One token's slice of the three [T,H] inputs a thread owns, as stored. */
template <typename T, int VEC, int ITEMS> struct bwd_tile {
	mb_vec<T, VEC> dy[ITEMS], dh[ITEMS], h[ITEMS];
};

template <typename T, int VEC, int ITEMS>
__device__ __forceinline__ void load_tile(bwd_tile<T, VEC, ITEMS> &tile, const T *__restrict__ dy,
	const T *__restrict__ dh_in, const T *__restrict__ h, int64_t base, int nvec)
{
	typedef mb_vec<T, VEC> vec;
#pragma unroll
	for (int it = 0; it < ITEMS; it++) {
		const int j = threadIdx.x + it * blockDim.x;
		if (j < nvec) {
			const int64_t at = base + (int64_t)j * VEC;
			tile.dy[it] = *reinterpret_cast<const vec *>(dy + at);
			tile.h[it] = *reinterpret_cast<const vec *>(h + at);
			tile.dh[it] = *reinterpret_cast<const vec *>(dh_in + at);
		}
	}
}

template <typename T, int VEC, int ITEMS> __host__ __device__ constexpr bool prefetches()
{
	return VEC > 1 && ITEMS * VEC * (int)sizeof(T) <= PREFETCH_MAX_TILE_BYTES;
}

/* dx for every token of the block's stride, and the block's fp32 dw
 * partial over those tokens into dw_part[blockIdx.x, :]. dx comes from the
 * unrounded fp32 g and rstd, in one pass over the token's inputs. */
template <typename T, int VEC, int ITEMS>
__global__ void __launch_bounds__(FUSED_MAX_THREADS) mb_residual_rmsnorm_bwd_fused_kernel(
	const T *__restrict__ dy, const T *__restrict__ dh_in, const T *__restrict__ h,
	const T *__restrict__ w, T *__restrict__ dx, float *__restrict__ dw_part, int64_t tokens, int hidden)
{
	__shared__ float2 scratch[2][MAX_WARPS];
	constexpr bool prefetch = prefetches<T, VEC, ITEMS>();
	const int nvec = hidden / VEC;
	const int64_t stride = gridDim.x;
	float dw_acc[ITEMS][VEC];
	bwd_tile<T, VEC, ITEMS> cur;
	int parity = 0;

#pragma unroll
	for (int it = 0; it < ITEMS; it++) {
#pragma unroll
		for (int i = 0; i < VEC; i++)
			dw_acc[it][i] = 0.0f;
	}
	if (prefetch && blockIdx.x < tokens)
		load_tile(cur, dy, dh_in, h, (int64_t)blockIdx.x * hidden, nvec);
	for (int64_t t = blockIdx.x; t < tokens; t += stride) {
		const int64_t base = t * hidden;
		bwd_tile<T, VEC, ITEMS> next;
		if constexpr (prefetch) {
			if (t + stride < tokens)
				load_tile(next, dy, dh_in, h, base + stride * hidden, nvec);
		} else {
			load_tile(cur, dy, dh_in, h, base, nvec);
		}
		float2 sums = make_float2(0.0f, 0.0f); /* sum of h^2, sum of g*h */
#pragma unroll
		for (int it = 0; it < ITEMS; it++) {
			const int j = threadIdx.x + it * blockDim.x;
			if (j < nvec) {
				float wv[VEC];
				mb_load_f32<T, VEC>(wv, w + (int64_t)j * VEC);
#pragma unroll
				for (int i = 0; i < VEC; i++) {
					const float hv = mb_to_f32<T>(cur.h[it].v[i]);
					sums.x += hv * hv;
					sums.y += mb_to_f32<T>(cur.dy[it].v[i]) * wv[i] * hv;
				}
			}
		}
		sums = block_sum2(sums, scratch[parity]);
		parity ^= 1;
		const float rstd = 1.0f / sqrtf(sums.x / (float)hidden + RMSNORM_EPS);
		const float c = rstd * rstd * (sums.y / (float)hidden);
#pragma unroll
		for (int it = 0; it < ITEMS; it++) {
			const int j = threadIdx.x + it * blockDim.x;
			if (j < nvec) {
				float wv[VEC], out[VEC];
				mb_load_f32<T, VEC>(wv, w + (int64_t)j * VEC);
#pragma unroll
				for (int i = 0; i < VEC; i++) {
					const float hv = mb_to_f32<T>(cur.h[it].v[i]);
					const float dyv = mb_to_f32<T>(cur.dy[it].v[i]);
					out[i] = mb_to_f32<T>(cur.dh[it].v[i]) + rstd * (dyv * wv[i] - hv * c);
					dw_acc[it][i] += dyv * hv * rstd;
				}
				mb_store_f32<T, VEC>(dx + base + (int64_t)j * VEC, out);
			}
		}
		if constexpr (prefetch)
			cur = next;
	}
#pragma unroll
	for (int it = 0; it < ITEMS; it++) {
		const int j = threadIdx.x + it * blockDim.x;
		if (j < nvec)
			mb_store_f32<float, VEC>(dw_part + (int64_t)blockIdx.x * hidden + (int64_t)j * VEC, dw_acc[it]);
	}
}

/* dw[j] = sum of dw_part[p, j] over the parts; V columns per thread. */
template <typename T, int V>
__global__ void __launch_bounds__(FIN_COLS *FIN_ROWS) mb_residual_rmsnorm_bwd_dw_finalize_kernel(
	const float *__restrict__ dw_part, int parts, int hidden, T *__restrict__ dw)
{
	__shared__ mb_vec<float, V> sums[FIN_ROWS][FIN_COLS];
	const int tx = threadIdx.x % FIN_COLS, ty = threadIdx.x / FIN_COLS;
	const int col = (blockIdx.x * FIN_COLS + tx) * V;
	mb_vec<float, V> acc;

#pragma unroll
	for (int i = 0; i < V; i++)
		acc.v[i] = 0.0f;
	if (col < hidden) {
#pragma unroll 4
		for (int p = ty; p < parts; p += FIN_ROWS) {
			const mb_vec<float, V> v =
				*reinterpret_cast<const mb_vec<float, V> *>(dw_part + (int64_t)p * hidden + col);
#pragma unroll
			for (int i = 0; i < V; i++)
				acc.v[i] += v.v[i];
		}
	}
	sums[ty][tx] = acc;
	__syncthreads();
#pragma unroll
	for (int half = FIN_ROWS / 2; half > 0; half /= 2) {
		if (ty < half) {
#pragma unroll
			for (int i = 0; i < V; i++)
				sums[ty][tx].v[i] += sums[ty + half][tx].v[i];
		}
		__syncthreads();
	}
	if (ty == 0 && col < hidden)
		mb_store_f32<T, V>(dw + col, sums[0][tx].v);
}

static unsigned round_up_warp(int n)
{
	return (unsigned)((n + MB_WARP_THREADS - 1) / MB_WARP_THREADS * MB_WARP_THREADS);
}

template <typename T>
static int finalize(cudaStream_t stream, const float *dw_part, int parts, int hidden, T *dw)
{
	if (hidden % FIN_VEC == 0 && mb_aligned16(dw)) {
		const int cols_per_block = FIN_COLS * FIN_VEC;
		mb_residual_rmsnorm_bwd_dw_finalize_kernel<T, FIN_VEC>
			<<<(unsigned)((hidden + cols_per_block - 1) / cols_per_block), FIN_COLS * FIN_ROWS, 0, stream>>>(
				dw_part, parts, hidden, dw);
	} else {
		mb_residual_rmsnorm_bwd_dw_finalize_kernel<T, 1>
			<<<(unsigned)((hidden + FIN_COLS - 1) / FIN_COLS), FIN_COLS * FIN_ROWS, 0, stream>>>(
				dw_part, parts, hidden, dw);
	}
	return (int)cudaGetLastError();
}

template <typename T, int VEC, int ITEMS>
static int fused_items(cudaStream_t stream, const int64_t *axis, const void *const *in,
	void *const *out, unsigned threads)
{
	const int64_t tokens = axis[AX_T];
	const int hidden = (int)axis[AX_H];
	int device = 0, sms = 0, per_sm = 0;
	cudaError_t ce;
	void *part = NULL;

	auto kernel = mb_residual_rmsnorm_bwd_fused_kernel<T, VEC, ITEMS>;
	if ((ce = cudaGetDevice(&device)) != cudaSuccess ||
		(ce = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess ||
		(ce = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, (int)threads, 0)) != cudaSuccess)
		return (int)ce;
	/* every resident block slot busy, but no block with fewer tokens than
	 * makes its partial cheap */
	int64_t blocks = (int64_t)sms * (per_sm > 0 ? per_sm : 1);
	const int64_t by_tokens = (tokens + FUSED_MIN_TOKENS_PER_BLOCK - 1) / FUSED_MIN_TOKENS_PER_BLOCK;
	if (blocks > by_tokens)
		blocks = by_tokens;
	if ((ce = workspace(WS_DW_PARTIALS, (size_t)blocks * (size_t)hidden * sizeof(float), &part)) != cudaSuccess)
		return (int)ce;
	kernel<<<(unsigned)blocks, threads, 0, stream>>>((const T *)in[IN_DY], (const T *)in[IN_DH],
		(const T *)in[IN_H], (const T *)in[IN_W], (T *)out[OUT_DX], (float *)part, tokens, hidden);
	if ((ce = cudaGetLastError()) != cudaSuccess)
		return (int)ce;
	return finalize<T>(stream, (const float *)part, (int)blocks, hidden, (T *)out[OUT_DW]);
}

/* The fewest items per thread that fit one block of FUSED_MAX_THREADS;
 * beyond MAX_ITEMS the row does not fit in registers (cudaErrorInvalidValue:
 * the case is skipped, not wrong). */
template <typename T, int VEC, int ITEMS, int MAX_ITEMS>
static int fused_pick(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	const int nvec = (int)(axis[AX_H] / VEC);
	if (nvec <= ITEMS * FUSED_MAX_THREADS)
		return fused_items<T, VEC, ITEMS>(stream, axis, in, out, round_up_warp((nvec + ITEMS - 1) / ITEMS));
	if constexpr (ITEMS < MAX_ITEMS)
		return fused_pick<T, VEC, ITEMS * 2, MAX_ITEMS>(stream, axis, in, out);
	return (int)cudaErrorInvalidValue;
}

template <typename T>
static int fused_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	constexpr int vec = mb_vec16_elems<T>();
	const bool aligned = mb_aligned16(in[IN_DY]) && mb_aligned16(in[IN_DH]) && mb_aligned16(in[IN_H]) &&
		mb_aligned16(in[IN_W]) && mb_aligned16(out[OUT_DX]);

	if (axis[AX_H] > INT_MAX || axis[AX_T] <= 0)
		return (int)cudaErrorInvalidValue;
	if (aligned && axis[AX_H] % vec == 0)
		return fused_pick<T, vec, 1, FUSED_MAX_ELEMS / vec>(stream, axis, in, out);
	return fused_pick<T, 1, 1, FUSED_MAX_ELEMS>(stream, axis, in, out);
}

/* Two launches: the fused pass (dx, dw partials), then the partials' sum. */
extern "C" MB_DECLARE_LAUNCH(mb_residual_rmsnorm_bwd_fused_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fused_dispatch, (cudaStream_t)stream, axis, in, out);
}

/* ---- fallback -------------------------------------------------------------- */

/* Step 1: rstd[t] = 1 / sqrt(mean(h^2) + eps), recomputed from the saved h
 * and kept in fp32, as a norm backward's helper would: one block per
 * token, its ITEMS vectors of h loaded before the sum (ITEMS == 0: a row
 * too wide for that, summed in a loop). */
template <typename T, int VEC, int ITEMS>
__global__ void __launch_bounds__(NORM_MAX_THREADS) mb_rmsnorm_bwd_rstd_kernel(const T *__restrict__ h,
	float *__restrict__ rstd, int hidden)
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
	} else {
		for (int j = threadIdx.x; j < nvec; j += blockDim.x) {
			mb_packed<T, VEC> hv;
			hv.load(h + base + (int64_t)j * VEC);
#pragma unroll
			for (int e = 0; e < VEC; e++)
				ss += hv.get(e) * hv.get(e);
		}
	}
	ss = block_sum1(ss, scratch);
	if (threadIdx.x == 0)
		rstd[blockIdx.x] = 1.0f / sqrtf(ss / (float)hidden + RMSNORM_EPS);
}

/* Step 2: dx per token from rstd read back: one reduction of g*h, then the
 * elementwise formula. One block per token, each thread holding its ITEMS
 * vectors of dy, h, dh_in and w from before the reduction to the store, so
 * the token's inputs cross memory once (ITEMS == 0: a row too wide for
 * registers, read in two loops, the second from cache). */
template <typename T, int VEC, int ITEMS>
__global__ void __launch_bounds__(NORM_MAX_THREADS) mb_rmsnorm_bwd_dx_kernel(const T *__restrict__ dy,
	const T *__restrict__ dh_in, const T *__restrict__ h, const T *__restrict__ w,
	const float *__restrict__ rstd, T *__restrict__ dx, int hidden)
{
	__shared__ float scratch[NORM_MAX_THREADS / MB_WARP_THREADS];
	const int64_t base = (int64_t)blockIdx.x * hidden;
	const int nvec = hidden / VEC;
	const float r = rstd[blockIdx.x];
	float sgh = 0.0f;

	if constexpr (ITEMS > 0) {
		mb_packed<T, VEC> dyv[ITEMS], hv[ITEMS], dhv[ITEMS], wv[ITEMS];
#pragma unroll
		for (int it = 0; it < ITEMS; it++) {
			const int j = threadIdx.x + it * blockDim.x;
			if (j < nvec) {
				dyv[it].load(dy + base + (int64_t)j * VEC);
				hv[it].load(h + base + (int64_t)j * VEC);
				dhv[it].load(dh_in + base + (int64_t)j * VEC);
				wv[it].load(w + (int64_t)j * VEC);
			}
		}
#pragma unroll
		for (int it = 0; it < ITEMS; it++) {
			const int j = threadIdx.x + it * blockDim.x;
			if (j < nvec) {
#pragma unroll
				for (int e = 0; e < VEC; e++)
					sgh += dyv[it].get(e) * wv[it].get(e) * hv[it].get(e);
			}
		}
		sgh = block_sum1(sgh, scratch);
		const float c = r * r * (sgh / (float)hidden);
#pragma unroll
		for (int it = 0; it < ITEMS; it++) {
			const int j = threadIdx.x + it * blockDim.x;
			if (j < nvec) {
				float out[VEC];
#pragma unroll
				for (int e = 0; e < VEC; e++) {
					const float g = dyv[it].get(e) * wv[it].get(e);
					out[e] = dhv[it].get(e) + r * (g - hv[it].get(e) * c);
				}
				mb_store_f32<T, VEC>(dx + base + (int64_t)j * VEC, out);
			}
		}
	} else {
		for (int j = threadIdx.x; j < nvec; j += blockDim.x) {
			mb_packed<T, VEC> dyv, hv, wv;
			dyv.load(dy + base + (int64_t)j * VEC);
			hv.load(h + base + (int64_t)j * VEC);
			wv.load(w + (int64_t)j * VEC);
#pragma unroll
			for (int e = 0; e < VEC; e++)
				sgh += dyv.get(e) * wv.get(e) * hv.get(e);
		}
		sgh = block_sum1(sgh, scratch);
		const float c = r * r * (sgh / (float)hidden);
		for (int j = threadIdx.x; j < nvec; j += blockDim.x) {
			mb_packed<T, VEC> dyv, hv, dhv, wv;
			float out[VEC];
			dyv.load(dy + base + (int64_t)j * VEC);
			hv.load(h + base + (int64_t)j * VEC);
			dhv.load(dh_in + base + (int64_t)j * VEC);
			wv.load(w + (int64_t)j * VEC);
#pragma unroll
			for (int e = 0; e < VEC; e++) {
				const float g = dyv.get(e) * wv.get(e);
				out[e] = dhv.get(e) + r * (g - hv.get(e) * c);
			}
			mb_store_f32<T, VEC>(dx + base + (int64_t)j * VEC, out);
		}
	}
}

/* Step 3: dw[j] = sum over tokens of dy*h*rstd. Block (x, y) sums column
 * vectors x * COLSUM_COLS .. + COLSUM_COLS - 1 over tokens
 * [y * split_tokens, (y + 1) * split_tokens): thread (tx, ty) takes tokens
 * ty, ty + COLSUM_ROWS, ... COLSUM_ACCS at a time, its loads of the
 * COLSUM_ACCS tokens issued together; the block folds its threads down the
 * tokens in shared memory and writes its fp32 partial of the strip. The
 * last block of a strip to finish (done[x], a counter that it resets for
 * the next call) sums the strip's gridDim.y partials in split order and
 * writes dw: one launch, as a framework's reduction with a global staging
 * buffer and semaphores. */
template <typename T, int VEC>
__global__ void __launch_bounds__(COLSUM_THREADS) mb_rmsnorm_bwd_dw_colsum_kernel(const T *__restrict__ dy,
	const T *__restrict__ h, const float *__restrict__ rstd, float *__restrict__ part, unsigned *__restrict__ done,
	T *__restrict__ dw, int64_t tokens, int64_t split_tokens, int hidden)
{
	/* [ty][e * COLSUM_COLS + tx]: a warp's lanes write consecutive words */
	__shared__ float sums[COLSUM_ROWS][COLSUM_COLS * VEC];
	__shared__ bool last;
	const int tx = threadIdx.x % COLSUM_COLS, ty = threadIdx.x / COLSUM_COLS;
	const int nvec = hidden / VEC, cv = (int)blockIdx.x * COLSUM_COLS + tx;
	const int64_t col = (int64_t)cv * VEC, t_end_split = ((int64_t)blockIdx.y + 1) * split_tokens;
	const int64_t t_end = t_end_split < tokens ? t_end_split : tokens;
	float acc[COLSUM_ACCS][VEC];

#pragma unroll
	for (int a = 0; a < COLSUM_ACCS; a++) {
#pragma unroll
		for (int e = 0; e < VEC; e++)
			acc[a][e] = 0.0f;
	}
	if (cv < nvec) {
		int64_t t = (int64_t)blockIdx.y * split_tokens + ty;
		for (; t + (COLSUM_ACCS - 1) * COLSUM_ROWS < t_end; t += COLSUM_ACCS * COLSUM_ROWS) {
			mb_packed<T, VEC> dyv[COLSUM_ACCS], hv[COLSUM_ACCS];
			float r[COLSUM_ACCS];
#pragma unroll
			for (int a = 0; a < COLSUM_ACCS; a++) {
				const int64_t at = (t + a * COLSUM_ROWS) * hidden + col;
				dyv[a].load(dy + at);
				hv[a].load(h + at);
				r[a] = rstd[t + a * COLSUM_ROWS];
			}
#pragma unroll
			for (int a = 0; a < COLSUM_ACCS; a++) {
#pragma unroll
				for (int e = 0; e < VEC; e++)
					acc[a][e] += dyv[a].get(e) * hv[a].get(e) * r[a];
			}
		}
		for (; t < t_end; t += COLSUM_ROWS) {
			mb_packed<T, VEC> dyv, hv;
			dyv.load(dy + t * hidden + col);
			hv.load(h + t * hidden + col);
			const float r = rstd[t];
#pragma unroll
			for (int e = 0; e < VEC; e++)
				acc[0][e] += dyv.get(e) * hv.get(e) * r;
		}
	}
#pragma unroll
	for (int e = 0; e < VEC; e++)
		sums[ty][e * COLSUM_COLS + tx] = (acc[0][e] + acc[1][e]) + (acc[2][e] + acc[3][e]);
	__syncthreads();
#pragma unroll
	for (int half = COLSUM_ROWS / 2; half > 0; half /= 2) {
		if (ty < half) {
#pragma unroll
			for (int e = 0; e < VEC; e++)
				sums[ty][e * COLSUM_COLS + tx] += sums[ty + half][e * COLSUM_COLS + tx];
		}
		__syncthreads();
	}
	if (ty == 0 && cv < nvec) {
#pragma unroll
		for (int e = 0; e < VEC; e++)
			part[(int64_t)blockIdx.y * hidden + col + e] = sums[0][e * COLSUM_COLS + tx];
	}
	/* the partial is visible device-wide before the counter says so */
	__threadfence();
	__syncthreads();
	if (threadIdx.x == 0)
		last = atomicInc(&done[blockIdx.x], gridDim.y - 1) == gridDim.y - 1; /* wraps to 0 on the last */
	__syncthreads();
	if (!last)
		return;
	__threadfence();
	const int64_t strip = (int64_t)blockIdx.x * COLSUM_COLS * VEC;
	for (int c = threadIdx.x; c < COLSUM_COLS * VEC; c += COLSUM_THREADS) {
		if (strip + c < (int64_t)nvec * VEC) {
			float sum = 0.0f;
			/* __ldcg: from L2, past this SM's L1, which may hold stale lines */
			for (unsigned p = 0; p < gridDim.y; p++)
				sum += __ldcg(part + (int64_t)p * hidden + strip + c);
			dw[strip + c] = mb_from_f32<T>(sum);
		}
	}
}

/* The column sum's grid: column strips across, token splits down, as
 * many blocks as are resident at once where the strips leave room (one
 * wave, so no block waits for a second), more where a split would
 * otherwise pass COLSUM_SPLIT_MAX_TOKENS. */
template <typename T, int VEC>
static int colsum_launch(cudaStream_t stream, const T *dy, const T *h, const float *rstd, T *dw, int64_t tokens,
	int hidden)
{
	static int per_sm; /* asked once, on the first call, outside any capture */
	const int64_t strips = (hidden / VEC + COLSUM_COLS - 1) / COLSUM_COLS;
	const int64_t min_tokens = COLSUM_ROWS * COLSUM_ACCS;
	int device = 0, sms = 0;
	void *part = NULL, *done = NULL;
	cudaError_t ce = cudaGetDevice(&device);

	if (ce == cudaSuccess)
		ce = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
	if (ce == cudaSuccess && per_sm == 0)
		ce = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, mb_rmsnorm_bwd_dw_colsum_kernel<T, VEC>,
			COLSUM_THREADS, 0);
	if (ce != cudaSuccess)
		return (int)ce;
	int64_t splits = (int64_t)sms * (per_sm > 0 ? per_sm : 1) / strips;
	const int64_t by_length = (tokens + COLSUM_SPLIT_MAX_TOKENS - 1) / COLSUM_SPLIT_MAX_TOKENS;
	const int64_t by_work = (tokens + min_tokens - 1) / min_tokens;
	splits = splits > by_length ? splits : by_length;
	splits = splits < by_work ? splits : by_work;
	splits = splits < COLSUM_MAX_SPLITS ? splits : COLSUM_MAX_SPLITS;
	splits = splits > 1 ? splits : 1;
	/* whole steps of ROWS * ACCS tokens per split, then as few splits as
	 * that takes */
	int64_t split_tokens = (tokens + splits - 1) / splits;
	split_tokens = (split_tokens + min_tokens - 1) / min_tokens * min_tokens;
	splits = (tokens + split_tokens - 1) / split_tokens;
	if (strips > INT32_MAX)
		return (int)cudaErrorInvalidValue;
	if ((ce = workspace(WS_COLSUM_PARTIALS, (size_t)splits * (size_t)hidden * sizeof(float), &part)) !=
			cudaSuccess ||
		(ce = workspace_zeroed(WS_COLSUM_DONE, (size_t)strips * sizeof(unsigned), stream, &done)) != cudaSuccess)
		return (int)ce;
	const dim3 grid((unsigned)strips, (unsigned)splits);
	mb_rmsnorm_bwd_dw_colsum_kernel<T, VEC><<<grid, COLSUM_THREADS, 0, stream>>>(dy, h, rstd, (float *)part,
		(unsigned *)done, dw, tokens, split_tokens, hidden);
	return (int)cudaGetLastError();
}

/* rstd then dx, each one block per token: ITEMS vectors per thread in
 * registers, or the looped kernel (ITEMS 0) for rows wider than that. dx
 * holds four tensors' vectors, which at MB_ROW_MAX_ITEMS spill out of the
 * 128 registers that 512 threads leave: it loops there instead. */
template <typename T, int VEC, int ITEMS>
static int rows_launch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out,
	float *rstd, unsigned threads)
{
	constexpr int dx_items = ITEMS > MB_ROW_ITEMS ? 0 : ITEMS;
	const unsigned tokens = (unsigned)axis[AX_T];
	const int hidden = (int)axis[AX_H];
	mb_rmsnorm_bwd_rstd_kernel<T, VEC, ITEMS><<<tokens, threads, 0, stream>>>((const T *)in[IN_H], rstd, hidden);
	cudaError_t ce = cudaGetLastError();
	if (ce != cudaSuccess)
		return (int)ce;
	mb_rmsnorm_bwd_dx_kernel<T, VEC, dx_items><<<tokens, dx_items > 0 ? threads : NORM_MAX_THREADS, 0, stream>>>(
		(const T *)in[IN_DY], (const T *)in[IN_DH], (const T *)in[IN_H], (const T *)in[IN_W], rstd,
		(T *)out[OUT_DX], hidden);
	return (int)cudaGetLastError();
}

template <typename T, int VEC>
static int fallback_launch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out,
	float *rstd)
{
	unsigned threads = NORM_MAX_THREADS;
	int rc;
	switch (mb_row_items(axis[AX_H] / VEC, NORM_MAX_THREADS, &threads)) {
	case MB_ROW_ITEMS:
		rc = rows_launch<T, VEC, MB_ROW_ITEMS>(stream, axis, in, out, rstd, threads);
		break;
	case MB_ROW_MAX_ITEMS:
		rc = rows_launch<T, VEC, MB_ROW_MAX_ITEMS>(stream, axis, in, out, rstd, threads);
		break;
	default:
		rc = rows_launch<T, VEC, 0>(stream, axis, in, out, rstd, NORM_MAX_THREADS);
		break;
	}
	if (rc != 0)
		return rc;
	return colsum_launch<T, VEC>(stream, (const T *)in[IN_DY], (const T *)in[IN_H], rstd, (T *)out[OUT_DW],
		axis[AX_T], (int)axis[AX_H]);
}

template <typename T>
static int fallback_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	constexpr int vec = mb_vec16_elems<T>();
	const int64_t tokens = axis[AX_T];
	void *rstd = NULL;
	cudaError_t ce;

	if (axis[AX_H] > INT_MAX || tokens <= 0 || tokens > INT_MAX)
		return (int)cudaErrorInvalidValue;
	if ((ce = workspace(WS_RSTD, (size_t)tokens * sizeof(float), &rstd)) != cudaSuccess)
		return (int)ce;
	/* 16-byte accesses need aligned bases and rows of whole vectors (then
	 * every row starts aligned); other shapes run the same kernels one
	 * element per access */
	if (mb_aligned16(in[IN_DY]) && mb_aligned16(in[IN_DH]) && mb_aligned16(in[IN_H]) && mb_aligned16(in[IN_W]) &&
		mb_aligned16(out[OUT_DX]) && axis[AX_H] % vec == 0)
		return fallback_launch<T, vec>(stream, axis, in, out, (float *)rstd);
	return fallback_launch<T, 1>(stream, axis, in, out, (float *)rstd);
}

/* The plain path: three launches (rstd, dx, dw), with rstd through memory
 * and dy and h read twice. */
extern "C" MB_DECLARE_LAUNCH(mb_residual_rmsnorm_bwd_fallback_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fallback_dispatch, (cudaStream_t)stream, axis, in, out);
}
