/* A plan run in this process on the ranks of an NCCL world (nccl_world.h;
 * megabench alltoall): the counterpart of runner.h's mb_run for a backend
 * whose communicators live in the process, so that no child per row can
 * run its cases.
 *
 * Every process runs the same case driver over the same plan; the root
 * (rank 0's process) keeps the cases, shows the progress and assembles
 * the receipt as mb_run_receipt does, with the GPUs, their topology and
 * each case's bandwidths (collective.h). A case that failed to run
 * (crashed, out of memory) leaves the communicators untrusted: the rest of
 * the plan is recorded as not run and the receipt as failed. A stop asked
 * for on any process (a signal) stops every process after its case, and
 * the receipt is marked interrupted. */
#ifndef MB_HARNESS_WORLD_RUN_H
#define MB_HARNESS_WORLD_RUN_H

#include <jansson.h>

#include "harness/nccl_world.h"
#include "harness/runner.h"

typedef struct mb_world_run_options {
	mb_world *world;
	/* the suite, plan, filter, backend (mb_backend_nccl), command, the
	 * interrupt flag, and at the root the provenance, host and progress */
	const mb_run_options *run;
	const mb_settings *sampling;     /* the driver's settings */
	const json_t *device, *ceilings; /* the backend's probe */
	json_t *notices;                 /* the receipt's, so far (borrowed) */
	mb_phase_ns phases;              /* spent before the run */
	const char *started_at;
	int64_t started_ns;              /* what goodput is a fraction of */
} mb_world_run_options;

/* Run the plan. At the root *out is the receipt (not yet validated or
 * written; the caller's), elsewhere NULL. An error return: the receipt
 * could not be made. */
int mb_world_run(json_t **out, const mb_world_run_options *o, mb_error *err);

#endif
