/* mhc_sinkhorn's fused kernels, run on the CPU by
 * the SIMT emulator of ssm_scan_emu.h, against the row's fp32 reference
 * at the row's tolerance for the dtype (src/reference/mhc_sinkhorn.c).
 * fused: one block a token, launched token by token on the token's slices
 * of x and y (the kernel takes its token from blockIdx.x, 0 here); the
 * 16-byte vectors (one and two a thread a stream: the shared-memory stash
 * is used at two), the scalar path, four and two streams. fused_v2 and
 * fused_v3: their tensor-core kernels (bf16 and fp16, four streams, W a
 * multiple of 32) on the whole x with one or two persistent blocks, odd
 * T, more pairs than their three buffers and warps without columns;
 * elsewhere their copies of fused's kernel, which must match fused bit
 * for bit. Outputs start as NaN, so an element never written fails; two
 * fiber orders must agree bit for bit (for the tensor-core kernels, one
 * with cp.async landing at once and one with it deferred to the wait).
 *
 * The device code is src/kernels/mhc_sinkhorn.cu itself, compiled here as
 * C++ with MB_MHC_EMU (its host side left out; rcp.approx a division).
 * Its static shared arrays become static storage, one per kernel: right
 * for the one block launched at a time here (the tensor-core kernels
 * have only dynamic shared memory, the emulator's per block). */
#include "ssm_scan_emu.h"

#include <stdint.h>
#include <string.h>

#include <type_traits>
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

inline float __frcp_rn(float x)
{
	return 1.0f / x;
}

/* fused_v2's PTX primitives on the emulator: ldmatrix and the MMA are the
 * emulator's warp collectives, the dynamic shared memory the CTA's. A
 * cp.async copies at once, or with `defer_copies` only when its thread
 * waits for its group (the latest a GPU may land it), so that one run
 * finds a read of shared memory before its wait (it sees the launch's
 * 0xFF fill, NaN) and the other a refill before the readers are done. */
namespace copies {

struct pending {
	void *dst;
	const void *src;
};

/* each fiber's groups, oldest first; the last is open until a commit */
struct per_thread {
	std::vector<std::vector<pending>> groups;
};

inline bool &defer()
{
	static bool on;
	return on;
}

inline std::vector<per_thread> &all()
{
	static std::vector<per_thread> v;
	return v;
}

inline per_thread &mine()
{
	mb_emu::machine *m = mb_emu::the();
	const size_t i = (size_t)(m->cur - m->fibers.data());
	if (all().size() != m->fibers.size())
		all().assign(m->fibers.size(), per_thread());
	per_thread &t = all()[i];
	if (t.groups.empty())
		t.groups.emplace_back();
	return t;
}

} /* namespace copies */

inline void mhc_cp_async16(void *dst, const void *src)
{
	if (copies::defer())
		copies::mine().groups.back().push_back({dst, src});
	else
		memcpy(dst, src, 16);
}

inline void mhc_cp_async_commit()
{
	if (copies::defer())
		copies::mine().groups.emplace_back();
}

/* Lands every committed group but the PENDING latest. */
template <int PENDING> inline void mhc_cp_async_wait()
{
	if (!copies::defer())
		return;
	copies::per_thread &t = copies::mine();
	const size_t committed = t.groups.size() - 1;
	size_t land = committed > (size_t)PENDING ? committed - PENDING : 0;
	for (size_t g = 0; g < land; g++)
		for (const copies::pending &c : t.groups[g])
			memcpy(c.dst, c.src, 16);
	t.groups.erase(t.groups.begin(), t.groups.begin() + (long)land);
}

inline void mhc_ldsm_x4(uint32_t (&r)[4], const void *p)
{
	mb_emu::ldsm(r, p, false);
}

template <typename T> inline void mhc_mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
	float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
	mb_emu::mma(acc, a, b0, b1, std::is_same<T, __nv_bfloat16>::value);
	memcpy(d, acc, sizeof(acc));
}

