/* The shared case machinery: inputs, row sampling, comparison, sampling
 * statistics, throughput. Expected values are worked out by hand in the
 * comments. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/check.h"
#include "harness/host_inputs.h"
#include "harness/rng.h"
#include "harness/sampler.h"
#include "harness/throughput.h"
#include "receipts/stats.h"
#include "reference/reference.h"
#include "testutil.h"

static mb_case_plan plan_for(const char *row, mb_dtype dtype, const int64_t *axis)
{
	mb_case_plan p;

	memset(&p, 0, sizeof(p));
	p.row = mb_catalog_find(row);
	p.variant = mb_row_find_variant(p.row, "reference");
	p.dtype = dtype;
	p.mode = MB_MODE_COLD;
	p.weight = 1;
	snprintf(p.family, sizeof(p.family), "unit");
	memcpy(p.axis, axis, sizeof(int64_t) * (size_t)p.row->n_axes);
	snprintf(p.id, sizeof(p.id), "%s/unit", row);
	return p;
}

static void test_inputs(void)
{
	int64_t axis[4] = {33, 4, 2, 16};
	mb_case_plan p = plan_for("rope_qk", MB_BF16, axis);
	mb_host_tensors a, b;
	mb_error err;
	int zeros = 0, unrounded = 0, differ = 0;

	CHECK(mb_host_tensors_make(&a, &p, 42, &err) == 0);
	CHECK(mb_host_tensors_make(&b, &p, 42, &err) == 0);
	CHECK(a.n_tensors == 6 && a.n_inputs == 4);
	for (int t = 0; t < a.n_inputs; t++) {
		for (uint64_t i = 0; i < a.elems[t]; i++) {
			zeros += a.data[t][i] == 0.0f;
			unrounded += a.data[t][i] != mb_dtype_round(MB_BF16, a.data[t][i]);
			differ += a.data[t][i] != b.data[t][i];
		}
	}
	CHECK_MSG(zeros == 0, "%d zero inputs", zeros);
	CHECK_MSG(unrounded == 0, "%d inputs not representable in bf16", unrounded);
	CHECK_MSG(differ == 0, "same seed, different inputs");
	for (int t = a.n_inputs; t < a.n_tensors; t++)
		CHECK(isnan(a.data[t][0]) && isnan(a.data[t][a.elems[t] - 1]));
	mb_host_tensors_free(&b);
	CHECK(mb_host_tensors_make(&b, &p, 43, &err) == 0);
	CHECK(memcmp(a.data[0], b.data[0], a.elems[0] * sizeof(float)) != 0);
	/* cos/sin are uniform in [-1, 1] */
	for (uint64_t i = 0; i < a.elems[2]; i++)
		CHECK(fabsf(a.data[2][i]) <= 1.0f);
	mb_host_tensors_free(&a);
	mb_host_tensors_free(&b);
	mb_host_tensors_free(NULL);
}

static void test_rows_pick(void)
{
	int64_t *rows = NULL, n = 0;
	mb_error err;

	CHECK(mb_check_rows_pick(&rows, &n, 100, 200, 1, &err) == 0 && rows == NULL && n == 100);
	CHECK(mb_check_rows_pick(&rows, &n, 100000, 500, 1, &err) == 0 && rows && n == 500);
	for (int64_t i = 1; rows && i < n; i++)
		CHECK(rows[i] > rows[i - 1]); /* sorted and distinct */
	CHECK(rows && rows[0] >= 0 && rows[n - 1] < 100000);
	free(rows);
	/* every row can be drawn: picking all but one of 10 leaves one out */
	CHECK(mb_check_rows_pick(&rows, &n, 10, 9, 3, &err) == 0 && n == 9);
	free(rows);
}

