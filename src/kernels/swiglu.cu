/* swiglu: y = silu(g) * u, silu(g) = g / (1 + exp(-g)), where g and u are
 * the two halves of each row of gu [T, 2F] (g = columns [0, F), u = columns
 * [F, 2F)); y [T, F].
 *
 * Math in fp32, storage in the case dtype. Axes, in catalog order: T, F.
 * The fp32 tolerance (src/reference/swiglu.c) is derived for expf within
 * 2 ulp and a correctly rounded division: fp32 and the fallback call expf
 * (not __expf) and __fdiv_rn, which stays IEEE whatever -prec-div or
 * fast-math flags say; a build with --use_fast_math would turn expf into
 * __expf and void the fp32 bound. The fused fp16/bf16 kernels use __expf
 * and __fdividef on purpose (see fused_silu), with their own bound.
 */
#include <limits.h>
#include <stdint.h>

#include "kernels/launch.h"
#include "kernels/vec.cuh"

enum { AX_T, AX_F };

/* Fused: a persistent grid; each thread keeps FUSED_DEPTH output vectors'
 * loads (both halves) in flight and refills a slot as soon as it has taken
 * the slot's values, so loads stay in flight while it computes. The
 * one-shot version (load four, compute, store, exit) left the bf16 kernel
 * waiting on memory at 0.86 of the copy ceiling: bf16 has twice fp32's
 * arithmetic per byte, and nothing was in flight during it. Each step of
 * the grid reads coalesced runs of g and u. */
#define FUSED_THREADS 256
#define FUSED_DEPTH 2
/* Vector counts under this use 32-bit indices (cheap division by the
 * vectors per row); the margin keeps prefetch indices, which run up to
 * FUSED_DEPTH grid strides past the end, from wrapping. Larger tensors take
 * 64-bit indices. */
#define FUSED_INDEX32_MAX ((int64_t)INT32_MAX)

/* The reference's expression, operation for operation. */
__device__ __forceinline__ float silu_f32(float g)
{
	return __fdiv_rn(g, 1.0f + expf(-g));
}

/* With 16-bit storage the result is rounded to 2^-9 (bf16) or 2^-12 (fp16)
 * relative, so the fast exp and division (__expf within 2 + floor(1.173|x|)
 * ulp, __fdividef within 2 ulp) change nothing visible, while the accurate
 * pair made the bf16 kernel instruction-bound: 0.70 of the copy ceiling on
 * the H200 against 1.02 for fp32, which has half the elements per byte. The
 * fused kernel uses them for fp16 and bf16 only; swiglu.c derives that
 * tolerance. */
__device__ __forceinline__ float silu_fast_f32(float g)
{
	return __fdividef(g, 1.0f + __expf(-g));
}

template <typename T> __device__ __forceinline__ float fused_silu(float g)
{
	return silu_fast_f32(g);
}

template <> __device__ __forceinline__ float fused_silu<float>(float g)
{
	return silu_f32(g);
}

/* Output vector i of the flat [T*F] output sits at element i*VEC of y and,
 * with row = i / (F/VEC), at element i*VEC + row*F of gu (the g half; u is
 * F further). F is a whole number of vectors, so a vector never straddles a
 * row or a half. IDX is uint32_t when every vector index fits. */
/* Loads stay packed in the storage dtype until used (widened at load time
 * they took 64 registers). */
template <typename T, int VEC, typename IDX>
__device__ __forceinline__ void fused_load(mb_vec<T, VEC> &g, mb_vec<T, VEC> &u, const T *__restrict__ gu,
	IDX i, IDX row_vecs, int64_t f)
{
	const IDX row = i / row_vecs;
	const T *src = gu + (int64_t)i * VEC + (int64_t)row * f;
	g = *reinterpret_cast<const mb_vec<T, VEC> *>(src);
	u = *reinterpret_cast<const mb_vec<T, VEC> *>(src + f);
}

