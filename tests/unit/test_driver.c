/* The case driver on the CPU backend:
 *  - the receipt's row_sample_seed reproduces the checked rows exactly: a
 *    variant with one wrong element in the middle row fails exactly when
 *    mb_check_rows_pick(rows_total, max_check_rows, row_sample_seed) lists
 *    that row, over many seeds, so both outcomes are seen;
 *  - cases of one row, shape and dtype share their inputs' seed, other
 *    shapes do not;
 *  - every phase of the case is accounted, and a correct variant passes. */
#include <stdlib.h>
#include <string.h>

#include "harness/backend.h"
#include "harness/case_common.h"
#include "harness/case_driver.h"
#include "testutil.h"

#define N_ROWS 64
#define N_COLS 8
#define CHECKED 16
#define SEEDS 48

typedef struct results {
	json_t *cases[4];
	mb_phase_ns phases;
	int n;
} results;

static int keep(void *ctx, size_t index, const json_t *result, const mb_phase_ns *phases)
{
	results *r = ctx;

	(void)index;
	if (r->n < 4)
		r->cases[r->n++] = json_incref((json_t *)result);
	r->phases.goodput += phases->goodput;
	r->phases.correctness += phases->correctness;
	r->phases.input_generation += phases->input_generation;
	r->phases.reference += phases->reference;
	return 0;
}

static void settings_init(mb_settings *s, uint64_t seed)
{
	/* short: the sample and the groups are the point, not the numbers */
	*s = (mb_settings){.seed = seed, .n_modes = 1, .modes = {MB_MODE_COLD}, .max_noise = 0.5,
		.min_samples = 3, .max_samples = 10, .min_time_s = 0, .timeout_s = 1, .warmup = 1,
		.max_check_rows = CHECKED};
}

static void plan_case(mb_case_plan *p, const char *row_name, const char *variant, int64_t rows)
{
	memset(p, 0, sizeof(*p));
	p->row = mb_catalog_find(row_name);
	p->variant = p->row ? mb_row_find_variant(p->row, variant) : NULL;
	p->dtype = MB_FP32;
	p->mode = MB_MODE_COLD;
	p->weight = 1;
	p->axis[0] = rows;
	p->axis[1] = N_COLS;
	snprintf(p->family, sizeof(p->family), "unit");
	snprintf(p->id, sizeof(p->id), "%s/%s/fp32/cold/unit/N=%lld,C=%d", row_name, variant, (long long)rows, N_COLS);
}

static int run(results *out, mb_case_plan *cases, size_t n, const mb_settings *s)
{
	mb_plan plan = {.cases = cases, .n_cases = n};
	mb_driver_hooks hooks = {.ctx = out, .case_done = keep};
	size_t failed_at = 0;
	mb_error err;

	memset(out, 0, sizeof(*out));
	return mb_driver_run(mb_backend_cpu(), &plan, 0, n, s, NULL, &hooks, &failed_at, &err);
}

static void free_results(results *r)
{
	for (int i = 0; i < r->n; i++)
		json_decref(r->cases[i]);
}

static void test_sample_reproduced(void)
{
	int caught = 0, missed = 0;

	for (uint64_t seed = 1; seed <= SEEDS; seed++) {
		mb_case_plan p;
		mb_settings s;
		results r;
		int64_t *rows = NULL, n = 0;
		mb_error err;
		bool sampled_middle = false;

		settings_init(&s, seed);
		plan_case(&p, "test_wrong_element", "host", N_ROWS);
		CHECK(p.variant != NULL);
		if (!p.variant || run(&r, &p, 1, &s) != 0 || r.n != 1) {
			CHECK(false);
			continue;
		}
		const json_t *corr = json_object_get(r.cases[0], "correctness");
		json_int_t row_seed = json_integer_value(json_object_get(corr, "row_sample_seed"));
		CHECK(json_integer_value(json_object_get(corr, "rows_checked")) == CHECKED);
		CHECK(json_integer_value(json_object_get(corr, "rows_total")) == N_ROWS);
		CHECK(mb_check_rows_pick(&rows, &n, N_ROWS, CHECKED, (uint64_t)row_seed, &err) == 0 && n == CHECKED);
		for (int64_t i = 0; rows && i < n; i++)
			sampled_middle = sampled_middle || rows[i] == N_ROWS / 2;
		bool failed = strcmp(json_string_value(json_object_get(r.cases[0], "status")), "failed") == 0;
		CHECK_MSG(failed == sampled_middle, "seed %llu: the case %s but the reproduced sample %s row %d",
			(unsigned long long)seed, failed ? "failed" : "passed", sampled_middle ? "holds" : "misses",
			N_ROWS / 2);
		caught += failed;
		missed += !failed;
		free(rows);
		free_results(&r);
	}
	/* a sample of 16 of 64 rows holds the middle one a quarter of the time */
	CHECK_MSG(caught > 0 && missed > 0, "caught %d, missed %d: both outcomes must occur", caught, missed);
}

static void test_groups(void)
{
	mb_case_plan p[3];
	mb_settings s;
	results r;

	settings_init(&s, 7);
	plan_case(&p[0], "test_scale", "host", N_ROWS);
	plan_case(&p[1], "test_scale", "reference", N_ROWS);
	plan_case(&p[2], "test_scale", "reference", N_ROWS + 1);
	CHECK(run(&r, p, 3, &s) == 0 && r.n == 3);
	if (r.n == 3) {
		json_int_t seed[3];
		for (int i = 0; i < 3; i++) {
			const json_t *c = r.cases[i];
			CHECK_MSG(strcmp(json_string_value(json_object_get(c, "status")), "ok") == 0, "case %d: %s", i,
				json_string_value(json_object_get(c, "error")));
			seed[i] = json_integer_value(json_object_get(json_object_get(c, "correctness"), "input_seed"));
		}
		CHECK(seed[0] == seed[1]);
		CHECK(seed[1] != seed[2]);
		CHECK(r.phases.goodput > 0 && r.phases.correctness > 0 && r.phases.input_generation > 0
			&& r.phases.reference > 0);
	}
	free_results(&r);
}

int main(void)
{
	test_sample_reproduced();
	test_groups();
	return mb_test_finish("test_driver");
}
