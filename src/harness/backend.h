/* A backend supplies device operations; the case driver (case_driver.h)
 * owns the sequence of every case and calls them.
 *
 * The parent never touches the device: it forks one child to probe the
 * device (identity and ceilings), then one child per row, which hands the
 * row's cases to the driver. The operations below work on one case's
 * device state (mb_dev_case, the backend's own struct): its tensors, in the
 * row's tensor-spec order, and whatever the backend keeps to time them.
 *
 * A multi-rank backend (nccl_backend.c: a row across GPUs, moe_alltoall)
 * drives several GPUs as one case: each operation fans out over the
 * ranks, a timed call's time is the slowest rank's, the tensors the driver
 * sees are every rank's rows stacked (whole_case), and the bytes a call
 * moves are checked exactly beside the outputs (check_exact).
 *
 * Return values: 0; MB_DEVICE_FAILED when the device refused or failed
 * (out of memory, a fault, a launch the variant refuses), with `o` saying
 * what becomes of the case; or a negative MB_E* code when the harness
 * itself cannot go on (err set). A device failure is the case's outcome,
 * not the run's.
 */
#ifndef MB_HARNESS_BACKEND_H
#define MB_HARNESS_BACKEND_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "harness/input_rng.h"
#include "harness/suite.h"
#include "receipts/error.h"

/* Where the child's wall time went, for run-level goodput. Every field is
 * nanoseconds; the parent adds them up across children. */
typedef struct mb_phase_ns {
	int64_t goodput;          /* timed kernel work (sum of the kept samples) */
	int64_t context_load;     /* device context, modules, library handles */
	int64_t ceilings;         /* copy and GEMM probes */
	int64_t input_generation; /* filling input tensors (device) and the host twin's rows, when waited for */
	int64_t reference;        /* the fp32 C reference (and fp64 oracle), when waited for */
	int64_t correctness;      /* poisoning, checked calls, reading rows back, comparison */
	int64_t warmup;           /* warm-up calls, graph capture */
	int64_t l2_flush;         /* cold-mode cache flushes (device time) */
	/* Host work that ran on another thread while the device was timing
	 * (the next shape's inputs and reference): it cost no wall time, so it
	 * is not badput, but the receipt says how much there was. */
	int64_t overlapped;
} mb_phase_ns;

#define MB_DEVICE_FAILED 1
/* Most calls a backend is asked to time in one batch. */
#define MB_MAX_BATCH 64
/* A sample taken while the SM clock is below this fraction of its value at
 * the start of the case is excluded (clock monitoring backends only). */
#define MB_CLOCK_SAG_FRACTION 0.9

/* What a device failure makes of the case. */
typedef struct mb_outcome {
	const char *status;  /* "crashed", "oom", "skipped" */
	char text[256];
} mb_outcome;

/* One timed batch, filled by time_batch: n calls, each with its sample
 * (CUPTI busy time, or the host clock), and, where the backend has them,
 * the CUDA-event time, the span and the launch count (-1: not observed). */
typedef struct mb_batch {
	int n;
	double *sample_ns;  /* < 0: no attribution for this call (see events) */
	double *events_ns;  /* NULL when the backend has no second clock */
	double *span_ns;
	int *launches;
	/* each launch's own time, n rows of launch_cap in start order (NAN
	 * past the call's launches); NULL when the backend cannot tell or the
	 * driver keeps none. The driver sizes the rows by the variant's bytes
	 * model at the case's shape (its launch count, the same for every
	 * batch of a case): the launches it takes medians of. */
	double *launch_ns;
	int launch_cap;
	bool sagged;        /* the clock sagged during the batch: exclude it */
} mb_batch;

/* What the backend observed over a case, for the receipt. */
typedef struct mb_dev_report {
	int64_t io_bytes;           /* the case's inputs and outputs on the device */
	/* Measured over the variant's first call, beyond its inputs and
	 * outputs: the most its scratch slots held (kernels/workspace.h; -1:
	 * not measured), and the drop in the driver's free memory (INT64_MIN:
	 * not measured). */
	int64_t scratch_bytes;
	int64_t driver_scratch_bytes;
	const char *sample_source;  /* "cupti", "events" or "monotonic" */
	json_t *kernels;            /* kernels seen (owned; NULL when not observed) */
	const char *unobserved_why; /* why launches were not observed, or NULL */
	unsigned clock_start_mhz;   /* 0: clocks not monitored */
	/* A case across ranks (multi-rank backends only; else 0 and NULL):
	 * the bytes each rank moved per call, measured, which the throughput
	 * reports in place of the bytes model's; and the receipt's
	 * case.collective (owned by the caller afterwards). */
	int64_t moved_bytes;
	json_t *collective;
} mb_dev_report;

