/* The report's model: see report.h. */
#include "receipts/report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "receipts/select.h"
#include "receipts/stats.h"
#include "receipts/text.h"

/* git describe --dirty's mark, added where the describe lacks it */
#define DIRTY_SUFFIX "-dirty"

static const json_t *prov(const json_t *r)
{
	return json_object_get(r, "provenance");
}

void mb_report_revision_text(char *buf, size_t len, const json_t *r, const char *name)
{
	const char *rev = mb_text_revision(r, name);
	const char *tail = strlen(rev) >= strlen(DIRTY_SUFFIX) ? rev + strlen(rev) - strlen(DIRTY_SUFFIX) : "";
	bool marked = !strcmp(tail, DIRTY_SUFFIX);

	snprintf(buf, len, "%s%s", rev, json_is_true(json_object_get(prov(r), "dirty")) && !marked ? DIRTY_SUFFIX : "");
}

static void group_free(mb_report_group *g)
{
	for (size_t i = 0; i < g->n_sets; i++)
		mb_verdict_set_free(&g->sets[i]);
	free(g->sets);
	free(g->rows);
	free(g->regressed);
	free(g->first_regression);
	free(g->regression_case);
}

void mb_report_free(mb_report *r)
{
	if (!r)
		return;
	for (size_t i = 0; r->groups && i < r->n_groups; i++)
		group_free(&r->groups[i]);
	free(r->groups);
	mb_receipt_groups_free(&r->rg);
	memset(r, 0, sizeof(*r));
}

/* Each revision against the one before it: the rows with a SLOWER case. */
static int find_regressions(mb_report_group *g, const mb_policy *policy, mb_error *err)
{
	size_t rows = g->n_rows;

	g->regressed = calloc(rows * g->n + 1, sizeof(*g->regressed));
	g->first_regression = calloc(rows + 1, sizeof(*g->first_regression));
	g->regression_case = calloc(rows + 1, sizeof(*g->regression_case));
	if (!g->regressed || !g->first_regression || !g->regression_case)
		return mb_error_set(err, MB_ENOMEM, "report", "no memory");
	for (size_t r = 0; r < rows; r++)
		g->first_regression[r] = -1;
	for (size_t k = 1; k < g->n; k++) {
		mb_diff d;
		int rc = mb_diff_receipts(&d, g->revs[k - 1], g->revs[k], g->names[k - 1], g->names[k], policy, false, err);

		if (rc)
			return rc;
		if (mb_diff_refused(&d)) {
			char a[MB_REPORT_LABEL_MAX], b[MB_REPORT_LABEL_MAX];
			mb_report_revision_text(a, sizeof(a), g->revs[k - 1], g->names[k - 1]);
			mb_report_revision_text(b, sizeof(b), g->revs[k], g->names[k]);
			mb_text_appendf(g->notes, sizeof(g->notes), "%s%s to %s not compared: %s", g->notes[0] ? "; " : "",
				a, b, d.reasons);
		}
		for (size_t c = 0; !mb_diff_refused(&d) && c < d.n_cases; c++) {
			const mb_case_diff *cd = &d.cases[c];

			if (!cd->compared || cd->cmp.cls != MB_CMP_SLOWER)
				continue;
			for (size_t r = 0; r < rows; r++) {
				if (strcmp(g->rows[r].v->row, mb_text_get(cd->head, "row")))
					continue;
				g->regressed[r * g->n + k] = true;
				if (g->first_regression[r] < 0) {
					g->first_regression[r] = (int)k;
					snprintf(g->regression_case[r], MB_REPORT_LABEL_MAX, "%s", cd->id);
				}
			}
		}
		mb_diff_free(&d);
	}
	return 0;
}

int mb_report_build(mb_report *r, json_t *const *receipts, const char *const *names, size_t n,
	const mb_policy *policy, const mb_select *sel, mb_error *err)
{
	int rc;

	memset(r, 0, sizeof(*r));
	r->receipts = receipts;
	r->names = names;
	r->n = n;
	r->policy = policy;
	rc = mb_receipt_groups_build(&r->rg, receipts, names, n, err);
	if (rc)
		goto cleanup;
	r->order = r->rg.order;
	r->group_of = r->rg.group_of;
	r->groups = calloc(r->rg.n_groups + 1, sizeof(*r->groups));
	if (!r->groups) {
		rc = mb_error_set(err, MB_ENOMEM, "report", "no memory");
		goto cleanup;
	}
	r->n_groups = r->rg.n_groups;
	for (size_t g = 0; g < r->n_groups; g++) {
		const mb_receipt_group *rg = &r->rg.groups[g];
		r->groups[g].first = rg->first;
		r->groups[g].revs = rg->revs;
		r->groups[g].names = rg->names;
		r->groups[g].n = rg->n;
	}
	for (size_t g = 0; g < r->n_groups && !rc; g++) {
		mb_report_group *gr = &r->groups[g];

		rc = mb_receipt_group_verdicts(&gr->sets, &gr->n_sets, &gr->rows, &gr->n_rows, &r->rg.groups[g], policy,
			"report", err);
		if (!rc && sel)
			mb_select_group_rows(gr->rows, &gr->n_rows, gr->sets, gr->n_sets, sel);
		if (!rc)
			rc = find_regressions(gr, policy, err);
	}
cleanup:
	if (rc)
		mb_report_free(r);
	return rc;
}

