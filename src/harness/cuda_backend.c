/* The CUDA backend: the device operations the case driver (case_driver.h)
 * calls, on one stream, and the device probe.
 *
 * Inputs are written on the device by the generator (cuda_inputs.h); the
 * timed calls are bracketed by a CUPTI external correlation id and a pair
 * of events. CUPTI's kernel records give the samples (busy time per call),
 * the span, the launch count and the kernel names that the driver's
 * signature check compares with the variant's declaration; the events are
 * the cross-check. Cold mode's L2 flush before each call runs under an id
 * of its own, so that its device time is counted as l2_flush badput.
 * Only the checked rows of an output are gathered and copied back.
 *
 * A CUDA error ends the case, not the process: out-of-memory is "oom", a
 * launch the variant refuses is "skipped", anything else is "crashed", and
 * a sticky error (illegal address, ...) marks the context lost so that
 * later cases in this child say so at once; the parent then starts a fresh
 * child for the next row.
 */
#include "harness/backend.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness/clock.h"
#include "harness/cuda_blocker.h"
#include "harness/cuda_flush.h"
#include "harness/cuda_ceilings.h"
#include "harness/cuda_device.h"
#include "harness/cuda_headers.h"
#include "harness/cuda_inputs.h"
#include "harness/cupti_timer.h"
#include "harness/host_inputs.h"
#include "kernels/workspace.h"
#include "mb_config.h"

#define DEVICE_INDEX mb_cuda_device_index()
/* Cold mode writes this many times the L2 size between calls. */
#define FLUSH_L2_MULTIPLE 2
/* Queue entries a held batch may add while the blocker holds the stream
 * (CUDA queues about a thousand before a launch waits, and a launch that
 * waits on a held stream would wait for the blocker's timeout): each call
 * queues two events and its launches. */
#define HOLD_MAX_OPS 256
#define HOLD_OPS_PER_CALL 2
/* Cold calls enqueued under the blocker before it lets the stream run: the
 * device then has two flushes and calls queued, and each further call
 * takes the host less time to enqueue than the flush before it takes the
 * device. */
#define COLD_HELD_CALLS 2

#define POISON_BYTE 0xFF /* 0xFFFF... is a NaN in fp32, fp16 and bf16 */
#define DEVICES_QUERY_TIMEOUT_MS 60000
#define NS_PER_MS 1e6
#define WHY_BYTES 256

static struct {
	bool ready;
	bool cupti;
	bool lost;                    /* a sticky error: the context is unusable */
	char lost_text[WHY_BYTES];
	char cupti_why[MB_ERROR_TEXT_MAX];
	cudaStream_t stream;
	cudaEvent_t ev[2 * MB_MAX_BATCH];
	int sms;
	void *flush_buf;
	size_t flush_bytes;
	unsigned flush_value;
	mb_blocker blocker;
	bool blocked;                 /* the blocker could be set up */
	uint64_t next_id;
	/* checked rows on their way back, kept across cases: fp32 on the
	 * device, their indices, and a pinned host copy */
	float *rows_dev, *rows_host;
	int64_t *index_dev;
	size_t rows_cap, host_cap, index_cap; /* bytes */
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
	    (ce = cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, DEVICE_INDEX)) != cudaSuccess ||
	    (ce = cudaDeviceGetAttribute(&B.sms, cudaDevAttrMultiProcessorCount, DEVICE_INDEX)) != cudaSuccess) {
		rc = mb_error_set(err, MB_EDEVICE, "cuda", "device setup: %s", cudaGetErrorString(ce));
		goto cleanup;
	}
	for (int i = 0; i < 2 * MB_MAX_BATCH; i++) {
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
	/* Load the modules of every kernel a timed batch launches, now: with
	 * CUDA's lazy loading the first launch of a kernel loads its module,
	 * which waits for the device, and inside a held batch that would wait
	 * out the blocker's timeout (half a second, seen on an H200). */
	if ((ce = cudaMemsetAsync(B.flush_buf, 0, B.flush_bytes, B.stream)) != cudaSuccess ||
	    (ce = (cudaError_t)mb_l2_flush_read(B.stream, B.flush_buf, B.flush_bytes, (unsigned *)B.flush_buf,
		B.sms)) != cudaSuccess ||
	    (B.blocked && (ce = (cudaError_t)mb_blocker_hold(&B.blocker, B.stream)) != cudaSuccess)) {
		rc = mb_error_set(err, MB_EDEVICE, "cuda", "loading the harness kernels: %s", cudaGetErrorString(ce));
		goto cleanup;
	}
	if (B.blocked)
		mb_blocker_release(&B.blocker);
	if ((ce = cudaStreamSynchronize(B.stream)) != cudaSuccess) {
		rc = mb_error_set(err, MB_EDEVICE, "cuda", "loading the harness kernels: %s", cudaGetErrorString(ce));
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
		for (int i = 0; i < 2 * MB_MAX_BATCH; i++)
			cudaEventDestroy(B.ev[i]);
		cudaFree(B.flush_buf);
		cudaFree(B.rows_dev);
		cudaFree(B.index_dev);
		cudaFreeHost(B.rows_host);
		mb_blocker_free(&B.blocker);
		cudaStreamDestroy(B.stream);
	}
	mb_cupti_stop();
	mb_cuda_nvml_close();
	B.ready = false;
}