static void test_check(void)
{
	mb_tensor_spec spec = {"y", true, 2, 3, MB_FILL_NORMAL, 0, 0};
	mb_tolerance tol = {0.01, 0.01, "unit"};
	float want[6] = {1, 2, 3, 4, 5, 6};
	float good[6] = {1.005f, 2, 3, 4, 5, 6.05f};  /* 0.05 <= 0.01 + 0.06 */
	float bad[6] = {1, 2, 3, 4.2f, 5, 6};           /* 0.2 > 0.01 + 0.04 */
	float nan[6] = {1, 2, NAN, 4, 5, 6};
	float zero[6] = {0};
	int64_t second_row[1] = {1};
	mb_check c;
	char why[256];

	mb_check_init(&c);
	mb_check_add(&c, &spec, good, want, NULL, 2, 2, &tol);
	CHECK(mb_check_passed(&c) && c.over_tolerance == 0 && c.compared == 6);
	CHECK(fabs(c.max_abs - 0.05) < 1e-6);

	mb_check_init(&c);
	mb_check_add(&c, &spec, bad, want, NULL, 2, 2, &tol);
	CHECK(!mb_check_passed(&c) && c.over_tolerance == 1);
	mb_check_describe(&c, why, sizeof(why));
	CHECK_MSG(strstr(why, "1 of 6 elements over tolerance") != NULL, "%s", why);

	/* row sampling: only row 0 checked, so the bad element in row 1 is not */
	mb_check_init(&c);
	mb_check_add(&c, &spec, bad, want, (int64_t[]){0}, 1, 2, &tol);
	CHECK(mb_check_passed(&c) && c.compared == 3);
	mb_check_init(&c);
	mb_check_add(&c, &spec, bad, want, second_row, 1, 2, &tol);
	CHECK(!mb_check_passed(&c));

	mb_check_init(&c);
	mb_check_add(&c, &spec, nan, want, NULL, 2, 2, &tol);
	CHECK(!mb_check_passed(&c) && c.nan_count == 1);

	/* all zeros never pass, even against an all-zero reference */
	mb_check_init(&c);
	mb_check_add(&c, &spec, zero, zero, NULL, 2, 2, &tol);
	CHECK(!mb_check_passed(&c));
	mb_check_describe(&c, why, sizeof(why));
	CHECK_MSG(strstr(why, "zero") != NULL, "%s", why);

	/* an output with another row count than the unit ([1, H] weight
	 * gradients) is compared whole, whatever the sample */
	{
		mb_tensor_spec dw = {"dw", true, 1, 3, MB_FILL_NORMAL, 0, 0};
		float dw_want[3] = {1, 2, 3}, dw_bad[3] = {1, 2, 3.5f};
		mb_check_init(&c);
		mb_check_add(&c, &dw, dw_bad, dw_want, second_row, 1, 2, &tol);
		CHECK(!mb_check_passed(&c) && c.compared == 3 && c.over_tolerance == 1);
	}
	/* ... unless its own rows are given, with its row count as the unit
	 * (a sampled output's, mb_output_rows) */
	{
		mb_tensor_spec dw = {"dW", true, 3, 1, MB_FILL_NORMAL, 0, 0};
		float dw_want[3] = {1, 2, 3}, dw_bad[3] = {1, 2, 3.5f};
		mb_check_init(&c);
		mb_check_add(&c, &dw, dw_bad, dw_want, (int64_t[]){0, 1}, 2, 3, &tol);
		CHECK(mb_check_passed(&c) && c.compared == 2);
		mb_check_init(&c);
		mb_check_add(&c, &dw, dw_bad, dw_want, (int64_t[]){2}, 1, 3, &tol);
		CHECK(!mb_check_passed(&c) && c.compared == 1);
	}

	/* nothing compared never passes */
	mb_check_init(&c);
	CHECK(!mb_check_passed(&c));
}

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

