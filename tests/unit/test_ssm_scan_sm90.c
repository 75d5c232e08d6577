/* ssm_scan's warpgroup kernel (src/kernels/ssm_scan_sm90.cuh) emulated on
 * the host through its own index arithmetic (ssm_scan_sm90_layout.h),
 * since nothing CUDA runs here. One chunk's products, each element
 * followed from where the kernel puts it to where the tensor cores read it:
 *
 *  - the loaders' 16-byte stores into the swizzled tiles (and the short
 *    form the kernel uses: one offset a thread plus a constant a vector);
 *  - the wgmma descriptors decoded from their 64 bits and read the way the
 *    PTX ISA's canonical layouts say (tests/unit/wgmma_emu.h): S = C B^T
 *    and C g_in with both operands K-major over two boxes, M x and the
 *    state with B MN-major;
 *  - the accumulator map, the A operand taken from registers (M from S's
 *    accumulators, x^T from ldmatrix.trans with its lane addresses), and
 *    the state written back to g16 by stmatrix;
 * against plain products of small integers (exact in fp32). The mask and
 * the decays are integer stand-ins here: what is checked is that each
 * register meets the (row, column) the math means, not the math itself
 * (test_ssm_scan_emu.cpp and the reference check that on the mma.sync
 * kernel, whose math this one shares). */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernels/ssm_scan_sm90_layout.h"
#include "testutil.h"
#include "wgmma_emu.h"

#define WARPS SW_WARPS
#define LANES 32

static uint64_t rng_state;

static int rng_small(void) /* in [-3, 3] */
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (int)((z ^ (z >> 31)) % 7) - 3;
}

/* Shared memory as one value per 2-byte element: index = byte address / 2. */
static float smem[SW_TILE_BYTES / 2];
static int written[SW_TILE_BYTES / 2];

static float ld(uint32_t addr)
{
	return smem[addr / 2];
}

static void st(uint32_t addr, float v)
{
	smem[addr / 2] = v;
	written[addr / 2]++;
}

/* The logical chunk. */
static float cm[SW_Q][SW_N], bm[SW_Q][SW_N], xm[SW_Q][SW_P], gm[SW_P][SW_N], state[SW_P][SW_N];
static float coef_row[SW_Q], coef_w[SW_Q], decay;

static float mask_l(int i, int j) /* the integer stand-in for L_ij */
{
	return j < i ? (float)((i - j) % 3 + 1) : j == i ? 2.0f : 0.0f;
}

/* ---- the layout's own facts ------------------------------------------------------ */

static void tile_placement(void)
{
	/* every tile base 1024-aligned, and any shared address under the descriptors'
	 * 18-bit address field */
	const uint32_t bases[] = {SW_OFF_C(0), SW_OFF_C(1), SW_OFF_B(0), SW_OFF_B(1), SW_OFF_X(0), SW_OFF_X(1), SW_OFF_G16};
	for (size_t t = 0; t < sizeof(bases) / sizeof(bases[0]); t++)
		CHECK(bases[t] % 1024 == 0);
	CHECK(228u * 1024 < (1u << 18)); /* any shared address of a CTA */
	/* sw_tile_offset is a permutation of a tile's elements, 8 columns of a
	 * 16-byte chunk contiguous */
	static int seen[SW_WIDE_BYTES / 2];
	memset(seen, 0, sizeof(seen));
	for (int r = 0; r < SW_Q; r++)
		for (int c = 0; c < SW_N; c++) {
			const uint32_t off = sw_tile_offset(r, c);
			CHECK(off < SW_WIDE_BYTES && off % 2 == 0);
			if (off < SW_WIDE_BYTES)
				seen[off / 2]++;
			if (c % 8)
				CHECK(off == sw_tile_offset(r, c - c % 8) + (uint32_t)(c % 8) * 2u);
		}
	int once = 0;
	for (int e = 0; e < SW_WIDE_BYTES / 2; e++)
		once += seen[e] == 1;
	CHECK(once == SW_WIDE_BYTES / 2);
	/* the x tile (64 columns) is the first box alone */
	for (int r = 0; r < SW_Q; r++)
		for (int c = 0; c < SW_P; c++)
			CHECK(sw_tile_offset(r, c) < SW_NARROW_BYTES);
}

