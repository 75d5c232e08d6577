/* recurrent_scan's kernels, run on the CPU by the SIMT emulator of
 * ssm_scan_emu.h (warps of fibers, shuffles as warp collectives), against
 * the row's fp32 reference at the row's tolerance for the dtype
 * (src/reference/recurrent_scan.c): the fused kernel and the fallback's
 * two launches, as their launch functions make them, on shapes that take
 * every path of the warp scan: the 16-byte and the scalar loads, full
 * chunks and a tail chunk with a part-filled lane, several sequences a
 * warp (the carry reset between them, a channel's constants kept or
 * remade; the warps take them from the launch's ticket counter, in an
 * order that follows the fibers') and more warps than sequences. Outputs
 * start as NaN, so an element never written fails; two fiber orders must
 * agree bit for bit.
 *
 * The device code is src/kernels/recurrent_scan.cu itself, compiled here
 * as C++ with MB_RS_EMU (its host side left out); the step's two MUFU
 * operations are the library's exp2f and 1/sqrtf on the host
 * (recurrent_scan_math.h), so this checks the index math, the scan and
 * the paths, and test_recurrent_math.c the step's accuracy. */
#include "ssm_scan_emu.h"

#include <stdint.h>
#include <string.h>

#include <vector>

/* The intrinsics recurrent_scan.cu calls beyond the emulator's. */
template <typename T> inline void __stwb(T *p, T v)
{
	*p = v;
}

inline float __fdividef(float a, float b)
{
	return a / b;
}

inline float __frcp_rn(float a)
{
	return 1.0f / a;
}

extern "C" {
#include "harness/check.h"
#include "kernels/catalog.h"
#include "reference/reference.h"
#include "testutil.h"
extern const mb_row mb_row_recurrent_scan;
}

#define MB_RS_EMU 1
namespace emu_tu {
#include "kernels/recurrent_scan.cu"
}

