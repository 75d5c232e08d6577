/* The CUDA backend: device probe, and one case at a time on one stream.
 *
 * A case runs: fresh seeded inputs (rounded to the dtype) copied to the
 * device; the reference on the same rounded inputs, on a row sample; a first
 * call on NaN-poisoned outputs, checked; warm-up; timed calls in the case's
 * mode, each bracketed by a CUPTI external correlation id and a pair of
 * events; and a last timed call, again on poisoned outputs, checked too.
 * CUPTI's kernel records give the samples (busy time per call), the span,
 * the launch count and the kernel names that the signature check compares
 * with the variant's declaration; the events are the cross-check.
 *
 * A CUDA error ends the case, not the process: out-of-memory is "oom", a
 * launch the variant refuses is "skipped", anything else is "crashed", and
 * a sticky error (illegal address, ...) marks the context lost so that
 * later cases in this child say so at once; the parent then starts a fresh
 * child for the next row.
 */
#include "harness/backend.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness/case_common.h"
#include "harness/cuda_blocker.h"
#include "harness/cuda_flush.h"
#include "harness/cuda_headers.h"
#include "harness/cuda_ceilings.h"
#include "harness/cuda_device.h"
#include "harness/cupti_timer.h"
#include "mb_config.h"

#define DEVICE_INDEX 0
/* Cold mode writes this many times the L2 size between calls. */
#define FLUSH_L2_MULTIPLE 2
/* Hot and graph modes enqueue this many calls back to back per batch
 * before waiting for them; cold mode waits after every call. */
#define HOT_BATCH 16
/* A sample whose SM clock is below this fraction of the clock at the start
 * of the case is excluded. */
#define CLOCK_SAG_FRACTION 0.9
#define POISON_BYTE 0xFF /* 0xFFFF... is a NaN in fp32, fp16 and bf16 */
#define DEVICES_QUERY_TIMEOUT_MS 60000
#define ROW_SEED_SALT 0x726f7773ULL /* "rows" */
#define NS_PER_MS 1e6
#define WHY_BYTES 256

static struct {
	bool ready;
	bool cupti;
	bool lost;                    /* a sticky error: the context is unusable */
	char lost_text[WHY_BYTES];
	char cupti_why[MB_ERROR_TEXT_MAX];
	cudaStream_t stream;
	cudaEvent_t ev[2 * HOT_BATCH];
	void *flush_buf;
	size_t flush_bytes;
	unsigned flush_value;
	mb_blocker blocker;
	bool blocked;                 /* the blocker could be set up */
	uint64_t next_id;
} B = {.next_id = 1};

/* ---- errors ------------------------------------------------------------ */

static bool is_sticky(cudaError_t ce)
{
	switch (ce) {
	case cudaSuccess:
	case cudaErrorMemoryAllocation:
	case cudaErrorInvalidValue:
	case cudaErrorInvalidConfiguration:
	case cudaErrorNotSupported:
	case cudaErrorNotReady:
		return false;
	default:
		return true;
	}
}

/* Record a CUDA failure as the case's status. `launched` says whether the
 * error came from the variant's launch function itself (a refusal of the
 * shape is then "skipped", not a crash). */
static void case_cuda_fail(json_t *c, cudaError_t ce, const char *what, bool launched)
{
	char text[WHY_BYTES];
	snprintf(text, sizeof text, "%s: %s: %s", what, cudaGetErrorName(ce), cudaGetErrorString(ce));
	if (ce == cudaErrorMemoryAllocation) {
		mb_case_json_set_status(c, "oom", text);
	} else if (launched && !is_sticky(ce)) {
		mb_case_json_set_status(c, "skipped", text);
	} else {
		mb_case_json_set_status(c, "crashed", text);
	}
	if (is_sticky(ce)) {
		B.lost = true;
		snprintf(B.lost_text, sizeof B.lost_text, "%s", text);
	}
}

/* ---- setup ------------------------------------------------------------- */

