/* The nightly history as Markdown (summary.md, standard output) and as a
 * self-contained HTML page (index.html: inline CSS, no scripts). Both show
 * what history.c decided; neither decides anything. Every string from a
 * receipt is escaped. */
#include <stdio.h>
#include <string.h>

#include "receipts/history.h"
#include "receipts/printer.h"
#include "receipts/promotion.h"
#include "receipts/text.h"

#define LABEL_MAX 512

/* The row's status in the newest receipt, flagged (verdict.h) where the
 * newest verdict disagrees with it. */
static const char *status_of(const mb_history_group *g, const mb_history_row *r, char *buf, size_t len)
{
	const json_t *newest = g->g->revs[g->g->n - 1];
	const mb_history_cell *v = r->cells[g->g->n - 1];

	if (!mb_promotion_recorded(newest))
		return "unknown (the receipt predates recorded status)";
	if (!mb_promotion_status(newest, r->row, NULL))
		return "unknown (not in the receipt's catalog)";
	if (v) {
		snprintf(buf, len, "%s", v->status);
	} else {
		const char *cond = NULL, *st = mb_promotion_status(newest, r->row, &cond);

		snprintf(buf, len, "%s%s%s%s", st, cond ? " (" : "", cond ? cond : "", cond ? ")" : "");
	}
	return buf;
}

static void group_title(char *buf, size_t len, const mb_receipt_group *g)
{
	snprintf(buf, len, "%s, %s, suite %s", mb_text_get(json_object_get(g->first, "device"), "name"),
		mb_text_get(g->first, "backend"), mb_text_get(json_object_get(g->first, "suite"), "name"));
}

static size_t lanes_of(const json_t *receipt)
{
	return json_array_size(json_object_get(receipt, "lanes"));
}

/* ---- Markdown ---- */

static void md_group(FILE *out, const mb_history_group *hg)
{
	const mb_receipt_group *g = hg->g;
	char text[LABEL_MAX], status[LABEL_MAX];

	group_title(text, sizeof(text), g);
	fputs("\n## ", out);
	mb_print_md_cell(out, text);
	fputs("\n\n| # | commit date and revision | receipt | lanes |\n|---:|---|---|---:|\n", out);
	for (size_t k = 0; k < g->n; k++) {
		mb_history_revision_label(text, sizeof(text), g->revs[k], g->names[k]);
		fprintf(out, "| %zu | ", k + 1);
		mb_print_md_cell(out, text);
		fputs(" | ", out);
		mb_print_md_cell(out, g->names[k]);
		fprintf(out, " | %zu |\n", lanes_of(g->revs[k]));
	}
	fputs("\n| row | status (newest) |", out);
	for (size_t k = 0; k < g->n; k++)
		fprintf(out, " #%zu |", k + 1);
	fputs(" decision |\n|---|---|", out);
	for (size_t k = 0; k < g->n; k++)
		fputs("---|", out);
	fputs("---|\n", out);
	for (size_t i = 0; i < hg->n_rows; i++) {
		const mb_history_row *r = &hg->rows[i];

		fputs("| ", out);
		mb_print_md_cell(out, r->row);
		fputs(" | ", out);
		mb_print_md_cell(out, status_of(hg, r, status, sizeof(status)));
		fputs(" |", out);
		for (size_t k = 0; k < g->n; k++) {
			fputs(" ", out);
			if (r->cells[k]) {
				mb_print_md_cell(out, r->cells[k]->label);
				fputs("; ", out);
				mb_print_md_cell(out, r->cells[k]->lane);
			} else {
				fputs("-", out);
			}
			fputs(" |", out);
		}
		mb_history_decision_text(text, sizeof(text), hg, r);
		fputs(" ", out);
		mb_print_md_cell(out, text);
		fputs(" |\n", out);
	}
}

int mb_print_history_markdown(FILE *out, const mb_history *h, mb_error *err)
{
	size_t n = 0;

	for (size_t g = 0; g < h->n_groups; g++)
		n += h->groups[g].g->n;
	fprintf(out, "# megabench history\n\n%zu receipt%s in %zu group%s (device, backend and suite), oldest commit "
		"first. A row is flagged demote when it is drop (its fallback wins, or its win is under the minimum "
		"effect) in the last %d consecutive nightlies of its group that ran it, confirmed when it is keep in the "
		"last %d or more; policy: ", n, n == 1 ? "" : "s", h->n_groups, h->n_groups == 1 ? "" : "s", MB_HISTORY_STREAK,
		MB_HISTORY_STREAK);
	mb_print_md_cell(out, h->policy->source);
	fputs(".\n", out);
	for (size_t g = 0; g < h->n_groups; g++)
		md_group(out, &h->groups[g]);
	return ferror(out) ? mb_error_set(err, MB_EIO, "history", "write failed") : 0;
}

