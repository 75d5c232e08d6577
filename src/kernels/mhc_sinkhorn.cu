/* mhc_sinkhorn: manifold-constrained hyper-connection mixing. Per token t,
 * with n streams of width W (x [T, n*W], stream j at columns j*W ..):
 *   xbar = mean of the streams, phi[i][j] = dot(xbar, P[i*n+j]) / sqrt(W),
 *   S = I Sinkhorn iterations (rows, then columns, to sum 1) of exp(phi),
 *   y_t[i] = sum_j S[i][j] x_t[j].
 * in x [T,n*W], P [n*n,W]; out y [T,n*W]. Math in fp32, storage in the case
 * dtype. Axes, in catalog order: T, N, W, I. n = 2 or 4 here (other n:
 * cudaErrorInvalidValue, the case skipped); the reference takes up to 8.
 *
 * The fused kernel is a persistent grid of blocks of MHC_FUSED_THREADS
 * threads, two an SM, each taking tokens blockIdx.x, blockIdx.x +
 * gridDim.x, ...; thread k owns the 16-byte column vectors k,
 * k + MHC_FUSED_THREADS, ... (VPT of them) of every stream of a token. A
 * block loads the next token's x while it works on the current one, so
 * the token's serial phases (the reduction's barrier, the Sinkhorn warp)
 * overlap the stream loads and the other block's work. The stream mean
 * is a thread's own sum, each thread's partial dot products reduce over
 * the block (warp shuffles, then the warps in order through shared
 * memory), and one warp runs the Sinkhorn iterations on the n x n matrix
 * in its registers. P (128 KiB in bf16) is read by every token and stays
 * in L1: the fused kernel's x comes through L2 only (cp.async.cg), the
 * fallback's is loaded evict-first, y is stored so, and the kernels keep
 * as much L1 as their shared memory leaves.
 */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "kernels/launch.h"
#include "kernels/vec.cuh"
#include "kernels/workspace.h"

enum { AX_T, AX_N, AX_W, AX_I };
enum { IN_X, IN_P };
enum { OUT_Y };

/* The fused kernel's blocks: 8 warps, two blocks an SM (up to 128
 * registers: the token's x, 16 partial dot products and the P vectors in
 * flight; the next token's x waits in shared memory). Before, one block
 * a token (no prefetch: the next token's loads waited for a block to
 * end), 4 an SM at 64 registers: 0.346 ms at T = 16384 on the H200,
 * 0.727 of the memory ceiling. 16 warps a block at 64 registers spilled
 * 48 bytes, and x of two tokens in registers spilled at 128. */
#define MHC_FUSED_THREADS 256
/* The fallback's projection: one block of 8 warps a token. */
#define MHC_FB_THREADS 256
/* 16-byte vectors a thread holds per stream; wider rows do not fit in
 * registers (cudaErrorInvalidValue: the case is skipped, not wrong). */
#define MHC_MAX_VPT 4
#define FULL_MASK 0xffffffffu
/* The fused kernel's blocks an SM: two when a thread holds at most two
 * vectors a stream (W <= 4096 in bf16 and fp16, 2048 in fp32); with
 * more, one. */
#define MHC_FUSED_MIN_BLOCKS(vpt) ((vpt) <= 2 ? 2 : 1)
/* Blocks an SM of the fallback's projection (one block per token). */
#define MHC_FB_MIN_BLOCKS 1

/* ---- loads and stores that pass L1 by ------------------------------------ */

/* x is read once and y written once: evict-first (ld/st.global.cs), so
 * that they do not push P out of L1. */
template <typename T, int VEC>
__device__ __forceinline__ void load_streaming(mb_packed<T, VEC> &dst, const T *p)
{
	if constexpr (sizeof(T) * VEC == MB_VEC_BYTES) {
		const uint4 v = __ldcs(reinterpret_cast<const uint4 *>(p));
		memcpy(&dst, &v, sizeof(v));
	} else {
		dst.load(p);
	}
}

