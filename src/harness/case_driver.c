/* The case driver; see case_driver.h. */
#include "harness/case_driver.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness/case_record.h"
#include "harness/check.h"
#include "harness/clock.h"
#include "harness/host_inputs.h"
#include "harness/ref_cache.h"
#include "harness/rng.h"
#include "harness/sampler.h"
#include "harness/throughput.h"
#include "receipts/stats.h"

/* A timed batch aims at about this much device time, so that its fixed
 * cost (a synchronisation, collecting CUPTI's records, a clock reading)
 * is small beside it, while the stopping rule is still asked often. */
#define BATCH_TARGET_NS 20e6
/* The first batch of a case, before a call's time is known. */
#define FIRST_BATCH 4
/* How often a sampling case reports progress. */
#define TICK_NS 500000000LL
#define NS_PER_S 1e9
#define TEXT_BYTES 512
#define KEY_SLACK 64

/* ---- groups: one row, shape and dtype ------------------------------------ */

typedef struct group {
	const mb_plan *plan;
	size_t begin, end;           /* its cases */
	/* its first case as the host side sees it: the case itself, or every
	 * rank's rows stacked (mb_backend.whole_case) */
	mb_case_plan whole;
	const mb_settings *settings;
	bool fp32_variants;          /* check against the fp64 oracle */
	uint64_t seed, row_seed;
	/* the tensors, known before the host side starts (the driver reads
	 * them while the thread fills the twin) */
	mb_tensor_spec spec[MB_MAX_TENSORS];
	int n_tensors, n_inputs;
	int64_t *rows, n_rows, rows_total;
	/* per output, the rows checked (mb_output_rows; NULL: 0 .. n-1) */
	int64_t *out_rows[MB_MAX_TENSORS], out_n[MB_MAX_TENSORS];
	mb_host_tensors twin;        /* the host side's; its inputs are freed once the reference ran */
	float *want[MB_MAX_TENSORS];
	bool have_want;
	int64_t twin_ns, reference_ns;
	int rc;
	mb_error err;
	pthread_t thread;
	bool threaded;
	/* the reference worker computes this group (ref_cache.h): take it
	 * from the cache when it is there */
	bool from_cache;
} group;

/* The part of a case id that names its group: row/dtype/family/shape (the
 * id is row/variant/dtype/mode/family/shape, and no name but the family's
 * holds a '/'). */
static void group_key(char *buf, size_t len, const mb_case_plan *plan)
{
	const char *rest = plan->id;

	for (int slash = 0; slash < 4 && rest; slash++) {
		rest = strchr(rest, '/');
		rest = rest ? rest + 1 : NULL;
	}
	snprintf(buf, len, "%s/%s/%s", plan->row->name, mb_dtype_name(plan->dtype), rest ? rest : plan->id);
}

void mb_driver_group_seeds(const mb_case_plan *plan, uint64_t run_seed, uint64_t *input_seed,
	uint64_t *row_seed)
{
	/* row and dtype names are far shorter than the variant and mode they
	 * replace, but the compiler cannot know that */
	char key[sizeof(plan->id) + KEY_SLACK];

	group_key(key, sizeof(key), plan);
	*input_seed = mb_case_seed(run_seed, key);
	*row_seed = mb_case_seed(*input_seed, "row sample");
}

static size_t group_end(const mb_plan *plan, size_t begin, size_t end)
{
	const mb_case_plan *a = &plan->cases[begin];
	size_t i = begin + 1;

	while (i < end) {
		const mb_case_plan *b = &plan->cases[i];
		if (b->row != a->row || b->dtype != a->dtype || strcmp(b->family, a->family)
			|| memcmp(b->axis, a->axis, sizeof(a->axis)))
			break;
		i++;
	}
	return i;
}

/* What the group's host side depends on, beyond the plan: its id, both
 * seeds, the sample's size and which math (the reference's cache key). */
static void group_cache_key(char *buf, size_t len, const group *g)
{
	char key[sizeof(g->whole.id) + KEY_SLACK];

	group_key(key, sizeof(key), &g->whole);
	snprintf(buf, len, "%s seed=%llu row_seed=%llu max_check_rows=%lld rows_total=%lld math=%s", key,
		(unsigned long long)g->seed, (unsigned long long)g->row_seed, (long long)g->settings->max_check_rows,
		(long long)g->rows_total, g->fp32_variants ? "oracle" : "reference");
}

static mb_ref_result group_result(group *g, const char *key)
{
	return (mb_ref_result){key, g->n_inputs, g->n_tensors, g->spec, g->out_rows, g->out_n, g->want};
}

/* The reference worker's result for the group, when it has one: the
 * outputs' checked rows, as the reference below would have made them.
 * Returns 1 when taken; the time waited is the group's reference time. */
