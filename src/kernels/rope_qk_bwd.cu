/* rope_qk_bwd: the backward of rotate-half RoPE on Q and K.
 *
 * The forward rotates each pair (x[i], x[i + D/2]) by the angle whose cosine
 * and sine are cos[i], sin[i]; its Jacobian is that rotation, so the
 * gradient is the transposed rotation (by minus the angle): for i < D/2,
 *   dx[i]       = dy[i] * cos[i] + dy[i + D/2] * sin[i]
 *   dx[i + D/2] = dy[i + D/2] * cos[i] - dy[i] * sin[i]
 * in dq_out[T,Hq,D], dk_out[T,Hk,D], cos[T,D/2], sin[T,D/2]; out dq, dk.
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

/* One block per token, laid out as the forward's fused kernel (rope_qk.cu):
 * threadIdx.x picks a vector of the lower half, threadIdx.y walks the heads
 * of dQ then dK, each thread loading its cos and sin once for every head it
 * visits; the host sizes blockDim.y so that every thread visits the same
 * number of heads. */
template <typename T, int VEC>
__global__ void __launch_bounds__(FUSED_THREADS) mb_rope_qk_bwd_fused_kernel(const T *__restrict__ dq_out,
	const T *__restrict__ dk_out, const T *__restrict__ cos_t, const T *__restrict__ sin_t,
	T *__restrict__ dq, T *__restrict__ dk, int hq, int hk, int d)
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
			const T *g = (is_q ? dq_out : dk_out) + row * d + (int64_t)j * VEC;
			T *o = (is_q ? dq : dk) + row * d + (int64_t)j * VEC;
			float lo[VEC], hi[VEC], out_lo[VEC], out_hi[VEC];
			mb_load_f32<T, VEC>(lo, g);
			mb_load_f32<T, VEC>(hi, g + half);
#pragma unroll
			for (int i = 0; i < VEC; i++) {
				out_lo[i] = lo[i] * c[i] + hi[i] * s[i];
				out_hi[i] = hi[i] * c[i] - lo[i] * s[i];
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
	/* The fewest passes over the heads the thread budget allows, then the
	 * fewest rows of threads that finish them in that many passes, so no
	 * warp idles while another makes an extra pass (72 heads at D 128
	 * bf16: 24 rows, 3 passes each; 40 heads: 20 rows, 2 each). */
	const int rows_max = FUSED_THREADS / (int)block.x;
	const int passes = (heads + rows_max - 1) / rows_max;
	block.y = (unsigned)((heads + passes - 1) / passes);
	mb_rope_qk_bwd_fused_kernel<T, VEC><<<(unsigned)axis[AX_T], block, 0, stream>>>(
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
	/* 16-byte accesses need the half dimension to be whole vectors (which
	 * also keeps every row 16-byte aligned); other sizes take the scalar
	 * path rather than failing. */
	if (aligned && (axis[AX_D] / 2) % vec == 0)
		return fused_launch<T, vec>(stream, axis, in, out);
	return fused_launch<T, 1>(stream, axis, in, out);
}

extern "C" MB_DECLARE_LAUNCH(mb_rope_qk_bwd_fused_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fused_dispatch, (cudaStream_t)stream, axis, in, out);
}

/* Fallback step 1: out = rotate_half^T(g) = (g[D/2:], -g[:D/2]), the
 * backward of the forward's rotate_half (which is (-x[D/2:], x[:D/2])).
 * Negation and copying are exact in every dtype. */
template <typename T>
__global__ void mb_rope_qk_bwd_fallback_rotate_half_t_kernel(const T *__restrict__ g, T *__restrict__ out, int64_t n,
	int d)
{
	const int half = d / 2;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		const int col = (int)(i % d);
		out[i] = col < half ? g[i + half] : mb_from_f32<T>(-mb_to_f32<T>(g[i - half]));
	}
}

/* Fallback step 2: out = g * cos + out * sin, in place over the rotated
 * copy. */
template <typename T>
__global__ void mb_rope_qk_bwd_fallback_mul_add_kernel(const T *__restrict__ g, const T *__restrict__ cos_t,
	const T *__restrict__ sin_t, T *out, int64_t n, int heads, int d)
{
	const int half = d / 2;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		const int64_t t = i / ((int64_t)heads * d);
		const int64_t cs = t * half + (i % d) % half;
		out[i] = mb_from_f32<T>(mb_to_f32<T>(g[i]) * mb_to_f32<T>(cos_t[cs]) +
			mb_to_f32<T>(out[i]) * mb_to_f32<T>(sin_t[cs]));
	}
}

template <typename T>
static int fallback_one(cudaStream_t stream, const T *g, const T *cos_t, const T *sin_t, T *out,
	int64_t tokens, int heads, int d)
{
	const int64_t n = tokens * heads * d;
	const unsigned blocks = mb_elemwise_blocks(n);
	mb_rope_qk_bwd_fallback_rotate_half_t_kernel<T><<<blocks, MB_ELEMWISE_THREADS, 0, stream>>>(g, out, n, d);
	cudaError_t ce = cudaGetLastError();
	if (ce != cudaSuccess)
		return (int)ce;
	mb_rope_qk_bwd_fallback_mul_add_kernel<T><<<blocks, MB_ELEMWISE_THREADS, 0, stream>>>(g, cos_t, sin_t, out, n,
		heads, d);
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

/* The plain path, shaped as the forward's fallback (what autograd runs
 * through x * cos + rotate_half(x) * sin, with the sin product moved after
 * the exact rotate): dQ and dK separately, each as the transposed
 * rotate-half into the output then a multiply-add over it: four launches,
 * the gradient written twice and read once more. */
extern "C" MB_DECLARE_LAUNCH(mb_rope_qk_bwd_fallback_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fallback_dispatch, (cudaStream_t)stream, axis, in, out);
}
