/* Merging the passes of --repetitions; see repetitions.h. */
#include "harness/repetitions.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "harness/rng.h"
#include "harness/sampler.h"

#define TEXT_BYTES 600

static const char *str(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "";
}

/* The pass whose status and correctness the merged case takes: the first
 * that is not ok, else the first. */
static size_t worst_pass(json_t *const *passes, size_t n)
{
	for (size_t k = 0; k < n; k++)
		if (strcmp(str(passes[k], "status"), "ok") != 0)
			return k;
	return 0;
}

/* One pass's entry of timing.repetitions. */
static json_t *repetition_json(const json_t *t)
{
	return json_pack("{s:O, s:O, s:O, s:O, s:O}", "samples_ns", json_object_get(t, "samples_ns"),
		"excluded", json_object_get(t, "excluded"), "median_ns", json_object_get(t, "median_ns"),
		"rel_noise", json_object_get(t, "rel_noise"), "converged", json_object_get(t, "converged"));
}

/* Concatenate array `key` of every timing into `into`; excluded indices
 * are offset by the samples before them. */
static void concat(json_t *into, json_t *const *timings, size_t n, const char *key)
{
	size_t offset = 0;

	for (size_t k = 0; k < n; k++) {
		const json_t *a = json_object_get(timings[k], key);
		size_t i;
		json_t *v;

		json_array_foreach(a, i, v)
			json_array_append_new(into, strcmp(key, "excluded") == 0
				? json_integer(json_integer_value(v) + (json_int_t)offset) : json_incref(v));
		offset += json_array_size(json_object_get(timings[k], "samples_ns"));
	}
}

/* Statistics over every pass's samples, and the passes themselves. */
static json_t *merged_timing(json_t *const *timings, size_t n)
{
	json_t *samples = json_array(), *excluded = json_array(), *reps = json_array(), *t = NULL;
	mb_sampler s;
	bool converged = true;
	double medians[MB_MAX_REPETITIONS], sum = 0, sq = 0, mean;
	json_int_t sampling = 0;
	size_t i;
	json_t *v;

	concat(samples, timings, n, "samples_ns");
	concat(excluded, timings, n, "excluded");
	memset(&s, 0, sizeof(s));
	if (mb_sampler_init(&s, NULL, NULL) != 0)
		goto cleanup;
	json_array_foreach(samples, i, v)
		mb_sampler_add(&s, json_number_value(v), false, NULL);
	json_array_foreach(excluded, i, v)
		if (json_integer_value(v) >= 0 && json_integer_value(v) < s.n)
			s.excluded[json_integer_value(v)] = true;
	for (size_t k = 0; k < n; k++) {
		converged = converged && json_is_true(json_object_get(timings[k], "converged"));
		sampling += json_integer_value(json_object_get(timings[k], "sampling_ns"));
		medians[k] = json_number_value(json_object_get(timings[k], "median_ns"));
		sum += medians[k];
		json_array_append_new(reps, repetition_json(timings[k]));
	}
	mean = sum / (double)n;
	for (size_t k = 0; k < n; k++)
		sq += (medians[k] - mean) * (medians[k] - mean);
	t = mb_sampler_json(&s, str(timings[0], "source"),
		(int)json_integer_value(json_object_get(timings[0], "warmup_calls")), converged);
	json_object_set_new(t, "sampling_ns", json_integer(sampling));
	json_object_set_new(t, "repetitions", reps);
	reps = NULL;
	json_object_set_new(t, "between_run_noise", json_real(mean > 0 && n > 1 ? sqrt(sq / (double)(n - 1)) / mean : 0));
	/* the cross-check clock's samples, where the passes have them; its
	 * medians are the first pass's */
	if (json_object_get(timings[0], "events_samples_ns")) {
		json_t *events = json_array();
		concat(events, timings, n, "events_samples_ns");
		json_object_set_new(t, "events_samples_ns", events);
		json_object_set(t, "events_median_ns", json_object_get(timings[0], "events_median_ns"));
		json_object_set(t, "span_median_ns", json_object_get(timings[0], "span_median_ns"));
		json_object_set(t, "launches_per_call", json_object_get(timings[0], "launches_per_call"));
	}
cleanup:
	mb_sampler_free(&s);
	json_decref(samples);
	json_decref(excluded);
	json_decref(reps);
	return t;
}

