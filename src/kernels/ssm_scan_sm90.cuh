/* ssm_scan's fused variant on Hopper's warpgroup tensor cores (sm_90a;
 * ssm_scan.cu's fused_launch runs it where gw_pick_wgmma says it runs):
 * the same chunked math, plan and precision as the mma.sync kernel of
 * ssm_scan.cu (its header derives them), one warpgroup a CTA, each product
 * of a 64-step chunk one chain of wgmma.mma_async that reads each operand
 * once a warpgroup. Included by ssm_scan.cu after the fused kernel, whose
 * plan (segments, phase 1, the chained hand-over), discretisation (a
 * chunk ahead, on warps 2 and 3) and loaders it shares.
 *
 * Per chunk (Q = 64 steps, P = 64, N = 128), the tiles fp16 in shared
 * memory in the 128-byte swizzle (ssm_scan_sm90_layout.h places them):
 *   1. S = C B^T (m64n64k16 x 8, both K-major) and C g_in (x 8, g_in the
 *      entering state as fp16 [p][n], K-major);
 *   2. M = S o L on S's accumulators (L_ij = e^{cs_i - cs_j} kappa_j below
 *      the diagonal, gamma_i on it), rounded to fp16 straight into the A
 *      fragments of the next wgmma (the accumulator and A-register layouts
 *      coincide), while C g_in still runs (its own commit group); then C
 *      g_in's rows times e^{cs_i};
 *   3. y += M x (m64n64k16 x 4, A from registers, x [j][p] read MN-major)
 *      and the state g = e^{cs_last} g + (w o x)^T B (m64n128k16 x 4, A =
 *      fp16(w_j x_j[p]) from registers: x^T by ldmatrix.trans, scaled by
 *      w_j = e^{cs_last - cs_j} kappa_j; B [j][n] read MN-major), one group;
 *      the state's 64 accumulators a thread stay in registers from chunk to
 *      chunk;
 *   4. y to global memory (bf16), the state to g16 (fp16, stmatrix) for the
 *      next chunk's C g_in.
 * The next chunk's B and C (fp16 already: ssm_scan.cu's first launch)
 * are copied into the other buffer of their tiles by cp.async once (1) is
 * issued (the previous chunk's products freed them) and waited for at the
 * chunk's end; its x comes from global memory while (1) runs and is
 * converted into its tile before (1)'s wait; two
 * barriers a chunk (one warpgroup: 128 threads): after (1) has retired in
 * every warp (C and g16 free) and at the chunk's end (the next tiles and
 * g16 written, fenced into the async proxy). Phase 1 (the state-only pass
 * over the previous segment) is (3)'s state product alone.
 *
 * Precision: the same roundings as the mma.sync kernel (x, B, C exact in
 * fp16; M, w x and the entering state rounded to fp16 once each; fp32
 * accumulation; cs summed in double and rounded once), so
 * src/reference/ssm_scan.c's tolerance holds unchanged; only the order of
 * the fp32 sums inside the tensor cores differs.
 *
 * On paper (H100 SXM, B=4 L=16384 NH=32 P=64 N=128, 132 SMs at 1.83 GHz).
 * The plan (with phase 1 costed at 3/10 of a chunk, as it then was; 7/20
 * since run ssm-a): two segments a sequence (264 CTA slots for 128 sequences),
 * segment 0 151 chunks, segment 1 105 after a phase 1 over segment 0's
 * 151: 32768 chunks of phase 3 and 19328 of phase 1.
 *   tensor: a phase-3 chunk is 2 M N K for S (64x64x128), C g_in (the
 *     same), M x (64x64x64) and the state (64x128x64): 3.67 MFLOP; phase 1
 *     the state's 1.05: 141 GFLOP, 0.14 ms at 990 TFLOP/s dense fp16;
 *   DRAM: x and y 268 MB each, B and C 17 MB each, dt and lambda 4 MB
 *     each (0.58 GB), and phase 1 reads x and B of 59% of the chunks again
 *     (0.17 GB, partly from L2: segment 0's CTA streams the same rows):
 *     0.17 to 0.22 ms at 3.35 TB/s;
 *   instructions, a thread (so a warp) a chunk: the loads and fp16
 *     staging of x, B and C (20 16-byte vectors, about 320), M's mask (32
 *     elements: difference, exponential, kappa, select, product, pack:
 *     about 300), x^T's ldmatrix and decay weights (about 115), the
 *     decays of y's rows and of the state (96), y's stores (about 50), the
 *     state's stmatrix (about 40), 24 wgmma with their fences and waits
 *     (about 40), the discretisation's share and the loop (about 80):
 *     about 1,000, so 4,000 warp instructions a chunk against the mma.sync
 *     kernel's 10,800 (8 warps of 1,350), and phase 1 about 1,600: 162 M
 *     warp instructions, 0.17 ms at 4 an SM a cycle.
 * The three bounds sit at 0.14-0.22 ms, and overlap only as far as two
 * CTAs an SM (shared memory: 2 x 100 KB; registers: 2 x 128 x 255) hide
 * each other's serial chain of a chunk: batch 1's wgmma (about 1,000
 * tensor cycles), the mask, batch 2 (about 770), the stores, two
 * barriers, about 3,500 cycles a chunk a CTA by this count, so 151
 * chunks take 0.29 ms. 0.3 ms at L = 16384 is the expectation before
 * tuning (target 0.45); at L = 4096 a quarter of it plus the start (the
 * first tiles' latency), 0.08-0.1 ms (target 0.15).
 *
 * Measured (an H200, reports/h200 run p): 1.084 ms at L = 16384 and
 * 0.271 at L = 4096, against the mma.sync kernel's 1.227 and 0.308 in
 * the same run: 1.13x faster, 3.6x slower than predicted, the targets
 * missed. ncu at L = 16384 (one launch, clocks as found, 1.79 GHz): 1.09
 * ms, 1.95 M cycles; 252.2 M warp instructions (the mma.sync kernel
 * 407.3 M), about 1,500 a warp a chunk against the 1,000 counted above;
 * 254 registers a thread and 102.7 KB of shared memory, each allowing 2
 * CTAs an SM, so 8 warps (12.5% theoretical occupancy, 11.67% achieved).
 * None of the three bounds binds: DRAM 13.8% busy, tensor work 0.14 of
 * the 1.09 ms, issue active 25.2% (the mma.sync kernel 36.4%). The kernel
 * is latency-bound: two warps a scheduler, each issuing about once every
 * 8 cycles (stall cycles per issued instruction: wait 1.65, barrier
 * 1.06, long scoreboard 0.94, short scoreboard 0.81, not selected 0.15,
 * math pipe 0.12), so 1,500 instructions a warp make a chunk about
 * 13,000 cycles (1.95 M over segment 0's 151 chunks), not 3,500: the
 * count above missed a third of the instructions, and took the chain to
 * be its wgmma and barriers when it is every instruction of a warp, each
 * waiting on the one before.
 * The levers, in the order we would try them:
 *   - B, C and x fed to wgmma as bf16, straight from global memory into
 *     the swizzled tiles (cp.async or TMA): bf16 products are exact in
 *     fp32 accumulation as fp16's are. That removes the staging through
 *     registers (load, convert, store: about 320 instructions a thread a
 *     chunk) and the 80 registers of prefetch (20 16-byte vectors) held
 *     across batch 1. A wgmma's A and B share one type, so the operands
 *     rounded from fp32 (M, the entering state, w o x) become bf16 too,
 *     each split hi + lo (hi = bf16(v), lo = bf16(v - hi): 2^-16
 *     relative, finer than fp16's 2^-11) into two wgmmas: C g_in, M x and
 *     the state twice, 6.3 MFLOP a chunk, still about 0.25 ms of tensor
 *     work. The reference's tolerance (derived for fp16's rounding) then
 *     holds with room to spare; the mma.sync kernel keeps fp16. Its cost:
 *     C g_in reads the state from shared memory, and its lo half is a
 *     second 16 KB tile, past the 113 KB a CTA that two an SM leave
 *     (102.7 KB now), so one of the double-buffered tiles gives way.
 *   - Chunk k + 1's S = C B^T (independent of the state) issued before
 *     chunk k's state update, so that each warp has independent work
 *     while the chain waits: 32 more accumulator registers a thread,
 *     which the first lever frees.
 *   - A third CTA an SM would need at most 168 registers a thread (254
 *     now) and 75 KB of shared memory a CTA (102.7): further off than
 *     either lever above.
 *   - Done since, short of the first lever: B and C as fp16 from a
 *     launch before this one (once a batch: the 32 heads of a batch each
 *     converted the same rows), copied into their tiles by cp.async. 16
 *     of the 20 staged vectors a thread a chunk were B's and C's (run
 *     ea141d9's source counters, reports/h200/source-ssm_scan-ea141d9.txt);
 *     without them, 230 registers instead of 254 and 216.4 M warp
 *     instructions instead of 253.8 M; at L = 16384 the kernel took
 *     972.6 us under ncu and the variant (the conversion 17 us of it)
 *     989.4-989.8 against 1049.6-1049.8 (reports/h200 run ssm-bc). Its
 *     workspace is B and C in fp16, 4 B L N bytes. With the registers
 *     it freed, x fetched a whole chunk before its staging (16 registers
 *     held across the chunk, 243 in all) gained 0.6-0.9%, with L2 asked
 *     three chunks ahead instead of two nothing (run ssm-xe): not kept.
 *   - Done since: M's decays as 2^{cs2_i - ks2_j}, kappa folded into the
 *     exponent (ssm_scan.cu's chunk_coefs): per element a subtraction,
 *     an ex2 and S's product, where there were a multiply by log2(e) and
 *     one by kappa_j (read from shared memory) besides; 10% off the
 *     kernel, 893.1-894.8 against 993.0-995.5 us at L = 16384 (run
 *     ssm-ex). With the whole-tile stores and phase 1 costed at 8/20 it
 *     takes 880.9-883.8 us; ncu (source-ssm-ex-v2.txt): 199.6 M warp
 *     instructions, the most executed FMUL (30.0 M: the state's and y's
 *     decays, the weighted x, S's product), then IMAD, F2FP, ISETP, LDS.
 *     Then (runs ssm-dc and ssm-mk): the wgmma descriptors moved on from
 *     two a CTA (sw_desc_add: one add each where an encoding took four
 *     uniform instructions; 871.4-872.2 against 878.5-879.6 us), S's
 *     coefficients and the weights of x loaded in pairs (sw_mask), the
 *     B and C copies of a whole tile without tests: 813.2-818.3 us at
 *     L = 16384, 205.5-206.9 at 4096; 168.2 M warp instructions.
 *     Then the next chunk's copies, x and stage 1 issued after (1) rather
 *     than before it (run ssm-or): 783.8-783.9 us at L = 16384, 199.1-
 *     199.2 at 4096. In the whole-suite run ah: 779.8 and 198.0 us, 255
 *     registers a thread (two CTAs an SM still), 168.1 M warp
 *     instructions; stall samples at barriers 25%, fixed-latency waits
 *     22%, long scoreboards 17% (source-ssm-ah.txt): latency-bound as
 *     before, at 0.78 ms against the 0.45 ms target. Not kept (run
 *     ssm-sc): the state's 64 decays moved to run while (1) does (784.2-
 *     785.2 against 783.7-784.5 us), and the weighted x there too (809.4-
 *     810.3: its 16 registers live across the mask). Then (run ssm-s2)
 *     the discretisation's stage 2, which the chunk's end waits for on
 *     one warp, in base 2 with MUFU's ex2 and lg2 (ssm_scan.cu's
 *     disc_stage2): 751.2-753.4 us against 779.0-782.6 at L = 16384,
 *     190.4-191.6 against 197.6-199.0 at 4096.
 *   - Not kept (branch exp/ssm-reverse-phase1, run ssm-rv): phase 1
 *     taking its chunks last to first, each step weighted by its decay
 *     to the segment's end, so that the state's products only add up (no
 *     64 decays of the accumulators a chunk) and a chunk's weighted x
 *     forms while the previous product runs: 165.7 M warp instructions,
 *     813.6-814.8 against 816.6-817.9 us at L = 16384 (0.4%), and phase
 *     1 costed at 6/20 or 5/20 slower than at 8/20. The time is segment
 *     0's chain of output chunks, which phase 1 does not shorten.
 *
 * Tests without a GPU: tests/unit/test_ssm_scan_sm90.c follows each
 * element through this kernel's index maps (ssm_scan_sm90_layout.h);
 * tests/unit/test_ssm_scan_emu.cpp runs its device code on the CPU (the
 * SIMT emulator of ssm_scan_emu.h, with asynchronous warpgroup MMA)
 * against the reference, on every kind of plan.
 *
 * Only an sm_90a build has the body (__CUDA_ARCH_FEAT_SM90_ALL); elsewhere
 * the fused variant launches the mma.sync kernel (MEGABENCH_SSM_MMA=mma
 * forces that everywhere, =wgmma this kernel, an error where it cannot
 * run). */
