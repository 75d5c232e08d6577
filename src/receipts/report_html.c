/* The maintainer's report: index.html (inline CSS, hand-drawn SVG, no
 * scripts, no network) and summary.md.
 *
 * Receipts are grouped by device, backend and suite: receipts of different
 * groups are never compared with one another, and every group gets a
 * section of its own, so that none is dropped. Within a group, receipts are
 * ordered by commit time (then start time); the newest gives the verdict
 * table and the per-row charts, and when the group holds several, a
 * history across revisions marks where each row regressed.
 *
 * Per row: the median time per call by shape on a log axis with the
 * p10-p90 of the per-call samples as its interval (the spread a caller of
 * the kernel sees, from the receipt's own statistics, with no model behind
 * it), one series per variant in a colour and a marker shape of its kind;
 * the verdict's speedup beside each shape; and, folded away, box plots of
 * the raw samples relative to each case's median, where the noise shows.
 *
 * Every string that comes from a receipt is escaped (mb_print_xml_escaped):
 * a receipt is data, and markup in it must print as text.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "receipts/printer.h"
#include "receipts/report.h"
#include "receipts/text.h"

/* ---- geometry (SVG user units; the SVG scales to its card) ---- */
#define CHART_W 640
#define CHAR_PX 6.4            /* width of one character of the 11 px labels */
#define LABEL_PAD 10
#define LABEL_MIN_W 60
#define NOTE_W 62              /* right column: the verdict's speedup */
#define MARGIN_T 6
#define AXIS_H 36
#define BAND_H 18              /* the "bf16 · cold" heading of a band */
#define SERIES_STEP 10
#define CAT_PAD 10
#define CAT_MIN_H 30
#define MARK_R 3.6
#define CAP_H 3.5
#define LIN_PAD 0.06
#define NARROW_SPAN 1.05       /* a time axis spans at least this ratio each way */
#define MIN_TICKS 3
#define MAX_TICKS 9
#define HIST_H 260
#define HIST_L 64
#define HIST_R 20
#define HIST_T 26
#define HIST_B 54
#define HIST_JITTER 4.0        /* series drawn side by side, never on top */
#define HIST_LABEL_CHARS 14    /* a revision label: "525539a-dirty", "2026-11-23", "run 21:59:11" */
#define BOX_H 7.0
#define MAX_DOTS 24            /* outliers drawn per case; the rest are counted */
#define MIN_REL_SPAN 0.01      /* box plots show at least +-1% */
#define MAX_REL_SPAN 1.0       /* and at most +100% (further outliers are counted at the edge) */

#define MAX_SERIES 8
#define TEXT_MAX 256
#define DATE_BYTES 32
#define PERCENT 100.0
#define NS_PER_US 1e3
#define NS_PER_MS 1e6
#define NS_PER_S 1e9

enum style { STYLE_FUSED, STYLE_FALLBACK, STYLE_VENDOR, STYLE_REFERENCE, STYLE_OTHER, STYLE_COUNT };

static const struct {
	const char *kind;
	const char *color;
	const char *dash;  /* history line */
} styles[STYLE_COUNT] = {
	{"fused", "#1f6feb", ""},
	{"fallback", "#d9822b", "6 4"},
	{"vendor", "#2da44e", "2 3"},
	{"reference", "#6e7781", ""},
	{"other", "#8250df", "8 3 2 3"},
};

/* Extra colours for a second variant of one kind. */
static const char *const spare_colors[] = {"#0a7b83", "#bf8700", "#cf222e", "#57606a"};

static void esc(FILE *out, const char *s)
{
	mb_print_xml_escaped(out, s);
}

/* Escaped, with a line-break opportunity after each '/' and ',': case ids
 * and shapes are long words that would otherwise set a table's width on a
 * narrow screen. */
static void esc_wrap(FILE *out, const char *s)
{
	char one[2] = "";

	for (; s && *s; s++) {
		one[0] = *s;
		esc(out, one);
		if (*s == '/' || *s == ',')
			fputs("<wbr>", out);
	}
}

/* ---- small text helpers ---- */

/* "40.2 us", "2.8 ms": three digits, for axis ticks. */
static void short_time(char *buf, size_t len, double ns)
{
	if (ns >= NS_PER_S)
		snprintf(buf, len, "%.3g s", ns / NS_PER_S);
	else if (ns >= NS_PER_MS)
		snprintf(buf, len, "%.3g ms", ns / NS_PER_MS);
	else if (ns >= NS_PER_US)
		snprintf(buf, len, "%.3g us", ns / NS_PER_US);
	else
		snprintf(buf, len, "%.3g ns", ns);
}

/* "+2%", "-0.5%", "0%" from a relative change. */
static void percent_text(char *buf, size_t len, double frac)
{
	if (fabs(frac) < 1e-12)
		snprintf(buf, len, "0%%");
	else
		snprintf(buf, len, "%+.3g%%", PERCENT * frac);
}

/* "2026-11-23 21:55" (UTC) from seconds since the epoch; "-" for 0. */
static void date_text(char *buf, size_t len, json_int_t secs, bool with_time)
{
	time_t t = (time_t)secs;
	struct tm tm;

	if (secs <= 0 || !gmtime_r(&t, &tm)) {
		snprintf(buf, len, "-");
		return;
	}
	strftime(buf, len, with_time ? "%Y-%m-%d %H:%M" : "%Y-%m-%d", &tm);
}

/* "2026-11-23 21:55" from an ISO timestamp "2026-11-23T21:55:25.567Z". */
static void stamp_text(char *buf, size_t len, const char *iso)
{
	enum { DATE_CHARS = 10, MINUTE_CHARS = 16 };

	if (strlen(iso) < MINUTE_CHARS) {
		snprintf(buf, len, "%s", iso);
		return;
	}
	snprintf(buf, len, "%.*s %.5s", DATE_CHARS, iso, iso + DATE_CHARS + 1);
}

static const json_t *prov(const json_t *r)
{
	return json_object_get(r, "provenance");
}

static json_int_t commit_time(const json_t *r)
{
	return json_integer_value(json_object_get(prov(r), "commit_time"));
}

static const char *suite_name(const json_t *r)
{
	return mb_text_get(json_object_get(r, "suite"), "name");
}

static const char *device_name(const json_t *r)
{
	return mb_text_get(json_object_get(r, "device"), "name");
}

/* "T=8192,Hq=32" from a case's shape object. */
static void shape_text(char *buf, size_t len, const json_t *kase)
{
	const char *key;
	json_t *v;

	buf[0] = '\0';
	json_object_foreach(json_object_get(kase, "shape"), key, v)
		mb_text_appendf(buf, len, "%s%s=%" JSON_INTEGER_FORMAT, buf[0] ? "," : "", key, json_integer_value(v));
}

static bool case_ok(const json_t *kase)
{
	return !strcmp(mb_text_get(kase, "status"), "ok") && mb_text_timing(kase, "median_ns") > 0;
}

static enum style kind_style(const char *kind)
{
	for (int i = 0; i < STYLE_OTHER; i++)
		if (!strcmp(styles[i].kind, kind))
			return (enum style)i;
	return STYLE_OTHER;
}

/* ---- one row of one receipt, arranged for the charts ---- */

typedef struct series {
	const char *variant;
	const char *color;
	enum style style;
} series;

typedef struct category {
	const char *dtype, *mode, *family;
	char shape[MB_REPORT_LABEL_MAX];
	int band;
} category;

typedef struct row_view {
	series s[MAX_SERIES];
	size_t n_series;
	category *cats;
	size_t n_cats;
	const json_t **cells;  /* n_cats x MAX_SERIES, NULL where absent */
	/* bands: dtype and mode, in the order they first appear */
	char band_names[MAX_SERIES * MAX_SERIES][TEXT_MAX];
	size_t n_bands;
} row_view;

