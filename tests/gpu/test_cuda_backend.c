/* The CUDA backend on a real device: probe, then run_case on hand-built
 * plans for every dtype and variant of rope_qk and residual_rmsnorm (small
 * shapes, vector and scalar paths, every mode), then the broken test rows
 * that are safe in one process. Every object is checked against the
 * receipt schema. Exits 77 (skip) without a device.
 *
 * With MB_GPU_TEST_OUT set, the probe's and every case's JSON are written
 * there as one JSON object, for the record of a GPU run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/backend.h"
#include "harness/case_driver.h"
#include "harness/cuda_headers.h"
#include "harness/cuda_inputs.h"
#include "harness/host_inputs.h"
#include "harness/cupti_timer.h"
#include "harness/suite.h"
#include "kernels/catalog.h"
#include "receipts/schema.h"
#include "../unit/testutil.h"

#define SKIP_EXIT 77
#define WHY_BYTES 256

typedef struct shape {
	const char *row;
	const char *family;
	int64_t axis[4];
} shape;

/* Vector paths, and shapes whose inner size is no whole number of 16-byte
 * vectors (the scalar paths), and one hidden size that needs several items
 * per thread. */
static const shape SHAPES[] = {
	{"rope_qk", "vec", {64, 8, 2, 128}},
	{"rope_qk", "odd", {33, 3, 1, 66}},
	{"residual_rmsnorm", "vec", {64, 1024, 0, 0}},
	{"residual_rmsnorm", "odd", {17, 1000, 0, 0}},
	{"residual_rmsnorm", "wide", {8, 12288, 0, 0}},
};

static const json_t *g_schema;
static json_t *g_record;

/* Validate `o` against definitions/<def> of the receipt schema. */
static void check_schema(const json_t *o, const char *def, const char *what)
{
	char ref[64];
	mb_schema_report rep;
	mb_error err;
	snprintf(ref, sizeof ref, "#/definitions/%s", def);
	json_t *wrap = json_pack("{s:s, s:O}", "$ref", ref, "definitions",
		json_object_get(g_schema, "definitions"));
	memset(&rep, 0, sizeof rep);
	int rc = mb_schema_validate(wrap, o, &rep, &err);
	CHECK_MSG(rc == 0, "%s: not a valid %s", what, def);
	if (rc != 0)
		mb_schema_report_print(&rep, "  ", stderr);
	json_decref(wrap);
}

static void make_plan(mb_case_plan *p, const mb_row *row, const mb_variant *v, mb_dtype dtype,
	mb_mode mode, const char *family, const int64_t *axis)
{
	memset(p, 0, sizeof *p);
	p->row = row;
	p->variant = v;
	p->dtype = dtype;
	p->mode = mode;
	p->weight = 1.0;
	snprintf(p->family, sizeof p->family, "%s", family);
	int n = snprintf(p->id, sizeof p->id, "%s/%s/%s/%s/%s/", row->name, v->name, mb_dtype_name(dtype),
		mb_mode_name(mode), family);
	for (int i = 0; i < row->n_axes; i++) {
		p->axis[i] = axis[i];
		n += snprintf(p->id + n, sizeof p->id - (size_t)n, "%s%s=%lld", i ? "," : "", row->axes[i],
			(long long)axis[i]);
	}
}

static void settings_init(mb_settings *s)
{
	memset(s, 0, sizeof *s);
	s->seed = MB_DEFAULT_SEED;
	s->n_modes = 1;
	s->modes[0] = MB_MODE_HOT;
	/* Short: this checks the machinery, not the numbers. */
	s->max_noise = 0.02;
	s->min_samples = 10;
	s->max_samples = 2000;
	s->min_time_s = 0.02;
	s->timeout_s = 2.0;
	s->warmup = 2;
	s->max_check_rows = 16; /* below T for most shapes: the sampled path */
}

static const char *str(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "(null)";
}

/* The driver's hooks for one case: keep its result. */
static int keep_result(void *ctx, size_t index, const json_t *result, const mb_phase_ns *phases)
{
	(void)index, (void)phases;
	*(json_t **)ctx = json_incref((json_t *)result);
	return 0;
}

/* Run one case through the case driver; returns the case object (owned)
 * or NULL. */
