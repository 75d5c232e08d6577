/* Dealing a plan's rows to GPUs, and merging what the GPUs ran: the parts
 * of a sharded run (shard.h) that are plain computation. The workers
 * themselves are in shard_run.c. */
#include "harness/shard.h"

#include <stdlib.h>
#include <string.h>

#include "harness/case_common.h"
#include "harness/repetitions.h"

/* What a case costs besides its calls: a child's messages, the group's
 * poisoning and comparison, the case object. */
#define CASE_FIXED_S 0.05
/* Bytes per second a call of the row's bytes model moves: about half of
 * an HBM3 GPU's peak (the fallbacks move more than the model), and what
 * one core's fp32 reference moves on the cpu backend. */
#define CUDA_BYTES_PER_S 2e12
#define CPU_BYTES_PER_S 5e9
/* The two checked calls of every case (first and last check). */
#define CHECKED_CALLS 2

double mb_shard_case_cost_s(const mb_case_plan *c, const mb_settings *s, const char *backend)
{
	double bytes_per_s = strcmp(backend, "cpu") == 0 ? CPU_BYTES_PER_S : CUDA_BYTES_PER_S;
	double call_s, sampling_s;

	/* a row across GPUs is planned as skipped by `run` (catalog.h) */
	if (c->row->min_gpus > 1)
		return CASE_FIXED_S;
	call_s = (double)c->row->bytes(c->axis, c->dtype) / bytes_per_s;
	sampling_s = s->min_samples * call_s;
	if (sampling_s < s->min_time_s)
		sampling_s = s->min_time_s;
	if (sampling_s > s->timeout_s)
		sampling_s = s->timeout_s;
	return CASE_FIXED_S + (s->warmup + CHECKED_CALLS) * call_s + sampling_s;
}

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

int mb_shard_assign(mb_shard_row **out, size_t *out_n, double *out_load, const mb_plan *plan,
	const mb_settings *s, const char *backend, int n_slots, mb_error *err)
{
	mb_shard_row *rows = NULL;
	double *cost = NULL;
	int *slot = NULL;
	size_t n = 0;
	int rc = 0;

	*out = NULL;
	*out_n = 0;
	if (n_slots < 1 || n_slots > MB_SHARD_MAX_GPUS)
		return mb_error_set(err, MB_EINVAL, "--gpus", "%d GPUs: between 1 and %d can share a run", n_slots,
			MB_SHARD_MAX_GPUS);
	rows = calloc(plan->n_cases + 1, sizeof(*rows));
	cost = calloc(plan->n_cases + 1, sizeof(*cost));
	slot = calloc(plan->n_cases + 1, sizeof(*slot));
	if (!rows || !cost || !slot) {
		rc = mb_error_set(err, MB_ENOMEM, "--gpus", "out of memory dealing %zu cases", plan->n_cases);
		goto cleanup;
	}
	/* the rows as the runner forks them: runs of cases of one row */
	for (size_t begin = 0; begin < plan->n_cases; n++) {
		size_t end = begin;

		rows[n].begin = begin;
		while (end < plan->n_cases && plan->cases[end].row == plan->cases[begin].row)
			rows[n].cost_s += mb_shard_case_cost_s(&plan->cases[end++], s, backend);
		rows[n].end = end;
		cost[n] = rows[n].cost_s;
		begin = end;
	}
	mb_shard_lpt(slot, out_load, cost, n, n_slots);
	for (size_t i = 0; i < n; i++)
		rows[i].slot = slot[i];
	*out = rows;
	*out_n = n;
	rows = NULL;
cleanup:
	free(rows);
	free(cost);
	free(slot);
	return rc;
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