static void row_view_free(row_view *v)
{
	free(v->cats);
	free((void *)v->cells);
}

static int series_index(row_view *v, const json_t *kase)
{
	const char *variant = mb_text_get(kase, "variant");
	enum style st = kind_style(mb_text_get(kase, "variant_kind"));
	size_t same_kind = 0;

	for (size_t i = 0; i < v->n_series; i++) {
		if (!strcmp(v->s[i].variant, variant))
			return (int)i;
		same_kind += v->s[i].style == st;
	}
	if (v->n_series == MAX_SERIES)
		return -1;
	v->s[v->n_series] = (series){variant, same_kind ? spare_colors[(same_kind - 1) % 4] : styles[st].color, st};
	return (int)v->n_series++;
}

static int band_index(row_view *v, const char *dtype, const char *mode)
{
	char name[TEXT_MAX];

	snprintf(name, sizeof(name), "%s \xc2\xb7 %s", dtype, mode);
	for (size_t i = 0; i < v->n_bands; i++)
		if (!strcmp(v->band_names[i], name))
			return (int)i;
	if (v->n_bands == sizeof(v->band_names) / sizeof(v->band_names[0]))
		return (int)v->n_bands - 1;
	snprintf(v->band_names[v->n_bands], TEXT_MAX, "%s", name);
	return (int)v->n_bands++;
}

/* Series sorted fused, fallback, vendor, reference: the same order in every
 * legend. Cells are moved with them. */
static void sort_series(row_view *v)
{
	for (size_t i = 1; i < v->n_series; i++)
		for (size_t j = i; j > 0 && v->s[j - 1].style > v->s[j].style; j--) {
			series t = v->s[j];
			v->s[j] = v->s[j - 1];
			v->s[j - 1] = t;
			for (size_t c = 0; c < v->n_cats; c++) {
				const json_t *x = v->cells[c * MAX_SERIES + j];
				v->cells[c * MAX_SERIES + j] = v->cells[c * MAX_SERIES + j - 1];
				v->cells[c * MAX_SERIES + j - 1] = x;
			}
		}
}

/* Categories grouped by band (stable: shapes keep the receipt's order). */
static void sort_categories(row_view *v)
{
	for (size_t i = 1; i < v->n_cats; i++)
		for (size_t j = i; j > 0 && v->cats[j - 1].band > v->cats[j].band; j--) {
			category t = v->cats[j];
			v->cats[j] = v->cats[j - 1];
			v->cats[j - 1] = t;
			for (size_t s = 0; s < MAX_SERIES; s++) {
				const json_t *x = v->cells[j * MAX_SERIES + s];
				v->cells[j * MAX_SERIES + s] = v->cells[(j - 1) * MAX_SERIES + s];
				v->cells[(j - 1) * MAX_SERIES + s] = x;
			}
		}
}

static int row_view_build(row_view *v, const json_t *receipt, const char *row)
{
	const json_t *cases = json_object_get(receipt, "cases");
	size_t i, n = 0;
	json_t *c;

	memset(v, 0, sizeof(*v));
	json_array_foreach(cases, i, c)
		n += !strcmp(mb_text_get(c, "row"), row);
	v->cats = calloc(n + 1, sizeof(*v->cats));
	v->cells = calloc((n + 1) * MAX_SERIES, sizeof(*v->cells));
	if (!v->cats || !v->cells)
		return MB_ENOMEM;
	json_array_foreach(cases, i, c) {
		char shape[MB_REPORT_LABEL_MAX];
		size_t k;
		int s;

		if (strcmp(mb_text_get(c, "row"), row))
			continue;
		s = series_index(v, c);
		if (s < 0)
			continue;
		shape_text(shape, sizeof(shape), c);
		for (k = 0; k < v->n_cats; k++) {
			const category *cat = &v->cats[k];
			if (!strcmp(cat->dtype, mb_text_get(c, "dtype")) && !strcmp(cat->mode, mb_text_get(c, "mode"))
				&& !strcmp(cat->family, mb_text_get(c, "family")) && !strcmp(cat->shape, shape))
				break;
		}
		if (k == v->n_cats) {
			category *cat = &v->cats[v->n_cats++];
			cat->dtype = mb_text_get(c, "dtype");
			cat->mode = mb_text_get(c, "mode");
			cat->family = mb_text_get(c, "family");
			snprintf(cat->shape, sizeof(cat->shape), "%s", shape);
			cat->band = band_index(v, cat->dtype, cat->mode);
		}
		v->cells[k * MAX_SERIES + (size_t)s] = c;
	}
	sort_series(v);
	sort_categories(v);
	return 0;
}

/* ---- shared chart layout: label column, plot area, one line per series ---- */

typedef struct layout {
	double label_w, x0, x1, height;
	double *cat_y, *cat_h;  /* per category */
	double *band_y;         /* per category: its band's heading, or < 0 */
} layout;

static void layout_free(layout *l)
{
	free(l->cat_y);
	free(l->cat_h);
	free(l->band_y);
}

static int layout_build(layout *l, const row_view *v)
{
	size_t chars = 0;
	double y = MARGIN_T;

	memset(l, 0, sizeof(*l));
	l->cat_y = calloc(v->n_cats + 1, sizeof(double));
	l->cat_h = calloc(v->n_cats + 1, sizeof(double));
	l->band_y = calloc(v->n_cats + 1, sizeof(double));
	if (!l->cat_y || !l->cat_h || !l->band_y)
		return MB_ENOMEM;
	for (size_t c = 0; c < v->n_cats; c++) {
		size_t a = strlen(v->cats[c].family), b = strlen(v->cats[c].shape);
		chars = a > chars ? a : chars;
		chars = b > chars ? b : chars;
	}
	l->label_w = fmax(LABEL_MIN_W, chars * CHAR_PX + LABEL_PAD);
	/* a very long label keeps half the width for the plot; the rest of the
	 * text is in the tooltip */
	l->label_w = fmin(l->label_w, CHART_W / 2.0);
	l->x0 = l->label_w;
	l->x1 = CHART_W - NOTE_W;
	for (size_t c = 0; c < v->n_cats; c++) {
		double h = fmax(CAT_MIN_H, (double)v->n_series * SERIES_STEP + CAT_PAD);
		l->band_y[c] = -1;
		if (c == 0 || v->cats[c].band != v->cats[c - 1].band) {
			l->band_y[c] = y;
			y += BAND_H;
		}
		l->cat_y[c] = y;
		l->cat_h[c] = h;
		y += h;
	}
	l->height = y + AXIS_H;
	return 0;
}

static double series_y(const layout *l, const row_view *v, size_t c, size_t s)
{
	double inner = l->cat_h[c] - CAT_PAD;

	return l->cat_y[c] + CAT_PAD / 2.0 + ((double)s + 0.5) * inner / (double)v->n_series;
}

