/* The moe_ffn rows' grouped GEMM on Hopper (sm_90a): the same product as
 * grouped_gemm.cuh's mma.sync kernel (C_g = A_g B_g over jagged groups of
 * sorted rows, B_g the g-th [KD, N] block of B, the same GATHER and
 * epilogue choices), written for the warpgroup tensor-core instructions:
 *
 *   - wgmma.mma_async m64nNk16 (N = 256, or 128 for the last tile of a row
 *     when N is an odd multiple of 128), fp32 accumulators in registers,
 *     A and B read from shared memory through descriptors;
 *   - B (the expert's weights) brought by the tensor memory accelerator:
 *     cp.async.bulk.tensor.2d of 64 x 64 boxes in the 128-byte swizzle,
 *     one tensor map made on the host (cuTensorMapEncodeTiled) and passed
 *     as a __grid_constant__ parameter; A the same way when its rows are
 *     contiguous (GEMM2: the sorted activations); when they are gathered
 *     (GEMM1: row r is token pair[r] / k_top of x, with no permuted copy
 *     of x) by the producer warpgroup's 128 threads with 16-byte cp.async
 *     into the same swizzled layout (a tensor copy cannot gather rows on
 *     sm_90);
 *   - a GW_STAGES-deep ring of shared-memory stages, each with a "full"
 *     and an "empty" mbarrier: the producer waits for empty, fills, and
 *     full completes (TMA bytes through expect_tx / complete_tx, gathered
 *     rows through the producers' arrivals); the consumers wait for full,
 *     run the stage's four k16 steps, and free the stage once the wgmma
 *     group that read it has retired (wgmma.wait_group 1 keeps the next
 *     one in flight);
 *   - warp specialisation: warpgroup 0 produces (setmaxnreg down to
 *     GW_PRODUCER_REGS), warpgroups 1 and 2 consume (up to
 *     GW_CONSUMER_REGS), each owning 64 rows of the 128 x 256 tile;
 *   - a persistent grid, one CTA per SM, over the flat tile schedule of
 *     tile_off (gw_tile_at: group, m-tile, n-tile; no padding of any
 *     group, rows past a group's end computed and never stored): the
 *     producer takes the next tile from a global counter (zeroed by the
 *     sort scan before the launch) whenever it is ready for one, and
 *     writes it beside each stage it fills, which is how the consumers
 *     learn it; a stage marked GW_TILE_DONE ends them.
 *
 * Gathered rows and the async proxy: the producer's cp.async writes are
 * generic-proxy writes that wgmma reads through the async proxy. Each
 * producer thread therefore waits for its own copies (cp.async.wait_group,
 * GW_GATHER_LAG stages behind the newest, so that that many stay in
 * flight, and all of them at a tile's end), fences them into the async
 * proxy (fence.proxy.async) and only then arrives on the stage's full
 * barrier, whose count is the 128 producers; thread 0 also posts the stage's B bytes (mbarrier.expect_tx)
 * before it issues B's tensor copies. Without gathering, thread 0 alone
 * produces: arrive.expect_tx for A and B, then the copies.
 *
 * The epilogue works on the accumulators in registers (the map of
 * grouped_gemm_sm90_layout.h) and stores to global memory as the mma.sync
 * kernel's does: relu^2 or SwiGLU into the sorted activation rows (GEMM1),
 * or the routing weight and the row's pair index (GEMM2).
 *
 * Only an sm_90a build has the body (__CUDA_ARCH_FEAT_SM90_ALL); any other
 * target compiles a trap, and the host launches this kernel only where
 * gw_device_has_wgmma says sm_90a code runs. The index arithmetic
 * lives in grouped_gemm_sm90_layout.h, shared with the host emulation of
 * tests/unit/test_grouped_gemm_sm90.c. */
#ifndef MB_KERNELS_GROUPED_GEMM_SM90_CUH
#define MB_KERNELS_GROUPED_GEMM_SM90_CUH