static int group_from_cache(group *g)
{
	char key[sizeof(g->whole.id) + 2 * KEY_SLACK + 160];
	mb_ref_result res;
	int64_t waited = 0;
	int rc;

	group_cache_key(key, sizeof(key), g);
	res = group_result(g, key);
	rc = mb_ref_cache_load(&res, &waited, &g->err);
	g->reference_ns = waited;
	if (rc < 0)
		return g->rc = rc;
	if (rc == 1) {
		/* what mb_reference_free sizes the arrays by */
		g->twin.n_tensors = g->n_tensors;
		g->twin.n_inputs = g->n_inputs;
		for (int i = 0; i < g->n_tensors; i++) {
			g->twin.spec[i] = g->spec[i];
			g->twin.elems[i] = (uint64_t)(g->spec[i].rows * g->spec[i].row_elems);
		}
		g->have_want = true;
	}
	mb_trace("%s: host side %s the reference worker after %.0f us", g->whole.id,
		rc == 1 ? "taken from" : "not given by", (double)waited / 1e3);
	return rc;
}

/* A group this process claimed and computed goes to the cache too: a
 * later pass (--repetitions) or a fresh child after a crash takes it from
 * there. A failed write only costs that reuse. */
static void group_to_cache(group *g)
{
	char key[sizeof(g->whole.id) + 2 * KEY_SLACK + 160];
	mb_ref_result res;
	mb_error err;

	group_cache_key(key, sizeof(key), g);
	res = group_result(g, key);
	mb_error_clear(&err);
	if (mb_ref_cache_store(NULL, &res, true, &err))
		mb_trace("%s: %s", err.where, err.text);
}

/* The host side: the row sample, the twin's input rows, the reference. */
static void *group_prepare(void *arg)
{
	group *g = arg;
	const mb_case_plan *plan = &g->whole;
	int64_t t0 = mb_now_ns();

	g->rc = mb_check_rows_pick(&g->rows, &g->n_rows, g->rows_total, g->settings->max_check_rows,
		g->row_seed, &g->err);
	for (int i = g->n_inputs; g->rc == 0 && i < g->n_tensors; i++) {
		if (mb_output_rows(&g->out_rows[i], &g->out_n[i], plan->row, i, &g->spec[i], g->rows, g->n_rows,
			g->rows_total))
			g->rc = mb_error_set(&g->err, MB_ENOMEM, plan->id, "cannot list the checked rows of %s",
				g->spec[i].name);
	}
	if (g->rc == 0 && g->from_cache && group_from_cache(g) != 0)
		return NULL;
	if (g->rc == 0)
		g->rc = mb_host_tensors_twin(&g->twin, plan, g->seed, g->rows, g->n_rows, &g->err);
	g->twin_ns = mb_now_ns() - t0;
	t0 = mb_now_ns();
	if (g->rc == 0) {
		g->rc = g->fp32_variants ? mb_oracle_run(g->want, plan, &g->twin, g->rows, g->n_rows, &g->err)
			: mb_reference_run(g->want, plan, &g->twin, g->rows, g->n_rows, &g->err);
		g->have_want = g->rc == 0;
	}
	/* the reference has what it needs from the inputs */
	mb_host_tensors_free(&g->twin);
	if (g->from_cache && g->have_want)
		group_to_cache(g);
	g->reference_ns = mb_now_ns() - t0;
	mb_trace("%s: host side: %llu input elements in %.0f us, reference of %lld rows in %.0f us", plan->id,
		(unsigned long long)g->twin.made_elems, (double)g->twin_ns / 1e3, (long long)g->n_rows,
		(double)g->reference_ns / 1e3);
	return NULL;
}

static void group_init(group *g, const mb_backend *be, const mb_plan *plan, size_t begin, size_t end,
	const mb_settings *settings)
{
	memset(g, 0, sizeof(*g));
	g->plan = plan;
	g->begin = begin;
	g->end = group_end(plan, begin, end);
	g->settings = settings;
	g->fp32_variants = be->fp32_variants;
	g->whole = plan->cases[begin];
	if (be->whole_case)
		be->whole_case(&plan->cases[begin], &g->whole);
	g->n_tensors = g->whole.row->tensors(g->whole.axis, g->spec);
	while (g->n_inputs < g->n_tensors && !g->spec[g->n_inputs].is_output)
		g->n_inputs++;
	/* the row unit: the first output's rows */
	g->rows_total = g->n_inputs < g->n_tensors ? g->spec[g->n_inputs].rows : 0;
	mb_error_clear(&g->err);
	mb_driver_group_seeds(&plan->cases[begin], settings->seed, &g->seed, &g->row_seed);
	g->from_cache = mb_ref_cache_attached() && mb_ref_worker_wants(&plan->cases[begin]);
}