/* The first pass's throughput at the merged median. */
static json_t *rescaled_throughput(const json_t *first, double first_median, double median)
{
	json_t *t = json_deep_copy(first);
	static const char *const rates[] = {"gbps", "tflops", "fraction_of_ceiling"};

	for (size_t k = 0; t && median > 0 && k < sizeof(rates) / sizeof(rates[0]); k++) {
		json_t *v = json_object_get(t, rates[k]);
		if (json_is_number(v))
			json_object_set_new(t, rates[k], json_real(json_number_value(v) * first_median / median));
	}
	return t;
}

static void merge_findings(json_t *into, json_t *const *passes, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		size_t i;
		json_t *f;

		json_array_foreach(json_object_get(passes[k], "findings"), i, f) {
			char text[TEXT_BYTES];
			snprintf(text, sizeof(text), "pass %zu: %s", k + 1, str(f, "message"));
			json_array_append_new(into, k == 0 ? json_incref(f)
				: json_pack("{s:s, s:s}", "kind", str(f, "kind"), "message", text));
		}
	}
}

json_t *mb_case_merge_repetitions(json_t *const *passes, size_t n)
{
	json_t *c, *timings[MB_MAX_REPETITIONS];
	const json_t *first = passes[0];
	size_t worst = worst_pass(passes, n), timed = 0;
	json_int_t peak = 0, wall = 0;

	if (n == 1 || n > MB_MAX_REPETITIONS)
		return n == 1 ? json_incref(passes[0]) : NULL;
	c = json_deep_copy(first);
	if (!c)
		return NULL;
	json_object_set(c, "status", json_object_get(passes[worst], "status"));
	json_object_set(c, "error", json_object_get(passes[worst], "error"));
	json_object_set(c, "correctness", json_object_get(passes[worst], "correctness"));
	for (size_t k = 0; k < n; k++) {
		const json_t *t = json_object_get(passes[k], "timing");
		const json_t *sig = json_object_get(passes[k], "signature");
		json_int_t p = json_integer_value(json_object_get(json_object_get(passes[k], "memory"), "io_bytes"));
		if (json_is_object(t))
			timings[timed++] = (json_t *)t;
		peak = p > peak ? p : peak;
		wall += json_integer_value(json_object_get(passes[k], "wall_ns"));
		if (json_is_object(sig) && !json_is_true(json_object_get(sig, "matches")))
			json_object_set_new(json_object_get(c, "signature"), "matches", json_false());
	}
	json_object_set_new(json_object_get(c, "memory"), "io_bytes", json_integer(peak));
	if (json_object_get(first, "wall_ns"))
		json_object_set_new(c, "wall_ns", json_integer(wall));
	/* only passes that were timed make a timing; all of them must have been */
	if (timed == n) {
		json_t *t = merged_timing(timings, n);
		if (t && json_is_object(json_object_get(first, "throughput")))
			json_object_set_new(c, "throughput", rescaled_throughput(json_object_get(first, "throughput"),
				json_number_value(json_object_get(timings[0], "median_ns")),
				json_number_value(json_object_get(t, "median_ns"))));
		json_object_set_new(c, "timing", t ? t : json_null());
	} else {
		json_object_set_new(c, "timing", json_null());
		json_object_set_new(c, "throughput", json_null());
	}
	json_object_set_new(c, "findings", json_array());
	merge_findings(json_object_get(c, "findings"), passes, n);
	return c;
}

/* A stream of its own for the order: the run seed is also the inputs' */
#define ORDER_STREAM 0x5245504f52444552ull /* "REPORDER" */

void mb_repetition_order(size_t *order, size_t n, uint64_t seed, int pass)
{
	mb_rng rng;

	for (size_t i = 0; i < n; i++)
		order[i] = i;
	mb_rng_seed(&rng, seed ^ ORDER_STREAM ^ ((uint64_t)pass * 0x9e3779b97f4a7c15ull));
	for (size_t i = n; i > 1; i--) { /* Fisher-Yates */
		size_t j = (size_t)(mb_rng_next(&rng) % i), t = order[i - 1];
		order[i - 1] = order[j];
		order[j] = t;
	}
}
