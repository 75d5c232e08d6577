/* Markdown for pull-request comments: a headline, a compact table of what
 * changed (regressions first), unchanged cases folded away, findings, row
 * verdicts, and any policy values that differ from the defaults. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "receipts/printer.h"
#include "receipts/text.h"

#define POLICY_TEXT_MAX 2048
/* Rank of the first unchanged case in mb_print_case_rank. */
#define RANK_SAME 6

/* `s` as a code span: a fence longer than any run of backticks inside it,
 * padded when it starts or ends with one; control characters as spaces.
 * Nothing inside a code span is markup, so nothing else needs escaping. */
static void code_span(FILE *out, const char *s)
{
	size_t run = 0, longest = 0, n = s ? strlen(s) : 0, i;
	bool pad = n && (s[0] == '`' || s[n - 1] == '`');

	for (i = 0; i < n; i++) {
		run = s[i] == '`' ? run + 1 : 0;
		longest = run > longest ? run : longest;
	}
	for (i = 0; i <= longest; i++)
		fputc('`', out);
	if (pad)
		fputc(' ', out);
	for (i = 0; i < n; i++)
		fputc((unsigned char)s[i] < 0x20 || s[i] == 0x7F ? ' ' : s[i], out);
	if (pad)
		fputc(' ', out);
	for (i = 0; i <= longest; i++)
		fputc('`', out);
}

static void policy_note(FILE *out, const mb_policy *policy)
{
	char text[POLICY_TEXT_MAX];
	char *line, *save = NULL;

	mb_policy_describe_changes(policy, text, sizeof(text));
	if (!text[0])
		return;
	fputs("\nPolicy (", out);
	mb_print_md_cell(out, policy->source);
	fputs("), non-default values:\n", out);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		fputs("- ", out);
		code_span(out, line);
		fputc('\n', out);
	}
}

/* A case id as it pastes into `run --filter`: a code span, so that no
 * character of it reads as markup; an id a code span cannot hold in a
 * table cell (a pipe, a backtick, a backslash) is escaped text instead. */
static void id_cell(FILE *out, const char *id)
{
	if (strpbrk(id, "|`\\"))
		mb_print_md_cell(out, id);
	else
		code_span(out, id);
}

static void case_line(FILE *out, const mb_case_diff *cd)
{
	char base[32], head[32], change[96], verdict[MB_PRINT_VERDICT_MAX];

	mb_text_duration(base, sizeof(base), cd->base ? mb_text_median_ns(cd->base) : NAN);
	mb_text_duration(head, sizeof(head), cd->head ? mb_text_median_ns(cd->head) : NAN);
	if (!cd->compared)
		snprintf(change, sizeof(change), "%s", cd->head ? "new" : "missing");
	else if (cd->cmp.identical_code && !cd->cmp.machine_changed)
		snprintf(change, sizeof(change), "identical code");
	else if (!cd->cmp.have_stats)
		snprintf(change, sizeof(change), "-");
	else
		mb_print_change(change, sizeof(change), cd->cmp.shift.ratio);
	mb_print_case_verdict(verdict, sizeof(verdict), cd);
	fputs("| ", out);
	id_cell(out, cd->id);
	fprintf(out, " | %s | %s | %s | %s", base, head, change, verdict);
	/* why, where the word alone does not say */
	if (mb_print_case_reason_shown(cd)) {
		fputs(": ", out);
		mb_print_md_cell(out, cd->cmp.reason);
	}
	fputs(" |\n", out);
}

static void table_header(FILE *out)
{
	fputs("| case (row/variant/dtype/mode/family/shape) | base | head | change | verdict |\n", out);
	fputs("|---|---:|---:|---:|---|\n", out);
}

static void verdict_cell(FILE *out, const mb_row_verdict *v)
{
	char label[MB_VERDICT_TEXT_MAX + 32];

	mb_verdict_label(label, sizeof(label), v);
	mb_print_md_cell(out, label);
}

/* The cells of a row verdict line from the verdict on: verdict, time saved
 * (per step or per call, "-" when none), speedup against the best
 * alternative at the largest shape, against the fallback there, memory
 * against the best alternative, and why. The diff's row section and the
 * verdict table share them so that a row reads the same in both. */
