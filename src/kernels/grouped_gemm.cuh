/* A grouped (jagged) bf16 or fp16 GEMM for the moe_ffn rows (moe_ffn and
 * moe_ffn_swiglu), the kernel for GPUs without wgmma (grouped_gemm_sm90.cuh
 * has Hopper's): C_g = A_g B_g for groups g = 0 .. groups-1 that share N
 * and the reduction length KD, where group g's rows of A are rows
 * group_off[g] .. group_off[g+1]-1 of one sorted row list (device-side
 * offsets: no host sync, no padding beyond the tile edge) and B_g is the
 * g-th [KD, N] row-major block of B [groups*KD, N].
 *
 * Tensor cores through mma.sync.aligned.m16n8k16.row.col (bf16 or fp16
 * in, fp32 accumulate), fragments loaded with ldmatrix (.trans for B, which is
 * stored K-major: [k][n]), shared memory filled by cp.async in a
 * GG_STAGES-deep pipeline. A CTA is 8 warps, each owning a 64x64 piece of a
 * BM x BN tile (BM x BN = 128x256 or 256x128). The grid is persistent: CTA
 * i takes tiles i, i + gridDim.x, ... of the flat schedule tile_off[]
 * (tile_off[g] = the tiles of groups before g, each group
 * ceil(rows/BM) * (N/BN) tiles, m-tile major so that the CTAs running at
 * once share A rows and sweep B_g), and finds a tile's group by binary
 * search.
 *
 * Two ways to fetch row r of A (the r-th row of the sorted list):
 *   GATHER: row pair[r] / k_top of A (GEMM1: the token of (token, k) pair
 *           pair[r], read straight from x: no permuted copy of x);
 *   plain:  row r of A (GEMM2: the sorted activations GEMM1 wrote).
 * Three epilogues, on the fp32 accumulators, each result rounded once to
 * the storage type T:
 *   GG_EPI_RELU2:   out[r, n] = relu(acc)^2                      (GEMM1)
 *   GG_EPI_SWIGLU:  out[r, f] = silu(acc[gate(f)]) * acc[up(f)],
 *                   out [rows, N/2] (GEMM1 of moe_ffn_swiglu): B's columns
 *                   alternate GG_GLU_BLOCK gate columns and the
 *                   GG_GLU_BLOCK up columns of the same activation columns,
 *                   gate(f) = (f / 8) * 16 + f % 8, up(f) = gate(f) + 8; an
 *                   n8 fragment pair (2j, 2j+1) is then a gate and its up,
 *                   held by the same thread, so the epilogue needs no
 *                   exchange between threads.
 *   GG_EPI_WEIGHTED: out[pair[r], n] = acc * weight[pair[r]]    (GEMM2:
 *                   each (token, k) row lands at its pair index, scaled by
 *                   its routing weight).
 * Rows past a group's end are zero-filled in shared memory and never
 * stored. Requirements (the launcher checks them): N a multiple of BN, KD
 * a multiple of GG_BK, 16-byte aligned A, B and out, KD and N multiples of
 * 8 elements. Element offsets are int64 throughout. */
#ifndef MB_KERNELS_GROUPED_GEMM_CUH
#define MB_KERNELS_GROUPED_GEMM_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/grouped_gemm_sm90_layout.h" /* gw_find_group: the schedule's search, shared */

#define GG_BK 32      /* reduction step: divides H = 2048 and F = 1408 */
#define GG_STAGES 4   /* cp.async pipeline depth */
#define GG_THREADS 256
#define GG_WARP_M 64  /* each warp's piece of the tile */
#define GG_WARP_N 64
#define GG_MI (GG_WARP_M / 16) /* m16 fragments per warp */
#define GG_NI (GG_WARP_N / 8)  /* n8 fragments per warp */
#define GG_CHUNK 8    /* 2-byte elements per 16-byte cp.async chunk */

enum { GG_EPI_RELU2, GG_EPI_WEIGHTED, GG_EPI_SWIGLU };

/* moe_ffn_swiglu's W1 interleave: gate and up alternate in blocks of one n8
 * mma fragment (src/reference/moe_ffn.c has the same MOE_GLU_BLOCK). */
#define GG_GLU_BLOCK 8