/* Label column, stripes and band headings. */
static void chart_frame(FILE *out, const layout *l, const row_view *v)
{
	for (size_t c = 0; c < v->n_cats; c++) {
		const category *cat = &v->cats[c];
		size_t max_chars = (size_t)((l->label_w - LABEL_PAD) / CHAR_PX);

		if (l->band_y[c] >= 0) {
			fprintf(out, "<rect class=\"band\" x=\"0\" y=\"%.1f\" width=\"%d\" height=\"%d\"/>"
				"<text class=\"bandt\" x=\"4\" y=\"%.1f\">", l->band_y[c], CHART_W, BAND_H, l->band_y[c] + 13);
			esc(out, v->band_names[cat->band]);
			fputs("</text>\n", out);
		}
		if (c % 2)
			fprintf(out, "<rect class=\"stripe\" x=\"0\" y=\"%.1f\" width=\"%d\" height=\"%.1f\"/>\n", l->cat_y[c],
				CHART_W, l->cat_h[c]);
		fprintf(out, "<text class=\"lab\" x=\"4\" y=\"%.1f\"><title>", l->cat_y[c] + l->cat_h[c] / 2 - 2);
		esc(out, cat->family);
		fputs(" ", out);
		esc(out, cat->shape);
		fputs("</title>", out);
		/* two lines, cut to the column: family, then the shape */
		{
			char cut[MB_REPORT_LABEL_MAX];
			snprintf(cut, sizeof(cut), "%.*s", (int)max_chars, cat->family);
			esc(out, cut);
			fprintf(out, "<tspan x=\"4\" dy=\"12\">");
			snprintf(cut, sizeof(cut), "%.*s", (int)max_chars, cat->shape);
			esc(out, cut);
		}
		fputs("</tspan></text>\n", out);
	}
}

/* A series' marker: circle (fused), square (fallback), diamond (vendor),
 * triangle (reference), ring (anything else). */
static void marker(FILE *out, enum style st, const char *color, double x, double y, double r)
{
	switch (st) {
	case STYLE_FUSED:
		fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"%s\"/>", x, y, r, color);
		break;
	case STYLE_FALLBACK:
		fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>", x - r, y - r,
			2 * r, 2 * r, color);
		break;
	case STYLE_VENDOR:
		fprintf(out, "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"%s\"/>", x, y - r * 1.3,
			x + r * 1.3, y, x, y + r * 1.3, x - r * 1.3, y, color);
		break;
	case STYLE_REFERENCE:
		fprintf(out, "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"%s\"/>", x, y - r * 1.2,
			x + r * 1.2, y + r, x - r * 1.2, y + r, color);
		break;
	default:
		fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"#fff\" stroke=\"%s\" stroke-width=\"2\"/>",
			x, y, r, color);
		break;
	}
}

static void legend_item(FILE *out, enum style st, const char *color, const char *name)
{
	fputs("<span><svg class=\"key\" width=\"14\" height=\"14\" viewBox=\"0 0 14 14\" aria-hidden=\"true\">", out);
	marker(out, st, color, 7, 7, 4.5);
	fputs("</svg>", out);
	esc(out, name);
	fputs("</span>", out);
}

static void row_legend(FILE *out, const row_view *v)
{
	fputs("<div class=\"legend\">", out);
	for (size_t s = 0; s < v->n_series; s++)
		legend_item(out, v->s[s].style, v->s[s].color, v->s[s].variant);
	fputs("</div>\n", out);
}

/* ---- axes ---- */

/* Nice linear ticks over [lo, hi]: steps of 1, 2 or 5 times a power of ten. */
static size_t linear_ticks(double *ticks, size_t max, double lo, double hi)
{
	static const double steps[] = {1, 2, 5};
	double span = hi - lo, mag, step = 0;
	size_t n = 0;

	if (!(span > 0))
		return 0;
	mag = pow(10, floor(log10(span / MAX_TICKS)));
	for (size_t i = 0; !step || span / step > MAX_TICKS - 1; i++)
		step = steps[i % 3] * mag * pow(10, (double)(i / 3));
	for (double t = ceil(lo / step) * step; t <= hi + step * 1e-9 && n < max; t += step)
		ticks[n++] = fabs(t) < step * 1e-9 ? 0 : t;
	return n;
}

/* The tick values of a log axis: 1 per decade, 1-2-5, or every digit. */
static const double tick_sets[][9] = {{1}, {1, 2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}};
static const size_t tick_set_sizes[] = {1, 3, 9};
#define TICK_SETS 3

/* The ticks of set `s` in [lo, hi]. */
static size_t set_ticks(double *ticks, size_t max, double lo, double hi, size_t s)
{
	size_t n = 0;

	for (double d = floor(log10(lo)); d <= ceil(log10(hi)); d++)
		for (size_t m = 0; m < tick_set_sizes[s]; m++) {
			double t = tick_sets[s][m] * pow(10, d);
			if (t >= lo * (1 - 1e-9) && t <= hi * (1 + 1e-9) && n < max)
				ticks[n++] = t;
		}
	return n;
}

/* `v` rounded down (or up) to a tick of set `s`. */
static double set_round(double v, size_t s, bool up)
{
	double e = pow(10, floor(log10(v)));

	if (up) {
		for (size_t m = 0; m < tick_set_sizes[s]; m++)
			if (tick_sets[s][m] * e >= v * (1 - 1e-9))
				return tick_sets[s][m] * e;
		return 10 * e;
	}
	for (size_t m = tick_set_sizes[s]; m-- > 0;)
		if (tick_sets[s][m] * e <= v * (1 + 1e-9))
			return tick_sets[s][m] * e;
	return e;
}

typedef struct xscale {
	double lo, hi;  /* log10 of the domain, or values for a linear scale */
	double x0, x1;
	bool log;
	int tick_set;   /* log: the set of tick_sets the domain ends on; -1: linear steps */
} xscale;

/* Ticks for a log axis over [lo, hi] (values, not logs): the scale's set,
 * or the first of 1-2-5 per decade, or every digit, that gives a readable
 * number; linear steps when the range is narrow. */
static size_t log_ticks(double *ticks, size_t max, double lo, double hi, int set)
{
	if (set >= 0)
		return set_ticks(ticks, max, lo, hi, (size_t)set);
	for (size_t s = 0; s < TICK_SETS; s++) {
		size_t n = set_ticks(ticks, max, lo, hi, s);
		if (n >= MIN_TICKS && n <= MAX_TICKS)
			return n;
		if (n > MAX_TICKS)
			break;
	}
	return linear_ticks(ticks, max, lo, hi);
}

/* A log axis over the values [lo, hi] whose ends are ticks, so that no
 * point lies beyond the outermost tick: the coarsest tick set that gives
 * a readable number of ticks once each end is rounded out to one of its
 * ticks; where none does (a narrow range), a padded domain with linear
 * ticks, its ends on multiples of the step. */
static void log_domain(xscale *sc, double lo, double hi)
{
	double ticks[4 * MAX_TICKS], step;
	size_t n;

	for (size_t s = 0; s < TICK_SETS; s++) {
		double a = set_round(lo, s, false), b = set_round(hi, s, true);

		n = set_ticks(ticks, sizeof(ticks) / sizeof(ticks[0]), a, b, s);
		if (n >= MIN_TICKS && n <= MAX_TICKS) {
			sc->lo = log10(a);
			sc->hi = log10(b);
			sc->tick_set = (int)s;
			return;
		}
	}
	n = linear_ticks(ticks, sizeof(ticks) / sizeof(ticks[0]), lo, hi);
	step = n >= 2 ? ticks[1] - ticks[0] : (hi - lo);
	sc->tick_set = -1;
	sc->lo = log10(step > 0 && floor(lo / step) * step > 0 ? floor(lo / step) * step : lo);
	sc->hi = log10(step > 0 ? ceil(hi / step) * step : hi);
}

static double x_of(const xscale *s, double v)
{
	double t = s->log ? (log10(v) - s->lo) / (s->hi - s->lo) : (v - s->lo) / (s->hi - s->lo);

	return s->x0 + (s->x1 - s->x0) * t;
}

