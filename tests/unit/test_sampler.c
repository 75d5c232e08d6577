/* The sampler's statistics and its stop rule (harness/sampler.h).
 * Expected values are worked out by hand in the comments. */
#include <math.h>

#include "harness/sampler.h"
#include "receipts/stats.h"
#include "testutil.h"

static void test_statistics(void)
{
	/* sorted 1..10: median 5.5, p10 = 1 + 0.9 = 1.9, p90 = 9.1 */
	double v[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
	/* MAD of 1..10 around 5.5 is 2.5: 1.2533 * 1.4826 * 2.5 / sqrt(10) / 5.5 */
	double expect_noise = 1.2533 * 1.4826 * 2.5 / sqrt(10.0) / 5.5;
	mb_settings s = {.min_samples = 5, .max_samples = 1000, .min_time_s = 0, .timeout_s = 10,
		.max_noise = 0.01};
	mb_sampler sm;
	mb_error err;
	bool converged;
	json_t *j;

	CHECK(fabs(mb_stats_quantile_sorted(v, 10, 0.5) - 5.5) < 1e-12);
	CHECK(fabs(mb_stats_quantile_sorted(v, 10, 0.1) - 1.9) < 1e-12);
	CHECK(fabs(mb_stats_quantile_sorted(v, 10, 0.9) - 9.1) < 1e-12);
	CHECK(fabs(mb_rel_noise(v, 10) - expect_noise) < 1e-12);
	CHECK(isinf(mb_rel_noise(v, 1)));

	CHECK(mb_sampler_init(&sm, &s, &err) == 0);
	for (int i = 0; i < 4; i++)
		CHECK(mb_sampler_add(&sm, 1000.0, false, &err) == 0);
	CHECK(!mb_sampler_done(&sm, &converged) && !converged); /* fewer than min_samples */
	CHECK(mb_sampler_add(&sm, 1000.0, false, &err) == 0);
	CHECK(mb_sampler_done(&sm, &converged) && converged);
	/* an excluded outlier does not move the statistics */
	CHECK(mb_sampler_add(&sm, 1e9, true, &err) == 0);
	CHECK(mb_sampler_median(&sm) == 1000.0);
	CHECK(mb_sampler_kept_sum_ns(&sm) == 5000);
	j = mb_sampler_json(&sm, "monotonic", 2, true);
	CHECK(json_array_size(json_object_get(j, "samples_ns")) == 6);
	CHECK(json_integer_value(json_array_get(json_object_get(j, "excluded"), 0)) == 5);
	CHECK(json_real_value(json_object_get(j, "max_ns")) == 1000.0);
	json_decref(j);
	/* growth past the initial buffer */
	for (int i = 0; i < 500; i++)
		CHECK(mb_sampler_add(&sm, 1000.0 + i, false, &err) == 0);
	CHECK(sm.n == 506);
	mb_sampler_free(&sm);

	/* a noisy series does not converge and stops at max_samples */
	s.max_samples = 50;
	CHECK(mb_sampler_init(&sm, &s, &err) == 0);
	for (int i = 0; i < 50; i++)
		mb_sampler_add(&sm, (i % 2) ? 1000.0 : 2000.0, false, &err);
	CHECK(mb_sampler_done(&sm, &converged) && !converged);
	mb_sampler_free(&sm);
}

int main(void)
{
	test_statistics();
	return mb_test_finish("test_sampler");
}