template <typename T> struct gg_params {
	const T *a;                /* GATHER: [tokens, KD]; plain: [rows, KD] sorted */
	const int32_t *pair;       /* [rows] sorted (token * k_top + k) */
	int k_top;
	const T *b;                /* [groups * KD, N] */
	const int64_t *group_off;  /* [groups + 1] row offsets into the sorted list */
	const int32_t *tile_off;   /* [groups + 1] flat tile schedule */
	int *tile_counter;         /* the wgmma kernel's next tile (grouped_gemm_sm90.cuh) */
	int groups;
	int n, kd;
	const float *weight;       /* [rows] routing weight by pair index (GG_EPI_WEIGHTED) */
	T *out;                    /* RELU2: [rows, N] sorted; SWIGLU: [rows, N/2] sorted;
	                              WEIGHTED: [rows, N] by pair */
};

/* bf16 and fp16 are both 2 bytes: the tile arithmetic does not depend on
 * which. */
typedef __nv_bfloat16 gg_elem2;

template <int BM, int BN> struct gg_cfg {
	static constexpr int WARPS_M = BM / GG_WARP_M;
	static constexpr int WARPS_N = BN / GG_WARP_N;
	static_assert(WARPS_M * WARPS_N * 32 == GG_THREADS, "8 warps of 64x64");
	static constexpr int A_STAGE = BM * GG_BK; /* elements */
	static constexpr int B_STAGE = GG_BK * BN;
	static constexpr int SMEM_BYTES = GG_STAGES * (A_STAGE + B_STAGE) * (int)sizeof(gg_elem2);
	static constexpr int A_ROW_CHUNKS = GG_BK / GG_CHUNK; /* 4 */
	static constexpr int B_ROW_CHUNKS = BN / GG_CHUNK;    /* 16 or 32 */
	static constexpr int A_LOADS = BM * A_ROW_CHUNKS / GG_THREADS; /* chunks per thread per stage */
	static constexpr int B_LOADS = GG_BK * B_ROW_CHUNKS / GG_THREADS;
	static constexpr int A_ROWS_PER_PASS = GG_THREADS / A_ROW_CHUNKS; /* 64 */
	static_assert(A_LOADS * GG_THREADS == BM * A_ROW_CHUNKS, "A tile splits evenly");
	static_assert(B_LOADS * GG_THREADS == GG_BK * B_ROW_CHUNKS, "B tile splits evenly");
};

/* ---- PTX wrappers ---------------------------------------------------------- */

__device__ __forceinline__ uint32_t gg_smem_addr(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared; src_bytes 0 fills the chunk with zeros (rows
 * past the group's end) and reads nothing. */
__device__ __forceinline__ void gg_cp_async16(uint32_t dst, const void *src, int src_bytes)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ void gg_cp_async_commit()
{
	asm volatile("cp.async.commit_group;\n" ::);
}

template <int N> __device__ __forceinline__ void gg_cp_async_wait()
{
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void gg_ldmatrix_x4(uint32_t (&r)[4], uint32_t addr)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
		: "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		: "r"(addr));
}

__device__ __forceinline__ void gg_ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
		: "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		: "r"(addr));
}

#define GG_MMA_M16N8K16(TYPE) \
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." TYPE "." TYPE ".f32 " \
		     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n" \
		: "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) \
		: "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))

template <typename T>
__device__ __forceinline__ void gg_mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);

template <>
__device__ __forceinline__ void gg_mma<__nv_bfloat16>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
	GG_MMA_M16N8K16("bf16");
}

template <>
__device__ __forceinline__ void gg_mma<__half>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
	GG_MMA_M16N8K16("f16");
}

/* ---- shared-memory layout ---------------------------------------------------
 * A stage: [BM][GG_BK] elements, 64-byte rows of 4 chunks; chunk c of row r
 * sits at chunk c ^ ((r >> 1) & 3): the 8 rows one ldmatrix phase reads
 * (same logical chunk) then cover all 8 16-byte slots of a 128-byte bank
 * window, and 8 consecutive cp.async chunks (2 rows) still fill one window.
 * B stage: [GG_BK][BN] elements; chunk c of row k sits at c ^ (k & 7) (within
 * its aligned group of 8 chunks): the 8 k-rows of one .trans phase hit 8
 * distinct slots. Offsets in elements. */