template <typename T, int VEC>
__device__ __forceinline__ void store_streaming(T *p, const float (&in)[VEC])
{
	mb_vec<T, VEC> v;
#pragma unroll
	for (int i = 0; i < VEC; i++)
		v.v[i] = mb_from_f32<T>(in[i]);
	if constexpr (sizeof(T) * VEC == MB_VEC_BYTES) {
		uint4 bits;
		memcpy(&bits, &v, sizeof(bits));
		__stcs(reinterpret_cast<uint4 *>(p), bits);
	} else {
		*reinterpret_cast<mb_vec<T, VEC> *>(p) = v;
	}
}

/* ---- the projection: xbar, phi, exp --------------------------------------- */

/* Thread k's vectors k + THREADS * v of every stream of token t (zero
 * past the row's end). */
template <int THREADS, typename T, int N, int VEC, int VPT>
__device__ __forceinline__ void load_token(mb_packed<T, VEC> (&xs)[N][VPT], const T *__restrict__ x, int64_t t,
	int width)
{
	const int nvec = width / VEC;
	const T *base = x + t * N * (int64_t)width;
#pragma unroll
	for (int j = 0; j < N; j++) {
#pragma unroll
		for (int k = 0; k < VPT; k++) {
			const int v = threadIdx.x + k * THREADS;
			if (v < nvec)
				load_streaming<T, VEC>(xs[j][k], base + (int64_t)j * width + (int64_t)v * VEC);
			else
				xs[j][k] = mb_packed<T, VEC>{};
		}
	}
}

/* The fused kernel's prefetch of 16-byte vectors: cp.async, global to
 * shared through L2 only (.cg), so that the next token's x waits in
 * shared memory, not in registers. Thread k copies the vectors it will
 * own (stage [N][VPT][THREADS]) and only it reads them back, after a
 * wait for its own copies: no barrier. It issues a vector's copies after
 * it has read the stage's previous contents of that vector into
 * registers and used them (project's after_xbar), so no copy lands on a
 * value not yet read. */
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem)
{
#ifdef MB_MHC_EMU
	memcpy(smem, gmem, 16);
#else
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((unsigned)__cvta_generic_to_shared(smem)),
		"l"(gmem)
		: "memory");
#endif
}