/* ---- device operations of one case ------------------------------------- */

struct mb_dev_case {
	const mb_case_plan *plan;
	int n_tensors;
	mb_tensor_spec spec[MB_MAX_TENSORS];
	void *dev[MB_MAX_TENSORS];
	size_t bytes[MB_MAX_TENSORS];
	size_t total_bytes;
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	mb_cupti_kernels kernels;
	unsigned clock_start_mhz;
	bool clock_known, clock_read;
	bool nvtx;
	/* The variant's scratch memory (kernels/workspace.h): the driver's
	 * free memory before its first call, and the drop over that call. */
	enum { MEM_NOT_YET, MEM_WATCHING, MEM_MEASURED } mem;
	size_t mem_free_before;
	int64_t mem_driver_extra;
	/* CUPTI's launch times of a batch's calls, launch_cap (the batch's)
	 * per call; room for launch_ns_len */
	int64_t *launch_ns;
	size_t launch_ns_len;
};

/* A CUDA failure as the case's outcome. `launched` says whether it came
 * from the variant's own launch (a refusal of the shape is then
 * "skipped"). A sticky error marks the context lost. */
static int fail(mb_outcome *o, cudaError_t ce, const char *what, bool launched)
{
	snprintf(o->text, sizeof o->text, "%s: %s: %s", what, cudaGetErrorName(ce), cudaGetErrorString(ce));
	if (ce == cudaErrorMemoryAllocation)
		o->status = "oom";
	else if (launched && !is_sticky(ce))
		o->status = "skipped";
	else
		o->status = "crashed";
	if (is_sticky(ce)) {
		B.lost = true;
		snprintf(B.lost_text, sizeof B.lost_text, "%s", o->text);
	}
	return MB_DEVICE_FAILED;
}

#define CUDA_TRY(call, what, launched) \
	do { \
		cudaError_t ce_ = (cudaError_t)(call); \
		if (ce_ != cudaSuccess) \
			return fail(o, ce_, (what), (launched)); \
	} while (0)

