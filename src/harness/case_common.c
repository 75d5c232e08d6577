/* Shared case machinery: throughput and the case's JSON. */
#include "harness/case_common.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define NS_PER_S 1000000000LL

static json_t *real_or_null(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

/* ---- throughput and case JSON ---------------------------------------- */

#define BYTES_PER_GB 1e9
#define FLOPS_PER_TFLOP 1e12

static double ceiling_value(const json_t *ceilings, const char *key)
{
	const json_t *v = ceilings ? json_object_get(ceilings, key) : NULL;

	return json_is_number(v) ? json_number_value(v) : NAN;
}

void mb_traffic_model(mb_traffic *out, const mb_row *row, const mb_variant *v, const int64_t *axis, mb_dtype dtype)
{
	memset(out, 0, sizeof(*out));
	if (!row->traffic) {
		out->bytes = row->bytes(axis, dtype);
		return;
	}
	out->split = true;
	out->n_launches = row->traffic(axis, dtype, v, out->launch);
	for (int k = 0; k < out->n_launches; k++) {
		out->read_bytes += out->launch[k].read_bytes;
		out->write_bytes += out->launch[k].write_bytes;
	}
	out->bytes = out->read_bytes + out->write_bytes;
}

/* Read shares of the three probe points: write-only, copy, read-only. */
#define COPY_READ_SHARE 0.5

double mb_memory_ceiling_gbps(const json_t *ceilings, uint64_t read_bytes, uint64_t write_bytes, bool split,
	const char **which)
{
	double copy = ceiling_value(ceilings, "copy_gbps");
	double rd = ceiling_value(ceilings, "read_gbps"), wr = ceiling_value(ceilings, "write_gbps");
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
			"median_ns", real_or_null(ns), "fraction_of_ceiling", real_or_null(gbps / bw)));
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
	double gemm = ceiling_value(ceilings, "gemm_tflops");
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
	json_object_set_new(o, "gbps", real_or_null(gbps));
	json_object_set_new(o, "tflops", real_or_null(tflops));
	json_object_set_new(o, "ceiling", which ? json_string(which) : json_null());
	json_object_set_new(o, "fraction_of_ceiling", real_or_null(fraction));
	if (t->split) {
		json_object_set_new(o, "read_bytes", json_integer((json_int_t)t->read_bytes));
		json_object_set_new(o, "write_bytes", json_integer((json_int_t)t->write_bytes));
		json_object_set_new(o, "model_launches", launches_json(t, launch_median_ns, ceilings));
	}
	return o;
}

json_t *mb_case_json_new(const mb_case_plan *plan, const char *backend)
{
	json_t *c = json_object(), *shape = json_object(), *mem = json_object();
	char block[2] = {plan->row->block, '\0'};

	for (int i = 0; i < plan->row->n_axes; i++)
		json_object_set_new(shape, plan->row->axes[i], json_integer(plan->axis[i]));
	json_object_set_new(mem, "io_bytes", json_integer(0));
	json_object_set_new(c, "id", json_string(plan->id));
	json_object_set_new(c, "row", json_string(plan->row->name));
	json_object_set_new(c, "block", json_string(block));
	json_object_set_new(c, "variant", json_string(plan->variant->name));
	json_object_set_new(c, "variant_kind", json_string(mb_variant_kind_name(plan->variant->kind)));
	json_object_set_new(c, "backend", json_string(backend));
	json_object_set_new(c, "dtype", json_string(mb_dtype_name(plan->dtype)));
	json_object_set_new(c, "mode", json_string(mb_mode_name(plan->mode)));
	json_object_set_new(c, "family", json_string(plan->family));
	json_object_set_new(c, "shape", shape);
	json_object_set_new(c, "weight", json_real(plan->weight));
	json_object_set_new(c, "weight_source", json_string(plan->weight_given ? "suite" : "default"));
	json_object_set_new(c, "status", json_string("ok"));
	json_object_set_new(c, "error", json_null());
	json_object_set_new(c, "correctness", json_null());
	json_object_set_new(c, "timing", json_null());
	json_object_set_new(c, "throughput", json_null());
	json_object_set_new(c, "memory", mem);
	json_object_set_new(c, "findings", json_array());
	return c;
}

void mb_case_json_set_status(json_t *c, const char *status, const char *error)
{
	json_object_set_new(c, "status", json_string(status));
	json_object_set_new(c, "error", error && strcmp(status, "ok") != 0 ? json_string(error) : json_null());
}

void mb_case_json_add_finding(json_t *c, const char *kind, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	json_t *f = json_object();

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_object_set_new(f, "kind", json_string(kind));
	json_object_set_new(f, "message", json_string(msg));
	json_array_append_new(json_object_get(c, "findings"), f);
}
