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
 * stays in L1: x is loaded evict-first and y stored so, and the kernels
 * keep as much L1 as their shared memory leaves.
 *
 * Of a thread's vectors, the last of streams 1 .. n-1 waits in shared
 * memory instead of registers (token_x's stash): at 64 registers (four
 * blocks an SM) x held wholly in registers spilled 40 bytes a thread at
 * W = 4096 in bf16, local traffic through the L1 that holds P; with the
 * stash 12, and 64 KiB of the SM's 256 go to shared memory. Both kernels
 * in one run on an H100 (2026-11-27, reports/h100/heavy-b): 0.490 against
 * 0.522 ms at T = 16384, N = 4, W = 4096 in bf16, 0.127 against 0.136 ms
 * at T = 4096; the kernel without the stash was then removed.
 *
 * fused_v2 and fused_v3, candidates for one GPU measurement beside fused,
 * move the projection to tensor cores and x through shared memory (their
 * section below says how and why).
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
 * the fallback took 0.648 ms (git log of this file, 578b008). */
#define MHC_FUSED_MIN_BLOCKS(vpt) ((vpt) <= 2 ? 4 : 1)
/* Blocks an SM of the fallback's projection (one block per token): two
 * while a thread holds at most two vectors a stream (128 registers, no
 * spill in CUDA 13.0's ptxas); unbounded, its projection took 164
 * registers, one block an SM, and 0.771 ms where two blocks took 0.648 on
 * an H100 (T = 16384, N = 4, W = 4096, bf16: reports/h100 run a and b). */
#define MHC_FB_MIN_BLOCKS(vpt) ((vpt) <= 2 ? 2 : 1)

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

/* A thread's vectors of a token's x, vector k of stream j at (j, k): in
 * registers, but with STASH (16-byte vectors, two or more a stream) the
 * last vector of streams 1 .. n-1 waits in shared memory, [n-1][THREADS]
 * vectors written and read by their own thread only, so that the
 * projection's dot products (16 sums, 8 means, the P vectors in flight)
 * fit beside the rest without spilling. */
template <int THREADS, typename T, int N, int VEC, int VPT, bool STASH> struct token_x {
	static constexpr bool STASHED = STASH && VPT >= 2 && sizeof(T) * VEC == MB_VEC_BYTES;
	static constexpr int STASH_VECTORS = STASHED ? (N - 1) * THREADS : 1;
	mb_packed<T, VEC> r[N][VPT];
	uint4 *stash;

	__device__ __forceinline__ mb_packed<T, VEC> at(int j, int k) const
	{
		if constexpr (STASHED) {
			if (j > 0 && k == VPT - 1) {
				mb_packed<T, VEC> v;
				v.w = stash[(j - 1) * THREADS + threadIdx.x];
				return v;
			}
		}
		return r[j][k];
	}
	__device__ __forceinline__ void set(int j, int k, const mb_packed<T, VEC> &v)
	{
		if constexpr (STASHED) {
			if (j > 0 && k == VPT - 1) {
				stash[(j - 1) * THREADS + threadIdx.x] = v.w;
				return;
			}
		}
		r[j][k] = v;
	}
};

/* Thread k's vectors k + THREADS * v of every stream of token t (zero
 * past the row's end). */
