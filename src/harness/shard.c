/* Dealing a plan's rows to GPUs, and merging what the GPUs ran: the parts
 * of a sharded run (shard.h) that are plain computation. What the cases
 * cost is shard_costs.c's; the workers themselves are in shard_run.c. */
#include "harness/shard.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/case_record.h"
#include "harness/ref_cache.h"
#include "harness/repetitions.h"
#include "receipts/text.h"

/* Loads within this fraction of the bound meet it (floating-point sums). */
#define BOUND_SLACK 1e-9

/* ---- the deal ------------------------------------------------------------ */

typedef struct lpt_item {
	double cost;
	size_t index;
} lpt_item;

static int by_cost_down(const void *a, const void *b)
{
	const lpt_item *x = a, *y = b;

	if (x->cost != y->cost)
		return x->cost < y->cost ? 1 : -1;
	return x->index < y->index ? -1 : x->index > y->index;
}

void mb_shard_lpt(int *out_bin, double *out_load, const double *cost, size_t n, int n_bins)
{
	lpt_item *items = malloc((n ? n : 1) * sizeof(*items));

	for (int b = 0; b < n_bins; b++)
		out_load[b] = 0.0;
	if (!items) {
		/* no memory for the order: plan order is still a valid deal */
		for (size_t i = 0; i < n; i++) {
			out_bin[i] = (int)(i % (size_t)n_bins);
			out_load[out_bin[i]] += cost[i];
		}
		return;
	}
	for (size_t i = 0; i < n; i++)
		items[i] = (lpt_item){cost[i], i};
	qsort(items, n, sizeof(*items), by_cost_down);
	for (size_t k = 0; k < n; k++) {
		int least = 0;

		for (int b = 1; b < n_bins; b++)
			if (out_load[b] < out_load[least])
				least = b;
		out_bin[items[k].index] = least;
		out_load[least] += items[k].cost;
	}
	free(items);
}

/* What a unit of the deal is: a whole row, one shape group, one case. */
enum { UNIT_ROW, UNIT_GROUP, UNIT_CASE };

typedef struct unit {
	size_t begin, end;
	double cost;
	int level;
} unit;

/* The same shape group: row, dtype, family and shape (case_driver.c). */
static bool same_group(const mb_case_plan *a, const mb_case_plan *b)
{
	return a->row == b->row && a->dtype == b->dtype && !strcmp(a->family, b->family)
		&& !memcmp(a->axis, b->axis, sizeof(a->axis));
}

static double span_cost(const mb_shard_costs *costs, size_t begin, size_t end)
{
	double sum = 0;

	for (size_t i = begin; i < end; i++)
		sum += costs->case_s[i];
	return sum;
}

/* How many pieces a unit splits into: its shape groups (a row of
 * several, *by_group), else its cases. */
static size_t pieces(const unit *u, const mb_plan *plan, bool *by_group)
{
	size_t count = 0;

	*by_group = u->level == UNIT_ROW && !same_group(&plan->cases[u->begin], &plan->cases[u->end - 1]);
	for (size_t i = u->begin; i < u->end; count++) {
		size_t j = i + 1;

		while (*by_group && j < u->end && same_group(&plan->cases[i], &plan->cases[j]))
			j++;
		i = j;
	}
	return count;
}

/* Replace units[at] (of n, with room for its pieces) by its pieces, in
 * plan order; returns the new count. */
static size_t split_unit(unit *units, size_t n, size_t at, const mb_plan *plan, const mb_shard_costs *costs)
{
	unit u = units[at];
	bool by_group;
	size_t count = pieces(&u, plan, &by_group), k = 0;

	memmove(&units[at + count], &units[at + 1], (n - at - 1) * sizeof(*units));
	for (size_t i = u.begin; i < u.end; k++) {
		size_t j = i + 1;

		while (by_group && j < u.end && same_group(&plan->cases[i], &plan->cases[j]))
			j++;
		/* a piece that does not start its row may need a row child of
		 * its own, on another GPU */
		bool starts_row = i == 0 || plan->cases[i - 1].row != plan->cases[i].row;
		units[at + k] = (unit){i, j, span_cost(costs, i, j) + (starts_row ? 0 : costs->row_start_s),
			by_group ? UNIT_GROUP : UNIT_CASE};
		i = j;
	}
	return n - 1 + count;
}

/* Which unit of the most loaded bin to split: its costliest row of
 * several groups, else its costliest unit of several cases; n when none. */
