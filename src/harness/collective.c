/* The bandwidths of cases across GPUs; see collective.h. */
#include "harness/collective.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "receipts/text.h"

double mb_collective_alltoall_bus_factor(int gpus)
{
	return gpus > 0 ? (double)(gpus - 1) / gpus : NAN;
}

/* #wrong as nccl-tests prints it: every output element over tolerance
 * (NaN and Inf included) and every row or count moved wrongly. A variant
 * that only moves bytes has no output: its correctness counts the rows. */
static json_int_t wrong_of(const json_t *kase, const json_t *coll)
{
	const json_t *corr = json_object_get(kase, "correctness"), *r;
	json_int_t n = 0;
	size_t i;

	json_array_foreach(json_object_get(coll, "ranks"), i, r)
		n += json_integer_value(json_object_get(r, "misplaced"));
	if (json_is_true(json_object_get(coll, "moves_only")))
		return n;
	return n + json_integer_value(json_object_get(corr, "over_tolerance"))
		+ json_integer_value(json_object_get(corr, "nan_count")) + json_integer_value(json_object_get(corr, "inf_count"));
}

/* One case's bandwidths, rows and #wrong. */
static void finish_case(json_t *kase, json_t *coll)
{
	const double bytes = mb_json_num(coll, "bytes_per_rank");
	const double median_ns = mb_json_num(json_object_get(kase, "timing"), "median_ns");
	const int gpus = (int)json_integer_value(json_object_get(coll, "gpus"));
	/* bytes per nanosecond are GB/s */
	const double algbw = median_ns > 0 ? bytes / median_ns : NAN;
	double rows = 0;
	size_t i, n = json_array_size(json_object_get(coll, "ranks"));
	json_t *r;

	json_array_foreach(json_object_get(coll, "ranks"), i, r)
		rows += mb_json_num(r, "dispatch_rows_sent") + mb_json_num(r, "dispatch_rows_received");
	json_object_set_new(coll, "algbw_gbps", mb_json_real_or_null(algbw));
	json_object_set_new(coll, "busbw_gbps", mb_json_real_or_null(algbw * mb_collective_alltoall_bus_factor(gpus)));
	json_object_set_new(coll, "rows_per_rank", mb_json_real_or_null(n ? rows / (double)n : NAN));
	json_object_set_new(coll, "wrong", json_integer(wrong_of(kase, coll)));
}

/* Cases of one shape and dtype: the same work, each variant's way. */
static bool same_work(const json_t *a, const json_t *b)
{
	return json_equal(json_object_get(a, "shape"), json_object_get(b, "shape"))
		&& json_equal(json_object_get(a, "dtype"), json_object_get(b, "dtype"));
}

static bool correct_vendor(const json_t *kase)
{
	const char *kind = json_string_value(json_object_get(kase, "variant_kind"));
	const char *status = json_string_value(json_object_get(kase, "status"));

	return kind && status && !strcmp(kind, "vendor") && !strcmp(status, "ok");
}

void mb_collective_finish(json_t *cases)
{
	size_t i, j;
	json_t *c, *d;

	json_array_foreach(cases, i, c) {
		json_t *coll = json_object_get(c, "collective");
		if (coll && json_is_object(json_object_get(c, "timing")))
			finish_case(c, coll);
	}
	json_array_foreach(cases, i, c) {
		json_t *coll = json_object_get(c, "collective");
		double vendor = NAN, b = mb_json_num(coll, "busbw_gbps");
		if (!coll)
			continue;
		json_array_foreach(cases, j, d) {
			double v = mb_json_num(json_object_get(d, "collective"), "busbw_gbps");
			if (same_work(c, d) && correct_vendor(d) && v > 0 && !(v <= vendor))
				vendor = v;
		}
		json_object_set_new(coll, "vendor_busbw_gbps", mb_json_real_or_null(vendor));
		json_object_set_new(coll, "busbw_fraction_of_vendor", mb_json_real_or_null(b > 0 ? b / vendor : NAN));
	}
}
