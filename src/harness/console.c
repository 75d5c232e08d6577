#include "harness/console.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

#include "harness/case_common.h"

#define NS_PER_S 1e9

void mb_format_ns(char *buf, size_t len, double ns)
{
	if (!isfinite(ns))
		snprintf(buf, len, "-");
	else if (ns < 1e3)
		snprintf(buf, len, "%.0f ns", ns);
	else if (ns < 1e6)
		snprintf(buf, len, "%.2f us", ns / 1e3);
	else if (ns < 1e9)
		snprintf(buf, len, "%.2f ms", ns / 1e6);
	else
		snprintf(buf, len, "%.2f s", ns / 1e9);
}

static void format_clock(char *buf, size_t len, double secs)
{
	long s = (long)(secs + 0.5);

	snprintf(buf, len, "%ld:%02ld", s / 60, s % 60);
}

static void on_begin(void *ctx, size_t n_cases, const char *backend)
{
	mb_console *con = ctx;

	con->n_cases = n_cases;
	con->start_ns = mb_now_ns();
	if (!con->quiet)
		fprintf(con->out, "megabench: %zu cases on the %s backend\n", n_cases, backend);
}

/* One line, redrawn in place: the case, how far its sampling is, the
 * run's elapsed time and an estimate of what is left. */
static void live_line(mb_console *con)
{
	int64_t now = mb_now_ns();
	double elapsed = (double)(now - con->start_ns) / NS_PER_S;
	char el[32], eta[32] = "?", in_case[32], sampling[96] = "";

	format_clock(el, sizeof(el), elapsed);
	format_clock(in_case, sizeof(in_case), (double)(now - con->case_start_ns) / NS_PER_S);
	if (con->done)
		format_clock(eta, sizeof(eta), elapsed / (double)con->done * (double)(con->n_cases - con->done));
	if (con->samples > 0)
		snprintf(sampling, sizeof(sampling), ", %d samples, noise %.2f%%", con->samples, 100 * con->rel_noise);
	fprintf(con->out, "\r\033[K[%zu/%zu] %s  %s in case%s; elapsed %s, about %s left", con->done + 1,
		con->n_cases, con->current, in_case, sampling, el, eta);
	fflush(con->out);
}

static void on_case_start(void *ctx, size_t index, const mb_case_plan *plan)
{
	mb_console *con = ctx;

	(void)index;
	snprintf(con->current, sizeof(con->current), "%s", plan->id);
	con->case_start_ns = mb_now_ns();
	con->samples = 0;
	con->rel_noise = 0;
	if (con->tty && !con->quiet)
		live_line(con);
}

static void on_case_tick(void *ctx, size_t index, int samples, double rel_noise, double elapsed_s)
{
	mb_console *con = ctx;

	(void)index, (void)elapsed_s;
	con->samples = samples;
	con->rel_noise = rel_noise;
	if (con->tty && !con->quiet)
		live_line(con);
}

static void on_refresh(void *ctx)
{
	mb_console *con = ctx;

	if (con->tty && !con->quiet && con->current[0])
		live_line(con);
}

static void on_case_done(void *ctx, size_t index, const mb_case_plan *plan, const json_t *c)
{
	mb_console *con = ctx;
	const char *status = json_string_value(json_object_get(c, "status"));
	const json_t *timing = json_object_get(c, "timing");
	char med[32] = "-";

	(void)index;
	con->done++;
	con->current[0] = '\0';
	if (con->quiet)
		return;
	if (json_is_object(timing))
		mb_format_ns(med, sizeof(med), json_number_value(json_object_get(timing, "median_ns")));
	if (con->tty)
		fprintf(con->out, "\r\033[K");
	fprintf(con->out, "[%zu/%zu] %-6s %10s  %s\n", con->done, con->n_cases, status, med, plan->id);
	if (strcmp(status, "ok") != 0 && json_is_string(json_object_get(c, "error")))
		fprintf(con->out, "        %s\n", json_string_value(json_object_get(c, "error")));
	fflush(con->out);
}

static void on_notice(void *ctx, const char *text)
{
	mb_console *con = ctx;

	if (con->tty)
		fprintf(con->out, "\r\033[K");
	fprintf(con->out, "megabench: %s\n", text);
}

