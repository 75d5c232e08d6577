/* Test-only rows: y = 2x on x[N,C] -> y[N,C] (axes N, C), correct once and
 * broken four ways the harness must catch. Never listed in real suites. */
#include "kernels/launch.h"
#include "kernels/vec.cuh"

enum { AX_N, AX_C };

/* The wrong element is off by this much: larger than any row's absolute
 * tolerance, and exact in bf16 for the inputs' range. */
#define WRONG_BY 1.0f
/* An address no allocation covers: a small offset from null. */
#define FAULT_OFFSET_ELEMS 64

/* Nothing writes this, so the hang kernel spins until its process dies;
 * volatile keeps the compiler from hoisting the read out of the loop. */
__device__ volatile int mb_test_hang_release = 0;

enum test_kind { SCALE, WRONG_ELEMENT, ZEROS, FAULT, HANG };

/* One body for every test row; the catalog tells the rows apart by kernel
 * name, so each kind gets its own __global__ wrapper. */
template <typename T, int KIND>
__device__ __forceinline__ void test_body(const T *__restrict__ x, T *__restrict__ y, int64_t n)
{
	if (KIND == HANG) {
		while (mb_test_hang_release == 0) {
		}
	}
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		float v = 2.0f * mb_to_f32<T>(x[i]);
		if (KIND == WRONG_ELEMENT && i == n / 2)
			v += WRONG_BY;
		if (KIND == ZEROS)
			v = 0.0f;
		if (KIND == FAULT)
			y = (T *)nullptr + FAULT_OFFSET_ELEMS;
		y[i] = mb_from_f32<T>(v);
	}
}

#define TEST_KERNEL(name, kind) \
	template <typename T> \
	__global__ void name(const T *__restrict__ x, T *__restrict__ y, int64_t n) \
	{ \
		test_body<T, kind>(x, y, n); \
	}
TEST_KERNEL(mb_test_scale_kernel, SCALE)
TEST_KERNEL(mb_test_wrong_element_kernel, WRONG_ELEMENT)
TEST_KERNEL(mb_test_zeros_kernel, ZEROS)
TEST_KERNEL(mb_test_fault_kernel, FAULT)
TEST_KERNEL(mb_test_hang_kernel, HANG)

#define TEST_LAUNCH(fn, kernel) \
	template <typename T> \
	static int fn(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out) \
	{ \
		const int64_t n = axis[AX_N] * axis[AX_C]; \
		kernel<T><<<mb_elemwise_blocks(n), MB_ELEMWISE_THREADS, 0, stream>>>( \
			(const T *)in[0], (T *)out[0], n); \
		return (int)cudaGetLastError(); \
	}
TEST_LAUNCH(scale, mb_test_scale_kernel)
TEST_LAUNCH(wrong, mb_test_wrong_element_kernel)
TEST_LAUNCH(zeros, mb_test_zeros_kernel)
TEST_LAUNCH(fault, mb_test_fault_kernel)
TEST_LAUNCH(hang, mb_test_hang_kernel)

extern "C" MB_DECLARE_LAUNCH(mb_test_scale_launch)
{
	return MB_DISPATCH_DTYPE(dtype, scale, (cudaStream_t)stream, axis, in, out);
}
extern "C" MB_DECLARE_LAUNCH(mb_test_wrong_element_launch)
{
	return MB_DISPATCH_DTYPE(dtype, wrong, (cudaStream_t)stream, axis, in, out);
}
extern "C" MB_DECLARE_LAUNCH(mb_test_zeros_launch)
{
	return MB_DISPATCH_DTYPE(dtype, zeros, (cudaStream_t)stream, axis, in, out);
}
extern "C" MB_DECLARE_LAUNCH(mb_test_fault_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fault, (cudaStream_t)stream, axis, in, out);
}
extern "C" MB_DECLARE_LAUNCH(mb_test_hang_launch)
{
	return MB_DISPATCH_DTYPE(dtype, hang, (cudaStream_t)stream, axis, in, out);
}