static int ensure_ready(mb_phase_ns *phases, mb_error *err)
{
	int rc = 0;
	cudaError_t ce;
	int64_t t0 = mb_now_ns();
	int l2 = 0;
	mb_error cerr;
	if (B.ready)
		return 0;
	/* CUPTI first, so that the context is created with activity on. */
	mb_error_clear(&cerr);
	B.cupti = mb_cupti_start(&cerr) == 0;
	if (!B.cupti)
		snprintf(B.cupti_why, sizeof B.cupti_why, "%s", cerr.text);
	if ((ce = cudaSetDevice(DEVICE_INDEX)) != cudaSuccess || (ce = cudaFree(NULL)) != cudaSuccess ||
	    (ce = cudaStreamCreateWithFlags(&B.stream, cudaStreamNonBlocking)) != cudaSuccess ||
	    (ce = cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, DEVICE_INDEX)) != cudaSuccess) {
		rc = mb_error_set(err, MB_EDEVICE, "cuda", "device setup: %s", cudaGetErrorString(ce));
		goto cleanup;
	}
	for (int i = 0; i < 2 * HOT_BATCH; i++) {
		if ((ce = cudaEventCreate(&B.ev[i])) != cudaSuccess) {
			rc = mb_error_set(err, MB_EDEVICE, "cuda", "cudaEventCreate: %s", cudaGetErrorString(ce));
			goto cleanup;
		}
	}
	/* without the blocker events still work, only less exactly */
	B.blocked = mb_blocker_init(&B.blocker) == 0;
	B.flush_bytes = (size_t)l2 * FLUSH_L2_MULTIPLE;
	if ((ce = cudaMalloc(&B.flush_buf, B.flush_bytes)) != cudaSuccess) {
		rc = mb_error_set(err, MB_EDEVICE, "cuda", "cudaMalloc(%zu) for the L2 flush: %s",
			B.flush_bytes, cudaGetErrorString(ce));
		goto cleanup;
	}
	char why[WHY_BYTES];
	mb_cuda_nvml_open(DEVICE_INDEX, why, sizeof why);
	B.ready = true;
cleanup:
	if (phases != NULL)
		phases->context_load += mb_now_ns() - t0;
	return rc;
}

static int cuda_probe(json_t **out_device, json_t **out_ceilings, mb_phase_ns *phases, mb_error *err)
{
	int rc = 0;
	json_t *dev = NULL, *ceil = NULL;
	*out_device = NULL;
	*out_ceilings = NULL;
	if ((rc = ensure_ready(phases, err)) != 0)
		goto cleanup;
	int64_t t0 = mb_now_ns();
	if ((rc = mb_cuda_device_json(&dev, DEVICE_INDEX, err)) != 0)
		goto cleanup;
	if (!B.cupti)
		json_object_set_new(dev, "clocks_note", json_string(B.cupti_why));
	phases->context_load += mb_now_ns() - t0;
	t0 = mb_now_ns();
	if (getenv("MEGABENCH_SKIP_CEILINGS")) {
		/* under compute-sanitizer or for a quick look: no fractions of a
		 * ceiling, and the receipt says why */
		ceil = json_pack("{s:n, s:n, s:s, s:s}", "copy_gbps", "gemm_tflops",
			"copy_source", "skipped: MEGABENCH_SKIP_CEILINGS was set",
			"gemm_source", "skipped: MEGABENCH_SKIP_CEILINGS was set");
	} else {
		rc = mb_cuda_ceilings_measure(&ceil, B.stream, B.cupti, err);
	}
	phases->ceilings += mb_now_ns() - t0;
	if (rc != 0)
		goto cleanup;
	*out_device = dev;
	*out_ceilings = ceil;
	dev = ceil = NULL;
cleanup:
	json_decref(dev);
	json_decref(ceil);
	return rc;
}

static void cuda_shutdown(void)
{
	if (B.ready) {
		cudaStreamSynchronize(B.stream);
		for (int i = 0; i < 2 * HOT_BATCH; i++)
			cudaEventDestroy(B.ev[i]);
		cudaFree(B.flush_buf);
		mb_blocker_free(&B.blocker);
		cudaStreamDestroy(B.stream);
	}
	mb_cupti_stop();
	mb_cuda_nvml_close();
	B.ready = false;
}

/* ---- one case ---------------------------------------------------------- */

