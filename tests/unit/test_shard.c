/* Sharding a run over GPUs (harness/shard.h): the LPT deal; the plan dealt
 * in parts (whole rows, shape groups, cases) that cover it once, in plan
 * order, within the bound of the mean load plus one case; a dominant row
 * split; the rows a reference worker serves dealt by group; costs learned from receipts (wall_ns measured, older receipts
 * estimated, the newest receipt winning, the rest by the bytes model
 * scaled); the cost model's direction; and the merge that keeps what
 * every GPU finished and records a dead worker's unfinished cases as
 * crashed. The workers themselves are tested end to end
 * (tests/e2e/test_shard.sh). */
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "harness/case_record.h"
#include "harness/shard.h"
#include "harness/suite.h"
#include "receipts/text.h"
#include "reference/parallel.h"
#include "testutil.h"

#define MAX_ITEMS 64
#define EPS 1e-9
#define NS_PER_S 1e9

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

/* The smoke suite's plan on the cpu backend, with `modes` timed ("cold"
 * as the suite says, or several: a shape group of several cases) and
 * `rows` only (NULL: all). */
static mb_plan *smoke_plan(mb_suite **out_suite, const char *modes, const char *rows)
{
	char set[64];
	mb_suite_set sets[1] = {{set, NULL}};
	mb_plan_filter filter = {.rows = rows};
	mb_plan *plan = NULL;
	mb_error err;

	snprintf(set, sizeof(set), "timing.modes=%s", modes);
	mb_error_clear(&err);
	CHECK_MSG(mb_suite_load_with(out_suite, mb_test_src("suites/smoke.toml"), sets, 1, &err) == 0, "%s", err.text);
	if (*out_suite)
		CHECK_MSG(mb_plan_build(&plan, *out_suite, &filter, "cpu", &err) == 0, "%s", err.text);
	return plan;
}

static mb_shard_costs model_costs(const mb_plan *plan, const mb_suite *suite)
{
	mb_shard_costs c;
	mb_error err;

	mb_error_clear(&err);
	CHECK_MSG(mb_shard_costs_model(&c, plan, suite, "cpu", &err) == 0, "%s", err.text);
	return c;
}

/* What every deal holds to: the parts cover the plan once, in order, each
 * within one row; a row's parts are adjacent and split exactly when they
 * are on several slots; the loads are the parts' costs; no slot holds
 * more than the bound, the mean plus the largest case. Returns the
 * number of rows split. */
