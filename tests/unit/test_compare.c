/* The comparison's error rates on synthetic samples.
 *  A/A: 1000 seeded pairs from one lognormal distribution (0.5% relative
 *       noise, 30 samples a side): none may be FASTER or SLOWER.
 *  Power: a planted 3% slowdown at the same noise: all 1000 SLOWER.
 *  Small change: a planted 0.5% change (under the 2% minimum effect): no
 *       FASTER or SLOWER at all.
 *  Tails, at 500 samples a side (a GPU case at min_time_s = 0.5 has more):
 *       the slowest 20% of calls 20% slower (mean +4%) and a mixture (30%
 *       of calls 10% slower, mean +3%), which the median calls SAME: the
 *       p90 comparison must call them SLOWER in the tail; A/A at that size
 *       still none.
 *  Between runs: pairs of runs whose level moves from run to run (2% per
 *       repetition on top of the 0.5% per-call noise): compared on the
 *       pooled samples alone they trip often; with the repetitions' rule
 *       (or a noise floor) at most a few in 1000, and a 15% change is still
 *       caught.
 * Plus the AMBIGUOUS rules: not converged, too noisy, interval across the
 * minimum effect (with its direction), too few samples; and the
 * identical-code rule's attribution of sources to rows by file stem. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "receipts/compare.h"
#include "testutil.h"

#define PAIRS 1000
#define SAMPLES 30
#define REL_NOISE 0.005
#define BASE_NS 100000.0
#define AA_MAX_RATE 0.01
#define POWER_MIN_RATE 0.95
/* Tails: samples a side, the upper quantile of a standard normal above
 * which a call is "among the slowest 20%", and how much slower those are;
 * the mixture's share of slower calls and by how much. */
#define TAIL_SAMPLES 500
#define Z_SLOWEST_20 0.8416
#define TAIL_FACTOR 1.20
#define MIX_SHARE 0.30
#define MIX_FACTOR 1.10
/* Between runs: repetitions a side, samples each, the run-to-run level
 * noise, the planted change, and the limits: alpha (1%) of A/A pairs may
 * cross the t-test threshold, 2% leaves room for binomial spread; pooled
 * samples alone must trip far more often, or the test shows nothing. */
#define REPS 3
#define REP_SAMPLES 30
#define RUN_NOISE 0.02
#define REP_CHANGE 1.15
#define REP_AA_MAX_RATE 0.02
#define REP_POOLED_MIN_RATE 0.10
#define REP_POWER_MIN_RATE 0.80
/* A floor above what RUN_NOISE makes of a pair of runs: 4 sd of the
 * difference of two run levels, 4 * sqrt(2) * 2%. */
#define FLOOR 0.12
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
	mb_thresholds t;
	uint64_t s = seed;

	mb_thresholds_defaults(&t);
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
	/* what the gate promises at this noise: no false alarm in 1000 A/A
	 * pairs, and a 3% slowdown caught every time */
	CHECK_MSG(aa[MB_CMP_FASTER] + aa[MB_CMP_SLOWER] == 0, "A/A: %d false alarms",
		aa[MB_CMP_FASTER] + aa[MB_CMP_SLOWER]);
	CHECK_MSG(slow[MB_CMP_SLOWER] == PAIRS, "+3%%: %d of %d caught", slow[MB_CMP_SLOWER], PAIRS);
	CHECK(slow[MB_CMP_FASTER] == 0);
	CHECK(small_up[MB_CMP_FASTER] + small_up[MB_CMP_SLOWER] == 0);
	CHECK(small_down[MB_CMP_FASTER] + small_down[MB_CMP_SLOWER] == 0);
}

/* ---- tails ------------------------------------------------------------------- */

typedef enum tail_kind { TAIL_NONE, TAIL_SLOWEST, TAIL_MIXTURE } tail_kind;

/* One side of TAIL_SAMPLES calls: lognormal at REL_NOISE, with the slowest
 * 20% of calls TAIL_FACTOR slower, or MIX_SHARE of the calls MIX_FACTOR
 * slower. */
static void draw_tail(double *out, size_t n, tail_kind kind, uint64_t *s)
{
	for (size_t i = 0; i < n; i++) {
		double z = gaussian(s);

		out[i] = BASE_NS * exp(REL_NOISE * z);
		if (kind == TAIL_SLOWEST && z > Z_SLOWEST_20)
			out[i] *= TAIL_FACTOR;
		if (kind == TAIL_MIXTURE && uniform01(s) < MIX_SHARE)
			out[i] *= MIX_FACTOR;
	}
}

