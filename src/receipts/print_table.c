/* Plain terminal tables, columns sized to their contents. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "receipts/printer.h"
#include "receipts/text.h"

/* The widest table: the verdicts' (the diff has DIFF_COLS). */
#define COLS 9
#define DIFF_COLS 6
#define CELL_MAX 320
/* Escaping may make a text four times longer (\xNN). */
#define ESCAPED_MAX (4 * MB_DIFF_TEXT_MAX)

typedef struct table {
	char (*cells)[COLS][CELL_MAX];
	size_t n, cap;
	int ncols;
} table;

static int table_row(table *t, const char *const *values)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 32;
		void *grown = realloc(t->cells, cap * sizeof(*t->cells));

		if (!grown)
			return MB_ENOMEM;
		t->cells = grown;
		t->cap = cap;
	}
	for (int c = 0; c < t->ncols; c++)
		mb_print_terminal_safe(t->cells[t->n][c], CELL_MAX, values[c]);
	t->n++;
	return 0;
}

static void table_print(FILE *out, const table *t)
{
	size_t width[COLS] = {0};

	for (size_t r = 0; r < t->n; r++)
		for (int c = 0; c < t->ncols; c++)
			if (strlen(t->cells[r][c]) > width[c])
				width[c] = strlen(t->cells[r][c]);
	for (size_t r = 0; r < t->n; r++) {
		for (int c = 0; c < t->ncols; c++) {
			if (c == t->ncols - 1)
				fputs(t->cells[r][c], out);
			else
				fprintf(out, "%-*s  ", (int)width[c], t->cells[r][c]);
		}
		fputc('\n', out);
	}
}

/* The row verdicts under a diff: base -> head, with the head's saving. */
static void diff_row_verdicts(FILE *out, const mb_diff *d)
{
	for (size_t i = 0; i < d->head_verdicts.n_rows; i++) {
		const mb_row_verdict *h = &d->head_verdicts.rows[i];
		char base[MB_VERDICT_TEXT_MAX + 32], head[MB_VERDICT_TEXT_MAX + 32], saved[MB_VERDICT_TEXT_MAX];
		char status[MB_VERDICT_TEXT_MAX * 2 + 32];
		char e_row[CELL_MAX], e_base[sizeof(base) * 4], e_head[sizeof(head) * 4], e_reason[ESCAPED_MAX];
		char e_status[sizeof(status) * 4];

		mb_verdict_label(base, sizeof(base), mb_verdict_find(&d->base_verdicts, h->row));
		mb_verdict_label(head, sizeof(head), h);
		mb_verdict_saved_text(saved, sizeof(saved), h);
		mb_verdict_status_text(status, sizeof(status), h);
		fprintf(out, "row %s [%s]: %s -> %s (%s%s%s)\n", mb_print_terminal_safe(e_row, sizeof(e_row), h->row),
			mb_print_terminal_safe(e_status, sizeof(e_status), status),
			mb_print_terminal_safe(e_base, sizeof(e_base), base), mb_print_terminal_safe(e_head, sizeof(e_head), head),
			mb_print_terminal_safe(e_reason, sizeof(e_reason), h->reason),
			h->saved_basis == MB_SAVED_NONE ? "" : "; saved ", h->saved_basis == MB_SAVED_NONE ? "" : saved);
	}
}

