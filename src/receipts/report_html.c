/* The maintainer's report: index.html (inline CSS, hand-drawn SVG, no
 * scripts, no network) and summary.md. Receipts are ordered by commit time;
 * the newest gives the verdict table and the per-shape plots, and when
 * several receipts of its suite are given, a history across revisions marks
 * the first revision where each row regressed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "receipts/printer.h"
#include "receipts/text.h"

#define PLOT_W 960
#define PLOT_H 300
#define MARGIN_L 80
#define MARGIN_R 20
#define MARGIN_T 20
#define MARGIN_B 110
#define Y_TICKS 4
#define HEADROOM 1.1
#define LABEL_MAX 256
#define MAX_VARIANTS 8
#define MAX_SHAPES 128
#define POINT_R 4
#define MARK_R 8
#define LABEL_CHARS 38

static const char *const palette[MAX_VARIANTS] = {"#1f6feb", "#d9822b", "#2da44e", "#8250df", "#cf222e",
	"#6e7781", "#bf8700", "#0a7b83"};

static json_int_t commit_time(const json_t *r)
{
	return json_integer_value(json_object_get(json_object_get(r, "provenance"), "commit_time"));
}

/* Indices of the receipts, oldest commit first (stable). */
static void order_by_time(size_t *idx, json_t *const *receipts, size_t n)
{
	for (size_t i = 0; i < n; i++)
		idx[i] = i;
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && commit_time(receipts[idx[j - 1]]) > commit_time(receipts[idx[j]]); j--) {
			size_t t = idx[j];
			idx[j] = idx[j - 1];
			idx[j - 1] = t;
		}
}

static void css(FILE *out)
{
	fputs("<style>\n"
		"body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#1f2328;"
		"background:#fff;max-width:1200px}\n"
		"h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #d0d7de}\n"
		"h3{font-size:15px;margin-bottom:4px}\n"
		"table{border-collapse:collapse;font-size:13px;margin:8px 0}\n"
		"th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}\n"
		"th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}\n"
		".keep{background:#dafbe1}.conditional{background:#fff8c5}.drop{background:#ffebe9}"
		".ambiguous{background:#eaeef2}.nee{color:#57606a}\n"
		".meta{color:#57606a;font-size:13px}.note{background:#fff8c5;padding:6px 10px;border-radius:4px}\n"
		"svg{background:#fff;border:1px solid #d0d7de;margin:6px 0}\n"
		"svg text{font-size:11px;fill:#1f2328}svg .axis{stroke:#57606a;stroke-width:1}"
		"svg .grid{stroke:#eaeef2;stroke-width:1}svg .ceil{stroke:#cf222e;stroke-dasharray:6 4}\n"
		".legend span{display:inline-block;margin-right:14px;font-size:12px}"
		".legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-1px}\n"
		"</style>\n", out);
}

static const char *verdict_class(mb_verdict_kind k)
{
	switch (k) {
	case MB_VERDICT_KEEP: return "keep";
	case MB_VERDICT_CONDITIONAL: return "conditional";
	case MB_VERDICT_DROP: return "drop";
	case MB_VERDICT_AMBIGUOUS: return "ambiguous";
	case MB_VERDICT_NOT_ENOUGH_EVIDENCE: return "nee";
	}
	return "nee";
}

static void verdict_table(FILE *out, const mb_verdict_set *set)
{
	fputs("<table id=\"verdicts\"><tr><th>row</th><th>block</th><th>verdict</th><th>families won</th>"
		"<th>saved</th><th>speedup at the largest shape</th><th>why</th></tr>\n", out);
	for (size_t i = 0; i < set->n_rows; i++) {
		const mb_row_verdict *v = &set->rows[i];
		char label[MB_VERDICT_TEXT_MAX + 32], saved[MB_VERDICT_TEXT_MAX], speedup[MB_VERDICT_TEXT_MAX];

		mb_verdict_label(label, sizeof(label), v);
		mb_verdict_saved_text(saved, sizeof(saved), v);
		mb_verdict_speedup_text(speedup, sizeof(speedup), v);
		fprintf(out, "<tr class=\"%s\"><td>", verdict_class(v->kind));
		mb_print_xml_escaped(out, v->row);
		fprintf(out, "</td><td>%s</td><td>", v->block);
		mb_print_xml_escaped(out, label);
		fputs("</td><td>", out);
		mb_print_xml_escaped(out, v->families);
		fputs("</td><td class=\"num\">", out);
		mb_print_xml_escaped(out, saved);
		fputs("</td><td>", out);
		mb_print_xml_escaped(out, speedup);
		fputs("</td><td>", out);
		mb_print_xml_escaped(out, v->reason);
		fputs("</td></tr>\n", out);
	}
	fputs("</table>\n", out);
}

