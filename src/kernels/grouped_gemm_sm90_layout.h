/* The index arithmetic of the sm_90a grouped GEMM (grouped_gemm_sm90.cuh):
 * tile shape, the tile schedule over jagged groups, where each operand
 * element sits in shared memory, the wgmma shared-memory descriptors, and
 * which accumulator register holds which output element. Plain C with no
 * CUDA types, so that tests/unit/test_grouped_gemm_sm90.c runs the same
 * functions on the host: it emulates a whole grouped GEMM through them
 * (the producer's stores, the descriptors read the way the PTX ISA's
 * canonical layouts say the tensor cores read them, the epilogue's
 * register map) against a plain product, over jagged groups with empty
 * ones and narrow last tiles.
 *
 * Shared memory, per pipeline stage (every stage 1024-byte aligned):
 *   A: GW_BM rows of GW_BK elements, one 128-byte row each, in the 128-byte
 *      swizzle: the 16-byte chunk c of row r sits at chunk c ^ (r % 8).
 *      This is what a TMA load with CU_TENSOR_MAP_SWIZZLE_128B of a
 *      [GW_BM][GW_BK] box writes (GEMM2) and what the gathering producer
 *      writes itself (GEMM1). wgmma reads it K-major: consumer warpgroup w
 *      takes rows 64w .. 64w+63.
 *   B: the [GW_BK][width] slice of B_g (row-major, n contiguous) as
 *      width / 64 boxes of [GW_BK k][64 n] (8 KB each, one TMA load each),
 *      each in the same 128-byte swizzle: k is the row, n the column.
 *      wgmma reads it MN-major (imm-trans-b = 1).
 *
 * Descriptors (PTX ISA "matrix descriptor"; CUTLASS's make_gmma_desc
 * names the same canonical forms), 128-byte swizzle (layout type 1 in bits
 * 62-63), base offset 0 since every start address below is 1024-aligned
 * up to bits 4-6 (a k step moves the start by 32 bytes inside the first
 * 128-byte row of the atom, which the swizzle then XORs like the data):
 *   A, K-major: stride byte offset (SBO) = 1024, the step between groups of
 *      8 rows; the leading byte offset is unused for swizzled K-major
 *      layouts and set to 1 (16 bytes) as the ISA assumes; the k16 step kk
 *      of a stage starts at row 0 + 32 kk bytes.
 *   B, MN-major: leading byte offset (LBO) = 8192, the step between
 *      64-column boxes (the "repeat" along n); SBO = 1024, the step between
 *      groups of 8 k rows; the k16 step kk starts 16 kk rows (2048 kk
 *      bytes) into the stage.
 *
 * Accumulators (wgmma m64nNk16, f32): register i of a thread in warp q
 * (0..3) of its warpgroup, lane l, holds row 16 q + l / 4 + 8 ((i / 2) % 2)
 * and column 8 (i / 4) + 2 (l % 4) + i % 2 of the warpgroup's 64 x N
 * result: per 8-column block j, registers 4j .. 4j+3 are (row, col),
 * (row, col+1), (row+8, col), (row+8, col+1), as mma.sync's m16n8 C
 * fragment has them. */
#ifndef MB_KERNELS_GROUPED_GEMM_SM90_LAYOUT_H
#define MB_KERNELS_GROUPED_GEMM_SM90_LAYOUT_H

#include <stdint.h>

#if defined(__CUDACC__)
#define GW_FN static __host__ __device__ __forceinline__
#else
#define GW_FN static inline
#endif

#define GW_BM 128           /* tile rows: two consumer warpgroups */
#define GW_WG_M 64          /* rows per consumer warpgroup (wgmma m64) */
#define GW_BN 256           /* tile columns */
#define GW_BN_NARROW 128    /* the last tile of a row when n % GW_BN == 128 */
#define GW_BK 64            /* reduction per stage: one 128-byte row of 2-byte elements */
#define GW_MMA_K 16         /* reduction per wgmma */
#define GW_ELEM_BYTES 2
#define GW_ROW_BYTES (GW_BK * GW_ELEM_BYTES)            /* 128 */
#define GW_CHUNK_BYTES 16
#define GW_CHUNK_ELEMS (GW_CHUNK_BYTES / GW_ELEM_BYTES) /* 8 */
#define GW_ROW_CHUNKS (GW_ROW_BYTES / GW_CHUNK_BYTES)   /* 8 */
#define GW_SW_ROWS 8        /* rows of one swizzle atom */
#define GW_ATOM_BYTES (GW_SW_ROWS * GW_ROW_BYTES)       /* 1024: the swizzle's period */
#define GW_BOX_N 64         /* columns of one B box: a 128-byte row */
#define GW_A_STAGE_BYTES (GW_BM * GW_ROW_BYTES)                 /* 16 KB */
#define GW_B_BOX_BYTES (GW_BK * GW_BOX_N * GW_ELEM_BYTES)       /* 8 KB */
#define GW_B_STAGE_BYTES (GW_BN / GW_BOX_N * GW_B_BOX_BYTES)    /* 32 KB */
#define GW_STAGES 4         /* 4 x 48 KB of the 227 KB a block may have */
#define GW_WG_A_BYTES (GW_WG_M * GW_ROW_BYTES)          /* one warpgroup's A rows: 8 KB */
#define GW_MMA_K_A_BYTES (GW_MMA_K * GW_ELEM_BYTES)     /* 32: a k16 step along an A row */
#define GW_MMA_K_B_BYTES (GW_MMA_K * GW_ROW_BYTES)      /* 2048: a k16 step down the B rows */

