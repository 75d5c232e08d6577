/* One timing comparison: is the head side SAME, FASTER, SLOWER than the base
 * side, or is it AMBIGUOUS?
 *
 * The effect a change must exceed is the largest of the policy's minimum
 * effect, its between-run noise floor and, when both cases carry
 * repetitions, the spread between their repetitions (mb_repetition_cmp).
 *
 * FASTER and SLOWER need the rank test at p < alpha and a Hodges-Lehmann
 * shift larger than both that effect and the relative noise of either side
 * (and, with repetitions, the ratio of the repetitions' medians beyond the
 * effect too). AMBIGUOUS when either side did not converge, is noisier than
 * the noise ceiling, has no usable samples, or when the confidence interval
 * of the shift straddles the effect boundary. Otherwise SAME, unless the
 * tail moved: the p90 of head against the p90 of base, with an
 * order-statistic interval on their ratio (mb_stats_quantile_ratio), wholly
 * beyond the effect makes a SAME into SLOWER or FASTER "in the tail"; a tail
 * that moved against a FASTER median makes it AMBIGUOUS, counted as a
 * slow-down.
 *
 * Identical code on both sides (mb_compare_identical_code) is SAME without
 * looking at the tests, unless the time moved beyond a loose bound
 * (mb_compare_under_identical_code): then the machine or the harness
 * changed.
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
/* The tail the quantile comparison watches. */
#define MB_COMPARE_TAIL_QUANTILE 0.9

typedef enum mb_cmp_class {
	MB_CMP_SAME,
	MB_CMP_FASTER,
	MB_CMP_SLOWER,
	MB_CMP_AMBIGUOUS
} mb_cmp_class;

/* Why a comparison came out as it did; every AMBIGUOUS has one. */
typedef enum mb_cmp_why {
	MB_WHY_NONE,             /* decided by the statistics of the median */
	MB_WHY_IDENTICAL_CODE,   /* SAME: identical code, time within the loose bound */
	MB_WHY_MACHINE_CHANGED,  /* identical code, time beyond the loose bound */
	MB_WHY_TAIL,             /* SLOWER or FASTER in the tail (p90) only */
	MB_WHY_BETWEEN_RUNS,     /* SAME: beyond min_effect, within the floor or the repetitions' spread */
	MB_WHY_NO_TIMING,        /* a side has no timing (its status says why) */
	MB_WHY_SOURCE_CHANGED,   /* timing.source differs */
	MB_WHY_ALL_EXCLUDED,     /* every sample of a side was excluded */
	MB_WHY_NO_SAMPLES,       /* a side has no samples at all */
	MB_WHY_NOT_POSITIVE,     /* a zero-time sample: no ratio */
	MB_WHY_NOT_CONVERGED,
	MB_WHY_TOO_NOISY,
	MB_WHY_TOO_FEW_SAMPLES,
	MB_WHY_STRADDLES,        /* the interval straddles the effect boundary */
	MB_WHY_NOT_SIGNIFICANT,
	MB_WHY_WITHIN_NOISE,     /* significant, but within the noise or the between-run spread */
	MB_WHY_TAIL_CONFLICT,    /* the median is faster, the tail slower */
	MB_WHY_NOT_JUDGED,       /* timings of the cpu backend are not judged (diff.h) */
	MB_WHY_COUNT
} mb_cmp_why;

/* Which way an estimate points; NONE without one. */
typedef enum mb_cmp_direction {
	MB_DIR_NONE,
	MB_DIR_FASTER,
	MB_DIR_SLOWER
} mb_cmp_direction;

/* Between-run spread, when both cases carry timing.repetitions.
 *
 * The rule: each repetition's median is one draw of the run-level time; the
 * change is the ratio of the means of the repetitions' medians, and it
 * counts only beyond threshold = k * pooled, where pooled is the pooled
 * relative standard deviation of the repetitions' medians and
 * k = t(1 - alpha/2, nb + nh - 2) * sqrt(1/nb + 1/nh): a two-sided Student t
 * test at the policy's alpha on the repetitions' medians, so that an A/A pair
 * of independent runs crosses it with probability alpha, however few
 * repetitions there are. */
typedef struct mb_repetition_cmp {
	bool used;               /* both sides have >= 2 repetitions with positive medians */
	size_t n_base, n_head;
	double base_mean, head_mean;   /* mean of the repetitions' medians, ns */
	double base_noise, head_noise; /* their standard deviation over their mean */
	double pooled_noise;
	double k;
	double threshold;        /* k * pooled_noise */
	double ratio;            /* head_mean / base_mean */
} mb_repetition_cmp;

