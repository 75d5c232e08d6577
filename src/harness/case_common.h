/* Pieces every backend uses to run and record a case: fresh inputs, row
 * sampling for the reference, the reference itself, comparison, timing
 * summaries and the case's JSON. Backends differ only in how they call the
 * variant and read its clock. */
#ifndef MB_HARNESS_CASE_COMMON_H
#define MB_HARNESS_CASE_COMMON_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "receipts/error.h"
#include "harness/suite.h"
#include "kernels/catalog.h"

/* Host-side tensors of one case, fp32, already rounded to the case dtype. */
typedef struct mb_host_tensors {
	int n_tensors;
	int n_inputs;
	mb_tensor_spec spec[MB_MAX_TENSORS];
	float *data[MB_MAX_TENSORS]; /* inputs filled; outputs allocated */
	uint64_t elems[MB_MAX_TENSORS];
} mb_host_tensors;

/* Allocate every tensor of the case and fill the inputs from `seed` (never
 * zeros; rounded to dtype). Outputs are poisoned with NaN. */
int mb_host_tensors_make(mb_host_tensors *out, const mb_case_plan *plan, uint64_t seed, mb_error *err);
void mb_host_tensors_free(mb_host_tensors *t);
void mb_host_tensors_poison(mb_host_tensors *t);

/* Device storage of a tensor: the case dtype, or int32 for index tensors.
 * Host copies are always fp32 (indices are exact below 2^24). */
size_t mb_tensor_elem_bytes(const mb_tensor_spec *spec, mb_dtype dtype);
void mb_tensor_pack(const mb_tensor_spec *spec, mb_dtype dtype, const float *src, void *dst, size_t n);
void mb_tensor_unpack(const mb_tensor_spec *spec, mb_dtype dtype, const void *src, float *dst, size_t n);

/* The rows the reference will check: all when rows_total <= max_rows, else
 * `max_rows` distinct rows drawn from `seed`, sorted. *out_rows == NULL
 * means all rows. */
int mb_check_rows_pick(int64_t **out_rows, int64_t *out_n, int64_t rows_total,
	int64_t max_rows, uint64_t seed, mb_error *err);

/* Run the row's fp32 reference on `in` for `rows` into freshly allocated
 * output buffers (want[i] for each output, full size, NaN where not
 * computed). */
int mb_reference_run(float **want, const mb_case_plan *plan, const mb_host_tensors *in,
	const int64_t *rows, int64_t n_rows, mb_error *err);
/* The same with the fp64 oracle, rounded to fp32 at the end. */
int mb_oracle_run(float **want, const mb_case_plan *plan, const mb_host_tensors *in,
	const int64_t *rows, int64_t n_rows, mb_error *err);
void mb_reference_free(float **want, const mb_host_tensors *t);

/* Comparison metrics of one check, accumulated over every output tensor. */
typedef struct mb_check {
	double max_abs, max_rel;
	double err_sq, ref_sq, out_sq;   /* sums for rel L2 and norm ratio */
	uint64_t over_tolerance, nan_count, inf_count, compared;
	bool any_nonzero;
} mb_check;

void mb_check_init(mb_check *c);
/* Compare `got` with `want` for one output tensor. `rows` (NULL: all) and
 * `n_rows` are the sample of the case's row unit, `unit_rows` rows in all
 * (tokens, usually); an output with another row count, such as a [1, H]
 * weight gradient, is compared whole. */
void mb_check_add(mb_check *c, const mb_tensor_spec *spec, const float *got, const float *want,
	const int64_t *rows, int64_t n_rows, int64_t unit_rows, const mb_tolerance *tol);
bool mb_check_passed(const mb_check *c);
/* One line on why a check failed: counts over tolerance, NaN, zeros. */
void mb_check_describe(const mb_check *c, char *buf, size_t len);
/* Merge several checks (first call, last call) into the receipt's
 * correctness object. `checks` is a JSON array like ["first","last"]. */
json_t *mb_correctness_json(const mb_check *merged, const char *reference, const mb_tolerance *tol,
	int64_t rows_checked, int64_t rows_total, uint64_t row_seed, json_t *checks);
void mb_check_merge(mb_check *into, const mb_check *from);

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
int64_t mb_sampler_kept_sum_ns(const mb_sampler *s);
void mb_sampler_free(mb_sampler *s);

/* Robust relative standard error of the median:
 * 1.2533 * 1.4826 * MAD / sqrt(n) / median. */
double mb_rel_noise(const double *sorted, int n);
/* Linear-interpolated quantile of sorted data, q in [0, 1]. */
double mb_quantile_sorted(const double *sorted, int n, double q);
/* qsort comparator for doubles, ascending. One definition, so that every
 * backend orders its samples the same way before taking quantiles. */
int mb_cmp_double(const void *a, const void *b);

/* The receipt's throughput object; `ceilings` is the probe's object. */
json_t *mb_throughput_json(uint64_t bytes, uint64_t flops, double median_ns, const json_t *ceilings);

/* A fresh case object with status "ok" and every result field null. */
json_t *mb_case_json_new(const mb_case_plan *plan, const char *backend);
/* Set status and error text ("ok" clears error). */
void mb_case_json_set_status(json_t *c, const char *status, const char *error);
void mb_case_json_add_finding(json_t *c, const char *kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Monotonic clock in ns. */
int64_t mb_now_ns(void);

/* splitmix64-seeded xoshiro256** generator: deterministic, fast. */
typedef struct mb_rng {
	uint64_t s[4];
} mb_rng;
void mb_rng_seed(mb_rng *r, uint64_t seed);
uint64_t mb_rng_next(mb_rng *r);
double mb_rng_uniform(mb_rng *r);   /* [0, 1) */
double mb_rng_normal(mb_rng *r);    /* N(0, 1) */
/* A seed for one case from the run seed and the case id. */
uint64_t mb_case_seed(uint64_t run_seed, const char *case_id);

#endif
