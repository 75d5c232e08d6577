/* What each case of a sharded run costs (shard.h): the bytes model, the
 * costs learned from receipts, and finding those receipts (`run --costs`
 * files and folders, --save-to's store). */
#include "harness/shard.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness/lane.h"
#include "harness/ref_cache.h"
#include "receipts/receipt_group.h"
#include "receipts/receipt_io.h"
#include "receipts/text.h"

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
/* A row child's start on a GPU: its context and modules (context_load
 * over the row children of the committed H200 receipts: 0.27 to 0.35 s a
 * row); a fork on the cpu backend, next to nothing. */
#define CUDA_ROW_START_S 0.3
#define CPU_ROW_START_S 0.0
/* The host's pace at a case's host work, for spreading the unexplained
 * wall time of a receipt without per-case wall times: the fp32 reference
 * on a few cores, and input rows made, poisoned, read back and compared.
 * Only their ratio matters (a weight, not a time). */
#define HOST_FLOPS_PER_S 1e11
#define HOST_BYTES_PER_S 1e9
#define NS_PER_S 1e9

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

/* ---- the costs ----------------------------------------------------------- */

void mb_shard_costs_free(mb_shard_costs *c)
{
	if (!c)
		return;
	free(c->case_s);
	free(c->source);
	json_decref(c->receipts);
	json_decref(c->notes);
	memset(c, 0, sizeof(*c));
}

static int costs_alloc(mb_shard_costs *out, const mb_plan *plan, const char *backend, mb_error *err)
{
	memset(out, 0, sizeof(*out));
	out->row_start_s = strcmp(backend, "cpu") == 0 ? CPU_ROW_START_S : CUDA_ROW_START_S;
	/* the cuda backend overlaps host work with the device's (backend.h) */
	out->ref_worker = mb_ref_worker_enabled(strcmp(backend, "cuda") == 0);
	out->n_cases = plan->n_cases;
	out->case_s = calloc(plan->n_cases + 1, sizeof(*out->case_s));
	out->source = calloc(plan->n_cases + 1, sizeof(*out->source));
	out->receipts = json_array();
	out->model_scale = 1.0;
	if (!out->case_s || !out->source || !out->receipts) {
		mb_shard_costs_free(out);
		return mb_error_set(err, MB_ENOMEM, "--gpus", "out of memory costing %zu cases", plan->n_cases);
	}
	return 0;
}

/* Case i by the bytes model, and the first case of a row its child's
 * start, as a row child's first case measures it. */
static double bytes_model_s(const mb_shard_costs *c, const mb_plan *plan, size_t i, const mb_settings *s,
	const char *backend)
{
	bool starts_row = i == 0 || plan->cases[i - 1].row != plan->cases[i].row;

	return mb_shard_case_cost_s(&plan->cases[i], s, backend) + (starts_row ? c->row_start_s : 0);
}

/* The suite's lanes and their budgets: the cost of a lane no receipt
 * timed. Lanes run on the cuda backend only. */
static int lanes_of(mb_lane_spec **out, size_t *n, const mb_suite *suite, const char *backend, mb_error *err)
{
	int rc;

	*out = NULL;
	*n = 0;
	if (strcmp(backend, "cuda") != 0)
		return 0;
	if ((rc = mb_lanes_from_suite(out, n, suite, err)) == 0 && *n > MB_SHARD_MAX_LANES) {
		rc = mb_error_set(err, MB_EINVAL, suite->path, "lanes: %zu lanes; a run over GPUs deals at most %d",
			*n, MB_SHARD_MAX_LANES);
		free(*out);
		*out = NULL;
		*n = 0;
	}
	return rc;
}

/* Lane l: its name, and its cost; the sum kept. */
static void set_lane(mb_shard_costs *out, size_t l, const mb_lane_spec *lane, double cost_s)
{
	snprintf(out->lane_name[l], sizeof(out->lane_name[l]), "%s", lane->name);
	out->lane_s[l] = cost_s;
	out->lanes_s += cost_s;
}

int mb_shard_costs_model(mb_shard_costs *out, const mb_plan *plan, const mb_suite *suite, const char *backend,
	mb_error *err)
{
	mb_lane_spec *lanes = NULL;
	size_t n_lanes = 0;
	int rc = costs_alloc(out, plan, backend, err);

	if (rc)
		return rc;
	for (size_t i = 0; i < plan->n_cases; i++)
		out->case_s[i] = bytes_model_s(out, plan, i, &suite->settings, backend);
	out->counts[MB_SHARD_COST_MODEL] = plan->n_cases;
	if ((rc = lanes_of(&lanes, &n_lanes, suite, backend, err))) {
		mb_shard_costs_free(out);
		return rc;
	}
	for (size_t l = 0; l < n_lanes; l++)
		set_lane(out, l, &lanes[l], lanes[l].budget_s);
	out->n_lanes = n_lanes;
	free(lanes);
	return 0;
}