static void verdict_cells(FILE *out, const mb_row_verdict *v)
{
	char saved[MB_VERDICT_TEXT_MAX], speedup[MB_VERDICT_TEXT_MAX], fallback[MB_VERDICT_TEXT_MAX];
	char memory[MB_VERDICT_TEXT_MAX];

	mb_verdict_saved_text(saved, sizeof(saved), v);
	mb_verdict_speedup_text(speedup, sizeof(speedup), v);
	mb_verdict_fallback_text(fallback, sizeof(fallback), v);
	mb_verdict_memory_text(memory, sizeof(memory), v);
	verdict_cell(out, v);
	fputs(" | ", out);
	mb_print_md_cell(out, saved);
	fputs(" | ", out);
	mb_print_md_cell(out, speedup);
	fputs(" | ", out);
	mb_print_md_cell(out, fallback);
	fputs(" | ", out);
	mb_print_md_cell(out, memory);
	fputs(" | ", out);
	mb_print_md_cell(out, v->reason);
	fputs(" |\n", out);
}

/* The row's catalog status, flagged where the verdict disagrees. */
static void status_cell(FILE *out, const mb_row_verdict *v)
{
	char status[MB_VERDICT_TEXT_MAX * 2 + 32];

	mb_verdict_status_text(status, sizeof(status), v);
	mb_print_md_cell(out, status);
	fputs(" | ", out);
}

static void rows_section(FILE *out, const mb_diff *d)
{
	const mb_verdict_set *h = &d->head_verdicts, *b = &d->base_verdicts;
	json_t *base_rows;
	bool any_pair = false;

	for (size_t i = 0; i < h->n_rows; i++)
		any_pair |= h->rows[i].n_pairs > 0;
	for (size_t i = 0; i < b->n_rows; i++)
		any_pair |= b->rows[i].n_pairs > 0;
	fputs("\n### Row verdicts (fused against its best alternative)\n\n", out);
	if (!any_pair) {
		fputs("Not enough evidence for any row: no fused case with an alternative in either receipt.\n", out);
		return;
	}
	fputs("| row | status (head) | base | head | saved (head) | speedup at the largest shape (head) | "
		"vs fallback | memory | why |\n|---|---|---|---|---:|---|---|---|---|\n", out);
	/* the base verdicts by row, looked up once per head row */
	base_rows = json_object();
	for (size_t i = 0; base_rows && i < b->n_rows; i++)
		if (b->rows[i].row && !json_object_get(base_rows, b->rows[i].row))
			json_object_set_new(base_rows, b->rows[i].row, json_integer((json_int_t)i));
	for (size_t i = 0; i < h->n_rows; i++) {
		const mb_row_verdict *v = &h->rows[i];
		const json_t *at = json_object_get(base_rows, v->row);
		/* without memory for the index, the slow way */
		const mb_row_verdict *in_base = !base_rows ? mb_verdict_find(b, v->row)
			: at ? &b->rows[json_integer_value(at)] : NULL;

		fputs("| ", out);
		mb_print_md_cell(out, v->row);
		fputs(" | ", out);
		status_cell(out, v);
		verdict_cell(out, in_base);
		fputs(" | ", out);
		verdict_cells(out, v);
	}
	json_decref(base_rows);
}

/* The head's status claims against its own evidence; nothing when no row
 * claims keep or conditional and none changed status. */
static void promotions_section(FILE *out, const mb_diff *d)
{
	if (!d->n_promotions)
		return;
	fputs("\n### Catalog status against the head's evidence\n\n| row | base status | head status | check |\n"
		"|---|---|---|---|\n", out);
	for (size_t i = 0; i < d->n_promotions; i++) {
		const mb_promotion *p = &d->promotions[i];

		fputs("| ", out);
		mb_print_md_cell(out, p->row);
		fputs(" | ", out);
		mb_print_md_cell(out, p->base_status[0] ? p->base_status : "unknown");
		fputs(" | ", out);
		mb_print_md_cell(out, p->head_status);
		if (p->condition[0]) {
			fputs(" (", out);
			mb_print_md_cell(out, p->condition);
			fputs(")", out);
		}
		fprintf(out, " | %s: ", p->demotion ? "demotion" : p->unchecked ? "not checked"
			: !p->claims ? "no claim" : p->supported ? "supported"
			: "**unsupported**");
		mb_print_md_cell(out, p->message);
		fputs(" |\n", out);
	}
}

