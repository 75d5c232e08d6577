/* ssm_scan's fused kernels (the fused variant's mma.sync one and its
 * sm_90a warpgroup one), run on the CPU by the SIMT emulator of ssm_scan_emu.h,
 * against the row's fp32 reference at the row's bf16
 * tolerance (src/reference/ssm_scan.c), on shapes that take each of its
 * plans: one segment a sequence, two (no hand-over), and chained plans of
 * three and four segments, with partial last chunks, P below 64 and N
 * below 128. Each case runs twice on the same scratch (the second launch
 * must find the sync words the first left ready) under two fiber orders,
 * and the two outputs must agree bit for bit. Outputs start as NaN, so an
 * element never written fails.
 *
 * The device code is src/kernels/ssm_scan.cu itself, compiled here as C++
 * with MB_SSM_EMU (its PTX primitives come from the emulator); the emulator
 * was first checked against the kernel the H200 ran (reports/h200, run d):
 * it reproduced that kernel's results, and it catches a wrong ldmatrix
 * mode and a missing barrier. */
#include "ssm_scan_emu.h"

#include <stdint.h>
#include <string.h>

#include <vector>

#include "kernels/launch.h"
#include "kernels/vec.cuh"
#include "kernels/workspace.h"

extern "C" {
#include "kernels/catalog.h"
#include "reference/reference.h"
#include "testutil.h"
extern const mb_row mb_row_ssm_scan;
}

namespace emu_tu {
#include "kernels/ssm_scan.cu"
}