static void legend(FILE *out, const char *const *names, size_t n)
{
	fputs("<div class=\"legend\">", out);
	for (size_t i = 0; i < n; i++) {
		fprintf(out, "<span><i style=\"background:%s\"></i>", palette[i % MAX_VARIANTS]);
		mb_print_xml_escaped(out, names[i]);
		fputs("</span>", out);
	}
	fputs("</div>\n", out);
}

static double y_of(double v, double vmax)
{
	return MARGIN_T + (PLOT_H - MARGIN_T - MARGIN_B) * (1.0 - v / vmax);
}

static void y_axis(FILE *out, double vmax, bool fraction)
{
	for (int t = 0; t <= Y_TICKS; t++) {
		double v = vmax * t / Y_TICKS, y = y_of(v, vmax);
		char label[32];

		if (fraction)
			snprintf(label, sizeof(label), "%.0f%%", 100.0 * v);
		else
			mb_print_duration(label, sizeof(label), v);
		fprintf(out, "<line class=\"grid\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>"
			"<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
			MARGIN_L, y, PLOT_W - MARGIN_R, y, MARGIN_L - 6, y + 4, label);
	}
	fprintf(out, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n", MARGIN_L, MARGIN_T,
		MARGIN_L, PLOT_H - MARGIN_B);
	fprintf(out, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n", MARGIN_L,
		PLOT_H - MARGIN_B, PLOT_W - MARGIN_R, PLOT_H - MARGIN_B);
}

static int find_or_add(const char **list, size_t *n, size_t max, const char *s)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp(list[i], s))
			return (int)i;
	if (*n >= max)
		return -1;
	list[*n] = s;
	return (int)(*n)++;
}

/* Time (or fraction of the ceiling) by shape for every variant of `row`. */
static int row_plot(FILE *out, const json_t *receipt, const char *row)
{
	const json_t *cases = json_object_get(receipt, "cases");
	const char *variants[MAX_VARIANTS];
	char (*labels)[LABEL_MAX] = calloc(MAX_SHAPES, LABEL_MAX);
	double *val = calloc(MAX_SHAPES * MAX_VARIANTS, sizeof(double));
	size_t n_var = 0, n_shape = 0, i;
	bool fraction = true, any = false;
	double vmax = 0.0, group_w, bar_w;
	json_t *c;

	if (!labels || !val) {
		free(labels);
		free(val);
		return MB_ENOMEM;
	}
	for (size_t k = 0; k < MAX_SHAPES * MAX_VARIANTS; k++)
		val[k] = NAN;
	/* the ceiling is usable only when every case of the row has a fraction */
	json_array_foreach(cases, i, c)
		if (!strcmp(mb_text_get(c, "row"), row))
			fraction = fraction && json_is_number(json_object_get(json_object_get(c, "throughput"),
				"fraction_of_ceiling"));
	json_array_foreach(cases, i, c) {
		char label[LABEL_MAX], shape[LABEL_MAX / 2];
		int v, s = -1;
		double x;

		if (strcmp(mb_text_get(c, "row"), row))
			continue;
		v = find_or_add(variants, &n_var, MAX_VARIANTS, mb_text_get(c, "variant"));
		mb_print_shape(shape, sizeof(shape), c);
		snprintf(label, sizeof(label), "%s %s", mb_text_get(c, "dtype"), shape);
		for (size_t k = 0; k < n_shape && s < 0; k++)
			if (!strcmp(labels[k], label))
				s = (int)k;
		if (s < 0 && n_shape < MAX_SHAPES) {
			snprintf(labels[n_shape], LABEL_MAX, "%s", label);
			s = (int)n_shape++;
		}
		x = fraction ? json_number_value(json_object_get(json_object_get(c, "throughput"), "fraction_of_ceiling"))
			: mb_print_median_ns(c);
		if (v < 0 || s < 0 || isnan(x))
			continue;
		val[(size_t)s * MAX_VARIANTS + (size_t)v] = x;
		vmax = fmax(vmax, x);
		any = true;
	}
	fprintf(out, "<h3>%s</h3><div class=\"meta\">%s by shape%s</div>\n", row,
		fraction ? "fraction of the measured ceiling" : "median time per call",
		fraction ? " (dashed: the ceiling)" : "");
	legend(out, variants, n_var);
	if (!any) {
		fputs("<p class=\"meta\">no timed cases</p>\n", out);
		goto done;
	}
	if (fraction)
		vmax = fmax(vmax, 1.0);
	vmax *= HEADROOM;
	fprintf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		"role=\"img\" aria-label=\"%s by shape\">\n", PLOT_W, PLOT_H, PLOT_W, PLOT_H, row);
	y_axis(out, vmax, fraction);
	group_w = (double)(PLOT_W - MARGIN_L - MARGIN_R) / (double)n_shape;
	bar_w = group_w * 0.8 / (double)n_var;
	for (size_t s = 0; s < n_shape; s++) {
		double gx = MARGIN_L + group_w * (double)s + group_w * 0.1;

		for (size_t v = 0; v < n_var; v++) {
			double x = val[s * MAX_VARIANTS + v], top;

			if (isnan(x))
				continue;
			top = y_of(x, vmax);
			fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">"
				"<title>%s %s: %g</title></rect>\n", gx + bar_w * (double)v, top, bar_w,
				(PLOT_H - MARGIN_B) - top, palette[v], variants[v], labels[s], x);
		}
		/* slanted down to the right from the group's left edge: never clipped
		 * on the left, where the axis labels are */
		fprintf(out, "<text transform=\"translate(%.1f,%d) rotate(15)\" text-anchor=\"start\">%.*s</text>\n",
			gx, PLOT_H - MARGIN_B + 14, LABEL_CHARS, labels[s]);
	}
	if (fraction)
		fprintf(out, "<line class=\"ceil\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n", MARGIN_L,
			y_of(1.0, vmax), PLOT_W - MARGIN_R, y_of(1.0, vmax));
	fputs("</svg>\n", out);