static size_t check_parts(const mb_plan *plan, const mb_shard_costs *costs, int slots, const char *what)
{
	mb_shard_deal_info d;
	mb_shard_row *parts = NULL;
	double sum[MB_SHARD_MAX_GPUS] = {0}, total = 0, largest = 0;
	size_t n = 0, next = 0, split_rows = 0, cases = 0;
	mb_error err;

	mb_error_clear(&err);
	CHECK_MSG(mb_shard_assign(&parts, &n, &d, plan, costs, slots, &err) == 0, "%s: %s", what, err.text);
	for (size_t r = 0; parts && r < n; r++) {
		bool first = r == 0 || plan->cases[parts[r - 1].begin].row != plan->cases[parts[r].begin].row;
		bool several = false;

		CHECK_MSG(parts[r].begin == next && parts[r].end > parts[r].begin, "%s: part %zu: [%zu, %zu)", what, r,
			parts[r].begin, parts[r].end);
		CHECK(parts[r].slot >= 0 && parts[r].slot < slots);
		for (size_t i = parts[r].begin; i < parts[r].end; i++)
			CHECK(plan->cases[i].row == plan->cases[parts[r].begin].row);
		for (size_t k = r; k < n && plan->cases[parts[k].begin].row == plan->cases[parts[r].begin].row; k++)
			several |= parts[k].slot != parts[r].slot;
		for (size_t k = r; k-- > 0 && plan->cases[parts[k].begin].row == plan->cases[parts[r].begin].row;)
			several |= parts[k].slot != parts[r].slot;
		CHECK_MSG(parts[r].split == several, "%s: part %zu (%s) split %d", what, r,
			plan->cases[parts[r].begin].row->name, parts[r].split);
		split_rows += first && parts[r].split;
		sum[parts[r].slot] += parts[r].cost_s;
		next = parts[r].end;
	}
	CHECK_MSG(next == plan->n_cases, "%s: the parts end at %zu of %zu cases", what, next, plan->n_cases);
	CHECK(split_rows == d.n_split);
	for (size_t i = 0; i < plan->n_cases; i++) {
		total += costs->case_s[i];
		largest = fmax(largest, costs->case_s[i] + costs->row_start_s);
	}
	/* the total is the cases', and a row start for each split part that
	 * does not start its row */
	CHECK_MSG(costs->row_start_s > 0 ? d.total_s >= total - EPS * (1 + total) : fabs(d.total_s - total) < EPS * (1 + total),
		"%s: total %g, the cases' %g", what, d.total_s, total);
	CHECK(fabs(d.largest_case_s - largest) < EPS);
	for (int k = 0; k < slots; k++) {
		CHECK_MSG(fabs(sum[k] - d.load_s[k]) < EPS * (1 + total), "%s: slot %d: parts %g, load %g", what, k, sum[k],
			d.load_s[k]);
		CHECK_MSG(d.load_s[k] <= d.total_s / slots + largest + EPS * (1 + total), "%s, %d slots: slot %d holds %g, "
			"more than the mean %g plus the largest case %g", what, slots, k, d.load_s[k], d.total_s / slots, largest);
	}
	for (int k = 0; k < slots; k++) {
		json_t *rows = mb_shard_slot_rows(parts, n, plan, k), *row;
		size_t i;

		json_array_foreach(rows, i, row) {
			cases += (size_t)json_integer_value(json_object_get(row, "cases"));
			CHECK(json_integer_value(json_object_get(row, "cases")) <= json_integer_value(json_object_get(row, "of")));
		}
		json_decref(rows);
	}
	CHECK_MSG(cases == plan->n_cases, "%s: the slots' rows hold %zu cases of %zu", what, cases, plan->n_cases);
	free(parts);
	return d.n_split;
}

static void test_assign(const mb_plan *plan, const mb_suite *suite)
{
	mb_shard_costs c = model_costs(plan, suite);
	mb_shard_row *rows = NULL;
	mb_shard_deal_info d;
	size_t n = 0;
	mb_error err;

	for (int slots = 1; slots <= 8; slots++)
		check_parts(plan, &c, slots, "the bytes model");
	CHECK(check_parts(plan, &c, 1, "one slot") == 0);
	CHECK(mb_shard_assign(&rows, &n, &d, plan, &c, 0, &err) == MB_EINVAL);
	CHECK(mb_shard_assign(&rows, &n, &d, plan, &c, MB_SHARD_MAX_GPUS + 1, &err) == MB_EINVAL);
	CHECK(rows == NULL);
	mb_shard_costs_free(&c);
}

/* Costs of one dominant row: 1 s a case, every other case 0.01 s. Dealt
 * whole it would end the run alone; split, no slot ends later than the
 * mean plus one case. */
static void test_dominant_row(const mb_plan *plan, const mb_suite *suite, const char *row)
{
	mb_shard_costs c = model_costs(plan, suite);
	char what[128];

	for (size_t i = 0; i < plan->n_cases; i++)
		c.case_s[i] = strcmp(plan->cases[i].row->name, row) ? 0.01 : 1.0;
	for (int slots = 2; slots <= 4; slots++) {
		snprintf(what, sizeof(what), "%s dominant over %d slots", row, slots);
		CHECK_MSG(check_parts(plan, &c, slots, what) >= 1, "%s: not split", what);
	}
	mb_shard_costs_free(&c);
}

/* Each lane is an item of the deal, run after the rows of its GPU:
 * longer than a fair share, each has a GPU to itself and the longest sets
 * the bound; shorter, they share GPUs with rows. */
