#include "harness/cuda_blocker.h"

#include <cuda_runtime.h>

/* About half a second at H100/H200 clocks: far longer than enqueueing a
 * batch takes, short enough that a dead host costs little. */
#define BLOCKER_TIMEOUT_CYCLES (1ll << 30)

__global__ void mb_blocker_kernel(volatile int *flag, long long timeout_cycles)
{
	long long start = clock64();

	while (*flag == 0 && clock64() - start < timeout_cycles)
		;
}

extern "C" int mb_blocker_init(mb_blocker *b)
{
	int *host = NULL;
	cudaError_t ce;

	b->host_flag = NULL;
	b->device_flag = NULL;
	ce = cudaHostAlloc((void **)&host, sizeof(int), cudaHostAllocMapped);
	if (ce != cudaSuccess)
		return (int)ce;
	*host = 1;
	ce = cudaHostGetDevicePointer((void **)&b->device_flag, host, 0);
	if (ce != cudaSuccess) {
		cudaFreeHost(host);
		return (int)ce;
	}
	b->host_flag = host;
	return 0;
}

extern "C" int mb_blocker_hold(mb_blocker *b, void *stream)
{
	*b->host_flag = 0;
	__sync_synchronize();
	mb_blocker_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(b->device_flag, BLOCKER_TIMEOUT_CYCLES);
	return (int)cudaGetLastError();
}

extern "C" void mb_blocker_release(mb_blocker *b)
{
	__sync_synchronize();
	*b->host_flag = 1;
}

extern "C" void mb_blocker_free(mb_blocker *b)
{
	if (b && b->host_flag)
		cudaFreeHost((void *)b->host_flag);
	if (b) {
		b->host_flag = NULL;
		b->device_flag = NULL;
	}
}
