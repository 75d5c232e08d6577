/* CSV (RFC 4180 quoting) for spreadsheets: one line per case or row. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "receipts/printer.h"
#include "receipts/text.h"

void mb_print_csv_field(FILE *out, const char *s, bool last)
{
	bool quote = s && strpbrk(s, ",\"\n\r");

	if (quote)
		fputc('"', out);
	for (; s && *s; s++) {
		if (*s == '"')
			fputc('"', out);
		fputc(*s, out);
	}
	if (quote)
		fputc('"', out);
	fputc(last ? '\n' : ',', out);
}

static void number(FILE *out, double v, bool last)
{
	char buf[64] = "";

	if (isfinite(v))
		snprintf(buf, sizeof(buf), "%.10g", v);
	mb_print_csv_field(out, buf, last);
}

static int csv_diff(FILE *out, const mb_diff *d, mb_error *err)
{
	size_t *order = malloc((d->n_cases ? d->n_cases : 1) * sizeof(*order));

	if (!order)
		return mb_error_set(err, MB_ENOMEM, "csv", "no memory");
	mb_print_case_order(order, d);
	fprintf(out, "id,row,variant,dtype,mode,shape,base_median_ns,head_median_ns,ratio,ratio_lo,ratio_hi,p,"
		"p90_ratio,p90_ratio_lo,p90_ratio_hi,effect,verdict,identical_code,machine_changed,why,reason,forced\n");
	for (size_t i = 0; i < d->n_cases && !mb_diff_refused(d); i++) {
		const mb_case_diff *cd = &d->cases[order[i]];
		const json_t *c = mb_print_case_of(cd);
		bool stats = cd->compared && cd->cmp.have_stats;
		bool ci = stats && cd->cmp.shift.ci_available;
		bool tail_ci = stats && cd->cmp.tail.ci_available;
		char shape[256], verdict[MB_PRINT_VERDICT_MAX];

		mb_verdict_shape_label(shape, sizeof(shape), c);
		mb_print_case_verdict(verdict, sizeof(verdict), cd);
		mb_print_csv_field(out, cd->id, false);
		mb_print_csv_field(out, json_string_value(json_object_get(c, "row")), false);
		mb_print_csv_field(out, json_string_value(json_object_get(c, "variant")), false);
		mb_print_csv_field(out, json_string_value(json_object_get(c, "dtype")), false);
		mb_print_csv_field(out, json_string_value(json_object_get(c, "mode")), false);
		mb_print_csv_field(out, shape, false);
		number(out, cd->base ? mb_text_median_ns(cd->base) : NAN, false);
		number(out, cd->head ? mb_text_median_ns(cd->head) : NAN, false);
		number(out, stats ? cd->cmp.shift.ratio : NAN, false);
		number(out, ci ? cd->cmp.shift.ratio_lo : NAN, false);
		number(out, ci ? cd->cmp.shift.ratio_hi : NAN, false);
		number(out, stats ? cd->cmp.test.p_two_sided : NAN, false);
		number(out, stats ? cd->cmp.tail.ratio : NAN, false);
		number(out, tail_ci ? cd->cmp.tail.ratio_lo : NAN, false);
		number(out, tail_ci ? cd->cmp.tail.ratio_hi : NAN, false);
		number(out, stats ? cd->cmp.effect : NAN, false);
		mb_print_csv_field(out, verdict, false);
		mb_print_csv_field(out, cd->compared && cd->cmp.identical_code ? "true" : "false", false);
		mb_print_csv_field(out, cd->compared && cd->cmp.machine_changed ? "true" : "false", false);
		mb_print_csv_field(out, cd->compared ? mb_cmp_why_name(cd->cmp.why) : "", false);
		mb_print_csv_field(out, cd->compared ? cd->cmp.reason : "", false);
		mb_print_csv_field(out, d->forced ? "FORCED" : "", true);
	}
	free(order);
	return 0;
}

static int csv_verdicts(FILE *out, const mb_verdict_set *set, const json_t *receipt, const char *name,
	const mb_policy *policy, mb_error *err)
{
	(void)receipt;
	(void)name;
	(void)policy;
	(void)err;
	fprintf(out, "row,block,status,status_agrees,status_note,verdict,evidence,label,condition,families_won,trades,"
		"best_alternative,saved_basis,saved_ns_per_step,saved_ns_per_call,saved_mode,saved_dtype,saved_shape,"
		"largest_shape,speedup,speedup_vs_fallback,model_speedup,model_basis,memory_saved_bytes,reason\n");
	for (size_t i = 0; i < set->n_rows; i++) {
		const mb_row_verdict *v = &set->rows[i];
		const mb_verdict_pair *big = v->largest;
		char label[MB_VERDICT_TEXT_MAX + 32], shape[MB_VERDICT_SHAPE_MAX] = "";
		bool saved = v->saved_basis != MB_SAVED_NONE;

		mb_verdict_label(label, sizeof(label), v);
		if (big)
			mb_verdict_shape_label(shape, sizeof(shape), big->fused);
		mb_print_csv_field(out, v->row, false);
		mb_print_csv_field(out, v->block, false);
		mb_print_csv_field(out, v->status, false);
		mb_print_csv_field(out, v->status_agrees ? "true" : "false", false);
		mb_print_csv_field(out, v->status_note, false);
		mb_print_csv_field(out, mb_verdict_kind_name(v->kind), false);
		mb_print_csv_field(out, mb_verdict_evidence_name(v->evidence), false);
		mb_print_csv_field(out, label, false);
		mb_print_csv_field(out, v->kind == MB_VERDICT_CONDITIONAL ? v->condition : "", false);
		mb_print_csv_field(out, v->families, false);
		mb_print_csv_field(out, mb_verdict_trade_name(v->trade), false);
		mb_print_csv_field(out, v->best_alt, false);
		mb_print_csv_field(out, saved ? mb_verdict_saved_basis_name(v->saved_basis) : "", false);
		number(out, v->saved_basis == MB_SAVED_PER_STEP ? v->saved_ns : NAN, false);
		number(out, v->saved_basis == MB_SAVED_PER_CALL ? v->saved_ns : NAN, false);
		mb_print_csv_field(out, v->saved_mode, false);
		mb_print_csv_field(out, v->saved_dtype, false);
		mb_print_csv_field(out, saved ? v->saved_shape : "", false);
		mb_print_csv_field(out, shape, false);
		number(out, big ? big->speedup : NAN, false);
		number(out, big ? big->speedup_fallback : NAN, false);
		number(out, big && big->model_basis != MB_MODEL_NONE ? big->model_speedup : NAN, false);
		mb_print_csv_field(out, big && big->model_basis != MB_MODEL_NONE ? mb_verdict_model_basis_name(big->model_basis) : "",
			false);
		number(out, v->memory_saved_bytes, false);
		mb_print_csv_field(out, v->reason, true);
	}
	return 0;
}

const mb_printer mb_printer_csv = {"csv", csv_diff, csv_verdicts};
