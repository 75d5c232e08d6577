/* moe_ffn: y[t] = sum_k w[t,k] * relu(x[t] W1_e)^2 W2_e over the K experts
 * e = chosen(t)[k] of a biased top-K router, and its sibling
 * moe_ffn_swiglu: y[t] = sum_k w[t,k] * (silu(x[t] W1g_e) * (x[t] W1u_e))
 * W2_e over the same experts and weights (src/reference/moe_ffn.c has the
 * math, the bias and the tolerances). bf16 and fp16. Axes, in catalog order:
 * T, H, E, K, F. In x [T,H], logits [T,E], W1 [E*H,F] (moe_ffn) or
 * [E*H,2F] (moe_ffn_swiglu), W2 [E*F,H]; out y [T,H].
 *
 * moe_ffn_swiglu's W1: expert e's [H, 2F] block alternates 8 gate columns
 * and the 8 up columns of the same activation columns: activation column f
 * has its gate at column (f / 8) * 16 + f % 8 and its up 8 further on
 * (GG_GLU_BLOCK, grouped_gemm.cuh). An 8-column block is one n8 fragment
 * of the grouped GEMM, so a gate and its up meet in one thread's
 * accumulators, and the cuBLAS paths' SwiGLU pass reads a gate vector and
 * its up vector as one 32-byte run.
 *
 * Three GPU variants per row share the router and the sort; the two rows'
 * variants differ only in the activation (moe_act):
 *   fused:          route, counting sort of the (token, k) pairs by expert
 *                   on the device, our grouped GEMM with relu^2 or SwiGLU
 *                   in GEMM1's epilogue and the routing weight in GEMM2's,
 *                   a combine over k. No host sync, no padding:
 *                   graph-capturable. The grouped GEMM is the wgmma/TMA
 *                   kernel (grouped_gemm_sm90.cuh) where the device is
 *                   compute capability 9.0 and the build has sm_90a code
 *                   for it, else the mma.sync kernel (grouped_gemm.cuh);
 *                   MEGABENCH_MOE_GEMM=mma forces the latter, =wgmma the
 *                   former (an error where it cannot run). The kernel
 *                   names CUPTI records in the receipt say which ran:
 *                   moe_ffn_grouped_gemm_wgmma_kernel or
 *                   moe_ffn_grouped_gemm_kernel.
 *   standard:       a framework's path without grouped GEMM: route, count,
 *                   read the counts back (host sync), permute the tokens
 *                   into per-expert buffers padded to one capacity, two
 *                   cuBLAS strided-batched GEMMs over all E experts with an
 *                   activation pass between, un-permute with the weighted
 *                   sum.
 *   cublas_grouped: the fused variant's route and sort, the counts read
 *                   back (host sync), the tokens gathered into sorted order,
 *                   two cublasGemmGroupedBatchedEx calls over the non-empty
 *                   experts with an activation pass between, the weighted
 *                   sum.
 * Every variant stores the [rows, F] activation in the case dtype (bf16
 * or fp16, written T below); the cuBLAS ones also store GEMM1's output
 * (x W1, F or 2F columns) in T before their
 * activation pass (relu^2 in place; SwiGLU into a buffer of its own). All
 * scratch lives in workspace slots (workspace.h).
 *
 * Routing is bit-identical to the reference: the score is one fp32 add
 * (__fadd_rn), the top K are kept by strict > over experts in ascending
 * order (ties to the lower index), and the softmax is the reference's
 * expression (expf of score - max, sum in rank order, IEEE division).
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/grouped_gemm.cuh"
#include "kernels/grouped_gemm_sm90.cuh"
#include "kernels/launch.h"
#include "kernels/vec.cuh"
#include "kernels/workspace.h"

enum { AX_T, AX_H, AX_E, AX_K, AX_F };

/* The router bias, as src/reference/moe_ffn.c defines it (which derives
 * the loads it gives): MOE_BIAS_HEAVY on every MOE_BIAS_PERIOD-th expert. */
#define MOE_BIAS_PERIOD 8
#define MOE_BIAS_HEAVY 0.921875f
/* The reference's check_shape limits, which the launches re-check. */
#define MOE_K_MAX 16
#define MOE_E_MAX 512
#define MOE_TILE_COLS 128

/* Router and sort: one thread per token, MOE_ROUTE_TOKENS tokens (8
 * warps) per block; each block's per-expert histogram goes to hist[block]
 * so that the sort is a deterministic counting sort. */
#define MOE_ROUTE_TOKENS 256
#define MOE_ROUTE_WARPS (MOE_ROUTE_TOKENS / 32)
#define MOE_SCAN_THREADS 1024
/* Capacity of the standard variant: the largest load rounded up to this. */
#define MOE_CAPACITY_ROUND 128
#define MOE_WS_ALIGN 256

/* The expert activation, which tells the two rows apart. */
typedef enum moe_act { MOE_RELU2, MOE_SWIGLU } moe_act;

/* GEMM1's output columns: F, or 2F for SwiGLU's gates and ups. */
static int64_t moe_w1_cols(moe_act act, int64_t ffn)
{
	return act == MOE_SWIGLU ? 2 * ffn : ffn;
}

/* ---- routing ---------------------------------------------------------------- */

__device__ __forceinline__ float moe_bias(int e)
{
	return e % MOE_BIAS_PERIOD == 0 ? MOE_BIAS_HEAVY : 0.0f;
}

/* Per token: the K chosen experts (eid[t*K + k], rank order) and their
 * softmax weights (wt); per block: hist[block * E + e], the block's pairs
 * routed to e. */
template <typename T>
__global__ void __launch_bounds__(MOE_ROUTE_TOKENS) moe_ffn_route_kernel(const T *__restrict__ logits,
	int64_t tokens, int experts, int k_top, int32_t *__restrict__ eid, float *__restrict__ wt,
	int32_t *__restrict__ hist)
{
	extern __shared__ int32_t s_hist[]; /* [experts] */
	const int64_t t = (int64_t)blockIdx.x * MOE_ROUTE_TOKENS + threadIdx.x;

	for (int e = threadIdx.x; e < experts; e += blockDim.x)
		s_hist[e] = 0;
	__syncthreads();
	if (t < tokens) {
		const T *row = logits + t * experts;
		float score[MOE_K_MAX];
		int id[MOE_K_MAX];
		int n = 0;
		for (int e = 0; e < experts; e++) {
			const float s = __fadd_rn(mb_to_f32<T>(row[e]), moe_bias(e));
			if (n < k_top || s > score[k_top - 1]) {
				/* insert below every kept score >= s (those have lower
				 * indices, so ties keep the lower index first) */
				int pos = n < k_top ? n : k_top - 1;
				while (pos > 0 && s > score[pos - 1]) {
					score[pos] = score[pos - 1];
					id[pos] = id[pos - 1];
					pos--;
				}
				score[pos] = s;
				id[pos] = e;
				if (n < k_top)
					n++;
			}
		}
		float ex[MOE_K_MAX], sum = 0.0f;
		for (int k = 0; k < k_top; k++) {
			ex[k] = expf(__fsub_rn(score[k], score[0]));
			sum = __fadd_rn(sum, ex[k]);
		}
		for (int k = 0; k < k_top; k++) {
			eid[t * k_top + k] = id[k];
			wt[t * k_top + k] = __fdiv_rn(ex[k], sum);
			atomicAdd(&s_hist[id[k]], 1);
		}
	}
	__syncthreads();
	for (int e = threadIdx.x; e < experts; e += blockDim.x)
		hist[(int64_t)blockIdx.x * experts + e] = s_hist[e];
}

