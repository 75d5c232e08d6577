/* One timing comparison: is the head side SAME, FASTER, SLOWER than the base
 * side, or is it AMBIGUOUS?
 *
 * FASTER and SLOWER need the rank test at p < alpha and a Hodges-Lehmann
 * shift larger than both the minimum effect and the relative noise of either
 * side. AMBIGUOUS when either side did not converge, is noisier than the
 * noise ceiling, has no usable samples, or when the confidence interval of
 * the shift straddles the minimum-effect boundary. Otherwise SAME.
 * Identical code on both sides is SAME without statistics (see
 * mb_compare_identical_code).
 */
#ifndef MB_RECEIPTS_COMPARE_H
#define MB_RECEIPTS_COMPARE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "receipts/error.h"
#include "receipts/policy.h"
#include "receipts/stats.h"

#define MB_COMPARE_REASON_MAX 256

typedef enum mb_cmp_class {
	MB_CMP_SAME,
	MB_CMP_FASTER,
	MB_CMP_SLOWER,
	MB_CMP_AMBIGUOUS
} mb_cmp_class;

typedef struct mb_comparison {
	mb_cmp_class cls;
	bool identical_code;  /* decided without statistics */
	bool have_stats;      /* test and shift were computed */
	mb_summary base, head;
	mb_mwu test;
	mb_shift shift;       /* ratio = head / base */
	char reason[MB_COMPARE_REASON_MAX]; /* why AMBIGUOUS or SAME-by-code; "" otherwise */
} mb_comparison;

const char *mb_cmp_class_name(mb_cmp_class cls);

/* Compare two raw samples (excluded samples already removed). */
int mb_compare_samples(mb_comparison *out, const double *base, size_t n_base, bool base_converged,
	const double *head, size_t n_head, bool head_converged, const mb_thresholds *t, mb_error *err);

/* Compare the timing of two receipt cases (samples_ns minus excluded). A
 * side without timing, or with a different timing source, is AMBIGUOUS. */
int mb_compare_cases(mb_comparison *out, const json_t *base_case, const json_t *head_case,
	const mb_thresholds *t, mb_error *err);

/* The same code ran on both sides for `row`: provenance available on both,
 * the same blob ids for every source entry that belongs to the row (its path
 * contains the row name) or is shared by all rows (under src/kernels/ or
 * src/reference/ but named after no row of either receipt), at least one such
 * entry, the same build c_args, cuda_args and cuda_archs, and the same
 * device name. */
bool mb_compare_identical_code(const json_t *base_receipt, const json_t *head_receipt, const char *row);

/* Samples of a case's timing, excluded indices removed, in a new array the
 * caller frees; *out_n == 0 and *out == NULL when there is no timing. */
int mb_compare_case_samples(double **out, size_t *out_n, const json_t *kase, mb_error *err);

#endif
