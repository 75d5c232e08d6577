/* What a reporter shows (diff, gate, verdict, report, history): the cases
 * and rows a reviewer asks for, in the order asked for.
 *
 * Cases are selected with `run`'s syntax, on the case id
 * (row/variant/dtype/mode/family/shape):
 *   --filter REGEX   keep the cases whose id matches (POSIX extended);
 *   --exclude REGEX  leave out the cases whose id matches;
 *   --rows LIST      keep the cases of these rows (comma-separated).
 * The selection is applied to every receipt before anything is computed,
 * so that verdicts, comparisons and the gate see only the cases selected
 * (a row left out is not "missing"). A selection that leaves no case in
 * any receipt, or names a row no receipt has, is an error naming the
 * option.
 *
 * Then, on what was computed:
 *   --only-changed   diff, gate: the cases that are not SAME (and any
 *                    drift), and the rows whose verdict differs between
 *                    base and head; verdict: the rows whose verdict
 *                    disagrees with their catalog status; report, history:
 *                    those rows, and the rows whose verdict differs between
 *                    the receipts of their group. The counts of the
 *                    comparison stay whole: a hidden case still counts.
 *   --sort KEY       diff, gate: rank (default: drift and regressions
 *                    first), id, change (the largest relative change
 *                    first); verdict, report, history: receipt (default: as
 *                    the receipt lists the rows), row (by name), action
 *                    (what to act on first: a status the evidence does not
 *                    support, demote, then drop, ambiguous, conditional,
 *                    keep), saved (the most time saved first).
 *
 * An mb_select owns its compiled expressions; mb_select_free releases
 * them. The receipts and results it edits stay the caller's.
 */
#ifndef MB_RECEIPTS_SELECT_H
#define MB_RECEIPTS_SELECT_H

#include <jansson.h>
#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "receipts/diff.h"
#include "receipts/error.h"
#include "receipts/history.h"
#include "receipts/receipt_group.h"
#include "receipts/verdict.h"

typedef enum mb_sort_key {
	MB_SORT_DEFAULT,  /* rank (diff) or receipt order (rows) */
	MB_SORT_ID,       /* diff: case id */
	MB_SORT_CHANGE,   /* diff: largest |change| first */
	MB_SORT_ROW,      /* rows by name */
	MB_SORT_ACTION,   /* rows to act on first */
	MB_SORT_SAVED     /* rows saving the most time first */
} mb_sort_key;

/* Which results the selection sorts: a diff's cases or rows. */
typedef enum mb_select_of { MB_SELECT_CASES, MB_SELECT_ROWS } mb_select_of;

typedef struct mb_select {
	/* as given on the command line; NULL: not given */
	const char *filter, *exclude, *rows, *sort;
	bool only_changed;
	/* compiled by mb_select_compile */
	mb_sort_key key;
	regex_t filter_re, exclude_re;
	bool have_filter, have_exclude;
	char *rows_buf;
	const char **row_names;
	size_t n_rows;
} mb_select;

/* Compile what the fields say. `of` says which sort keys apply. Errors
 * (MB_EINVAL) name the option: "--filter (: invalid regular expression
 * ...", "--sort size: diff sorts by rank, id or change". On failure
 * mb_select_free still releases what was made. */
int mb_select_compile(mb_select *s, mb_select_of of, mb_error *err);
void mb_select_free(mb_select *s);

/* Compile `text` (NULL: nothing to do) as a case-id expression, POSIX
 * extended, as run and every reporter do; *compiled tells the caller to
 * regfree it. MB_EINVAL naming `flag` and the expression when invalid. */
int mb_select_regcomp(regex_t *re, bool *compiled, const char *text, const char *flag, mb_error *err);

/* --filter, --exclude or --rows was given. */
bool mb_select_narrows(const mb_select *s);

/* The case with this id, of this row, passes --filter, --exclude, --rows. */
bool mb_select_keeps(const mb_select *s, const char *id, const char *row);

/* What a selection met, over the receipts it was applied to one at a
 * time (a history reads its receipts so). */
#define MB_SELECT_MAX_ROWS 64
#define MB_SELECT_LIST_BYTES 512
typedef struct mb_select_tally {
	size_t total, kept;        /* cases met, and kept */
	uint64_t rows_seen;        /* bit i: a receipt has a case of --rows' i-th name */
	char first_id[MB_VERDICT_SHAPE_MAX];
	char rows[MB_SELECT_LIST_BYTES];  /* the rows met, each once */
	char names[MB_SELECT_LIST_BYTES]; /* the receipts' names */
} mb_select_tally;

/* Remove from `receipt` (named `name`) the cases the selection leaves
 * out, counting into `t` (zeroed before the first). */
void mb_select_cases(const mb_select *s, json_t *receipt, const char *name, mb_select_tally *t);
/* After the last receipt: the error of a selection that kept nothing or
 * named a row no receipt had (as mb_select_receipts says it), else 0. */
int mb_select_check(const mb_select *s, const mb_select_tally *t, mb_error *err);

/* Remove from every receipt the cases the selection leaves out. An error
 * (MB_EINVAL) when no receipt keeps a case ("--filter X: matches none of the
 * N case ids of A, B (such as ID)") or when a --rows name is a row of none
 * of them ("--rows relu3: no receipt has this row; rows: ..."). */
int mb_select_receipts(const mb_select *s, json_t *const *receipts, const char *const *names, size_t n,
	mb_error *err);

/* --only-changed and --sort on a diff's cases: unchanged cases removed
 * from d->cases (d->n_hidden counts them), rows whose verdict did not
 * change removed from the head's verdicts, the rest ordered (d->ordered
 * tells the printers to keep that order). */
void mb_select_diff(mb_diff *d, const mb_select *s);

/* --only-changed and --sort on the rows of one receipt's verdicts. */
void mb_select_verdicts(mb_verdict_set *set, const mb_select *s);

/* The same on the rows of a receipt group (the report): `sets` are the
 * verdicts of every receipt of the group, oldest first. */
void mb_select_group_rows(mb_group_row *rows, size_t *n_rows, const mb_verdict_set *sets, size_t n_sets,
	const mb_select *s);

/* The same on the rows of every group of a history. */
void mb_select_history(mb_history *h, const mb_select *s);

#endif
