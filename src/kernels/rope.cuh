/* Rotate-half RoPE on Q and K, forward and backward: the device bodies and
 * the launch plumbing that rope_qk.cu and rope_qk_bwd.cu share.
 *
 * The forward maps each pair (x1, x2) = (x[i], x[i + D/2]) through
 * [[c, -s], [s, c]]; the backward (the gradient) goes through its transpose
 * [[c, s], [-s, c]], which is the forward with sin negated. SIN_SIGN picks
 * the direction: ROPE_FWD (+1) or ROPE_BWD (-1):
 *   out[i]       = x1 * cos[i] - x2 * (SIN_SIGN * sin[i])
 *   out[i + D/2] = x2 * cos[i] + x1 * (SIN_SIGN * sin[i])
 * Both rows take in x_q[T,Hq,D], x_k[T,Hk,D], cos[T,D/2], sin[T,D/2] and
 * write out_q, out_k; math in fp32, storage in the case dtype.
 *
 * The __global__ kernels stay in the two .cu files, each a one-line call
 * of a body here, because their names are what the catalog's
 * kernel_patterns match (as substrings of the names CUPTI reports); the
 * launchers here take those kernels as arguments. */
#ifndef MB_KERNELS_ROPE_CUH
#define MB_KERNELS_ROPE_CUH

#include "kernels/launch.h"
#include "kernels/vec.cuh"

enum { ROPE_FWD = 1, ROPE_BWD = -1 };

/* The axes of both rows, in catalog order. */
enum { ROPE_AX_T, ROPE_AX_HQ, ROPE_AX_HK, ROPE_AX_D };

#define ROPE_FUSED_THREADS 256

/* sin[i] times SIN_SIGN, exactly: negation folds into the multiply that
 * uses it, so both directions compile to the same instructions as the
 * expressions written out. */
template <int SIN_SIGN>
__device__ __forceinline__ float rope_signed(float s)
{
	static_assert(SIN_SIGN == ROPE_FWD || SIN_SIGN == ROPE_BWD, "SIN_SIGN is ROPE_FWD or ROPE_BWD");
	return SIN_SIGN == ROPE_FWD ? s : -s;
}

/* Round VEC floats to T and store them as one 16-byte access when they
 * fill one. Through mb_store_f32, nvcc 13 emitted one of the fused
 * kernel's two stores (o and o + half) as 2- or 4-byte pieces (PTX
 * st.global.u16 / .f32): eight or four store instructions where one will
 * do. A plain uint4 or float4 store was split the same way, and which of
 * the two depended on unrelated hints, so the vector goes through __stwb
 * (the default write-back policy, as an ordinary store), which the
 * compiler emits as one st.global.wb.v4 and leaves alone. */
__device__ __forceinline__ unsigned rope_pack2(__nv_bfloat16, float a, float b)
{
	return (unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(a)) |
		((unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(b)) << 16);
}

__device__ __forceinline__ unsigned rope_pack2(__half, float a, float b)
{
	return (unsigned)__half_as_ushort(__float2half_rn(a)) | ((unsigned)__half_as_ushort(__float2half_rn(b)) << 16);
}

template <typename T, int VEC>
__device__ __forceinline__ void rope_store_vec(T *p, const float (&v)[VEC])
{
	if constexpr (VEC * sizeof(T) != MB_VEC_BYTES) {
		mb_store_f32<T, VEC>(p, v);
	} else if constexpr (sizeof(T) == sizeof(float)) {
		__stwb(reinterpret_cast<float4 *>(p), make_float4(v[0], v[1], v[2], v[3]));
	} else {
		__stwb(reinterpret_cast<uint4 *>(p), make_uint4(rope_pack2(T(), v[0], v[1]), rope_pack2(T(), v[2], v[3]),
			rope_pack2(T(), v[4], v[5]), rope_pack2(T(), v[6], v[7])));
	}
}

