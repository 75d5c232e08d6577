/* CUDA device identity (the receipt's "device" object) and the SM clock
 * reading used to mark samples taken while the clock sagged.
 *
 * NVML is optional at run time: it is opened with dlopen, so a host without
 * libnvidia-ml.so.1 still runs, with clocks_monitored false and a note. One
 * NVML handle per process, opened by mb_cuda_device_json and closed by
 * mb_cuda_nvml_close.
 */
#ifndef MB_HARNESS_CUDA_DEVICE_H
#define MB_HARNESS_CUDA_DEVICE_H

#include <jansson.h>
#include <stdbool.h>

#include "receipts/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The environment variable that names the device a process works on:
 * `megabench run --devices` sets it in each child before the fork, and a
 * --gpus worker sets it to 0 (its CUDA_VISIBLE_DEVICES holds one GPU). */
#define MB_DEVICE_ENV "MEGABENCH_DEVICE"

/* The device this process works on: MB_DEVICE_ENV's index, else 0. Every
 * CUDA user of a process (the backend, the lanes) sets it. */
int mb_cuda_device_index(void);

/* Fill *out (caller owns it) for CUDA device `device`, and open NVML on it
 * when the library is there. */
int mb_cuda_device_json(json_t **out, int device, mb_error *err);

/* Open NVML for `device` if it is not open yet; false when unavailable
 * (why says so). Safe to call again. */
bool mb_cuda_nvml_open(int device, char *why, size_t why_len);
/* The current SM clock in MHz; false when NVML is unavailable. */
bool mb_cuda_nvml_sm_clock_mhz(unsigned *out_mhz);
void mb_cuda_nvml_close(void);

/* "13.0" from 13000: CUDA's version integers. */
void mb_cuda_version_text(char *buf, size_t len, int version);

#ifdef __cplusplus
}
#endif

#endif
