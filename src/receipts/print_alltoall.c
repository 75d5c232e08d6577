/* A receipt of cases across GPUs as nccl-tests prints its all-to-all
 * (nccl-tests' src/common.cu and util.cu: the "# Rank" lines, one line per
 * size, "# Out of bounds values" and "# Avg bus bandwidth"), one line per
 * size and variant. Every number is the receipt's (harness/collective.h
 * says how algbw and busbw were defined); this file only lays them out. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "receipts/printer.h"
#include "receipts/text.h"

#define TEXT_LEN 512
#define NUMBER_LEN 16
#define MAX_VARIANTS 16
/* The columns: T, size, count, type, variant, time, algbw, busbw, #wrong,
 * busbw over NCCL's own all-to-all's. */
#define ROW_FMT "%10s  %12s  %10s  %6s  %-16s  %8s  %7s  %7s  %6s  %7s"
#define WIDTH_TIME 8
#define WIDTH_BW 7
#define WIDTH_FRACTION 7
#define NS_PER_US 1e3

/* `v` in at most `width` characters, as many decimals as fit (two at
 * most, nccl-tests' way), else an exponent; "-" when there is none. */
static const char *fit(char *buf, int width, double v)
{
	if (!isfinite(v))
		snprintf(buf, NUMBER_LEN, "-");
	else if (snprintf(buf, NUMBER_LEN, "%.2f", v) > width && snprintf(buf, NUMBER_LEN, "%.1f", v) > width
		&& snprintf(buf, NUMBER_LEN, "%.0f", v) > width)
		snprintf(buf, NUMBER_LEN, "%.1e", v);
	return buf;
}

static void header(FILE *out, const json_t *receipt, const json_t *coll)
{
	char safe[4 * TEXT_LEN], safe2[4 * TEXT_LEN], safe3[4 * TEXT_LEN], units[TEXT_LEN];
	const char *nvls = mb_text_get(coll, "nvls_enable");
	const json_t *r;
	size_t i;

	fprintf(out, "# %s\n", mb_print_terminal_safe(safe, sizeof(safe), mb_text_get(json_object_get(receipt, "suite"),
		"description")));
	if (coll) {
		fprintf(out, "# %d GPUs, %s, NCCL %s, NCCL_NVLS_ENABLE=%s\n", (int)json_integer_value(json_object_get(coll,
			"gpus")), mb_print_terminal_safe(safe, sizeof(safe), mb_text_get(coll, "launcher")),
			mb_print_terminal_safe(safe2, sizeof(safe2), mb_text_get(coll, "nccl_version")),
			mb_print_terminal_safe(safe3, sizeof(safe3), *nvls ? nvls : "(unset)"));
		json_array_foreach(json_object_get(coll, "ranks"), i, r)
			fprintf(out, "#  Rank %2d device %2d  %s\n", (int)json_integer_value(json_object_get(r, "rank")),
				(int)json_integer_value(json_object_get(r, "device_index")),
				mb_print_terminal_safe(safe, sizeof(safe), mb_text_get(r, "device_name")));
	}
	fprintf(out, "#\n# a call: dispatch and combine; time: the median call, each the slowest rank's; size: bytes\n"
		"# each rank sends per call; count: token rows each rank sends per call; busbw = algbw (G-1)/G;\n"
		"# of nccl: busbw over the best of NCCL's own all-to-all at that size\n#\n");
	fprintf(out, "#" ROW_FMT "\n", "T", "size", "count", "type", "variant", "time", "algbw", "busbw", "#wrong",
		"of nccl");
	snprintf(units, sizeof(units), "#" ROW_FMT, "(tokens)", "(B)", "(rows)", "", "", "(us)", "(GB/s)", "(GB/s)", "",
		"");
	for (size_t n = strlen(units); n > 0 && units[n - 1] == ' '; n--)
		units[n - 1] = '\0';
	fprintf(out, "%s\n", units);
}