/* The tile schedule of one grouped GEMM: BM rows per m-tile, n_tiles
 * column tiles; counter (the wgmma kernel's next tile, or NULL) is zeroed
 * with it. */
typedef struct moe_tiles {
	int bm, n_tiles;
	int32_t *tile_off; /* [E + 1] */
	int32_t *counter;
} moe_tiles;

/* Device pointer arrays for cublasGemmGroupedBatchedEx, one entry per
 * non-empty expert in ascending order (the host compacts the same way). */
template <typename T> struct moe_ptr_args {
	const T *x_sorted, *w1, *w2;
	T *h, *o;
	const void **a1, **b1, **a2, **b2;
	void **c1, **c2;
	int hidden, ffn;
};

/* One block: counts[e] (sum over blocks), base[b * E + e] (where block b's
 * pairs of expert e start in the sorted list), group_off[E + 1] (int64),
 * the two GEMMs' tile schedules, and (ptrs.a1 != NULL) the cuBLAS pointer
 * arrays. GLU (moe_ffn_swiglu): W1_e and GEMM1's output rows are 2F wide
 * and GEMM2 reads `act` ([rows, F]) rather than h; moe_ffn's kernel passes
 * h and compiles to what it did before the swiglu row. */
template <typename T, bool GLU>
__device__ __forceinline__ void moe_sort_scan(const int32_t *__restrict__ hist, int blocks, int experts,
	int32_t *__restrict__ counts, int32_t *__restrict__ base, int64_t *__restrict__ group_off,
	const moe_tiles &t1, const moe_tiles &t2, const moe_ptr_args<T> &ptrs, const T *act, int64_t *s_off)
{
	const int w1_cols = GLU ? 2 * ptrs.ffn : ptrs.ffn;

	for (int e = threadIdx.x; e < experts; e += blockDim.x) {
		int32_t run = 0;
		for (int b = 0; b < blocks; b++) {
			const int32_t v = hist[(int64_t)b * experts + e];
			base[(int64_t)b * experts + e] = run;
			run += v;
		}
		counts[e] = run;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		int64_t off = 0;
		int32_t tiles1 = 0, tiles2 = 0, nonempty = 0;
		for (int e = 0; e < experts; e++) {
			const int32_t c = counts[e];
			s_off[e] = off;
			group_off[e] = off;
			t1.tile_off[e] = tiles1;
			t2.tile_off[e] = tiles2;
			tiles1 += (c + t1.bm - 1) / t1.bm * t1.n_tiles;
			tiles2 += (c + t2.bm - 1) / t2.bm * t2.n_tiles;
			if (ptrs.a1 && c > 0) {
				const int j = nonempty++;
				ptrs.a1[j] = ptrs.w1 + (int64_t)e * ptrs.hidden * w1_cols;
				ptrs.b1[j] = ptrs.x_sorted + off * ptrs.hidden;
				ptrs.c1[j] = ptrs.h + off * w1_cols;
				ptrs.a2[j] = ptrs.w2 + (int64_t)e * ptrs.ffn * ptrs.hidden;
				ptrs.b2[j] = act + off * ptrs.ffn;
				ptrs.c2[j] = ptrs.o + off * ptrs.hidden;
			}
			off += c;
		}
		s_off[experts] = off;
		group_off[experts] = off;
		t1.tile_off[experts] = tiles1;
		t2.tile_off[experts] = tiles2;
		if (t1.counter)
			*t1.counter = 0;
		if (t2.counter)
			*t2.counter = 0;
	}
	__syncthreads();
	for (int64_t i = threadIdx.x; i < (int64_t)blocks * experts; i += blockDim.x)
		base[i] += (int32_t)s_off[i % experts];
}

template <typename T>
__global__ void __launch_bounds__(MOE_SCAN_THREADS) moe_ffn_sort_scan_kernel(const int32_t *__restrict__ hist,
	int blocks, int experts, int32_t *__restrict__ counts, int32_t *__restrict__ base,
	int64_t *__restrict__ group_off, moe_tiles t1, moe_tiles t2, moe_ptr_args<T> ptrs)
{
	__shared__ int64_t s_off[MOE_E_MAX + 1];

	moe_sort_scan<T, false>(hist, blocks, experts, counts, base, group_off, t1, t2, ptrs, ptrs.h, s_off);
}

template <typename T>
__global__ void __launch_bounds__(MOE_SCAN_THREADS) moe_ffn_sort_scan_glu_kernel(const int32_t *__restrict__ hist,
	int blocks, int experts, int32_t *__restrict__ counts, int32_t *__restrict__ base,
	int64_t *__restrict__ group_off, moe_tiles t1, moe_tiles t2, moe_ptr_args<T> ptrs, const T *act)
{
	__shared__ int64_t s_off[MOE_E_MAX + 1];

	moe_sort_scan<T, true>(hist, blocks, experts, counts, base, group_off, t1, t2, ptrs, act, s_off);
}

/* Per route block: each pair (t, k) goes to sorted[base[b, e] + its rank
 * among the block's pairs of expert e in token order] (a token picks an
 * expert at most once, so the rank is the count of earlier tokens that
 * picked e: per warp a bitmask of the lanes that did, per block a prefix
 * over the warps). inv (optional) gets the inverse: the sorted position of
 * each pair. */