namespace {

struct shape {
	int b, nh, l, p, n;
	int64_t slots; /* CTAs the emulated device holds at once */
	int segs;      /* the plan that must come of it */
};

uint16_t to_bf16(float f)
{
	__nv_bfloat16 h = __float2bfloat16_rn(f);
	uint16_t u;
	memcpy(&u, &h, 2);
	return u;
}

float from_bf16(uint16_t u)
{
	const uint32_t w = (uint32_t)u << 16;
	float f;
	memcpy(&f, &w, 4);
	return f;
}

/* The row's fills (src/reference/ssm_scan.c): bell-shaped x, B, C, dt_raw
 * (scale 0.5) and lambda_raw, bounded at 3.47 standard deviations; A and
 * dt_bias uniform over their ranges. Rounded to bf16; the reference reads
 * the rounded values. */
struct inputs {
	std::vector<uint16_t> t[7];
	std::vector<float> f[7];
};

void fill(inputs &in, const shape &sh, uint64_t seed)
{
	std::mt19937_64 rng(seed);
	std::normal_distribution<float> normal(0.0f, 1.0f);
	std::uniform_real_distribution<float> unit(0.0f, 1.0f);
	const size_t rows = (size_t)sh.b * sh.nh;
	const size_t sizes[7] = {rows * sh.l * sh.p, rows * sh.l, rows * sh.l, (size_t)sh.b * sh.l * sh.n,
		(size_t)sh.b * sh.l * sh.n, (size_t)sh.nh, (size_t)sh.nh};

	for (int k = 0; k < 7; k++) {
		in.t[k].resize(sizes[k]);
		in.f[k].resize(sizes[k]);
		for (size_t i = 0; i < sizes[k]; i++) {
			float v;
			if (k == 5)
				v = -16.0f + 15.0f * unit(rng);
			else if (k == 6)
				v = -7.0f + 4.75f * unit(rng);
			else {
				do
					v = normal(rng);
				while (fabsf(v) > 3.47f);
				if (k == 1)
					v *= 0.5f;
			}
			in.t[k][i] = to_bf16(v);
			in.f[k][i] = from_bf16(in.t[k][i]);
		}
	}
}

/* The two kernels. */
enum kernel { K_MMA_SYNC, K_WGMMA };

const char *kernel_name(kernel k)
{
	return k == K_WGMMA ? "fused (wgmma)" : "fused (mma.sync)";
}

/* One emulated launch of a fused kernel as fused_launch_kernel makes it. */
int run(kernel kern, const shape &sh, const inputs &in, std::vector<uint16_t> &y, std::vector<unsigned char> &scratch,
	uint64_t order_seed)
{
	const int64_t axis[5] = {sh.b, sh.l, sh.nh, sh.p, sh.n};
	const int64_t rows = (int64_t)sh.b * sh.nh;
	const emu_tu::fused_plan plan = emu_tu::fused_plan_make(rows, sh.l, sh.slots);
	const void *ins[7];
	void *outs[1] = {y.data()};

	for (int k = 0; k < 7; k++)
		ins[k] = in.t[k].data();
	CHECK_MSG(plan.segs == sh.segs, "B=%d L=%d NH=%d: %d segments planned, %d expected", sh.b, sh.l, sh.nh,
		plan.segs, sh.segs);
	if (plan.segs >= CHAIN_MIN_SEGS && scratch.empty())
		scratch.assign(emu_tu::fused_scratch_bytes(rows, plan.segs), 0); /* new memory: zeroed, as the launch does */
	/* B and C in fp16, as mb_ssm_scan_bc16_kernel makes them before the
	 * launch (rounded to nearest from the bf16 value) */
	std::vector<__half> bc16;
	for (int k : {3, 4})
		for (uint16_t v : in.t[k])
			bc16.push_back(__float2half_rn(from_bf16(v)));
	const emu_tu::fused_args g =
		emu_tu::fused_args_make(axis, ins, outs, plan, scratch.empty() ? NULL : scratch.data(), bc16.data());
	y.assign(y.size(), 0xffff); /* NaN */
	if (kern == K_WGMMA)
		return mb_emu::launch(dim3((unsigned)(rows * plan.segs)), dim3(SW_THREADS),
			SW_TILE_BYTES + sizeof(emu_tu::sw_side) + SW_SMEM_ALIGN, [&g] { emu_tu::mb_ssm_scan_fused_wgmma_kernel(g); },
			order_seed);
	return mb_emu::launch(dim3((unsigned)(rows * plan.segs)), dim3(THREADS), sizeof(emu_tu::fused_smem),
		[&g] { emu_tu::mb_ssm_scan_fused_kernel(g); }, order_seed);
}

void check_case(kernel kern, const shape &sh, uint64_t seed)
{
	const int64_t axis[5] = {sh.b, sh.l, sh.nh, sh.p, sh.n};
	const size_t rows = (size_t)sh.b * sh.nh, n_y = rows * sh.l * sh.p;
	const mb_tolerance tol = mb_row_ssm_scan.tolerance[MB_BF16];
	std::vector<uint16_t> y1(n_y), y2(n_y);
	std::vector<float> want(n_y);
	std::vector<unsigned char> scratch;
	inputs in;

	fill(in, sh, seed);
	const float *ref_in[7];
	for (int k = 0; k < 7; k++)
		ref_in[k] = in.f[k].data();
	float *ref_out[1] = {want.data()};
	mb_ref_ssm_scan(axis, ref_in, ref_out, NULL, (int64_t)rows);

	const char *name = kernel_name(kern);
	CHECK_MSG(run(kern, sh, in, y1, scratch, seed) == 0, "%s B=%d L=%d NH=%d: first launch", name, sh.b, sh.l, sh.nh);
	CHECK_MSG(run(kern, sh, in, y2, scratch, seed + 1) == 0, "%s B=%d L=%d NH=%d: second launch", name, sh.b, sh.l,
		sh.nh);
	CHECK_MSG(y1 == y2, "%s B=%d L=%d NH=%d: two launches differ", name, sh.b, sh.l, sh.nh);

	size_t over = 0;
	double max_abs = 0.0, max_used = 0.0, norm_got = 0.0, norm_want = 0.0;
	for (size_t i = 0; i < n_y; i++) {
		const double got = from_bf16(y1[i]), w = want[i], err = fabs(got - w), bound = tol.abs + tol.rel * fabs(w);
		if (!(err <= bound))
			over++;
		if (!(err <= max_abs))
			max_abs = err;
		if (!(err / bound <= max_used))
			max_used = err / bound;
		norm_got += got * got;
		norm_want += w * w;
	}
	printf("%s B=%d L=%d NH=%d P=%d N=%d: %d segments, max abs error %.5f (tolerance %.4f + %.5f |want|; the worst "
	       "element uses %.2f of its bound), %zu over, norm ratio %.5f\n",
		name, sh.b, sh.l, sh.nh, sh.p, sh.n, sh.segs, max_abs, tol.abs, tol.rel, max_used, over,
		sqrt(norm_got / norm_want));
	CHECK_MSG(over == 0, "%s B=%d L=%d NH=%d: %zu elements over tolerance", name, sh.b, sh.l, sh.nh, over);
	CHECK(fabs(sqrt(norm_got / norm_want) - 1.0) < 0.01);
}

/* The plans of the suites' shapes on a 132-SM GPU at two CTAs an SM (264
 * slots): segment lengths in steps. */
void check_plans(void)
{
	const struct {
		int64_t rows, seq;
		int segs, len0, len;
	} want[] = {
		{128, 16384, 2, 160 * TILE, 96 * TILE}, /* nam56r, B = 4, NH = 32 */
		{128, 4096, 2, 40 * TILE, 24 * TILE},
		{100, 300, 2, 4 * TILE, 1 * TILE},       /* smoke two_segments */
		{2, 1000, 4, 7 * TILE, 3 * TILE},        /* smoke chained */
		{2, 64, 1, 1 * TILE, 0},                 /* smoke tiny: one chunk */
		{2, 16384, 12, 36 * TILE, 20 * TILE},    /* few long sequences: the wait cap */
		{512, 4096, 1, 64 * TILE, 0},            /* more sequences than slots */
	};
	for (const auto &w : want) {
		const emu_tu::fused_plan p = emu_tu::fused_plan_make(w.rows, w.seq, 264);
		CHECK_MSG(p.segs == w.segs && p.len0 == w.len0 && p.len == w.len,
			"rows %lld, L %lld: plan %d segments of %d then %d steps, want %d of %d then %d", (long long)w.rows,
			(long long)w.seq, p.segs, p.len0, p.len, w.segs, w.len0, w.len);
		CHECK(p.len0 + (int64_t)(p.segs - 1) * p.len >= w.seq);
		CHECK(p.segs == 1 || p.len0 + (int64_t)(p.segs - 2) * p.len < w.seq);
	}
}

} /* namespace */

int main(void)
{
	const shape shapes[] = {
		/* one segment a sequence: the old kernel's parallelism */
		{1, 2, 200, 64, 128, 2, 1},
		/* two: segment 1 is one partial chunk, its CTA's phase 1 the rest */
		{1, 2, 200, 64, 128, 4, 2},
		{1, 3, 130, 8, 16, 6, 2},
		/* chained: three and four segments, P and N below their maxima */
		{2, 2, 400, 64, 128, 12, 3},
		{1, 1, 1000, 40, 48, 8, 4},
	};
	uint64_t seed = 11;

	check_plans();
	for (const shape &sh : shapes) {
		seed += 100;
		check_case(K_MMA_SYNC, sh, seed);
		check_case(K_WGMMA, sh, seed);
	}
	return mb_test_finish("test_ssm_scan_emu");
}
