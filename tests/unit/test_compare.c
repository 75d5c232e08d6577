/* The comparison's error rates on synthetic samples.
 *  A/A: 1000 seeded pairs from one lognormal distribution (0.5% relative
 *       noise, 30 samples a side): at most 1% may be FASTER or SLOWER.
 *  Power: a planted 3% slowdown at the same noise: at least 95% SLOWER.
 *  Small change: a planted 0.5% change (under the 2% minimum effect): no
 *       FASTER or SLOWER at all.
 * Plus the AMBIGUOUS rules: not converged, too noisy, interval across the
 * minimum effect, too few samples. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "receipts/compare.h"
#include "testutil.h"

#define PAIRS 1000
#define SAMPLES 30
#define REL_NOISE 0.005
#define BASE_NS 100000.0
#define AA_MAX_RATE 0.01
#define POWER_MIN_RATE 0.95
#define SEED 0x6d6567616265ull
/* 10 expected at alpha = 0.01; about 3 binomial sd either side */
#define P_RATE_LOW 0.001
#define P_RATE_HIGH 0.02

/* splitmix64: a small, well-known generator, written out here */
static uint64_t next_u64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double uniform01(uint64_t *s)
{
	return ((double)(next_u64(s) >> 11) + 0.5) / 9007199254740992.0; /* 2^53 */
}

