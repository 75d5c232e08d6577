/* Work items over the host's cores: see parallel.h. */
#include "reference/parallel.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct parallel_job {
	void (*fn)(void *ctx, int64_t i, void *scratch);
	void *ctx;
	size_t scratch_bytes; /* 0: no scratch */
	int64_t n;
	int64_t next; /* the next item to take, atomically */
} parallel_job;

static void *parallel_worker(void *arg)
{
	parallel_job *job = arg;
	void *scratch = NULL;

	if (job->scratch_bytes > 0 && !(scratch = malloc(job->scratch_bytes)))
		return NULL; /* the other threads take this one's items */
	for (;;) {
		int64_t i = __atomic_fetch_add(&job->next, 1, __ATOMIC_RELAXED);
		if (i >= job->n)
			break;
		job->fn(job->ctx, i, scratch);
	}
	free(scratch);
	return NULL;
}

long mb_cpus_usable(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
	return sysconf(_SC_NPROCESSORS_ONLN);
}

int mb_ref_parallel_threads(int64_t n, double share)
{
	long cpus = (long)(share * (double)mb_cpus_usable());
	int64_t threads = cpus < 1 ? 1 : cpus > MB_REF_MAX_THREADS ? MB_REF_MAX_THREADS : cpus;

	if (threads > n)
		threads = n < 1 ? 1 : n;
	return (int)threads;
}

void mb_ref_parallel_scratch(int64_t n, double share, size_t scratch_bytes,
	void (*fn)(void *ctx, int64_t i, void *scratch), void *ctx)
{
	parallel_job job = {.fn = fn, .ctx = ctx, .scratch_bytes = scratch_bytes, .n = n};
	pthread_t threads[MB_REF_MAX_THREADS];
	int n_threads = mb_ref_parallel_threads(n, share), started = 0;

	if (n < 1)
		return;
	for (int i = 1; i < n_threads; i++) {
		if (pthread_create(&threads[started], NULL, parallel_worker, &job) == 0)
			started++;
	}
	parallel_worker(&job);
	for (int i = 0; i < started; i++)
		pthread_join(threads[i], NULL);
	/* a thread that got its scratch took items until none were left */
	if (job.next < n)
		abort();
}

/* mb_ref_parallel's item, called as a scratch variant's that has none. */
typedef struct plain_call {
	void (*fn)(void *ctx, int64_t i);
	void *ctx;
} plain_call;

static void plain_item(void *arg, int64_t i, void *scratch)
{
	const plain_call *call = arg;

	(void)scratch;
	call->fn(call->ctx, i);
}

void mb_ref_parallel(int64_t n, double share, void (*fn)(void *ctx, int64_t i), void *ctx)
{
	plain_call call = {fn, ctx};

	mb_ref_parallel_scratch(n, share, 0, plain_item, &call);
}
