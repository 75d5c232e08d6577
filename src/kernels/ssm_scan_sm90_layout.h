/* The index arithmetic of ssm_scan's warpgroup kernel (ssm_scan_sm90.cuh):
 * where each fp16 tile element sits in shared memory, the wgmma
 * descriptors that read the tiles, which accumulator register holds which
 * (row, column), how accumulators become the A operand of the next wgmma,
 * and the lane addresses of the ldmatrix / stmatrix that move fragments
 * between registers and tiles. Plain C with no CUDA types, so that
 * tests/unit/test_ssm_scan_sm90.c runs the same functions on the host: it
 * emulates one chunk's five products through them (the tiles stored by the
 * kernel's loaders, the descriptors read the way the PTX ISA's canonical
 * layouts say, the register maps) against plain products.
 *
 * Tiles. Every tile has SW_Q = 64 rows (steps j or i of a chunk, or p for
 * the state) of 2-byte elements, stored as boxes of 64 columns: box b of
 * a tile holds columns 64 b .. 64 b + 63 at b * SW_BOX_BYTES, its row r at
 * r * 128 in the 128-byte swizzle (16-byte chunk c at chunk c ^ (r % 8)).
 * That is grouped_gemm_sm90_layout.h's B stage (gw_b_offset, a [64 k][N]
 * slice in 64-column boxes), so one function places every tile:
 *   C [i][n] and B [j][n]   (2 boxes): read K-major (k = n) as S = C B^T's
 *                            A and B, C also as C g_in's A; B read MN-major
 *                            (k = j, n = n) as the state update's B;
 *   g16 [p][n]              (2 boxes): C g_in's B, K-major (k = n);
 *   x [j][p]                (1 box):   M x's B, MN-major (k = j, n = p), and
 *                            through ldmatrix.trans the state's A (x^T).
 * Tile bases are 1024-aligned (the swizzle's period), so the descriptors'
 * base offset is 0 as in the grouped GEMM.
 *
 * Descriptors (128-byte swizzle; the fields as grouped_gemm_sm90_layout.h
 * encodes them):
 *   K-major, K = 128 (2 boxes): k16 step kk starts in box kk / 4, 32 (kk %
 *     4) bytes into its first row; SBO = 1024 (8-row groups), LBO unused.
 *   MN-major: k16 step kk starts 16 kk rows (2048 kk bytes) in; LBO = one
 *     box (the step between 64-column groups along n), SBO = 1024 (8 k
 *     rows): gw_desc_b.
 *
 * Registers, warp q (0..3) of the warpgroup, lane l, g = l / 4, t = l % 4:
 *   accumulators (m64nN, f32): register i at row gw_acc_row(q, l, i) = 16 q
 *     + g + 8 ((i / 2) % 2), column gw_acc_col(l, i) = 8 (i / 4) + 2 t + i %
 *     2 (grouped_gemm_sm90_layout.h);
 *   A from registers (m64nNk16, f16): 4 registers of two halves a k16 step;
 *     register r half h is row 16 q + g + 8 (r % 2), column k 16 kk + 2 t +
 *     8 (r / 2) + h: mma.sync's m16n8k16 A fragment for the warp's 16 rows
 *     (the PTX ISA's wgmma A register fragment figure). So k-step kk of an
 *     A operand taken from m64n64 accumulators packs registers 8 kk + 2 r
 *     and 8 kk + 2 r + 1 into register r (sw_acc_of_a).
 */
#ifndef MB_KERNELS_SSM_SCAN_SM90_LAYOUT_H
#define MB_KERNELS_SSM_SCAN_SM90_LAYOUT_H

#include <stdint.h>

#include "kernels/grouped_gemm_sm90_layout.h"