/* ---- HTML ---- */

static const char *decision_class(mb_history_decision d)
{
	return d == MB_HISTORY_DEMOTE ? "demote" : d == MB_HISTORY_CONFIRMED ? "confirmed" : "watch";
}

static const char *mark_class(const mb_history_cell *v)
{
	if (!v)
		return "absent";
	switch (v->kind) {
	case MB_VERDICT_KEEP: return "keep";
	case MB_VERDICT_CONDITIONAL: return "conditional";
	case MB_VERDICT_DROP: return "drop";
	default: return "other";
	}
}

static void html_group(FILE *out, const mb_history_group *hg, size_t index)
{
	const mb_receipt_group *g = hg->g;
	char text[LABEL_MAX], status[LABEL_MAX];

	group_title(text, sizeof(text), g);
	fprintf(out, "<section id=\"g%zu\"><h2>", index + 1);
	mb_print_xml_escaped(out, text);
	fputs("</h2>\n<table><tr><th>#</th><th>commit date and revision</th><th>receipt</th><th>lanes</th></tr>\n", out);
	for (size_t k = 0; k < g->n; k++) {
		mb_history_revision_label(text, sizeof(text), g->revs[k], g->names[k]);
		fprintf(out, "<tr><td>%zu</td><td>", k + 1);
		mb_print_xml_escaped(out, text);
		fputs("</td><td>", out);
		mb_print_xml_escaped(out, g->names[k]);
		fprintf(out, "</td><td>%zu</td></tr>\n", lanes_of(g->revs[k]));
	}
	fputs("</table>\n<table class=\"hist\"><tr><th>row</th><th>status (newest)</th>", out);
	for (size_t k = 0; k < g->n; k++)
		fprintf(out, "<th>#%zu</th>", k + 1);
	fputs("<th>decision</th></tr>\n", out);
	for (size_t i = 0; i < hg->n_rows; i++) {
		const mb_history_row *r = &hg->rows[i];

		fputs("<tr><td>", out);
		mb_print_xml_escaped(out, r->row);
		fputs("</td><td>", out);
		mb_print_xml_escaped(out, status_of(hg, r, status, sizeof(status)));
		fputs("</td>", out);
		for (size_t k = 0; k < g->n; k++) {
			fprintf(out, "<td class=\"%s\">", mark_class(r->cells[k]));
			if (r->cells[k]) {
				mb_print_xml_escaped(out, r->cells[k]->label);
				fputs("<br><small>", out);
				mb_print_xml_escaped(out, r->cells[k]->lane);
				fputs("</small>", out);
			} else {
				fputs("-", out);
			}
			fputs("</td>", out);
		}
		mb_history_decision_text(text, sizeof(text), hg, r);
		fprintf(out, "<td class=\"%s\">", decision_class(r->decision));
		mb_print_xml_escaped(out, text);
		fputs("</td></tr>\n", out);
	}
	fputs("</table></section>\n", out);
}

int mb_print_history_html(FILE *out, const mb_history *h, mb_error *err)
{
	size_t n = 0;

	for (size_t g = 0; g < h->n_groups; g++)
		n += h->groups[g].g->n;
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
		"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
		"<title>megabench history</title>\n<style>\n"
		"body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1f2328}\n"
		"table{border-collapse:collapse;margin:0.8em 0}\n"
		"th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}\n"
		"th{background:#f6f8fa}\nsmall{color:#57606a}\n"
		".keep{background:#dafbe1}.conditional{background:#fff8c5}.drop{background:#ffebe9}\n"
		".other,.absent{background:#f6f8fa}\n"
		".demote{background:#ffebe9;font-weight:600}.confirmed{background:#dafbe1}\n"
		"</style></head><body>\n<h1>megabench history</h1>\n", out);
	fprintf(out, "<p>%zu receipt%s in %zu group%s (device, backend and suite), oldest commit first. A row is "
		"flagged demote when it is drop (its fallback wins, or its win is under the minimum effect) in the last "
		"%d consecutive nightlies of its group that ran it, confirmed when it is keep in the last %d or more; "
		"policy: ", n,
		n == 1 ? "" : "s", h->n_groups, h->n_groups == 1 ? "" : "s", MB_HISTORY_STREAK, MB_HISTORY_STREAK);
	mb_print_xml_escaped(out, h->policy->source);
	fputs(".</p>\n", out);
	for (size_t g = 0; g < h->n_groups; g++)
		html_group(out, &h->groups[g], g);
	fputs("</body></html>\n", out);
	return ferror(out) ? mb_error_set(err, MB_EIO, "history", "write failed") : 0;
}
