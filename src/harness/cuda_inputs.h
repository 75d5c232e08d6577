/* Device side of a case's data: inputs written by the counter-based
 * generator (input_rng.h) in one launch per tensor, bit for bit the values
 * the host twin computes, and the checked rows of an output gathered into
 * one packed buffer so that only they cross to the host.
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

/* dst[i] = src row rows[i] for i < n_rows, rows of `row_bytes` bytes;
 * `rows` is a device array. */
int mb_cuda_gather_rows(void *stream, void *dst, const void *src, const int64_t *rows, int64_t n_rows,
	size_t row_bytes);

#ifdef __cplusplus
}
#endif

#endif