/* Box-Muller */
static double gaussian(uint64_t *s)
{
	double u1 = uniform01(s), u2 = uniform01(s);

	return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

static void draw(double *out, size_t n, double median, double sigma, uint64_t *s)
{
	for (size_t i = 0; i < n; i++)
		out[i] = median * exp(sigma * gaussian(s));
}

/* Counts of each class over PAIRS pairs with head = base * factor. */
static void run_pairs(int counts[4], int *significant, double factor, uint64_t seed)
{
	mb_thresholds t = {MB_POLICY_DEFAULT_ALPHA, MB_POLICY_DEFAULT_MIN_EFFECT, MB_POLICY_DEFAULT_NOISE_CEILING};
	uint64_t s = seed;

	for (int k = 0; k < 4; k++)
		counts[k] = 0;
	*significant = 0;
	for (int p = 0; p < PAIRS; p++) {
		double a[SAMPLES], b[SAMPLES];
		mb_comparison c;

		draw(a, SAMPLES, BASE_NS, REL_NOISE, &s);
		draw(b, SAMPLES, BASE_NS * factor, REL_NOISE, &s);
		CHECK(mb_compare_samples(&c, a, SAMPLES, true, b, SAMPLES, true, &t, NULL) == 0);
		counts[c.cls]++;
		*significant += c.test.p_two_sided < t.alpha;
	}
}

static void print_counts(const char *name, const int counts[4])
{
	printf("%-22s SAME %4d  FASTER %4d  SLOWER %4d  AMBIGUOUS %4d  (of %d)\n", name,
		counts[MB_CMP_SAME], counts[MB_CMP_FASTER], counts[MB_CMP_SLOWER], counts[MB_CMP_AMBIGUOUS], PAIRS);
}

static void test_rates(void)
{
	int aa[4], slow[4], small_up[4], small_down[4];
	int aa_sig, slow_sig, up_sig, down_sig;
	double aa_rate, power, p_rate;

	run_pairs(aa, &aa_sig, 1.0, SEED);
	run_pairs(slow, &slow_sig, 1.03, SEED + 1);
	run_pairs(small_up, &up_sig, 1.005, SEED + 2);
	run_pairs(small_down, &down_sig, 1.0 / 1.005, SEED + 3);
	print_counts("A/A", aa);
	print_counts("planted +3%", slow);
	print_counts("planted +0.5%", small_up);
	print_counts("planted -0.5%", small_down);
	aa_rate = (double)(aa[MB_CMP_FASTER] + aa[MB_CMP_SLOWER]) / PAIRS;
	power = (double)slow[MB_CMP_SLOWER] / PAIRS;
	printf("A/A false-change rate %.2f%% (limit %.0f%%); power at +3%% %.2f%% (need %.0f%%)\n",
		100.0 * aa_rate, 100.0 * AA_MAX_RATE, 100.0 * power, 100.0 * POWER_MIN_RATE);
	printf("planted 0.5%%: %d + %d FASTER/SLOWER (need 0)\n",
		small_up[MB_CMP_FASTER] + small_up[MB_CMP_SLOWER], small_down[MB_CMP_FASTER] + small_down[MB_CMP_SLOWER]);
	/* The rank test alone must be calibrated: about alpha of A/A pairs
	 * reach p < alpha (binomial(1000, 0.01): 10 +- 3.1). The minimum effect
	 * is what keeps those from being called changes. */
	p_rate = (double)aa_sig / PAIRS;
	printf("rank test alone: A/A p < alpha in %d of %d; +0.5%%: %d and %d; +3%%: %d\n",
		aa_sig, PAIRS, up_sig, down_sig, slow_sig);
	CHECK_MSG(p_rate >= P_RATE_LOW && p_rate <= P_RATE_HIGH, "A/A p < alpha rate %.4f", p_rate);
	CHECK_MSG(aa_rate <= AA_MAX_RATE, "A/A rate %.4f", aa_rate);
	CHECK_MSG(power >= POWER_MIN_RATE, "power %.4f", power);
	CHECK(slow[MB_CMP_FASTER] == 0);
	CHECK(small_up[MB_CMP_FASTER] + small_up[MB_CMP_SLOWER] == 0);
	CHECK(small_down[MB_CMP_FASTER] + small_down[MB_CMP_SLOWER] == 0);
}

static void test_ambiguous_rules(void)
{
	mb_thresholds t = {MB_POLICY_DEFAULT_ALPHA, MB_POLICY_DEFAULT_MIN_EFFECT, MB_POLICY_DEFAULT_NOISE_CEILING};
	double a[SAMPLES], b[SAMPLES], wide_a[SAMPLES], wide_b[SAMPLES];
	uint64_t s = SEED + 10;
	mb_comparison c;

	draw(a, SAMPLES, BASE_NS, REL_NOISE, &s);
	draw(b, SAMPLES, BASE_NS * 1.10, REL_NOISE, &s);
	/* a clear 10% slowdown */
	CHECK(mb_compare_samples(&c, a, SAMPLES, true, b, SAMPLES, true, &t, NULL) == 0);
	CHECK_MSG(c.cls == MB_CMP_SLOWER, "10%% slower: %s (%s)", mb_cmp_class_name(c.cls), c.reason);
	CHECK(fabs(c.shift.ratio - 1.10) < 0.01 && c.shift.ratio_lo < c.shift.ratio && c.shift.ratio < c.shift.ratio_hi);
	/* ... and its mirror */
	CHECK(mb_compare_samples(&c, b, SAMPLES, true, a, SAMPLES, true, &t, NULL) == 0);
	CHECK(c.cls == MB_CMP_FASTER);
	/* not converged on one side */
	CHECK(mb_compare_samples(&c, a, SAMPLES, true, b, SAMPLES, false, &t, NULL) == 0);
	CHECK_MSG(c.cls == MB_CMP_AMBIGUOUS && c.reason[0], "not converged: %s", mb_cmp_class_name(c.cls));
	/* noisier than the ceiling: 40% per-sample noise */
	draw(wide_a, SAMPLES, BASE_NS, 0.40, &s);
	draw(wide_b, SAMPLES, BASE_NS * 1.10, 0.40, &s);
	CHECK(mb_compare_samples(&c, wide_a, SAMPLES, true, wide_b, SAMPLES, true, &t, NULL) == 0);
	CHECK_MSG(c.cls == MB_CMP_AMBIGUOUS, "noisy: %s", mb_cmp_class_name(c.cls));
	/* a 2% change at 1% noise: the interval covers the 2% boundary */
	draw(wide_a, SAMPLES, BASE_NS, 0.01, &s);
	draw(wide_b, SAMPLES, BASE_NS * 1.02, 0.01, &s);
	CHECK(mb_compare_samples(&c, wide_a, SAMPLES, true, wide_b, SAMPLES, true, &t, NULL) == 0);
	CHECK_MSG(c.cls == MB_CMP_AMBIGUOUS && c.shift.ratio_lo < 1.02 && c.shift.ratio_hi > 1.02,
		"boundary: %s [%g, %g]", mb_cmp_class_name(c.cls), c.shift.ratio_lo, c.shift.ratio_hi);
	/* two samples a side: no interval at 99% exists, whatever the shift */
	CHECK(mb_compare_samples(&c, a, 2, true, b, 2, true, &t, NULL) == 0);
	CHECK(c.cls == MB_CMP_AMBIGUOUS);
	/* nothing on one side */
	CHECK(mb_compare_samples(&c, a, 0, true, b, SAMPLES, true, &t, NULL) == 0);
	CHECK(c.cls == MB_CMP_AMBIGUOUS);
	/* identical samples: SAME */
	CHECK(mb_compare_samples(&c, a, SAMPLES, true, a, SAMPLES, true, &t, NULL) == 0);
	CHECK(c.cls == MB_CMP_SAME && c.shift.ratio == 1.0);
}

int main(void)
{
	test_rates();
	test_ambiguous_rules();
	return mb_test_finish("test_compare");
}