#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/grouped_gemm.cuh"
#include "kernels/grouped_gemm_sm90_layout.h"

#define GW_THREADS 384         /* producer warpgroup + two consumer warpgroups */
#define GW_WG_THREADS 128
#define GW_PRODUCER_REGS 56    /* setmaxnreg: 128 x 56 + 256 x 224 = 64512 of 65536 */
#define GW_CONSUMER_REGS 224
#define GW_ACC_REGS (GW_BN / 2) /* fp32 accumulators per consumer thread: 64 x 256 / 128 */
#define GW_BARRIER_BYTES 8
#define GW_SMEM_ALIGN 1024     /* the 128-byte swizzle's period */
#define GW_TILE_SLOT_BYTES 4
#define GW_SMEM_BYTES \
	(GW_STAGES * (GW_A_STAGE_BYTES + GW_B_STAGE_BYTES) + 2 * GW_STAGES * GW_BARRIER_BYTES \
		+ (GW_STAGES + 2) * GW_TILE_SLOT_BYTES + GW_SMEM_ALIGN)
#define GW_PRODUCER_BARRIER 1  /* named barrier of the producer warpgroup */
#define GW_A_BOX_ROWS GW_BM    /* GEMM2's A box: [GW_BM rows][GW_BK] */

static_assert(GW_BN == 2 * GW_BN_NARROW, "a narrow tile is half a tile");
static_assert(GW_BOX_N == GW_BK, "A's and B's boxes are both 128-byte rows (gw_tmap_2d)");
static_assert(GW_BM == 2 * GW_WG_M, "two consumer warpgroups");
static_assert(GW_GATHER_ROWS * GW_GATHER_ROW_STEP == GW_BM, "the producers cover the A stage");
static_assert(GW_BK % GW_MMA_K == 0 && GW_BK / GW_MMA_K == 4, "four k16 steps a stage");
static_assert(GW_SMEM_BYTES <= 227 * 1024, "a block's shared memory on sm_90");

/* The kernel's parameters: the tensor maps (B: [groups * KD, N]; A: [rows,
 * KD], used when the rows are not gathered) and the GEMM's (g.b is read
 * through tmap_b only; g.tile_counter, the next tile to take, is 0 at
 * launch: the sort scan zeroes it). */