#define SW_Q 64            /* steps a chunk: the tiles' rows */
#define SW_P 64            /* x's columns (P at most) */
#define SW_N 128           /* B's and C's columns (N at most) */
#define SW_THREADS 128     /* one warpgroup */
#define SW_WARPS 4
#define SW_BOX_COLS GW_BOX_N                     /* 64 fp16 columns: one 128-byte row */
#define SW_BOX_BYTES GW_B_BOX_BYTES              /* 8192: [64][64] fp16 */
#define SW_WIDE_BYTES (SW_N / SW_BOX_COLS * SW_BOX_BYTES)   /* C, B, g16: 16 KB */
#define SW_NARROW_BYTES (SW_P / SW_BOX_COLS * SW_BOX_BYTES) /* x: 8 KB */
#define SW_MMA_K GW_MMA_K
#define SW_K_STEPS_N (SW_N / SW_MMA_K)           /* 8: k16 steps over n */
#define SW_K_STEPS_Q (SW_Q / SW_MMA_K)           /* 4: k16 steps over a chunk's steps */
#define SW_ACC64 (SW_Q * 64 / SW_THREADS)        /* 32: f32 registers of an m64n64 result */
#define SW_ACC128 (SW_Q * SW_N / SW_THREADS)     /* 64: of the m64n128 state */
#define SW_VEC_ELEMS 8                           /* 16-byte vectors of fp16 */
#define SW_SMEM_ALIGN GW_ATOM_BYTES              /* 1024: the tiles' alignment, the swizzle's period */

/* The tiles, from the 1024-aligned base of dynamic shared memory: two
 * buffers (this chunk and the next) of C, B and x, and the entering state. */
#define SW_OFF_C(buf) ((uint32_t)(buf) * SW_WIDE_BYTES)
#define SW_OFF_B(buf) (2u * SW_WIDE_BYTES + (uint32_t)(buf) * SW_WIDE_BYTES)
#define SW_OFF_X(buf) (4u * SW_WIDE_BYTES + (uint32_t)(buf) * SW_NARROW_BYTES)
#define SW_OFF_G16 (4u * SW_WIDE_BYTES + 2u * SW_NARROW_BYTES)
#define SW_TILE_BYTES (SW_OFF_G16 + SW_WIDE_BYTES) /* 96 KB */

#if defined(__CUDACC__)
#define SW_FN static __host__ __device__ __forceinline__
#else
#define SW_FN static inline
#endif

/* Byte offset of element (row, col) in a tile (col < 128). */
SW_FN uint32_t sw_tile_offset(int row, int col)
{
	return gw_b_offset(row, col);
}

/* Where k16 step kk of a K-major operand (rows m or n, k = the tile's
 * columns, K = 128) starts, from the tile's start. */
SW_FN uint32_t sw_kmajor_step(int kk)
{
	const uint32_t box = (uint32_t)(kk / (SW_BOX_COLS / SW_MMA_K)), in_row = (uint32_t)(kk % (SW_BOX_COLS / SW_MMA_K));
	return box * SW_BOX_BYTES + in_row * GW_MMA_K_A_BYTES;
}

/* K-major operand: k16 step kk. */
SW_FN uint64_t sw_desc_kmajor(uint32_t tile, int kk)
{
	return gw_desc_encode(tile + sw_kmajor_step(kk), GW_A_LBO_BYTES, GW_A_SBO_BYTES);
}

/* Where k16 step kk of an MN-major operand (k = the tile's rows, n = its
 * columns) starts. */
SW_FN uint32_t sw_mnmajor_step(int kk)
{
	return (uint32_t)kk * GW_MMA_K_B_BYTES;
}

/* MN-major operand: k16 step kk. */
SW_FN uint64_t sw_desc_mnmajor(uint32_t tile, int kk)
{
	return gw_desc_b(tile, kk);
}

/* The descriptor of an operand `bytes` further on in shared memory: the
 * start-address field (the address / 16, the low bits) moved on, the
 * rest as it was. Equal to encoding the new address anew while that stays
 * below 2^18 (shared memory is 228 KB; the field has 14 bits) and bytes is
 * a multiple of 16 (tests/unit/test_ssm_scan_sm90.c), at one 32-bit add
 * where an encoding masks, shifts and merges: the kernel forms two
 * descriptors a CTA and moves them on for each of its 40 a chunk
 * (reports/h200 run ssm-dc: 871.4-872.2 against 878.5-879.6 us at
 * L = 16384, one H200, three passes each). */
SW_FN uint64_t sw_desc_add(uint64_t desc, uint32_t bytes)
{
	return (desc & ~(uint64_t)0xffffffffu) | (uint32_t)((uint32_t)desc + (bytes >> 4));
}

