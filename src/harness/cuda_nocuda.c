/* The CUDA backend's entry points in a build without CUDA: there is no
 * backend, and no device is ever usable. */
#include <stdio.h>

#include "harness/backend.h"

const mb_backend *mb_backend_cuda(void)
{
	return NULL;
}

int mb_backend_cuda_devices(char *why, size_t why_len)
{
	snprintf(why, why_len, "built without CUDA");
	return 0;
}
