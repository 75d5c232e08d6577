/* What every row descriptor file needs: MB_DECLARE_LAUNCH for the GPU
 * launches its descriptor names (kernels/launch.h), the reference variant,
 * the GPU launch pointer that is NULL in a build without CUDA, and the
 * rounding constants tolerances are written in. Included only by row
 * files. */
#ifndef MB_KERNELS_ROW_COMMON_H
#define MB_KERNELS_ROW_COMMON_H

#include <stdio.h>

#include "mb_config.h"
#include "kernels/catalog.h"
#include "kernels/launch.h"
#include "kernels/rows.h"
#include "reference/reference.h"

#if MB_HAVE_CUDA
#define GPU_LAUNCH(fn) (fn)
#else
#define GPU_LAUNCH(fn) NULL
#endif

/* Inputs the harness draws stay under 8 in magnitude for every shape we run
 * (P(|z| > 8) is 1e-15 per element); cos and sin under 1. */
#define F32_EPS 0x1p-24 /* unit roundoff of fp32 */
#define F16_HALF_ULP 0x1p-11
#define BF16_HALF_ULP 0x1p-8

#define MB_REFERENCE_VARIANT { \
	.name = "reference", \
	.kind = MB_VARIANT_REFERENCE, \
	.backend = "cpu", \
	.description = "the fp32 C reference, timed on the host", \
	.launches_per_call = 0, \
	.dtype_mask = MB_DTYPE_ALL, \
}

#endif