__global__ void __launch_bounds__(MOE_ROUTE_TOKENS) moe_ffn_sort_scatter_kernel(const int32_t *__restrict__ eid,
	int64_t tokens, int experts, int k_top, const int32_t *__restrict__ base, int32_t *__restrict__ sorted,
	int32_t *__restrict__ inv)
{
	extern __shared__ uint32_t s_mask[]; /* [MOE_ROUTE_WARPS][experts], then the warp prefix */
	int32_t *s_pre = reinterpret_cast<int32_t *>(s_mask + MOE_ROUTE_WARPS * experts);
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const int64_t t = (int64_t)blockIdx.x * MOE_ROUTE_TOKENS + threadIdx.x;

	for (int i = threadIdx.x; i < MOE_ROUTE_WARPS * experts; i += blockDim.x)
		s_mask[i] = 0;
	__syncthreads();
	if (t < tokens)
		for (int k = 0; k < k_top; k++)
			atomicOr(&s_mask[warp * experts + eid[t * k_top + k]], 1u << lane);
	__syncthreads();
	for (int e = threadIdx.x; e < experts; e += blockDim.x) {
		int32_t run = 0;
		for (int w = 0; w < MOE_ROUTE_WARPS; w++) {
			s_pre[w * experts + e] = run;
			run += __popc(s_mask[w * experts + e]);
		}
	}
	__syncthreads();
	if (t < tokens) {
		const uint32_t below = (1u << lane) - 1u;
		for (int k = 0; k < k_top; k++) {
			const int64_t p = t * k_top + k;
			const int e = eid[p];
			const int32_t pos = base[(int64_t)blockIdx.x * experts + e] + s_pre[warp * experts + e]
				+ __popc(s_mask[warp * experts + e] & below);
			sorted[pos] = (int32_t)p;
			if (inv)
				inv[p] = pos;
		}
	}
}

/* ---- workspace ------------------------------------------------------------------ */

/* Carves consecutive 256-byte aligned pieces out of one slot: first pass
 * (base == NULL) to size it, second to hand out pointers. */
typedef struct moe_carve {
	char *base;
	size_t used;
} moe_carve;

static void *moe_take(moe_carve *c, size_t bytes)
{
	void *p = c->base ? c->base + c->used : NULL;
	c->used += (bytes + MOE_WS_ALIGN - 1) / MOE_WS_ALIGN * MOE_WS_ALIGN;
	return p;
}

/* The router's and the sort's scratch, shared by every variant. */
typedef struct moe_route_ws {
	int32_t *eid, *hist, *counts, *base, *sorted, *inv, *tile1, *tile2;
	int32_t *counters; /* the wgmma kernel's tile counters, one per GEMM */
	float *wt;
	int64_t *group_off;
	const void **ptrs; /* 6 * E pointers for the cuBLAS grouped calls */
} moe_route_ws;

static int64_t moe_route_blocks(int64_t tokens)
{
	return (tokens + MOE_ROUTE_TOKENS - 1) / MOE_ROUTE_TOKENS;
}

static void moe_route_carve(moe_carve *c, moe_route_ws *w, int64_t tokens, int64_t experts, int64_t k_top)
{
	const int64_t pairs = tokens * k_top, blocks = moe_route_blocks(tokens);
	w->eid = (int32_t *)moe_take(c, (size_t)pairs * sizeof(int32_t));
	w->wt = (float *)moe_take(c, (size_t)pairs * sizeof(float));
	w->hist = (int32_t *)moe_take(c, (size_t)(blocks * experts) * sizeof(int32_t));
	w->base = (int32_t *)moe_take(c, (size_t)(blocks * experts) * sizeof(int32_t));
	w->counts = (int32_t *)moe_take(c, (size_t)experts * sizeof(int32_t));
	w->sorted = (int32_t *)moe_take(c, (size_t)pairs * sizeof(int32_t));
	w->inv = (int32_t *)moe_take(c, (size_t)pairs * sizeof(int32_t));
	w->tile1 = (int32_t *)moe_take(c, (size_t)(experts + 1) * sizeof(int32_t));
	w->tile2 = (int32_t *)moe_take(c, (size_t)(experts + 1) * sizeof(int32_t));
	w->group_off = (int64_t *)moe_take(c, (size_t)(experts + 1) * sizeof(int64_t));
	w->counters = (int32_t *)moe_take(c, 2 * sizeof(int32_t));
	w->ptrs = (const void **)moe_take(c, (size_t)(6 * experts) * sizeof(void *));
}

static mb_ws_slot route_slot;

static int moe_route_reserve(moe_route_ws *w, int64_t tokens, int64_t experts, int64_t k_top)
{
	moe_carve c = {NULL, 0};
	void *mem = NULL;
	int rc;

	moe_route_carve(&c, w, tokens, experts, k_top);
	if ((rc = mb_ws_reserve(&route_slot, c.used, &mem)) != 0)
		return rc;
	c = (moe_carve){(char *)mem, 0};
	moe_route_carve(&c, w, tokens, experts, k_top);
	return 0;
}

/* ---- shape checks -------------------------------------------------------------- */

/* The reference's check_shape, again (a launch may be called directly),
 * plus what the 16-byte accesses need. */
static bool moe_shape_ok(const int64_t *axis, const void *const *in, void *const *out)
{
	const int64_t t = axis[AX_T], h = axis[AX_H], e = axis[AX_E], k = axis[AX_K], f = axis[AX_F];
	if (t < 1 || h < 1 || e < 1 || k < 1 || f < 1 || k > e || k > MOE_K_MAX || e > MOE_E_MAX)
		return false;
	if (h % MOE_TILE_COLS != 0 || f % MOE_TILE_COLS != 0 || t > INT32_MAX / k || h > INT32_MAX / 8
		|| f > INT32_MAX / 8)
		return false;
	for (int i = 0; i < 4; i++)
		if (!mb_aligned16(in[i]))
			return false;
	return mb_aligned16(out[0]);
}

/* Route, and with `sort` sort: launches route, and for the sorting
 * variants sort_scan and sort_scatter. glu_act: the [rows, F] SwiGLU activation the
 * cuBLAS pointers' GEMM2 reads (moe_ffn_swiglu's cublas_grouped), else
 * NULL (GEMM2 reads h, or there are no pointers). */
template <typename T>
static int moe_route_sort(cudaStream_t stream, const int64_t *axis, const T *logits, moe_route_ws *w,
	moe_tiles t1, moe_tiles t2, moe_ptr_args<T> ptrs, const T *glu_act, bool sort, bool want_inv)
{
	const int64_t tokens = axis[AX_T];
	const int experts = (int)axis[AX_E], k_top = (int)axis[AX_K];
	const int64_t blocks = moe_route_blocks(tokens);
	cudaError_t ce;

	if (blocks > INT32_MAX)
		return (int)cudaErrorInvalidValue;
	moe_ffn_route_kernel<<<(unsigned)blocks, MOE_ROUTE_TOKENS, (size_t)experts * sizeof(int32_t), stream>>>(
		logits, tokens, experts, k_top, w->eid, w->wt, w->hist);
	if ((ce = cudaGetLastError()) != cudaSuccess || !sort)
		return (int)ce;
	if (glu_act)
		moe_ffn_sort_scan_glu_kernel<<<1, MOE_SCAN_THREADS, 0, stream>>>(w->hist, (int)blocks, experts,
			w->counts, w->base, w->group_off, t1, t2, ptrs, glu_act);
	else
		moe_ffn_sort_scan_kernel<<<1, MOE_SCAN_THREADS, 0, stream>>>(w->hist, (int)blocks, experts, w->counts,
			w->base, w->group_off, t1, t2, ptrs);
	if ((ce = cudaGetLastError()) != cudaSuccess)
		return (int)ce;
	moe_ffn_sort_scatter_kernel<<<(unsigned)blocks, MOE_ROUTE_TOKENS,
		(size_t)(2 * MOE_ROUTE_WARPS * experts) * sizeof(uint32_t), stream>>>(w->eid, tokens, experts, k_top,
		w->base, w->sorted, want_inv ? w->inv : NULL);
	return (int)cudaGetLastError();
}

