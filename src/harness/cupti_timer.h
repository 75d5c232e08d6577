/* Kernel timing from CUPTI activity records.
 *
 * The backend brackets every call of a variant with mb_cupti_call_begin/end,
 * which push and pop an external correlation id. CUPTI then tags every
 * kernel, memcpy and memset that call launched (directly or by replaying a
 * graph) with that id, so after a device synchronisation and a flush,
 * mb_cupti_collect turns the records into one mb_cupti_call per id: busy time
 * (sum of durations), span (first start to last end) and the launch count.
 * Work outside a bracket (cache flushes, NaN poisoning) carries no id and is
 * dropped.
 *
 * One timer per process; it lives from mb_cupti_start to mb_cupti_stop.
 * Without CUPTI (MB_HAVE_CUPTI 0) every call returns MB_EUNSUPPORTED and the
 * backend times with CUDA events instead.
 */
#ifndef MB_HARNESS_CUPTI_TIMER_H
#define MB_HARNESS_CUPTI_TIMER_H

#include <jansson.h>
#include <stdint.h>

#include "receipts/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What one bracketed call ran. */
typedef struct mb_cupti_call {
	uint64_t id;
	int64_t busy_ns;  /* sum of kernel, memcpy and memset durations */
	int64_t span_ns;  /* first start to last end */
	int launches;     /* kernels, memcpys and memsets seen */
	int64_t memcpy_ns, memset_ns; /* the part of busy_ns that copies and sets took */
} mb_cupti_call;

/* The kernels seen across collected calls, one entry per distinct name
 * with the launch configuration of its first launch. */
typedef struct mb_cupti_kernel {
	char *name; /* demangled where libstdc++ offers a demangler (owned) */
	int64_t calls;
	int32_t grid[3];
	int32_t block[3];
	uint32_t registers;
	uint32_t static_shared_bytes;
	uint32_t dynamic_shared_bytes;
} mb_cupti_kernel;

typedef struct mb_cupti_kernels {
	mb_cupti_kernel *items;
	int n, cap;
} mb_cupti_kernels;

/* Enable the activity kinds and buffer callbacks. Safe to call again. */
int mb_cupti_start(mb_error *err);
/* Flush, disable and release everything the timer holds. */
void mb_cupti_stop(void);
/* "13.0 (CUPTI API 130000)"-style version text into buf; 0 or MB_E*. */
int mb_cupti_version(char *buf, size_t len, mb_error *err);

/* Bracket one call: every launch between begin and end is tagged `id`
 * (non-zero, unique within a collect window). */
int mb_cupti_call_begin(uint64_t id, mb_error *err);
int mb_cupti_call_end(mb_error *err);

/* Deliver every completed record. Call after the device work finished
 * (cudaStreamSynchronize), or records of unfinished work are lost. */
int mb_cupti_flush(mb_error *err);

/* Fill calls[i] for ids first_id .. first_id + n - 1 from the records
 * gathered so far, add the kernels of the first `n_listed` of them to
 * `kernels` (may be NULL; the rest are work such as cache flushes that is
 * timed but not the variant's), then drop every gathered record. A call
 * with no records gets launches = 0. `launch_ns` (the caller's, may be
 * NULL) gets each of the first n_listed calls' first `launch_cap` launch
 * durations in the order they started, row i at i * launch_cap, 0 past
 * the call's launches. */
int mb_cupti_collect(mb_cupti_call *calls, uint64_t first_id, int n,
	mb_cupti_kernels *kernels, int n_listed, int64_t *launch_ns, int launch_cap, mb_error *err);

/* Drop every gathered record (for work that was not bracketed). */
void mb_cupti_discard(void);

/* Records seen since mb_cupti_start (device operations, external
 * correlations, API calls): for diagnosing a timer that attributes nothing. */
void mb_cupti_counts(uint64_t *ops, uint64_t *exts, uint64_t *apis);

/* The receipt's kernels array (caller owns it); NULL on allocation failure. */
json_t *mb_cupti_kernels_json(const mb_cupti_kernels *k);
void mb_cupti_kernels_free(mb_cupti_kernels *k);

#ifdef __cplusplus
}
#endif

#endif
