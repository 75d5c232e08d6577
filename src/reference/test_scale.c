/* y = 2x: the math of the test-only rows that check the harness catches
 * wrong answers, zeros, faults and hangs. Doubling is exact in binary
 * floating point, so any difference at all is a wrong answer. */
#include "reference/row_common.h"
#include "kernels/test_rows_host.h"
#include "reference/reference.h"

/* The test rows' GPU variants, defined in src/kernels/test_rows.cu:
 * in x [N,C]; out y [N,C]. */
MB_DECLARE_LAUNCH(mb_test_scale_launch); /* the correct one, as a control */
MB_DECLARE_LAUNCH(mb_test_wrong_element_launch);
MB_DECLARE_LAUNCH(mb_test_zeros_launch);
MB_DECLARE_LAUNCH(mb_test_fault_launch);
MB_DECLARE_LAUNCH(mb_test_hang_launch);

enum { AX_N, AX_C };

#define DEFINE_SCALE(fn, OUT) \
	void fn(const int64_t *axis, const float *const *in, OUT *const *out, \
		const int64_t *rows, int64_t n_rows) \
	{ \
		int64_t cols = axis[AX_C]; \
		for (int64_t i = 0; i < n_rows; i++) { \
			int64_t t = mb_ref_row(rows, i); \
			for (int64_t j = 0; j < cols; j++) \
				out[0][t * cols + j] = (OUT)2 * (OUT)in[0][t * cols + j]; \
		} \
	}

DEFINE_SCALE(mb_ref_test_scale, float)
DEFINE_SCALE(mb_oracle_test_scale, double)

/* ---- test-only rows ------------------------------------------------- */

enum { SCALE_N, SCALE_C };

static int scale_tensors(const int64_t *a, mb_tensor_spec *t)
{
	t[0] = (mb_tensor_spec){"x", false, a[SCALE_N], a[SCALE_C], MB_FILL_NORMAL, 0, 1};
	t[1] = (mb_tensor_spec){"y", true, a[SCALE_N], a[SCALE_C], MB_FILL_NORMAL, 0, 0};
	return 2;
}

static uint64_t scale_bytes(const int64_t *a, mb_dtype dtype)
{
	return 2ull * (uint64_t)a[SCALE_N] * (uint64_t)a[SCALE_C] * mb_dtype_size(dtype);
}

static uint64_t scale_flops(const int64_t *a)
{
	return (uint64_t)a[SCALE_N] * (uint64_t)a[SCALE_C];
}

#define SCALE_EXACT {0, 0, "doubling is exact in binary floating point: any difference is wrong"}

#define TEST_ROW(row_name, what, kernel, fn, host_fn) { \
	.name = row_name, .block = 'X', .status = MB_ROW_DROP, \
	.summary = "test only: y = 2x, " what, \
	.n_axes = 2, .axes = {"N", "C"}, .tensors = scale_tensors, .bytes = scale_bytes, \
	.flops = scale_flops, .reference = mb_ref_test_scale, .oracle = mb_oracle_test_scale, \
	.reference_name = "mb_ref_test_scale (src/reference/test_scale.c)", \
	.source_files = {"src/kernels/test_rows.cu", "src/reference/test_scale.c"}, \
	.tolerance = {SCALE_EXACT, SCALE_EXACT, SCALE_EXACT}, \
	.n_variants = 3, \
	.variants = { \
		{.name = "fused", .kind = MB_VARIANT_FUSED, .backend = "cuda", \
			.description = what, \
			.launches_per_call = 1, .kernel_patterns = {kernel}, .launch = GPU_LAUNCH(fn), \
			.dtype_mask = MB_DTYPE_ALL}, \
		{.name = "host", .kind = MB_VARIANT_FUSED, .backend = "cpu", \
			.description = what " (on the host, for tests without a GPU)", \
			.launches_per_call = 0, .launch = host_fn, .dtype_mask = MB_DTYPE_ALL}, \
		MB_REFERENCE_VARIANT, \
	}, \
}

const mb_row mb_test_rows[MB_TEST_ROWS] = {
	TEST_ROW("test_scale", "correct (control)", "test_scale", mb_test_scale_launch, mb_test_scale_host),
	TEST_ROW("test_wrong_element", "writes one wrong element", "test_wrong_element", mb_test_wrong_element_launch,
		mb_test_wrong_element_host),
	TEST_ROW("test_zeros", "writes zeros", "test_zeros", mb_test_zeros_launch, mb_test_zeros_host),
	TEST_ROW("test_fault", "writes to an illegal address", "test_fault", mb_test_fault_launch, mb_test_fault_host),
	TEST_ROW("test_hang", "never finishes", "test_hang", mb_test_hang_launch, mb_test_hang_host),
};
