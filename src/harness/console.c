#include "harness/console.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

#include "harness/case_common.h"
#include "receipts/printer.h"

#define NS_PER_S 1e9
#define ESCAPED_BYTES 512
/* Smallest widths of the table's text columns: their headings. */
#define ROW_MIN 3
#define VARIANT_MIN 7
#define SHAPE_MIN 5
#define SHAPE_BYTES 256
#define CELL_BYTES 256


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
	con->line_open = true;
	fflush(con->out);
}

static void on_case_start(void *ctx, size_t index, const mb_case_plan *plan)
{
	mb_console *con = ctx;

	(void)index;
	mb_print_terminal_safe(con->current, sizeof(con->current), plan->id);
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
	char med[32] = "-", text[ESCAPED_BYTES];

	(void)index;
	con->done++;
	con->current[0] = '\0';
	if (con->quiet)
		return;
	if (json_is_object(timing))
		mb_format_ns(med, sizeof(med), json_number_value(json_object_get(timing, "median_ns")));
	if (con->tty)
		fprintf(con->out, "\r\033[K");
	con->line_open = false;
	fprintf(con->out, "[%zu/%zu] %-6s %10s  %s\n", con->done, con->n_cases, status, med,
		mb_print_terminal_safe(text, sizeof(text), plan->id));
	if (strcmp(status, "ok") != 0 && json_is_string(json_object_get(c, "error")))
		fprintf(con->out, "        %s\n",
			mb_print_terminal_safe(text, sizeof(text), json_string_value(json_object_get(c, "error"))));
	fflush(con->out);
}

static void on_notice(void *ctx, const char *text)
{
	mb_console *con = ctx;
	char safe[ESCAPED_BYTES];

	if (con->tty)
		fprintf(con->out, "\r\033[K");
	con->line_open = false;
	fprintf(con->out, "megabench: %s\n", mb_print_terminal_safe(safe, sizeof(safe), text));
}

void mb_console_finish(mb_console *con)
{
	if (con->line_open)
		fprintf(con->out, "\r\033[K");
	con->line_open = false;
	con->current[0] = '\0';
	fflush(con->out);
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
	char raw[SHAPE_BYTES];

	raw[0] = '\0';
	json_object_foreach((json_t *)shape, key, v) {
		int n = snprintf(raw + used, sizeof(raw) - used, "%s%s=%lld", used ? "," : "", key,
			(long long)json_integer_value(v));
		if (n < 0 || (size_t)n >= sizeof(raw) - used)
			break;
		used += (size_t)n;
	}
	mb_print_terminal_safe(buf, len, raw);
}

/* The text cells of one case, escaped. */
typedef struct case_cells {
	char row[CELL_BYTES], variant[CELL_BYTES], shape[SHAPE_BYTES];
} case_cells;

static void case_cells_of(case_cells *out, const json_t *c)
{
	mb_print_terminal_safe(out->row, sizeof(out->row), json_string_value(json_object_get(c, "row")));
	mb_print_terminal_safe(out->variant, sizeof(out->variant), json_string_value(json_object_get(c, "variant")));
	shape_text(out->shape, sizeof(out->shape), json_object_get(c, "shape"));
}

/* Column widths from the contents: a long row name must not push the
 * columns after it out of line. */
typedef struct table_widths {
	int row, variant, shape;
} table_widths;

static void print_case_row(FILE *out, const json_t *c, const table_widths *w)
{
	const json_t *timing = json_object_get(c, "timing"), *tp = json_object_get(c, "throughput");
	const json_t *corr = json_object_get(c, "correctness");
	char med[32] = "-", gbps[24] = "-", frac[16] = "-", check[24] = "-", conv[8] = "-";
	char dtype[16], mode[16], status[16];
	case_cells cells;

	case_cells_of(&cells, c);
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
	fprintf(out, "%-*s %-*s %-4s %-5s %-*s %-7s %11s %9s %6s %-12s %s\n", w->row, cells.row, w->variant,
		cells.variant, mb_print_terminal_safe(dtype, sizeof(dtype), json_string_value(json_object_get(c, "dtype"))),
		mb_print_terminal_safe(mode, sizeof(mode), json_string_value(json_object_get(c, "mode"))), w->shape,
		cells.shape, mb_print_terminal_safe(status, sizeof(status), json_string_value(json_object_get(c, "status"))),
		med, gbps, frac, check, conv);
}

