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
/* The incomplete beta's continued fraction (Lentz): terms until a factor is
 * within BETA_EPS of 1; BETA_TINY stands in for a zero denominator. */
#define BETA_MAX_TERMS 500
#define BETA_EPS 1e-15
#define BETA_TINY 1e-300
/* t quantile: bisection on [-T_BOUND_START grown by doubling, ...]. */
#define T_QUANTILE_STEPS 200
#define T_BOUND_START 16.0
#define T_BOUND_MAX 1e12

int mb_stats_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double mb_stats_quantile_sorted(const double *sorted, size_t n, double q)
{
	double pos;
	size_t lo;

	if (!n)
		return NAN;
	pos = q * (double)(n - 1);
	lo = (size_t)floor(pos);
	if (lo + 1 >= n)
		return sorted[n - 1];
	return sorted[lo] + (pos - (double)lo) * (sorted[lo + 1] - sorted[lo]);
}

static double *sorted_copy(const double *x, size_t n)
{
	double *c = malloc((n ? n : 1) * sizeof(*c));

	if (!c)
		return NULL;
	if (n)
		memcpy(c, x, n * sizeof(*c));
	qsort(c, n, sizeof(*c), mb_stats_cmp_double);
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
	qsort(dev, n, sizeof(*dev), mb_stats_cmp_double);
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
	return mb_stats_cmp_double(&((const tagged *)a)->v, &((const tagged *)b)->v);
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
	qsort(lx, n1, sizeof(*lx), mb_stats_cmp_double);
	qsort(ly, n2, sizeof(*ly), mb_stats_cmp_double);
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

/* ---- quantiles ---------------------------------------------------------- */

double mb_stats_binomial_cdf(size_t k, size_t n, double p)
{
	double sum = 0.0, log_n1 = lgamma((double)n + 1.0), lp, lq;

	if (k >= n || p <= 0.0)
		return 1.0;
	if (p >= 1.0)
		return 0.0;
	lp = log(p);
	lq = log1p(-p);
	/* term by term in logs: the terms of a large n underflow one by one,
	 * never the sum as a whole */
	for (size_t i = 0; i <= k; i++)
		sum += exp(log_n1 - lgamma((double)i + 1.0) - lgamma((double)(n - i) + 1.0)
			+ (double)i * lp + (double)(n - i) * lq);
	return fmin(1.0, sum);
}

/* Ranks (1-based) of the interval: l the largest with P(B <= l - 1) <=
 * alpha / 2, u the smallest with P(B >= u) <= alpha / 2; 0 when none. The
 * binomial mass is summed once from each end. */
static void quantile_ranks(size_t *out_l, size_t *out_u, size_t n, double p, double alpha)
{
	double log_n1 = lgamma((double)n + 1.0), lp = log(p), lq = log1p(-p), below = 0.0, above = 0.0;

	*out_l = 0;
	*out_u = 0;
	/* below = P(B <= l - 1) as l grows from 1 */
	for (size_t l = 1; l <= n; l++) {
		size_t i = l - 1;

		below += exp(log_n1 - lgamma((double)i + 1.0) - lgamma((double)(n - i) + 1.0)
			+ (double)i * lp + (double)(n - i) * lq);
		if (below > alpha / 2.0)
			break;
		*out_l = l;
	}
	/* above = P(B >= u) as u falls from n */
	for (size_t u = n; u >= 1; u--) {
		above += exp(log_n1 - lgamma((double)u + 1.0) - lgamma((double)(n - u) + 1.0)
			+ (double)u * lp + (double)(n - u) * lq);
		if (above > alpha / 2.0)
			break;
		*out_u = u;
	}
}

int mb_stats_quantile(mb_quantile *out, const double *x, size_t n, double p, double alpha, mb_error *err)
{
	double *s = NULL, h;
	size_t below;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	out->p = p;
	out->value = NAN;
	out->lo = -INFINITY;
	out->hi = INFINITY;
	if (!(p > 0.0 && p < 1.0))
		return mb_error_set(err, MB_EINVAL, "stats", "quantile %g is not inside (0, 1)", p);
	if (!n)
		goto cleanup;
	s = sorted_copy(x, n);
	if (!s) {
		rc = mb_error_set(err, MB_ENOMEM, "stats", "no memory for %zu samples", n);
		goto cleanup;
	}
	h = (double)(n - 1) * p;
	below = (size_t)floor(h);
	out->value = below + 1 < n ? s[below] + (h - (double)below) * (s[below + 1] - s[below]) : s[n - 1];
	quantile_ranks(&out->lo_rank, &out->hi_rank, n, p, alpha);
	if (out->lo_rank >= 1 && out->hi_rank >= 1 && out->lo_rank < out->hi_rank) {
		out->ci_available = true;
		out->lo = s[out->lo_rank - 1];
		out->hi = s[out->hi_rank - 1];
	} else {
		out->lo_rank = out->hi_rank = 0;
	}
cleanup:
	free(s);
	return rc;
}

int mb_stats_quantile_ratio(mb_quantile_ratio *out, const double *x, size_t n1, const double *y, size_t n2,
	double p, double alpha, mb_error *err)
{
	/* (1 - a)^2 = 1 - alpha */
	double alpha_side = 1.0 - sqrt(1.0 - alpha);
	int rc;

	memset(out, 0, sizeof(*out));
	out->ratio = NAN;
	out->ratio_hi = INFINITY;
	for (size_t i = 0; i < n1; i++)
		if (!(x[i] > 0.0))
			return mb_error_set(err, MB_EINVAL, "stats", "sample %zu of the first side is not positive", i);
	for (size_t j = 0; j < n2; j++)
		if (!(y[j] > 0.0))
			return mb_error_set(err, MB_EINVAL, "stats", "sample %zu of the second side is not positive", j);
	if ((rc = mb_stats_quantile(&out->x, x, n1, p, alpha_side, err))
		|| (rc = mb_stats_quantile(&out->y, y, n2, p, alpha_side, err)))
		return rc;
	if (!n1 || !n2)
		return 0;
	out->ratio = out->y.value / out->x.value;
	if (out->x.ci_available && out->y.ci_available) {
		out->ci_available = true;
		out->ratio_lo = out->y.lo / out->x.hi;
		out->ratio_hi = out->y.hi / out->x.lo;
	}
	return 0;
}

/* ---- Student's t ---------------------------------------------------------- */

/* The continued fraction of the regularized incomplete beta function
 * (modified Lentz), good for x < (a + 1) / (a + b + 2). */
static double beta_fraction(double a, double b, double x)
{
	double c = 1.0, d = 1.0 - (a + b) * x / (a + 1.0), h;

	if (fabs(d) < BETA_TINY)
		d = BETA_TINY;
	d = 1.0 / d;
	h = d;
	for (int m = 1; m <= BETA_MAX_TERMS; m++) {
		double m2 = 2.0 * m, aa, del;

		aa = m * (b - m) * x / ((a - 1.0 + m2) * (a + m2));
		d = 1.0 + aa * d;
		d = fabs(d) < BETA_TINY ? BETA_TINY : d;
		c = 1.0 + aa / c;
		c = fabs(c) < BETA_TINY ? BETA_TINY : c;
		d = 1.0 / d;
		h *= d * c;
		aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + 1.0 + m2));
		d = 1.0 + aa * d;
		d = fabs(d) < BETA_TINY ? BETA_TINY : d;
		c = 1.0 + aa / c;
		c = fabs(c) < BETA_TINY ? BETA_TINY : c;
		d = 1.0 / d;
		del = d * c;
		h *= del;
		if (fabs(del - 1.0) < BETA_EPS)
			break;
	}
	return h;
}

