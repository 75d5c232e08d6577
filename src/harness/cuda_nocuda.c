/* The CUDA backend's entry points in a build without CUDA: there is no
 * backend, and no device is ever usable. */
#include <stdio.h>

#include "harness/backend.h"
#include "harness/lane.h"

const mb_backend *mb_backend_cuda(void)
{
	return NULL;
}

int mb_backend_cuda_devices(char *why, size_t why_len)
{
	snprintf(why, why_len, "built without CUDA");
	return 0;
}

int mb_lane_run(json_t **out, const mb_lane_spec *spec, mb_error *err)
{
	*out = NULL;
	return mb_error_set(err, MB_EUNSUPPORTED, spec->name, "lanes need the CUDA backend: built without CUDA");
}
