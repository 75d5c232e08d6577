/* Two receipts side by side: consistency, comparability, per-case timing
 * comparisons, drift findings, per-row verdicts on each side, and the
 * gate's exit code with its reason.
 *
 * Consistency: a receipt whose correctness.passed contradicts its own
 * counts (passed with elements over tolerance, NaN or Inf; failed with none
 * of those and a norm ratio within 1%) is refused, --force or not: nothing
 * it says can be trusted.
 *
 * Comparability: receipts from different backends, device models, driver or
 * CUDA runtime major versions, suites, or settings that change what one
 * sample means (timing modes and warm-up calls) are refused unless forced.
 * Settings that only change how many samples were taken (seed, min/max
 * samples, min_time_s, max_noise, timeout_s) or which cases ran (row, dtype,
 * variant filters: those show up as missing or new cases) may differ.
 * GPUs (the rule of schemas/receipt.schema.json, "gpus"): each case must
 * have run on the same GPU model on both sides (its `gpu`'s model, else the
 * device's), and a case across GPUs (`collective`) on as many GPUs over the
 * same known topology class; GPU count, index and uuid alone never matter.
 *
 * Timings of the cpu backend are not judged: taken on a shared CPU, by
 * the fp32 references, they say nothing about GPU kernels and move between
 * identical runs by more than any threshold that would still catch a real
 * change. Where either receipt is from the cpu backend, every case is
 * compared for correctness and structure only (wrong answers, tolerance,
 * launch, kernel, field, status, weight and variant-kind drift, missing
 * and new cases): its comparison is MB_WHY_NOT_JUDGED, it makes no timing
 * finding, and the headline and the gate's reason say so.
 *
 * An mb_diff holds references to both receipts and owns everything else;
 * release it with mb_diff_free.
 */
#ifndef MB_RECEIPTS_DIFF_H
#define MB_RECEIPTS_DIFF_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "receipts/error.h"
#include "receipts/compare.h"
#include "receipts/policy.h"
#include "receipts/promotion.h"
#include "receipts/verdict.h"

#define MB_DIFF_TEXT_MAX 1024
/* Scratch memory must grow by at least this much to be a memory
 * regression, whatever the relative growth: below it a slot's rounding. */
#define MB_DIFF_MEMORY_MIN_BYTES ((int64_t)1 << 20)

/* Gate exit codes (also used by diff for a refusal). */
enum {
	MB_GATE_PASS = 0,
	MB_GATE_REGRESSION = 1,
	MB_GATE_DRIFT = 2,        /* wrong answers, tolerance / launch / kernel / field / status drift, missing cases */
	MB_GATE_INCONCLUSIVE = 3, /* incomparable, inconsistent, unreadable or ambiguous input, machine changed */
	MB_GATE_PROMOTION = 4,    /* a head status (keep, conditional) its own evidence does not support */
	MB_GATE_USAGE = 64
};

typedef struct mb_finding {
	mb_finding_kind kind;
	bool fails;               /* the policy's gate.fail_on names this kind */
	mb_cmp_why why;           /* ambiguous, ambiguous_faster, machine_changed, regression: the comparison's */
	char subject[256];        /* case id or row name */
	char message[MB_DIFF_TEXT_MAX];
} mb_finding;

typedef struct mb_case_diff {
	const char *id;           /* borrowed from a receipt */
	const json_t *base;       /* NULL when the case is new */
	const json_t *head;       /* NULL when the case disappeared */
	bool compared;            /* both present: cmp is filled */
	mb_comparison cmp;
	bool wrong_answer;        /* head is wrong where base was right (or new and wrong) */
	bool still_wrong;         /* wrong in base and wrong in head */
	bool memory_regression;   /* the head's variant needs more scratch memory than the policy allows */
	bool status_changed;      /* ok in base, skipped in head */
	bool fields_missing;      /* a field of the base case is missing from the head case */
} mb_case_diff;

typedef struct mb_diff {
	json_t *base, *head;      /* references held */
	const char *base_name, *head_name; /* borrowed labels (file names) */
	const mb_policy *policy;  /* borrowed */
	bool comparable;          /* false: the receipts differ in what a sample means (see reasons) */
	bool forced;              /* --force was given (whether or not it was needed) */
	bool inconsistent;        /* a receipt contradicts itself: refused even with --force */
	bool timings_judged;      /* false: a side is from the cpu backend (see above) */
	char reasons[MB_DIFF_TEXT_MAX]; /* why refused: fields that differ, or the inconsistency; "; "-separated */
	mb_case_diff *cases;      /* base order, then new cases in head order */
	size_t n_cases;
	mb_finding *findings;
	size_t n_findings, cap_findings;
	mb_verdict_set base_verdicts, head_verdicts;
	/* rows whose head status claims keep or conditional, or changed */
	mb_promotion *promotions;
	size_t n_promotions;
	size_t n_same, n_faster, n_slower, n_ambiguous, n_wrong;
	size_t n_still_wrong;     /* wrong on both sides (not in n_wrong) */
	size_t n_machine_changed; /* identical code beyond the loose bound (not in n_slower, n_faster) */
	size_t n_not_judged;      /* cases compared without their timing (cpu backend) */
	/* what a reporter's selection did (select.h): cases taken out of
	 * `cases` as unchanged (still in the counts above), and whether
	 * `cases` is in the order to show (else the printers rank it) */
	size_t n_hidden;
	bool ordered;
} mb_diff;

/* Compare `head` against `base`. An inconsistent receipt gives rc 0 with
 * inconsistent == true and the reasons, force or not. Without `force`,
 * incomparable receipts give rc 0 with comparable == false and the reasons;
 * with it they are compared anyway and every output says FORCED. */
int mb_diff_receipts(mb_diff *out, json_t *base, json_t *head, const char *base_name,
	const char *head_name, const mb_policy *policy, bool force, mb_error *err);

/* Whether `receipt` is consistent: every case's correctness.passed agrees
 * with its counts. If not, "NAME: case ID: why" for the first few cases
 * (and how many more) is appended to `reasons` ("; "-separated). */
bool mb_diff_receipt_consistent(const json_t *receipt, const char *name, char *reasons, size_t len);

/* Nothing was compared: an inconsistent receipt, or incomparable ones
 * without --force. Only `reasons` is meaningful then. */
bool mb_diff_refused(const mb_diff *diff);

/* Whether `receipt` comes from the cpu backend, whose timings are not
 * judged (above). */
bool mb_diff_cpu_timing(const json_t *receipt);

/* The gate's exit code: 3 refused; else 2 on a failing drift finding; else 1
 * on a failing regression; else 4 on a failing unsupported_promotion;
 * else 3 on a failing ambiguous or machine_changed finding; else 0. */
int mb_diff_gate_exit(const mb_diff *diff);

/* Why the gate gives its exit code, as one line: "pass", "regression: 1
 * case slower", "drift: wrong_answer (1), missing_field (2)",
 * "inconclusive: not converged (1), timing source changed (1)",
 * "inconclusive: not comparable: device.name differs (...)". */
void mb_diff_gate_reason(const mb_diff *diff, char *buf, size_t len);

/* "2 slower, 1 faster, 40 same, 1 ambiguous; 0 wrong answers" (with
 * "FORCED: " in front when forced); machine changes and cases still wrong
 * are counted apart when there are any. */
void mb_diff_headline(const mb_diff *diff, char *buf, size_t len);

void mb_diff_free(mb_diff *diff);

#endif