/* The fused kernels' body. One block per token. threadIdx.x picks a
 * vector of the lower half, threadIdx.y walks the heads of Q then K, so
 * each thread loads its cos and sin once and applies them to every head it
 * visits. The host sizes blockDim.y so that every thread visits the same
 * number of heads. */
template <int SIN_SIGN, typename T, int VEC>
__device__ __forceinline__ void rope_fused_body(const T *__restrict__ x_q, const T *__restrict__ x_k,
	const T *__restrict__ cos_t, const T *__restrict__ sin_t, T *__restrict__ out_q, T *__restrict__ out_k,
	int hq, int hk, int d)
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
			const T *x = (is_q ? x_q : x_k) + row * d + (int64_t)j * VEC;
			T *o = (is_q ? out_q : out_k) + row * d + (int64_t)j * VEC;
			float lo[VEC], hi[VEC], out_lo[VEC], out_hi[VEC];
			mb_load_f32<T, VEC>(lo, x);
			mb_load_f32<T, VEC>(hi, x + half);
#pragma unroll
			for (int i = 0; i < VEC; i++) {
				out_lo[i] = lo[i] * c[i] - hi[i] * rope_signed<SIN_SIGN>(s[i]);
				out_hi[i] = hi[i] * c[i] + lo[i] * rope_signed<SIN_SIGN>(s[i]);
			}
			rope_store_vec<T, VEC>(o, out_lo);
			rope_store_vec<T, VEC>(o + half, out_hi);
		}
	}
}

/* A fused kernel: (x_q, x_k, cos, sin, out_q, out_k, hq, hk, d). */
template <typename T>
using rope_fused_kernel_fn = void (*)(const T *, const T *, const T *, const T *, T *, T *, int, int, int);

template <typename T>
static int rope_fused_launch(rope_fused_kernel_fn<T> kernel, int vec, cudaStream_t stream, const int64_t *axis,
	const void *const *in, void *const *out)
{
	const int hq = (int)axis[ROPE_AX_HQ], hk = (int)axis[ROPE_AX_HK], d = (int)axis[ROPE_AX_D];
	const int nvec = d / 2 / vec, heads = hq + hk;
	dim3 block(nvec < ROPE_FUSED_THREADS ? (unsigned)nvec : ROPE_FUSED_THREADS, 1, 1);
	/* The fewest passes over the heads that the thread budget allows, then
	 * the fewest rows of threads that finish them in that many passes.
	 * Filling the budget instead (32 rows at D 128 bf16) gives Hq 64 + Hk 8
	 * = 72 heads 3 passes in two warps and 2 in the other six, the block
	 * held for 3; 24 rows give every warp 3 (40 heads: 20 rows, 2 each). */
	const int rows_max = ROPE_FUSED_THREADS / (int)block.x;
	const int passes = (heads + rows_max - 1) / rows_max;
	block.y = (unsigned)((heads + passes - 1) / passes);
	kernel<<<(unsigned)axis[ROPE_AX_T], block, 0, stream>>>((const T *)in[0], (const T *)in[1],
		(const T *)in[2], (const T *)in[3], (T *)out[0], (T *)out[1], hq, hk, d);
	return (int)cudaGetLastError();
}

/* Launches vec_kernel (16-byte accesses, mb_vec16_elems<T>() per vector)
 * or scalar_kernel (one element per vector). */
template <typename T>
static int rope_fused_dispatch(rope_fused_kernel_fn<T> vec_kernel, rope_fused_kernel_fn<T> scalar_kernel,
	cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	constexpr int vec = mb_vec16_elems<T>();
	bool aligned = true;
	for (int i = 0; i < 4; i++)
		aligned = aligned && mb_aligned16(in[i]);
	aligned = aligned && mb_aligned16(out[0]) && mb_aligned16(out[1]);
	/* 16-byte accesses need the half dimension to be whole vectors (which
	 * also keeps every row 16-byte aligned); other sizes take the scalar
	 * path rather than failing. */
	if (aligned && (axis[ROPE_AX_D] / 2) % vec == 0)
		return rope_fused_launch<T>(vec_kernel, vec, stream, axis, in, out);
	return rope_fused_launch<T>(scalar_kernel, 1, stream, axis, in, out);
}

