/* Inputs from the counter-based generator (harness/input_rng.h,
 * host_inputs.h): values are a function of (seed, tensor, index) only,
 * never zero, representable in the dtype, with the distribution each fill
 * kind promises; a twin's rows equal the whole tensors' rows; and for every
 * catalog row, the reference computed on a twin (only the input rows the
 * row declares it reads) equals the reference on whole inputs, bit for bit,
 * on a sample of rows. That last check is what keeps each row's
 * mb_tensor_spec.reads declaration true. A slice (mb_input_params_at) is
 * the tensor's elements from its first on. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/check.h"
#include "harness/host_inputs.h"
#include "harness/rng.h"
#include "testutil.h"

#define DRAWS 200000

static void test_distributions(void)
{
	mb_tensor_spec normal = {"x", false, 1, DRAWS, MB_FILL_NORMAL, 0, 2};
	mb_tensor_spec uniform = {"c", false, 1, DRAWS, MB_FILL_UNIFORM, -1, 1};
	mb_tensor_spec index = {"i", false, 1, DRAWS, MB_FILL_INDEX, 0, 7};
	float *a = malloc(DRAWS * sizeof(float)), *b = malloc(DRAWS * sizeof(float));
	double sum = 0, sq = 0, max_abs = 0;
	int zeros = 0, seen[7] = {0}, outside = 0;

	CHECK(a && b);
	if (!a || !b)
		goto cleanup;
	/* normal, scaled by hi = 2: mean 0, standard deviation 2, |x| < 3.47 * 2 */
	mb_input_params p = mb_input_params_for(&normal, 0, 42);
	mb_host_fill(a, DRAWS, &p, MB_FP32);
	for (int i = 0; i < DRAWS; i++) {
		sum += a[i];
		sq += (double)a[i] * a[i];
		zeros += a[i] == 0.0f;
		max_abs = fmax(max_abs, fabs(a[i]));
	}
	CHECK_MSG(fabs(sum / DRAWS) < 0.02, "mean %g", sum / DRAWS);
	CHECK_MSG(fabs(sqrt(sq / DRAWS) - 2.0) < 0.02, "sd %g", sqrt(sq / DRAWS));
	CHECK_MSG(max_abs < 3.47 * 2 && max_abs > 2.5 * 2, "max |x| %g", max_abs);
	CHECK(zeros == 0);
	/* the same seed gives the same values; another seed or tensor others */
	mb_host_fill(b, DRAWS, &p, MB_FP32);
	CHECK(memcmp(a, b, DRAWS * sizeof(float)) == 0);
	p = mb_input_params_for(&normal, 1, 42);
	mb_host_fill(b, DRAWS, &p, MB_FP32);
	CHECK(memcmp(a, b, DRAWS * sizeof(float)) != 0);
	p = mb_input_params_for(&normal, 0, 43);
	mb_host_fill(b, DRAWS, &p, MB_FP32);
	CHECK(memcmp(a, b, DRAWS * sizeof(float)) != 0);
	/* every dtype: representable, never zero */
	for (int d = 0; d < MB_DTYPE_COUNT; d++) {
		int unrounded = 0;
		zeros = 0;
		p = mb_input_params_for(&normal, 0, 7);
		mb_host_fill(a, DRAWS, &p, (mb_dtype)d);
		for (int i = 0; i < DRAWS; i++) {
			unrounded += a[i] != mb_dtype_round((mb_dtype)d, a[i]);
			zeros += a[i] == 0.0f;
		}
		CHECK_MSG(unrounded == 0 && zeros == 0, "%s: %d unrounded, %d zeros", mb_dtype_name((mb_dtype)d),
			unrounded, zeros);
	}
	/* uniform in (-1, 1), mean 0 */
	p = mb_input_params_for(&uniform, 2, 42);
	mb_host_fill(a, DRAWS, &p, MB_BF16);
	sum = 0;
	for (int i = 0; i < DRAWS; i++) {
		outside += !(a[i] > -1.0f && a[i] < 1.0f) && !(fabsf(a[i]) == 1.0f); /* bf16 may round to +-1 */
		zeros += a[i] == 0.0f;
		sum += a[i];
	}
	CHECK(outside == 0 && zeros == 0);
	CHECK_MSG(fabs(sum / DRAWS) < 0.01, "uniform mean %g", sum / DRAWS);
	/* index: integers in [0, 7), each about a seventh, zero included */
	p = mb_input_params_for(&index, 3, 42);
	mb_host_fill(a, DRAWS, &p, MB_BF16);
	outside = 0;
	for (int i = 0; i < DRAWS; i++) {
		int v = (int)a[i];
		outside += (float)v != a[i] || v < 0 || v >= 7;
		if (v >= 0 && v < 7)
			seen[v]++;
	}
	CHECK(outside == 0);
	for (int v = 0; v < 7; v++)
		CHECK_MSG(fabs(seen[v] - DRAWS / 7.0) < 0.03 * DRAWS / 7.0, "index %d drawn %d times", v, seen[v]);