static void x_axis(FILE *out, const xscale *s, double y_top, double y_axis, const char *unit_note, bool percent)
{
	double ticks[2 * MAX_TICKS + 2];
	size_t n = s->log ? log_ticks(ticks, 2 * MAX_TICKS, pow(10, s->lo), pow(10, s->hi), s->tick_set)
		: linear_ticks(ticks, 2 * MAX_TICKS, s->lo, s->hi);

	for (size_t i = 0; i < n; i++) {
		double x = x_of(s, ticks[i]);
		char label[32];

		if (percent)
			percent_text(label, sizeof(label), ticks[i]);
		else
			short_time(label, sizeof(label), ticks[i]);
		fprintf(out, "<line class=\"%s\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
			"<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
			percent && ticks[i] == 0 ? "zero" : "grid", x, y_top, x, y_axis, x, y_axis + 13, label);
	}
	fprintf(out, "<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
		"<text class=\"unit\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
		s->x0, y_axis, s->x1, y_axis, (s->x0 + s->x1) / 2, y_axis + 28, unit_note);
}

/* ---- time by shape ---- */

/* The verdict's pair whose fused case is this category's (NULL: none). */
static const mb_verdict_pair *pair_for(const mb_row_verdict *rv, const row_view *v, size_t c)
{
	for (size_t p = 0; rv && p < rv->n_pairs; p++)
		for (size_t s = 0; s < v->n_series; s++)
			if (v->cells[c * MAX_SERIES + s] && rv->pairs[p].fused == v->cells[c * MAX_SERIES + s])
				return &rv->pairs[p];
	return NULL;
}

static void case_title(FILE *out, const json_t *k, const char *variant)
{
	char med[32], p10[32], p90[32];
	char ceiling[64];

	mb_print_ceiling_text(ceiling, sizeof(ceiling), k);
	mb_text_duration(med, sizeof(med), mb_text_timing(k, "median_ns"));
	mb_text_duration(p10, sizeof(p10), mb_text_timing(k, "p10_ns"));
	mb_text_duration(p90, sizeof(p90), mb_text_timing(k, "p90_ns"));
	fputs("<title>", out);
	esc(out, variant);
	fputs(" ", out);
	esc(out, mb_text_get(k, "dtype"));
	fputs(" ", out);
	esc(out, mb_text_get(k, "mode"));
	fputs(" ", out);
	esc(out, mb_text_get(k, "family"));
	fprintf(out, ": median %s, p10 %s, p90 %s; %zu samples, noise %.2f%%", med, p10, p90,
		json_array_size(json_object_get(json_object_get(k, "timing"), "samples_ns")),
		PERCENT * mb_text_timing(k, "rel_noise"));
	if (strcmp(ceiling, "-"))
		fprintf(out, "; %s ceiling", ceiling);
	fputs("</title>", out);
}

static bool time_domain(const row_view *v, double *lo, double *hi)
{
	*lo = INFINITY;
	*hi = 0;
	for (size_t i = 0; i < v->n_cats * MAX_SERIES; i++) {
		const json_t *k = v->cells[i];
		double a, b;

		if (!k || !case_ok(k))
			continue;
		a = mb_text_timing(k, "p10_ns");
		b = mb_text_timing(k, "p90_ns");
		a = a > 0 ? a : mb_text_timing(k, "median_ns");
		b = b > 0 ? b : mb_text_timing(k, "median_ns");
		*lo = fmin(*lo, a);
		*hi = fmax(*hi, b);
	}
	return *hi > 0 && isfinite(*lo);
}

static void time_chart(FILE *out, const row_view *v, const layout *l, const mb_row_verdict *rv, const char *row)
{
	xscale sc = {.x0 = l->x0, .x1 = l->x1 - 8, .log = true};
	double lo, hi;

	if (!time_domain(v, &lo, &hi)) {
		fputs("<p class=\"meta\">no timed case</p>\n", out);
		return;
	}
	if (hi < lo * NARROW_SPAN) { /* one value, or nearly */
		lo /= NARROW_SPAN;
		hi *= NARROW_SPAN;
	}
	log_domain(&sc, lo, hi);
	fprintf(out, "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %.0f\" role=\"img\" "
		"aria-label=\"", CHART_W, l->height);
	esc(out, row);
	fputs(": median time per call by shape\">\n", out);
	chart_frame(out, l, v);
	x_axis(out, &sc, MARGIN_T, l->height - AXIS_H, "time per call (log scale): median, bar p10-p90", false);
	for (size_t c = 0; c < v->n_cats; c++) {
		const mb_verdict_pair *p = pair_for(rv, v, c);

		for (size_t s = 0; s < v->n_series; s++) {
			const json_t *k = v->cells[c * MAX_SERIES + s];
			double y = series_y(l, v, c, s), med, a, b;

			if (!k)
				continue;
			if (!case_ok(k)) {
				fprintf(out, "<g><text class=\"bad\" x=\"%.1f\" y=\"%.1f\">\xc3\x97 ", sc.x0 + 4, y + 4);
				esc(out, v->s[s].variant);
				fputs(" ", out);
				esc(out, mb_text_get(k, "status"));
				fputs("</text><title>", out);
				esc(out, mb_text_get(k, "error"));
				fputs("</title></g>\n", out);
				continue;
			}
			med = mb_text_timing(k, "median_ns");
			a = mb_text_timing(k, "p10_ns");
			b = mb_text_timing(k, "p90_ns");
			fputs("<g>", out);
			if (a > 0 && b > 0)
				fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1.6\"/>"
					"<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>"
					"<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>",
					x_of(&sc, a), y, x_of(&sc, b), y, v->s[s].color, x_of(&sc, a), y - CAP_H, x_of(&sc, a),
					y + CAP_H, v->s[s].color, x_of(&sc, b), y - CAP_H, x_of(&sc, b), y + CAP_H, v->s[s].color);
			marker(out, v->s[s].style, v->s[s].color, x_of(&sc, med), y, MARK_R);
			case_title(out, k, v->s[s].variant);
			fputs("</g>\n", out);
		}
		if (p && isfinite(p->speedup)) {
			const char *cls = p->cmp.cls == MB_CMP_FASTER ? "win" : p->cmp.cls == MB_CMP_SLOWER ? "loss" : "even";
			fprintf(out, "<text class=\"%s\" x=\"%.1f\" y=\"%.1f\">\xc3\x97%.2f<title>fallback median / fused "
				"median: the verdict calls the fused variant %s here</title></text>\n", cls, l->x1 + 4,
				l->cat_y[c] + l->cat_h[c] / 2 + 4, p->speedup, mb_cmp_class_name(p->cmp.cls));
		}
	}
	fputs("</svg>\n", out);
}

/* ---- box plots of the raw samples ---- */

/* Up to MAX_DOTS outliers within [lo, hi], spread over both tails; those
 * beyond the axis are counted at its edge. */
static void outliers(FILE *out, const mb_report_box *b, const xscale *sc, double y, const char *color)
{
	size_t n_out = 0, beyond_lo = 0, beyond_hi = 0, step;

	for (size_t j = 0; j < b->n; j++)
		n_out += b->rel[j] < b->lo || b->rel[j] > b->hi;
	step = n_out > MAX_DOTS ? n_out / MAX_DOTS + 1 : 1;
	for (size_t j = 0, seen = 0; j < b->n; j++) {
		double x = b->rel[j];
		if (x >= b->lo && x <= b->hi)
			continue;
		if (x < sc->lo) {
			beyond_lo++;
			continue;
		}
		if (x > sc->hi) {
			beyond_hi++;
			continue;
		}
		if (seen++ % step)
			continue;
		fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"1.6\" fill=\"none\" stroke=\"%s\"/>", x_of(sc, x), y,
			color);
	}
	if (beyond_lo)
		fprintf(out, "<text class=\"edge\" x=\"%.1f\" y=\"%.1f\">\xe2\x80\xb9%zu</text>", sc->x0 + 1, y + 3, beyond_lo);
	if (beyond_hi)
		fprintf(out, "<text class=\"edge\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%zu\xe2\x80\xba</text>",
			sc->x1 - 1, y + 3, beyond_hi);
}