__device__ __forceinline__ void cp_async_commit()
{
#ifndef MB_MHC_EMU
	asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

__device__ __forceinline__ void cp_async_wait_all()
{
#ifndef MB_MHC_EMU
	asm volatile("cp.async.wait_group 0;" ::: "memory");
#endif
}

/* Thread k's vectors k + THREADS * kk of every stream of token t into the
 * stage; the last kk commits the group. */
template <int THREADS, typename T, int N, int VEC, int VPT>
__device__ __forceinline__ void stage_vectors(uint4 *stage, const T *__restrict__ x, int64_t t, int width, int kk)
{
	const int nvec = width / VEC, v = threadIdx.x + kk * THREADS;
	const T *base = x + t * N * (int64_t)width + (int64_t)v * VEC;
	if (v < nvec) {
#pragma unroll
		for (int j = 0; j < N; j++)
			cp_async16(&stage[(j * VPT + kk) * THREADS + threadIdx.x], base + (int64_t)j * width);
	}
	if (kk == VPT - 1)
		cp_async_commit();
}

template <int THREADS, typename T, int N, int VEC, int VPT>
__device__ __forceinline__ void take_token(mb_packed<T, VEC> (&xs)[N][VPT], const uint4 *stage, int width)
{
	const int nvec = width / VEC;
	cp_async_wait_all();
#pragma unroll
	for (int j = 0; j < N; j++) {
#pragma unroll
		for (int k = 0; k < VPT; k++) {
			if ((int)threadIdx.x + k * THREADS < nvec)
				xs[j][k].w = stage[(j * VPT + k) * THREADS + threadIdx.x];
			else
				xs[j][k] = mb_packed<T, VEC>{};
		}
	}
}

/* Sum over the warp of V values at once (V a power of two <= 32): each
 * exchange halves the values a lane holds, then lanes sharing a value
 * finish with a butterfly. Returns, in every lane, the warp's sum of value
 * lane / (32 / V): 5 levels of adds, as a tree. */
template <int V> __device__ __forceinline__ float warp_sum_scatter(float (&v)[V])
{
	const int lane = threadIdx.x % MB_WARP_THREADS;
	int off = MB_WARP_THREADS / 2;
#pragma unroll
	for (int held = V; held > 1; held /= 2, off /= 2) {
		const bool upper = (lane & off) != 0;
#pragma unroll
		for (int i = 0; i < held / 2; i++) {
			const float send = upper ? v[i] : v[i + held / 2];
			const float keep = upper ? v[i + held / 2] : v[i];
			v[i] = keep + __shfl_xor_sync(FULL_MASK, send, off);
		}
	}
	float s = v[0];
#pragma unroll
	for (; off > 0; off /= 2)
		s += __shfl_xor_sync(FULL_MASK, s, off);
	return s;
}

/* The token's n*n logits phi, in lanes 0 .. n*n-1 of warp 0 (other lanes
 * and warps: unspecified). xbar adds the streams in order and scales by
 * 1/n (exact for n = 2, 4: the reference's division); each thread's dot
 * products run in order over its vectors, then a warp tree, then the
 * warps in order. `after_xbar(k)` runs once the thread's xbar of its
 * vector k is made, when the projection no longer needs xs[.][k] (the
 * fused kernel prefetches the next token's vectors k there). Ends with
 * every thread past one __syncthreads. */
template <int THREADS, typename T, int N, int VEC, int VPT, class After>
__device__ __forceinline__ float project(const mb_packed<T, VEC> (&xs)[N][VPT], const T *__restrict__ p,
	int width, float (&red)[THREADS / MB_WARP_THREADS][N * N], After after_xbar)
{
	constexpr int V = N * N;
	const int nvec = width / VEC, lane = threadIdx.x % MB_WARP_THREADS, warp = threadIdx.x / MB_WARP_THREADS;
	float acc[V];

#pragma unroll
	for (int q = 0; q < V; q++)
		acc[q] = 0.0f;
#pragma unroll
	for (int k = 0; k < VPT; k++) {
		const int v = threadIdx.x + k * THREADS;
		float xb[VEC];
#pragma unroll
		for (int e = 0; e < VEC; e++) {
			float s = xs[0][k].get(e);
#pragma unroll
			for (int j = 1; j < N; j++)
				s += xs[j][k].get(e);
			xb[e] = s * (1.0f / N);
		}
		after_xbar(k);
		if (v >= nvec)
			continue;
#pragma unroll
		for (int q = 0; q < V; q++) {
			mb_packed<T, VEC> pv;
			pv.load(p + (int64_t)q * width + (int64_t)v * VEC);
#pragma unroll
			for (int e = 0; e < VEC; e++)
				acc[q] = fmaf(xb[e], pv.get(e), acc[q]);
		}
	}
	const float s = warp_sum_scatter<V>(acc);
	if (lane % (MB_WARP_THREADS / V) == 0)
		red[warp][lane / (MB_WARP_THREADS / V)] = s;
	__syncthreads();
	float phi = 0.0f;
	if (warp == 0 && lane < V) {
		for (int w = 0; w < THREADS / MB_WARP_THREADS; w++)
			phi += red[w][lane];
		phi = __fdiv_rn(phi, sqrtf((float)width));
	}
	return phi;
}

/* ---- Sinkhorn ------------------------------------------------------------- */

/* The fast reciprocal: one MUFU instruction, within 1 ulp. The 40
 * half-steps are a chain of sum, reciprocal and product that one warp runs
 * while its block waits: its latency is the fused kernel's serial part. */
__device__ __forceinline__ float rcp_approx(float x)
{
#ifdef MB_MHC_EMU
	return 1.0f / x;
#else
	float y;
	asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
	return y;
#endif
}

/* Row i of m to sum 1: the sum in order, then the reciprocal times each
 * entry (3 roundings of up to 2u, u and u; the reference divides). */
template <int N> __device__ __forceinline__ void normalise_row(float (&m)[N][N], int i)
{
	float s = m[i][0];
#pragma unroll
	for (int j = 1; j < N; j++)
		s += m[i][j];
	const float r = rcp_approx(s);
#pragma unroll
	for (int j = 0; j < N; j++)
		m[i][j] *= r;
}

template <int N> __device__ __forceinline__ void normalise_col(float (&m)[N][N], int j)
{
	float s = m[0][j];
#pragma unroll
	for (int i = 1; i < N; i++)
		s += m[i][j];
	const float r = rcp_approx(s);
#pragma unroll
	for (int i = 0; i < N; i++)
		m[i][j] *= r;
}

/* Warp 0: every lane gathers exp(phi) from lanes 0 .. n*n-1 and runs the
 * iterations on its own copy (the same in every lane); lane q then writes
 * entry q of S. */
template <int N>
__device__ __forceinline__ void sinkhorn_warp(float phi, int iters, float *__restrict__ s_out)
{
	const int lane = threadIdx.x % MB_WARP_THREADS;
	const float e = expf(phi);
	float m[N][N];

#pragma unroll
	for (int q = 0; q < N * N; q++)
		m[q / N][q % N] = __shfl_sync(FULL_MASK, e, q);
	for (int it = 0; it < iters; it++) {
#pragma unroll
		for (int i = 0; i < N; i++)
			normalise_row<N>(m, i);
#pragma unroll
		for (int j = 0; j < N; j++)
			normalise_col<N>(m, j);
	}
#pragma unroll
	for (int q = 0; q < N * N; q++) {
		if (lane == q)
			s_out[q] = m[q / N][q % N];
	}
}

/* y_t[i] = sum_j S[i][j] x_t[j] for the thread's vectors, S in shared
 * memory: a row of it at a time in registers, beside the token's x. */
template <int THREADS, typename T, int N, int VEC, int VPT>
__device__ __forceinline__ void mix_store(const mb_packed<T, VEC> (&xs)[N][VPT], const float *s, T *__restrict__ y,
	int64_t t, int width)
{
	const int nvec = width / VEC;
	T *base = y + t * N * (int64_t)width;
#pragma unroll
	for (int i = 0; i < N; i++) {
		float row[N];
#pragma unroll
		for (int j = 0; j < N; j++)
			row[j] = s[i * N + j];
#pragma unroll
		for (int k = 0; k < VPT; k++) {
			const int v = threadIdx.x + k * THREADS;
			if (v >= nvec)
				break;
			float out[VEC];
#pragma unroll
			for (int e = 0; e < VEC; e++) {
				float acc = row[0] * xs[0][k].get(e);
#pragma unroll
				for (int j = 1; j < N; j++)
					acc = fmaf(row[j], xs[j][k].get(e), acc);
				out[e] = acc;
			}
			store_streaming<T, VEC>(base + (int64_t)i * width + (int64_t)v * VEC, out);
		}
	}
}

/* ---- fused: a persistent block takes a token at a time ---------------------- */

/* Shared memory a block's prefetch takes: the stage of a token's x when
 * its vectors are 16 bytes (cp.async), none on the scalar path (which
 * prefetches into registers). */
template <typename T, int N, int VEC, int VPT> __host__ __device__ constexpr size_t stage_bytes()
{
	return sizeof(T) * VEC == MB_VEC_BYTES ? (size_t)N * VPT * MHC_FUSED_THREADS * MB_VEC_BYTES : 0;
}

template <typename T, int N, int VEC, int VPT>
__global__ void __launch_bounds__(MHC_FUSED_THREADS, MHC_FUSED_MIN_BLOCKS(VPT)) mb_mhc_sinkhorn_fused_kernel(
	const T *__restrict__ x, const T *__restrict__ p, T *__restrict__ y, int width, int iters, int64_t tokens)
{
	constexpr bool STAGED = stage_bytes<T, N, VEC, VPT>() > 0;
#ifdef MB_MHC_EMU
	uint4 *stage = reinterpret_cast<uint4 *>(dyn_smem());
#else
	extern __shared__ uint4 stage[];
#endif
	__shared__ float red[MHC_FUSED_THREADS / MB_WARP_THREADS][N * N];
	__shared__ float s_shared[N * N];
	mb_packed<T, VEC> xs[N][VPT], xn[STAGED ? 1 : N][STAGED ? 1 : VPT] = {};
	int64_t t = blockIdx.x;

	if (t >= tokens)
		return;
	if constexpr (STAGED) {
#pragma unroll
		for (int kk = 0; kk < VPT; kk++)
			stage_vectors<MHC_FUSED_THREADS, T, N, VEC, VPT>(stage, x, t, width, kk);
		take_token<MHC_FUSED_THREADS, T, N, VEC, VPT>(xs, stage, width);
	} else {
		load_token<MHC_FUSED_THREADS, T, N, VEC, VPT>(xs, x, t, width);
	}
	for (;;) {
		const int64_t next = t + gridDim.x;

		/* the next token's loads go out as soon as this one's xbar of
		 * the same vectors is made; warp 0 reads red after the
		 * projection's barrier and before the one below, which every
		 * thread passes before it writes red for the next token;
		 * s_shared is read after that barrier and written again only
		 * after the next token's projection barrier */
		const float phi = project<MHC_FUSED_THREADS, T, N, VEC, VPT>(xs, p, width, red, [&](int kk) {
			if (next < tokens) {
				if constexpr (STAGED)
					stage_vectors<MHC_FUSED_THREADS, T, N, VEC, VPT>(stage, x, next, width, kk);
				else if (kk == VPT - 1)
					load_token<MHC_FUSED_THREADS, T, N, VEC, VPT>(xn, x, next, width);
			}
		});
		if (threadIdx.x < MB_WARP_THREADS)
			sinkhorn_warp<N>(phi, iters, s_shared);
		__syncthreads();
		mix_store<MHC_FUSED_THREADS, T, N, VEC, VPT>(xs, s_shared, y, t, width);
		if (next >= tokens)
			break;
		t = next;
		if constexpr (STAGED) {
			take_token<MHC_FUSED_THREADS, T, N, VEC, VPT>(xs, stage, width);
		} else {
#pragma unroll
			for (int j = 0; j < N; j++) {
#pragma unroll
				for (int k = 0; k < VPT; k++)
					xs[j][k] = xn[j][k];
			}
		}
	}
}

#ifndef MB_MHC_EMU
/* The host side: under MB_MHC_EMU the kernels above are compiled for the
 * CPU and run by the SIMT emulator of tests/unit/ssm_scan_emu.h
 * (tests/unit/test_mhc_sinkhorn_emu.cpp), which launches them itself. */

/* The kernels read P through L1: the largest L1 carveout, set once per
 * kernel on its first call (outside any capture: the harness warms up
 * first). A refusal only costs speed. */
template <typename K> static void prefer_l1(K kernel, bool *done)
{
	if (!*done) {
		*done = true;
		if (cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
			    (int)cudaSharedmemCarveoutMaxL1) != cudaSuccess)
			(void)cudaGetLastError();
	}
}

