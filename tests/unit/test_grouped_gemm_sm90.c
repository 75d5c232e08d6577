/* The sm_90a grouped GEMM (src/kernels/grouped_gemm_sm90.cuh) emulated on
 * the host through its own index arithmetic (grouped_gemm_sm90_layout.h),
 * since nothing CUDA runs here:
 *
 *  - shared memory: the gathering producer's 16-byte stores, and the tensor
 *    copies of A and B modelled as the 128-byte swizzle writes them (row r
 *    of a box at r * 128, its 16-byte chunk c at chunk c ^ (r % 8));
 *  - the tensor cores: each wgmma descriptor decoded from its 64 bits and
 *    read the way the PTX ISA's canonical layouts say (K-major A: rows 128
 *    bytes apart, 8-row groups SBO apart; MN-major B: 64-column blocks LBO
 *    apart, 8-k-row groups SBO apart; the swizzle on the address bits);
 *  - the epilogue through the accumulator register map;
 *  - the schedule: jagged groups with empty ones, tiles taken in any order
 *    (the kernel's CTAs take them from a counter), narrow last tiles, and
 *    the balance of that greedy taking at the shape of record;
 *  - the pipeline: the full/empty mbarrier protocol of producer and
 *    consumers, the tile slot beside each stage and the end mark, with
 *    asynchronous copies and MMAs completing in random order, for
 *    deadlock, for a stage refilled while read, for a stage read before
 *    its data landed, and for a tile slot read stale.
 * Every GEMM result is compared with a plain product of the same small
 * integers (exact in fp32 and double), every output element must be
 * written once and rows past a group's end never. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/grouped_gemm_sm90_layout.h"
#include "testutil.h"
#include "wgmma_emu.h"

/* ---- a small generator ------------------------------------------------------------ */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int rng_int(int lo, int hi) /* [lo, hi] */
{
	return lo + (int)(rng_next() % (uint64_t)(hi - lo + 1));
}

static void descriptors(void)
{
	/* field placement: every stage address of the kernel's layout */
	for (int s = 0; s < GW_STAGES; s++) {
		const uint32_t a = (uint32_t)(s * GW_A_STAGE_BYTES), b = (uint32_t)(GW_STAGES * GW_A_STAGE_BYTES
			+ s * GW_B_STAGE_BYTES);
		for (int kk = 0; kk < GW_BK / GW_MMA_K; kk++)
			for (int wg = 0; wg < 2; wg++) {
				const desc_fields fa = desc_decode(gw_desc_a(a, wg, kk)), fb = desc_decode(gw_desc_b(b, kk));
				CHECK(fa.layout == 1 && fb.layout == 1 && fa.base_offset == 0 && fb.base_offset == 0);
				CHECK(fa.start == a + (uint32_t)(wg * 8192 + kk * 32) && fa.sbo == 1024 && fa.lbo == 16);
				CHECK(fb.start == b + (uint32_t)(kk * 2048) && fb.sbo == 1024 && fb.lbo == 8192);
				/* base offset 0 needs the start's bits 7-9 clear */
				CHECK(((fa.start >> 7) & 7) == 0 && ((fb.start >> 7) & 7) == 0);
			}
	}
	/* the largest shared address fits the 18 bits the field keeps */
	CHECK((uint64_t)GW_STAGES * (GW_A_STAGE_BYTES + GW_B_STAGE_BYTES) + 1024 < (1u << 18));
}

/* The accumulator map is a bijection from (warp, lane, register) onto the
 * warpgroup's 64 x N result, and gw_acc_reg names the register of (block,
 * half, v). */
static void accumulator_map(void)
{
	for (int width = GW_BN_NARROW; width <= GW_BN; width += GW_BN_NARROW) {
		static int seen[GW_WG_M][GW_BN];
		memset(seen, 0, sizeof(seen));
		for (int q = 0; q < 4; q++)
			for (int lane = 0; lane < 32; lane++)
				for (int i = 0; i < width / 2; i++) {
					const int r = gw_acc_row(q, lane, i), c = gw_acc_col(lane, i);
					if (r >= 0 && r < GW_WG_M && c >= 0 && c < width)
						seen[r][c]++;
					const int j = i / 4, half = (i / 2) % 2, v = i % 2;
					CHECK(gw_acc_reg(j, half, v) == i);
					CHECK(r == 16 * q + 8 * half + lane / 4 && c == 8 * j + 2 * (lane % 4) + v);
				}
		int once = 0;
		for (int r = 0; r < GW_WG_M; r++)
			for (int c = 0; c < width; c++)
				once += seen[r][c] == 1;
		CHECK_MSG(once == GW_WG_M * width, "width %d: %d of %d elements held exactly once", width, once,
			GW_WG_M * width);
	}
}