typedef struct mb_comparison {
	mb_cmp_class cls;
	mb_cmp_why why;
	mb_cmp_direction direction; /* SLOWER/FASTER: theirs; AMBIGUOUS: where the estimate points */
	bool identical_code;  /* decided by the identical-code rule, not the tests */
	bool machine_changed; /* identical code, yet beyond the loose bound (cls SLOWER or FASTER) */
	bool have_stats;      /* test and shift were computed */
	mb_summary base, head;
	mb_mwu test;
	mb_shift shift;       /* ratio = head / base */
	mb_quantile_ratio tail; /* p90 of head over p90 of base */
	mb_repetition_cmp reps;
	double effect;        /* the effect a change had to exceed (see above) */
	char reason[MB_COMPARE_REASON_MAX]; /* why AMBIGUOUS, tail, or SAME-by-code; "" otherwise */
} mb_comparison;

const char *mb_cmp_class_name(mb_cmp_class cls);
/* "not converged", "timing source changed", ...; "" for MB_WHY_NONE. */
const char *mb_cmp_why_name(mb_cmp_why why);
/* "faster", "slower" or "". */
const char *mb_cmp_direction_name(mb_cmp_direction dir);

/* Compare two raw samples (excluded samples already removed). */
int mb_compare_samples(mb_comparison *out, const double *base, size_t n_base, bool base_converged,
	const double *head, size_t n_head, bool head_converged, const mb_thresholds *t, mb_error *err);

/* The same with the repetitions' medians of each side (n >= 2 each, or 0
 * for none): the between-run rule above joins the decision. */
int mb_compare_samples_reps(mb_comparison *out, const double *base, size_t n_base, bool base_converged,
	const double *head, size_t n_head, bool head_converged, const double *base_rep_medians, size_t n_base_reps,
	const double *head_rep_medians, size_t n_head_reps, const mb_thresholds *t, mb_error *err);

/* Compare the timing of two receipt cases (samples_ns minus excluded, and
 * timing.repetitions when both have them). A side without timing, with a
 * different timing source or with every sample excluded is AMBIGUOUS. */
int mb_compare_cases(mb_comparison *out, const json_t *base_case, const json_t *head_case,
	const mb_thresholds *t, mb_error *err);

/* The comparison of two cases whose code is identical: the statistics are
 * computed and shown, but the class is SAME (why IDENTICAL_CODE) unless the
 * time moved beyond max(identical_code_max_change, noise_floor, the
 * repetitions' threshold): the Hodges-Lehmann interval wholly beyond that
 * bound (the estimate, where there is no interval), and with repetitions
 * their ratio too. Then cls is SLOWER or FASTER with machine_changed set. */
int mb_compare_under_identical_code(mb_comparison *out, const json_t *base_case, const json_t *head_case,
	const mb_thresholds *t, mb_error *err);

/* Whether `receipt` carries binary provenance: the ids of the sources its
 * executable was built from, embedded by the build (provenance.origin
 * "binary", schema version 2). A receipt without it (version 1: ids read
 * from a checkout at run time) says nothing certain about the code that ran,
 * so the identical-code rule never holds for it. */
bool mb_compare_binary_provenance(const json_t *receipt);

/* The same code ran on both sides for `row`: binary provenance on both;
 * the same build (c_compiler, cxx_compiler, cuda_compiler, c_args,
 * cuda_args, cuda_archs, buildtype, features) and device name; and the same
 * blob id for every source that decides a timing (under src/kernels/,
 * src/reference/, src/harness/, and the top-level meson.build and
 * meson_options.txt) and belongs to the row, a source listed on one side
 * only being a difference. A source is attributed to the row of either
 * receipt that its file stem (the name up to its first dot) names or, when
 * none does, to the row named by the stem's longest "_"-separated prefix
 * (ssm_scan_sm90.cuh and ssm_scan_sm90_layout.h to ssm_scan,
 * recurrent_scan_math.h to recurrent_scan; ssm_scanner.cu to no row). It
 * belongs to that row and to every row built on it: a row named ROW_x is
 * taken to build on ROW's files (row_gather_pair on row_gather, rope_qk_bwd
 * on rope_qk). A source whose stem has no prefix that is a row (vec.cuh,
 * launch.h, rows.def, the harness's timing code, rope.cuh while no row is
 * called rope) is shared: it belongs to every row. At least one source
 * must belong. */
bool mb_compare_identical_code(const json_t *base_receipt, const json_t *head_receipt, const char *row);

/* The identical-code rule for every row of a pair of receipts, from one
 * pass over both: build it once per diff (*out belongs to the caller,
 * released with mb_code_index_free, which accepts NULL), then ask it per
 * case in time independent of the number of cases. NULL answers false. */
typedef struct mb_code_index mb_code_index;
int mb_code_index_build(mb_code_index **out, const json_t *base_receipt, const json_t *head_receipt,
	mb_error *err);
bool mb_code_index_identical(const mb_code_index *index, const char *row);
void mb_code_index_free(mb_code_index *index);

/* Samples of a case's timing, excluded indices removed, in a new array the
 * caller frees; *out_n == 0 and *out == NULL when there is no timing. */
int mb_compare_case_samples(double **out, size_t *out_n, const json_t *kase, mb_error *err);

#endif
