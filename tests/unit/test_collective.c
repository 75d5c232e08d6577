/* Cases across GPUs, after the run: nccl-tests' bandwidths for all-to-all
 * (harness/collective.h) worked by hand on synthetic cases, NCCL's own
 * all-to-all as the yardstick of each size (the best correct vendor case
 * of the same shape and dtype, never one of another size or a wrong one),
 * #wrong, and the table mb_print_alltoall makes of them: one line per
 * size and variant with those numbers, the failed case named, the out of
 * bounds count and each variant's average bus bandwidth. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/collective.h"
#include "receipts/printer.h"
#include "testutil.h"

#define GPUS 4
#define TEXT_BYTES 16384

/* A case of the moe_alltoall row at T tokens, variant `v` of `kind`:
 * `bytes` sent per rank, `median_ns`, and each rank's rows and misplaced
 * rows. */
static json_t *a_case(int64_t t, const char *v, const char *kind, const char *status, double bytes, double median_ns,
	int misplaced, int over_tolerance)
{
	json_t *ranks = json_array();

	for (int g = 0; g < GPUS; g++)
		json_array_append_new(ranks, json_pack("{s:i, s:i, s:s, s:I, s:I, s:i}", "rank", g, "device_index", g,
			"device_name", "Test GPU", "dispatch_rows_sent", (json_int_t)(100 + g), "dispatch_rows_received",
			(json_int_t)(200 - g), "misplaced", g == 1 ? misplaced : 0));
	return json_pack("{s:s, s:s, s:s, s:s, s:{s:I, s:i}, s:s, s:{s:f}, s:{s:i, s:i, s:i}, s:{s:i, s:s, s:s, s:s,"
		" s:f, s:b, s:o}}", "id", v, "variant", v, "variant_kind", kind, "status", status, "shape", "T", (json_int_t)t,
		"G", GPUS, "dtype", "bf16", "timing", "median_ns", median_ns, "correctness", "over_tolerance", over_tolerance,
		"nan_count", 0, "inf_count", 0, "collective", "gpus", GPUS, "launcher", "single_process", "nccl_version",
		"2.28.9", "nvls_enable", "0", "bytes_per_rank", bytes, "moves_only", !strcmp(kind, "vendor"), "ranks",
		ranks);
}

static double num(const json_t *c, const char *key)
{
	return json_number_value(json_object_get(json_object_get(c, "collective"), key));
}

static json_t *cases_of_two_sizes(void)
{
	json_t *cases = json_array();

	json_array_append_new(cases, a_case(4096, "grouped_sendrecv", "fallback", "ok", 3e8, 2e6, 0, 0));
	json_array_append_new(cases, a_case(4096, "fused", "fused", "ok", 1e8, 1e6, 0, 2));
	json_array_append_new(cases, a_case(4096, "nccl_alltoall", "vendor", "ok", 3e8, 1.5e6, 0, 0));
	json_array_append_new(cases, a_case(4096, "nccl_sendrecv", "vendor", "ok", 3e8, 1.2e6, 0, 0));
	/* a bigger size: its own yardstick; a wrong vendor case is no yardstick */
	json_array_append_new(cases, a_case(16384, "fused", "fused", "ok", 4e8, 2e6, 0, 0));
	json_array_append_new(cases, a_case(16384, "nccl_alltoall", "vendor", "failed", 1.2e9, 1e6, 3, 3));
	json_array_append_new(cases, a_case(16384, "nccl_sendrecv", "vendor", "ok", 1.2e9, 4e6, 0, 0));
	return cases;
}

