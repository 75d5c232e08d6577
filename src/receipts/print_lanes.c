/* The lanes of a receipt (src/harness/lane.h) as text, Markdown or HTML:
 * for each lane how its rounds went per mode, its step time and goodput per
 * configuration and mode, then the catalog rows ranked by what their fused
 * kernel saves in the step against each alternative.
 *
 * A printer only shows; the deltas and their classes were decided when
 * the receipt was written. The three formats share one small table writer,
 * so that every lane table has the same columns whatever reads it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "receipts/printer.h"
#include "receipts/report.h"
#include "receipts/text.h"

#define CELL_LEN 256
#define MAX_COLS 8

static const char *text(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "?";
}

/* Text from the receipt, made safe for the format. */
static void put(FILE *out, const char *s, mb_print_format fmt)
{
	char safe[CELL_LEN * 4];

	if (fmt == MB_PRINT_MARKDOWN)
		mb_print_md_cell(out, s);
	else if (fmt == MB_PRINT_HTML)
		mb_print_xml_escaped(out, s);
	else
		fputs(mb_print_terminal_safe(safe, sizeof(safe), s), out);
}

/* A table: its columns' headings, text widths (0: the last column, as
 * wide as it needs) and whether they hold numbers (right-aligned). */
typedef struct lane_table {
	int n;
	const char *head[MAX_COLS];
	int width[MAX_COLS];
	bool numeric[MAX_COLS];
} lane_table;

static void table_start(FILE *out, const lane_table *t, mb_print_format fmt)
{
	if (fmt == MB_PRINT_HTML) {
		fputs("<table class=\"lane\"><thead><tr>", out);
		for (int c = 0; c < t->n; c++)
			fprintf(out, "<th%s>%s</th>", t->numeric[c] ? " class=\"num\"" : "", t->head[c]);
		fputs("</tr></thead><tbody>\n", out);
	} else if (fmt == MB_PRINT_MARKDOWN) {
		for (int c = 0; c < t->n; c++)
			fprintf(out, "| %s ", t->head[c]);
		fputs("|\n", out);
		for (int c = 0; c < t->n; c++)
			fputs(t->numeric[c] ? "|---:" : "|---", out);
		fputs("|\n", out);
	} else {
		fputs(" ", out);
		for (int c = 0; c < t->n; c++)
			fprintf(out, " %-*s", t->width[c], t->head[c]);
		fputs("\n", out);
	}
}

static void table_row(FILE *out, const lane_table *t, char cells[][CELL_LEN], mb_print_format fmt)
{
	char safe[CELL_LEN * 4];

	if (fmt == MB_PRINT_HTML)
		fputs("<tr>", out);
	else if (fmt == MB_PRINT_TEXT)
		fputs(" ", out);
	for (int c = 0; c < t->n; c++) {
		if (fmt == MB_PRINT_HTML) {
			fputs(t->numeric[c] ? "<td class=\"num\">" : "<td>", out);
			put(out, cells[c], fmt);
			fputs("</td>", out);
		} else if (fmt == MB_PRINT_MARKDOWN) {
			fputs("| ", out);
			put(out, cells[c], fmt);
			fputs(" ", out);
		} else {
			fprintf(out, " %-*s", t->width[c], mb_print_terminal_safe(safe, sizeof(safe), cells[c]));
		}
	}
	fputs(fmt == MB_PRINT_HTML ? "</tr>\n" : fmt == MB_PRINT_MARKDOWN ? "|\n" : "\n", out);
}

static void table_end(FILE *out, mb_print_format fmt)
{
	if (fmt == MB_PRINT_HTML)
		fputs("</tbody></table>\n", out);
}

static void print_runs(FILE *out, const json_t *runs, mb_print_format fmt)
{
	static const lane_table t = {7,
		{"configuration", "mode", "step", "busy", "goodput", "idle", "first step extra"},
		{32, 6, 11, 11, 8, 11, 0},
		{false, false, true, true, true, true, true}};
	size_t i;
	const json_t *run;

	table_start(out, &t, fmt);
	json_array_foreach(runs, i, run) {
		char cells[MAX_COLS][CELL_LEN];

		snprintf(cells[0], CELL_LEN, "%s", text(run, "config"));
		snprintf(cells[1], CELL_LEN, "%s", text(run, "mode"));
		mb_text_duration(cells[2], CELL_LEN, mb_json_num(run, "median_step_ns"));
		mb_text_duration(cells[3], CELL_LEN, mb_json_num(run, "median_busy_ns"));
		snprintf(cells[4], CELL_LEN, "%.3f", mb_json_num(run, "goodput"));
		mb_text_duration(cells[5], CELL_LEN, mb_json_num(run, "launch_gap_ns"));
		mb_text_duration(cells[6], CELL_LEN, mb_json_num(run, "first_step_ns"));
		table_row(out, &t, cells, fmt);
	}
	table_end(out, fmt);
}

