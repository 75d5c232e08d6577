/* The nightly history as Markdown (summary.md, standard output) and as a
 * self-contained HTML page (index.html: inline CSS and SVG, no scripts).
 * Both show what history.c decided, in the same words, decision and status
 * first; neither decides anything. Per row the page draws the median of the
 * fused kernel and of its best alternative per nightly (the verdict's pair
 * at the row's largest shape), with the nightlies that decided a demote or
 * a confirmation marked. Every string from a receipt is escaped. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "receipts/history.h"
#include "receipts/printer.h"
#include "receipts/promotion.h"
#include "receipts/text.h"

#define LABEL_MAX 512
#define LIST_MAX 2048

/* ---- the chart (SVG user units; it scales to its cell) ---- */
#define CHART_W 360
#define CHART_H 124
#define PAD_L 60               /* the time ticks */
#define PAD_R 8
#define PAD_T 16               /* the streak's word */
#define PAD_B 22               /* the nightlies' numbers */
#define LABEL_DROP 8           /* their baseline above the bottom */
#define MARK_R 3.2
#define TICK_GAP 4
#define MAX_TICKS 5            /* more 1-2-5 ticks than this: decades only */
#define ROUND_SLACK 1e-9
#define FUSED_COLOR "#1f6feb"
#define ALT_COLOR "#d9822b"

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

/* The newest nightly that ran the row, or n when none did. */
static size_t newest_of(const mb_history_row *r, size_t n)
{
	for (size_t k = n; k-- > 0;)
		if (r->cells[k])
			return k;
	return n;
}

/* The newest verdict and its lane delta: "drop; no lane", or "-". */
static void newest_text(char *buf, size_t len, const mb_history_group *hg, const mb_history_row *r)
{
	size_t k = newest_of(r, hg->g->n);

	if (k == hg->g->n) {
		snprintf(buf, len, "-");
		return;
	}
	snprintf(buf, len, "%s; %s", r->cells[k]->label, r->cells[k]->lane);
	if (k != hg->g->n - 1)
		mb_text_appendf(buf, len, " (#%zu)", k + 1);
}

/* "#1 keep, #2 drop, #3 drop": the verdict of each nightly that ran it. */
static void nightlies_text(char *buf, size_t len, const mb_history_group *hg, const mb_history_row *r)
{
	buf[0] = '\0';
	for (size_t k = 0; k < hg->g->n; k++)
		if (r->cells[k])
			mb_text_appendf(buf, len, "%s#%zu %s", buf[0] ? ", " : "", k + 1,
				mb_verdict_kind_name(r->cells[k]->kind));
	if (!buf[0])
		snprintf(buf, len, "none");
}

static void intro_text(char *buf, size_t len, const mb_history *h)
{
	size_t n = 0;

	for (size_t g = 0; g < h->n_groups; g++)
		n += h->groups[g].g->n;
	snprintf(buf, len, "%zu receipt%s in %zu group%s (device, backend and suite), oldest commit first. A row is "
		"flagged demote when it is drop (its fallback wins, or its win is under the minimum effect) in the last "
		"%d consecutive nightlies of its group that ran it (dropped when its status is drop already), confirmed "
		"when it is keep in the last %d or more, else watch; policy: ", n, n == 1 ? "" : "s", h->n_groups,
		h->n_groups == 1 ? "" : "s", MB_HISTORY_STREAK, MB_HISTORY_STREAK);
}

/* ---- Markdown ---- */

static void md_cells(FILE *out, const char *const *cells, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		fputs(i ? " | " : "| ", out);
		mb_print_md_cell(out, cells[i]);
	}
	fputs(" |\n", out);
}

static void md_group(FILE *out, const mb_history_group *hg)
{
	const mb_receipt_group *g = hg->g;
	char text[LABEL_MAX], status[LABEL_MAX], decision[LABEL_MAX], newest[LABEL_MAX], list[LIST_MAX];

	group_title(text, sizeof(text), g);
	fputs("\n## ", out);
	mb_print_md_cell(out, text);
	fputs("\n\n| row | decision | status (newest) | verdict (newest) | nightlies that ran it |\n"
		"|---|---|---|---|---|\n", out);
	for (size_t i = 0; i < hg->n_rows; i++) {
		const mb_history_row *r = &hg->rows[i];
		const char *cells[] = {r->row, decision, status_of(hg, r, status, sizeof(status)), newest, list};

		mb_history_decision_text(decision, sizeof(decision), hg, r);
		newest_text(newest, sizeof(newest), hg, r);
		nightlies_text(list, sizeof(list), hg, r);
		md_cells(out, cells, sizeof(cells) / sizeof(cells[0]));
	}
	fputs("\n| # | commit date and revision | receipt | lanes |\n|---:|---|---|---:|\n", out);
	for (size_t k = 0; k < g->n; k++) {
		mb_history_revision_label(text, sizeof(text), g->revs[k], g->names[k]);
		fprintf(out, "| %zu | ", k + 1);
		mb_print_md_cell(out, text);
		fputs(" | ", out);
		mb_print_md_cell(out, g->names[k]);
		fprintf(out, " | %zu |\n", lanes_of(g->revs[k]));
	}
}