/* ---- combine kernels ------------------------------------------------------------- */

/* y[t, :] = sum_k rows[t*K + k, :] in k order (fp32), the rows already
 * weighted (fused: GEMM2's epilogue wrote them by pair index). One thread
 * per 8 columns of a token. */
template <typename T>
__global__ void __launch_bounds__(MB_FLAT_THREADS) moe_ffn_combine_kernel(const T *__restrict__ rows,
	int64_t tokens, int hidden, int k_top, T *__restrict__ y)
{
	const int64_t vecs_per_row = hidden / 8;
	const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= tokens * vecs_per_row)
		return;
	const int64_t t = i / vecs_per_row, col = (i % vecs_per_row) * 8;
	float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
	for (int k = 0; k < k_top; k++) {
		mb_packed<T, 8> v;
		v.load(rows + (t * k_top + k) * hidden + col);
#pragma unroll
		for (int j = 0; j < 8; j++)
			acc[j] += v.get(j);
	}
	mb_store_f32<T, 8>(y + t * hidden + col, acc);
}

/* y[t, :] = sum_k wt[t*K + k] * rows[at(t*K + k), :] in k order (fp32),
 * at = the pair's row in the GEMM output: `pos` (int64, standard's padded
 * layout) or `inv` (int32, cublas_grouped's sorted layout). */
template <typename T, typename POS>
__global__ void __launch_bounds__(MB_FLAT_THREADS) moe_ffn_lib_combine_kernel(const T *__restrict__ rows,
	const POS *__restrict__ at, const float *__restrict__ wt, int64_t tokens, int hidden, int k_top,
	T *__restrict__ y)
{
	const int64_t vecs_per_row = hidden / 8;
	const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= tokens * vecs_per_row)
		return;
	const int64_t t = i / vecs_per_row, col = (i % vecs_per_row) * 8;
	float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
	for (int k = 0; k < k_top; k++) {
		const int64_t p = t * k_top + k;
		const float w = wt[p];
		mb_packed<T, 8> v;
		v.load(rows + (int64_t)at[p] * hidden + col);
#pragma unroll
		for (int j = 0; j < 8; j++)
			acc[j] += w * v.get(j);
	}
	mb_store_f32<T, 8>(y + t * hidden + col, acc);
}

/* The cuBLAS variants' activation pass, as a framework's flat elementwise
 * kernel (vec.cuh): this thread's vectors of 8 activation elements, every
 * load issued before the math and the stores. relu^2 rewrites vector i of
 * h in place; SwiGLU reads, with the 8-column interleave (top of this
 * file), vector i's gates at h[16 i .. 16 i + 7] and its ups right after,
 * whatever the row width, and writes act. */
template <typename T, moe_act ACT>
__device__ __forceinline__ void moe_lib_activate(const T *h, T *act, int64_t nvec)
{
	constexpr int H_VEC = ACT == MOE_SWIGLU ? 2 * GG_GLU_BLOCK : 8; /* h elements per activation vector */
	mb_packed<T, 8> in[MB_FLAT_VECS], up[MB_FLAT_VECS];
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const int64_t i = mb_flat_index<int64_t>(k);
		if (i < nvec) {
			in[k].load(h + i * H_VEC);
			if (ACT == MOE_SWIGLU)
				up[k].load(h + i * H_VEC + GG_GLU_BLOCK);
		}
	}
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const int64_t i = mb_flat_index<int64_t>(k);
		if (i < nvec) {
			float out[8];
#pragma unroll
			for (int j = 0; j < 8; j++) {
				const float x = in[k].get(j);
				if (ACT == MOE_SWIGLU)
					out[j] = gg_silu(x) * up[k].get(j);
				else
					out[j] = x > 0.0f ? x * x : 0.0f;
			}
			mb_store_f32<T, 8>(act + i * 8, out);
		}
	}
}

/* relu(v)^2 in place over n elements (n a multiple of 8, 16-byte aligned). */
template <typename T>
__global__ void __launch_bounds__(MB_FLAT_THREADS) moe_ffn_lib_relu2_kernel(T *__restrict__ v, int64_t nvec)
{
	moe_lib_activate<T, MOE_RELU2>(v, v, nvec);
}

/* act = silu(gate) * up over n activation elements from h's 2n (n a
 * multiple of 8, 16-byte aligned). */
template <typename T>
__global__ void __launch_bounds__(MB_FLAT_THREADS) moe_ffn_lib_swiglu_kernel(const T *__restrict__ h,
	T *__restrict__ act, int64_t nvec)
{
	moe_lib_activate<T, MOE_SWIGLU>(h, act, nvec);
}

static int moe_flat_launch_blocks(int64_t n, unsigned *out)
{
	const int64_t blocks = (n + MB_FLAT_THREADS - 1) / MB_FLAT_THREADS;
	if (blocks < 1 || blocks > INT32_MAX)
		return (int)cudaErrorInvalidValue;
	*out = (unsigned)blocks;
	return 0;
}

/* The cuBLAS variants' activation pass over `elems` activation elements:
 * relu^2 in place on h, or SwiGLU from h (2 * elems) into act. */
template <typename T>
static int moe_activate(cudaStream_t stream, moe_act act_fn, T *h, T *act, int64_t elems)
{
	const unsigned blocks = mb_flat_blocks(elems / 8);
	if (blocks == 0)
		return (int)cudaErrorInvalidValue;
	if (act_fn == MOE_SWIGLU)
		moe_ffn_lib_swiglu_kernel<<<blocks, MB_FLAT_THREADS, 0, stream>>>(h, act, elems / 8);
	else
		moe_ffn_lib_relu2_kernel<<<blocks, MB_FLAT_THREADS, 0, stream>>>(h, elems / 8);
	return (int)cudaGetLastError();
}

/* ---- fused ------------------------------------------------------------------------ */

/* Which grouped GEMM the fused variant runs (the top of this file). */
typedef enum moe_gemm_path { MOE_GEMM_MMA, MOE_GEMM_WGMMA } moe_gemm_path;

#define MOE_GEMM_ENV "MEGABENCH_MOE_GEMM"

/* MEGABENCH_MOE_GEMM=auto|mma|wgmma as gw_pick_wgmma reads it. */
static int moe_gemm_path_pick(moe_gemm_path *out)
{
	bool wgmma = false;
	int rc = gw_pick_wgmma(MOE_GEMM_ENV, &wgmma);

	if (rc == 0)
		*out = wgmma ? MOE_GEMM_WGMMA : MOE_GEMM_MMA;
	return rc;
}

