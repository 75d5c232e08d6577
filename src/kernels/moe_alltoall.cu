/* moe_alltoall: the GPU variants of expert-parallel dispatch and combine
 * over NCCL (kernels/moe_alltoall.h says what they compute).
 *
 * One host thread drives every rank of its process: each phase of a call
 * is queued on all of them before the next (kernels rank by rank, NCCL
 * operations inside one ncclGroupStart/ncclGroupEnd that spans the ranks,
 * as NCCL requires of a thread that drives several GPUs). Under MPI the
 * process has one rank and the same code runs.
 *
 *   fallback  count -> scan -> counts to every peer -> host reads them
 *             -> pack (one copy per (token, k), expert order) -> send/recv
 *             rows -> expert (s_e x per copy) -> send/recv back -> combine
 *   fused     pack (each token once per destination, with its experts and
 *             weights there) -> counts -> host reads them -> send/recv
 *             rows and metadata -> expert (sum_k w s x over the local
 *             experts) -> send/recv back -> combine (sum over GPUs)
 *   vendors   equal counts, nothing but NCCL: ncclAlltoAll, or grouped
 *             ncclSend/ncclRecv, there and back
 *
 * The rows a pack copies are bytes (whatever the dtype); the expert and
 * the combine compute in fp32 and round once to the dtype.
 *
 * NVLink multicast is never asked for: nothing here calls
 * cuMulticastCreate, and the harness sets NCCL_NVLS_ENABLE=0 before the
 * communicators are made.
 */
#include <stdio.h>
#include <string.h>

#include <new>

#include <cuda_runtime.h>

#include "mb_config.h"
#include "kernels/moe_alltoall.h"
#include "kernels/vec.cuh"

#if MB_HAVE_NCCL
#include <nccl.h>
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
/* Weak, so that a libnccl older than these headers still loads: the
 * nccl_alltoall variant is then refused, nothing else changes. */
#pragma weak ncclAlltoAll
#define HAVE_NCCL_ALLTOALL 1
#else
#define HAVE_NCCL_ALLTOALL 0
#endif
#endif

/* Fallback count, scan and pack: one routing entry (token, k) per thread. */
#define CHUNK 256
/* Fused pack: tokens per block; the first PACK_TOKENS threads own one
 * token each, every thread copies. */
#define PACK_TOKENS 32
#define PACK_THREADS 256
/* One block per row (grid-stride) for the expert, combine and hash. */
#define ROW_THREADS 256
#define MAX_ROW_BLOCKS (1 << 16)
/* The row kernels' grids: this many blocks per SM, each striding over rows,
 * so that a block's prologue (the fallback expert's segment scan) is paid
 * a few times per SM, not once per row. */
#define ROW_BLOCKS_PER_SM 8
/* The fallback's scan: one block, a warp per expert. */
#define SCAN_THREADS 1024
/* Loads each thread issues before its stores in a block's copy. */
#define COPY_UNROLL 4
#define HASH_GOLDEN 0x9e3779b97f4a7c15ull
#define POISON_BYTE 0xff

/* ---- device helpers ------------------------------------------------------ */

/* s_e = 1 + e / E with the same two roundings as the host's
 * mb_moe_a2a_scale. */
__device__ __forceinline__ float expert_scale(int e, int n_experts)
{
	return __fadd_rn(1.0f, __fdiv_rn((float)e, (float)n_experts));
}

/* The whole block copies `n` rows of `units` U-words: row src_row[i] of
 * src to row dst_row[i] of dst (both lists in shared memory). Each thread
 * issues COPY_UNROLL loads before its stores. */
template <typename U>
__device__ __forceinline__ void block_copy_rows(U *__restrict__ dst, const U *__restrict__ src,
	const int32_t *dst_row, const int32_t *src_row, int n, int64_t units)
{
	const int64_t total = (int64_t)n * units, step = (int64_t)blockDim.x;

	for (int64_t f0 = threadIdx.x; f0 < total; f0 += step * COPY_UNROLL) {
		U v[COPY_UNROLL];
#pragma unroll
		for (int r = 0; r < COPY_UNROLL; r++) {
			const int64_t f = f0 + r * step;
			if (f < total) {
				const int64_t i = f / units, u = f - i * units;
				v[r] = src[(int64_t)src_row[i] * units + u];
			}
		}
#pragma unroll
		for (int r = 0; r < COPY_UNROLL; r++) {
			const int64_t f = f0 + r * step;
			if (f < total) {
				const int64_t i = f / units, u = f - i * units;
				dst[(int64_t)dst_row[i] * units + u] = v[r];
			}
		}
	}
}

/* ---- fallback ------------------------------------------------------------ */

/* Per block of CHUNK routing entries, how many go to each expert. */
__global__ void __launch_bounds__(CHUNK) mb_moe_a2a_fallback_count_kernel(const int32_t *__restrict__ expert,
	int64_t n, int n_experts, int32_t *__restrict__ blk_counts)
{
	extern __shared__ int32_t cnt[];
	const int64_t i = (int64_t)blockIdx.x * CHUNK + threadIdx.x;

	for (int e = threadIdx.x; e < n_experts; e += blockDim.x)
		cnt[e] = 0;
	__syncthreads();
	if (i < n)
		atomicAdd(&cnt[expert[i]], 1);
	__syncthreads();
	for (int e = threadIdx.x; e < n_experts; e += blockDim.x)
		blk_counts[(int64_t)blockIdx.x * n_experts + e] = cnt[e];
}

/* The exclusive prefix of `n` values at v[i * stride], summed as V, into
 * out[i * out_stride] (which may be v itself): one warp's work, 32 values
 * at a time. Returns the total, to every lane. */
template <typename I, typename V, typename O>
__device__ __forceinline__ V warp_exclusive_scan(const I *v, int64_t n, int64_t stride, O *out, int64_t out_stride)
{
	const int lane = threadIdx.x % MB_WARP_THREADS;
	V carry = 0;

	for (int64_t i0 = 0; i0 < n; i0 += MB_WARP_THREADS) {
		const int64_t i = i0 + lane;
		const V c = i < n ? (V)v[i * stride] : 0;
		V incl = c;
		for (int off = 1; off < MB_WARP_THREADS; off *= 2) {
			const V up = __shfl_up_sync(0xffffffffu, incl, off);
			if (lane >= off)
				incl += up;
		}
		if (i < n)
			out[i * out_stride] = (O)(carry + incl - c);
		carry += __shfl_sync(0xffffffffu, incl, MB_WARP_THREADS - 1);
	}
	return carry;
}

/* One block: per expert (a warp each), the exclusive prefix of the block
 * counts, in place, and the expert's total (what goes to its GPU); then
 * each expert's start in the send buffer added to its prefixes. The
 * result is a stable sort by expert: within an expert, copies keep token
 * order. */
