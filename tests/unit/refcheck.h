/* Shared pieces of the reference unit tests: one case of a catalog row
 * (plan, inputs, fp32 reference, fp64 oracle), the comparison of its
 * outputs, and the test that the fp32 reference meets the fp64 oracle at
 * the row's fp32 tolerance while one planted error is still caught. */
#ifndef MB_TESTS_REFCHECK_H
#define MB_TESTS_REFCHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "harness/check.h"
#include "harness/host_inputs.h"

/* One case. It owns its tensors and output buffers: refcheck_case_free
 * releases them, whatever step failed. */
typedef struct refcheck_case {
	mb_case_plan plan;
	mb_host_tensors t;
	float *ref[MB_MAX_TENSORS]; /* fp32 reference, indexed like t.data */
	float *orc[MB_MAX_TENSORS]; /* fp64 oracle rounded to fp32, the same */
	int64_t rows;               /* rows of the first output: the case's row unit */
} refcheck_case;

/* The plan of `row`'s reference variant at `axis` in `dtype`, with the id
 * "row/dtype". */
void refcheck_plan(mb_case_plan *out, const mb_row *row, mb_dtype dtype, const int64_t *axis);

/* Plan the case and draw its inputs from `seed`; no output is computed yet. */
int refcheck_case_make(refcheck_case *out, const mb_row *row, const int64_t *axis, mb_dtype dtype,
	uint64_t seed);
/* The fp32 reference (into c->ref) or the fp64 oracle (into c->orc) of
 * every row. */
int refcheck_case_reference(refcheck_case *c);
int refcheck_case_oracle(refcheck_case *c);
void refcheck_case_free(refcheck_case *c);

/* Every output of the case, all rows: got[k] against want[k] at `tol`, k
 * counting outputs from 0. The metrics go to *out. */
bool refcheck_outputs_pass(mb_check *out, const refcheck_case *c, const float *const *got,
	const float *const *want, const mb_tolerance *tol);

/* What one row's against-oracle test adds to the common steps. */
typedef struct refcheck_oracle_test {
	uint64_t seed; /* dtype d draws its inputs from seed + d */
	bool exact;    /* the reference must equal the oracle bit for bit */
	/* more checks on the passing case before the error is planted; NULL
	 * for none */
	void (*more)(refcheck_case *c, const void *ctx);
	const void *ctx;
	/* put one element of c->ref far over the fp32 tolerance */
	void (*plant)(refcheck_case *c);
} refcheck_oracle_test;

/* For every dtype's rounded inputs: the fp32 reference of `row` at `axis`
 * passes against the fp64 oracle at the row's fp32 tolerance, and after
 * test->plant exactly one element is over it. */
void refcheck_against_oracle(const mb_row *row, const int64_t *axis, const refcheck_oracle_test *test);

#endif
