/* The sampler, its stop rule and the receipt's timing object; see
 * sampler.h. */
#include "harness/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/clock.h"
#include "receipts/stats.h"

#define NS_PER_S 1000000000LL

json_t *mb_ns_json(double ns)
{
	return json_integer((json_int_t)llround(ns));
}

/* Not mb_stats_summarize's rel_noise: that one takes an even sample's
 * median as the mean of the middle pair, which can differ from the
 * interpolated quantile in the last bit, and gives one sample a noise of
 * 0, which the stop rule would take for convergence. */
double mb_rel_noise(const double *sorted, int n)
{
	double med, *dev, mad;

	if (n < 2)
		return INFINITY;
	med = mb_stats_quantile_sorted(sorted, (size_t)n, 0.5);
	dev = malloc((size_t)n * sizeof(*dev));
	if (!dev || med <= 0) {
		free(dev);
		return INFINITY;
	}
	for (int i = 0; i < n; i++)
		dev[i] = fabs(sorted[i] - med);
	qsort(dev, (size_t)n, sizeof(*dev), mb_stats_cmp_double);
	mad = mb_stats_quantile_sorted(dev, (size_t)n, 0.5);
	free(dev);
	return MB_STATS_MEDIAN_SE_FACTOR * MB_STATS_MAD_TO_SD * mad / sqrt((double)n) / med;
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
		qsort(v, (size_t)n, sizeof(*v), mb_stats_cmp_double);
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
	double med = v ? mb_stats_quantile_sorted(v, (size_t)n, 0.5) : NAN;

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
	json_object_set_new(o, "median_ns", json_real(n ? mb_stats_quantile_sorted(v, (size_t)n, 0.5) : 0));
	json_object_set_new(o, "mean_ns", json_real(mean));
	json_object_set_new(o, "stddev_ns", json_real(sd));
	json_object_set_new(o, "min_ns", json_real(n ? v[0] : 0));
	json_object_set_new(o, "max_ns", json_real(n ? v[n - 1] : 0));
	json_object_set_new(o, "p10_ns", json_real(n ? mb_stats_quantile_sorted(v, (size_t)n, 0.1) : 0));
	json_object_set_new(o, "p90_ns", json_real(n ? mb_stats_quantile_sorted(v, (size_t)n, 0.9) : 0));
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