/* Start the host side on a thread, or do it here when it may not overlap
 * or no thread can start. */
static void group_start(group *g, bool overlap)
{
	g->threaded = overlap && pthread_create(&g->thread, NULL, group_prepare, g) == 0;
	if (!g->threaded)
		group_prepare(g);
}

/* Wait for the host side; the wait is badput split between input
 * generation and the reference in proportion to their work, and the work
 * done while the device was busy is overlapped. */
static int group_join(group *g, mb_phase_ns *phases, mb_error *err)
{
	int64_t t0 = mb_now_ns(), waited, work;

	if (g->threaded) {
		pthread_join(g->thread, NULL);
		g->threaded = false;
		waited = mb_now_ns() - t0;
		work = g->twin_ns + g->reference_ns;
		if (waited > work)
			waited = work;
		phases->input_generation += work > 0 ? waited * g->twin_ns / work : 0;
		phases->reference += work > 0 ? waited * g->reference_ns / work : 0;
		phases->overlapped += work - waited;
		g->twin_ns = g->reference_ns = 0; /* accounted once */
	} else if (g->twin_ns + g->reference_ns > 0) {
		phases->input_generation += g->twin_ns;
		phases->reference += g->reference_ns;
		g->twin_ns = g->reference_ns = 0;
	}
	if (g->rc && err)
		*err = g->err;
	return g->rc;
}

static void group_free(group *g)
{
	if (g->threaded)
		pthread_join(g->thread, NULL);
	g->threaded = false;
	if (g->have_want)
		mb_reference_free(g->want, &g->twin);
	g->have_want = false;
	mb_host_tensors_free(&g->twin);
	free(g->rows);
	g->rows = NULL;
	for (int i = 0; i < MB_MAX_TENSORS; i++) {
		free(g->out_rows[i]);
		g->out_rows[i] = NULL;
	}
}

/* ---- one case ------------------------------------------------------------ */

/* The row's run: the group being timed and the one being prepared. */
typedef struct driver {
	const mb_backend *be;
	const mb_plan *plan;
	size_t end;
	const mb_settings *settings;
	group groups[2];
	group *cur, *next;
} driver;

/* Once the current group's host side is in, the next one's may start: it
 * then runs while this group's cases are timed. */
static void driver_prefetch(driver *d)
{
	if (d->next || d->cur->end >= d->end)
		return;
	d->next = &d->groups[d->cur == &d->groups[0]];
	group_init(d->next, d->be, d->plan, d->cur->end, d->end, d->settings);
	group_start(d->next, d->be->overlap_host_work);
}

typedef struct case_run {
	driver *d;
	const mb_backend *be;
	const mb_case_plan *plan;
	const mb_settings *settings;
	const json_t *ceilings;
	group *g;
	mb_phase_ns *phases;
	const mb_driver_hooks *hooks;
	size_t index;
	json_t *c;
	mb_dev_case *dc;
	mb_outcome o;
	mb_check first, last;
	mb_exact exact;              /* the backend's exact check, both calls */
	mb_sampler s;
	bool s_made;
	/* the variant's bytes model at the case's shape: its launches are
	 * what a call's launch times are kept for (launch_cap of them) */
	mb_traffic traffic;
	int launch_cap;
	double *batch_launch_ns;     /* a batch's, MB_MAX_BATCH * launch_cap */
	/* per timed call, beside the sampler's samples */
	double *events_ns, *span_ns;
	double *launch_ns;           /* launch_cap per call, NAN where none */
	int *launches;
	int n_calls, cap_calls;
	bool have_events;            /* the backend gives a second clock */
	bool unattributed;           /* a call had no kernel-time attribution */
	bool sagged;
	/* most samples sagged: the work itself holds the clock down */
	bool sag_steady;
	int64_t last_tick_ns;
} case_run;

static const mb_tolerance *case_tolerance(const case_run *r)
{
	return &r->plan->row->tolerance[r->be->fp32_variants ? MB_FP32 : r->plan->dtype];
}

/* The backend's exact check of what the call moved, where it has one;
 * then the checked rows of every output, read back and compared (none for
 * a variant that only moves bytes). */
static int check_outputs(case_run *r, mb_check *chk, mb_error *err)
{
	const group *g = r->g;
	int rc;

	mb_check_init(chk);
	if (r->be->check_exact && (rc = r->be->check_exact(r->dc, g->rows, g->n_rows, &r->exact, &r->o, err)))
		return rc;
	if (r->exact.moves_only)
		return 0;
	for (int i = g->n_inputs; i < g->n_tensors; i++) {
		const mb_tensor_spec *spec = &g->spec[i];
		const float *got = NULL;

		if ((rc = r->be->read_rows(r->dc, i, g->out_rows[i], g->out_n[i], &got, &r->o)))
			return rc;
		/* the output's own rows: its row count is their unit */
		mb_check_add_packed(chk, spec, got, g->want[i], g->out_rows[i], g->out_n[i], spec->rows,
			case_tolerance(r));
	}
	return 0;
}

