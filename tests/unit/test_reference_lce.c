/* linear_cross_entropy's reference on a sample: with a sample of tokens it
 * writes the loss and dh of those tokens and the rows of dW that
 * mb_sample_derived picks (and leaves the rest alone), bit for bit what it
 * writes there when asked for everything; and both agree with the fp64
 * oracle within the row's fp32 tolerance. The shapes are small and
 * deliberately ragged (V not a multiple of the forward's panel, T and the
 * sample not multiples of the register tile), since the reference is
 * called directly: check_shape's V >= 16384 is the bf16 tolerance's, not
 * the reference's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/check.h"
#include "harness/host_inputs.h"
#include "kernels/catalog.h"
#include "reference/reference.h"
#include "testutil.h"

enum { T_LOSS, T_DH, T_DW, N_OUT };

typedef struct lce_case {
	int64_t axis[3]; /* T, H, V */
	float *in[3];    /* h, W, labels */
	float *out[N_OUT];
	double *wide[N_OUT];
	int64_t rows[N_OUT]; /* each output's row count */
	int64_t width[N_OUT];
} lce_case;

/* Inputs from the generator at the row's own fills, rounded to `dtype` as
 * the harness makes them, and NaN outputs. */
static int case_make(lce_case *c, const mb_row *row, int64_t t, int64_t h, int64_t v, mb_dtype dtype, uint64_t seed)
{
	mb_tensor_spec spec[MB_MAX_TENSORS];
	int n;

	memset(c, 0, sizeof(*c));
	c->axis[0] = t, c->axis[1] = h, c->axis[2] = v;
	n = row->tensors(c->axis, spec);
	if (n != 3 + N_OUT)
		return -1;
	for (int i = 0; i < n; i++) {
		size_t elems = (size_t)(spec[i].rows * spec[i].row_elems);
		if (i < 3) {
			mb_input_params p = mb_input_params_for(&spec[i], i, seed);
			if (!(c->in[i] = malloc(elems * sizeof(float))))
				return -1;
			mb_host_fill(c->in[i], elems, &p, dtype);
		} else {
			c->rows[i - 3] = spec[i].rows;
			c->width[i - 3] = spec[i].row_elems;
			c->out[i - 3] = malloc(elems * sizeof(float));
			c->wide[i - 3] = malloc(elems * sizeof(double));
			if (!c->out[i - 3] || !c->wide[i - 3])
				return -1;
			for (size_t k = 0; k < elems; k++)
				c->out[i - 3][k] = NAN, c->wide[i - 3][k] = NAN;
		}
	}
	return 0;
}

static void case_free(lce_case *c)
{
	for (int i = 0; i < 3; i++)
		free(c->in[i]);
	for (int i = 0; i < N_OUT; i++) {
		free(c->out[i]);
		free(c->wide[i]);
	}
}

/* The rows of output i a check reads for the token sample `rows`. */
static int64_t checked_rows(const lce_case *c, int i, const int64_t *rows, int64_t n, int64_t *out)
{
	if (i != T_DW) {
		for (int64_t k = 0; k < n; k++)
			out[k] = rows ? rows[k] : k;
		return n;
	}
	int64_t m = mb_sample_derived(rows, n, c->rows[T_DW], out);
	if (m < 0) {
		for (m = 0; m < c->rows[T_DW]; m++)
			out[m] = m;
	}
	return m;
}