/* Shared memory an SM's carveout keeps for each fused block beyond its
 * stage: its static arrays and the 1 KiB the driver reserves a block. */
#define MHC_BLOCK_SMEM_SLACK 2048
#define MHC_SMEM_PER_SM_MAX (228 * 1024)

/* The persistent grid: every resident block, or one per token if there
 * are fewer. The fused kernel's shared memory (its stage) is set once:
 * the dynamic size, and a carveout just large enough for
 * MHC_FUSED_MIN_BLOCKS of them (the rest of the 256 KiB stays L1, for
 * P). `per_sm` caches the occupancy then. All on the first call, which
 * the harness makes outside any capture; a refused setting only costs
 * speed, and the occupancy asked after it says what runs. */
template <typename T, int N, int VEC, int VPT>
static int fused_launch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	static int per_sm;
	constexpr size_t smem = stage_bytes<T, N, VEC, VPT>();
	auto kernel = mb_mhc_sinkhorn_fused_kernel<T, N, VEC, VPT>;
	int device = 0, sms = 0;
	cudaError_t ce;

	if ((ce = cudaGetDevice(&device)) != cudaSuccess ||
		(ce = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess)
		return (int)ce;
	if (per_sm == 0) {
		const size_t want = (smem + MHC_BLOCK_SMEM_SLACK) * MHC_FUSED_MIN_BLOCKS(VPT);
		const int percent = (int)((want * 100 + MHC_SMEM_PER_SM_MAX - 1) / MHC_SMEM_PER_SM_MAX);
		if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess ||
			cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
				percent > 100 ? 100 : percent) != cudaSuccess)
			(void)cudaGetLastError();
		if ((ce = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, MHC_FUSED_THREADS, smem)) !=
			cudaSuccess)
			return (int)ce;
	}
	int64_t blocks = (int64_t)sms * (per_sm > 0 ? per_sm : 1);
	if (blocks > axis[AX_T])
		blocks = axis[AX_T];
	kernel<<<(unsigned)blocks, MHC_FUSED_THREADS, smem, stream>>>((const T *)in[IN_X], (const T *)in[IN_P],
		(T *)out[OUT_Y], (int)axis[AX_W], (int)axis[AX_I], axis[AX_T]);
	return (int)cudaGetLastError();
}

