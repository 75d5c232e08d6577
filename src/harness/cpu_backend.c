/* The CPU backend: its device is host memory and its clock the monotonic
 * one. It times each row's fp32 C reference, which the case driver checks
 * against the row's fp64 oracle, so that the whole pipeline runs, and is
 * tested, on a machine with no GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/backend.h"
#include "harness/clock.h"
#include "harness/host_inputs.h"
#include "harness/hostinfo.h"
#include "receipts/stats.h"

/* The copy probe: large enough to leave the caches, small enough for a
 * smoke run to stay fast on a laptop. */
#define COPY_PROBE_BYTES (64u << 20)
#define COPY_PROBE_REPEATS 7
#define NS_PER_S 1e9
#define BYTES_PER_GB 1e9

/* The median time of COPY_PROBE_REPEATS runs of one direction of the
 * probe over the buffers: 0 read only (a sum, kept observable), 1 write
 * only (memset), 2 copy (memcpy). */
enum { PROBE_READ, PROBE_WRITE, PROBE_COPY };

static volatile uint64_t probe_sink;

static double probe_median_ns(int kind, char *dst, char *src, json_t *samples)
{
	double ns[COPY_PROBE_REPEATS];

	for (int i = 0; i < COPY_PROBE_REPEATS; i++) {
		int64_t start = mb_now_ns();
		if (kind == PROBE_READ) {
			const uint64_t *w = (const uint64_t *)src;
			uint64_t acc = 0;
			for (size_t k = 0; k < COPY_PROBE_BYTES / sizeof(*w); k++)
				acc += w[k];
			probe_sink = acc;
		} else if (kind == PROBE_WRITE) {
			memset(dst, i, COPY_PROBE_BYTES);
		} else {
			memcpy(dst, src, COPY_PROBE_BYTES);
		}
		ns[i] = (double)(mb_now_ns() - start);
		if (samples)
			json_array_append_new(samples, json_integer((json_int_t)ns[i]));
		src[i] ^= dst[COPY_PROBE_BYTES - 1 - i]; /* keep the work observable */
	}
	qsort(ns, COPY_PROBE_REPEATS, sizeof(ns[0]), mb_stats_cmp_double);
	return ns[COPY_PROBE_REPEATS / 2];
}

static int cpu_probe(json_t **out_device, json_t **out_ceilings, mb_phase_ns *phases, mb_error *err)
{
	int64_t t0 = mb_now_ns();
	json_t *host = NULL, *device = NULL, *ceilings = NULL, *samples = NULL;
	char *src = NULL, *dst = NULL;
	int rc;

	*out_device = *out_ceilings = NULL;
	rc = mb_host_identity(&host, err);
	if (rc)
		goto cleanup;
	device = json_object();
	json_object_set_new(device, "backend", json_string("cpu"));
	json_object_set(device, "name", json_object_get(host, "cpu_model"));
	json_object_set_new(device, "clocks_monitored", json_false());
	json_object_set_new(device, "clocks_note", json_string("the CPU backend does not monitor clocks"));

	src = malloc(COPY_PROBE_BYTES);
	dst = malloc(COPY_PROBE_BYTES);
	if (!src || !dst) {
		rc = mb_error_set(err, MB_ENOMEM, "copy probe", "cannot allocate %u bytes", COPY_PROBE_BYTES);
		goto cleanup;
	}
	memset(src, 0x5a, COPY_PROBE_BYTES);
	memset(dst, 0xa5, COPY_PROBE_BYTES); /* touch every page before timing */
	samples = json_array();
	ceilings = json_object();
	{
		double median = probe_median_ns(PROBE_COPY, dst, src, samples);
		double gbps = 2.0 * COPY_PROBE_BYTES / BYTES_PER_GB / (median / NS_PER_S);
		double read_ns = probe_median_ns(PROBE_READ, dst, src, NULL);
		double write_ns = probe_median_ns(PROBE_WRITE, dst, src, NULL);
		json_object_set_new(ceilings, "read_gbps", json_real(COPY_PROBE_BYTES / BYTES_PER_GB / (read_ns / NS_PER_S)));
		json_object_set_new(ceilings, "write_gbps", json_real(COPY_PROBE_BYTES / BYTES_PER_GB / (write_ns / NS_PER_S)));
		json_object_set_new(ceilings, "copy_gbps", json_real(gbps));
		json_object_set_new(ceilings, "copy_source", json_string("memcpy (host), bytes read + written, median of 7"));
		json_object_set_new(ceilings, "copy_bytes", json_integer(COPY_PROBE_BYTES));
		json_object_set_new(ceilings, "vendor_copy_gbps", json_real(gbps));
		json_object_set_new(ceilings, "gemm_tflops", json_null());
		json_object_set_new(ceilings, "copy_samples_ns", samples);
		samples = NULL;
	}
	*out_device = device;
	*out_ceilings = ceilings;
	device = ceilings = NULL;
	phases->ceilings += mb_now_ns() - t0;
cleanup:
	free(src);
	free(dst);
	json_decref(host);
	json_decref(device);
	json_decref(ceilings);
	json_decref(samples);
	return rc;
}

/* ---- device operations: the "device" is host memory ------------------ */