/* Deltas largest saving first: the rows the step most needs fused. */
static int by_delta(const void *a, const void *b)
{
	double da = mb_json_num(*(const json_t *const *)a, "delta_ns");
	double db = mb_json_num(*(const json_t *const *)b, "delta_ns");

	return (da < db) - (da > db);
}

static const char *meaning(const char *cls)
{
	if (!strcmp(cls, "SLOWER"))
		return "fused wins";
	if (!strcmp(cls, "FASTER"))
		return "alternative wins";
	if (!strcmp(cls, "SAME"))
		return "no difference";
	return "not enough evidence";
}

static void print_deltas(FILE *out, const json_t *deltas, mb_print_format fmt)
{
	static const lane_table t = {6, {"row", "variant", "mode", "saved per step", "of the step", "verdict"},
		{24, 14, 6, 15, 12, 0}, {false, false, false, true, true, false}};
	size_t n = json_array_size(deltas);
	const json_t **order = malloc((n ? n : 1) * sizeof(*order));

	if (!order) {
		fputs("(out of memory listing the deltas)\n", out);
		return;
	}
	for (size_t i = 0; i < n; i++)
		order[i] = json_array_get(deltas, i);
	qsort(order, n, sizeof(*order), by_delta);
	fputs(fmt == MB_PRINT_HTML ? "" : "\n", out);
	table_start(out, &t, fmt);
	for (size_t i = 0; i < n; i++) {
		char cells[MAX_COLS][CELL_LEN];
		const char *cls = text(order[i], "fallback_is");

		snprintf(cells[0], CELL_LEN, "%s", text(order[i], "row"));
		/* receipts before the lanes held every row: the fallback */
		snprintf(cells[1], CELL_LEN, "%s", json_object_get(order[i], "variant") ? text(order[i], "variant") : "fallback");
		snprintf(cells[2], CELL_LEN, "%s", text(order[i], "mode"));
		mb_text_duration(cells[3], CELL_LEN, mb_json_num(order[i], "delta_ns"));
		snprintf(cells[4], CELL_LEN, "%+.2f%%", 100.0 * mb_json_num(order[i], "delta_fraction"));
		snprintf(cells[5], CELL_LEN, "%s (%s)", meaning(cls), cls);
		table_row(out, &t, cells, fmt);
	}
	table_end(out, fmt);
	free(order);
}

/* A line of prose: a paragraph in HTML, a line elsewhere. */
static void line(FILE *out, const char *lead, const char *s, mb_print_format fmt)
{
	fputs(fmt == MB_PRINT_HTML ? "<p class=\"meta\">" : fmt == MB_PRINT_TEXT ? "  " : "", out);
	fputs(lead, out);
	put(out, s, fmt);
	fputs(fmt == MB_PRINT_HTML ? "</p>\n" : "\n", out);
}

/* Per mode: its rounds, why they stopped, the noise reached and the seed
 * that orders them; then the rows that run fused only (a list in
 * Markdown). */
static void print_stopping(FILE *out, const json_t *lane, mb_print_format fmt)
{
	const char *item = fmt == MB_PRINT_MARKDOWN ? "- " : "";
	size_t i;
	const json_t *e;

	json_array_foreach(json_object_get(lane, "stopping"), i, e) {
		char s[CELL_LEN * 2], noise[64] = "", resolved[96] = "", settled[48] = "";
		if (json_is_number(json_object_get(e, "fused_round_noise")))
			snprintf(noise, sizeof(noise), "; all fused round to round %.2f%%",
				100.0 * mb_json_num(e, "fused_round_noise"));
		if (json_is_number(json_object_get(e, "resolvable_delta")))
			snprintf(resolved, sizeof(resolved), "; resolves %.2f%% of the step (target %.2f%%, worst %s)",
				100.0 * mb_json_num(e, "resolvable_delta"), 100.0 * mb_json_num(e, "target"), text(e, "worst_config"));
		if (json_array_size(json_object_get(e, "settled")))
			snprintf(settled, sizeof(settled), "; %zu configurations settled early",
				json_array_size(json_object_get(e, "settled")));
		snprintf(s, sizeof(s), "%s: %.0f rounds, stopped by %s%s%s%s; shuffle seed %lld", text(e, "mode"),
			mb_json_num(e, "rounds"), text(e, "stopped"), resolved, noise, settled,
			(long long)json_integer_value(json_object_get(e, "seed")));
		line(out, item, s, fmt);
	}
	json_array_foreach(json_object_get(lane, "fused_only"), i, e) {
		char s[CELL_LEN * 4];
		snprintf(s, sizeof(s), "%s, %s: fused only: %s", text(e, "row"), text(e, "mode"), text(e, "why"));
		line(out, item, s, fmt);
	}
	if (fmt == MB_PRINT_MARKDOWN && json_array_size(json_object_get(lane, "stopping")))
		fputs("\n", out);
}