bool mb_report_rows_mixed(const mb_report_group *g)
{
	for (size_t i = 0; i < g->n_rows; i++)
		if (g->rows[i].rev != g->n - 1)
			return true;
	return false;
}

/* Geometric mean over the variant's case ids of median(rev) / median(first);
 * NaN when no id is in both. */
static double relative_time(const json_t *first, const json_t *rev, const char *row, const char *variant, size_t *n_out)
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
			ma = mb_text_median_ns(a);
			mbv = mb_text_median_ns(b);
			if (ma > 0.0 && mbv > 0.0) {
				sum += log(mbv / ma);
				n++;
			}
			break;
		}
	}
	if (n_out)
		*n_out = n;
	return n ? exp(sum / (double)n) : NAN;
}

/* The oldest revision with cases of the row's variant: the base of its
 * line. */
static size_t history_base(const mb_report_group *g, const char *row, const char *variant)
{
	for (size_t k = 0; k < g->n; k++) {
		size_t i;
		json_t *c;
		json_array_foreach(json_object_get(g->revs[k], "cases"), i, c)
			if (!strcmp(mb_text_get(c, "row"), row) && !strcmp(mb_text_get(c, "variant"), variant))
				return k;
	}
	return 0;
}

void mb_report_trend(double *out, size_t *n_cases, const mb_report_group *g, const char *row, const char *variant)
{
	const json_t *base = g->revs[history_base(g, row, variant)];

	for (size_t k = 0; k < g->n; k++) {
		size_t n = 0;

		out[k] = relative_time(base, g->revs[k], row, variant, &n);
		if (n_cases)
			n_cases[k] = n;
	}
}

/* How many revisions hold the row at all. */
size_t mb_report_revisions_with_row(const mb_report_group *g, const char *row)
{
	size_t n = 0;

	for (size_t k = 0; k < g->n; k++)
		n += mb_verdict_find(&g->sets[k], row) != NULL;
	return n;
}

/* The history table's words for row i, the same on the page and in
 * summary.md: its first regression's revision, "none", or "in one
 * revision only" (nothing to compare). */
void mb_report_first_regression_text(char *buf, size_t len, const mb_report_group *g, size_t i)
{
	int k = g->first_regression[i];

	if (mb_report_revisions_with_row(g, g->rows[i].v->row) < 2)
		snprintf(buf, len, "in one revision only");
	else if (k >= 0)
		mb_report_revision_text(buf, len, g->revs[k], g->names[k]);
	else
		snprintf(buf, len, "none");
}

/* The newest receipt's verdicts of the rows the group shows, in its order:
 * copies that borrow every pointer (free only view->rows). */
int mb_report_newest_view(mb_verdict_set *view, const mb_report_group *g)
{
	const mb_verdict_set *newest = &g->sets[g->n - 1];

	*view = *newest;
	view->n_rows = 0;
	view->rows = malloc((g->n_rows + 1) * sizeof(*view->rows));
	if (!view->rows)
		return MB_ENOMEM;
	for (size_t i = 0; i < g->n_rows; i++)
		if (g->rows[i].rev == g->n - 1)
			view->rows[view->n_rows++] = *g->rows[i].v;
	return 0;
}

void mb_report_box_free(mb_report_box *b)
{
	free(b->rel);
	memset(b, 0, sizeof(*b));
}

/* The kept samples (timing.excluded left out, as in the statistics). */
int mb_report_box_build(mb_report_box *b, const json_t *k)
{
	const json_t *t = json_object_get(k, "timing");
	const json_t *samples = json_object_get(t, "samples_ns"), *ex = json_object_get(t, "excluded");
	size_t n = json_array_size(samples), i;
	double median = mb_text_timing(k, "median_ns");
	bool *skip;
	json_t *v;

	memset(b, 0, sizeof(*b));
	if (!n || !(median > 0))
		return 0;
	b->rel = calloc(n, sizeof(double));
	skip = calloc(n, sizeof(bool));
	if (!b->rel || !skip) {
		free(skip);
		return MB_ENOMEM;
	}
	json_array_foreach(ex, i, v)
		if ((size_t)json_integer_value(v) < n)
			skip[json_integer_value(v)] = true;
	json_array_foreach(samples, i, v) {
		if (skip[i]) {
			b->excluded++;
			continue;
		}
		b->rel[b->n++] = json_number_value(v) / median - 1.0;
	}
	free(skip);
	if (!b->n)
		return 0;
	qsort(b->rel, b->n, sizeof(double), mb_stats_cmp_double);
	b->q1 = mb_stats_quantile_sorted(b->rel, b->n, 0.25);
	b->q3 = mb_stats_quantile_sorted(b->rel, b->n, 0.75);
	b->lo = b->q3;
	b->hi = b->q1;
	for (size_t j = 0; j < b->n; j++) {
		double x = b->rel[j];
		if (x >= b->q1 - MB_REPORT_WHISKER_IQR * (b->q3 - b->q1))
			b->lo = fmin(b->lo, x);
		if (x <= b->q3 + MB_REPORT_WHISKER_IQR * (b->q3 - b->q1))
			b->hi = fmax(b->hi, x);
	}
	return 0;
}