#endif

/* ---- fallback ---------------------------------------------------------------- */

/* Projection: the fused kernel's first half, ending in exp(phi) written to
 * the fp32 [T, n, n] buffer. Registers unbounded: it holds x only until
 * the dot products, and capped as the fused kernel it spilled. */
template <typename T, int N, int VEC, int VPT>
__global__ void __launch_bounds__(MHC_FB_THREADS, MHC_FB_MIN_BLOCKS) mb_mhc_sinkhorn_fb_project_kernel(
	const T *__restrict__ x, const T *__restrict__ p, float *__restrict__ m, int width)
{
	__shared__ float red[MHC_FB_THREADS / MB_WARP_THREADS][N * N];
	mb_packed<T, VEC> xs[N][VPT];
	const int64_t t = blockIdx.x;

	load_token<MHC_FB_THREADS, T, N, VEC, VPT>(xs, x, t, width);
	const float phi = project<MHC_FB_THREADS, T, N, VEC, VPT>(xs, p, width, red, [](int) {});
	if (threadIdx.x < N * N)
		m[t * N * N + threadIdx.x] = expf(phi);
}

/* One row (token t, row i) a thread: its n entries in one load, the sum
 * in order, each entry divided by it (IEEE division, as a framework's
 * m / m.sum(-1, keepdim=True)). */
