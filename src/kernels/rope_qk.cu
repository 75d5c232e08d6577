/* rope_qk: rotate-half rotary embedding of Q and K.
 *
 * q[T,Hq,D], k[T,Hk,D], cos[T,D/2], sin[T,D/2] -> q_out, k_out, with, for
 * i < D/2:  out[i]       = x[i] * cos[i] - x[i + D/2] * sin[i]
 *           out[i + D/2] = x[i + D/2] * cos[i] + x[i] * sin[i]
 * Math in fp32, storage in the case dtype. Axes, in catalog order:
 * T, Hq, Hk, D.
 */
#include "kernels/launch.h"
#include "kernels/vec.cuh"

enum { AX_T, AX_HQ, AX_HK, AX_D };

#define FUSED_THREADS 256

/* Round VEC floats to T and store them as one 16-byte access when they
 * fill one. Through mb_store_f32, nvcc 13 emitted one of this kernel's two
 * stores (o and o + half) as 2- or 4-byte pieces (PTX st.global.u16 /
 * .f32): eight or four store instructions where one will do. A plain
 * uint4 or float4 store was split the same way, and which of the two
 * depended on unrelated hints, so the vector goes through __stwb (the
 * default write-back policy, as an ordinary store), which the compiler
 * emits as one st.global.wb.v4 and leaves alone. */
__device__ __forceinline__ unsigned pack2(__nv_bfloat16, float a, float b)
{
	return (unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(a)) |
		((unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(b)) << 16);
}

__device__ __forceinline__ unsigned pack2(__half, float a, float b)
{
	return (unsigned)__half_as_ushort(__float2half_rn(a)) | ((unsigned)__half_as_ushort(__float2half_rn(b)) << 16);
}

template <typename T, int VEC>
__device__ __forceinline__ void store_vec(T *p, const float (&v)[VEC])
{
	if constexpr (VEC * sizeof(T) != MB_VEC_BYTES) {
		mb_store_f32<T, VEC>(p, v);
	} else if constexpr (sizeof(T) == sizeof(float)) {
		__stwb(reinterpret_cast<float4 *>(p), make_float4(v[0], v[1], v[2], v[3]));
	} else {
		__stwb(reinterpret_cast<uint4 *>(p), make_uint4(pack2(T(), v[0], v[1]), pack2(T(), v[2], v[3]),
			pack2(T(), v[4], v[5]), pack2(T(), v[6], v[7])));
	}
}

/* One block per token. threadIdx.x picks a vector of the lower half,
 * threadIdx.y walks the heads of Q then K, so each thread loads its cos and
 * sin once and applies them to every head it visits. The host sizes
 * blockDim.y so that every thread visits the same number of heads. */
template <typename T, int VEC>
__global__ void __launch_bounds__(FUSED_THREADS) mb_rope_qk_fused_kernel(const T *__restrict__ q,
	const T *__restrict__ k, const T *__restrict__ cos_t, const T *__restrict__ sin_t,
	T *__restrict__ q_out, T *__restrict__ k_out, int hq, int hk, int d)
{
	const int64_t t = blockIdx.x;
	const int half = d / 2;
	const int nvec = half / VEC;
	const int heads = hq + hk;
	for (int j = threadIdx.x; j < nvec; j += blockDim.x) {
		float c[VEC], s[VEC];
		mb_load_f32<T, VEC>(c, cos_t + t * half + (int64_t)j * VEC);
		mb_load_f32<T, VEC>(s, sin_t + t * half + (int64_t)j * VEC);
		for (int h = threadIdx.y; h < heads; h += blockDim.y) {
			const bool is_q = h < hq;
			const int64_t row = is_q ? t * hq + h : t * hk + (h - hq);
			const T *x = (is_q ? q : k) + row * d + (int64_t)j * VEC;
			T *o = (is_q ? q_out : k_out) + row * d + (int64_t)j * VEC;
			float lo[VEC], hi[VEC], out_lo[VEC], out_hi[VEC];
			mb_load_f32<T, VEC>(lo, x);
			mb_load_f32<T, VEC>(hi, x + half);
#pragma unroll
			for (int i = 0; i < VEC; i++) {
				out_lo[i] = lo[i] * c[i] - hi[i] * s[i];
				out_hi[i] = hi[i] * c[i] + lo[i] * s[i];
			}
			store_vec<T, VEC>(o, out_lo);
			store_vec<T, VEC>(o + half, out_hi);
		}
	}
}

