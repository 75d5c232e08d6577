/* Shared case machinery: row sampling, comparison, sampling, JSON. */
#include "harness/case_common.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference/parallel.h"

#define NS_PER_S 1000000000LL

/* ---- row sample ------------------------------------------------------ */

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

int mb_check_rows_pick(int64_t **out_rows, int64_t *out_n, int64_t rows_total,
	int64_t max_rows, uint64_t seed, mb_error *err)
{
	int64_t *pick = NULL;
	mb_rng rng;

	*out_rows = NULL;
	*out_n = rows_total;
	if (rows_total <= max_rows)
		return 0;
	pick = malloc((size_t)max_rows * sizeof(*pick));
	if (!pick)
		return mb_error_set(err, MB_ENOMEM, "", "cannot allocate the row sample");
	/* Floyd's algorithm: max_rows distinct rows without a table of all rows;
	 * membership by linear scan is fine for the sample sizes we use */
	mb_rng_seed(&rng, seed);
	int64_t n = 0;
	for (int64_t j = rows_total - max_rows; j < rows_total; j++) {
		int64_t r = (int64_t)(mb_rng_next(&rng) % (uint64_t)(j + 1));
		bool seen = false;
		for (int64_t k = 0; k < n && !seen; k++)
			seen = pick[k] == r;
		pick[n++] = seen ? j : r;
	}
	qsort(pick, (size_t)n, sizeof(*pick), cmp_i64);
	*out_rows = pick;
	*out_n = n;
	return 0;
}

/* ---- comparison ------------------------------------------------------- */

void mb_check_init(mb_check *c)
{
	memset(c, 0, sizeof(*c));
}

static void check_one(mb_check *c, float got, float want, const mb_tolerance *tol)
{
	double diff, rel, bound, ratio;

	c->compared++;
	if (isnan(got)) {
		c->nan_count++;
		c->over_tolerance++;
		return;
	}
	if (isinf(got)) {
		c->inf_count++;
		c->over_tolerance++;
		return;
	}
	if (!isfinite(want)) {
		/* the reference left the element unwritten (NaN) or overflowed:
		 * nothing can match it */
		c->over_tolerance++;
		return;
	}
	diff = fabs((double)got - (double)want);
	rel = want != 0.0f ? diff / fabs((double)want) : (diff > 0 ? INFINITY : 0);
	if (diff > c->max_abs)
		c->max_abs = diff;
	if (isfinite(rel) && rel > c->max_rel)
		c->max_rel = rel;
	bound = tol->abs + tol->rel * fabs((double)want);
	if (diff > bound)
		c->over_tolerance++;
	ratio = bound > 0 ? diff / bound : (diff > 0 ? INFINITY : 0);
	if (ratio > c->max_tol_ratio)
		c->max_tol_ratio = ratio;
	c->err_sq += diff * diff;
	c->ref_sq += (double)want * want;
	c->out_sq += (double)got * got;
	if (got != 0.0f)
		c->any_nonzero = true;
}

int64_t mb_check_rows_of(const mb_tensor_spec *spec, int64_t n_rows, int64_t unit_rows)
{
	return spec->rows == unit_rows ? n_rows : spec->rows;
}

/* Rows [from, to) of one check; `packed` says where got's rows are. */
typedef struct check_part {
	mb_check c;
	const mb_tensor_spec *spec;
	const float *got, *want;
	const int64_t *rows;
	int64_t from, to;
	bool packed;
	const mb_tolerance *tol;
} check_part;

static void *check_rows(void *arg)
{
	check_part *p = arg;
	int64_t width = p->spec->row_elems;

	for (int64_t i = p->from; i < p->to; i++) {
		int64_t r = p->rows ? p->rows[i] : i;
		const float *got = p->got + (p->packed ? i : r) * width, *want = p->want + r * width;
		for (int64_t j = 0; j < width; j++)
			check_one(&p->c, got[j], want[j], p->tol);
	}
	return NULL;
}

/* A check of more elements than this is split over threads. */
#define CHECK_SPLIT_ELEMS (1 << 20)
#define CHECK_MAX_THREADS 16