template <int N>
__global__ void __launch_bounds__(MB_FLAT_THREADS) mb_mhc_sinkhorn_fb_norm_rows_kernel(float *__restrict__ m,
	int64_t rows)
{
	const int64_t r = (int64_t)blockIdx.x * MB_FLAT_THREADS + threadIdx.x;
	if (r >= rows)
		return;
	mb_vec<float, N> v = *reinterpret_cast<const mb_vec<float, N> *>(m + r * N);
	float s = v.v[0];
#pragma unroll
	for (int j = 1; j < N; j++)
		s += v.v[j];
#pragma unroll
	for (int j = 0; j < N; j++)
		v.v[j] = __fdiv_rn(v.v[j], s);
	*reinterpret_cast<mb_vec<float, N> *>(m + r * N) = v;
}

/* One column (token t, column j) a thread, divided as the rows: a warp's
 * strided loads cover its tokens' matrices whole. */
template <int N>
__global__ void __launch_bounds__(MB_FLAT_THREADS) mb_mhc_sinkhorn_fb_norm_cols_kernel(float *__restrict__ m,
	int64_t cols)
{
	const int64_t c = (int64_t)blockIdx.x * MB_FLAT_THREADS + threadIdx.x;
	if (c >= cols)
		return;
	float *base = m + c / N * N * N + c % N;
	float v[N];
#pragma unroll
	for (int i = 0; i < N; i++)
		v[i] = base[i * N];
	float s = v[0];
#pragma unroll
	for (int i = 1; i < N; i++)
		s += v[i];
#pragma unroll
	for (int i = 0; i < N; i++)
		base[i * N] = __fdiv_rn(v[i], s);
}