__global__ void __launch_bounds__(SCAN_THREADS) mb_moe_a2a_fallback_scan_kernel(int32_t *__restrict__ blk,
	int64_t n_blocks, int n_experts, int32_t *__restrict__ totals)
{
	__shared__ int32_t start[MB_A2A_MAX_E];
	const int warp = threadIdx.x / MB_WARP_THREADS, warps = blockDim.x / MB_WARP_THREADS;

	for (int e = warp; e < n_experts; e += warps) {
		const int32_t total = warp_exclusive_scan<int32_t, int32_t, int32_t>(blk + e, n_blocks, n_experts, blk + e,
			n_experts);
		if (threadIdx.x % MB_WARP_THREADS == 0)
			totals[e] = total;
	}
	__syncthreads();
	if (warp == 0)
		warp_exclusive_scan<int32_t, int32_t, int32_t>(totals, n_experts, 1, start, 1);
	__syncthreads();
	for (int64_t i = threadIdx.x; i < n_blocks * n_experts; i += blockDim.x)
		blk[i] += start[i % n_experts];
}

/* Each routing entry (token t, k) is copied to its slot in expert order:
 * the block's offset for its expert plus the entries before it in the
 * block with the same expert (a token never names an expert twice, so
 * this keeps token order). pos[t K + k] records the slot for the combine. */
template <typename U>
__global__ void __launch_bounds__(CHUNK) mb_moe_a2a_fallback_pack_kernel(const U *__restrict__ x,
	const int32_t *__restrict__ expert, int64_t n, int k, int n_experts, const int32_t *__restrict__ blk_off,
	U *__restrict__ send, int32_t *__restrict__ pos, int64_t units)
{
	__shared__ int32_t ex[CHUNK], dst_row[CHUNK], src_row[CHUNK];
	__shared__ int n_live;
	const int64_t i = (int64_t)blockIdx.x * CHUNK + threadIdx.x;
	const int e = i < n ? expert[i] : -1;

	ex[threadIdx.x] = e;
	if (threadIdx.x == 0)
		n_live = (int)(n - (int64_t)blockIdx.x * CHUNK < CHUNK ? n - (int64_t)blockIdx.x * CHUNK : CHUNK);
	__syncthreads();
	if (e >= 0) {
		int before = 0;
		for (int j = 0; j < (int)threadIdx.x; j++)
			before += ex[j] == e;
		const int32_t slot = blk_off[(int64_t)blockIdx.x * n_experts + e] + before;
		pos[i] = slot;
		dst_row[threadIdx.x] = slot;
		src_row[threadIdx.x] = (int32_t)(i / k);
	}
	__syncthreads();
	/* the live entries are the block's first n_live */
	block_copy_rows<U>(send, x, dst_row, src_row, n_live, units);
}

/* Each received copy times its expert's scale. Rows arrive source by
 * source, each source's rows expert by expert ([G][E / G] counts): a row's
 * expert is the segment it falls in. */
template <typename T, int VEC>
__global__ void __launch_bounds__(ROW_THREADS) mb_moe_a2a_fallback_expert_kernel(const T *__restrict__ recv,
	const int32_t *__restrict__ recv_counts, int64_t n_rows, int64_t h, int n_segments, int per_gpu,
	int first_expert, int n_experts, T *__restrict__ out)
{
	__shared__ int64_t seg[MB_A2A_MAX_E + 1];

	/* where each (source, expert) segment starts: warp 0's scan */
	if (threadIdx.x < MB_WARP_THREADS) {
		const int64_t total = warp_exclusive_scan<int32_t, int64_t, int64_t>(recv_counts, n_segments, 1, seg, 1);
		if (threadIdx.x == 0)
			seg[n_segments] = total;
	}
	__syncthreads();
	for (int64_t r = blockIdx.x; r < n_rows; r += gridDim.x) {
		/* the last segment starting at or before r: the one holding it
		 * (empty segments start where the next does) */
		int lo = 0, hi = n_segments - 1;
		while (lo < hi) {
			const int mid = (lo + hi + 1) / 2;
			if (seg[mid] <= r)
				lo = mid;
			else
				hi = mid - 1;
		}
		const float s = expert_scale(first_expert + lo % per_gpu, n_experts);
		for (int64_t c = (int64_t)threadIdx.x * VEC; c < h; c += (int64_t)blockDim.x * VEC) {
			float v[VEC];
			mb_load_f32<T, VEC>(v, recv + r * h + c);
#pragma unroll
			for (int j = 0; j < VEC; j++)
				v[j] = __fmul_rn(s, v[j]);
			mb_store_f32<T, VEC>(out + r * h + c, v);
		}
	}
}

/* y[t] = sum_k w[t,k] * ret[pos[t,k]] in fp32, k in order. */
template <typename T, int VEC>
__global__ void __launch_bounds__(ROW_THREADS) mb_moe_a2a_fallback_combine_kernel(const T *__restrict__ ret,
	const int32_t *__restrict__ pos, const float *__restrict__ weight, int64_t tokens, int k, int64_t h,
	T *__restrict__ y)
{
	for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
		int32_t p[MB_A2A_MAX_K];
		float w[MB_A2A_MAX_K];
		for (int j = 0; j < k; j++) {
			p[j] = pos[t * k + j];
			w[j] = weight[t * k + j];
		}
		for (int64_t c = (int64_t)threadIdx.x * VEC; c < h; c += (int64_t)blockDim.x * VEC) {
			float acc[VEC], v[VEC];
#pragma unroll
			for (int i = 0; i < VEC; i++)
				acc[i] = 0.0f;
			for (int j = 0; j < k; j++) {
				mb_load_f32<T, VEC>(v, ret + (int64_t)p[j] * h + c);
#pragma unroll
				for (int i = 0; i < VEC; i++)
					acc[i] += w[j] * v[i];
			}
			mb_store_f32<T, VEC>(y + t * h + c, acc);
		}
	}
}

/* ---- fused --------------------------------------------------------------- */

/* Each token once per destination GPU: its row into that destination's
 * region of the send buffer (rows d T .. d T + T - 1), its metadata (the
 * token, its experts there and their weights, in k order) beside it, and
 * its slot in slot_map[t G + d] (-1 where it does not go). A block counts
 * its tokens per destination and reserves that many slots with one atomic
 * add each (fill[d] ends as the rows for d); within a block slots follow
 * token order. */
