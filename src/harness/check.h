/* What a case's correctness check is made of: which rows the reference
 * checks (the row sample), the comparison of each output with the
 * reference at the row's tolerances, and the receipt's correctness object
 * for it. The case driver runs the checks; the reference unit tests use
 * the same comparison. */
#ifndef MB_HARNESS_CHECK_H
#define MB_HARNESS_CHECK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/catalog.h"
#include "receipts/error.h"

/* The rows the reference will check: all when rows_total <= max_rows, else
 * `max_rows` distinct rows drawn from `seed`, sorted. *out_rows == NULL
 * means all rows. The same three numbers give the same rows anywhere: the
 * receipt records `seed` as row_sample_seed (mb_driver_group_seeds draws
 * it with mb_case_seed, which keeps it in JSON's integer range). */
int mb_check_rows_pick(int64_t **out_rows, int64_t *out_n, int64_t rows_total,
	int64_t max_rows, uint64_t seed, mb_error *err);

/* Comparison metrics of one check, accumulated over every output tensor. */
typedef struct mb_check {
	double max_abs, max_rel;
	double max_tol_ratio;            /* largest |got - want| / (abs + rel |want|): over 1 fails */
	double err_sq, ref_sq, out_sq;   /* sums for rel L2 and norm ratio */
	uint64_t over_tolerance, nan_count, inf_count, compared;
	bool any_nonzero;
} mb_check;

void mb_check_init(mb_check *c);
/* Compare `got` with `want` for one output tensor. `rows` (NULL: all) and
 * `n_rows` are the sample of the case's row unit, `unit_rows` rows in all
 * (tokens, usually); an output with another row count, such as a [1, H]
 * weight gradient, is compared whole. Rows of the output's own
 * (mb_output_rows: a sampled output's) are given with unit_rows the
 * output's row count. */
void mb_check_add(mb_check *c, const mb_tensor_spec *spec, const float *got, const float *want,
	const int64_t *rows, int64_t n_rows, int64_t unit_rows, const mb_tolerance *tol);
/* The same with `got` packed as read back from a device: the i-th checked
 * row at got + i * row_elems (`want` is indexed as always). Large checks
 * are split over the host's cores. */
void mb_check_add_packed(mb_check *c, const mb_tensor_spec *spec, const float *got, const float *want,
	const int64_t *rows, int64_t n_rows, int64_t unit_rows, const mb_tolerance *tol);
/* The rows of output `spec` that a check reads: the sample for an output
 * in the row unit, all rows of any other. */
int64_t mb_check_rows_of(const mb_tensor_spec *spec, int64_t n_rows, int64_t unit_rows);
bool mb_check_passed(const mb_check *c);
/* One line on why a check failed: counts over tolerance, NaN, zeros. */
void mb_check_describe(const mb_check *c, char *buf, size_t len);
/* The receipt's correctness object for the merged checks of a case.
 * `checks` is a JSON array like ["first","last"] (taken). The seeds are
 * recorded as given: the inputs' (mb_input_key's seed) and the row
 * sample's (mb_check_rows_pick's). */
json_t *mb_correctness_json(const mb_check *merged, const char *reference, const mb_tolerance *tol,
	int64_t rows_checked, int64_t rows_total, uint64_t input_seed, uint64_t row_seed, json_t *checks);
void mb_check_merge(mb_check *into, const mb_check *from);

#endif
