#include "receipts/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Bisection steps for the normal quantile: each halves an interval that
 * starts 80 wide, so 200 is far past double precision. */
#define QUANTILE_STEPS 200
#define QUANTILE_BOUND 40.0
/* Bisection steps over pairwise differences; stops early once adjacent. */
#define SELECT_STEPS 2000

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double *sorted_copy(const double *x, size_t n)
{
	double *c = malloc((n ? n : 1) * sizeof(*c));

	if (!c)
		return NULL;
	if (n)
		memcpy(c, x, n * sizeof(*c));
	qsort(c, n, sizeof(*c), cmp_double);
	return c;
}

static double median_sorted(const double *s, size_t n)
{
	if (!n)
		return 0.0;
	if (n % 2)
		return s[n / 2];
	return 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

double mb_stats_median(const double *x, size_t n)
{
	double *s = sorted_copy(x, n);
	double m;

	if (!s)
		return NAN;
	m = median_sorted(s, n);
	free(s);
	return m;
}

double mb_stats_normal_sf(double z)
{
	return 0.5 * erfc(z / sqrt(2.0));
}

double mb_stats_normal_quantile(double p)
{
	double lo = -QUANTILE_BOUND, hi = QUANTILE_BOUND;

	if (!(p > 0.0 && p < 1.0))
		return NAN;
	/* P(Z <= z) = 1 - sf(z) rises with z; bisection needs nothing but the
	 * CDF, which libm gives us through erfc. */
	for (int i = 0; i < QUANTILE_STEPS; i++) {
		double mid = 0.5 * (lo + hi);

		if (1.0 - mb_stats_normal_sf(mid) < p)
			lo = mid;
		else
			hi = mid;
	}
	return 0.5 * (lo + hi);
}

int mb_stats_summarize(mb_summary *out, const double *x, size_t n, mb_error *err)
{
	double *s = NULL, *dev = NULL;
	double sum = 0.0, ss = 0.0;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	out->n = n;
	if (!n)
		goto cleanup;
	s = sorted_copy(x, n);
	dev = malloc(n * sizeof(*dev));
	if (!s || !dev) {
		rc = mb_error_set(err, MB_ENOMEM, "stats", "no memory for %zu samples", n);
		goto cleanup;
	}
	out->median = median_sorted(s, n);
	for (size_t i = 0; i < n; i++) {
		dev[i] = fabs(s[i] - out->median);
		sum += s[i];
	}
	qsort(dev, n, sizeof(*dev), cmp_double);
	out->mad = median_sorted(dev, n);
	out->mean = sum / (double)n;
	for (size_t i = 0; i < n; i++)
		ss += (s[i] - out->mean) * (s[i] - out->mean);
	out->stddev = n > 1 ? sqrt(ss / (double)(n - 1)) : 0.0;
	out->cv = out->mean > 0.0 ? out->stddev / out->mean : 0.0;
	out->rel_noise = out->median > 0.0
		? MB_STATS_MEDIAN_SE_FACTOR * MB_STATS_MAD_TO_SD * out->mad / sqrt((double)n) / out->median
		: 0.0;
cleanup:
	free(s);
	free(dev);
	return rc;
}

/* ---- Mann-Whitney U ---------------------------------------------------- */

typedef struct rank_info {
	double u1;        /* U of the first sample */
	double tie_term;  /* sum over tie groups of t^3 - t */
	bool ties;
} rank_info;

typedef struct tagged {
	double v;
	int first; /* 1 when the value comes from the first sample */
} tagged;

static int cmp_tagged(const void *a, const void *b)
{
	return cmp_double(&((const tagged *)a)->v, &((const tagged *)b)->v);
}

static int rank_sum(rank_info *out, const double *x, size_t n1, const double *y,
	size_t n2, mb_error *err)
{
	size_t n = n1 + n2;
	tagged *all = malloc((n ? n : 1) * sizeof(*all));
	double r1 = 0.0;

	memset(out, 0, sizeof(*out));
	if (!all)
		return mb_error_set(err, MB_ENOMEM, "stats", "no memory for %zu samples", n);
	for (size_t i = 0; i < n1; i++)
		all[i] = (tagged){x[i], 1};
	for (size_t j = 0; j < n2; j++)
		all[n1 + j] = (tagged){y[j], 0};
	qsort(all, n, sizeof(*all), cmp_tagged);
	for (size_t i = 0; i < n;) {
		size_t j = i, firsts = 0;
		double t, avg_rank;

		while (j < n && all[j].v == all[i].v)
			firsts += (size_t)all[j++].first;
		t = (double)(j - i);
		/* ranks are 1-based: the group spans ranks i+1 .. j */
		avg_rank = 0.5 * ((double)(i + 1) + (double)j);
		r1 += avg_rank * (double)firsts;
		if (j - i > 1) {
			out->ties = true;
			out->tie_term += t * t * t - t;
		}
		i = j;
	}
	out->u1 = r1 - (double)n1 * ((double)n1 + 1.0) / 2.0;
	free(all);
	return 0;
}

/* counts[u] = number of orderings of n1 + n2 distinct values whose U is u,
 * built by adding one value at a time: the largest of (m, k) samples is
 * either from the first (it beats all k others: U grows by k) or not. */
static double *exact_u_counts(size_t n1, size_t n2)
{
	size_t umax = n1 * n2, width = umax + 1;
	double *prev = calloc((n2 + 1) * width, sizeof(double));
	double *cur = calloc((n2 + 1) * width, sizeof(double));
	double *result = NULL;

	if (!prev || !cur)
		goto cleanup;
	for (size_t k = 0; k <= n2; k++)
		prev[k * width] = 1.0; /* m = 0: one ordering, U = 0 */
	for (size_t m = 1; m <= n1; m++) {
		memset(cur, 0, (n2 + 1) * width * sizeof(double));
		cur[0] = 1.0; /* k = 0 */
		for (size_t k = 1; k <= n2; k++)
			for (size_t u = 0; u <= m * k; u++)
				cur[k * width + u] = (u >= k ? prev[k * width + u - k] : 0.0)
					+ cur[(k - 1) * width + u];
		double *tmp = prev;
		prev = cur;
		cur = tmp;
	}
	result = malloc(width * sizeof(double));
	if (result)
		memcpy(result, prev + n2 * width, width * sizeof(double));
cleanup:
	free(prev);
	free(cur);
	return result;
}

/* P(U <= u) under the null, from exact counts. */
static double exact_cdf(const double *counts, size_t umax, double u)
{
	double below = 0.0, total = 0.0;

	for (size_t i = 0; i <= umax; i++) {
		total += counts[i];
		if ((double)i <= u)
			below += counts[i];
	}
	return below / total;
}

static bool use_exact(size_t n1, size_t n2, bool ties)
{
	return !ties && n1 <= MB_STATS_EXACT_MAX_N && n2 <= MB_STATS_EXACT_MAX_N;
}

static double tie_sigma(size_t n1, size_t n2, double tie_term)
{
	double n = (double)(n1 + n2);
	double v = (double)n1 * (double)n2 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));

	return v > 0.0 ? sqrt(v) : 0.0;
}