template <typename U>
__global__ void __launch_bounds__(PACK_THREADS) mb_moe_a2a_fused_pack_kernel(const U *__restrict__ x,
	const int32_t *__restrict__ expert, const float *__restrict__ weight, int64_t tokens, int k, int n_gpus,
	int per_gpu, int32_t *__restrict__ fill, U *__restrict__ send, mb_a2a_meta *__restrict__ meta,
	int32_t *__restrict__ slot_map, int64_t units)
{
	__shared__ unsigned long long mask[PACK_TOKENS];
	__shared__ int32_t base[MB_A2A_MAX_GPUS];
	__shared__ int32_t first_pair[PACK_TOKENS + 1];
	__shared__ int32_t dst_row[PACK_TOKENS * MB_A2A_MAX_K], src_row[PACK_TOKENS * MB_A2A_MAX_K];
	const int64_t t0 = (int64_t)blockIdx.x * PACK_TOKENS, t = t0 + threadIdx.x;
	const bool owner = threadIdx.x < PACK_TOKENS;

	if (owner) {
		unsigned long long m = 0;
		if (t < tokens)
			for (int j = 0; j < k; j++)
				m |= 1ull << (expert[t * k + j] / per_gpu);
		mask[threadIdx.x] = m;
	}
	__syncthreads();
	for (int d = threadIdx.x; d < n_gpus; d += blockDim.x) {
		int c = 0;
		for (int j = 0; j < PACK_TOKENS; j++)
			c += (int)((mask[j] >> d) & 1ull);
		base[d] = c ? atomicAdd(&fill[d], c) : 0;
	}
	if (threadIdx.x == 0) {
		first_pair[0] = 0;
		for (int j = 0; j < PACK_TOKENS; j++)
			first_pair[j + 1] = first_pair[j] + __popcll(mask[j]);
	}
	__syncthreads();
	if (owner && t < tokens) {
		const unsigned long long m = mask[threadIdx.x];
		int pair = first_pair[threadIdx.x];
		for (int d = 0; d < n_gpus; d++) {
			if (!((m >> d) & 1ull)) {
				slot_map[t * n_gpus + d] = -1;
				continue;
			}
			int before = 0;
			for (int j = 0; j < (int)threadIdx.x; j++)
				before += (int)((mask[j] >> d) & 1ull);
			const int32_t slot = base[d] + before;
			mb_a2a_meta mt;
			mt.token = (int32_t)t;
			mt.n = 0;
			for (int j = 0; j < MB_A2A_MAX_K; j++) {
				mt.expert[j] = -1;
				mt.weight[j] = 0.0f;
			}
			for (int j = 0; j < k; j++) {
				const int32_t e = expert[t * k + j];
				if (e / per_gpu == d) {
					mt.expert[mt.n] = e;
					mt.weight[mt.n] = weight[t * k + j];
					mt.n++;
				}
			}
			slot_map[t * n_gpus + d] = slot;
			meta[(int64_t)d * tokens + slot] = mt;
			dst_row[pair] = (int32_t)((int64_t)d * tokens + slot);
			src_row[pair] = (int32_t)t;
			pair++;
		}
	}
	__syncthreads();
	block_copy_rows<U>(send, x, dst_row, src_row, first_pair[PACK_TOKENS], units);
}

/* A destination's part of y for each received row: sum over the row's
 * experts here of w * (s_e * x), fp32, rounded once. */
template <typename T, int VEC>
__global__ void __launch_bounds__(ROW_THREADS) mb_moe_a2a_fused_expert_kernel(const T *__restrict__ recv,
	const mb_a2a_meta *__restrict__ meta, int64_t n_rows, int64_t h, int n_experts, T *__restrict__ out)
{
	for (int64_t r = blockIdx.x; r < n_rows; r += gridDim.x) {
		const int n = min(max(meta[r].n, 0), MB_A2A_MAX_K);
		float w[MB_A2A_MAX_K], s[MB_A2A_MAX_K];
		for (int j = 0; j < n; j++) {
			w[j] = meta[r].weight[j];
			s[j] = expert_scale(meta[r].expert[j], n_experts);
		}
		for (int64_t c = (int64_t)threadIdx.x * VEC; c < h; c += (int64_t)blockDim.x * VEC) {
			float acc[VEC], v[VEC];
			mb_load_f32<T, VEC>(v, recv + r * h + c);
#pragma unroll
			for (int i = 0; i < VEC; i++)
				acc[i] = 0.0f;
			for (int j = 0; j < n; j++)
#pragma unroll
				for (int i = 0; i < VEC; i++)
					acc[i] += w[j] * __fmul_rn(s[j], v[i]);
			mb_store_f32<T, VEC>(out + r * h + c, acc);
		}
	}
}

/* y[t] = the sum of what each destination returned for t, in GPU order. */
template <typename T, int VEC>
__global__ void __launch_bounds__(ROW_THREADS) mb_moe_a2a_fused_combine_kernel(const T *__restrict__ ret,
	const int32_t *__restrict__ slot_map, int64_t tokens, int n_gpus, int64_t h, T *__restrict__ y)
{
	for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
		int64_t row[MB_A2A_MAX_K];
		int n = 0;
		for (int d = 0; d < n_gpus && n < MB_A2A_MAX_K; d++) {
			const int32_t s = slot_map[t * n_gpus + d];
			if (s >= 0)
				row[n++] = (int64_t)d * tokens + s;
		}
		for (int64_t c = (int64_t)threadIdx.x * VEC; c < h; c += (int64_t)blockDim.x * VEC) {
			float acc[VEC], v[VEC];
#pragma unroll
			for (int i = 0; i < VEC; i++)
				acc[i] = 0.0f;
			for (int j = 0; j < n; j++) {
				mb_load_f32<T, VEC>(v, ret + row[j] * h + c);
#pragma unroll
				for (int i = 0; i < VEC; i++)
					acc[i] += v[i];
			}
			mb_store_f32<T, VEC>(y + t * h + c, acc);
		}
	}
}

/* ---- row hashes (the checks) ------------------------------------------------ */