static void descriptor_fields(void)
{
	for (int kk = 0; kk < SW_K_STEPS_N; kk++) {
		const desc_fields f = desc_decode(sw_desc_kmajor(SW_OFF_C(1), kk));
		CHECK(f.layout == 1 && f.base_offset == 0 && f.sbo == 1024);
		CHECK(f.start == SW_OFF_C(1) + (uint32_t)(kk / 4 * SW_BOX_BYTES + kk % 4 * 32));
		CHECK(((f.start >> 7) & 7) == 0);
	}
	for (int kk = 0; kk < SW_K_STEPS_Q; kk++) {
		const desc_fields f = desc_decode(sw_desc_mnmajor(SW_OFF_B(1), kk));
		CHECK(f.layout == 1 && f.base_offset == 0 && f.sbo == 1024 && f.lbo == SW_BOX_BYTES);
		CHECK(f.start == SW_OFF_B(1) + (uint32_t)(kk * 2048) && ((f.start >> 7) & 7) == 0);
	}
	/* moving a CTA's two descriptors on (sw_desc_add) encodes what
	 * encoding each operand's address anew does, for every tile, step and
	 * 1024-aligned base two CTAs an SM can have */
	const uint32_t tiles[] = {SW_OFF_C(0), SW_OFF_C(1), SW_OFF_B(0), SW_OFF_B(1), SW_OFF_X(0), SW_OFF_X(1), SW_OFF_G16};
	int moved = 0;
	for (uint32_t base = 0; base + SW_TILE_BYTES <= 228u * 1024u; base += SW_SMEM_ALIGN) {
		const uint64_t dk = sw_desc_kmajor(base, 0), dm = sw_desc_mnmajor(base, 0);
		for (size_t t = 0; t < sizeof(tiles) / sizeof(tiles[0]); t++) {
			for (int kk = 0; kk < SW_K_STEPS_N; kk++)
				moved += sw_desc_add(dk, tiles[t] + sw_kmajor_step(kk)) == sw_desc_kmajor(base + tiles[t], kk);
			for (int kk = 0; kk < SW_K_STEPS_Q; kk++)
				moved += sw_desc_add(dm, tiles[t] + sw_mnmajor_step(kk)) == sw_desc_mnmajor(base + tiles[t], kk);
		}
	}
	CHECK(moved == ((228 * 1024 - SW_TILE_BYTES) / SW_SMEM_ALIGN + 1) * 7 * (SW_K_STEPS_N + SW_K_STEPS_Q));
}

/* The A-from-registers map is a bijection onto each k-step's 64 x 16, and
 * taking it from m64n64 accumulators puts every element where it was. */
static void a_fragment_map(void)
{
	for (int kk = 0; kk < SW_K_STEPS_Q; kk++) {
		static int seen[SW_Q][SW_MMA_K];
		memset(seen, 0, sizeof(seen));
		for (int q = 0; q < WARPS; q++)
			for (int lane = 0; lane < LANES; lane++)
				for (int r = 0; r < 4; r++)
					for (int h = 0; h < 2; h++) {
						const int row = sw_a_row(q, lane, r), col = sw_a_col(lane, kk, r, h);
						const int a = sw_acc_of_a(kk, r, h);
						CHECK(row >= 0 && row < SW_Q && col >= 16 * kk && col < 16 * kk + 16);
						CHECK(a >= 0 && a < SW_ACC64);
						CHECK(gw_acc_row(q, lane, a) == row && gw_acc_col(lane, a) == col);
						if (row >= 0 && row < SW_Q && col >= 16 * kk && col < 16 * kk + 16)
							seen[row][col - 16 * kk]++;
					}
		int once = 0;
		for (int r = 0; r < SW_Q; r++)
			for (int c = 0; c < SW_MMA_K; c++)
				once += seen[r][c] == 1;
		CHECK_MSG(once == SW_Q * SW_MMA_K, "k-step %d: %d of %d held once", kk, once, SW_Q * SW_MMA_K);
	}
}

/* ---- the chunk, emulated ----------------------------------------------------------- */

/* The loaders: fetch_rows' vectors stored by sw_stage (its short form
 * checked against the plain one). */