inline unsigned char *mhc_smem()
{
	return dyn_smem();
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

/* Token by token, one block each: fused's kernel (V2 = 0), or the same
 * code under fused_v2's (2) or fused_v3's (3) name, their path where the
 * tensor cores do not apply. */
template <typename T, int N, int VEC, int VPT, int V2>
int run(const shape &sh, const std::vector<T> &x, const std::vector<T> &p, std::vector<T> &y, uint64_t order)
{
	const size_t token = (size_t)sh.n * sh.w;
	for (int t = 0; t < sh.t; t++) {
		const T *xt = x.data() + t * token;
		T *yt = y.data() + t * token;
		const int rc = mb_emu::launch(dim3(1), dim3(MHC_FUSED_THREADS), 0, [&] {
			if (V2 == 2)
				emu_tu::mb_mhc_sinkhorn_fused_v2_simt_kernel<T, N, VEC, VPT>(xt, p.data(), yt, sh.w, ITERS);
			else if (V2 == 3)
				emu_tu::mb_mhc_sinkhorn_fused_v3_simt_kernel<T, N, VEC, VPT>(xt, p.data(), yt, sh.w, ITERS);
			else
				emu_tu::mb_mhc_sinkhorn_fused_kernel<T, N, VEC, VPT>(xt, p.data(), yt, sh.w, ITERS);
		}, order + t);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* VPT as pick_vpt takes it: the fewest vectors a thread a stream. */
template <typename T, int N, int VEC, int V2>
int run_vpt(const shape &sh, const std::vector<T> &x, const std::vector<T> &p, std::vector<T> &y, uint64_t order)
{
	const int nvec = sh.w / VEC;
	if (nvec <= MHC_FUSED_THREADS)
		return run<T, N, VEC, 1, V2>(sh, x, p, y, order);
	if (nvec <= 2 * MHC_FUSED_THREADS)
		return run<T, N, VEC, 2, V2>(sh, x, p, y, order);
	return run<T, N, VEC, 4, V2>(sh, x, p, y, order);
}

template <typename T, int N, int V2>
int run_vec(const shape &sh, const std::vector<T> &x, const std::vector<T> &p, std::vector<T> &y, uint64_t order)
{
	constexpr int vec = emu_tu::mb_vec16_elems<T>();
	if (sh.w % vec == 0)
		return run_vpt<T, N, vec, V2>(sh, x, p, y, order);
	return run_vpt<T, N, 1, V2>(sh, x, p, y, order);
}

template <typename T, int V2>
int run_n(const shape &sh, const std::vector<T> &x, const std::vector<T> &p, std::vector<T> &y, uint64_t order)
{
	return sh.n == 4 ? run_vec<T, 4, V2>(sh, x, p, y, order) : run_vec<T, 2, V2>(sh, x, p, y, order);
}

/* fused_v2's tensor-core kernel takes the shape (as fused_v2_dispatch). */
template <typename T> bool v2_tensor(const shape &sh)
{
	return sizeof(T) == 2 && sh.n == MHC_V2_STREAMS && sh.w % MHC_V2_CHUNK == 0 && sh.w <= MHC_V2_MAX_WIDTH;
}

/* fused_v2's (V2 = 2) or fused_v3's (3) tensor-core kernel on a grid of
 * up to two persistent blocks (pairs alternate between them), the shared
 * memory the host would give it; cp.async landing at once or deferred. */
template <typename T, int V2>
int run_v2_tensor(const shape &sh, const std::vector<T> &x, const std::vector<T> &p, std::vector<T> &y, uint64_t order,
	bool defer_copies)
{
	const int pairs = (sh.t + MHC_V2_PAIR - 1) / MHC_V2_PAIR;
	const unsigned grid = pairs < 2 ? 1u : 2u;
	copies::defer() = defer_copies;
	copies::all().clear();
	return mb_emu::launch(dim3(grid), dim3(MHC_V2_THREADS), emu_tu::mhc_v2_smem_bytes(sh.w, (int)sizeof(T)), [&] {
		if (V2 == 3)
			emu_tu::mb_mhc_sinkhorn_fused_v3_kernel<T>(x.data(), p.data(), y.data(), sh.t, sh.w, ITERS);
		else
			emu_tu::mb_mhc_sinkhorn_fused_v2_kernel<T>(x.data(), p.data(), y.data(), sh.t, sh.w, ITERS);
	}, order);
}

/* fused_v2 (2) or fused_v3 (3): the tensor-core kernel where it applies
 * (two fiber orders, the reference's check), else fused's code bit for
 * bit against fused's y. */
template <typename T, int V2>
void check_v2(const shape &sh, mb_dtype dtype, const std::vector<T> &x, const std::vector<T> &p,
	const std::vector<T> &fused_y, const std::vector<float> &want, uint64_t seed)
{
	const size_t n = fused_y.size();
	const char *name = V2 == 3 ? "fused_v3" : "fused_v2";
	std::vector<T> v1(n, store<T>(NAN)), v2(n, store<T>(NAN));
	if (v2_tensor<T>(sh)) {
		const int rc1 = run_v2_tensor<T, V2>(sh, x, p, v1, seed, false);
		const int rc2 = run_v2_tensor<T, V2>(sh, x, p, v2, seed + 1, true);
		CHECK_MSG(rc1 == 0 && rc2 == 0, "%s: %s launches %d %d", sh.what, name, rc1, rc2);
		CHECK_MSG(memcmp(v1.data(), v2.data(), n * sizeof(T)) == 0,
			"%s: %s: two fiber orders (copies landing at once, then deferred to the waits) differ", sh.what, name);
		check_against(sh, dtype, name, v1, want);
	} else {
		const int rc = run_n<T, V2>(sh, x, p, v1, seed);
		CHECK_MSG(rc == 0, "%s: %s (fused's code) launch %d", sh.what, name, rc);
		CHECK_MSG(memcmp(v1.data(), fused_y.data(), n * sizeof(T)) == 0, "%s: %s (fused's code) differs from fused",
			sh.what, name);
	}
}

const char *dtype_name(mb_dtype dtype)
{
	return dtype == MB_BF16 ? "bf16" : dtype == MB_FP16 ? "fp16" : "fp32";
}

/* The harness's own check of y against the reference. */
template <typename T>
void check_against(const shape &sh, mb_dtype dtype, const char *variant, const std::vector<T> &y,
	const std::vector<float> &want)
{
	const size_t n = y.size();
	const int64_t axis[4] = {sh.t, sh.n, sh.w, ITERS};
	const mb_tolerance tol = mb_row_mhc_sinkhorn.tolerance[dtype];
	mb_tensor_spec spec[MB_MAX_TENSORS];
	const int y_index = mb_row_mhc_sinkhorn.tensors(axis, spec) - 1;
	std::vector<float> got(n);
	for (size_t i = 0; i < n; i++)
		got[i] = value<T>(y[i]);
	mb_check chk;
	char why[256] = "";
	mb_check_init(&chk);
	mb_check_add(&chk, &spec[y_index], got.data(), want.data(), NULL, sh.t, sh.t, &tol);
	mb_check_describe(&chk, why, sizeof(why));
	printf("%-44s %s %-15s max abs error %.3g (tolerance %.3g + %.3g |want|), %llu over\n", sh.what,
		dtype_name(dtype), variant, chk.max_abs, tol.abs, tol.rel, (unsigned long long)chk.over_tolerance);
	CHECK_MSG(mb_check_passed(&chk), "%s %s: %s", sh.what, variant, why);
}

template <typename T> void check(const shape &sh, mb_dtype dtype, uint64_t seed)
{
	const size_t n = (size_t)sh.t * sh.n * sh.w;
	std::mt19937_64 rng(seed);
	std::vector<T> x, p, y1(n, store<T>(NAN)), y2(n, store<T>(NAN));
	std::vector<float> xf, pf, want(n);

	fill(x, xf, n, rng);
	fill(p, pf, (size_t)sh.n * sh.n * sh.w, rng);
	const int64_t axis[4] = {sh.t, sh.n, sh.w, ITERS};
	const float *ref_in[2] = {xf.data(), pf.data()};
	float *ref_out[1] = {want.data()};
	mb_ref_mhc_sinkhorn(axis, ref_in, ref_out, NULL, sh.t);

	const int rc1 = run_n<T, 0>(sh, x, p, y1, seed), rc2 = run_n<T, 0>(sh, x, p, y2, seed + 1000);
	CHECK_MSG(rc1 == 0 && rc2 == 0, "%s: launches %d %d", sh.what, rc1, rc2);
	CHECK_MSG(memcmp(y1.data(), y2.data(), n * sizeof(T)) == 0, "%s: two fiber orders differ", sh.what);
	check_against(sh, dtype, "fused", y1, want);

	check_v2<T, 2>(sh, dtype, x, p, y1, want, seed + 2000);
	check_v2<T, 3>(sh, dtype, x, p, y1, want, seed + 3000);
}

} /* namespace */

int main(void)
{
	const shape shapes[] = {
		{"T=5 N=4 W=64: one vector a stream", 5, 4, 64},
		{"T=9 N=4 W=64: five pairs through three buffers", 9, 4, 64},
		{"T=8 N=4 W=96: three chunks (warps 0-2)", 8, 4, 96},
		{"T=4 N=4 W=37: the scalar path", 4, 4, 37},
		{"T=6 N=2 W=64: two streams", 6, 2, 64},
		{"T=3 N=4 W=4096: two vectors (bf16), four (fp32)", 3, 4, 4096},
		{"T=2 N=4 W=2560: the second vector in part", 2, 4, 2560},
		{"T=2 N=2 W=4096: two streams, two vectors", 2, 2, 4096},
	};
	uint64_t seed = 5;

	for (const shape &sh : shapes) {
		check<__nv_bfloat16>(sh, MB_BF16, seed += 100);
		check<__half>(sh, MB_FP16, seed += 100);
		check<float>(sh, MB_FP32, seed += 100);
	}
	return mb_test_finish("test_mhc_sinkhorn_emu");
}