int mb_stats_mann_whitney(mb_mwu *out, const double *x, size_t n1,
	const double *y, size_t n2, mb_error *err)
{
	rank_info ri;
	double *counts = NULL;
	double mu, u_small, u_big;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	out->p_two_sided = 1.0;
	if (!n1 || !n2)
		goto cleanup;
	rc = rank_sum(&ri, x, n1, y, n2, err);
	if (rc)
		goto cleanup;
	out->u = ri.u1;
	out->ties = ri.ties;
	mu = (double)n1 * (double)n2 / 2.0;
	u_big = fmax(ri.u1, (double)n1 * (double)n2 - ri.u1);
	u_small = (double)n1 * (double)n2 - u_big;
	if (use_exact(n1, n2, ri.ties)) {
		counts = exact_u_counts(n1, n2);
		if (!counts) {
			rc = mb_error_set(err, MB_ENOMEM, "stats", "no memory for the U distribution");
			goto cleanup;
		}
		out->exact = true;
		out->p_two_sided = fmin(1.0, 2.0 * exact_cdf(counts, n1 * n2, u_small));
	} else {
		double sigma = tie_sigma(n1, n2, ri.tie_term);

		if (sigma > 0.0) {
			out->z = (u_big - mu - 0.5) / sigma;
			out->p_two_sided = fmin(1.0, 2.0 * mb_stats_normal_sf(out->z));
		}
	}
cleanup:
	free(counts);
	return rc;
}

/* ---- Hodges-Lehmann ----------------------------------------------------- */

/* Pairs (i, j) with ly[j] - lx[i] <= t, both arrays sorted ascending.
 * Rounded subtraction is monotone, so for a fixed t the qualifying j form a
 * prefix whose length never shrinks as lx[i] grows. */
static size_t count_le(const double *lx, size_t n1, const double *ly, size_t n2, double t)
{
	size_t total = 0, j = 0;

	for (size_t i = 0; i < n1; i++) {
		while (j < n2 && ly[j] - lx[i] <= t)
			j++;
		total += j;
	}
	return total;
}

/* The largest difference ly[j] - lx[i] that is <= t. */
static double max_le(const double *lx, size_t n1, const double *ly, size_t n2, double t)
{
	double best = -INFINITY;
	size_t j = 0;

	for (size_t i = 0; i < n1; i++) {
		while (j < n2 && ly[j] - lx[i] <= t)
			j++;
		if (j > 0 && ly[j - 1] - lx[i] > best)
			best = ly[j - 1] - lx[i];
	}
	return best;
}

