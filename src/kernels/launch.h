/* The contract of the GPU variants' launch entry points, each of which
 * follows mb_launch_fn: device pointers of the inputs then the outputs in
 * the row's tensor-spec order; returns 0 or a cudaError_t value.
 *
 * A row's .cu file defines its launches with
 * `extern "C" MB_DECLARE_LAUNCH(fn) { ... }`, and its src/reference/ROW.c,
 * where the descriptor names them, declares them with
 * `MB_DECLARE_LAUNCH(fn);`: nothing here changes when a row is added. */
#ifndef MB_KERNELS_LAUNCH_H
#define MB_KERNELS_LAUNCH_H

#include <stdint.h>

#include "kernels/dtype.h"

#define MB_DECLARE_LAUNCH(fn) \
	int fn(void *stream, const int64_t *axis, mb_dtype dtype, const void *const *in, void *const *out)

#endif