void mb_console_init(mb_console *con, FILE *out, bool quiet)
{
	memset(con, 0, sizeof(*con));
	con->out = out;
	con->tty = isatty(fileno(out));
	con->quiet = quiet;
	con->progress = (mb_progress){.ctx = con, .begin = on_begin, .case_start = on_case_start,
		.case_tick = on_case_tick, .refresh = on_refresh, .case_done = on_case_done, .notice = on_notice};
}

/* ---- the summary table --------------------------------------------------- */

static double num(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);

	return json_is_number(v) ? json_number_value(v) : NAN;
}

static void shape_text(char *buf, size_t len, const json_t *shape)
{
	const char *key;
	json_t *v;
	size_t used = 0;

	buf[0] = '\0';
	json_object_foreach((json_t *)shape, key, v) {
		int n = snprintf(buf + used, len - used, "%s%s=%lld", used ? "," : "", key,
			(long long)json_integer_value(v));
		if (n < 0 || (size_t)n >= len - used)
			break;
		used += (size_t)n;
	}
}

static void print_case_row(FILE *out, const json_t *c)
{
	const json_t *timing = json_object_get(c, "timing"), *tp = json_object_get(c, "throughput");
	const json_t *corr = json_object_get(c, "correctness");
	char shape[96], med[32] = "-", gbps[24] = "-", frac[16] = "-", check[24] = "-", conv[8] = "-";

	shape_text(shape, sizeof(shape), json_object_get(c, "shape"));
	if (json_is_object(timing)) {
		mb_format_ns(med, sizeof(med), num(timing, "median_ns"));
		snprintf(conv, sizeof(conv), "%s", json_is_true(json_object_get(timing, "converged")) ? "yes" : "NO");
	}
	if (json_is_object(tp) && isfinite(num(tp, "gbps")))
		snprintf(gbps, sizeof(gbps), "%.1f", num(tp, "gbps"));
	if (json_is_object(tp) && isfinite(num(tp, "fraction_of_ceiling")))
		snprintf(frac, sizeof(frac), "%.3f", num(tp, "fraction_of_ceiling"));
	if (json_is_object(corr))
		snprintf(check, sizeof(check), "%s %.1e", json_is_true(json_object_get(corr, "passed")) ? "pass" : "FAIL",
			num(corr, "max_rel"));
	fprintf(out, "%-18s %-9s %-4s %-5s %-34s %-7s %11s %9s %6s %-12s %s\n",
		json_string_value(json_object_get(c, "row")), json_string_value(json_object_get(c, "variant")),
		json_string_value(json_object_get(c, "dtype")), json_string_value(json_object_get(c, "mode")),
		shape, json_string_value(json_object_get(c, "status")), med, gbps, frac, check, conv);
}

void mb_console_print_table(FILE *out, const json_t *receipt)
{
	const json_t *cases = json_object_get(receipt, "cases"), *c, *f;
	const json_t *good = json_object_get(receipt, "goodput");
	size_t i, j, passed = 0, failed = 0, skipped = 0;

	fprintf(out, "%-18s %-9s %-4s %-5s %-34s %-7s %11s %9s %6s %-12s %s\n", "row", "variant", "type",
		"mode", "shape", "status", "median", "GB/s", "ceil", "check maxrel", "conv");
	json_array_foreach(cases, i, c) {
		const char *status = json_string_value(json_object_get(c, "status"));
		print_case_row(out, c);
		if (strcmp(status, "ok") == 0)
			passed++;
		else if (strcmp(status, "skipped") == 0)
			skipped++;
		else
			failed++;
	}
	json_array_foreach(cases, i, c) {
		json_array_foreach(json_object_get(c, "findings"), j, f)
			fprintf(out, "finding: %s: %s: %s\n", json_string_value(json_object_get(c, "id")),
				json_string_value(json_object_get(f, "kind")), json_string_value(json_object_get(f, "message")));
	}
	if (json_is_object(good))
		fprintf(out, "goodput: %.1f%% of %.2f s wall time was timed kernel work\n",
			100 * num(good, "goodput_fraction"), num(good, "wall_ns") / NS_PER_S);
	if (skipped)
		fprintf(out, "%zu passed, %zu failed, %zu skipped\n", passed, failed, skipped);
	else
		fprintf(out, "%zu passed, %zu failed\n", passed, failed);
}