static int cuda_open(mb_dev_case **out, const mb_case_plan *plan, const mb_tensor_spec *spec, int n_tensors,
	mb_phase_ns *phases, mb_outcome *o, mb_error *err)
{
	mb_dev_case *dc;
	int rc;

	*out = NULL;
	if (B.lost) {
		o->status = "crashed";
		snprintf(o->text, sizeof o->text, "device context lost in an earlier case: %.200s", B.lost_text);
		return MB_DEVICE_FAILED;
	}
	if (plan->variant->launch == NULL) {
		o->status = "skipped";
		snprintf(o->text, sizeof o->text, "the variant has no GPU launch");
		return MB_DEVICE_FAILED;
	}
	if (plan->variant->syncs_host && plan->mode == MB_MODE_GRAPH) {
		o->status = "skipped";
		snprintf(o->text, sizeof o->text, "the variant waits for the device inside a call, which a graph "
			"cannot capture");
		return MB_DEVICE_FAILED;
	}
	if ((rc = ensure_ready(phases, err)) != 0) {
		o->status = "crashed";
		snprintf(o->text, sizeof o->text, "%.250s", err->text);
		return MB_DEVICE_FAILED;
	}
	if ((dc = calloc(1, sizeof *dc)) == NULL)
		return mb_error_set(err, MB_ENOMEM, plan->id, "out of memory");
	*out = dc;
	dc->plan = plan;
	dc->n_tensors = n_tensors;
	memcpy(dc->spec, spec, (size_t)n_tensors * sizeof *spec);
	nvtxRangePushA(plan->id);
	dc->nvtx = true;
	for (int i = 0; i < n_tensors; i++) {
		uint64_t elems = (uint64_t)spec[i].rows * (uint64_t)spec[i].row_elems;
		mb_dtype stored = mb_row_tensor_dtype(plan->row, i, plan->dtype);
		dc->bytes[i] = (size_t)elems * mb_tensor_elem_bytes(&spec[i], stored);
		dc->total_bytes += dc->bytes[i];
		CUDA_TRY(cudaMalloc(&dc->dev[i], dc->bytes[i] ? dc->bytes[i] : 1), "inputs", false);
	}
	/* every case measures its variant's scratch from nothing */
	mb_ws_release_all();
	mb_ws_tally_reset();
	return 0;
}

static int cuda_fill(mb_dev_case *dc, int tensor, const mb_input_params *p, mb_outcome *o)
{
	uint64_t elems = (uint64_t)dc->spec[tensor].rows * (uint64_t)dc->spec[tensor].row_elems;

	CUDA_TRY(mb_cuda_fill(B.stream, dc->dev[tensor], elems, p, mb_row_tensor_dtype(dc->plan->row, tensor,
		dc->plan->dtype)), "inputs", false);
	return 0;
}

static int cuda_poison(mb_dev_case *dc, mb_outcome *o)
{
	for (int i = 0; i < dc->n_tensors; i++)
		if (dc->spec[i].is_output)
			CUDA_TRY(cudaMemsetAsync(dc->dev[i], POISON_BYTE, dc->bytes[i], B.stream), "poisoning", false);
	return 0;
}

/* The variant's call: the launch function, or one graph replay. */
static cudaError_t call_variant(mb_dev_case *dc)
{
	const void *in[MB_MAX_TENSORS];
	void *out[MB_MAX_TENSORS];
	int ni = 0, no = 0;

	if (dc->exec != NULL)
		return cudaGraphLaunch(dc->exec, B.stream);
	for (int i = 0; i < dc->n_tensors; i++) {
		if (dc->spec[i].is_output)
			out[no++] = dc->dev[i];
		else
			in[ni++] = dc->dev[i];
	}
	return (cudaError_t)dc->plan->variant->launch(B.stream, dc->plan->axis, dc->plan->dtype, in, out);
}

static int cuda_call(mb_dev_case *dc, mb_outcome *o)
{
	size_t total;

	if (dc->mem == MEM_NOT_YET) {
		CUDA_TRY(cudaStreamSynchronize(B.stream), "call", false);
		CUDA_TRY(cudaMemGetInfo(&dc->mem_free_before, &total), "call", false);
		dc->mem = MEM_WATCHING;
	}
	CUDA_TRY(call_variant(dc), "call", true);
	return 0;
}

static int cuda_sync(mb_dev_case *dc, mb_outcome *o, mb_error *err)
{
	size_t free_after, total;

	(void)err;
	CUDA_TRY(cudaStreamSynchronize(B.stream), "synchronize", false);
	if (dc->mem == MEM_WATCHING) {
		CUDA_TRY(cudaMemGetInfo(&free_after, &total), "synchronize", false);
		dc->mem_driver_extra = (int64_t)dc->mem_free_before - (int64_t)free_after;
		dc->mem = MEM_MEASURED;
	}
	/* records of untimed work (fills, checked and warm-up calls) carry no
	 * call id; the next timed batch drops them anyway */
	return 0;
}

