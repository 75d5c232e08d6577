/* Holding a stream while a timed batch is enqueued.
 *
 * CUDA events time from the moment the GPU reaches the start event; when the
 * stream is idle that is at once, while the host is still launching the
 * kernels, so the event time includes host launch latency (13% on a 1 ms
 * copy, seen on an H200 with CUPTI tracing). A kernel that spins on a
 * host-mapped flag is queued first; the host enqueues the start event, the
 * calls and the stop event, then releases the flag, and the GPU runs them
 * back to back. The spin gives up after a bound, so a host that dies cannot
 * hang the GPU. */
#ifndef MB_HARNESS_CUDA_BLOCKER_H
#define MB_HARNESS_CUDA_BLOCKER_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mb_blocker {
	volatile int *host_flag; /* pinned, mapped */
	int *device_flag;
} mb_blocker;

/* Returns 0 or a cudaError_t value. */
int mb_blocker_init(mb_blocker *b);
/* Queue the spinning kernel on `stream` (a cudaStream_t). */
int mb_blocker_hold(mb_blocker *b, void *stream);
/* Let the stream run. */
void mb_blocker_release(mb_blocker *b);
void mb_blocker_free(mb_blocker *b);

#ifdef __cplusplus
}
#endif

#endif