/* The gathering producers' chunks cover an A stage exactly once, and
 * gw_a_offset is a permutation of the stage's 16-byte chunks. */
static void gather_cover(void)
{
	static int seen[GW_A_STAGE_BYTES / GW_CHUNK_BYTES];
	memset(seen, 0, sizeof(seen));
	for (int t = 0; t < GW_PRODUCERS; t++)
		for (int i = 0; i < GW_GATHER_ROWS; i++) {
			const uint32_t off = gw_a_offset(gw_gather_row(t, i), gw_gather_chunk(t) * GW_CHUNK_ELEMS);
			CHECK(off % GW_CHUNK_BYTES == 0 && off < GW_A_STAGE_BYTES);
			if (off < GW_A_STAGE_BYTES)
				seen[off / GW_CHUNK_BYTES]++;
		}
	int once = 0;
	for (int c = 0; c < GW_A_STAGE_BYTES / GW_CHUNK_BYTES; c++)
		once += seen[c] == 1;
	CHECK(once == GW_A_STAGE_BYTES / GW_CHUNK_BYTES);
}

/* ---- the whole GEMM, emulated ---------------------------------------------------- */

enum { EPI_RELU2, EPI_WEIGHTED, EPI_SWIGLU };

/* One problem: groups of jagged sizes over a sorted list of rows. */
typedef struct problem {
	int groups, n, kd, k_top, tokens;
	int64_t rows;
	int64_t *group_off;  /* [groups + 1] */
	int32_t *tile_off;   /* [groups + 1] */
	int32_t *pair;       /* [rows]: a permutation of 0 .. rows-1 */
	float *a;            /* GATHER: x [tokens, kd]; plain: [rows, kd] */
	float *b;            /* [groups * kd, n] */
	float *weight;       /* [rows] by pair */
} problem;

static void problem_free(problem *p)
{
	free(p->group_off);
	free(p->tile_off);
	free(p->pair);
	free(p->a);
	free(p->b);
	free(p->weight);
}

/* Sizes: some groups empty, some under a tile, some several tiles. The
 * tile offsets are the sort scan's (src/kernels/moe_ffn.cu): m-tiles of
 * the group times n-tiles. */
static void problem_make(problem *p, int groups, int n, int kd, int k_top, bool gather)
{
	memset(p, 0, sizeof(*p));
	p->groups = groups;
	p->n = n;
	p->kd = kd;
	p->k_top = k_top;
	p->group_off = calloc((size_t)groups + 1, sizeof(int64_t));
	p->tile_off = calloc((size_t)groups + 1, sizeof(int32_t));
	for (int g = 0; g < groups; g++) {
		const int kind = rng_int(0, 3);
		const int size = kind == 0 ? 0 : kind == 1 ? rng_int(1, GW_BM - 1) : rng_int(GW_BM, 3 * GW_BM + 17);
		p->group_off[g + 1] = p->group_off[g] + size;
		p->tile_off[g + 1] = p->tile_off[g] + gw_m_tiles(size) * gw_n_tiles(n);
	}
	p->rows = p->group_off[groups];
	/* rows = tokens * k_top, rounded up with a few extra tokens */
	p->tokens = (int)((p->rows + k_top - 1) / k_top);
	const int64_t pairs = (int64_t)p->tokens * k_top;
	p->pair = malloc((size_t)(p->rows ? p->rows : 1) * sizeof(int32_t));
	int32_t *perm = malloc((size_t)pairs * sizeof(int32_t));
	for (int64_t i = 0; i < pairs; i++)
		perm[i] = (int32_t)i;
	for (int64_t i = pairs - 1; i > 0; i--) {
		const int64_t j = (int64_t)(rng_next() % (uint64_t)(i + 1));
		const int32_t x = perm[i];
		perm[i] = perm[j];
		perm[j] = x;
	}
	memcpy(p->pair, perm, (size_t)p->rows * sizeof(int32_t));
	free(perm);
	const int64_t a_rows = gather ? p->tokens : p->rows;
	p->a = malloc((size_t)((a_rows ? a_rows : 1) * kd) * sizeof(float));
	for (int64_t i = 0; i < a_rows * kd; i++)
		p->a[i] = (float)rng_int(-2, 2);
	p->b = malloc((size_t)((int64_t)groups * kd * n) * sizeof(float));
	for (int64_t i = 0; i < (int64_t)groups * kd * n; i++)
		p->b[i] = (float)rng_int(-2, 2);
	p->weight = malloc((size_t)(pairs ? pairs : 1) * sizeof(float));
	for (int64_t i = 0; i < pairs; i++)
		p->weight[i] = (float)rng_int(1, 4) / 4;
}