__device__ __forceinline__ int gg_a_offset(int row, int chunk)
{
	return row * GG_BK + ((chunk ^ ((row >> 1) & 3)) * GG_CHUNK);
}

template <int BN> __device__ __forceinline__ int gg_b_offset(int k, int chunk)
{
	return k * BN + ((chunk ^ (k & 7)) * GG_CHUNK);
}

/* The output row of sorted row r and the factor its results take: GEMM2's
 * (GG_EPI_WEIGHTED) the row of its (token, k) pair and the pair's routing
 * weight, the others r itself and 1. */
template <int EPI, typename T>
__device__ __forceinline__ int64_t gg_out_row(const gg_params<T> &p, int64_t r, float *scale)
{
	if (EPI != GG_EPI_WEIGHTED) {
		*scale = 1.0f;
		return r;
	}
	const int32_t pr = __ldg(p.pair + r);
	*scale = __ldg(p.weight + pr);
	return pr;
}

/* Two fp32 values rounded to the storage type, lo at the lower address. */
template <typename T> __device__ __forceinline__ uint32_t gg_pack2(float lo, float hi);

template <> __device__ __forceinline__ uint32_t gg_pack2<__nv_bfloat16>(float lo, float hi)
{
	__nv_bfloat162 v = __floats2bfloat162_rn(lo, hi); /* .x = lo (lower address) */
	return *reinterpret_cast<uint32_t *>(&v);
}

template <> __device__ __forceinline__ uint32_t gg_pack2<__half>(float lo, float hi)
{
	__half2 v = __floats2half2_rn(lo, hi);
	return *reinterpret_cast<uint32_t *>(&v);
}

/* Two neighbouring results of one row through the relu^2 (GEMM1) or the
 * routing-weight (GEMM2) epilogue, rounded to T and packed. */
template <typename T, int EPI> __device__ __forceinline__ uint32_t gg_epi_pair(float v0, float v1, float scale)
{
	if (EPI == GG_EPI_RELU2) {
		v0 = v0 > 0.0f ? v0 * v0 : 0.0f;
		v1 = v1 > 0.0f ? v1 * v1 : 0.0f;
	} else {
		v0 *= scale;
		v1 *= scale;
	}
	return gg_pack2<T>(v0, v1);
}

/* silu(g) = g / (1 + exp(-g)), the reference's expression operation for
 * operation: expf (not __expf) and a correctly rounded division whatever
 * -prec-div says. 1 + exp(-g) >= 1, so nothing cancels; g < -88 gives
 * exp(-g) = inf and silu = -0, the limit. */
__device__ __forceinline__ float gg_silu(float g)
{
	return __fdiv_rn(g, 1.0f + expf(-g));
}

/* GG_EPI_SWIGLU's store of one fragment row: n-fragments 2j (gate) and
 * 2j + 1 (up) give activation columns (col0 + warp_n * GG_WARP_N) / 2
 * + 8j + 2 (lane % 4) and + 1 of the [rows, n/2] output. */
template <typename T>
__device__ __forceinline__ void gg_store_swiglu(const gg_params<T> &p, int64_t r, int col0, int warp_n, int lane,
	const float (&acc)[GG_NI][4], int half)
{
	static_assert(GG_GLU_BLOCK == 8, "one gate and one up n8 fragment per activation block");
	T *dst = p.out + r * (p.n / 2) + (col0 + warp_n * GG_WARP_N) / 2 + (lane & 3) * 2;
#pragma unroll
	for (int j = 0; j < GG_NI / 2; j++) {
		const float v0 = gg_silu(acc[2 * j][half * 2]) * acc[2 * j + 1][half * 2];
		const float v1 = gg_silu(acc[2 * j][half * 2 + 1]) * acc[2 * j + 1][half * 2 + 1];
		*reinterpret_cast<uint32_t *>(dst + j * GG_GLU_BLOCK) = gg_pack2<T>(v0, v1);
	}
}

/* One k tile of the block's product, from shared-memory stage `stage`:
 * the warp's GG_MI x GG_NI fragments accumulate GG_BK / 16 mma steps. */
