/* The workers of a sharded run (shard.h): one forked process per GPU, each
 * running its rows through mb_run and forwarding every event; the parent
 * prints the events, watches the workers and merges their cases. */
#include "harness/shard.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mb_config.h"
#include "harness/clock.h"
#include "harness/cuda_device.h"
#include "harness/cuda_topology.h"
#include "harness/hostinfo.h"
#include "harness/isolate.h"
#include "receipts/text.h"

#define VISIBLE_ENV "CUDA_VISIBLE_DEVICES"
/* A worker sees one GPU: CUDA's device 0. */
#define WORKER_DEVICE "0"
#define NS_PER_S 1e9
#define NS_PER_MS 1000000LL
/* The parent wakes at least this often to redraw the live line. */
#define REFRESH_MS 1000
/* How long one read of a worker's messages may wait for the rest of a line. */
#define READ_SLICE_NS NS_PER_MS
/* After the run is interrupted, how long a worker has to send what it
 * finished before it is killed. */
#define STOP_GRACE_S 30.0
#define TOPOLOGY_TIMEOUT_S 120.0
#define VISIBLE_BYTES 128
#define HOW_BYTES 256
#define WHY_BYTES 768
#define TEXT_BYTES 1024
#define ROW_NAMES_BYTES 512

/* ---- the worker: a child of the parent, one per GPU -------------------- */

static volatile sig_atomic_t worker_stop;

static void on_worker_term(int sig)
{
	(void)sig;
	worker_stop = 1;
}

typedef struct worker_job {
	const mb_shard_options *so;
	const mb_shard_row *rows;  /* every row of the run; the worker takes its slot's */
	size_t n_rows;
	int slot;
	const char *visible;       /* CUDA_VISIBLE_DEVICES for it; "" leaves it alone */
	bool lanes;                /* this worker runs lanes (or says it skips them) */
	const bool *lanes_run;     /* per suite lane, whether it is this worker's; NULL: all */
	const json_t *provenance, *host;
} worker_job;

/* The worker's progress printer: every event goes to the parent, with the
 * case's index in the whole plan. */
typedef struct forwarder {
	int fd;
	const size_t *global;      /* the worker's plan index -> the run's */
} forwarder;

static void forward(forwarder *f, json_t *msg)
{
	if (msg)
		mb_child_send(f->fd, msg); /* a parent that is gone cannot be told */
	json_decref(msg);
}

static void fw_start(void *ctx, size_t index, const mb_case_plan *plan)
{
	forwarder *f = ctx;

	(void)plan;
	forward(f, json_pack("{s:I}", "start", (json_int_t)f->global[index]));
}

static void fw_tick(void *ctx, size_t index, int samples, double rel_noise, double elapsed_s)
{
	forwarder *f = ctx;

	forward(f, json_pack("{s:I, s:i, s:f, s:f}", "tick", (json_int_t)f->global[index], "samples", samples,
		"rel_noise", rel_noise, "elapsed_s", elapsed_s));
}

static void fw_done(void *ctx, size_t index, const mb_case_plan *plan, const json_t *result)
{
	forwarder *f = ctx;

	(void)plan;
	forward(f, json_pack("{s:I, s:O}", "done", (json_int_t)f->global[index], "case", (json_t *)result));
}

static void fw_notice(void *ctx, const char *text)
{
	forward(ctx, json_pack("{s:s}", "notice", text));
}

/* The worker's share of the plan, in plan order: *out_global maps its
 * indices back to the run's. */
static int worker_plan(mb_plan *out, size_t **out_global, const worker_job *job)
{
	const mb_plan *plan = job->so->run->plan;
	size_t n = 0;

	for (size_t r = 0; r < job->n_rows; r++)
		n += job->rows[r].slot == job->slot ? job->rows[r].end - job->rows[r].begin : 0;
	out->cases = calloc(n + 1, sizeof(*out->cases));
	*out_global = calloc(n + 1, sizeof(**out_global));
	if (!out->cases || !*out_global)
		return MB_ENOMEM;
	out->n_cases = 0;
	for (size_t r = 0; r < job->n_rows; r++) {
		if (job->rows[r].slot != job->slot)
			continue;
		for (size_t i = job->rows[r].begin; i < job->rows[r].end; i++) {
			(*out_global)[out->n_cases] = i;
			out->cases[out->n_cases++] = plan->cases[i];
		}
	}
	return 0;
}