cleanup:
	free(a);
	free(b);
}

/* The first case of every row in the smoke suite (CPU plan: the reference
 * variant), with a row sample smaller than the row count. */
static void test_twins_and_reads(void)
{
	mb_suite *suite = NULL;
	mb_plan *plan = NULL;
	mb_error err;
	const mb_row *done[64];
	int n_done = 0;

	CHECK_MSG(mb_suite_load(&suite, mb_test_src("suites/smoke.toml"), &err) == 0, "%s", err.text);
	if (!suite)
		return;
	CHECK(mb_plan_build(&plan, suite, NULL, "cpu", &err) == 0);
	for (size_t k = 0; plan && k < plan->n_cases; k++) {
		const mb_case_plan *c = &plan->cases[k];
		mb_host_tensors whole, twin;
		float *want_whole[MB_MAX_TENSORS] = {0}, *want_twin[MB_MAX_TENSORS] = {0};
		int64_t *rows = NULL, n_rows = 0, unit;
		bool seen = false;

		for (int i = 0; i < n_done; i++)
			seen = seen || done[i] == c->row;
		if (seen || n_done == 64)
			continue;
		done[n_done++] = c->row;
		CHECK(mb_host_tensors_make(&whole, c, 5, &err) == 0);
		unit = mb_host_unit_rows(&whole);
		/* a third of the rows, at least one left out */
		CHECK(mb_check_rows_pick(&rows, &n_rows, unit, unit / 3 > 0 ? unit / 3 : 1, 11, &err) == 0);
		CHECK_MSG(rows != NULL, "%s: the sample is all rows", c->id);
		CHECK(mb_host_tensors_twin(&twin, c, 5, rows, n_rows, &err) == 0);
		/* every row reads a sample of at least one input, unless it
		 * declares that every input is read whole (a reduction over
		 * every token, such as linear_cross_entropy's weight gradient) */
		bool reads_all = true;
		for (int i = 0; i < twin.n_inputs; i++)
			reads_all = reads_all && c->row->reads[i] == MB_READS_ALL;
		CHECK_MSG(reads_all || twin.made_elems < whole.made_elems, "%s: the twin made everything",
			c->id);
		/* every element the twin made equals the whole tensor's */
		for (int i = 0; i < twin.n_inputs; i++) {
			uint64_t differ = 0;
			for (uint64_t j = 0; j < twin.elems[i]; j++)
				differ += twin.data[i][j] != 0.0f && twin.data[i][j] != whole.data[i][j];
			CHECK_MSG(differ == 0, "%s: %s: %llu twin elements differ", c->id, twin.spec[i].name,
				(unsigned long long)differ);
		}
		/* the reference reads only what the row declares */
		CHECK(mb_reference_run(want_whole, c, &whole, rows, n_rows, &err) == 0);
		CHECK(mb_reference_run(want_twin, c, &twin, rows, n_rows, &err) == 0);
		for (int i = twin.n_inputs; i < twin.n_tensors; i++) {
			const mb_tensor_spec *s = &twin.spec[i];
			int64_t *out = NULL, n = 0;
			uint64_t differ = 0, nan = 0;
			CHECK(mb_output_rows(&out, &n, c->row, i, s, rows, n_rows, unit) == 0);
			for (int64_t k2 = 0; k2 < n; k2++) {
				int64_t r = out ? out[k2] : k2;
				for (int64_t j = 0; j < s->row_elems; j++) {
					float x = want_whole[i][r * s->row_elems + j], y = want_twin[i][r * s->row_elems + j];
					differ += memcmp(&x, &y, sizeof(x)) != 0;
					nan += isnan(x);
				}
			}
			CHECK_MSG(differ == 0, "%s: %s: %llu elements differ between whole inputs and the twin: "
				"the row reads inputs it does not declare", c->id, s->name, (unsigned long long)differ);
			CHECK_MSG(nan == 0, "%s: %s: the reference left %llu sampled elements unwritten", c->id, s->name,
				(unsigned long long)nan);
			free(out);
		}
		mb_reference_free(want_whole, &whole);
		mb_reference_free(want_twin, &twin);
		mb_host_tensors_free(&whole);
		mb_host_tensors_free(&twin);
		free(rows);
	}
	CHECK_MSG(n_done >= 9, "only %d rows checked", n_done);
	mb_plan_free(plan);
	mb_suite_free(suite);
}