int mb_print_history_markdown(FILE *out, const mb_history *h, mb_error *err)
{
	char intro[LABEL_MAX];

	intro_text(intro, sizeof(intro), h);
	fputs("# megabench history\n\n", out);
	mb_print_md_cell(out, intro);
	mb_print_md_cell(out, h->policy->source);
	fputs(".\n", out);
	for (size_t g = 0; g < h->n_groups; g++)
		md_group(out, &h->groups[g]);
	return ferror(out) ? mb_error_set(err, MB_EIO, "history", "write failed") : 0;
}

/* ---- HTML ---- */

static const char *decision_class(mb_history_decision d)
{
	switch (d) {
	case MB_HISTORY_DEMOTE: return "demote";
	case MB_HISTORY_CONFIRMED: return "confirmed";
	case MB_HISTORY_DROPPED: return "dropped";
	default: return "watch";
	}
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

/* The medians the chart draws for nightly k: the fused case and its best
 * alternative at the row's largest shape; NaN where there is none. */
static void medians(double *fused, double *alt, const mb_history_row *r, size_t k)
{
	const mb_history_cell *c = r->cells[k];

	*fused = c && c->alt ? c->fused_median_ns : NAN;
	*alt = c && c->alt ? c->alt_median_ns : NAN;
}

/* The round value (1, 2 or 5 times a power of ten; 1 only with `decades`)
 * at or below `v` (`up` false) or at or above it. */
static double round_tick(double v, bool up, bool decades)
{
	static const double steps[] = {1, 2, 5};
	size_t n = decades ? 1 : sizeof(steps) / sizeof(steps[0]);
	double e = pow(10, floor(log10(v)));

	if (up) {
		for (size_t i = 0; i < n; i++)
			if (steps[i] * e >= v * (1 - ROUND_SLACK))
				return steps[i] * e;
		return 10 * e;
	}
	for (size_t i = n; i-- > 0;)
		if (steps[i] * e <= v * (1 + ROUND_SLACK))
			return steps[i] * e;
	return e;
}

/* A round tick's label: "200 us", "5 ms". */
static void tick_text(char *buf, size_t len, double ns)
{
	static const struct { double ns; const char *unit; } units[] = {{1e9, "s"}, {1e6, "ms"}, {1e3, "us"}};

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (ns >= units[i].ns) {
			snprintf(buf, len, "%g %s", ns / units[i].ns, units[i].unit);
			return;
		}
	snprintf(buf, len, "%g ns", ns);
}

/* Round ticks from lo to hi, both ticks themselves; the count. */
static size_t ticks_between(double *ticks, size_t max, double lo, double hi, bool decades)
{
	size_t n = 0;

	for (double t = lo; t <= hi * (1 + ROUND_SLACK) && n < max; t = round_tick(t * (1 + 1e-6), true, decades))
		ticks[n++] = t;
	return n;
}

typedef struct chart_scale {
	double lo, hi;   /* log axis from tick to tick */
	double ticks[2 * MAX_TICKS + 2];
	size_t n_ticks;
	size_t n;        /* nightlies */
} chart_scale;

static double chart_x(const chart_scale *s, size_t k)
{
	return PAD_L + ((double)k + 0.5) * (CHART_W - PAD_L - PAD_R) / (double)s->n;
}

static double chart_y(const chart_scale *s, double v)
{
	return PAD_T + (CHART_H - PAD_T - PAD_B) * (1 - log(v / s->lo) / log(s->hi / s->lo));
}

/* The axis from the smallest to the largest median, each end on a round
 * tick, so that no point lies beyond the outermost ticks; false when the
 * row has no median to draw. */
static bool chart_scale_of(chart_scale *s, const mb_history_row *r, size_t n)
{
	double lo = INFINITY, hi = 0;

	for (size_t k = 0; k < n; k++) {
		double v[2];

		medians(&v[0], &v[1], r, k);
		for (int i = 0; i < 2; i++)
			if (isfinite(v[i]) && v[i] > 0) {
				lo = fmin(lo, v[i]);
				hi = fmax(hi, v[i]);
			}
	}
	if (!(hi > 0))
		return false;
	s->n = n;
	for (int decades = 0; decades < 2; decades++) {
		s->lo = round_tick(lo, false, decades);
		s->hi = round_tick(hi, true, decades);
		if (s->hi <= s->lo)
			s->hi = round_tick(s->lo * (1 + 1e-6), true, decades);
		s->n_ticks = ticks_between(s->ticks, sizeof(s->ticks) / sizeof(s->ticks[0]), s->lo, s->hi, decades);
		if (s->n_ticks <= MAX_TICKS)
			break;
	}
	return true;
}

/* The nightlies of the trailing streak that decided the row (those that
 * ran it): [first, last]. */
static void streak_span(size_t *first, size_t *last, const mb_history_row *r, size_t n)
{
	size_t seen = 0;

	*first = *last = newest_of(r, n);
	for (size_t k = n; k-- > 0 && seen < r->streak;)
		if (r->cells[k]) {
			*first = k;
			seen++;
		}
}

static void series(FILE *out, const chart_scale *s, const mb_history_row *r, bool alt)
{
	fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s points=\"", alt ? ALT_COLOR : FUSED_COLOR,
		alt ? " stroke-dasharray=\"5 3\"" : "");
	for (size_t k = 0; k < s->n; k++) {
		double v[2];

		medians(&v[0], &v[1], r, k);
		if (isfinite(v[alt]) && v[alt] > 0)
			fprintf(out, "%.1f,%.1f ", chart_x(s, k), chart_y(s, v[alt]));
	}
	fputs("\"/>\n", out);
}