/* A receipt case's host work by the model (a weight): its row's
 * reference FLOPs and bytes at its shape and dtype, as the catalog built
 * here has them; a case of a row or shape it cannot take weighs the fixed
 * cost alone. */
static double host_weight(const json_t *c)
{
	const mb_row *row = mb_catalog_find(mb_text_get(c, "row"));
	const json_t *shape = json_object_get(c, "shape");
	int64_t axis[MB_MAX_AXES] = {0};
	mb_dtype dtype;

	if (!row || mb_dtype_parse(mb_text_get(c, "dtype"), &dtype))
		return CASE_FIXED_S;
	for (int k = 0; k < row->n_axes; k++) {
		json_int_t v = json_integer_value(json_object_get(shape, row->axes[k]));
		if (v < 1)
			return CASE_FIXED_S;
		axis[k] = v;
	}
	if (row->check_shape && row->check_shape(axis, NULL))
		return CASE_FIXED_S;
	return CASE_FIXED_S + (double)row->flops(axis) / HOST_FLOPS_PER_S
		+ (double)row->bytes(axis, dtype) / HOST_BYTES_PER_S;
}

/* What a case of a receipt without wall_ns measured of itself: its
 * sampling, and its warm-up and checked calls at its median. */
static double own_ns(const json_t *c)
{
	const json_t *t = json_object_get(c, "timing");
	double median = json_number_value(json_object_get(t, "median_ns"));
	json_int_t warmup = json_integer_value(json_object_get(t, "warmup_calls"));

	return (double)json_integer_value(json_object_get(t, "sampling_ns")) + (double)(warmup + CHECKED_CALLS) * median;
}

/* The share of a receipt's wall time that its cases without wall_ns do
 * not explain themselves (see shard.h), and their weights' sum. */
static void unexplained(double *out_ns, double *out_weight, const json_t *r)
{
	const json_t *goodput = json_object_get(r, "goodput"), *c, *lane;
	double rest = (double)json_integer_value(json_object_get(goodput, "wall_ns"))
		- (double)json_integer_value(json_object_get(json_object_get(goodput, "badput_ns"), "ceilings"));
	size_t i;

	*out_weight = 0;
	json_array_foreach(json_object_get(r, "cases"), i, c) {
		if (json_is_integer(json_object_get(c, "wall_ns"))) {
			rest -= (double)json_integer_value(json_object_get(c, "wall_ns"));
		} else {
			rest -= own_ns(c);
			*out_weight += host_weight(c);
		}
	}
	json_array_foreach(json_object_get(r, "lanes"), i, lane)
		rest -= json_is_number(json_object_get(lane, "wall_ns")) ? json_number_value(json_object_get(lane, "wall_ns"))
			: json_number_value(json_object_get(lane, "budget_s")) * NS_PER_S;
	*out_ns = rest > 0 ? rest : 0;
}

/* Passes each case of the receipt ran (--repetitions). */
static double passes_of(const json_t *r)
{
	json_int_t reps = json_integer_value(json_object_get(json_object_get(r, "settings"), "repetitions"));

	return reps > 1 ? (double)reps : 1.0;
}

/* Index the plan's case ids: id -> plan index. */
static json_t *plan_index(const mb_plan *plan)
{
	json_t *ids = json_object();

	for (size_t i = 0; ids && i < plan->n_cases; i++)
		if (!json_object_get(ids, plan->cases[i].id) && json_object_set_new(ids, plan->cases[i].id, json_integer((json_int_t)i))) {
			json_decref(ids);
			return NULL;
		}
	return ids;
}

/* Every case of the plan that receipt `r` has, costed from it (later
 * receipts overwrite earlier ones); given[i] records which receipt. */
static void learn_receipt(mb_shard_costs *out, int *given, int which, const json_t *r, const json_t *ids)
{
	double rest_ns, weight, passes = passes_of(r);
	const json_t *c;
	size_t i;

	unexplained(&rest_ns, &weight, r);
	json_array_foreach(json_object_get(r, "cases"), i, c) {
		const json_t *at = json_object_get(ids, mb_text_get(c, "id"));
		const json_t *wall = json_object_get(c, "wall_ns");
		size_t k;

		if (!at)
			continue;
		k = (size_t)json_integer_value(at);
		if (json_is_integer(wall)) {
			out->case_s[k] = (double)json_integer_value(wall) / NS_PER_S / passes;
			out->source[k] = MB_SHARD_COST_MEASURED;
		} else {
			double share = weight > 0 ? rest_ns * host_weight(c) / weight : 0;
			out->case_s[k] = (own_ns(c) + share) / NS_PER_S / passes;
			out->source[k] = MB_SHARD_COST_ESTIMATED;
		}
		given[k] = which;
	}
}