static int cuda_arm(mb_dev_case *dc, mb_outcome *o)
{
	cudaError_t launch, ce;

	if (dc->plan->mode != MB_MODE_GRAPH || dc->exec != NULL)
		return 0;
	CUDA_TRY(cudaStreamBeginCapture(B.stream, cudaStreamCaptureModeThreadLocal), "graph capture", false);
	launch = call_variant(dc);
	ce = cudaStreamEndCapture(B.stream, &dc->graph);
	CUDA_TRY(launch, "graph capture", true);
	CUDA_TRY(ce, "graph capture", true);
	CUDA_TRY(cudaGraphInstantiate(&dc->exec, dc->graph, 0), "graph capture", true);
	return 0;
}

/* Room in dc->launch_ns for `len` launch times. */
static int launch_room(mb_dev_case *dc, size_t len, mb_error *err)
{
	int64_t *p;

	if (len <= dc->launch_ns_len)
		return 0;
	if (!(p = realloc(dc->launch_ns, len * sizeof(*p))))
		return mb_error_set(err, MB_ENOMEM, dc->plan->id, "out of memory for %zu launch times", len);
	dc->launch_ns = p;
	dc->launch_ns_len = len;
	return 0;
}

/* How many calls one batch may hold the stream for: each call queues its
 * events and launches, and the queue must not fill while the blocker
 * holds it. */
static int held_calls(const mb_dev_case *dc)
{
	int per_call = HOLD_OPS_PER_CALL + dc->plan->variant->launches_per_call;

	return HOLD_MAX_OPS / (per_call > 0 ? per_call : 1);
}

/* Queue one timed call bracketed by its id and events (and in cold mode
 * the flush before it, under an id of its own). */
static cudaError_t queue_call(mb_dev_case *dc, int i, uint64_t call_id, uint64_t flush_id, mb_error *err,
	int *rc)
{
	cudaError_t ce = cudaSuccess;

	if (dc->plan->mode == MB_MODE_COLD) {
		/* a new value each time, so that no write is ever a no-op */
		if (B.cupti && (*rc = mb_cupti_call_begin(flush_id, err)) != 0)
			return cudaSuccess;
		ce = cudaMemsetAsync(B.flush_buf, (int)(++B.flush_value & 0xFF), B.flush_bytes, B.stream);
		if (ce == cudaSuccess)
			ce = (cudaError_t)mb_l2_flush_read(B.stream, B.flush_buf, B.flush_bytes, (unsigned *)B.flush_buf,
				B.sms);
		if (B.cupti && (*rc = mb_cupti_call_end(err)) != 0)
			return cudaSuccess;
		if (ce != cudaSuccess)
			return ce;
	}
	if (B.cupti && (*rc = mb_cupti_call_begin(call_id, err)) != 0)
		return cudaSuccess;
	ce = cudaEventRecord(B.ev[2 * i], B.stream);
	if (ce == cudaSuccess)
		ce = call_variant(dc);
	if (ce == cudaSuccess)
		ce = cudaEventRecord(B.ev[2 * i + 1], B.stream);
	if (B.cupti && (*rc = mb_cupti_call_end(err)) != 0)
		return cudaSuccess;
	return ce;
}

/* Time b->n calls (fewer when the mode must hold the stream for all of
 * them: b->n says how many ran). Hot and graph batches are enqueued
 * entirely while the blocker holds the stream, so that events never count
 * launch latency. In cold mode every call waits behind a flush that takes
 * longer than enqueueing a call, so after the first calls are queued under
 * the blocker the host stays ahead of the device with the stream running,
 * and the device does not idle while the rest is enqueued. */