/* " at family/A=1,B=2 (bf16, cold)": where the chart's pair is, escaped. */
static void pair_where(FILE *out, const mb_history_cell *c)
{
	fputs(" at ", out);
	mb_print_xml_escaped(out, c->shape);
	fputs(" (", out);
	mb_print_xml_escaped(out, c->dtype);
	fputs(", ", out);
	mb_print_xml_escaped(out, c->mode);
	fputs(")", out);
}

static void points(FILE *out, const chart_scale *s, const mb_history_group *hg, const mb_history_row *r)
{
	for (size_t k = 0; k < s->n; k++) {
		const mb_history_cell *p = r->cells[k] && r->cells[k]->alt ? r->cells[k] : NULL;
		char f[32], a[32], label[LABEL_MAX];
		double v[2];

		medians(&v[0], &v[1], r, k);
		if (!p || !(isfinite(v[0]) && v[0] > 0 && isfinite(v[1]) && v[1] > 0))
			continue;
		mb_text_duration(f, sizeof(f), v[0]);
		mb_text_duration(a, sizeof(a), v[1]);
		mb_history_revision_label(label, sizeof(label), hg->g->revs[k], hg->g->names[k]);
		fprintf(out, "<g><circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"%s\"/><rect x=\"%.1f\" y=\"%.1f\" "
			"width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/><title>#%zu ", chart_x(s, k), chart_y(s, v[0]), MARK_R,
			FUSED_COLOR, chart_x(s, k) - MARK_R, chart_y(s, v[1]) - MARK_R, 2 * MARK_R, 2 * MARK_R, ALT_COLOR, k + 1);
		mb_print_xml_escaped(out, label);
		fprintf(out, ": fused %s, ", f);
		mb_print_xml_escaped(out, p->alt);
		fprintf(out, " %s", a);
		pair_where(out, p);
		fputs("; ", out);
		mb_print_xml_escaped(out, mb_verdict_kind_name(r->cells[k]->kind));
		fputs("</title></g>\n", out);
	}
}

/* Per row: the median of the fused kernel (circles) and of its best
 * alternative (squares, dashed) per nightly on a log axis, and the streak
 * that decided a demote or a confirmation behind them. */