typedef struct case_run {
	const mb_case_plan *plan;
	const mb_settings *settings;
	json_t *c;
	mb_host_tensors ht;
	bool ht_made;
	void *dev[MB_MAX_TENSORS];
	size_t bytes[MB_MAX_TENSORS];
	size_t total_bytes;
	void *staging;
	int64_t *rows;
	int64_t n_rows, rows_total;
	uint64_t row_seed;
	float *want[MB_MAX_TENSORS];
	bool want_made;
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	mb_sampler s;
	bool s_made;
	double *ev_ns, *span_ns;
	int *launches;
	int n_calls, cap_calls;
	bool sagged;
	bool cupti_gap;  /* some call had no CUPTI records: samples fall back to events */
	unsigned clock_start_mhz;
	bool clock_known;
	mb_cupti_kernels kernels;
	mb_check first, last;
	mb_phase_ns *phases;
} case_run;

/* The variant's call: the launch function, or one graph replay. */
static cudaError_t call_variant(case_run *r)
{
	if (r->exec != NULL)
		return cudaGraphLaunch(r->exec, B.stream);
	const mb_tensor_spec *spec = r->ht.spec;
	const void *in[MB_MAX_TENSORS];
	void *out[MB_MAX_TENSORS];
	int ni = 0, no = 0;
	for (int i = 0; i < r->ht.n_tensors; i++) {
		if (spec[i].is_output)
			out[no++] = r->dev[i];
		else
			in[ni++] = r->dev[i];
	}
	return (cudaError_t)r->plan->variant->launch(B.stream, r->plan->axis, r->plan->dtype, in, out);
}

static int alloc_tensors(case_run *r, cudaError_t *ce)
{
	size_t biggest = 0;
	for (int i = 0; i < r->ht.n_tensors; i++) {
		r->bytes[i] = (size_t)r->ht.elems[i] * mb_tensor_elem_bytes(&r->ht.spec[i], r->plan->dtype);
		r->total_bytes += r->bytes[i];
		biggest = r->bytes[i] > biggest ? r->bytes[i] : biggest;
		if ((*ce = cudaMalloc(&r->dev[i], r->bytes[i])) != cudaSuccess)
			return 1;
	}
	r->staging = malloc(biggest ? biggest : 1);
	if (r->staging == NULL)
		return MB_ENOMEM;
	for (int i = 0; i < r->ht.n_tensors; i++) {
		if (r->ht.spec[i].is_output)
			continue;
		mb_tensor_pack(&r->ht.spec[i], r->plan->dtype, r->ht.data[i], r->staging, r->ht.elems[i]);
		if ((*ce = cudaMemcpy(r->dev[i], r->staging, r->bytes[i], cudaMemcpyHostToDevice)) != cudaSuccess)
			return 1;
	}
	return 0;
}

static cudaError_t poison_outputs(case_run *r)
{
	cudaError_t ce = cudaSuccess;
	for (int i = 0; i < r->ht.n_tensors && ce == cudaSuccess; i++)
		if (r->ht.spec[i].is_output)
			ce = cudaMemsetAsync(r->dev[i], POISON_BYTE, r->bytes[i], B.stream);
	return ce;
}

/* Copy the outputs back (after the stream is idle) and compare them with
 * the reference into *chk. */
static cudaError_t check_outputs(case_run *r, mb_check *chk)
{
	cudaError_t ce = cudaSuccess;
	const mb_tolerance *tol = &r->plan->row->tolerance[r->plan->dtype];
	mb_check_init(chk);
	for (int i = 0; i < r->ht.n_tensors; i++) {
		if (!r->ht.spec[i].is_output)
			continue;
		if ((ce = cudaMemcpy(r->staging, r->dev[i], r->bytes[i], cudaMemcpyDeviceToHost)) != cudaSuccess)
			return ce;
		mb_tensor_unpack(&r->ht.spec[i], r->plan->dtype, r->staging, r->ht.data[i], r->ht.elems[i]);
		mb_check_add(chk, &r->ht.spec[i], r->ht.data[i], r->want[i], r->rows, r->n_rows,
			r->ht.spec[r->ht.n_inputs].rows, tol);
	}
	return ce;
}

