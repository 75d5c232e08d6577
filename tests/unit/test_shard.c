/* Sharding a run over GPUs (harness/shard.h): the LPT deal, the rows of a
 * plan dealt whole, the cost model's direction, and the merge that keeps
 * what every GPU finished and records a dead worker's unfinished cases as
 * crashed. The workers themselves are tested end to end
 * (tests/e2e/test_shard.sh). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/case_common.h"
#include "harness/shard.h"
#include "harness/suite.h"
#include "testutil.h"

#define MAX_ITEMS 64
#define EPS 1e-9

static void check_deal(const double *cost, size_t n, int bins, const int *want_bin, const double *want_load)
{
	int bin[MAX_ITEMS];
	double load[MAX_ITEMS];

	mb_shard_lpt(bin, load, cost, n, bins);
	for (size_t i = 0; i < n; i++)
		CHECK_MSG(bin[i] == want_bin[i], "item %zu (cost %g) in bin %d, expected %d", i, cost[i], bin[i],
			want_bin[i]);
	for (int b = 0; b < bins; b++)
		CHECK_MSG(fabs(load[b] - want_load[b]) < EPS, "bin %d holds %g, expected %g", b, load[b], want_load[b]);
}

static void test_lpt(void)
{
	/* the textbook case: longest first, each to the least loaded bin,
	 * equal loads to the lower bin */
	check_deal((const double[]){7, 6, 5, 4, 3, 2}, 6, 2, (const int[]){0, 1, 1, 0, 0, 1}, (const double[]){14, 13});
	/* the long item last in plan order: dealt first, so the short ones
	 * fill the other bin (in plan order the long one would land on top of
	 * three short ones: 9, not 6) */
	check_deal((const double[]){1, 1, 1, 1, 1, 1, 6}, 7, 2, (const int[]){1, 1, 1, 1, 1, 1, 0},
		(const double[]){6, 6});
	/* equal costs: plan order, round and round */
	check_deal((const double[]){1, 1, 1, 1}, 4, 2, (const int[]){0, 1, 0, 1}, (const double[]){2, 2});
	/* one bin takes everything; more bins than items leaves some empty */
	check_deal((const double[]){3, 1, 2}, 3, 1, (const int[]){0, 0, 0}, (const double[]){6});
	check_deal((const double[]){5, 3}, 2, 4, (const int[]){0, 1}, (const double[]){5, 3, 0, 0});
}

/* Graham's bound for any list schedule, which LPT is: no bin ends later
 * than the mean load plus the largest item. */
static void test_lpt_bound(void)
{
	double cost[MAX_ITEMS], load[MAX_ITEMS], sum = 0, most = 0;
	int bin[MAX_ITEMS];
	unsigned seed = 12345;

	for (int i = 0; i < MAX_ITEMS; i++) {
		seed = seed * 1103515245u + 12345u;
		cost[i] = 1 + (seed >> 16) % 1000;
		sum += cost[i];
		most = cost[i] > most ? cost[i] : most;
	}
	for (int bins = 1; bins <= 8; bins++) {
		double total = 0;

		mb_shard_lpt(bin, load, cost, MAX_ITEMS, bins);
		for (int b = 0; b < bins; b++) {
			CHECK_MSG(load[b] <= sum / bins + most + EPS, "%d bins: bin %d holds %g", bins, b, load[b]);
			total += load[b];
		}
		CHECK(fabs(total - sum) < EPS);
	}
}

static mb_plan *smoke_plan(mb_suite **out_suite)
{
	mb_plan *plan = NULL;
	mb_error err;

	mb_error_clear(&err);
	CHECK_MSG(mb_suite_load(out_suite, mb_test_src("suites/smoke.toml"), &err) == 0, "%s", err.text);
	if (*out_suite)
		CHECK_MSG(mb_plan_build(&plan, *out_suite, NULL, "cpu", &err) == 0, "%s", err.text);
	return plan;
}

/* Every row goes whole to one slot, every case once, and the loads are
 * the rows' costs. */
static void test_assign(const mb_plan *plan, const mb_settings *s)
{
	for (int slots = 1; slots <= 3; slots++) {
		double load[MB_SHARD_MAX_GPUS], sum[MB_SHARD_MAX_GPUS] = {0};
		mb_shard_row *rows = NULL;
		size_t n = 0, next = 0;
		mb_error err;

		CHECK(mb_shard_assign(&rows, &n, load, plan, s, "cpu", slots, &err) == 0);
		for (size_t r = 0; rows && r < n; r++) {
			CHECK_MSG(rows[r].begin == next && rows[r].end > rows[r].begin, "row %zu: [%zu, %zu)", r,
				rows[r].begin, rows[r].end);
			CHECK(rows[r].slot >= 0 && rows[r].slot < slots);
			for (size_t i = rows[r].begin; i < rows[r].end; i++)
				CHECK(plan->cases[i].row == plan->cases[rows[r].begin].row);
			CHECK(rows[r].end >= plan->n_cases || plan->cases[rows[r].end].row != plan->cases[rows[r].begin].row);
			sum[rows[r].slot] += rows[r].cost_s;
			next = rows[r].end;
		}
		CHECK(next == plan->n_cases);
		for (int k = 0; k < slots; k++)
			CHECK(fabs(sum[k] - load[k]) < EPS);
		free(rows);
	}
	{
		mb_shard_row *rows = NULL;
		size_t n = 0;
		double load[MB_SHARD_MAX_GPUS];
		mb_error err;

		CHECK(mb_shard_assign(&rows, &n, load, plan, s, "cpu", 0, &err) == MB_EINVAL);
		CHECK(mb_shard_assign(&rows, &n, load, plan, s, "cpu", MB_SHARD_MAX_GPUS + 1, &err) == MB_EINVAL);
		CHECK(rows == NULL);
	}
}

