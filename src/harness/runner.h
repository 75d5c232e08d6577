/* The run: probe the device in a child, run each row's cases in a child of
 * its own, and assemble the receipt. Runners never print: what a person
 * sees goes through the progress callbacks. */
#ifndef MB_HARNESS_RUNNER_H
#define MB_HARNESS_RUNNER_H

#include <jansson.h>
#include <signal.h>
#include <stddef.h>

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
	/* Where to look for the git checkout (NULL: the current directory, then
	 * the source tree the binary was built from). */
	const char *source_dir;
	/* Notices already given before the run (backend choice, ...). */
	const char *const *notices;
	size_t n_notices;
	/* Passes over the plan (0 or 1: one); every case of the receipt merges
	 * its passes (repetitions.h). */
	int repetitions;
} mb_run_options;

/* Runs the plan and returns the receipt (not yet validated or written).
 * Cases that crash, time out or run out of memory are recorded in the
 * receipt; an error return means the harness itself could not go on, and
 * *out may still hold a receipt of what finished, with status "failed". */
int mb_run(json_t **out, const mb_run_options *opts, mb_error *err);

/* The receipt's "build" object, from what meson recorded. */
json_t *mb_build_identity(void);

#endif