static int md_diff(FILE *out, const mb_diff *d, mb_error *err)
{
	char headline[MB_DIFF_TEXT_MAX], gate[MB_DIFF_TEXT_MAX];
	size_t *order = NULL, n_same = 0;
	bool any_finding = false;

	fputs("## megabench diff: ", out);
	mb_print_md_cell(out, mb_text_revision(d->base, d->base_name));
	fputs(" -> ", out);
	mb_print_md_cell(out, mb_text_revision(d->head, d->head_name));
	fprintf(out, "%s\n\n", d->forced ? " (FORCED)" : "");
	mb_diff_headline(d, headline, sizeof(headline));
	fputs("**", out);
	mb_print_md_cell(out, headline);
	fputs("**\n", out);
	/* a refusal's reasons follow in full below */
	if (mb_diff_refused(d))
		snprintf(gate, sizeof(gate), "inconclusive: %s", d->inconsistent ? "inconsistent receipt" : "not comparable");
	else
		mb_diff_gate_reason(d, gate, sizeof(gate));
	fputs("\nGate: exit ", out);
	fprintf(out, "%d, ", mb_diff_gate_exit(d));
	mb_print_md_cell(out, gate);
	fputs(".\n", out);
	if (d->inconsistent) {
		fputs("\nRefused (--force does not override this): ", out);
		mb_print_md_cell(out, d->reasons);
		fputs(".\n", out);
		policy_note(out, d->policy);
		return 0;
	}
	if (!d->comparable) {
		fprintf(out, "\n%s: ", d->forced ? "FORCED comparison of incomparable receipts"
			: "The receipts are not comparable");
		mb_print_md_cell(out, d->reasons);
		fputs(".\n", out);
		if (!d->forced) {
			policy_note(out, d->policy);
			return 0;
		}
	}
	order = malloc((d->n_cases ? d->n_cases : 1) * sizeof(*order));
	if (!order)
		return mb_error_set(err, MB_ENOMEM, "markdown", "no memory");
	mb_print_case_order(order, d);
	for (size_t i = 0; i < d->n_cases; i++)
		n_same += mb_print_case_rank(&d->cases[order[i]]) == RANK_SAME;
	fputs("\n", out);
	if (n_same < d->n_cases) {
		table_header(out);
		for (size_t i = 0; i < d->n_cases; i++)
			if (mb_print_case_rank(&d->cases[order[i]]) != RANK_SAME)
				case_line(out, &d->cases[order[i]]);
	} else {
		fputs("No case changed.\n", out);
	}
	if (n_same) {
		fprintf(out, "\n<details><summary>%zu unchanged case%s</summary>\n\n", n_same, n_same == 1 ? "" : "s");
		table_header(out);
		for (size_t i = 0; i < d->n_cases; i++)
			if (mb_print_case_rank(&d->cases[order[i]]) == RANK_SAME)
				case_line(out, &d->cases[order[i]]);
		fputs("\n</details>\n", out);
	}
	for (size_t i = 0; i < d->n_findings; i++) {
		const mb_finding *f = &d->findings[i];

		if (f->kind == MB_FINDING_REGRESSION || f->kind == MB_FINDING_AMBIGUOUS
			|| f->kind == MB_FINDING_AMBIGUOUS_FASTER || f->kind == MB_FINDING_NEW_CASE)
			continue; /* already in the table */
		if (!any_finding)
			fputs("\n### Findings\n\n", out);
		any_finding = true;
		fprintf(out, "- %s ", mb_finding_kind_name(f->kind));
		code_span(out, f->subject);
		fputs(": ", out);
		mb_print_md_cell(out, f->message);
		fprintf(out, "%s\n", f->fails ? " (fails the gate)" : "");
	}
	rows_section(out, d);
	promotions_section(out, d);
	policy_note(out, d->policy);
	free(order);
	return 0;
}

static int md_verdicts(FILE *out, const mb_verdict_set *set, const json_t *receipt, const char *name,
	const mb_policy *policy, mb_error *err)
{
	(void)err;
	fputs("## megabench verdict: ", out);
	mb_print_md_cell(out, mb_text_revision(receipt, name));
	fputs(" (", out);
	mb_print_md_cell(out, json_string_value(json_object_get(json_object_get(receipt, "device"), "name")));
	fputs(")\n\n", out);
	if (set->lanes_present) {
		fputs("Note: ", out);
		mb_print_md_cell(out, set->lanes_note);
		fputs(".\n\n", out);
	}
	fputs("| row | block | status | verdict | saved | speedup at the largest shape | vs fallback | memory | why |\n"
		"|---|---|---|---|---:|---|---|---|---|\n", out);
	for (size_t i = 0; i < set->n_rows; i++) {
		fputs("| ", out);
		mb_print_md_cell(out, set->rows[i].row);
		fputs(" | ", out);
		mb_print_md_cell(out, set->rows[i].block);
		fputs(" | ", out);
		status_cell(out, &set->rows[i]);
		verdict_cells(out, &set->rows[i]);
	}
	mb_print_lanes(out, receipt, MB_PRINT_MARKDOWN);
	policy_note(out, policy);
	return 0;
}

const mb_printer mb_printer_markdown = {"markdown", md_diff, md_verdicts};
