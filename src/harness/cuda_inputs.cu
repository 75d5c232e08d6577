/* Input generation and row read-back on the device; see cuda_inputs.h. */
#include "harness/cuda_inputs.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define FILL_THREADS 256
#define FILL_BLOCKS_PER_SM 16
#define GATHER_THREADS 256

template <typename T> __device__ __forceinline__ T store_of(float v);
template <> __device__ __forceinline__ float store_of<float>(float v) { return v; }
template <> __device__ __forceinline__ __half store_of<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 store_of<__nv_bfloat16>(float v)
{
	return __float2bfloat16_rn(v);
}
template <> __device__ __forceinline__ int32_t store_of<int32_t>(float v) { return (int32_t)v; }

/* What the stored value reads back as: the rounding MB_INPUT_VALUE needs
 * to see zeros as the host twin does. */
template <typename T> __device__ __forceinline__ float rounded(float v);
template <> __device__ __forceinline__ float rounded<float>(float v) { return v; }
template <> __device__ __forceinline__ float rounded<__half>(float v) { return __half2float(__float2half_rn(v)); }
template <> __device__ __forceinline__ float rounded<__nv_bfloat16>(float v)
{
	return __bfloat162float(__float2bfloat16_rn(v));
}
template <> __device__ __forceinline__ float rounded<int32_t>(float v) { return v; }

template <typename T>
__global__ void __launch_bounds__(FILL_THREADS) mb_input_fill_kernel(T *dst, uint64_t n, mb_input_params p)
{
	const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;

	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		float v;
		MB_INPUT_VALUE(v, &p, i, rounded<T>);
		dst[i] = store_of<T>(v);
	}
}

template <typename T>
static int fill_launch(cudaStream_t stream, void *dst, uint64_t n, const mb_input_params *p)
{
	int device = 0, sms = 0;
	cudaError_t ce = cudaGetDevice(&device);

	if (ce == cudaSuccess)
		ce = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
	if (ce != cudaSuccess)
		return (int)ce;
	uint64_t want = (n + FILL_THREADS - 1) / FILL_THREADS, cap = (uint64_t)sms * FILL_BLOCKS_PER_SM;
	unsigned blocks = (unsigned)(want < cap ? (want ? want : 1) : cap);
	mb_input_fill_kernel<T><<<blocks, FILL_THREADS, 0, stream>>>((T *)dst, n, *p);
	return (int)cudaGetLastError();
}

extern "C" int mb_cuda_fill(void *stream, void *dst, uint64_t n, const mb_input_params *p, mb_dtype dtype)
{
	cudaStream_t s = (cudaStream_t)stream;

	if (p->fill == MB_INPUT_INDEX)
		return fill_launch<int32_t>(s, dst, n, p);
	switch (dtype) {
	case MB_FP32: return fill_launch<float>(s, dst, n, p);
	case MB_FP16: return fill_launch<__half>(s, dst, n, p);
	case MB_BF16: return fill_launch<__nv_bfloat16>(s, dst, n, p);
	default: return (int)cudaErrorInvalidValue;
	}
}

/* One block per checked row, converting as it copies. */
template <typename T>
__global__ void __launch_bounds__(GATHER_THREADS) mb_rows_f32_kernel(float *dst, const T *src, const int64_t *rows,
	int64_t row_elems)
{
	const int64_t from = rows ? rows[blockIdx.x] : (int64_t)blockIdx.x;
	const T *in = src + from * row_elems;
	float *out = dst + (int64_t)blockIdx.x * row_elems;

	for (int64_t j = threadIdx.x; j < row_elems; j += GATHER_THREADS)
		out[j] = (float)in[j];
}

template <typename T>
static int rows_launch(cudaStream_t stream, float *dst, const void *src, const int64_t *rows, int64_t n_rows,
	int64_t row_elems)
{
	mb_rows_f32_kernel<T><<<(unsigned)n_rows, GATHER_THREADS, 0, stream>>>(dst, (const T *)src, rows, row_elems);
	return (int)cudaGetLastError();
}

extern "C" int mb_cuda_rows_f32(void *stream, float *dst, const void *src, const int64_t *rows, int64_t n_rows,
	int64_t row_elems, mb_dtype dtype, int index)
{
	cudaStream_t s = (cudaStream_t)stream;

	if (n_rows <= 0)
		return 0;
	if (n_rows > INT32_MAX)
		return (int)cudaErrorInvalidValue;
	if (index)
		return rows_launch<int32_t>(s, dst, src, rows, n_rows, row_elems);
	switch (dtype) {
	case MB_FP32: return rows_launch<float>(s, dst, src, rows, n_rows, row_elems);
	case MB_FP16: return rows_launch<__half>(s, dst, src, rows, n_rows, row_elems);
	case MB_BF16: return rows_launch<__nv_bfloat16>(s, dst, src, rows, n_rows, row_elems);
	default: return (int)cudaErrorInvalidValue;
	}
}