/* The mma.sync kernel's tile shape for a grouped GEMM with n columns:
 * 128x256 when n is a whole number of 256-column tiles (GEMM2 at H =
 * 2048), else 256x128 (GEMM1 at F = 1408 = 11 x 128). */
static bool moe_wide_tiles(int64_t n)
{
	return n % 256 == 0;
}

/* The tile schedule of a grouped GEMM with n columns on `path`: the wgmma
 * kernel's 128-row tiles, 256 columns but a narrow last one
 * (grouped_gemm_sm90_layout.h), or the mma.sync kernel's shape above. */
static moe_tiles moe_gemm_tiles(moe_gemm_path path, int64_t n, int32_t *tile_off, int32_t *counter)
{
	if (path == MOE_GEMM_WGMMA)
		return moe_tiles{GW_BM, gw_n_tiles((int)n), tile_off, counter};
	const bool wide = moe_wide_tiles(n);
	return moe_tiles{wide ? 128 : 256, (int)(n / (wide ? 256 : 128)), tile_off, NULL};
}

/* Once per kernel, on its first call (the harness's checked call, never
 * captured): the SM count, and the dynamic shared memory it needs beyond
 * the default 48 KB. */
static int moe_kernel_prepare(const void *kernel, int smem_bytes, bool *done, int *sms)
{
	int device = 0;
	cudaError_t ce = cudaSuccess;

	if (*done)
		return 0;
	if ((ce = cudaGetDevice(&device)) == cudaSuccess)
		ce = cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, device);
	if (ce == cudaSuccess)
		ce = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
	*done = ce == cudaSuccess;
	return (int)ce;
}

/* A persistent grid: one block per SM, or one per tile when there are
 * fewer. */
static unsigned moe_persistent_grid(int64_t max_tiles, int sms)
{
	const int64_t grid = max_tiles < sms ? max_tiles : sms;
	return grid < 1 ? 1u : (unsigned)grid;
}

template <typename T, int BM, int BN, bool GATHER, int EPI>
static int moe_gemm_mma(cudaStream_t stream, const gg_params<T> &p, int64_t max_tiles)
{
	static bool ready;
	static int sms;
	auto kernel = moe_ffn_grouped_gemm_kernel<T, BM, BN, GATHER, EPI>;
	int rc = moe_kernel_prepare((const void *)kernel, gg_cfg<BM, BN>::SMEM_BYTES, &ready, &sms);

	if (rc != 0)
		return rc;
	kernel<<<moe_persistent_grid(max_tiles, sms), GG_THREADS, gg_cfg<BM, BN>::SMEM_BYTES, stream>>>(p);
	return (int)cudaGetLastError();
}

/* The wgmma kernel: p's fields, B's tensor map over [groups * KD, N] and,
 * where A's rows are not gathered, A's over [a_rows, KD] (the maps hold
 * this call's pointers, so they are made on every call: host work only,
 * captured by value into a graph). */
template <typename T, bool GATHER, int EPI>
static int moe_gemm_wgmma(cudaStream_t stream, const gg_params<T> &p, int64_t a_rows, int64_t max_tiles)
{
	static bool ready;
	static int sms;
	auto kernel = moe_ffn_grouped_gemm_wgmma_kernel<T, GATHER, EPI>;
	int rc = moe_kernel_prepare((const void *)kernel, GW_SMEM_BYTES, &ready, &sms);
	gw_params<T> w;

	if (rc != 0)
		return rc;
	memset(&w, 0, sizeof(w));
	w.g = p;
	if ((rc = gw_tmap_2d<T>(&w.tmap_b, p.b, (int64_t)p.groups * p.kd, p.n, GW_BK)) != 0)
		return rc;
	if (!GATHER && (rc = gw_tmap_2d<T>(&w.tmap_a, p.a, a_rows, p.kd, GW_A_BOX_ROWS)) != 0)
		return rc;
	kernel<<<moe_persistent_grid(max_tiles, sms), GW_THREADS, GW_SMEM_BYTES, stream>>>(w);
	return (int)cudaGetLastError();
}

/* The most tiles a schedule can have: sum over groups of ceil(rows / bm)
 * is at most rows / bm + groups. */
static int64_t moe_max_tiles(int64_t pairs, int64_t experts, const moe_tiles &t)
{
	return (pairs / t.bm + experts) * t.n_tiles;
}

/* GEMM1 or GEMM2 on `path`, at the tile shape moe_gemm_tiles gave; a_rows:
 * A's rows when they are not gathered. */
template <typename T, bool GATHER, int EPI>
static int moe_gemm(cudaStream_t stream, moe_gemm_path path, const gg_params<T> &p, int64_t a_rows,
	int64_t max_tiles)
{
	if (path == MOE_GEMM_WGMMA)
		return moe_gemm_wgmma<T, GATHER, EPI>(stream, p, a_rows, max_tiles);
	return moe_wide_tiles(p.n) ? moe_gemm_mma<T, 128, 256, GATHER, EPI>(stream, p, max_tiles)
				   : moe_gemm_mma<T, 256, 128, GATHER, EPI>(stream, p, max_tiles);
}

static mb_ws_slot fused_act_slot, fused_rows_slot;

