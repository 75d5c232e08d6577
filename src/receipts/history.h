/* The nightly history: receipts grouped by device, backend and suite
 * (receipt_group.h), oldest commit first, and per row its verdict and lane
 * delta in each receipt, with the decision the training stack acts on.
 *
 * A nightly is a loss for a row when its verdict is drop: the fallback
 * wins, or no pair wins by more than the minimum effect, or a wrong answer.
 * A win is keep or conditional; ambiguous and not enough evidence are
 * neither and break a streak. A row's nightlies are the receipts of the
 * group that ran it: one that left the row out says nothing about it.
 *
 *   demote     the row's last two nightlies are both losses (both receipts
 *              named): the fallback has caught up.
 *   dropped    the same, for a row whose status is drop already (in the
 *              newest receipt's catalog, which records every row as
 *              built): nothing to demote.
 *   confirmed  the row's last two or more nightlies are all keep.
 *   watch      anything else (one losing nightly between wins included).
 *
 * A history never holds a whole receipt: mb_history_add computes the
 * receipt's verdicts and keeps only what the history and its printers read
 * (a digest of the receipt and one small cell per row), so that the
 * caller can free each receipt as soon as it is added and a year of
 * nightlies fits in little memory. The history owns everything it holds
 * (mb_history_free).
 */
#ifndef MB_RECEIPTS_HISTORY_H
#define MB_RECEIPTS_HISTORY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "receipts/error.h"
#include "receipts/policy.h"
#include "receipts/receipt_group.h"
#include "receipts/verdict.h"

/* Consecutive losing nightlies that flag a row for demotion, and keep
 * nightlies that confirm it. */
#define MB_HISTORY_STREAK 2

typedef enum mb_history_mark {
	MB_HISTORY_ABSENT, /* the receipt has no case of the row */
	MB_HISTORY_WIN,
	MB_HISTORY_LOSS,
	MB_HISTORY_NEITHER
} mb_history_mark;

typedef enum mb_history_decision {
	MB_HISTORY_WATCH,
	MB_HISTORY_DEMOTE,
	MB_HISTORY_CONFIRMED,
	MB_HISTORY_DROPPED
} mb_history_decision;

/* What the history keeps of one row's verdict in one receipt. */
typedef struct mb_history_cell {
	mb_verdict_kind kind;
	mb_verdict_evidence evidence;
	char *label;                  /* mb_verdict_label */
	char *lane;                   /* mb_history_lane_text */
	char *status;                 /* mb_verdict_status_text */
	bool status_agrees;           /* the verdict supports the status (verdict.h) */
	double saved_ns;              /* time saved (per step or per call); NaN: none */
	/* what the page charts: the verdict's pair at the row's largest shape
	 * (alt NULL and medians NaN without one) */
	double fused_median_ns, alt_median_ns;
	char *alt;                    /* the best alternative's variant */
	char *shape;                  /* family/A=1,B=2 */
	char dtype[8], mode[8];
} mb_history_cell;

/* One receipt, reduced. The digest holds the members of the receipt that
 * grouping, ordering and the printers read: run_id, status, started_at,
 * backend, device.name, suite.name, provenance (commit, commit_time,
 * describe), catalog, and each lane's name. */
typedef struct mb_history_rev {
	json_t *digest;
	char *name;
	char **rows;                  /* its rows, in the receipt's order */
	mb_history_cell *cells;       /* per row */
	size_t n_rows;
} mb_history_rev;

typedef struct mb_history_row {
	char *row;
	const mb_history_cell **cells; /* per revision of the group; NULL where absent */
	mb_history_mark *marks;
	mb_history_decision decision;
	size_t streak;                /* nightlies in the trailing streak that decided it
	                                 (of those that ran the row) */
	size_t from, to;              /* demote, dropped: the two losing revisions (to = the newest) */
} mb_history_row;

typedef struct mb_history_group {
	const mb_receipt_group *g;    /* borrowed from the history's groups; revs are digests */
	size_t *revs;                 /* per revision of g: its index in the history's revs */
	mb_history_row *rows;         /* newest receipt's rows first */
	size_t n_rows;
} mb_history_group;

typedef struct mb_history {
	mb_history_rev *revs;         /* in the order they were added */
	size_t n_revs, cap_revs;
	mb_receipt_groups rg;
	mb_history_group *groups;
	size_t n_groups;
	const mb_policy *policy;      /* borrowed */
} mb_history;

/* An empty history judged by `policy`, which must outlive it. */
void mb_history_init(mb_history *h, const mb_policy *policy);

/* Compute the verdicts of `receipt` (a valid receipt, borrowed for the
 * call only) and keep its digest and cells under `name`. Errors name the
 * receipt: MB_ENOMEM, or what mb_verdict_compute says. */
int mb_history_add(mb_history *h, const json_t *receipt, const char *name, mb_error *err);

/* Group and order the receipts added so far and decide every row; call it
 * once, after the last mb_history_add. */
int mb_history_finish(mb_history *h, mb_error *err);

void mb_history_free(mb_history *h);

/* "demote", "confirmed", "watch", "dropped". */
const char *mb_history_decision_name(mb_history_decision d);

/* One line: "demote: drop in A (2026-11-20, abc1234) and B (...)",
 * "confirmed: keep in the last 3 nightlies", "dropped: ...", "watch: ...".
 * Every printer of the history says these words. */
void mb_history_decision_text(char *buf, size_t len, const mb_history_group *g, const mb_history_row *r);

/* A cell's lane delta: "lane -12.3 us/step (+2.24%)" for a significant
 * win (", not in every step" where lanes are inconclusive), "lane: no win"
 * with lane evidence but none significant, "no lane" without. */
void mb_history_lane_text(char *buf, size_t len, const mb_row_verdict *v);

/* A revision's label: "2026-11-23 abc1234def56" (commit date and short
 * commit, or the file name without provenance). */
void mb_history_revision_label(char *buf, size_t len, const json_t *receipt, const char *name);

#endif
