#include "harness/runner.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <limits.h>
#include <sched.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "mb_config.h"
#include "harness/case_record.h"
#include "harness/clock.h"
#include "harness/case_driver.h"
#include "harness/hostinfo.h"
#include "harness/isolate.h"
#include "harness/lane.h"
#include "harness/ref_cache.h"
#include "harness/repetitions.h"
#include "receipts/provenance.h"
#include "receipts/receipt_io.h"

/* How long a child may take beyond its sampling budget: setup (inputs,
 * reference, context) gets a fixed allowance plus time proportional to the
 * bytes it must generate. */
#define CASE_SLACK_S 10.0
#define SETUP_BYTES_PER_S 100e6
/* A reference may do the row's whole work on the host (linear
 * cross-entropy's weight gradient needs every token's log-sum-exp): a
 * case may take its FLOPs at this rate, a slow core's, before it counts
 * as hung. */
#define REFERENCE_FLOPS_PER_S 10e9
#define PROBE_TIMEOUT_S 300.0
/* The parent wakes at least this often while a child works. */
#define REFRESH_NS 1000000000LL
#define NS_PER_S 1e9
#define CHILD_EXIT_CRASHED 3
#define CHILD_EXIT_HARNESS 2

/* ---- phases as JSON --------------------------------------------------- */

#define PHASE_FIELDS(X) \
	X(goodput) X(context_load) X(ceilings) X(input_generation) \
	X(reference) X(correctness) X(warmup) X(l2_flush) X(overlapped)

static json_t *phases_json(const mb_phase_ns *p)
{
	json_t *o = json_object();
#define X(f) json_object_set_new(o, #f, json_integer(p->f));
	PHASE_FIELDS(X)
#undef X
	return o;
}

static void phases_add_json(mb_phase_ns *p, const json_t *o)
{
#define X(f) p->f += json_integer_value(json_object_get(o, #f));
	PHASE_FIELDS(X)
#undef X
}

/* ---- children --------------------------------------------------------- */

typedef struct probe_job {
	const mb_backend *backend;
} probe_job;

static int send_error(int fd, const mb_error *err, json_int_t index)
{
	char text[MB_ERROR_WHERE_MAX + MB_ERROR_TEXT_MAX];
	json_t *msg;

	mb_error_format(err, text, sizeof(text));
	msg = json_pack("{s:s, s:I, s:i}", "error", text, "index", index, "code", err->code);
	mb_child_send(fd, msg);
	json_decref(msg);
	return CHILD_EXIT_HARNESS;
}

static int probe_main(int fd, void *arg)
{
	const probe_job *job = arg;
	mb_phase_ns phases = {0};
	json_t *device = NULL, *ceilings = NULL, *msg;
	mb_error err;
	int rc;

	mb_error_clear(&err);
	rc = job->backend->probe(&device, &ceilings, &phases, &err);
	if (rc)
		return send_error(fd, &err, -1);
	msg = json_pack("{s:o, s:o, s:o}", "device", device, "ceilings", ceilings, "phases", phases_json(&phases));
	rc = mb_child_send(fd, msg);
	json_decref(msg);
	if (job->backend->shutdown)
		job->backend->shutdown();
	return rc ? CHILD_EXIT_HARNESS : 0;
}

typedef struct row_job {
	const mb_backend *backend;
	const mb_plan *plan;
	const mb_settings *settings;
	const json_t *ceilings;
	size_t begin, end;
} row_job;

/* The row child's side of the driver's hooks: every event becomes a
 * message to the parent. */
typedef struct row_child {
	int fd;
	int status;
} row_child;

static void send_msg(row_child *rc, json_t *msg)
{
	if (!msg || mb_child_send(rc->fd, msg))
		rc->status = CHILD_EXIT_HARNESS;
	json_decref(msg);
}

static void on_case_start(void *ctx, size_t index)
{
	send_msg(ctx, json_pack("{s:I}", "start", (json_int_t)index));
}

static void on_tick(void *ctx, size_t index, int samples, double rel_noise, double elapsed_s)
{
	send_msg(ctx, json_pack("{s:I, s:i, s:f, s:f}", "tick", (json_int_t)index, "samples", samples,
		"rel_noise", isfinite(rel_noise) ? rel_noise : 1.0, "elapsed_s", elapsed_s));
}

static int on_case_done(void *ctx, size_t index, const json_t *result, const mb_phase_ns *phases)
{
	row_child *rc = ctx;

	send_msg(rc, json_pack("{s:I, s:O, s:o}", "index", (json_int_t)index, "case", result,
		"phases", phases_json(phases)));
	/* a sticky device error poisons the context: the next case gets a
	 * fresh child */
	if (rc->status == 0 && strcmp(json_string_value(json_object_get(result, "status")), "crashed") == 0)
		rc->status = CHILD_EXIT_CRASHED;
	return rc->status;
}

static int row_main(int fd, void *arg)
{
	const row_job *job = arg;
	row_child child = {fd, 0};
	mb_driver_hooks hooks = {&child, on_case_start, on_tick, on_case_done};
	size_t failed_at = job->begin;
	mb_error err;

	mb_error_clear(&err);
	if (mb_driver_run(job->backend, job->plan, job->begin, job->end, job->settings, job->ceilings, &hooks,
		&failed_at, &err))
		child.status = send_error(fd, &err, (json_int_t)failed_at);
	if (job->backend->shutdown)
		job->backend->shutdown();
	return child.status;
}

