/* mla_partial_rope: MLA's split, partial rotate-half RoPE and concat.
 *
 * in q[T,H,W], k_nope[T,H,Dn], k_pe[T,Dr], cos[T,Dr/2], sin[T,Dr/2] with
 * W = Dn + Dr; out q_out[T,H,W] = concat(q[..., :Dn], rope(q[..., Dn:])) and
 * k_out[T,H,W] = concat(k_nope[h], rope(k_pe)), rope being rotate-half within
 * the Dr slice (see src/reference/mla_partial_rope.c). Math in fp32, storage
 * in the case dtype; the pass-through columns are copied bit for bit. Axes,
 * in catalog order: T, H, Dn, Dr.
 */
#include <limits.h>

#include "kernels/launch.h"
#include "kernels/vec.cuh"

enum { AX_T, AX_H, AX_DN, AX_DR };

/* At most this many threads per fused block. */
#define FUSED_THREADS 256
/* The most output rows one fused thread writes; its loads are all issued
 * before the first store. */
#define FUSED_MAX_ROWS 8

/* One column vector held as the load brought it. The 16-byte cases keep
 * four 32-bit words and unpack an element only where the math needs it: as
 * an mb_vec of 8 bf16 (or fp16) the compiler splits it into 8 registers,
 * which cost the fused kernel half its resident threads. Widening bf16 and
 * fp16 to fp32 is exact, so the unpacking changes no result. */
template <typename T, int VEC> struct col_vec {
	mb_vec<T, VEC> v;
	__device__ __forceinline__ void load(const T *p) { v = *reinterpret_cast<const mb_vec<T, VEC> *>(p); }
	__device__ __forceinline__ void store(T *p) const { *reinterpret_cast<mb_vec<T, VEC> *>(p) = v; }
	__device__ __forceinline__ float get(int i) const { return mb_to_f32<T>(v.v[i]); }
};

struct col_words {
	uint4 w;
	__device__ __forceinline__ unsigned word(int i) const
	{
		return i == 0 ? w.x : i == 1 ? w.y : i == 2 ? w.z : w.w; /* i is a constant once unrolled */
	}
	__device__ __forceinline__ void load(const void *p) { w = *reinterpret_cast<const uint4 *>(p); }
	__device__ __forceinline__ void store(void *p) const { *reinterpret_cast<uint4 *>(p) = w; }
};

template <> struct col_vec<__nv_bfloat16, 8> : col_words {
	/* a bf16 is the high half of the fp32 with the same value */
	__device__ __forceinline__ float get(int i) const
	{
		const unsigned x = word(i / 2);
		return __uint_as_float(i % 2 ? x & 0xffff0000u : x << 16);
	}
};

template <> struct col_vec<__half, 8> : col_words {
	__device__ __forceinline__ float get(int i) const
	{
		const unsigned x = word(i / 2);
		return __half2float(__ushort_as_half((unsigned short)(i % 2 ? x >> 16 : x & 0xffffu)));
	}
};

template <> struct col_vec<float, 4> : col_words {
	__device__ __forceinline__ float get(int i) const { return __uint_as_float(word(i)); }
};

/* The token's output is 2H rows of W (the H rows of q_out, then the H rows
 * of k_out). Block (t, y, z) serves token t, thread (x, y) one VEC-wide
 * column vector (x plus z blocks) of ROWS rows (y, y + blockDim.y, ... plus
 * y blocks). No loop: every load of a thread is issued before its first
 * use, and a block lives one memory latency plus its stores.
 * A column left of Dn copies q or k_nope bit for bit. A column in the Dr
 * slice of a q row loads its own vector and its rotate-half partner (the
 * other half of the slice, which a neighbouring thread loads too: a cache
 * hit, not a second trip to memory). The Dr slice of every k row is the same
 * rope(k_pe[t]): each thread loads its k_pe vector and partner with cos/sin
 * and applies them to each k row it writes, so k_pe and cos/sin cross
 * memory once per token. Columns never straddle the copy/rope border or the
 * two halves: the host picks VEC > 1 only when Dn and Dr/2 are whole
 * vectors. Offsets inside a token are int (the host checks that H*W fits). */
