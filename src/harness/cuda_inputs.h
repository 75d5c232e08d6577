/* Device side of a case's data: inputs written by the counter-based
 * generator (input_rng.h) in one launch per tensor, bit for bit the values
 * the host twin computes, and the checked rows of an output gathered into
 * one packed fp32 buffer so that only they cross to the host, already in
 * the type the comparison reads.
 *
 * Every function queues work on `stream` (a cudaStream_t) and returns 0 or
 * a cudaError_t value. */
#ifndef MB_HARNESS_CUDA_INPUTS_H
#define MB_HARNESS_CUDA_INPUTS_H

#include <stddef.h>
#include <stdint.h>

#include "harness/input_rng.h"
#include "kernels/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* All `n` elements of `dst`: `dtype` storage, or int32 for an index fill. */
int mb_cuda_fill(void *stream, void *dst, uint64_t n, const mb_input_params *p, mb_dtype dtype);

/* Row i of `dst` (fp32, row_elems wide) = row rows[i] of `src` (`dtype`
 * storage, or int32 when `index`), for i < n_rows; `rows` is a device
 * array, or NULL for rows 0 .. n_rows-1. */
int mb_cuda_rows_f32(void *stream, float *dst, const void *src, const int64_t *rows, int64_t n_rows,
	int64_t row_elems, mb_dtype dtype, int index);

#ifdef __cplusplus
}
#endif

#endif