template <typename T>
static int moe_fused(moe_act act_fn, cudaStream_t s, const int64_t *axis, const void *const *in, void *const *out)
{
	const int64_t tokens = axis[AX_T], hidden = axis[AX_H], experts = axis[AX_E], k_top = axis[AX_K];
	const int64_t ffn = axis[AX_F], pairs = tokens * k_top, w1_cols = moe_w1_cols(act_fn, ffn);
	moe_route_ws w;
	moe_gemm_path path;
	void *act = NULL, *rows = NULL;
	int rc;

	if (!moe_shape_ok(axis, in, out))
		return (int)cudaErrorInvalidValue;
	if ((rc = moe_gemm_path_pick(&path)) != 0 || (rc = moe_route_reserve(&w, tokens, experts, k_top)) != 0
		|| (rc = mb_ws_reserve(&fused_act_slot, (size_t)(pairs * ffn) * sizeof(T), &act)) != 0
		|| (rc = mb_ws_reserve(&fused_rows_slot, (size_t)(pairs * hidden) * sizeof(T), &rows)) != 0)
		return rc;

	const moe_tiles t1 = moe_gemm_tiles(path, w1_cols, w.tile1, w.counters);
	const moe_tiles t2 = moe_gemm_tiles(path, hidden, w.tile2, w.counters + 1);
	const moe_ptr_args<T> no_ptrs = {};
	if ((rc = moe_route_sort<T>(s, axis, (const T *)in[1], &w, t1, t2, no_ptrs, NULL, true, false)) != 0)
		return rc;

	/* GEMM1: act[r] = relu(x[token(r)] W1_e)^2, or silu(gate) * up of
	 * x[token(r)] W1_e, sorted rows */
	gg_params<T> p1 = {};
	p1.a = (const T *)in[0];
	p1.pair = w.sorted;
	p1.k_top = (int)k_top;
	p1.b = (const T *)in[2];
	p1.group_off = w.group_off;
	p1.tile_off = w.tile1;
	p1.tile_counter = w.counters;
	p1.groups = (int)experts;
	p1.n = (int)w1_cols;
	p1.kd = (int)hidden;
	p1.out = (T *)act;
	const int64_t max1 = moe_max_tiles(pairs, experts, t1);
	rc = act_fn == MOE_SWIGLU ? moe_gemm<T, true, GG_EPI_SWIGLU>(s, path, p1, tokens, max1)
				  : moe_gemm<T, true, GG_EPI_RELU2>(s, path, p1, tokens, max1);
	if (rc != 0)
		return rc;

	/* GEMM2: rows[pair(r)] = w(pair(r)) * act[r] W2_e */
	gg_params<T> p2 = {};
	p2.a = (const T *)act;
	p2.pair = w.sorted;
	p2.k_top = (int)k_top;
	p2.b = (const T *)in[3];
	p2.group_off = w.group_off;
	p2.tile_off = w.tile2;
	p2.tile_counter = w.counters + 1;
	p2.groups = (int)experts;
	p2.n = (int)hidden;
	p2.kd = (int)ffn;
	p2.weight = w.wt;
	p2.out = (T *)rows;
	if ((rc = moe_gemm<T, false, GG_EPI_WEIGHTED>(s, path, p2, pairs, moe_max_tiles(pairs, experts, t2))) != 0)
		return rc;

	unsigned blocks;
	if ((rc = moe_flat_launch_blocks(tokens * (hidden / 8), &blocks)) != 0)
		return rc;
	moe_ffn_combine_kernel<<<blocks, MB_FLAT_THREADS, 0, s>>>((const T *)rows, tokens, (int)hidden,
		(int)k_top, (T *)out[0]);
	return (int)cudaGetLastError();
}

/* ---- the cuBLAS variants' shared host steps ------------------------------------- */

/* The per-expert counts, read back: the host sync both cuBLAS variants
 * need to size their library calls, as a framework's MoE layer does with
 * .tolist() / .item(). */
static int32_t host_counts[MOE_E_MAX];

static int moe_read_counts(cudaStream_t s, const int32_t *counts, int64_t experts)
{
	cudaError_t ce = cudaMemcpyAsync(host_counts, counts, (size_t)experts * sizeof(int32_t),
		cudaMemcpyDeviceToHost, s);
	if (ce == cudaSuccess)
		ce = cudaStreamSynchronize(s);
	return (int)ce;
}

/* The cuBLAS type of the storage type T. */
template <typename T> constexpr cudaDataType_t moe_blas_type();
template <> constexpr cudaDataType_t moe_blas_type<__nv_bfloat16>() { return CUDA_R_16BF; }
template <> constexpr cudaDataType_t moe_blas_type<__half>() { return CUDA_R_16F; }

static cublasHandle_t moe_blas(cudaStream_t s, int *rc)
{
	cublasHandle_t h = (cublasHandle_t)mb_ws_blas(s, rc);
	if (!h)
		return NULL;
	cublasStatus_t st = cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST);
	if (st == CUBLAS_STATUS_SUCCESS)
		st = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
	*rc = (int)st;
	return st == CUBLAS_STATUS_SUCCESS ? h : NULL;
}

/* ---- standard: padded per-expert buffers, strided-batched GEMMs ----------------- */

/* One block: counts[e] = sum over route blocks, cursor[e] = 0. */
__global__ void __launch_bounds__(MOE_SCAN_THREADS) moe_ffn_std_count_kernel(const int32_t *__restrict__ hist,
	int blocks, int experts, int32_t *__restrict__ counts, int32_t *__restrict__ cursor)
{
	for (int e = threadIdx.x; e < experts; e += blockDim.x) {
		int32_t run = 0;
		for (int b = 0; b < blocks; b++)
			run += hist[(int64_t)b * experts + e];
		counts[e] = run;
		cursor[e] = 0;
	}
}

/* One warp per pair p = t*K + k: a slot in expert e's buffer (an atomic
 * cursor: slot order does not change any row's result), pos[p] = its row
 * e * cap + slot, and x[t] copied there. */
template <typename T>
__global__ void __launch_bounds__(MB_FLAT_THREADS) moe_ffn_std_permute_kernel(const T *__restrict__ x,
	const int32_t *__restrict__ eid, int64_t pairs, int hidden, int k_top, int64_t cap,
	int32_t *__restrict__ cursor, int64_t *__restrict__ pos, T *__restrict__ xp)
{
	const int64_t p = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
	const int lane = threadIdx.x & 31;
	if (p >= pairs)
		return;
	int64_t dst = 0;
	if (lane == 0) {
		const int e = eid[p];
		dst = (int64_t)e * cap + atomicAdd(&cursor[e], 1);
		pos[p] = dst;
	}
	dst = __shfl_sync(0xffffffffu, dst, 0);
	const uint4 *src = reinterpret_cast<const uint4 *>(x + (p / k_top) * hidden);
	uint4 *to = reinterpret_cast<uint4 *>(xp + dst * hidden);
	for (int i = lane; i < hidden / 8; i += 32)
		to[i] = src[i];
}

static mb_ws_slot std_small_slot, std_x_slot, std_h_slot, std_a_slot, std_o_slot;

/* The activation buffer of a cuBLAS variant: relu^2 rewrites h in place;
 * SwiGLU writes `elems` elements into `slot`. */
template <typename T>
static int moe_act_buffer(moe_act act_fn, mb_ws_slot *slot, int64_t elems, void *h, void **out)
{
	if (act_fn != MOE_SWIGLU) {
		*out = h;
		return 0;
	}
	return mb_ws_reserve(slot, (size_t)elems * sizeof(T), out);
}