/* The kernel's shared memory, as 2-byte elements held in floats: A stages,
 * then B stages (1024-aligned, from address 0). */
#define SMEM_B_BASE ((uint32_t)(GW_STAGES * GW_A_STAGE_BYTES))
#define SMEM_BYTES (GW_STAGES * (GW_A_STAGE_BYTES + GW_B_STAGE_BYTES))

static float smem[SMEM_BYTES / GW_ELEM_BYTES];

static void smem_store16(uint32_t addr, const float *src)
{
	for (int e = 0; e < GW_CHUNK_ELEMS; e++)
		smem[addr / GW_ELEM_BYTES + (uint32_t)e] = src ? src[e] : 0.0f;
}

/* A tensor copy of a [box_rows][64] box, 128-byte swizzle: row r of the
 * box to dst + r * 128, its chunk c at chunk c ^ (r % 8); src_row(r) NULL
 * outside the tensor (zero fill). */
static void tma_box(uint32_t dst, int box_rows, const float *(*src_row)(const problem *, int64_t, int64_t),
	const problem *p, int64_t row0, int64_t col0)
{
	for (int r = 0; r < box_rows; r++) {
		const float *src = src_row(p, row0 + r, col0);
		for (int c = 0; c < GW_ROW_CHUNKS; c++)
			smem_store16(dst + (uint32_t)(r * GW_ROW_BYTES + ((c ^ (r % 8)) * GW_CHUNK_BYTES)),
				src ? src + c * GW_CHUNK_ELEMS : NULL);
	}
}

static const float *a_row(const problem *p, int64_t r, int64_t col0)
{
	return r < p->rows ? p->a + r * p->kd + col0 : NULL;
}

static const float *b_row(const problem *p, int64_t r, int64_t col0)
{
	return p->b + r * p->n + col0;
}

static float relu2(float v)
{
	return v > 0 ? v * v : 0;
}

static double silu(double g)
{
	return g / (1 + exp(-g));
}

/* Runs the GEMM the kernel's way, the tiles in a random order (CTAs take
 * them from a counter in whatever order they finish): per tile and k-tile
 * the producer's stores, then the consumers' wgmma reads through the
 * descriptors; then the epilogue through the register map. out:
 * NaN-poisoned. Returns the count of element writes, or -1 when an
 * element was written twice. */
static int64_t emulate(const problem *p, bool gather, int epi, float *out, int64_t out_cols)
{
	const int total = gw_total_tiles(p->tile_off, p->groups), k_tiles = p->kd / GW_BK;
	static float acc[2][GW_WG_M][GW_BN];
	int64_t writes = 0;
	uint32_t it = 0;
	int *order = malloc((size_t)(total ? total : 1) * sizeof(int));

	for (int i = 0; i < total; i++)
		order[i] = i;
	for (int i = total - 1; i > 0; i--) {
		const int j = rng_int(0, i), x = order[i];
		order[i] = order[j];
		order[j] = x;
	}
	for (int o = 0; o < total; o++) {
		const int tile = order[o];
		const gw_tile t = gw_tile_at(p->tile_off, p->group_off, p->groups, p->n, tile);
		memset(acc, 0, sizeof(acc));
		for (int kt = 0; kt < k_tiles; kt++, it++) {
			const uint32_t s = gw_stage(it);
			const uint32_t a_stage = s * GW_A_STAGE_BYTES, b_stage = SMEM_B_BASE + s * GW_B_STAGE_BYTES;
			for (size_t i = 0; i < sizeof(smem) / sizeof(smem[0]); i++)
				smem[i] = NAN;
			if (gather) {
				for (int th = 0; th < GW_PRODUCERS; th++)
					for (int i = 0; i < GW_GATHER_ROWS; i++) {
						const int row = gw_gather_row(th, i), chunk = gw_gather_chunk(th);
						const int64_t r = t.row0 + row;
						const float *src = r < t.row_end ? p->a + (int64_t)(p->pair[r] / p->k_top) * p->kd
							+ kt * GW_BK + chunk * GW_CHUNK_ELEMS : NULL;
						smem_store16(a_stage + gw_a_offset(row, chunk * GW_CHUNK_ELEMS), src);
					}
			} else {
				tma_box(a_stage, GW_BM, a_row, p, t.row0, (int64_t)kt * GW_BK);
			}
			for (int j = 0; j < t.width / GW_BOX_N; j++)
				tma_box(b_stage + (uint32_t)(j * GW_B_BOX_BYTES), GW_BK, b_row, p,
					(int64_t)t.group * p->kd + kt * GW_BK, t.col0 + j * GW_BOX_N);
			for (int wg = 0; wg < 2; wg++)
				for (int kk = 0; kk < GW_BK / GW_MMA_K; kk++) {
					const uint64_t da = gw_desc_a(a_stage, wg, kk), db = gw_desc_b(b_stage, kk);
					for (int m = 0; m < GW_WG_M; m++)
						for (int n = 0; n < t.width; n++) {
							float sum = 0;
							for (int k = 0; k < GW_MMA_K; k++)
								sum += smem[kmajor_address(da, m, k) / GW_ELEM_BYTES]
									* smem[mnmajor_address(db, k, n) / GW_ELEM_BYTES];
							acc[wg][m][n] += sum;
						}
				}
		}
		/* the epilogue, thread by thread, register by register */
		for (int wg = 0; wg < 2; wg++)
			for (int q = 0; q < 4; q++)
				for (int lane = 0; lane < 32; lane++) {
					float d[GW_BN / 2];
					for (int i = 0; i < t.width / 2; i++)
						d[i] = acc[wg][gw_acc_row(q, lane, i)][gw_acc_col(lane, i)];
					for (int half = 0; half < 2; half++) {
						const int64_t r = t.row0 + wg * GW_WG_M + gw_acc_row(q, lane, 2 * half);
						if (r >= t.row_end)
							continue;
						for (int j = 0; j < t.width / 8; j++)
							for (int v = 0; v < 2; v++) {
								float *dst;
								float val;
								if (epi == EPI_SWIGLU) {
									if (j % 2)
										continue;
									dst = out + r * out_cols + gw_glu_col(t.col0, lane, j / 2) + v;
									val = (float)(silu(d[gw_acc_reg(j, half, v)]) * d[gw_acc_reg(j + 1, half, v)]);
								} else if (epi == EPI_RELU2) {
									dst = out + r * out_cols + t.col0 + gw_acc_col(lane, gw_acc_reg(j, half, v));
									val = relu2(d[gw_acc_reg(j, half, v)]);
								} else {
									const int32_t pr = p->pair[r];
									dst = out + (int64_t)pr * out_cols + t.col0
										+ gw_acc_col(lane, gw_acc_reg(j, half, v));
									val = d[gw_acc_reg(j, half, v)] * p->weight[pr];
								}
								if (!isnan(*dst))
									writes = INT64_MIN; /* written twice */
								*dst = val;
								writes++;
							}
					}
				}
	}
	free(order);
	return writes < 0 ? -1 : writes;
}

