/* CUPTI activity collection; see cupti_timer.h. */
#include "harness/cupti_timer.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mb_config.h"

#if MB_HAVE_CUPTI

#include <dlfcn.h>
#include <pthread.h>
#include "harness/cuda_headers.h"

/* CUPTI asks for buffers as it needs them; 8 MiB holds tens of thousands of
 * kernel records, so a batch of calls rarely spans two buffers. */
#define BUFFER_BYTES ((size_t)8 << 20)
#define BUFFER_ALIGN 8
#define INITIAL_RECORDS 1024
#define EXT_KIND CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0
#define MEMCPY_NAME "[CUDA memcpy]"
#define MEMSET_NAME "[CUDA memset]"

/* One device operation as CUPTI reported it. name is interned (borrowed
 * from the intern table) or NULL for memcpy/memset. */
typedef struct op_rec {
	uint32_t corr;
	uint64_t start, end;
	const char *name;
	int32_t grid[3], block[3];
	uint32_t regs, ssmem, dsmem;
} op_rec;

typedef struct ext_rec {
	uint32_t corr;
	uint64_t ext;
} ext_rec;

typedef char *(*demangle_fn)(const char *mangled, char *buf, size_t *len, int *status);

static struct {
	pthread_mutex_t lock;
	bool started;
	op_rec *ops;
	size_t n_ops, cap_ops;
	ext_rec *exts;
	size_t n_exts, cap_exts;
	struct name_entry {
		const char *raw; /* CUPTI's pointer */
		char *name;      /* demangled (owned) */
	} *names;
	size_t n_names, cap_names;
	ext_rec *apis;   /* API records: correlation id and host start (in .ext) */
	size_t n_apis, cap_apis;
	struct window {
		uint64_t id, begin, end;
	} *wins;         /* host-side bracket of each call, CUPTI's clock */
	size_t n_wins, cap_wins;
	uint64_t seen_ops, seen_exts, seen_apis; /* totals, for diagnosis */
	bool dropped;   /* CUPTI dropped records: results are incomplete */
	demangle_fn demangle;
} T = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int cupti_fail(mb_error *err, CUptiResult r, const char *what)
{
	const char *text = NULL;
	if (cuptiGetResultString(r, &text) != CUPTI_SUCCESS || text == NULL)
		text = "unknown CUPTI error";
	return mb_error_set(err, MB_EDEVICE, "cupti", "%s: %s (%d)", what, text, (int)r);
}

static bool grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return true;
	size_t n = *cap ? *cap * 2 : INITIAL_RECORDS;
	while (n < need)
		n *= 2;
	void *p = realloc(*arr, n * elem);
	if (p == NULL)
		return false;
	*arr = p;
	*cap = n;
	return true;
}

/* The demangled name for CUPTI's pointer, interned. Kernels keep their name
 * pointer for the life of the module, so the pointer check usually answers
 * without a string compare or a demangle. Called with the lock held. */
static const char *intern(const char *raw)
{
	if (raw == NULL)
		return "[unknown kernel]";
	for (size_t i = 0; i < T.n_names; i++)
		if (T.names[i].raw == raw)
			return T.names[i].name;
	char *name = NULL;
	int status = -1;
	if (T.demangle != NULL)
		name = T.demangle(raw, NULL, NULL, &status);
	if (name == NULL || status != 0) {
		free(name);
		name = strdup(raw);
	}
	if (name == NULL || !grow((void **)&T.names, &T.cap_names, T.n_names + 1, sizeof *T.names)) {
		free(name);
		return "[unknown kernel]";
	}
	T.names[T.n_names].raw = raw;
	T.names[T.n_names].name = name;
	return T.names[T.n_names++].name;
}

static void add_op(const op_rec *r)
{
	if (!grow((void **)&T.ops, &T.cap_ops, T.n_ops + 1, sizeof *T.ops)) {
		T.dropped = true;
		return;
	}
	T.ops[T.n_ops++] = *r;
	T.seen_ops++;
}