template <typename T>
static int moe_standard(moe_act act_fn, cudaStream_t s, const int64_t *axis, const void *const *in,
	void *const *out)
{
	const int64_t tokens = axis[AX_T], hidden = axis[AX_H], experts = axis[AX_E], k_top = axis[AX_K];
	const int64_t ffn = axis[AX_F], pairs = tokens * k_top, w1_cols = moe_w1_cols(act_fn, ffn);
	moe_route_ws w;
	void *small = NULL, *xp = NULL, *hp = NULL, *ap = NULL, *op = NULL;
	int rc;

	if (!moe_shape_ok(axis, in, out))
		return (int)cudaErrorInvalidValue;
	if ((rc = moe_route_reserve(&w, tokens, experts, k_top)) != 0
		|| (rc = mb_ws_reserve(&std_small_slot, (size_t)experts * sizeof(int32_t)
			+ (size_t)pairs * sizeof(int64_t) + MOE_WS_ALIGN, &small)) != 0)
		return rc;
	int32_t *cursor = (int32_t *)small;
	int64_t *pos = (int64_t *)((char *)small + ((size_t)experts * sizeof(int32_t) + MOE_WS_ALIGN - 1)
		/ MOE_WS_ALIGN * MOE_WS_ALIGN);

	const moe_tiles none = {1, 0, NULL, NULL};
	const moe_ptr_args<T> no_ptrs = {};
	if ((rc = moe_route_sort<T>(s, axis, (const T *)in[1], &w, none, none, no_ptrs, NULL, false, false)) != 0)
		return rc;
	const int64_t blocks = moe_route_blocks(tokens);
	moe_ffn_std_count_kernel<<<1, MOE_SCAN_THREADS, 0, s>>>(w.hist, (int)blocks, (int)experts, w.counts,
		cursor);
	if ((rc = (int)cudaGetLastError()) != 0 || (rc = moe_read_counts(s, w.counts, experts)) != 0)
		return rc;

	/* drop-free capacity: the largest load this call, rounded up */
	int64_t cap = 0;
	for (int64_t e = 0; e < experts; e++)
		cap = host_counts[e] > cap ? host_counts[e] : cap;
	cap = (cap + MOE_CAPACITY_ROUND - 1) / MOE_CAPACITY_ROUND * MOE_CAPACITY_ROUND;
	if (cap < MOE_CAPACITY_ROUND)
		cap = MOE_CAPACITY_ROUND;
	if (cap > INT32_MAX)
		return (int)cudaErrorInvalidValue;
	const int64_t padded = experts * cap;
	if ((rc = mb_ws_reserve(&std_x_slot, (size_t)(padded * hidden) * sizeof(T), &xp)) != 0
		|| (rc = mb_ws_reserve(&std_h_slot, (size_t)(padded * w1_cols) * sizeof(T), &hp)) != 0
		|| (rc = moe_act_buffer<T>(act_fn, &std_a_slot, padded * ffn, hp, &ap)) != 0
		|| (rc = mb_ws_reserve(&std_o_slot, (size_t)(padded * hidden) * sizeof(T), &op)) != 0)
		return rc;

	/* permute: padding rows keep whatever the slot held; the GEMMs compute
	 * rows of them that nothing reads (every row's result depends on that
	 * row alone) */
	unsigned blocks_p;
	if ((rc = moe_flat_launch_blocks(pairs * 32, &blocks_p)) != 0)
		return rc;
	moe_ffn_std_permute_kernel<<<blocks_p, MB_FLAT_THREADS, 0, s>>>((const T *)in[0], w.eid, pairs,
		(int)hidden, (int)k_top, cap, cursor, pos, (T *)xp);
	if ((rc = (int)cudaGetLastError()) != 0)
		return rc;

	cublasHandle_t h = moe_blas(s, &rc);
	if (!h)
		return rc;
	const float one = 1.0f, zero = 0.0f;
	/* row-major h[e] [cap, C] = xp[e] [cap, H] W1_e [H, C] (C = F, or 2F
	 * for SwiGLU), as the column-major h^T = W1_e^T xp^T: m = C, n = cap,
	 * k = H */
	cublasStatus_t st = cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)w1_cols, (int)cap,
		(int)hidden, &one, in[2], moe_blas_type<T>(), (int)w1_cols, (long long)(hidden * w1_cols), xp, moe_blas_type<T>(),
		(int)hidden, (long long)(cap * hidden), &zero, hp, moe_blas_type<T>(), (int)w1_cols, (long long)(cap * w1_cols),
		(int)experts, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
	if (st != CUBLAS_STATUS_SUCCESS)
		return (int)st;
	if ((rc = moe_activate(s, act_fn, (T *)hp, (T *)ap, padded * ffn)) != 0)
		return rc;
	/* o[e] [cap, H] = a[e] [cap, F] W2_e [F, H]: m = H, n = cap, k = F */
	st = cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)hidden, (int)cap, (int)ffn, &one, in[3],
		moe_blas_type<T>(), (int)hidden, (long long)(ffn * hidden), ap, moe_blas_type<T>(), (int)ffn, (long long)(cap * ffn),
		&zero, op, moe_blas_type<T>(), (int)hidden, (long long)(cap * hidden), (int)experts, CUBLAS_COMPUTE_32F,
		CUBLAS_GEMM_DEFAULT);
	if (st != CUBLAS_STATUS_SUCCESS)
		return (int)st;

	unsigned blocks_c;
	if ((rc = moe_flat_launch_blocks(tokens * (hidden / 8), &blocks_c)) != 0)
		return rc;
	moe_ffn_lib_combine_kernel<T, int64_t><<<blocks_c, MB_FLAT_THREADS, 0, s>>>((const T *)op, pos, w.wt,
		tokens, (int)hidden, (int)k_top, (T *)out[0]);
	return (int)cudaGetLastError();
}

/* ---- cublas_grouped: sorted rows, cublasGemmGroupedBatchedEx --------------------- */

/* One warp per sorted row r: xs[r] = x[token of sorted[r]]. */
template <typename T>
__global__ void __launch_bounds__(MB_FLAT_THREADS) moe_ffn_cublas_gather_kernel(const T *__restrict__ x,
	const int32_t *__restrict__ sorted, int64_t pairs, int hidden, int k_top, T *__restrict__ xs)
{
	const int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
	const int lane = threadIdx.x & 31;
	if (r >= pairs)
		return;
	const uint4 *src = reinterpret_cast<const uint4 *>(x + (int64_t)(sorted[r] / k_top) * hidden);
	uint4 *to = reinterpret_cast<uint4 *>(xs + r * hidden);
	for (int i = lane; i < hidden / 8; i += 32)
		to[i] = src[i];
}

static mb_ws_slot grp_x_slot, grp_h_slot, grp_a_slot, grp_o_slot;

/* Host arrays of the grouped calls (cuBLAS reads them on the host). */
static cublasOperation_t grp_op_n[MOE_E_MAX];
static int grp_m1[MOE_E_MAX], grp_m2[MOE_E_MAX], grp_n[MOE_E_MAX], grp_k1[MOE_E_MAX], grp_k2[MOE_E_MAX];
static int grp_size[MOE_E_MAX];
static float grp_one[MOE_E_MAX], grp_zero[MOE_E_MAX];