/* W1's SwiGLU interleave (src/reference/moe_ffn.c): activation column f's
 * gate at column (f / 8) * 16 + f % 8, its up 8 further on. */
static int glu_gate_col(int f)
{
	return f / 8 * 16 + f % 8;
}

/* The plain product, and the epilogue by its definition. */
static int64_t check_against_plain(const problem *p, bool gather, int epi, const float *out, int64_t out_cols)
{
	int64_t bad = 0;
	double *row = malloc((size_t)p->n * sizeof(double));
	for (int g = 0; g < p->groups; g++)
		for (int64_t r = p->group_off[g]; r < p->group_off[g + 1]; r++) {
			const float *x = p->a + (gather ? (int64_t)(p->pair[r] / p->k_top) : r) * p->kd;
			for (int c = 0; c < p->n; c++) {
				double s = 0;
				for (int k = 0; k < p->kd; k++)
					s += (double)x[k] * p->b[((int64_t)g * p->kd + k) * p->n + c];
				row[c] = s;
			}
			if (epi == EPI_SWIGLU) {
				for (int f = 0; f < p->n / 2; f++) {
					const double want = silu((float)row[glu_gate_col(f)]) * (float)row[glu_gate_col(f) + 8];
					bad += fabs(out[r * out_cols + f] - (float)want) > 1e-6 * (1 + fabs(want));
				}
			} else if (epi == EPI_RELU2) {
				for (int c = 0; c < p->n; c++)
					bad += out[r * out_cols + c] != relu2((float)row[c]);
			} else {
				const int32_t pr = p->pair[r];
				for (int c = 0; c < p->n; c++)
					bad += out[(int64_t)pr * out_cols + c] != (float)row[c] * p->weight[pr];
			}
		}
	free(row);
	return bad;
}

