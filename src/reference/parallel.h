/* Independent work items spread over a share of the host's cores, for the
 * fp32 references and fp64 oracles. Items are taken one at a time from an
 * atomic counter, so which thread computes an item depends on the
 * schedule: an item must write only its own outputs, and then the result
 * does not depend on the thread count. */
#ifndef MB_REFERENCE_PARALLEL_H
#define MB_REFERENCE_PARALLEL_H

#include <stddef.h>
#include <stdint.h>

/* Threads one call uses at most, the calling thread included. */
#define MB_REF_MAX_THREADS 256

/* The cores this process may run on: its affinity mask (taskset, a
 * container's cpuset), or the online cores where the mask cannot be read.
 * Every thread count of the harness and the references follows it. */
long mb_cpus_usable(void);

/* The threads mb_ref_parallel uses for n items: `share` (0 < share <= 1)
 * of mb_cpus_usable(), rounded down, at least 1, at most
 * MB_REF_MAX_THREADS and at most n (at least 1 when n < 1). */
int mb_ref_parallel_threads(int64_t n, double share);

/* Run fn(ctx, i) for every i in [0, n), on mb_ref_parallel_threads(n,
 * share) threads, the calling thread one of them; returns when all are
 * done. A thread that cannot be started leaves its share to the others. */
void mb_ref_parallel(int64_t n, double share, void (*fn)(void *ctx, int64_t i), void *ctx);

/* The same with scratch_bytes of scratch per thread, allocated by the
 * helper and freed before it returns: fn(ctx, i, scratch) gets its
 * thread's, uninitialised and left as the thread's previous item left it.
 * A thread that cannot get its scratch leaves its share to the others;
 * aborts when no thread can (the harness sized host memory before calling
 * a reference). */
void mb_ref_parallel_scratch(int64_t n, double share, size_t scratch_bytes,
	void (*fn)(void *ctx, int64_t i, void *scratch), void *ctx);

#endif
