/* Host variants of the test-only rows (mb_launch_fn with stream NULL and
 * host fp32 pointers). */
#ifndef MB_KERNELS_TEST_ROWS_HOST_H
#define MB_KERNELS_TEST_ROWS_HOST_H

#include <stdint.h>

#include "kernels/dtype.h"

#define MB_DECLARE_HOST(fn) \
	int fn(void *stream, const int64_t *axis, mb_dtype dtype, const void *const *in, void *const *out)

MB_DECLARE_HOST(mb_test_scale_host);
MB_DECLARE_HOST(mb_test_wrong_element_host);
MB_DECLARE_HOST(mb_test_zeros_host);
MB_DECLARE_HOST(mb_test_fault_host);
MB_DECLARE_HOST(mb_test_hang_host);

#endif