static json_t *run(const mb_backend *be, const mb_case_plan *p, const mb_settings *s,
	const json_t *ceilings, mb_phase_ns *ph)
{
	json_t *c = NULL;
	mb_case_plan one = *p;
	mb_plan plan = {.cases = &one, .n_cases = 1};
	mb_driver_hooks hooks = {.ctx = &c, .case_done = keep_result};
	size_t failed_at = 0;
	mb_error err;
	mb_error_clear(&err);
	(void)ph;
	int rc = mb_driver_run(be, &plan, 0, 1, s, ceilings, &hooks, &failed_at, &err);
	CHECK_MSG(rc == 0 && c != NULL, "%s: driver: %s", p->id, err.text);
	if (c == NULL)
		return NULL;
	check_schema(c, "case", p->id);
	json_t *t = json_object_get(c, "timing");
	json_t *sig = json_object_get(c, "signature");
	printf("%-72s %-8s median %9.0f ns events %9.0f ns span %9.0f ns launches %lld sig %s\n",
		p->id, str(c, "status"), json_number_value(json_object_get(t, "median_ns")),
		json_number_value(json_object_get(t, "events_median_ns")),
		json_number_value(json_object_get(t, "span_median_ns")),
		json_integer_value(json_object_get(t, "launches_per_call")),
		json_is_true(json_object_get(sig, "matches")) ? "ok" : "MISMATCH");
	if (g_record != NULL)
		json_array_append(json_object_get(g_record, "cases"), c);
	return c;
}

static void expect_ok(json_t *c, const char *id)
{
	if (c == NULL)
		return;
	CHECK_MSG(strcmp(str(c, "status"), "ok") == 0, "%s: status %s: %s", id, str(c, "status"), str(c, "error"));
	CHECK_MSG(json_is_true(json_object_get(json_object_get(c, "correctness"), "passed")),
		"%s: correctness failed", id);
	CHECK_MSG(json_is_true(json_object_get(json_object_get(c, "signature"), "matches")),
		"%s: signature mismatch", id);
	json_t *t = json_object_get(c, "timing");
	CHECK_MSG(json_number_value(json_object_get(t, "median_ns")) > 0, "%s: no time", id);
	CHECK_MSG(strcmp(str(t, "source"), "cupti") == 0, "%s: timing source %s", id, str(t, "source"));
	CHECK_MSG(json_array_size(json_object_get(t, "events_samples_ns")) ==
		json_array_size(json_object_get(t, "samples_ns")), "%s: events and samples differ in count", id);
}

static void expect_status(json_t *c, const char *id, const char *want)
{
	if (c == NULL)
		return;
	CHECK_MSG(strcmp(str(c, "status"), want) == 0, "%s: status %s, expected %s (%s)", id,
		str(c, "status"), want, str(c, "error"));
}

/* The device fill is bit for bit the host twin, for every fill kind and
 * dtype, and the read-back of rows returns exactly the rows asked for, in
 * fp32. */
