#include "harness/console.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

#include "harness/clock.h"
#include "receipts/printer.h"
#include "receipts/text.h"
#include "receipts/verdict.h"

#define NS_PER_S 1e9
#define ESCAPED_BYTES 512
#define CELL_BYTES 256


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
		mb_text_duration(med, sizeof(med), json_number_value(json_object_get(timing, "median_ns")));
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
			json_integer_value(json_object_get(s, "cases")), mb_json_num(s, "wall_ns") / NS_PER_S);
		if (how && strcmp(how, "exited with status 0"))
			fprintf(out, "; its worker %s", mb_print_terminal_safe(ended, sizeof(ended), how));
		fprintf(out, "\n");
	}
}

void mb_console_print_table(FILE *out, const json_t *receipt)
{
	mb_console_print_table_as(out, receipt, MB_RUN_TABLE_TEXT);
}

void mb_console_print_table_as(FILE *out, const json_t *receipt, mb_run_table_format fmt)
{
	const json_t *cases = json_object_get(receipt, "cases"), *c, *f;
	const json_t *good = json_object_get(receipt, "goodput");
	size_t i, j, passed = 0, failed = 0, skipped = 0;
	char id[ESCAPED_BYTES], kind[CELL_BYTES], message[ESCAPED_BYTES];
	mb_verdict_set set;
	mb_policy policy;
	mb_error err;
	bool verdicts;

	/* the speedup column: each fused case against its best alternative,
	 * as the verdicts pair them (at the default policy) */
	mb_policy_defaults(&policy);
	memset(&set, 0, sizeof(set));
	verdicts = mb_verdict_compute(&set, receipt, &policy, &err) == 0;
	mb_print_run_table(out, receipt, verdicts ? &set : NULL, fmt);
	mb_verdict_set_free(&set);
	mb_policy_free(&policy);
	if (fmt == MB_RUN_TABLE_CSV)
		return; /* the cases only: a file for a spreadsheet */
	json_array_foreach(cases, i, c) {
		const char *status = json_string_value(json_object_get(c, "status"));
		if (status && strcmp(status, "ok") == 0)
			passed++;
		else if (status && strcmp(status, "skipped") == 0)
			skipped++;
		else
			failed++;
	}
	if (fmt == MB_RUN_TABLE_MARKDOWN)
		fputs("\n", out);
	json_array_foreach(cases, i, c) {
		json_array_foreach(json_object_get(c, "findings"), j, f) {
			if (fmt == MB_RUN_TABLE_MARKDOWN) {
				fputs("- finding: ", out);
				mb_print_md_cell(out, json_string_value(json_object_get(c, "id")));
				fputs(": ", out);
				mb_print_md_cell(out, json_string_value(json_object_get(f, "kind")));
				fputs(": ", out);
				mb_print_md_cell(out, json_string_value(json_object_get(f, "message")));
				fputs("\n", out);
				continue;
			}
			fprintf(out, "finding: %s: %s: %s\n",
				mb_print_terminal_safe(id, sizeof(id), json_string_value(json_object_get(c, "id"))),
				mb_print_terminal_safe(kind, sizeof(kind), json_string_value(json_object_get(f, "kind"))),
				mb_print_terminal_safe(message, sizeof(message), json_string_value(json_object_get(f, "message"))));
		}
	}
	mb_print_lanes(out, receipt, fmt == MB_RUN_TABLE_MARKDOWN ? MB_PRINT_MARKDOWN : MB_PRINT_TEXT);
	if (fmt == MB_RUN_TABLE_TEXT)
		print_shards(out, receipt);
	if (json_is_object(good))
		fprintf(out, "goodput: %.1f%% of %.2f s wall time was timed kernel work\n",
			100 * mb_json_num(good, "goodput_fraction"), mb_json_num(good, "wall_ns") / NS_PER_S);
	if (fmt == MB_RUN_TABLE_MARKDOWN)
		fputs("\n", out);
	if (skipped)
		fprintf(out, "%zu passed, %zu failed, %zu skipped\n", passed, failed, skipped);
	else
		fprintf(out, "%zu passed, %zu failed\n", passed, failed);
}
