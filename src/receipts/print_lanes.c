/* The lanes of a receipt (src/harness/lane.h) as text or markdown: for each
 * lane its step time and goodput per configuration and mode, then the
 * catalog rows ranked by what their fused kernel saves in the step.
 *
 * A printer only shows; the deltas and their classes were decided when
 * the receipt was written. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "receipts/printer.h"

#define DURATION_LEN 32

static double number(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	return json_is_number(v) ? json_number_value(v) : NAN;
}

static const char *text(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "?";
}

/* Markdown cells: a '|' or a line break in a name would break the table. */
static void cell(FILE *out, const char *s, bool markdown)
{
	for (; *s; s++) {
		if (markdown && (*s == '|' || *s == '\\' || *s == '`'))
			fputc('\\', out);
		fputc(*s == '\n' || *s == '\r' ? ' ' : *s, out);
	}
}

static void print_runs(FILE *out, const json_t *runs, bool md)
{
	size_t i;
	const json_t *run;

	fputs(md ? "| configuration | mode | step | busy | goodput | idle | first step extra |\n"
		   "|---|---|---:|---:|---:|---:|---:|\n"
		 : "  configuration                mode    step        busy        goodput  idle        first step extra\n",
		out);
	json_array_foreach(runs, i, run) {
		char step[DURATION_LEN], busy[DURATION_LEN], gap[DURATION_LEN], first[DURATION_LEN];

		mb_print_duration(step, sizeof(step), number(run, "median_step_ns"));
		mb_print_duration(busy, sizeof(busy), number(run, "median_busy_ns"));
		mb_print_duration(gap, sizeof(gap), number(run, "launch_gap_ns"));
		mb_print_duration(first, sizeof(first), number(run, "first_step_ns"));
		if (md) {
			fputs("| ", out);
			cell(out, text(run, "config"), true);
			fprintf(out, " | %s | %s | %s | %.3f | %s | %s |\n", text(run, "mode"), step, busy,
				number(run, "goodput"), gap, first);
		} else {
			fprintf(out, "  %-28s %-7s %-11s %-11s %-8.3f %-11s %s\n", text(run, "config"), text(run, "mode"),
				step, busy, number(run, "goodput"), gap, first);
		}
	}
}

/* Deltas largest saving first: the rows the step most needs fused. */
static int by_delta(const void *a, const void *b)
{
	double da = number(*(const json_t *const *)a, "delta_ns"), db = number(*(const json_t *const *)b, "delta_ns");
	return (da < db) - (da > db);
}

static const char *meaning(const char *cls)
{
	if (!strcmp(cls, "SLOWER"))
		return "fused wins";
	if (!strcmp(cls, "FASTER"))
		return "fallback wins";
	if (!strcmp(cls, "SAME"))
		return "no difference";
	return "not enough evidence";
}

static void print_deltas(FILE *out, const json_t *deltas, bool md)
{
	size_t n = json_array_size(deltas);
	const json_t **order = malloc((n ? n : 1) * sizeof(*order));

	if (!order) {
		fputs("  (out of memory listing the deltas)\n", out);
		return;
	}
	for (size_t i = 0; i < n; i++)
		order[i] = json_array_get(deltas, i);
	qsort(order, n, sizeof(*order), by_delta);
	fputs(md ? "\n| row | mode | saved per step | of the step | verdict |\n|---|---|---:|---:|---|\n"
		 : "\n  row                      mode    saved/step  of step  verdict\n",
		out);
	for (size_t i = 0; i < n; i++) {
		char saved[DURATION_LEN];
		const char *cls = text(order[i], "fallback_is");

		mb_print_duration(saved, sizeof(saved), number(order[i], "delta_ns"));
		if (md) {
			fputs("| ", out);
			cell(out, text(order[i], "row"), true);
			fprintf(out, " | %s | %s | %+.2f%% | %s (%s) |\n", text(order[i], "mode"), saved,
				100.0 * number(order[i], "delta_fraction"), meaning(cls), cls);
		} else {
			fprintf(out, "  %-24s %-7s %-11s %+6.2f%%  %s (%s)\n", text(order[i], "row"),
				text(order[i], "mode"), saved, 100.0 * number(order[i], "delta_fraction"), meaning(cls), cls);
		}
	}
	free(order);
}

void mb_print_lanes(FILE *out, const json_t *receipt, bool markdown)
{
	const json_t *lanes = json_object_get(receipt, "lanes"), *lane, *note;
	size_t i, j;

	json_array_foreach(lanes, i, lane) {
		const json_t *shape = json_object_get(lane, "shape");

		fprintf(out, markdown ? "\n### Lane `%s` (%s)\n\n" : "\nlane %s (%s): ", text(lane, "name"),
			text(lane, "pattern"));
		fprintf(out, "tokens %.0f, hidden %.0f, %.0f steps x %.0f rounds%s", number(shape, "tokens"),
			number(shape, "hidden"), number(lane, "steps"), number(lane, "rounds"), markdown ? "\n\n" : "\n");
		if (json_object_get(lane, "error")) {
			fputs(markdown ? "Stopped: " : "  stopped: ", out);
			cell(out, text(lane, "error"), markdown);
			fputs("\n", out);
		}
		if (json_object_get(lane, "busy_note"))
			fprintf(out, "%s%s\n", markdown ? "" : "  ", text(lane, "busy_note"));
		print_runs(out, json_object_get(lane, "runs"), markdown);
		if (json_array_size(json_object_get(lane, "deltas")))
			print_deltas(out, json_object_get(lane, "deltas"), markdown);
		json_array_foreach(json_object_get(lane, "notes"), j, note) {
			fputs(markdown ? (j ? "- " : "\n- ") : "  note: ", out);
			cell(out, json_string_value(note) ? json_string_value(note) : "?", markdown);
			fputs("\n", out);
		}
	}
}