static void test_throughput(void)
{
	json_t *ceil = json_pack("{s:f, s:n}", "copy_gbps", 1000.0, "gemm_tflops");
	mb_traffic whole = {.bytes = 1000000000u};
	/* 1e9 bytes in 2 ms = 500 GB/s = half the copy ceiling */
	json_t *t = mb_throughput_json(&whole, 10, 2e6, NULL, ceil);

	CHECK(fabs(json_real_value(json_object_get(t, "gbps")) - 500.0) < 1e-9);
	CHECK(strcmp(json_string_value(json_object_get(t, "ceiling")), "copy") == 0);
	CHECK(fabs(json_real_value(json_object_get(t, "fraction_of_ceiling")) - 0.5) < 1e-12);
	CHECK(!json_object_get(t, "read_bytes"));
	json_decref(t);
	t = mb_throughput_json(&whole, 10, 2e6, NULL, NULL);
	CHECK(json_is_null(json_object_get(t, "fraction_of_ceiling")));
	json_decref(t);
	json_decref(ceil);
}

/* The memory ceiling follows the read share: write-only 800, copy 1000,
 * read-only 1400 GB/s at shares 0, 1/2 and 1, straight lines between. */
static void test_memory_ceiling(void)
{
	json_t *ceil = json_pack("{s:f, s:f, s:f, s:n}", "copy_gbps", 1000.0, "read_gbps", 1400.0,
		"write_gbps", 800.0, "gemm_tflops");
	const char *which;
	mb_traffic two_to_one = {.split = true, .read_bytes = 2000000000u, .write_bytes = 1000000000u,
		.bytes = 3000000000u, .n_launches = 2,
		.launch = {{"a", 1000000000u, 1000000000u}, {"b", 1000000000u, 0}}};
	double launch_ns[MB_MAX_LAUNCHES] = {2e6, NAN};

	CHECK(fabs(mb_memory_ceiling_gbps(ceil, 1, 0, true, &which) - 1400.0) < 1e-9 && !strcmp(which, "memory"));
	CHECK(fabs(mb_memory_ceiling_gbps(ceil, 0, 1, true, &which) - 800.0) < 1e-9);
	CHECK(fabs(mb_memory_ceiling_gbps(ceil, 1, 1, true, &which) - 1000.0) < 1e-9);
	/* two reads per write: 1000 + 400 * (2/3 - 1/2) / (1/2) = 1133.3 */
	CHECK(fabs(mb_memory_ceiling_gbps(ceil, 2, 1, true, &which) - 1000.0 - 400.0 / 3.0) < 1e-9);
	CHECK(fabs(mb_memory_ceiling_gbps(ceil, 2, 1, false, &which) - 1000.0) < 1e-9 && !strcmp(which, "copy"));
	/* 3e9 bytes in 3 ms: 1000 GB/s of a 1133.3 ceiling */
	json_t *t = mb_throughput_json(&two_to_one, 0, 3e6, launch_ns, ceil);
	CHECK(strcmp(json_string_value(json_object_get(t, "ceiling")), "memory") == 0);
	CHECK(fabs(json_real_value(json_object_get(t, "fraction_of_ceiling")) - 1000.0 / (1000.0 + 400.0 / 3.0)) < 1e-9);
	CHECK(json_integer_value(json_object_get(t, "read_bytes")) == 2000000000);
	json_t *l = json_object_get(t, "model_launches");
	CHECK(json_array_size(l) == 2);
	/* launch a: 2e9 bytes in 2 ms = 1000 GB/s, a copy: fraction 1 */
	CHECK(fabs(json_real_value(json_object_get(json_array_get(l, 0), "fraction_of_ceiling")) - 1.0) < 1e-9);
	CHECK(json_is_null(json_object_get(json_array_get(l, 1), "median_ns")));
	json_decref(t);
	json_decref(ceil);
}

static void test_seeds(void)
{
	CHECK(mb_case_seed(1, "a") == mb_case_seed(1, "a"));
	CHECK(mb_case_seed(1, "a") != mb_case_seed(2, "a"));
	CHECK(mb_case_seed(1, "a") != mb_case_seed(1, "b"));
}

int main(void)
{
	test_inputs();
	test_rows_pick();
	test_check();
	test_statistics();
	test_throughput();
	test_memory_ceiling();
	test_seeds();
	return mb_test_finish("test_case_common");
}