/* A case costs at least its sampling time, more with a longer
 * min_time_s, and a case of a larger shape costs more on a GPU's scale
 * too. */
static void test_cost(const mb_plan *plan, const mb_settings *s)
{
	mb_settings longer = *s;
	const mb_case_plan *small = &plan->cases[0], *large = NULL;
	uint64_t small_bytes = small->row->bytes(small->axis, small->dtype);

	longer.min_time_s = s->min_time_s + 1;
	for (size_t i = 0; i < plan->n_cases; i++)
		if (plan->cases[i].row == small->row && plan->cases[i].dtype == small->dtype
			&& plan->cases[i].row->bytes(plan->cases[i].axis, plan->cases[i].dtype) > small_bytes)
			large = &plan->cases[i];
	CHECK(mb_shard_case_cost_s(small, s, "cpu") >= s->min_time_s);
	CHECK(mb_shard_case_cost_s(small, &longer, "cpu") > mb_shard_case_cost_s(small, s, "cpu"));
	CHECK_MSG(large != NULL, "the smoke suite has a larger shape of %s", small->row->name);
	if (large) {
		mb_settings quick = *s;
		/* no minimum time: the calls themselves decide */
		quick.min_time_s = 0;
		CHECK(mb_shard_case_cost_s(large, &quick, "cpu") > mb_shard_case_cost_s(small, &quick, "cpu"));
	}
}

/* A pass as the runner records it: a case object of the plan. */
static json_t *pass_of(const mb_case_plan *c)
{
	return mb_case_json_new(c, "cpu");
}

/* Slot 0 finished all its cases; slot 1's worker died after its first:
 * slot 0's cases are kept, slot 1's first too, the rest crashed with the
 * reason, every case names its slot, plan order holds. Interrupted (no
 * reason), the unfinished cases are left out. */
static void test_merge(const mb_plan *plan, const mb_settings *s)
{
	const char *dead = "gpu1 (test): its worker (pid 1) was killed by signal 9 (Killed) before this case finished";
	const char *why[2] = {NULL, dead}, *none[2] = {NULL, NULL};
	int *slot = calloc(plan->n_cases, sizeof(*slot));
	json_t *passes = json_array(), *cases = NULL, *c;
	double load[MB_SHARD_MAX_GPUS];
	mb_shard_row *rows = NULL;
	size_t n_rows = 0, counts[2], want[2] = {0, 0}, first1 = plan->n_cases, i;
	mb_shard_merge_in in = {plan, "cpu", slot, passes, 2, why};
	mb_error err;

	CHECK(mb_shard_assign(&rows, &n_rows, load, plan, s, "cpu", 2, &err) == 0);
	for (size_t r = 0; r < n_rows; r++)
		for (i = rows[r].begin; i < rows[r].end; i++)
			slot[i] = rows[r].slot;
	for (i = 0; i < plan->n_cases; i++) {
		json_t *list = json_array();

		if (slot[i] == 1 && first1 == plan->n_cases)
			first1 = i;
		if (slot[i] == 0 || i == first1)
			json_array_append_new(list, pass_of(&plan->cases[i]));
		json_array_append_new(passes, list);
		want[slot[i]]++;
	}
	CHECK_MSG(want[0] > 0 && want[1] > 1, "both slots hold cases (%zu, %zu)", want[0], want[1]);
	CHECK(mb_shard_merge(&cases, counts, &in, &err) == 0);
	CHECK(json_array_size(cases) == plan->n_cases);
	CHECK(counts[0] == want[0] && counts[1] == want[1]);
	json_array_foreach(cases, i, c) {
		const char *status = json_string_value(json_object_get(c, "status"));
		bool lost = slot[i] == 1 && i != first1;

		CHECK(strcmp(json_string_value(json_object_get(c, "id")), plan->cases[i].id) == 0);
		CHECK(json_integer_value(json_object_get(c, "gpu")) == slot[i]);
		CHECK_MSG(strcmp(status, lost ? "crashed" : "ok") == 0, "%s: %s", plan->cases[i].id, status);
		if (lost)
			CHECK(strcmp(json_string_value(json_object_get(c, "error")), dead) == 0);
	}
	json_decref(cases);

	in.lost_why = none;
	CHECK(mb_shard_merge(&cases, counts, &in, &err) == 0);
	CHECK(json_array_size(cases) == want[0] + 1);
	CHECK(counts[0] == want[0] && counts[1] == 1);
	json_array_foreach(cases, i, c)
		CHECK(strcmp(json_string_value(json_object_get(c, "status")), "ok") == 0);
	json_decref(cases);
	json_decref(passes);
	free(rows);
	free(slot);
}

int main(void)
{
	mb_suite *suite = NULL;
	mb_plan *plan;

	test_lpt();
	test_lpt_bound();
	plan = smoke_plan(&suite);
	if (plan && plan->n_cases > 2) {
		test_assign(plan, &suite->settings);
		test_cost(plan, &suite->settings);
		test_merge(plan, &suite->settings);
	}
	mb_plan_free(plan);
	mb_suite_free(suite);
	return mb_test_finish("test_shard");
}
