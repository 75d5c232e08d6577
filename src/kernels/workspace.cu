/* Scratch device memory and the cuBLAS handle for GPU variants, with the
 * tally the harness reads: see kernels/workspace.h. One process, one
 * thread calls variants at a time (the case driver's), so the list and the
 * tally need no lock. */
#include "kernels/workspace.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

/* A workspace of our own (MB_WS_BLAS_BYTES, workspace.h) means nothing is
 * allocated while a graph is captured, and that the tally sees it. */
#define ALIGN 256

static mb_ws_slot *slots;          /* every slot ever used */
static unsigned long long epoch = 1; /* the current tally */
static size_t tally_now, tally_peak;

static void count(mb_ws_slot *s)
{
	if (s->tally_epoch == epoch)
		return;
	s->tally_epoch = epoch;
	tally_now += s->bytes;
	if (tally_now > tally_peak)
		tally_peak = tally_now;
}

extern "C" int mb_ws_reserve(mb_ws_slot *s, size_t bytes, void **out)
{
	*out = NULL;
	if (!s->registered) {
		s->next = slots;
		slots = s;
		s->registered = 1;
	}
	if (bytes == 0)
		return 0;
	bytes = (bytes + ALIGN - 1) / ALIGN * ALIGN;
	if (bytes > s->bytes) {
		size_t old = s->bytes;
		if (s->ptr != NULL)
			cudaFree(s->ptr);
		s->ptr = NULL;
		s->bytes = 0;
		if (s->tally_epoch == epoch)
			tally_now -= old;
		cudaError_t ce = cudaMalloc(&s->ptr, bytes);
		if (ce != cudaSuccess) {
			s->ptr = NULL;
			return (int)ce;
		}
		s->bytes = bytes;
		if (s->tally_epoch == epoch) {
			tally_now += bytes;
			if (tally_now > tally_peak)
				tally_peak = tally_now;
		}
	}
	count(s);
	*out = s->ptr;
	return 0;
}

extern "C" int mb_ws_reserve_zeroed(mb_ws_slot *s, size_t bytes, void *stream, void **out)
{
	int rc = mb_ws_reserve(s, bytes, out);

	if (rc != 0 || bytes == 0)
		return rc;
	return (int)cudaMemsetAsync(*out, 0, bytes, (cudaStream_t)stream);
}

static mb_ws_slot blas_ws;
static cublasHandle_t blas;

extern "C" void *mb_ws_blas(void *stream, int *status)
{
	return mb_ws_blas_sized(stream, MB_WS_BLAS_BYTES, status);
}

extern "C" void *mb_ws_blas_sized(void *stream, size_t workspace_bytes, int *status)
{
	void *ws;
	int rc;

	*status = 0;
	if (blas == NULL) {
		cublasStatus_t st = cublasCreate(&blas);
		if (st != CUBLAS_STATUS_SUCCESS) {
			blas = NULL;
			*status = mb_ws_blas_error((int)st);
			return NULL;
		}
	}
	if ((rc = mb_ws_reserve(&blas_ws, workspace_bytes, &ws)) != 0) {
		*status = rc;
		return NULL;
	}
	/* cublasSetStream puts the handle back on cuBLAS's own workspace pool,
	 * so the slot is bound again after it, every time; a slot that holds
	 * more than asked (an earlier call wanted more) is offered whole */
	cublasStatus_t st = cublasSetStream(blas, (cudaStream_t)stream);
	if (st == CUBLAS_STATUS_SUCCESS)
		st = cublasSetWorkspace(blas, ws, ws != NULL ? blas_ws.bytes : 0);
	if (st != CUBLAS_STATUS_SUCCESS) {
		*status = mb_ws_blas_error((int)st);
		return NULL;
	}
	return blas;
}

extern "C" int mb_ws_blas_error(int status)
{
	switch ((cublasStatus_t)status) {
	case CUBLAS_STATUS_SUCCESS: return (int)cudaSuccess;
	case CUBLAS_STATUS_ALLOC_FAILED: return (int)cudaErrorMemoryAllocation;
	case CUBLAS_STATUS_NOT_SUPPORTED:
	case CUBLAS_STATUS_INVALID_VALUE:
	case CUBLAS_STATUS_ARCH_MISMATCH: return (int)cudaErrorNotSupported;
	case CUBLAS_STATUS_EXECUTION_FAILED: return (int)cudaErrorLaunchFailure;
	default: return (int)cudaErrorUnknown;
	}
}

extern "C" void mb_ws_release_all(void)
{
	for (mb_ws_slot *s = slots; s != NULL; s = s->next) {
		if (s->ptr != NULL)
			cudaFree(s->ptr);
		s->ptr = NULL;
		s->bytes = 0;
	}
	tally_now = 0;
}

extern "C" void mb_ws_tally_reset(void)
{
	epoch++;
	tally_now = 0;
	tally_peak = 0;
}

extern "C" size_t mb_ws_tally_peak(void)
{
	return tally_peak;
}