#ifndef MB_KERNELS_SSM_SCAN_SM90_CUH
#define MB_KERNELS_SSM_SCAN_SM90_CUH

#ifndef MB_SSM_EMU
#include "kernels/grouped_gemm_sm90.cuh"
#endif
#include "kernels/ssm_scan_sm90_layout.h"

/* Where the device code has its body: an sm_90a device pass, or the CPU
 * emulation of tests/unit/ssm_scan_emu.h (which supplies the wgmma,
 * ldmatrix, stmatrix and fence primitives written in PTX here). */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(MB_SSM_EMU)
#define MB_SSM_SM90_BODY 1
#else
#define MB_SSM_SM90_BODY 0
#endif

#define SW_CTAS_PER_SM 2
#define SW_X_VECS (SW_Q * SW_P / SW_VEC_ELEMS / SW_THREADS)  /* 4 */
#define SW_STSM_CALLS (SW_N / 16)                           /* 8: two 8-column blocks each */

static_assert(SW_Q == TILE && SW_P == SSM_P_MAX && SW_N == SSM_N_MAX, "the tiles are the fused kernel's");
static_assert(DISC_STAGE2_WARP < SW_WARPS && DISC_WARP0 + 1 < SW_WARPS, "the discretising warps exist");

/* Shared memory beside the tiles. */
struct sw_side {
	chunk_coefs co[2]; /* this chunk's and the next */
	disc_smem ds;      /* stage 1 of the next chunk */
	unsigned item, tag;
};