template <int THREADS, typename T, int N, int VEC, int VPT, bool STASH>
__device__ __forceinline__ void load_token(token_x<THREADS, T, N, VEC, VPT, STASH> &xs, const T *__restrict__ x,
	int64_t t, int width)
{
	const int nvec = width / VEC;
	const T *base = x + t * N * (int64_t)width;
#pragma unroll
	for (int j = 0; j < N; j++) {
#pragma unroll
		for (int k = 0; k < VPT; k++) {
			const int v = threadIdx.x + k * THREADS;
			mb_packed<T, VEC> vec{};
			if (v < nvec)
				load_streaming<T, VEC>(vec, base + (int64_t)j * width + (int64_t)v * VEC);
			xs.set(j, k, vec);
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
 * warps in order. Ends with every thread past one __syncthreads. */
template <int THREADS, typename T, int N, int VEC, int VPT, bool STASH>
__device__ __forceinline__ float project(const token_x<THREADS, T, N, VEC, VPT, STASH> &xs, const T *__restrict__ p,
	int width, float (&red)[THREADS / MB_WARP_THREADS][N * N])
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
		if (v >= nvec)
			break;
		float xb[VEC];
#pragma unroll
		for (int e = 0; e < VEC; e++) {
			float s = xs.at(0, k).get(e);
#pragma unroll
			for (int j = 1; j < N; j++)
				s += xs.at(j, k).get(e);
			xb[e] = s * (1.0f / N);
		}
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

/* The reciprocal of a Sinkhorn sum: rcp.approx (within 1 ulp, 2u) in
 * fused; correctly rounded (u, a few more instructions) where EXACT, which
 * fused_v2 takes to pay for its tensor-core projection's rounding
 * (src/reference/mhc_sinkhorn.c). */
template <bool EXACT> __device__ __forceinline__ float sinkhorn_rcp(float x)
{
	if constexpr (EXACT)
		return __frcp_rn(x);
	else
		return rcp_approx(x);
}

/* Row i of m to sum 1: the sum in order, then the reciprocal times each
 * entry (3 roundings of up to 2u, u and u, or with EXACT 2u, u and u; the
 * reference divides). */
template <int N, bool EXACT> __device__ __forceinline__ void normalise_row(float (&m)[N][N], int i)
{
	float s = m[i][0];
#pragma unroll
	for (int j = 1; j < N; j++)
		s += m[i][j];
	const float r = sinkhorn_rcp<EXACT>(s);
#pragma unroll
	for (int j = 0; j < N; j++)
		m[i][j] *= r;
}

template <int N, bool EXACT> __device__ __forceinline__ void normalise_col(float (&m)[N][N], int j)
{
	float s = m[0][j];
#pragma unroll
	for (int i = 1; i < N; i++)
		s += m[i][j];
	const float r = sinkhorn_rcp<EXACT>(s);
#pragma unroll
	for (int i = 0; i < N; i++)
		m[i][j] *= r;
}

/* A whole warp: every lane gathers exp(phi) from lanes first .. first +
 * n*n - 1 (its own `first`: lanes may work on different tokens) and runs
 * the iterations on its own copy (the same in every lane of a token);
 * lane first + q then writes entry q of S to s_out. */
template <int N, bool EXACT>
__device__ __forceinline__ void sinkhorn_lanes(float phi, int iters, int first, float *__restrict__ s_out)
{
	const int lane = threadIdx.x % MB_WARP_THREADS;
	const float e = expf(phi);
	float m[N][N];

#pragma unroll
	for (int q = 0; q < N * N; q++)
		m[q / N][q % N] = __shfl_sync(FULL_MASK, e, first + q);
	for (int it = 0; it < iters; it++) {
#pragma unroll
		for (int i = 0; i < N; i++)
			normalise_row<N, EXACT>(m, i);
#pragma unroll
		for (int j = 0; j < N; j++)
			normalise_col<N, EXACT>(m, j);
	}
#pragma unroll
	for (int q = 0; q < N * N; q++) {
		if (lane == first + q)
			s_out[q] = m[q / N][q % N];
	}
}

/* y_t[i] = sum_j S[i][j] x_t[j] for the thread's vectors, S in registers. */
template <int THREADS, typename T, int N, int VEC, int VPT, bool STASH>
__device__ __forceinline__ void mix_store(const token_x<THREADS, T, N, VEC, VPT, STASH> &xs, const float (&s)[N * N],
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
				float acc = s[i * N] * xs.at(0, k).get(e);
#pragma unroll
				for (int j = 1; j < N; j++)
					acc = fmaf(s[i * N + j], xs.at(j, k).get(e), acc);
				out[e] = acc;
			}
			store_streaming<T, VEC>(base + (int64_t)i * width + (int64_t)v * VEC, out);
		}
	}
}

/* ---- fused: one block per token ------------------------------------------- */

/* Token blockIdx.x: x into registers (part of it into `stash` with
 * STASH: token_x), the projection, the Sinkhorn warp, S into registers,
 * the mix and y. */
template <typename T, int N, int VEC, int VPT, bool STASH>
__device__ __forceinline__ void fused_token(const T *__restrict__ x, const T *__restrict__ p, T *__restrict__ y,
	int width, int iters, uint4 *stash)
{
	__shared__ float red[MHC_FUSED_THREADS / MB_WARP_THREADS][N * N];
	__shared__ float s_shared[N * N];
	token_x<MHC_FUSED_THREADS, T, N, VEC, VPT, STASH> xs;
	float s[N * N];
	const int64_t t = blockIdx.x;

	xs.stash = stash;
	load_token(xs, x, t, width);
	const float phi = project(xs, p, width, red);
	if (threadIdx.x < MB_WARP_THREADS)
		sinkhorn_lanes<N, false>(phi, iters, 0, s_shared);
	__syncthreads();
#pragma unroll
	for (int q = 0; q < N * N; q++)
		s[q] = s_shared[q];
	mix_store(xs, s, y, t, width);
}

/* The stash: 12 KiB a block for n = 4 at W = 4096 in bf16. */
template <typename T, int N, int VEC, int VPT>
__global__ void __launch_bounds__(MHC_FUSED_THREADS, MHC_FUSED_MIN_BLOCKS(VPT)) mb_mhc_sinkhorn_fused_kernel(
	const T *__restrict__ x, const T *__restrict__ p, T *__restrict__ y, int width, int iters)
{
	__shared__ uint4 stash[token_x<MHC_FUSED_THREADS, T, N, VEC, VPT, true>::STASH_VECTORS];

	fused_token<T, N, VEC, VPT, true>(x, p, y, width, iters, stash);
}