/* ---- the fallback: rotate-half into the output, then a multiply-add ----- */

/* Each step is a framework's vectorized elementwise kernel (vec.cuh's flat
 * launch) over one tensor's T*heads*D elements: 16-byte accesses when every
 * base is aligned and D/2 is whole vectors (then no vector straddles the
 * halves), else one element per access; MB_FLAT_VECS vectors per thread,
 * their loads issued before the first is used; blocks that cover the
 * tensor once. IDX is uint32_t when every offset fits (mb_index32_fits):
 * the (row, column) of a vector takes a division by D per vector. */

/* Fallback step 1's body: out = rotate_half(x) = (-x[D/2:], x[:D/2]) for
 * the forward, its transpose (x[D/2:], -x[:D/2]) for the backward.
 * Negation and copying are exact in every dtype. */
template <bool NEG, typename T>
__device__ __forceinline__ T rope_neg_if(T v)
{
	if constexpr (NEG)
		return mb_from_f32<T>(-mb_to_f32<T>(v));
	else
		return v;
}

template <int SIN_SIGN, typename T, int VEC, typename IDX>
__device__ __forceinline__ void rope_rotate_half_body(const T *__restrict__ x, T *__restrict__ out, IDX n, IDX d)
{
	const IDX half = d / 2, nvec = n / VEC;
	mb_vec<T, VEC> v[MB_FLAT_VECS];
	bool lower[MB_FLAT_VECS];
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const IDX i = mb_flat_index<IDX>(k), e = i * VEC;
		lower[k] = e % d < half;
		if (i < nvec)
			v[k] = *reinterpret_cast<const mb_vec<T, VEC> *>(x + (lower[k] ? e + half : e - half));
	}
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const IDX i = mb_flat_index<IDX>(k);
		if (i < nvec) {
#pragma unroll
			for (int j = 0; j < VEC; j++)
				v[k].v[j] = lower[k] ? rope_neg_if<SIN_SIGN == ROPE_FWD>(v[k].v[j])
						     : rope_neg_if<SIN_SIGN == ROPE_BWD>(v[k].v[j]);
			*reinterpret_cast<mb_vec<T, VEC> *>(out + i * VEC) = v[k];
		}
	}
}

/* Fallback step 2's body: out = x * cos + out * sin, in place over the
 * rotated copy; the same in both directions. The cos/sin vector of element
 * e is at t * D/2 + (e % D) % (D/2), t = e / (heads * D): one per token,
 * shared by its heads, so after the first head it comes from cache. */
template <typename T, int VEC, typename IDX>
__device__ __forceinline__ void rope_mul_add_body(const T *__restrict__ x, const T *__restrict__ cos_t,
	const T *__restrict__ sin_t, T *__restrict__ out, IDX n, IDX heads, IDX d)
{
	const IDX half = d / 2, nvec = n / VEC;
	mb_packed<T, VEC> xv[MB_FLAT_VECS], ov[MB_FLAT_VECS], cv[MB_FLAT_VECS], sv[MB_FLAT_VECS];
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const IDX i = mb_flat_index<IDX>(k), e = i * VEC;
		if (i < nvec) {
			const IDX row = e / d, col = e - row * d;
			const IDX cs = row / heads * half + (col < half ? col : col - half);
			xv[k].load(x + e);
			ov[k].load(out + e);
			cv[k].load(cos_t + cs);
			sv[k].load(sin_t + cs);
		}
	}
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const IDX i = mb_flat_index<IDX>(k);
		if (i < nvec) {
			float y[VEC];
#pragma unroll
			for (int j = 0; j < VEC; j++)
				y[j] = xv[k].get(j) * cv[k].get(j) + ov[k].get(j) * sv[k].get(j);
			mb_store_f32<T, VEC>(out + i * VEC, y);
		}
	}
}