static void test_lanes(const mb_plan *plan, const mb_suite *suite)
{
	mb_shard_costs c = model_costs(plan, suite);
	double cases_s = 0;

	for (size_t i = 0; i < plan->n_cases; i++)
		cases_s += c.case_s[i];
	c.n_lanes = 2;
	snprintf(c.lane_name[0], sizeof(c.lane_name[0]), "long");
	snprintf(c.lane_name[1], sizeof(c.lane_name[1]), "short");
	for (int round = 0; round < 2; round++) {
		mb_shard_row *parts = NULL;
		mb_shard_deal_info d;
		size_t n = 0, beside[2] = {0, 0};
		char text[64];
		mb_error err;

		c.lane_s[0] = round == 0 ? cases_s : cases_s / 8;
		c.lane_s[1] = c.lane_s[0] / 2;
		c.lanes_s = c.lane_s[0] + c.lane_s[1];
		CHECK(mb_shard_assign(&parts, &n, &d, plan, &c, 4, &err) == 0);
		CHECK(d.lane_slot[0] != d.lane_slot[1] && d.lanes_slot == d.lane_slot[0]);
		for (size_t r = 0; r < n; r++)
			for (int l = 0; l < 2; l++)
				beside[l] += parts[r].slot == d.lane_slot[l];
		CHECK(fabs(d.total_s - cases_s - c.lanes_s) < EPS * cases_s);
		if (round == 0)
			CHECK_MSG(beside[0] == 0 && beside[1] == 0 && fabs(d.load_s[d.lane_slot[0]] - c.lane_s[0]) < EPS
				&& fabs(d.bound_s - c.lane_s[0]) < EPS, "long lanes: %zu and %zu parts beside them, bound %g", beside[0],
				beside[1], d.bound_s);
		else
			CHECK_MSG(beside[0] + beside[1] > 0, "short lanes have every GPU they are on to themselves");
		for (int k = 0; k < 4; k++)
			CHECK(d.load_s[k] <= d.bound_s * (1 + EPS));
		mb_shard_slot_lanes_text(text, sizeof(text), &c, &d, d.lane_slot[1]);
		CHECK_MSG(!strcmp(text, "lane short"), "%s", text);
		free(parts);
	}
	mb_shard_costs_free(&c);
}

/* On a GPU a row child's start is charged to each split part that does
 * not start its row: a dominant row still splits, and the bound holds
 * with the starts counted. */
static void test_row_start(const mb_plan *plan, const mb_suite *suite)
{
	mb_shard_costs c = model_costs(plan, suite);
	double cases_s = 0;

	c.row_start_s = 0.3;
	for (size_t i = 0; i < plan->n_cases; i++) {
		c.case_s[i] = strcmp(plan->cases[i].row->name, "mhc_sinkhorn") ? 0.01 : 1.0;
		cases_s += c.case_s[i];
	}
	for (int slots = 2; slots <= 4; slots++) {
		mb_shard_row *parts = NULL;
		mb_shard_deal_info d;
		size_t n = 0, later = 0;
		mb_error err;

		CHECK(check_parts(plan, &c, slots, "mhc_sinkhorn dominant, row starts charged") == 1);
		CHECK(mb_shard_assign(&parts, &n, &d, plan, &c, slots, &err) == 0);
		for (size_t r = 0; r < n; r++)
			later += parts[r].begin > 0 && plan->cases[parts[r].begin - 1].row == plan->cases[parts[r].begin].row;
		CHECK_MSG(later > 0 && d.total_s >= cases_s + 0.3 * (double)later - EPS, "%d slots: total %g for %zu later parts",
			slots, d.total_s, later);
		free(parts);
	}
	mb_shard_costs_free(&c);
}

/* Random costs, spread over three orders of magnitude, on plans whose
 * groups hold several cases: the bound holds for every count of slots. */
