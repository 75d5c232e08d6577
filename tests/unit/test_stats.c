/* Statistics against values computed independently of src/receipts/stats.c:
 *  - p-values hard-coded below come from SciPy 1.10.1 (Debian python3-scipy),
 *    scipy.stats.mannwhitneyu(x, y, alternative='two-sided', method=M,
 *    use_continuity=True) with M = 'exact' or 'asymptotic' as noted; the
 *    U statistic scipy reports is U of the first sample, as ours;
 *  - exact p-values are also checked against a brute-force enumeration of
 *    every assignment of ranks written in this file (no DP);
 *  - Hodges-Lehmann estimates and intervals against sorting all n1*n2
 *    pairwise log differences here, with the interval ranks c computed in
 *    Python by enumerating itertools.combinations (exact) or with
 *    scipy.stats.norm.ppf (normal), as noted at each use;
 *  - quantile interval ranks against binomial sums by a multiplicative
 *    recurrence written here, and the p90-ratio interval's coverage on
 *    seeded A/A samples; Student's t against its closed forms at 1 and 2
 *    degrees of freedom and printed tables. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "receipts/stats.h"
#include "testutil.h"

#define REL_TOL 1e-9
#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static int close_rel(double a, double b, double tol)
{
	return fabs(a - b) <= tol * fmax(1.0, fmax(fabs(a), fabs(b)));
}

/* ---- brute force ---------------------------------------------------------- */

/* U of x for the ranks chosen by `mask` among n distinct sorted values. */
static double u_of_mask(unsigned mask, int n, int n1)
{
	double r = 0.0;

	for (int i = 0; i < n; i++)
		if (mask & (1u << i))
			r += i + 1;
	return r - n1 * (n1 + 1) / 2.0;
}

/* Two-sided exact p by visiting all C(n1+n2, n1) rank sets. Only for
 * tie-free samples. */