template <typename T, int VEC, typename IDX>
__global__ void __launch_bounds__(FUSED_THREADS) mb_swiglu_fused_kernel(const T *__restrict__ gu,
	T *__restrict__ y, IDX nvec, IDX row_vecs, int64_t f)
{
	typedef mb_vec<T, VEC> vec_t;
	const IDX stride = (IDX)gridDim.x * FUSED_THREADS;
	const IDX first = (IDX)blockIdx.x * FUSED_THREADS + threadIdx.x;
	vec_t g[FUSED_DEPTH], u[FUSED_DEPTH];
#pragma unroll
	for (int k = 0; k < FUSED_DEPTH; k++) {
		const IDX i = first + (IDX)k * stride;
		if (i < nvec)
			fused_load<T, VEC, IDX>(g[k], u[k], gu, i, row_vecs, f);
	}
	for (IDX base = first; base < nvec; base += (IDX)FUSED_DEPTH * stride) {
#pragma unroll
		for (int k = 0; k < FUSED_DEPTH; k++) {
			const IDX i = base + (IDX)k * stride, next = i + (IDX)FUSED_DEPTH * stride;
			const vec_t gk = g[k], uk = u[k];
			float out[VEC];
			if (i >= nvec)
				break;
			if (next < nvec)
				fused_load<T, VEC, IDX>(g[k], u[k], gu, next, row_vecs, f);
#pragma unroll
			for (int e = 0; e < VEC; e++)
				out[e] = fused_silu<T>(mb_to_f32<T>(gk.v[e])) * mb_to_f32<T>(uk.v[e]);
			mb_store_f32<T, VEC>(y + (int64_t)i * VEC, out);
		}
	}
}

template <typename T, int VEC, typename IDX>
static int fused_launch(cudaStream_t stream, const void *gu, void *y, int64_t tokens, int64_t f)
{
	/* resident blocks per SM, asked once per instantiation; the first call
	 * is never inside a graph capture (the harness warms up first) */
	static int per_sm;
	int device = 0, sms = 0;
	const int64_t nvec = tokens * (f / VEC);
	cudaError_t ce = cudaGetDevice(&device);
	if (ce == cudaSuccess)
		ce = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
	if (ce == cudaSuccess && per_sm == 0)
		ce = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, mb_swiglu_fused_kernel<T, VEC, IDX>,
			FUSED_THREADS, 0);
	if (ce != cudaSuccess)
		return (int)ce;
	int64_t blocks = (nvec + FUSED_THREADS - 1) / FUSED_THREADS;
	if (blocks > (int64_t)sms * per_sm)
		blocks = (int64_t)sms * per_sm;
	if (blocks < 1)
		blocks = 1;
	mb_swiglu_fused_kernel<T, VEC, IDX><<<(unsigned)blocks, FUSED_THREADS, 0, stream>>>(
		(const T *)gu, (T *)y, (IDX)nvec, (IDX)(f / VEC), f);
	return (int)cudaGetLastError();
}

template <typename T, int VEC>
static int fused_index(cudaStream_t stream, const void *gu, void *y, int64_t tokens, int64_t f)
{
	if (tokens * (f / VEC) <= FUSED_INDEX32_MAX)
		return fused_launch<T, VEC, uint32_t>(stream, gu, y, tokens, f);
	return fused_launch<T, VEC, uint64_t>(stream, gu, y, tokens, f);
}

template <typename T>
static int fused_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	constexpr int vec = mb_vec16_elems<T>();
	/* 16-byte accesses need aligned bases and F a whole number of vectors
	 * (so the u half and every row start aligned too); other shapes run
	 * the same kernel one element per access rather than failing. */
	if (mb_aligned16(in[0]) && mb_aligned16(out[0]) && axis[AX_F] % vec == 0)
		return fused_index<T, vec>(stream, in[0], out[0], axis[AX_T], axis[AX_F]);
	return fused_index<T, 1>(stream, in[0], out[0], axis[AX_T], axis[AX_F]);
}

extern "C" MB_DECLARE_LAUNCH(mb_swiglu_fused_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fused_dispatch, (cudaStream_t)stream, axis, in, out);
}

/* ---- fallback: silu(g) into a temporary, then temporary * u --------------- */

/* Both steps are a framework's vectorized elementwise kernel (vec.cuh's
 * flat launch) over the T*F outputs: 16-byte accesses when the bases and
 * F allow them (then a vector never straddles a row or a half), else one
 * element per access; MB_FLAT_VECS loads in flight per thread, blocks that
 * cover the data once. Output vector i sits at element i*VEC of y and, with
 * row = i / (F/VEC), at element i*VEC + row*F of gu (the g half; u is F
 * further): the strided view's offset, as a framework's indexer computes
 * it. IDX is uint32_t when every offset fits (vec.cuh: mb_index32_fits). */