/* Mix: one column vector of one token a thread, all n streams read (x
 * once in this launch) and all n outputs written; S from L1. */
template <typename T, int N, int VEC>
__global__ void __launch_bounds__(MB_FLAT_THREADS) mb_mhc_sinkhorn_fb_mix_kernel(const T *__restrict__ x,
	const float *__restrict__ m, T *__restrict__ y, int64_t items, int width)
{
	const int64_t g = (int64_t)blockIdx.x * MB_FLAT_THREADS + threadIdx.x;
	const int nvec = width / VEC;
	if (g >= items)
		return;
	const int64_t t = g / nvec;
	const int v = (int)(g % nvec);
	const T *xb = x + t * N * (int64_t)width + (int64_t)v * VEC;
	T *yb = y + t * N * (int64_t)width + (int64_t)v * VEC;
	mb_packed<T, VEC> xs[N];
	float s[N * N];

#pragma unroll
	for (int j = 0; j < N; j++)
		load_streaming<T, VEC>(xs[j], xb + (int64_t)j * width);
#pragma unroll
	for (int q = 0; q < N * N; q++)
		s[q] = m[t * N * N + q];
#pragma unroll
	for (int i = 0; i < N; i++) {
		float out[VEC];
#pragma unroll
		for (int e = 0; e < VEC; e++) {
			float acc = s[i * N] * xs[0].get(e);
#pragma unroll
			for (int j = 1; j < N; j++)
				acc = fmaf(s[i * N + j], xs[j].get(e), acc);
			out[e] = acc;
		}
		store_streaming<T, VEC>(yb + (int64_t)i * width, out);
	}
}

#ifndef MB_MHC_EMU
static mb_ws_slot ws_m;

template <typename T, int N, int VEC, int VPT>
static int fallback_launch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	static bool carveout;
	const int64_t tokens = axis[AX_T], iters = axis[AX_I];
	const int width = (int)axis[AX_W];
	const int64_t rows = tokens * N, items = tokens * (width / VEC);
	const unsigned row_blocks = (unsigned)((rows + MB_FLAT_THREADS - 1) / MB_FLAT_THREADS);
	const int64_t mix_blocks = (items + MB_FLAT_THREADS - 1) / MB_FLAT_THREADS;
	void *m = NULL;
	cudaError_t ce;
	int rc;

	if (mix_blocks > INT32_MAX || (rows + MB_FLAT_THREADS - 1) / MB_FLAT_THREADS > INT32_MAX)
		return (int)cudaErrorInvalidValue;
	if ((rc = mb_ws_reserve(&ws_m, (size_t)tokens * N * N * sizeof(float), &m)) != 0)
		return rc;
	prefer_l1(mb_mhc_sinkhorn_fb_project_kernel<T, N, VEC, VPT>, &carveout);
	mb_mhc_sinkhorn_fb_project_kernel<T, N, VEC, VPT><<<(unsigned)tokens, MHC_FB_THREADS, 0, stream>>>(
		(const T *)in[IN_X], (const T *)in[IN_P], (float *)m, width);
	if ((ce = cudaGetLastError()) != cudaSuccess)
		return (int)ce;
	for (int64_t it = 0; it < iters; it++) {
		mb_mhc_sinkhorn_fb_norm_rows_kernel<N><<<row_blocks, MB_FLAT_THREADS, 0, stream>>>((float *)m, rows);
		if ((ce = cudaGetLastError()) != cudaSuccess)
			return (int)ce;
		mb_mhc_sinkhorn_fb_norm_cols_kernel<N><<<row_blocks, MB_FLAT_THREADS, 0, stream>>>((float *)m, rows);
		if ((ce = cudaGetLastError()) != cudaSuccess)
			return (int)ce;
	}
	mb_mhc_sinkhorn_fb_mix_kernel<T, N, VEC><<<(unsigned)mix_blocks, MB_FLAT_THREADS, 0, stream>>>(
		(const T *)in[IN_X], (const float *)m, (T *)out[OUT_Y], items, width);
	return (int)cudaGetLastError();
}