static void box_title(FILE *out, const mb_report_box *b, const json_t *k, const char *variant)
{
	char med[32];

	mb_text_duration(med, sizeof(med), mb_text_timing(k, "median_ns"));
	fputs("<title>", out);
	esc(out, variant);
	fputs(" ", out);
	esc(out, mb_text_get(k, "dtype"));
	fputs(" ", out);
	esc(out, mb_text_get(k, "family"));
	fprintf(out, ": %zu samples (%zu excluded), median %s; quartiles %+.2f%% %+.2f%%, whiskers %+.2f%% %+.2f%%, "
		"range %+.2f%% %+.2f%%</title>", b->n, b->excluded, med, PERCENT * b->q1, PERCENT * b->q3,
		PERCENT * b->lo, PERCENT * b->hi, PERCENT * b->rel[0], PERCENT * b->rel[b->n - 1]);
}

static int box_chart(FILE *out, const row_view *v, const layout *l, const char *row)
{
	mb_report_box *boxes = calloc(v->n_cats * MAX_SERIES + 1, sizeof(*boxes));
	xscale sc = {.x0 = l->x0, .x1 = l->x1 - 8, .log = false, .lo = 0, .hi = 0};
	bool any = false;
	int rc = 0;

	if (!boxes)
		return MB_ENOMEM;
	for (size_t i = 0; i < v->n_cats * MAX_SERIES && !rc; i++) {
		if (!v->cells[i] || !case_ok(v->cells[i]))
			continue;
		rc = mb_report_box_build(&boxes[i], v->cells[i]);
		if (boxes[i].n) {
			sc.lo = fmin(sc.lo, boxes[i].lo);
			sc.hi = fmax(sc.hi, boxes[i].hi);
			any = true;
		}
	}
	if (rc || !any) {
		if (!rc)
			fputs("<p class=\"meta\">no samples</p>\n", out);
		goto cleanup;
	}
	sc.lo = fmax(fmin(sc.lo, -MIN_REL_SPAN), -MAX_REL_SPAN);
	sc.hi = fmin(fmax(sc.hi, MIN_REL_SPAN), MAX_REL_SPAN);
	{
		double span = sc.hi - sc.lo;
		sc.lo -= span * LIN_PAD;
		sc.hi += span * LIN_PAD;
	}
	fprintf(out, "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %.0f\" role=\"img\" "
		"aria-label=\"", CHART_W, l->height);
	esc(out, row);
	fputs(": distribution of the raw samples\">\n", out);
	chart_frame(out, l, v);
	x_axis(out, &sc, MARGIN_T, l->height - AXIS_H, "per-call time relative to the case's median", true);
	for (size_t c = 0; c < v->n_cats; c++)
		for (size_t s = 0; s < v->n_series; s++) {
			const mb_report_box *b = &boxes[c * MAX_SERIES + s];
			double y = series_y(l, v, c, s);
			const char *color = v->s[s].color;

			if (!b->n)
				continue;
			fputs("<g>", out);
			fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>",
				x_of(&sc, fmax(b->lo, sc.lo)), y, x_of(&sc, fmin(b->hi, sc.hi)), y, color);
			fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" fill-opacity=\"0.25\" "
				"stroke=\"%s\"/>", x_of(&sc, fmax(b->q1, sc.lo)), y - BOX_H / 2,
				fmax(x_of(&sc, fmin(b->q3, sc.hi)) - x_of(&sc, fmax(b->q1, sc.lo)), 1.0), BOX_H, color, color);
			fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>",
				x_of(&sc, 0), y - BOX_H / 2, x_of(&sc, 0), y + BOX_H / 2, color);
			outliers(out, b, &sc, y, color);
			box_title(out, b, v->cells[c * MAX_SERIES + s], v->s[s].variant);
			fputs("</g>\n", out);
		}
	fputs("</svg>\n", out);
cleanup:
	for (size_t i = 0; i < v->n_cats * MAX_SERIES; i++)
		mb_report_box_free(&boxes[i]);
	free(boxes);
	return rc;
}

/* The numbers behind the charts, for a reader who wants them exactly: few
 * enough columns to fit its card at any width (the case's dtype, mode,
 * family and shape wrap in one cell), so that nothing is clipped. */
