/* A backend runs cases inside an isolated child process (see isolate.h).
 *
 * The parent never touches the device: it forks one child to probe the
 * device (identity and ceilings), then one child per row, which calls
 * run_case for each of the row's cases in plan order. Each case comes back
 * as a receipt case object (schemas/receipt.schema.json#/definitions/case).
 * A wrong answer, an out-of-memory or an unsupported dtype is the case's
 * status, not a harness failure: run_case returns non-zero only when the
 * harness itself cannot go on.
 */
#ifndef MB_HARNESS_BACKEND_H
#define MB_HARNESS_BACKEND_H

#include <jansson.h>
#include <stdint.h>

#include "receipts/error.h"
#include "harness/suite.h"

/* Where the child's wall time went, for run-level goodput. Every field is
 * nanoseconds; the parent adds them up across children. */
typedef struct mb_phase_ns {
	int64_t goodput;          /* timed kernel work (sum of the kept samples) */
	int64_t context_load;     /* device context, modules, library handles */
	int64_t ceilings;         /* copy and GEMM probes */
	int64_t input_generation; /* random inputs, conversion, host-to-device copies */
	int64_t reference;        /* the fp32 C reference (and fp64 oracle) */
	int64_t correctness;      /* poisoning, device-to-host copies, comparison */
	int64_t warmup;           /* warm-up calls */
	int64_t l2_flush;         /* cold-mode cache flushes */
} mb_phase_ns;

typedef struct mb_backend {
	const char *name; /* "cpu" or "cuda" */
	/* Identify the device (receipt "device") and measure its ceilings
	 * (receipt "ceilings"). Both outputs belong to the caller. */
	int (*probe)(json_t **out_device, json_t **out_ceilings, mb_phase_ns *phases, mb_error *err);
	/* Run one case. `ceilings` is what probe returned (borrowed). */
	int (*run_case)(json_t **out_case, const mb_case_plan *plan, const mb_settings *settings,
		const json_t *ceilings, mb_phase_ns *phases, mb_error *err);
	/* Release what the backend holds in this child (may be NULL). */
	void (*shutdown)(void);
} mb_backend;

const mb_backend *mb_backend_cpu(void);

/* NULL when the binary was built without CUDA. */
const mb_backend *mb_backend_cuda(void);

/* Whether a CUDA device is usable, asked in a short-lived child so that the
 * parent never initialises CUDA. Returns the device count (0 = none), and
 * sets `why` when there is none. */
int mb_backend_cuda_devices(char *why, size_t why_len);

#endif