/* ---- dispatch ----------------------------------------------------------------- */

typedef int (*mhc_launch_fn)(cudaStream_t, const int64_t *, const void *const *, void *const *);

/* The instantiation for n streams, VEC-element vectors and VPT vectors a
 * thread: the fewest VPT that cover a stream's W/VEC vectors with the
 * kernel's threads. */
template <typename T, int N, int VEC, bool FUSED>
static int pick_vpt(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	const int64_t nvec = axis[AX_W] / VEC, threads = FUSED ? MHC_FUSED_THREADS : MHC_FB_THREADS;
	mhc_launch_fn fn = NULL;

	if (nvec <= threads)
		fn = FUSED ? fused_launch<T, N, VEC, 1> : fallback_launch<T, N, VEC, 1>;
	else if (nvec <= 2 * threads)
		fn = FUSED ? fused_launch<T, N, VEC, 2> : fallback_launch<T, N, VEC, 2>;
	else if (nvec <= MHC_MAX_VPT * threads)
		fn = FUSED ? fused_launch<T, N, VEC, 4> : fallback_launch<T, N, VEC, 4>;
	if (!fn)
		return (int)cudaErrorInvalidValue;
	return fn(stream, axis, in, out);
}

template <typename T, int N, bool FUSED>
static int pick_vec(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	constexpr int vec = mb_vec16_elems<T>();
	/* 16-byte accesses need aligned bases and streams of whole vectors;
	 * other widths run the same kernels one element per access */
	if (mb_aligned16(in[IN_X]) && mb_aligned16(in[IN_P]) && mb_aligned16(out[OUT_Y]) && axis[AX_W] % vec == 0)
		return pick_vpt<T, N, vec, FUSED>(stream, axis, in, out);
	return pick_vpt<T, N, 1, FUSED>(stream, axis, in, out);
}

template <typename T, bool FUSED>
static int dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	if (axis[AX_T] < 1 || axis[AX_T] > INT32_MAX || axis[AX_W] < 1 || axis[AX_W] > INT32_MAX || axis[AX_I] < 0 ||
		axis[AX_I] > INT32_MAX)
		return (int)cudaErrorInvalidValue;
	switch (axis[AX_N]) {
	case 2:
		return pick_vec<T, 2, FUSED>(stream, axis, in, out);
	case 4:
		return pick_vec<T, 4, FUSED>(stream, axis, in, out);
	default:
		return (int)cudaErrorInvalidValue;
	}
}

template <typename T>
static int fused_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	return dispatch<T, true>(stream, axis, in, out);
}

template <typename T>
static int fallback_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	return dispatch<T, false>(stream, axis, in, out);
}

/* One launch: x read once, y written once. */
extern "C" MB_DECLARE_LAUNCH(mb_mhc_sinkhorn_fused_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fused_dispatch, (cudaStream_t)stream, axis, in, out);
}

/* 2 + 2I launches: the projection, I row and I column normalisations over
 * the fp32 [T, n, n] buffer, the mix (x read a second time). */
extern "C" MB_DECLARE_LAUNCH(mb_mhc_sinkhorn_fallback_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fallback_dispatch, (cudaStream_t)stream, axis, in, out);
}
#endif