static void take_record(const CUpti_Activity *rec)
{
	op_rec op;
	memset(&op, 0, sizeof op);
	switch (rec->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
		const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
		op.corr = k->correlationId;
		op.start = k->start;
		op.end = k->end;
		op.name = intern(k->name);
		op.grid[0] = k->gridX, op.grid[1] = k->gridY, op.grid[2] = k->gridZ;
		op.block[0] = k->blockX, op.block[1] = k->blockY, op.block[2] = k->blockZ;
		op.regs = k->registersPerThread;
		op.ssmem = (uint32_t)k->staticSharedMemory;
		op.dsmem = (uint32_t)k->dynamicSharedMemory;
		add_op(&op);
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
		op.corr = m->correlationId;
		op.start = m->start;
		op.end = m->end;
		op.name = MEMCPY_NAME;
		add_op(&op);
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)rec;
		op.corr = m->correlationId;
		op.start = m->start;
		op.end = m->end;
		op.name = MEMSET_NAME;
		add_op(&op);
		break;
	}
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_DRIVER: {
		const CUpti_ActivityAPI *a = (const CUpti_ActivityAPI *)rec;
		if (!grow((void **)&T.apis, &T.cap_apis, T.n_apis + 1, sizeof *T.apis)) {
			T.dropped = true;
			break;
		}
		T.apis[T.n_apis].corr = a->correlationId;
		T.apis[T.n_apis].ext = a->start;
		T.n_apis++;
		T.seen_apis++;
		break;
	}
	case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
		const CUpti_ActivityExternalCorrelation *x = (const CUpti_ActivityExternalCorrelation *)rec;
		if (x->externalKind != EXT_KIND)
			break;
		if (!grow((void **)&T.exts, &T.cap_exts, T.n_exts + 1, sizeof *T.exts)) {
			T.dropped = true;
			break;
		}
		T.exts[T.n_exts].corr = x->correlationId;
		T.exts[T.n_exts].ext = x->externalId;
		T.n_exts++;
		T.seen_exts++;
		break;
	}
	default:
		break;
	}
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	*buffer = aligned_alloc(BUFFER_ALIGN, BUFFER_BYTES);
	*size = *buffer != NULL ? BUFFER_BYTES : 0;
	*max_records = 0; /* as many as fit */
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
	size_t size, size_t valid_size)
{
	CUpti_Activity *rec = NULL;
	pthread_mutex_lock(&T.lock);
	while (cuptiActivityGetNextRecord(buffer, valid_size, &rec) == CUPTI_SUCCESS)
		take_record(rec);
	size_t dropped = 0;
	if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS && dropped > 0)
		T.dropped = true;
	pthread_mutex_unlock(&T.lock);
	free(buffer);
}

/* RUNTIME and DRIVER give the API records that external correlation
 * records hang off, and the host start times the window fallback uses. */
static const CUpti_ActivityKind KINDS[] = {
	CUPTI_ACTIVITY_KIND_RUNTIME,
	CUPTI_ACTIVITY_KIND_DRIVER,
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
	CUPTI_ACTIVITY_KIND_MEMCPY,
	CUPTI_ACTIVITY_KIND_MEMSET,
	CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
};

int mb_cupti_start(mb_error *err)
{
	int rc = 0;
	CUptiResult r;
	if (T.started)
		goto cleanup;
	/* libstdc++ is already loaded by cuBLAS and CUPTI; borrowing its
	 * demangler costs nothing, and without it names stay mangled. */
	*(void **)&T.demangle = dlsym(RTLD_DEFAULT, "__cxa_demangle");
	r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
	if (r != CUPTI_SUCCESS) {
		rc = cupti_fail(err, r, "cuptiActivityRegisterCallbacks");
		goto cleanup;
	}
	for (size_t i = 0; i < sizeof KINDS / sizeof KINDS[0]; i++) {
		r = cuptiActivityEnable(KINDS[i]);
		if (r != CUPTI_SUCCESS) {
			rc = cupti_fail(err, r, "cuptiActivityEnable");
			goto cleanup;
		}
	}
	T.started = true;
cleanup:
	return rc;
}