/* Make *p hold `elems` items of `size` bytes (its contents kept). */
static bool grow_array(void **p, size_t elems, size_t size)
{
	void *q = realloc(*p, elems * size);

	if (q)
		*p = q;
	return q != NULL;
}

static int record_call(case_run *r, const mb_batch *b, int i, mb_error *err)
{
	if (r->n_calls == r->cap_calls) {
		size_t cap = r->cap_calls ? 2 * (size_t)r->cap_calls : 64;

		if (!grow_array((void **)&r->events_ns, cap, sizeof(double))
			|| !grow_array((void **)&r->span_ns, cap, sizeof(double))
			|| !grow_array((void **)&r->launches, cap, sizeof(int))
			|| (r->launch_cap > 0
				&& !grow_array((void **)&r->launch_ns, cap * (size_t)r->launch_cap, sizeof(double))))
			return mb_error_set(err, MB_ENOMEM, r->plan->id, "out of memory for samples");
		r->cap_calls = (int)cap;
	}
	r->events_ns[r->n_calls] = b->events_ns ? b->events_ns[i] : NAN;
	r->span_ns[r->n_calls] = b->span_ns ? b->span_ns[i] : NAN;
	r->launches[r->n_calls] = b->launches ? b->launches[i] : -1;
	for (int k = 0; k < r->launch_cap; k++)
		r->launch_ns[(size_t)r->n_calls * (size_t)r->launch_cap + (size_t)k] =
			b->launch_ns ? b->launch_ns[(size_t)i * (size_t)r->launch_cap + (size_t)k] : NAN;
	r->n_calls++;
	return 0;
}

/* One timed batch of up to n calls into the sampler (the backend may time
 * fewer); returns through *timed how many. */
static int timed_batch(case_run *r, int n, int *timed, mb_error *err)
{
	double sample[MB_MAX_BATCH], events[MB_MAX_BATCH], span[MB_MAX_BATCH];
	int launches[MB_MAX_BATCH];
	mb_batch b = {.n = n, .sample_ns = sample, .events_ns = events, .span_ns = span, .launches = launches,
		.launch_ns = r->batch_launch_ns, .launch_cap = r->launch_cap};
	int rc;

	if ((rc = r->be->time_batch(r->dc, &b, r->phases, &r->o, err)))
		return rc;
	n = *timed = b.n;
	r->have_events = b.events_ns != NULL;
	r->sagged = r->sagged || b.sagged;
	for (int i = 0; i < n; i++) {
		double v = sample[i];
		if (v < 0) {
			/* no kernel time for this call: the events stand in, and at the
			 * end every sample is taken from them (one clock per case) */
			r->unattributed = true;
			v = b.events_ns ? events[i] : 0;
		}
		if ((rc = mb_sampler_add(&r->s, v, b.sagged && !r->sag_steady, err)) ||
		    (rc = record_call(r, &b, i, err)))
			return rc;
	}
	/* A sag in a minority of batches is an event to leave out; in most of
	 * them it is the clock the work sustains (a power-bound GEMM row at
	 * its largest shape): excluding those would keep only the cool GPU's
	 * first calls, or nothing at all. */
	if (!r->sag_steady && r->s.n >= r->settings->min_samples &&
	    2 * (r->s.n - mb_sampler_kept(&r->s)) > r->s.n) {
		r->sag_steady = true;
		mb_sampler_keep_all(&r->s);
	}
	return 0;
}

static void tick(case_run *r)
{
	int64_t now = mb_now_ns();

	if (!r->hooks->tick || now - r->last_tick_ns < TICK_NS)
		return;
	r->last_tick_ns = now;
	r->hooks->tick(r->hooks->ctx, r->index, r->s.n, mb_sampler_rel_noise(&r->s),
		(double)(now - r->s.started_ns) / NS_PER_S);
}

/* Calls per batch: enough to fill BATCH_TARGET_NS at the cost per call seen
 * so far, within the backend's limit and the sample cap. */
static int batch_size(const case_run *r, double per_call_ns)
{
	int cap = r->be->max_batch < MB_MAX_BATCH ? r->be->max_batch : MB_MAX_BATCH;
	int left = r->settings->max_samples - r->s.n;
	int n = per_call_ns > 0 ? (int)(BATCH_TARGET_NS / per_call_ns) : FIRST_BATCH;

	if (n > cap)
		n = cap;
	if (n > left)
		n = left;
	return n < 1 ? 1 : n;
}