template <typename T, int VEC, int ROWS>
__global__ void __launch_bounds__(FUSED_THREADS) mb_mla_partial_rope_fused_kernel(
	const T *__restrict__ q, const T *__restrict__ k_nope, const T *__restrict__ k_pe,
	const T *__restrict__ cos_t, const T *__restrict__ sin_t, T *__restrict__ q_out,
	T *__restrict__ k_out, int heads, int dn, int dr)
{
	typedef col_vec<T, VEC> vec;
	const int64_t t = blockIdx.x;
	const int w = dn + dr, half = dr / 2, rows = 2 * heads;
	const int cv = (int)(blockIdx.z * blockDim.x + threadIdx.x);
	const int r0 = (int)(blockIdx.y * blockDim.y * ROWS + threadIdx.y), stride_y = (int)blockDim.y;
	if (cv >= w / VEC)
		return;
	const int e = cv * VEC;          /* element offset in the output row */
	const bool rope = e >= dn;
	const int p = e - dn;            /* offset in the Dr slice, if rope */
	const bool lower = p < half;
	const int ci = lower ? p : p - half;
	const int delta = lower ? half : -half; /* to the partner */
	/* this token's rows */
	const T *qt = q + t * heads * w, *knt = k_nope + t * heads * dn;
	T *qot = q_out + t * heads * w, *kot = k_out + t * heads * w;

	vec c, s, kpe_self, kpe_other, self[ROWS], other[ROWS];
	if (rope) {
		c.load(cos_t + t * half + ci);
		s.load(sin_t + t * half + ci);
		kpe_self.load(k_pe + t * dr + p);
		kpe_other.load(k_pe + t * dr + p + delta);
	}
#pragma unroll
	for (int u = 0; u < ROWS; u++) {
		const int r = r0 + u * stride_y;
		if (r >= rows)
			break;
		if (r < heads) {
			const T *src = qt + r * w + e;
			self[u].load(src);
			if (rope)
				other[u].load(src + delta);
		} else if (!rope) {
			self[u].load(knt + (r - heads) * dn + e);
		}
	}
#pragma unroll
	for (int u = 0; u < ROWS; u++) {
		const int r = r0 + u * stride_y;
		if (r >= rows)
			break;
		const bool is_q = r < heads;
		T *dst = is_q ? qot + r * w + e : kot + (r - heads) * w + e;
		if (!rope) {
			self[u].store(dst);
			continue;
		}
		/* lower half: x1*c - x2*s; upper: x2*c + x1*s, with the element
		 * written first and its partner second */
		float y[VEC];
#pragma unroll
		for (int i = 0; i < VEC; i++) {
			const float a = is_q ? self[u].get(i) : kpe_self.get(i);
			const float b = is_q ? other[u].get(i) : kpe_other.get(i);
			const float cf = c.get(i), sf = s.get(i);
			y[i] = lower ? a * cf - b * sf : a * cf + b * sf;
		}
		mb_store_f32<T, VEC>(dst, y);
	}
}

template <typename T, int VEC, int ROWS>
static int fused_rows(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out,
	dim3 block)
{
	const int heads = (int)axis[AX_H], dn = (int)axis[AX_DN], dr = (int)axis[AX_DR];
	const unsigned ncol = (unsigned)((dn + dr) / VEC), rows = 2u * (unsigned)heads;
	const unsigned per_block = block.y * ROWS;
	dim3 grid((unsigned)axis[AX_T], (rows + per_block - 1) / per_block, (ncol + block.x - 1) / block.x);
	mb_mla_partial_rope_fused_kernel<T, VEC, ROWS><<<grid, block, 0, stream>>>(
		(const T *)in[0], (const T *)in[1], (const T *)in[2], (const T *)in[3], (const T *)in[4],
		(T *)out[0], (T *)out[1], heads, dn, dr);
	return (int)cudaGetLastError();
}

/* The fewest rows per thread that let one block cover the token's 2H rows,
 * then the fewest rows of threads that do it with that many each: every
 * thread writes the same number of rows (H 16, W 192, bf16: 24 columns,
 * 4 rows each, 8 rows of threads, 192 threads). Wider rows than a block
 * holds take more blocks per token. */