/* One case's line. */
static void line(FILE *out, const json_t *kase)
{
	const json_t *coll = json_object_get(kase, "collective");
	const char *status = mb_text_get(kase, "status");
	char t[NUMBER_LEN], size[NUMBER_LEN] = "-", count[NUMBER_LEN] = "-", us[NUMBER_LEN], alg[NUMBER_LEN];
	char bus[NUMBER_LEN], wrong[NUMBER_LEN], frac[NUMBER_LEN], safe[4 * TEXT_LEN];

	snprintf(t, sizeof(t), "%.0f", mb_json_num(json_object_get(kase, "shape"), "T"));
	if (coll) {
		snprintf(size, sizeof(size), "%.0f", mb_json_num(coll, "bytes_per_rank"));
		snprintf(count, sizeof(count), "%.0f", mb_json_num(coll, "rows_per_rank"));
	}
	if (json_is_integer(json_object_get(coll, "wrong")))
		snprintf(wrong, sizeof(wrong), "%lld", (long long)json_integer_value(json_object_get(coll, "wrong")));
	else
		snprintf(wrong, sizeof(wrong), "-");
	fprintf(out, " " ROW_FMT, t, size, count, mb_text_get(kase, "dtype"),
		mb_print_terminal_safe(safe, sizeof(safe), mb_text_get(kase, "variant")),
		fit(us, WIDTH_TIME, mb_json_num(json_object_get(kase, "timing"), "median_ns") / NS_PER_US),
		fit(alg, WIDTH_BW, mb_json_num(coll, "algbw_gbps")), fit(bus, WIDTH_BW, mb_json_num(coll, "busbw_gbps")), wrong,
		fit(frac, WIDTH_FRACTION, mb_json_num(coll, "busbw_fraction_of_vendor")));
	if (strcmp(status, "ok") != 0)
		fprintf(out, "  %s", mb_print_terminal_safe(safe, sizeof(safe), status));
	fputc('\n', out);
}

/* Each variant's mean busbw over its sizes, in the order variants first
 * appear: the closing lines, nccl-tests' "Avg bus bandwidth" per variant. */
static void averages(FILE *out, const json_t *cases)
{
	const char *names[MAX_VARIANTS];
	double sum[MAX_VARIANTS] = {0};
	int n[MAX_VARIANTS] = {0}, k = 0;
	char safe[4 * TEXT_LEN];
	size_t i;
	json_t *c;

	json_array_foreach(cases, i, c) {
		const char *v = mb_text_get(c, "variant");
		double b = mb_json_num(json_object_get(c, "collective"), "busbw_gbps");
		int at = 0;
		while (at < k && strcmp(names[at], v) != 0)
			at++;
		if (at == k && k < MAX_VARIANTS)
			names[k++] = v;
		if (at < k && isfinite(b) && !strcmp(mb_text_get(c, "status"), "ok")) {
			sum[at] += b;
			n[at]++;
		}
	}
	for (int v = 0; v < k; v++) {
		fprintf(out, "# %-20s : ", "Avg bus bandwidth");
		if (n[v])
			fprintf(out, "%g", sum[v] / n[v]);
		else
			fputc('-', out);
		fprintf(out, " %s\n", mb_print_terminal_safe(safe, sizeof(safe), names[v]));
	}
}

void mb_print_alltoall(FILE *out, const json_t *receipt)
{
	const json_t *cases = json_object_get(receipt, "cases"), *first = NULL, *c;
	long long wrong = 0;
	bool all_ok = true;
	size_t i;

	json_array_foreach(cases, i, c) {
		if (!first && json_object_get(c, "collective"))
			first = json_object_get(c, "collective");
		wrong += json_integer_value(json_object_get(json_object_get(c, "collective"), "wrong"));
		all_ok = all_ok && !strcmp(mb_text_get(c, "status"), "ok");
	}
	header(out, receipt, first);
	json_array_foreach(cases, i, c)
		line(out, c);
	fprintf(out, "# %-20s : %lld %s\n", "Out of bounds values", wrong, wrong == 0 && all_ok ? "OK" : "FAILED");
	averages(out, cases);
	fprintf(out, "#\n");
}