/* Each lane's cost: the newest receipt's wall time of a lane of its name,
 * else its budget. */
static void learn_lanes(mb_shard_costs *out, const mb_lane_spec *lanes, size_t n_lanes, json_t *const *receipts,
	const size_t *order, size_t n, int *lane_given)
{
	for (size_t l = 0; l < n_lanes; l++) {
		double cost = lanes[l].budget_s;

		lane_given[l] = -1;
		for (size_t o = 0; o < n; o++) {
			const json_t *lane;
			size_t j;

			json_array_foreach(json_object_get(receipts[order[o]], "lanes"), j, lane)
				if (!strcmp(mb_text_get(lane, "name"), lanes[l].name)
					&& json_is_number(json_object_get(lane, "wall_ns"))) {
					cost = json_number_value(json_object_get(lane, "wall_ns")) / NS_PER_S;
					lane_given[l] = (int)order[o];
				}
		}
		set_lane(out, l, &lanes[l], cost);
		out->lanes_measured += lane_given[l] >= 0;
	}
	out->n_lanes = n_lanes;
}

/* The bytes model, scaled to the measured cases' pace, for the rest. */
static void model_the_rest(mb_shard_costs *out, const mb_plan *plan, const mb_settings *s, const char *backend)
{
	double measured = 0, modeled = 0;

	for (size_t i = 0; i < plan->n_cases; i++)
		if (out->source[i] != MB_SHARD_COST_MODEL) {
			measured += out->case_s[i];
			modeled += bytes_model_s(out, plan, i, s, backend);
		}
	out->model_scale = measured > 0 && modeled > 0 ? measured / modeled : 1.0;
	for (size_t i = 0; i < plan->n_cases; i++) {
		if (out->source[i] == MB_SHARD_COST_MODEL)
			out->case_s[i] = out->model_scale * bytes_model_s(out, plan, i, s, backend);
		out->counts[out->source[i]]++;
	}
}

int mb_shard_costs_learn(mb_shard_costs *out, const mb_plan *plan, const mb_suite *suite, const char *backend,
	json_t *const *receipts, const char *const *names, size_t n, mb_error *err)
{
	size_t *order = NULL, *gave = NULL;
	int *given = NULL, *lane_given = NULL;
	mb_lane_spec *lanes = NULL;
	size_t n_lanes = 0;
	json_t *ids = NULL;
	int rc;

	if ((rc = costs_alloc(out, plan, backend, err)))
		return rc;
	for (size_t i = 0; i < n; i++)
		if (strcmp(mb_text_get(receipts[i], "backend"), backend)) {
			rc = mb_error_set(err, MB_EINVAL, names[i], "backend: a receipt of the %s backend, whose times say "
				"nothing of a %s run's", mb_text_get(receipts[i], "backend"), backend);
			goto cleanup;
		}
	if ((rc = lanes_of(&lanes, &n_lanes, suite, backend, err)))
		goto cleanup;
	order = calloc(n + 1, sizeof(*order));
	gave = calloc(n + 1, sizeof(*gave));
	given = malloc((plan->n_cases + 1) * sizeof(*given));
	lane_given = calloc(n_lanes + 1, sizeof(*lane_given));
	ids = plan_index(plan);
	if (!order || !gave || !given || !lane_given || !ids) {
		rc = mb_error_set(err, MB_ENOMEM, "--costs", "out of memory learning from %zu receipts", n);
		goto cleanup;
	}
	for (size_t i = 0; i < plan->n_cases; i++)
		given[i] = -1;
	/* oldest first: a newer receipt's figure replaces an older one's */
	mb_receipt_order(order, receipts, n);
	for (size_t o = 0; o < n; o++)
		learn_receipt(out, given, (int)order[o], receipts[order[o]], ids);
	learn_lanes(out, lanes, n_lanes, receipts, order, n, lane_given);
	model_the_rest(out, plan, &suite->settings, backend);
	for (size_t i = 0; i < plan->n_cases; i++)
		if (given[i] >= 0)
			gave[given[i]]++;
	/* the receipts that gave a case or a lane, oldest first */
	for (size_t o = 0; o < n; o++) {
		size_t k = order[o];
		bool lanes_from = false;

		for (size_t l = 0; l < n_lanes; l++)
			lanes_from |= lane_given[l] == (int)k;
		if ((gave[k] || lanes_from) && json_array_append_new(out->receipts, json_pack("{s:s, s:s, s:I}", "path",
			names[k], "run_id", mb_text_get(receipts[k], "run_id"), "cases", (json_int_t)gave[k]))) {
			rc = mb_error_set(err, MB_ENOMEM, "--costs", "out of memory");
			goto cleanup;
		}
	}
cleanup:
	if (rc)
		mb_shard_costs_free(out);
	free(order);
	free(gave);
	free(given);
	free(lane_given);
	free(lanes);
	json_decref(ids);
	return rc;
}

