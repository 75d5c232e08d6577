/* Scratch device memory and cuBLAS handles for GPU variants, tracked so
 * that the harness can record, per case, the device memory a variant
 * allocates beyond its inputs and outputs (a measurement, not a model).
 *
 * A variant never calls cudaMalloc itself: it names a static slot and asks
 * for the bytes it needs this call,
 *
 *	static mb_ws_slot logits_ws;
 *	void *logits;
 *	if ((ce = mb_ws_reserve(&logits_ws, bytes, &logits)) != 0)
 *		return ce;
 *
 * The slot keeps its memory between calls (growing when a call needs more),
 * so a timed call allocates nothing. Never call it during stream capture
 * with more bytes than the slot holds: the first, untimed calls of a case
 * size every slot.
 *
 * The harness (harness/cuda_backend.c) frees every slot before a case's
 * first call (mb_ws_release_all), starts a new tally (mb_ws_tally_reset)
 * and reads after the checked call how many bytes the variant's slots held
 * at most (mb_ws_tally_peak); the driver's free-memory drop over the same
 * call is recorded beside it, and catches what a library allocated behind
 * our back.
 *
 * Memory a variant needs only within one call is still a slot: the tally
 * counts what a slot holds, so two slots a call uses one after the other
 * count as both (a variant that wants them to share memory uses one slot).
 *
 * Return values are 0 or a cudaError_t value as int, the launch
 * contract's (kernels/launch.h); a cuBLAS failure becomes one through
 * mb_ws_blas_error, so that the harness names it (out of memory is "oom",
 * a shape cuBLAS does not take is "skipped"). Built only with CUDA. */
#ifndef MB_KERNELS_WORKSPACE_H
#define MB_KERNELS_WORKSPACE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mb_ws_slot {
	void *ptr;
	size_t bytes;
	struct mb_ws_slot *next; /* the list of every slot ever used */
	int registered;
	unsigned long long tally_epoch; /* the tally it was last counted in */
} mb_ws_slot;

/* At least `bytes` of device memory (256-byte aligned, contents
 * undefined) in `*out`; 0 or a cudaError_t value. bytes == 0 gives NULL. */
int mb_ws_reserve(mb_ws_slot *slot, size_t bytes, void **out);

/* The same, zeroed on `stream` (a cudaStream_t) before it returns. */
int mb_ws_reserve_zeroed(mb_ws_slot *slot, size_t bytes, void *stream, void **out);

/* The cuBLAS workspace mb_ws_blas binds: what cuBLAS asks for on Hopper
 * (its documentation recommends 32 MiB for sm_90). */
#define MB_WS_BLAS_BYTES ((size_t)32 << 20)

/* The process's cuBLAS handle (cublasHandle_t), bound to `stream`, with a
 * workspace of MB_WS_BLAS_BYTES that lives in a slot of its own (and so
 * counts in the tally of every case that uses cuBLAS). NULL when cuBLAS
 * cannot be set up; *status then holds a cudaError_t value. */
void *mb_ws_blas(void *stream, int *status);

/* The same handle with a workspace slot of `workspace_bytes` rather than
 * MB_WS_BLAS_BYTES, for a variant whose scratch memory is the point:
 * cuBLAS then picks among the kernels that fit. The slot keeps what an
 * earlier call of the same case reserved, and the handle is offered all
 * of it. */
void *mb_ws_blas_sized(void *stream, size_t workspace_bytes, int *status);

/* A cublasStatus_t as the cudaError_t the launch contract returns:
 * CUBLAS_STATUS_SUCCESS is 0, an allocation failure
 * cudaErrorMemoryAllocation, an unsupported shape or type
 * cudaErrorNotSupported, an execution failure cudaErrorLaunchFailure, any
 * other cudaErrorUnknown. */
int mb_ws_blas_error(int cublas_status);

/* ---- harness side ---- */
/* Free every slot's memory (the handle stays; its workspace is re-made on
 * its next use). Not during a call. */
void mb_ws_release_all(void);
/* Start counting: slots used from now on count with what they hold. */
void mb_ws_tally_reset(void);
/* The most bytes the slots used since the reset held at once. */
size_t mb_ws_tally_peak(void);

#ifdef __cplusplus
}
#endif

#endif
