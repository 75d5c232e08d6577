/* The run's table of cases (printer.h, mb_print_run_table): one line per
 * case with what a reader of a run asks first: its family and shape, its
 * median and noise, the spread between --repetitions passes, the fused
 * kernel's speedup against its best alternative (the verdict's pair: the
 * fastest correct fallback or vendor case of the same work), throughput
 * against its named ceiling, and its error as a fraction of its tolerance.
 * As a terminal table (columns sized to their contents, text escaped),
 * Markdown or CSV. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "receipts/printer.h"
#include "receipts/text.h"

#define RUN_COLS 15
#define CELL_MAX 192
#define PERCENT 100.0

static const char *const headers[RUN_COLS] = {"row", "family", "variant", "dtype", "mode", "shape", "status",
	"median", "noise", "spread", "speedup", "GB/s", "of ceiling", "check err/tol", "conv"};

/* The shape's axes only ("T=4096,H=2048"): the family has its column. */
static void axes_text(char *buf, size_t len, const json_t *kase)
{
	const char *key;
	json_t *v;

	buf[0] = '\0';
	json_object_foreach((json_t *)json_object_get(kase, "shape"), key, v)
		mb_text_appendf(buf, len, "%s%s=%" JSON_INTEGER_FORMAT, buf[0] ? "," : "", key, json_integer_value(v));
}

double mb_print_error_over_tolerance(const json_t *kase, bool *estimate)
{
	const json_t *c = json_object_get(kase, "correctness"), *tol = json_object_get(c, "tolerance");
	const json_t *exact = json_object_get(c, "error_over_tolerance");
	double by_abs, by_rel, abs = mb_json_num(tol, "abs"), rel = mb_json_num(tol, "rel");

	*estimate = false;
	if (!json_is_object(c))
		return NAN;
	if (exact)
		return json_is_number(exact) ? json_number_value(exact) : NAN;
	/* receipts before the field: the largest error over the tolerance it
	 * was nearest to breaking, an estimate (the largest absolute and the
	 * largest relative error need not be the same element's) */
	*estimate = true;
	by_abs = abs > 0 ? mb_json_num(c, "max_abs") / abs : INFINITY;
	by_rel = rel > 0 ? mb_json_num(c, "max_rel") / rel : INFINITY;
	return isfinite(fmin(by_abs, by_rel)) ? fmin(by_abs, by_rel) : NAN;
}

/* The pair whose fused case this is, or NULL. */
static const mb_verdict_pair *pair_of(const mb_verdict_set *set, const json_t *kase)
{
	for (size_t r = 0; set && r < set->n_rows; r++)
		for (size_t p = 0; p < set->rows[r].n_pairs; p++)
			if (set->rows[r].pairs[p].fused == kase)
				return &set->rows[r].pairs[p];
	return NULL;
}

/* The cells of one case, unescaped. */
static void case_cells(char cells[RUN_COLS][CELL_MAX], const json_t *k, const mb_verdict_set *set)
{
	const json_t *t = json_object_get(k, "timing"), *tp = json_object_get(k, "throughput");
	const json_t *corr = json_object_get(k, "correctness");
	const mb_verdict_pair *p = pair_of(set, k);
	bool estimate;
	double eot = mb_print_error_over_tolerance(k, &estimate);
	static const char *const keys[] = {"row", "family", "variant", "dtype", "mode"};

	for (int i = 0; i < RUN_COLS; i++)
		snprintf(cells[i], CELL_MAX, "-");
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		snprintf(cells[i], CELL_MAX, "%s", mb_text_get(k, keys[i]));
	axes_text(cells[5], CELL_MAX, k);
	snprintf(cells[6], CELL_MAX, "%s", mb_text_get(k, "status"));
	if (json_is_object(t)) {
		mb_text_duration(cells[7], CELL_MAX, mb_json_num(t, "median_ns"));
		if (isfinite(mb_json_num(t, "rel_noise")))
			snprintf(cells[8], CELL_MAX, "%.2f%%", PERCENT * mb_json_num(t, "rel_noise"));
		if (json_array_size(json_object_get(t, "repetitions")) > 1 && isfinite(mb_json_num(t, "between_run_noise")))
			snprintf(cells[9], CELL_MAX, "%.2f%%", PERCENT * mb_json_num(t, "between_run_noise"));
		snprintf(cells[14], CELL_MAX, "%s", json_is_true(json_object_get(t, "converged")) ? "yes" : "NO");
	}
	if (p && isfinite(p->speedup))
		snprintf(cells[10], CELL_MAX, "%.2fx vs %s", p->speedup, mb_text_get(p->alt, "variant"));
	if (isfinite(mb_json_num(tp, "gbps")))
		snprintf(cells[11], CELL_MAX, "%.1f", mb_json_num(tp, "gbps"));
	mb_print_ceiling_text(cells[12], CELL_MAX, k);
	if (json_is_object(corr))
		snprintf(cells[13], CELL_MAX, "%s %s%.2g", json_is_true(json_object_get(corr, "passed")) ? "pass" : "FAIL",
			estimate ? "~" : "", eot);
	if (json_is_object(corr) && !isfinite(eot))
		snprintf(cells[13], CELL_MAX, "%s", json_is_true(json_object_get(corr, "passed")) ? "pass" : "FAIL");
}

