/* The sampler: a case's timed samples, the rule that says when enough have
 * been taken, and the receipt's timing object made from them. Quantiles
 * are receipts/stats.h's (mb_stats_quantile_sorted), the one quantile of
 * the code base. */
#ifndef MB_HARNESS_SAMPLER_H
#define MB_HARNESS_SAMPLER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "harness/suite.h"
#include "receipts/error.h"

/* Convergence: samples are added one by one until the relative noise of the
 * median is under the target after min_samples and min_time, or the
 * timeout or max_samples is reached. */
typedef struct mb_sampler {
	double *samples_ns;
	bool *excluded;
	int n, cap;
	int64_t started_ns;
	const mb_settings *settings;
} mb_sampler;

int mb_sampler_init(mb_sampler *s, const mb_settings *settings, mb_error *err);
int mb_sampler_add(mb_sampler *s, double sample_ns, bool excluded, mb_error *err);
/* true when sampling should stop; *converged says why. */
bool mb_sampler_done(const mb_sampler *s, bool *converged);
double mb_sampler_rel_noise(const mb_sampler *s);
/* The receipt's timing object ("source" is "monotonic", "cupti" or
 * "events"). Kept samples give the statistics. */
json_t *mb_sampler_json(const mb_sampler *s, const char *source, int warmup_calls, bool converged);
double mb_sampler_median(const mb_sampler *s);
/* Samples not excluded; and excluding none (a sag that is the steady state). */
int mb_sampler_kept(const mb_sampler *s);
void mb_sampler_keep_all(mb_sampler *s);
int64_t mb_sampler_kept_sum_ns(const mb_sampler *s);
void mb_sampler_free(mb_sampler *s);

/* Robust relative standard error of the median of `sorted` (ascending):
 * 1.2533 * 1.4826 * MAD / sqrt(n) / median (receipts/stats.h's
 * constants); infinite for fewer than two samples or a median <= 0, which
 * no target accepts. */
double mb_rel_noise(const double *sorted, int n);

/* A time sample as the receipt records it: whole nanoseconds (CUPTI's
 * resolution; CUDA events resolve half a microsecond), which keeps a
 * receipt of many thousands of samples small. */
json_t *mb_ns_json(double ns);

#endif