static void gemm_case(int groups, int n, int kd, int k_top, bool gather, int epi)
{
	problem p;
	problem_make(&p, groups, n, kd, k_top, gather);
	const int64_t out_cols = epi == EPI_SWIGLU ? n / 2 : n;
	const int64_t out_rows = epi == EPI_WEIGHTED ? (int64_t)p.tokens * k_top : p.rows;
	float *out = malloc((size_t)((out_rows ? out_rows : 1) * out_cols) * sizeof(float));
	for (int64_t i = 0; i < out_rows * out_cols; i++)
		out[i] = NAN;

	const int64_t writes = emulate(&p, gather, epi, out, out_cols);
	CHECK_MSG(writes == p.rows * out_cols, "groups %d n %d kd %d epi %d: %lld writes for %lld rows x %lld",
		groups, n, kd, epi, (long long)writes, (long long)p.rows, (long long)out_cols);
	const int64_t bad = check_against_plain(&p, gather, epi, out, out_cols);
	CHECK_MSG(bad == 0, "groups %d n %d kd %d gather %d epi %d: %lld elements differ from the plain product",
		groups, n, kd, gather, epi, (long long)bad);
	/* rows no group holds (the weighted output's pairs past the list) stay unwritten */
	if (epi == EPI_WEIGHTED) {
		int64_t unwritten = 0;
		for (int64_t i = 0; i < out_rows * out_cols; i++)
			unwritten += isnan(out[i]);
		CHECK(unwritten == (out_rows - p.rows) * out_cols);
	}
	free(out);
	problem_free(&p);
}

/* Every tile of a schedule lies inside one group, tiles of a group cover
 * its rows and columns once, and narrow tiles only end a row of tiles. */
static void schedule(void)
{
	for (int round = 0; round < 20; round++) {
		problem p;
		const int n = 128 * rng_int(1, 9);
		problem_make(&p, rng_int(1, 40), n, GW_BK, 2, false);
		int64_t covered = 0;
		bool ok = true;
		for (int tile = 0; tile < p.tile_off[p.groups]; tile++) {
			const gw_tile t = gw_tile_at(p.tile_off, p.group_off, p.groups, n, tile);
			ok = ok && t.row0 >= p.group_off[t.group] && t.row0 < t.row_end && t.row_end == p.group_off[t.group + 1];
			ok = ok && (t.width == GW_BN || (t.width == GW_BN_NARROW && t.col0 + t.width == n));
			ok = ok && t.col0 % GW_BN == 0 && t.col0 + t.width <= n;
			const int64_t rows = t.row_end - t.row0 < GW_BM ? t.row_end - t.row0 : GW_BM;
			covered += rows * t.width;
		}
		CHECK_MSG(ok, "round %d: a tile outside its group or a misplaced narrow tile", round);
		CHECK_MSG(covered == p.rows * n, "round %d: tiles cover %lld of %lld elements", round, (long long)covered,
			(long long)(p.rows * n));
		problem_free(&p);
	}
}

/* The CTAs taking tiles from a counter, each when it is done with the last
 * (a tile's time its width), end within one tile of the mean at the shape
 * of record: GEMM1 of moe_ffn at T = 16384 (n = 1408: 5 tiles of 256 and a
 * narrow one per m-tile), 8 experts of 4610 rows and 56 of 1097
 * (src/reference/moe_ffn.c's loads), 132 SMs. (Taking every 132nd tile
 * instead hands every narrow tile to the same 22 CTAs: 8% over.) */
static void schedule_balance(void)
{
	enum { GROUPS = 64, GRID = 132, N = 1408 };
	int64_t group_off[GROUPS + 1] = {0}, busy[GRID] = {0};
	int32_t tile_off[GROUPS + 1] = {0};
	for (int g = 0; g < GROUPS; g++) {
		const int64_t rows = g % 8 == 0 ? 4610 : 1097;
		group_off[g + 1] = group_off[g] + rows;
		tile_off[g + 1] = tile_off[g] + gw_m_tiles(rows) * gw_n_tiles(N);
	}
	int64_t sum = 0, last = 0;
	for (int tile = 0; tile < gw_total_tiles(tile_off, GROUPS); tile++) {
		int first_free = 0;
		for (int c = 1; c < GRID; c++)
			first_free = busy[c] < busy[first_free] ? c : first_free;
		const int w = gw_tile_at(tile_off, group_off, GROUPS, N, tile).width;
		busy[first_free] += w;
		sum += w;
	}
	for (int c = 0; c < GRID; c++)
		last = busy[c] > last ? busy[c] : last;
	CHECK_MSG((double)last <= (double)sum / GRID + GW_BN, "last CTA done at %lld, mean %.0f", (long long)last,
		(double)sum / GRID);
}

/* ---- the pipeline's barrier protocol, with random completion order --------------- */

/* An mbarrier: arrivals and transaction bytes pending in the current phase,
 * and the number of completed phases. */
typedef struct mbar {
	int count, pending, phases;
	int64_t tx;
} mbar;

static void mbar_init(mbar *b, int count)
{
	b->count = b->pending = count;
	b->phases = 0;
	b->tx = 0;
}

static void mbar_settle(mbar *b)
{
	if (b->pending == 0 && b->tx == 0) {
		b->phases++;
		b->pending = b->count;
	}
}