static void test_random_costs(const mb_plan *plan, const mb_suite *suite)
{
	mb_shard_costs c = model_costs(plan, suite);
	unsigned seed = 777;
	char what[64];

	for (int round = 0; round < 20; round++) {
		for (size_t i = 0; i < plan->n_cases; i++) {
			seed = seed * 1103515245u + 12345u;
			c.case_s[i] = pow(10.0, (double)((seed >> 16) % 3000) / 1000.0 - 2.0);
		}
		for (int slots = 2; slots <= 8; slots += 3) {
			snprintf(what, sizeof(what), "random costs, round %d", round);
			check_parts(plan, &c, slots, what);
		}
	}
	mb_shard_costs_free(&c);
}

/* One row, each of its groups several cases (three modes), far costlier
 * than its count of groups can spread: its groups split into cases. */
static void test_group_split(void)
{
	mb_suite *suite = NULL;
	mb_plan *plan = smoke_plan(&suite, "cold,hot,graph", "relu2");
	mb_shard_costs c;
	mb_shard_row *parts = NULL;
	mb_shard_deal_info d;
	size_t n = 0;
	mb_error err;

	if (!plan)
		goto cleanup;
	c = model_costs(plan, suite);
	/* the first group is ten times the rest */
	for (size_t i = 0; i < plan->n_cases; i++)
		c.case_s[i] = i < 3 ? 10.0 : 1.0;
	CHECK(mb_shard_assign(&parts, &n, &d, plan, &c, 8, &err) == 0);
	CHECK_MSG(n > 8 / 2 && parts && parts[0].end - parts[0].begin < 3, "the first group is not split: %zu parts", n);
	check_parts(plan, &c, 8, "relu2, 3 modes, over 8 slots");
	check_parts(plan, &c, 2, "relu2, 3 modes, over 2 slots");
	free(parts);
	mb_shard_costs_free(&c);
cleanup:
	mb_plan_free(plan);
	mb_suite_free(suite);
}

/* Rows whose references a reference worker computes are dealt by shape
 * group wherever the backend starts such workers, though whole rows would
 * balance: each GPU's worker then computes its own groups' references. */
