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

/* Fused: each thread takes FUSED_VECS_PER_THREAD output vectors and loads
 * both halves of each before it computes (128 bytes in flight per thread).
 * One block covers FUSED_THREADS * FUSED_VECS_PER_THREAD consecutive output
 * vectors; each unrolled step reads a coalesced 4 KB run of g and of u. */
#define FUSED_THREADS 256
#define FUSED_VECS_PER_THREAD 4
#define FUSED_VECS_PER_BLOCK (FUSED_THREADS * FUSED_VECS_PER_THREAD)
/* Vector counts under this use 32-bit indices (cheap division by the
 * vectors per row); the margin keeps the last block's indices from
 * wrapping. Larger tensors take 64-bit indices. */
#define FUSED_INDEX32_MAX ((int64_t)INT32_MAX - FUSED_VECS_PER_BLOCK)

/* Fallback: plain scalar kernels, one thread per column of a row; rows
 * beyond the grid's y limit (65535 blocks) wrap around with a stride. */
#define FALLBACK_MAX_ROW_BLOCKS 65535u

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
template <typename T, int VEC, typename IDX>
__global__ void __launch_bounds__(FUSED_THREADS) mb_swiglu_fused_kernel(const T *__restrict__ gu,
	T *__restrict__ y, IDX nvec, IDX row_vecs, int64_t f)
{
	const IDX first = (IDX)blockIdx.x * FUSED_VECS_PER_BLOCK + threadIdx.x;
	float g[FUSED_VECS_PER_THREAD][VEC], u[FUSED_VECS_PER_THREAD][VEC];
#pragma unroll
	for (int k = 0; k < FUSED_VECS_PER_THREAD; k++) {
		const IDX i = first + (IDX)k * FUSED_THREADS;
		if (i < nvec) {
			const IDX row = i / row_vecs;
			const T *src = gu + (int64_t)i * VEC + (int64_t)row * f;
			mb_load_f32<T, VEC>(g[k], src);
			mb_load_f32<T, VEC>(u[k], src + f);
		}
	}
#pragma unroll
	for (int k = 0; k < FUSED_VECS_PER_THREAD; k++) {
		const IDX i = first + (IDX)k * FUSED_THREADS;
		if (i < nvec) {
#pragma unroll
			for (int e = 0; e < VEC; e++)
				g[k][e] = fused_silu<T>(g[k][e]) * u[k][e];
			mb_store_f32<T, VEC>(y + (int64_t)i * VEC, g[k]);
		}
	}
}

template <typename T, int VEC, typename IDX>
static int fused_launch(cudaStream_t stream, const void *gu, void *y, int64_t tokens, int64_t f)
{
	const int64_t nvec = tokens * (f / VEC);
	const int64_t blocks = (nvec + FUSED_VECS_PER_BLOCK - 1) / FUSED_VECS_PER_BLOCK;
	if (blocks > INT_MAX)
		return (int)cudaErrorInvalidValue;
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

/* Fallback step 1: silu of the g half, stored in the case dtype (the
 * rounding the tolerance's second u_d pays for). */
template <typename T>
__global__ void mb_swiglu_fallback_silu_kernel(const T *__restrict__ gu, T *__restrict__ s,
	int64_t tokens, int64_t f)
{
	for (int64_t t = blockIdx.y; t < tokens; t += gridDim.y) {
		for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < f;
		     j += (int64_t)gridDim.x * blockDim.x)
			s[t * f + j] = mb_from_f32<T>(silu_f32(mb_to_f32<T>(gu[t * 2 * f + j])));
	}
}

/* Fallback step 2: y = s * u, in place over the stored silu. */
template <typename T>
__global__ void mb_swiglu_fallback_mul_kernel(const T *__restrict__ gu, T *y, int64_t tokens, int64_t f)
{
	for (int64_t t = blockIdx.y; t < tokens; t += gridDim.y) {
		for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < f;
		     j += (int64_t)gridDim.x * blockDim.x)
			y[t * f + j] = mb_from_f32<T>(mb_to_f32<T>(y[t * f + j]) * mb_to_f32<T>(gu[t * 2 * f + f + j]));
	}
}

template <typename T>
static int fallback_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	const int64_t tokens = axis[AX_T], f = axis[AX_F];
	const T *gu = (const T *)in[0];
	T *y = (T *)out[0];
	dim3 grid(mb_elemwise_blocks(f), tokens < FALLBACK_MAX_ROW_BLOCKS ? (unsigned)tokens : FALLBACK_MAX_ROW_BLOCKS);
	mb_swiglu_fallback_silu_kernel<T><<<grid, MB_ELEMWISE_THREADS, 0, stream>>>(gu, y, tokens, f);
	cudaError_t ce = cudaGetLastError();
	if (ce != cudaSuccess)
		return (int)ce;
	mb_swiglu_fallback_mul_kernel<T><<<grid, MB_ELEMWISE_THREADS, 0, stream>>>(gu, y, tokens, f);
	return (int)cudaGetLastError();
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