namespace {

enum { N_PARAMS = 5 };

struct shape {
	const char *what;
	int b, l, d;
	unsigned warps; /* the grid the emulated device holds (0: one per sequence) */
};

using mb_emu::store;
using mb_emu::value;

template <typename T> struct inputs {
	std::vector<T> x, p[N_PARAMS];
	std::vector<float> xf, pf[N_PARAMS];
};

/* The row's fills (src/reference/recurrent_scan.c): x bell-shaped, the
 * gates' weights and biases U(-1, 1), lambda U(-9, -4.3); rounded to the
 * dtype, and the reference reads the rounded values. */
template <typename T> void fill(inputs<T> &in, const shape &sh, uint64_t seed)
{
	std::mt19937_64 rng(seed);
	std::normal_distribution<float> normal(0.0f, 1.0f);
	std::uniform_real_distribution<float> unit(0.0f, 1.0f);
	const size_t n = (size_t)sh.b * sh.d * sh.l;

	in.x.resize(n);
	in.xf.resize(n);
	for (size_t i = 0; i < n; i++) {
		float v;
		do
			v = normal(rng);
		while (fabsf(v) > 3.47f);
		in.x[i] = store<T>(v);
		in.xf[i] = value<T>(in.x[i]);
	}
	for (int k = 0; k < N_PARAMS; k++) {
		in.p[k].resize(sh.d);
		in.pf[k].resize(sh.d);
		for (int c = 0; c < sh.d; c++) {
			const float v = k == N_PARAMS - 1 ? -9.0f + 4.7f * unit(rng) : -1.0f + 2.0f * unit(rng);
			in.p[k][c] = store<T>(v);
			in.pf[k][c] = value<T>(in.p[k][c]);
		}
	}
}

template <typename T> unsigned grid_of(const shape &sh)
{
	const unsigned seqs = (unsigned)(sh.b * sh.d);
	return sh.warps && sh.warps < seqs ? sh.warps : seqs;
}

/* A scan kernel's launch: the grid of `sh`, the ticket counters zero at
 * the start, and the launch must leave them so. */
template <typename T, class K> int launch_scan(const shape &sh, const char *variant, uint64_t order, K kernel)
{
	unsigned long long tickets[emu_tu::TICKET_WORDS] = {0};
	const int rc = mb_emu::launch(dim3(grid_of<T>(sh)), dim3(SCAN_THREADS), 0, [&] { kernel(tickets); }, order);

	CHECK_MSG(tickets[emu_tu::TICKET_NEXT] == 0 && tickets[emu_tu::TICKET_DONE] == 0,
		"%s %s: the scan left its tickets at %llu and %llu", sh.what, variant, tickets[emu_tu::TICKET_NEXT],
		tickets[emu_tu::TICKET_DONE]);
	return rc;
}

/* The fused kernel as fused_dispatch picks it: 16-byte vectors when the
 * sequence is whole vectors, else one element an access. */
template <typename T, int VEC> int run_fused(const shape &sh, const inputs<T> &in, std::vector<T> &y, uint64_t order)
{
	emu_tu::fused_source<T, VEC> src;
	src.x = in.x.data();
	src.wa = in.p[0].data();
	src.ba = in.p[1].data();
	src.wi = in.p[2].data();
	src.bi = in.p[3].data();
	src.lambda = in.p[4].data();
	T *out = y.data();
	return launch_scan<T>(sh, "fused", order, [&](unsigned long long *tickets) {
		emu_tu::mb_recurrent_scan_fused_kernel<T, VEC>(src, out, sh.b, sh.d, sh.l, tickets);
	});
}

/* The fallback's two launches as fallback_launch makes them. */
template <typename T, int VEC>
int run_fallback(const shape &sh, const inputs<T> &in, std::vector<T> &y, uint64_t order)
{
	const int64_t n = (int64_t)sh.b * sh.d * sh.l;
	std::vector<float> a((size_t)n, NAN);
	std::vector<T> nx((size_t)n, store<T>(NAN));
	const uint32_t nvec = (uint32_t)(n / VEC), row_vecs = (uint32_t)(sh.l / VEC);
	int rc = mb_emu::launch(dim3(emu_tu::mb_flat_blocks(n / VEC)), dim3(MB_FLAT_THREADS), 0, [&] {
		emu_tu::mb_recurrent_scan_fb_gate_kernel<T, VEC, uint32_t>(in.x.data(), in.p[0].data(), in.p[1].data(),
			in.p[2].data(), in.p[3].data(), in.p[4].data(), a.data(), nx.data(), nvec, row_vecs, (uint32_t)sh.d);
	}, order);
	if (rc != 0)
		return rc;
	emu_tu::stored_source<T, VEC> src;
	src.a = a.data();
	src.u = nx.data();
	T *out = y.data();
	return launch_scan<T>(sh, "fallback", order, [&](unsigned long long *tickets) {
		emu_tu::mb_recurrent_scan_fb_scan_kernel<T, VEC>(src, out, sh.b, sh.d, sh.l, tickets);
	});
}

template <typename T> void check(const shape &sh, mb_dtype dtype, const char *variant, uint64_t seed)
{
	constexpr int vec = emu_tu::mb_vec16_elems<T>();
	const size_t n = (size_t)sh.b * sh.d * sh.l;
	const mb_tolerance tol = mb_row_recurrent_scan.tolerance[dtype];
	const bool fused = strcmp(variant, "fused") == 0, vectors = sh.l % vec == 0;
	std::vector<T> y1(n, store<T>(NAN)), y2(n, store<T>(NAN));
	std::vector<float> want(n);
	inputs<T> in;

	fill(in, sh, seed);
	const int64_t axis[3] = {sh.b, sh.l, sh.d};
	const float *ref_in[1 + N_PARAMS] = {in.xf.data(), in.pf[0].data(), in.pf[1].data(), in.pf[2].data(),
		in.pf[3].data(), in.pf[4].data()};
	float *ref_out[1] = {want.data()};
	mb_ref_recurrent_scan(axis, ref_in, ref_out, NULL, (int64_t)sh.b * sh.d);

	for (int pass = 0; pass < 2; pass++) {
		std::vector<T> &y = pass ? y2 : y1;
		const uint64_t order = seed + (uint64_t)pass;
		int rc;
		if (fused)
			rc = vectors ? run_fused<T, vec>(sh, in, y, order) : run_fused<T, 1>(sh, in, y, order);
		else
			rc = vectors ? run_fallback<T, vec>(sh, in, y, order) : run_fallback<T, 1>(sh, in, y, order);
		CHECK_MSG(rc == 0, "%s %s: launch %d", sh.what, variant, pass);
	}
	CHECK_MSG(memcmp(y1.data(), y2.data(), n * sizeof(T)) == 0, "%s %s: two fiber orders differ", sh.what, variant);

	/* the harness's own check: every element within tolerance, no NaN or
	 * Inf, not all zero, the norm within 1% */
	mb_tensor_spec spec[MB_MAX_TENSORS];
	const int y_index = mb_row_recurrent_scan.tensors(axis, spec) - 1;
	std::vector<float> got(n);
	double worst = 0.0;
	for (size_t i = 0; i < n; i++) {
		got[i] = value<T>(y1[i]);
		worst = std::max(worst, fabs((double)got[i] - want[i]) / (tol.abs + tol.rel * fabs((double)want[i])));
	}
	mb_check chk;
	char why[256] = "";
	mb_check_init(&chk);
	mb_check_add(&chk, &spec[y_index], got.data(), want.data(), NULL, (int64_t)sh.b * sh.d, (int64_t)sh.b * sh.d,
		&tol);
	mb_check_describe(&chk, why, sizeof(why));
	printf("%-48s %-8s %s: max abs error %.3g, the worst element at %.3f of its bound, %llu over\n", sh.what,
		variant, dtype == MB_BF16 ? "bf16" : "fp32", chk.max_abs, worst, (unsigned long long)chk.over_tolerance);
	CHECK_MSG(mb_check_passed(&chk), "%s %s: %s", sh.what, variant, why);
}

} /* namespace */

int main(void)
{
	const shape shapes[] = {
		{"B=2 L=64 D=6: one part-filled chunk", 2, 64, 6, 0},
		{"B=2 L=37 D=6: the scalar path", 2, 37, 6, 0},
		{"B=1 L=4504 D=3: 8 full chunks and a tail", 1, 4504, 3, 0},
		{"B=3 L=1536 D=5, 4 warps: 3 to 4 sequences a warp", 3, 1536, 5, 4},
		{"B=2 L=1030 D=3, 2 warps: scalar, 3 a warp", 2, 1030, 3, 2},
	};
	uint64_t seed = 7;

	for (const shape &sh : shapes) {
		for (const char *variant : {"fused", "fallback"}) {
			check<__nv_bfloat16>(sh, MB_BF16, variant, seed += 100);
			check<float>(sh, MB_FP32, variant, seed += 100);
		}
	}
	return mb_test_finish("test_recurrent_scan_emu");
}