template <typename T> struct gw_params {
	CUtensorMap tmap_b;
	CUtensorMap tmap_a;
	gg_params<T> g;
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

/* ---- PTX wrappers (sm_90 / sm_90a) ------------------------------------------ */

__device__ __forceinline__ void gw_mbar_init(uint32_t bar, uint32_t count)
{
	asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void gw_mbar_wait(uint32_t bar, uint32_t parity)
{
	uint32_t done;
	do {
		asm volatile("{\n.reg .pred p;\n"
			     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
			     "selp.u32 %0, 1, 0, p;\n}\n"
			: "=r"(done)
			: "r"(bar), "r"(parity)
			: "memory");
	} while (!done);
}

__device__ __forceinline__ void gw_mbar_arrive(uint32_t bar)
{
	asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

__device__ __forceinline__ void gw_mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes)
{
	asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

/* Adds `bytes` to the transactions the current phase waits for, without
 * arriving. */
__device__ __forceinline__ void gw_mbar_expect_tx(uint32_t bar, uint32_t bytes)
{
	asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

/* One box of a 2-D tensor map (c0 the inner coordinate, in elements) into
 * shared memory at dst, completing `bar`'s transactions. */
__device__ __forceinline__ void gw_tma_load_2d(uint32_t dst, const CUtensorMap *map, int c0, int c1, uint32_t bar)
{
	asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
		     "[%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
		"l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
		: "memory");
}

__device__ __forceinline__ void gw_prefetch_tmap(const CUtensorMap *map)
{
	asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

__device__ __forceinline__ void gw_fence_proxy_async()
{
	asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void gw_fence_barrier_init()
{
	asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

template <int REGS> __device__ __forceinline__ void gw_setmaxnreg_dec()
{
	asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
}

template <int REGS> __device__ __forceinline__ void gw_setmaxnreg_inc()
{
	asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
}

__device__ __forceinline__ void gw_wgmma_fence()
{
	asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void gw_wgmma_commit()
{
	asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int N> __device__ __forceinline__ void gw_wgmma_wait()
{
	asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/* Keeps the compiler from moving reads or writes of the accumulators
 * across the asynchronous wgmma that owns them (placed after a wait and
 * before the first issue). */
__device__ __forceinline__ void gw_fence_acc(float (&d)[GW_ACC_REGS])
{
#pragma unroll
	for (int i = 0; i < GW_ACC_REGS; i++)
		asm volatile("" : "+f"(d[i])::"memory");
}

/* The accumulator operands of one wgmma: 8 registers per group b. */
#define GW_D8(b) \
	"+f"(d[8 * (b) + 0]), "+f"(d[8 * (b) + 1]), "+f"(d[8 * (b) + 2]), "+f"(d[8 * (b) + 3]), \
		"+f"(d[8 * (b) + 4]), "+f"(d[8 * (b) + 5]), "+f"(d[8 * (b) + 6]), "+f"(d[8 * (b) + 7])
#define GW_D64 GW_D8(0), GW_D8(1), GW_D8(2), GW_D8(3), GW_D8(4), GW_D8(5), GW_D8(6), GW_D8(7)
#define GW_D128 GW_D64, GW_D8(8), GW_D8(9), GW_D8(10), GW_D8(11), GW_D8(12), GW_D8(13), GW_D8(14), GW_D8(15)
#define GW_R64 \
	"%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
	"%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
	"%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
	"%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define GW_R128 \
	GW_R64 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
	"%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
	"%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
	"%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"

/* d (+)= A B for one k16 step: A K-major (imm-trans-a 0), B MN-major
 * (imm-trans-b 1), scales +1; scale_d 0 ignores d's old value (the first
 * step of a tile). TYPE is the PTX type of A and B. */
#define GW_WGMMA_SS(N, TYPE, REGS, OUTS, DESC_A, DESC_B, SCALE_D) \
	asm volatile("{\n.reg .pred p;\n" \
		     "setp.ne.b32 p, %" #SCALE_D ", 0;\n" \
		     "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " " \
		     "{" REGS "}, %" #DESC_A ", %" #DESC_B ", p, 1, 1, 0, 1;\n}\n" \
		: OUTS \
		: "l"(da), "l"(db), "r"(scale_d))

template <typename T> struct gw_mma;

template <> struct gw_mma<__nv_bfloat16> {
	static __device__ __forceinline__ void n256(float (&d)[GW_ACC_REGS], uint64_t da, uint64_t db, int scale_d)
	{
		GW_WGMMA_SS(256, "bf16", GW_R128, GW_D128, 128, 129, 130);
	}
	static __device__ __forceinline__ void n128(float (&d)[GW_ACC_REGS], uint64_t da, uint64_t db, int scale_d)
	{
		GW_WGMMA_SS(128, "bf16", GW_R64, GW_D64, 64, 65, 66);
	}
};

template <> struct gw_mma<__half> {
	static __device__ __forceinline__ void n256(float (&d)[GW_ACC_REGS], uint64_t da, uint64_t db, int scale_d)
	{
		GW_WGMMA_SS(256, "f16", GW_R128, GW_D128, 128, 129, 130);
	}
	static __device__ __forceinline__ void n128(float (&d)[GW_ACC_REGS], uint64_t da, uint64_t db, int scale_d)
	{
		GW_WGMMA_SS(128, "f16", GW_R64, GW_D64, 64, 65, 66);
	}
};

/* ---- producer ---------------------------------------------------------------- */

__device__ __forceinline__ void gw_st_shared(uint32_t addr, int32_t v)
{
	asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

__device__ __forceinline__ int32_t gw_ld_shared(uint32_t addr)
{
	int32_t v;
	asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr) : "memory");
	return v;
}

/* The producer warpgroup's own barrier (0 is __syncthreads'). */
__device__ __forceinline__ void gw_producer_sync()
{
	asm volatile("bar.sync %0, %1;\n" ::"n"(GW_PRODUCER_BARRIER), "n"(GW_PRODUCERS) : "memory");
}

struct gw_smem {
	/* shared addresses: A stages, B stages, barriers, each stage's tile (the
	 * consumers' copy of the schedule), and the producers' next tile */
	uint32_t a, b, full, empty, tile, next;
	__device__ __forceinline__ uint32_t a_stage(uint32_t s) const { return a + s * GW_A_STAGE_BYTES; }
	__device__ __forceinline__ uint32_t b_stage(uint32_t s) const { return b + s * GW_B_STAGE_BYTES; }
	__device__ __forceinline__ uint32_t full_bar(uint32_t s) const { return full + s * GW_BARRIER_BYTES; }
	__device__ __forceinline__ uint32_t empty_bar(uint32_t s) const { return empty + s * GW_BARRIER_BYTES; }
	__device__ __forceinline__ uint32_t stage_tile(uint32_t s) const { return tile + s * GW_TILE_SLOT_BYTES; }
	__device__ __forceinline__ uint32_t next_tile(uint32_t n) const { return next + (n & 1u) * GW_TILE_SLOT_BYTES; }
};

/* B's boxes of one stage: width / 64 boxes of [GW_BK][64] at (col0 + 64 j,
 * row g * KD + k0). */
template <typename T>
__device__ __forceinline__ void gw_load_b(const gw_params<T> &p, const gw_smem &sm, uint32_t s, const gw_tile &t,
	int k0)
{
	const int row = t.group * p.g.kd + k0;
	for (int j = 0; j < t.width / GW_BOX_N; j++)
		gw_tma_load_2d(sm.b_stage(s) + j * GW_B_BOX_BYTES, &p.tmap_b, t.col0 + j * GW_BOX_N, row, sm.full_bar(s));
}

/* GEMM1's producer: all 128 threads gather A rows, thread 0 also takes the
 * tiles from the counter (one tile ahead, so that the atomic's latency
 * hides behind the current tile, handing each to the others through a
 * shared slot), brings B and writes each stage's tile for the consumers.
 * A thread arrives for a stage GW_GATHER_LAG stages after issuing it, and
 * for a tile's last stages once its copies have landed at the tile's end,
 * so that the consumers finish a tile while the next one is being looked
 * up. After the last tile, a stage holding GW_TILE_DONE ends the
 * consumers. */
template <typename T> __device__ __forceinline__ void gw_produce_gather(const gw_params<T> &p, const gw_smem &sm)
{
	const int tid = threadIdx.x; /* 0 .. GW_PRODUCERS-1 */
	const int chunk = gw_gather_chunk(tid);
	const int total = gw_total_tiles(p.g.tile_off, p.g.groups);
	const int k_tiles = p.g.kd / GW_BK;
	int upcoming = tid == 0 ? atomicAdd(p.g.tile_counter, 1) : 0;
	uint32_t it = 0;

	for (uint32_t taken = 0;; taken++) {
		/* the slots alternate: thread 0 refills one only after every
		 * producer has passed the barrier that follows its last read */
		if (tid == 0)
			gw_st_shared(sm.next_tile(taken), upcoming);
		gw_producer_sync();
		const int tile = gw_ld_shared(sm.next_tile(taken));
		if (tile >= total)
			break;
		if (tid == 0)
			upcoming = atomicAdd(p.g.tile_counter, 1);
		const gw_tile t = gw_tile_at(p.g.tile_off, p.g.group_off, p.g.groups, p.g.n, tile);
		/* this thread's rows: their tokens, -1 past the group's end */
		int32_t tok[GW_GATHER_ROWS];
#pragma unroll
		for (int i = 0; i < GW_GATHER_ROWS; i++) {
			const int64_t r = t.row0 + gw_gather_row(tid, i);
			tok[i] = r < t.row_end ? __ldg(p.g.pair + r) / p.g.k_top : -1;
		}
		const uint32_t first = it;
		for (int kt = 0; kt < k_tiles; kt++, it++) {
			const uint32_t s = gw_stage(it);
			gw_mbar_wait(sm.empty_bar(s), gw_round_parity(it) ^ 1u);
			if (tid == 0) {
				gw_st_shared(sm.stage_tile(s), tile);
				gw_mbar_expect_tx(sm.full_bar(s), (uint32_t)(t.width * GW_BK * GW_ELEM_BYTES));
				gw_load_b(p, sm, s, t, kt * GW_BK);
			}
			const int64_t k_off = (int64_t)kt * GW_BK + chunk * GW_CHUNK_ELEMS;
#pragma unroll
			for (int i = 0; i < GW_GATHER_ROWS; i++) {
				const int row = gw_gather_row(tid, i);
				const T *src = p.g.a + (tok[i] < 0 ? 0 : (int64_t)tok[i] * p.g.kd + k_off);
				gg_cp_async16(sm.a_stage(s) + gw_a_offset(row, chunk * GW_CHUNK_ELEMS), src,
					tok[i] < 0 ? 0 : GW_CHUNK_BYTES);
			}
			gg_cp_async_commit();
			if (it - first >= GW_GATHER_LAG) {
				/* stage it - LAG has landed for this thread: into the async
				 * proxy, then count this thread's part of it */
				gg_cp_async_wait<GW_GATHER_LAG>();
				gw_fence_proxy_async();
				gw_mbar_arrive(sm.full_bar(gw_stage(it - GW_GATHER_LAG)));
			}
		}
		gg_cp_async_wait<0>();
		gw_fence_proxy_async();
		for (uint32_t j = it - first > GW_GATHER_LAG ? it - GW_GATHER_LAG : first; j < it; j++)
			gw_mbar_arrive(sm.full_bar(gw_stage(j)));
	}
	/* the end mark */
	const uint32_t s = gw_stage(it);
	gw_mbar_wait(sm.empty_bar(s), gw_round_parity(it) ^ 1u);
	if (tid == 0)
		gw_st_shared(sm.stage_tile(s), GW_TILE_DONE);
	gw_mbar_arrive(sm.full_bar(s));
}

/* GEMM2's producer: one thread takes the tiles (one ahead) and brings A's
 * [GW_BM][GW_BK] box (rows past the list's end are zero-filled by the
 * copy) and B's boxes per stage, then the end mark. */
template <typename T> __device__ __forceinline__ void gw_produce_tma(const gw_params<T> &p, const gw_smem &sm)
{
	const int total = gw_total_tiles(p.g.tile_off, p.g.groups);
	const int k_tiles = p.g.kd / GW_BK;
	int upcoming = atomicAdd(p.g.tile_counter, 1);
	uint32_t it = 0;

	for (;;) {
		const int tile = upcoming;
		if (tile >= total)
			break;
		upcoming = atomicAdd(p.g.tile_counter, 1);
		const gw_tile t = gw_tile_at(p.g.tile_off, p.g.group_off, p.g.groups, p.g.n, tile);
		for (int kt = 0; kt < k_tiles; kt++, it++) {
			const uint32_t s = gw_stage(it);
			gw_mbar_wait(sm.empty_bar(s), gw_round_parity(it) ^ 1u);
			gw_st_shared(sm.stage_tile(s), tile);
			gw_mbar_arrive_expect_tx(sm.full_bar(s),
				(uint32_t)(GW_A_STAGE_BYTES + t.width * GW_BK * GW_ELEM_BYTES));
			gw_tma_load_2d(sm.a_stage(s), &p.tmap_a, kt * GW_BK, (int)t.row0, sm.full_bar(s));
			gw_load_b(p, sm, s, t, kt * GW_BK);
		}
	}
	const uint32_t s = gw_stage(it);
	gw_mbar_wait(sm.empty_bar(s), gw_round_parity(it) ^ 1u);
	gw_st_shared(sm.stage_tile(s), GW_TILE_DONE);
	gw_mbar_arrive(sm.full_bar(s));
}

/* ---- consumers --------------------------------------------------------------- */

/* One tile's k-loop at width NW for consumer warpgroup wg: d = A B over
 * every k-tile, each stage freed once the wgmma group after it has been
 * issued and the one reading it has retired. */
template <typename T, int NW>
__device__ __forceinline__ void gw_mainloop(float (&d)[GW_ACC_REGS], const gw_smem &sm, int wg, int k_tiles,
	uint32_t &it)
{
	const int lane = threadIdx.x % 32;
	gw_fence_acc(d);
	for (int kt = 0; kt < k_tiles; kt++, it++) {
		const uint32_t s = gw_stage(it);
		gw_mbar_wait(sm.full_bar(s), gw_round_parity(it));
		gw_wgmma_fence();
#pragma unroll
		for (int kk = 0; kk < GW_BK / GW_MMA_K; kk++) {
			const uint64_t da = gw_desc_a(sm.a_stage(s), wg, kk);
			const uint64_t db = gw_desc_b(sm.b_stage(s), kk);
			const int scale_d = kt > 0 || kk > 0;
			if (NW == GW_BN)
				gw_mma<T>::n256(d, da, db, scale_d);
			else
				gw_mma<T>::n128(d, da, db, scale_d);
		}
		gw_wgmma_commit();
		gw_wgmma_wait<1>();
		gw_fence_acc(d);
		if (kt > 0 && lane == 0)
			gw_mbar_arrive(sm.empty_bar(gw_stage(it - 1)));
	}
	gw_wgmma_wait<0>();
	gw_fence_acc(d);
	if (lane == 0)
		gw_mbar_arrive(sm.empty_bar(gw_stage(it - 1)));
}

/* The epilogue of one consumer thread: its registers' rows and columns
 * (grouped_gemm_sm90_layout.h), rows past the group's end skipped. */
template <typename T, int EPI>
__device__ __forceinline__ void gw_epilogue(const gw_params<T> &p, const gw_tile &t, const float (&d)[GW_ACC_REGS],
	int wg)
{
	const int lane = threadIdx.x % 32, q = (threadIdx.x / 32) % 4;
	const int blocks = t.width / 8; /* 8-column blocks: 4 registers each */
#pragma unroll
	for (int half = 0; half < 2; half++) {
		const int64_t r = t.row0 + wg * GW_WG_M + gw_acc_row(q, lane, 2 * half);
		if (r >= t.row_end)
			continue;
		if (EPI == GG_EPI_SWIGLU) {
			T *dst = p.g.out + r * (p.g.n / 2);
#pragma unroll
			for (int j = 0; j < GW_ACC_REGS / 8; j++) {
				if (2 * j < blocks) {
					const float v0 = gg_silu(d[gw_acc_reg(2 * j, half, 0)]) * d[gw_acc_reg(2 * j + 1, half, 0)];
					const float v1 = gg_silu(d[gw_acc_reg(2 * j, half, 1)]) * d[gw_acc_reg(2 * j + 1, half, 1)];
					*reinterpret_cast<uint32_t *>(dst + gw_glu_col(t.col0, lane, j)) = gg_pack2<T>(v0, v1);
				}
			}
			continue;
		}
		float scale;
		const int64_t out_row = gg_out_row<EPI>(p.g, r, &scale);
		T *dst = p.g.out + out_row * p.g.n + t.col0;
#pragma unroll
		for (int j = 0; j < GW_ACC_REGS / 4; j++)
			if (j < blocks)
				*reinterpret_cast<uint32_t *>(dst + gw_acc_col(lane, gw_acc_reg(j, half, 0))) =
					gg_epi_pair<T, EPI>(d[gw_acc_reg(j, half, 0)], d[gw_acc_reg(j, half, 1)], scale);
	}
}

/* The consumers' loop: each tile as the producer wrote it beside its first
 * stage (waiting on a full barrier twice is harmless: the phase cannot
 * move on before this warpgroup frees the stage), until GW_TILE_DONE. */
template <typename T, int EPI> __device__ __forceinline__ void gw_consume(const gw_params<T> &p, const gw_smem &sm, int wg)
{
	const int k_tiles = p.g.kd / GW_BK;
	uint32_t it = 0;
	float d[GW_ACC_REGS];

	for (;;) {
		gw_mbar_wait(sm.full_bar(gw_stage(it)), gw_round_parity(it));
		const int tile = gw_ld_shared(sm.stage_tile(gw_stage(it)));
		if (tile == GW_TILE_DONE)
			break;
		const gw_tile t = gw_tile_at(p.g.tile_off, p.g.group_off, p.g.groups, p.g.n, tile);
		if (t.width == GW_BN)
			gw_mainloop<T, GW_BN>(d, sm, wg, k_tiles, it);
		else
			gw_mainloop<T, GW_BN_NARROW>(d, sm, wg, k_tiles, it);
		gw_epilogue<T, EPI>(p, t, d, wg);
	}
}

#endif /* __CUDA_ARCH_FEAT_SM90_ALL */

template <typename T, bool GATHER, int EPI>
__global__ void __launch_bounds__(GW_THREADS, 1) moe_ffn_grouped_gemm_wgmma_kernel(const __grid_constant__ gw_params<T> p)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
	extern __shared__ __align__(GW_SMEM_ALIGN) unsigned char gw_smem_raw[];
	const uint32_t raw = (uint32_t)__cvta_generic_to_shared(gw_smem_raw);
	gw_smem sm;
	sm.a = (raw + GW_SMEM_ALIGN - 1) & ~(uint32_t)(GW_SMEM_ALIGN - 1);
	sm.b = sm.a + GW_STAGES * GW_A_STAGE_BYTES;
	sm.full = sm.b + GW_STAGES * GW_B_STAGE_BYTES;
	sm.empty = sm.full + GW_STAGES * GW_BARRIER_BYTES;
	sm.tile = sm.empty + GW_STAGES * GW_BARRIER_BYTES;
	sm.next = sm.tile + GW_STAGES * GW_TILE_SLOT_BYTES;
	const int wg = threadIdx.x / GW_WG_THREADS;

	if (threadIdx.x == 0) {
		for (uint32_t s = 0; s < GW_STAGES; s++) {
			gw_mbar_init(sm.full_bar(s), GATHER ? GW_PRODUCERS : 1);
			gw_mbar_init(sm.empty_bar(s), GW_CONSUMER_WARPS);
		}
		gw_fence_barrier_init();
		gw_prefetch_tmap(&p.tmap_b);
		if (!GATHER)
			gw_prefetch_tmap(&p.tmap_a);
	}
	__syncthreads();

	if (wg == 0) {
		gw_setmaxnreg_dec<GW_PRODUCER_REGS>();
		if (GATHER)
			gw_produce_gather<T>(p, sm);
		else if (threadIdx.x == 0)
			gw_produce_tma<T>(p, sm);
	} else {
		gw_setmaxnreg_inc<GW_CONSUMER_REGS>();
		gw_consume<T, EPI>(p, sm, wg - 1);
	}
#else
	__trap(); /* the host launches this only where sm_90a code runs (gw_device_has_wgmma) */
#endif
}

/* ---- host side ------------------------------------------------------------- */

/* Whether the current device runs this build's wgmma kernel: the build
 * has sm_90a code (meson.build defines MB_CUDA_SM90A when gpu_archs holds
 * 90a, and refuses 90 beside it, so that a compute capability 9.0 device
 * loads that code) and the device is compute capability 9.0 (sm_90a code
 * runs on no other). A query of attributes only: no device work, so it is
 * safe inside a stream capture. 0 and *out set, or a cudaError_t. */
static int gw_device_has_wgmma(bool *out)
{
	int device = 0, major = 0, minor = 0;
	cudaError_t ce = cudaGetDevice(&device);

	if (ce == cudaSuccess)
		ce = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
	if (ce == cudaSuccess)
		ce = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
	if (ce != cudaSuccess)
		return (int)ce;
#if defined(MB_CUDA_SM90A) && MB_CUDA_SM90A
	*out = major == 9 && minor == 0;
#else
	*out = false;
#endif
	return 0;
}

/* Whether a variant that has both kernels runs the wgmma one, as the
 * environment variable `env` asks: unset, empty or "auto": where
 * gw_device_has_wgmma says it runs; "mma": never; "wgmma": always, or
 * cudaErrorNotSupported where it cannot run. Any other value is
 * cudaErrorInvalidValue (a typo must not measure the wrong kernel).
 * 0 and *out set, or a cudaError_t. */
static int gw_pick_wgmma(const char *env, bool *out)
{
	const char *want = getenv(env);
	const bool force = want && strcmp(want, "wgmma") == 0;
	bool has = false;
	int rc;

	if (want && strcmp(want, "mma") == 0) {
		*out = false;
		return 0;
	}
	if (want && *want && !force && strcmp(want, "auto") != 0)
		return (int)cudaErrorInvalidValue;
	if ((rc = gw_device_has_wgmma(&has)) != 0)
		return rc;
	if (force && !has)
		return (int)cudaErrorNotSupported;
	*out = has;
	return 0;
}

/* cuTensorMapEncodeTiled through the runtime's driver entry point (no link
 * to libcuda), looked up once. */
static int gw_encode_fn(PFN_cuTensorMapEncodeTiled_v12000 *out)
{
	static PFN_cuTensorMapEncodeTiled_v12000 fn;
	if (!fn) {
		void *p = NULL;
		cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
		const cudaError_t ce = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
			cudaEnableDefault, &q);
		if (ce != cudaSuccess)
			return (int)ce;
		if (q != cudaDriverEntryPointSuccess || !p)
			return (int)cudaErrorNotSupported;
		fn = (PFN_cuTensorMapEncodeTiled_v12000)p;
	}
	*out = fn;
	return 0;
}

template <typename T> constexpr CUtensorMapDataType gw_tmap_type();
template <> constexpr CUtensorMapDataType gw_tmap_type<__nv_bfloat16>() { return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16; }
template <> constexpr CUtensorMapDataType gw_tmap_type<__half>() { return CU_TENSOR_MAP_DATA_TYPE_FLOAT16; }

/* A row-major [rows, cols] matrix as boxes of [box_rows][GW_BK] in the
 * 128-byte swizzle (cols a multiple of 8: 16-byte row pitch). */
template <typename T>
static int gw_tmap_2d(CUtensorMap *map, const T *base, int64_t rows, int64_t cols, uint32_t box_rows)
{
	PFN_cuTensorMapEncodeTiled_v12000 encode = NULL;
	int rc = gw_encode_fn(&encode);
	if (rc != 0)
		return rc;
	const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
	const cuuint64_t pitch[1] = {(cuuint64_t)cols * sizeof(T)};
	const cuuint32_t box[2] = {GW_BK, box_rows};
	const cuuint32_t step[2] = {1, 1};
	const CUresult r = encode(map, gw_tmap_type<T>(), 2, (void *)base, dims, pitch, box, step,
		CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
		CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
	return r == CUDA_SUCCESS ? 0 : (int)cudaErrorInvalidValue;
}

#endif