static void row_chart(FILE *out, const mb_history_group *hg, const mb_history_row *r)
{
	const mb_history_cell *p = NULL;
	chart_scale s;
	size_t k = newest_of(r, hg->g->n);
	char tick[32];

	if (!chart_scale_of(&s, r, hg->g->n)) {
		fputs("<small>no fused case with an alternative: nothing to chart</small>", out);
		return;
	}
	fprintf(out, "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\" role=\"img\" "
		"aria-label=\"median per nightly\">\n", CHART_W, CHART_H);
	if (r->decision != MB_HISTORY_WATCH) {
		size_t first, last;
		double w = (double)(CHART_W - PAD_L - PAD_R) / (double)s.n;

		streak_span(&first, &last, r, hg->g->n);
		fprintf(out, "<rect class=\"streak %s\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\"/>"
			"<text class=\"streakt %s\" x=\"%.1f\" y=\"%d\" text-anchor=\"end\">%s</text>\n",
			decision_class(r->decision), chart_x(&s, first) - w / 2, PAD_T, chart_x(&s, last) - chart_x(&s, first) + w,
			CHART_H - PAD_T - PAD_B, decision_class(r->decision), (double)(CHART_W - PAD_R), PAD_T - 4,
			mb_history_decision_name(r->decision));
	}
	for (size_t i = 0; i < s.n_ticks; i++) {
		tick_text(tick, sizeof(tick), s.ticks[i]);
		fprintf(out, "<line class=\"grid\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/><text class=\"tick\" x=\"%d\" "
			"y=\"%.1f\" text-anchor=\"end\">%s</text>\n", PAD_L, chart_y(&s, s.ticks[i]), CHART_W - PAD_R,
			chart_y(&s, s.ticks[i]), PAD_L - TICK_GAP, chart_y(&s, s.ticks[i]) + TICK_GAP, tick);
	}
	for (size_t j = 0; j < s.n; j++)
		if (r->cells[j] && (j == 0 || j == s.n - 1 || j == k || s.n <= 12))
			fprintf(out, "<text class=\"tick\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">#%zu</text>\n",
				chart_x(&s, j), CHART_H - LABEL_DROP, j + 1);
	series(out, &s, r, true);
	series(out, &s, r, false);
	points(out, &s, hg, r);
	fputs("</svg>\n", out);
	if (k < hg->g->n && r->cells[k]->alt)
		p = r->cells[k];
	fprintf(out, "<div class=\"key\"><span style=\"color:%s\">&#9679; fused</span> <span style=\"color:%s\">&#9632; ",
		FUSED_COLOR, ALT_COLOR);
	mb_print_xml_escaped(out, p ? p->alt : "best alternative");
	fputs("</span>", out);
	if (p)
		pair_where(out, p);
	fputs("</div>", out);
}

/* Every nightly's verdict and lane delta, folded. */
static void nightly_list(FILE *out, const mb_history_group *hg, const mb_history_row *r)
{
	char list[LIST_MAX], text[LABEL_MAX];

	nightlies_text(list, sizeof(list), hg, r);
	fputs("<details><summary>", out);
	mb_print_xml_escaped(out, list);
	fputs("</summary><ul>", out);
	for (size_t k = 0; k < hg->g->n; k++) {
		if (!r->cells[k])
			continue;
		mb_history_revision_label(text, sizeof(text), hg->g->revs[k], hg->g->names[k]);
		fprintf(out, "<li class=\"%s\">#%zu ", mark_class(r->cells[k]), k + 1);
		mb_print_xml_escaped(out, text);
		fputs(": ", out);
		mb_print_xml_escaped(out, r->cells[k]->label);
		fputs("; ", out);
		mb_print_xml_escaped(out, r->cells[k]->lane);
		fputs("</li>", out);
	}
	fputs("</ul></details>", out);
}

static void html_cell(FILE *out, const char *label, const char *cls, const char *text)
{
	fprintf(out, "<td data-label=\"%s\"%s%s%s>", label, cls ? " class=\"" : "", cls ? cls : "", cls ? "\"" : "");
	mb_print_xml_escaped(out, text);
	fputs("</td>", out);
}

static void html_group(FILE *out, const mb_history_group *hg, size_t index)
{
	const mb_receipt_group *g = hg->g;
	char text[LABEL_MAX], status[LABEL_MAX];

	group_title(text, sizeof(text), g);
	fprintf(out, "<section id=\"g%zu\"><h2>", index + 1);
	mb_print_xml_escaped(out, text);
	fputs("</h2>\n<table class=\"hist\"><colgroup><col class=\"c-row\"><col class=\"c-decision\"><col class=\"c-status\">"
		"<col class=\"c-verdict\"><col class=\"c-chart\"><col class=\"c-nightlies\"></colgroup>\n<tr><th>row</th>"
		"<th>decision</th><th>status (newest)</th><th>verdict (newest)</th><th>median per nightly</th>"
		"<th>nightlies that ran it</th></tr>\n", out);
	for (size_t i = 0; i < hg->n_rows; i++) {
		const mb_history_row *r = &hg->rows[i];
		size_t k = newest_of(r, g->n);

		fputs("<tr>", out);
		html_cell(out, "row", "rowname", r->row);
		mb_history_decision_text(text, sizeof(text), hg, r);
		html_cell(out, "decision", decision_class(r->decision), text);
		html_cell(out, "status", NULL, status_of(hg, r, status, sizeof(status)));
		newest_text(text, sizeof(text), hg, r);
		html_cell(out, "verdict", mark_class(k < g->n ? r->cells[k] : NULL), text);
		fputs("<td data-label=\"median per nightly\">", out);
		row_chart(out, hg, r);
		fputs("</td><td data-label=\"nightlies\">", out);
		nightly_list(out, hg, r);
		fputs("</td></tr>\n", out);
	}
	fprintf(out, "</table>\n<details><summary>the %zu nightl%s of this group</summary>\n<table class=\"nightlies\">"
		"<tr><th>#</th><th>commit date and revision</th><th>receipt</th><th>lanes</th></tr>\n", g->n,
		g->n == 1 ? "y" : "ies");
	for (size_t k = 0; k < g->n; k++) {
		mb_history_revision_label(text, sizeof(text), g->revs[k], g->names[k]);
		fprintf(out, "<tr><td>%zu</td><td>", k + 1);
		mb_print_xml_escaped(out, text);
		fputs("</td><td>", out);
		mb_print_xml_escaped(out, g->names[k]);
		fprintf(out, "</td><td>%zu</td></tr>\n", lanes_of(g->revs[k]));
	}
	fputs("</table></details></section>\n", out);
}