template <typename T, int VEC>
static int fused_launch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	if (axis[AX_H] * (axis[AX_DN] + axis[AX_DR]) > INT_MAX)
		return (int)cudaErrorInvalidValue; /* a token's rows past int offsets */
	const int ncol = (int)((axis[AX_DN] + axis[AX_DR]) / VEC), rows = 2 * (int)axis[AX_H];
	dim3 block(ncol < FUSED_THREADS ? (unsigned)ncol : FUSED_THREADS, 1, 1);
	const int rows_of_threads = FUSED_THREADS / (int)block.x;
	int per_thread = 1;
	while (per_thread < FUSED_MAX_ROWS && per_thread * rows_of_threads < rows)
		per_thread *= 2;
	const int per_block = per_thread * rows_of_threads < rows ? per_thread * rows_of_threads : rows;
	block.y = (unsigned)((per_block + per_thread - 1) / per_thread);
	switch (per_thread) {
	case 1: return fused_rows<T, VEC, 1>(stream, axis, in, out, block);
	case 2: return fused_rows<T, VEC, 2>(stream, axis, in, out, block);
	case 4: return fused_rows<T, VEC, 4>(stream, axis, in, out, block);
	default: return fused_rows<T, VEC, FUSED_MAX_ROWS>(stream, axis, in, out, block);
	}
}

template <typename T>
static int fused_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	constexpr int vec = mb_vec16_elems<T>();
	bool aligned = mb_aligned16(out[0]) && mb_aligned16(out[1]);
	for (int i = 0; i < 5; i++)
		aligned = aligned && mb_aligned16(in[i]);
	/* 16-byte accesses need every row start and the copy/rope and
	 * lower/upper borders on whole vectors: Dn and Dr/2 multiples of the
	 * vector (then W, Dr and every row stride are too). Other shapes take
	 * the scalar path. */
	if (aligned && axis[AX_DN] % vec == 0 && (axis[AX_DR] / 2) % vec == 0)
		return fused_launch<T, vec>(stream, axis, in, out);
	return fused_launch<T, 1>(stream, axis, in, out);
}

extern "C" MB_DECLARE_LAUNCH(mb_mla_partial_rope_fused_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fused_dispatch, (cudaStream_t)stream, axis, in, out);
}

/* ---- the fallback: split, rotate, concat, as separate launches ---------- */

/* The temporaries a framework's allocator would hand out: q_pe [T,H,Dr]
 * copied out of q, its rotation [T,H,Dr], and k_pe's rotation [T,Dr]. The
 * launch interface carries no workspace, so this file keeps one device
 * buffer, grown on demand and reused by later calls, as a caching
 * allocator does. The harness's first call of every case runs outside any
 * graph capture, so a capture never meets the cudaMalloc; the buffer goes
 * with the process (each row runs in a child of its own). */
static void *scratch_buf;
static size_t scratch_bytes;

static cudaError_t scratch_reserve(size_t bytes, void **out)
{
	if (bytes > scratch_bytes) {
		cudaError_t ce;
		if (scratch_buf != NULL) {
			if ((ce = cudaFree(scratch_buf)) != cudaSuccess)
				return ce;
			scratch_buf = NULL;
			scratch_bytes = 0;
		}
		if ((ce = cudaMalloc(&scratch_buf, bytes)) != cudaSuccess)
			return ce;
		scratch_bytes = bytes;
	}
	*out = scratch_buf;
	return cudaSuccess;
}

/* Each launch is a framework's vectorized elementwise (or copy) kernel,
 * vec.cuh's flat launch over the elements it writes: 16-byte accesses when
 * every base is aligned and Dn and Dr/2 are whole vectors (then no vector
 * straddles the copy/rope border, the two halves of the Dr slice or a
 * row), else one element per access; MB_FLAT_VECS vectors per thread,
 * their loads issued before the first is used; blocks that cover the
 * output once. IDX is uint32_t when every offset fits (mb_index32_fits):
 * each vector's (row, column) takes a division or two. */

/* Split: q_pe[t,h,:] = q[t,h,Dn:], the contiguous copy of a strided view. */
template <typename T, int VEC, typename IDX>
__global__ void __launch_bounds__(MB_FLAT_THREADS) mb_mla_partial_rope_fallback_split_kernel(
	const T *__restrict__ q, T *__restrict__ q_pe, IDX n, IDX dn, IDX dr)
{
	typedef mb_vec<T, VEC> vec;
	const IDX nvec = n / VEC, w = dn + dr;
	vec v[MB_FLAT_VECS];
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const IDX i = mb_flat_index<IDX>(k), e = i * VEC;
		if (i < nvec) {
			const IDX row = e / dr;
			v[k] = *reinterpret_cast<const vec *>(q + row * w + dn + (e - row * dr));
		}
	}
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const IDX i = mb_flat_index<IDX>(k);
		if (i < nvec)
			*reinterpret_cast<vec *>(q_pe + i * VEC) = v[k];
	}
}

