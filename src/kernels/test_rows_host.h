/* The test-only rows (y = 2x, correct or broken in one way each): their
 * descriptors (src/reference/test_scale.c), GPU launches
 * (src/kernels/test_rows.cu) and host variants (test_rows_host.c, as
 * mb_launch_fn with stream NULL and host fp32 pointers).
 *
 * They are built only into a test catalog (catalog.c compiled with
 * MB_CATALOG_TEST_ROWS=1): megabench-test and the test programs always,
 * megabench only with -Dtest_rows=true. */
#ifndef MB_KERNELS_TEST_ROWS_HOST_H
#define MB_KERNELS_TEST_ROWS_HOST_H

#include <stdint.h>

#include "kernels/catalog.h"
#include "kernels/dtype.h"

/* test_scale (the control), test_wrong_element, test_zeros, test_fault,
 * test_hang */
#define MB_TEST_ROWS 5
extern const mb_row mb_test_rows[MB_TEST_ROWS];

#define MB_DECLARE_HOST(fn) \
	int fn(void *stream, const int64_t *axis, mb_dtype dtype, const void *const *in, void *const *out)

MB_DECLARE_HOST(mb_test_scale_host);
MB_DECLARE_HOST(mb_test_wrong_element_host);
MB_DECLARE_HOST(mb_test_zeros_host);
MB_DECLARE_HOST(mb_test_fault_host);
MB_DECLARE_HOST(mb_test_hang_host);

#endif