void mb_shard_costs_describe(char *buf, size_t len, const mb_shard_costs *c)
{
	size_t learned = c->counts[MB_SHARD_COST_MEASURED] + c->counts[MB_SHARD_COST_ESTIMATED];
	size_t n_receipts = json_array_size(c->receipts), shown = 0, i;
	const json_t *r;

	buf[0] = '\0';
	if (learned == 0 && c->lanes_measured == 0) {
		mb_text_appendf(buf, len, "the bytes model (no receipt to learn from): %zu cases", c->n_cases);
	} else {
		mb_text_appendf(buf, len, "learned from %zu receipt%s (", n_receipts, n_receipts == 1 ? "" : "s");
		json_array_foreach(c->receipts, i, r) {
			/* newest last: name the newest few */
			if (i + 3 < n_receipts)
				continue;
			mb_text_appendf(buf, len, "%s%s", shown++ ? ", " : "", mb_text_get(r, "path"));
		}
		mb_text_appendf(buf, len, "%s): %zu cases measured (wall_ns), %zu estimated from receipts without it, "
			"%zu by the bytes model", n_receipts > shown ? ", ..." : "", c->counts[MB_SHARD_COST_MEASURED],
			c->counts[MB_SHARD_COST_ESTIMATED], c->counts[MB_SHARD_COST_MODEL]);
		if (c->counts[MB_SHARD_COST_MODEL])
			mb_text_appendf(buf, len, " scaled to them (x%.3g)", c->model_scale);
	}
	if (c->n_lanes)
		mb_text_appendf(buf, len, "; %zu lane%s %.1f s (%zu timed, the rest by budget_s)", c->n_lanes,
			c->n_lanes == 1 ? "" : "s", c->lanes_s, c->lanes_measured);
}

/* ---- the receipts to learn from -------------------------------------------- */

#define NOTE_BYTES 1024
/* How many of a store's newest receipts of the suite are tried before the
 * bytes model is taken: a store of nightlies holds hundreds. */
#define STORE_TRIES 8

typedef struct found {
	json_t *receipts[MB_SHARD_MAX_RECEIPTS];
	char *names[MB_SHARD_MAX_RECEIPTS];
	size_t n;
	json_t *notes;
} found;