done:
	free(labels);
	free(val);
	return 0;
}

/* ---- history --------------------------------------------------------------- */

/* Geometric mean over the variant's case ids of median(rev) / median(first);
 * NaN when no id is in both. */
static double relative_time(const json_t *first, const json_t *rev, const char *row, const char *variant)
{
	double sum = 0.0;
	size_t n = 0, i, j;
	json_t *a, *b;

	json_array_foreach(json_object_get(first, "cases"), i, a) {
		if (strcmp(mb_text_get(a, "row"), row) || strcmp(mb_text_get(a, "variant"), variant))
			continue;
		json_array_foreach(json_object_get(rev, "cases"), j, b) {
			double ma, mbv;

			if (strcmp(mb_text_get(a, "id"), mb_text_get(b, "id")))
				continue;
			ma = mb_print_median_ns(a);
			mbv = mb_print_median_ns(b);
			if (ma > 0.0 && mbv > 0.0) {
				sum += log(mbv / ma);
				n++;
			}
			break;
		}
	}
	return n ? exp(sum / (double)n) : NAN;
}

typedef struct history {
	json_t *const *revs;  /* oldest first, one suite */
	const char *const *names;
	size_t n;
	int *first_regression; /* per row of the newest verdict set: revision index, -1 none */
	char (*regression_case)[LABEL_MAX];
} history;

/* For each row, the first revision whose diff against its predecessor has a
 * SLOWER case of that row. */
static int find_regressions(history *h, const mb_verdict_set *rows, const mb_policy *policy, mb_error *err)
{
	for (size_t r = 0; r < rows->n_rows; r++)
		h->first_regression[r] = -1;
	for (size_t k = 1; k < h->n; k++) {
		mb_diff d;
		int rc = mb_diff_receipts(&d, h->revs[k - 1], h->revs[k], h->names[k - 1], h->names[k], policy, false, err);

		if (rc)
			return rc;
		for (size_t c = 0; d.comparable && c < d.n_cases; c++) {
			const mb_case_diff *cd = &d.cases[c];

			if (!cd->compared || cd->cmp.cls != MB_CMP_SLOWER)
				continue;
			for (size_t r = 0; r < rows->n_rows; r++)
				if (h->first_regression[r] < 0
					&& !strcmp(rows->rows[r].row, mb_text_get(cd->head, "row"))) {
					h->first_regression[r] = (int)k;
					snprintf(h->regression_case[r], LABEL_MAX, "%s", cd->id);
				}
		}
		mb_diff_free(&d);
	}
	return 0;
}

