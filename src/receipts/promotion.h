/* Promotions gated by evidence: a row's catalog status (keep, conditional
 * with its condition, experimental, drop) is a reviewed change of its
 * descriptor, and every receipt records it as built (the top-level
 * `catalog`). The gate holds the head's claim against the head receipt's
 * own evidence, on the head's device: never against another receipt's.
 *
 *   keep          the head's verdict is keep with lane (run-level)
 *                 evidence; "keep (isolated evidence only)" is not enough.
 *   conditional   the head's verdict is keep with lane evidence, or
 *                 conditional naming the same condition (the verdict's
 *                 words: "wins at T >= 32768").
 *   experimental, drop  claim nothing: always supported. A demotion (a
 *                 status lower than the base's) never fails.
 *
 * A row claimed keep or conditional without a single case in the head
 * receipt is unsupported. A head from the CPU backend (the reference
 * variant only: no evidence about a fused kernel either way) is not
 * checked; its entries say so. A receipt without `catalog` (older than the
 * field) claims nothing: its statuses are unknown, and the check says so.
 *
 * The entries borrow nothing: every string is copied.
 */
#ifndef MB_RECEIPTS_PROMOTION_H
#define MB_RECEIPTS_PROMOTION_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "receipts/error.h"
#include "receipts/verdict.h"

#define MB_PROMOTION_TEXT_MAX 1024
#define MB_PROMOTION_STATUS_MAX 16
#define MB_PROMOTION_UNCHECKED_BACKEND "cpu"

/* A row's status in a receipt's `catalog`: "keep", "conditional",
 * "experimental", "drop", or NULL when the receipt records none (older
 * receipts) or not this row. *condition (may be NULL) gets the condition
 * or NULL. Borrowed from the receipt. */
const char *mb_promotion_status(const json_t *receipt, const char *row, const char **condition);

/* Whether the receipt records statuses at all. */
bool mb_promotion_recorded(const json_t *receipt);

/* Whether status `status` (with `condition`) is supported by verdict `v`
 * (NULL: the row has no case). With false, `why` says what the evidence
 * showed instead. */
bool mb_promotion_supported(const char *status, const char *condition, const mb_row_verdict *v,
	char *why, size_t why_len);

/* Rank of a status, for telling a promotion from a demotion: drop 0,
 * experimental 1, conditional 2, keep 3; -1 unknown. */
int mb_promotion_rank(const char *status);

typedef struct mb_promotion {
	char row[MB_VERDICT_TEXT_MAX / 4];
	char base_status[MB_PROMOTION_STATUS_MAX]; /* "" unknown */
	char head_status[MB_PROMOTION_STATUS_MAX];
	char condition[MB_VERDICT_TEXT_MAX];       /* head's, conditional only */
	bool claims;       /* head status keep or conditional, checked */
	/* the head gives no evidence either way: its backend runs no fused
	 * variant (CPU), or it ran no case of a row whose status the change
	 * left as it was (an alltoall receipt, a --rows subset) */
	bool unchecked;
	bool supported;    /* claims and the head's evidence shows it (or no claim) */
	bool demotion;     /* head status ranks below the base's */
	bool promotion;    /* head status ranks above the base's (or base unknown) */
	char message[MB_PROMOTION_TEXT_MAX];
} mb_promotion;

/* One entry per row whose head status is keep or conditional, or whose
 * status changed from the base (base may be NULL), in the head catalog's
 * order; `head_verdicts` are the head receipt's. *out is the caller's
 * (free()). */
int mb_promotion_check(mb_promotion **out, size_t *n_out, const json_t *base, const json_t *head,
	const mb_verdict_set *head_verdicts, const mb_verdict_set *base_verdicts, mb_error *err);

#endif