static void mbar_arrive(mbar *b, int n)
{
	b->pending -= n;
	if (b->pending < 0)
		b->pending = -1000000; /* an over-arrival: caught below */
	mbar_settle(b);
}

/* try_wait.parity: the phase of that parity before the current one is
 * complete when the current phase's parity differs. */
static bool mbar_ready(const mbar *b, uint32_t parity)
{
	return (uint32_t)(b->phases & 1) != parity;
}

/* The ops of the kernel's loops, as one list per agent. */
enum {
	OP_WAIT_EMPTY, OP_WRITE_TILE, OP_EXPECT_TX, OP_ARRIVE_EXPECT_TX, OP_TMA_A, OP_TMA_B, OP_GATHER, OP_COMMIT,
	OP_WAIT_GROUP, OP_ARRIVE_FULL, OP_WAIT_FULL, OP_READ_TILE, OP_MMA, OP_WAIT_MMA, OP_ARRIVE_EMPTY
};

typedef struct op {
	int kind;
	uint32_t stage, it, arg; /* arg: parity, bytes, a wait's count or arrivals */
} op;

typedef struct op_list {
	op *ops;
	int n, cap, pc;
} op_list;

static void op_push(op_list *l, int kind, uint32_t stage, uint32_t it, uint32_t arg)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		l->ops = realloc(l->ops, (size_t)l->cap * sizeof(op));
	}
	l->ops[l->n++] = (op){kind, stage, it, arg};
}

#define A_BYTES GW_A_STAGE_BYTES
#define B_BYTES(w) ((uint32_t)(w) * GW_BK * GW_ELEM_BYTES)

/* gw_produce_gather / gw_produce_tma and gw_consume's sequence of barrier,
 * copy and tile-slot operations over `tiles` tiles of the given widths
 * (tile t's id is t), then the end mark. */
static void build_ops(op_list *prod, op_list *cons, bool gather, int tiles, const int *width, int k_tiles)
{
	uint32_t it = 0;
	for (int t = 0; t < tiles; t++) {
		const uint32_t first = it;
		for (int kt = 0; kt < k_tiles; kt++, it++) {
			const uint32_t s = gw_stage(it);
			op_push(prod, OP_WAIT_EMPTY, s, it, gw_round_parity(it) ^ 1u);
			op_push(prod, OP_WRITE_TILE, s, it, (uint32_t)t);
			if (gather) {
				op_push(prod, OP_EXPECT_TX, s, it, B_BYTES(width[t]));
				op_push(prod, OP_TMA_B, s, it, B_BYTES(width[t]));
				op_push(prod, OP_GATHER, s, it, 0);
				op_push(prod, OP_COMMIT, s, it, 0);
				if (it - first >= GW_GATHER_LAG) {
					op_push(prod, OP_WAIT_GROUP, 0, it, GW_GATHER_LAG);
					op_push(prod, OP_ARRIVE_FULL, gw_stage(it - GW_GATHER_LAG), it - GW_GATHER_LAG,
						GW_PRODUCERS);
				}
			} else {
				op_push(prod, OP_ARRIVE_EXPECT_TX, s, it, A_BYTES + B_BYTES(width[t]));
				op_push(prod, OP_TMA_A, s, it, A_BYTES);
				op_push(prod, OP_TMA_B, s, it, B_BYTES(width[t]));
			}
		}
		if (gather) {
			/* the tile's last stages, once they have landed */
			op_push(prod, OP_WAIT_GROUP, 0, it, 0);
			for (uint32_t j = it - first > GW_GATHER_LAG ? it - GW_GATHER_LAG : first; j < it; j++)
				op_push(prod, OP_ARRIVE_FULL, gw_stage(j), j, GW_PRODUCERS);
		}
	}
	/* the end mark */
	op_push(prod, OP_WAIT_EMPTY, gw_stage(it), it, gw_round_parity(it) ^ 1u);
	op_push(prod, OP_WRITE_TILE, gw_stage(it), it, (uint32_t)GW_TILE_DONE);
	op_push(prod, OP_ARRIVE_FULL, gw_stage(it), it, gather ? GW_PRODUCERS : 1);
	for (int wg = 0; wg < 2; wg++) {
		uint32_t ci = 0;
		for (int t = 0; t < tiles; t++) {
			op_push(&cons[wg], OP_WAIT_FULL, gw_stage(ci), ci, gw_round_parity(ci));
			op_push(&cons[wg], OP_READ_TILE, gw_stage(ci), ci, (uint32_t)t);
			for (int kt = 0; kt < k_tiles; kt++, ci++) {
				const uint32_t s = gw_stage(ci);
				op_push(&cons[wg], OP_WAIT_FULL, s, ci, gw_round_parity(ci));
				op_push(&cons[wg], OP_MMA, s, ci, 0);
				op_push(&cons[wg], OP_WAIT_MMA, s, ci, 1);
				if (kt > 0)
					op_push(&cons[wg], OP_ARRIVE_EMPTY, gw_stage(ci - 1), ci - 1, GW_CONSUMER_WARPS / 2);
			}
			op_push(&cons[wg], OP_WAIT_MMA, 0, ci, 0);
			op_push(&cons[wg], OP_ARRIVE_EMPTY, gw_stage(ci - 1), ci - 1, GW_CONSUMER_WARPS / 2);
		}
		op_push(&cons[wg], OP_WAIT_FULL, gw_stage(ci), ci, gw_round_parity(ci));
		op_push(&cons[wg], OP_READ_TILE, gw_stage(ci), ci, (uint32_t)GW_TILE_DONE);
	}
}

