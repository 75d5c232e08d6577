/* mhc_sinkhorn: manifold-constrained hyper-connection mixing. Per token t,
 * with n streams of width W (x [T, n*W], stream j at columns j*W ..):
 *   xbar = mean of the streams, phi[i][j] = dot(xbar, P[i*n+j]) / sqrt(W),
 *   S = I Sinkhorn iterations (rows, then columns, to sum 1) of exp(phi),
 *   y_t[i] = sum_j S[i][j] x_t[j].
 * in x [T,n*W], P [n*n,W]; out y [T,n*W]. Math in fp32, storage in the case
 * dtype. Axes, in catalog order: T, N, W, I. n = 2 or 4 here (other n:
 * cudaErrorInvalidValue, the case skipped); the reference takes up to 8.
 *
 * The fused kernel: a token is one block of MHC_FUSED_THREADS threads,
 * thread k owning the 16-byte column vectors k, k + MHC_FUSED_THREADS, ...
 * (VPT of them) of every stream: the stream mean is then a thread's own
 * sum, each thread's partial dot products reduce over the block (warp
 * shuffles, then the warps in order through shared memory), and one warp
 * runs the Sinkhorn iterations on the n x n matrix; four blocks an SM hide
 * one token's serial phases (the reduction's barrier, the Sinkhorn warp)
 * behind the others' loads. P (128 KiB in bf16) is read by every token and
 * stays in L1: x and y take no L1 line (load_once, store_once).
 *
 * The kernels ask for the largest L1 carveout, and x lives wholly in
 * registers (at 64 registers, W = 4096 in bf16, a thread stores 64 bytes
 * of spills and loads 40: 36 and 36 before the first vector's stream sums
 * were kept for the projection's second pass, 40 before its two passes).
 * From 2026-11-27 (reports/h100 heavy-b) to b44a5d2 the kernel kept the
 * last vector of streams 1 .. n-1 in shared memory instead (a "stash",
 * 12 bytes spilled), which needs a 64 KiB shared-memory carveout for four
 * blocks an SM. It had looked faster only against a kernel without it
 * that asked for a carveout computed from its shared memory (3 percent)
 * instead of the largest L1 (which ncu shows as an 8 KiB configuration;
 * what the 3 percent gave was not read). One H200, each binary three
 * times interleaved (reports/h200 run mhc-b), fused bf16 at T = 16384,
 * N = 4, W = 4096, I = 20, and the fraction of the memory ceiling:
 *   no stash, largest L1 (63ce1a2)               345.6-346.2 us  0.727
 *   c65425a's build (run d's kernel, sm_90)      345.6 us        0.727
 *   no stash, the computed carveout              430.0-430.4 us
 *   the stash, 64 KiB carveout (b44a5d2)         398.2-400.0 us  0.628
 *   the stash, largest L1 asked                  811.3-811.6 us
 *   b44a5d2 built for sm_90 instead of sm_90a    397.5-398.6 us
 * and in fp32 at that shape 921-924 against 975-1030 us; ncu: L1 hit rate
 * 66.5% against 60.2%, DRAM 63.6% busy against 58.6%.
 *
 * Tried and not kept (reports/h200 run p, branch mhc3 at 9484751): a
 * persistent CTA of 512 threads an SM taking tokens two at a time, x
 * brought by cp.async into a ring of shared-memory buffers, P held in
 * registers as the A operand of tensor-core MMAs against the 8 stream
 * rows of a pair (no ALU unpacking of P, no P traffic through L1), one
 * warp running both tokens' Sinkhorn; and the same with that warp's
 * Sinkhorn beside the other warps' mix of the pair before. Both correct,
 * both twice as slow: 0.746 and 0.715 ms against 0.396 at T = 16384 in
 * bf16 (issued instructions 169 M and 178 M against 245 M, DRAM 30% busy;
 * 9.9 of the second one's 13 stall cycles per issue wait at a barrier for
 * the Sinkhorn warp). What this kernel lacks is bytes in flight while a
 * token's serial part runs, and a design that puts a whole block behind
 * one warp's Sinkhorn loses more than tensor cores save.
 *
 * Nor two or four tokens a block (run mhc-f), each P vector loaded and
 * unpacked once for all of them (ncu had a quarter of the bf16 kernel's
 * instructions unpacking P), at two blocks an SM (128 registers) or one
 * (248), so four tokens an SM either way: 352.1 and 536.5 us against
 * 326.0 at T = 16384 in bf16 (the projection in four passes or one
 * slower still), fp32 unchanged. Fewer instructions do not pay for a
 * block whose serial phases now hold back two or four tokens' loads.
 * Nor blocks of 512 threads (one vector a stream a thread at W = 4096 in
 * bf16: no spill at two blocks an SM, 76 bytes at three): 422.8 and
 * 407.3 us against 326.6 (run mhc-g).
 * Nor a resident kernel (bbd90fb, reverted): a block an SM with P copied
 * once into its shared memory (no P vector missing L1 or taking L2's
 * bandwidth) and groups of 256 threads, each doing a token as a block
 * here does, with its own named barrier, and fetching its next token's x
 * by cp.async into a shared buffer during this one's serial phases. Bit
 * for bit the same y; bf16 at T = 16384 (run mhc-h, two passes each):
 * three groups 376.8-376.9 us, three with the fetch issued after the
 * projection 376.4-377.0, two groups (no spill) 355.4, four groups without
 * the buffers 397.6-397.8, against this kernel's 327.8-327.9. Three and
 * four groups spill 76 and 108 bytes at their 80 and 64 registers into an
 * L1 the shared memory has shrunk to 28 KB.
 * Nor x dropped from registers after the projection and read again (from
 * L2) for the mix, so that a thread holds a token's x only while it
 * loads: 4, 5, 6 and 8 blocks an SM (64, 48, 40, 32 registers) took
 * 387.9, 387.7-387.8, 427.7-428.1 and 601.9-602.4 us against 326.2-326.6
 * (run mhc-i, three passes each): x's second trip costs more than the
 * extra tokens in flight return.
 * Nor the bf16 projection on tensor cores (branch exp/mhc-mma, b865a7f):
 * mma.m16n8k16 with P as A (its 16 rows, bf16 as stored) and the stream
 * sum as B, split into three bf16 pieces (hi, mid, lo: exact products, the
 * sum within 2^-27), each lane writing its vector's pieces to shared
 * memory for the B fragments: no spill, no P unpacking and no projection
 * FFMA, same y within the tolerance (error/tolerance 0.953 as before), yet
 * 476.0-476.5 us against 316.5-316.8 at T = 16384 (run mhc-o; the
 * products chained in the tensor core 488.2-488.9). ncu: 212.4 M warp
 * instructions against 213.6 M (the FADDs of the products and the pieces'
 * conversions took what the FFMAs gave back), long-scoreboard stalls 5.25
 * cycles an issue against 2.43 (each 16-byte load of P for an A fragment
 * spans 8 rows, 64 bytes each, where the thread's own vector spans 1),
 * L1 hit rate 63.4% against 69.7% with the 64 KB shared-memory carveout
 * its 14.4 KB a block need; DRAM 51.9% busy against 70.1%.
 * Nor asking L2 for a later token's x (one bulk prefetch from the block's
 * first thread, 132, 264, 528 or 1056 tokens ahead): 324.6-382.9 us
 * against 317.4-317.9 in bf16 at T = 16384, 721.6-816.3 against
 * 711.0-712.1 in fp32 (run mhc-q).
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

/* The fused kernel's blocks: 8 warps, one token each. */
#define MHC_FUSED_THREADS 256
/* The fallback's projection: one block of 8 warps a token. */
#define MHC_FB_THREADS 256
/* 16-byte vectors a thread holds per stream; wider rows do not fit in
 * registers (cudaErrorInvalidValue: the case is skipped, not wrong). */