static int worker_main(int fd, void *arg)
{
	const worker_job *job = arg;
	mb_run_options o = *job->so->run;
	mb_plan plan = {0};
	size_t *global = NULL;
	forwarder fw = {fd, NULL};
	mb_progress progress = {.ctx = &fw, .case_start = fw_start, .case_tick = fw_tick, .case_done = fw_done,
		.notice = fw_notice};
	struct sigaction sa = {0};
	json_t *receipt = NULL;
	char text[MB_ERROR_WHERE_MAX + MB_ERROR_TEXT_MAX] = "";
	mb_error err;
	int rc;

	/* the parent stops a worker with SIGTERM: it then sends what finished */
	sa.sa_handler = on_worker_term;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	if (job->visible[0])
		setenv(VISIBLE_ENV, job->visible, 1);
	if (!job->so->simulated)
		setenv(MB_DEVICE_ENV, WORKER_DEVICE, 1);
	mb_error_clear(&err);
	rc = worker_plan(&plan, &global, job);
	if (rc == 0) {
		fw.global = global;
		o.plan = &plan;
		o.progress = &progress;
		o.interrupted = &worker_stop;
		o.provenance = job->provenance;
		o.host = job->host;
		o.skip_lanes = !job->lanes;
		o.lanes_run = job->lanes_run;
		o.notices = NULL; /* the parent keeps the run's own notices */
		o.n_notices = 0;
		rc = mb_run(&receipt, &o, &err);
	} else {
		mb_error_set(&err, rc, "worker", "out of memory for its share of the plan");
	}
	if (rc)
		mb_error_format(&err, text, sizeof(text));
	/* its cases and notices already went to the parent, one by one */
	json_object_del(receipt, "cases");
	json_object_del(receipt, "notices");
	forward(&fw, json_pack("{s:o?, s:i, s:s}", "receipt", receipt, "rc", rc, "error", text));
	free(plan.cases);
	free(global);
	return 0;
}

/* ---- the parent ---------------------------------------------------------- */

typedef struct worker {
	mb_child child;
	pid_t pid;
	bool spawned, running;
	bool reported;              /* it sent its last message */
	bool ended_first;           /* it ended before the run was stopped: whatever it left is lost */
	int64_t start_ns, wall_ns;
	json_t *receipt;            /* its last message's receipt; NULL until then */
	int rc;                     /* its mb_run's return */
	char error[TEXT_BYTES];
	char ended[HOW_BYTES];      /* how the process ended */
	char visible[VISIBLE_BYTES];
	bool in_case;
	size_t current;             /* the run's index of its case in progress */
} worker;

typedef struct shard_state {
	const mb_shard_options *so;
	const mb_run_options *o;
	mb_shard_row *rows;         /* the parts of the plan, each to a slot */
	size_t n_rows;
	mb_shard_deal_info deal;
	mb_shard_costs model;       /* the bytes model's, when no costs were given */
	const mb_shard_costs *costs;
	int *slot_of_case;
	json_t *passes;             /* per plan case: its finished passes */
	json_t *notices, *gpus, *topology, *prov, *host;
	worker w[MB_SHARD_MAX_GPUS];
	int shown;                  /* the slot whose case the live line shows; -1 none */
	bool stop_sent;
	int64_t kill_at_ns;
} shard_state;