/* ---- the run ------------------------------------------------------------ */

typedef struct run_state {
	const mb_run_options *opts;
	json_t *results;      /* per plan case, an array of its finished passes */
	json_t *cases;        /* the receipt's cases: passes merged, plan order */
	json_t *lanes;        /* the lanes' objects, suite order */
	json_t *notices;
	json_t *device, *ceilings;
	mb_phase_ns phases;
	bool interrupted;
	/* When the case now running began: the previous case's result, or the
	 * start of its row child (a case's wall_ns, which --gpus learns from) */
	int64_t case_from_ns;
} run_state;

static void notice(run_state *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void notice(run_state *st, const char *fmt, ...)
{
	char text[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	json_array_append_new(st->notices, json_string(text));
	if (st->opts->progress && st->opts->progress->notice)
		st->opts->progress->notice(st->opts->progress->ctx, text);
}

static double case_budget_s(const mb_case_plan *c, const mb_settings *s)
{
	uint64_t elems = 0, bytes = 0;

	mb_row_footprint(c->row, c->axis, MB_FP32, &elems, &bytes);
	return 2 * s->timeout_s + CASE_SLACK_S + (double)bytes / SETUP_BYTES_PER_S
		+ (double)c->row->flops(c->axis) / REFERENCE_FLOPS_PER_S;
}

/* When the child must have finished case `index`, counted from now. */
static int64_t case_deadline(const mb_run_options *o, size_t index)
{
	return mb_now_ns() + (int64_t)(case_budget_s(&o->plan->cases[index], &o->suite->settings) * NS_PER_S);
}

/* ---- the reference worker (ref_cache.h) ----------------------------------- */

/* Below the row children and lanes, which launch and time kernels (an
 * eager lane's step includes its launch gaps): the worker takes only the
 * cores they leave idle (SCHED_IDLE), or else the lowest priority. */
#define REF_WORKER_NICE 19

typedef struct ref_worker_job {
	const mb_run_options *opts;
	const char *dir;
} ref_worker_job;

static int ref_worker_main(int fd, void *arg)
{
	const ref_worker_job *job = arg;
	mb_error err;

	(void)fd; /* never written: the row children read its end-of-file as the worker's exit */
	mb_error_clear(&err);
	if (sched_setscheduler(0, SCHED_IDLE, &(struct sched_param){0}) != 0
		&& setpriority(PRIO_PROCESS, 0, REF_WORKER_NICE) != 0)
		mb_trace("reference worker: cannot lower its priority");
	if (mb_driver_prepare_groups(job->opts->backend, job->opts->plan, &job->opts->suite->settings, job->dir,
		&err)) {
		mb_trace("reference worker: %s: %s", err.where, err.text);
		return CHILD_EXIT_HARNESS;
	}
	return 0;
}

typedef struct ref_worker {
	char dir[PATH_MAX];
	mb_child child;
	bool running;
	bool lanes_first; /* the run's lanes went before its rows */
} ref_worker;

/* Start the worker when the backend overlaps host work and the plan has a
 * group for it; a worker that cannot start leaves the references to the
 * row children, as before, and the run says so. */
static void ref_worker_start(run_state *st, ref_worker *w)
{
	const mb_run_options *o = st->opts;
	const char *tmp = getenv("TMPDIR");
	ref_worker_job job = {o, w->dir};
	mb_error err;

	w->running = false;
	w->dir[0] = '\0';
	if (!mb_ref_worker_enabled(o->backend->overlap_host_work))
		return;
	if (!mb_ref_worker_wants_any(o->plan, 0, o->plan->n_cases))
		return;
	snprintf(w->dir, sizeof(w->dir), "%s/megabench-ref-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(w->dir)) {
		notice(st, "reference worker not started (cannot make a folder in %s): the row children compute every "
			"reference", tmp && *tmp ? tmp : "/tmp");
		w->dir[0] = '\0';
		return;
	}
	mb_error_clear(&err);
	if (mb_child_spawn(&w->child, ref_worker_main, &job, &err)) {
		notice(st, "reference worker not started (%s): the row children compute every reference", err.text);
		rmdir(w->dir);
		w->dir[0] = '\0';
		return;
	}
	w->running = true;
	mb_ref_cache_attach(w->dir, w->child.fd);
}

/* Stop the worker (it may still be on groups a Ctrl-C left unrun) and
 * remove its files. */
static void ref_worker_stop(ref_worker *w)
{
	char how[128], path[PATH_MAX + 256];
	DIR *d;
	struct dirent *e;

	if (!w->running)
		return;
	mb_ref_cache_attach(NULL, -1);
	mb_child_finish(&w->child, true, how, sizeof(how));
	w->running = false;
	if ((d = opendir(w->dir))) {
		while ((e = readdir(d)))
			if (e->d_name[0] != '.') {
				snprintf(path, sizeof(path), "%s/%s", w->dir, e->d_name);
				unlink(path);
			}
		closedir(d);
	}
	rmdir(w->dir);
}

/* ---- lanes ------------------------------------------------------------- */

/* A lane can run for minutes (every configuration, mode and round). */
#define LANE_TIMEOUT_S 1200.0

typedef struct lane_job {
	const mb_lane_spec *spec;
} lane_job;

static int lane_main(int fd, void *arg)
{
	const lane_job *job = arg;
	json_t *lane = NULL, *msg;
	mb_error err;
	int rc;

	mb_error_clear(&err);
	rc = mb_lane_run(&lane, job->spec, &err);
	if (rc)
		return send_error(fd, &err, -1);
	msg = json_pack("{s:o}", "lane", lane);
	rc = mb_child_send(fd, msg);
	json_decref(msg);
	return rc ? CHILD_EXIT_HARNESS : 0;
}

/* A lane's timed kernel work: the GPU busy time (the sum of its kernels'
 * durations) of every timed step of every configuration and mode, as the
 * lane measured it. The lane's set-up, warm-up steps and graph captures
 * stay outside it, so they count as idle host time. */
static int64_t lane_busy_ns(const json_t *lane)
{
	const json_t *run, *v;
	size_t i, k;
	int64_t sum = 0;

	json_array_foreach(json_object_get(lane, "runs"), i, run)
		json_array_foreach(json_object_get(run, "busy_ns"), k, v)
			if (json_is_number(v) && json_number_value(v) > 0)
				sum += (int64_t)json_number_value(v);
	return sum;
}

/* Every lane of the suite, each in a child of its own, after the rows. A
 * lane that fails is recorded with its error; the run goes on. */
static int run_lanes(run_state *st, mb_error *err)
{
	mb_lane_spec *specs = NULL;
	size_t n = 0;
	int rc = mb_lanes_from_suite(&specs, &n, st->opts->suite, err);

	if (rc || n == 0)
		goto cleanup;
	if (strcmp(st->opts->backend->name, "cuda") != 0) {
		notice(st, "%zu lane%s skipped: lanes run on the CUDA backend only", n, n == 1 ? "" : "s");
		goto cleanup;
	}
	for (size_t i = 0; i < n && !st->interrupted; i++) {
		lane_job job = {&specs[i]};
		mb_child child;
		json_t *msg = NULL;
		char how[128];

		/* a sharded run deals each lane to one worker */
		if (st->opts->lanes_run && !st->opts->lanes_run[i])
			continue;
		notice(st, "lane %s (%s): running", specs[i].name, specs[i].pattern);
		if ((rc = mb_child_spawn(&child, lane_main, &job, err)))
			break;
		rc = mb_child_next(&child, &msg, mb_now_ns() + (int64_t)(LANE_TIMEOUT_S * NS_PER_S), st->opts->interrupted,
			err);
		mb_child_finish(&child, rc != MB_CHILD_MESSAGE, how, sizeof(how));
		if (rc == MB_CHILD_STOPPED) {
			st->interrupted = true;
			rc = 0;
			break;
		}
		if (rc == MB_CHILD_MESSAGE && json_object_get(msg, "lane")) {
			json_array_append(st->lanes, json_object_get(msg, "lane"));
			st->phases.goodput += lane_busy_ns(json_object_get(msg, "lane"));
		} else {
			notice(st, "lane %s: %s", specs[i].name, rc == MB_CHILD_MESSAGE
				? json_string_value(json_object_get(msg, "error"))
				: rc == MB_CHILD_TIMEOUT ? "no result in time; the child was killed" : how);
		}
		json_decref(msg);
		rc = 0;
	}
cleanup:
	free(specs);
	return rc;
}

static int run_probe(run_state *st, mb_error *err)
{
	probe_job job = {st->opts->backend};
	mb_child child;
	json_t *msg = NULL;
	char how[128];
	int rc;

	rc = mb_child_spawn(&child, probe_main, &job, err);
	if (rc)
		return rc;
	rc = mb_child_next(&child, &msg, mb_now_ns() + (int64_t)(PROBE_TIMEOUT_S * NS_PER_S),
		st->opts->interrupted, err);
	mb_child_finish(&child, rc != MB_CHILD_MESSAGE, how, sizeof(how));
	if (rc == MB_CHILD_STOPPED) {
		st->interrupted = true;
		return mb_error_set(err, MB_EINTERRUPTED, "device probe", "interrupted");
	}
	if (rc == MB_CHILD_TIMEOUT)
		return mb_error_set(err, MB_EDEVICE, "device probe", "no answer within %.0f s", PROBE_TIMEOUT_S);
	if (rc == MB_CHILD_EOF)
		return mb_error_set(err, MB_EDEVICE, "device probe", "the probe child %s without an answer", how);
	if (rc < 0)
		return rc;
	rc = 0;
	if (json_object_get(msg, "error")) {
		rc = mb_error_set(err, MB_EDEVICE, "device probe", "%s", json_string_value(json_object_get(msg, "error")));
	} else {
		st->device = json_incref(json_object_get(msg, "device"));
		st->ceilings = json_incref(json_object_get(msg, "ceilings"));
		phases_add_json(&st->phases, json_object_get(msg, "phases"));
	}
	json_decref(msg);
	return rc;
}

/* The wall time the case took, as the parent saw it: its child's start
 * or the row's previous case included, so that the cases of a run add up
 * to the time its rows took (shard.h learns from it). */
static void set_case_wall(run_state *st, json_t *c)
{
	int64_t now = mb_now_ns();

	json_object_set_new(c, "wall_ns", json_integer(now > st->case_from_ns ? now - st->case_from_ns : 0));
	st->case_from_ns = now;
}

/* A case that produced no result of its own. */
static void record_lost_case(run_state *st, size_t index, const char *status, const char *why)
{
	const mb_case_plan *plan = &st->opts->plan->cases[index];
	json_t *c = mb_case_json_new(plan, st->opts->backend->name);

	mb_case_json_set_status(c, status, why);
	set_case_wall(st, c);
	json_array_append_new(json_array_get(st->results, index), c);
	if (st->opts->progress && st->opts->progress->case_done)
		st->opts->progress->case_done(st->opts->progress->ctx, index, plan, c);
}

static void record_case(run_state *st, size_t index, json_t *c)
{
	const mb_case_plan *plan = &st->opts->plan->cases[index];

	set_case_wall(st, c);
	json_array_append(json_array_get(st->results, index), c);
	if (st->opts->progress && st->opts->progress->case_done)
		st->opts->progress->case_done(st->opts->progress->ctx, index, plan, c);
}

/* The receipt's cases: each case that finished at least one pass, its
 * passes merged, in plan order. */
static int merge_passes(run_state *st, mb_error *err)
{
	size_t i;
	json_t *passes;

	json_array_foreach(st->results, i, passes) {
		json_t *list[MB_MAX_REPETITIONS], *c;
		size_t n = json_array_size(passes);

		if (n == 0)
			continue;
		for (size_t k = 0; k < n && k < MB_MAX_REPETITIONS; k++)
			list[k] = json_array_get(passes, k);
		c = mb_case_merge_repetitions(list, n < MB_MAX_REPETITIONS ? n : MB_MAX_REPETITIONS);
		if (!c || json_array_append_new(st->cases, c))
			return mb_error_set(err, MB_ENOMEM, st->opts->plan->cases[i].id, "out of memory merging passes");
	}
	return 0;
}

/* Run cases [begin, end) of one row, restarting the child after a crash or
 * a timeout so that the rest of the row still runs. */
static int run_row(run_state *st, size_t begin, size_t end, mb_error *err)
{
	const mb_run_options *o = st->opts;
	size_t next = begin;

	while (next < end && !st->interrupted) {
		row_job job = {o->backend, o->plan, &o->suite->settings, st->ceilings, next, end};
		mb_child child;
		size_t current = next, first = next;
		bool started = false, killed = false;
		char how[128], why[512];
		int rc;

		st->case_from_ns = mb_now_ns();
		rc = mb_child_spawn(&child, row_main, &job, err);
		if (rc)
			return rc;
		int64_t deadline = case_deadline(o, current);
		for (;;) {
			json_t *msg = NULL;
			int64_t now = mb_now_ns();

			/* wake at least once a second, so that the live line moves */
			rc = mb_child_next(&child, &msg, deadline < now + REFRESH_NS ? deadline : now + REFRESH_NS,
				o->interrupted, err);
			if (rc == MB_CHILD_TIMEOUT && mb_now_ns() < deadline) {
				if (o->progress && o->progress->refresh)
					o->progress->refresh(o->progress->ctx);
				continue;
			}
			if (rc != MB_CHILD_MESSAGE)
				break;
			if (json_object_get(msg, "tick")) {
				if (o->progress && o->progress->case_tick)
					o->progress->case_tick(o->progress->ctx, current,
						(int)json_integer_value(json_object_get(msg, "samples")),
						json_number_value(json_object_get(msg, "rel_noise")),
						json_number_value(json_object_get(msg, "elapsed_s")));
			} else if (json_object_get(msg, "start")) {
				current = (size_t)json_integer_value(json_object_get(msg, "start"));
				started = true;
				deadline = case_deadline(o, current);
				if (o->progress && o->progress->case_start)
					o->progress->case_start(o->progress->ctx, current, &o->plan->cases[current]);
			} else if (json_object_get(msg, "case")) {
				phases_add_json(&st->phases, json_object_get(msg, "phases"));
				record_case(st, current, json_object_get(msg, "case"));
				next = current + 1;
				started = false;
				/* the next case's setup starts now */
				deadline = case_deadline(o, next < end ? next : current);
			} else if (json_object_get(msg, "error")) {
				int code = (int)json_integer_value(json_object_get(msg, "code"));
				record_lost_case(st, current, code == MB_ENOMEM ? "oom" : "crashed",
					json_string_value(json_object_get(msg, "error")));
				next = current + 1;
				started = false;
			}
			json_decref(msg);
		}
		killed = rc != MB_CHILD_EOF;
		mb_child_finish(&child, killed, how, sizeof(how));
		if (rc == MB_CHILD_STOPPED) {
			st->interrupted = true;
			break;
		}
		if (rc < 0 && rc != MB_CHILD_TIMEOUT)
			return rc;
		if (rc == MB_CHILD_TIMEOUT) {
			snprintf(why, sizeof(why), "no result within %.0f s (timeout_s %.3g plus setup allowance); the child was killed",
				case_budget_s(&o->plan->cases[current], &o->suite->settings), o->suite->settings.timeout_s);
			record_lost_case(st, current, "timeout", why);
			next = current + 1;
		} else if (started || (next == first && next < end)) {
			/* the child died inside a case, or before it could start one */
			snprintf(why, sizeof(why), "the child running this case %s", how);
			record_lost_case(st, current, "crashed", why);
			next = current + 1;
		}
	}
	return 0;
}

/* ---- the receipt ---------------------------------------------------------- */

void mb_run_timestamp(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;
	char base[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, len, "%.24s.%03dZ", base, (int)(ts.tv_nsec / 1000000));
}

void mb_run_new_id(char out[33])
{
	unsigned char raw[16];

	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
		/* no entropy source: time and pid are unique enough for an id */
		uint64_t a = (uint64_t)mb_now_ns(), b = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull;
		memcpy(raw, &a, 8);
		memcpy(raw + 8, &b, 8);
	}
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", raw[i]);
}

json_t *mb_build_identity(void)
{
	json_t *b = json_object(), *f = json_object(), *archs = json_array();
	char list[] = MB_CUDA_ARCHS;

	for (char *save = NULL, *a = strtok_r(list, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
		char name[32];
		snprintf(name, sizeof(name), "sm_%s", a);
		if (MB_HAVE_CUDA)
			json_array_append_new(archs, json_string(name));
	}
	json_object_set_new(f, "cuda", json_boolean(MB_HAVE_CUDA));
	json_object_set_new(f, "cupti", json_boolean(MB_HAVE_CUPTI));
	json_object_set_new(f, "nccl", json_boolean(MB_HAVE_NCCL));
	json_object_set_new(f, "mpi", json_boolean(MB_HAVE_MPI));
	json_object_set_new(b, "version", json_string(MB_VERSION));
	json_object_set_new(b, "c_compiler", json_string(MB_C_COMPILER));
	json_object_set_new(b, "cxx_compiler", json_string(MB_CXX_COMPILER));
#if MB_HAVE_CUDA
	json_object_set_new(b, "cuda_compiler", json_string(MB_CUDA_COMPILER));
	json_object_set_new(b, "cuda_args", json_string(MB_CUDA_ARGS));
#else
	json_object_set_new(b, "cuda_compiler", json_null());
	json_object_set_new(b, "cuda_args", json_null());
#endif
	json_object_set_new(b, "c_args", json_string(MB_C_ARGS));
	json_object_set_new(b, "buildtype", json_string(MB_BUILDTYPE));
	json_object_set_new(b, "cuda_archs", archs);
	json_object_set_new(b, "features", f);
	return b;
}

/* The running executable, hashed into the receipt. */
#define SELF_EXE "/proc/self/exe"
/* A checkout of megabench is recognised by its table of rows. */
#define CHECKOUT_MARKER "src/kernels/rows.def"
/* Differing files a notice names before it counts the rest. */
#define NOTICE_FILES 3

int mb_run_provenance(json_t **out, const mb_run_options *o, mb_error *err)
{
	json_t *p = NULL, *checkout = NULL;
	int rc;

	(void)o;
	*out = NULL;
	if ((rc = mb_provenance_binary(&p, &mb_build_embedded, SELF_EXE, err))
		|| (rc = mb_provenance_checkout(&checkout, &mb_build_embedded, ".", CHECKOUT_MARKER, err)))
		goto cleanup;
	if (checkout && json_object_set(p, "checkout", checkout)) {
		rc = mb_error_set(err, MB_ENOMEM, "provenance", "out of memory");
		goto cleanup;
	}
	*out = p;
	p = NULL;
cleanup:
	json_decref(p);
	json_decref(checkout);
	return rc;
}

bool mb_run_checkout_notice(char *buf, size_t len, const json_t *prov)
{
	const json_t *co = json_object_get(prov, "checkout");
	const json_t *differing = json_object_get(co, "differing"), *d;
	size_t n = json_array_size(differing), i;
	int used;

	if (len == 0)
		return false;
	buf[0] = '\0';
	if (!co || json_is_true(json_object_get(co, "matches")))
		return false;
	used = snprintf(buf, len, "the checkout at %s differs from the sources this megabench was built from (%s):",
		json_string_value(json_object_get(co, "workdir")),
		json_is_string(json_object_get(prov, "describe")) ? json_string_value(json_object_get(prov, "describe"))
			: "commit unknown");
	json_array_foreach(differing, i, d) {
		if (i == NOTICE_FILES || used < 0 || (size_t)used >= len)
			break;
		used += snprintf(buf + used, len - (size_t)used, "%s %s %s", i ? "," : "",
			json_string_value(json_object_get(d, "path")), json_string_value(json_object_get(d, "change")));
	}
	if (n > NOTICE_FILES && used >= 0 && (size_t)used < len)
		used += snprintf(buf + used, len - (size_t)used, " and %zu more", n - NOTICE_FILES);
	if (used >= 0 && (size_t)used < len)
		snprintf(buf + used, len - (size_t)used, "; the receipt records the binary's provenance, and these files under provenance.checkout");
	return true;
}

static json_t *settings_json(const mb_run_options *o, mb_error *err)
{
	const mb_settings *s = &o->suite->settings;
	json_t *j = json_object(), *modes = json_array(), *rows = NULL, *dtypes = NULL, *variants = NULL;

	for (int i = 0; i < s->n_modes; i++)
		json_array_append_new(modes, json_string(mb_mode_name(s->modes[i])));
	if (mb_plan_filters_json_on(&rows, &dtypes, &variants, o->suite, o->filter, o->backend->name, err)) {
		json_decref(j);
		json_decref(modes);
		return NULL;
	}
	json_object_set_new(j, "backend_requested", json_string(o->backend_requested));
	json_object_set_new(j, "seed", json_integer((json_int_t)s->seed));
	json_object_set_new(j, "modes", modes);
	json_object_set_new(j, "max_noise", json_real(s->max_noise));
	json_object_set_new(j, "min_samples", json_integer(s->min_samples));
	json_object_set_new(j, "max_samples", json_integer(s->max_samples));
	json_object_set_new(j, "min_time_s", json_real(s->min_time_s));
	json_object_set_new(j, "timeout_s", json_real(s->timeout_s));
	json_object_set_new(j, "warmup", json_integer(s->warmup));
	json_object_set_new(j, "max_check_rows", json_integer(s->max_check_rows));
	json_object_set_new(j, "repetitions", json_integer(o->repetitions > 1 ? o->repetitions : 1));
	json_object_set_new(j, "rows", rows);
	json_object_set_new(j, "dtypes", dtypes);
	json_object_set_new(j, "variants", variants);
	return j;
}

json_t *mb_run_goodput_json(const mb_phase_ns *p, int64_t wall_ns)
{
	json_t *g = json_object(), *bad = json_object();
	int64_t spent = 0, idle;

	/* overlapped host work took no wall time of its own: not badput */
#define X(f) if (strcmp(#f, "goodput") != 0 && strcmp(#f, "overlapped") != 0) { \
		json_object_set_new(bad, #f, json_integer(p->f)); spent += p->f; }
	PHASE_FIELDS(X)
#undef X
	spent += p->goodput;
	idle = wall_ns > spent ? wall_ns - spent : 0;
	json_object_set_new(bad, "idle_host", json_integer(idle));
	json_object_set_new(g, "wall_ns", json_integer(wall_ns));
	json_object_set_new(g, "goodput_ns", json_integer(p->goodput));
	json_object_set_new(g, "goodput_fraction", json_real(wall_ns > 0 && p->goodput <= wall_ns
		? (double)p->goodput / (double)wall_ns : (wall_ns > 0 ? 1.0 : 0.0)));
	json_object_set_new(g, "badput_ns", bad);
	json_object_set_new(g, "overlapped_ns", json_pack("{s:I}", "host_work", (json_int_t)p->overlapped));
	return g;
}

json_t *mb_run_summary_json(const json_t *cases)
{
	static const char *const statuses[] = {"ok", "failed", "skipped", "crashed", "timeout", "oom"};
	json_int_t count[6] = {0}, converged = 0, findings = 0;
	size_t i;
	json_t *c, *s = json_object();

	json_array_foreach(cases, i, c) {
		const char *st = json_string_value(json_object_get(c, "status"));
		for (int k = 0; k < 6; k++)
			count[k] += strcmp(st, statuses[k]) == 0;
		converged += json_is_true(json_object_get(json_object_get(c, "timing"), "converged"));
		findings += (json_int_t)json_array_size(json_object_get(c, "findings"));
	}
	json_object_set_new(s, "cases", json_integer((json_int_t)json_array_size(cases)));
	for (int k = 0; k < 6; k++)
		json_object_set_new(s, statuses[k], json_integer(count[k]));
	json_object_set_new(s, "converged", json_integer(converged));
	json_object_set_new(s, "findings", json_integer(findings));
	return s;
}

/* Each row's status as built (the promotion a reviewed change made), so
 * that the gate can hold the claim against the receipt's own evidence. */
json_t *mb_run_catalog_json(void)
{
	json_t *c = json_object();
	size_t n;
	const mb_row *const *rows = mb_catalog_rows_all(&n);

	for (size_t i = 0; i < n; i++) {
		json_t *row = json_pack("{s:s, s:s}", "status", mb_row_status_name(rows[i]->status), "trades",
			mb_row_trades_name(rows[i]->trades));

		if (rows[i]->condition)
			json_object_set_new(row, "condition", json_string(rows[i]->condition));
		json_object_set_new(c, rows[i]->name, row);
	}
	return c;
}

static json_t *suite_json(const mb_suite *suite)
{
	json_t *s = json_pack("{s:s, s:s, s:s}", "path", suite->path, "name", suite->name, "blob_id", suite->blob_id);

	if (suite->description && *suite->description)
		json_object_set_new(s, "description", json_string(suite->description));
	return s;
}

/* The receipt around `p`; takes ownership of prov, host and settings. */
static json_t *assemble(const mb_run_options *o, const mb_run_parts *p, json_t *prov, json_t *host,
	json_t *settings)
{
	json_t *r = json_object(), *command = json_array(), *instrumented;
	char finished[64], run_id[33];

	mb_run_new_id(run_id);
	mb_run_timestamp(finished, sizeof(finished));
	for (int i = 0; i < o->argc; i++)
		json_array_append_new(command, json_string(o->argv[i]));
	json_object_set_new(r, "kind", json_string("megabench.receipt"));
	json_object_set_new(r, "schema_version", json_integer(MB_RECEIPT_SCHEMA_VERSION));
	json_object_set_new(r, "run_id", json_string(run_id));
	json_object_set_new(r, "status", json_string(p->status));
	json_object_set_new(r, "started_at", json_string(p->started_at));
	json_object_set_new(r, "finished_at", json_string(finished));
	json_object_set_new(r, "backend", json_string(o->backend->name));
	json_object_set_new(r, "tool", json_pack("{s:s, s:s}", "name", "megabench", "version", MB_VERSION));
	json_object_set_new(r, "command", command);
	json_object_set_new(r, "provenance", prov);
	json_object_set_new(r, "build", mb_build_identity());
	json_object_set_new(r, "host", host);
	json_object_set(r, "device", p->device);
	json_object_set_new(r, "suite", suite_json(o->suite));
	json_object_set_new(r, "catalog", mb_run_catalog_json());
	json_object_set_new(r, "settings", settings);
	json_object_set(r, "ceilings", p->ceilings);
	json_object_set_new(r, "goodput", mb_run_goodput_json(&p->phases, p->wall_ns));
	json_object_set_new(r, "summary", mb_run_summary_json(p->cases));
	if (p->error)
		json_object_set_new(r, "error", json_string(p->error));
	json_object_set(r, "notices", p->notices);
	json_object_set(r, "cases", p->cases);
	if (json_array_size(p->lanes))
		json_object_set(r, "lanes", p->lanes);
	if ((instrumented = mb_host_instrumentation()))
		json_object_set_new(r, "instrumented", instrumented);
	return r;
}

/* Provenance and host as a sharded worker's parent read them, or read now. */
static int identity(json_t **out_prov, json_t **out_host, const mb_run_options *o, mb_error *err)
{
	int rc = 0;

	*out_prov = *out_host = NULL;
	if (o->provenance)
		*out_prov = json_deep_copy(o->provenance);
	else
		rc = mb_run_provenance(out_prov, o, err);
	if (rc == 0 && o->host)
		*out_host = json_deep_copy(o->host);
	else if (rc == 0)
		rc = mb_host_identity(out_host, err);
	if (rc == 0 && (!*out_prov || !*out_host))
		rc = mb_error_set(err, MB_ENOMEM, "receipt", "out of memory");
	return rc;
}

int mb_run_receipt(json_t **out, const mb_run_options *o, const mb_run_parts *p, mb_error *err)
{
	json_t *prov = NULL, *host = NULL, *settings = NULL;
	int rc;

	*out = NULL;
	if ((rc = identity(&prov, &host, o, err)))
		goto cleanup;
	if (!(settings = settings_json(o, err))) {
		rc = err ? err->code : MB_EINVAL;
		goto cleanup;
	}
	*out = assemble(o, p, prov, host, settings);
	prov = host = settings = NULL;
cleanup:
	json_decref(prov);
	json_decref(host);
	json_decref(settings);
	return rc;
}

/* The rows the reference worker serves (any of their cases) after the
 * others, each set in the order it had: the worker computes their host
 * side while the device samples the rest. */
static void worker_rows_last(const mb_plan *plan, const size_t *begin, size_t *order, size_t n_rows)
{
	size_t *heavy = malloc((n_rows ? n_rows : 1) * sizeof(*heavy)), n_light = 0, n_heavy = 0;

	if (!heavy)
		return; /* plan order is as correct, only slower */
	for (size_t r = 0; r < n_rows; r++) {
		if (mb_ref_worker_wants_any(plan, begin[order[r]], begin[order[r] + 1]))
			heavy[n_heavy++] = order[r];
		else
			order[n_light++] = order[r];
	}
	memcpy(order + n_light, heavy, n_heavy * sizeof(*heavy));
	free(heavy);
}

/* One pass over the plan's rows: in plan order alone, or with
 * --repetitions in the shuffled order of this pass (repetitions.h). */
static int run_pass(run_state *st, int pass, int repetitions, mb_error *err)
{
	const mb_plan *plan = st->opts->plan;
	size_t *begin = calloc(plan->n_cases + 1, sizeof(*begin)), *order = calloc(plan->n_cases + 1, sizeof(*order));
	size_t n_rows = 0;
	int rc = 0;

	if (!begin || !order)
		rc = mb_error_set(err, MB_ENOMEM, "run", "out of memory ordering the rows");
	for (size_t i = 0; !rc && i < plan->n_cases; i++)
		if (i == 0 || plan->cases[i].row != plan->cases[i - 1].row)
			begin[n_rows++] = i;
	if (!rc)
		begin[n_rows] = plan->n_cases;
	if (!rc && repetitions > 1)
		mb_repetition_order(order, n_rows, st->opts->suite->settings.seed, pass);
	else
		for (size_t r = 0; order && r < n_rows; r++)
			order[r] = r;
	if (!rc && mb_ref_cache_attached())
		worker_rows_last(plan, begin, order, n_rows);
	for (size_t r = 0; !rc && r < n_rows && !st->interrupted; r++)
		rc = run_row(st, begin[order[r]], begin[order[r] + 1], err);
	free(begin);
	free(order);
	return rc;
}

int mb_run(json_t **out, const mb_run_options *o, mb_error *err)
{
	run_state st = {.opts = o};
	ref_worker worker = {.running = false};
	int64_t t0 = mb_now_ns();
	char started[64], error_text[MB_ERROR_WHERE_MAX + MB_ERROR_TEXT_MAX], checkout_text[MB_RUN_NOTICE_MAX];
	json_t *prov = NULL, *host = NULL, *settings = NULL;
	mb_run_parts parts = {0};
	mb_error run_err, lanes_err;
	int rc = 0, lanes_rc = 0, repetitions = o->repetitions > 1 ? o->repetitions : 1;

	*out = NULL;
	mb_error_clear(&run_err);
	mb_error_clear(&lanes_err);
	mb_run_timestamp(started, sizeof(started));
	st.cases = json_array();
	st.lanes = json_array();
	st.results = json_array();
	for (size_t i = 0; i < o->plan->n_cases; i++)
		json_array_append_new(st.results, json_array());
	st.notices = json_array();
	for (size_t i = 0; i < o->n_notices; i++)
		json_array_append_new(st.notices, json_string(o->notices[i]));
	if (!o->provenance) {
		/* not in a sharded worker (its parent gave the provenance): the
		 * merged receipt records it once */
		json_t *inst = mb_host_instrumentation();

		if (inst)
			notice(&st, "timed under %s (%s=%s): the times measure the tool too; the receipt says so, and history "
				"and gate --baseline-dir leave it out of nightly comparisons",
				json_string_value(json_object_get(inst, "tool")), json_string_value(json_object_get(inst, "variable")),
				json_string_value(json_object_get(inst, "by")));
		json_decref(inst);
	}
	if ((rc = identity(&prov, &host, o, err)))
		goto cleanup;
	settings = settings_json(o, err);
	if (!settings) {
		rc = err ? err->code : MB_EINVAL;
		goto cleanup;
	}
	/* a sharded worker's parent gave these notices once for every worker */
	if (!o->provenance && !json_is_true(json_object_get(prov, "available")))
		notice(&st, "no git provenance: %s", json_string_value(json_object_get(prov, "reason")));
	if (!o->provenance && mb_run_checkout_notice(checkout_text, sizeof(checkout_text), prov))
		notice(&st, "%s", checkout_text);
	if (o->progress && o->progress->begin)
		o->progress->begin(o->progress->ctx, o->plan->n_cases * (size_t)repetitions, o->backend->name);

	/* the probe failing means nothing can run: report it as the run's error;
	 * with repetitions, pass k runs every row (each in fresh children)
	 * before pass k + 1 starts, so a case's passes are minutes apart */
	/* the worker starts before the probe, so that the heavy references
	 * are under way while the device is measured */
	ref_worker_start(&st, &worker);
	rc = run_probe(&st, &run_err);
	if (repetitions > 1)
		notice(&st, "repetitions: each of the %d passes runs the rows in a shuffled order drawn from seed %llu",
			repetitions, (unsigned long long)o->suite->settings.seed);
	/* with a worker, the lanes (no host work to wait for) run first: the
	 * worker has their time too before the rows it serves come up */
	worker.lanes_first = worker.running;
	if (worker.lanes_first && rc == 0 && !st.interrupted && !o->skip_lanes)
		lanes_rc = run_lanes(&st, &lanes_err);
	for (int pass = 0; rc == 0 && pass < repetitions && !st.interrupted; pass++)
		rc = run_pass(&st, pass, repetitions, &run_err);
	ref_worker_stop(&worker);
	if (merge_passes(&st, rc ? NULL : &run_err) && !rc)
		rc = run_err.code;
	if (!worker.lanes_first && rc == 0 && !st.interrupted && !o->skip_lanes)
		lanes_rc = run_lanes(&st, &lanes_err);
	/* the rows ran whatever the lanes did; a lane's harness error is the
	 * run's when the rows had none */
	if (rc == 0 && lanes_rc) {
		rc = lanes_rc;
		run_err = lanes_err;
	}
	parts.status = "complete";
	if (st.interrupted) {
		parts.status = "interrupted";
		rc = MB_EINTERRUPTED;
		mb_error_set(&run_err, MB_EINTERRUPTED, "", "interrupted after %zu of %zu cases",
			json_array_size(st.cases), o->plan->n_cases);
	} else if (rc) {
		parts.status = "failed";
	}
	if (!st.device)
		st.device = json_pack("{s:s, s:s}", "backend", o->backend->name, "name", "unknown (the probe did not finish)");
	if (!st.ceilings)
		st.ceilings = json_pack("{s:n, s:n}", "copy_gbps", "gemm_tflops");
	if (rc) {
		mb_error_format(&run_err, error_text, sizeof(error_text));
		parts.error = error_text[0] ? error_text : mb_error_code_name(rc);
		if (err)
			*err = run_err;
	}
	parts.started_at = started;
	parts.device = st.device;
	parts.ceilings = st.ceilings;
	parts.notices = st.notices;
	parts.cases = st.cases;
	parts.lanes = st.lanes;
	parts.phases = st.phases;
	parts.wall_ns = mb_now_ns() - t0;
	*out = assemble(o, &parts, prov, host, settings);
	prov = host = settings = NULL;
cleanup:
	json_decref(prov);
	json_decref(host);
	json_decref(settings);
	json_decref(st.cases);
	json_decref(st.results);
	json_decref(st.lanes);
	json_decref(st.notices);
	json_decref(st.device);
	json_decref(st.ceilings);
	return rc;
}
