/* A plan run on the ranks of an NCCL world; see world_run.h. */
#include "harness/world_run.h"

#include <stdio.h>
#include <string.h>

#include "harness/case_record.h"
#include "harness/clock.h"
#include "harness/case_driver.h"
#include "harness/collective.h"

#define TEXT_BYTES 1024

typedef struct world_run {
	const mb_world_run_options *o;
	const mb_plan *plan;
	const mb_progress *progress;   /* the root's; NULL elsewhere */
	json_t *cases;                 /* the root's */
	mb_phase_ns phases;
	size_t n_done;                 /* cases the driver finished, on every process */
	bool stopped_early, interrupted;
	char stopped[TEXT_BYTES];      /* why the later cases did not run */
} world_run;

static void on_case_start(void *ctx, size_t index)
{
	world_run *r = ctx;

	mb_world_alive();
	if (r->progress && r->progress->case_start)
		r->progress->case_start(r->progress->ctx, index, &r->plan->cases[index]);
}

static void on_tick(void *ctx, size_t index, int samples, double rel_noise, double elapsed_s)
{
	world_run *r = ctx;

	if (r->progress && r->progress->case_tick)
		r->progress->case_tick(r->progress->ctx, index, samples, rel_noise, elapsed_s);
}

static void add_phases(mb_phase_ns *into, const mb_phase_ns *p)
{
	into->goodput += p->goodput;
	into->context_load += p->context_load;
	into->ceilings += p->ceilings;
	into->input_generation += p->input_generation;
	into->reference += p->reference;
	into->correctness += p->correctness;
	into->warmup += p->warmup;
	into->l2_flush += p->l2_flush;
	into->overlapped += p->overlapped;
}

/* The root keeps the case. A case that failed to run stops the run; so
 * does a stop asked for on any process. Every process decides alike: a
 * case's status is agreed by the backend, the stop by the world. */
static int on_case_done(void *ctx, size_t index, const json_t *result, const mb_phase_ns *phases)
{
	world_run *r = ctx;
	const char *status = json_string_value(json_object_get(result, "status"));
	volatile sig_atomic_t *stop = r->o->run->interrupted;

	add_phases(&r->phases, phases);
	r->n_done = index + 1;
	if (r->cases)
		json_array_append_new(r->cases, json_deep_copy(result));
	if (r->progress && r->progress->case_done)
		r->progress->case_done(r->progress->ctx, index, &r->plan->cases[index], result);
	if (!strcmp(status, "crashed") || !strcmp(status, "oom") || !strcmp(status, "timeout")) {
		snprintf(r->stopped, sizeof(r->stopped), "not run: %.255s failed before it (%.700s)",
			r->plan->cases[index].id, json_string_value(json_object_get(result, "error")));
		r->stopped_early = true;
		return 1;
	}
	r->interrupted = !mb_world_agree(r->o->world, !(stop && *stop));
	return r->interrupted;
}

/* A case the driver did not finish, at the root. */
static void record(world_run *r, size_t index, const char *status, const char *why)
{
	json_t *c;

	if (!r->cases)
		return;
	c = mb_case_json_new(&r->plan->cases[index], r->o->run->backend->name);
	mb_case_json_set_status(c, status, why);
	if (r->progress && r->progress->case_done)
		r->progress->case_done(r->progress->ctx, index, &r->plan->cases[index], c);
	json_array_append_new(r->cases, c);
}

/* Every case through the driver; after one that failed to run (or a
 * harness error), the rest are recorded as not run. */
static void run_cases(world_run *r)
{
	mb_driver_hooks hooks = {r, on_case_start, on_tick, on_case_done};
	size_t failed_at = 0;
	mb_error err;

	mb_error_clear(&err);
	if (mb_driver_run(r->o->run->backend, r->plan, 0, r->plan->n_cases, r->o->sampling, r->o->ceilings, &hooks,
		&failed_at, &err)) {
		char text[MB_ERROR_WHERE_MAX + MB_ERROR_TEXT_MAX];
		mb_error_format(&err, text, sizeof(text));
		record(r, failed_at, err.code == MB_ENOMEM ? "oom" : "crashed", text);
		snprintf(r->stopped, sizeof(r->stopped), "not run: %.255s failed before it (%.700s)",
			r->plan->cases[failed_at].id, text);
		r->stopped_early = true;
		r->n_done = failed_at + 1;
	}
	for (size_t i = r->n_done; r->stopped_early && i < r->plan->n_cases; i++)
		record(r, i, "skipped", r->stopped);
}

/* The receipt, as `run` writes one, with the GPUs and their links. */
static int make_receipt(json_t **out, world_run *r, mb_error *err)
{
	const mb_world_run_options *o = r->o;
	mb_run_parts p = {.started_at = o->started_at, .status = "complete", .device = (json_t *)o->device,
		.ceilings = (json_t *)o->ceilings, .notices = o->notices, .cases = r->cases, .phases = r->phases,
		.wall_ns = mb_now_ns() - o->started_ns};
	json_t *gpus = NULL, *topology = NULL;
	char error[TEXT_BYTES];
	int rc;

	if (r->interrupted) {
		snprintf(error, sizeof(error), "interrupted after %zu of %zu cases", r->n_done, r->plan->n_cases);
		p.status = "interrupted";
		p.error = error;
	} else if (r->stopped_early) {
		p.status = "failed";
		p.error = r->stopped;
	}
	mb_collective_finish(r->cases);
	if ((rc = mb_run_receipt(out, o->run, &p, err)))
		return rc;
	mb_world_gpus(o->world, &gpus, &topology);
	json_object_set_new(*out, "gpu_count", json_integer(o->world->size));
	json_object_set_new(*out, "gpus", gpus);
	json_object_set_new(*out, "topology", topology);
	return 0;
}

int mb_world_run(json_t **out, const mb_world_run_options *o, mb_error *err)
{
	const bool root = mb_world_root(o->world);
	world_run r = {.o = o, .plan = o->run->plan, .progress = root ? o->run->progress : NULL, .phases = o->phases};
	int rc = 0;

	*out = NULL;
	r.cases = root ? json_array() : NULL;
	if (r.progress && r.progress->begin)
		r.progress->begin(r.progress->ctx, r.plan->n_cases, o->run->backend->name);
	run_cases(&r);
	if (root)
		rc = make_receipt(out, &r, err);
	json_decref(r.cases);
	return rc;
}