void mb_print_lanes(FILE *out, const json_t *receipt, mb_print_format fmt)
{
	const json_t *lanes = json_object_get(receipt, "lanes"), *lane, *note;
	size_t i, j;
	char summary[CELL_LEN];

	json_array_foreach(lanes, i, lane) {
		const json_t *shape = json_object_get(lane, "shape");

		fputs(fmt == MB_PRINT_HTML ? "<h4>Lane " : fmt == MB_PRINT_MARKDOWN ? "\n### Lane " : "\nlane ", out);
		put(out, text(lane, "name"), fmt);
		fputs(" (", out);
		put(out, text(lane, "pattern"), fmt);
		fputs(fmt == MB_PRINT_HTML ? ")</h4>\n" : fmt == MB_PRINT_MARKDOWN ? ")\n\n" : ")\n", out);
		snprintf(summary, sizeof(summary), "tokens %.0f, hidden %.0f, %s, %.0f steps a round, up to %.0f rounds",
			mb_json_num(shape, "tokens"), mb_json_num(shape, "hidden"),
			json_is_false(json_object_get(lane, "backward")) ? "forward only" : "forward and backward",
			mb_json_num(lane, "steps"), mb_json_num(lane, "rounds"));
		line(out, "", summary, fmt);
		if (fmt == MB_PRINT_MARKDOWN)
			fputs("\n", out);
		print_stopping(out, lane, fmt);
		if (json_object_get(lane, "error"))
			line(out, "stopped: ", text(lane, "error"), fmt);
		if (json_object_get(lane, "busy_note"))
			line(out, "", text(lane, "busy_note"), fmt);
		print_runs(out, json_object_get(lane, "runs"), fmt);
		if (json_array_size(json_object_get(lane, "deltas")))
			print_deltas(out, json_object_get(lane, "deltas"), fmt);
		if (fmt == MB_PRINT_MARKDOWN && json_array_size(json_object_get(lane, "notes")))
			fputs("\n", out);
		json_array_foreach(json_object_get(lane, "notes"), j, note)
			line(out, fmt == MB_PRINT_MARKDOWN ? "- " : "note: ",
				json_string_value(note) ? json_string_value(note) : "?", fmt);
	}
}

void mb_print_report_lanes(FILE *out, const mb_report_group *g, mb_print_format fmt, bool skip_newest)
{
	bool html = fmt == MB_PRINT_HTML, any = false;

	for (size_t k = g->n - (skip_newest ? 1 : 0); k-- > 0;) {
		char rev[MB_REPORT_LABEL_MAX], head[2 * MB_REPORT_LABEL_MAX];

		if (!json_array_size(json_object_get(g->revs[k], "lanes")))
			continue;
		if (!any && html)
			fputs("<h3>Lanes: training-step slices</h3>\n<p class=\"meta\">Step time and goodput (busy / step) "
				"per configuration and mode, then the rows ranked by what their fused kernel saves per step "
				"(the step with that row on its fallback, every other row fused); the lanes of every receipt "
				"that ran them, newest first.</p>\n", out);
		any = true;
		mb_report_revision_text(rev, sizeof(rev), g->revs[k], g->names[k]);
		snprintf(head, sizeof(head), "Lanes of %s (%s)", rev, g->names[k]);
		fputs(html ? "<h4 class=\"lanes\">" : "\n### ", out);
		if (html)
			mb_print_xml_escaped(out, head);
		else
			mb_print_md_cell(out, head);
		fputs(html ? "</h4>\n" : "\n", out);
		mb_print_lanes(out, g->revs[k], fmt);
	}
}