/* ---- fused_v2: the projection on tensor cores, x staged in shared memory --
 *
 * One persistent block of MHC_V2_THREADS an SM, tokens two at a time (a
 * pair). The projection is an MMA: phi's n*n = 16 rows of P are the A
 * operand (m16n8k16, bf16 or fp16 in, fp32 out), held in registers for
 * the whole kernel, and the pair's 8 stream rows (2 tokens x 4 streams)
 * the B operand's 8 columns, so that the 16 x 8 product is every stream's
 * dot product with every row of P: phi sums a token's 4 columns, and
 * xbar is never formed (x and P are exact MMA inputs; the products are
 * exact in fp32). The pair's x arrives in shared memory by cp.async, three
 * pairs in flight, and feeds both the MMA (ldmatrix) and the mix (16-byte
 * loads): no register holds x between the two, none is converted for the
 * projection, and P is neither loaded nor converted per token.
 *
 * Per token against fused, counted on paper (W = 4096): the projection
 * 128 MMAs and 64 ldmatrix (plus 512 fp32 additions of their results, in
 * warp instructions) instead of 2048 FMAs, 2048 conversions of P and 256
 * 16-byte loads of it; Sinkhorn shared by the pair's two tokens in one
 * warp (lanes 0-15 and 16-31); the mix unchanged (4 FMAs an element).
 * From the PTX, about 7,000 warp instructions a token (mix 3,700,
 * projection 1,600, Sinkhorn 1,250, copies 500) against fused's 15,000
 * (ncu, reports/h100 run b), and no per-token traffic for P.
 *
 * Warp w takes the 32-column chunks w, w + 16, ... of every row (two MMA
 * k-steps, one ldmatrix.x4 of the pair's 8 rows); its registers hold P
 * for those columns (64 registers at W = 4096). Each MMA starts from
 * zero and its result is added to the warp's fp32 sums in order (the
 * rounding bound of src/reference/mhc_sinkhorn.c takes each MMA's own
 * rounding on 16 products only). */

/* Threads of the persistent block: 16 warps, each a sixteenth of the
 * columns; 128 registers a thread (P's fragments take 64 at W = 4096). */
#define MHC_V2_THREADS 512
#define MHC_V2_WARPS (MHC_V2_THREADS / MB_WARP_THREADS)
/* The MMA tile: 16 rows of P, 8 stream rows (a pair), 16 columns a step. */
#define MHC_V2_STREAMS 4
#define MHC_V2_PAIR 2
#define MHC_V2_ROWS (MHC_V2_STREAMS * MHC_V2_PAIR)
#define MHC_V2_PROWS (MHC_V2_STREAMS * MHC_V2_STREAMS)
#define MHC_V2_KSTEP 16
/* Columns one ldmatrix.x4 covers: two k-steps of the 8 rows. */
#define MHC_V2_CHUNK 32
#define MHC_V2_MAX_WIDTH 4096
#define MHC_V2_CHUNKS_PER_WARP (MHC_V2_MAX_WIDTH / MHC_V2_CHUNK / MHC_V2_WARPS)
/* Pairs in shared memory: the one worked on and two in flight (64 KiB
 * each at W = 4096 in 16-bit types: 192 KiB, with the padding and the
 * reduction 200.5 KiB of the SM's 227). */
#define MHC_V2_BUFFERS 3
/* Each stream row padded by 16 bytes: rows W * 2 bytes apart would put the
 * 8 rows of an ldmatrix on the same banks. */
#define MHC_V2_PAD_BYTES 16

/* Bytes of one stream row in shared memory, and of the whole layout: the
 * ring of pairs, then the reduction [warps][2][16][4] and S [2][2][16]
 * (fused_v3 alternates between the two). */
__host__ __device__ constexpr int mhc_v2_row_bytes(int width, int elem_bytes)
{
	return width * elem_bytes + MHC_V2_PAD_BYTES;
}

__host__ __device__ constexpr int mhc_v2_red_floats()
{
	return MHC_V2_WARPS * MHC_V2_PAIR * MHC_V2_PROWS * MHC_V2_STREAMS;
}

__host__ __device__ constexpr size_t mhc_v2_smem_bytes(int width, int elem_bytes)
{
	return (size_t)MHC_V2_BUFFERS * MHC_V2_ROWS * mhc_v2_row_bytes(width, elem_bytes) +
		(size_t)(mhc_v2_red_floats() + 2 * MHC_V2_PAIR * MHC_V2_PROWS) * sizeof(float);
}

/* The primitives written in PTX. Under MB_MHC_EMU the test defines the
 * same names on the emulator of tests/unit/ssm_scan_emu.h. */
#ifndef MB_MHC_EMU
__device__ __forceinline__ uint32_t mhc_smem_u32(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared, L2 only (x is read once). */
__device__ __forceinline__ void mhc_cp_async16(void *dst, const void *src)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(mhc_smem_u32(dst)), "l"(src) : "memory");
}

