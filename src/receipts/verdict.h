/* Catalog verdicts within one receipt: each row's fused variant against its
 * fallback, shape by shape, then one word per row (src/README.md, Verdicts):
 *   keep         correct everywhere, fallback present and correct, a
 *                significant win on every shape family;
 *   conditional  wins on some families only (named in `families`);
 *   drop         no significant win, a loss, or wrong answers;
 *   ambiguous    too noisy to say;
 *   not enough evidence  no fused/fallback pair to compare (a CPU receipt
 *                has only reference variants).
 * A set owns its rows; the receipt it was computed from must outlive it
 * (pairs borrow its cases).
 */
#ifndef MB_RECEIPTS_VERDICT_H
#define MB_RECEIPTS_VERDICT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "receipts/error.h"
#include "receipts/compare.h"
#include "receipts/policy.h"

#define MB_VERDICT_TEXT_MAX 512

typedef enum mb_verdict_kind {
	MB_VERDICT_KEEP,
	MB_VERDICT_CONDITIONAL,
	MB_VERDICT_DROP,
	MB_VERDICT_AMBIGUOUS,
	MB_VERDICT_NOT_ENOUGH_EVIDENCE
} mb_verdict_kind;

const char *mb_verdict_kind_name(mb_verdict_kind kind);

/* One shape of a row: fused against fallback (base = fallback). */
typedef struct mb_verdict_pair {
	const json_t *fused;     /* borrowed from the receipt */
	const json_t *fallback;
	mb_comparison cmp;       /* FASTER = the fused variant wins */
	double saved_ns;         /* weight * (fallback median - fused median) */
} mb_verdict_pair;

typedef struct mb_row_verdict {
	char *row;
	char block[2];
	mb_verdict_kind kind;
	char reason[MB_VERDICT_TEXT_MAX];
	char families[MB_VERDICT_TEXT_MAX]; /* families won (conditional, keep) */
	mb_verdict_pair *pairs;
	size_t n_pairs;
	bool saved_known;                   /* at least one pair had both medians */
	double saved_ns_per_step;           /* over the pairs of `saved_mode` and `saved_dtype` */
	char saved_mode[16];
	char saved_dtype[8];                /* the one dtype summed over */
} mb_row_verdict;

typedef struct mb_verdict_set {
	mb_row_verdict *rows;
	size_t n_rows;
	bool lanes_present;
	char lanes_note[MB_VERDICT_TEXT_MAX];
} mb_verdict_set;

/* Verdicts for every row of `receipt`, rows in the order they first appear. */
int mb_verdict_compute(mb_verdict_set *out, const json_t *receipt, const mb_policy *policy, mb_error *err);

void mb_verdict_set_free(mb_verdict_set *set);

/* The row named `row`, or NULL. Borrowed. */
const mb_row_verdict *mb_verdict_find(const mb_verdict_set *set, const char *row);

/* A wrong answer: correctness failed, or the case did not finish. A skipped
 * case says nothing either way. */
bool mb_verdict_case_wrong(const json_t *kase);

/* "family/A=1,B=2" label of a case's shape, for printers. */
void mb_verdict_shape_label(char *buf, size_t len, const json_t *kase);

#endif