static void case_table(FILE *out, const row_view *v)
{
	fputs("<div class=\"wrap\"><table class=\"cases\"><tr><th>case</th><th>variant</th><th class=\"num\">median"
		"</th><th class=\"num\">p10 &ndash; p90</th><th class=\"num\">noise</th><th class=\"num\">samples</th>"
		"<th>of ceiling</th></tr>\n", out);
	for (size_t c = 0; c < v->n_cats; c++)
		for (size_t s = 0; s < v->n_series; s++) {
			const json_t *k = v->cells[c * MAX_SERIES + s];
			char med[32], p10[32], p90[32], ceiling[64];

			if (!k)
				continue;
			mb_text_duration(med, sizeof(med), mb_text_timing(k, "median_ns"));
			mb_text_duration(p10, sizeof(p10), mb_text_timing(k, "p10_ns"));
			mb_text_duration(p90, sizeof(p90), mb_text_timing(k, "p90_ns"));
			mb_print_ceiling_text(ceiling, sizeof(ceiling), k);
			fputs("<tr><td>", out);
			esc(out, v->cats[c].dtype);
			fputs(" \xc2\xb7 ", out);
			esc(out, v->cats[c].mode);
			fputs(" \xc2\xb7 ", out);
			esc(out, v->cats[c].family);
			fputs("/", out);
			esc_wrap(out, v->cats[c].shape);
			if (!case_ok(k)) {
				fputs(" <b>", out);
				esc(out, mb_text_get(k, "status"));
				fputs("</b>", out);
			}
			fputs("</td><td>", out);
			esc(out, v->s[s].variant);
			fprintf(out, "</td><td class=\"num\">%s</td><td class=\"num range\">%s&nbsp;&ndash; %s</td><td class=\"num\">%.2f%%</td>"
				"<td class=\"num\">%zu</td><td>%s</td></tr>\n", med, p10, p90, PERCENT * mb_text_timing(k, "rel_noise"),
				json_array_size(json_object_get(json_object_get(k, "timing"), "samples_ns")), ceiling);
		}
	fputs("</table></div>\n", out);
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

/* One card per row: the chart, then the distributions and numbers folded. */
static int row_card(FILE *out, const mb_report_group *g, size_t r)
{
	const mb_row_verdict *rv = g->rows[r].v;
	const json_t *receipt = g->revs[g->rows[r].rev];
	row_view v;
	layout l;
	char label[MB_VERDICT_TEXT_MAX + 32];
	int rc = row_view_build(&v, receipt, rv->row);

	if (!rc)
		rc = layout_build(&l, &v);
	else
		memset(&l, 0, sizeof(l));
	if (rc)
		goto cleanup;
	mb_verdict_label(label, sizeof(label), rv);
	fputs("<div class=\"card\"><h4>", out);
	esc(out, rv->row);
	fprintf(out, " <span class=\"badge %s\">", verdict_class(rv->kind));
	esc(out, label);
	fputs("</span></h4>\n", out);
	if (g->rows[r].rev != g->n - 1) {
		char rev[MB_REPORT_LABEL_MAX];
		mb_report_revision_text(rev, sizeof(rev), receipt, g->names[g->rows[r].rev]);
		fputs("<p class=\"meta\">from revision ", out);
		esc(out, rev);
		fputs(" (", out);
		esc(out, g->names[g->rows[r].rev]);
		fputs("), the newest receipt with this row</p>\n", out);
	}
	row_legend(out, &v);
	time_chart(out, &v, &l, rv, rv->row);
	fputs("<details><summary>distribution of the raw samples (box plots)</summary>\n<p class=\"meta\">Each box "
		"spans the quartiles of one case's kept samples, relative to its median; whiskers reach the most extreme "
		"sample within 1.5 IQR; circles are outliers (a sample of them), numbers at an edge count the samples "
		"beyond it.</p>\n", out);
	rc = box_chart(out, &v, &l, rv->row);
	fputs("</details>\n<details><summary>the numbers</summary>\n", out);
	case_table(out, &v);
	fputs("</details></div>\n", out);
cleanup:
	layout_free(&l);
	row_view_free(&v);
	return rc;
}

/* ---- verdicts ---- */

static void verdict_table(FILE *out, const mb_report_group *g)
{
	bool mixed = mb_report_rows_mixed(g);

	fputs("<div class=\"wrap\"><table class=\"verdicts\" id=\"verdicts\"><tr><th>row</th><th>block</th>"
		"<th>status</th><th>verdict</th><th>families won</th><th>saved</th><th>speedup at the largest shape</th>"
		"<th>vs fallback</th><th>memory</th><th>why</th>", out);
	fputs(mixed ? "<th>from revision</th></tr>\n" : "</tr>\n", out);
	/* data-label: on a narrow screen each row becomes a block of labelled
	 * lines (see the CSS) instead of a table wider than the window */
	for (size_t i = 0; i < g->n_rows; i++) {
		const mb_row_verdict *v = g->rows[i].v;
		char label[MB_VERDICT_TEXT_MAX + 32], saved[MB_VERDICT_TEXT_MAX], speedup[MB_VERDICT_TEXT_MAX];
		char fallback[MB_VERDICT_TEXT_MAX], memory[MB_VERDICT_TEXT_MAX], status[MB_VERDICT_TEXT_MAX * 2 + 32];

		mb_verdict_label(label, sizeof(label), v);
		mb_verdict_saved_text(saved, sizeof(saved), v);
		mb_verdict_speedup_text(speedup, sizeof(speedup), v);
		mb_verdict_fallback_text(fallback, sizeof(fallback), v);
		mb_verdict_memory_text(memory, sizeof(memory), v);
		mb_verdict_status_text(status, sizeof(status), v);
		fprintf(out, "<tr class=\"%s\"><td data-label=\"row\">", verdict_class(v->kind));
		esc(out, v->row);
		fputs("</td><td data-label=\"block\">", out);
		esc(out, v->block);
		fputs(v->status_agrees ? "</td><td data-label=\"status\">" : "</td><td data-label=\"status\" class=\"disagree\">",
			out);
		esc_wrap(out, status);
		fputs("</td><td data-label=\"verdict\">", out);
		esc(out, label);
		fputs("</td><td data-label=\"families won\">", out);
		esc_wrap(out, v->families);
		fputs("</td><td data-label=\"saved\">", out);
		esc_wrap(out, saved);
		fputs("</td><td data-label=\"speedup\">", out);
		esc_wrap(out, speedup);
		fputs("</td><td data-label=\"vs fallback\">", out);
		esc_wrap(out, fallback);
		fputs("</td><td data-label=\"memory\">", out);
		esc_wrap(out, memory);
		fputs("</td><td data-label=\"why\">", out);
		esc_wrap(out, v->reason);
		if (mixed) {
			char rev[MB_REPORT_LABEL_MAX];
			mb_report_revision_text(rev, sizeof(rev), g->revs[g->rows[i].rev], g->names[g->rows[i].rev]);
			fputs("</td><td data-label=\"from\">", out);
			esc(out, rev);
		}
		fputs("</td></tr>\n", out);
	}
	fputs("</table></div>\n", out);
}

/* ---- history ---- */

/* Whether two revisions of the group share their label: then the run time
 * tells them apart. */
static bool label_repeats(const mb_report_group *g, size_t k)
{
	char a[MB_REPORT_LABEL_MAX], b[MB_REPORT_LABEL_MAX];

	mb_report_revision_text(a, sizeof(a), g->revs[k], g->names[k]);
	for (size_t j = 0; j < g->n; j++) {
		mb_report_revision_text(b, sizeof(b), g->revs[j], g->names[j]);
		if (j != k && !strcmp(a, b))
			return true;
	}
	return false;
}

/* Show every k-th revision label so that labels never overlap. */
static size_t history_label_step(const mb_report_group *g)
{
	double slot = (double)(CHART_W - HIST_L - HIST_R) / (double)(g->n ? g->n : 1);
	double need = HIST_LABEL_CHARS * CHAR_PX + LABEL_PAD;

	return slot >= need ? 1 : (size_t)ceil(need / slot);
}

static double hist_x(const mb_report_group *g, size_t k)
{
	double w = CHART_W - HIST_L - HIST_R;

	return g->n > 1 ? HIST_L + w * ((double)k + 0.5) / (double)g->n : HIST_L + w / 2;
}

static double hist_y(double v, double lo, double hi)
{
	return HIST_T + (HIST_H - HIST_T - HIST_B) * (1.0 - (v - lo) / (hi - lo));
}

static void history_chart(FILE *out, const mb_report_group *g, size_t r)
{
	const mb_row_verdict *rv = g->rows[r].v;
	row_view v;
	double lo = 1.0, hi = 1.0, ticks[2 * MAX_TICKS], *rel = NULL;
	size_t nt, *cases = NULL;

	if (mb_report_revisions_with_row(g, rv->row) < 2)
		return;
	if (row_view_build(&v, g->revs[g->rows[r].rev], rv->row))
		goto cleanup;
	/* each series' trend (rel[s * g->n + k]), from the report's model */
	rel = calloc(v.n_series * g->n + 1, sizeof(*rel));
	cases = calloc(v.n_series * g->n + 1, sizeof(*cases));
	if (!rel || !cases)
		goto cleanup;
	for (size_t s = 0; s < v.n_series; s++)
		mb_report_trend(rel + s * g->n, cases + s * g->n, g, rv->row, v.s[s].variant);
	for (size_t i = 0; i < v.n_series * g->n; i++)
		if (!isnan(rel[i])) {
			lo = fmin(lo, rel[i]);
			hi = fmax(hi, rel[i]);
		}
	{
		double span = fmax(hi - lo, 0.02);
		lo -= span * 0.15;
		hi += span * 0.15;
	}
	fputs("<div class=\"card\"><h4>", out);
	esc(out, rv->row);
	fputs("</h4>\n", out);
	row_legend(out, &v);
	fprintf(out, "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\" role=\"img\" "
		"aria-label=\"", CHART_W, HIST_H);
	esc(out, rv->row);
	fputs(": history\">\n", out);
	nt = linear_ticks(ticks, 2 * MAX_TICKS, lo, hi);
	for (size_t i = 0; i < nt; i++) {
		double y = hist_y(ticks[i], lo, hi);
		char label[32];
		percent_text(label, sizeof(label), ticks[i] - 1.0);
		fprintf(out, "<line class=\"%s\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>"
			"<text class=\"tick\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
			fabs(ticks[i] - 1.0) < 1e-9 ? "zero" : "grid", HIST_L, y, CHART_W - HIST_R, y, HIST_L - 6, y + 4, label);
	}
	fprintf(out, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n", HIST_L, HIST_H - HIST_B,
		CHART_W - HIST_R, HIST_H - HIST_B);
	/* revision labels: the revision, its commit date, and the run's time
	 * where one revision was run more than once; every k-th label when
	 * there are too many to fit (each point's tooltip names its own) */
	for (size_t k = 0; k < g->n; k++) {
		char rev[MB_REPORT_LABEL_MAX], date[DATE_BYTES], cut[MB_REPORT_LABEL_MAX];
		const char *run = mb_text_get(g->revs[k], "started_at");
		enum { TIME_AT = 11, TIME_CHARS = 8 };

		mb_report_revision_text(rev, sizeof(rev), g->revs[k], g->names[k]);
		date_text(date, sizeof(date), commit_time(g->revs[k]), false);
		if (k % history_label_step(g) == 0 || k == g->n - 1) {
			snprintf(cut, sizeof(cut), "%.*s", HIST_LABEL_CHARS, rev);
			fprintf(out, "<text class=\"tick\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", hist_x(g, k),
				HIST_H - HIST_B + 14);
			esc(out, cut);
			fprintf(out, "<tspan x=\"%.1f\" dy=\"12\">%s</tspan>", hist_x(g, k), date);
			/* the run's time of day (UTC) tells two runs of one commit apart */
			if (label_repeats(g, k) && strlen(run) >= TIME_AT + TIME_CHARS) {
				snprintf(cut, sizeof(cut), "run %.*s", TIME_CHARS, run + TIME_AT);
				fprintf(out, "<tspan x=\"%.1f\" dy=\"12\">", hist_x(g, k));
				esc(out, cut);
				fputs("</tspan>", out);
			}
			fputs("</text>\n", out);
		}
		if (g->regressed[r * g->n + k])
			fprintf(out, "<line class=\"reg\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>", hist_x(g, k), HIST_T,
				hist_x(g, k), HIST_H - HIST_B);
	}
	if (g->first_regression[r] >= 0) {
		double x = hist_x(g, (size_t)g->first_regression[r]);
		fprintf(out, "<text class=\"regt\" x=\"%.1f\" y=\"%d\" text-anchor=\"%s\">first regression<title>",
			x, HIST_T - 8, x > CHART_W / 2 ? "end" : "start");
		esc(out, g->regression_case[r]);
		fputs("</title></text>\n", out);
	}
	/* fallback and others first, fused last: fused is on top, and each
	 * series sits a few units to the side of the others */
	for (size_t i = v.n_series; i-- > 0;) {
		double dx = ((double)i - ((double)v.n_series - 1) / 2) * HIST_JITTER;
		const double *x = rel + i * g->n;

		fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" stroke-dasharray=\"%s\" points=\"",
			v.s[i].color, styles[v.s[i].style].dash);
		for (size_t k = 0; k < g->n; k++)
			if (!isnan(x[k]))
				fprintf(out, "%.1f,%.1f ", hist_x(g, k) + dx, hist_y(x[k], lo, hi));
		fputs("\"/>\n", out);
		for (size_t k = 0; k < g->n; k++) {
			char rev[MB_REPORT_LABEL_MAX];

			if (isnan(x[k]))
				continue;
			mb_report_revision_text(rev, sizeof(rev), g->revs[k], g->names[k]);
			fputs("<g>", out);
			marker(out, v.s[i].style, v.s[i].color, hist_x(g, k) + dx, hist_y(x[k], lo, hi), MARK_R + 0.6);
			fputs("<title>", out);
			esc(out, v.s[i].variant);
			fputs(" at ", out);
			esc(out, rev);
			fprintf(out, ": %+.2f%% against its oldest revision (geometric mean over %zu cases)</title></g>\n",
				PERCENT * (x[k] - 1.0), cases[i * g->n + k]);
		}
	}
	fputs("</svg></div>\n", out);
cleanup:
	free(rel);
	free(cases);
	row_view_free(&v);
}