template <typename T, int BM, int BN>
__device__ __forceinline__ void gg_mma_tile(float (&acc)[GG_MI][GG_NI][4], const T *s_a, const T *s_b, int stage,
	int warp_m, int warp_n, int lane)
{
	typedef gg_cfg<BM, BN> C;
	const T *sa = s_a + stage * C::A_STAGE;
	const T *sb = s_b + stage * C::B_STAGE;
#pragma unroll
	for (int kk = 0; kk < GG_BK; kk += 16) {
		uint32_t af[GG_MI][4];
#pragma unroll
		for (int mi = 0; mi < GG_MI; mi++) {
			/* lanes 0-15: rows 0-15 at k kk..kk+7; lanes 16-31:
			 * the same rows at kk+8..kk+15 (a0..a3 of the mma) */
			const int row = warp_m * GG_WARP_M + mi * 16 + (lane & 15);
			const int chunk = kk / GG_CHUNK + (lane >> 4);
			gg_ldmatrix_x4(af[mi], gg_smem_addr(sa + gg_a_offset(row, chunk)));
		}
#pragma unroll
		for (int nj = 0; nj < GG_NI / 2; nj++) {
			/* matrices: (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7,
			 * n 8-15), (k 8-15, n 8-15) of this 16-column pair:
			 * b0 b1 of n-fragment 2nj, then of 2nj+1 */
			const int k = kk + (lane & 7) + ((lane >> 3) & 1) * 8;
			const int n = warp_n * GG_WARP_N + nj * 16 + (lane >> 4) * 8;
			uint32_t bf[4];
			gg_ldmatrix_x4_trans(bf, gg_smem_addr(sb + gg_b_offset<BN>(k, n / GG_CHUNK)));
#pragma unroll
			for (int mi = 0; mi < GG_MI; mi++) {
				gg_mma<T>(acc[mi][2 * nj], af[mi], bf[0], bf[1]);
				gg_mma<T>(acc[mi][2 * nj + 1], af[mi], bf[2], bf[3]);
			}
		}
	}
}

/* The epilogue of a tile whose rows start at row0 (rows from row_end on
 * belong to the next group): fragment (mi, ni) holds rows g8 and g8 + 8 of
 * its m16 block (g8 = lane / 4), columns 2 * (lane % 4) and + 1 of its n8. */
template <typename T, int EPI>
__device__ __forceinline__ void gg_store_tile(const gg_params<T> &p, const float (&acc)[GG_MI][GG_NI][4],
	int64_t row0, int64_t row_end, int col0, int warp_m, int warp_n, int lane)
{
#pragma unroll
	for (int mi = 0; mi < GG_MI; mi++) {
#pragma unroll
		for (int half = 0; half < 2; half++) {
			const int row = warp_m * GG_WARP_M + mi * 16 + (lane >> 2) + half * 8;
			const int64_t r = row0 + row;
			if (r >= row_end)
				continue;
			if (EPI == GG_EPI_SWIGLU) {
				gg_store_swiglu<T>(p, r, col0, warp_n, lane, acc[mi], half);
				continue;
			}
			float scale;
			const int64_t out_row = gg_out_row<EPI>(p, r, &scale);
			T *dst = p.out + out_row * p.n + col0 + warp_n * GG_WARP_N + (lane & 3) * 2;
#pragma unroll
			for (int ni = 0; ni < GG_NI; ni++)
				*reinterpret_cast<uint32_t *>(dst + ni * 8) =
					gg_epi_pair<T, EPI>(acc[mi][ni][half * 2], acc[mi][ni][half * 2 + 1], scale);
		}
	}
}