__device__ __forceinline__ unsigned long long hash_mix(unsigned long long z)
{
	z += HASH_GOLDEN;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

__global__ void __launch_bounds__(ROW_THREADS) mb_moe_a2a_row_hash_kernel(const uint16_t *__restrict__ rows,
	int64_t n_rows, int64_t words, unsigned long long *__restrict__ out)
{
	__shared__ unsigned long long part[ROW_THREADS / MB_WARP_THREADS];
	const int lane = threadIdx.x % MB_WARP_THREADS, warp = threadIdx.x / MB_WARP_THREADS;

	for (int64_t r = blockIdx.x; r < n_rows; r += gridDim.x) {
		unsigned long long h = 0;
		for (int64_t i = threadIdx.x; i < words; i += blockDim.x)
			h += hash_mix(((unsigned long long)i << 16) | rows[r * words + i]);
		for (int off = MB_WARP_THREADS / 2; off > 0; off /= 2)
			h += __shfl_down_sync(0xffffffffu, h, off);
		if (lane == 0)
			part[warp] = h;
		__syncthreads();
		if (threadIdx.x == 0) {
			unsigned long long sum = 0;
			for (int w = 0; w < (int)(blockDim.x / MB_WARP_THREADS); w++)
				sum += part[w];
			out[r] = sum;
		}
		__syncthreads();
	}
}

static unsigned row_blocks(int64_t rows, int64_t max_blocks)
{
	return (unsigned)(rows < max_blocks ? rows : max_blocks);
}

extern "C" int mb_a2a_row_hash(void *stream, const void *rows, int64_t n_rows, int64_t row_bytes, uint64_t *out)
{
	if (n_rows <= 0)
		return 0;
	if (row_bytes <= 0 || row_bytes % 2)
		return (int)cudaErrorInvalidValue;
	mb_moe_a2a_row_hash_kernel<<<row_blocks(n_rows, MAX_ROW_BLOCKS), ROW_THREADS, 0, (cudaStream_t)stream>>>(
		(const uint16_t *)rows, n_rows, row_bytes / 2, (unsigned long long *)out);
	return (int)cudaGetLastError();
}

#if MB_HAVE_NCCL

/* ---- ranks ------------------------------------------------------------------ */

struct mb_a2a_rank {
	mb_a2a_dims d;
	mb_a2a_variant v;
	int rank, device;
	ncclComm_t comm;
	cudaStream_t stream;
	mb_a2a_io io;
	int64_t row_bytes, per_gpu, recv_cap, send_cap, n_blocks, vendor_rows;
	int64_t max_row_blocks; /* ROW_BLOCKS_PER_SM per SM of the device */
	/* device */
	int32_t *blk, *totals, *recv_counts, *pos, *fill, *slot_map;
	void *send, *recv, *out, *ret;
	mb_a2a_meta *send_meta, *recv_meta;
	/* pinned host: what the call sends per expert or GPU, and receives */
	int32_t *h_send_counts, *h_recv_counts;
	int64_t send_rows[MB_A2A_MAX_GPUS], send_off[MB_A2A_MAX_GPUS];
	int64_t recv_rows[MB_A2A_MAX_GPUS], recv_off[MB_A2A_MAX_GPUS];
};

static ncclDataType_t nccl_type(mb_dtype dtype)
{
	return dtype == MB_FP32 ? ncclFloat32 : dtype == MB_FP16 ? ncclFloat16 : ncclBfloat16;
}

/* MB_ENOMEM for the device's out-of-memory (the case is then "oom"), else
 * MB_EDEVICE. */
static int cuda_failed(cudaError_t ce, const mb_a2a_rank *r, const char *what, mb_error *err)
{
	return mb_error_set(err, ce == cudaErrorMemoryAllocation ? MB_ENOMEM : MB_EDEVICE, NULL,
		"rank %d (device %d): %s: %s", r->rank, r->device, what, cudaGetErrorString(ce));
}

#define CUDA_TRY(r, call, what) \
	do { \
		cudaError_t ce_ = (call); \
		if (ce_ != cudaSuccess) \
			return cuda_failed(ce_, (r), (what), err); \
	} while (0)

static int nccl_failed(ncclResult_t nr, const char *what, mb_error *err)
{
	return mb_error_set(err, MB_EDEVICE, NULL, "%s: %s", what, ncclGetErrorString(nr));
}

extern "C" int mb_a2a_nccl_version(void)
{
	int v = 0;
	return ncclGetVersion(&v) == ncclSuccess ? v : 0;
}

static int rank_alloc(mb_a2a_rank *r, void **p, size_t bytes, const char *what, mb_error *err)
{
	*p = NULL;
	if (bytes == 0)
		return 0;
	CUDA_TRY(r, cudaMalloc(p, bytes), what);
	return 0;
}

extern "C" void mb_a2a_rank_close(mb_a2a_rank *r)
{
	if (!r)
		return;
	cudaSetDevice(r->device);
	cudaFree(r->blk);
	cudaFree(r->totals);
	cudaFree(r->recv_counts);
	cudaFree(r->pos);
	cudaFree(r->fill);
	cudaFree(r->slot_map);
	cudaFree(r->send);
	cudaFree(r->recv);
	cudaFree(r->out);
	cudaFree(r->ret);
	cudaFree(r->send_meta);
	cudaFree(r->recv_meta);
	cudaFreeHost(r->h_send_counts);
	cudaFreeHost(r->h_recv_counts);
	delete r;
}

/* Row j of the vendors' send buffer is x[j mod T]. */
static int vendor_fill(mb_a2a_rank *r, mb_error *err)
{
	const int64_t total = r->vendor_rows * r->d.G;
	int64_t j = 0;

	while (j < total) {
		const int64_t from = j % r->d.T, n = r->d.T - from < total - j ? r->d.T - from : total - j;
		CUDA_TRY(r, cudaMemcpyAsync((char *)r->send + j * r->row_bytes, (const char *)r->io.x + from * r->row_bytes,
			(size_t)(n * r->row_bytes), cudaMemcpyDeviceToDevice, r->stream), "filling the vendor send buffer");
		j += n;
	}
	return 0;
}

extern "C" int mb_a2a_rank_open(mb_a2a_rank **out, const mb_a2a_dims *d, mb_a2a_variant v, int rank, int device,
	void *comm, void *stream, const mb_a2a_io *io, int64_t recv_cap_rows, mb_error *err)
{
	mb_a2a_rank *r = new (std::nothrow) mb_a2a_rank();
	const int G = d->G;
	int rc = 0;

	*out = NULL;
	if (!r)
		return mb_error_set(err, MB_ENOMEM, NULL, "rank %d: out of host memory", rank);
	r->d = *d;
	r->v = v;
	r->rank = rank;
	r->device = device;
	r->comm = (ncclComm_t)comm;
	r->stream = (cudaStream_t)stream;
	r->io = *io;
	r->row_bytes = d->H * (d->dtype == MB_FP32 ? (int64_t)sizeof(float) : (int64_t)sizeof(uint16_t));
	r->per_gpu = d->E / G;
	r->recv_cap = recv_cap_rows;
	r->n_blocks = (d->T * d->K + CHUNK - 1) / CHUNK;
	r->vendor_rows = mb_a2a_vendor_rows_per_peer(d);
	if (G < 1 || G > MB_A2A_MAX_GPUS || d->E % G || d->K > MB_A2A_MAX_K || d->E > MB_A2A_MAX_E) {
		delete r;
		return mb_error_set(err, MB_EINVAL, NULL, "rank %d: unsupported shape (G %d, E %lld, K %lld)", rank, G,
			(long long)d->E, (long long)d->K);
	}
	int sms = 0;
	if (cudaSetDevice(device) != cudaSuccess
		|| cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
		delete r;
		return mb_error_set(err, MB_EDEVICE, NULL, "rank %d: cannot use device %d", rank, device);
	}
	r->max_row_blocks = (int64_t)(sms > 0 ? sms : 1) * ROW_BLOCKS_PER_SM;
	if (cudaHostAlloc((void **)&r->h_send_counts, MB_A2A_MAX_E * sizeof(int32_t), cudaHostAllocDefault) != cudaSuccess
		|| cudaHostAlloc((void **)&r->h_recv_counts, MB_A2A_MAX_E * sizeof(int32_t), cudaHostAllocDefault)
			!= cudaSuccess) {
		mb_a2a_rank_close(r);
		return mb_error_set(err, MB_EDEVICE, NULL, "rank %d: cannot allocate pinned host memory for the counts",
			rank);
	}
	switch (v) {
	case MB_A2A_FALLBACK:
		r->send_cap = d->T * d->K;
		rc = rank_alloc(r, (void **)&r->blk, (size_t)(r->n_blocks * d->E) * sizeof(int32_t), "block counts", err);
		if (!rc)
			rc = rank_alloc(r, (void **)&r->totals, (size_t)d->E * sizeof(int32_t), "expert totals", err);
		if (!rc)
			rc = rank_alloc(r, (void **)&r->recv_counts, (size_t)d->E * sizeof(int32_t), "received counts", err);
		if (!rc)
			rc = rank_alloc(r, (void **)&r->pos, (size_t)(d->T * d->K) * sizeof(int32_t), "positions", err);
		break;
	case MB_A2A_FUSED:
		r->send_cap = (int64_t)G * d->T;
		rc = rank_alloc(r, (void **)&r->fill, (size_t)G * sizeof(int32_t), "destination counts", err);
		if (!rc)
			rc = rank_alloc(r, (void **)&r->recv_counts, (size_t)G * sizeof(int32_t), "received counts", err);
		if (!rc)
			rc = rank_alloc(r, (void **)&r->slot_map, (size_t)(d->T * G) * sizeof(int32_t), "slot map", err);
		if (!rc)
			rc = rank_alloc(r, (void **)&r->send_meta, (size_t)r->send_cap * sizeof(mb_a2a_meta), "send metadata",
				err);
		if (!rc)
			rc = rank_alloc(r, (void **)&r->recv_meta, (size_t)recv_cap_rows * sizeof(mb_a2a_meta),
				"received metadata", err);
		break;
	case MB_A2A_VENDOR_ALLTOALL:
	case MB_A2A_VENDOR_SENDRECV:
		r->send_cap = r->recv_cap = r->vendor_rows * G;
		break;
	default:
		rc = mb_error_set(err, MB_EINVAL, NULL, "rank %d: unknown variant %d", rank, (int)v);
	}
	if (!rc)
		rc = rank_alloc(r, &r->send, (size_t)(r->send_cap * r->row_bytes), "send buffer", err);
	if (!rc)
		rc = rank_alloc(r, &r->recv, (size_t)(r->recv_cap * r->row_bytes), "receive buffer", err);
	if (!rc && (v == MB_A2A_FALLBACK || v == MB_A2A_FUSED))
		rc = rank_alloc(r, &r->out, (size_t)(r->recv_cap * r->row_bytes), "expert output", err);
	if (!rc)
		rc = rank_alloc(r, &r->ret, (size_t)(r->send_cap * r->row_bytes), "return buffer", err);
	if (!rc && (v == MB_A2A_VENDOR_ALLTOALL || v == MB_A2A_VENDOR_SENDRECV))
		rc = vendor_fill(r, err);
	if (!rc)
		rc = mb_a2a_rank_poison(r, err);
	if (!rc) {
		const cudaError_t ce = cudaStreamSynchronize(r->stream);
		if (ce != cudaSuccess)
			rc = cuda_failed(ce, r, "setting up the buffers", err);
	}
	if (rc) {
		mb_a2a_rank_close(r);
		return rc;
	}
	*out = r;
	return 0;
}

extern "C" int mb_a2a_rank_poison(mb_a2a_rank *r, mb_error *err)
{
	CUDA_TRY(r, cudaSetDevice(r->device), "cudaSetDevice");
	CUDA_TRY(r, cudaMemsetAsync(r->io.y, POISON_BYTE, (size_t)(r->d.T * r->row_bytes), r->stream), "poisoning y");
	if (r->recv)
		CUDA_TRY(r, cudaMemsetAsync(r->recv, POISON_BYTE, (size_t)(r->recv_cap * r->row_bytes), r->stream),
			"poisoning the receive buffer");
	if (r->out)
		CUDA_TRY(r, cudaMemsetAsync(r->out, POISON_BYTE, (size_t)(r->recv_cap * r->row_bytes), r->stream),
			"poisoning the expert output");
	if (r->ret)
		CUDA_TRY(r, cudaMemsetAsync(r->ret, POISON_BYTE, (size_t)(r->send_cap * r->row_bytes), r->stream),
			"poisoning the return buffer");
	if (r->recv_meta)
		CUDA_TRY(r, cudaMemsetAsync(r->recv_meta, POISON_BYTE, (size_t)r->recv_cap * sizeof(mb_a2a_meta),
			r->stream), "poisoning the received metadata");
	return 0;
}

extern "C" void mb_a2a_rank_view(const mb_a2a_rank *r, mb_a2a_view *out)
{
	memset(out, 0, sizeof(*out));
	out->G = r->d.G;
	for (int p = 0; p < r->d.G; p++) {
		out->send_rows[p] = r->send_rows[p];
		out->send_off[p] = r->send_off[p];
		out->recv_rows[p] = r->recv_rows[p];
		out->recv_off[p] = r->recv_off[p];
	}
	out->recv_expert_counts = r->v == MB_A2A_FALLBACK ? r->h_recv_counts : NULL;
	out->send = r->send;
	out->recv = r->recv;
	out->recv_meta = r->recv_meta;
	out->ret = r->ret;
	out->meta_bytes = r->v == MB_A2A_FUSED ? (int64_t)sizeof(mb_a2a_meta) : 0;
}

/* ---- launches ------------------------------------------------------------- */

/* Rows are copied as 16-byte words when their width allows (buffers are
 * cudaMalloc'd, so row starts are then 16-byte aligned), else 2-byte. */
static bool rows16(const mb_a2a_rank *r)
{
	return r->row_bytes % MB_VEC_BYTES == 0;
}

template <typename T, int VEC>
static void fallback_expert_as(const mb_a2a_rank *r, int64_t n_rows)
{
	mb_moe_a2a_fallback_expert_kernel<T, VEC><<<row_blocks(n_rows, r->max_row_blocks), ROW_THREADS, 0, r->stream>>>(
		(const T *)r->recv, r->recv_counts, n_rows, r->d.H, (int)r->d.E, (int)r->per_gpu,
		r->rank * (int)r->per_gpu, (int)r->d.E, (T *)r->out);
}

template <typename T, int VEC>
static void fallback_combine_as(const mb_a2a_rank *r)
{
	mb_moe_a2a_fallback_combine_kernel<T, VEC><<<row_blocks(r->d.T, r->max_row_blocks), ROW_THREADS, 0, r->stream>>>(
		(const T *)r->ret, r->pos, r->io.weight, r->d.T, (int)r->d.K, r->d.H, (T *)r->io.y);
}

template <typename T, int VEC>
static void fused_expert_as(const mb_a2a_rank *r, int64_t n_rows)
{
	mb_moe_a2a_fused_expert_kernel<T, VEC><<<row_blocks(n_rows, r->max_row_blocks), ROW_THREADS, 0, r->stream>>>(
		(const T *)r->recv, r->recv_meta, n_rows, r->d.H, (int)r->d.E, (T *)r->out);
}

template <typename T, int VEC>
static void fused_combine_as(const mb_a2a_rank *r)
{
	mb_moe_a2a_fused_combine_kernel<T, VEC><<<row_blocks(r->d.T, r->max_row_blocks), ROW_THREADS, 0, r->stream>>>(
		(const T *)r->ret, r->slot_map, r->d.T, r->d.G, r->d.H, (T *)r->io.y);
}

/* The dtype, then the widest vector the row allows. */
#define DISPATCH_ROWS(r, fn, ...) \
	do { \
		const bool v16_ = rows16(r); \
		switch ((r)->d.dtype) { \
		case MB_FP32: v16_ ? fn<float, 4>(__VA_ARGS__) : fn<float, 1>(__VA_ARGS__); break; \
		case MB_FP16: v16_ ? fn<__half, 8>(__VA_ARGS__) : fn<__half, 1>(__VA_ARGS__); break; \
		default: v16_ ? fn<__nv_bfloat16, 8>(__VA_ARGS__) : fn<__nv_bfloat16, 1>(__VA_ARGS__); break; \
		} \
	} while (0)

/* The fallback's counts: per block of routing entries, then their scan
 * into per-expert totals (what each peer gets) and offsets. */
static int fallback_count(mb_a2a_rank *r, mb_error *err)
{
	const int64_t n = r->d.T * r->d.K;

	mb_moe_a2a_fallback_count_kernel<<<(unsigned)r->n_blocks, CHUNK, (size_t)r->d.E * sizeof(int32_t), r->stream>>>(
		r->io.expert, n, (int)r->d.E, r->blk);
	CUDA_TRY(r, cudaGetLastError(), "fallback count kernel");
	mb_moe_a2a_fallback_scan_kernel<<<1, SCAN_THREADS, 0, r->stream>>>(r->blk, r->n_blocks, (int)r->d.E,
		r->totals);
	CUDA_TRY(r, cudaGetLastError(), "fallback scan kernel");
	return 0;
}

/* The fallback's copies, one per (token, k), in expert order. */
static int fallback_pack(mb_a2a_rank *r, mb_error *err)
{
	const int64_t n = r->d.T * r->d.K;
	const unsigned blocks = (unsigned)r->n_blocks;

	if (rows16(r))
		mb_moe_a2a_fallback_pack_kernel<uint4><<<blocks, CHUNK, 0, r->stream>>>((const uint4 *)r->io.x,
			r->io.expert, n, (int)r->d.K, (int)r->d.E, r->blk, (uint4 *)r->send, r->pos,
			r->row_bytes / (int64_t)sizeof(uint4));
	else
		mb_moe_a2a_fallback_pack_kernel<uint16_t><<<blocks, CHUNK, 0, r->stream>>>((const uint16_t *)r->io.x,
			r->io.expert, n, (int)r->d.K, (int)r->d.E, r->blk, (uint16_t *)r->send, r->pos,
			r->row_bytes / (int64_t)sizeof(uint16_t));
	CUDA_TRY(r, cudaGetLastError(), "fallback pack kernel");
	return 0;
}

static int fused_pack(mb_a2a_rank *r, mb_error *err)
{
	const unsigned blocks = (unsigned)((r->d.T + PACK_TOKENS - 1) / PACK_TOKENS);

	CUDA_TRY(r, cudaMemsetAsync(r->fill, 0, (size_t)r->d.G * sizeof(int32_t), r->stream), "zeroing the counts");
	if (rows16(r))
		mb_moe_a2a_fused_pack_kernel<uint4><<<blocks, PACK_THREADS, 0, r->stream>>>((const uint4 *)r->io.x,
			r->io.expert, r->io.weight, r->d.T, (int)r->d.K, r->d.G, (int)r->per_gpu, r->fill, (uint4 *)r->send,
			r->send_meta, r->slot_map, r->row_bytes / (int64_t)sizeof(uint4));
	else
		mb_moe_a2a_fused_pack_kernel<uint16_t><<<blocks, PACK_THREADS, 0, r->stream>>>(
			(const uint16_t *)r->io.x, r->io.expert, r->io.weight, r->d.T, (int)r->d.K, r->d.G, (int)r->per_gpu,
			r->fill, (uint16_t *)r->send, r->send_meta, r->slot_map, r->row_bytes / (int64_t)sizeof(uint16_t));
	CUDA_TRY(r, cudaGetLastError(), "fused pack kernel");
	return 0;
}

/* ---- the exchanges ----------------------------------------------------------- */

/* Queue `fn` for every rank inside one NCCL group; the group is closed
 * whatever happens, as NCCL needs. */
template <typename F>
static int nccl_group(mb_a2a_rank *const *ranks, int n, const char *what, F fn, mb_error *err)
{
	ncclResult_t nr = ncclGroupStart(), end;

	for (int i = 0; i < n && nr == ncclSuccess; i++)
		nr = fn(ranks[i]);
	end = ncclGroupEnd();
	if (nr == ncclSuccess)
		nr = end;
	return nr == ncclSuccess ? 0 : nccl_failed(nr, what, err);
}

/* Counts per peer: `per_peer` int32 from `send` + p * per_peer to p, from
 * p into `recv` + p * per_peer; then both read into pinned host memory
 * and every rank's stream waited for. */
static int exchange_counts(mb_a2a_rank *const *ranks, int n, int32_t *(*send_of)(mb_a2a_rank *), int per_peer,
	mb_error *err)
{
	int rc = nccl_group(ranks, n, "count exchange", [&](mb_a2a_rank *r) {
		ncclResult_t nr = ncclSuccess;
		for (int p = 0; p < r->d.G && nr == ncclSuccess; p++) {
			nr = ncclSend(send_of(r) + p * per_peer, (size_t)per_peer, ncclInt32, p, r->comm, r->stream);
			if (nr == ncclSuccess)
				nr = ncclRecv(r->recv_counts + p * per_peer, (size_t)per_peer, ncclInt32, p, r->comm, r->stream);
		}
		return nr;
	}, err);
	if (rc)
		return rc;
	for (int i = 0; i < n; i++) {
		mb_a2a_rank *r = ranks[i];
		const size_t bytes = (size_t)(per_peer * r->d.G) * sizeof(int32_t);
		CUDA_TRY(r, cudaSetDevice(r->device), "cudaSetDevice");
		CUDA_TRY(r, cudaMemcpyAsync(r->h_send_counts, send_of(r), bytes, cudaMemcpyDeviceToHost, r->stream),
			"reading the send counts");
		CUDA_TRY(r, cudaMemcpyAsync(r->h_recv_counts, r->recv_counts, bytes, cudaMemcpyDeviceToHost, r->stream),
			"reading the received counts");
	}
	for (int i = 0; i < n; i++)
		CUDA_TRY(ranks[i], cudaStreamSynchronize(ranks[i]->stream), "waiting for the counts");
	return 0;
}

/* Rows per peer from the counts read back: `per_peer` counts each; the
 * send side at `send_base` + p * `send_stride` rows (stride 0: packed). */
static int layout(mb_a2a_rank *r, int per_peer, int64_t send_stride, mb_error *err)
{
	int64_t send_at = 0, recv_at = 0;

	for (int p = 0; p < r->d.G; p++) {
		int64_t s = 0, v = 0;
		for (int j = 0; j < per_peer; j++) {
			s += r->h_send_counts[p * per_peer + j];
			v += r->h_recv_counts[p * per_peer + j];
		}
		r->send_rows[p] = s;
		r->send_off[p] = send_stride ? p * send_stride : send_at;
		r->recv_rows[p] = v;
		r->recv_off[p] = recv_at;
		send_at += s;
		recv_at += v;
		if (s < 0 || v < 0 || (send_stride && s > send_stride)) {
			return mb_error_set(err, MB_EINVAL, NULL, "rank %d: impossible counts for peer %d (%lld to send, "
				"%lld to receive)", r->rank, p, (long long)s, (long long)v);
		}
	}
	if (recv_at > r->recv_cap || (!send_stride && send_at > r->send_cap)) {
		return mb_error_set(err, MB_EINVAL, NULL, "rank %d: the dispatch brings %lld rows, the buffers hold %lld "
			"(the host's routing and the device's disagree)", r->rank, (long long)recv_at, (long long)r->recv_cap);
	}
	return 0;
}

/* rows of `a` from `a_off`/`a_rows` to each peer, into `b` at
 * `b_off`/`b_rows` from each peer (rows of H elements); plus `meta` the
 * same way when given. */
static ncclResult_t swap_rows(mb_a2a_rank *r, const void *a, const int64_t *a_off, const int64_t *a_rows, void *b,
	const int64_t *b_off, const int64_t *b_rows, const mb_a2a_meta *a_meta, mb_a2a_meta *b_meta)
{
	const ncclDataType_t type = nccl_type(r->d.dtype);
	ncclResult_t nr = ncclSuccess;

	for (int p = 0; p < r->d.G && nr == ncclSuccess; p++) {
		/* a zero-row exchange is skipped on both sides: both know the count */
		if (a_rows[p] > 0) {
			nr = ncclSend((const char *)a + a_off[p] * r->row_bytes, (size_t)(a_rows[p] * r->d.H), type, p, r->comm,
				r->stream);
			if (nr == ncclSuccess && a_meta)
				nr = ncclSend(a_meta + a_off[p], (size_t)a_rows[p] * sizeof(mb_a2a_meta), ncclUint8, p, r->comm,
					r->stream);
		}
		if (nr == ncclSuccess && b_rows[p] > 0) {
			nr = ncclRecv((char *)b + b_off[p] * r->row_bytes, (size_t)(b_rows[p] * r->d.H), type, p, r->comm,
				r->stream);
			if (nr == ncclSuccess && b_meta)
				nr = ncclRecv(b_meta + b_off[p], (size_t)b_rows[p] * sizeof(mb_a2a_meta), ncclUint8, p, r->comm,
					r->stream);
		}
	}
	return nr;
}

static int64_t recv_total(const mb_a2a_rank *r)
{
	int64_t n = 0;

	for (int p = 0; p < r->d.G; p++)
		n += r->recv_rows[p];
	return n;
}

static int32_t *fallback_send_counts(mb_a2a_rank *r)
{
	return r->totals;
}

static int32_t *fused_send_counts(mb_a2a_rank *r)
{
	return r->fill;
}

/* ---- the variants ------------------------------------------------------------- */

/* As a framework's MoE layer: counts, their exchange and the host's read
 * of them (to size the sends), then the pack, the dispatch, the experts,
 * the return and the combine, each after the last. */
static int call_fallback(mb_a2a_rank *const *ranks, int n, mb_error *err)
{
	int rc;

	for (int i = 0; i < n; i++) {
		CUDA_TRY(ranks[i], cudaSetDevice(ranks[i]->device), "cudaSetDevice");
		if ((rc = fallback_count(ranks[i], err)))
			return rc;
	}
	if ((rc = exchange_counts(ranks, n, fallback_send_counts, (int)ranks[0]->per_gpu, err)))
		return rc;
	for (int i = 0; i < n; i++) {
		if ((rc = layout(ranks[i], (int)ranks[i]->per_gpu, 0, err)))
			return rc;
		CUDA_TRY(ranks[i], cudaSetDevice(ranks[i]->device), "cudaSetDevice");
		if ((rc = fallback_pack(ranks[i], err)))
			return rc;
	}
	if ((rc = nccl_group(ranks, n, "fallback dispatch", [](mb_a2a_rank *r) {
		return swap_rows(r, r->send, r->send_off, r->send_rows, r->recv, r->recv_off, r->recv_rows, NULL, NULL);
	}, err)))
		return rc;
	for (int i = 0; i < n; i++) {
		mb_a2a_rank *r = ranks[i];
		const int64_t rows = recv_total(r);
		CUDA_TRY(r, cudaSetDevice(r->device), "cudaSetDevice");
		if (rows > 0) {
			DISPATCH_ROWS(r, fallback_expert_as, r, rows);
			CUDA_TRY(r, cudaGetLastError(), "fallback expert kernel");
		}
	}
	if ((rc = nccl_group(ranks, n, "fallback combine", [](mb_a2a_rank *r) {
		return swap_rows(r, r->out, r->recv_off, r->recv_rows, r->ret, r->send_off, r->send_rows, NULL, NULL);
	}, err)))
		return rc;
	for (int i = 0; i < n; i++) {
		mb_a2a_rank *r = ranks[i];
		CUDA_TRY(r, cudaSetDevice(r->device), "cudaSetDevice");
		DISPATCH_ROWS(r, fallback_combine_as, r);
		CUDA_TRY(r, cudaGetLastError(), "fallback combine kernel");
	}
	return 0;
}

static int call_fused(mb_a2a_rank *const *ranks, int n, mb_error *err)
{
	int rc;

	for (int i = 0; i < n; i++) {
		CUDA_TRY(ranks[i], cudaSetDevice(ranks[i]->device), "cudaSetDevice");
		if ((rc = fused_pack(ranks[i], err)))
			return rc;
	}
	if ((rc = exchange_counts(ranks, n, fused_send_counts, 1, err)))
		return rc;
	for (int i = 0; i < n; i++)
		if ((rc = layout(ranks[i], 1, ranks[i]->d.T, err)))
			return rc;
	if ((rc = nccl_group(ranks, n, "fused dispatch", [](mb_a2a_rank *r) {
		return swap_rows(r, r->send, r->send_off, r->send_rows, r->recv, r->recv_off, r->recv_rows, r->send_meta,
			r->recv_meta);
	}, err)))
		return rc;
	for (int i = 0; i < n; i++) {
		mb_a2a_rank *r = ranks[i];
		const int64_t rows = recv_total(r);
		CUDA_TRY(r, cudaSetDevice(r->device), "cudaSetDevice");
		if (rows > 0) {
			DISPATCH_ROWS(r, fused_expert_as, r, rows);
			CUDA_TRY(r, cudaGetLastError(), "fused expert kernel");
		}
	}
	if ((rc = nccl_group(ranks, n, "fused combine", [](mb_a2a_rank *r) {
		return swap_rows(r, r->out, r->recv_off, r->recv_rows, r->ret, r->send_off, r->send_rows, NULL, NULL);
	}, err)))
		return rc;
	for (int i = 0; i < n; i++) {
		mb_a2a_rank *r = ranks[i];
		CUDA_TRY(r, cudaSetDevice(r->device), "cudaSetDevice");
		DISPATCH_ROWS(r, fused_combine_as, r);
		CUDA_TRY(r, cudaGetLastError(), "fused combine kernel");
	}
	return 0;
}

/* Equal counts: every peer's chunk is vendor_rows rows at p * vendor_rows. */
static void vendor_layout(mb_a2a_rank *r)
{
	for (int p = 0; p < r->d.G; p++) {
		r->send_rows[p] = r->recv_rows[p] = r->vendor_rows;
		r->send_off[p] = r->recv_off[p] = p * r->vendor_rows;
	}
}

static int call_vendor(mb_a2a_rank *const *ranks, int n, bool alltoall, mb_error *err)
{
	int rc;

	for (int i = 0; i < n; i++)
		vendor_layout(ranks[i]);
	for (int leg = 0; leg < 2; leg++) {
		/* there (send -> recv), and back (recv -> ret) */
		auto sendrecv = [leg](mb_a2a_rank *r) {
			return leg == 0 ? swap_rows(r, r->send, r->send_off, r->send_rows, r->recv, r->recv_off, r->recv_rows,
					NULL, NULL)
				: swap_rows(r, r->recv, r->recv_off, r->recv_rows, r->ret, r->send_off, r->send_rows, NULL, NULL);
		};
#if HAVE_NCCL_ALLTOALL
		auto a2a = [leg](mb_a2a_rank *r) {
			return ncclAlltoAll(leg == 0 ? r->send : r->recv, leg == 0 ? r->recv : r->ret,
				(size_t)(r->vendor_rows * r->d.H), nccl_type(r->d.dtype), r->comm, r->stream);
		};
		if (alltoall && ncclAlltoAll == NULL)
			return mb_error_set(err, MB_EUNSUPPORTED, NULL, "ncclAlltoAll is not in the NCCL library loaded "
				"(%d); it came with 2.28", mb_a2a_nccl_version());
		if ((rc = alltoall ? nccl_group(ranks, n, "ncclAlltoAll", a2a, err)
			: nccl_group(ranks, n, "vendor send/recv", sendrecv, err)))
			return rc;
#else
		if (alltoall)
			return mb_error_set(err, MB_EUNSUPPORTED, NULL, "ncclAlltoAll needs NCCL 2.28 or later; built with %d",
				NCCL_VERSION_CODE);
		if ((rc = nccl_group(ranks, n, "vendor send/recv", sendrecv, err)))
			return rc;
#endif
	}
	return 0;
}

extern "C" int mb_a2a_call(mb_a2a_rank *const *ranks, int n, mb_error *err)
{
	if (n < 1)
		return mb_error_set(err, MB_EINVAL, NULL, "no ranks");
	switch (ranks[0]->v) {
	case MB_A2A_FALLBACK:
		return call_fallback(ranks, n, err);
	case MB_A2A_FUSED:
		return call_fused(ranks, n, err);
	case MB_A2A_VENDOR_ALLTOALL:
		return call_vendor(ranks, n, true, err);
	case MB_A2A_VENDOR_SENDRECV:
		return call_vendor(ranks, n, false, err);
	default:
		return mb_error_set(err, MB_EINVAL, NULL, "unknown variant %d", (int)ranks[0]->v);
	}
}

#else /* !MB_HAVE_NCCL */

/* Built without NCCL: no rank can be opened, so nothing else is reached. */
extern "C" int mb_a2a_nccl_version(void)
{
	return 0;
}

extern "C" int mb_a2a_rank_open(mb_a2a_rank **out, const mb_a2a_dims *d, mb_a2a_variant v, int rank, int device,
	void *comm, void *stream, const mb_a2a_io *io, int64_t recv_cap_rows, mb_error *err)
{
	*out = NULL;
	return mb_error_set(err, MB_EUNSUPPORTED, NULL, "built without NCCL");
}

extern "C" void mb_a2a_rank_close(mb_a2a_rank *r)
{
}

extern "C" int mb_a2a_rank_poison(mb_a2a_rank *r, mb_error *err)
{
	return mb_error_set(err, MB_EUNSUPPORTED, NULL, "built without NCCL");
}

extern "C" int mb_a2a_call(mb_a2a_rank *const *ranks, int n, mb_error *err)
{
	return mb_error_set(err, MB_EUNSUPPORTED, NULL, "built without NCCL");
}

extern "C" void mb_a2a_rank_view(const mb_a2a_rank *r, mb_a2a_view *out)
{
	memset(out, 0, sizeof(*out));
}

#endif
