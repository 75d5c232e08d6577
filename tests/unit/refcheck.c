#include "refcheck.h"

#include <stdio.h>
#include <string.h>

#include "testutil.h"

void refcheck_plan(mb_case_plan *out, const mb_row *row, mb_dtype dtype, const int64_t *axis)
{
	memset(out, 0, sizeof(*out));
	out->row = row;
	out->variant = mb_row_find_variant(row, "reference");
	out->dtype = dtype;
	memcpy(out->axis, axis, sizeof(int64_t) * (size_t)row->n_axes);
	snprintf(out->id, sizeof(out->id), "%s/%s", row->name, mb_dtype_name(dtype));
}

int refcheck_case_make(refcheck_case *out, const mb_row *row, const int64_t *axis, mb_dtype dtype,
	uint64_t seed)
{
	mb_error err;

	memset(out, 0, sizeof(*out));
	refcheck_plan(&out->plan, row, dtype, axis);
	if (mb_host_tensors_make(&out->t, &out->plan, seed, &err) != 0)
		return -1;
	out->rows = out->t.spec[out->t.n_inputs].rows;
	return 0;
}

int refcheck_case_reference(refcheck_case *c)
{
	mb_error err;

	return mb_reference_run(c->ref, &c->plan, &c->t, NULL, c->rows, &err);
}

int refcheck_case_oracle(refcheck_case *c)
{
	mb_error err;

	return mb_oracle_run(c->orc, &c->plan, &c->t, NULL, c->rows, &err);
}

void refcheck_case_free(refcheck_case *c)
{
	mb_reference_free(c->ref, &c->t);
	mb_reference_free(c->orc, &c->t);
	mb_host_tensors_free(&c->t);
}

bool refcheck_outputs_pass(mb_check *out, const refcheck_case *c, const float *const *got,
	const float *const *want, const mb_tolerance *tol)
{
	mb_check_init(out);
	for (int i = c->t.n_inputs; i < c->t.n_tensors; i++)
		mb_check_add(out, &c->t.spec[i], got[i - c->t.n_inputs], want[i - c->t.n_inputs], NULL, c->rows,
			c->rows, tol);
	return mb_check_passed(out);
}

/* c->ref against c->orc, outputs only, at `tol`. */
static bool ref_meets_oracle(mb_check *out, const refcheck_case *c, const mb_tolerance *tol)
{
	return refcheck_outputs_pass(out, c, (const float *const *)(c->ref + c->t.n_inputs),
		(const float *const *)(c->orc + c->t.n_inputs), tol);
}

void refcheck_against_oracle(const mb_row *row, const int64_t *axis, const refcheck_oracle_test *test)
{
	const mb_tolerance *tol = &row->tolerance[MB_FP32];

	for (int d = 0; d < MB_DTYPE_COUNT; d++) {
		const char *dtype = mb_dtype_name((mb_dtype)d);
		refcheck_case c;
		mb_check chk;
		bool passed;

		CHECK_MSG(refcheck_case_make(&c, row, axis, (mb_dtype)d, test->seed + (uint64_t)d) == 0, "%s %s",
			row->name, dtype);
		CHECK_MSG(refcheck_case_reference(&c) == 0, "%s %s", row->name, dtype);
		CHECK_MSG(refcheck_case_oracle(&c) == 0, "%s %s", row->name, dtype);
		passed = ref_meets_oracle(&chk, &c, tol);
		CHECK_MSG(passed && (!test->exact || chk.max_abs == 0), "%s %s: %llu over tolerance, max abs %g",
			row->name, dtype, (unsigned long long)chk.over_tolerance, chk.max_abs);
		if (test->more)
			test->more(&c, test->ctx);
		test->plant(&c);
		passed = ref_meets_oracle(&chk, &c, tol);
		CHECK_MSG(!passed && chk.over_tolerance == 1, "%s %s: planted error, %llu over tolerance", row->name,
			dtype, (unsigned long long)chk.over_tolerance);
		refcheck_case_free(&c);
	}
}
