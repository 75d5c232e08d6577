/* What every row descriptor file needs: MB_DECLARE_LAUNCH for the GPU
 * launches its descriptor names (kernels/launch.h), the row's name and
 * files from its name alone, the reference variant, the GPU launch pointer
 * that is NULL in a build without CUDA, and the rounding constants
 * tolerances are written in. Included only by row files (src/reference/;
 * it lives here, beside them, since it reads reference/reference.h: the
 * kernels include nothing of the references). */
#ifndef MB_REFERENCE_ROW_COMMON_H
#define MB_REFERENCE_ROW_COMMON_H

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

/* The row's name written once: the descriptor's `.name`, its reference
 * and oracle (mb_ref_ROW, mb_oracle_ROW, which reference.h declares from
 * rows.def) and the reference's name as receipts and the catalog show it,
 * "mb_ref_relu2 (fp32, src/reference/relu2.c)". `how` says how the
 * reference computes and ends with its separator ("fp32, pairwise sum, ");
 * MB_ROW_NAME_IN names the file stem of a row that lives in another row's
 * files (moe_ffn_swiglu in moe_ffn's). */
#define MB_ROW_NAME_IN(row, file, how) \
	.name = #row, \
	.reference = mb_ref_##row, \
	.oracle = mb_oracle_##row, \
	.reference_name = "mb_ref_" #row " (" how "src/reference/" #file ".c)"
#define MB_ROW_NAME(row, how) MB_ROW_NAME_IN(row, row, how)

/* The row's two files, first in its `.source_files` (any shared header it
 * reads follows them). */
#define MB_ROW_FILES(file) "src/kernels/" #file ".cu", "src/reference/" #file ".c"

#define MB_REFERENCE_VARIANT { \
	.name = "reference", \
	.kind = MB_VARIANT_REFERENCE, \
	.backend = "cpu", \
	.description = "the fp32 C reference, timed on the host", \
	.launches_per_call = 0, \
	.dtype_mask = MB_DTYPE_ALL, \
}

#endif