__device__ __forceinline__ void mhc_cp_async_commit()
{
	asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Until at most PENDING of this thread's groups are still in flight. */
template <int PENDING> __device__ __forceinline__ void mhc_cp_async_wait()
{
	asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

__device__ __forceinline__ void mhc_ldsm_x4(uint32_t (&r)[4], const void *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
		: "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		: "r"(mhc_smem_u32(p))
		: "memory");
}

/* d = a b in T's MMA (d's old value not read: each MMA starts from zero). */
template <typename T>
__device__ __forceinline__ void mhc_mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);

template <>
__device__ __forceinline__ void mhc_mma<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
	const float z = 0.0f;
	asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
	    "{%10, %10, %10, %10};\n"
		: "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
		: "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(z));
}

template <>
__device__ __forceinline__ void mhc_mma<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
	const float z = 0.0f;
	asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
	    "{%10, %10, %10, %10};\n"
		: "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
		: "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(z));
}

__device__ __forceinline__ unsigned char *mhc_smem()
{
	extern __shared__ __align__(16) unsigned char mhc_smem_raw[];
	return mhc_smem_raw;
}
#endif

/* Two adjacent 16-bit elements as one word (P's fragments). */
template <typename T> __device__ __forceinline__ uint32_t load_pair_word(const T *p)
{
	return *reinterpret_cast<const uint32_t *>(p);
}

/* Warp w's fragments of P: chunk slot c is the 32 columns from
 * (w + c * warps) * 32, k-step h its h-th 16; with g = lane / 4 and
 * q = lane % 4, register r holds rows g + 8 (r % 2), columns 2 q + 8 (r / 2)
 * and the next (the PTX ISA's A layout). Zero past the row's end. */
template <typename T>
__device__ __forceinline__ void load_p_fragments(uint32_t (&a)[MHC_V2_CHUNKS_PER_WARP][2][4], const T *__restrict__ p,
	int width)
{
	const int warp = threadIdx.x / MB_WARP_THREADS, lane = threadIdx.x % MB_WARP_THREADS;
	const int g = lane / 4, q = lane % 4, chunks = width / MHC_V2_CHUNK;
#pragma unroll
	for (int c = 0; c < MHC_V2_CHUNKS_PER_WARP; c++) {
		const int chunk = warp + c * MHC_V2_WARPS;
#pragma unroll
		for (int h = 0; h < 2; h++) {
#pragma unroll
			for (int r = 0; r < 4; r++) {
				const int row = g + 8 * (r % 2), col = chunk * MHC_V2_CHUNK + h * MHC_V2_KSTEP + 2 * q + 8 * (r / 2);
				a[c][h][r] = chunk < chunks ? load_pair_word(p + (int64_t)row * width + col) : 0u;
			}
		}
	}
}

/* Pair `pair`'s rows into ring buffer `buf`: token 2 pair's 4 streams,
 * then the next token's (zeros where the last pair has one token), as
 * 16-byte cp.async of this thread's share, then one commit (empty past
 * the last pair, so that every thread counts the same groups). */
template <typename T>
__device__ __forceinline__ void issue_pair(unsigned char *buf, const T *__restrict__ x, int64_t pair, int64_t tokens,
	int width)
{
	const int row_bytes = mhc_v2_row_bytes(width, (int)sizeof(T)), vecs = width * (int)sizeof(T) / MB_VEC_BYTES;
	if (pair * MHC_V2_PAIR < tokens) {
		const int64_t t0 = pair * MHC_V2_PAIR;
		const int rows = (t0 + 1 < tokens ? MHC_V2_PAIR : 1) * MHC_V2_STREAMS;
		const unsigned char *src = reinterpret_cast<const unsigned char *>(x + t0 * MHC_V2_STREAMS * (int64_t)width);
#pragma unroll 1
		for (int r = 0; r < MHC_V2_ROWS; r++) {
			for (int v = threadIdx.x; v < vecs; v += MHC_V2_THREADS) {
				unsigned char *dst = buf + r * row_bytes + v * MB_VEC_BYTES;
				if (r < rows)
					mhc_cp_async16(dst, src + ((int64_t)r * vecs + v) * MB_VEC_BYTES);
				else
					*reinterpret_cast<uint4 *>(dst) = make_uint4(0, 0, 0, 0);
			}
		}
	}
	mhc_cp_async_commit();
}

/* This warp's partial products of the pair in `buf` with its columns of
 * P, into red[warp][token][row of P][stream]: each MMA from zero, its
 * result added in chunk and step order. */
template <typename T>
__device__ __forceinline__ void project_pair(const uint32_t (&a)[MHC_V2_CHUNKS_PER_WARP][2][4],
	const unsigned char *buf, int width, float *__restrict__ red)
{
	const int warp = threadIdx.x / MB_WARP_THREADS, lane = threadIdx.x % MB_WARP_THREADS;
	const int g = lane / 4, q = lane % 4, chunks = width / MHC_V2_CHUNK;
	const int row_bytes = mhc_v2_row_bytes(width, (int)sizeof(T));
	/* ldmatrix: lanes 8 i .. 8 i + 7 give the 8 rows of matrix i, the
	 * columns 8 i .. 8 i + 7 of the chunk (b0, b1 of step 0, then step 1) */
	const unsigned char *row = buf + (lane % 8) * row_bytes + (lane / 8) * 8 * (int)sizeof(T);
	float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};