#define SW_SMEM_BYTES (SW_TILE_BYTES + sizeof(sw_side) + SW_SMEM_ALIGN)
static_assert(SW_CTAS_PER_SM * (SW_SMEM_BYTES + 1024) <= 228 * 1024,
	"two CTAs an SM: 228 KB of shared memory, 1 KB reserved per CTA");

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) && !defined(MB_SSM_EMU)

/* ---- wgmma forms (f16 in, f32 accumulate) ------------------------------------
 * SS: both operands K-major from shared memory (imm-trans-a = imm-trans-b =
 * 0); RS: A from registers, B MN-major (imm-trans-b = 1). scale_d 0 ignores
 * d's old value. */
#define SW_R32 \
	"%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
	"%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define SW_D32 GW_D8(0), GW_D8(1), GW_D8(2), GW_D8(3)

__device__ __forceinline__ void sw_mma_ss_n64(float (&d)[SW_ACC64], uint64_t da, uint64_t db, int scale_d)
{
	asm volatile("{\n.reg .pred p;\n"
		     "setp.ne.b32 p, %34, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {" SW_R32 "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
		: SW_D32
		: "l"(da), "l"(db), "r"(scale_d));
}

__device__ __forceinline__ void sw_mma_rs_n64(float (&d)[SW_ACC64], const uint32_t (&a)[4], uint64_t db)
{
	asm volatile("{\n.reg .pred p;\n"
		     "setp.ne.b32 p, %37, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {" SW_R32 "}, {%32, %33, %34, %35}, %36, p, 1, "
		     "1, 1;\n}\n"
		: SW_D32
		: "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

__device__ __forceinline__ void sw_mma_rs_n128(float (&d)[SW_ACC128], const uint32_t (&a)[4], uint64_t db)
{
	asm volatile("{\n.reg .pred p;\n"
		     "setp.ne.b32 p, %69, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {" GW_R64 "}, {%64, %65, %66, %67}, %68, p, "
		     "1, 1, 1;\n}\n"
		: GW_D64
		: "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

/* Keep the compiler from moving accesses of registers that an issued
 * wgmma owns (accumulators, A fragments) across its wait. */
template <int R> __device__ __forceinline__ void sw_fence_regs(float (&d)[R])
{
#pragma unroll
	for (int i = 0; i < R; i++)
		asm volatile("" : "+f"(d[i])::"memory");
}

template <int K> __device__ __forceinline__ void sw_fence_regs(uint32_t (&a)[K][4])
{
#pragma unroll
	for (int k = 0; k < K; k++) {
#pragma unroll
		for (int r = 0; r < 4; r++)
			asm volatile("" : "+r"(a[k][r])::"memory");
	}
}

__device__ __forceinline__ void sw_stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3)
{
	asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1),
		"r"(r2), "r"(r3)
		: "memory");
}
#endif

#if MB_SSM_SM90_BODY
/* ---- tiles ------------------------------------------------------------------ */

/* The 1024-aligned start of the tiles in dynamic shared memory. */
__device__ __forceinline__ unsigned char *sw_tiles()
{
	unsigned char *raw = dyn_smem();
	const uint32_t addr = smem_u32(raw);
	return raw + (((addr + SW_SMEM_ALIGN - 1) & ~(uint32_t)(SW_SMEM_ALIGN - 1)) - addr);
}

/* Fetched rows (fetch_rows' layout at SW_THREADS) into a tile as fp16;
 * columns past cols are left as they are (zero since the kernel's start). */
template <int MAXC, int VECS> __device__ __forceinline__ void sw_stage(unsigned char *tile, const uint4 (&r)[VECS], int cols)
{
	const int col = sw_vec_col(threadIdx.x, 0, MAXC);
	unsigned char *at = tile + sw_tile_offset(sw_vec_row(threadIdx.x, 0, MAXC), col);
	if (col >= cols)
		return;
#pragma unroll
	for (int k = 0; k < VECS; k++)
		*reinterpret_cast<uint4 *>(at + k * sw_vec_step(MAXC)) = bf16x8_to_f16x8(r[k]);
}

/* 16 bytes of global memory into shared memory by cp.async (through L2
 * only), or 16 zero bytes where !valid (src then read not at all). */
__device__ __forceinline__ void sw_cp16(unsigned char *dst, const void *src, bool valid)
{
#ifdef MB_SSM_EMU
	if (valid)
		memcpy(dst, src, 16);
	else
		memset(dst, 0, 16);
#else
	gg_cp_async16(smem_u32(dst), src, valid ? 16 : 0);
#endif
}

/* This thread's cp.async copies done (then fenced into the async proxy
 * and past a barrier before any wgmma reads them). */
__device__ __forceinline__ void sw_cp_wait_all()
{
#ifndef MB_SSM_EMU
	asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

/* Rows t0 .. t0 + 63 of an fp16 [seq][cols] tensor into a tile, as
 * fetch_rows and sw_stage place them (rows past seq zero, columns past
 * cols left as they are), by cp.async: no registers, no conversion. */
template <int MAXC>
__device__ __forceinline__ void sw_copy_rows(unsigned char *tile, const __half *src, int seq, int cols, int t0)
{
	constexpr int vecs = TILE * MAXC / SW_VEC_ELEMS / SW_THREADS, row_step = SW_THREADS / (MAXC / SW_VEC_ELEMS);
	const int row0 = sw_vec_row(threadIdx.x, 0, MAXC), col = sw_vec_col(threadIdx.x, 0, MAXC);
	if (col >= cols)
		return;
	const int rows_left = min(TILE, seq - t0) - row0;
	const __half *at = src + (int64_t)(t0 + row0) * cols + col;
	unsigned char *dst = tile + sw_tile_offset(row0, col);
	if (t0 + TILE <= seq && cols == MAXC) {
		/* a whole tile: every copy valid, at offsets known here (run
		 * ssm-mk: 817.6-818.3 against 822.3-823.2 us at L = 16384; before
		 * the paired loads of sw_mask it was slower, 886.9-887.4 against
		 * 871.4-872.2 in run ssm-dc) */
#pragma unroll
		for (int k = 0; k < vecs; k++)
			sw_cp16(dst + k * sw_vec_step(MAXC), at + k * row_step * MAXC, true);
		return;
	}
#pragma unroll
	for (int k = 0; k < vecs; k++) {
		const bool valid = k * row_step < rows_left;
		sw_cp16(dst + k * sw_vec_step(MAXC), valid ? at + (int64_t)k * row_step * cols : src, valid);
	}
}

/* ---- the per-chunk register work ------------------------------------------- */

/* M = fp16(S o L) as the A fragments of M x (ssm_scan_sm90_layout.h:
 * sw_acc_of_a), from S's accumulators. The two accumulators of an A
 * register share a row and take adjacent columns, so their ks2 come in one
 * 8-byte load, and cs2 and gamma once for both: with the paired loads of
 * sw_weighted_xt, 168.2 M warp instructions instead of 199.6 M and 813.2-
 * 813.9 us against 878.5-879.6 at L = 16384 (reports/h200 run ssm-dc, one
 * H200, three passes each; 205.5-205.6 against 222.4-222.7 at L = 4096).
 * Not kept (run ssm-mk): branching on the warp's place against the
 * diagonal (every column below it where kk < q, M = 0 where kk > q, the
 * tests only where kk = q): 842.1-842.8 against 817.6-818.3 us. */
__device__ __forceinline__ void sw_mask(uint32_t (&ma)[SW_K_STEPS_Q][4], const float (&sa)[SW_ACC64],
	const chunk_coefs &co, int q, int lane)
{
#pragma unroll
	for (int kk = 0; kk < SW_K_STEPS_Q; kk++) {
#pragma unroll
		for (int r = 0; r < 4; r++) {
			/* accumulators a and a + 1: one row, columns j and j + 1 (j even) */
			const int a = sw_acc_of_a(kk, r, 0), i = gw_acc_row(q, lane, a), j = gw_acc_col(lane, a);
			const float2 ks = *reinterpret_cast<const float2 *>(&co.ks2[j]);
			const float cs = co.cs2[i], gam = co.gam[i];
			const float l0 = j < i ? ex2_approx(cs - ks.x) : j == i ? gam : 0.0f;
			const float l1 = j + 1 < i ? ex2_approx(cs - ks.y) : j + 1 == i ? gam : 0.0f;
			ma[kk][r] = half2_bits(__floats2half2_rn(sa[a] * l0, sa[a + 1] * l1));
		}
	}
}

/* The state's A fragments: fp16(w_j x_j[p]) for rows p, k = j, from the x
 * tile [j][p] by ldmatrix.trans. */
__device__ __forceinline__ void sw_weighted_xt(uint32_t (&xa)[SW_K_STEPS_Q][4], uint32_t x_tile, const chunk_coefs &co,
	int q, int lane)
{
	const uint32_t at = x_tile + sw_xt_ldsm_offset(q, lane, 0);
#pragma unroll
	for (int kk = 0; kk < SW_K_STEPS_Q; kk++) {
		gg_ldmatrix_x4_trans(xa[kk], at + sw_xt_ldsm_step(kk));
#pragma unroll
		for (int r = 0; r < 4; r++) {
			const int j = sw_a_col(lane, kk, r, 0); /* even */
			const float2 f = half2_bits_f2(xa[kk][r]), w = *reinterpret_cast<const float2 *>(&co.wdec[j]);
			xa[kk][r] = half2_bits(__floats2half2_rn(f.x * w.x, f.y * w.y));
		}
	}
}

/* Rows of an m64n64 result times e[row]. */
__device__ __forceinline__ void sw_scale_rows(float (&d)[SW_ACC64], const float *e, int q, int lane)
{
	const float e0 = e[gw_acc_row(q, lane, 0)], e1 = e[gw_acc_row(q, lane, 2)];
#pragma unroll
	for (int i = 0; i < SW_ACC64; i++)
		d[i] *= (i / 2) % 2 ? e1 : e0;
}

template <int R> __device__ __forceinline__ void sw_zero_acc(float (&d)[R])
{
#pragma unroll
	for (int i = 0; i < R; i++)
		d[i] = 0.0f;
}

template <int R> __device__ __forceinline__ void sw_scale(float (&d)[R], float s)
{
#pragma unroll
	for (int i = 0; i < R; i++)
		d[i] *= s;
}

/* y rows below `rows`, columns below p_dim, as bf16 (row stride p_dim).
 * A whole tile (every row and column there) is stored without the tests:
 * 887.7-889.9 against 893.1-894.8 us at L = 16384 (reports/h200 run
 * ssm-ex, three passes each), 225.3-225.8 against 225.9-226.2 at 4096. */
__device__ __forceinline__ void sw_store_y(__nv_bfloat16 *y, int64_t p_dim, const float (&d)[SW_ACC64], int rows, int q,
	int lane)
{
	if (rows == TILE && p_dim == SW_P) {
#pragma unroll
		for (int i = 0; i < SW_ACC64; i += 2)
			store_bf16x2(y + gw_acc_row(q, lane, i) * SW_P + gw_acc_col(lane, i), d[i], d[i + 1]);
		return;
	}
#pragma unroll
	for (int i = 0; i < SW_ACC64; i += 2) {
		const int r = gw_acc_row(q, lane, i), col = gw_acc_col(lane, i);
		if (r < rows && col < p_dim)
			store_bf16x2(y + (int64_t)r * p_dim + col, d[i], d[i + 1]);
	}
}

/* The state, rounded to fp16, into the g16 tile [p][n]. */
__device__ __forceinline__ void sw_store_g16(uint32_t g16, const float (&st)[SW_ACC128], int q, int lane)
{
	const uint32_t off0 = sw_g16_stsm_offset(q, lane, 0);
#pragma unroll
	for (int s = 0; s < SW_STSM_CALLS; s++) {
		uint32_t r[4];
#pragma unroll
		for (int m = 0; m < 4; m++)
			r[m] = half2_bits(__floats2half2_rn(st[sw_stsm_acc(s, m, 0)], st[sw_stsm_acc(s, m, 1)]));
		sw_stmatrix_x4(g16 + sw_g16_stsm_from0(off0, s), r[0], r[1], r[2], r[3]);
	}
}

/* The state's element of register i (and i + 1) in a [P_MAX, N_MAX] fp32
 * array, the same in every CTA. */
__device__ __forceinline__ int64_t sw_state_offset(int q, int lane, int i)
{
	return (int64_t)gw_acc_row(q, lane, i) * SSM_N_MAX + gw_acc_col(lane, i);
}

__device__ __forceinline__ void sw_state_publish(float *dst, const float (&st)[SW_ACC128], int q, int lane)
{
#pragma unroll
	for (int i = 0; i < SW_ACC128; i += 2)
		*reinterpret_cast<float2 *>(dst + sw_state_offset(q, lane, i)) = make_float2(st[i], st[i + 1]);
}

/* st = decay src + st, src read past L1 (another SM wrote it). */
__device__ __forceinline__ void sw_state_fold(float (&st)[SW_ACC128], const float *src, float decay, int q, int lane)
{
#pragma unroll
	for (int i = 0; i < SW_ACC128; i += 2) {
		const float2 v = __ldcg(reinterpret_cast<const float2 *>(src + sw_state_offset(q, lane, i)));
		st[i] = decay * v.x + st[i];
		st[i + 1] = decay * v.y + st[i + 1];
	}
}

/* ---- passes ------------------------------------------------------------------ */

/* Chunks ahead of the one a pass works on whose x rows it asks L2 for: the
 * loads of the next chunk's tiles, issued a chunk later, then find them
 * there. One bulk prefetch from one thread (a chunk of a sequence's x is
 * one run of Q * P bf16), for the chunk SW_PREFETCH_AHEAD after t0 when
 * it lies before the pass's end. One H200, three passes each
 * (reports/h200 run ssm-pf), B=4 NH=32 P=64 N=128 bf16: 1054.0-1054.7
 * against 1061.4-1068.1 us at L = 16384, 265.2-265.5 against 268.0-268.2
 * at L = 4096; asking for B and C too (shared by the heads of a batch,
 * mostly in L2 already) 1056.5-1058.3, three chunks ahead 1054.8-1056.3.
 * The kernel stays latency-bound. */
#define SW_PREFETCH_AHEAD 2

__device__ __forceinline__ void sw_prefetch_x(const fused_args &g, const fused_ctx &c, int t0, int end)
{
	t0 += SW_PREFETCH_AHEAD * TILE;
#ifndef MB_SSM_EMU
	if (threadIdx.x == 0 && t0 < end)
		asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(c.x(g) + (int64_t)t0 * g.p_dim),
			"r"(min(TILE, g.seq - t0) * g.p_dim * (int)sizeof(__nv_bfloat16))
			: "memory");
#else
	(void)g, (void)c, (void)t0, (void)end;
#endif
}

struct sw_cta {
	unsigned char *tiles; /* generic address of the tiles */
	uint32_t base;        /* their shared address */
	uint64_t dk, dm;      /* K-major and MN-major descriptors of that address */
	sw_side *side;
	__device__ __forceinline__ int q() const { return threadIdx.x / MB_WARP_THREADS; }
	__device__ __forceinline__ int lane() const { return threadIdx.x % MB_WARP_THREADS; }
	/* k16 step kk of the tile at byte offset off, as an operand of either
	 * major (sw_desc_add: the tile's descriptor once, then one add a step) */
	__device__ __forceinline__ uint64_t kmajor(uint32_t off, int kk) const
	{
		return sw_desc_add(sw_desc_add(dk, off), sw_kmajor_step(kk));
	}
	__device__ __forceinline__ uint64_t mnmajor(uint32_t off, int kk) const
	{
		return sw_desc_add(sw_desc_add(dm, off), sw_mnmajor_step(kk));
	}
};

/* Chunk 0 of [begin, end) into buffer 0 (C too when with_c) and its
 * coefficients into co[0]; the raw inputs of chunk 1 into `raw` on the
 * discretising warps. Ends with the CTA synchronised and its writes in
 * the async proxy. */
__device__ __forceinline__ void sw_prologue(const sw_cta &k, disc_raw &raw, const fused_args &g, const fused_ctx &c,
	int begin, int end, bool with_c)
{
	sw_side &s = *k.side;
	uint4 px[SW_X_VECS];

	sw_copy_rows<SSM_N_MAX>(k.tiles + SW_OFF_B(0), c.bm16(g), g.seq, g.n_dim, begin);
	if (with_c)
		sw_copy_rows<SSM_N_MAX>(k.tiles + SW_OFF_C(0), c.cm16(g), g.seq, g.n_dim, begin);
	fetch_rows<SSM_P_MAX, SW_X_VECS, SW_THREADS>(px, c.x(g), g.seq, g.p_dim, begin);
	if (disc_warp(c))
		disc_load(raw, g, c.row, begin, c.warp() - DISC_WARP0, c.lane());
	sw_stage<SSM_P_MAX>(k.tiles + SW_OFF_X(0), px, g.p_dim);
	disc_ahead(s.ds, raw, g, c, begin - TILE, end); /* chunk 0's stage 1, chunk 1's raw inputs */
	sw_cp_wait_all();
	__syncthreads();
	if (c.warp() == DISC_STAGE2_WARP)
		disc_stage2(s.co[0], s.ds, c.lane());
	gw_fence_proxy_async();
	__syncthreads();
}

/* Phase 1 over [begin, end): the state this stretch leaves from a zero
 * start, into st, and its whole log-decay. Per chunk: the state's product
 * issued while the next chunk's x and B load, a barrier (stage 1 done),
 * their tiles and stage 2, the product's wait, a barrier. */
__device__ __forceinline__ void sw_pass_states(const sw_cta &k, const fused_args &g, const fused_ctx &c, int begin,
	int end, float (&st)[SW_ACC128], double &log_decay)
{
	sw_side &s = *k.side;
	disc_raw raw = {0.0f, 0.0f, 0.0f, 0.0f};
	const int q = k.q(), lane = k.lane();

	sw_zero_acc(st);
	log_decay = 0.0;
	sw_prologue(k, raw, g, c, begin, end, false);
	for (int t0 = begin, cur = 0; t0 < end; t0 += TILE, cur ^= 1) {
		const bool more = t0 + TILE < end;
		uint32_t xa[SW_K_STEPS_Q][4];
		uint4 px[SW_X_VECS];

		sw_prefetch_x(g, c, t0, end);
		if (more) {
			/* the next B into the buffer the previous chunk's product freed */
			sw_copy_rows<SSM_N_MAX>(k.tiles + SW_OFF_B(cur ^ 1), c.bm16(g), g.seq, g.n_dim, t0 + TILE);
			disc_ahead(s.ds, raw, g, c, t0, end);
			fetch_rows<SSM_P_MAX, SW_X_VECS, SW_THREADS>(px, c.x(g), g.seq, g.p_dim, t0 + TILE);
		}
		sw_weighted_xt(xa, k.base + SW_OFF_X(cur), s.co[cur], q, lane);
		sw_scale(st, s.co[cur].dtot);
		log_decay += s.co[cur].cs_last;
		sw_fence_regs(st);
		sw_fence_regs(xa);
		gw_wgmma_fence();
#pragma unroll
		for (int kk = 0; kk < SW_K_STEPS_Q; kk++)
			sw_mma_rs_n128(st, xa[kk], k.mnmajor(SW_OFF_B(cur), kk));
		gw_wgmma_commit();
		__syncthreads();
		if (more) {
			sw_stage<SSM_P_MAX>(k.tiles + SW_OFF_X(cur ^ 1), px, g.p_dim);
			if (c.warp() == DISC_STAGE2_WARP)
				disc_stage2(s.co[cur ^ 1], s.ds, c.lane());
		}
		gw_wgmma_wait<0>();
		sw_fence_regs(st);
		sw_fence_regs(xa);
		sw_cp_wait_all();
		gw_fence_proxy_async();
		__syncthreads();
	}
}

/* Phase 3 over [begin, end) from the entering state st: y, and the state
 * carried from chunk to chunk (the header's steps 1-4). */
__device__ __forceinline__ void sw_pass_outputs(const sw_cta &k, const fused_args &g, const fused_ctx &c, int begin,
	int end, float (&st)[SW_ACC128])
{
	sw_side &s = *k.side;
	disc_raw raw = {0.0f, 0.0f, 0.0f, 0.0f};
	const int q = k.q(), lane = k.lane();

	sw_store_g16(k.base + SW_OFF_G16, st, q, lane);
	sw_prologue(k, raw, g, c, begin, end, true);
	for (int t0 = begin, cur = 0; t0 < end; t0 += TILE, cur ^= 1) {
		const bool more = t0 + TILE < end;
		const uint32_t c_off = SW_OFF_C(cur), b_off = SW_OFF_B(cur);
		float sa[SW_ACC64], ya[SW_ACC64];
		uint32_t ma[SW_K_STEPS_Q][4], xa[SW_K_STEPS_Q][4];

		/* 1: S = C B^T and C g_in, a group each */
		gw_wgmma_fence();
#pragma unroll
		for (int kk = 0; kk < SW_K_STEPS_N; kk++)
			sw_mma_ss_n64(sa, k.kmajor(c_off, kk), k.kmajor(b_off, kk), kk > 0);
		gw_wgmma_commit();
#pragma unroll
		for (int kk = 0; kk < SW_K_STEPS_N; kk++)
			sw_mma_ss_n64(ya, k.kmajor(c_off, kk), k.kmajor(SW_OFF_G16, kk), kk > 0);
		gw_wgmma_commit();
		sw_prefetch_x(g, c, t0, end);
		if (more) {
			/* the next B and C, into the buffers the previous chunk's
			 * products freed, its x into the buffer the previous chunk
			 * freed, and its stage 1: after (1) is issued, so that no
			 * warp's share of this work (the discretising warps' most)
			 * holds the warpgroup's products back. Before (1), as it
			 * was: 812.9-815.1 against 783.8-783.9 us at L = 16384,
			 * 206.0-206.2 against 199.1-199.2 at 4096 (reports/h200 run
			 * ssm-or, three passes each); the same order in phase 1 was
			 * slower (826.1-829.5), and x fetched before (1) slower
			 * still (830.8-833.6). */
			sw_copy_rows<SSM_N_MAX>(k.tiles + SW_OFF_B(cur ^ 1), c.bm16(g), g.seq, g.n_dim, t0 + TILE);
			sw_copy_rows<SSM_N_MAX>(k.tiles + SW_OFF_C(cur ^ 1), c.cm16(g), g.seq, g.n_dim, t0 + TILE);
			uint4 px[SW_X_VECS];
			fetch_rows<SSM_P_MAX, SW_X_VECS, SW_THREADS>(px, c.x(g), g.seq, g.p_dim, t0 + TILE);
			disc_ahead(s.ds, raw, g, c, t0, end);
			sw_stage<SSM_P_MAX>(k.tiles + SW_OFF_X(cur ^ 1), px, g.p_dim);
		}
		/* 2: M while C g_in runs, then the decays */
		gw_wgmma_wait<1>();
		sw_fence_regs(sa);
		sw_mask(ma, sa, s.co[cur], q, lane);
		gw_wgmma_wait<0>();
		sw_fence_regs(ya);
		/* every warp's share of (1) retired: C and g16 are free; stage 1 of
		 * the next chunk is done */
		__syncthreads();
		sw_scale_rows(ya, s.co[cur].ecs, q, lane);
		sw_weighted_xt(xa, k.base + SW_OFF_X(cur), s.co[cur], q, lane);
		sw_scale(st, s.co[cur].dtot);
		/* 3: y += M x, the state's update (the register writes above
		 * ordered before wgmma.fence) */
		sw_fence_regs(ya);
		sw_fence_regs(st);
		sw_fence_regs(ma);
		sw_fence_regs(xa);
		gw_wgmma_fence();
#pragma unroll
		for (int kk = 0; kk < SW_K_STEPS_Q; kk++)
			sw_mma_rs_n64(ya, ma[kk], k.mnmajor(SW_OFF_X(cur), kk));
#pragma unroll
		for (int kk = 0; kk < SW_K_STEPS_Q; kk++)
			sw_mma_rs_n128(st, xa[kk], k.mnmajor(b_off, kk));
		gw_wgmma_commit();
		if (more && c.warp() == DISC_STAGE2_WARP)
			disc_stage2(s.co[cur ^ 1], s.ds, c.lane());
		gw_wgmma_wait<0>();
		sw_fence_regs(ya);
		sw_fence_regs(st);
		sw_fence_regs(ma);
		sw_fence_regs(xa);
		/* 4: y, and the next chunk's g16 */
		sw_store_y(g.y + ((int64_t)c.row * g.seq + t0) * g.p_dim, g.p_dim, ya, min(TILE, g.seq - t0), q, lane);
		if (more)
			sw_store_g16(k.base + SW_OFF_G16, st, q, lane);
		sw_cp_wait_all();
		gw_fence_proxy_async();
		__syncthreads();
	}
}

/* The warpgroup kernel's part of fused_cta_run (ssm_scan.cu): the state
 * in the m64n128 accumulators. */
struct sw_cta_run {
	typedef float state[SW_ACC128];
	sw_cta k;
	const fused_args &g;

	__device__ __forceinline__ void zero_tiles() const
	{
		for (int v = threadIdx.x; v < (int)(SW_TILE_BYTES / sizeof(uint4)); v += SW_THREADS)
			reinterpret_cast<uint4 *>(k.tiles)[v] = make_uint4(0, 0, 0, 0);
	}
	__device__ __forceinline__ void zero(state &st) const { sw_zero_acc(st); }
	__device__ __forceinline__ void states(const fused_ctx &c, int begin, int end, state &st, double &log_decay) const
	{
		sw_pass_states(k, g, c, begin, end, st, log_decay);
	}
	__device__ __forceinline__ void fold(const fused_ctx &, state &st, const float *src, float decay) const
	{
		sw_state_fold(st, src, decay, k.q(), k.lane());
	}
	__device__ __forceinline__ void publish(const fused_ctx &, float *dst, const state &st) const
	{
		sw_state_publish(dst, st, k.q(), k.lane());
	}
	__device__ __forceinline__ void outputs(const fused_ctx &c, int begin, int end, state &st) const
	{
		sw_pass_outputs(k, g, c, begin, end, st);
	}
};

#endif /* MB_SSM_SM90_BODY */

/* One CTA (one warpgroup) per (segment, sequence), the plan and phases of
 * mb_ssm_scan_fused_kernel (fused_cta_run). */
__global__ void __launch_bounds__(SW_THREADS, SW_CTAS_PER_SM) mb_ssm_scan_fused_wgmma_kernel(const fused_args g)
{
#if MB_SSM_SM90_BODY
	sw_cta k;
	k.tiles = sw_tiles();
	k.base = smem_u32(k.tiles);
	k.dk = sw_desc_kmajor(k.base, 0);
	k.dm = sw_desc_mnmajor(k.base, 0);
	k.side = reinterpret_cast<sw_side *>(k.tiles + SW_TILE_BYTES);
	fused_cta_run(sw_cta_run{k, g}, g, k.side->item, k.side->tag);
#else
	__trap(); /* the host launches this only where sm_90a code runs (gw_device_has_wgmma) */
#endif
}

#endif