static void text_table(FILE *out, const json_t *cases, const mb_verdict_set *set)
{
	size_t n = json_array_size(cases), width[RUN_COLS] = {0}, i;
	char (*cells)[RUN_COLS][CELL_MAX] = calloc(n + 1, sizeof(*cells));
	json_t *k;

	if (!cells)
		return;
	for (int c = 0; c < RUN_COLS; c++)
		snprintf(cells[0][c], CELL_MAX, "%s", headers[c]);
	json_array_foreach(cases, i, k) {
		char raw[RUN_COLS][CELL_MAX];

		case_cells(raw, k, set);
		for (int c = 0; c < RUN_COLS; c++)
			mb_print_terminal_safe(cells[i + 1][c], CELL_MAX, raw[c]);
	}
	for (size_t r = 0; r <= n; r++)
		for (int c = 0; c < RUN_COLS; c++)
			width[c] = strlen(cells[r][c]) > width[c] ? strlen(cells[r][c]) : width[c];
	for (size_t r = 0; r <= n; r++) {
		for (int c = 0; c < RUN_COLS; c++) {
			/* numbers right-aligned, text left */
			bool right = c >= 7 && c <= 11;

			if (c == RUN_COLS - 1)
				fprintf(out, "%s\n", cells[r][c]);
			else
				fprintf(out, right ? "%*s " : "%-*s ", (int)width[c], cells[r][c]);
		}
	}
	free(cells);
}

static void markdown_table(FILE *out, const json_t *cases, const mb_verdict_set *set)
{
	size_t i;
	json_t *k;

	for (int c = 0; c < RUN_COLS; c++)
		fprintf(out, "| %s ", headers[c]);
	fputs("|\n", out);
	for (int c = 0; c < RUN_COLS; c++)
		fputs(c >= 7 && c <= 11 ? "|---:" : "|---", out);
	fputs("|\n", out);
	json_array_foreach(cases, i, k) {
		char cells[RUN_COLS][CELL_MAX];

		case_cells(cells, k, set);
		for (int c = 0; c < RUN_COLS; c++) {
			fputs("| ", out);
			mb_print_md_cell(out, cells[c]);
			fputs(" ", out);
		}
		fputs("|\n", out);
	}
}

static void csv_number(FILE *out, double v, bool last)
{
	char buf[64] = "";

	if (isfinite(v))
		snprintf(buf, sizeof(buf), "%.10g", v);
	mb_print_csv_field(out, buf, last);
}

static void csv_table(FILE *out, const json_t *cases, const mb_verdict_set *set)
{
	size_t i;
	json_t *k;

	fputs("id,row,family,variant,dtype,mode,shape,status,median_ns,rel_noise,between_run_noise,speedup,"
		"best_alternative,gbps,fraction_of_ceiling,ceiling,error_over_tolerance,error_over_tolerance_estimated,"
		"passed,converged\n", out);
	json_array_foreach(cases, i, k) {
		const json_t *t = json_object_get(k, "timing"), *tp = json_object_get(k, "throughput");
		const json_t *corr = json_object_get(k, "correctness");
		const mb_verdict_pair *p = pair_of(set, k);
		static const char *const keys[] = {"id", "row", "family", "variant", "dtype", "mode"};
		char axes[CELL_MAX];
		bool estimate;
		double eot = mb_print_error_over_tolerance(k, &estimate);

		for (size_t j = 0; j < sizeof(keys) / sizeof(keys[0]); j++)
			mb_print_csv_field(out, mb_text_get(k, keys[j]), false);
		axes_text(axes, sizeof(axes), k);
		mb_print_csv_field(out, axes, false);
		mb_print_csv_field(out, mb_text_get(k, "status"), false);
		csv_number(out, mb_json_num(t, "median_ns"), false);
		csv_number(out, mb_json_num(t, "rel_noise"), false);
		csv_number(out, json_array_size(json_object_get(t, "repetitions")) > 1 ? mb_json_num(t, "between_run_noise") : NAN,
			false);
		csv_number(out, p ? p->speedup : NAN, false);
		mb_print_csv_field(out, p ? mb_text_get(p->alt, "variant") : "", false);
		csv_number(out, mb_json_num(tp, "gbps"), false);
		csv_number(out, mb_json_num(tp, "fraction_of_ceiling"), false);
		mb_print_csv_field(out, mb_text_get(tp, "ceiling"), false);
		csv_number(out, eot, false);
		mb_print_csv_field(out, isfinite(eot) ? (estimate ? "true" : "false") : "", false);
		mb_print_csv_field(out, !json_is_object(corr) ? "" : json_is_true(json_object_get(corr, "passed")) ? "true"
			: "false", false);
		mb_print_csv_field(out, !json_is_object(t) ? "" : json_is_true(json_object_get(t, "converged")) ? "true"
			: "false", true);
	}
}

void mb_print_run_table(FILE *out, const json_t *receipt, const mb_verdict_set *set, mb_run_table_format fmt)
{
	const json_t *cases = json_object_get(receipt, "cases");

	switch (fmt) {
	case MB_RUN_TABLE_MARKDOWN: markdown_table(out, cases, set); break;
	case MB_RUN_TABLE_CSV: csv_table(out, cases, set); break;
	default: text_table(out, cases, set); break;
	}
}