#pragma unroll
	for (int c = 0; c < MHC_V2_CHUNKS_PER_WARP; c++) {
		const int chunk = warp + c * MHC_V2_WARPS;
		if (chunk < chunks) {
			uint32_t b[4];
			mhc_ldsm_x4(b, row + chunk * MHC_V2_CHUNK * (int)sizeof(T));
#pragma unroll
			for (int h = 0; h < 2; h++) {
				float d[4];
				mhc_mma<T>(d, a[c][h], b[2 * h], b[2 * h + 1]);
#pragma unroll
				for (int r = 0; r < 4; r++)
					acc[r] += d[r];
			}
		}
	}
	/* accumulator r: row of P g + 8 (r / 2), column 2 q + r % 2, the
	 * column being token column / 4, stream column % 4 */
#pragma unroll
	for (int r = 0; r < 4; r++) {
		const int prow = g + 8 * (r / 2), col = 2 * q + r % 2;
		const int tok = col / MHC_V2_STREAMS, stream = col % MHC_V2_STREAMS;
		red[((warp * MHC_V2_PAIR + tok) * MHC_V2_PROWS + prow) * MHC_V2_STREAMS + stream] = acc[r];
	}
}

/* Warp 0, lane l: token l / 16's phi for row l % 16 of P: each stream's
 * partials summed over the warps in order, the streams in order, then
 * scaled by 1/4 (exact) and divided by sqrt(W); then that token's
 * Sinkhorn in lanes 16 (l / 16) .. + 15 (exact reciprocals), S into s_pair. */
__device__ __forceinline__ void pair_sinkhorn(const float *__restrict__ red, int width, int iters,
	float *__restrict__ s_pair)
{
	const int lane = threadIdx.x % MB_WARP_THREADS, tok = lane / MHC_V2_PROWS, prow = lane % MHC_V2_PROWS;
	float phi = 0.0f;

#pragma unroll
	for (int j = 0; j < MHC_V2_STREAMS; j++) {
		float s = red[(tok * MHC_V2_PROWS + prow) * MHC_V2_STREAMS + j];
		for (int w = 1; w < MHC_V2_WARPS; w++)
			s += red[((w * MHC_V2_PAIR + tok) * MHC_V2_PROWS + prow) * MHC_V2_STREAMS + j];
		phi = j == 0 ? s : phi + s;
	}
	phi = __fdiv_rn(phi * (1.0f / MHC_V2_STREAMS), sqrtf((float)width));
	sinkhorn_lanes<MHC_V2_STREAMS, true>(phi, iters, tok * MHC_V2_PROWS, s_pair + tok * MHC_V2_PROWS);
}

/* The pair's y from the x in `buf`, by the `threads` threads from
 * `first`: one 16-byte column vector of one token a thread at a time, its
 * 4 streams from shared memory, the mix in fused's order, y stored
 * evict-first. */
template <typename T>
__device__ __forceinline__ void mix_pair(const unsigned char *buf, const float *__restrict__ s_pair,
	T *__restrict__ y, int64_t pair, int64_t tokens, int width, int first, int threads)
{
	constexpr int VEC = MB_VEC_BYTES / (int)sizeof(T);
	const int row_bytes = mhc_v2_row_bytes(width, (int)sizeof(T)), vecs = width / VEC;
	const int64_t t0 = pair * MHC_V2_PAIR;
	const int live = (int)(t0 + 1 < tokens ? MHC_V2_PAIR : 1) * vecs;

	for (int v = (int)threadIdx.x - first; v < live; v += threads) {
		/* v < 2 vecs: no division */
		const int tok = v >= vecs ? 1 : 0, k = v - tok * vecs;
		mb_packed<T, VEC> xs[MHC_V2_STREAMS];
		float s[MHC_V2_PROWS];
#pragma unroll
		for (int j = 0; j < MHC_V2_STREAMS; j++)
			xs[j].w = *reinterpret_cast<const uint4 *>(buf + (tok * MHC_V2_STREAMS + j) * row_bytes + k * MB_VEC_BYTES);
#pragma unroll
		for (int e = 0; e < MHC_V2_PROWS; e++)
			s[e] = s_pair[tok * MHC_V2_PROWS + e];
		T *base = y + (t0 + tok) * MHC_V2_STREAMS * (int64_t)width + (int64_t)k * VEC;
#pragma unroll
		for (int i = 0; i < MHC_V2_STREAMS; i++) {
			float out[VEC];
#pragma unroll
			for (int e = 0; e < VEC; e++) {
				float acc = s[i * MHC_V2_STREAMS] * xs[0].get(e);
#pragma unroll
				for (int j = 1; j < MHC_V2_STREAMS; j++)
					acc = fmaf(s[i * MHC_V2_STREAMS + j], xs[j].get(e), acc);
				out[e] = acc;
			}
			store_streaming<T, VEC>(base + (int64_t)i * width, out);
		}
	}
}