/* I_x(a, b), the regularized incomplete beta function. */
static double incomplete_beta(double a, double b, double x)
{
	double front;

	if (x <= 0.0)
		return 0.0;
	if (x >= 1.0)
		return 1.0;
	front = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x));
	/* the fraction converges fast on one side of the mean only; use the
	 * symmetry I_x(a, b) = 1 - I_{1-x}(b, a) on the other */
	if (x < (a + 1.0) / (a + b + 2.0))
		return front * beta_fraction(a, b, x) / a;
	return 1.0 - front * beta_fraction(b, a, 1.0 - x) / b;
}

double mb_stats_t_cdf(double t, double df)
{
	double tail;

	if (!(df > 0.0) || isnan(t))
		return NAN;
	/* P(|T| > |t|) = I_{df / (df + t^2)}(df / 2, 1 / 2) */
	tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t));
	return t >= 0.0 ? 1.0 - tail : tail;
}

double mb_stats_t_quantile(double p, double df)
{
	double lo = -T_BOUND_START, hi = T_BOUND_START;

	if (!(p > 0.0 && p < 1.0) || !(df > 0.0))
		return NAN;
	while (mb_stats_t_cdf(hi, df) < p && hi < T_BOUND_MAX)
		hi *= 2.0;
	while (mb_stats_t_cdf(lo, df) > p && lo > -T_BOUND_MAX)
		lo *= 2.0;
	for (int i = 0; i < T_QUANTILE_STEPS; i++) {
		double mid = 0.5 * (lo + hi);

		if (mb_stats_t_cdf(mid, df) < p)
			lo = mid;
		else
			hi = mid;
	}
	return 0.5 * (lo + hi);
}