static mb_case_plan plan_for(const char *row, mb_dtype dtype, const int64_t *axis)
{
	mb_case_plan p;

	memset(&p, 0, sizeof(p));
	p.row = mb_catalog_find(row);
	p.variant = mb_row_find_variant(p.row, "reference");
	p.dtype = dtype;
	p.mode = MB_MODE_COLD;
	p.weight = 1;
	snprintf(p.family, sizeof(p.family), "unit");
	memcpy(p.axis, axis, sizeof(int64_t) * (size_t)p.row->n_axes);
	snprintf(p.id, sizeof(p.id), "%s/unit", row);
	return p;
}

/* The same seed gives the same inputs, every one nonzero and
 * representable in the dtype, and the outputs start poisoned. */
static void test_host_tensors(void)
{
	int64_t axis[4] = {33, 4, 2, 16};
	mb_case_plan p = plan_for("rope_qk", MB_BF16, axis);
	mb_host_tensors a, b;
	mb_error err;
	int zeros = 0, unrounded = 0, differ = 0;

	CHECK(mb_host_tensors_make(&a, &p, 42, &err) == 0);
	CHECK(mb_host_tensors_make(&b, &p, 42, &err) == 0);
	CHECK(a.n_tensors == 6 && a.n_inputs == 4);
	for (int t = 0; t < a.n_inputs; t++) {
		for (uint64_t i = 0; i < a.elems[t]; i++) {
			zeros += a.data[t][i] == 0.0f;
			unrounded += a.data[t][i] != mb_dtype_round(MB_BF16, a.data[t][i]);
			differ += a.data[t][i] != b.data[t][i];
		}
	}
	CHECK_MSG(zeros == 0, "%d zero inputs", zeros);
	CHECK_MSG(unrounded == 0, "%d inputs not representable in bf16", unrounded);
	CHECK_MSG(differ == 0, "same seed, different inputs");
	for (int t = a.n_inputs; t < a.n_tensors; t++)
		CHECK(isnan(a.data[t][0]) && isnan(a.data[t][a.elems[t] - 1]));
	mb_host_tensors_free(&b);
	CHECK(mb_host_tensors_make(&b, &p, 43, &err) == 0);
	CHECK(memcmp(a.data[0], b.data[0], a.elems[0] * sizeof(float)) != 0);
	/* cos/sin are uniform in [-1, 1] */
	for (uint64_t i = 0; i < a.elems[2]; i++)
		CHECK(fabsf(a.data[2][i]) <= 1.0f);
	mb_host_tensors_free(&a);
	mb_host_tensors_free(&b);
	mb_host_tensors_free(NULL);
}

/* The row sample is a function of (rows, max rows, seed): what a receipt
 * records is enough to list it again. */
static void test_row_sample(void)
{
	int64_t *a = NULL, *b = NULL, na = 0, nb = 0;
	mb_error err;
	uint64_t seed = mb_case_seed(20261121, "rope_qk/bf16/tiny/T=64");

	CHECK(seed <= (uint64_t)INT64_MAX); /* a JSON integer, as it is */
	CHECK(mb_check_rows_pick(&a, &na, 1000, 50, seed, &err) == 0);
	CHECK(mb_check_rows_pick(&b, &nb, 1000, 50, seed, &err) == 0);
	CHECK(na == 50 && nb == 50 && memcmp(a, b, 50 * sizeof(*a)) == 0);
	free(a);
	free(b);
}

/* A sampled output's rows follow from the unit's sample (so the reference
 * can list them itself): in range, sorted, distinct, as many as the sample
 * at most, the same for the same sample, others for another; the whole
 * unit checks it whole; and mb_output_rows hands out each output's. */