#define MAX_INFLIGHT 256

typedef struct sim {
	mbar full[GW_STAGES], empty[GW_STAGES];
	/* what each stage holds: the iteration whose A and B bytes landed */
	int64_t a_it[GW_STAGES], b_it[GW_STAGES];
	int readers[GW_STAGES];  /* wgmma groups reading the stage now */
	uint32_t tile_slot[GW_STAGES];
	/* tensor copies in flight: stage, iteration, bytes, A or B */
	struct { uint32_t stage, it, bytes; bool is_a; } tma[MAX_INFLIGHT];
	int n_tma;
	/* cp.async groups in flight, oldest first: stage and iteration */
	struct { uint32_t stage, it; bool has; } groups[MAX_INFLIGHT];
	int n_groups, staged; /* staged: a gather issued, not yet committed */
	uint32_t staged_stage, staged_it;
	/* each consumer's wgmma groups in flight, oldest first */
	uint32_t mma_stage[2][MAX_INFLIGHT];
	int n_mma[2];
	int errors;
} sim;

/* One step of an agent; false when it blocks. */
static bool step_producer(sim *m, op_list *l)
{
	const op *o = &l->ops[l->pc];
	switch (o->kind) {
	case OP_WAIT_EMPTY:
		if (!mbar_ready(&m->empty[o->stage], o->arg))
			return false;
		/* the stage must be free: nothing reads it */
		if (m->readers[o->stage] != 0)
			m->errors++;
		break;
	case OP_WRITE_TILE:
		m->tile_slot[o->stage] = o->arg;
		break;
	case OP_EXPECT_TX:
		m->full[o->stage].tx += o->arg;
		break;
	case OP_ARRIVE_EXPECT_TX:
		m->full[o->stage].tx += o->arg;
		mbar_arrive(&m->full[o->stage], 1);
		break;
	case OP_TMA_A:
	case OP_TMA_B:
		m->tma[m->n_tma].stage = o->stage;
		m->tma[m->n_tma].it = o->it;
		m->tma[m->n_tma].bytes = o->arg;
		m->tma[m->n_tma].is_a = o->kind == OP_TMA_A;
		m->n_tma++;
		break;
	case OP_GATHER:
		m->staged = 1;
		m->staged_stage = o->stage;
		m->staged_it = o->it;
		break;
	case OP_COMMIT:
		m->groups[m->n_groups].stage = m->staged_stage;
		m->groups[m->n_groups].it = m->staged_it;
		m->groups[m->n_groups].has = m->staged;
		m->n_groups++;
		m->staged = 0;
		break;
	case OP_WAIT_GROUP:
		if (m->n_groups > (int)o->arg)
			return false;
		break;
	case OP_ARRIVE_FULL:
		mbar_arrive(&m->full[o->stage], (int)o->arg);
		break;
	}
	l->pc++;
	return true;
}

static bool step_consumer(sim *m, op_list *l, int wg)
{
	const op *o = &l->ops[l->pc];
	switch (o->kind) {
	case OP_WAIT_FULL:
		if (!mbar_ready(&m->full[o->stage], o->arg))
			return false;
		break;
	case OP_READ_TILE:
		/* the slot holds what the producer wrote for this stage's iteration */
		if (m->tile_slot[o->stage] != o->arg)
			m->errors++;
		break;
	case OP_MMA:
		/* the stage holds this iteration's A and B, whole */
		if (m->a_it[o->stage] != (int64_t)o->it || m->b_it[o->stage] != (int64_t)o->it)
			m->errors++;
		m->readers[o->stage]++;
		m->mma_stage[wg][m->n_mma[wg]++] = o->stage;
		break;
	case OP_WAIT_MMA:
		/* retire all but the newest arg groups (a random part of them may
		 * have finished already; the wait guarantees these) */
		while (m->n_mma[wg] > (int)o->arg) {
			m->readers[m->mma_stage[wg][0]]--;
			memmove(m->mma_stage[wg], m->mma_stage[wg] + 1, (size_t)(--m->n_mma[wg]) * sizeof(uint32_t));
		}
		break;
	case OP_ARRIVE_EMPTY:
		mbar_arrive(&m->empty[o->stage], (int)o->arg);
		break;
	}
	l->pc++;
	return true;
}