static void bandwidths(void)
{
	json_t *cases = cases_of_two_sizes(), *c;

	mb_collective_finish(cases);
	CHECK(fabs(mb_collective_alltoall_bus_factor(8) - 7.0 / 8) < 1e-15);
	/* 3e8 bytes in 2 ms: 150 GB/s, busbw 150 * 3/4 */
	c = json_array_get(cases, 0);
	CHECK_MSG(fabs(num(c, "algbw_gbps") - 150) < 1e-9 && fabs(num(c, "busbw_gbps") - 112.5) < 1e-9, "%g %g",
		num(c, "algbw_gbps"), num(c, "busbw_gbps"));
	/* each rank sends 100 + g rows and returns 200 - g: 300 rows a rank */
	CHECK(fabs(num(c, "rows_per_rank") - 300) < 1e-9);
	/* T = 4096's best vendor: nccl_sendrecv, 3e8 / 1.2e6 * 3/4 = 187.5 */
	json_t *fused = json_array_get(cases, 1);
	CHECK_MSG(fabs(num(fused, "vendor_busbw_gbps") - 187.5) < 1e-9, "%g", num(fused, "vendor_busbw_gbps"));
	CHECK(fabs(num(fused, "busbw_fraction_of_vendor") - 75.0 / 187.5) < 1e-12);
	/* the fused case's #wrong: its two elements over tolerance */
	CHECK(json_integer_value(json_object_get(json_object_get(fused, "collective"), "wrong")) == 2);
	/* T = 16384: the failed nccl_alltoall (900 GB/s busbw) is passed over */
	c = json_array_get(cases, 4);
	CHECK_MSG(fabs(num(c, "vendor_busbw_gbps") - 225) < 1e-9, "%g", num(c, "vendor_busbw_gbps"));
	/* a vendor case's #wrong: its misplaced rows, not counted twice */
	c = json_array_get(cases, 5);
	CHECK(json_integer_value(json_object_get(json_object_get(c, "collective"), "wrong")) == 3);
	json_decref(cases);
}

static void table(void)
{
	json_t *cases = cases_of_two_sizes();
	json_t *receipt = json_pack("{s:{s:s}, s:o}", "suite", "description", "megabench alltoall: test \x1b[31m", "cases",
		cases);
	char text[TEXT_BYTES] = "";
	FILE *f = tmpfile();
	size_t n;

	mb_collective_finish(cases);
	json_array_append_new(cases, json_pack("{s:s, s:s, s:s, s:s, s:{s:i}, s:s}", "id", "x", "variant",
		"grouped_sendrecv", "variant_kind", "fallback", "status", "skipped", "shape", "T", 65536, "dtype", "bf16"));
	CHECK(f != NULL);
	if (!f)
		return;
	mb_print_alltoall(f, receipt);
	rewind(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	text[n] = '\0';
	fclose(f);
	CHECK_MSG(strstr(text, "#  Rank  3 device  3  Test GPU"), "%s", text);
	CHECK(strstr(text, "\\x1b[31m") && !strchr(text, '\x1b'));
	/* T, size, count, type, variant, time (us), algbw, busbw, #wrong, of nccl */
	CHECK_MSG(strstr(text, "      4096     300000000         300    bf16  grouped_sendrecv   2000.00   150.00"
		"   112.50       0     0.60"), "%s", text);
	CHECK(strstr(text, "     16384    1200000000         300    bf16  nccl_alltoall      1000.00  1200.00"
		"   900.00       3     4.00  failed"));
	CHECK(strstr(text, "     65536             -           -    bf16  grouped_sendrecv         -        -"
		"        -       -        -  skipped"));
	CHECK(strstr(text, "# Out of bounds values : 5 FAILED"));
	/* fused: 75 and 150 busbw; nccl_alltoall: its one correct size only */
	CHECK(strstr(text, "# Avg bus bandwidth    : 112.5 fused"));
	CHECK(strstr(text, "# Avg bus bandwidth    : 150 nccl_alltoall"));
	CHECK(strstr(text, "# Avg bus bandwidth    : 206.25 nccl_sendrecv"));
	json_decref(receipt);
}

int main(void)
{
	bandwidths();
	table();
	return mb_test_finish("test_collective");
}
