/* Which rows the reference checks, and the comparison of outputs with it
 * at the row's tolerances; see check.h. */
#include "harness/check.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/rng.h"
#include "reference/parallel.h"
#include "receipts/text.h"

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
	json_object_set_new(o, "max_abs", mb_json_real_or_null(c->compared ? c->max_abs : NAN));
	json_object_set_new(o, "max_rel", mb_json_real_or_null(c->compared ? c->max_rel : NAN));
	json_object_set_new(o, "error_over_tolerance", mb_json_real_or_null(c->compared ? c->max_tol_ratio : NAN));
	json_object_set_new(o, "rel_l2", mb_json_real_or_null(c->ref_sq > 0 ? sqrt(c->err_sq / c->ref_sq) : NAN));
	json_object_set_new(o, "over_tolerance", json_integer((json_int_t)c->over_tolerance));
	json_object_set_new(o, "nan_count", json_integer((json_int_t)c->nan_count));
	json_object_set_new(o, "inf_count", json_integer((json_int_t)c->inf_count));
	json_object_set_new(o, "norm_ratio", mb_json_real_or_null(norm_ratio(c)));
	json_object_set_new(o, "rows_checked", json_integer(rows_checked));
	json_object_set_new(o, "rows_total", json_integer(rows_total));
	json_object_set_new(o, "input_seed", json_integer((json_int_t)input_seed));
	if (rows_checked < rows_total)
		json_object_set_new(o, "row_sample_seed", json_integer((json_int_t)row_seed));
	json_object_set_new(o, "checks", checks);
	json_object_set_new(o, "passed", json_boolean(mb_check_passed(c)));
	return o;
}