static int sample(case_run *r, bool *converged, mb_error *err)
{
	double per_call_ns = 0;
	int64_t t0 = mb_now_ns();
	int rc, n_last;

	if ((rc = r->be->arm(r->dc, &r->o)))
		return rc;
	for (int i = 0; i < r->settings->warmup; i++)
		if ((rc = r->be->call(r->dc, &r->o)))
			return rc;
	if ((rc = r->be->sync(r->dc, &r->o, err)))
		return rc;
	r->phases->warmup += mb_now_ns() - t0;

	if ((rc = mb_sampler_init(&r->s, r->settings, err)))
		return rc;
	r->s_made = true;
	r->last_tick_ns = mb_now_ns();
	do {
		int n = batch_size(r, per_call_ns);
		int64_t b0 = mb_now_ns();
		if ((rc = timed_batch(r, n, &n, err)))
			return rc;
		per_call_ns = (double)(mb_now_ns() - b0) / n;
		mb_trace("%s: batch of %d in %.0f us", r->plan->id, n, per_call_ns * n / 1e3);
		tick(r);
	} while (!mb_sampler_done(&r->s, converged));

	/* The last timed call runs on poisoned outputs and is checked: it
	 * proves the timed path (graph replay included) computes the answer.
	 * The poisoning is not in the sample. */
	t0 = mb_now_ns();
	if ((rc = r->be->poison(r->dc, &r->o)))
		return rc;
	r->phases->correctness += mb_now_ns() - t0;
	if ((rc = timed_batch(r, 1, &n_last, err)))
		return rc;
	t0 = mb_now_ns();
	rc = check_outputs(r, &r->last, err);
	r->phases->correctness += mb_now_ns() - t0;
	return rc;
}

/* Up to the first checked call: fresh inputs, poisoned outputs, one call,
 * its sampled rows against the reference. */
static int prepare(case_run *r, mb_error *err)
{
	const group *g = r->g;
	int64_t t0 = mb_now_ns(), ctx0 = r->phases->context_load;
	int rc;

	rc = r->be->open(&r->dc, r->plan, g->spec, g->n_tensors, r->phases, &r->o, err);
	for (int i = 0; rc == 0 && i < g->n_inputs; i++) {
		mb_input_params p = mb_input_params_for(&g->spec[i], i, g->seed);
		rc = r->be->fill(r->dc, i, &p, &r->o);
	}
	/* opening may have loaded the context, which the backend counted */
	r->phases->input_generation += mb_now_ns() - t0 - (r->phases->context_load - ctx0);
	if (rc)
		return rc;
	t0 = mb_now_ns();
	if ((rc = r->be->poison(r->dc, &r->o)) || (rc = r->be->call(r->dc, &r->o))
		|| (rc = r->be->sync(r->dc, &r->o, err)))
		return rc;
	r->phases->correctness += mb_now_ns() - t0;
	mb_trace("%s: inputs and first call in %.0f us", r->plan->id, (double)(mb_now_ns() - t0) / 1e3);
	t0 = mb_now_ns();
	if ((rc = group_join(r->g, r->phases, err)))
		return rc;
	mb_trace("%s: waited %.0f us for the host side", r->plan->id, (double)(mb_now_ns() - t0) / 1e3);
	driver_prefetch(r->d);
	t0 = mb_now_ns();
	rc = check_outputs(r, &r->first, err);
	r->phases->correctness += mb_now_ns() - t0;
	mb_trace("%s: first check in %.0f us", r->plan->id, (double)(mb_now_ns() - t0) / 1e3);
	return rc;
}

/* The most common launch count per call (the signature compares it with
 * the declaration; calls that differ are a finding of their own). */
static int observed_launches(case_run *r)
{
	int best = -1, best_n = 0;
	bool uneven = false;

	for (int i = 0; i < r->n_calls; i++) {
		int n = 0;
		for (int j = 0; j < r->n_calls; j++)
			n += r->launches[j] == r->launches[i];
		if (n > best_n)
			best = r->launches[i], best_n = n;
		uneven = uneven || r->launches[i] != r->launches[0];
	}
	if (uneven)
		mb_case_json_add_finding(r->c, "launch_signature", "launch count varies between calls (most often %d)",
			best);
	return best;
}

