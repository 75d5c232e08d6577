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

/* The q-quantile (q in [0, 1]) of `sorted` (ascending), interpolated
 * linearly between the order statistics around (n - 1) q; NAN for n == 0.
 * The one quantile the harness's sampler, the ceilings and the report's
 * box plots take. */
double mb_stats_quantile_sorted(const double *sorted, size_t n, double q);

/* qsort's order for doubles, ascending: every caller that sorts samples
 * before taking quantiles sorts with it. */
int mb_stats_cmp_double(const void *a, const void *b);

typedef struct mb_quantile {
	double p;          /* which quantile: 0.9 is p90 */
	double value;      /* linear interpolation between order statistics (x[(n-1)p]) */
	double lo, hi;     /* distribution-free interval at level 1 - alpha: order statistics */
	size_t lo_rank, hi_rank; /* their 1-based ranks; 0 when there is no interval */
	bool ci_available; /* false: too few samples for an interval at that level */
} mb_quantile;

/* The p-quantile of `x` with its order-statistic confidence interval: the
 * count of samples below the true quantile is Binomial(n, p), so
 * [x_(l), x_(u)] covers it with probability P(l <= B <= u - 1); l and u are
 * the innermost ranks with at most alpha / 2 in each tail (exact binomial
 * sums). Without such ranks (n too small) lo = -inf, hi = +inf. */
int mb_stats_quantile(mb_quantile *out, const double *x, size_t n, double p, double alpha, mb_error *err);

typedef struct mb_quantile_ratio {
	mb_quantile x, y;  /* each side at level 1 - alpha_side (below) */
	double ratio;      /* y.value / x.value */
	double ratio_lo;   /* y.lo / x.hi and y.hi / x.lo: covers the true ratio */
	double ratio_hi;   /* with probability >= 1 - alpha (both intervals cover) */
	bool ci_available;
} mb_quantile_ratio;

/* The ratio of the p-quantiles of y and x with a joint interval at level
 * 1 - alpha: each side's interval at 1 - alpha_side with
 * (1 - alpha_side)^2 = 1 - alpha, so that both cover at once (the samples
 * are independent) with probability 1 - alpha. Deterministic: no
 * resampling. Every sample must be positive. */
int mb_stats_quantile_ratio(mb_quantile_ratio *out, const double *x, size_t n1, const double *y, size_t n2,
	double p, double alpha, mb_error *err);

/* P(B <= k) for B ~ Binomial(n, p). */
double mb_stats_binomial_cdf(size_t k, size_t n, double p);

/* Student's t distribution with `df` degrees of freedom: P(T <= t), and
 * the t with P(T <= t) = p, 0 < p < 1. */
double mb_stats_t_cdf(double t, double df);
double mb_stats_t_quantile(double p, double df);

/* Upper tail of the standard normal: P(Z > z). */
double mb_stats_normal_sf(double z);

/* Quantile of the standard normal: the z with P(Z <= z) = p, 0 < p < 1. */
double mb_stats_normal_quantile(double p);

#endif