static void history_plot(FILE *out, const history *h, const char *row, int first_regression)
{
	const char *variants[MAX_VARIANTS];
	size_t n_var = 0, i;
	json_t *c;
	double vmin = 1.0, vmax = 1.0, step;

	json_array_foreach(json_object_get(h->revs[h->n - 1], "cases"), i, c)
		if (!strcmp(mb_text_get(c, "row"), row))
			find_or_add(variants, &n_var, MAX_VARIANTS, mb_text_get(c, "variant"));
	for (size_t v = 0; v < n_var; v++)
		for (size_t k = 0; k < h->n; k++) {
			double x = relative_time(h->revs[0], h->revs[k], row, variants[v]);

			if (!isnan(x)) {
				vmin = fmin(vmin, x);
				vmax = fmax(vmax, x);
			}
		}
	vmax *= HEADROOM;
	fprintf(out, "<h3>%s</h3><div class=\"meta\">median time relative to the oldest revision "
		"(geometric mean over shapes)%s</div>\n", row,
		first_regression >= 0 ? "; red ring: first revision with a regression" : "");
	legend(out, variants, n_var);
	fprintf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		"role=\"img\" aria-label=\"%s history\">\n", PLOT_W, PLOT_H, PLOT_W, PLOT_H, row);
	y_axis(out, vmax, true);
	step = h->n > 1 ? (double)(PLOT_W - MARGIN_L - MARGIN_R - 40) / (double)(h->n - 1) : 0.0;
	for (size_t k = 0; k < h->n; k++)
		fprintf(out, "<text transform=\"translate(%.1f,%d)\" text-anchor=\"middle\">%.*s</text>\n",
			MARGIN_L + 20 + step * (double)k, PLOT_H - MARGIN_B + 14, LABEL_CHARS,
			mb_print_revision(h->revs[k], h->names[k]));
	for (size_t v = 0; v < n_var; v++) {
		fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", palette[v]);
		for (size_t k = 0; k < h->n; k++) {
			double x = relative_time(h->revs[0], h->revs[k], row, variants[v]);

			if (!isnan(x))
				fprintf(out, "%.1f,%.1f ", MARGIN_L + 20 + step * (double)k, y_of(x, vmax));
		}
		fputs("\"/>\n", out);
		for (size_t k = 0; k < h->n; k++) {
			double x = relative_time(h->revs[0], h->revs[k], row, variants[v]);

			if (!isnan(x))
				fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%d\" fill=\"%s\"><title>%s %s: %.3f</title></circle>\n",
					MARGIN_L + 20 + step * (double)k, y_of(x, vmax), POINT_R, palette[v], variants[v],
					mb_print_revision(h->revs[k], h->names[k]), x);
		}
	}
	if (first_regression >= 0)
		fprintf(out, "<circle cx=\"%.1f\" cy=\"%d\" r=\"%d\" fill=\"none\" stroke=\"#cf222e\" stroke-width=\"2\"/>"
			"<text x=\"%.1f\" y=\"%d\" fill=\"#cf222e\" text-anchor=\"end\">first regression</text>\n",
			MARGIN_L + 20 + step * first_regression, MARGIN_T + 10, MARK_R,
			MARGIN_L + 8 + step * first_regression, MARGIN_T + 14);
	(void)vmin;
	fputs("</svg>\n", out);
}

/* Receipts of the newest receipt's suite, oldest first. */
static int collect_history(history *h, json_t *const *receipts, const char *const *names, size_t n,
	const size_t *order)
{
	const char *suite = mb_text_get(json_object_get(receipts[order[n - 1]], "suite"), "name");
	json_t **revs = calloc(n, sizeof(*revs));
	const char **rnames = calloc(n, sizeof(*rnames));

	if (!revs || !rnames) {
		free(revs);
		free(rnames);
		return MB_ENOMEM;
	}
	h->n = 0;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(mb_text_get(json_object_get(receipts[order[i]], "suite"), "name"), suite)) {
			revs[h->n] = receipts[order[i]];
			rnames[h->n++] = names[order[i]];
		}
	h->revs = revs;
	h->names = rnames;
	return 0;
}

static void history_free(history *h)
{
	free((void *)h->revs);
	free((void *)h->names);
	free(h->first_regression);
	free(h->regression_case);
}

typedef struct report {
	size_t *order;
	const json_t *newest;
	const char *newest_name;
	mb_verdict_set set;
	history hist;
} report;

static int report_prepare(report *r, json_t *const *receipts, const char *const *names, size_t n,
	const mb_policy *policy, mb_error *err)
{
	int rc;

	memset(r, 0, sizeof(*r));
	r->order = calloc(n, sizeof(*r->order));
	if (!r->order)
		return mb_error_set(err, MB_ENOMEM, "report", "no memory");
	order_by_time(r->order, receipts, n);
	r->newest = receipts[r->order[n - 1]];
	r->newest_name = names[r->order[n - 1]];
	if ((rc = mb_verdict_compute(&r->set, r->newest, policy, err)))
		return rc;
	if (collect_history(&r->hist, receipts, names, n, r->order))
		return mb_error_set(err, MB_ENOMEM, "report", "no memory");
	r->hist.first_regression = calloc(r->set.n_rows + 1, sizeof(int));
	r->hist.regression_case = calloc(r->set.n_rows + 1, LABEL_MAX);
	if (!r->hist.first_regression || !r->hist.regression_case)
		return mb_error_set(err, MB_ENOMEM, "report", "no memory");
	return r->hist.n > 1 ? find_regressions(&r->hist, &r->set, policy, err) : 0;
}