static size_t unit_to_split(const unit *units, size_t n, const int *bin, int most, const mb_plan *plan)
{
	size_t pick = n;

	for (int pass = 0; pass < 2 && pick == n; pass++)
		for (size_t i = 0; i < n; i++) {
			bool by_group, fits = bin[i] == most && units[i].end - units[i].begin > 1;

			if (fits && pass == 0)
				fits = pieces(&units[i], plan, &by_group) > 1 && by_group;
			if (fits && (pick == n || units[i].cost > units[pick].cost))
				pick = i;
		}
	return pick;
}

/* Split every row of several groups whose references a reference worker
 * computes (shard.h); returns the new count. */
static size_t spread_worker_rows(unit *units, size_t n, const mb_plan *plan, const mb_shard_costs *costs)
{
	for (size_t at = n; at-- > 0;) {
		bool by_group;

		if (mb_ref_worker_wants_any(plan, units[at].begin, units[at].end)
			&& pieces(&units[at], plan, &by_group) > 1 && by_group)
			n = split_unit(units, n, at, plan, costs);
	}
	return n;
}

/* Deal the units (and the lanes, as items n, n + 1, ...) by LPT into
 * bin[] and d->load_s, the lanes' slots into d. Returns the most loaded
 * slot. */
static int deal(int *bin, mb_shard_deal_info *d, double *cost, const unit *units, size_t n,
	const mb_shard_costs *costs, int n_slots)
{
	int most = 0, least = 0;

	for (size_t i = 0; i < n; i++)
		cost[i] = units[i].cost;
	for (size_t l = 0; l < costs->n_lanes; l++)
		cost[n + l] = costs->lane_s[l];
	mb_shard_lpt(bin, d->load_s, cost, n + costs->n_lanes, n_slots);
	for (int b = 1; b < n_slots; b++) {
		most = d->load_s[b] > d->load_s[most] ? b : most;
		least = d->load_s[b] < d->load_s[least] ? b : least;
	}
	for (size_t l = 0; l < costs->n_lanes; l++)
		d->lane_slot[l] = bin[n + l];
	/* without lanes to deal (the cpu backend skips them) the slot that
	 * ends first is told about them */
	d->lanes_slot = costs->n_lanes ? d->lane_slot[0] : least;
	return most;
}

/* The parts: adjacent units of one row on one slot are one part; a row
 * is split when its parts are on more than one slot. Returns their count
 * (at most n) and the split rows' in *n_split. */
static size_t make_parts(mb_shard_row *out, size_t *n_split, const unit *units, size_t n, const int *bin,
	const mb_plan *plan)
{
	size_t m = 0;

	for (size_t i = 0; i < n; i++) {
		mb_shard_row *last = m > 0 ? &out[m - 1] : NULL;

		/* a row is a maximal run of one row's cases, so adjacent units
		 * of the same row are pieces of one row */
		if (last && last->slot == bin[i] && plan->cases[last->begin].row == plan->cases[units[i].begin].row) {
			last->end = units[i].end;
			last->cost_s += units[i].cost;
		} else {
			out[m++] = (mb_shard_row){units[i].begin, units[i].end, units[i].cost, bin[i], false};
		}
	}
	*n_split = 0;
	for (size_t a = 0, b; a < m; a = b) {
		bool split = false;

		for (b = a + 1; b < m && plan->cases[out[b].begin].row == plan->cases[out[a].begin].row; b++)
			split = true;
		for (size_t k = a; k < b; k++)
			out[k].split = split;
		*n_split += split;
	}
	return m;
}