/* Fallback step 1: silu of the g half, stored in the case dtype (the
 * rounding the tolerance's second u_d pays for). */
template <typename T, int VEC, typename IDX>
__global__ void __launch_bounds__(MB_FLAT_THREADS) mb_swiglu_fallback_silu_kernel(const T *__restrict__ gu,
	T *__restrict__ s, IDX nvec, IDX row_vecs, IDX f)
{
	mb_packed<T, VEC> g[MB_FLAT_VECS];
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const IDX i = mb_flat_index<IDX>(k);
		if (i < nvec)
			g[k].load(gu + i * VEC + i / row_vecs * f);
	}
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const IDX i = mb_flat_index<IDX>(k);
		if (i < nvec) {
			float out[VEC];
#pragma unroll
			for (int e = 0; e < VEC; e++)
				out[e] = silu_f32(g[k].get(e));
			mb_store_f32<T, VEC>(s + i * VEC, out);
		}
	}
}

/* Fallback step 2: y = s * u, in place over the stored silu. */
template <typename T, int VEC, typename IDX>
__global__ void __launch_bounds__(MB_FLAT_THREADS) mb_swiglu_fallback_mul_kernel(const T *__restrict__ gu,
	T *__restrict__ y, IDX nvec, IDX row_vecs, IDX f)
{
	mb_packed<T, VEC> a[MB_FLAT_VECS], u[MB_FLAT_VECS];
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const IDX i = mb_flat_index<IDX>(k);
		if (i < nvec) {
			a[k].load(y + i * VEC);
			u[k].load(gu + i * VEC + i / row_vecs * f + f);
		}
	}
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const IDX i = mb_flat_index<IDX>(k);
		if (i < nvec) {
			float out[VEC];
#pragma unroll
			for (int e = 0; e < VEC; e++)
				out[e] = a[k].get(e) * u[k].get(e);
			mb_store_f32<T, VEC>(y + i * VEC, out);
		}
	}
}

template <typename T, int VEC, typename IDX>
static int fallback_launch(cudaStream_t stream, const T *gu, T *y, int64_t tokens, int64_t f)
{
	const int64_t nvec = tokens * (f / VEC);
	const unsigned blocks = mb_flat_blocks(nvec);
	if (blocks == 0)
		return (int)cudaErrorInvalidValue;
	mb_swiglu_fallback_silu_kernel<T, VEC, IDX><<<blocks, MB_FLAT_THREADS, 0, stream>>>(gu, y, (IDX)nvec,
		(IDX)(f / VEC), (IDX)f);
	cudaError_t ce = cudaGetLastError();
	if (ce != cudaSuccess)
		return (int)ce;
	mb_swiglu_fallback_mul_kernel<T, VEC, IDX><<<blocks, MB_FLAT_THREADS, 0, stream>>>(gu, y, (IDX)nvec,
		(IDX)(f / VEC), (IDX)f);
	return (int)cudaGetLastError();
}

template <typename T, int VEC>
static int fallback_index(cudaStream_t stream, const T *gu, T *y, int64_t tokens, int64_t f)
{
	if (mb_index32_fits(tokens * 2 * f))
		return fallback_launch<T, VEC, uint32_t>(stream, gu, y, tokens, f);
	return fallback_launch<T, VEC, uint64_t>(stream, gu, y, tokens, f);
}

template <typename T>
static int fallback_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	constexpr int vec = mb_vec16_elems<T>();
	const T *gu = (const T *)in[0];
	T *y = (T *)out[0];
	if (mb_aligned16(gu) && mb_aligned16(y) && axis[AX_F] % vec == 0)
		return fallback_index<T, vec>(stream, gu, y, axis[AX_T], axis[AX_F]);
	return fallback_index<T, 1>(stream, gu, y, axis[AX_T], axis[AX_F]);
}

/* The plain path a framework runs for silu(gu[:, :F]) * gu[:, F:]: a silu
 * launch on the strided g view into a temporary, then a multiply launch:
 * two launches, the temporary written and read back once. y doubles as the
 * temporary (same bytes as a separate buffer, no allocation in the timed
 * call). */
extern "C" MB_DECLARE_LAUNCH(mb_swiglu_fallback_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fallback_dispatch, (cudaStream_t)stream, axis, in, out);
}