/* The gathering producer: GW_PRODUCERS threads, each loading one 16-byte
 * chunk of GW_GATHER_ROWS rows per stage, GW_PRODUCERS / GW_ROW_CHUNKS
 * rows apart. */
#define GW_PRODUCERS 128
#define GW_GATHER_ROW_STEP (GW_PRODUCERS / GW_ROW_CHUNKS)   /* 16 */
#define GW_GATHER_ROWS (GW_BM / GW_GATHER_ROW_STEP)         /* 8 */

/* The pipeline (grouped_gemm_sm90.cuh): a stage's full barrier counts the
 * gathering producers (or the one TMA thread), its empty barrier lane 0 of
 * each consumer warp; a gathering thread arrives GW_GATHER_LAG stages
 * behind the newest it issued, so that many stay in flight (and for the
 * rest of a tile's stages at its end). The lag must
 * stay under GW_STAGES - 1: the producer's iteration it waits for stage it
 * - GW_STAGES to be freed, which the consumers do one iteration late
 * (after issuing it - GW_STAGES + 1, whose data the producer counts only
 * at its iteration it - GW_STAGES + 1 + lag); a lag of GW_STAGES - 1
 * deadlocks (tests/unit/test_grouped_gemm_sm90.c's pipeline model found
 * it). */
#define GW_CONSUMER_WARPS 8
#define GW_GATHER_LAG (GW_STAGES - 2)

/* Iteration `it` (every k-tile of every tile a CTA takes, counted from 0)
 * uses stage it % GW_STAGES in round it / GW_STAGES. A barrier's phase
 * completes once per round: the consumers wait on the round's parity of
 * full, the producer on the other parity of empty, so that its first round
 * finds every stage free (waiting on the parity of the phase before phase
 * 0 returns at once). */
GW_FN uint32_t gw_stage(uint32_t it)
{
	return it % GW_STAGES;
}

GW_FN uint32_t gw_round_parity(uint32_t it)
{
	return (it / GW_STAGES) & 1u;
}

/* Descriptor fields (PTX ISA, wgmma matrix descriptor). */
#define GW_DESC_ADDR_MASK 0x3ffffu
#define GW_DESC_LBO_SHIFT 16
#define GW_DESC_SBO_SHIFT 32
#define GW_DESC_SWIZZLE_128B (1ull << 62)
#define GW_A_LBO_BYTES 16u                     /* unused by swizzled K-major: "assumed 1" */
#define GW_A_SBO_BYTES ((uint32_t)GW_ATOM_BYTES)
#define GW_B_LBO_BYTES ((uint32_t)GW_B_BOX_BYTES)
#define GW_B_SBO_BYTES ((uint32_t)GW_ATOM_BYTES)

/* The 128-byte swizzle of a byte offset from a 1024-aligned base: the
 * 16-byte chunk (bits 4-6) XOR the 128-byte row within the atom (bits
 * 7-9). It is its own inverse. */
GW_FN uint32_t gw_swizzle128(uint32_t off)
{
	return off ^ (((off >> 7) & 7u) << 4);
}

/* Byte offset in an A stage of element (row, k). */
GW_FN uint32_t gw_a_offset(int row, int k)
{
	return gw_swizzle128((uint32_t)(row * GW_ROW_BYTES + k * GW_ELEM_BYTES));
}

/* Byte offset in a B stage of element (k, n), n the column within the
 * tile. */
GW_FN uint32_t gw_b_offset(int k, int n)
{
	return (uint32_t)(n / GW_BOX_N * GW_B_BOX_BYTES)
		+ gw_swizzle128((uint32_t)(k * GW_ROW_BYTES + (n % GW_BOX_N) * GW_ELEM_BYTES));
}

GW_FN uint64_t gw_desc_encode(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes)
{
	return (uint64_t)((smem_addr & GW_DESC_ADDR_MASK) >> 4)
		| ((uint64_t)((lbo_bytes & GW_DESC_ADDR_MASK) >> 4) << GW_DESC_LBO_SHIFT)
		| ((uint64_t)((sbo_bytes & GW_DESC_ADDR_MASK) >> 4) << GW_DESC_SBO_SHIFT) | GW_DESC_SWIZZLE_128B;
}

/* The A operand of k16 step kk for consumer warpgroup wg, from the A stage
 * at shared address a_stage. */
GW_FN uint64_t gw_desc_a(uint32_t a_stage, int wg, int kk)
{
	return gw_desc_encode(a_stage + (uint32_t)(wg * GW_WG_A_BYTES + kk * GW_MMA_K_A_BYTES), GW_A_LBO_BYTES,
		GW_A_SBO_BYTES);
}