template <typename T>
static int moe_cublas_grouped(moe_act act_fn, cudaStream_t s, const int64_t *axis, const void *const *in,
	void *const *out)
{
	const int64_t tokens = axis[AX_T], hidden = axis[AX_H], experts = axis[AX_E], k_top = axis[AX_K];
	const int64_t ffn = axis[AX_F], pairs = tokens * k_top, w1_cols = moe_w1_cols(act_fn, ffn);
	moe_route_ws w;
	void *xs = NULL, *hbuf = NULL, *abuf = NULL, *obuf = NULL;
	int rc;

	if (!moe_shape_ok(axis, in, out))
		return (int)cudaErrorInvalidValue;
	if ((rc = moe_route_reserve(&w, tokens, experts, k_top)) != 0
		|| (rc = mb_ws_reserve(&grp_x_slot, (size_t)(pairs * hidden) * sizeof(T), &xs)) != 0
		|| (rc = mb_ws_reserve(&grp_h_slot, (size_t)(pairs * w1_cols) * sizeof(T), &hbuf)) != 0
		|| (rc = moe_act_buffer<T>(act_fn, &grp_a_slot, pairs * ffn, hbuf, &abuf)) != 0
		|| (rc = mb_ws_reserve(&grp_o_slot, (size_t)(pairs * hidden) * sizeof(T), &obuf)) != 0)
		return rc;

	moe_ptr_args<T> ptrs = {};
	ptrs.x_sorted = (const T *)xs;
	ptrs.w1 = (const T *)in[2];
	ptrs.w2 = (const T *)in[3];
	ptrs.h = (T *)hbuf;
	ptrs.o = (T *)obuf;
	ptrs.a1 = w.ptrs;
	ptrs.b1 = w.ptrs + experts;
	ptrs.a2 = w.ptrs + 2 * experts;
	ptrs.b2 = w.ptrs + 3 * experts;
	ptrs.c1 = (void **)(w.ptrs + 4 * experts);
	ptrs.c2 = (void **)(w.ptrs + 5 * experts);
	ptrs.hidden = (int)hidden;
	ptrs.ffn = (int)ffn;
	/* the tile schedules are computed and unused (the scan is the fused
	 * variant's, unchanged) */
	const moe_tiles t1 = {128, 1, w.tile1, NULL}, t2 = {128, 1, w.tile2, NULL};
	const T *glu_act = act_fn == MOE_SWIGLU ? (const T *)abuf : NULL;
	if ((rc = moe_route_sort<T>(s, axis, (const T *)in[1], &w, t1, t2, ptrs, glu_act, true, true)) != 0)
		return rc;
	if ((rc = moe_read_counts(s, w.counts, experts)) != 0)
		return rc;

	unsigned blocks_g;
	if ((rc = moe_flat_launch_blocks(pairs * 32, &blocks_g)) != 0)
		return rc;
	moe_ffn_cublas_gather_kernel<<<blocks_g, MB_FLAT_THREADS, 0, s>>>((const T *)in[0], w.sorted, pairs,
		(int)hidden, (int)k_top, (T *)xs);
	if ((rc = (int)cudaGetLastError()) != 0)
		return rc;

	/* one group per non-empty expert, in the order the scan wrote the
	 * pointers; row-major [rows, C] = [rows, H] W1_e (C = F, or 2F for
	 * SwiGLU) as column-major m = C, n = rows, k = H (and m = H, n = rows,
	 * k = F for GEMM2) */
	int groups = 0;
	for (int64_t e = 0; e < experts; e++) {
		if (host_counts[e] == 0)
			continue;
		grp_op_n[groups] = CUBLAS_OP_N;
		grp_m1[groups] = (int)w1_cols;
		grp_k1[groups] = (int)hidden;
		grp_m2[groups] = (int)hidden;
		grp_k2[groups] = (int)ffn;
		grp_n[groups] = host_counts[e];
		grp_size[groups] = 1;
		grp_one[groups] = 1.0f;
		grp_zero[groups] = 0.0f;
		groups++;
	}
	cublasHandle_t h = moe_blas(s, &rc);
	if (!h)
		return rc;
	/* lda = m, ldb = k, ldc = m for both: the packed row-major blocks */
	cublasStatus_t st = cublasGemmGroupedBatchedEx(h, grp_op_n, grp_op_n, grp_m1, grp_n, grp_k1, grp_one,
		ptrs.a1, moe_blas_type<T>(), grp_m1, ptrs.b1, moe_blas_type<T>(), grp_k1, grp_zero, ptrs.c1, moe_blas_type<T>(), grp_m1,
		groups, grp_size, CUBLAS_COMPUTE_32F);
	if (st != CUBLAS_STATUS_SUCCESS)
		return (int)st;
	if ((rc = moe_activate(s, act_fn, (T *)hbuf, (T *)abuf, pairs * ffn)) != 0)
		return rc;
	st = cublasGemmGroupedBatchedEx(h, grp_op_n, grp_op_n, grp_m2, grp_n, grp_k2, grp_one, ptrs.a2,
		moe_blas_type<T>(), grp_m2, ptrs.b2, moe_blas_type<T>(), grp_k2, grp_zero, ptrs.c2, moe_blas_type<T>(), grp_m2, groups,
		grp_size, CUBLAS_COMPUTE_32F);
	if (st != CUBLAS_STATUS_SUCCESS)
		return (int)st;

	unsigned blocks_c;
	if ((rc = moe_flat_launch_blocks(tokens * (hidden / 8), &blocks_c)) != 0)
		return rc;
	moe_ffn_lib_combine_kernel<T, int32_t><<<blocks_c, MB_FLAT_THREADS, 0, s>>>((const T *)obuf, w.inv,
		w.wt, tokens, (int)hidden, (int)k_top, (T *)out[0]);
	return (int)cudaGetLastError();
}

/* ---- the launches: moe_ffn (relu^2) and moe_ffn_swiglu ------------------------------ */

#define MOE_LAUNCH(fn, path, act_fn) \
	extern "C" MB_DECLARE_LAUNCH(fn) \
	{ \
		if (dtype == MB_BF16) \
			return path<__nv_bfloat16>(act_fn, (cudaStream_t)stream, axis, in, out); \
		if (dtype == MB_FP16) \
			return path<__half>(act_fn, (cudaStream_t)stream, axis, in, out); \
		return (int)cudaErrorInvalidValue; \
	}

MOE_LAUNCH(mb_moe_ffn_fused_launch, moe_fused, MOE_RELU2)
MOE_LAUNCH(mb_moe_ffn_standard_launch, moe_standard, MOE_RELU2)
MOE_LAUNCH(mb_moe_ffn_cublas_grouped_launch, moe_cublas_grouped, MOE_RELU2)
MOE_LAUNCH(mb_moe_ffn_swiglu_fused_launch, moe_fused, MOE_SWIGLU)
MOE_LAUNCH(mb_moe_ffn_swiglu_standard_launch, moe_standard, MOE_SWIGLU)
MOE_LAUNCH(mb_moe_ffn_swiglu_cublas_grouped_launch, moe_cublas_grouped, MOE_SWIGLU)
