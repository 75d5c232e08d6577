/* Statistics on raw per-call timing samples: the rank test, the shift
 * estimate and the noise measures diff, gate and verdict rely on.
 *
 * Everything here is pure: no I/O, no global state. Arrays are borrowed and
 * never modified; scratch memory is allocated and freed inside each call.
 */
#ifndef MB_RECEIPTS_STATS_H
#define MB_RECEIPTS_STATS_H

#include <stdbool.h>
#include <stddef.h>

#include "receipts/error.h"

/* The exact null distribution of U is used while both samples are at most
 * this large and there are no ties; the normal approximation beyond. */
#define MB_STATS_EXACT_MAX_N 20

/* Relative standard error of the median from the MAD: sqrt(pi/2) is the
 * asymptotic efficiency loss of the median against the mean for a normal
 * sample, 1.4826 turns a MAD into a standard deviation. The runner uses the
 * same definition to decide convergence. */
#define MB_STATS_MEDIAN_SE_FACTOR 1.2533
#define MB_STATS_MAD_TO_SD 1.4826

typedef struct mb_mwu {
	double u;          /* U of the first sample: pairs (x, y) with x > y, ties count 1/2 */
	double z;          /* normal statistic (continuity-corrected); 0 when exact */
	double p_two_sided;
	bool exact;        /* p from the exact distribution of U */
	bool ties;         /* some value occurs in both or twice in one sample */
} mb_mwu;

/* Two-sided Mann-Whitney U test of x against y. With n1 == 0 or n2 == 0
 * there is no evidence: p is 1. */
int mb_stats_mann_whitney(mb_mwu *out, const double *x, size_t n1,
	const double *y, size_t n2, mb_error *err);

typedef struct mb_shift {
	double ratio;     /* Hodges-Lehmann estimate of y / x */
	double ratio_lo;  /* distribution-free confidence interval of the ratio; */
	double ratio_hi;  /* 0 and +inf when the samples are too small for one */
	bool ci_available;
} mb_shift;

/* Hodges-Lehmann shift of log(y) against log(x): the median of all pairwise
 * differences log(y_j) - log(x_i), exponentiated, with the confidence
 * interval at level 1 - alpha from the order statistics of those differences
 * (critical values of U: exact when small and tie-free, normal otherwise).
 * Every sample must be positive. Runs in O((n1 + n2) log) without forming the
 * n1 * n2 differences. */
int mb_stats_hodges_lehmann(mb_shift *out, const double *x, size_t n1,
	const double *y, size_t n2, double alpha, mb_error *err);

typedef struct mb_summary {
	size_t n;
	double median;
	double mad;        /* median absolute deviation from the median, unscaled */
	double mean;
	double stddev;     /* sample standard deviation (n - 1) */
	double rel_noise;  /* MB_STATS_MEDIAN_SE_FACTOR * MB_STATS_MAD_TO_SD * mad / sqrt(n) / median */
	double cv;         /* stddev / mean */
} mb_summary;

/* Location and noise of one sample. n == 0 yields all zeros. */
int mb_stats_summarize(mb_summary *out, const double *x, size_t n, mb_error *err);

/* The median of `x` (copied and sorted; x is untouched). 0 for n == 0. */
double mb_stats_median(const double *x, size_t n);

/* Upper tail of the standard normal: P(Z > z). */
double mb_stats_normal_sf(double z);

/* Quantile of the standard normal: the z with P(Z <= z) = p, 0 < p < 1. */
double mb_stats_normal_quantile(double p);

#endif