/* The persistent block: pairs blockIdx.x, + gridDim.x, ...; the i-th in
 * ring buffer i % 3.
 *
 * fused_v2 (OVERLAP false): two later pairs in flight while one is worked
 * on; each pair goes: its copies waited for, the projection, Sinkhorn
 * (warp 0, the other 15 waiting), the mix, and its buffer refilled.
 *
 * fused_v3 (OVERLAP true): warp 0's Sinkhorn of pair i runs beside the
 * other 15 warps' mix of pair i - 1 (S double-buffered), so that the
 * serial iterations no longer stall the block; the buffer of pair i - 1
 * is refilled only then, so one to two later pairs are in flight instead
 * of two to three, and the last pair is mixed after the loop. */
template <typename T, bool OVERLAP>
__device__ __forceinline__ void persistent_pairs(const T *__restrict__ x, const T *__restrict__ p, T *__restrict__ y,
	int64_t tokens, int width, int iters)
{
	constexpr int AHEAD = OVERLAP ? MHC_V2_BUFFERS - 1 : MHC_V2_BUFFERS;
	constexpr int S_FLOATS = MHC_V2_PAIR * MHC_V2_PROWS;
	unsigned char *smem = mhc_smem();
	const int buf_bytes = MHC_V2_ROWS * mhc_v2_row_bytes(width, (int)sizeof(T));
	float *red = reinterpret_cast<float *>(smem + MHC_V2_BUFFERS * buf_bytes);
	float *s_pairs = red + mhc_v2_red_floats();
	/* T <= INT32_MAX (dispatch): pair indices fit an int */
	const int pairs = (int)((tokens + MHC_V2_PAIR - 1) / MHC_V2_PAIR);
	const bool sinkhorn_warp = threadIdx.x < MB_WARP_THREADS;
	uint32_t a[MHC_V2_CHUNKS_PER_WARP][2][4];
	int buf = 0;

	/* x's first pairs from DRAM before P's fragments from L2 */
	for (int b = 0; b < AHEAD; b++)
		issue_pair(smem + b * buf_bytes, x, blockIdx.x + (int64_t)b * gridDim.x, tokens, width);
	load_p_fragments(a, p, width);
	if constexpr (!OVERLAP) {
		for (int pair = (int)blockIdx.x; pair < pairs; pair += (int)gridDim.x) {
			unsigned char *cur = smem + buf * buf_bytes;
			mhc_cp_async_wait<AHEAD - 1>();
			__syncthreads();
			project_pair<T>(a, cur, width, red);
			__syncthreads();
			if (sinkhorn_warp)
				pair_sinkhorn(red, width, iters, s_pairs);
			__syncthreads();
			mix_pair<T>(cur, s_pairs, y, pair, tokens, width, 0, MHC_V2_THREADS);
			/* every thread done with cur (and with s_pairs and red) */
			__syncthreads();
			issue_pair(cur, x, pair + (int64_t)AHEAD * gridDim.x, tokens, width);
			buf = buf + 1 == MHC_V2_BUFFERS ? 0 : buf + 1;
		}
	} else {
		/* one pass past the last pair mixes it (all warps, no Sinkhorn) */
		int prev = -1, i = 0;
		for (int pair = (int)blockIdx.x;; pair += (int)gridDim.x, i++) {
			const bool live = pair < pairs;
			const int prev_buf = buf == 0 ? MHC_V2_BUFFERS - 1 : buf - 1;
			if (!live && prev < 0)
				break;
			if (live) {
				mhc_cp_async_wait<AHEAD - 1>();
				__syncthreads();
				project_pair<T>(a, smem + buf * buf_bytes, width, red);
				__syncthreads();
				if (sinkhorn_warp)
					pair_sinkhorn(red, width, iters, s_pairs + i % 2 * S_FLOATS);
			}
			/* pair i - 1 in the buffer before this one, its S in the other half */
			if (prev >= 0 && !(live && sinkhorn_warp))
				mix_pair<T>(smem + prev_buf * buf_bytes, s_pairs + (1 - i % 2) * S_FLOATS, y, prev, tokens, width,
					live ? MB_WARP_THREADS : 0, live ? MHC_V2_THREADS - MB_WARP_THREADS : MHC_V2_THREADS);
			if (!live)
				break;
			/* every thread done with the previous buffer (and red read) */
			__syncthreads();
			issue_pair(smem + prev_buf * buf_bytes, x, pair + (int64_t)AHEAD * gridDim.x, tokens, width);
			prev = pair;
			buf = buf + 1 == MHC_V2_BUFFERS ? 0 : buf + 1;
		}
	}
	mhc_cp_async_wait<0>();
}

template <typename T>
__global__ void __launch_bounds__(MHC_V2_THREADS, 1) mb_mhc_sinkhorn_fused_v2_kernel(const T *__restrict__ x,
	const T *__restrict__ p, T *__restrict__ y, int64_t tokens, int width, int iters)
{
	persistent_pairs<T, false>(x, p, y, tokens, width, iters);
}