/* The fallback's kernels, each a .cu file's template <T, VEC, IDX>: step 1
 * (x, out, n, d) and step 2 (x, cos, sin, out, n, heads, d), with n the
 * tensor's elements. */
template <typename T>
using rope_rotate_kernel_fn = void (*)(const T *, T *, int64_t, int64_t);
template <typename T>
using rope_mul_add_kernel_fn = void (*)(const T *, const T *, const T *, T *, int64_t, int64_t, int64_t);

/* Every instantiation a dispatch may pick: [16-byte vectors][64-bit
 * indices]. */
template <typename T> struct rope_fallback_kernels {
	rope_rotate_kernel_fn<T> rotate[2][2];
	rope_mul_add_kernel_fn<T> mul_add[2][2];
};

/* A .cu file's table of its fallback kernels `rotate` and `mul_add`. */
#define ROPE_FALLBACK_KERNELS(T, rotate, mul_add) \
	rope_fallback_kernels<T> \
	{ \
		{{rotate<T, 1, uint32_t>, rotate<T, 1, uint64_t>}, \
			{rotate<T, mb_vec16_elems<T>(), uint32_t>, rotate<T, mb_vec16_elems<T>(), uint64_t>}}, \
		{{mul_add<T, 1, uint32_t>, mul_add<T, 1, uint64_t>}, \
			{mul_add<T, mb_vec16_elems<T>(), uint32_t>, mul_add<T, mb_vec16_elems<T>(), uint64_t>}}, \
	}

template <typename T>
static int rope_fallback_one(const rope_fallback_kernels<T> &k, bool vec, cudaStream_t stream, const T *x,
	const T *cos_t, const T *sin_t, T *out, int64_t tokens, int64_t heads, int64_t d)
{
	const int64_t n = tokens * heads * d;
	const unsigned blocks = mb_flat_blocks(n / (vec ? mb_vec16_elems<T>() : 1));
	const int wide = !mb_index32_fits(n);
	if (blocks == 0)
		return (int)cudaErrorInvalidValue;
	k.rotate[vec][wide]<<<blocks, MB_FLAT_THREADS, 0, stream>>>(x, out, n, d);
	cudaError_t ce = cudaGetLastError();
	if (ce != cudaSuccess)
		return (int)ce;
	k.mul_add[vec][wide]<<<blocks, MB_FLAT_THREADS, 0, stream>>>(x, cos_t, sin_t, out, n, heads, d);
	return (int)cudaGetLastError();
}

/* The plain path: Q and K separately, each as the rotate then the
 * multiply-add over it: four launches, the output written twice and read
 * once more. */
template <typename T>
static int rope_fallback_dispatch(const rope_fallback_kernels<T> &k, cudaStream_t stream, const int64_t *axis,
	const void *const *in, void *const *out)
{
	const T *cos_t = (const T *)in[2], *sin_t = (const T *)in[3];
	bool vec = (axis[ROPE_AX_D] / 2) % mb_vec16_elems<T>() == 0;
	for (int i = 0; i < 4; i++)
		vec = vec && mb_aligned16(in[i]);
	vec = vec && mb_aligned16(out[0]) && mb_aligned16(out[1]);
	int rc = rope_fallback_one<T>(k, vec, stream, (const T *)in[0], cos_t, sin_t, (T *)out[0], axis[ROPE_AX_T],
		axis[ROPE_AX_HQ], axis[ROPE_AX_D]);
	if (rc == 0)
		rc = rope_fallback_one<T>(k, vec, stream, (const T *)in[1], cos_t, sin_t, (T *)out[1], axis[ROPE_AX_T],
			axis[ROPE_AX_HK], axis[ROPE_AX_D]);
	return rc;
}

#endif