/* The B operand of k16 step kk, from the B stage at b_stage. */
GW_FN uint64_t gw_desc_b(uint32_t b_stage, int kk)
{
	return gw_desc_encode(b_stage + (uint32_t)(kk * GW_MMA_K_B_BYTES), GW_B_LBO_BYTES, GW_B_SBO_BYTES);
}

/* The output element of accumulator register i of lane `lane` in warp q
 * of a consumer warpgroup: row in 0..63, column in 0..N-1. */
GW_FN int gw_acc_row(int q, int lane, int i)
{
	return 16 * q + lane / 4 + 8 * ((i / 2) % 2);
}

GW_FN int gw_acc_col(int lane, int i)
{
	return 8 * (i / 4) + 2 * (lane % 4) + i % 2;
}

/* The register of 8-column block j holding row 8 half + lane / 4 and
 * column 2 (lane % 4) + v of the block (half, v in 0..1). */
GW_FN int gw_acc_reg(int j, int half, int v)
{
	return 4 * j + 2 * half + v;
}

/* SwiGLU's epilogue: the tile's 8-column blocks alternate gates (2j) and
 * the ups of the same activation columns (2j + 1), as W1's columns do
 * (GG_GLU_BLOCK); activation column gw_glu_col(col0, lane, j) + v of the
 * [rows, n / 2] output is silu(gate) * up of registers gw_acc_reg(2j,
 * half, v) and gw_acc_reg(2j + 1, half, v). */
GW_FN int gw_glu_col(int col0, int lane, int j)
{
	return col0 / 2 + 8 * j + 2 * (lane % 4);
}

/* ---- the tile schedule ------------------------------------------------------------
 * A group of `rows` rows has ceil(rows / GW_BM) m-tiles times
 * gw_n_tiles(n) n-tiles; the flat schedule lists groups in order, each
 * m-tile major (the n-tiles of one m-tile are consecutive, so the CTAs
 * running at once share A rows and sweep B_g). Every n-tile is GW_BN wide
 * but the last, which is n - GW_BN (n_tiles - 1) (GW_BN_NARROW when n is
 * an odd multiple of 128). The CTAs of the persistent grid take tiles in
 * this order from a counter, each the next when its producer is ready for
 * it: a fixed stride (CTA c taking tiles c, c + grid, ...) would hand every
 * narrow tile to the same CTAs whenever the grid is a multiple of the
 * n-tiles (132 SMs, 6 n-tiles at n = 1408), which would idle half their
 * time, and the counter also evens out everything else. GW_TILE_DONE in a
 * stage's tile slot ends the consumers. */
#define GW_TILE_DONE (-1)

GW_FN int gw_total_tiles(const int32_t *tile_off, int groups)
{
	return tile_off[groups];
}
GW_FN int gw_n_tiles(int n)
{
	return (n + GW_BN - 1) / GW_BN;
}

GW_FN int gw_m_tiles(int64_t rows)
{
	return (int)((rows + GW_BM - 1) / GW_BM);
}

GW_FN int gw_tile_width(int n, int n_tile)
{
	const int left = n - n_tile * GW_BN;
	return left < GW_BN ? left : GW_BN;
}

/* The group of flat tile `tile`: the largest g with tile_off[g] <= tile
 * (empty groups share their successor's offset and are passed over);
 * tile < tile_off[groups] makes the range non-empty. */
GW_FN int gw_find_group(const int32_t *tile_off, int groups, int tile)
{
	int lo = 0, hi = groups - 1;
	while (lo < hi) {
		const int mid = (lo + hi + 1) >> 1;
		if (tile_off[mid] <= tile)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

/* One tile of the schedule: its group, first row and the group's end
 * (rows row0 .. min(row0 + GW_BM, row_end) - 1 of the sorted list), first
 * column and width. */
typedef struct gw_tile {
	int group;
	int64_t row0, row_end;
	int col0, width;
} gw_tile;

GW_FN gw_tile gw_tile_at(const int32_t *tile_off, const int64_t *group_off, int groups, int n, int tile)
{
	gw_tile t;
	const int n_tiles = gw_n_tiles(n);
	t.group = gw_find_group(tile_off, groups, tile);
	const int local = tile - tile_off[t.group];
	const int m_tile = local / n_tiles, n_tile = local % n_tiles;
	t.row0 = group_off[t.group] + (int64_t)m_tile * GW_BM;
	t.row_end = group_off[t.group + 1];
	t.col0 = n_tile * GW_BN;
	t.width = gw_tile_width(n, n_tile);
	return t;
}

/* The gathering producer's share of an A stage: thread t stores chunk
 * gw_gather_chunk(t) of rows gw_gather_row(t, i), i < GW_GATHER_ROWS. */
GW_FN int gw_gather_chunk(int t)
{
	return t % GW_ROW_CHUNKS;
}

GW_FN int gw_gather_row(int t, int i)
{
	return t / GW_ROW_CHUNKS + i * GW_GATHER_ROW_STEP;
}

#endif