template <typename T, int VEC>
static int fused_launch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	const int hq = (int)axis[AX_HQ], hk = (int)axis[AX_HK], d = (int)axis[AX_D];
	const int nvec = d / 2 / VEC, heads = hq + hk;
	dim3 block(nvec < FUSED_THREADS ? (unsigned)nvec : FUSED_THREADS, 1, 1);
	/* The fewest passes over the heads that the thread budget allows, then
	 * the fewest rows of threads that finish them in that many passes.
	 * Filling the budget instead (32 rows at D 128 bf16) gives Hq 64 + Hk 8
	 * = 72 heads 3 passes in two warps and 2 in the other six, the block
	 * held for 3; 24 rows give every warp 3 (40 heads: 20 rows, 2 each). */
	const int rows_max = FUSED_THREADS / (int)block.x;
	const int passes = (heads + rows_max - 1) / rows_max;
	block.y = (unsigned)((heads + passes - 1) / passes);
	mb_rope_qk_fused_kernel<T, VEC><<<(unsigned)axis[AX_T], block, 0, stream>>>(
		(const T *)in[0], (const T *)in[1], (const T *)in[2], (const T *)in[3],
		(T *)out[0], (T *)out[1], hq, hk, d);
	return (int)cudaGetLastError();
}

template <typename T>
static int fused_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	constexpr int vec = mb_vec16_elems<T>();
	bool aligned = true;
	for (int i = 0; i < 4; i++)
		aligned = aligned && mb_aligned16(in[i]);
	aligned = aligned && mb_aligned16(out[0]) && mb_aligned16(out[1]);
	/* 16-byte accesses need the half dimension to be whole vectors; odd
	 * sizes take the scalar path rather than failing. */
	if (aligned && (axis[AX_D] / 2) % vec == 0)
		return fused_launch<T, vec>(stream, axis, in, out);
	return fused_launch<T, 1>(stream, axis, in, out);
}

extern "C" MB_DECLARE_LAUNCH(mb_rope_qk_fused_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fused_dispatch, (cudaStream_t)stream, axis, in, out);
}

/* Fallback step 1: out = rotate_half(x), i.e. (-x[D/2:], x[:D/2]).
 * Negation and copying are exact in every dtype. */
template <typename T>
__global__ void mb_rope_rotate_half_kernel(const T *__restrict__ x, T *__restrict__ out, int64_t n, int d)
{
	const int half = d / 2;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		const int col = (int)(i % d);
		out[i] = col < half ? mb_from_f32<T>(-mb_to_f32<T>(x[i + half])) : x[i - half];
	}
}

/* Fallback step 2: out = x * cos + out * sin, in place over the rotated
 * copy. */
template <typename T>
__global__ void mb_rope_mul_add_kernel(const T *__restrict__ x, const T *__restrict__ cos_t,
	const T *__restrict__ sin_t, T *out, int64_t n, int heads, int d)
{
	const int half = d / 2;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		const int64_t t = i / ((int64_t)heads * d);
		const int64_t cs = t * half + (i % d) % half;
		out[i] = mb_from_f32<T>(mb_to_f32<T>(x[i]) * mb_to_f32<T>(cos_t[cs]) +
			mb_to_f32<T>(out[i]) * mb_to_f32<T>(sin_t[cs]));
	}
}

template <typename T>
static int fallback_one(cudaStream_t stream, const T *x, const T *cos_t, const T *sin_t, T *out,
	int64_t tokens, int heads, int d)
{
	const int64_t n = tokens * heads * d;
	const unsigned blocks = mb_elemwise_blocks(n);
	mb_rope_rotate_half_kernel<T><<<blocks, MB_ELEMWISE_THREADS, 0, stream>>>(x, out, n, d);
	cudaError_t ce = cudaGetLastError();
	if (ce != cudaSuccess)
		return (int)ce;
	mb_rope_mul_add_kernel<T><<<blocks, MB_ELEMWISE_THREADS, 0, stream>>>(x, cos_t, sin_t, out, n, heads, d);
	return (int)cudaGetLastError();
}

template <typename T>
static int fallback_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	const T *cos_t = (const T *)in[2], *sin_t = (const T *)in[3];
	int rc = fallback_one<T>(stream, (const T *)in[0], cos_t, sin_t, (T *)out[0], axis[AX_T],
		(int)axis[AX_HQ], (int)axis[AX_D]);
	if (rc == 0)
		rc = fallback_one<T>(stream, (const T *)in[1], cos_t, sin_t, (T *)out[1], axis[AX_T],
			(int)axis[AX_HK], (int)axis[AX_D]);
	return rc;
}

/* The plain path: Q and K separately, each as rotate-half then multiply-add:
 * four launches, the output written twice and read once more. */
extern "C" MB_DECLARE_LAUNCH(mb_rope_qk_fallback_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fallback_dispatch, (cudaStream_t)stream, axis, in, out);
}
