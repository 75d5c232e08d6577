/* The run: probe the device in a child, run each row's cases in a child of
 * its own, and assemble the receipt. Runners never print: what a person
 * sees goes through the progress callbacks. */
#ifndef MB_HARNESS_RUNNER_H
#define MB_HARNESS_RUNNER_H

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness/backend.h"
#include "receipts/error.h"
#include "harness/suite.h"

typedef struct mb_progress {
	void *ctx;
	void (*begin)(void *ctx, size_t n_cases, const char *backend);
	void (*case_start)(void *ctx, size_t index, const mb_case_plan *plan);
	/* While a case samples: how far it is (about twice a second). */
	void (*case_tick)(void *ctx, size_t index, int samples, double rel_noise, double elapsed_s);
	/* At least once a second while a child works, message or not. */
	void (*refresh)(void *ctx);
	/* `result` is the receipt case object (borrowed). */
	void (*case_done)(void *ctx, size_t index, const mb_case_plan *plan, const json_t *result);
	void (*notice)(void *ctx, const char *text);
} mb_progress;

typedef struct mb_run_options {
	const mb_suite *suite;
	const mb_plan *plan;
	const mb_plan_filter *filter;
	const mb_backend *backend;
	const char *backend_requested; /* "auto", "cpu" or "cuda" */
	const mb_progress *progress;   /* may be NULL */
	int argc;
	char **argv;
	/* Set (by a signal handler) to stop: the receipt is marked interrupted
	 * and holds the cases that finished. */
	volatile sig_atomic_t *interrupted;
	/* Notices already given before the run (backend choice, ...). */
	const char *const *notices;
	size_t n_notices;
	/* Passes over the plan (0 or 1: one); every case of the receipt merges
	 * its passes (repetitions.h). */
	int repetitions;
	/* A sharded run's worker (shard.h): the provenance and host identity
	 * its parent read once before forking (borrowed; NULL: read here), and
	 * whether the suite's lanes are another worker's to run. */
	const json_t *provenance, *host;
	bool skip_lanes;
} mb_run_options;

/* What a run produced, for its receipt: mb_run's own, or the merge of a
 * sharded run's workers (shard.h). Borrowed: the receipt takes references
 * to the JSON values, not copies. */
typedef struct mb_run_parts {
	const char *started_at;   /* mb_run_timestamp at the start */
	const char *status;       /* "complete", "interrupted" or "failed" */
	const char *error;        /* why a failed or interrupted run stopped; NULL otherwise */
	json_t *device, *ceilings;
	json_t *notices, *cases;
	json_t *lanes;            /* NULL or empty: none */
	mb_phase_ns phases;       /* summed over every child */
	int64_t wall_ns;          /* what goodput is a fraction of */
} mb_run_parts;

/* Runs the plan and returns the receipt (not yet validated or written).
 * Cases that crash, time out or run out of memory are recorded in the
 * receipt; an error return means the harness itself could not go on, and
 * *out may still hold a receipt of what finished, with status "failed". */
int mb_run(json_t **out, const mb_run_options *opts, mb_error *err);

/* The receipt of a run whose cases were gathered elsewhere (a sharded run,
 * shard.h): identity, settings, goodput and summary as mb_run writes them,
 * around `parts`. `*out` (not yet validated) belongs to the caller. */
int mb_run_receipt(json_t **out, const mb_run_options *opts, const mb_run_parts *parts, mb_error *err);

/* The receipt's provenance: the binary's (what this build embedded, and
 * the git blob id of the running executable), and, when the working
 * directory lies in a checkout of megabench, that checkout compared with it
 * under "checkout" (receipts/provenance.h). The working directory never
 * decides the commit. `*out` belongs to the caller. Fails only when the
 * executable cannot be read or on allocation. */
int mb_run_provenance(json_t **out, const mb_run_options *opts, mb_error *err);

/* Room for a notice. */
#define MB_RUN_NOTICE_MAX 1024

/* When `prov` (mb_run_provenance's) holds a checkout whose sources differ
 * from the binary's: the notice a run gives, naming a few of the differing
 * files and counting the rest, into `buf`, and true; else false. */
bool mb_run_checkout_notice(char *buf, size_t len, const json_t *prov);

/* "2026-11-24T02:00:00.123Z": now, as receipts write times. */
void mb_run_timestamp(char *buf, size_t len);

/* The pieces every receipt writer shares (run and alltoall): a new run id
 * (32 hex digits), the catalog's statuses as built, the case counts per
 * status, and the goodput split of `wall_ns`. Each json_t belongs to the
 * caller. */
void mb_run_new_id(char out[33]);
json_t *mb_run_catalog_json(void);
json_t *mb_run_summary_json(const json_t *cases);
json_t *mb_run_goodput_json(const mb_phase_ns *p, int64_t wall_ns);

/* The receipt's "build" object, from what meson recorded. */
json_t *mb_build_identity(void);

#endif