static double brute_exact_p(const double *x, int n1, const double *y, int n2)
{
	int n = n1 + n2;
	double u_obs = 0.0, le = 0.0, total = 0.0, mu = n1 * n2 / 2.0;

	for (int i = 0; i < n1; i++)
		for (int j = 0; j < n2; j++)
			u_obs += x[i] > y[j];
	for (unsigned mask = 0; mask < (1u << n); mask++) {
		double u;

		if (__builtin_popcount(mask) != n1)
			continue;
		u = u_of_mask(mask, n, n1);
		total += 1.0;
		le += u <= fmin(u_obs, 2 * mu - u_obs);
	}
	return fmin(1.0, 2.0 * le / total);
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* All pairwise log differences, sorted (computed as our code must: log of
 * each sample, then ly - lx). */
static double *all_diffs(const double *x, int n1, const double *y, int n2)
{
	double *d = malloc((size_t)n1 * (size_t)n2 * sizeof(*d));

	for (int i = 0; i < n1; i++)
		for (int j = 0; j < n2; j++)
			d[i * n2 + j] = log(y[j]) - log(x[i]);
	qsort(d, (size_t)n1 * (size_t)n2, sizeof(*d), cmpd);
	return d;
}

/* ---- Mann-Whitney ---------------------------------------------------------- */

static void check_mwu(const char *name, const double *x, size_t n1, const double *y, size_t n2,
	double want_u, double want_p, int want_exact)
{
	mb_mwu r;
	mb_error err;
	int rc = mb_stats_mann_whitney(&r, x, n1, y, n2, &err);

	CHECK_MSG(rc == 0, "%s: rc %d", name, rc);
	CHECK_MSG(r.u == want_u, "%s: U %g, want %g", name, r.u, want_u);
	CHECK_MSG(close_rel(r.p_two_sided, want_p, REL_TOL), "%s: p %.17g, want %.17g", name, r.p_two_sided, want_p);
	CHECK_MSG(r.exact == want_exact, "%s: exact %d, want %d", name, r.exact, want_exact);
}

static void test_mann_whitney(void)
{
	static const double ax[] = {1.1, 2.3, 3.5, 4.2, 5.9}, ay[] = {2.0, 6.1, 7.3, 8.8, 9.4, 10.2};
	static const double bx[] = {1.0}, by[] = {2.0};
	static const double cx[] = {1.0, 2.0}, cy[] = {3.0, 4.0, 5.0};
	static const double dx[] = {4.0, 5.0, 6.0}, dy[] = {1.0, 2.0, 3.0};
	static const double ex[] = {1, 2, 2, 3, 4, 4, 5}, ey[] = {3, 4, 5, 5, 6, 7, 7, 8};
	static const double gx[] = {5, 5, 5}, gy[] = {5, 5, 5, 5};
	static const double hx[] = {1, 1, 2}, hy[] = {2, 3};
	/* F: numpy default_rng(12345), normal(100, 3, 25) and normal(102, 3, 30),
	 * rounded to 6 decimals; no ties. */
	static const double fx[] = {95.728525, 103.791185, 97.388015, 99.22248, 99.77397, 97.777346,
		95.896622, 101.946678, 101.083174, 94.141411, 107.042229, 102.905491, 97.721838,
		102.706595, 98.59914, 99.817931, 102.366533, 96.229996, 101.727573, 104.196937,
		103.966894, 99.100904, 102.708758, 95.135252, 99.525432};
	static const double fy[] = {103.348452, 97.969197, 101.754937, 107.17422, 109.854478,
		104.332084, 104.4859, 99.123035, 98.371835, 97.763124, 103.62464, 104.255818,
		100.023719, 98.313975, 102.772673, 102.938709, 101.607565, 105.809949, 101.721113,
		101.801547, 98.675357, 102.407871, 106.041233, 102.183432, 102.212744, 103.300964,
		102.832451, 103.590757, 103.610163, 103.85505};
	double ix[20], iy[20], jx[20], jy[20];
	mb_mwu r;

	/* scipy 'exact' */
	check_mwu("A", ax, N_ELEMS(ax), ay, N_ELEMS(ay), 4.0, 0.051948051948051951, 1);
	check_mwu("B n=1,1", bx, 1, by, 1, 0.0, 1.0, 1);
	check_mwu("C n=2,3", cx, 2, cy, 3, 0.0, 0.2, 1);
	check_mwu("D n=3,3", dx, 3, dy, 3, 9.0, 0.1, 1);
	/* scipy 'asymptotic' (ties force the normal approximation here) */
	check_mwu("E ties", ex, N_ELEMS(ex), ey, N_ELEMS(ey), 6.5, 0.014107907274540636, 0);
	check_mwu("G all tied", gx, 3, gy, 4, 6.0, 1.0, 0);
	check_mwu("H tiny ties", hx, 3, hy, 2, 0.5, 0.2235428745713206, 0);
	check_mwu("F n=25,30", fx, N_ELEMS(fx), fy, N_ELEMS(fy), 214.0, 0.0066688142386183676, 0);
	/* I: odd vs even numbers 1..40; J: 1..20 vs 8.5..27.5 (scipy 'exact') */
	for (int i = 0; i < 20; i++) {
		ix[i] = 2 * i + 1;
		iy[i] = 2 * i + 2;
		jx[i] = i + 1;
		jy[i] = i + 1 + 7.5;
	}
	check_mwu("I n=20,20", ix, 20, iy, 20, 190.0, 0.79940718716169701, 1);
	check_mwu("J n=20,20", jx, 20, jy, 20, 78.0, 0.0006675619675571311, 1);

	/* empty side: no evidence */
	CHECK(mb_stats_mann_whitney(&r, ax, 5, ay, 0, NULL) == 0 && r.p_two_sided == 1.0);

	/* the exact path against brute-force enumeration on many tie-free
	 * samples of 1..8 per side */
	srand(7);
	for (int trial = 0; trial < 200; trial++) {
		int n1 = 1 + rand() % 8, n2 = 1 + rand() % 8;
		double x[8], y[8], want;
		double pool[16];

		for (int i = 0; i < n1 + n2; i++)
			pool[i] = i + 1; /* distinct values: no ties */
		for (int i = n1 + n2 - 1; i > 0; i--) {
			int k = rand() % (i + 1);
			double t = pool[i];
			pool[i] = pool[k];
			pool[k] = t;
		}
		memcpy(x, pool, (size_t)n1 * sizeof(double));
		memcpy(y, pool + n1, (size_t)n2 * sizeof(double));
		want = brute_exact_p(x, n1, y, n2);
		CHECK(mb_stats_mann_whitney(&r, x, (size_t)n1, y, (size_t)n2, NULL) == 0);
		CHECK_MSG(r.exact && close_rel(r.p_two_sided, want, 1e-12),
			"n1=%d n2=%d: p %.17g, brute force %.17g", n1, n2, r.p_two_sided, want);
	}
}

/* ---- Hodges-Lehmann --------------------------------------------------------- */

static void check_hl(const char *name, const double *x, int n1, const double *y, int n2,
	double alpha, int want_c)
{
	double *d = all_diffs(x, n1, y, n2);
	size_t total = (size_t)n1 * (size_t)n2;
	double med = total % 2 ? d[total / 2] : 0.5 * (d[total / 2 - 1] + d[total / 2]);
	mb_shift s;
	mb_error err;

	CHECK_MSG(mb_stats_hodges_lehmann(&s, x, (size_t)n1, y, (size_t)n2, alpha, &err) == 0, "%s", name);
	CHECK_MSG(s.ratio == exp(med), "%s: ratio %.17g, brute force %.17g", name, s.ratio, exp(med));
	if (want_c == 0) {
		CHECK_MSG(!s.ci_available, "%s: expected no interval", name);
	} else {
		CHECK_MSG(s.ci_available, "%s: expected an interval", name);
		CHECK_MSG(s.ratio_lo == exp(d[want_c - 1]), "%s: lo %.17g, want %.17g", name, s.ratio_lo, exp(d[want_c - 1]));
		CHECK_MSG(s.ratio_hi == exp(d[total - (size_t)want_c]), "%s: hi %.17g, want %.17g", name,
			s.ratio_hi, exp(d[total - (size_t)want_c]));
	}
	free(d);
}

static void test_hodges_lehmann(void)
{
	static const double x6[] = {10.0, 10.4, 9.8, 10.9, 10.2, 9.6};
	static const double y7[] = {11.1, 10.7, 11.9, 10.3, 11.4, 12.0, 10.8};
	static const double x5[] = {3.0, 3.3, 2.9, 3.1, 3.6}, y5[] = {3.4, 3.8, 3.5, 3.9, 4.1};
	static const double one[] = {5.0}, two[] = {6.0, 7.0};
	double fx[25], fy[30];
	mb_shift s;
	mb_error err;

	/* c from enumerating combinations in Python: c(6,7) = 7 at alpha 0.05,
	 * 4 at 0.01; c(5,5) = 1 at 0.01; c(2,2) = 0 (no interval possible) */
	check_hl("6x7 a=.05", x6, 6, y7, 7, 0.05, 7);
	check_hl("6x7 a=.01", x6, 6, y7, 7, 0.01, 4);
	check_hl("5x5 a=.01", x5, 5, y5, 5, 0.01, 1);
	check_hl("1x1", one, 1, one, 1, 0.01, 0);
	check_hl("1x2", one, 1, two, 2, 0.01, 0);
	check_hl("2x2", two, 2, two, 2, 0.01, 0);
	/* 25 x 30 tie-free, normal critical value: c = floor(n1 n2 / 2 + 0.5 -
	 * z sqrt(n1 n2 (n + 1) / 12)) with z = scipy.stats.norm.ppf(0.995)
	 * gives 223 */
	for (int i = 0; i < 25; i++)
		fx[i] = 100.0 + 0.37 * i + 0.001 * i * i;
	for (int j = 0; j < 30; j++)
		fy[j] = 102.0 + 0.31 * j + 0.0013 * j * j;
	check_hl("25x30", fx, 25, fy, 30, 0.01, 223);

	/* a pure scale change is recovered exactly */
	for (int j = 0; j < 25; j++)
		fy[j] = fx[j] * 1.03;
	CHECK(mb_stats_hodges_lehmann(&s, fx, 25, fy, 25, 0.01, NULL) == 0);
	CHECK_MSG(close_rel(s.ratio, 1.03, 1e-12), "scale: %.17g", s.ratio);
	/* zero or negative time has no log */
	CHECK(mb_stats_hodges_lehmann(&s, (double[]){0.0}, 1, one, 1, 0.01, &err) == MB_EINVAL);
}

/* ---- summaries and the normal distribution --------------------------------- */

static void test_summary(void)
{
	/* median 4, |dev| = 3 2 1 0 0 1 5 -> MAD 1; mean 28/7 = 4 */
	static const double x[] = {1, 2, 3, 4, 4, 5, 9};
	mb_summary s;
	double sd = 0.0, mean = 28.0 / 7.0;

	CHECK(mb_stats_summarize(&s, x, N_ELEMS(x), NULL) == 0);
	for (size_t i = 0; i < N_ELEMS(x); i++)
		sd += (x[i] - mean) * (x[i] - mean);
	sd = sqrt(sd / 6.0);
	CHECK(s.n == 7 && s.median == 4.0 && s.mad == 1.0);
	CHECK(close_rel(s.mean, mean, 1e-13));
	CHECK(close_rel(s.stddev, sd, 1e-13));
	CHECK(close_rel(s.cv, sd / mean, 1e-13));
	CHECK(close_rel(s.rel_noise, 1.2533 * 1.4826 * 1.0 / sqrt(7.0) / 4.0, 1e-15));
	CHECK(mb_stats_summarize(&s, x, 0, NULL) == 0 && s.n == 0 && s.rel_noise == 0.0);
	CHECK(mb_stats_summarize(&s, x, 1, NULL) == 0 && s.median == 1.0 && s.stddev == 0.0);
	CHECK(mb_stats_median((double[]){4, 1, 3, 2}, 4) == 2.5);

	/* scipy.stats.norm.ppf(0.975), ppf(0.001), ppf(0.995) */
	CHECK(close_rel(mb_stats_normal_quantile(0.975), 1.959963984540054, 1e-12));
	CHECK(close_rel(mb_stats_normal_quantile(0.001), -3.0902323061678132, 1e-12));
	CHECK(close_rel(mb_stats_normal_quantile(0.995), 2.5758293035489004, 1e-12));
	CHECK(isnan(mb_stats_normal_quantile(0.0)));
}

/* ---- quantiles, the binomial and Student's t ---------------------------------- */

/* C(n, k) p^k (1-p)^(n-k) by the multiplicative recurrence in long double:
 * a different route from stats.c's log-gamma terms. */
static long double binom_pmf(int n, int k, long double p)
{
	long double v = 1.0L;

	for (int i = 1; i <= k; i++)
		v = v * (long double)(n - k + i) / (long double)i;
	return v * powl(p, k) * powl(1.0L - p, n - k);
}

/* The interval ranks by definition: l the largest with P(B <= l-1) <= a/2,
 * u the smallest with P(B >= u) <= a/2. */
static void brute_ranks(int n, double p, double alpha, int *l, int *u)
{
	long double below = 0.0L, above = 0.0L;

	*l = 0;
	*u = 0;
	for (int cand = 1; cand <= n; cand++) {
		below += binom_pmf(n, cand - 1, p);
		if (below > alpha / 2.0)
			break;
		*l = cand;
	}
	for (int cand = n; cand >= 1; cand--) {
		above += binom_pmf(n, cand, p);
		if (above > alpha / 2.0)
			break;
		*u = cand;
	}
}

/* splitmix64, for the coverage check */
static uint64_t mix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double lognormal(uint64_t *s)
{
	double u1 = ((double)(mix64(s) >> 11) + 0.5) / 9007199254740992.0;
	double u2 = ((double)(mix64(s) >> 11) + 0.5) / 9007199254740992.0;

	return exp(0.01 * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

#define COVERAGE_TRIALS 2000
#define COVERAGE_N 200
/* the joint interval is built for >= 99%; binomial(2000, 0.01) has sd 4.4 */
#define COVERAGE_MAX_MISSES 35

static void test_quantiles(void)
{
	static const int ns[] = {30, 100, 500};
	double x[500];
	mb_quantile q;
	mb_quantile_ratio r;
	uint64_t s = 20261123;
	long double cdf = 0.0L;
	int misses = 0;

	/* P(B <= 22), B ~ Binomial(30, 0.9), and the tails of a large n */
	for (int k = 0; k <= 22; k++)
		cdf += binom_pmf(30, k, 0.9L);
	CHECK(close_rel(mb_stats_binomial_cdf(22, 30, 0.9), (double)cdf, 1e-10));
	CHECK(mb_stats_binomial_cdf(30, 30, 0.9) == 1.0);
	/* interpolation as numpy's default: 1..10 at p = 0.9 is 9.1 */
	for (int i = 0; i < 10; i++)
		x[i] = 10 - i;
	CHECK(mb_stats_quantile(&q, x, 10, 0.9, 0.01, NULL) == 0 && close_rel(q.value, 9.1, 1e-15));
	CHECK(!q.ci_available && isinf(q.hi));
	for (size_t k = 0; k < N_ELEMS(ns); k++) {
		int n = ns[k], l, u;

		for (int i = 0; i < n; i++)
			x[i] = (double)(n - i); /* sorted: rank i holds i */
		brute_ranks(n, 0.9, 0.01, &l, &u);
		CHECK(mb_stats_quantile(&q, x, (size_t)n, 0.9, 0.01, NULL) == 0);
		if (l >= 1 && u >= 1) {
			CHECK_MSG(q.ci_available && (int)q.lo_rank == l && (int)q.hi_rank == u && q.lo == l && q.hi == u,
				"n = %d: ranks %zu..%zu, want %d..%d", n, q.lo_rank, q.hi_rank, l, u);
		} else {
			CHECK_MSG(!q.ci_available, "n = %d: an interval where none exists", n);
		}
	}
	/* the joint interval of a ratio of p90s covers 1 for two samples of one
	 * distribution at least 99% of the time */
	for (int t = 0; t < COVERAGE_TRIALS; t++) {
		double a[COVERAGE_N], b[COVERAGE_N];

		for (int i = 0; i < COVERAGE_N; i++) {
			a[i] = lognormal(&s);
			b[i] = lognormal(&s);
		}
		CHECK(mb_stats_quantile_ratio(&r, a, COVERAGE_N, b, COVERAGE_N, 0.9, 0.01, NULL) == 0);
		CHECK(r.ci_available && r.ratio_lo <= r.ratio && r.ratio <= r.ratio_hi);
		misses += !(r.ratio_lo <= 1.0 && 1.0 <= r.ratio_hi);
	}
	printf("p90 ratio interval: %d of %d A/A pairs outside (limit %d)\n", misses, COVERAGE_TRIALS,
		COVERAGE_MAX_MISSES);
	CHECK(misses <= COVERAGE_MAX_MISSES);
	CHECK(mb_stats_quantile_ratio(&r, (double[]){0.0}, 1, x, 1, 0.9, 0.01, NULL) == MB_EINVAL);

	/* t with 1 and 2 degrees of freedom has a closed form */
	for (double t = -30.0; t <= 30.0; t += 0.75) {
		CHECK(close_rel(mb_stats_t_cdf(t, 1.0), 0.5 + atan(t) / M_PI, 1e-12));
		CHECK(close_rel(mb_stats_t_cdf(t, 2.0), 0.5 + t / (2.0 * sqrt(2.0 + t * t)), 1e-12));
	}
	/* printed tables (e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2) */
	CHECK(fabs(mb_stats_t_quantile(0.975, 1.0) - 12.706) < 1e-3);
	CHECK(fabs(mb_stats_t_quantile(0.995, 2.0) - 9.925) < 1e-3);
	CHECK(fabs(mb_stats_t_quantile(0.995, 4.0) - 4.604) < 1e-3);
	CHECK(fabs(mb_stats_t_quantile(0.975, 10.0) - 2.228) < 1e-3);
	CHECK(fabs(mb_stats_t_quantile(0.95, 30.0) - 1.697) < 1e-3);
	CHECK(fabs(mb_stats_t_quantile(0.005, 8.0) + 3.355) < 1e-3);
	CHECK(isnan(mb_stats_t_quantile(1.0, 3.0)));
}

int main(void)
{
	test_mann_whitney();
	test_hodges_lehmann();
	test_summary();
	test_quantiles();
	return mb_test_finish("test_stats");
}