/* The kernels that ran against what the variant declares. */
static void add_signature(case_run *r, const mb_dev_report *rep, int observed)
{
	const mb_variant *v = r->plan->variant;
	json_t *expected = json_array();
	bool seen_any = rep->kernels != NULL;
	/* a library's kernels (cuBLAS picks them by shape) are not declared:
	 * each declared kernel must still run, and at least as often */
	bool matches = seen_any;
	size_t k;
	json_t *kern;

	for (int p = 0; p < MB_MAX_KERNEL_PATTERNS && v->kernel_patterns[p]; p++) {
		bool seen = false;
		json_array_append_new(expected, json_string(v->kernel_patterns[p]));
		json_array_foreach(rep->kernels, k, kern)
			seen = seen || strstr(json_string_value(json_object_get(kern, "name")), v->kernel_patterns[p]);
		if (seen_any && !seen) {
			matches = false;
			mb_case_json_add_finding(r->c, "launch_signature", "declared kernel '%s' never ran",
				v->kernel_patterns[p]);
		}
	}
	json_array_foreach(rep->kernels, k, kern) {
		const char *name = json_string_value(json_object_get(kern, "name"));
		bool declared = false;
		for (int p = 0; p < MB_MAX_KERNEL_PATTERNS && v->kernel_patterns[p]; p++)
			declared = declared || strstr(name, v->kernel_patterns[p]);
		if (!declared && !v->library_kernels) {
			matches = false;
			mb_case_json_add_finding(r->c, "launch_signature", "undeclared kernel ran: %s", name);
		}
	}
	if (!seen_any)
		mb_case_json_add_finding(r->c, "launch_signature", "launches not observed (%s)", rep->unobserved_why);
	else if (v->library_kernels ? observed < v->launches_per_call : observed != v->launches_per_call) {
		matches = false;
		mb_case_json_add_finding(r->c, "launch_signature", "%d launches per call observed, %s%d declared",
			observed, v->library_kernels ? "at least " : "", v->launches_per_call);
	}
	json_object_set_new(r->c, "signature", json_pack("{s:i, s:o, s:o, s:b}",
		"expected_launches", v->launches_per_call, "expected_kernels", expected,
		"observed_launches", seen_any ? json_integer(observed) : json_null(), "matches", matches));
}

static double median_of(double *v, int n)
{
	if (n == 0)
		return NAN;
	qsort(v, (size_t)n, sizeof(*v), mb_stats_cmp_double);
	return mb_stats_quantile_sorted(v, (size_t)n, 0.5);
}

/* Each modelled launch's median time (out: n_launches, at most
 * launch_cap) over the calls that ran exactly that many launches (a call
 * with another count cannot be matched launch by launch); NAN where none
 * did. */
static void launch_medians(case_run *r, double *out, int n_launches)
{
	double *v = malloc((size_t)(r->n_calls ? r->n_calls : 1) * sizeof(*v));

	for (int k = 0; k < n_launches; k++) {
		int n = 0;
		for (int i = 0; v && k < r->launch_cap && i < r->n_calls; i++) {
			double ns = r->launch_ns[(size_t)i * (size_t)r->launch_cap + (size_t)k];
			if (r->launches[i] == n_launches && !r->s.excluded[i] && isfinite(ns))
				v[n++] = ns;
		}
		out[k] = median_of(v, n);
	}
	free(v);
}

static json_t *events_timing(case_run *r, json_t *timing, int observed)
{
	json_t *evs = json_array();

	for (int i = 0; i < r->n_calls; i++)
		json_array_append_new(evs, mb_ns_json(r->events_ns[i]));
	json_object_set_new(timing, "events_samples_ns", evs);
	json_object_set_new(timing, "events_median_ns", json_real(median_of(r->events_ns, r->n_calls)));
	json_object_set_new(timing, "span_median_ns", json_real(median_of(r->span_ns, r->n_calls)));
	json_object_set_new(timing, "launches_per_call", observed >= 0 ? json_integer(observed) : json_null());
	return timing;
}

/* The correctness object of the merged checks; a variant that only moves
 * bytes is judged by the backend's exact check alone, at tolerance zero. */
static json_t *correctness_json(const case_run *r, const mb_check *merged)
{
	static const mb_tolerance EXACT = {0, 0, "bytes moved, not computed: exact"};
	const group *g = r->g;
	const mb_exact *x = &r->exact;
	json_t *checks = json_pack("[ss]", "first", "last"), *o;

	if (!x->moves_only)
		return mb_correctness_json(merged, r->be->fp32_variants
			? "mb_oracle (fp64 evaluation of the same math, rounded to fp32)" : r->plan->row->reference_name,
			case_tolerance(r), g->n_rows, g->rows_total, g->seed, g->row_seed, checks);
	o = mb_correctness_json(merged, x->reference, &EXACT, (int64_t)x->checked, (int64_t)x->checked, g->seed,
		g->row_seed, checks);
	json_object_set_new(o, "over_tolerance", json_integer((json_int_t)x->wrong));
	return o;
}

/* A wrong answer: the outputs', or what the exact check found moved
 * wrongly. Sets correctness.passed, and the status and a finding when it
 * failed. */
