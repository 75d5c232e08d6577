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

/* Grid for a grid-stride elementwise loop over n items. */
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
