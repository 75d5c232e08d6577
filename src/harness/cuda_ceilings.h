/* The device's measured ceilings (the receipt's "ceilings" object): copy
 * bandwidth from our own 16-byte-vector copy kernel and from cudaMemcpy
 * device-to-device, and the bf16 GEMM rate of cublasGemmEx on random data.
 * Each ceiling is the larger of ours and the vendor's. Needs the CUPTI timer
 * started (mb_cupti_start) for CUPTI samples; without it, events time it.
 */
#ifndef MB_HARNESS_CUDA_CEILINGS_H
#define MB_HARNESS_CUDA_CEILINGS_H

#include <jansson.h>
#include <stdbool.h>

#include "receipts/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* `stream` is a cudaStream_t. *out belongs to the caller. */
int mb_cuda_ceilings_measure(json_t **out, void *stream, bool use_cupti, mb_error *err);

#ifdef __cplusplus
}
#endif

#endif