static void judge(case_run *r, const mb_check *merged)
{
	const mb_exact *x = &r->exact;
	bool passed = (x->moves_only ? x->checked > 0 : mb_check_passed(merged)) && x->wrong == 0;
	char text[TEXT_BYTES];

	json_object_set_new(json_object_get(r->c, "correctness"), "passed", json_boolean(passed));
	if (passed)
		return;
	if (x->wrong)
		snprintf(text, sizeof(text), "%llu of %llu moved rows or counts not where they belong; first: %.256s",
			(unsigned long long)x->wrong, (unsigned long long)x->checked, x->first);
	else
		mb_check_describe(merged, text, sizeof(text));
	mb_case_json_set_status(r->c, "failed", text);
	mb_case_json_add_finding(r->c, "correctness", "wrong answer: %s", text);
}

/* Bytes and FLOPs over the median: the variant's bytes model, or what a
 * multi-rank backend measured each rank move; a variant that only moves
 * bytes computes nothing. */
static json_t *throughput_json(case_run *r, const mb_dev_report *rep)
{
	const mb_row *row = r->plan->row;
	const mb_traffic moved = {.bytes = (uint64_t)rep->moved_bytes};
	const mb_traffic *traffic = rep->moved_bytes > 0 ? &moved : &r->traffic;
	double *launch_median = NULL;
	json_t *o;

	/* without room the launches' medians are not known: NULL says so */
	if (traffic->n_launches > 0
		&& (launch_median = malloc((size_t)traffic->n_launches * sizeof(*launch_median))))
		launch_medians(r, launch_median, traffic->n_launches);
	o = mb_throughput_json(traffic, r->exact.moves_only ? 0 : row->flops(r->plan->axis),
		mb_sampler_median(&r->s), launch_median, r->ceilings);
	free(launch_median);
	return o;
}

/* The receipt's results of a case that ran to its end. */
static void write_results(case_run *r, bool converged)
{
	mb_dev_report rep = {0};
	mb_check merged;
	int observed = -1;

	r->be->report(r->dc, &rep);
	if (r->unattributed && r->have_events) {
		/* a zero busy time is no measurement: keep the whole case on one
		 * clock, the events, and say why */
		for (int i = 0; i < r->s.n && i < r->n_calls; i++)
			r->s.samples_ns[i] = r->events_ns[i];
		rep.sample_source = "events";
		mb_case_json_add_finding(r->c, "other", "no kernel time was attributed to some calls; samples are CUDA event times");
	}
	mb_check_init(&merged);
	mb_check_merge(&merged, &r->first);
	mb_check_merge(&merged, &r->last);
	json_object_set_new(r->c, "correctness", correctness_json(r, &merged));
	json_t *timing = mb_sampler_json(&r->s, rep.sample_source, r->settings->warmup, converged);
	if (rep.kernels || rep.unobserved_why)
		observed = rep.kernels ? observed_launches(r) : -1;
	if (r->have_events)
		events_timing(r, timing, observed);
	json_object_set_new(r->c, "timing", timing);
	json_object_set_new(r->c, "throughput", throughput_json(r, &rep));
	json_object_set_new(r->c, "memory", json_pack("{s:I, s:o, s:o}", "io_bytes", (json_int_t)rep.io_bytes,
		"scratch_bytes", rep.scratch_bytes >= 0 ? json_integer(rep.scratch_bytes) : json_null(),
		"driver_scratch_bytes", rep.driver_scratch_bytes != INT64_MIN ? json_integer(rep.driver_scratch_bytes)
			: json_null()));
	if (rep.kernels || rep.unobserved_why) {
		json_object_set_new(r->c, "kernels", rep.kernels ? json_incref(rep.kernels) : json_array());
		add_signature(r, &rep, observed);
	}
	json_decref(rep.kernels);
	if (rep.collective)
		json_object_set_new(r->c, "collective", rep.collective);
	if (r->sag_steady)
		mb_case_json_add_finding(r->c, "clock_sag",
			"SM clock below %.0f%% of its %u MHz start value in most batches: the work holds the clock "
			"down (power or heat), so no sample is excluded and the median is at the clock it sustains",
			100.0 * MB_CLOCK_SAG_FRACTION, rep.clock_start_mhz);
	else if (r->sagged)
		mb_case_json_add_finding(r->c, "clock_sag",
			"SM clock fell below %.0f%% of its %u MHz start value; those samples are excluded",
			100.0 * MB_CLOCK_SAG_FRACTION, rep.clock_start_mhz);
	if (!converged)
		mb_case_json_add_finding(r->c, "not_converged",
			"relative noise %.3f%% above the %.3f%% target after %d samples (stopped at %s)",
			100 * mb_sampler_rel_noise(&r->s), 100 * r->settings->max_noise, r->s.n,
			r->s.n >= r->settings->max_samples ? "max_samples" : "timeout_s");
	judge(r, &merged);
	r->phases->goodput += mb_sampler_kept_sum_ns(&r->s);
}

