/* Device helpers shared by the row kernels: fp32 conversion of every
 * storage dtype, 16-byte vectors, and the dtype switch of a launch. */
#ifndef MB_KERNELS_VEC_CUH
#define MB_KERNELS_VEC_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/dtype.h"

#define MB_VEC_BYTES 16
#define MB_WARP_THREADS 32

template <typename T> __device__ __forceinline__ float mb_to_f32(T x);
template <> __device__ __forceinline__ float mb_to_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ float mb_to_f32<__half>(__half x) { return __half2float(x); }
template <> __device__ __forceinline__ float mb_to_f32<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ T mb_from_f32(float x);
template <> __device__ __forceinline__ float mb_from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half mb_from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 mb_from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

/* N elements loaded or stored as one access: 16 bytes when
 * N * sizeof(T) == MB_VEC_BYTES, which the compiler turns into LDG.128. */
template <typename T, int N> struct alignas(sizeof(T) * N) mb_vec {
	T v[N];
};

template <typename T> constexpr int mb_vec16_elems() { return MB_VEC_BYTES / (int)sizeof(T); }

template <typename T, int N>
__device__ __forceinline__ void mb_load_f32(float (&out)[N], const T *p)
{
	mb_vec<T, N> v = *reinterpret_cast<const mb_vec<T, N> *>(p);
#pragma unroll
	for (int i = 0; i < N; i++)
		out[i] = mb_to_f32<T>(v.v[i]);
}

template <typename T, int N>
__device__ __forceinline__ void mb_store_f32(T *p, const float (&in)[N])
{
	mb_vec<T, N> v;
#pragma unroll
	for (int i = 0; i < N; i++)
		v.v[i] = mb_from_f32<T>(in[i]);
	*reinterpret_cast<mb_vec<T, N> *>(p) = v;
}

static inline bool mb_aligned16(const void *p)
{
	return ((uintptr_t)p % MB_VEC_BYTES) == 0;
}

/* N elements of T held as one load brought them, widened to fp32 one at a
 * time where the math uses them. A 16-byte vector stays four 32-bit words:
 * held as an array of 8 bf16 or fp16 the compiler may give each element a
 * register of its own, which costs a kernel with several vectors of
 * several tensors in flight half its resident threads. Widening bf16 and
 * fp16 is exact, so how the bits are held changes no result. */
template <typename T, int N> struct mb_packed {
	mb_vec<T, N> v;
	__device__ __forceinline__ void load(const T *p) { v = *reinterpret_cast<const mb_vec<T, N> *>(p); }
	__device__ __forceinline__ float get(int i) const { return mb_to_f32<T>(v.v[i]); }
};

struct mb_packed_words {
	uint4 w;
	__device__ __forceinline__ void load(const void *p) { w = *reinterpret_cast<const uint4 *>(p); }
	__device__ __forceinline__ unsigned word(int i) const
	{
		return i == 0 ? w.x : i == 1 ? w.y : i == 2 ? w.z : w.w; /* i is a constant once unrolled */
	}
};

template <> struct mb_packed<__nv_bfloat16, 8> : mb_packed_words {
	/* a bf16 is the high half of the fp32 with the same value */
	__device__ __forceinline__ float get(int i) const
	{
		const unsigned x = word(i / 2);
		return __uint_as_float(i % 2 ? x & 0xffff0000u : x << 16);
	}
};

template <> struct mb_packed<__half, 8> : mb_packed_words {
	__device__ __forceinline__ float get(int i) const
	{
		const unsigned x = word(i / 2);
		return __half2float(__ushort_as_half((unsigned short)(i % 2 ? x >> 16 : x & 0xffffu)));
	}
};

template <> struct mb_packed<float, 4> : mb_packed_words {
	__device__ __forceinline__ float get(int i) const { return __uint_as_float(word(i)); }
};

/* ---- launch shapes of a framework's own kernels (the fallbacks) --------- */

/* A flat launch over vectors, shaped as a framework's vectorized
 * elementwise kernel: MB_FLAT_THREADS threads a block, each owning
 * MB_FLAT_VECS vectors MB_FLAT_THREADS apart (so each unrolled step is one
 * coalesced run) whose loads it issues before it uses the first, and
 * blocks that cover the data once: no grid-stride loop, each block lives
 * one memory latency plus its stores, and the device's block scheduler
 * keeps every SM full. */