static void notice(shard_state *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void notice(shard_state *st, const char *fmt, ...)
{
	char text[TEXT_BYTES];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	json_array_append_new(st->notices, json_string(text));
	if (st->o->progress && st->o->progress->notice)
		st->o->progress->notice(st->o->progress->ctx, text);
}

/* The GPU as the user named it: its index in --devices terms. */
static int gpu_index(const shard_state *st, int slot)
{
	return st->so->devices[slot];
}

static const char *gpu_name(const shard_state *st, int slot)
{
	const char *name = json_string_value(json_object_get(json_array_get(st->gpus, (size_t)slot), "name"));

	return name ? name : "unknown";
}

/* ---- which GPUs, linked how ------------------------------------------------ */

typedef struct topology_job {
	const int *devices;
	int n;
} topology_job;

static int topology_main(int fd, void *arg)
{
	const topology_job *job = arg;
	json_t *gpus = NULL, *topo = NULL, *msg;
	char text[MB_ERROR_WHERE_MAX + MB_ERROR_TEXT_MAX];
	mb_error err;
	int rc;

	mb_error_clear(&err);
#if MB_HAVE_CUDA
	rc = mb_cuda_topology(&gpus, &topo, job->devices, job->n, &err);
#else
	(void)job;
	rc = mb_error_set(&err, MB_EUNSUPPORTED, "topology", "built without CUDA");
#endif
	if (rc) {
		mb_error_format(&err, text, sizeof(text));
		msg = json_pack("{s:s}", "error", text);
	} else {
		msg = json_pack("{s:o, s:o}", "gpus", gpus, "topology", topo);
	}
	rc = msg ? mb_child_send(fd, msg) : MB_ENOMEM;
	json_decref(msg);
	return rc ? 1 : 0;
}

/* The GPUs' identities and links, from a child (the parent never
 * initialises CUDA). */
static int probe_topology(shard_state *st, mb_error *err)
{
	topology_job job = {st->so->devices, st->so->n_gpus};
	mb_child child;
	json_t *msg = NULL;
	char how[HOW_BYTES];
	int rc = mb_child_spawn(&child, topology_main, &job, err);

	if (rc)
		return rc;
	rc = mb_child_next(&child, &msg, mb_now_ns() + (int64_t)(TOPOLOGY_TIMEOUT_S * NS_PER_S), st->o->interrupted, err);
	mb_child_finish(&child, rc != MB_CHILD_MESSAGE, how, sizeof(how));
	if (rc == MB_CHILD_STOPPED)
		rc = mb_error_set(err, MB_EINTERRUPTED, "topology", "interrupted");
	else if (rc == MB_CHILD_TIMEOUT)
		rc = mb_error_set(err, MB_EDEVICE, "topology", "no answer within %.0f s", TOPOLOGY_TIMEOUT_S);
	else if (rc == MB_CHILD_EOF)
		rc = mb_error_set(err, MB_EDEVICE, "topology", "the probe child %s without an answer", how);
	else if (rc == MB_CHILD_MESSAGE && json_object_get(msg, "error"))
		rc = mb_error_set(err, MB_EDEVICE, "topology", "%s", json_string_value(json_object_get(msg, "error")));
	else if (rc == MB_CHILD_MESSAGE)
		rc = 0;
	if (rc == 0) {
		st->gpus = json_incref(json_object_get(msg, "gpus"));
		st->topology = json_incref(json_object_get(msg, "topology"));
		for (int k = 0; k < st->so->n_gpus; k++)
			snprintf(st->w[k].visible, sizeof(st->w[k].visible), "%s",
				json_string_value(json_object_get(json_array_get(st->gpus, (size_t)k), "uuid")));
	}
	json_decref(msg);
	return rc;
}

/* MEGABENCH_FAKE_GPUS: the "GPUs" are cpu-backend workers, named after
 * the CPU that runs them all. */
static int simulated_gpus(shard_state *st, mb_error *err)
{
	const char *cpu = json_string_value(json_object_get(st->host, "cpu_model"));
	char uuid[64];

	st->gpus = json_array();
	for (int k = 0; k < st->so->n_gpus; k++) {
		snprintf(uuid, sizeof(uuid), "SIMULATED-%d", gpu_index(st, k));
		json_array_append_new(st->gpus, json_pack("{s:i, s:s, s:s, s:n, s:n, s:b}", "index", gpu_index(st, k),
			"name", cpu ? cpu : "unknown", "uuid", uuid, "pci_bus_id", "nvlinks_active", "simulated", 1));
	}
	st->topology = json_pack("{s:s, s:s, s:[], s:s}", "source", "none", "class", "none", "links", "note",
		MB_SHARD_FAKE_GPUS_ENV ": GPUs simulated by cpu-backend workers on one CPU (a test of sharding, "
		"not a measurement of GPUs)");
	if (!st->topology || json_array_size(st->gpus) != (size_t)st->so->n_gpus)
		return mb_error_set(err, MB_ENOMEM, "--gpus", "out of memory");
	return 0;
}

/* ---- the deal ---------------------------------------------------------------- */

/* The plan's parts to the GPUs, by the costs given or the bytes model. */
static int deal_plan(shard_state *st, mb_error *err)
{
	const mb_run_options *o = st->o;
	int rc;

	st->costs = st->so->costs;
	if (!st->costs) {
		if ((rc = mb_shard_costs_model(&st->model, o->plan, o->suite, o->backend->name, err)))
			return rc;
		st->costs = &st->model;
	}
	if ((rc = mb_shard_assign(&st->rows, &st->n_rows, &st->deal, o->plan, st->costs, st->so->n_gpus, err)))
		return rc;
	for (size_t r = 0; r < st->n_rows; r++)
		for (size_t i = st->rows[r].begin; i < st->rows[r].end; i++)
			st->slot_of_case[i] = st->rows[r].slot;
	return 0;
}

/* Which costs the deal used, what it split and how even it came out. */
static void deal_notices(shard_state *st)
{
	json_t *plan = mb_shard_plan_json(st->costs, &st->deal, st->rows, st->n_rows, st->o->plan, st->so->n_gpus);
	char text[MB_SHARD_TEXT_BYTES], split[TEXT_BYTES] = "";
	const json_t *v;
	size_t i;

	json_array_foreach(st->costs->notes, i, v)
		notice(st, "%s", json_string_value(v));
	mb_shard_costs_describe(text, sizeof(text), st->costs);
	notice(st, "cost model: %s", text);
	json_array_foreach(json_object_get(plan, "split_rows"), i, v)
		mb_text_appendf(split, sizeof(split), "%s%s", i ? ", " : "", json_string_value(v));
	if (split[0])
		notice(st, "split across GPUs, so that no row holds up the run alone: %s", split);
	mb_shard_deal_describe(text, sizeof(text), &st->deal, st->so->n_gpus);
	notice(st, "balance: %s", text);
	json_decref(plan);
}

/* ---- starting the workers ---------------------------------------------------- */

/* "rope_qk (24), linear_cross_entropy (8 of 16)" */
static void row_names(char *buf, size_t len, const shard_state *st, int slot)
{
	json_t *rows = mb_shard_slot_rows(st->rows, st->n_rows, st->o->plan, slot);

	mb_shard_slot_text(buf, len, rows);
	json_decref(rows);
}

static size_t slot_cases(const shard_state *st, int slot)
{
	size_t n = 0;

	for (size_t r = 0; r < st->n_rows; r++)
		n += st->rows[r].slot == slot ? st->rows[r].end - st->rows[r].begin : 0;
	return n;
}

static void start_workers(shard_state *st)
{
	char names[ROW_NAMES_BYTES];

	for (int k = 0; k < st->so->n_gpus; k++) {
		worker *w = &st->w[k];
		bool mine[MB_SHARD_MAX_LANES], any = false;
		worker_job job = {st->so, st->rows, st->n_rows, k, w->visible, false, st->costs->n_lanes ? mine : NULL,
			st->prov, st->host};
		size_t n = slot_cases(st, k);
		char lanes[ROW_NAMES_BYTES];
		mb_error err;

		for (size_t l = 0; l < st->costs->n_lanes; l++)
			any |= mine[l] = st->deal.lane_slot[l] == k;
		/* with no lane dealt (the cpu backend) one worker says it skips them */
		job.lanes = any || (st->costs->n_lanes == 0 && k == st->deal.lanes_slot);
		mb_error_clear(&err);
		/* a GPU may be dealt lanes alone */
		if (n == 0 && !any) {
			snprintf(w->ended, sizeof(w->ended), "not started: no rows were left for it");
			continue;
		}
		/* the job lives on this stack only until the fork: the worker
		 * has its own copy of the parent's memory */
		if (mb_child_spawn(&w->child, worker_main, &job, &err)) {
			snprintf(w->ended, sizeof(w->ended), "could not be started: %.200s", err.text);
			continue;
		}
		w->spawned = w->running = true;
		w->pid = w->child.pid;
		w->start_ns = mb_now_ns();
		row_names(names, sizeof(names), st, k);
		mb_shard_slot_lanes_text(lanes, sizeof(lanes), st->costs, &st->deal, k);
		notice(st, "gpu%d (%s): worker pid %ld runs %zu cases (%s)%s%s, about %.1f s by the cost model",
			gpu_index(st, k), gpu_name(st, k), (long)w->child.pid, n, names, lanes[0] ? " and " : "", lanes,
			st->deal.load_s[k]);
	}
}

/* ---- watching them -------------------------------------------------------------- */

/* The case as the console shows it: "gpu1 rope_qk/fused/...". */
static void shown_case(mb_case_plan *out, const shard_state *st, int slot, size_t index)
{
	const char *id = st->o->plan->cases[index].id;
	size_t p, n;

	*out = st->o->plan->cases[index];
	p = (size_t)snprintf(out->id, sizeof(out->id), "gpu%d ", gpu_index(st, slot));
	/* a long id loses its end on the console only */
	n = strnlen(id, sizeof(out->id) - 1 - p);
	memcpy(out->id + p, id, n);
	out->id[p + n] = '\0';
}

/* The live line shows one case: the one started last, and when it ends,
 * another GPU's case in progress. */
static void show(shard_state *st, int slot)
{
	const mb_progress *p = st->o->progress;
	mb_case_plan c;

	st->shown = slot;
	if (slot < 0 || !p || !p->case_start)
		return;
	shown_case(&c, st, slot, st->w[slot].current);
	p->case_start(p->ctx, st->w[slot].current, &c);
}

static void show_next(shard_state *st)
{
	st->shown = -1;
	for (int k = 0; k < st->so->n_gpus && st->shown < 0; k++)
		if (st->w[k].running && st->w[k].in_case)
			show(st, k);
}

static void on_done(shard_state *st, int slot, size_t index, json_t *kase)
{
	const mb_progress *p = st->o->progress;
	mb_case_plan c;

	json_array_append(json_array_get(st->passes, index), kase);
	st->w[slot].in_case = false;
	if (p && p->case_done) {
		shown_case(&c, st, slot, index);
		p->case_done(p->ctx, index, &c, kase);
	}
	if (st->shown == slot)
		show_next(st);
}

static void dispatch(shard_state *st, int slot, json_t *msg)
{
	const mb_progress *p = st->o->progress;
	worker *w = &st->w[slot];
	size_t n = st->o->plan->n_cases;
	json_t *v;

	if ((v = json_object_get(msg, "start")) && (size_t)json_integer_value(v) < n) {
		w->current = (size_t)json_integer_value(v);
		w->in_case = true;
		show(st, slot);
	} else if ((v = json_object_get(msg, "tick")) && (size_t)json_integer_value(v) < n) {
		if (st->shown == slot && p && p->case_tick)
			p->case_tick(p->ctx, (size_t)json_integer_value(v), (int)json_integer_value(json_object_get(msg, "samples")),
				json_number_value(json_object_get(msg, "rel_noise")),
				json_number_value(json_object_get(msg, "elapsed_s")));
	} else if ((v = json_object_get(msg, "done")) && (size_t)json_integer_value(v) < n
		&& json_is_object(json_object_get(msg, "case"))) {
		on_done(st, slot, (size_t)json_integer_value(v), json_object_get(msg, "case"));
	} else if ((v = json_object_get(msg, "notice"))) {
		notice(st, "gpu%d: %s", gpu_index(st, slot), json_string_value(v));
	} else if (json_object_get(msg, "rc")) {
		json_t *receipt = json_object_get(msg, "receipt");
		const char *error = json_string_value(json_object_get(msg, "error"));

		json_decref(w->receipt);
		w->reported = true;
		w->receipt = json_is_object(receipt) ? json_incref(receipt) : NULL;
		w->rc = (int)json_integer_value(json_object_get(msg, "rc"));
		snprintf(w->error, sizeof(w->error), "%s", error ? error : "");
	}
}

static void end_worker(shard_state *st, int slot, bool kill_first)
{
	worker *w = &st->w[slot];

	mb_child_finish(&w->child, kill_first, w->ended, sizeof(w->ended));
	w->ended_first = !st->stop_sent;
	w->running = false;
	w->wall_ns = mb_now_ns() - w->start_ns;
	w->in_case = false;
	if (st->shown == slot)
		show_next(st);
}

/* Every message the worker has sent so far. */
static void drain(shard_state *st, int slot)
{
	worker *w = &st->w[slot];

	for (;;) {
		json_t *msg = NULL;
		mb_error err;
		int rc;

		mb_error_clear(&err);
		rc = mb_child_next(&w->child, &msg, mb_now_ns() + READ_SLICE_NS, NULL, &err);
		if (rc == MB_CHILD_MESSAGE) {
			dispatch(st, slot, msg);
			json_decref(msg);
			continue;
		}
		if (rc == MB_CHILD_EOF) {
			end_worker(st, slot, false);
		} else if (rc != MB_CHILD_TIMEOUT) {
			/* a garbled pipe: nothing more it says can be trusted */
			notice(st, "gpu%d: %s; its worker is stopped", gpu_index(st, slot), err.text);
			end_worker(st, slot, true);
		}
		return;
	}
}

/* The run was interrupted: each worker sends what finished, or is killed
 * after the grace period. */
static void stop_workers(shard_state *st)
{
	int sig = st->stop_sent ? SIGKILL : SIGTERM;

	for (int k = 0; k < st->so->n_gpus; k++)
		if (st->w[k].running)
			kill(st->w[k].child.pid, sig);
	if (!st->stop_sent)
		st->kill_at_ns = mb_now_ns() + (int64_t)(STOP_GRACE_S * NS_PER_S);
	st->stop_sent = true;
}

static int wait_workers(shard_state *st, mb_error *err)
{
	const mb_progress *p = st->o->progress;
	int64_t refreshed = mb_now_ns();

	for (;;) {
		struct pollfd pfd[MB_SHARD_MAX_GPUS];
		int who[MB_SHARD_MAX_GPUS], n = 0;

		for (int k = 0; k < st->so->n_gpus; k++)
			if (st->w[k].running) {
				pfd[n] = (struct pollfd){.fd = st->w[k].child.fd, .events = POLLIN};
				who[n++] = k;
			}
		if (n == 0)
			return 0;
		if ((*st->o->interrupted && !st->stop_sent) || (st->stop_sent && mb_now_ns() > st->kill_at_ns))
			stop_workers(st);
		if (poll(pfd, (nfds_t)n, REFRESH_MS) < 0 && errno != EINTR)
			return mb_error_set(err, MB_ECHILD, "--gpus", "poll failed: %s", strerror(errno));
		for (int i = 0; i < n; i++)
			if (pfd[i].revents)
				drain(st, who[i]);
		if (mb_now_ns() - refreshed >= REFRESH_MS * NS_PER_MS) {
			refreshed = mb_now_ns();
			if (p && p->refresh)
				p->refresh(p->ctx);
		}
	}
}

/* ---- the receipt ------------------------------------------------------------------ */

/* What became of the slot's worker, when it did not finish its cases:
 * "gpu1 (NVIDIA H200): its worker (pid 4242) was killed by signal 9
 * (Killed)". False when it finished them all, or when the run's own stop
 * ended it (an interrupted run leaves out what was not finished). A worker
 * that died before the stop, killed or crashed, is lost whether or not the
 * run was interrupted afterwards: its record must not depend on what
 * happened to the others later. */
static bool worker_lost(char *buf, size_t len, const shard_state *st, int slot)
{
	const worker *w = &st->w[slot];
	int index = gpu_index(st, slot);
	const char *name = gpu_name(st, slot);

	if (slot_cases(st, slot) == 0 || (st->stop_sent && w->spawned && !w->ended_first))
		return false;
	if (!w->spawned)
		snprintf(buf, len, "gpu%d (%s): its worker %s", index, name, w->ended);
	else if (!w->reported)
		snprintf(buf, len, "gpu%d (%s): its worker (pid %ld) %s%s", index, name, (long)w->pid,
			strncmp(w->ended, "killed", strlen("killed")) ? "" : "was ", w->ended);
	else if (w->rc == MB_EINTERRUPTED)
		snprintf(buf, len, "gpu%d (%s): its worker (pid %ld) was stopped by a signal from outside the run", index,
			name, (long)w->pid);
	else if (w->rc)
		snprintf(buf, len, "gpu%d (%s): its worker stopped on an error: %s", index, name, w->error);
	else
		return false;
	return true;
}

/* The slot's cases without a finished pass. */
static size_t unfinished(const shard_state *st, int slot)
{
	size_t n = 0;

	for (size_t i = 0; i < st->o->plan->n_cases; i++)
		n += st->slot_of_case[i] == slot && json_array_size(json_array_get(st->passes, i)) == 0;
	return n;
}

/* A lost case's error: what became of its GPU's worker. */
static void lost_case_why(char *buf, size_t len, const char *lost)
{
	snprintf(buf, len, "%s before this case finished; the other GPUs' cases are kept", lost);
}

/* The badput fields of a receipt's goodput, as the runner names them. */
#define BADPUT_FIELDS(X) X(context_load) X(ceilings) X(input_generation) X(reference) X(correctness) \
	X(warmup) X(l2_flush)

static void phases_add_goodput(mb_phase_ns *p, const json_t *goodput)
{
	const json_t *bad = json_object_get(goodput, "badput_ns");

	p->goodput += json_integer_value(json_object_get(goodput, "goodput_ns"));
	p->overlapped += json_integer_value(json_object_get(json_object_get(goodput, "overlapped_ns"), "host_work"));
#define X(f) p->f += json_integer_value(json_object_get(bad, #f));
	BADPUT_FIELDS(X)
#undef X
}

/* The receipt's device and ceilings: the first GPU whose worker reported
 * them, with the device's index as --devices names it. A worker that
 * probed another GPU than the topology named is said in a notice. */
static void device_of_run(shard_state *st, json_t **out_device, json_t **out_ceilings)
{
	*out_device = *out_ceilings = NULL;
	for (int k = 0; k < st->so->n_gpus; k++) {
		const json_t *r = st->w[k].receipt;
		const char *probed = json_string_value(json_object_get(json_object_get(r, "device"), "uuid"));
		const char *named = json_string_value(json_object_get(json_array_get(st->gpus, (size_t)k), "uuid"));

		if (!r)
			continue;
		if (probed && named && strcmp(probed, named))
			notice(st, "gpu%d: its worker probed %s, not %s: CUDA_VISIBLE_DEVICES did not select the GPU the "
				"topology named", gpu_index(st, k), probed, named);
		if (*out_device)
			continue;
		*out_device = json_deep_copy(json_object_get(r, "device"));
		*out_ceilings = json_incref(json_object_get(r, "ceilings"));
		if (json_object_get(*out_device, "index"))
			json_object_set_new(*out_device, "index", json_integer(gpu_index(st, k)));
	}
	if (!*out_device)
		*out_device = json_pack("{s:s, s:s}", "backend", st->o->backend->name, "name",
			"unknown (no worker finished its probe)");
	if (!*out_ceilings)
		*out_ceilings = json_pack("{s:n, s:n}", "copy_gbps", "gemm_tflops");
}

/* The lanes of every worker, in suite order (each worker's are). */
static json_t *merged_lanes(const shard_state *st)
{
	json_t *lanes = json_array();

	for (size_t l = 0; l < st->costs->n_lanes; l++) {
		const json_t *done = json_object_get(st->w[st->deal.lane_slot[l]].receipt, "lanes"), *lane;
		size_t i;

		json_array_foreach(done, i, lane)
			if (!strcmp(mb_text_get(lane, "name"), st->costs->lane_name[l]))
				json_array_append(lanes, (json_t *)lane);
	}
	/* no lane dealt: what the worker told about them did (none ran) */
	if (st->costs->n_lanes == 0)
		json_array_extend(lanes, json_object_get(st->w[st->deal.lanes_slot].receipt, "lanes"));
	return lanes;
}

/* What each worker ran, how long and how it ended. */
static json_t *shards_json(const shard_state *st, const size_t *counts)
{
	json_t *shards = json_array();

	for (int k = 0; k < st->so->n_gpus; k++) {
		const worker *w = &st->w[k];
		const json_t *ceilings = json_object_get(w->receipt, "ceilings");
		json_t *dealt = mb_shard_slot_rows(st->rows, st->n_rows, st->o->plan, k), *row;
		json_t *rows = json_array(), *split = json_array();
		json_t *lanes = mb_shard_slot_lanes(st->costs, &st->deal, k);
		size_t i;

		json_array_foreach(dealt, i, row) {
			json_array_append(rows, json_object_get(row, "row"));
			if (json_integer_value(json_object_get(row, "cases")) != json_integer_value(json_object_get(row, "of")))
				json_array_append(split, row);
		}
		json_decref(dealt);
		json_t *shard = json_pack("{s:i, s:o, s:f, s:I, s:I, s:s}", "gpu", k, "rows", rows, "estimated_s",
			st->deal.load_s[k], "cases", (json_int_t)counts[k], "wall_ns", (json_int_t)w->wall_ns, "ended", w->ended);

		if (json_array_size(split))
			json_object_set(shard, "split_rows", split);
		json_decref(split);
		if (json_array_size(lanes))
			json_object_set(shard, "lanes", lanes);
		json_decref(lanes);
		if (json_is_object(ceilings))
			json_object_set(shard, "ceilings", (json_t *)ceilings);
		json_array_append_new(shards, shard);
	}
	return shards;
}

/* The run's status and error from the workers' outcomes. */
static int run_outcome(const shard_state *st, size_t n_cases, const char **status, char *error, size_t len,
	mb_error *err)
{
	*status = "complete";
	error[0] = '\0';
	if (st->stop_sent || *st->o->interrupted) {
		*status = "interrupted";
		snprintf(error, len, "interrupted after %zu of %zu cases", n_cases, st->o->plan->n_cases);
		return mb_error_set(err, MB_EINTERRUPTED, "", "%s", error);
	}
	for (int k = 0; k < st->so->n_gpus; k++) {
		const worker *w = &st->w[k];

		if (!w->reported || !w->rc || w->rc == MB_EINTERRUPTED)
			continue;
		*status = "failed";
		snprintf(error, len, "gpu%d: %s", gpu_index(st, k), w->error);
		return mb_error_set(err, w->rc, "", "%s", error);
	}
	return 0;
}

static int finish(shard_state *st, json_t **out, const char *started, int64_t wall_ns, mb_error *err)
{
	char why[MB_SHARD_MAX_GPUS][2 * WHY_BYTES], what[WHY_BYTES], error[TEXT_BYTES];
	const char *lost[MB_SHARD_MAX_GPUS];
	size_t counts[MB_SHARD_MAX_GPUS];
	mb_shard_merge_in in = {st->o->plan, st->o->backend->name, st->slot_of_case, st->passes, st->so->n_gpus, lost};
	mb_run_parts parts = {.started_at = started, .notices = st->notices, .wall_ns = 0};
	/* the provenance and host read once, before the workers */
	mb_run_options identity = *st->o;
	json_t *cases = NULL, *device = NULL, *ceilings = NULL, *lanes = NULL;
	mb_error outcome;
	int rc;

	*out = NULL;
	identity.provenance = st->prov;
	identity.host = st->host;
	for (int k = 0; k < st->so->n_gpus; k++) {
		lost[k] = NULL;
		if (worker_lost(what, sizeof(what), st, k)) {
			lost_case_why(why[k], sizeof(why[k]), what);
			lost[k] = why[k];
		}
	}
	if ((rc = mb_shard_merge(&cases, counts, &in, err)))
		return rc;
	for (int k = 0; k < st->so->n_gpus; k++)
		if (lost[k] && worker_lost(what, sizeof(what), st, k))
			notice(st, "%s: its %zu unfinished case%s recorded crashed; the other GPUs' cases are kept", what,
				unfinished(st, k), unfinished(st, k) == 1 ? " is" : "s are");
	device_of_run(st, &device, &ceilings);
	/* goodput is a fraction of the GPUs' time: every worker's wall time */
	for (int k = 0; k < st->so->n_gpus; k++) {
		phases_add_goodput(&parts.phases, json_object_get(st->w[k].receipt, "goodput"));
		parts.wall_ns += st->w[k].wall_ns;
	}
	if (parts.wall_ns == 0)
		parts.wall_ns = wall_ns;
	mb_error_clear(&outcome);
	rc = run_outcome(st, json_array_size(cases), &parts.status, error, sizeof(error), &outcome);
	parts.error = error[0] ? error : NULL;
	parts.device = device;
	parts.ceilings = ceilings;
	parts.cases = cases;
	parts.lanes = lanes = merged_lanes(st);
	if (mb_run_receipt(out, &identity, &parts, err) == 0) {
		json_object_set_new(*out, "gpu_count", json_integer(st->so->n_gpus));
		json_object_set(*out, "gpus", st->gpus);
		json_object_set(*out, "topology", st->topology);
		json_object_set_new(*out, "shards", shards_json(st, counts));
		json_object_set_new(*out, "shard_plan", mb_shard_plan_json(st->costs, &st->deal, st->rows, st->n_rows,
			st->o->plan, st->so->n_gpus));
		if (rc && err)
			*err = outcome;
	} else {
		rc = err && err->code ? err->code : MB_ENOMEM;
	}
	json_decref(cases);
	json_decref(device);
	json_decref(ceilings);
	json_decref(lanes);
	return rc;
}

int mb_shard_run(json_t **out, const mb_shard_options *so, mb_error *err)
{
	shard_state st = {.so = so, .o = so->run, .shown = -1};
	const mb_run_options *o = so->run;
	int64_t t0 = mb_now_ns();
	char started[64], checkout_text[MB_RUN_NOTICE_MAX];
	int rc, reps = o->repetitions > 1 ? o->repetitions : 1;

	*out = NULL;
	mb_run_timestamp(started, sizeof(started));
	if (so->n_gpus < 1 || so->n_gpus > MB_SHARD_MAX_GPUS)
		return mb_error_set(err, MB_EINVAL, "--gpus", "%d GPUs: between 1 and %d can share a run", so->n_gpus,
			MB_SHARD_MAX_GPUS);
	st.notices = json_array();
	st.passes = json_array();
	st.slot_of_case = calloc(o->plan->n_cases + 1, sizeof(*st.slot_of_case));
	if (!st.notices || !st.passes || !st.slot_of_case) {
		rc = mb_error_set(err, MB_ENOMEM, "--gpus", "out of memory");
		goto cleanup;
	}
	for (size_t i = 0; i < o->n_notices; i++)
		json_array_append_new(st.notices, json_string(o->notices[i]));
	for (size_t i = 0; i < o->plan->n_cases; i++)
		json_array_append_new(st.passes, json_array());
	/* read once here: every worker's receipt would say the same */
	if ((rc = mb_run_provenance(&st.prov, o, err)) || (rc = mb_host_identity(&st.host, err)))
		goto cleanup;
	if (!json_is_true(json_object_get(st.prov, "available")))
		notice(&st, "no git provenance: %s", json_string_value(json_object_get(st.prov, "reason")));
	if (mb_run_checkout_notice(checkout_text, sizeof(checkout_text), st.prov))
		notice(&st, "%s", checkout_text);
	if ((rc = so->simulated ? simulated_gpus(&st, err) : probe_topology(&st, err)))
		goto cleanup;
	if ((rc = deal_plan(&st, err)))
		goto cleanup;
	if (o->progress && o->progress->begin)
		o->progress->begin(o->progress->ctx, o->plan->n_cases * (size_t)reps, o->backend->name);
	notice(&st, "%d GPU%s, topology %s (source: %s): the rows dealt longest first to the least loaded",
		so->n_gpus, so->n_gpus == 1 ? "" : "s", json_string_value(json_object_get(st.topology, "class")),
		json_string_value(json_object_get(st.topology, "source")));
	deal_notices(&st);
	start_workers(&st);
	rc = wait_workers(&st, err);
	for (int k = 0; k < so->n_gpus; k++)
		if (st.w[k].running)
			end_worker(&st, k, true);
	if (rc == 0)
		rc = finish(&st, out, started, mb_now_ns() - t0, err);
cleanup:
	for (int k = 0; k < so->n_gpus && k < MB_SHARD_MAX_GPUS; k++)
		json_decref(st.w[k].receipt);
	free(st.rows);
	mb_shard_costs_free(&st.model);
	free(st.slot_of_case);
	json_decref(st.passes);
	json_decref(st.notices);
	json_decref(st.gpus);
	json_decref(st.topology);
	json_decref(st.prov);
	json_decref(st.host);
	return rc;
}