static void note(found *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(found *f, const char *fmt, ...)
{
	char text[NOTE_BYTES];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	json_array_append_new(f->notes, json_string(text));
}

static int keep(found *f, json_t *receipt, const char *path, mb_error *err)
{
	if (f->n == MB_SHARD_MAX_RECEIPTS) {
		json_decref(receipt);
		return mb_error_set(err, MB_EINVAL, path, "more than %d receipts to learn costs from",
			MB_SHARD_MAX_RECEIPTS);
	}
	f->names[f->n] = strdup(path);
	if (!f->names[f->n]) {
		json_decref(receipt);
		return mb_error_set(err, MB_ENOMEM, path, "out of memory");
	}
	f->receipts[f->n++] = receipt;
	return 0;
}

/* Every receipt of `backend` in the folder; the rest named in notes. */
static int from_folder(found *f, const char *dir, const char *backend, mb_error *err)
{
	char **paths = NULL;
	size_t n = 0, before = f->n;
	int rc = mb_receipt_dir_list(&paths, &n, dir, err);

	for (size_t i = 0; rc == 0 && i < n; i++) {
		json_t *r = NULL;
		mb_error why;

		mb_error_clear(&why);
		if (mb_receipt_load(&r, paths[i], &why)) {
			note(f, "--costs %s: %s passed over: %s", dir, paths[i], why.text);
		} else if (strcmp(mb_text_get(r, "backend"), backend)) {
			note(f, "--costs %s: %s passed over: a receipt of the %s backend", dir, paths[i],
				mb_text_get(r, "backend"));
			json_decref(r);
		} else {
			rc = keep(f, r, paths[i], err);
		}
	}
	if (rc == 0 && f->n == before)
		note(f, "--costs %s: no receipt of the %s backend there", dir, backend);
	mb_receipt_paths_free(paths, n);
	return rc;
}

/* --save-to's store: the newest receipt of the suite and backend, by name
 * (DIR/YYYYMMDDTHHMMSS.mmmZ-SUITE-PID.json). A store not made yet has
 * none. */
static int from_store(found *f, const char *dir, const char *suite, const char *backend, mb_error *err)
{
	char **paths = NULL, infix[256];
	size_t n = 0, tried = 0;
	mb_error list_err;
	int rc = 0;

	mb_error_clear(&list_err);
	snprintf(infix, sizeof(infix), "Z-%s-", suite);
	if (mb_receipt_dir_list(&paths, &n, dir, &list_err) && list_err.code != MB_ENOTFOUND) {
		note(f, "--save-to %s: no receipt to learn costs from (%s): the bytes model", dir, list_err.text);
		return 0;
	}
	for (size_t i = n; i-- > 0 && tried < STORE_TRIES && f->n == 0 && rc == 0;) {
		const char *base = strrchr(paths[i], '/');
		json_t *r = NULL;
		mb_error why;

		if (!strstr(base ? base : paths[i], infix))
			continue;
		tried++;
		mb_error_clear(&why);
		if (mb_receipt_load(&r, paths[i], &why))
			note(f, "--save-to %s: %s passed over: %s", dir, paths[i], why.text);
		else if (strcmp(mb_text_get(r, "backend"), backend)
			|| strcmp(mb_text_get(json_object_get(r, "suite"), "name"), suite))
			json_decref(r);
		else
			rc = keep(f, r, paths[i], err);
	}
	if (rc == 0 && f->n == 0)
		note(f, "--save-to %s: no receipt of suite %s on the %s backend to learn costs from: the bytes model",
			dir, suite, backend);
	mb_receipt_paths_free(paths, n);
	return rc;
}

/* Whether the receipt read from `path` gave the costs a figure. */
static bool gave(const mb_shard_costs *c, const char *path)
{
	const json_t *r;
	size_t i;

	json_array_foreach(c->receipts, i, r)
		if (!strcmp(mb_text_get(r, "path"), path))
			return true;
	return false;
}

/* Why a receipt gave no figure: it has no case of the plan, or newer
 * receipts have each of those it has. */
static void unused_note(found *f, const json_t *r, const char *path, const mb_plan *plan)
{
	json_t *ids = plan_index(plan);
	const json_t *c;
	size_t i, n = 0;

	json_array_foreach(json_object_get(r, "cases"), i, c)
		n += json_object_get(ids, mb_text_get(c, "id")) != NULL;
	json_decref(ids);
	if (n)
		note(f, "%s: a newer receipt has each of its %zu cases of this plan", path, n);
	else
		note(f, "%s: no case or lane of this plan to learn from", path);
}

int mb_shard_costs_load(mb_shard_costs *out, const mb_plan *plan, const mb_suite *suite, const char *backend,
	const char *const *from, size_t n_from, const char *store, mb_error *err)
{
	found *f = calloc(1, sizeof(*f));
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!f || !(f->notes = json_array())) {
		free(f);
		return mb_error_set(err, MB_ENOMEM, "--costs", "out of memory");
	}
	for (size_t i = 0; i < n_from && rc == 0; i++) {
		struct stat st;
		json_t *r = NULL;

		if (stat(from[i], &st) == 0 && S_ISDIR(st.st_mode))
			rc = from_folder(f, from[i], backend, err);
		else if ((rc = mb_receipt_load(&r, from[i], err)) == 0)
			rc = keep(f, r, from[i], err);
	}
	if (rc == 0 && n_from == 0 && store)
		rc = from_store(f, store, suite->name, backend, err);
	if (rc == 0)
		rc = f->n ? mb_shard_costs_learn(out, plan, suite, backend, f->receipts, (const char *const *)f->names, f->n,
			err) : mb_shard_costs_model(out, plan, suite, backend, err);
	for (size_t i = 0; rc == 0 && i < f->n; i++)
		if (!gave(out, f->names[i]))
			unused_note(f, f->receipts[i], f->names[i], plan);
	if (rc == 0 && json_array_size(f->notes)) {
		out->notes = f->notes;
		f->notes = NULL;
	}
	for (size_t i = 0; i < f->n; i++) {
		json_decref(f->receipts[i]);
		free(f->names[i]);
	}
	json_decref(f->notes);
	free(f);
	return rc;
}