/* Counts of each class, and of SLOWER decided by the tail, over PAIRS. */
static void run_tail_pairs(int counts[4], int *by_tail, tail_kind kind, uint64_t seed)
{
	static double a[TAIL_SAMPLES], b[TAIL_SAMPLES];
	mb_thresholds t;
	uint64_t s = seed;

	mb_thresholds_defaults(&t);
	for (int k = 0; k < 4; k++)
		counts[k] = 0;
	*by_tail = 0;
	for (int p = 0; p < PAIRS; p++) {
		mb_comparison c;

		draw_tail(a, TAIL_SAMPLES, TAIL_NONE, &s);
		draw_tail(b, TAIL_SAMPLES, kind, &s);
		CHECK(mb_compare_samples(&c, a, TAIL_SAMPLES, true, b, TAIL_SAMPLES, true, &t, NULL) == 0);
		counts[c.cls]++;
		*by_tail += c.cls == MB_CMP_SLOWER && c.why == MB_WHY_TAIL && strstr(c.reason, "tail");
	}
}

static void test_tails(void)
{
	int aa[4], slowest[4], mixture[4], aa_tail, slowest_tail, mixture_tail;
	double a[TAIL_SAMPLES], b[TAIL_SAMPLES];
	uint64_t s = SEED + 40;
	mb_thresholds t;
	mb_comparison c;

	run_tail_pairs(aa, &aa_tail, TAIL_NONE, SEED + 20);
	run_tail_pairs(slowest, &slowest_tail, TAIL_SLOWEST, SEED + 21);
	run_tail_pairs(mixture, &mixture_tail, TAIL_MIXTURE, SEED + 22);
	print_counts("A/A, 500 a side", aa);
	print_counts("slowest 20% +20%", slowest);
	print_counts("30% of calls +10%", mixture);
	printf("tail: SLOWER in the tail %d and %d of %d\n", slowest_tail, mixture_tail, PAIRS);
	CHECK_MSG(aa[MB_CMP_FASTER] + aa[MB_CMP_SLOWER] == 0, "A/A with tails: %d false alarms",
		aa[MB_CMP_FASTER] + aa[MB_CMP_SLOWER]);
	CHECK_MSG(slowest_tail == PAIRS, "slowest 20%% +20%%: %d of %d SLOWER in the tail", slowest_tail, PAIRS);
	CHECK_MSG(mixture_tail == PAIRS, "30%% of calls +10%%: %d of %d SLOWER in the tail", mixture_tail, PAIRS);
	/* the mirror: a tail that got faster */
	mb_thresholds_defaults(&t);
	draw_tail(a, TAIL_SAMPLES, TAIL_NONE, &s);
	draw_tail(b, TAIL_SAMPLES, TAIL_SLOWEST, &s);
	CHECK(mb_compare_samples(&c, b, TAIL_SAMPLES, true, a, TAIL_SAMPLES, true, &t, NULL) == 0);
	CHECK_MSG(c.cls == MB_CMP_FASTER && c.why == MB_WHY_TAIL, "faster tail: %s (%s)", mb_cmp_class_name(c.cls),
		c.reason);
	/* a median 5% faster whose tail got 20% slower is no speed-up */
	for (size_t i = 0; i < TAIL_SAMPLES; i++)
		b[i] = b[i] > a[TAIL_SAMPLES - 1] ? b[i] : b[i] * 0.95;
	CHECK(mb_compare_samples(&c, a, TAIL_SAMPLES, true, b, TAIL_SAMPLES, true, &t, NULL) == 0);
	CHECK_MSG(c.cls == MB_CMP_AMBIGUOUS || c.cls == MB_CMP_SLOWER, "faster median, slower tail: %s (%s)",
		mb_cmp_class_name(c.cls), c.reason);
	CHECK_MSG(c.cls != MB_CMP_AMBIGUOUS || (c.why == MB_WHY_TAIL_CONFLICT && c.direction == MB_DIR_SLOWER),
		"conflict: %s", c.reason);
	/* 30 samples a side give no 99% interval for a p90: the tail stays out */
	CHECK(mb_compare_samples(&c, a, SAMPLES, true, b, SAMPLES, true, &t, NULL) == 0);
	CHECK(!c.tail.ci_available);
}

