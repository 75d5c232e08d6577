/* The CPU backend: times each row's fp32 C reference with the monotonic
 * clock, and checks its output against the row's fp64 oracle, so that the
 * whole pipeline runs, and is tested, on a machine with no GPU. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/backend.h"
#include "harness/case_common.h"
#include "harness/hostinfo.h"

/* The copy probe: large enough to leave the caches, small enough for a
 * smoke run to stay fast on a laptop. */
#define COPY_PROBE_BYTES (64u << 20)
#define COPY_PROBE_REPEATS 7
#define NS_PER_S 1e9
#define BYTES_PER_GB 1e9

static int cpu_probe(json_t **out_device, json_t **out_ceilings, mb_phase_ns *phases, mb_error *err)
{
	int64_t t0 = mb_now_ns();
	json_t *host = NULL, *device = NULL, *ceilings = NULL, *samples = NULL;
	char *src = NULL, *dst = NULL;
	double ns[COPY_PROBE_REPEATS];
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
	for (int i = 0; i < COPY_PROBE_REPEATS; i++) {
		int64_t start = mb_now_ns();
		memcpy(dst, src, COPY_PROBE_BYTES);
		ns[i] = (double)(mb_now_ns() - start);
		json_array_append_new(samples, json_integer((json_int_t)ns[i]));
		src[i] ^= dst[COPY_PROBE_BYTES - 1 - i]; /* keep the copies observable */
	}
	qsort(ns, COPY_PROBE_REPEATS, sizeof(ns[0]), mb_cmp_double);
	ceilings = json_object();
	{
		double median = ns[COPY_PROBE_REPEATS / 2];
		double gbps = 2.0 * COPY_PROBE_BYTES / BYTES_PER_GB / (median / NS_PER_S);
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

/* One call of the variant: the fp32 reference over every row, or a host
 * variant (the test-only rows have those) on the same fp32 buffers. */
static void call_reference(const mb_case_plan *plan, mb_host_tensors *t)
{
	if (plan->variant->kind == MB_VARIANT_REFERENCE || !plan->variant->launch)
		plan->row->reference(plan->axis, (const float *const *)t->data, t->data + t->n_inputs,
			NULL, t->spec[t->n_inputs].rows);
	else
		plan->variant->launch(NULL, plan->axis, plan->dtype, (const void *const *)t->data,
			(void *const *)(t->data + t->n_inputs));
}

static void check_outputs(mb_check *c, const mb_host_tensors *t, float *const *want,
	const int64_t *rows, int64_t n_rows, const mb_tolerance *tol)
{
	for (int i = t->n_inputs; i < t->n_tensors; i++)
		mb_check_add(c, &t->spec[i], t->data[i], want[i], rows, n_rows, t->spec[t->n_inputs].rows, tol);
}

static uint64_t host_bytes(const mb_host_tensors *t)
{
	uint64_t bytes = 0;

	for (int i = 0; i < t->n_tensors; i++)
		bytes += t->elems[i] * sizeof(float);
	for (int i = t->n_inputs; i < t->n_tensors; i++)
		bytes += t->elems[i] * sizeof(float); /* the oracle's outputs */
	return bytes;
}

static int cpu_run_case(json_t **out_case, const mb_case_plan *plan, const mb_settings *settings,
	const json_t *ceilings, mb_phase_ns *phases, mb_error *err)
{
	mb_host_tensors t = {0};
	float *want[MB_MAX_TENSORS] = {0};
	int64_t *rows = NULL, n_rows = 0, rows_total;
	uint64_t seed = mb_case_seed(settings->seed, plan->id);
	const mb_tolerance *tol = &plan->row->tolerance[MB_FP32];
	mb_sampler sampler = {0};
	mb_check first, last;
	bool converged = false;
	json_t *c = mb_case_json_new(plan, "cpu"), *checks = NULL;
	int64_t t0 = mb_now_ns();
	int rc;

	*out_case = NULL;
	rc = mb_host_tensors_make(&t, plan, seed, err);
	if (rc)
		goto cleanup;
	rows_total = t.spec[t.n_inputs].rows;
	rc = mb_check_rows_pick(&rows, &n_rows, rows_total, settings->max_check_rows, seed ^ 1u, err);
	if (rc)
		goto cleanup;
	phases->input_generation += mb_now_ns() - t0;

	t0 = mb_now_ns();
	rc = mb_oracle_run(want, plan, &t, rows, n_rows, err);
	if (rc)
		goto cleanup;
	phases->reference += mb_now_ns() - t0;

	/* the first call is checked, then warm-up, then samples */
	t0 = mb_now_ns();
	call_reference(plan, &t);
	for (int i = 1; i < settings->warmup; i++)
		call_reference(plan, &t);
	phases->warmup += mb_now_ns() - t0;
	t0 = mb_now_ns();
	mb_check_init(&first);
	check_outputs(&first, &t, want, rows, n_rows, tol);
	phases->correctness += mb_now_ns() - t0;

	rc = mb_sampler_init(&sampler, settings, err);
	if (rc)
		goto cleanup;
	for (;;) {
		bool stop = mb_sampler_done(&sampler, &converged);
		int64_t start;

		if (stop) {
			/* the last timed call runs on poisoned outputs and is checked */
			int64_t p0 = mb_now_ns();
			mb_host_tensors_poison(&t);
			phases->correctness += mb_now_ns() - p0;
		}
		start = mb_now_ns();
		call_reference(plan, &t);
		rc = mb_sampler_add(&sampler, (double)(mb_now_ns() - start), false, err);
		if (rc || stop)
			break;
	}
	if (rc)
		goto cleanup;
	phases->goodput += mb_sampler_kept_sum_ns(&sampler);

	t0 = mb_now_ns();
	mb_check_init(&last);
	check_outputs(&last, &t, want, rows, n_rows, tol);
	mb_check_merge(&first, &last);
	checks = json_pack("[ss]", "first", "last");
	json_object_set_new(c, "correctness", mb_correctness_json(&first,
		"mb_oracle (fp64 evaluation of the same math, rounded to fp32)", tol,
		n_rows, rows_total, seed ^ 1u, checks));
	phases->correctness += mb_now_ns() - t0;
	json_object_set_new(c, "timing", mb_sampler_json(&sampler, "monotonic", settings->warmup, converged));
	json_object_set_new(c, "throughput", mb_throughput_json(plan->row->bytes(plan->axis, MB_FP32),
		plan->row->flops(plan->axis), mb_sampler_median(&sampler), ceilings));
	json_object_set_new(json_object_get(c, "memory"), "peak_bytes", json_integer((json_int_t)host_bytes(&t)));
	if (!converged)
		mb_case_json_add_finding(c, "not_converged", "relative noise %.4f%% above the %.4f%% target after %d samples",
			100 * mb_sampler_rel_noise(&sampler), 100 * settings->max_noise, sampler.n);
	if (!mb_check_passed(&first)) {
		char why[256];
		mb_check_describe(&first, why, sizeof(why));
		mb_case_json_set_status(c, "failed", why);
	}
	*out_case = c;
	c = NULL;
cleanup:
	mb_sampler_free(&sampler);
	mb_reference_free(want, &t);
	mb_host_tensors_free(&t);
	free(rows);
	json_decref(c);
	return rc;
}

static const mb_backend cpu_backend = {
	.name = "cpu",
	.probe = cpu_probe,
	.run_case = cpu_run_case,
	.shutdown = NULL,
};

const mb_backend *mb_backend_cpu(void)
{
	return &cpu_backend;
}