static int record_call(case_run *r, double ev_ns, double span_ns, int launches, mb_error *err)
{
	if (r->n_calls == r->cap_calls) {
		int cap = r->cap_calls ? r->cap_calls * 2 : 64;
		double *a = realloc(r->ev_ns, (size_t)cap * sizeof *a);
		if (a != NULL)
			r->ev_ns = a;
		double *b = realloc(r->span_ns, (size_t)cap * sizeof *b);
		if (b != NULL)
			r->span_ns = b;
		int *l = realloc(r->launches, (size_t)cap * sizeof *l);
		if (l != NULL)
			r->launches = l;
		if (a == NULL || b == NULL || l == NULL)
			return mb_error_set(err, MB_ENOMEM, r->plan->id, "out of memory for samples");
		r->cap_calls = cap;
	}
	r->ev_ns[r->n_calls] = ev_ns;
	r->span_ns[r->n_calls] = span_ns;
	r->launches[r->n_calls] = launches;
	r->n_calls++;
	return 0;
}

/* Enqueue `n` timed calls in the case's mode, wait, and turn CUPTI's
 * records and the events into samples. Returns 0, a negative MB_E* harness
 * error, or 1 with *ce set for a CUDA failure. */
static int timed_batch(case_run *r, int n, mb_error *err, cudaError_t *ce)
{
	int rc = 0;
	mb_cupti_call calls[HOT_BATCH];
	uint64_t first_id = B.next_id;
	bool cold = r->plan->mode == MB_MODE_COLD;
	bool held = false;
	for (int i = 0; i < n; i++) {
		if (cold) {
			/* A new value each time, so no write is ever a no-op. */
			int64_t t0 = mb_now_ns();
			*ce = cudaMemsetAsync(B.flush_buf, (int)(++B.flush_value & 0xFF), B.flush_bytes, B.stream);
			if (*ce == cudaSuccess)
				*ce = (cudaError_t)mb_l2_flush_read(B.stream, B.flush_buf, B.flush_bytes,
					(unsigned *)B.flush_buf);
			if (*ce == cudaSuccess)
				*ce = cudaStreamSynchronize(B.stream);
			r->phases->l2_flush += mb_now_ns() - t0;
			if (*ce != cudaSuccess)
				goto done;
		}
		/* hold the stream while the events and calls are enqueued (a cold
		 * call alone, a hot or graph batch together) */
		if (B.blocked && !held) {
			if ((*ce = (cudaError_t)mb_blocker_hold(&B.blocker, B.stream)) != cudaSuccess)
				goto done;
			held = true;
		}
		uint64_t id = B.next_id++;
		if (B.cupti && (rc = mb_cupti_call_begin(id, err)) != 0)
			goto done;
		*ce = cudaEventRecord(B.ev[2 * i], B.stream);
		if (*ce == cudaSuccess)
			*ce = call_variant(r);
		if (*ce == cudaSuccess)
			*ce = cudaEventRecord(B.ev[2 * i + 1], B.stream);
		if (B.cupti && (rc = mb_cupti_call_end(err)) != 0)
			goto done;
		if (*ce != cudaSuccess)
			goto done;
		if (cold && held) {
			mb_blocker_release(&B.blocker);
			held = false;
		}
	}
	if (held) {
		mb_blocker_release(&B.blocker);
		held = false;
	}
	if ((*ce = cudaStreamSynchronize(B.stream)) != cudaSuccess)
		goto done;
	if (B.cupti && ((rc = mb_cupti_flush(err)) != 0 ||
	                (rc = mb_cupti_collect(calls, first_id, n, &r->kernels, err)) != 0))
		goto done;
	unsigned mhz = 0;
	bool sag = r->clock_known && mb_cuda_nvml_sm_clock_mhz(&mhz) &&
		(double)mhz < CLOCK_SAG_FRACTION * (double)r->clock_start_mhz;
	r->sagged = r->sagged || sag;
	for (int i = 0; i < n; i++) {
		float ms = 0.0f;
		if ((*ce = cudaEventElapsedTime(&ms, B.ev[2 * i], B.ev[2 * i + 1])) != cudaSuccess)
			goto done;
		double ev_ns = (double)ms * NS_PER_MS;
		double sample = B.cupti ? (double)calls[i].busy_ns : ev_ns;
		r->cupti_gap = r->cupti_gap || (B.cupti && calls[i].launches == 0);
		if ((rc = mb_sampler_add(&r->s, sample, sag, err)) != 0 ||
		    (rc = record_call(r, ev_ns, B.cupti ? (double)calls[i].span_ns : ev_ns,
		                      B.cupti ? calls[i].launches : -1, err)) != 0)
			goto done;
	}
done:
	if (held)
		mb_blocker_release(&B.blocker);
	if (rc == 0 && *ce != cudaSuccess)
		rc = 1;
	return rc;
}