template <typename T, int BM, int BN, bool GATHER, int EPI>
__global__ void __launch_bounds__(GG_THREADS, 1) moe_ffn_grouped_gemm_kernel(const gg_params<T> p)
{
	typedef gg_cfg<BM, BN> C;
	extern __shared__ __align__(128) unsigned char gg_smem[];
	T *s_a = reinterpret_cast<T *>(gg_smem);
	T *s_b = s_a + GG_STAGES * C::A_STAGE;

	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int warp_m = warp / C::WARPS_N, warp_n = warp % C::WARPS_N;
	const int total_tiles = __ldg(p.tile_off + p.groups);
	const int n_tiles = p.n / BN;
	const int k_tiles = p.kd / GG_BK;

	/* this thread's cp.async chunks: A rows a_row0 + i * A_ROWS_PER_PASS at
	 * chunk a_chunk; B rows b_k0 + i * (GG_THREADS / B_ROW_CHUNKS) at
	 * chunk b_chunk */
	const int a_row0 = tid / C::A_ROW_CHUNKS, a_chunk = tid % C::A_ROW_CHUNKS;
	const int b_k0 = tid / C::B_ROW_CHUNKS, b_chunk = tid % C::B_ROW_CHUNKS;
	constexpr int B_K_PER_PASS = GG_THREADS / C::B_ROW_CHUNKS;

	for (int tile = blockIdx.x; tile < total_tiles; tile += gridDim.x) {
		const int g = gw_find_group(p.tile_off, p.groups, tile);
		const int local = tile - __ldg(p.tile_off + g);
		const int m_tile = local / n_tiles, n_tile = local % n_tiles;
		const int64_t row0 = __ldg(p.group_off + g) + (int64_t)m_tile * BM;
		const int64_t row_end = __ldg(p.group_off + g + 1);
		const int col0 = n_tile * BN;
		const T *b_grp = p.b + (int64_t)g * p.kd * p.n + col0;

		/* source row of each of this thread's A chunks (fixed for the tile) */
		const T *a_src[C::A_LOADS];
		int a_bytes[C::A_LOADS];
#pragma unroll
		for (int i = 0; i < C::A_LOADS; i++) {
			const int64_t r = row0 + a_row0 + i * C::A_ROWS_PER_PASS;
			const bool valid = r < row_end;
			int64_t src_row = 0;
			if (valid)
				src_row = GATHER ? (int64_t)(__ldg(p.pair + r) / p.k_top) : r;
			a_src[i] = p.a + src_row * p.kd + a_chunk * GG_CHUNK;
			a_bytes[i] = valid ? 16 : 0;
		}

		auto load_stage = [&](int stage, int kt) {
			T *sa = s_a + stage * C::A_STAGE;
			T *sb = s_b + stage * C::B_STAGE;
			const int64_t k0 = (int64_t)kt * GG_BK;
#pragma unroll
			for (int i = 0; i < C::A_LOADS; i++) {
				const int row = a_row0 + i * C::A_ROWS_PER_PASS;
				gg_cp_async16(gg_smem_addr(sa + gg_a_offset(row, a_chunk)), a_src[i] + k0, a_bytes[i]);
			}
#pragma unroll
			for (int i = 0; i < C::B_LOADS; i++) {
				const int k = b_k0 + i * B_K_PER_PASS;
				gg_cp_async16(gg_smem_addr(sb + gg_b_offset<BN>(k, b_chunk)),
					b_grp + (k0 + k) * p.n + b_chunk * GG_CHUNK, 16);
			}
		};

		float acc[GG_MI][GG_NI][4];
#pragma unroll
		for (int mi = 0; mi < GG_MI; mi++)
#pragma unroll
			for (int ni = 0; ni < GG_NI; ni++)
#pragma unroll
				for (int c = 0; c < 4; c++)
					acc[mi][ni][c] = 0.0f;

		/* prologue: stages 0 .. GG_STAGES-2, one commit group each (empty
		 * past the last k tile, so the wait count below stays exact) */
#pragma unroll
		for (int s = 0; s < GG_STAGES - 1; s++) {
			if (s < k_tiles)
				load_stage(s, s);
			gg_cp_async_commit();
		}

		for (int kt = 0; kt < k_tiles; kt++) {
			/* groups committed: GG_STAGES-1 + kt; leaving GG_STAGES-2
			 * pending means tile kt has landed (for this thread), and the
			 * barrier makes it every thread's, and retires every warp's
			 * reads of the stage the prefetch below overwrites (tile kt-1) */
			gg_cp_async_wait<GG_STAGES - 2>();
			__syncthreads();
			const int next = kt + GG_STAGES - 1;
			if (next < k_tiles)
				load_stage(next % GG_STAGES, next);
			gg_cp_async_commit();

			gg_mma_tile<T, BM, BN>(acc, s_a, s_b, kt % GG_STAGES, warp_m, warp_n, lane);
		}
		gg_cp_async_wait<0>(); /* only empty groups can remain */

		gg_store_tile<T, EPI>(p, acc, row0, row_end, col0, warp_m, warp_n, lane);
		/* every warp is done with shared memory before the next tile's
		 * prologue refills it */
		__syncthreads();
	}
}

#endif