static void check_inputs(void)
{
	static const mb_tensor_spec specs[] = {
		{"normal", false, 1, 0, MB_FILL_NORMAL, 0, 1},
		{"scaled", false, 1, 0, MB_FILL_NORMAL, 0, 0.25f},
		{"cos", false, 1, 0, MB_FILL_UNIFORM, -1, 1},
		{"w", false, 1, 0, MB_FILL_UNIFORM, 0.5f, 1.5f},
		{"idx", false, 1, 0, MB_FILL_INDEX, 0, 8192},
	};
	const uint64_t n = (1u << 20) + 17, width = 1000;
	float *host = malloc(n * sizeof(float)), *dev_vals = malloc(n * sizeof(float));
	void *raw = malloc(n * sizeof(float)), *dev = NULL, *packed = NULL;
	int64_t rows[] = {0, 3, 4, 700, 1047}, *dev_rows = NULL;
	const int n_rows = (int)(sizeof rows / sizeof rows[0]);
	cudaStream_t stream = NULL;

	CHECK(host && dev_vals && raw);
	CHECK(cudaMalloc(&dev, n * sizeof(float)) == cudaSuccess);
	CHECK(cudaMalloc(&packed, n_rows * width * sizeof(float)) == cudaSuccess);
	float *back = malloc(n_rows * width * sizeof(float));
	CHECK(back != NULL);
	CHECK(cudaMalloc((void **)&dev_rows, sizeof rows) == cudaSuccess);
	CHECK(cudaMemcpy(dev_rows, rows, sizeof rows, cudaMemcpyHostToDevice) == cudaSuccess);
	for (size_t k = 0; host && dev_vals && raw && k < sizeof specs / sizeof specs[0]; k++) {
		for (int d = 0; d < MB_DTYPE_COUNT; d++) {
			mb_input_params p = mb_input_params_for(&specs[k], (int)k, 20261121 + (uint64_t)d);
			size_t elem = mb_tensor_elem_bytes(&specs[k], (mb_dtype)d);
			uint64_t differ = 0, first = n;
			mb_host_fill(host, n, &p, (mb_dtype)d);
			CHECK(mb_cuda_fill(stream, dev, n, &p, (mb_dtype)d) == 0);
			CHECK(cudaMemcpy(raw, dev, n * elem, cudaMemcpyDeviceToHost) == cudaSuccess);
			mb_tensor_unpack(&specs[k], (mb_dtype)d, raw, dev_vals, n);
			for (uint64_t i = 0; i < n; i++) {
				bool same = memcmp(&host[i], &dev_vals[i], sizeof(float)) == 0;
				differ += !same;
				if (!same && first == n)
					first = i;
			}
			CHECK_MSG(differ == 0, "%s %s: %llu device values differ from the host twin (first at %llu: %a vs %a)",
				specs[k].name, mb_dtype_name((mb_dtype)d), (unsigned long long)differ,
				(unsigned long long)first, first < n ? host[first] : 0.0f, first < n ? dev_vals[first] : 0.0f);
			/* rows of `width` elements, read back packed in fp32: listed
			 * rows, then the first rows in order */
			for (int listed = 1; listed >= 0 && back; listed--) {
				CHECK(mb_cuda_rows_f32(stream, packed, dev, listed ? dev_rows : NULL, n_rows, width, (mb_dtype)d,
					specs[k].fill == MB_FILL_INDEX) == 0);
				CHECK(cudaMemcpy(back, packed, n_rows * width * sizeof(float), cudaMemcpyDeviceToHost)
					== cudaSuccess);
				for (int r = 0; r < n_rows; r++)
					CHECK_MSG(memcmp(back + r * width, host + (listed ? rows[r] : r) * width,
						width * sizeof(float)) == 0, "%s %s: row %lld read back wrong", specs[k].name,
						mb_dtype_name((mb_dtype)d), (long long)(listed ? rows[r] : r));
			}
		}
	}
	printf("device inputs: %zu fills x %d dtypes of %llu elements match the host twin\n",
		sizeof specs / sizeof specs[0], MB_DTYPE_COUNT, (unsigned long long)n);
	cudaFree(dev);
	cudaFree(packed);
	cudaFree(dev_rows);
	free(host);
	free(dev_vals);
	free(raw);
	free(back);
}

static void run_rows(const mb_backend *be, const mb_settings *s, const json_t *ceil, mb_phase_ns *ph)
{
	for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++) {
		const mb_row *row = mb_catalog_find(SHAPES[i].row);
		CHECK_MSG(row != NULL, "row %s not in the catalog", SHAPES[i].row);
		if (row == NULL)
			continue;
		for (int v = 0; v < row->n_variants; v++) {
			const mb_variant *var = &row->variants[v];
			if (strcmp(var->backend, "cuda") != 0)
				continue;
			for (int d = 0; d < MB_DTYPE_COUNT; d++) {
				for (int m = 0; m < MB_MODE_COUNT; m++) {
					/* Every mode on the first shape of a row; hot elsewhere. */
					bool first = i == 0 || strcmp(SHAPES[i - 1].row, SHAPES[i].row) != 0;
					if (!first && m != MB_MODE_HOT)
						continue;
					mb_case_plan p;
					make_plan(&p, row, var, (mb_dtype)d, (mb_mode)m, SHAPES[i].family, SHAPES[i].axis);
					json_t *c = run(be, &p, s, ceil, ph);
					expect_ok(c, p.id);
					json_decref(c);
				}
			}
		}
	}
}