static int cuda_time_batch(mb_dev_case *dc, mb_batch *b, mb_phase_ns *phases, mb_outcome *o, mb_error *err)
{
	mb_cupti_call calls[2 * MB_MAX_BATCH];
	bool cold = dc->plan->mode == MB_MODE_COLD, held = false;
	int n = b->n, hold = cold ? COLD_HELD_CALLS : held_calls(dc), rc = 0;
	const size_t cap = b->launch_ns ? (size_t)b->launch_cap : 0;
	uint64_t first_id;
	cudaError_t ce = cudaSuccess;
	int64_t t_start = mb_now_ns();

	if (!cold && n > hold)
		n = hold;
	b->n = n;
	if (B.cupti && (rc = launch_room(dc, (size_t)n * cap, err)) != 0)
		return rc;
	first_id = B.next_id;
	B.next_id += 2 * (uint64_t)n; /* calls first, then their flushes */
	if (!dc->clock_read) {
		dc->clock_known = mb_cuda_nvml_sm_clock_mhz(&dc->clock_start_mhz);
		dc->clock_read = true;
	}
	/* A call that waits for the device would wait for the blocker
	 * forever, and a library's launch count is not known in advance
	 * (cuBLAS chunks grow with the shape: hundreds of launches could fill
	 * the queue while the blocker holds it): those are queued unheld, and
	 * their samples (busy time, or the span) do not see launch latency. */
	if (B.blocked && !dc->plan->variant->syncs_host && !dc->plan->variant->library_kernels) {
		CUDA_TRY(mb_blocker_hold(&B.blocker, B.stream), "timed calls", false);
		held = true;
	}
	for (int i = 0; i < n && ce == cudaSuccess && rc == 0; i++) {
		ce = queue_call(dc, i, first_id + (uint64_t)i, first_id + (uint64_t)(n + i), err, &rc);
		if (held && i + 1 == hold) {
			mb_blocker_release(&B.blocker);
			held = false;
		}
	}
	if (held)
		mb_blocker_release(&B.blocker);
	if (rc != 0)
		return rc;
	int64_t t_queued = mb_now_ns();
	CUDA_TRY(ce, "timed calls", true);
	CUDA_TRY(cudaStreamSynchronize(B.stream), "timed calls", false);
	int64_t t_synced = mb_now_ns();
	if (B.cupti && (rc = mb_cupti_flush(err)) != 0)
		return rc;
	int64_t t_flushed = mb_now_ns();
	if (B.cupti && (rc = mb_cupti_collect(calls, first_id, 2 * n, &dc->kernels, n, dc->launch_ns, (int)cap,
		err)) != 0)
		return rc;
	if (!B.cupti)
		b->launch_ns = NULL;
	int64_t t_collected = mb_now_ns();
	unsigned mhz = 0;
	b->sagged = dc->clock_known && mb_cuda_nvml_sm_clock_mhz(&mhz) &&
		(double)mhz < MB_CLOCK_SAG_FRACTION * (double)dc->clock_start_mhz;
	mb_trace("batch of %d: queued %.0f us, device done %.0f us later, CUPTI flush %.0f us, collect %.0f us, "
		"clock %u MHz in %.0f us", n, (double)(t_queued - t_start) / 1e3, (double)(t_synced - t_queued) / 1e3,
		(double)(t_flushed - t_synced) / 1e3, (double)(t_collected - t_flushed) / 1e3, mhz,
		(double)(mb_now_ns() - t_collected) / 1e3);
	for (int i = 0; i < n; i++) {
		float ms = 0.0f;
		CUDA_TRY(cudaEventElapsedTime(&ms, B.ev[2 * i], B.ev[2 * i + 1]), "timed calls", false);
		b->events_ns[i] = (double)ms * NS_PER_MS;
		/* a call that waits for the device idles it while the host reads
		 * back and queues the rest: its sample is the span, gaps included */
		b->sample_ns[i] = !B.cupti ? b->events_ns[i] : calls[i].launches <= 0 ? -1
			: dc->plan->variant->syncs_host ? (double)calls[i].span_ns : (double)calls[i].busy_ns;
		b->span_ns[i] = B.cupti ? (double)calls[i].span_ns : b->events_ns[i];
		b->launches[i] = B.cupti ? calls[i].launches : -1;
		for (size_t k = 0; b->launch_ns && k < cap; k++)
			b->launch_ns[(size_t)i * cap + k] = (int)k < calls[i].launches
				? (double)dc->launch_ns[(size_t)i * cap + k] : NAN;
		/* the flushes' device time; without CUPTI it stays in idle time */
		if (B.cupti && cold)
			phases->l2_flush += calls[n + i].busy_ns;
	}
	return 0;
}

/* Grow a buffer of the child's to at least `need` bytes: device memory,
 * or pinned host memory. Its old contents are not kept. */