int mb_shard_assign(mb_shard_row **out, size_t *out_n, mb_shard_deal_info *info, const mb_plan *plan,
	const mb_shard_costs *costs, int n_slots, mb_error *err)
{
	size_t cap = plan->n_cases + MB_SHARD_MAX_LANES + 2, n = 0;
	unit *units = NULL;
	double *cost = NULL;
	int *bin = NULL, most;
	mb_shard_row *parts = NULL;
	int rc = 0;

	*out = NULL;
	*out_n = 0;
	memset(info, 0, sizeof(*info));
	if (n_slots < 1 || n_slots > MB_SHARD_MAX_GPUS)
		return mb_error_set(err, MB_EINVAL, "--gpus", "%d GPUs: between 1 and %d can share a run", n_slots,
			MB_SHARD_MAX_GPUS);
	if (costs->n_cases != plan->n_cases || costs->n_lanes > MB_SHARD_MAX_LANES)
		return mb_error_set(err, MB_EINVAL, "--gpus", "costs for %zu cases and %zu lanes, the plan has %zu cases",
			costs->n_cases, costs->n_lanes, plan->n_cases);
	units = calloc(cap, sizeof(*units));
	cost = calloc(cap, sizeof(*cost));
	bin = calloc(cap, sizeof(*bin));
	parts = calloc(cap, sizeof(*parts));
	if (!units || !cost || !bin || !parts) {
		rc = mb_error_set(err, MB_ENOMEM, "--gpus", "out of memory dealing %zu cases", plan->n_cases);
		goto cleanup;
	}
	/* the rows as the runner forks them: runs of cases of one row */
	for (size_t begin = 0, end; begin < plan->n_cases; begin = end) {
		for (end = begin + 1; end < plan->n_cases && plan->cases[end].row == plan->cases[begin].row; end++)
			;
		units[n++] = (unit){begin, end, span_cost(costs, begin, end), UNIT_ROW};
	}
	if (n_slots > 1 && costs->ref_worker)
		n = spread_worker_rows(units, n, plan, costs);
	/* one case, with the child a split part of its row may need */
	for (size_t i = 0; i < plan->n_cases; i++)
		info->largest_case_s = fmax(info->largest_case_s, costs->case_s[i] + costs->row_start_s);
	/* split until the most loaded slot meets the bound: it does once every
	 * unit on it is one case (Graham), unless lanes crowd it; it ends
	 * either way, since every split makes a unit more */
	for (;;) {
		size_t at;

		most = deal(bin, info, cost, units, n, costs, n_slots);
		info->total_s = costs->lanes_s;
		for (size_t i = 0; i < n; i++)
			info->total_s += units[i].cost;
		info->bound_s = info->total_s / n_slots + info->largest_case_s;
		for (size_t l = 0; l < costs->n_lanes; l++)
			info->bound_s = fmax(info->bound_s, costs->lane_s[l]);
		if (info->load_s[most] <= info->bound_s * (1 + BOUND_SLACK))
			break;
		if ((at = unit_to_split(units, n, bin, most, plan)) == n)
			break;
		n = split_unit(units, n, at, plan, costs);
	}
	*out_n = make_parts(parts, &info->n_split, units, n, bin, plan);
	*out = parts;
	parts = NULL;
cleanup:
	free(units);
	free(cost);
	free(bin);
	free(parts);
	return rc;
}

/* The parts of one row are adjacent (a row is a maximal run of its
 * cases): the first and the end of the run parts[at] is in. */
static void row_run(size_t *first, size_t *end, const mb_shard_row *parts, size_t n, size_t at, const mb_plan *plan)
{
	const mb_row *row = plan->cases[parts[at].begin].row;

	*first = at;
	*end = at + 1;
	while (*first > 0 && plan->cases[parts[*first - 1].begin].row == row)
		(*first)--;
	while (*end < n && plan->cases[parts[*end].begin].row == row)
		(*end)++;
}

json_t *mb_shard_slot_rows(const mb_shard_row *parts, size_t n, const mb_plan *plan, int slot)
{
	json_t *rows = json_array(), *last = NULL;
	size_t last_first = n;

	for (size_t i = 0; rows && i < n; i++) {
		json_int_t cases = (json_int_t)(parts[i].end - parts[i].begin);
		size_t first, end;

		if (parts[i].slot != slot)
			continue;
		row_run(&first, &end, parts, n, i, plan);
		if (last && first == last_first) {
			json_object_set_new(last, "cases", json_integer(json_integer_value(json_object_get(last, "cases")) + cases));
			continue;
		}
		last = json_pack("{s:s, s:I, s:I}", "row", plan->cases[parts[i].begin].row->name, "cases", cases, "of",
			(json_int_t)(parts[end - 1].end - parts[first].begin));
		last_first = first;
		if (!last || json_array_append_new(rows, last)) {
			json_decref(rows);
			return NULL;
		}
	}
	return rows;
}

void mb_shard_slot_text(char *buf, size_t len, const json_t *rows)
{
	const json_t *r;
	size_t i;

	buf[0] = '\0';
	json_array_foreach(rows, i, r) {
		json_int_t cases = json_integer_value(json_object_get(r, "cases"));
		json_int_t of = json_integer_value(json_object_get(r, "of"));

		mb_text_appendf(buf, len, "%s%s (%lld", i ? ", " : "", mb_text_get(r, "row"), (long long)cases);
		if (of != cases)
			mb_text_appendf(buf, len, " of %lld", (long long)of);
		mb_text_appendf(buf, len, ")");
	}
}

void mb_shard_slot_lanes_text(char *buf, size_t len, const mb_shard_costs *c, const mb_shard_deal_info *d, int slot)
{
	size_t n = 0;

	buf[0] = '\0';
	for (size_t l = 0; l < c->n_lanes; l++)
		n += d->lane_slot[l] == slot;
	for (size_t l = 0, k = 0; l < c->n_lanes; l++)
		if (d->lane_slot[l] == slot)
			mb_text_appendf(buf, len, "%s%s", k++ ? ", " : n == 1 ? "lane " : "lanes ", c->lane_name[l]);
}

