/* The reference worker's cache: host sides of groups computed ahead.
 *
 * A group's host side (its row sample, the twin's input rows and the fp32
 * reference, or the fp64 oracle on the CPU backend) depends only on the
 * plan, the run seed and max_check_rows. For the rows whose reference is
 * dear (linear_cross_entropy's forward GEMM on the host, the MoE FFNs:
 * mb_ref_worker_wants), the runner starts one worker process before the
 * probe (runner.c); it computes those groups in plan order, on the CPU
 * time the row children and lanes leave idle (SCHED_IDLE), while the
 * device samples the lanes and the rows run before them, and leaves each result in a file of a private folder. A
 * row child's driver then takes the group's checked rows from that file
 * instead of computing them (case_driver.c, group_prepare), waiting for
 * the worker when it is still on the group; it computes them itself when
 * the worker failed on the group or has exited.
 *
 * A file holds the group's key (row, dtype, family and shape, both seeds,
 * max_check_rows and which math: reference or oracle), then per output its
 * checked rows and their values. A load checks the key and the rows
 * against the group's own, so a file can only stand for the very result
 * the driver would have computed. Files are written to a temporary name
 * and renamed: a file that exists is whole.
 *
 * The folder and the worker's liveness (the read end of its message pipe,
 * which only the worker writes: it reads end-of-file once the worker is
 * gone) are process state, set in the runner before it forks the row
 * children, who inherit it.
 */
#ifndef MB_HARNESS_REF_CACHE_H
#define MB_HARNESS_REF_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "harness/suite.h"
#include "receipts/error.h"

/* A reference at least this dear (the row's FLOPs model per call, which
 * its host reference follows) goes to the worker; the rows below it take
 * well under a second of host time a group, which the driver's own
 * prefetch thread hides. */
#define MB_REF_WORKER_MIN_FLOPS 1e11

/* Whether the worker computes this case's group. MEGABENCH_REF_WORKER=all
 * sends every group (tests), =0 none. */
bool mb_ref_worker_wants(const mb_case_plan *c);
/* Whether it computes the group of any of plan cases [begin, end). */
bool mb_ref_worker_wants_any(const mb_plan *plan, size_t begin, size_t end);
/* Whether a run on a backend (overlap: it may do host work while the
 * device is busy) starts the worker: overlapping backends do, unless
 * MEGABENCH_REF_WORKER=0; others only with MEGABENCH_REF_WORKER set. */
bool mb_ref_worker_enabled(bool overlap);

/* The folder and the worker's liveness descriptor that this process (and
 * its children, forked later) read from; dir NULL detaches. */
void mb_ref_cache_attach(const char *dir, int alive_fd);
bool mb_ref_cache_attached(void);

/* One group's result: outputs [n_inputs, n_tensors) of `spec`, each with
 * its checked rows (out_rows[i], NULL meaning 0 .. out_n[i] - 1) of
 * want[i] (full-size arrays, row_elems floats a row). */
typedef struct mb_ref_result {
	const char *key;
	int n_inputs, n_tensors;
	const mb_tensor_spec *spec;
	int64_t *const *out_rows;
	const int64_t *out_n;
	float **want;
} mb_ref_result;

/* Claim the key's group in `dir` (NULL: the attached folder) for this
 * process: 1 when nobody had (the caller computes it and stores it), 0
 * when the worker or a row child is on it or done. Whoever comes first
 * computes a group, once: a row that reaches a group the worker has not
 * started does not wait for it. */
int mb_ref_cache_claim(const char *dir, const char *key);

/* Write the result (or, with ok false, a marker that the group failed)
 * into `dir` (NULL: the attached folder; nothing when none is). */
int mb_ref_cache_store(const char *dir, const mb_ref_result *r, bool ok, mb_error *err);

/* The driver's side: take the key's file from the attached folder; when
 * there is none, claim the group (then return 0 at once) or wait for the
 * file while the worker lives; then map want[i] full-size (the caller
 * frees them with mb_reference_free) and fill the checked rows. Returns 1
 * when the result was loaded, 0 when the caller must compute it (no
 * folder, the group claimed by the caller, the worker failed on it or
 * exited without it, or the file does not match), or a negative MB_E*
 * code. *waited_ns is the time spent waiting. */
int mb_ref_cache_load(const mb_ref_result *r, int64_t *waited_ns, mb_error *err);

#endif