/* Rotate: rotate-half RoPE of x [T, heads, Dr] with cos/sin [T, Dr/2]. A
 * vector loads its own elements and its partner's (the other half of the
 * slice, which a neighbouring thread loads as its own: a cache hit). */
template <typename T, int VEC, typename IDX>
__global__ void __launch_bounds__(MB_FLAT_THREADS) mb_mla_partial_rope_fallback_rotate_kernel(
	const T *__restrict__ x, const T *__restrict__ cos_t, const T *__restrict__ sin_t, T *__restrict__ y, IDX n,
	IDX heads, IDX dr)
{
	const IDX nvec = n / VEC, half = dr / 2;
	mb_packed<T, VEC> a[MB_FLAT_VECS], b[MB_FLAT_VECS], c[MB_FLAT_VECS], s[MB_FLAT_VECS];
	bool lower[MB_FLAT_VECS];
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const IDX i = mb_flat_index<IDX>(k), e = i * VEC;
		const IDX row = e / dr, col = e - row * dr;
		lower[k] = col < half;
		if (i < nvec) {
			const IDX cs = row / heads * half + (lower[k] ? col : col - half);
			a[k].load(x + e);
			b[k].load(x + (lower[k] ? e + half : e - half));
			c[k].load(cos_t + cs);
			s[k].load(sin_t + cs);
		}
	}
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const IDX i = mb_flat_index<IDX>(k);
		if (i < nvec) {
			float v[VEC];
#pragma unroll
			for (int j = 0; j < VEC; j++)
				v[j] = lower[k] ? a[k].get(j) * c[k].get(j) - b[k].get(j) * s[k].get(j)
						: a[k].get(j) * c[k].get(j) + b[k].get(j) * s[k].get(j);
			mb_store_f32<T, VEC>(y + i * VEC, v);
		}
	}
}

/* Concat: out[t,h,:] = concat(nope[t,h,:Dn], pe[t,h,:]), where the nope
 * rows are nope_stride apart (W for q's own prefix, Dn for k_nope) and the
 * pe rows pe_token_stride apart per token and pe_head_stride per head
 * (H*Dr and Dr for q_pe; Dr and 0 for the k_pe every head shares, the
 * expand of a framework). */
template <typename T, int VEC, typename IDX>
__global__ void __launch_bounds__(MB_FLAT_THREADS) mb_mla_partial_rope_fallback_concat_kernel(
	const T *__restrict__ nope, const T *__restrict__ pe, T *__restrict__ out, IDX n, IDX heads, IDX dn, IDX dr,
	IDX nope_stride, IDX pe_token_stride, IDX pe_head_stride)
{
	typedef mb_vec<T, VEC> vec;
	const IDX nvec = n / VEC, w = dn + dr;
	vec v[MB_FLAT_VECS];
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const IDX i = mb_flat_index<IDX>(k), e = i * VEC;
		if (i < nvec) {
			const IDX row = e / w, col = e - row * w;
			const IDX t = row / heads, h = row - t * heads;
			const T *src = col < dn ? nope + row * nope_stride + col
						: pe + t * pe_token_stride + h * pe_head_stride + (col - dn);
			v[k] = *reinterpret_cast<const vec *>(src);
		}
	}
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const IDX i = mb_flat_index<IDX>(k);
		if (i < nvec)
			*reinterpret_cast<vec *>(out + i * VEC) = v[k];
	}
}

