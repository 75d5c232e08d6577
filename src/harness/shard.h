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
 * What a case costs (mb_shard_costs): where a receipt of an earlier run
 * has the case, what it measured; else the bytes model.
 *
 * Measured (`run --costs FROM`, FROM a receipt or a folder of them, or
 * with --save-to DIR and no --costs, the newest receipt of the same suite
 * and backend in DIR): a case's `wall_ns`, the wall time it cost its run
 * (runner.c: from the previous case's result, or its row child's start,
 * to its own; host work it waited for, checks, warm-up and sampling), per
 * pass. Where several receipts have a case, the newest (receipt_group.h's
 * order) wins. Receipts written before cases recorded wall_ns give an
 * estimate instead: the case's sampling_ns and its warm-up and two checked
 * calls at its median, plus a share of the rest of its run's wall time
 * (less the probe's ceilings) in proportion to the case's host work by
 * the model below (its reference's FLOPs and its bytes: the figure that
 * puts a row's host reference where it belongs). A case no receipt has
 * is costed by the bytes model scaled by the measured cases' ratio of
 * measured to modeled time, so that the two kinds of figure add up.
 *
 * The bytes model (mb_shard_case_cost_s), in seconds per case:
 *
 *     fixed + (warmup + 2 checked calls) * call + sampling,
 *     call = the row's bytes model at the case's shape and dtype / a device's bytes per second,
 *     sampling = max(min_time_s, min_samples * call), at most timeout_s,
 *
 * since the driver samples until min_time_s and min_samples are both met
 * and stops at timeout_s; the first case of a row adds its child's start
 * (row_start_s). It is an estimate, good for ordering rows, not for
 * predicting a run's time; a measured run predicts the next.
 *
 * Lanes (cuda backend) run after the rows of the worker they are dealt
 * to: each lane one item of the deal, costing what the newest receipt
 * timed (the lane's wall_ns) or its budget_s.
 *
 * The deal (mb_shard_assign): the plan's rows, each a run of cases one
 * row child takes (runner.c), dealt longest first to the least loaded GPU
 * (LPT), each lane with them. A row never holds up the run alone: while
 * the most loaded GPU ends later than the mean load plus the largest case
 * (Graham's bound for a deal of single cases, which therefore holds in
 * the end, unless lanes crowd that GPU; the longest lane where that is
 * more), the largest row on it is split into its shape groups
 * (the cases of one shape and dtype, which share one input seed, row
 * sample and reference: case_driver.h), or, when it holds no row of
 * several groups, its largest group into cases, and the whole is dealt
 * again. Before any of that, a row whose references a reference worker
 * computes (ref_cache.h: a row of 1e11 FLOPs a call or more, such as
 * linear_cross_entropy, the MoE FFNs and ssm_scan at nam56r shapes) is dealt by
 * shape group when the backend starts such workers: each GPU's worker
 * then computes only its own groups' references, so one row's host work
 * never makes the long pole (on four H100s, one GPU holding all of
 * linear_cross_entropy waited 33 s for its references, which a one-GPU
 * run hides behind its lanes and so its receipt never charges).
 * A GPU runs its parts of a split row in one row child, in plan
 * order; a part that does not start its row is charged a row child's
 * start (costs.row_start_s); a group split over GPUs computes its
 * reference on each, which is not charged. The repetitions scale every
 * part alike and are left out.
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
/* Most lanes one suite's deal takes, each an item of its own. */
#define MB_SHARD_MAX_LANES 16
/* Room for a line of text about a deal (mb_shard_costs_describe, ...). */
#define MB_SHARD_TEXT_BYTES 4096
/* The test-only variable of the cpu backend's simulated GPUs. */
#define MB_SHARD_FAKE_GPUS_ENV "MEGABENCH_FAKE_GPUS"

/* ---- the costs ---------------------------------------------------------- */

/* The bytes model's estimate of one case's time, in seconds (see above). */
double mb_shard_case_cost_s(const mb_case_plan *c, const mb_settings *s, const char *backend);

/* Where a case's cost came from. */
typedef enum mb_shard_cost_source {
	MB_SHARD_COST_MODEL,      /* the bytes model (scaled when others were measured) */
	MB_SHARD_COST_MEASURED,   /* a receipt's wall_ns */
	MB_SHARD_COST_ESTIMATED,  /* a receipt without wall_ns: its timing and its run's wall time */
	MB_SHARD_COST_SOURCES
} mb_shard_cost_source;

/* The most receipts one deal learns from. */
#define MB_SHARD_MAX_RECEIPTS 4096

typedef struct mb_shard_costs {
	double *case_s;            /* per plan case: seconds per pass */
	unsigned char *source;     /* per plan case: its mb_shard_cost_source */
	size_t n_cases;
	size_t counts[MB_SHARD_COST_SOURCES]; /* cases per source */
	/* The bytes model's figures times this; 1 when no case was measured. */
	double model_scale;
	/* What starting a row child costs (its context and modules): in the
	 * bytes model's first case of each row, as wall_ns has it in the
	 * first case a row child runs; and charged to each part of a split
	 * row that does not start it, since it may need a child of its own. */
	double row_start_s;
	/* Whether the backend starts a reference worker (ref_cache.h), so
	 * that the rows it serves are dealt by shape group. */
	bool ref_worker;
	/* The suite's lanes (cuda backend; n_lanes 0 elsewhere), in suite
	 * order, each run after the rows of the worker it is dealt to: its name
	 * and cost, their sum, and how many of them a receipt timed. */
	size_t n_lanes, lanes_measured;
	char lane_name[MB_SHARD_MAX_LANES][64];
	double lane_s[MB_SHARD_MAX_LANES];
	double lanes_s;
	/* The receipts that gave figures, newest last: [{"path", "run_id",
	 * "cases"}]; an empty array for the bytes model alone. Owned. */
	json_t *receipts;
	/* What finding them passed over (files of a folder that are not
	 * receipts of this backend, a store without one): strings the run
	 * gives as notices. Owned; NULL: none. */
	json_t *notes;
} mb_shard_costs;

/* The bytes model's costs of every case of `plan`, and the lanes' budgets
 * (`suite` is the plan's). *out is the caller's (mb_shard_costs_free). */
int mb_shard_costs_model(mb_shard_costs *out, const mb_plan *plan, const mb_suite *suite, const char *backend,
	mb_error *err);

/* The costs learned from `receipts` (loaded and validated, borrowed;
 * names[i] names receipts[i] in the result and in errors), as above.
 * Receipts of another backend than `backend` are refused (MB_EINVAL,
 * naming the file): their times say nothing of this one's. */
int mb_shard_costs_learn(mb_shard_costs *out, const mb_plan *plan, const mb_suite *suite, const char *backend,
	json_t *const *receipts, const char *const *names, size_t n, mb_error *err);

/* `run --costs`: the costs learned from each of `from` (a receipt, or a
 * folder whose *.json receipts of `backend` are read; a file there that
 * is not such a receipt is passed over and named in out->notes); with no
 * `from` and a `store` (--save-to's folder), from the newest receipt
 * there (by name: --save-to names begin with the time) of the suite's
 * name and `backend`; with neither, or no such receipt there (a note),
 * the bytes model. A named file that cannot be read, or is a receipt of
 * another backend, is an error naming it. */
int mb_shard_costs_load(mb_shard_costs *out, const mb_plan *plan, const mb_suite *suite, const char *backend,
	const char *const *from, size_t n_from, const char *store, mb_error *err);

void mb_shard_costs_free(mb_shard_costs *c);

/* One line on where the costs came from, for the plan and the notices:
 * "measured: 236 cases from 3 receipts (a.json, ...); 16 by the bytes model (x1.40)". */
void mb_shard_costs_describe(char *buf, size_t len, const mb_shard_costs *c);

/* ---- the deal ------------------------------------------------------------ */

/* LPT: items in order of decreasing cost (equal costs: the lower index
 * first), each to the bin with the least cost so far (equal: the lower
 * bin). Fills out_bin[0 .. n) and out_load[0 .. n_bins). */
void mb_shard_lpt(int *out_bin, double *out_load, const double *cost, size_t n, int n_bins);

/* A part of the plan one GPU runs: a run of cases of one row (the whole
 * row, one or more of its shape groups' worth, or single cases of a
 * split group), and the GPU slot it goes to. */
typedef struct mb_shard_row {
	size_t begin, end;   /* plan cases [begin, end) */
	double cost_s;
	int slot;            /* index into the run's GPUs */
	bool split;          /* its row was split over parts */
} mb_shard_row;

/* What the deal came to, beside its parts. */
typedef struct mb_shard_deal_info {
	double load_s[MB_SHARD_MAX_GPUS]; /* per slot, lanes included */
	int lane_slot[MB_SHARD_MAX_LANES]; /* the slot that runs each lane */
	/* With no lane to deal (the cpu backend skips them): the slot whose
	 * worker is told about the suite's lanes all the same, and says it
	 * skips them; else the first lane's. */
	int lanes_slot;
	double total_s;                   /* every case and the lanes (and split parts' row starts) */
	double largest_case_s;            /* with a row start (costs.row_start_s) */
	/* the mean load plus largest_case_s, or the longest lane where that
	 * is more: what the most loaded slot is held to */
	double bound_s;
	size_t n_split;                   /* rows split over parts */
} mb_shard_deal_info;

/* The plan's rows (and lanes), costed by `costs` and dealt to `n_slots`
 * GPUs as above: *out (plan order, the caller frees it) holds *out_n
 * parts, in which the parts of one row are adjacent. */
int mb_shard_assign(mb_shard_row **out, size_t *out_n, mb_shard_deal_info *info, const mb_plan *plan,
	const mb_shard_costs *costs, int n_slots, mb_error *err);

/* What slot `slot` runs, in plan order: [{"row", "cases", "of"}], each
 * row once, with how many of its cases the slot runs and of how many
 * (fewer: the row was split). A new array; NULL on allocation failure. */
json_t *mb_shard_slot_rows(const mb_shard_row *parts, size_t n, const mb_plan *plan, int slot);

/* mb_shard_slot_rows' array as text: "rope_qk (24), linear_cross_entropy
 * (8 of 16)". */
void mb_shard_slot_text(char *buf, size_t len, const json_t *rows);

/* The lanes dealt to `slot`, as text ("lanes nam56r, dense"; "" when
 * none) and as a new array of their names. */
void mb_shard_slot_lanes_text(char *buf, size_t len, const mb_shard_costs *c, const mb_shard_deal_info *d, int slot);
json_t *mb_shard_slot_lanes(const mb_shard_costs *c, const mb_shard_deal_info *d, int slot);

/* The largest load over the mean (1: even), of `n_slots` slots. */
double mb_shard_balance(const mb_shard_deal_info *d, int n_slots);

/* The deal's balance in words: "the most loaded GPU about 4.2 s, 1.153 x
 * the mean (3.6 s); the bound 6.3 s (the mean plus the largest case,
 * 2.7 s)". */
void mb_shard_deal_describe(char *buf, size_t len, const mb_shard_deal_info *d, int n_slots);

/* The receipt's `shard_plan`: the cost model and what it learned from,
 * the deal's total, bound and balance, and the rows it split (a new
 * object; NULL on allocation failure). */
json_t *mb_shard_plan_json(const mb_shard_costs *c, const mb_shard_deal_info *d, const mb_shard_row *parts,
	size_t n, const mb_plan *plan, int n_slots);

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
	/* What each case costs (borrowed); NULL: the bytes model. */
	const mb_shard_costs *costs;
} mb_shard_options;

/* Run the plan over the GPUs and return the merged receipt (not yet
 * validated or written), as mb_run does: a worker's death is recorded in
 * its cases, an error return means the run could not go on (the topology
 * probe failed, a worker could not be started) or stopped (interrupted,
 * MB_EINTERRUPTED; a worker's harness error), and *out may still hold the
 * receipt of what finished. */
int mb_shard_run(json_t **out, const mb_shard_options *opts, mb_error *err);

#endif