/* What a backend's own exact check of the bytes a call moved found (a
 * multi-rank backend: every row a dispatch delivered, against where the
 * routing sends it), added up over a case's checked calls. */
typedef struct mb_exact {
	/* what was compared with what: the receipt's correctness.reference
	 * when the variant only moves bytes */
	const char *reference;
	/* the variant writes no output (it moves bytes and computes nothing):
	 * the driver compares none, and this check is its correctness */
	bool moves_only;
	uint64_t checked;  /* rows (and counts) compared */
	uint64_t wrong;    /* of them not as they must be */
	char first[256];   /* the first of those, said */
} mb_exact;

typedef struct mb_dev_case mb_dev_case;

typedef struct mb_backend {
	const char *name; /* "cpu" or "cuda" */
	/* The variants compute in fp32 whatever the storage dtype (the CPU
	 * backend times the fp32 reference): check them against the fp64
	 * oracle at the fp32 tolerance. */
	bool fp32_variants;
	/* Host work for the next shape may run on a thread while this one is
	 * timed (false where the timed work is the host's own). */
	bool overlap_host_work;
	/* Most calls in one timed batch; 1 times each call on its own. */
	int max_batch;

	/* Identify the device (receipt "device") and measure its ceilings
	 * (receipt "ceilings"). Both outputs belong to the caller. */
	int (*probe)(json_t **out_device, json_t **out_ceilings, mb_phase_ns *phases, mb_error *err);
	/* Allocate the case's tensors (spec order, inputs then outputs). */
	int (*open)(mb_dev_case **out, const mb_case_plan *plan, const mb_tensor_spec *spec, int n_tensors,
		mb_phase_ns *phases, mb_outcome *o, mb_error *err);
	/* Write every element of input `tensor` from the generator. */
	int (*fill)(mb_dev_case *dc, int tensor, const mb_input_params *p, mb_outcome *o);
	/* Write NaN over every output. */
	int (*poison)(mb_dev_case *dc, mb_outcome *o);
	/* Queue one untimed call of the variant; a launch the variant refuses
	 * (a shape it does not take) makes the case "skipped". */
	int (*call)(mb_dev_case *dc, mb_outcome *o);
	/* Wait for everything queued; drop records of untimed work. */
	int (*sync)(mb_dev_case *dc, mb_outcome *o, mb_error *err);
	/* Prepare the timed path of the case's mode (graph mode captures the
	 * variant into a graph; later calls replay it). */
	int (*arm)(mb_dev_case *dc, mb_outcome *o);
	/* Time `b->n` calls in the case's mode and wait for them. Device time
	 * spent flushing caches goes to phases->l2_flush. */
	int (*time_batch)(mb_dev_case *dc, mb_batch *b, mb_phase_ns *phases, mb_outcome *o, mb_error *err);
	/* Rows `rows[0 .. n_rows)` (NULL: rows 0 .. n_rows-1) of output
	 * `tensor` as fp32, packed (row i at *out + i * row_elems), in memory
	 * the backend owns until the next read_rows or close. */
	int (*read_rows)(mb_dev_case *dc, int tensor, const int64_t *rows, int64_t n_rows, const float **out,
		mb_outcome *o);
	/* What was observed (kernels owned by the caller afterwards). */
	void (*report)(mb_dev_case *dc, mb_dev_report *out);
	/* Optional (NULL: the case itself). The case as the host twin, the
	 * reference, the row sample and read_rows see it: a multi-rank
	 * backend, whose ranks each hold a slice of every tensor, stacks the
	 * slices rank by rank (moe_alltoall: G x T tokens). `open` gets its
	 * tensors. */
	void (*whole_case)(const mb_case_plan *plan, mb_case_plan *out);
	/* Optional (NULL: none). After each checked call, before its outputs
	 * are read back: check exactly what the call moved and add it into
	 * `out` (zeroed by the driver for each case). `rows` (NULL: all) are
	 * the case's sampled rows, n_rows of the whole case's, which the
	 * check may compare in full. */
	int (*check_exact)(mb_dev_case *dc, const int64_t *rows, int64_t n_rows, mb_exact *out, mb_outcome *o,
		mb_error *err);
	/* Release the case (accepts NULL). */
	void (*close)(mb_dev_case *dc);
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