/* ---- between runs ------------------------------------------------------------ */

/* One run of REPS repetitions of REP_SAMPLES calls, each repetition at a
 * level of its own: all samples (concatenated) and each repetition's
 * median. */
static void draw_run(double *all, double *medians, double factor, uint64_t *s)
{
	for (int r = 0; r < REPS; r++) {
		double level = BASE_NS * factor * exp(RUN_NOISE * gaussian(s));

		draw(all + r * REP_SAMPLES, REP_SAMPLES, level, REL_NOISE, s);
		medians[r] = mb_stats_median(all + r * REP_SAMPLES, REP_SAMPLES);
	}
}

typedef struct rep_counts {
	int pooled, reps, floor; /* FASTER + SLOWER: samples alone, with repetitions, with the floor */
	int reps_slower;         /* SLOWER with repetitions */
} rep_counts;

static void run_rep_pairs(rep_counts *out, double factor, uint64_t seed)
{
	double a[REPS * REP_SAMPLES], b[REPS * REP_SAMPLES], ma[REPS], mb[REPS];
	mb_thresholds t, floored;
	uint64_t s = seed;

	mb_thresholds_defaults(&t);
	floored = t;
	floored.noise_floor = FLOOR;
	*out = (rep_counts){0, 0, 0, 0};
	for (int p = 0; p < PAIRS; p++) {
		mb_comparison c;
		size_t n = REPS * REP_SAMPLES;

		draw_run(a, ma, 1.0, &s);
		draw_run(b, mb, factor, &s);
		CHECK(mb_compare_samples(&c, a, n, true, b, n, true, &t, NULL) == 0);
		out->pooled += c.cls == MB_CMP_FASTER || c.cls == MB_CMP_SLOWER;
		CHECK(mb_compare_samples_reps(&c, a, n, true, b, n, true, ma, REPS, mb, REPS, &t, NULL) == 0);
		CHECK(c.reps.used && c.effect >= c.reps.threshold);
		out->reps += c.cls == MB_CMP_FASTER || c.cls == MB_CMP_SLOWER;
		out->reps_slower += c.cls == MB_CMP_SLOWER;
		CHECK(mb_compare_samples(&c, a, n, true, b, n, true, &floored, NULL) == 0);
		out->floor += c.cls == MB_CMP_FASTER || c.cls == MB_CMP_SLOWER;
	}
}

static void test_between_runs(void)
{
	rep_counts aa, planted;

	run_rep_pairs(&aa, 1.0, SEED + 30);
	run_rep_pairs(&planted, REP_CHANGE, SEED + 31);
	printf("between runs (A/A): changes called on pooled samples %d, with repetitions %d, with a %.0f%% floor %d "
		"(of %d)\n", aa.pooled, aa.reps, 100.0 * FLOOR, aa.floor, PAIRS);
	printf("between runs (+15%%): SLOWER with repetitions %d, with the floor %d (of %d)\n", planted.reps_slower,
		planted.floor, PAIRS);
	CHECK_MSG(aa.pooled >= REP_POOLED_MIN_RATE * PAIRS, "pooled samples alone tripped only %d times", aa.pooled);
	CHECK_MSG(aa.reps <= REP_AA_MAX_RATE * PAIRS, "repetitions: %d A/A false alarms", aa.reps);
	CHECK_MSG(aa.floor <= REP_AA_MAX_RATE * PAIRS, "floor: %d A/A false alarms", aa.floor);
	CHECK_MSG(planted.reps_slower >= REP_POWER_MIN_RATE * PAIRS, "repetitions: +15%% caught %d times",
		planted.reps_slower);
	CHECK_MSG(planted.floor >= REP_POWER_MIN_RATE * PAIRS, "floor: +15%% caught %d times", planted.floor);
}

