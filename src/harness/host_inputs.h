/* Host tensors of one shape and dtype, in fp32 and already rounded to the
 * dtype, made by the counter-based generator (input_rng.h), so that every
 * element equals the one the device made for the same seed.
 *
 * Two kinds: whole tensors (the CPU backend computes on them, and the
 * reference tests use them), and the twin of a device case, which holds
 * only the input rows the reference reads for a sample of output rows
 * (mb_tensor_spec.reads). A twin's arrays are mapped at full size so that
 * the references index them as usual, but only the rows made are ever
 * touched: a [32768, 8192] input costs a sample's worth of memory and time.
 *
 * Also the reference and oracle runs into such "want" arrays. Everything
 * here belongs to the mb_host_tensors (or want array) that holds it.
 */
#ifndef MB_HARNESS_HOST_INPUTS_H
#define MB_HARNESS_HOST_INPUTS_H

#include <stdbool.h>
#include <stdint.h>

#include "harness/input_rng.h"
#include "harness/suite.h"
#include "receipts/error.h"

typedef struct mb_host_tensors {
	int n_tensors;
	int n_inputs;
	mb_tensor_spec spec[MB_MAX_TENSORS];
	float *data[MB_MAX_TENSORS]; /* NULL for a twin's outputs */
	uint64_t elems[MB_MAX_TENSORS];
	uint64_t made_elems;         /* input elements actually generated */
} mb_host_tensors;

/* The generator's parameters for tensor `tensor` (spec order) of a case
 * whose inputs come from `seed`. */
mb_input_params mb_input_params_for(const mb_tensor_spec *spec, int tensor, uint64_t seed);

/* Generate all `n` elements of a tensor into `dst` (fp32, rounded to
 * `dtype`) on every host core. */
void mb_host_fill(float *dst, uint64_t n, const mb_input_params *p, mb_dtype dtype);

/* Every tensor of the case whole, inputs not yet written, outputs NaN. */
int mb_host_tensors_alloc(mb_host_tensors *out, const mb_case_plan *plan, mb_error *err);
/* Every tensor of the case whole: inputs generated from `seed`, outputs
 * NaN. */
int mb_host_tensors_make(mb_host_tensors *out, const mb_case_plan *plan, uint64_t seed, mb_error *err);

/* The inputs the reference reads for output rows `rows` (NULL: all
 * `n_rows` rows) and nothing else; no outputs. */
int mb_host_tensors_twin(mb_host_tensors *out, const mb_case_plan *plan, uint64_t seed,
	const int64_t *rows, int64_t n_rows, mb_error *err);

void mb_host_tensors_free(mb_host_tensors *t);
/* NaN over every output of whole tensors. */
void mb_host_tensors_poison(mb_host_tensors *t);

/* The rows of the case's row unit: the first output's row count. */
int64_t mb_host_unit_rows(const mb_host_tensors *t);

/* The rows of output `tensor` (its spec `spec`) of `row` that the
 * reference writes and a check reads, for a sample `rows` (NULL: rows
 * 0 .. n_rows-1) of the unit (`unit_rows` rows in all): the sample for an
 * output in the unit, the rows mb_sample_derived picks for a sampled
 * output (MB_TENSOR_SAMPLED) of another row count, every row of any other
 * output. *out NULL means rows 0 .. *out_n - 1; otherwise *out is a list
 * the caller frees. 0, or -1 when out of memory. */
int mb_output_rows(int64_t **out, int64_t *out_n, const mb_row *row, int tensor, const mb_tensor_spec *spec,
	const int64_t *rows, int64_t n_rows, int64_t unit_rows);

/* Device storage of a tensor stored as `dtype` (mb_row_tensor_dtype), or
 * int32 for index tensors. Host copies are always fp32 (indices are exact
 * below 2^24). */
size_t mb_tensor_elem_bytes(const mb_tensor_spec *spec, mb_dtype dtype);
void mb_tensor_pack(const mb_tensor_spec *spec, mb_dtype dtype, const float *src, void *dst, size_t n);
void mb_tensor_unpack(const mb_tensor_spec *spec, mb_dtype dtype, const void *src, float *dst, size_t n);

/* Run the row's fp32 reference (or its fp64 oracle, rounded to fp32) on
 * `in` for output rows `rows` into fresh arrays want[i], one per output
 * (indexed like in->spec, full size, NaN over the rows each output is
 * checked at, mb_output_rows: a row the reference leaves unwritten cannot
 * pass). */
int mb_reference_run(float **want, const mb_case_plan *plan, const mb_host_tensors *in,
	const int64_t *rows, int64_t n_rows, mb_error *err);
int mb_oracle_run(float **want, const mb_case_plan *plan, const mb_host_tensors *in,
	const int64_t *rows, int64_t n_rows, mb_error *err);
void mb_reference_free(float **want, const mb_host_tensors *t);

#endif