template <typename T, int VEC, typename IDX>
static int fallback_launch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out,
	T *scratch)
{
	const IDX tokens = (IDX)axis[AX_T], heads = (IDX)axis[AX_H], dn = (IDX)axis[AX_DN], dr = (IDX)axis[AX_DR];
	const IDX w = dn + dr, n_pe = tokens * heads * dr, n_kpe = tokens * dr, n_out = tokens * heads * w;
	const T *q = (const T *)in[0], *k_nope = (const T *)in[1], *k_pe = (const T *)in[2];
	const T *cos_t = (const T *)in[3], *sin_t = (const T *)in[4];
	T *q_pe = scratch, *q_pe_rot = q_pe + n_pe, *k_pe_rot = q_pe_rot + n_pe;
	const unsigned pe_blocks = mb_flat_blocks((int64_t)(n_pe / VEC));
	const unsigned kpe_blocks = mb_flat_blocks((int64_t)(n_kpe / VEC));
	const unsigned out_blocks = mb_flat_blocks((int64_t)(n_out / VEC));
	cudaError_t ce;

	if (pe_blocks == 0 || kpe_blocks == 0 || out_blocks == 0)
		return (int)cudaErrorInvalidValue;
	mb_mla_partial_rope_fallback_split_kernel<T, VEC, IDX><<<pe_blocks, MB_FLAT_THREADS, 0, stream>>>(q, q_pe, n_pe,
		dn, dr);
	if ((ce = cudaGetLastError()) != cudaSuccess)
		return (int)ce;
	mb_mla_partial_rope_fallback_rotate_kernel<T, VEC, IDX><<<pe_blocks, MB_FLAT_THREADS, 0, stream>>>(q_pe, cos_t,
		sin_t, q_pe_rot, n_pe, heads, dr);
	if ((ce = cudaGetLastError()) != cudaSuccess)
		return (int)ce;
	mb_mla_partial_rope_fallback_rotate_kernel<T, VEC, IDX><<<kpe_blocks, MB_FLAT_THREADS, 0, stream>>>(k_pe, cos_t,
		sin_t, k_pe_rot, n_kpe, 1, dr);
	if ((ce = cudaGetLastError()) != cudaSuccess)
		return (int)ce;
	mb_mla_partial_rope_fallback_concat_kernel<T, VEC, IDX><<<out_blocks, MB_FLAT_THREADS, 0, stream>>>(q, q_pe_rot,
		(T *)out[0], n_out, heads, dn, dr, w, heads * dr, dr);
	if ((ce = cudaGetLastError()) != cudaSuccess)
		return (int)ce;
	mb_mla_partial_rope_fallback_concat_kernel<T, VEC, IDX><<<out_blocks, MB_FLAT_THREADS, 0, stream>>>(k_nope,
		k_pe_rot, (T *)out[1], n_out, heads, dn, dr, dn, dr, 0);
	return (int)cudaGetLastError();
}

template <typename T, int VEC>
static int fallback_index(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out,
	T *scratch)
{
	/* the largest tensor a launch indexes: q, q_out, k_out (T*H*W); the
	 * scratch buffers are smaller */
	if (mb_index32_fits(axis[AX_T] * axis[AX_H] * (axis[AX_DN] + axis[AX_DR])))
		return fallback_launch<T, VEC, uint32_t>(stream, axis, in, out, scratch);
	return fallback_launch<T, VEC, uint64_t>(stream, axis, in, out, scratch);
}

template <typename T>
static int fallback_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	constexpr int vec = mb_vec16_elems<T>();
	const int64_t n_pe = axis[AX_T] * axis[AX_H] * axis[AX_DR], n_kpe = axis[AX_T] * axis[AX_DR];
	void *scratch = NULL;
	cudaError_t ce = scratch_reserve((size_t)(2 * n_pe + n_kpe) * sizeof(T), &scratch);
	if (ce != cudaSuccess)
		return (int)ce;
	/* the fused kernel's rule (see fused_dispatch), with the scratch
	 * buffers' bases too */
	const T *q_pe = (const T *)scratch, *k_pe_rot = q_pe + 2 * n_pe;
	bool aligned = mb_aligned16(out[0]) && mb_aligned16(out[1]) && mb_aligned16(q_pe + n_pe) &&
		mb_aligned16(k_pe_rot) && mb_aligned16(scratch);
	for (int i = 0; i < 5; i++)
		aligned = aligned && mb_aligned16(in[i]);
	if (aligned && axis[AX_DN] % vec == 0 && (axis[AX_DR] / 2) % vec == 0)
		return fallback_index<T, vec>(stream, axis, in, out, (T *)scratch);
	return fallback_index<T, 1>(stream, axis, in, out, (T *)scratch);
}

/* The plain path a framework runs: q.split (a contiguous copy of q_pe), a
 * RoPE launch each for q_pe and k_pe, then torch.cat-style launches that
 * assemble q_out and k_out (k_pe expanded over the heads): five launches,
 * q_pe and its rotation through memory twice. */
extern "C" MB_DECLARE_LAUNCH(mb_mla_partial_rope_fallback_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fallback_dispatch, (cudaStream_t)stream, axis, in, out);
}
