/* The bytes model, the memory ceiling and the receipt's throughput
 * object; see throughput.h. */
#include "harness/throughput.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "receipts/text.h"

#define BYTES_PER_GB 1e9
#define FLOPS_PER_TFLOP 1e12
#define NS_PER_S 1000000000LL

int mb_traffic_model(mb_traffic *out, const mb_row *row, const mb_variant *v, const int64_t *axis, mb_dtype dtype)
{
	int n;

	memset(out, 0, sizeof(*out));
	if (!row->traffic) {
		out->bytes = row->bytes(axis, dtype);
		return 0;
	}
	out->split = true;
	/* counted first, then filled: the row says how many there are */
	n = row->traffic(axis, dtype, v, NULL);
	if (n > 0 && !(out->launch = calloc((size_t)n, sizeof(*out->launch))))
		return MB_ENOMEM;
	out->n_launches = n > 0 ? row->traffic(axis, dtype, v, out->launch) : n;
	for (int k = 0; k < out->n_launches; k++) {
		out->read_bytes += out->launch[k].read_bytes;
		out->write_bytes += out->launch[k].write_bytes;
	}
	out->bytes = out->read_bytes + out->write_bytes;
	return 0;
}

void mb_traffic_free(mb_traffic *t)
{
	free(t->launch);
	t->launch = NULL;
	t->n_launches = 0;
}

/* Read shares of the three probe points: write-only, copy, read-only. */
#define COPY_READ_SHARE 0.5

double mb_memory_ceiling_gbps(const json_t *ceilings, uint64_t read_bytes, uint64_t write_bytes, bool split,
	const char **which)
{
	double copy = mb_json_num(ceilings, "copy_gbps");
	double rd = mb_json_num(ceilings, "read_gbps"), wr = mb_json_num(ceilings, "write_gbps");
	double total = (double)read_bytes + (double)write_bytes, f;

	*which = "copy";
	if (!split || !(rd > 0) || !(wr > 0) || !(copy > 0) || total <= 0)
		return copy > 0 ? copy : NAN;
	*which = "memory";
	f = (double)read_bytes / total;
	if (f >= COPY_READ_SHARE)
		return copy + (rd - copy) * (f - COPY_READ_SHARE) / (1 - COPY_READ_SHARE);
	return wr + (copy - wr) * f / COPY_READ_SHARE;
}

static json_t *launches_json(const mb_traffic *t, const double *median_ns, const json_t *ceilings)
{
	json_t *list = json_array();

	for (int k = 0; k < t->n_launches; k++) {
		const mb_launch_traffic *l = &t->launch[k];
		const char *which;
		double ns = median_ns ? median_ns[k] : NAN;
		double bw = mb_memory_ceiling_gbps(ceilings, l->read_bytes, l->write_bytes, true, &which);
		double gbps = ns > 0 ? (double)(l->read_bytes + l->write_bytes) / BYTES_PER_GB / (ns / NS_PER_S) : NAN;

		json_array_append_new(list, json_pack("{s:s, s:I, s:I, s:o, s:o}", "kernel", l->kernel,
			"read_bytes", (json_int_t)l->read_bytes, "write_bytes", (json_int_t)l->write_bytes,
			"median_ns", mb_json_real_or_null(ns), "fraction_of_ceiling", mb_json_real_or_null(gbps / bw)));
	}
	return list;
}

json_t *mb_throughput_json(const mb_traffic *t, uint64_t flops, double median_ns, const double *launch_median_ns,
	const json_t *ceilings)
{
	json_t *o = json_object();
	double secs = median_ns / NS_PER_S;
	double gbps = median_ns > 0 ? (double)t->bytes / BYTES_PER_GB / secs : NAN;
	double tflops = median_ns > 0 ? (double)flops / FLOPS_PER_TFLOP / secs : NAN;
	const char *memory;
	double bw = mb_memory_ceiling_gbps(ceilings, t->read_bytes, t->write_bytes, t->split, &memory);
	double gemm = mb_json_num(ceilings, "gemm_tflops");
	double memory_time = bw > 0 ? (double)t->bytes / BYTES_PER_GB / bw : 0;
	double gemm_time = gemm > 0 ? (double)flops / FLOPS_PER_TFLOP / gemm : 0;
	/* the binding ceiling is the one whose floor time is larger */
	const char *which = NULL;
	double fraction = NAN;

	if (memory_time > 0 && memory_time >= gemm_time) {
		which = memory;
		fraction = gbps / bw;
	} else if (gemm_time > 0) {
		which = "gemm";
		fraction = tflops / gemm;
	}
	json_object_set_new(o, "bytes", json_integer((json_int_t)t->bytes));
	json_object_set_new(o, "flops", json_integer((json_int_t)flops));
	json_object_set_new(o, "gbps", mb_json_real_or_null(gbps));
	json_object_set_new(o, "tflops", mb_json_real_or_null(tflops));
	json_object_set_new(o, "ceiling", which ? json_string(which) : json_null());
	json_object_set_new(o, "fraction_of_ceiling", mb_json_real_or_null(fraction));
	if (t->split) {
		json_object_set_new(o, "read_bytes", json_integer((json_int_t)t->read_bytes));
		json_object_set_new(o, "write_bytes", json_integer((json_int_t)t->write_bytes));
		json_object_set_new(o, "model_launches", launches_json(t, launch_median_ns, ceilings));
	}
	return o;
}