static int table_diff(FILE *out, const mb_diff *d, mb_error *err)
{
	char headline[MB_DIFF_TEXT_MAX], gate[MB_DIFF_TEXT_MAX];
	table t = {.ncols = DIFF_COLS};
	size_t *order = NULL;
	int rc = 0;

	char e_base[ESCAPED_MAX], e_head[ESCAPED_MAX], e_gate[ESCAPED_MAX], e_text[ESCAPED_MAX];

	fprintf(out, "base %s  head %s%s\n", mb_print_terminal_safe(e_base, sizeof(e_base), mb_text_revision(d->base, d->base_name)),
		mb_print_terminal_safe(e_head, sizeof(e_head), mb_text_revision(d->head, d->head_name)), d->forced ? "  FORCED" : "");
	mb_diff_headline(d, headline, sizeof(headline));
	mb_diff_gate_reason(d, gate, sizeof(gate));
	mb_print_terminal_safe(e_gate, sizeof(e_gate), gate);
	if (mb_diff_refused(d)) {
		fprintf(out, "%s\ngate: exit %d, %s\n", headline, mb_diff_gate_exit(d), e_gate);
		return 0;
	}
	order = malloc((d->n_cases ? d->n_cases : 1) * sizeof(*order));
	if (!order) {
		rc = mb_error_set(err, MB_ENOMEM, "table", "no memory");
		goto cleanup;
	}
	mb_print_case_order(order, d);
	{
		const char *hdr[DIFF_COLS] = {"case (paste into run --filter)", "base", "head", "change", "interval",
			"verdict"};

		if ((rc = table_row(&t, hdr)))
			goto nomem;
	}
	for (size_t i = 0; i < d->n_cases; i++) {
		const mb_case_diff *cd = &d->cases[order[i]];
		char base[32], head[32], change[64] = "-", ci[64] = "";
		char verdict[MB_PRINT_VERDICT_MAX + 64];
		const char *vals[DIFF_COLS];

		mb_text_duration(base, sizeof(base), cd->base ? mb_text_median_ns(cd->base) : NAN);
		mb_text_duration(head, sizeof(head), cd->head ? mb_text_median_ns(cd->head) : NAN);
		if (cd->compared && cd->cmp.identical_code && !cd->cmp.machine_changed)
			snprintf(change, sizeof(change), "identical code");
		else if (cd->compared && cd->cmp.have_stats) {
			mb_print_change(change, sizeof(change), cd->cmp.shift.ratio);
			if (cd->cmp.shift.ci_available)
				snprintf(ci, sizeof(ci), "[%+.1f%%, %+.1f%%]", 100.0 * (cd->cmp.shift.ratio_lo - 1.0),
					100.0 * (cd->cmp.shift.ratio_hi - 1.0));
		}
		mb_print_case_verdict(verdict, sizeof(verdict), cd);
		if (mb_print_case_reason_shown(cd)) {
			size_t used = strlen(verdict);

			snprintf(verdict + used, sizeof(verdict) - used, ": %.60s", cd->cmp.reason);
		}
		vals[0] = cd->id;
		vals[1] = base;
		vals[2] = head;
		vals[3] = change;
		vals[4] = ci;
		vals[5] = verdict;
		if ((rc = table_row(&t, vals)))
			goto nomem;
	}
	table_print(out, &t);
	for (size_t i = 0; i < d->n_findings; i++) {
		const mb_finding *f = &d->findings[i];

		if (f->kind == MB_FINDING_REGRESSION || f->kind == MB_FINDING_AMBIGUOUS
			|| f->kind == MB_FINDING_AMBIGUOUS_FASTER)
			continue; /* in the table */
		fprintf(out, "%s %s: %s: ", f->fails ? "FAIL" : "note", mb_finding_kind_name(f->kind),
			mb_print_terminal_safe(e_text, sizeof(e_text), f->subject));
		fprintf(out, "%s\n", mb_print_terminal_safe(e_text, sizeof(e_text), f->message));
	}
	diff_row_verdicts(out, d);
	fprintf(out, "gate: exit %d, %s\n", mb_diff_gate_exit(d), e_gate);
	fprintf(out, "%s\n", headline);
	goto cleanup;
nomem:
	rc = mb_error_set(err, MB_ENOMEM, "table", "no memory");
cleanup:
	free(order);
	free(t.cells);
	return rc;
}

static int table_verdicts(FILE *out, const mb_verdict_set *set, const json_t *receipt, const char *name,
	const mb_policy *policy, mb_error *err)
{
	enum { VERDICT_COLS = COLS };
	table t = {.ncols = VERDICT_COLS};
	const char *hdr[VERDICT_COLS] = {"row", "block", "status", "verdict", "saved", "speedup at the largest shape",
		"vs fallback", "memory", "why"};
	int rc;
	char e_rev[ESCAPED_MAX], e_dev[ESCAPED_MAX];

	(void)policy;
	fprintf(out, "%s on %s\n", mb_print_terminal_safe(e_rev, sizeof(e_rev), mb_text_revision(receipt, name)),
		mb_print_terminal_safe(e_dev, sizeof(e_dev), json_string_value(json_object_get(json_object_get(receipt, "device"), "name"))));
	if (set->lanes_present)
		fprintf(out, "note: %s\n", mb_print_terminal_safe(e_rev, sizeof(e_rev), set->lanes_note));
	if ((rc = table_row(&t, hdr)))
		goto cleanup;
	for (size_t i = 0; i < set->n_rows; i++) {
		const mb_row_verdict *v = &set->rows[i];
		char saved[CELL_MAX], verdict[CELL_MAX], speedup[CELL_MAX], fallback[CELL_MAX], memory[CELL_MAX];
		char status[CELL_MAX];
		const char *vals[VERDICT_COLS];

		mb_verdict_label(verdict, sizeof(verdict), v);
		mb_verdict_saved_text(saved, sizeof(saved), v);
		mb_verdict_speedup_text(speedup, sizeof(speedup), v);
		mb_verdict_fallback_text(fallback, sizeof(fallback), v);
		mb_verdict_memory_text(memory, sizeof(memory), v);
		mb_verdict_status_text(status, sizeof(status), v);
		vals[0] = v->row;
		vals[1] = v->block;
		vals[2] = status;
		vals[3] = verdict;
		vals[4] = saved;
		vals[5] = speedup;
		vals[6] = fallback;
		vals[7] = memory;
		vals[8] = v->reason;
		if ((rc = table_row(&t, vals)))
			goto cleanup;
	}
	table_print(out, &t);
	mb_print_lanes(out, receipt, MB_PRINT_TEXT);
cleanup:
	if (rc)
		mb_error_set(err, MB_ENOMEM, "table", "no memory");
	free(t.cells);
	return rc;
}

const mb_printer mb_printer_table = {"table", table_diff, table_verdicts};