/* Asynchronous completions: a tensor copy (any of those in flight), or the
 * oldest cp.async group (they complete in order). */
static bool complete_tma(sim *m)
{
	if (m->n_tma == 0)
		return false;
	const int i = rng_int(0, m->n_tma - 1);
	const uint32_t s = m->tma[i].stage;
	if (m->tma[i].is_a)
		m->a_it[s] = m->tma[i].it;
	else
		m->b_it[s] = m->tma[i].it;
	m->full[s].tx -= m->tma[i].bytes;
	mbar_settle(&m->full[s]);
	m->tma[i] = m->tma[--m->n_tma];
	return true;
}

static bool complete_group(sim *m)
{
	if (m->n_groups == 0)
		return false;
	if (m->groups[0].has)
		m->a_it[m->groups[0].stage] = m->groups[0].it;
	memmove(m->groups, m->groups + 1, (size_t)(--m->n_groups) * sizeof(m->groups[0]));
	return true;
}

static void pipeline_case(bool gather, int tiles, int k_tiles, uint64_t seed)
{
	op_list prod = {0}, cons[2] = {{0}, {0}};
	int width[16];
	sim m;

	rng_state = seed;
	for (int t = 0; t < tiles; t++)
		width[t] = rng_int(0, 1) ? GW_BN : GW_BN_NARROW;
	build_ops(&prod, cons, gather, tiles, width, k_tiles);
	memset(&m, 0, sizeof(m));
	for (int s = 0; s < GW_STAGES; s++) {
		mbar_init(&m.full[s], gather ? GW_PRODUCERS : 1);
		mbar_init(&m.empty[s], GW_CONSUMER_WARPS);
		m.a_it[s] = m.b_it[s] = -1;
	}
	int stalls = 0;
	while (prod.pc < prod.n || cons[0].pc < cons[0].n || cons[1].pc < cons[1].n || m.n_tma || m.n_groups) {
		bool moved = false;
		for (int tries = 0; tries < 8 && !moved; tries++) {
			switch (rng_int(0, 4)) {
			case 0: moved = prod.pc < prod.n && step_producer(&m, &prod); break;
			case 1: moved = cons[0].pc < cons[0].n && step_consumer(&m, &cons[0], 0); break;
			case 2: moved = cons[1].pc < cons[1].n && step_consumer(&m, &cons[1], 1); break;
			case 3: moved = complete_tma(&m); break;
			default: moved = complete_group(&m); break;
			}
		}
		if (!moved && ++stalls > 1000)
			break;
		if (moved)
			stalls = 0;
	}
	CHECK_MSG(prod.pc == prod.n && cons[0].pc == cons[0].n && cons[1].pc == cons[1].n,
		"gather %d seed %llu: deadlock (producer %d/%d, consumers %d/%d %d/%d)", gather,
		(unsigned long long)seed, prod.pc, prod.n, cons[0].pc, cons[0].n, cons[1].pc, cons[1].n);
	CHECK_MSG(m.errors == 0, "gather %d seed %llu: %d stages or tile slots read early, or refilled while read",
		gather, (unsigned long long)seed, m.errors);
	for (int s = 0; s < GW_STAGES; s++)
		CHECK(m.full[s].pending > 0 && m.empty[s].pending > 0 && m.full[s].tx == 0);
	free(prod.ops);
	free(cons[0].ops);
	free(cons[1].ops);
}

int main(void)
{
	rng_state = 24;
	descriptors();
	accumulator_map();
	gather_cover();
	schedule();
	schedule_balance();
	/* GEMM1 (gathered rows; relu^2 and SwiGLU) and GEMM2 (weighted, rows by
	 * TMA), at widths that end on a narrow tile and that do not */
	gemm_case(6, 384, 128, 2, true, EPI_RELU2);
	gemm_case(5, 256, 64, 3, true, EPI_RELU2);
	gemm_case(6, 512, 128, 2, true, EPI_SWIGLU);
	gemm_case(4, 384, 64, 1, true, EPI_SWIGLU);
	gemm_case(7, 128, 192, 2, false, EPI_WEIGHTED);
	gemm_case(5, 640, 64, 4, false, EPI_WEIGHTED);
	for (uint64_t seed = 1; seed <= 300; seed++) {
		pipeline_case(seed % 2 == 0, 1 + (int)(seed % 5), 1 + (int)(seed % 7), seed);
	}
	return mb_test_finish("test_grouped_gemm_sm90");
}