static void load_tile(uint32_t base, const float *src, int cols_max, int vecs)
{
	for (int tid = 0; tid < SW_THREADS; tid++) {
		const uint32_t off0 = sw_tile_offset(sw_vec_row(tid, 0, cols_max), sw_vec_col(tid, 0, cols_max));
		for (int k = 0; k < vecs; k++) {
			const int row = sw_vec_row(tid, k, cols_max), col = sw_vec_col(tid, k, cols_max);
			const uint32_t off = off0 + (uint32_t)k * sw_vec_step(cols_max);
			CHECK(off == sw_tile_offset(row, col) && col == sw_vec_col(tid, 0, cols_max));
			for (int e = 0; e < SW_VEC_ELEMS; e++)
				st(base + off + 2u * (uint32_t)e, src[row * cols_max + col + e]);
		}
	}
}

/* Accumulators: acc[q][lane][i] of a 64 x n result d. */
static void to_registers(float (*acc)[LANES][SW_ACC128], const float *d, int n)
{
	for (int q = 0; q < WARPS; q++)
		for (int lane = 0; lane < LANES; lane++)
			for (int i = 0; i < SW_Q * n / SW_THREADS; i++)
				acc[q][lane][i] = d[gw_acc_row(q, lane, i) * n + gw_acc_col(lane, i)];
}

static void from_registers(float *d, float (*acc)[LANES][SW_ACC128], int n)
{
	for (int q = 0; q < WARPS; q++)
		for (int lane = 0; lane < LANES; lane++)
			for (int i = 0; i < SW_Q * n / SW_THREADS; i++)
				d[gw_acc_row(q, lane, i) * n + gw_acc_col(lane, i)] = acc[q][lane][i];
}

/* d[64][n] += A B over 16 ksteps, A K-major through descriptors (or from
 * a_regs when given), B K-major ([n][k]) or MN-major ([k][n]). */
typedef uint64_t (*desc_fn)(uint32_t tile, int kk);

static void wgmma(float *d, int n, int ksteps, uint32_t a_tile, float (*a_regs)[LANES][SW_K_STEPS_Q][4][2],
	uint32_t b_tile, bool b_mn_major)
{
	for (int kk = 0; kk < ksteps; kk++) {
		static float a[SW_Q][SW_MMA_K];
		if (a_regs) {
			for (int q = 0; q < WARPS; q++)
				for (int lane = 0; lane < LANES; lane++)
					for (int r = 0; r < 4; r++)
						for (int h = 0; h < 2; h++)
							a[sw_a_row(q, lane, r)][sw_a_col(lane, kk, r, h) - 16 * kk] =
								a_regs[q][lane][kk][r][h];
		} else {
			for (int m = 0; m < SW_Q; m++)
				for (int k = 0; k < SW_MMA_K; k++)
					a[m][k] = ld(kmajor_address(sw_desc_kmajor(a_tile, kk), m, k));
		}
		for (int m = 0; m < SW_Q; m++)
			for (int j = 0; j < n; j++) {
				float sum = 0.0f;
				for (int k = 0; k < SW_MMA_K; k++) {
					const float b = b_mn_major ? ld(mnmajor_address(sw_desc_mnmajor(b_tile, kk), k, j))
								   : ld(kmajor_address(sw_desc_kmajor(b_tile, kk), j, k));
					sum += a[m][k] * b;
				}
				d[m * n + j] += sum;
			}
	}
}

/* x^T's A fragments as the kernel takes them: ldmatrix.x4.trans from the
 * lanes' addresses (matrix m's row r from lane 8 m + r; transposed, lane
 * l's register m holds rows 2 (l % 4) and + 1 at column l / 4), times
 * coef_w[j]. */
static void xt_fragments(float (*xa)[LANES][SW_K_STEPS_Q][4][2], uint32_t x_tile)
{
	for (int q = 0; q < WARPS; q++)
		for (int kk = 0; kk < SW_K_STEPS_Q; kk++) {
			uint32_t addr[LANES];
			for (int lane = 0; lane < LANES; lane++) {
				addr[lane] = x_tile + sw_xt_ldsm_offset(q, lane, 0) + sw_xt_ldsm_step(kk);
				CHECK(addr[lane] == x_tile + sw_xt_ldsm_offset(q, lane, kk) && addr[lane] % 16 == 0);
			}
			for (int lane = 0; lane < LANES; lane++)
				for (int m = 0; m < 4; m++)
					for (int h = 0; h < 2; h++) {
						const float v = ld(addr[8 * m + 2 * (lane % 4) + h] + 2u * (uint32_t)(lane / 4));
						const int j = sw_a_col(lane, kk, m, h);
						xa[q][lane][kk][m][h] = v * coef_w[j];
					}
		}
}