static void test_derived_sample(void)
{
	enum { UNIT = 5000, SAMPLE = 400, OTHER = 70000 };
	int64_t *a = NULL, *b = NULL, na = 0, nb = 0, da[SAMPLE], db[SAMPLE], n1, n2, *list = NULL, n = 0;
	/* tensors 0, 1, 2 of a row whose tensor 2 is sampled */
	const mb_row row = {.name = "sampled", .tensor_flags = {[2] = MB_TENSOR_SAMPLED}};
	mb_tensor_spec unit = {"dh", true, UNIT, 8, MB_FILL_NORMAL, 0, 0};
	mb_tensor_spec whole = {"db", true, 3, 8, MB_FILL_NORMAL, 0, 0};
	mb_tensor_spec sampled = {"dW", true, OTHER, 8, MB_FILL_NORMAL, 0, 0};
	mb_error err;
	bool sorted = true;

	CHECK(mb_check_rows_pick(&a, &na, UNIT, SAMPLE, 1, &err) == 0 && na == SAMPLE);
	CHECK(mb_check_rows_pick(&b, &nb, UNIT, SAMPLE, 2, &err) == 0 && nb == SAMPLE);
	if (!a || !b)
		goto cleanup;
	n1 = mb_sample_derived(a, na, OTHER, da);
	n2 = mb_sample_derived(a, na, OTHER, db);
	CHECK(n1 > SAMPLE * 9 / 10 && n1 <= SAMPLE && n1 == n2 && memcmp(da, db, (size_t)n1 * sizeof(*da)) == 0);
	for (int64_t i = 0; i < n1; i++)
		sorted = sorted && da[i] >= 0 && da[i] < OTHER && (i == 0 || da[i] > da[i - 1]);
	CHECK(sorted);
	n2 = mb_sample_derived(b, nb, OTHER, db);
	CHECK(n2 > 0 && (n2 != n1 || memcmp(da, db, (size_t)n1 * sizeof(*da)) != 0));
	CHECK(mb_sample_derived(NULL, UNIT, OTHER, da) == -1);
	/* each output's rows */
	CHECK(mb_output_rows(&list, &n, &row, 0, &unit, a, na, UNIT) == 0 && n == na && list
		&& memcmp(list, a, (size_t)na * sizeof(*a)) == 0);
	free(list);
	CHECK(mb_output_rows(&list, &n, &row, 0, &unit, NULL, UNIT, UNIT) == 0 && n == UNIT && list == NULL);
	CHECK(mb_output_rows(&list, &n, &row, 1, &whole, a, na, UNIT) == 0 && n == 3 && list == NULL);
	CHECK(mb_output_rows(&list, &n, &row, 2, &sampled, a, na, UNIT) == 0 && n == n1 && list
		&& memcmp(list, da, (size_t)n1 * sizeof(*da)) == 0);
	free(list);
	CHECK(mb_output_rows(&list, &n, &row, 2, &sampled, NULL, UNIT, UNIT) == 0 && n == OTHER && list == NULL);
	/* the same tensor without the flag is checked whole */
	CHECK(mb_output_rows(&list, &n, &row, 1, &sampled, a, na, UNIT) == 0 && n == OTHER && list == NULL);
cleanup:
	free(a);
	free(b);
}

/* A slice of a tensor, by mb_input_params_at, is that tensor's elements
 * from `first` on: every attempt of every element (a retry draws attempt
 * 1 and up), and the stored values in every dtype. */
static void test_slice(void)
{
	mb_tensor_spec x = {"x", false, 4, 1000, MB_FILL_NORMAL, 0, 1};
	const uint64_t first = 1234567;
	mb_input_params p = mb_input_params_for(&x, 0, 99), q = mb_input_params_at(&p, first);
	float whole[64], slice[64];
	int differ = 0;

	for (uint64_t i = 0; i < 4000; i++)
		for (int a = 0; a < MB_INPUT_ATTEMPTS; a++)
			differ += mb_input_bits(q.key, i, a) != mb_input_bits(p.key, first + i, a);
	CHECK_MSG(differ == 0, "%d draws of the slice differ from the tensor's", differ);
	for (int d = 0; d < MB_DTYPE_COUNT; d++) {
		/* the first 64 + first elements, and the slice's first 64 */
		float *all = malloc((first + 64) * sizeof(float));
		CHECK(all != NULL);
		if (!all)
			return;
		mb_host_fill(all, first + 64, &p, (mb_dtype)d);
		memcpy(whole, all + first, sizeof(whole));
		mb_host_fill(slice, 64, &q, (mb_dtype)d);
		CHECK_MSG(memcmp(whole, slice, sizeof(whole)) == 0, "%s: the slice's values differ",
			mb_dtype_name((mb_dtype)d));
		free(all);
	}
}

int main(void)
{
	test_slice();
	test_distributions();
	test_twins_and_reads();
	test_host_tensors();
	test_row_sample();
	test_derived_sample();
	return mb_test_finish("test_inputs");
}