static cudaError_t grow(void **p, size_t *have, size_t need, bool pinned)
{
	cudaError_t ce;

	if (need <= *have)
		return cudaSuccess;
	if (pinned)
		cudaFreeHost(*p);
	else
		cudaFree(*p);
	*p = NULL;
	*have = 0;
	ce = pinned ? cudaMallocHost(p, need) : cudaMalloc(p, need);
	if (ce == cudaSuccess)
		*have = need;
	return ce;
}

static int cuda_read_rows(mb_dev_case *dc, int tensor, const int64_t *rows, int64_t n_rows, const float **out,
	mb_outcome *o)
{
	const mb_tensor_spec *spec = &dc->spec[tensor];
	size_t bytes = (size_t)(n_rows * spec->row_elems) * sizeof(float) + 1;

	/* the device converts to fp32 as it packs the checked rows, so the
	 * pinned copy is what the comparison reads */
	CUDA_TRY(grow((void **)&B.rows_dev, &B.rows_cap, bytes, false), "reading rows back", false);
	CUDA_TRY(grow((void **)&B.rows_host, &B.host_cap, bytes, true), "reading rows back", false);
	if (rows != NULL) {
		CUDA_TRY(grow((void **)&B.index_dev, &B.index_cap, (size_t)n_rows * sizeof *rows, false),
			"reading rows back", false);
		CUDA_TRY(cudaMemcpyAsync(B.index_dev, rows, (size_t)n_rows * sizeof *rows, cudaMemcpyHostToDevice,
			B.stream), "reading rows back", false);
	}
	CUDA_TRY(mb_cuda_rows_f32(B.stream, B.rows_dev, dc->dev[tensor], rows ? B.index_dev : NULL, n_rows,
		spec->row_elems, mb_row_tensor_dtype(dc->plan->row, tensor, dc->plan->dtype),
		spec->fill == MB_FILL_INDEX), "reading rows back", false);
	CUDA_TRY(cudaMemcpyAsync(B.rows_host, B.rows_dev, bytes - 1, cudaMemcpyDeviceToHost, B.stream),
		"reading rows back", false);
	CUDA_TRY(cudaStreamSynchronize(B.stream), "reading rows back", false);
	*out = B.rows_host;
	return 0;
}

static void cuda_report(mb_dev_case *dc, mb_dev_report *out)
{
	memset(out, 0, sizeof *out);
	out->io_bytes = (int64_t)dc->total_bytes;
	out->sample_source = B.cupti ? "cupti" : "events";
	out->kernels = B.cupti ? mb_cupti_kernels_json(&dc->kernels) : NULL;
	if (!B.cupti)
		out->unobserved_why = B.cupti_why[0] ? B.cupti_why : "CUPTI unavailable";
	out->clock_start_mhz = dc->clock_known ? dc->clock_start_mhz : 0;
	out->scratch_bytes = dc->mem == MEM_MEASURED ? (int64_t)mb_ws_tally_peak() : -1;
	out->driver_scratch_bytes = dc->mem == MEM_MEASURED ? dc->mem_driver_extra : INT64_MIN;
}

static void cuda_close(mb_dev_case *dc)
{
	if (dc == NULL)
		return;
	if (B.cupti)
		mb_cupti_discard();
	if (dc->exec != NULL)
		cudaGraphExecDestroy(dc->exec);
	if (dc->graph != NULL)
		cudaGraphDestroy(dc->graph);
	for (int i = 0; i < MB_MAX_TENSORS; i++)
		if (dc->dev[i] != NULL)
			cudaFree(dc->dev[i]);
	mb_cupti_kernels_free(&dc->kernels);
	if (dc->nvtx)
		nvtxRangePop();
	free(dc->launch_ns);
	free(dc);
}

static const mb_backend CUDA_BACKEND = {
	.name = "cuda",
	.fp32_variants = false,
	.overlap_host_work = true,
	.max_batch = MB_MAX_BATCH,
	.probe = cuda_probe,
	.open = cuda_open,
	.fill = cuda_fill,
	.poison = cuda_poison,
	.call = cuda_call,
	.sync = cuda_sync,
	.arm = cuda_arm,
	.time_batch = cuda_time_batch,
	.read_rows = cuda_read_rows,
	.report = cuda_report,
	.close = cuda_close,
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
