/* Throughput: a variant's bytes model, the ceiling a case is held
 * against (the memory probe's rates or the GEMM rate, whichever binds),
 * and the receipt's throughput object. */
#ifndef MB_HARNESS_THROUGHPUT_H
#define MB_HARNESS_THROUGHPUT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "kernels/catalog.h"

/* A variant's bytes model (kernels/catalog.h, mb_row.traffic). */
typedef struct mb_traffic {
	bool split;              /* read and write bytes known, launch by launch */
	uint64_t read_bytes, write_bytes;
	uint64_t bytes;          /* their sum, or the row's total when not split */
	int n_launches;          /* as many as the row's model has: no cap */
	mb_launch_traffic *launch; /* n_launches of them; owned where
	                              mb_traffic_model made it */
} mb_traffic;

/* The model of variant `v` at `axis`. 0, or MB_ENOMEM (*out then holds
 * nothing to free). Release with mb_traffic_free. */
int mb_traffic_model(mb_traffic *out, const mb_row *row, const mb_variant *v, const int64_t *axis, mb_dtype dtype);
/* What mb_traffic_model allocated; a zeroed mb_traffic too. */
void mb_traffic_free(mb_traffic *t);

/* The memory bandwidth (GB/s) a kernel moving these bytes can reach: the
 * probe's read-only, copy and write-only rates interpolated by the read
 * share of the bytes ("memory"), or the copy rate when the probe or the
 * split is missing ("copy"); NAN without a copy rate. *which names it. */
double mb_memory_ceiling_gbps(const json_t *ceilings, uint64_t read_bytes, uint64_t write_bytes, bool split,
	const char **which);

/* The receipt's throughput object; `ceilings` is the probe's object,
 * launch_median_ns the median time of each modelled launch (NULL, or NAN
 * for one not observed). */
json_t *mb_throughput_json(const mb_traffic *t, uint64_t flops, double median_ns, const double *launch_median_ns,
	const json_t *ceilings);

#endif