/* A sharded run (run --gpus): per GPU, its cases and its worker's wall
 * time, and how the worker ended when it did not end well. */
static void print_shards(FILE *out, const json_t *receipt)
{
	const json_t *gpus = json_object_get(receipt, "gpus"), *s;
	char name[CELL_BYTES], ended[ESCAPED_BYTES];
	size_t i;

	json_array_foreach(json_object_get(receipt, "shards"), i, s) {
		const json_t *gpu = json_array_get(gpus, (size_t)json_integer_value(json_object_get(s, "gpu")));
		const char *how = json_string_value(json_object_get(s, "ended"));

		fprintf(out, "gpu%" JSON_INTEGER_FORMAT " (%s): %" JSON_INTEGER_FORMAT " cases in %.2f s",
			json_integer_value(json_object_get(gpu, "index")),
			mb_print_terminal_safe(name, sizeof(name), json_string_value(json_object_get(gpu, "name"))),
			json_integer_value(json_object_get(s, "cases")), num(s, "wall_ns") / NS_PER_S);
		if (how && strcmp(how, "exited with status 0"))
			fprintf(out, "; its worker %s", mb_print_terminal_safe(ended, sizeof(ended), how));
		fprintf(out, "\n");
	}
}

static int max_int(int a, size_t b)
{
	return (size_t)a > b ? a : (int)b;
}

void mb_console_print_table(FILE *out, const json_t *receipt)
{
	const json_t *cases = json_object_get(receipt, "cases"), *c, *f;
	const json_t *good = json_object_get(receipt, "goodput");
	size_t i, j, passed = 0, failed = 0, skipped = 0;
	table_widths w = {ROW_MIN, VARIANT_MIN, SHAPE_MIN};
	char id[ESCAPED_BYTES], kind[CELL_BYTES], message[ESCAPED_BYTES];

	json_array_foreach(cases, i, c) {
		case_cells cells;
		case_cells_of(&cells, c);
		w.row = max_int(w.row, strlen(cells.row));
		w.variant = max_int(w.variant, strlen(cells.variant));
		w.shape = max_int(w.shape, strlen(cells.shape));
	}
	fprintf(out, "%-*s %-*s %-4s %-5s %-*s %-7s %11s %9s %6s %-12s %s\n", w.row, "row", w.variant, "variant",
		"type", "mode", w.shape, "shape", "status", "median", "GB/s", "ceil", "check maxrel", "conv");
	json_array_foreach(cases, i, c) {
		const char *status = json_string_value(json_object_get(c, "status"));
		print_case_row(out, c, &w);
		if (status && strcmp(status, "ok") == 0)
			passed++;
		else if (status && strcmp(status, "skipped") == 0)
			skipped++;
		else
			failed++;
	}
	json_array_foreach(cases, i, c) {
		json_array_foreach(json_object_get(c, "findings"), j, f)
			fprintf(out, "finding: %s: %s: %s\n",
				mb_print_terminal_safe(id, sizeof(id), json_string_value(json_object_get(c, "id"))),
				mb_print_terminal_safe(kind, sizeof(kind), json_string_value(json_object_get(f, "kind"))),
				mb_print_terminal_safe(message, sizeof(message), json_string_value(json_object_get(f, "message"))));
	}
	mb_print_lanes(out, receipt, MB_PRINT_TEXT);
	print_shards(out, receipt);
	if (json_is_object(good))
		fprintf(out, "goodput: %.1f%% of %.2f s wall time was timed kernel work\n",
			100 * num(good, "goodput_fraction"), num(good, "wall_ns") / NS_PER_S);
	if (skipped)
		fprintf(out, "%zu passed, %zu failed, %zu skipped\n", passed, failed, skipped);
	else
		fprintf(out, "%zu passed, %zu failed\n", passed, failed);
}