static void check_add(mb_check *c, const mb_tensor_spec *spec, const float *got, bool packed,
	const float *want, const int64_t *rows, int64_t n_rows, int64_t unit_rows, const mb_tolerance *tol)
{
	check_part parts[CHECK_MAX_THREADS];
	pthread_t threads[CHECK_MAX_THREADS];
	bool started[CHECK_MAX_THREADS] = {false};
	long cpus = mb_cpus_usable();
	int64_t elems, n_parts;

	if (spec->rows != unit_rows)
		rows = NULL;
	n_rows = mb_check_rows_of(spec, n_rows, unit_rows);
	elems = n_rows * spec->row_elems;
	n_parts = elems > CHECK_SPLIT_ELEMS && cpus > 1 ? (cpus < CHECK_MAX_THREADS ? cpus : CHECK_MAX_THREADS) : 1;
	if (n_parts > n_rows)
		n_parts = n_rows > 0 ? n_rows : 1;
	for (int64_t k = 0; k < n_parts; k++) {
		parts[k] = (check_part){.spec = spec, .got = got, .want = want, .rows = rows,
			.from = n_rows * k / n_parts, .to = n_rows * (k + 1) / n_parts, .packed = packed, .tol = tol};
		mb_check_init(&parts[k].c);
		/* part 0 runs here; a thread that cannot start runs here too */
		started[k] = k > 0 && pthread_create(&threads[k], NULL, check_rows, &parts[k]) == 0;
	}
	for (int64_t k = 0; k < n_parts; k++) {
		if (started[k])
			pthread_join(threads[k], NULL);
		else
			check_rows(&parts[k]);
		mb_check_merge(c, &parts[k].c);
	}
}

void mb_check_add(mb_check *c, const mb_tensor_spec *spec, const float *got, const float *want,
	const int64_t *rows, int64_t n_rows, int64_t unit_rows, const mb_tolerance *tol)
{
	check_add(c, spec, got, false, want, rows, n_rows, unit_rows, tol);
}

void mb_check_add_packed(mb_check *c, const mb_tensor_spec *spec, const float *got, const float *want,
	const int64_t *rows, int64_t n_rows, int64_t unit_rows, const mb_tolerance *tol)
{
	check_add(c, spec, got, true, want, rows, n_rows, unit_rows, tol);
}

void mb_check_merge(mb_check *into, const mb_check *from)
{
	into->max_abs = fmax(into->max_abs, from->max_abs);
	into->max_rel = fmax(into->max_rel, from->max_rel);
	into->max_tol_ratio = fmax(into->max_tol_ratio, from->max_tol_ratio);
	into->err_sq += from->err_sq;
	into->ref_sq += from->ref_sq;
	into->out_sq += from->out_sq;
	into->over_tolerance += from->over_tolerance;
	into->nan_count += from->nan_count;
	into->inf_count += from->inf_count;
	into->compared += from->compared;
	into->any_nonzero = into->any_nonzero || from->any_nonzero;
}

/* An output whose norm is off by more than this is wrong even when every
 * element passed its tolerance (it cannot be, unless tolerances are loose). */
#define NORM_RATIO_SLACK 0.01

static double norm_ratio(const mb_check *c)
{
	return c->ref_sq > 0 ? sqrt(c->out_sq / c->ref_sq) : NAN;
}

bool mb_check_passed(const mb_check *c)
{
	double ratio = norm_ratio(c);

	return c->compared > 0 && c->over_tolerance == 0 && c->nan_count == 0 && c->inf_count == 0
		&& c->any_nonzero && isfinite(ratio) && fabs(ratio - 1.0) <= NORM_RATIO_SLACK;
}

void mb_check_describe(const mb_check *c, char *buf, size_t len)
{
	if (c->compared == 0)
		snprintf(buf, len, "no element was compared");
	else if (!c->any_nonzero && c->nan_count + c->inf_count == 0)
		snprintf(buf, len, "every output element is zero");
	else
		snprintf(buf, len, "%llu of %llu elements over tolerance (%llu NaN, %llu Inf), max abs error %.3g, "
			"norm ratio %.6f", (unsigned long long)c->over_tolerance, (unsigned long long)c->compared,
			(unsigned long long)c->nan_count, (unsigned long long)c->inf_count, c->max_abs, norm_ratio(c));
}

