/* The toolkit headers our C files use, included with the warnings they
 * trip under -Wpedantic -Wundef -Wstrict-prototypes silenced: they are
 * vendor code we cannot fix, and -Werror builds must still pass. Include
 * this instead of the headers themselves. */
#ifndef MB_HARNESS_CUDA_HEADERS_H
#define MB_HARNESS_CUDA_HEADERS_H

#include "mb_config.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wundef"
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>
#if MB_HAVE_CUPTI
#include <cupti.h>
#endif
#if MB_HAVE_NCCL
#include <nccl.h>
#endif
#pragma GCC diagnostic pop

#endif