#define MHC_MAX_VPT 4
#define FULL_MASK 0xffffffffu
/* Blocks an SM the fused kernel is compiled for: four tokens in flight
 * hide one token's serial phases behind the others' loads; a thread
 * holding more than two vectors a stream needs more registers than that
 * leaves (64). Measured at T = 16384, N = 4, W = 4096, bf16: four against
 * three (64 registers against 80) on the H200, 0.347 against 0.365 ms; a
 * persistent grid of two blocks an SM (128 registers, the next token
 * prefetched by cp.async into shared memory, which took L1 from P) was
 * slower still: 0.659 ms on an H100, 0.533 of its memory ceiling, where
 * the fallback took 0.648 ms (git log of this file, 578b008). In fp32 at
 * W = 4096 (four vectors, 124 registers, two blocks an SM as it falls
 * out), asking for two blocks (so warp 0 alone runs the Sinkhorn) or
 * three (80 registers, 84 bytes spilled) took 803.8-804.4 and 948.2-949.0
 * us against 703.3-703.6 at T = 16384 (run mhc-r). */
#define MHC_FUSED_MIN_BLOCKS(vpt) ((vpt) <= 2 ? 4 : 1)
/* Blocks an SM of the fallback's projection (one block per token): two
 * while a thread holds at most two vectors a stream (128 registers, no
 * spill in CUDA 13.0's ptxas); unbounded, its projection took 164
 * registers, one block an SM, and 0.771 ms where two blocks took 0.648 on
 * an H100 (T = 16384, N = 4, W = 4096, bf16: reports/h100 run a and b). */
