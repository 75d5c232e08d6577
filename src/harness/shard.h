/* One run over several GPUs of a node: `megabench run --gpus N`.
 *
 * The plan's rows (the runs of cases one row child takes, runner.c) are
 * dealt to one worker process per GPU, longest first, each to the GPU with
 * the least work so far (LPT scheduling), so that the workers finish
 * together. A worker is a fork of `run` that sees only its own GPU
 * (CUDA_VISIBLE_DEVICES names it by UUID, and MEGABENCH_DEVICE is 0 inside
 * it) and runs its rows as a one-GPU run does: a probe child, a child per
 * row. It forwards every event to the parent, which prints them prefixed
 * with the GPU ("gpu1 rope_qk/...") and merges the cases into one receipt:
 * each case names the GPU that ran it (`gpu`, an index into the receipt's
 * `gpus`: index, name, uuid, PCI bus id), `topology` says how the GPUs are
 * linked (NVLink or PCIe, cuda_topology.h), and `shards` what each worker
 * ran, how long it took and how it ended.
 *
 * A worker that dies (a signal, a crash) or stops on an error loses only
 * its own cases: those it had not finished are recorded `crashed`, with
 * how it ended; what it finished, and every other GPU's cases, are kept,
 * and the receipt stays valid. When the run itself is interrupted, each
 * worker is told (SIGTERM) and its unfinished cases are left out, as a
 * one-GPU run leaves them out.
 *
 * The cost model (mb_shard_case_cost_s), in seconds per case:
 *
 *     fixed + (warmup + 2 checked calls) * call + sampling,
 *     call = the row's bytes model at the case's shape and dtype / a device's bytes per second,
 *     sampling = max(min_time_s, min_samples * call), at most timeout_s,
 *
 * since the driver samples until min_time_s and min_samples are both met
 * and stops at timeout_s. A row's cost is the sum over its cases (times
 * the repetitions, which scale every row alike). It is an estimate, good
 * for ordering rows, not for predicting a run's time.
 *
 * MEGABENCH_FAKE_GPUS=N (tests only) lets the cpu backend stand N workers
 * on the CPU in for N GPUs, so that sharding, the merge and a killed worker
 * are tested on a machine without a GPU. Such a receipt says so
 * (`gpus[].simulated`, topology source "none"); its times are the CPU's,
 * shared by every worker.
 */
#ifndef MB_HARNESS_SHARD_H
#define MB_HARNESS_SHARD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "harness/runner.h"
#include "harness/suite.h"
#include "receipts/error.h"

/* Most GPUs one sharded run uses. */
#define MB_SHARD_MAX_GPUS 64
/* The test-only variable of the cpu backend's simulated GPUs. */
#define MB_SHARD_FAKE_GPUS_ENV "MEGABENCH_FAKE_GPUS"

/* ---- the assignment --------------------------------------------------- */

/* The model's estimate of one case's time, in seconds (see above). */
double mb_shard_case_cost_s(const mb_case_plan *c, const mb_settings *s, const char *backend);

/* LPT: items in order of decreasing cost (equal costs: the lower index
 * first), each to the bin with the least cost so far (equal: the lower
 * bin). Fills out_bin[0 .. n) and out_load[0 .. n_bins). */
void mb_shard_lpt(int *out_bin, double *out_load, const double *cost, size_t n, int n_bins);

/* A run of the plan's cases of one row, and the GPU slot it goes to. */
typedef struct mb_shard_row {
	size_t begin, end;   /* plan cases [begin, end) */
	double cost_s;
	int slot;            /* index into the run's GPUs */
} mb_shard_row;

/* The plan's rows, costed and dealt to `n_slots` GPUs by LPT: *out (plan
 * order, the caller frees it) holds *out_n rows; out_load[slot] is each
 * slot's estimated seconds (MB_SHARD_MAX_GPUS long). */
int mb_shard_assign(mb_shard_row **out, size_t *out_n, double *out_load, const mb_plan *plan,
	const mb_settings *s, const char *backend, int n_slots, mb_error *err);

/* ---- the merge ---------------------------------------------------------- */

/* What the parent knows of the cases after the workers ended. */
typedef struct mb_shard_merge_in {
	const mb_plan *plan;
	const char *backend;
	const int *slot_of_case;   /* per plan case: the GPU slot that was to run it */
	const json_t *passes;      /* per plan case: an array of its finished passes (case objects) */
	int n_slots;
	/* Per slot: why its unfinished cases are lost ("gpu 1 (NVIDIA H200):
	 * its worker was killed by signal 9 (Killed)"), recorded as their
	 * error with status crashed; NULL: they are left out (the run was
	 * interrupted) or there are none. */
	const char *const *lost_why;
} mb_shard_merge_in;

/* The receipt's cases into *out (a new array, plan order): each case with
 * a finished pass is its passes merged (repetitions.h), and each case
 * whose slot has a lost_why and no finished pass is crashed with it;
 * every case gets `gpu`, its slot. out_counts[slot] (n_slots long) counts
 * the cases recorded per slot. */
int mb_shard_merge(json_t **out, size_t *out_counts, const mb_shard_merge_in *in, mb_error *err);

/* ---- the run ----------------------------------------------------------- */

typedef struct mb_shard_options {
	/* The whole plan, with its progress printer and interrupt flag, as for
	 * mb_run (provenance, host and skip_lanes are set per worker). */
	const mb_run_options *run;
	const int *devices;        /* the GPUs' indices, as --devices names them */
	int n_gpus;
	/* Cpu-backend workers stand in for the GPUs (MEGABENCH_FAKE_GPUS). */
	bool simulated;
} mb_shard_options;

/* Run the plan over the GPUs and return the merged receipt (not yet
 * validated or written), as mb_run does: a worker's death is recorded in
 * its cases, an error return means the run could not go on (the topology
 * probe failed, a worker could not be started) or stopped (interrupted,
 * MB_EINTERRUPTED; a worker's harness error), and *out may still hold the
 * receipt of what finished. */
int mb_shard_run(json_t **out, const mb_shard_options *opts, mb_error *err);

#endif