void mb_cupti_stop(void)
{
	if (T.started) {
		cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		for (size_t i = 0; i < sizeof KINDS / sizeof KINDS[0]; i++)
			cuptiActivityDisable(KINDS[i]);
		T.started = false;
	}
	pthread_mutex_lock(&T.lock);
	free(T.ops);
	free(T.exts);
	free(T.apis);
	free(T.wins);
	T.apis = NULL, T.wins = NULL;
	T.n_apis = T.cap_apis = T.n_wins = T.cap_wins = 0;
	for (size_t i = 0; i < T.n_names; i++)
		free(T.names[i].name);
	free(T.names);
	T.ops = NULL, T.exts = NULL, T.names = NULL;
	T.n_ops = T.cap_ops = T.n_exts = T.cap_exts = T.n_names = T.cap_names = 0;
	pthread_mutex_unlock(&T.lock);
}

int mb_cupti_version(char *buf, size_t len, mb_error *err)
{
	uint32_t v = 0;
	CUptiResult r = cuptiGetVersion(&v);
	if (r != CUPTI_SUCCESS)
		return cupti_fail(err, r, "cuptiGetVersion");
	snprintf(buf, len, "%u", v);
	return 0;
}

/* Besides the external id, each call's host window on CUPTI's clock is
 * kept: an API record that starts inside it belongs to the call. That
 * second path needs only API records, so a CUPTI that emits no external
 * correlation records still attributes every launch. */
int mb_cupti_call_begin(uint64_t id, mb_error *err)
{
	uint64_t now = 0;
	pthread_mutex_lock(&T.lock);
	bool ok = grow((void **)&T.wins, &T.cap_wins, T.n_wins + 1, sizeof *T.wins);
	if (ok) {
		cuptiGetTimestamp(&now);
		T.wins[T.n_wins].id = id;
		T.wins[T.n_wins].begin = now;
		T.wins[T.n_wins].end = UINT64_MAX;
		T.n_wins++;
	}
	pthread_mutex_unlock(&T.lock);
	if (!ok)
		return mb_error_set(err, MB_ENOMEM, "cupti", "out of memory for call windows");
	CUptiResult r = cuptiActivityPushExternalCorrelationId(EXT_KIND, id);
	return r == CUPTI_SUCCESS ? 0 : cupti_fail(err, r, "cuptiActivityPushExternalCorrelationId");
}

int mb_cupti_call_end(mb_error *err)
{
	uint64_t last = 0, now = 0;
	CUptiResult r = cuptiActivityPopExternalCorrelationId(EXT_KIND, &last);
	cuptiGetTimestamp(&now);
	pthread_mutex_lock(&T.lock);
	if (T.n_wins > 0)
		T.wins[T.n_wins - 1].end = now;
	pthread_mutex_unlock(&T.lock);
	return r == CUPTI_SUCCESS ? 0 : cupti_fail(err, r, "cuptiActivityPopExternalCorrelationId");
}

void mb_cupti_counts(uint64_t *ops, uint64_t *exts, uint64_t *apis)
{
	pthread_mutex_lock(&T.lock);
	*ops = T.seen_ops;
	*exts = T.seen_exts;
	*apis = T.seen_apis;
	pthread_mutex_unlock(&T.lock);
}

int mb_cupti_flush(mb_error *err)
{
	CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	return r == CUPTI_SUCCESS ? 0 : cupti_fail(err, r, "cuptiActivityFlushAll");
}

/* One attributed operation, for ordering a call's launches by start. */
typedef struct timed_op {
	size_t call;
	uint64_t start, end;
} timed_op;

static int cmp_timed_op(const void *a, const void *b)
{
	const timed_op *x = a, *y = b;
	if (x->call != y->call)
		return (x->call > y->call) - (x->call < y->call);
	return (x->start > y->start) - (x->start < y->start);
}

static int cmp_ext(const void *a, const void *b)
{
	const ext_rec *x = a, *y = b;
	return (x->corr > y->corr) - (x->corr < y->corr);
}

/* The external id of a CUPTI correlation id, 0 when the launch was not
 * bracketed. exts is sorted by corr. */