template <typename T>
__global__ void __launch_bounds__(MHC_V2_THREADS, 1) mb_mhc_sinkhorn_fused_v3_kernel(const T *__restrict__ x,
	const T *__restrict__ p, T *__restrict__ y, int64_t tokens, int width, int iters)
{
	persistent_pairs<T, true>(x, p, y, tokens, width, iters);
}

/* fused_v2 where the tensor-core kernel does not apply (fp32, n = 2, W
 * not a multiple of 32 or above 4096): fused's kernel under fused_v2's
 * name, so that a run's kernels are the variant's own. */
template <typename T, int N, int VEC, int VPT>
__global__ void __launch_bounds__(MHC_FUSED_THREADS, MHC_FUSED_MIN_BLOCKS(VPT)) mb_mhc_sinkhorn_fused_v2_simt_kernel(
	const T *__restrict__ x, const T *__restrict__ p, T *__restrict__ y, int width, int iters)
{
	__shared__ uint4 stash[token_x<MHC_FUSED_THREADS, T, N, VEC, VPT, true>::STASH_VECTORS];

	fused_token<T, N, VEC, VPT, true>(x, p, y, width, iters, stash);
}

/* The same for fused_v3. */
template <typename T, int N, int VEC, int VPT>
__global__ void __launch_bounds__(MHC_FUSED_THREADS, MHC_FUSED_MIN_BLOCKS(VPT)) mb_mhc_sinkhorn_fused_v3_simt_kernel(
	const T *__restrict__ x, const T *__restrict__ p, T *__restrict__ y, int width, int iters)
{
	__shared__ uint4 stash[token_x<MHC_FUSED_THREADS, T, N, VEC, VPT, true>::STASH_VECTORS];

	fused_token<T, N, VEC, VPT, true>(x, p, y, width, iters, stash);
}

#ifndef MB_MHC_EMU
/* The host side: under MB_MHC_EMU the kernels above are compiled for the
 * CPU and run by the SIMT emulator of tests/unit/ssm_scan_emu.h
 * (tests/unit/test_mhc_sinkhorn_emu.cpp), which launches them itself. */

/* The variants' kernels: fused_v2 and fused_v3 run fused's code under
 * their own names where their tensor-core kernel does not apply. */
enum { MHC_FALLBACK, MHC_FUSED, MHC_FUSED_V2_SIMT, MHC_FUSED_V3_SIMT };

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

/* Shared memory the driver reserves a block, and an SM's most. */
#define MHC_DRIVER_SMEM_PER_BLOCK 1024
#define MHC_SMEM_PER_SM_MAX (228 * 1024)

/* One block per token. The carveout, set on the kernel's first call
 * (outside any capture: the harness warms up first): shared memory just
 * enough for MHC_FUSED_MIN_BLOCKS blocks (64 KiB with the stash of four),
 * the rest L1, for P. A refused setting only costs speed. */
template <typename T, int N, int VEC, int VPT, int KIND>
static int fused_launch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	static bool carveout;
	auto kernel = mb_mhc_sinkhorn_fused_kernel<T, N, VEC, VPT>;
	if (KIND == MHC_FUSED_V2_SIMT)
		kernel = mb_mhc_sinkhorn_fused_v2_simt_kernel<T, N, VEC, VPT>;
	else if (KIND == MHC_FUSED_V3_SIMT)
		kernel = mb_mhc_sinkhorn_fused_v3_simt_kernel<T, N, VEC, VPT>;
	cudaFuncAttributes attr;

	if (!carveout) {
		carveout = true;
		if (cudaFuncGetAttributes(&attr, kernel) != cudaSuccess) {
			(void)cudaGetLastError();
		} else {
			const size_t want = (attr.sharedSizeBytes + MHC_DRIVER_SMEM_PER_BLOCK) * MHC_FUSED_MIN_BLOCKS(VPT);
			const int percent = (int)((want * 100 + MHC_SMEM_PER_SM_MAX - 1) / MHC_SMEM_PER_SM_MAX);
			if (cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
				    percent > 100 ? 100 : percent) != cudaSuccess)
				(void)cudaGetLastError();
		}
	}
	kernel<<<(unsigned)axis[AX_T], MHC_FUSED_THREADS, 0, stream>>>((const T *)in[IN_X], (const T *)in[IN_P],
		(T *)out[OUT_Y], (int)axis[AX_W], (int)axis[AX_I]);
	return (int)cudaGetLastError();
}

/* fused_v2's and fused_v3's tensor-core kernels: one block an SM (as many
 * as fit where W is small), no more than there are pairs. The shared
 * memory limit is set once to W = 4096's need, with the largest shared
 * carveout; the grid is worked out once per width. */