static void history_section(FILE *out, const mb_report_group *g, size_t index)
{
	fprintf(out, "<h3 id=\"history-g%zu\">History across %zu revisions</h3>\n<p class=\"meta\">Median time per call of each variant "
		"relative to the oldest revision that has it (geometric mean over the cases both share); a red line "
		"marks a revision with a case significantly slower than the revision before it. Rows in one revision "
		"only have no chart.</p>\n", index + 1, g->n);
	if (g->notes[0]) {
		fputs("<p class=\"note\">", out);
		esc(out, g->notes);
		fputs("</p>\n", out);
	}
	fputs("<div class=\"wrap\"><table class=\"history\" id=\"history\"><tr><th>row</th><th>first regression</th>"
		"<th>committed</th><th>run started</th><th>case</th></tr>\n", out);
	for (size_t i = 0; i < g->n_rows; i++) {
		int k = g->first_regression[i];
		char rev[MB_REPORT_LABEL_MAX], date[DATE_BYTES] = "", run[DATE_BYTES] = "";

		mb_report_first_regression_text(rev, sizeof(rev), g, i);
		if (k >= 0) {
			date_text(date, sizeof(date), commit_time(g->revs[k]), true);
			stamp_text(run, sizeof(run), mb_text_get(g->revs[k], "started_at"));
		}
		fputs("<tr><td>", out);
		esc(out, g->rows[i].v->row);
		fputs("</td><td>", out);
		esc(out, rev);
		fputs("</td><td>", out);
		esc(out, date);
		fputs("</td><td>", out);
		esc(out, run);
		fputs("</td><td>", out);
		esc_wrap(out, k >= 0 ? g->regression_case[i] : "");
		fputs("</td></tr>\n", out);
	}
	fputs("</table></div>\n<div class=\"cards\">\n", out);
	for (size_t i = 0; i < g->n_rows; i++)
		history_chart(out, g, i);
	fputs("</div>\n", out);
}

/* ---- the page ---- */

static void css(FILE *out)
{
	fputs("<style>\n"
		"body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:16px 24px;"
		"color:#1f2328;background:#fff}\n"
		"h1{font-size:22px;margin:4px 0}h2{font-size:19px;margin-top:28px;border-bottom:1px solid #d0d7de}\n"
		"h3{font-size:16px;margin:20px 0 6px}h4{font-size:14px;margin:2px 0 4px}\n"
		".wrap{overflow-x:auto}\n"
		"table{border-collapse:collapse;font-size:13px;margin:8px 0;width:100%}\n"
		"th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top;overflow-wrap:break-word}\n"
		"th{background:#f6f8fa}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}\n"
		"table.cases{font-size:12px}table.cases td{overflow-wrap:anywhere}table.cases td.num{white-space:nowrap}"
		"table.cases td.range{white-space:normal}\n"
		".keep{background:#dafbe1}.conditional{background:#fff8c5}.drop{background:#ffebe9}"
		"td.disagree{font-weight:600;color:#9a6700}"
		".ambiguous{background:#eaeef2}.nee{color:#57606a}\n"
		".badge{font-size:12px;font-weight:normal;padding:1px 6px;border-radius:10px;border:1px solid #d0d7de}\n"
		".meta{color:#57606a;font-size:13px;margin:4px 0}"
		".note{background:#fff8c5;padding:6px 10px;border-radius:4px;font-size:13px}\n"
		".cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,560px),1fr));gap:14px}\n"
		".card{border:1px solid #d0d7de;border-radius:6px;padding:8px 12px;min-width:0}\n"
		"svg.chart{width:100%;height:auto;display:block;margin:4px 0}\n"
		"svg.chart text{font-size:11px;fill:#1f2328}svg.chart text.tick,svg.chart text.unit{fill:#57606a}\n"
		"svg .axis{stroke:#57606a;stroke-width:1}svg .grid{stroke:#eaeef2;stroke-width:1}"
		"svg .zero{stroke:#8c959f;stroke-width:1}\n"
		"svg .band{fill:#f3f5f7}svg.chart text.bandt{font-weight:600}svg .stripe{fill:#fafbfc}\n"
		"svg.chart text.win{fill:#1a7f37;font-weight:600}svg.chart text.loss{fill:#cf222e;font-weight:600}"
		"svg.chart text.even{fill:#57606a}\n"
		"svg.chart text.bad{fill:#cf222e}svg.chart text.edge{fill:#57606a;font-size:9px}\n"
		"svg .reg{stroke:#cf222e;stroke-width:1.5;stroke-dasharray:4 3}svg.chart text.regt{fill:#cf222e;font-weight:600}\n"
		".legend{font-size:12px;margin:2px 0}.legend span{display:inline-block;margin-right:14px;white-space:nowrap}"
		".legend svg.key{vertical-align:-2px;margin-right:4px}\n"
		"details{margin:4px 0}summary{cursor:pointer;font-size:13px;color:#0969da}\n"
		"@media (max-width:900px){table.verdicts tr:first-child{display:none}"
		"table.verdicts,table.verdicts tr,table.verdicts td{display:block;width:auto}"
		"table.verdicts tr{border:1px solid #d0d7de;margin-bottom:6px}table.verdicts td{border:0;padding:2px 8px}"
		"table.verdicts td::before{content:attr(data-label) \": \";color:#57606a}"
		"table.verdicts td:first-child{font-weight:600}table.verdicts td:first-child::before{content:\"\"}}\n"
		"</style>\n", out);
}