/* The accumulator register that k-step kk's A register r, half h takes
 * (an m64n64 result used as the A operand of the next product). */
SW_FN int sw_acc_of_a(int kk, int r, int h)
{
	return 8 * kk + 2 * r + h;
}

/* Row and column k of A register r half h, k-step kk, warp q, lane l. */
SW_FN int sw_a_row(int q, int lane, int r)
{
	return 16 * q + lane / 4 + 8 * (r % 2);
}

SW_FN int sw_a_col(int lane, int kk, int r, int h)
{
	return 16 * kk + 2 * (lane % 4) + 8 * (r / 2) + h;
}

/* The state's A operand, x^T (rows p, k = j), k-step kk, by
 * ldmatrix.x4.trans from the x tile [j][p]: lane l gives the address of
 * row l % 8 of matrix l / 8, which is tile row j = 16 kk + 8 ((l / 8) / 2)
 * + l % 8 at columns p = 16 q + 8 ((l / 8) % 2) .. + 7; transposed, matrix
 * m lands in register m as A's register m. */
SW_FN uint32_t sw_xt_ldsm_offset(int q, int lane, int kk)
{
	const int m = lane / 8;
	return sw_tile_offset(16 * kk + 8 * (m / 2) + lane % 8, 16 * q + 8 * (m % 2));
}

/* The same for k-step kk from k-step 0's: 16 rows on, which the swizzle
 * (a function of the row mod 8) leaves alone (the kernel's form: one
 * register a thread, not four). */
SW_FN uint32_t sw_xt_ldsm_step(int kk)
{
	return (uint32_t)(kk * SW_MMA_K * GW_ROW_BYTES);
}

/* The state (m64n128 accumulators) into g16 [p][n] by stmatrix.x4, call s
 * (0..7): matrix m holds 8-column block 2 s + m / 2, rows 8 (m % 2) .. of
 * the warp's 16; lane l gives the address of its row l % 8 of matrix
 * l / 8, and register m packs accumulators sw_stsm_acc(s, m, 0 and 1). */
SW_FN uint32_t sw_g16_stsm_offset(int q, int lane, int s)
{
	const int m = lane / 8;
	return sw_tile_offset(16 * q + 8 * (m % 2) + lane % 8, 8 * (2 * s + m / 2));
}

/* The same from call 0's: call s moves 2 s 16-byte chunks along the row,
 * which in the swizzle is an XOR of the chunk index within the box (lane
 * l's chunk 2 s + (l / 8) / 2 with 2 s even: the XOR commutes with the
 * row's), and a box on past s = 4. */
SW_FN uint32_t sw_g16_stsm_from0(uint32_t off0, int s)
{
	const int chunks = 2 * s;
	return (off0 ^ (uint32_t)(chunks % GW_ROW_CHUNKS * GW_CHUNK_BYTES)) +
		(uint32_t)(chunks / GW_ROW_CHUNKS * SW_BOX_BYTES);
}

SW_FN int sw_stsm_acc(int s, int m, int h)
{
	return gw_acc_reg(2 * s + m / 2, m % 2, h);
}

/* The loaders: 16-byte vector k of thread tid of a [64][cols_max] tile is
 * row v / (cols_max / 8), columns 8 (v % (cols_max / 8)) .. + 7, with v =
 * tid + k * SW_THREADS. */
SW_FN int sw_vec_row(int tid, int k, int cols_max)
{
	return (tid + k * SW_THREADS) / (cols_max / SW_VEC_ELEMS);
}

SW_FN int sw_vec_col(int tid, int k, int cols_max)
{
	return (tid + k * SW_THREADS) % (cols_max / SW_VEC_ELEMS) * SW_VEC_ELEMS;
}

/* Its byte offset in the tile: vector k is SW_THREADS / (cols_max / 8)
 * rows (8 or 16: whole swizzle periods) below vector 0, in the same
 * column, so offset(k) = offset(0) + k * sw_vec_step(cols_max). */
SW_FN uint32_t sw_vec_step(int cols_max)
{
	return (uint32_t)(SW_THREADS / (cols_max / SW_VEC_ELEMS) * GW_ROW_BYTES);
}

#endif