#define MHC_FB_MIN_BLOCKS(vpt) ((vpt) <= 2 ? 2 : 1)

/* ---- loads and stores that leave L1 to P ---------------------------------- */

/* x is read once and y written once, P by every token: x and y never take
 * an L1 line (L1::no_allocate) and P's lines go last (L1::evict_last), so
 * that P, and the few bytes a thread spills, stay in L1. With the
 * projection in two passes (project) they took the fused kernel from 346
 * to 327 us at T = 16384, N = 4, W = 4096 in bf16 and from 927 to 810 us
 * in fp32, on one H200 (reports/h200 run mhc-d); x's or P's policy alone
 * changed nothing, and the two passes alone were 12% slower (run mhc-c).
 * 16-byte vectors only (narrower ones load and store plainly); under
 * MB_MHC_EMU, plain loads and stores. In fp32, P (256 KiB) does not fit in
 * L1; keeping only its first 8, 10, 12 or 14 rows there (evict_last) and
 * reading the rest past L1 (no_allocate) took the fused kernel from
 * 700.8-702.1 us to 777.9-812.0 at T = 16384 (run mhc-p), so the fused
 * kernel keeps every row; the fallback's projection keeps 8. */
__device__ __forceinline__ uint4 load_once(const void *p)
{
#ifdef MB_MHC_EMU
	return *static_cast<const uint4 *>(p);
#else
	uint4 v;
	asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
		     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
		     : "l"(p));
	return v;
#endif
}

__device__ __forceinline__ uint4 load_kept(const void *p)
{
#ifdef MB_MHC_EMU
	return *static_cast<const uint4 *>(p);
#else
	uint4 v;
	asm("ld.global.nc.L1::evict_last.v4.u32 {%0, %1, %2, %3}, [%4];"
	    : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
	    : "l"(p));
	return v;
#endif
}

__device__ __forceinline__ void store_once(void *p, uint4 v)
{
#ifdef MB_MHC_EMU
	*static_cast<uint4 *>(p) = v;
#else
	asm volatile("st.global.L1::no_allocate.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y),
		     "r"(v.z), "r"(v.w)
		     : "memory");
#endif
}

/* A vector of x (KEPT false) or of P (KEPT true). */
template <bool KEPT, typename T, int VEC>
__device__ __forceinline__ void load_vector(mb_packed<T, VEC> &dst, const T *p)
{
	if constexpr (sizeof(T) * VEC != MB_VEC_BYTES)
		dst.load(p);
	else if constexpr (KEPT)
		dst.w = load_kept(p);
	else
		dst.w = load_once(p);
}