/* The t quantiles the repetitions' rule uses, against printed tables. */
static void test_t_rule(void)
{
	mb_repetition_cmp r;
	mb_comparison c;
	mb_thresholds t;
	double a[REP_SAMPLES], b[REP_SAMPLES], ma[2] = {100.0, 102.0}, mb[2] = {101.0, 103.0};
	uint64_t s = SEED + 50;

	mb_thresholds_defaults(&t);
	draw(a, REP_SAMPLES, BASE_NS, REL_NOISE, &s);
	draw(b, REP_SAMPLES, BASE_NS, REL_NOISE, &s);
	CHECK(mb_compare_samples_reps(&c, a, REP_SAMPLES, true, b, REP_SAMPLES, true, ma, 2, mb, 2, &t, NULL) == 0);
	r = c.reps;
	/* t(0.995, 2) = 9.925 (tables); k = t * sqrt(1/2 + 1/2) */
	CHECK_MSG(r.used && fabs(r.k - 9.9248) < 1e-3, "k = %g", r.k);
	CHECK(fabs(r.ratio - 102.0 / 101.0) < 1e-12);
	/* one repetition a side: no between-run rule */
	CHECK(mb_compare_samples_reps(&c, a, REP_SAMPLES, true, b, REP_SAMPLES, true, ma, 1, mb, 1, &t, NULL) == 0);
	CHECK(!c.reps.used);
}

static void test_ambiguous_rules(void)
{
	mb_thresholds t;
	double a[SAMPLES], b[SAMPLES], wide_a[SAMPLES], wide_b[SAMPLES];
	uint64_t s = SEED + 10;
	mb_comparison c;

	mb_thresholds_defaults(&t);
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
	CHECK_MSG(c.cls == MB_CMP_AMBIGUOUS && c.reason[0] && c.why == MB_WHY_NOT_CONVERGED,
		"not converged: %s", mb_cmp_class_name(c.cls));
	CHECK(c.direction == MB_DIR_SLOWER && !strcmp(mb_cmp_why_name(c.why), "not converged"));
	/* noisier than the ceiling: 40% per-sample noise */
	draw(wide_a, SAMPLES, BASE_NS, 0.40, &s);
	draw(wide_b, SAMPLES, BASE_NS * 1.10, 0.40, &s);
	CHECK(mb_compare_samples(&c, wide_a, SAMPLES, true, wide_b, SAMPLES, true, &t, NULL) == 0);
	CHECK_MSG(c.cls == MB_CMP_AMBIGUOUS && c.why == MB_WHY_TOO_NOISY, "noisy: %s", mb_cmp_class_name(c.cls));
	/* a 2% change at 1% noise: the interval covers the 2% boundary; the
	 * estimate points to slower, and the mirror to faster */
	draw(wide_a, SAMPLES, BASE_NS, 0.01, &s);
	draw(wide_b, SAMPLES, BASE_NS * 1.02, 0.01, &s);
	CHECK(mb_compare_samples(&c, wide_a, SAMPLES, true, wide_b, SAMPLES, true, &t, NULL) == 0);
	CHECK_MSG(c.cls == MB_CMP_AMBIGUOUS && c.shift.ratio_lo < 1.02 && c.shift.ratio_hi > 1.02,
		"boundary: %s [%g, %g]", mb_cmp_class_name(c.cls), c.shift.ratio_lo, c.shift.ratio_hi);
	CHECK(c.why == MB_WHY_STRADDLES && c.direction == MB_DIR_SLOWER);
	CHECK(mb_compare_samples(&c, wide_b, SAMPLES, true, wide_a, SAMPLES, true, &t, NULL) == 0);
	CHECK_MSG(c.cls == MB_CMP_AMBIGUOUS && c.direction == MB_DIR_FASTER, "mirror: %s %s", mb_cmp_class_name(c.cls),
		mb_cmp_direction_name(c.direction));
	/* a floor above the change turns the same pair into SAME */
	t.noise_floor = 0.05;
	CHECK(mb_compare_samples(&c, wide_a, SAMPLES, true, wide_b, SAMPLES, true, &t, NULL) == 0);
	CHECK_MSG(c.cls == MB_CMP_SAME && c.effect == 0.05, "under the floor: %s", mb_cmp_class_name(c.cls));
	t.noise_floor = 0.0;
	/* two samples a side: no interval at 99% exists, whatever the shift */
	CHECK(mb_compare_samples(&c, a, 2, true, b, 2, true, &t, NULL) == 0);
	CHECK(c.cls == MB_CMP_AMBIGUOUS && c.why == MB_WHY_TOO_FEW_SAMPLES);
	/* nothing on one side */
	CHECK(mb_compare_samples(&c, a, 0, true, b, SAMPLES, true, &t, NULL) == 0);
	CHECK(c.cls == MB_CMP_AMBIGUOUS && c.direction == MB_DIR_NONE);
	/* identical samples: SAME */
	CHECK(mb_compare_samples(&c, a, SAMPLES, true, a, SAMPLES, true, &t, NULL) == 0);
	CHECK(c.cls == MB_CMP_SAME && c.shift.ratio == 1.0);
}