static uint64_t ext_of(uint32_t corr)
{
	size_t lo = 0, hi = T.n_exts;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (T.exts[mid].corr < corr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < T.n_exts && T.exts[lo].corr == corr ? T.exts[lo].ext : 0;
}

static int kernel_add(mb_cupti_kernels *k, const op_rec *op)
{
	for (int i = 0; i < k->n; i++) {
		if (strcmp(k->items[i].name, op->name) == 0) {
			k->items[i].calls++;
			return 0;
		}
	}
	if (k->n == k->cap) {
		int cap = k->cap ? k->cap * 2 : 8;
		mb_cupti_kernel *p = realloc(k->items, (size_t)cap * sizeof *p);
		if (p == NULL)
			return MB_ENOMEM;
		k->items = p;
		k->cap = cap;
	}
	mb_cupti_kernel *e = &k->items[k->n];
	memset(e, 0, sizeof *e);
	e->name = strdup(op->name);
	if (e->name == NULL)
		return MB_ENOMEM;
	e->calls = 1;
	memcpy(e->grid, op->grid, sizeof e->grid);
	memcpy(e->block, op->block, sizeof e->block);
	e->registers = op->regs;
	e->static_shared_bytes = op->ssmem;
	e->dynamic_shared_bytes = op->dsmem;
	k->n++;
	return 0;
}

int mb_cupti_collect(mb_cupti_call *calls, uint64_t first_id, int n,
	mb_cupti_kernels *kernels, int n_listed, int64_t *launch_ns, int launch_cap, mb_error *err)
{
	int rc = 0;
	uint64_t *first_start = NULL, *last_end = NULL;
	timed_op *ordered = NULL;
	size_t n_ordered = 0;
	pthread_mutex_lock(&T.lock);
	first_start = calloc((size_t)n + 1, sizeof *first_start);
	last_end = calloc((size_t)n + 1, sizeof *last_end);
	ordered = malloc((T.n_ops ? T.n_ops : 1) * sizeof *ordered);
	if (first_start == NULL || last_end == NULL || ordered == NULL) {
		rc = mb_error_set(err, MB_ENOMEM, "cupti", "out of memory collecting %d calls", n);
		goto cleanup;
	}
	if (T.dropped) {
		rc = mb_error_set(err, MB_EDEVICE, "cupti", "CUPTI dropped activity records");
		T.dropped = false;
		goto cleanup;
	}
	for (int i = 0; i < n; i++) {
		calls[i].id = first_id + (uint64_t)i;
		calls[i].busy_ns = 0;
		calls[i].span_ns = 0;
		calls[i].launches = 0;
		calls[i].memcpy_ns = calls[i].memset_ns = 0;
	}
	if (launch_ns != NULL)
		memset(launch_ns, 0, (size_t)n_listed * (size_t)launch_cap * sizeof *launch_ns);
	/* API records inside a call's window map their correlation id to the
	 * call, unless an external correlation record already did. */
	qsort(T.exts, T.n_exts, sizeof *T.exts, cmp_ext);
	size_t n_direct = T.n_exts;
	for (size_t a = 0; a < T.n_apis; a++) {
		for (size_t w = 0; w < T.n_wins; w++) {
			if (T.apis[a].ext < T.wins[w].begin || T.apis[a].ext > T.wins[w].end)
				continue;
			bool known = false;
			for (size_t lo = 0, hi = n_direct; lo < hi && !known;) {
				size_t mid = lo + (hi - lo) / 2;
				known = T.exts[mid].corr == T.apis[a].corr;
				if (T.exts[mid].corr < T.apis[a].corr)
					lo = mid + 1;
				else
					hi = mid;
			}
			if (!known && grow((void **)&T.exts, &T.cap_exts, T.n_exts + 1, sizeof *T.exts)) {
				T.exts[T.n_exts].corr = T.apis[a].corr;
				T.exts[T.n_exts].ext = T.wins[w].id;
				T.n_exts++;
			}
			break;
		}
	}
	qsort(T.exts, T.n_exts, sizeof *T.exts, cmp_ext);
	for (size_t i = 0; i < T.n_ops; i++) {
		const op_rec *op = &T.ops[i];
		uint64_t ext = ext_of(op->corr);
		if (ext < first_id || ext >= first_id + (uint64_t)n)
			continue;
		size_t c = (size_t)(ext - first_id);
		calls[c].busy_ns += (int64_t)(op->end - op->start);
		calls[c].launches++;
		if (strcmp(op->name, MEMCPY_NAME) == 0)
			calls[c].memcpy_ns += (int64_t)(op->end - op->start);
		else if (strcmp(op->name, MEMSET_NAME) == 0)
			calls[c].memset_ns += (int64_t)(op->end - op->start);
		ordered[n_ordered++] = (timed_op){c, op->start, op->end};
		if (first_start[c] == 0 || op->start < first_start[c])
			first_start[c] = op->start;
		if (op->end > last_end[c])
			last_end[c] = op->end;
		if (kernels != NULL && c < (size_t)n_listed) {
			rc = kernel_add(kernels, op);
			if (rc != 0) {
				mb_error_set(err, rc, "cupti", "out of memory listing kernels");
				goto cleanup;
			}
		}
	}
	for (int i = 0; i < n; i++)
		if (calls[i].launches > 0)
			calls[i].span_ns = (int64_t)(last_end[i] - first_start[i]);
	qsort(ordered, n_ordered, sizeof *ordered, cmp_timed_op);
	for (size_t k = 0, at = 0; k < n_ordered; k++) {
		at = k > 0 && ordered[k].call == ordered[k - 1].call ? at + 1 : 0;
		if (launch_ns != NULL && ordered[k].call < (size_t)n_listed && at < (size_t)launch_cap)
			launch_ns[ordered[k].call * (size_t)launch_cap + at] = (int64_t)(ordered[k].end - ordered[k].start);
	}
cleanup:
	T.n_ops = 0;
	T.n_exts = 0;
	T.n_apis = 0;
	T.n_wins = 0;
	pthread_mutex_unlock(&T.lock);
	free(first_start);
	free(last_end);
	free(ordered);
	return rc;
}

void mb_cupti_discard(void)
{
	pthread_mutex_lock(&T.lock);
	T.n_ops = 0;
	T.n_exts = 0;
	T.n_apis = 0;
	T.n_wins = 0;
	T.dropped = false;
	pthread_mutex_unlock(&T.lock);
}

#else /* !MB_HAVE_CUPTI */

static int no_cupti(mb_error *err)
{
	return mb_error_set(err, MB_EUNSUPPORTED, "cupti", "built without CUPTI");
}

int mb_cupti_start(mb_error *err) { return no_cupti(err); }
void mb_cupti_stop(void) {}
int mb_cupti_version(char *buf, size_t len, mb_error *err) { return no_cupti(err); }
int mb_cupti_call_begin(uint64_t id, mb_error *err) { return no_cupti(err); }
int mb_cupti_call_end(mb_error *err) { return no_cupti(err); }
int mb_cupti_flush(mb_error *err) { return no_cupti(err); }
int mb_cupti_collect(mb_cupti_call *calls, uint64_t first_id, int n,
	mb_cupti_kernels *kernels, int n_listed, int64_t *launch_ns, int launch_cap, mb_error *err)
{
	return no_cupti(err);
}
void mb_cupti_discard(void) {}
void mb_cupti_counts(uint64_t *ops, uint64_t *exts, uint64_t *apis) { *ops = *exts = *apis = 0; }

#endif

json_t *mb_cupti_kernels_json(const mb_cupti_kernels *k)
{
	json_t *arr = json_array();
	for (int i = 0; arr != NULL && k != NULL && i < k->n; i++) {
		const mb_cupti_kernel *e = &k->items[i];
		json_t *o = json_pack("{s:s, s:I, s:[iii], s:[iii], s:I, s:I, s:I}",
			"name", e->name, "calls", (json_int_t)e->calls,
			"grid", e->grid[0], e->grid[1], e->grid[2],
			"block", e->block[0], e->block[1], e->block[2],
			"registers", (json_int_t)e->registers,
			"static_shared_bytes", (json_int_t)e->static_shared_bytes,
			"dynamic_shared_bytes", (json_int_t)e->dynamic_shared_bytes);
		if (o == NULL || json_array_append_new(arr, o) != 0) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

void mb_cupti_kernels_free(mb_cupti_kernels *k)
{
	if (k == NULL)
		return;
	for (int i = 0; i < k->n; i++)
		free(k->items[i].name);
	free(k->items);
	k->items = NULL;
	k->n = k->cap = 0;
}