static cudaError_t build_graph(case_run *r)
{
	cudaError_t ce = cudaStreamBeginCapture(B.stream, cudaStreamCaptureModeThreadLocal);
	if (ce != cudaSuccess)
		return ce;
	cudaError_t launch = call_variant(r);
	ce = cudaStreamEndCapture(B.stream, &r->graph);
	if (launch != cudaSuccess)
		return launch;
	if (ce != cudaSuccess)
		return ce;
	return cudaGraphInstantiate(&r->exec, r->graph, 0);
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

static double median_of(double *v, int n)
{
	if (n == 0)
		return NAN;
	qsort(v, (size_t)n, sizeof *v, mb_cmp_double);
	return mb_quantile_sorted(v, n, 0.5);
}

/* Compare what CUPTI saw with what the variant declares. */
static void add_signature(case_run *r, int observed)
{
	const mb_variant *v = r->plan->variant;
	json_t *expected = json_array();
	bool matches = B.cupti && observed == v->launches_per_call;
	int n_patterns = 0;
	for (int p = 0; p < MB_MAX_KERNEL_PATTERNS && v->kernel_patterns[p] != NULL; p++, n_patterns++) {
		json_array_append_new(expected, json_string(v->kernel_patterns[p]));
		bool seen = false;
		for (int k = 0; k < r->kernels.n; k++)
			seen = seen || strstr(r->kernels.items[k].name, v->kernel_patterns[p]) != NULL;
		if (!seen) {
			matches = false;
			mb_case_json_add_finding(r->c, "launch_signature",
				"declared kernel '%s' never ran", v->kernel_patterns[p]);
		}
	}
	for (int k = 0; k < r->kernels.n; k++) {
		bool declared = false;
		for (int p = 0; p < n_patterns; p++)
			declared = declared || strstr(r->kernels.items[k].name, v->kernel_patterns[p]) != NULL;
		if (!declared) {
			matches = false;
			mb_case_json_add_finding(r->c, "launch_signature",
				"undeclared kernel ran: %s", r->kernels.items[k].name);
		}
	}
	if (!B.cupti)
		mb_case_json_add_finding(r->c, "launch_signature",
			"launches not observed (CUPTI unavailable: %s)", B.cupti_why);
	else if (observed != v->launches_per_call)
		mb_case_json_add_finding(r->c, "launch_signature",
			"%d launches per call observed, %d declared", observed, v->launches_per_call);
	json_object_set_new(r->c, "signature", json_pack("{s:i, s:o, s:o, s:b}",
		"expected_launches", v->launches_per_call, "expected_kernels", expected,
		"observed_launches", B.cupti ? json_integer(observed) : json_null(), "matches", matches));
}

/* The observed launches per call: the most common count. A call whose
 * count differs from the declaration already fails the signature through
 * the mismatch finding added here. */
static int observed_launches(case_run *r)
{
	if (r->n_calls == 0)
		return 0;
	int *l = malloc((size_t)r->n_calls * sizeof *l);
	if (l == NULL)
		return r->launches[0];
	memcpy(l, r->launches, (size_t)r->n_calls * sizeof *l);
	qsort(l, (size_t)r->n_calls, sizeof *l, cmp_int);
	int best = l[0], best_n = 0;
	for (int i = 0, run = 0; i < r->n_calls; i++) {
		run = (i > 0 && l[i] == l[i - 1]) ? run + 1 : 1;
		if (run > best_n)
			best = l[i], best_n = run;
	}
	bool uneven = l[0] != l[r->n_calls - 1];
	free(l);
	if (uneven)
		mb_case_json_add_finding(r->c, "launch_signature",
			"launch count varies between calls (most often %d)", best);
	return best;
}

static int write_results(case_run *r, const json_t *ceilings, bool converged, mb_error *err)
{
	int rc = 0;
	mb_check merged;
	json_t *checks = json_pack("[ss]", "first", "last");
	json_t *evs = json_array();
	const mb_row *row = r->plan->row;
	mb_check_init(&merged);
	mb_check_merge(&merged, &r->first);
	mb_check_merge(&merged, &r->last);
	bool passed = mb_check_passed(&merged);
	bool cupti_timed = B.cupti && !r->cupti_gap;
	if (B.cupti && r->cupti_gap) {
		/* A zero busy time is no measurement: keep the whole case on one
		 * clock, the events, and say why. */
		for (int i = 0; i < r->s.n && i < r->n_calls; i++)
			r->s.samples_ns[i] = r->ev_ns[i];
		mb_case_json_add_finding(r->c, "other",
			"CUPTI attributed no launch to some calls; samples are CUDA event times");
	}
	json_t *corr = mb_correctness_json(&merged, row->reference_name, &row->tolerance[r->plan->dtype],
		r->n_rows, r->rows_total, r->row_seed, checks);
	json_t *timing = mb_sampler_json(&r->s, cupti_timed ? "cupti" : "events", r->settings->warmup, converged);
	if (corr == NULL || timing == NULL || evs == NULL) {
		json_decref(corr);
		json_decref(timing);
		rc = mb_error_set(err, MB_ENOMEM, r->plan->id, "out of memory writing the case");
		goto cleanup;
	}
	for (int i = 0; i < r->n_calls; i++)
		json_array_append_new(evs, json_real(r->ev_ns[i]));
	int observed = B.cupti ? observed_launches(r) : -1;
	json_object_set_new(timing, "events_samples_ns", evs);
	evs = NULL;
	json_object_set_new(timing, "events_median_ns", json_real(median_of(r->ev_ns, r->n_calls)));
	json_object_set_new(timing, "span_median_ns", json_real(median_of(r->span_ns, r->n_calls)));
	json_object_set_new(timing, "launches_per_call", B.cupti ? json_integer(observed) : json_null());
	json_object_set_new(r->c, "correctness", corr);
	json_object_set_new(r->c, "timing", timing);
	json_object_set_new(r->c, "throughput", mb_throughput_json(row->bytes(r->plan->axis, r->plan->dtype),
		row->flops(r->plan->axis), mb_sampler_median(&r->s), ceilings));
	json_object_set_new(r->c, "memory", json_pack("{s:I}", "peak_bytes",
		(json_int_t)(r->total_bytes + B.flush_bytes)));
	json_object_set_new(r->c, "kernels", mb_cupti_kernels_json(&r->kernels));
	add_signature(r, observed);
	if (r->sagged)
		mb_case_json_add_finding(r->c, "clock_sag",
			"SM clock fell below %.0f%% of its %u MHz start value; those samples are excluded",
			CLOCK_SAG_FRACTION * 100.0, r->clock_start_mhz);
	if (!converged)
		mb_case_json_add_finding(r->c, "not_converged",
			"relative noise %.4f after %d samples (target %.4f)", mb_sampler_rel_noise(&r->s),
			r->s.n, r->settings->max_noise);
	if (!passed) {
		char text[WHY_BYTES];
		snprintf(text, sizeof text, "wrong answer: %llu of %llu elements over tolerance, %llu NaN, %llu Inf",
			(unsigned long long)merged.over_tolerance, (unsigned long long)merged.compared,
			(unsigned long long)merged.nan_count, (unsigned long long)merged.inf_count);
		mb_case_json_set_status(r->c, "failed", text);
		mb_case_json_add_finding(r->c, "correctness", "%s", text);
	}
	r->phases->goodput += mb_sampler_kept_sum_ns(&r->s);
cleanup:
	if (corr == NULL)
		json_decref(checks); /* mb_correctness_json took it otherwise */
	json_decref(evs);
	return rc;
}

/* Everything up to and including the first checked call. Returns as
 * timed_batch does. */
static int prepare(case_run *r, mb_error *err, cudaError_t *ce, const char **what, bool *launched)
{
	int rc = 0;
	const mb_case_plan *plan = r->plan;
	uint64_t seed = mb_case_seed(r->settings->seed, plan->id);
	int64_t t0 = mb_now_ns();
	if ((rc = mb_host_tensors_make(&r->ht, plan, seed, err)) != 0)
		return rc;
	r->ht_made = true;
	*what = "inputs";
	rc = alloc_tensors(r, ce);
	r->phases->input_generation += mb_now_ns() - t0;
	if (rc != 0)
		return rc == 1 ? 1 : mb_error_set(err, rc, plan->id, "out of memory for staging");

	t0 = mb_now_ns();
	int first_out = 0;
	while (first_out < r->ht.n_tensors && !r->ht.spec[first_out].is_output)
		first_out++;
	r->rows_total = first_out < r->ht.n_tensors ? r->ht.spec[first_out].rows : 0;
	r->row_seed = seed ^ ROW_SEED_SALT;
	if ((rc = mb_check_rows_pick(&r->rows, &r->n_rows, r->rows_total, r->settings->max_check_rows,
		r->row_seed, err)) != 0)
		return rc;
	if (r->rows == NULL)
		r->n_rows = r->rows_total;
	if ((rc = mb_reference_run(r->want, plan, &r->ht, r->rows, r->n_rows, err)) != 0)
		return rc;
	r->want_made = true;
	r->phases->reference += mb_now_ns() - t0;

	/* The first call, on poisoned outputs: an unwritten element stays NaN. */
	t0 = mb_now_ns();
	*what = "first call";
	if ((*ce = poison_outputs(r)) != cudaSuccess)
		return 1;
	*launched = true;
	if ((*ce = call_variant(r)) != cudaSuccess)
		return 1;
	*launched = false;
	if ((*ce = cudaStreamSynchronize(B.stream)) != cudaSuccess || (*ce = check_outputs(r, &r->first)) != cudaSuccess)
		return 1;
	r->phases->correctness += mb_now_ns() - t0;
	return 0;
}

/* Warm-up (and the graph, in graph mode), the timed calls, and the last
 * checked call. */
static int sample(case_run *r, bool *converged, mb_error *err, cudaError_t *ce, const char **what, bool *launched)
{
	int rc = 0;
	int64_t t0 = mb_now_ns();
	if (r->plan->mode == MB_MODE_GRAPH) {
		*what = "graph capture";
		*launched = true;
		if ((*ce = build_graph(r)) != cudaSuccess)
			return 1;
		*launched = false;
	}
	*what = "warm-up";
	for (int i = 0; i < r->settings->warmup; i++)
		if ((*ce = call_variant(r)) != cudaSuccess)
			return 1;
	if ((*ce = cudaStreamSynchronize(B.stream)) != cudaSuccess)
		return 1;
	if (B.cupti && (rc = mb_cupti_flush(err)) != 0)
		return rc;
	mb_cupti_discard();
	r->phases->warmup += mb_now_ns() - t0;

	if ((rc = mb_sampler_init(&r->s, r->settings, err)) != 0)
		return rc;
	r->s_made = true;
	r->clock_known = mb_cuda_nvml_sm_clock_mhz(&r->clock_start_mhz);
	*what = "timed calls";
	int batch = r->plan->mode == MB_MODE_COLD ? 1 : HOT_BATCH;
	do {
		if ((rc = timed_batch(r, batch, err, ce)) != 0)
			return rc;
	} while (!mb_sampler_done(&r->s, converged));

	/* The last timed call runs on poisoned outputs and is checked: it
	 * proves the timed path (graph replay included) computes the answer.
	 * The poisoning is not bracketed, so it is not in the sample. */
	*what = "last call";
	if ((*ce = poison_outputs(r)) != cudaSuccess)
		return 1;
	if ((rc = timed_batch(r, 1, err, ce)) != 0)
		return rc;
	t0 = mb_now_ns();
	if ((*ce = check_outputs(r, &r->last)) != cudaSuccess)
		return 1;
	r->phases->correctness += mb_now_ns() - t0;
	return 0;
}

static void case_run_free(case_run *r)
{
	if (r->exec != NULL)
		cudaGraphExecDestroy(r->exec);
	if (r->graph != NULL)
		cudaGraphDestroy(r->graph);
	for (int i = 0; i < MB_MAX_TENSORS; i++)
		if (r->dev[i] != NULL)
			cudaFree(r->dev[i]);
	if (r->want_made)
		mb_reference_free(r->want, &r->ht);
	if (r->ht_made)
		mb_host_tensors_free(&r->ht);
	if (r->s_made)
		mb_sampler_free(&r->s);
	free(r->rows);
	free(r->staging);
	free(r->ev_ns);
	free(r->span_ns);
	free(r->launches);
	mb_cupti_kernels_free(&r->kernels);
}

static int cuda_run_case(json_t **out_case, const mb_case_plan *plan, const mb_settings *settings,
	const json_t *ceilings, mb_phase_ns *phases, mb_error *err)
{
	int rc = 0;
	case_run r;
	cudaError_t ce = cudaSuccess;
	const char *what = "setup";
	bool launched = false, converged = false;
	memset(&r, 0, sizeof r);
	r.plan = plan;
	r.settings = settings;
	r.phases = phases;
	*out_case = NULL;
	nvtxRangePushA(plan->id);
	r.c = mb_case_json_new(plan, "cuda");
	if (r.c == NULL) {
		rc = mb_error_set(err, MB_ENOMEM, plan->id, "out of memory");
		goto cleanup;
	}
	if (B.lost) {
		char text[2 * WHY_BYTES];
		snprintf(text, sizeof text, "device context lost in an earlier case: %s", B.lost_text);
		mb_case_json_set_status(r.c, "crashed", text);
		goto done;
	}
	if (plan->variant->launch == NULL || !(plan->variant->dtype_mask & (1u << plan->dtype))) {
		mb_case_json_set_status(r.c, "skipped", "the variant has no GPU launch for this dtype");
		goto done;
	}
	if ((rc = ensure_ready(phases, err)) != 0) {
		mb_case_json_set_status(r.c, "crashed", err->text);
		rc = 0;
		goto done;
	}
	rc = prepare(&r, err, &ce, &what, &launched);
	if (rc == 0)
		rc = sample(&r, &converged, err, &ce, &what, &launched);
	if (rc == 1) {
		/* A CUDA error is the case's outcome, not a harness failure. */
		case_cuda_fail(r.c, ce, what, launched);
		rc = 0;
		goto done;
	}
	if (rc != 0)
		goto cleanup;
	if ((rc = write_results(&r, ceilings, converged, err)) != 0)
		goto cleanup;
done:
	*out_case = r.c;
	r.c = NULL;
cleanup:
	if (B.cupti)
		mb_cupti_discard();
	case_run_free(&r);
	json_decref(r.c);
	nvtxRangePop();
	return rc;
}

static const mb_backend CUDA_BACKEND = {
	.name = "cuda",
	.probe = cuda_probe,
	.run_case = cuda_run_case,
	.shutdown = cuda_shutdown,
};

const mb_backend *mb_backend_cuda(void)
{
	return &CUDA_BACKEND;
}

/* ---- device count, asked in a child ------------------------------------ */

typedef struct devices_answer {
	int count;
	char why[WHY_BYTES];
} devices_answer;

int mb_backend_cuda_devices(char *why, size_t why_len)
{
	int fds[2] = {-1, -1};
	devices_answer a = {0, ""};
	pid_t pid = -1;
	int count = 0;
	if (why_len > 0)
		why[0] = '\0';
	if (pipe(fds) != 0) {
		snprintf(why, why_len, "pipe: %s", strerror(errno));
		goto cleanup;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(why, why_len, "fork: %s", strerror(errno));
		goto cleanup;
	}
	if (pid == 0) {
		/* The child: initialise CUDA here so the parent never does. */
		close(fds[0]);
		cudaError_t ce = cudaGetDeviceCount(&a.count);
		if (ce != cudaSuccess) {
			a.count = 0;
			snprintf(a.why, sizeof a.why, "cudaGetDeviceCount: %s", cudaGetErrorString(ce));
		} else if (a.count == 0) {
			snprintf(a.why, sizeof a.why, "no CUDA device");
		}
		ssize_t w = write(fds[1], &a, sizeof a);
		_exit(w == (ssize_t)sizeof a ? 0 : 1);
	}
	close(fds[1]);
	fds[1] = -1;
	struct pollfd p = {.fd = fds[0], .events = POLLIN};
	int ready = poll(&p, 1, DEVICES_QUERY_TIMEOUT_MS);
	if (ready <= 0) {
		kill(pid, SIGKILL);
		snprintf(why, why_len, "the CUDA device query did not answer in %d ms", DEVICES_QUERY_TIMEOUT_MS);
		goto cleanup;
	}
	if (read(fds[0], &a, sizeof a) != (ssize_t)sizeof a) {
		snprintf(why, why_len, "the CUDA device query died before answering");
		goto cleanup;
	}
	a.why[sizeof a.why - 1] = '\0';
	count = a.count;
	if (count == 0)
		snprintf(why, why_len, "%s", a.why);
cleanup:
	if (pid > 0)
		waitpid(pid, NULL, 0);
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	return count;
}