struct mb_dev_case {
	const mb_case_plan *plan;
	mb_host_tensors t; /* every tensor whole, fp32 */
	float *rows;       /* read_rows's packed rows */
	size_t rows_cap;   /* elements */
};

static int cpu_open(mb_dev_case **out, const mb_case_plan *plan, const mb_tensor_spec *spec, int n_tensors,
	mb_phase_ns *phases, mb_outcome *o, mb_error *err)
{
	mb_dev_case *dc = calloc(1, sizeof(*dc));
	int rc;

	(void)spec, (void)n_tensors, (void)phases, (void)o;
	*out = NULL;
	if (!dc)
		return mb_error_set(err, MB_ENOMEM, plan->id, "out of memory");
	dc->plan = plan;
	rc = mb_host_tensors_alloc(&dc->t, plan, err);
	if (rc) {
		free(dc);
		return rc;
	}
	*out = dc;
	return 0;
}

static int cpu_fill(mb_dev_case *dc, int tensor, const mb_input_params *p, mb_outcome *o)
{
	(void)o;
	mb_host_fill(dc->t.data[tensor], dc->t.elems[tensor], p, mb_row_tensor_dtype(dc->plan->row, tensor,
		dc->plan->dtype));
	return 0;
}

static int cpu_poison(mb_dev_case *dc, mb_outcome *o)
{
	(void)o;
	mb_host_tensors_poison(&dc->t);
	return 0;
}

/* One call of the variant: the fp32 reference over every row, or a host
 * variant (the test-only rows have those) on the same fp32 buffers. */
static int cpu_call(mb_dev_case *dc, mb_outcome *o)
{
	const mb_case_plan *plan = dc->plan;
	mb_host_tensors *t = &dc->t;

	(void)o;
	if (plan->variant->kind == MB_VARIANT_REFERENCE || !plan->variant->launch)
		plan->row->reference(plan->axis, (const float *const *)t->data, t->data + t->n_inputs,
			NULL, mb_host_unit_rows(t));
	else
		plan->variant->launch(NULL, plan->axis, plan->dtype, (const void *const *)t->data,
			(void *const *)(t->data + t->n_inputs));
	return 0;
}

static int cpu_nothing(mb_dev_case *dc, mb_outcome *o)
{
	(void)dc, (void)o;
	return 0;
}

static int cpu_sync(mb_dev_case *dc, mb_outcome *o, mb_error *err)
{
	(void)dc, (void)o, (void)err;
	return 0;
}

static int cpu_time_batch(mb_dev_case *dc, mb_batch *b, mb_phase_ns *phases, mb_outcome *o, mb_error *err)
{
	(void)phases, (void)err;
	for (int i = 0; i < b->n; i++) {
		int64_t start = mb_now_ns();
		cpu_call(dc, o);
		b->sample_ns[i] = (double)(mb_now_ns() - start);
	}
	b->events_ns = b->span_ns = b->launch_ns = NULL;
	b->launches = NULL;
	return 0;
}

static int cpu_read_rows(mb_dev_case *dc, int tensor, const int64_t *rows, int64_t n_rows, const float **out,
	mb_outcome *o)
{
	int64_t width = dc->t.spec[tensor].row_elems;
	size_t need = (size_t)(n_rows * width);

	if (!rows) {
		/* the first n_rows rows are already packed */
		*out = dc->t.data[tensor];
		return 0;
	}
	if (need > dc->rows_cap) {
		float *p = realloc(dc->rows, need * sizeof(float));
		if (!p) {
			o->status = "oom";
			snprintf(o->text, sizeof(o->text), "cannot hold %lld checked rows", (long long)n_rows);
			return MB_DEVICE_FAILED;
		}
		dc->rows = p;
		dc->rows_cap = need;
	}
	for (int64_t i = 0; i < n_rows; i++)
		memcpy(dc->rows + i * width, dc->t.data[tensor] + rows[i] * width, (size_t)width * sizeof(float));
	*out = dc->rows;
	return 0;
}

static void cpu_report(mb_dev_case *dc, mb_dev_report *out)
{
	memset(out, 0, sizeof(*out));
	for (int i = 0; i < dc->t.n_tensors; i++)
		out->io_bytes += (int64_t)(dc->t.elems[i] * sizeof(float));
	out->sample_source = "monotonic";
	out->scratch_bytes = -1; /* the reference allocates on the host */
	out->driver_scratch_bytes = INT64_MIN;
}

static void cpu_close(mb_dev_case *dc)
{
	if (!dc)
		return;
	mb_host_tensors_free(&dc->t);
	free(dc->rows);
	free(dc);
}

static const mb_backend cpu_backend = {
	.name = "cpu",
	.fp32_variants = true,
	/* the timed work is the host's own: nothing may run beside it */
	.overlap_host_work = false,
	.max_batch = 1,
	.probe = cpu_probe,
	.open = cpu_open,
	.fill = cpu_fill,
	.poison = cpu_poison,
	.call = cpu_call,
	.sync = cpu_sync,
	.arm = cpu_nothing,
	.time_batch = cpu_time_batch,
	.read_rows = cpu_read_rows,
	.report = cpu_report,
	.close = cpu_close,
	.shutdown = NULL,
};

const mb_backend *mb_backend_cpu(void)
{
	return &cpu_backend;
}