/* A vector of y. */
template <typename T, int VEC>
__device__ __forceinline__ void store_vector(T *p, const float (&in)[VEC])
{
	mb_vec<T, VEC> v;
#pragma unroll
	for (int i = 0; i < VEC; i++)
		v.v[i] = mb_from_f32<T>(in[i]);
	if constexpr (sizeof(T) * VEC == MB_VEC_BYTES) {
		uint4 bits;
		memcpy(&bits, &v, sizeof(bits));
		store_once(p, bits);
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
				load_vector<false, T, VEC>(xs[j][k], base + (int64_t)j * width + (int64_t)v * VEC);
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

/* The token's n*n logits phi, in lanes 0 .. n*n-1 of warp 0, or of every
 * warp with EVERY_WARP (other lanes: unspecified). The streams are added
 * in order and their sum, not their mean, is dotted with P; the sum of
 * the dot products is scaled by 1/n at the end. For n = 2, 4 that scaling
 * is exact wherever it stands, so phi is bit for bit what the mean would
 * give (the reference divides the sum by n first), with 16 products a
 * thread fewer in each of the two passes. Each thread's dot products run
 * in order over its vectors, then a warp tree, then the warps in order.
 * P's rows below KEPT are read as load_kept, the rest past L1. Ends with
 * every thread past one __syncthreads. */
template <int THREADS, bool EVERY_WARP, int KEPT, typename T, int N, int VEC, int VPT>
__device__ __forceinline__ float project(const mb_packed<T, VEC> (&xs)[N][VPT], const T *__restrict__ p, int width,
	float (&red)[THREADS / MB_WARP_THREADS][N * N])
{
	constexpr int V = N * N;
	const int nvec = width / VEC, lane = threadIdx.x % MB_WARP_THREADS, warp = threadIdx.x / MB_WARP_THREADS;
	/* Two passes of V / 2 sums each, with the L1 policies above: in
	 * reports/h200 run mhc-d, four passes of four were as fast in bf16
	 * (without evict_last) and 9% slower in fp32, eight passes 25% slower
	 * in bf16. Each sum's order is that of one pass: over the thread's
	 * vectors in order, then the same warp tree (xor 16, 8, 4, 2, 1).
	 * The stream sums are formed again in the second pass: kept from the
	 * first (16 more live registers, 116 bytes spilled) they took 363.5-
	 * 364.1 us against 318.5-318.8 in bf16 at T = 16384, and one pass of
	 * 16 sums 333.6-334.5 (48 bytes spilled; in fp32 166 registers, one
	 * block an SM, 933 against 700 us): run mhc-k. */
	constexpr int H = V >= 2 ? V / 2 : 1;
	/* Where a thread holds at most two vectors a stream (bf16 and fp16 at
	 * W = 4096), the first vector's sums are kept for the second pass:
	 * 8 live registers, 28 more bytes spilled, 112 fewer instructions a
	 * thread; 317.5-317.8 against 320.0-320.4 us in bf16 at T = 16384 and
	 * 91.3-91.5 against 92.6-92.7 at T = 4096 (run mhc-l, one H200);
	 * in fp32 (four vectors, 124 registers) 0.3% slower, so not there. */
	constexpr bool KEEP_FIRST = VPT <= 2 && V >= 2;
	float first[VEC];
#ifdef MB_MHC_EMU
	/* The first pass writes it before the second reads it, which gcc
	 * (compiling the emulation) cannot see; on the GPU an initialiser
	 * would change the measured code (a copy in every loop exit). */
	for (float &f : first)
		f = 0.0f;
#endif
#pragma unroll
	for (int h = 0; h < V; h += H) {
		float acc[H];
#pragma unroll
		for (int q = 0; q < H; q++)
			acc[q] = 0.0f;
#pragma unroll
		for (int k = 0; k < VPT; k++) {
			const int v = threadIdx.x + k * THREADS;
			if (v >= nvec)
				break;
			float xb[VEC];
#pragma unroll
			for (int e = 0; e < VEC; e++) {
				if (KEEP_FIRST && h > 0 && k == 0) {
					xb[e] = first[e];
					continue;
				}
				float s = xs[0][k].get(e);
#pragma unroll
				for (int j = 1; j < N; j++)
					s += xs[j][k].get(e);
				xb[e] = s;
				if (KEEP_FIRST && k == 0)
					first[e] = s;
			}
#pragma unroll
			for (int q = 0; q < H; q++) {
				mb_packed<T, VEC> pv;
				const T *at = p + (int64_t)(h + q) * width + (int64_t)v * VEC;
				if (h + q < KEPT)
					load_vector<true, T, VEC>(pv, at);
				else
					load_vector<false, T, VEC>(pv, at);
#pragma unroll
				for (int e = 0; e < VEC; e++)
					acc[q] = fmaf(xb[e], pv.get(e), acc[q]);
			}
		}
		const float s = warp_sum_scatter<H>(acc);
		if (lane % (MB_WARP_THREADS / H) == 0)
			red[warp][h + lane / (MB_WARP_THREADS / H)] = s;
	}
	__syncthreads();
	float phi = 0.0f;
	if ((EVERY_WARP || warp == 0) && lane < V) {
		for (int w = 0; w < THREADS / MB_WARP_THREADS; w++)
			phi += red[w][lane];
		phi = __fdiv_rn(phi * (1.0f / N), sqrtf((float)width));
	}
	return phi;
}

/* ---- Sinkhorn ------------------------------------------------------------- */

/* The fast reciprocal: one MUFU instruction, within 1 ulp. The 40
 * half-steps are a chain of multiply-adds and reciprocals that one warp
 * runs while its block waits: its latency is the fused kernel's serial
 * part. */
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

/* One Sinkhorn half-step in the scaling form (sinkhorn): the scaling of
 * every row of E (COLS false) or column (COLS true) from the other
 * side's, out_k = 1 / sum_l E_kl by_l (E_lk for columns), the sum in order
 * of l and the reciprocal rcp.approx. */
template <int N, bool COLS>
__device__ __forceinline__ void rescale(const float (&m)[N][N], const float (&by)[N], float (&out)[N])
{
#pragma unroll
	for (int k = 0; k < N; k++) {
		float sum = (COLS ? m[0][k] : m[k][0]) * by[0];
#pragma unroll
		for (int l = 1; l < N; l++)
			sum = fmaf(COLS ? m[l][k] : m[k][l], by[l], sum);
		out[k] = rcp_approx(sum);
	}
}

/* S from the logits in lanes 0 .. n*n-1, in the scaling form: every lane
 * gathers E = exp(phi) and keeps the row and column scalings r and c of
 * S = diag(r) E diag(c) (c = 1 at the start); a row half-step sets
 * r_i = 1 / sum_j E_ij c_j, a column half-step c_j = 1 / sum_i E_ij r_i,
 * each sum in order and the reciprocal rcp.approx, and S is formed once at
 * the end. The entries the reference divides at every half-step are
 * r_i E_ij c_j exactly; here each half-step rounds a scaling by n u (the
 * sum of n products) and u (the reciprocal), as many as the matrix form's
 * (n-1) u, u and u, and the end 2 u more (src/reference/mhc_sinkhorn.c).
 * A half-step is n fused multiply-adds and a reciprocal per row or column,
 * where the matrix form took n-1 adds, a reciprocal and n products: 20
 * instructions against 32 at n = 4, 40 half-steps a token on the warp
 * that runs them. S ends the same in every lane. Against the matrix form,
 * one H200, three passes each (reports/h200 run mhc-j), with the 1/n of
 * project's sums folded as well: fused bf16 at T = 16384, N = 4, W = 4096
 * 326.5-326.9 to 318.6-319.1 us (0.769 to 0.788 of the memory ceiling),
 * fp32 729.4-729.8 to 700.5-700.9 us; the folded 1/n alone 0.1-0.3%. */
template <int N> __device__ __forceinline__ void sinkhorn(float phi, int iters, float (&m)[N][N])
{
	const float e = expf(phi);
	float r[N], c[N];

#pragma unroll
	for (int q = 0; q < N * N; q++)
		m[q / N][q % N] = __shfl_sync(FULL_MASK, e, q);
#pragma unroll
	for (int j = 0; j < N; j++)
		c[j] = 1.0f;
	for (int it = 0; it < iters; it++) {
		rescale<N, false>(m, c, r);
		rescale<N, true>(m, r, c);
	}
	if (iters > 0) {
#pragma unroll
		for (int i = 0; i < N; i++) {
#pragma unroll
			for (int j = 0; j < N; j++)
				m[i][j] = r[i] * m[i][j] * c[j];
		}
	}
}

/* Warp 0 for its block: lane q writes entry q of S. */
template <int N> __device__ __forceinline__ void sinkhorn_warp(float phi, int iters, float *__restrict__ s_out)
{
	const int lane = threadIdx.x % MB_WARP_THREADS;
	float m[N][N];

	sinkhorn<N>(phi, iters, m);
#pragma unroll
	for (int q = 0; q < N * N; q++) {
		if (lane == q)
			s_out[q] = m[q / N][q % N];
	}
}

/* y_t[i] = sum_j S[i][j] x_t[j] for the thread's vectors, S in registers. */
template <int THREADS, typename T, int N, int VEC, int VPT>
__device__ __forceinline__ void mix_store(const mb_packed<T, VEC> (&xs)[N][VPT], const float (&s)[N * N],
	T *__restrict__ y, int64_t t, int width)
{
	const int nvec = width / VEC;
	T *base = y + t * N * (int64_t)width;
#pragma unroll
	for (int k = 0; k < VPT; k++) {
		const int v = threadIdx.x + k * THREADS;
		if (v >= nvec)
			break;
#pragma unroll
		for (int i = 0; i < N; i++) {
			float out[VEC];
#pragma unroll
			for (int e = 0; e < VEC; e++) {
				float acc = s[i * N] * xs[0][k].get(e);
#pragma unroll
				for (int j = 1; j < N; j++)
					acc = fmaf(s[i * N + j], xs[j][k].get(e), acc);
				out[e] = acc;
			}
			store_vector<T, VEC>(base + (int64_t)i * width + (int64_t)v * VEC, out);
		}
	}
}

/* ---- fused: one block per token ------------------------------------------- */

/* Token blockIdx.x: x into registers, the projection, S, the mix and y.
 * Where registers are plenty (one block an SM: a thread holding more than
 * two vectors a stream, fp32 at W = 4096), every warp runs the Sinkhorn
 * iterations itself instead of waiting at a barrier for warp 0's: 813 to
 * 740 us in fp32 at T = 16384, N = 4, W = 4096 on one H200 (reports/h200
 * run mhc-e). At four blocks an SM (64 registers) the extra matrix spills
 * and the same change took bf16 from 327 to 459 us. */
template <typename T, int N, int VEC, int VPT>
__global__ void __launch_bounds__(MHC_FUSED_THREADS, MHC_FUSED_MIN_BLOCKS(VPT)) mb_mhc_sinkhorn_fused_kernel(
	const T *__restrict__ x, const T *__restrict__ p, T *__restrict__ y, int width, int iters)
{
	constexpr bool EVERY_WARP = MHC_FUSED_MIN_BLOCKS(VPT) == 1;
	__shared__ float red[MHC_FUSED_THREADS / MB_WARP_THREADS][N * N];
	__shared__ float s_shared[N * N];
	mb_packed<T, VEC> xs[N][VPT];
	float s[N * N];
	const int64_t t = blockIdx.x;

	load_token<MHC_FUSED_THREADS>(xs, x, t, width);
	const float phi = project<MHC_FUSED_THREADS, EVERY_WARP, N * N>(xs, p, width, red);
	if constexpr (EVERY_WARP) {
		float m[N][N];

		sinkhorn<N>(phi, iters, m);
#pragma unroll
		for (int q = 0; q < N * N; q++)
			s[q] = m[q / N][q % N];
	} else {
		if (threadIdx.x < MB_WARP_THREADS)
			sinkhorn_warp<N>(phi, iters, s_shared);
		__syncthreads();
#pragma unroll
		for (int q = 0; q < N * N; q++)
			s[q] = s_shared[q];
	}
	mix_store<MHC_FUSED_THREADS>(xs, s, y, t, width);
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

/* One block per token. */
template <typename T, int N, int VEC, int VPT>
static int fused_launch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	static bool carveout;

	prefer_l1(mb_mhc_sinkhorn_fused_kernel<T, N, VEC, VPT>, &carveout);
	mb_mhc_sinkhorn_fused_kernel<T, N, VEC, VPT><<<(unsigned)axis[AX_T], MHC_FUSED_THREADS, 0, stream>>>(
		(const T *)in[IN_X], (const T *)in[IN_P], (T *)out[OUT_Y], (int)axis[AX_W], (int)axis[AX_I]);
	return (int)cudaGetLastError();
}

#endif

/* ---- fallback ---------------------------------------------------------------- */

/* Projection: the fused kernel's first half, x wholly in registers,
 * ending in exp(phi) written to the fp32 [T, n, n] buffer; registers as
 * MHC_FB_MIN_BLOCKS says (capped as the fused kernel's, it spilled). In
 * fp32 P's first 8 rows stay in L1 and the rest is read past it: 912.6-
 * 913.0 us against 964.5-965.3 with every row kept at T = 16384, N = 4,
 * W = 4096 (run mhc-p; 10, 12 and 14 rows 997-1043 us). The fused kernel
 * keeps every row: it is slower with any of these (the loads section). */
#define MHC_FB_KEPT_ROWS(T, N) (sizeof(T) == 4 ? 8 : (N) * (N))
/* WIDTH: 0, or the launch's width where it is exactly VPT vectors of every
 * thread (W = 4096 in bf16 and fp16): the rows' strides are constants, as
 * a compiling framework that specialises to the shapes it sees has them,
 * and P's rows and x's streams load at immediate offsets from one address
 * a thread. bf16 at W = 4096 (reports/h200 run mhc-s, one H200, three
 * passes each): 496.0-496.5 against 516.2-516.6 us at T = 16384, 156.6-
 * 156.7 against 161.4-161.5 at T = 4096, a stronger baseline; in fp32
 * slower (947.6-952.0 against 914.2-916.7 at T = 16384), so not there.
 * The fused kernel with the same was slower in both (run mhc-s: 369.2-
 * 370.7 against 317.2-317.8 us in bf16, 891.9-892.4 against 706.2-707.5
 * in fp32; 181.1 M warp instructions against 213.6 M, but 40% of its
 * stall samples on long scoreboards and twice the local-memory traffic). */
template <typename T, int N, int VEC, int VPT, int WIDTH = 0>
__global__ void __launch_bounds__(MHC_FB_THREADS, MHC_FB_MIN_BLOCKS(VPT)) mb_mhc_sinkhorn_fb_project_kernel(
	const T *__restrict__ x, const T *__restrict__ p, float *__restrict__ m, int width)
{
	static_assert(WIDTH == 0 || WIDTH == VPT * VEC * MHC_FB_THREADS, "an exact width or none");
	if constexpr (WIDTH > 0) {
		width = WIDTH;
#ifndef MB_MHC_EMU
		__builtin_assume(threadIdx.x < MHC_FB_THREADS);
#endif
	}
	__shared__ float red[MHC_FB_THREADS / MB_WARP_THREADS][N * N];
	mb_packed<T, VEC> xs[N][VPT];
	const int64_t t = blockIdx.x;

	load_token<MHC_FB_THREADS>(xs, x, t, width);
	const float phi = project<MHC_FB_THREADS, false, MHC_FB_KEPT_ROWS(T, N)>(xs, p, width, red);
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
		load_vector<false, T, VEC>(xs[j], xb + (int64_t)j * width);
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
		store_vector<T, VEC>(yb + (int64_t)i * width, out);
	}
}

#ifndef MB_MHC_EMU
static mb_ws_slot ws_m;

/* The projection, one block a token, at WIDTH (0: the width as given). */
template <typename T, int N, int VEC, int VPT, int WIDTH>
static void fb_project_launch(cudaStream_t stream, int64_t tokens, const void *const *in, float *m, int width)
{
	static bool carveout;

	prefer_l1(mb_mhc_sinkhorn_fb_project_kernel<T, N, VEC, VPT, WIDTH>, &carveout);
	mb_mhc_sinkhorn_fb_project_kernel<T, N, VEC, VPT, WIDTH><<<(unsigned)tokens, MHC_FB_THREADS, 0, stream>>>(
		(const T *)in[IN_X], (const T *)in[IN_P], m, width);
}

template <typename T, int N, int VEC, int VPT>
static int fallback_launch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	/* the exact-width projection in bf16 and fp16 only (the kernel's notes) */
	constexpr int exact = sizeof(T) == 2 ? VPT * VEC * MHC_FB_THREADS : 0;
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
	if (exact > 0 && width == exact)
		fb_project_launch<T, N, VEC, VPT, exact>(stream, tokens, in, (float *)m, width);
	else
		fb_project_launch<T, N, VEC, VPT, 0>(stream, tokens, in, (float *)m, width);
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

enum { MHC_FALLBACK, MHC_FUSED };

/* The launcher of variant KIND for VPT vectors a thread. */
template <typename T, int N, int VEC, int VPT, int KIND> static mhc_launch_fn launcher()
{
	if (KIND == MHC_FALLBACK)
		return fallback_launch<T, N, VEC, VPT>;
	return fused_launch<T, N, VEC, VPT>;
}

/* The instantiation for n streams, VEC-element vectors and VPT vectors a
 * thread: the fewest VPT that cover a stream's W/VEC vectors with the
 * kernel's threads. */
template <typename T, int N, int VEC, int KIND>
static int pick_vpt(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	const int64_t nvec = axis[AX_W] / VEC, threads = KIND == MHC_FALLBACK ? MHC_FB_THREADS : MHC_FUSED_THREADS;
	mhc_launch_fn fn = NULL;

	if (nvec <= threads)
		fn = launcher<T, N, VEC, 1, KIND>();
	else if (nvec <= 2 * threads)
		fn = launcher<T, N, VEC, 2, KIND>();
	else if (nvec <= MHC_MAX_VPT * threads)
		fn = launcher<T, N, VEC, 4, KIND>();
	if (!fn)
		return (int)cudaErrorInvalidValue;
	return fn(stream, axis, in, out);
}

template <typename T, int N, int KIND>
static int pick_vec(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	constexpr int vec = mb_vec16_elems<T>();
	/* 16-byte accesses need aligned bases and streams of whole vectors;
	 * other widths run the same kernels one element per access */
	if (mb_aligned16(in[IN_X]) && mb_aligned16(in[IN_P]) && mb_aligned16(out[OUT_Y]) && axis[AX_W] % vec == 0)
		return pick_vpt<T, N, vec, KIND>(stream, axis, in, out);
	return pick_vpt<T, N, 1, KIND>(stream, axis, in, out);
}

template <typename T, int KIND>
static int dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	if (axis[AX_T] < 1 || axis[AX_T] > INT32_MAX || axis[AX_W] < 1 || axis[AX_W] > INT32_MAX || axis[AX_I] < 0 ||
		axis[AX_I] > INT32_MAX)
		return (int)cudaErrorInvalidValue;
	switch (axis[AX_N]) {
	case 2:
		return pick_vec<T, 2, KIND>(stream, axis, in, out);
	case 4:
		return pick_vec<T, 4, KIND>(stream, axis, in, out);
	default:
		return (int)cudaErrorInvalidValue;
	}
}

template <typename T>
static int fused_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	return dispatch<T, MHC_FUSED>(stream, axis, in, out);
}

template <typename T>
static int fallback_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	return dispatch<T, MHC_FALLBACK>(stream, axis, in, out);
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