static void receipts_table(FILE *out, const mb_report *r)
{
	fputs("<div class=\"wrap\"><table id=\"receipts\"><tr><th>receipt</th><th>revision</th><th>committed</th>"
		"<th>run started</th><th>device</th><th>backend</th><th>suite</th><th>cases</th><th>status</th>"
		"<th>section</th></tr>\n", out);
	for (size_t i = 0; i < r->n; i++) {
		const json_t *rc = r->receipts[r->order[i]];
		char rev[MB_REPORT_LABEL_MAX], date[DATE_BYTES], run[DATE_BYTES];

		mb_report_revision_text(rev, sizeof(rev), rc, r->names[r->order[i]]);
		date_text(date, sizeof(date), commit_time(rc), true);
		stamp_text(run, sizeof(run), mb_text_get(rc, "started_at"));
		fputs("<tr><td>", out);
		esc_wrap(out, r->names[r->order[i]]);
		fputs("</td><td>", out);
		esc(out, rev);
		fputs("</td><td>", out);
		esc(out, date);
		fputs("</td><td>", out);
		esc(out, run);
		fputs("</td><td>", out);
		esc(out, device_name(rc));
		fputs("</td><td>", out);
		esc(out, mb_text_get(rc, "backend"));
		fputs("</td><td>", out);
		esc(out, suite_name(rc));
		fprintf(out, "</td><td class=\"num\">%zu</td><td>", json_array_size(json_object_get(rc, "cases")));
		esc(out, mb_text_get(rc, "status"));
		fprintf(out, "</td><td><a href=\"#g%d\">%d</a></td></tr>\n", r->group_of[r->order[i]] + 1,
			r->group_of[r->order[i]] + 1);
	}
	fputs("</table></div>\n", out);
}

static void group_heading(FILE *out, const mb_report_group *g, size_t index)
{
	const json_t *newest = g->revs[g->n - 1];
	char rev[MB_REPORT_LABEL_MAX], date[DATE_BYTES];

	mb_report_revision_text(rev, sizeof(rev), newest, g->names[g->n - 1]);
	date_text(date, sizeof(date), commit_time(newest), true);
	fprintf(out, "<section id=\"g%zu\"><h2>%zu. ", index + 1, index + 1);
	esc(out, device_name(newest));
	fputs(" \xc2\xb7 ", out);
	esc(out, mb_text_get(newest, "backend"));
	fputs(" backend \xc2\xb7 suite ", out);
	esc(out, suite_name(newest));
	fprintf(out, "</h2>\n<p class=\"meta\">%zu receipt%s; charts from the newest, revision ", g->n, g->n == 1 ? "" : "s");
	esc(out, rev);
	fputs(" (committed ", out);
	esc(out, date);
	fputs(", ", out);
	esc(out, g->names[g->n - 1]);
	fputs(")</p>\n", out);
}

static int group_section(FILE *out, const mb_report_group *g, size_t index)
{
	int rc = 0;

	group_heading(out, g, index);
	if (g->sets[g->n - 1].lanes_present) {
		fputs("<p class=\"note\">", out);
		esc(out, g->sets[g->n - 1].lanes_note);
		fputs("</p>\n", out);
	}
	fputs("<h3>Catalog verdicts</h3>\n", out);
	if (mb_report_rows_mixed(g))
		fputs("<p class=\"meta\">Each row from the newest receipt that has it (the last column names it).</p>\n",
			out);
	verdict_table(out, g);
	fputs("<p class=\"meta\">", out);
	esc(out, mb_print_model_note);
	fputs("</p>\n", out);
	mb_print_report_lanes(out, g, MB_PRINT_HTML, false);
	fprintf(out, "<h3 id=\"time-g%zu\">Time per call by shape</h3>\n", index + 1);
	fputs("<p class=\"meta\">Median per-call time of every case on a log axis; "
		"the bar spans the 10th to 90th percentile of its samples. The right column is the verdict's speedup "
		"(fallback median over fused median): green where the fused variant is significantly faster, red where "
		"slower. Hover a mark for its numbers; the box plots show the noise of each case. ", out);
	esc(out, mb_print_ceiling_note);
	fputs("</p>\n<div class=\"legend\">", out);
	for (int s = 0; s < STYLE_OTHER; s++)
		legend_item(out, (enum style)s, styles[s].color, styles[s].kind);
	fputs("</div>\n<div class=\"cards\">\n", out);
	for (size_t i = 0; i < g->n_rows && !rc; i++)
		rc = row_card(out, g, i);
	fputs("</div>\n", out);
	if (!rc && g->n > 1)
		history_section(out, g, index);
	fputs("</section>\n", out);
	return rc;
}

int mb_print_report_html(FILE *out, const mb_report *report, mb_error *err)
{
	const mb_report *r = report;
	size_t n = r->n;
	int rc = 0;

	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
		"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>megabench report</title>\n",
		out);
	css(out);
	fputs("</head><body>\n<h1>megabench report: ", out);
	for (size_t g = 0; g < r->n_groups; g++) {
		bool seen = false;
		for (size_t h = 0; h < g; h++)
			seen |= !strcmp(suite_name(r->groups[h].first), suite_name(r->groups[g].first));
		if (seen)
			continue;
		if (g)
			fputs(", ", out);
		esc(out, suite_name(r->groups[g].first));
	}
	fprintf(out, "</h1>\n<p class=\"meta\">%zu receipt%s in %zu group%s (device, backend and suite); policy: ", n,
		n == 1 ? "" : "s", r->n_groups, r->n_groups == 1 ? "" : "s");
	esc(out, r->policy->source);
	fputs("</p>\n", out);
	if (r->n_groups > 1)
		fprintf(out, "<p class=\"note\">These receipts come from %zu different devices, backends or suites. "
			"Receipts of different groups are not comparable, so none is compared with another group's; each "
			"group has a section of its own below.</p>\n", r->n_groups);
	receipts_table(out, r);
	for (size_t g = 0; g < r->n_groups && !rc; g++)
		rc = group_section(out, &r->groups[g], g);
	if (rc)
		return mb_error_set(err, rc, "report", "no memory");
	fputs("</body></html>\n", out);
	return 0;
}

