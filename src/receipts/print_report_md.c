/* The maintainer's report as Markdown (summary.md beside index.html): per
 * group the newest receipt's verdicts through the Markdown printer, the
 * lanes of older receipts, the rows taken from older receipts, and the
 * history's first regression per row. It renders the report's model
 * (report.h) and computes nothing. */
#include <stdio.h>

#include "receipts/printer.h"
#include "receipts/report.h"
#include "receipts/text.h"

/* A Markdown table row of three cells of receipt text. */
static void md_row3(FILE *out, const char *a, const char *b, const char *c)
{
	fputs("| ", out);
	mb_print_md_cell(out, a);
	fputs(" | ", out);
	mb_print_md_cell(out, b);
	fputs(" | ", out);
	mb_print_md_cell(out, c);
	fputs(" |\n", out);
}

int mb_print_report_markdown(FILE *out, const mb_report *report, mb_error *err)
{
	const mb_report *r = report;
	mb_verdict_set view = {0};
	int rc = 0;

	if (r->n_groups > 1)
		fprintf(out, "%zu receipts in %zu groups (device, backend, suite); receipts of different groups are not "
			"compared.\n\n", r->n, r->n_groups);
	for (size_t gi = 0; gi < r->n_groups; gi++) {
		const mb_report_group *g = &r->groups[gi];

		if (r->n_groups > 1) {
			fprintf(out, "## %zu. ", gi + 1);
			mb_print_md_cell(out, mb_text_get(json_object_get(g->first, "device"), "name"));
			fputs(", ", out);
			mb_print_md_cell(out, mb_text_get(g->first, "backend"));
			fputs(" backend, suite ", out);
			mb_print_md_cell(out, mb_text_get(json_object_get(g->first, "suite"), "name"));
			fprintf(out, " (%zu receipt%s)\n\n", g->n, g->n == 1 ? "" : "s");
		}
		if ((rc = mb_report_newest_view(&view, g)))
			return mb_error_set(err, rc, "report", "no memory");
		rc = mb_printer_markdown.verdicts(out, &view, g->revs[g->n - 1], g->names[g->n - 1], r->policy, err);
		free(view.rows);
		view.rows = NULL;
		if (rc)
			return rc;
		fputs("\n", out);
		mb_print_md_cell(out, mb_print_model_note);
		fputs("\n", out);
		mb_print_report_lanes(out, g, MB_PRINT_MARKDOWN, true);
		if (mb_report_rows_mixed(g)) {
			fputs("\nRows the newest receipt does not have, from the newest receipt that does:\n\n"
				"| row | verdict | revision |\n|---|---|---|\n", out);
			for (size_t i = 0; i < g->n_rows; i++) {
				char label[MB_VERDICT_TEXT_MAX + 32], rev[MB_REPORT_LABEL_MAX];
				if (g->rows[i].rev == g->n - 1)
					continue;
				mb_verdict_label(label, sizeof(label), g->rows[i].v);
				mb_report_revision_text(rev, sizeof(rev), g->revs[g->rows[i].rev], g->names[g->rows[i].rev]);
				md_row3(out, g->rows[i].v->row, label, rev);
			}
		}
		if (g->n > 1) {
			fprintf(out, "\n### History across %zu revisions\n\n", g->n);
			if (g->notes[0]) {
				mb_print_md_cell(out, g->notes);
				fputs("\n\n", out);
			}
			fputs("| row | first regression | case |\n|---|---|---|\n", out);
			for (size_t i = 0; i < g->n_rows; i++) {
				char rev[MB_REPORT_LABEL_MAX];

				mb_report_first_regression_text(rev, sizeof(rev), g, i);
				md_row3(out, g->rows[i].v->row, rev, g->first_regression[i] >= 0 ? g->regression_case[i] : "");
			}
		}
		if (gi + 1 < r->n_groups)
			fputs("\n", out);
	}
	return 0;
}
