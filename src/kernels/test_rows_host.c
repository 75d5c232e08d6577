/* Host versions of the test-only rows: y = 2x computed right, or broken in
 * one way each, so that the harness's isolation and correctness checks are
 * exercised on a machine with no GPU. Built only into test catalogs (see
 * test_rows_host.h) and listed only by `--all` there. */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "kernels/test_rows_host.h"

enum { AX_N, AX_C };

static void scale(const int64_t *axis, const void *const *in, void *const *out)
{
	const float *x = in[0];
	float *y = out[0];
	int64_t n = axis[AX_N] * axis[AX_C];

	for (int64_t i = 0; i < n; i++)
		y[i] = 2.0f * x[i];
}

int mb_test_scale_host(void *stream, const int64_t *axis, mb_dtype dtype, const void *const *in, void *const *out)
{
	(void)stream;
	(void)dtype;
	scale(axis, in, out);
	return 0;
}

int mb_test_wrong_element_host(void *stream, const int64_t *axis, mb_dtype dtype, const void *const *in,
	void *const *out)
{
	float *y = out[0];

	(void)stream;
	(void)dtype;
	scale(axis, in, out);
	y[axis[AX_N] * axis[AX_C] / 2] += 1.0f; /* one element, in the middle */
	return 0;
}

int mb_test_zeros_host(void *stream, const int64_t *axis, mb_dtype dtype, const void *const *in, void *const *out)
{
	(void)stream;
	(void)dtype;
	(void)in;
	memset(out[0], 0, (size_t)(axis[AX_N] * axis[AX_C]) * sizeof(float));
	return 0;
}

int mb_test_fault_host(void *stream, const int64_t *axis, mb_dtype dtype, const void *const *in, void *const *out)
{
	(void)stream;
	(void)axis;
	(void)dtype;
	(void)in;
	(void)out;
	raise(SIGSEGV); /* what a wild store does, without undefined behaviour */
	return 0;
}

int mb_test_hang_host(void *stream, const int64_t *axis, mb_dtype dtype, const void *const *in, void *const *out)
{
	(void)stream;
	(void)axis;
	(void)dtype;
	(void)in;
	(void)out;
	for (;;)
		pause(); /* only the harness's timeout ends this */
	return 0;
}