static const char html_head[] =
	"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
	"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
	"<title>megabench history</title>\n<style>\n"
	"body{font:14px/1.4 system-ui,sans-serif;margin:16px 24px;color:#1f2328}\n"
	"h1{font-size:22px;margin:4px 0}h2{font-size:18px;margin-top:24px;border-bottom:1px solid #d0d7de}\n"
	"table{border-collapse:collapse;margin:0.8em 0;width:100%}\n"
	"th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top;overflow-wrap:anywhere}\n"
	"th{background:#f6f8fa}small,.key{color:#57606a;font-size:12px}\n"
	"table.hist{table-layout:fixed}col.c-row{width:11%}col.c-decision{width:21%}col.c-status{width:14%}"
	"col.c-verdict{width:15%}col.c-chart{width:27%}col.c-nightlies{width:12%}\n"
	"td.rowname{font-weight:600}\n"
	".keep{background:#dafbe1}.conditional{background:#fff8c5}.drop{background:#ffebe9}\n"
	".other,.absent{background:#f6f8fa}\n"
	"td.demote{background:#ffebe9;font-weight:600}td.confirmed{background:#dafbe1}td.dropped{color:#57606a}\n"
	"svg.chart{width:100%;max-width:520px;height:auto;display:block}svg.chart text{font-size:10px;fill:#1f2328}"
	"svg.chart text.tick{fill:#57606a}svg .grid{stroke:#eaeef2;stroke-width:1}\n"
	"svg .streak.demote{fill:#ffebe9}svg .streak.confirmed{fill:#dafbe1}svg .streak.dropped{fill:#eaeef2}\n"
	"svg.chart text.streakt{font-weight:600}svg.chart text.demote{fill:#cf222e}"
	"svg.chart text.confirmed{fill:#1a7f37}svg.chart text.dropped{fill:#57606a}\n"
	"details ul{margin:4px 0;padding-left:16px}details li{margin:1px 0;padding:0 4px}"
	"summary{cursor:pointer;color:#0969da}\n"
	"@media (max-width:900px){table.hist tr:first-child,table.hist colgroup{display:none}"
	"table.hist,table.hist tr,table.hist td{display:block;width:auto}"
	"table.hist tr{border:1px solid #d0d7de;margin-bottom:8px}table.hist td{border:0;padding:2px 8px}"
	"table.hist td::before{content:attr(data-label) \": \";color:#57606a}"
	"table.hist td.rowname::before{content:\"\"}}\n"
	"</style></head><body>\n<h1>megabench history</h1>\n";

int mb_print_history_html(FILE *out, const mb_history *h, mb_error *err)
{
	char intro[LABEL_MAX];

	intro_text(intro, sizeof(intro), h);
	fputs(html_head, out);
	fputs("<p>", out);
	mb_print_xml_escaped(out, intro);
	mb_print_xml_escaped(out, h->policy->source);
	fputs(". Per row, the median time per call of its fused kernel (circles) and of its best alternative "
		"(squares, dashed) in each nightly, at the row's largest shape; a band marks the nightlies that "
		"decided a demote or a confirmation.</p>\n", out);
	for (size_t g = 0; g < h->n_groups; g++)
		html_group(out, &h->groups[g], g);
	fputs("</body></html>\n", out);
	return ferror(out) ? mb_error_set(err, MB_EIO, "history", "write failed") : 0;
}