static void test_sample_against_whole(int64_t t, int64_t h, int64_t v, int64_t n_sample, mb_dtype dtype)
{
	const mb_row *row = mb_catalog_find("linear_cross_entropy");
	const mb_tolerance *tol = &row->tolerance[MB_FP32];
	lce_case whole, part;
	int64_t *rows = NULL, n = 0, *at = malloc((size_t)(v > t ? v : t) * sizeof(int64_t));
	uint64_t differ = 0, unwritten = 0, extra = 0, over = 0, labelled = 0, compared = 0;
	mb_error err;

	CHECK(row && at);
	if (!row || !at || case_make(&whole, row, t, h, v, dtype, 31) || case_make(&part, row, t, h, v, dtype, 31)) {
		CHECK_MSG(0, "T=%lld H=%lld V=%lld: cannot make the case", (long long)t, (long long)h, (long long)v);
		free(at);
		return;
	}
	CHECK(mb_check_rows_pick(&rows, &n, t, n_sample, 7, &err) == 0 && rows != NULL);
	mb_ref_linear_cross_entropy(whole.axis, (const float *const *)whole.in, whole.out, NULL, t);
	mb_ref_linear_cross_entropy(part.axis, (const float *const *)part.in, part.out, rows, n);
	mb_oracle_linear_cross_entropy(whole.axis, (const float *const *)whole.in, whole.wide, rows, n);
	for (int i = 0; i < N_OUT; i++) {
		int64_t m = checked_rows(&whole, i, rows, n, at), k = 0;
		for (int64_t r = 0; r < whole.rows[i]; r++) {
			const bool checked = k < m && at[k] == r;
			k += checked;
			for (int64_t j = 0; j < whole.width[i]; j++) {
				const size_t e = (size_t)(r * whole.width[i] + j);
				const float a = whole.out[i][e], b = part.out[i][e];
				const double want = whole.wide[i][e];
				if (!checked) {
					/* the sampled call leaves other rows as it found them */
					extra += !isnan(b);
					continue;
				}
				differ += memcmp(&a, &b, sizeof(a)) != 0;
				unwritten += isnan(b) || isnan(want);
				over += !(fabs((double)b - want) <= tol->abs + tol->rel * fabs(want));
				compared++;
			}
		}
		if (i == T_DW) {
			/* some checked rows of dW hold a label: its -h term is checked */
			for (int64_t q = 0; q < m; q++)
				for (int64_t tk = 0; tk < t; tk++)
					labelled += (int64_t)whole.in[2][tk] == at[q];
			CHECK_MSG(m >= n / 2 && m <= n, "dW: %lld rows checked for %lld tokens", (long long)m,
				(long long)n);
		}
	}
	/* the whole call wrote everything */
	for (int i = 0; i < N_OUT; i++)
		for (int64_t e = 0; e < whole.rows[i] * whole.width[i]; e++)
			unwritten += isnan(whole.out[i][e]);
	CHECK_MSG(differ == 0 && unwritten == 0 && extra == 0 && over == 0 && compared > 0,
		"%s T=%lld H=%lld V=%lld, %lld tokens: %llu differ from the whole reference, %llu unwritten, %llu "
		"written outside the sample, %llu of %llu over the fp32 tolerance against the oracle",
		mb_dtype_name(dtype),
		(long long)t, (long long)h, (long long)v, (long long)n, (unsigned long long)differ,
		(unsigned long long)unwritten,
		(unsigned long long)extra, (unsigned long long)over, (unsigned long long)compared);
	CHECK_MSG(labelled > 0, "T=%lld V=%lld: no checked row of dW holds a label", (long long)t, (long long)v);
	free(rows);
	free(at);
	case_free(&whole);
	case_free(&part);
}

int main(void)
{
	/* which forward product this host's run tested (MEGABENCH_REF_AMX=0
	 * tests AVX-512's on a host with AMX) */
	printf("forward product: bf16 inputs %s, fp32 inputs %s\n", mb_ref_linear_cross_entropy_forward(true),
		mb_ref_linear_cross_entropy_forward(false));
	/* V past two forward panels with a ragged third; T and the sample
	 * off the register tiles (6 and 12 rows); bf16 inputs (the forward
	 * runs on bf16 products where the host has them) and fp32 ones */
	test_sample_against_whole(203, 72, 2500, 41, MB_BF16);
	test_sample_against_whole(203, 72, 2500, 41, MB_FP32);
	/* more tokens than vocabulary rows: the derived sample wraps; an odd
	 * depth leaves half a bf16 pair */
	test_sample_against_whole(301, 65, 700, 150, MB_BF16);
	return mb_test_finish("test_reference_lce");
}
