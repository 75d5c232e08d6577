/* Identity of the host a run happened on, as the receipt's "host" object
 * (schemas/receipt.schema.json, definitions/host). */
#ifndef MB_HARNESS_HOSTINFO_H
#define MB_HARNESS_HOSTINFO_H

#include <jansson.h>
#include <stdint.h>

#include "receipts/error.h"

/* Fill `*out` with a new object the caller owns: hostname, os (PRETTY_NAME of
 * /etc/os-release, else the kernel's name), kernel, arch, cpu_model ("unknown"
 * when /proc/cpuinfo does not say), cpu_count (online CPUs) and memory_bytes.
 * Fails only when the kernel refuses uname/gethostname or memory runs out. */
int mb_host_identity(json_t **out, mb_error *err);

/* A tool that injects itself into this process's CUDA calls (a sanitizer or
 * a profiler: compute-sanitizer, ncu, nsys load their library through the
 * driver's CUDA_INJECTION64_PATH) or into the process (LD_PRELOAD), whose
 * timings then measure the tool as much as the kernels: the receipt's
 * "instrumented" object {tool, by, variable}, or NULL when nothing is
 * injected. `tool` is a guess from the library's name ("compute-sanitizer",
 * "nsight", "unknown"); `by` is the library path, `variable` the variable
 * that named it. The caller owns the object. */
json_t *mb_host_instrumentation(void);

/* Physical memory in bytes, 0 when the system does not say. */
uint64_t mb_host_memory_bytes(void);

#endif
