/* Receipts that may be compared: one device model, backend and suite (a
 * "group"), oldest commit first. The report, the nightly history and the
 * gate's --baseline-dir all group and order receipts through here, so that
 * they agree on what is comparable and what is newest.
 *
 * A group borrows the receipts and names it was built from; they must
 * outlive it. mb_receipt_groups_free releases what the groups own.
 */
#ifndef MB_RECEIPTS_RECEIPT_GROUP_H
#define MB_RECEIPTS_RECEIPT_GROUP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "receipts/error.h"
#include "receipts/policy.h"
#include "receipts/verdict.h"

/* Same device name, backend and suite name. */
bool mb_receipt_same_group(const json_t *a, const json_t *b);

/* `a` comes after `b`: a later provenance.commit_time, then a later
 * started_at. */
bool mb_receipt_later(const json_t *a, const json_t *b);

/* idx[0..n) = the receipts' indices, oldest first (stable; n log n).
 * MB_ENOMEM, idx untouched, when there is no memory for the keys. */
int mb_receipt_order(size_t *idx, json_t *const *receipts, size_t n);

/* Whether `receipt` is a complete run with cases, timed without a tool
 * injected into it (its "instrumented" object: a sanitizer or profiler),
 * the only kind a nightly store's readers take (gate --baseline-dir,
 * history). If not, why, into `why`: "not a complete run: interrupted
 * after 28 of 94 cases", "not a complete run: failed: ...", "no case
 * (device unknown ...)", "timed under compute-sanitizer (...)". */
bool mb_receipt_complete(const json_t *receipt, char *why, size_t len);

/* A run is counted once, by its run_id, however many paths lead to it (a
 * copy, a symlink, a folder and a file in it). The set records the name
 * each run was first seen under; release it with mb_run_set_free. */
typedef struct mb_run_set {
	json_t *first; /* run_id -> name */
} mb_run_set;

int mb_run_set_init(mb_run_set *s, mb_error *err);

/* Record `receipt`'s run under `name`: *out_first is NULL for a new run,
 * else the name it was first seen under (borrowed from the set). */
int mb_run_set_add(const char **out_first, mb_run_set *s, const json_t *receipt, const char *name, mb_error *err);

void mb_run_set_free(mb_run_set *s);

typedef struct mb_receipt_group {
	const json_t *first;   /* its key: device, backend and suite of this receipt */
	json_t **revs;         /* oldest first (borrowed receipts) */
	const char **names;
	size_t n;
} mb_receipt_group;

typedef struct mb_receipt_groups {
	mb_receipt_group *groups; /* in the order of their oldest receipt */
	size_t n_groups;
	size_t *order;         /* input indices, oldest first */
	int *group_of;         /* per input index */
} mb_receipt_groups;

int mb_receipt_groups_build(mb_receipt_groups *out, json_t *const *receipts, const char *const *names, size_t n,
	mb_error *err);
void mb_receipt_groups_free(mb_receipt_groups *groups);

/* A row of a group, once: its verdict from the newest revision that has
 * it (a small receipt newer than a full one must not hide the rows it did
 * not run). */
typedef struct mb_group_row {
	const mb_row_verdict *v; /* borrowed from sets[rev] */
	size_t rev;
} mb_group_row;

/* The verdicts of every revision of `g` into *sets (*n_sets counts those
 * computed, also on failure, so that the caller frees exactly those), and
 * its rows into *rows: the newest receipt's in its order, then rows only
 * older receipts have, newest first. `who` names the caller in errors. */
int mb_receipt_group_verdicts(mb_verdict_set **sets, size_t *n_sets, mb_group_row **rows, size_t *n_rows,
	const mb_receipt_group *g, const mb_policy *policy, const char *who, mb_error *err);

/* The paths DIR/NAME of every "*.json" and "*.json.gz" entry of `dir` (not
 * hidden ones), sorted by name, whatever they are: a reader refuses, by
 * name, one that is not a readable regular file (a FIFO, a dangling link, a
 * folder). *out and each path are the caller's (mb_receipt_paths_free).
 * Errors: MB_ENOTFOUND no such directory, MB_EIO cannot be read,
 * MB_ENOMEM. */
int mb_receipt_dir_list(char ***out, size_t *n_out, const char *dir, mb_error *err);
void mb_receipt_paths_free(char **paths, size_t n);

#endif