/* The state into g16 by stmatrix.x4 (matrix m's row r at lane 8 m + r's
 * address; lane l's register m gives row l / 4, columns 2 (l % 4) and
 * + 1). */
static void store_g16(uint32_t g16, float (*acc)[LANES][SW_ACC128])
{
	for (int q = 0; q < WARPS; q++)
		for (int s = 0; s < SW_N / 16; s++) {
			uint32_t addr[LANES];
			for (int lane = 0; lane < LANES; lane++) {
				addr[lane] = g16 + sw_g16_stsm_from0(sw_g16_stsm_offset(q, lane, 0), s);
				CHECK(addr[lane] == g16 + sw_g16_stsm_offset(q, lane, s) && addr[lane] % 16 == 0);
			}
			for (int lane = 0; lane < LANES; lane++)
				for (int m = 0; m < 4; m++)
					for (int h = 0; h < 2; h++)
						st(addr[8 * m + lane / 4] + 2u * (uint32_t)(2 * (lane % 4) + h),
							acc[q][lane][sw_stsm_acc(s, m, h)]);
		}
}

static int mismatches(const float *got, const float *want, int n)
{
	int bad = 0;
	for (int e = 0; e < n; e++)
		bad += got[e] != want[e];
	return bad;
}

static void chunk_case(int seed)
{
	static float acc[WARPS][LANES][SW_ACC128], ma[WARPS][LANES][SW_K_STEPS_Q][4][2],
		xa[WARPS][LANES][SW_K_STEPS_Q][4][2];
	static float s_d[SW_Q * 64], y_d[SW_Q * 64], st_d[SW_P * SW_N], want[SW_P * SW_N];
	const int buf = seed % 2;

	rng_state = (uint64_t)seed;
	memset(smem, 0, sizeof(smem));
	memset(written, 0, sizeof(written));
	for (int r = 0; r < SW_Q; r++) {
		for (int c = 0; c < SW_N; c++) {
			cm[r][c] = (float)rng_small();
			bm[r][c] = (float)rng_small();
		}
		for (int c = 0; c < SW_P; c++)
			xm[r][c] = (float)rng_small();
		coef_row[r] = (float)rng_small();
		coef_w[r] = (float)rng_small();
	}
	for (int p = 0; p < SW_P; p++)
		for (int c = 0; c < SW_N; c++) {
			gm[p][c] = (float)rng_small();
			state[p][c] = (float)rng_small();
		}
	decay = 2.0f;

	/* the tiles: loaders for x, B, C; g16 by stmatrix from g's registers */
	load_tile(SW_OFF_C(buf), &cm[0][0], SW_N, SW_Q * SW_N / SW_VEC_ELEMS / SW_THREADS);
	load_tile(SW_OFF_B(buf), &bm[0][0], SW_N, SW_Q * SW_N / SW_VEC_ELEMS / SW_THREADS);
	load_tile(SW_OFF_X(buf), &xm[0][0], SW_P, SW_Q * SW_P / SW_VEC_ELEMS / SW_THREADS);
	to_registers(acc, &gm[0][0], SW_N);
	store_g16(SW_OFF_G16, acc);
	int once = 0;
	for (uint32_t e = 0; e < SW_TILE_BYTES / 2; e++)
		once += written[e] == 1;
	CHECK_MSG(once == (int)(3 * SW_WIDE_BYTES / 2 + SW_NARROW_BYTES / 2), "seed %d: %d elements written once", seed, once);
	for (int p = 0; p < SW_P; p++)
		for (int c = 0; c < SW_N; c++)
			CHECK(ld(SW_OFF_G16 + sw_tile_offset(p, c)) == gm[p][c]);

	/* 1: S = C B^T, Y = C g^T */
	memset(s_d, 0, sizeof(s_d));
	memset(y_d, 0, sizeof(y_d));
	wgmma(s_d, 64, SW_K_STEPS_N, SW_OFF_C(buf), NULL, SW_OFF_B(buf), false);
	wgmma(y_d, 64, SW_K_STEPS_N, SW_OFF_C(buf), NULL, SW_OFF_G16, false);
	int bad_s = 0, bad_y = 0;
	for (int i = 0; i < SW_Q; i++)
		for (int j = 0; j < 64; j++) {
			float s = 0.0f, y = 0.0f;
			for (int c = 0; c < SW_N; c++) {
				s += cm[i][c] * bm[j][c];
				y += cm[i][c] * gm[j][c];
			}
			bad_s += s_d[i * 64 + j] != s;
			bad_y += y_d[i * 64 + j] != y;
		}
	CHECK_MSG(bad_s == 0 && bad_y == 0, "seed %d: C B^T %d, C g %d elements wrong", seed, bad_s, bad_y);

	/* 2: M = S o L from S's registers into A fragments; Y's rows scaled */
	to_registers(acc, s_d, 64);
	for (int q = 0; q < WARPS; q++)
		for (int lane = 0; lane < LANES; lane++)
			for (int kk = 0; kk < SW_K_STEPS_Q; kk++)
				for (int r = 0; r < 4; r++)
					for (int h = 0; h < 2; h++) {
						const int a = sw_acc_of_a(kk, r, h);
						ma[q][lane][kk][r][h] =
							acc[q][lane][a] * mask_l(gw_acc_row(q, lane, a), gw_acc_col(lane, a));
					}
	to_registers(acc, y_d, 64);
	for (int q = 0; q < WARPS; q++)
		for (int lane = 0; lane < LANES; lane++)
			for (int i = 0; i < SW_ACC64; i++)
				acc[q][lane][i] *= coef_row[gw_acc_row(q, lane, i)];
	from_registers(y_d, acc, 64);

	/* 3: Y += M x (A from registers, x MN-major) */
	wgmma(y_d, 64, SW_K_STEPS_Q, 0, ma, SW_OFF_X(buf), true);
	int bad = 0;
	for (int i = 0; i < SW_Q; i++)
		for (int p = 0; p < SW_P; p++) {
			float inter = 0.0f, intra = 0.0f;
			for (int c = 0; c < SW_N; c++)
				inter += cm[i][c] * gm[p][c];
			for (int j = 0; j < SW_Q; j++) {
				float s = 0.0f;
				for (int c = 0; c < SW_N; c++)
					s += cm[i][c] * bm[j][c];
				intra += s * mask_l(i, j) * xm[j][p];
			}
			bad += y_d[i * 64 + p] != coef_row[i] * inter + intra;
		}
	CHECK_MSG(bad == 0, "seed %d: y %d elements wrong", seed, bad);

	/* 3: state = decay state + (w x)^T B (A = x^T from ldmatrix.trans, B
	 * MN-major), then into g16 */
	to_registers(acc, &state[0][0], SW_N);
	for (int q = 0; q < WARPS; q++)
		for (int lane = 0; lane < LANES; lane++)
			for (int i = 0; i < SW_ACC128; i++)
				acc[q][lane][i] *= decay;
	from_registers(st_d, acc, SW_N);
	xt_fragments(xa, SW_OFF_X(buf));
	wgmma(st_d, SW_N, SW_K_STEPS_Q, 0, xa, SW_OFF_B(buf), true);
	for (int p = 0; p < SW_P; p++)
		for (int c = 0; c < SW_N; c++) {
			float sum = decay * state[p][c];
			for (int j = 0; j < SW_Q; j++)
				sum += coef_w[j] * xm[j][p] * bm[j][c];
			want[p * SW_N + c] = sum;
		}
	CHECK_MSG(mismatches(st_d, want, SW_P * SW_N) == 0, "seed %d: state %d elements wrong", seed,
		mismatches(st_d, want, SW_P * SW_N));
	to_registers(acc, st_d, SW_N);
	memset(written, 0, sizeof(written));
	store_g16(SW_OFF_G16, acc);
	bad = 0;
	for (int p = 0; p < SW_P; p++)
		for (int c = 0; c < SW_N; c++)
			bad += ld(SW_OFF_G16 + sw_tile_offset(p, c)) != want[p * SW_N + c] ||
				written[(SW_OFF_G16 + sw_tile_offset(p, c)) / 2] != 1;
	CHECK_MSG(bad == 0, "seed %d: g16 %d elements wrong", seed, bad);
}

int main(void)
{
	tile_placement();
	descriptor_fields();
	a_fragment_map();
	for (int seed = 1; seed <= 4; seed++)
		chunk_case(seed);
	return mb_test_finish("test_ssm_scan_sm90");
}