template <typename T, bool OVERLAP>
static int fused_v2_tensor_launch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	static bool attributes;
	static int grid_width = -1, grid_blocks;
	auto kernel = OVERLAP ? mb_mhc_sinkhorn_fused_v3_kernel<T> : mb_mhc_sinkhorn_fused_v2_kernel<T>;
	const int width = (int)axis[AX_W];
	const size_t smem = mhc_v2_smem_bytes(width, (int)sizeof(T));
	const int64_t pairs = (axis[AX_T] + MHC_V2_PAIR - 1) / MHC_V2_PAIR;
	cudaError_t ce;

	if (!attributes) {
		attributes = true;
		if ((ce = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
			     (int)mhc_v2_smem_bytes(MHC_V2_MAX_WIDTH, (int)sizeof(T)))) != cudaSuccess)
			return (int)ce;
		if (cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
			    (int)cudaSharedmemCarveoutMaxShared) != cudaSuccess)
			(void)cudaGetLastError();
	}
	if (grid_width != width) {
		int device, sms, per_sm;
		if ((ce = cudaGetDevice(&device)) != cudaSuccess ||
			(ce = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess ||
			(ce = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, MHC_V2_THREADS, smem)) !=
				cudaSuccess)
			return (int)ce;
		if (per_sm < 1)
			return (int)cudaErrorInvalidConfiguration;
		grid_width = width;
		grid_blocks = sms * per_sm;
	}
	const unsigned grid = (unsigned)(pairs < grid_blocks ? pairs : grid_blocks);
	kernel<<<grid, MHC_V2_THREADS, smem, stream>>>((const T *)in[IN_X], (const T *)in[IN_P], (T *)out[OUT_Y],
		axis[AX_T], width, (int)axis[AX_I]);
	return (int)cudaGetLastError();
}

#endif

/* ---- fallback ---------------------------------------------------------------- */

/* Projection: the fused kernel's first half, x wholly in registers,
 * ending in exp(phi) written to the fp32 [T, n, n] buffer; registers as
 * MHC_FB_MIN_BLOCKS says (capped as the fused kernel's, it spilled). */
template <typename T, int N, int VEC, int VPT>
__global__ void __launch_bounds__(MHC_FB_THREADS, MHC_FB_MIN_BLOCKS(VPT)) mb_mhc_sinkhorn_fb_project_kernel(
	const T *__restrict__ x, const T *__restrict__ p, float *__restrict__ m, int width)
{
	__shared__ float red[MHC_FB_THREADS / MB_WARP_THREADS][N * N];
	token_x<MHC_FB_THREADS, T, N, VEC, VPT, false> xs;
	const int64_t t = blockIdx.x;

	load_token(xs, x, t, width);
	const float phi = project(xs, p, width, red);
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


/* The launcher of variant KIND for VPT vectors a thread. */
template <typename T, int N, int VEC, int VPT, int KIND> static mhc_launch_fn launcher()
{
	if (KIND == MHC_FALLBACK)
		return fallback_launch<T, N, VEC, VPT>;
	return fused_launch<T, N, VEC, VPT, KIND>;
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

/* fused_v2 and fused_v3: the tensor-core kernel for 16-bit types, n = 4
 * and W a multiple of 32 up to 4096 (16-byte aligned tensors); fused's
 * kernel under the variant's name otherwise. */
template <typename T, bool OVERLAP>
static int tensor_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	if constexpr (sizeof(T) == 2) {
		if (axis[AX_T] >= 1 && axis[AX_T] <= INT32_MAX && axis[AX_N] == MHC_V2_STREAMS && axis[AX_W] % MHC_V2_CHUNK == 0 &&
			axis[AX_W] >= MHC_V2_CHUNK && axis[AX_W] <= MHC_V2_MAX_WIDTH && axis[AX_I] >= 0 &&
			axis[AX_I] <= INT32_MAX && mb_aligned16(in[IN_X]) && mb_aligned16(in[IN_P]) &&
			mb_aligned16(out[OUT_Y]))
			return fused_v2_tensor_launch<T, OVERLAP>(stream, axis, in, out);
	}
	return dispatch<T, OVERLAP ? MHC_FUSED_V3_SIMT : MHC_FUSED_V2_SIMT>(stream, axis, in, out);
}

template <typename T>
static int fused_v2_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	return tensor_dispatch<T, false>(stream, axis, in, out);
}

template <typename T>
static int fused_v3_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	return tensor_dispatch<T, true>(stream, axis, in, out);
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

/* One launch each: x read once (into shared memory), y written once. */
extern "C" MB_DECLARE_LAUNCH(mb_mhc_sinkhorn_fused_v2_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fused_v2_dispatch, (cudaStream_t)stream, axis, in, out);
}

extern "C" MB_DECLARE_LAUNCH(mb_mhc_sinkhorn_fused_v3_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fused_v3_dispatch, (cudaStream_t)stream, axis, in, out);
}

/* 2 + 2I launches: the projection, I row and I column normalisations over
 * the fp32 [T, n, n] buffer, the mix (x read a second time). */
extern "C" MB_DECLARE_LAUNCH(mb_mhc_sinkhorn_fallback_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fallback_dispatch, (cudaStream_t)stream, axis, in, out);
}
#endif