static json_t *real_or_null(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

json_t *mb_ns_json(double ns)
{
	return json_integer((json_int_t)llround(ns));
}

json_t *mb_correctness_json(const mb_check *c, const char *reference, const mb_tolerance *tol,
	int64_t rows_checked, int64_t rows_total, uint64_t input_seed, uint64_t row_seed, json_t *checks)
{
	json_t *o = json_object();
	json_t *t = json_object();

	json_object_set_new(t, "abs", json_real(tol->abs));
	json_object_set_new(t, "rel", json_real(tol->rel));
	json_object_set_new(t, "rationale", json_string(tol->rationale));
	json_object_set_new(o, "reference", json_string(reference));
	json_object_set_new(o, "tolerance", t);
	json_object_set_new(o, "max_abs", real_or_null(c->compared ? c->max_abs : NAN));
	json_object_set_new(o, "max_rel", real_or_null(c->compared ? c->max_rel : NAN));
	json_object_set_new(o, "error_over_tolerance", real_or_null(c->compared ? c->max_tol_ratio : NAN));
	json_object_set_new(o, "rel_l2", real_or_null(c->ref_sq > 0 ? sqrt(c->err_sq / c->ref_sq) : NAN));
	json_object_set_new(o, "over_tolerance", json_integer((json_int_t)c->over_tolerance));
	json_object_set_new(o, "nan_count", json_integer((json_int_t)c->nan_count));
	json_object_set_new(o, "inf_count", json_integer((json_int_t)c->inf_count));
	json_object_set_new(o, "norm_ratio", real_or_null(norm_ratio(c)));
	json_object_set_new(o, "rows_checked", json_integer(rows_checked));
	json_object_set_new(o, "rows_total", json_integer(rows_total));
	json_object_set_new(o, "input_seed", json_integer((json_int_t)input_seed));
	if (rows_checked < rows_total)
		json_object_set_new(o, "row_sample_seed", json_integer((json_int_t)row_seed));
	json_object_set_new(o, "checks", checks);
	json_object_set_new(o, "passed", json_boolean(mb_check_passed(c)));
	return o;
}

/* ---- sampling ------------------------------------------------------- */

/* Consistency constants: MAD * 1.4826 estimates sigma for normal data, and
 * the median's standard error is sqrt(pi/2) = 1.2533 times the mean's. */
#define MAD_TO_SIGMA 1.4826
#define MEDIAN_SE_FACTOR 1.2533

int mb_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double mb_quantile_sorted(const double *sorted, int n, double q)
{
	double pos, frac;
	int lo;

	if (n <= 0)
		return NAN;
	pos = q * (n - 1);
	lo = (int)floor(pos);
	if (lo >= n - 1)
		return sorted[n - 1];
	frac = pos - lo;
	return sorted[lo] + frac * (sorted[lo + 1] - sorted[lo]);
}

double mb_rel_noise(const double *sorted, int n)
{
	double med, *dev, mad;

	if (n < 2)
		return INFINITY;
	med = mb_quantile_sorted(sorted, n, 0.5);
	dev = malloc((size_t)n * sizeof(*dev));
	if (!dev || med <= 0) {
		free(dev);
		return INFINITY;
	}
	for (int i = 0; i < n; i++)
		dev[i] = fabs(sorted[i] - med);
	qsort(dev, (size_t)n, sizeof(*dev), mb_cmp_double);
	mad = mb_quantile_sorted(dev, n, 0.5);
	free(dev);
	return MEDIAN_SE_FACTOR * MAD_TO_SIGMA * mad / sqrt((double)n) / med;
}

#define SAMPLER_INITIAL_CAP 64

int mb_sampler_init(mb_sampler *s, const mb_settings *settings, mb_error *err)
{
	memset(s, 0, sizeof(*s));
	s->settings = settings;
	s->cap = SAMPLER_INITIAL_CAP;
	s->samples_ns = malloc((size_t)s->cap * sizeof(*s->samples_ns));
	s->excluded = malloc((size_t)s->cap * sizeof(*s->excluded));
	s->started_ns = mb_now_ns();
	if (!s->samples_ns || !s->excluded) {
		mb_sampler_free(s);
		return mb_error_set(err, MB_ENOMEM, "", "cannot allocate the sample buffer");
	}
	return 0;
}

int mb_sampler_add(mb_sampler *s, double sample_ns, bool excluded, mb_error *err)
{
	if (s->n == s->cap) {
		int cap = s->cap * 2;
		double *ns = realloc(s->samples_ns, (size_t)cap * sizeof(*ns));
		bool *ex;
		if (!ns)
			return mb_error_set(err, MB_ENOMEM, "", "cannot grow the sample buffer");
		s->samples_ns = ns;
		ex = realloc(s->excluded, (size_t)cap * sizeof(*ex));
		if (!ex)
			return mb_error_set(err, MB_ENOMEM, "", "cannot grow the sample buffer");
		s->excluded = ex;
		s->cap = cap;
	}
	s->samples_ns[s->n] = sample_ns;
	s->excluded[s->n] = excluded;
	s->n++;
	return 0;
}

int mb_sampler_kept(const mb_sampler *s)
{
	int kept = 0;

	for (int i = 0; i < s->n; i++)
		kept += !s->excluded[i];
	return kept;
}

void mb_sampler_keep_all(mb_sampler *s)
{
	for (int i = 0; i < s->n; i++)
		s->excluded[i] = false;
}

/* Sorted copy of the kept samples; caller frees. */
static double *kept_sorted(const mb_sampler *s, int *out_n)
{
	double *v = malloc((size_t)(s->n ? s->n : 1) * sizeof(*v));
	int n = 0;

	for (int i = 0; v && i < s->n; i++) {
		if (!s->excluded[i])
			v[n++] = s->samples_ns[i];
	}
	if (v)
		qsort(v, (size_t)n, sizeof(*v), mb_cmp_double);
	*out_n = n;
	return v;
}

double mb_sampler_rel_noise(const mb_sampler *s)
{
	int n;
	double *v = kept_sorted(s, &n);
	double noise = v ? mb_rel_noise(v, n) : INFINITY;

	free(v);
	return noise;
}

double mb_sampler_median(const mb_sampler *s)
{
	int n;
	double *v = kept_sorted(s, &n);
	double med = v ? mb_quantile_sorted(v, n, 0.5) : NAN;

	free(v);
	return med;
}

int64_t mb_sampler_kept_sum_ns(const mb_sampler *s)
{
	double sum = 0;

	for (int i = 0; i < s->n; i++) {
		if (!s->excluded[i])
			sum += s->samples_ns[i];
	}
	return (int64_t)sum;
}

bool mb_sampler_done(const mb_sampler *s, bool *converged)
{
	const mb_settings *cfg = s->settings;
	double elapsed_s = (double)(mb_now_ns() - s->started_ns) / NS_PER_S;
	int kept = mb_sampler_kept(s);

	*converged = false;
	if (kept >= cfg->min_samples && elapsed_s >= cfg->min_time_s
		&& mb_sampler_rel_noise(s) <= cfg->max_noise) {
		*converged = true;
		return true;
	}
	return elapsed_s >= cfg->timeout_s || s->n >= cfg->max_samples;
}

json_t *mb_sampler_json(const mb_sampler *s, const char *source, int warmup_calls, bool converged)
{
	json_t *o = json_object(), *samples = json_array(), *excluded = json_array();
	int n;
	double *v = kept_sorted(s, &n);
	double sum = 0, sq = 0, mean, sd;

	for (int i = 0; i < s->n; i++) {
		json_array_append_new(samples, mb_ns_json(s->samples_ns[i]));
		if (s->excluded[i])
			json_array_append_new(excluded, json_integer(i));
	}
	for (int i = 0; v && i < n; i++)
		sum += v[i];
	mean = n ? sum / n : 0;
	for (int i = 0; v && i < n; i++)
		sq += (v[i] - mean) * (v[i] - mean);
	sd = n > 1 ? sqrt(sq / (n - 1)) : 0;
	json_object_set_new(o, "source", json_string(source));
	json_object_set_new(o, "samples_ns", samples);
	json_object_set_new(o, "excluded", excluded);
	json_object_set_new(o, "median_ns", json_real(n ? mb_quantile_sorted(v, n, 0.5) : 0));
	json_object_set_new(o, "mean_ns", json_real(mean));
	json_object_set_new(o, "stddev_ns", json_real(sd));
	json_object_set_new(o, "min_ns", json_real(n ? v[0] : 0));
	json_object_set_new(o, "max_ns", json_real(n ? v[n - 1] : 0));
	json_object_set_new(o, "p10_ns", json_real(n ? mb_quantile_sorted(v, n, 0.1) : 0));
	json_object_set_new(o, "p90_ns", json_real(n ? mb_quantile_sorted(v, n, 0.9) : 0));
	{
		double noise = v ? mb_rel_noise(v, n) : INFINITY;
		/* JSON has no infinity: a case with fewer than two samples reports
		 * noise 1 (100%), which no target accepts */
		json_object_set_new(o, "rel_noise", json_real(isfinite(noise) ? noise : 1.0));
	}
	json_object_set_new(o, "converged", json_boolean(converged));
	json_object_set_new(o, "warmup_calls", json_integer(warmup_calls));
	json_object_set_new(o, "sampling_ns", json_integer(mb_now_ns() - s->started_ns));
	free(v);
	return o;
}

void mb_sampler_free(mb_sampler *s)
{
	if (!s)
		return;
	free(s->samples_ns);
	free(s->excluded);
	s->samples_ns = NULL;
	s->excluded = NULL;
	s->n = s->cap = 0;
}

/* ---- throughput and case JSON ---------------------------------------- */

#define BYTES_PER_GB 1e9
#define FLOPS_PER_TFLOP 1e12

static double ceiling_value(const json_t *ceilings, const char *key)
{
	const json_t *v = ceilings ? json_object_get(ceilings, key) : NULL;

	return json_is_number(v) ? json_number_value(v) : NAN;
}

void mb_traffic_model(mb_traffic *out, const mb_row *row, const mb_variant *v, const int64_t *axis, mb_dtype dtype)
{
	memset(out, 0, sizeof(*out));
	if (!row->traffic) {
		out->bytes = row->bytes(axis, dtype);
		return;
	}
	out->split = true;
	out->n_launches = row->traffic(axis, dtype, v, out->launch);
	for (int k = 0; k < out->n_launches; k++) {
		out->read_bytes += out->launch[k].read_bytes;
		out->write_bytes += out->launch[k].write_bytes;
	}
	out->bytes = out->read_bytes + out->write_bytes;
}

/* Read shares of the three probe points: write-only, copy, read-only. */
#define COPY_READ_SHARE 0.5

double mb_memory_ceiling_gbps(const json_t *ceilings, uint64_t read_bytes, uint64_t write_bytes, bool split,
	const char **which)
{
	double copy = ceiling_value(ceilings, "copy_gbps");
	double rd = ceiling_value(ceilings, "read_gbps"), wr = ceiling_value(ceilings, "write_gbps");
	double total = (double)read_bytes + (double)write_bytes, f;

	*which = "copy";
	if (!split || !(rd > 0) || !(wr > 0) || !(copy > 0) || total <= 0)
		return copy > 0 ? copy : NAN;
	*which = "memory";
	f = (double)read_bytes / total;
	if (f >= COPY_READ_SHARE)
		return copy + (rd - copy) * (f - COPY_READ_SHARE) / (1 - COPY_READ_SHARE);
	return wr + (copy - wr) * f / COPY_READ_SHARE;
}

static json_t *launches_json(const mb_traffic *t, const double *median_ns, const json_t *ceilings)
{
	json_t *list = json_array();

	for (int k = 0; k < t->n_launches; k++) {
		const mb_launch_traffic *l = &t->launch[k];
		const char *which;
		double ns = median_ns ? median_ns[k] : NAN;
		double bw = mb_memory_ceiling_gbps(ceilings, l->read_bytes, l->write_bytes, true, &which);
		double gbps = ns > 0 ? (double)(l->read_bytes + l->write_bytes) / BYTES_PER_GB / (ns / NS_PER_S) : NAN;

		json_array_append_new(list, json_pack("{s:s, s:I, s:I, s:o, s:o}", "kernel", l->kernel,
			"read_bytes", (json_int_t)l->read_bytes, "write_bytes", (json_int_t)l->write_bytes,
			"median_ns", real_or_null(ns), "fraction_of_ceiling", real_or_null(gbps / bw)));
	}
	return list;
}

json_t *mb_throughput_json(const mb_traffic *t, uint64_t flops, double median_ns, const double *launch_median_ns,
	const json_t *ceilings)
{
	json_t *o = json_object();
	double secs = median_ns / NS_PER_S;
	double gbps = median_ns > 0 ? (double)t->bytes / BYTES_PER_GB / secs : NAN;
	double tflops = median_ns > 0 ? (double)flops / FLOPS_PER_TFLOP / secs : NAN;
	const char *memory;
	double bw = mb_memory_ceiling_gbps(ceilings, t->read_bytes, t->write_bytes, t->split, &memory);
	double gemm = ceiling_value(ceilings, "gemm_tflops");
	double memory_time = bw > 0 ? (double)t->bytes / BYTES_PER_GB / bw : 0;
	double gemm_time = gemm > 0 ? (double)flops / FLOPS_PER_TFLOP / gemm : 0;
	/* the binding ceiling is the one whose floor time is larger */
	const char *which = NULL;
	double fraction = NAN;

	if (memory_time > 0 && memory_time >= gemm_time) {
		which = memory;
		fraction = gbps / bw;
	} else if (gemm_time > 0) {
		which = "gemm";
		fraction = tflops / gemm;
	}
	json_object_set_new(o, "bytes", json_integer((json_int_t)t->bytes));
	json_object_set_new(o, "flops", json_integer((json_int_t)flops));
	json_object_set_new(o, "gbps", real_or_null(gbps));
	json_object_set_new(o, "tflops", real_or_null(tflops));
	json_object_set_new(o, "ceiling", which ? json_string(which) : json_null());
	json_object_set_new(o, "fraction_of_ceiling", real_or_null(fraction));
	if (t->split) {
		json_object_set_new(o, "read_bytes", json_integer((json_int_t)t->read_bytes));
		json_object_set_new(o, "write_bytes", json_integer((json_int_t)t->write_bytes));
		json_object_set_new(o, "model_launches", launches_json(t, launch_median_ns, ceilings));
	}
	return o;
}

json_t *mb_case_json_new(const mb_case_plan *plan, const char *backend)
{
	json_t *c = json_object(), *shape = json_object(), *mem = json_object();
	char block[2] = {plan->row->block, '\0'};

	for (int i = 0; i < plan->row->n_axes; i++)
		json_object_set_new(shape, plan->row->axes[i], json_integer(plan->axis[i]));
	json_object_set_new(mem, "io_bytes", json_integer(0));
	json_object_set_new(c, "id", json_string(plan->id));
	json_object_set_new(c, "row", json_string(plan->row->name));
	json_object_set_new(c, "block", json_string(block));
	json_object_set_new(c, "variant", json_string(plan->variant->name));
	json_object_set_new(c, "variant_kind", json_string(mb_variant_kind_name(plan->variant->kind)));
	json_object_set_new(c, "backend", json_string(backend));
	json_object_set_new(c, "dtype", json_string(mb_dtype_name(plan->dtype)));
	json_object_set_new(c, "mode", json_string(mb_mode_name(plan->mode)));
	json_object_set_new(c, "family", json_string(plan->family));
	json_object_set_new(c, "shape", shape);
	json_object_set_new(c, "weight", json_real(plan->weight));
	json_object_set_new(c, "weight_source", json_string(plan->weight_given ? "suite" : "default"));
	json_object_set_new(c, "status", json_string("ok"));
	json_object_set_new(c, "error", json_null());
	json_object_set_new(c, "correctness", json_null());
	json_object_set_new(c, "timing", json_null());
	json_object_set_new(c, "throughput", json_null());
	json_object_set_new(c, "memory", mem);
	json_object_set_new(c, "findings", json_array());
	return c;
}

void mb_case_json_set_status(json_t *c, const char *status, const char *error)
{
	json_object_set_new(c, "status", json_string(status));
	json_object_set_new(c, "error", error && strcmp(status, "ok") != 0 ? json_string(error) : json_null());
}

void mb_case_json_add_finding(json_t *c, const char *kind, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	json_t *f = json_object();

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_object_set_new(f, "kind", json_string(kind));
	json_object_set_new(f, "message", json_string(msg));
	json_array_append_new(json_object_get(c, "findings"), f);
}