#define MB_FLAT_THREADS 256
#define MB_FLAT_VECS 4
#define MB_FLAT_VECS_PER_BLOCK (MB_FLAT_THREADS * MB_FLAT_VECS)

/* Blocks of a flat launch over nvec vectors (at least one); 0 past the
 * grid's x limit. */
static inline unsigned mb_flat_blocks(int64_t nvec)
{
	const int64_t blocks = (nvec + MB_FLAT_VECS_PER_BLOCK - 1) / MB_FLAT_VECS_PER_BLOCK;
	if (blocks > INT32_MAX)
		return 0u;
	return blocks < 1 ? 1u : (unsigned)blocks;
}

/* The k-th of this thread's vectors in a flat launch. */
template <typename IDX> __device__ __forceinline__ IDX mb_flat_index(int k)
{
	return (IDX)blockIdx.x * MB_FLAT_VECS_PER_BLOCK + (IDX)threadIdx.x + (IDX)k * MB_FLAT_THREADS;
}

/* Whether 32-bit unsigned indices hold every element offset below
 * max_elems, with room for a flat launch's indices past the end (a block
 * of 16-element vectors). A division by a run-time divisor, which the
 * kernels that map a flat index to (row, column) do per vector, costs
 * several times more in 64 bits, so they take IDX = uint32_t when this
 * holds, as a framework's kernels index in 32 bits when they can. */
static inline bool mb_index32_fits(int64_t max_elems)
{
	return max_elems >= 0 &&
		max_elems <= (int64_t)UINT32_MAX - (int64_t)MB_FLAT_VECS_PER_BLOCK * MB_VEC_BYTES;
}

/* One block per row, as a framework's norm kernels: each thread keeps
 * ITEMS vectors of the row in registers, loaded before the first is used,
 * so the row crosses memory once and several loads are in flight per
 * thread. MB_ROW_ITEMS first (the fewest threads that cover the row with
 * that many each), MB_ROW_MAX_ITEMS for rows wider than max_threads *
 * MB_ROW_ITEMS vectors. Returns ITEMS and sets *threads (a whole number of
 * warps, at most max_threads); 0 when the row is wider still, and the
 * caller loops over it instead. */
#define MB_ROW_ITEMS 4
#define MB_ROW_MAX_ITEMS 8
static inline int mb_row_items(int64_t nvec, int max_threads, unsigned *threads)
{
	for (int items = MB_ROW_ITEMS; items <= MB_ROW_MAX_ITEMS; items *= 2) {
		const int64_t need = (nvec + items - 1) / items;
		if (need <= max_threads) {
			const int64_t warps = (need + MB_WARP_THREADS - 1) / MB_WARP_THREADS;
			*threads = (unsigned)((warps < 1 ? 1 : warps) * MB_WARP_THREADS);
			return items;
		}
	}
	return 0;
}

/* Grid for a grid-stride elementwise loop over n items (the test rows). */
#define MB_ELEMWISE_THREADS 256
#define MB_ELEMWISE_MAX_BLOCKS (1 << 20)
static inline unsigned mb_elemwise_blocks(int64_t n)
{
	int64_t b = (n + MB_ELEMWISE_THREADS - 1) / MB_ELEMWISE_THREADS;
	if (b > MB_ELEMWISE_MAX_BLOCKS)
		b = MB_ELEMWISE_MAX_BLOCKS;
	return b < 1 ? 1u : (unsigned)b;
}

/* Call fn<T>(args...) for the storage type of `dtype`; an unknown dtype is
 * cudaErrorInvalidValue. */
#define MB_DISPATCH_DTYPE(dtype, fn, ...)                                         \
	((dtype) == MB_FP32   ? fn<float>(__VA_ARGS__)                            \
	 : (dtype) == MB_FP16 ? fn<__half>(__VA_ARGS__)                           \
	 : (dtype) == MB_BF16 ? fn<__nv_bfloat16>(__VA_ARGS__)                    \
	                      : (int)cudaErrorInvalidValue)

#endif