/* ---- the identical-code rule's attribution of sources ---------------- */

#define BLOB_OLD "1111111111111111111111111111111111111111"
#define BLOB_NEW "2222222222222222222222222222222222222222"

/* Rows of the catalog and the files beside them; ssm_scan_bwd stands for a
 * row built on ssm_scan (none is in rows.def today). */
static const char *const code_rows[] = {"ssm_scan", "ssm_scan_bwd", "recurrent_scan", "moe_ffn"};
static const char *const code_sources[] = {"src/kernels/ssm_scan.cu", "src/kernels/ssm_scan_sm90.cuh",
	"src/kernels/ssm_scan_sm90_layout.h", "src/kernels/recurrent_scan.cu", "src/kernels/recurrent_scan_math.h",
	"src/kernels/moe_ffn.cu", "src/kernels/vec.cuh", "src/kernels/ssm_scanner.cu"};

/* A receipt with binary provenance, a case per row of code_rows and every
 * source of code_sources at BLOB_OLD, but `changed` (NULL: none) at
 * BLOB_NEW. */
static json_t *code_receipt(const char *changed)
{
	json_t *r = json_pack("{s:{s:s,s:[]},s:{s:s},s:[]}", "provenance", "origin", "binary", "sources", "device",
		"name", "NVIDIA H200", "cases");
	json_t *sources = json_object_get(json_object_get(r, "provenance"), "sources");
	json_t *cases = json_object_get(r, "cases");
	size_t i;

	for (i = 0; i < sizeof(code_sources) / sizeof(code_sources[0]); i++)
		json_array_append_new(sources, json_pack("{s:s,s:s}", "path", code_sources[i], "blob_id",
			changed && !strcmp(changed, code_sources[i]) ? BLOB_NEW : BLOB_OLD));
	for (i = 0; i < sizeof(code_rows) / sizeof(code_rows[0]); i++)
		json_array_append_new(cases, json_pack("{s:s}", "row", code_rows[i]));
	return r;
}

/* Whether each row of code_rows keeps identical code when `changed` moves
 * to a new blob, against `want` (one entry a row). */
static void check_code_change(const char *changed, const bool want[])
{
	json_t *base = code_receipt(NULL), *head = code_receipt(changed);
	mb_code_index *ix = NULL;

	CHECK(base && head && mb_code_index_build(&ix, base, head, NULL) == 0);
	for (size_t i = 0; i < sizeof(code_rows) / sizeof(code_rows[0]); i++) {
		CHECK_MSG(mb_code_index_identical(ix, code_rows[i]) == want[i], "%s changed: %s %s identical",
			changed ? changed : "nothing", code_rows[i], want[i] ? "should stay" : "should not be");
		CHECK(mb_compare_identical_code(base, head, code_rows[i]) == want[i]);
	}
	mb_code_index_free(ix);
	json_decref(base);
	json_decref(head);
}

/* A file named after a row's prefix is that row's: a comment changed in
 * ssm_scan_sm90.cuh once made every row "changed code", and unchanged MoE
 * rows were compared with statistics across two machines. Only a stem no
 * "_"-separated prefix of which is a row stays shared. */
static void test_code_attribution(void)
{
	/* in the order of code_rows: ssm_scan, ssm_scan_bwd, recurrent_scan, moe_ffn */
	static const bool none[] = {true, true, true, true};
	static const bool ssm[] = {false, false, true, true};
	static const bool recurrent[] = {true, true, false, true};
	static const bool all[] = {false, false, false, false};

	check_code_change(NULL, none);
	check_code_change("src/kernels/ssm_scan_sm90.cuh", ssm);
	check_code_change("src/kernels/ssm_scan_sm90_layout.h", ssm);
	check_code_change("src/kernels/recurrent_scan_math.h", recurrent);
	check_code_change("src/kernels/vec.cuh", all);
	/* "ssm_scan" is a prefix of "ssm_scanner" but not on a "_" boundary */
	check_code_change("src/kernels/ssm_scanner.cu", all);
}

int main(void)
{
	test_rates();
	test_tails();
	test_between_runs();
	test_t_rule();
	test_ambiguous_rules();
	test_code_attribution();
	return mb_test_finish("test_compare");
}