json_t *mb_shard_slot_lanes(const mb_shard_costs *c, const mb_shard_deal_info *d, int slot)
{
	json_t *names = json_array();

	for (size_t l = 0; names && l < c->n_lanes; l++)
		if (d->lane_slot[l] == slot && json_array_append_new(names, json_string(c->lane_name[l]))) {
			json_decref(names);
			return NULL;
		}
	return names;
}

double mb_shard_balance(const mb_shard_deal_info *d, int n_slots)
{
	double sum = 0, most = 0;

	for (int k = 0; k < n_slots; k++) {
		sum += d->load_s[k];
		most = fmax(most, d->load_s[k]);
	}
	return sum > 0 ? most * n_slots / sum : 1.0;
}

void mb_shard_deal_describe(char *buf, size_t len, const mb_shard_deal_info *d, int n_slots)
{
	double most = 0, mean = d->total_s / n_slots;

	for (int k = 0; k < n_slots; k++)
		most = fmax(most, d->load_s[k]);
	buf[0] = '\0';
	mb_text_appendf(buf, len, "the most loaded GPU about %.1f s, %.3f x the mean (%.1f s); the bound %.1f s (", most,
		mb_shard_balance(d, n_slots), mean, d->bound_s);
	if (d->bound_s > mean + d->largest_case_s)
		mb_text_appendf(buf, len, "the longest lane, which one GPU runs)");
	else
		mb_text_appendf(buf, len, "the mean plus the largest case, %.1f s)", d->largest_case_s);
}

json_t *mb_shard_plan_json(const mb_shard_costs *c, const mb_shard_deal_info *d, const mb_shard_row *parts,
	size_t n, const mb_plan *plan, int n_slots)
{
	bool learned = c->counts[MB_SHARD_COST_MEASURED] + c->counts[MB_SHARD_COST_ESTIMATED] + c->lanes_measured > 0;
	json_t *split = json_array();

	for (size_t i = 0; split && i < n; i++)
		if (parts[i].split && (i == 0 || plan->cases[parts[i - 1].begin].row != plan->cases[parts[i].begin].row))
			json_array_append_new(split, json_string(plan->cases[parts[i].begin].row->name));
	return json_pack("{s:s, s:O, s:{s:I, s:I, s:I}, s:f, s:f, s:f, s:f, s:f, s:f, s:o}",
		"cost_model", learned ? "learned" : "bytes", "receipts", c->receipts,
		"cases", "measured", (json_int_t)c->counts[MB_SHARD_COST_MEASURED], "estimated",
		(json_int_t)c->counts[MB_SHARD_COST_ESTIMATED], "modeled", (json_int_t)c->counts[MB_SHARD_COST_MODEL],
		"model_scale", c->model_scale, "lanes_s", c->lanes_s, "total_s", d->total_s,
		"largest_case_s", d->largest_case_s, "bound_s", d->bound_s, "balance", mb_shard_balance(d, n_slots),
		"split_rows", split);
}

int mb_shard_merge(json_t **out, size_t *out_counts, const mb_shard_merge_in *in, mb_error *err)
{
	json_t *cases = json_array();
	int rc = 0;

	*out = NULL;
	for (int k = 0; k < in->n_slots; k++)
		out_counts[k] = 0;
	for (size_t i = 0; i < in->plan->n_cases && rc == 0; i++) {
		const json_t *passes = json_array_get(in->passes, i);
		json_t *list[MB_MAX_REPETITIONS], *c = NULL;
		size_t n = json_array_size(passes);
		int slot = in->slot_of_case[i];

		if (n > MB_MAX_REPETITIONS)
			n = MB_MAX_REPETITIONS;
		for (size_t k = 0; k < n; k++)
			list[k] = json_array_get(passes, k);
		if (n > 0) {
			c = mb_case_merge_repetitions(list, n);
		} else if (in->lost_why[slot]) {
			c = mb_case_json_new(&in->plan->cases[i], in->backend);
			if (c)
				mb_case_json_set_status(c, "crashed", in->lost_why[slot]);
		} else {
			continue;
		}
		if (!c || json_object_set_new(c, "gpu", json_integer(slot)) || json_array_append_new(cases, c))
			rc = mb_error_set(err, MB_ENOMEM, in->plan->cases[i].id, "out of memory merging the GPUs' cases");
		else
			out_counts[slot]++;
	}
	if (rc)
		json_decref(cases);
	else
		*out = cases;
	return rc;
}