static void run_broken(const mb_backend *be, const mb_settings *s, const json_t *ceil, mb_phase_ns *ph)
{
	static const struct {
		const char *row;
		const char *status;
	} BROKEN[] = {
		{"test_scale", "ok"},
		{"test_wrong_element", "failed"},
		{"test_zeros", "failed"},
		/* Last: it loses the context for the rest of the process. */
		{"test_fault", "crashed"},
	};
	static const int64_t axis[2] = {64, 96};
	size_t n = 0;
	/* Every row checked: the one wrong element must not escape a sample. */
	mb_settings all_rows = *s;
	all_rows.max_check_rows = axis[0];
	s = &all_rows;
	const mb_row *const *all = mb_catalog_rows_all(&n);
	for (size_t b = 0; b < sizeof BROKEN / sizeof BROKEN[0]; b++) {
		const mb_row *row = NULL;
		for (size_t i = 0; i < n; i++)
			if (strcmp(all[i]->name, BROKEN[b].row) == 0)
				row = all[i];
		CHECK_MSG(row != NULL, "test row %s missing", BROKEN[b].row);
		if (row == NULL)
			continue;
		mb_case_plan p;
		make_plan(&p, row, &row->variants[0], MB_BF16, MB_MODE_HOT, "test", axis);
		json_t *c = run(be, &p, s, ceil, ph);
		expect_status(c, p.id, BROKEN[b].status);
		if (c != NULL && strcmp(BROKEN[b].status, "failed") == 0) {
			json_t *corr = json_object_get(c, "correctness");
			CHECK_MSG(json_is_false(json_object_get(corr, "passed")), "%s: passed", p.id);
		}
		if (c != NULL && strcmp(BROKEN[b].status, "crashed") == 0)
			CHECK_MSG(strstr(str(c, "error"), "cudaErrorIllegalAddress") != NULL ||
				strstr(str(c, "error"), "illegal") != NULL, "%s: error %s", p.id, str(c, "error"));
		json_decref(c);
	}
}

int main(void)
{
	char why[WHY_BYTES];
	mb_error err;
	json_t *dev = NULL, *ceil = NULL;
	mb_phase_ns ph;
	mb_settings s;
	memset(&ph, 0, sizeof ph);
	mb_error_clear(&err);

	int n = mb_backend_cuda_devices(why, sizeof why);
	const mb_backend *be = mb_backend_cuda();
	if (n == 0 || be == NULL) {
		printf("skip: %s\n", be == NULL ? "built without CUDA" : why);
		return SKIP_EXIT;
	}
	g_schema = mb_schema_builtin("receipt", &err);
	CHECK_MSG(g_schema != NULL, "receipt schema: %s", err.text);
	if (getenv("MB_GPU_TEST_OUT") != NULL)
		g_record = json_pack("{s:[]}", "cases");

	int rc = be->probe(&dev, &ceil, &ph, &err);
	CHECK_MSG(rc == 0, "probe: %s", err.text);
	if (rc == 0) {
		check_schema(dev, "device", "device");
		check_schema(ceil, "ceilings", "ceilings");
		CHECK(json_number_value(json_object_get(ceil, "copy_gbps")) > 0);
		CHECK(json_number_value(json_object_get(ceil, "gemm_tflops")) > 0);
		CHECK(ph.ceilings > 0 && ph.context_load > 0);
		uint64_t ops = 0, exts = 0, apis = 0;
		mb_cupti_counts(&ops, &exts, &apis);
		printf("cupti records after probe: %llu device ops, %llu external correlations, %llu API calls\n",
			(unsigned long long)ops, (unsigned long long)exts, (unsigned long long)apis);
		CHECK(ops > 0);
		char *d = json_dumps(dev, JSON_COMPACT), *c = json_dumps(ceil, JSON_COMPACT);
		printf("device: %s\nceilings: %s\n", d, c);
		free(d);
		free(c);
		if (g_record != NULL) {
			json_object_set(g_record, "device", dev);
			json_object_set(g_record, "ceilings", ceil);
		}
		settings_init(&s);
		check_inputs();
		run_rows(be, &s, ceil, &ph);
		run_broken(be, &s, ceil, &ph);
		printf("phases ns: context %lld ceilings %lld inputs %lld reference %lld correctness %lld "
			"warmup %lld l2_flush %lld goodput %lld\n", (long long)ph.context_load,
			(long long)ph.ceilings, (long long)ph.input_generation, (long long)ph.reference,
			(long long)ph.correctness, (long long)ph.warmup, (long long)ph.l2_flush,
			(long long)ph.goodput);
	}
	if (g_record != NULL) {
		json_dump_file(g_record, getenv("MB_GPU_TEST_OUT"), JSON_INDENT(1));
		json_decref(g_record);
	}
	json_decref(dev);
	json_decref(ceil);
	if (be->shutdown != NULL)
		be->shutdown();
	return mb_test_finish("test_cuda_backend");
}