/* The k-th smallest (1-based) of the n1 * n2 differences ly[j] - lx[i]. */
static double kth_difference(const double *lx, size_t n1, const double *ly, size_t n2, size_t k)
{
	double lo = ly[0] - lx[n1 - 1], hi = ly[n2 - 1] - lx[0];

	if (count_le(lx, n1, ly, n2, lo) >= k)
		return lo; /* the smallest difference itself */
	/* invariant: count(<= lo) < k <= count(<= hi) */
	for (int step = 0; step < SELECT_STEPS; step++) {
		double mid = lo + 0.5 * (hi - lo);

		if (!(mid > lo && mid < hi))
			break;
		if (count_le(lx, n1, ly, n2, mid) >= k)
			hi = mid;
		else
			lo = mid;
	}
	return max_le(lx, n1, ly, n2, hi);
}

/* Largest c >= 1 such that the interval [d_(c), d_(N+1-c)] covers with at
 * least 1 - alpha: 2 P(U <= c - 1) <= alpha. 0 when no such c exists. */
static size_t ci_rank(size_t n1, size_t n2, bool ties, double tie_term, double alpha, int *rc,
	mb_error *err)
{
	size_t c = 0;

	if (use_exact(n1, n2, ties)) {
		double *counts = exact_u_counts(n1, n2);
		double total = 0.0, below = 0.0;

		if (!counts) {
			*rc = mb_error_set(err, MB_ENOMEM, "stats", "no memory for the U distribution");
			return 0;
		}
		for (size_t u = 0; u <= n1 * n2; u++)
			total += counts[u];
		/* below = P(U <= c - 1) * total as c grows */
		for (size_t cand = 1; cand <= n1 * n2; cand++) {
			below += counts[cand - 1];
			if (2.0 * below / total > alpha)
				break;
			c = cand;
		}
		free(counts);
	} else {
		double mu = (double)n1 * (double)n2 / 2.0;
		double sigma = tie_sigma(n1, n2, tie_term);
		double z = mb_stats_normal_quantile(1.0 - alpha / 2.0);
		/* continuity-corrected: P(U <= c - 1) ~ Phi((c - 1 + 0.5 - mu) / sigma) */
		double cf = floor(mu + 0.5 - z * sigma);

		c = sigma > 0.0 && cf >= 1.0 ? (size_t)cf : 0;
	}
	return c;
}

int mb_stats_hodges_lehmann(mb_shift *out, const double *x, size_t n1,
	const double *y, size_t n2, double alpha, mb_error *err)
{
	double *lx = NULL, *ly = NULL;
	rank_info ri;
	size_t total, c;
	double med;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	out->ratio = NAN;
	out->ratio_hi = INFINITY;
	if (!n1 || !n2) {
		rc = mb_error_set(err, MB_EINVAL, "stats", "Hodges-Lehmann needs samples on both sides");
		goto cleanup;
	}
	lx = malloc(n1 * sizeof(*lx));
	ly = malloc(n2 * sizeof(*ly));
	if (!lx || !ly) {
		rc = mb_error_set(err, MB_ENOMEM, "stats", "no memory for %zu + %zu samples", n1, n2);
		goto cleanup;
	}
	for (size_t i = 0; i < n1; i++) {
		if (!(x[i] > 0.0)) {
			rc = mb_error_set(err, MB_EINVAL, "stats", "sample %zu of the first side is not positive", i);
			goto cleanup;
		}
		lx[i] = log(x[i]);
	}
	for (size_t j = 0; j < n2; j++) {
		if (!(y[j] > 0.0)) {
			rc = mb_error_set(err, MB_EINVAL, "stats", "sample %zu of the second side is not positive", j);
			goto cleanup;
		}
		ly[j] = log(y[j]);
	}
	qsort(lx, n1, sizeof(*lx), cmp_double);
	qsort(ly, n2, sizeof(*ly), cmp_double);
	total = n1 * n2;
	if (total % 2)
		med = kth_difference(lx, n1, ly, n2, total / 2 + 1);
	else
		med = 0.5 * (kth_difference(lx, n1, ly, n2, total / 2)
			+ kth_difference(lx, n1, ly, n2, total / 2 + 1));
	out->ratio = exp(med);
	rc = rank_sum(&ri, x, n1, y, n2, err);
	if (rc)
		goto cleanup;
	c = ci_rank(n1, n2, ri.ties, ri.tie_term, alpha, &rc, err);
	if (rc)
		goto cleanup;
	if (c >= 1 && c <= total + 1 - c) {
		out->ci_available = true;
		out->ratio_lo = exp(kth_difference(lx, n1, ly, n2, c));
		out->ratio_hi = exp(kth_difference(lx, n1, ly, n2, total + 1 - c));
	}
cleanup:
	free(lx);
	free(ly);
	return rc;
}