static void report_free(report *r)
{
	free(r->order);
	mb_verdict_set_free(&r->set);
	history_free(&r->hist);
}

int mb_print_report_html(FILE *out, json_t *const *receipts, const char *const *names, size_t n,
	const mb_policy *policy, mb_error *err)
{
	const json_t *dev;
	report r;
	int rc;

	if ((rc = report_prepare(&r, receipts, names, n, policy, err)))
		goto cleanup;
	dev = json_object_get(r.newest, "device");
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>megabench report</title>\n", out);
	css(out);
	fputs("</head><body>\n<h1>megabench report: ", out);
	mb_print_xml_escaped(out, mb_text_get(json_object_get(r.newest, "suite"), "name"));
	fputs("</h1>\n<p class=\"meta\">newest revision ", out);
	mb_print_xml_escaped(out, mb_print_revision(r.newest, r.newest_name));
	fputs(" on ", out);
	mb_print_xml_escaped(out, mb_text_get(dev, "name"));
	fprintf(out, " (%s backend), %zu receipt%s; policy: ", mb_text_get(r.newest, "backend"), n, n == 1 ? "" : "s");
	mb_print_xml_escaped(out, policy->source);
	fputs("</p>\n", out);
	if (r.set.lanes_present) {
		fputs("<p class=\"note\">", out);
		mb_print_xml_escaped(out, r.set.lanes_note);
		fputs("</p>\n", out);
	}
	fputs("<h2>Catalog verdicts</h2>\n", out);
	verdict_table(out, &r.set);
	fputs("<h2>Time by shape</h2>\n", out);
	for (size_t i = 0; i < r.set.n_rows; i++)
		if (row_plot(out, r.newest, r.set.rows[i].row)) {
			rc = mb_error_set(err, MB_ENOMEM, "report", "no memory");
			goto cleanup;
		}
	if (r.hist.n > 1) {
		fprintf(out, "<h2>History across %zu revisions</h2>\n<table id=\"history\"><tr><th>row</th>"
			"<th>first regression</th><th>case</th></tr>\n", r.hist.n);
		for (size_t i = 0; i < r.set.n_rows; i++) {
			int k = r.hist.first_regression[i];

			fputs("<tr><td>", out);
			mb_print_xml_escaped(out, r.set.rows[i].row);
			fputs("</td><td>", out);
			mb_print_xml_escaped(out, k >= 0 ? mb_print_revision(r.hist.revs[k], r.hist.names[k]) : "none");
			fputs("</td><td>", out);
			mb_print_xml_escaped(out, k >= 0 ? r.hist.regression_case[i] : "");
			fputs("</td></tr>\n", out);
		}
		fputs("</table>\n", out);
		for (size_t i = 0; i < r.set.n_rows; i++)
			history_plot(out, &r.hist, r.set.rows[i].row, r.hist.first_regression[i]);
	}
	fputs("</body></html>\n", out);
cleanup:
	report_free(&r);
	return rc;
}

int mb_print_report_markdown(FILE *out, json_t *const *receipts, const char *const *names, size_t n,
	const mb_policy *policy, mb_error *err)
{
	report r;
	int rc;

	if ((rc = report_prepare(&r, receipts, names, n, policy, err)))
		goto cleanup;
	if ((rc = mb_printer_markdown.verdicts(out, &r.set, r.newest, r.newest_name, policy, err)))
		goto cleanup;
	if (r.hist.n > 1) {
		fprintf(out, "\n### History across %zu revisions\n\n| row | first regression | case |\n|---|---|---|\n",
			r.hist.n);
		for (size_t i = 0; i < r.set.n_rows; i++) {
			int k = r.hist.first_regression[i];

			fprintf(out, "| %s | %s | %s |\n", r.set.rows[i].row,
				k >= 0 ? mb_print_revision(r.hist.revs[k], r.hist.names[k]) : "none",
				k >= 0 ? r.hist.regression_case[i] : "");
		}
	}
cleanup:
	report_free(&r);
	return rc;
}