static void test_worker_rows_spread(void)
{
	mb_suite *suite = NULL;
	mb_plan *plan = smoke_plan(&suite, "cold", "relu2,swiglu");
	mb_shard_costs c;
	mb_shard_row *parts = NULL;
	mb_shard_deal_info d;
	size_t n = 0, relu2 = 0;
	mb_error err;

	if (!plan)
		goto cleanup;
	c = model_costs(plan, suite);
	while (relu2 < plan->n_cases && plan->cases[relu2].row == plan->cases[0].row)
		relu2++;
	/* the two rows cost alike, so whole rows would balance */
	for (size_t i = 0; i < plan->n_cases; i++)
		c.case_s[i] = 1.0 / (double)(i < relu2 ? relu2 : plan->n_cases - relu2);
	setenv("MEGABENCH_REF_WORKER", "all", 1);
	for (int worker = 0; worker < 2; worker++) {
		c.ref_worker = worker;
		CHECK(mb_shard_assign(&parts, &n, &d, plan, &c, 2, &err) == 0);
		CHECK_MSG(d.n_split == (worker ? 2u : 0u), "reference worker %s: %zu rows split, %zu parts",
			worker ? "on" : "off", d.n_split, n);
		check_parts(plan, &c, 2, worker ? "worker rows spread" : "worker rows whole");
		free(parts);
		parts = NULL;
	}
	/* one GPU: nothing to spread over */
	CHECK(mb_shard_assign(&parts, &n, &d, plan, &c, 1, &err) == 0);
	CHECK_MSG(d.n_split == 0 && n == 2, "one slot: %zu rows split, %zu parts", d.n_split, n);
	free(parts);
	unsetenv("MEGABENCH_REF_WORKER");
	mb_shard_costs_free(&c);
cleanup:
	mb_plan_free(plan);
	mb_suite_free(suite);
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

/* ---- costs learned from receipts ------------------------------------------ */

/* A receipt as the learning reads it: backend, run id, start time,
 * repetitions, goodput and cases (the plan's cases from `begin` on, every
 * `step`-th), each with wall_ns = (its index + 1) * `wall_ms` ms, or
 * without wall_ns (wall_ms 0) but with a timing. */
static json_t *receipt_of(const mb_plan *plan, const char *run_id, const char *started, size_t begin, size_t step,
	double wall_ms, int repetitions)
{
	json_t *cases = json_array();

	for (size_t i = begin; i < plan->n_cases; i += step) {
		json_t *c = mb_case_json_new(&plan->cases[i], "cpu");

		if (wall_ms > 0)
			json_object_set_new(c, "wall_ns", json_integer((json_int_t)((double)(i + 1) * wall_ms * 1e6)));
		json_object_set_new(c, "timing", json_pack("{s:I, s:f, s:i}", "sampling_ns", (json_int_t)(i + 1) * 1000000,
			"median_ns", 1000.0, "warmup_calls", 3));
		json_array_append_new(cases, c);
	}
	return json_pack("{s:s, s:s, s:s, s:{s:i}, s:{s:I, s:{s:I}}, s:o}", "backend", "cpu", "run_id", run_id,
		"started_at", started, "settings", "repetitions", repetitions, "goodput", "wall_ns", (json_int_t)(60 * NS_PER_S),
		"badput_ns", "ceilings", (json_int_t)(2 * NS_PER_S), "cases", cases);
}

static void test_learn(const mb_plan *plan, const mb_suite *suite)
{
	/* every other case measured in an old receipt; every fourth again,
	 * twice as long per pass but in two passes, in a newer one */
	json_t *old = receipt_of(plan, "old", "2026-11-01T00:00:00.000Z", 0, 2, 1.0, 1);
	json_t *newer = receipt_of(plan, "new", "2026-11-02T00:00:00.000Z", 0, 4, 4.0, 2);
	json_t *gpu = receipt_of(plan, "gpu", "2026-11-03T00:00:00.000Z", 0, 1, 1.0, 1);
	json_t *both[2] = {newer, old}, *one[1] = {gpu};
	const char *names[2] = {"new.json", "old.json"};
	double measured = 0, modeled = 0;
	mb_shard_costs c;
	mb_error err;

	mb_error_clear(&err);
	CHECK_MSG(mb_shard_costs_learn(&c, plan, suite, "cpu", both, names, 2, &err) == 0, "%s", err.text);
	for (size_t i = 0; i < plan->n_cases && c.case_s; i++) {
		/* (i + 1) ms from the old, 2 (i + 1) ms a pass from the new */
		double want = i % 4 == 0 ? 2e-3 * (double)(i + 1) : i % 2 == 0 ? 1e-3 * (double)(i + 1) : -1;

		if (want > 0) {
			CHECK_MSG(fabs(c.case_s[i] - want) < 1e-12 && c.source[i] == MB_SHARD_COST_MEASURED,
				"case %zu: %g s, expected %g", i, c.case_s[i], want);
			measured += c.case_s[i];
			modeled += mb_shard_case_cost_s(&plan->cases[i], &suite->settings, "cpu");
		}
	}
	CHECK(fabs(c.model_scale - measured / modeled) < 1e-9);
	for (size_t i = 1; i < plan->n_cases && c.case_s; i += 2)
		CHECK_MSG(c.source[i] == MB_SHARD_COST_MODEL && fabs(c.case_s[i] - c.model_scale
			* mb_shard_case_cost_s(&plan->cases[i], &suite->settings, "cpu")) < 1e-12, "case %zu: %g s", i, c.case_s[i]);
	CHECK(c.counts[MB_SHARD_COST_MEASURED] == (plan->n_cases + 1) / 2);
	CHECK(c.counts[MB_SHARD_COST_MODEL] == plan->n_cases / 2 && c.counts[MB_SHARD_COST_ESTIMATED] == 0);
	/* both named, oldest first, with the cases each gave */
	CHECK(json_array_size(c.receipts) == 2);
	CHECK(!strcmp(mb_text_get(json_array_get(c.receipts, 0), "path"), "old.json"));
	CHECK(json_integer_value(json_object_get(json_array_get(c.receipts, 0), "cases"))
		== (json_int_t)((plan->n_cases + 1) / 2 - (plan->n_cases + 3) / 4));
	CHECK(json_integer_value(json_object_get(json_array_get(c.receipts, 1), "cases")) == (json_int_t)((plan->n_cases + 3) / 4));
	mb_shard_costs_free(&c);

	/* a receipt of another backend says nothing of this one's */
	json_object_set_new(gpu, "backend", json_string("cuda"));
	CHECK(mb_shard_costs_learn(&c, plan, suite, "cpu", one, names, 1, &err) == MB_EINVAL);
	CHECK_MSG(strstr(err.where, "new.json") && strstr(err.text, "cuda"), "%s: %s", err.where, err.text);
	CHECK(c.case_s == NULL);
	json_decref(old);
	json_decref(newer);
	json_decref(gpu);
}

/* A receipt without wall_ns: each case gets its sampling and calls, and
 * the rest of the run's wall time (less the probe's ceilings) is spread
 * over its cases, so that they add up to it; the heavier a case's host
 * work, the larger its share. */
static void test_estimate(const mb_plan *plan, const mb_suite *suite)
{
	json_t *r = receipt_of(plan, "legacy", "2026-11-01T00:00:00.000Z", 0, 1, 0, 1);
	json_t *list[1] = {r};
	const char *names[1] = {"legacy.json"};
	double sum = 0;
	mb_shard_costs c;
	mb_error err;

	mb_error_clear(&err);
	CHECK_MSG(mb_shard_costs_learn(&c, plan, suite, "cpu", list, names, 1, &err) == 0, "%s", err.text);
	for (size_t i = 0; i < plan->n_cases && c.case_s; i++) {
		double own = (double)(i + 1) * 1e-3 + 5 * 1e-6;

		CHECK_MSG(c.source[i] == MB_SHARD_COST_ESTIMATED && c.case_s[i] >= own - 1e-12, "case %zu: %g s of its own %g",
			i, c.case_s[i], own);
		sum += c.case_s[i];
	}
	CHECK_MSG(fabs(sum - 58.0) < 1e-6, "the estimates add up to %g s, not the 58 s the run spent on cases", sum);
	CHECK(c.counts[MB_SHARD_COST_ESTIMATED] == plan->n_cases);
	mb_shard_costs_free(&c);
	json_decref(r);
}

/* The learned plan of a receipt with one dominant row balances to within
 * one case's cost, and says so in its shard_plan. */
static void test_learned_deal(const mb_plan *plan, const mb_suite *suite)
{
	json_t *r = receipt_of(plan, "dominant", "2026-11-01T00:00:00.000Z", 0, 1, 1.0, 1), *c, *doc;
	json_t *list[1] = {r};
	const char *names[1] = {"dominant.json"};
	mb_shard_costs costs;
	mb_shard_row *parts = NULL;
	mb_shard_deal_info d;
	size_t n = 0, i;
	mb_error err;

	json_array_foreach(json_object_get(r, "cases"), i, c)
		if (!strcmp(mb_text_get(c, "row"), "recurrent_scan"))
			json_object_set_new(c, "wall_ns", json_integer(5 * (json_int_t)NS_PER_S));
	mb_error_clear(&err);
	CHECK_MSG(mb_shard_costs_learn(&costs, plan, suite, "cpu", list, names, 1, &err) == 0, "%s", err.text);
	CHECK(check_parts(plan, &costs, 3, "recurrent_scan dominant, learned") == 1);
	CHECK(mb_shard_assign(&parts, &n, &d, plan, &costs, 3, &err) == 0);
	doc = mb_shard_plan_json(&costs, &d, parts, n, plan, 3);
	CHECK(!strcmp(mb_text_get(doc, "cost_model"), "learned"));
	CHECK(json_array_size(json_object_get(doc, "split_rows")) == 1
		&& !strcmp(json_string_value(json_array_get(json_object_get(doc, "split_rows"), 0)), "recurrent_scan"));
	CHECK(json_number_value(json_object_get(doc, "balance")) < 1 + d.largest_case_s * 3 / d.total_s + EPS);
	json_decref(doc);
	free(parts);
	mb_shard_costs_free(&costs);
	json_decref(r);
}

/* ---- the merge ---------------------------------------------------------------- */

/* A pass as the runner records it: a case object of the plan. */
static json_t *pass_of(const mb_case_plan *c)
{
	return mb_case_json_new(c, "cpu");
}

/* Slot 0 finished all its cases; slot 1's worker died after its first:
 * slot 0's cases are kept, slot 1's first too, the rest crashed with the
 * reason, every case names its slot, plan order holds. Interrupted (no
 * reason), the unfinished cases are left out. */
static void test_merge(const mb_plan *plan, const mb_suite *suite)
{
	const char *dead = "gpu1 (test): its worker (pid 1) was killed by signal 9 (Killed) before this case finished";
	const char *why[2] = {NULL, dead}, *none[2] = {NULL, NULL};
	int *slot = calloc(plan->n_cases, sizeof(*slot));
	json_t *passes = json_array(), *cases = NULL, *c;
	mb_shard_costs costs = model_costs(plan, suite);
	mb_shard_deal_info d;
	mb_shard_row *rows = NULL;
	size_t n_rows = 0, counts[2], want[2] = {0, 0}, first1 = plan->n_cases, i;
	mb_shard_merge_in in = {plan, "cpu", slot, passes, 2, why};
	mb_error err;

	CHECK(mb_shard_assign(&rows, &n_rows, &d, plan, &costs, 2, &err) == 0);
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
	mb_shard_costs_free(&costs);
	free(rows);
	free(slot);
}

/* Thread counts follow the process's affinity (a taskset or a cpuset
 * limits them), not the host's online cores. */
static void test_cpus_usable(void)
{
	cpu_set_t mine, one;
	int first = -1;

	CHECK(sched_getaffinity(0, sizeof(mine), &mine) == 0);
	CHECK(mb_cpus_usable() == CPU_COUNT(&mine));
	for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
		first = CPU_ISSET(c, &mine) ? c : -1;
	CPU_ZERO(&one);
	CPU_SET(first, &one);
	CHECK(sched_setaffinity(0, sizeof(one), &one) == 0);
	CHECK(mb_cpus_usable() == 1);
	CHECK(mb_ref_parallel_threads(100, 1.0) == 1);
	CHECK(sched_setaffinity(0, sizeof(mine), &mine) == 0);
	CHECK(mb_cpus_usable() == CPU_COUNT(&mine));
}

int main(void)
{
	mb_suite *suite = NULL, *modes_suite = NULL;
	mb_plan *plan, *modes_plan;

	test_lpt();
	test_lpt_bound();
	plan = smoke_plan(&suite, "cold", NULL);
	if (plan && plan->n_cases > 2) {
		test_assign(plan, suite);
		test_dominant_row(plan, suite, "mhc_sinkhorn");
		test_dominant_row(plan, suite, "rope_qk");
		test_lanes(plan, suite);
		test_row_start(plan, suite);
		test_cost(plan, &suite->settings);
		test_learn(plan, suite);
		test_estimate(plan, suite);
		test_learned_deal(plan, suite);
		test_merge(plan, suite);
	}
	modes_plan = smoke_plan(&modes_suite, "cold,hot,graph", NULL);
	if (modes_plan)
		test_random_costs(modes_plan, modes_suite);
	test_group_split();
	test_worker_rows_spread();
	test_cpus_usable();
	mb_plan_free(modes_plan);
	mb_suite_free(modes_suite);
	mb_plan_free(plan);
	mb_suite_free(suite);
	return mb_test_finish("test_shard");
}