static void case_run_free(case_run *r)
{
	r->be->close(r->dc);
	if (r->s_made)
		mb_sampler_free(&r->s);
	free(r->events_ns);
	free(r->span_ns);
	free(r->launch_ns);
	free(r->launches);
	free(r->batch_launch_ns);
	mb_traffic_free(&r->traffic);
}

/* The variant's bytes model at the case's shape, and room for a batch's
 * launch times: as many per call as the model has launches, which is
 * all the receipt's per-launch medians read (launch_medians). */
static int model_traffic(case_run *r, mb_error *err)
{
	if (mb_traffic_model(&r->traffic, r->plan->row, r->plan->variant, r->plan->axis,
		r->be->fp32_variants ? MB_FP32 : r->plan->dtype))
		return mb_error_set(err, MB_ENOMEM, r->plan->id, "out of memory for the bytes model");
	r->launch_cap = r->traffic.n_launches > 0 ? r->traffic.n_launches : 0;
	if (r->launch_cap > 0
		&& !(r->batch_launch_ns = malloc((size_t)MB_MAX_BATCH * (size_t)r->launch_cap * sizeof(double))))
		return mb_error_set(err, MB_ENOMEM, r->plan->id, "out of memory for launch times");
	return 0;
}

/* One case into r->c. A device failure is the case's status; a negative
 * return is the harness's. */
static int run_case(case_run *r, mb_error *err)
{
	bool converged = false;
	int rc;

	if (!(r->plan->variant->dtype_mask & (1u << r->plan->dtype))) {
		mb_case_json_set_status(r->c, "skipped", "the variant has no launch for this dtype");
		return 0;
	}
	rc = model_traffic(r, err);
	if (rc == 0)
		rc = prepare(r, err);
	if (rc == 0)
		rc = sample(r, &converged, err);
	if (rc == MB_DEVICE_FAILED) {
		mb_case_json_set_status(r->c, r->o.status ? r->o.status : "crashed", r->o.text);
		return 0;
	}
	if (rc == 0)
		write_results(r, converged);
	return rc;
}

/* ---- the reference worker's side ----------------------------------------- */

int mb_driver_prepare_groups(const mb_backend *be, const mb_plan *plan, const mb_settings *settings,
	const char *dir, mb_error *err)
{
	int rc = 0;

	for (size_t begin = 0; begin < plan->n_cases && rc == 0;) {
		group g;

		group_init(&g, be, plan, begin, plan->n_cases, settings);
		begin = g.end;
		if (!mb_ref_worker_wants(&plan->cases[g.begin]))
			continue;
		char key[sizeof(g.whole.id) + 2 * KEY_SLACK + 160];
		mb_ref_result res;

		/* a group its row child reached first is the child's */
		group_cache_key(key, sizeof(key), &g);
		if (mb_ref_cache_claim(dir, key)) {
			/* this process makes the results: it never waits for them */
			g.from_cache = false;
			group_prepare(&g);
			res = group_result(&g, key);
			/* a group that failed here is left to its row child, which
			 * then reports the failure as its own */
			rc = mb_ref_cache_store(dir, &res, g.rc == 0 && g.have_want, err);
		}
		group_free(&g);
	}
	return rc;
}

/* ---- the row ---------------------------------------------------------------- */

int mb_driver_run(const mb_backend *be, const mb_plan *plan, size_t begin, size_t end,
	const mb_settings *settings, const json_t *ceilings, const mb_driver_hooks *hooks,
	size_t *failed_at, mb_error *err)
{
	driver d = {.be = be, .plan = plan, .end = end, .settings = settings};
	int rc = 0, stop = 0;

	*failed_at = begin;
	if (begin >= end)
		return 0;
	d.cur = &d.groups[0];
	group_init(d.cur, be, plan, begin, end, settings);
	group_start(d.cur, false);
	while (d.cur && !stop && rc == 0) {
		for (size_t i = d.cur->begin; i < d.cur->end && !stop && rc == 0; i++) {
			mb_phase_ns phases = {0};
			case_run r = {.d = &d, .be = be, .plan = &plan->cases[i], .settings = settings,
				.ceilings = ceilings, .g = d.cur, .phases = &phases, .hooks = hooks, .index = i};

			if (hooks->case_start)
				hooks->case_start(hooks->ctx, i);
			r.c = mb_case_json_new(r.plan, be->name);
			rc = r.c ? run_case(&r, err) : mb_error_set(err, MB_ENOMEM, r.plan->id, "out of memory");
			case_run_free(&r);
			if (rc)
				*failed_at = i;
			else
				stop = hooks->case_done(hooks->ctx, i, r.c, &phases);
			json_decref(r.c);
		}
		group_free(d.cur);
		d.cur = d.next;
		d.next = NULL;
	}
	if (d.cur)
		group_free(d.cur);
	return rc;
}
