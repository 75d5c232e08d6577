/* mhc_sinkhorn's fused kernel, run on the CPU by
 * the SIMT emulator of ssm_scan_emu.h, against the row's fp32 reference
 * at the row's tolerance for the dtype (src/reference/mhc_sinkhorn.c):
 * one block a token, launched token by token on the token's slices of x
 * and y (the kernel takes its token from blockIdx.x, 0 here); the
 * 16-byte vectors (one and two a thread a stream), the scalar path, four
 * and two streams. Outputs start as NaN, so an element never written
 * fails; two fiber orders must agree bit for bit.
 *
 * The device code is src/kernels/mhc_sinkhorn.cu itself, compiled here as
 * C++ with MB_MHC_EMU (its host side left out; rcp.approx a division).
 * Its static shared arrays become static storage, one per kernel: right
 * for the one block launched at a time here. */
#include "ssm_scan_emu.h"

#include <stdint.h>
#include <string.h>

#include <vector>

/* The intrinsics mhc_sinkhorn.cu calls beyond the emulator's. */
template <typename T> inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask)
{
	return mb_emu::shfl(mask, v, lane_mask, mb_emu::SHFL_XOR);
}

template <typename T> inline T __ldcs(const T *p)
{
	return *p;
}

template <typename T> inline void __stcs(T *p, T v)
{
	*p = v;
}

inline float __fdiv_rn(float a, float b)
{
	return a / b;
}

extern "C" {
#include "harness/check.h"
#include "kernels/catalog.h"
#include "reference/reference.h"
#include "testutil.h"
extern const mb_row mb_row_mhc_sinkhorn;
}

#define MB_MHC_EMU 1
#undef __shared__
#define __shared__ static
namespace emu_tu {
#include "kernels/mhc_sinkhorn.cu"
}
#undef __shared__

