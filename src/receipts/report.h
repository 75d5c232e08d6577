/* The maintainer's report as data: receipts grouped (device, backend and
 * suite: receipt_group.h) and ordered oldest first, per group the verdicts
 * of every receipt, the rows shown (the newest receipt's first; `sel`
 * chooses and orders them: select.h), and the history across revisions:
 * per row the revisions in which a case came out SLOWER than in the
 * revision before, and the first of them. Also the figures the page draws
 * that are not in a receipt: a row's relative time across revisions
 * (geometric mean of median ratios) and a case's box statistics.
 *
 * Built once by mb_report_build, like history.c's model; the HTML and
 * Markdown printers (report_html.c, print_report_md.c) only render it.
 * An mb_report borrows the receipts and names it was built from (they must
 * outlive it) and owns everything else: release it with mb_report_free.
 */
#ifndef MB_RECEIPTS_REPORT_H
#define MB_RECEIPTS_REPORT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "receipts/diff.h"
#include "receipts/error.h"
#include "receipts/policy.h"
#include "receipts/receipt_group.h"
#include "receipts/verdict.h"

/* A revision's label ("525539a-dirty") or a case id kept for the history. */
#define MB_REPORT_LABEL_MAX 256

struct mb_select;

/* Receipts that can be compared: one device model, backend and suite. */
typedef struct mb_report_group {
	/* borrowed from the report's mb_receipt_groups */
	const json_t *first;   /* its key: device, backend and suite of this receipt */
	json_t **revs;         /* oldest first */
	const char **names;
	size_t n;
	mb_verdict_set *sets;  /* per revision */
	size_t n_sets;         /* computed so far (freed on failure too) */
	mb_group_row *rows;    /* newest receipt's rows first (mb_receipt_group_verdicts) */
	size_t n_rows;
	/* history: per row and revision, a SLOWER case against the revision
	 * before; the first such case per row */
	bool *regressed;       /* n_rows x n */
	int *first_regression;
	char (*regression_case)[MB_REPORT_LABEL_MAX];
	char notes[MB_DIFF_TEXT_MAX]; /* pairs of revisions that could not be compared */
} mb_report_group;

typedef struct mb_report {
	json_t *const *receipts; /* borrowed, as given */
	const char *const *names;
	size_t n;
	mb_receipt_groups rg;  /* the grouping and order (receipt_group.h) */
	size_t *order;         /* borrowed from rg: input indices, oldest first */
	int *group_of;         /* borrowed from rg: per input index */
	mb_report_group *groups;
	size_t n_groups;
	const mb_policy *policy; /* borrowed: the one the verdicts and diffs used */
} mb_report;

/* Group, order and judge `n` receipts (`names` label them), and diff each
 * revision of a group against the one before. `sel` (NULL: none) chooses
 * and orders the rows shown. On failure *out holds nothing to free. */
int mb_report_build(mb_report *out, json_t *const *receipts, const char *const *names, size_t n,
	const mb_policy *policy, const struct mb_select *sel, mb_error *err);
void mb_report_free(mb_report *report);

/* The revision as a person names it: describe or the short commit, and
 * "-dirty" when the tree had changes. */
void mb_report_revision_text(char *buf, size_t len, const json_t *receipt, const char *name);

/* Whether the group shows rows the newest receipt lacks (taken from an
 * older one). */
bool mb_report_rows_mixed(const mb_report_group *g);

/* How many revisions of the group hold the row at all. */
size_t mb_report_revisions_with_row(const mb_report_group *g, const char *row);

/* The history's words for row i: its first regression's revision, "none",
 * or "in one revision only" (nothing to compare). */
void mb_report_first_regression_text(char *buf, size_t len, const mb_report_group *g, size_t i);

/* The newest receipt's verdicts of the rows the group shows, in its order:
 * a copy that borrows every pointer (free only view->rows). MB_ENOMEM. */
int mb_report_newest_view(mb_verdict_set *view, const mb_report_group *g);

/* The row's `variant` across the group's revisions, for the history
 * chart: out[k] is revision k's time relative to the oldest revision that
 * has cases of the variant (the geometric mean over the case ids in both of
 * median(k) / median(oldest); NaN where no id is in both), n_cases[k] how
 * many ids that mean is over. Both g->n long. */
void mb_report_trend(double *out, size_t *n_cases, const mb_report_group *g, const char *row, const char *variant);

/* A case's kept samples (timing.excluded left out, as in the statistics)
 * relative to its median, sorted, with the box plot's figures. */
typedef struct mb_report_box {
	double *rel;           /* sorted samples relative to the median: x / median - 1 */
	size_t n, excluded;
	double q1, q3, lo, hi; /* whiskers: the most extreme samples within MB_REPORT_WHISKER_IQR */
} mb_report_box;

#define MB_REPORT_WHISKER_IQR 1.5

/* 0 (an empty box for a case without samples or median), or MB_ENOMEM. */
int mb_report_box_build(mb_report_box *out, const json_t *kase);
void mb_report_box_free(mb_report_box *box);

#endif