namespace {

enum { ITERS = 20 };

struct shape {
	const char *what;
	int t, n, w;
};

using mb_emu::store;
using mb_emu::value;

/* Bell-shaped values, bounded at 3.47 as the fills, in the dtype. */
template <typename T> void fill(std::vector<T> &v, std::vector<float> &f, size_t n, std::mt19937_64 &rng)
{
	std::normal_distribution<float> normal(0.0f, 1.0f);

	v.resize(n);
	f.resize(n);
	for (size_t i = 0; i < n; i++) {
		float x;
		do
			x = normal(rng);
		while (fabsf(x) > 3.47f);
		v[i] = store<T>(x);
		f[i] = value<T>(v[i]);
	}
}

/* Token by token, one block each. */
template <typename T, int N, int VEC, int VPT>
int run(const shape &sh, const std::vector<T> &x, const std::vector<T> &p, std::vector<T> &y, uint64_t order)
{
	const size_t token = (size_t)sh.n * sh.w;
	for (int t = 0; t < sh.t; t++) {
		const T *xt = x.data() + t * token;
		T *yt = y.data() + t * token;
		const int rc = mb_emu::launch(dim3(1), dim3(MHC_FUSED_THREADS), 0, [&] {
			emu_tu::mb_mhc_sinkhorn_fused_kernel<T, N, VEC, VPT>(xt, p.data(), yt, sh.w, ITERS);
		}, order + t);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* VPT as pick_vpt takes it: the fewest vectors a thread a stream. */
template <typename T, int N, int VEC>
int run_vpt(const shape &sh, const std::vector<T> &x, const std::vector<T> &p, std::vector<T> &y, uint64_t order)
{
	const int nvec = sh.w / VEC;
	if (nvec <= MHC_FUSED_THREADS)
		return run<T, N, VEC, 1>(sh, x, p, y, order);
	if (nvec <= 2 * MHC_FUSED_THREADS)
		return run<T, N, VEC, 2>(sh, x, p, y, order);
	return run<T, N, VEC, 4>(sh, x, p, y, order);
}

template <typename T, int N>
int run_vec(const shape &sh, const std::vector<T> &x, const std::vector<T> &p, std::vector<T> &y, uint64_t order)
{
	constexpr int vec = emu_tu::mb_vec16_elems<T>();
	if (sh.w % vec == 0)
		return run_vpt<T, N, vec>(sh, x, p, y, order);
	return run_vpt<T, N, 1>(sh, x, p, y, order);
}

template <typename T>
int run_n(const shape &sh, const std::vector<T> &x, const std::vector<T> &p, std::vector<T> &y, uint64_t order)
{
	return sh.n == 4 ? run_vec<T, 4>(sh, x, p, y, order) : run_vec<T, 2>(sh, x, p, y, order);
}

template <typename T> void check(const shape &sh, mb_dtype dtype, uint64_t seed)
{
	const size_t n = (size_t)sh.t * sh.n * sh.w;
	const mb_tolerance tol = mb_row_mhc_sinkhorn.tolerance[dtype];
	std::mt19937_64 rng(seed);
	std::vector<T> x, p, y1(n, store<T>(NAN)), y2(n, store<T>(NAN));
	std::vector<float> xf, pf, want(n);

	fill(x, xf, n, rng);
	fill(p, pf, (size_t)sh.n * sh.n * sh.w, rng);
	const int64_t axis[4] = {sh.t, sh.n, sh.w, ITERS};
	const float *ref_in[2] = {xf.data(), pf.data()};
	float *ref_out[1] = {want.data()};
	mb_ref_mhc_sinkhorn(axis, ref_in, ref_out, NULL, sh.t);

	const int rc1 = run_n<T>(sh, x, p, y1, seed), rc2 = run_n<T>(sh, x, p, y2, seed + 1000);
	CHECK_MSG(rc1 == 0 && rc2 == 0, "%s: launches %d %d", sh.what, rc1, rc2);
	CHECK_MSG(memcmp(y1.data(), y2.data(), n * sizeof(T)) == 0, "%s: two fiber orders differ", sh.what);

	/* the harness's own check */
	mb_tensor_spec spec[MB_MAX_TENSORS];
	const int y_index = mb_row_mhc_sinkhorn.tensors(axis, spec) - 1;
	std::vector<float> got(n);
	for (size_t i = 0; i < n; i++)
		got[i] = value<T>(y1[i]);
	mb_check chk;
	char why[256] = "";
	mb_check_init(&chk);
	mb_check_add(&chk, &spec[y_index], got.data(), want.data(), NULL, sh.t, sh.t, &tol);
	mb_check_describe(&chk, why, sizeof(why));
	printf("%-44s %s: max abs error %.3g (tolerance %.3g + %.3g |want|), %llu over\n", sh.what,
		dtype == MB_BF16 ? "bf16" : "fp32", chk.max_abs, tol.abs, tol.rel, (unsigned long long)chk.over_tolerance);
	CHECK_MSG(mb_check_passed(&chk), "%s: %s", sh.what, why);
}

} /* namespace */

int main(void)
{
	const shape shapes[] = {
		{"T=5 N=4 W=64: one vector a stream", 5, 4, 64},
		{"T=4 N=4 W=37: the scalar path", 4, 4, 37},
		{"T=6 N=2 W=64: two streams", 6, 2, 64},
		{"T=3 N=4 W=4096: two vectors (bf16), four (fp32)", 3, 4, 4096},
		{"T=2 N=4 W=2560: the second vector in part", 2, 4, 2560},
		{"T=2 N=2 W=4096: two streams, two vectors", 2, 2, 4096},
	};
	uint64_t seed = 5;

	for (const shape &sh : shapes) {
		check<__nv_bfloat16>(sh, MB_BF16, seed += 100);
		check<float>(sh, MB_FP32, seed += 100);
	}
	return mb_test_finish("test_mhc_sinkhorn_emu");
}
