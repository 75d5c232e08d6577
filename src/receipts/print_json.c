/* JSON for machines: everything the diff or verdict computed, with the
 * effective policy copied in. NaN (no value) becomes null. */
#include <math.h>
#include <string.h>

#include "receipts/printer.h"
#include "receipts/text.h"

#define JSON_FLAGS (JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10))

static json_t *side(const json_t *receipt, const char *name)
{
	const json_t *prov = json_object_get(receipt, "provenance");
	const json_t *commit = json_object_get(prov, "commit");

	return json_pack("{s:s?, s:O?, s:s?, s:s?, s:s?}", "file", name, "commit", commit,
		"describe", json_string_value(json_object_get(prov, "describe")),
		"device", json_string_value(json_object_get(json_object_get(receipt, "device"), "name")),
		"backend", json_string_value(json_object_get(receipt, "backend")));
}

static json_t *comparison_json(const mb_comparison *c)
{
	json_t *o = json_pack("{s:s, s:s?, s:s?, s:b, s:b, s:b}", "class", mb_cmp_class_name(c->cls),
		"why", c->why == MB_WHY_NONE ? NULL : mb_cmp_why_name(c->why),
		"direction", c->direction == MB_DIR_NONE ? NULL : mb_cmp_direction_name(c->direction),
		"identical_code", c->identical_code, "machine_changed", c->machine_changed, "statistics", c->have_stats);

	if (c->have_stats) {
		json_object_set_new(o, "ratio", mb_json_real_or_null(c->shift.ratio));
		json_object_set_new(o, "ratio_lo", c->shift.ci_available ? mb_json_real_or_null(c->shift.ratio_lo) : json_null());
		json_object_set_new(o, "ratio_hi", c->shift.ci_available ? mb_json_real_or_null(c->shift.ratio_hi) : json_null());
		json_object_set_new(o, "p", mb_json_real_or_null(c->test.p_two_sided));
		json_object_set_new(o, "u", mb_json_real_or_null(c->test.u));
		json_object_set_new(o, "exact", json_boolean(c->test.exact));
		json_object_set_new(o, "base_n", json_integer((json_int_t)c->base.n));
		json_object_set_new(o, "head_n", json_integer((json_int_t)c->head.n));
		json_object_set_new(o, "base_rel_noise", mb_json_real_or_null(c->base.rel_noise));
		json_object_set_new(o, "head_rel_noise", mb_json_real_or_null(c->head.rel_noise));
		json_object_set_new(o, "base_cv", mb_json_real_or_null(c->base.cv));
		json_object_set_new(o, "head_cv", mb_json_real_or_null(c->head.cv));
		json_object_set_new(o, "effect", mb_json_real_or_null(c->effect));
		json_object_set_new(o, "tail", json_pack("{s:f, s:o, s:o, s:o, s:o, s:o}", "quantile", c->tail.x.p,
			"base_ns", mb_json_real_or_null(c->tail.x.value), "head_ns", mb_json_real_or_null(c->tail.y.value), "ratio", mb_json_real_or_null(c->tail.ratio),
			"ratio_lo", c->tail.ci_available ? mb_json_real_or_null(c->tail.ratio_lo) : json_null(),
			"ratio_hi", c->tail.ci_available ? mb_json_real_or_null(c->tail.ratio_hi) : json_null()));
		json_object_set_new(o, "repetitions", !c->reps.used ? json_null()
			: json_pack("{s:I, s:I, s:o, s:o, s:o, s:o, s:o}", "base_n", (json_int_t)c->reps.n_base,
				"head_n", (json_int_t)c->reps.n_head, "ratio", mb_json_real_or_null(c->reps.ratio),
				"base_noise", mb_json_real_or_null(c->reps.base_noise), "head_noise", mb_json_real_or_null(c->reps.head_noise),
				"pooled_noise", mb_json_real_or_null(c->reps.pooled_noise), "threshold", mb_json_real_or_null(c->reps.threshold)));
	}
	json_object_set_new(o, "reason", json_string(c->reason));
	return o;
}

static json_t *str_or_null(bool present, const char *s)
{
	return present ? json_string(s) : json_null();
}

/* One pair: the fused case against its best alternative, its class and
 * outcome, measured and model speedups, the fallback's speedup, scratch
 * memory on both sides, and what it saves per call. */
static json_t *pair_json(const mb_verdict_pair *p)
{
	char shape[MB_VERDICT_SHAPE_MAX];
	bool model = p->model_basis != MB_MODEL_NONE;
	json_t *o;

	mb_verdict_shape_label(shape, sizeof(shape), p->fused);
	o = json_pack("{s:s?, s:s?, s:s?, s:s, s:s}", "fused", json_string_value(json_object_get(p->fused, "id")),
		"dtype", json_string_value(json_object_get(p->fused, "dtype")),
		"mode", json_string_value(json_object_get(p->fused, "mode")), "shape", shape,
		"class", mb_cmp_class_name(p->cmp.cls));
	json_object_set_new(o, "alternative", json_string(mb_text_get(p->alt, "variant")));
	json_object_set_new(o, "outcome", json_string(mb_verdict_outcome_name(p->outcome)));
	json_object_set_new(o, "speedup", mb_json_real_or_null(p->speedup));
	json_object_set_new(o, "fallback", p->fallback ? json_string(mb_text_get(p->fallback, "variant")) : json_null());
	json_object_set_new(o, "speedup_vs_fallback", mb_json_real_or_null(p->speedup_fallback));
	json_object_set_new(o, "fused_scratch_bytes", p->fused_scratch_bytes >= 0 ? json_integer(p->fused_scratch_bytes)
		: json_null());
	json_object_set_new(o, "alternative_scratch_bytes", p->alt_scratch_bytes >= 0
		? json_integer(p->alt_scratch_bytes) : json_null());
	json_object_set_new(o, "model_speedup", model ? mb_json_real_or_null(p->model_speedup) : json_null());
	json_object_set_new(o, "model_basis", str_or_null(model, mb_verdict_model_basis_name(p->model_basis)));
	json_object_set_new(o, "saved_ns_per_call", mb_json_real_or_null(p->saved_ns_per_call));
	json_object_set_new(o, "weight", mb_json_real_or_null(p->weight));
	json_object_set_new(o, "weight_explicit", json_boolean(p->weight_explicit));
	return o;
}

/* A row verdict. "verdict" is the kind word; "evidence" says what it rests
 * on ("isolated" until receipts carry lanes) and "label" is the verdict as
 * the other printers show it ("keep (isolated evidence only)"). The saving
 * is in saved_ns_per_step or saved_ns_per_call (saved_basis says which; both
 * null for rows that save nothing), in saved_mode and saved_dtype. */
static json_t *row_json(const mb_row_verdict *v)
{
	char label[MB_VERDICT_TEXT_MAX + 32];
	bool saved = v && v->saved_basis != MB_SAVED_NONE;
	bool picked = v && v->saved_mode[0];
	json_t *o, *pairs;

	if (!v)
		return json_null();
	mb_verdict_label(label, sizeof(label), v);
	o = json_pack("{s:s, s:s, s:s, s:s, s:s}", "row", v->row, "block", v->block,
		"verdict", mb_verdict_kind_name(v->kind), "evidence", mb_verdict_evidence_name(v->evidence),
		"label", label);
	json_object_set_new(o, "condition", str_or_null(v->kind == MB_VERDICT_CONDITIONAL, v->condition));
	json_object_set_new(o, "trades", json_string(mb_verdict_trade_name(v->trade)));
	json_object_set_new(o, "best_alternative", str_or_null(v->best_alt[0], v->best_alt));
	json_object_set_new(o, "memory_saved_bytes", mb_json_real_or_null(v->memory_saved_bytes));
	json_object_set_new(o, "memory_saved_fraction", mb_json_real_or_null(v->memory_saved_fraction));
	json_object_set_new(o, "status", str_or_null(v->status[0], v->status));
	json_object_set_new(o, "status_condition", str_or_null(v->status_condition[0], v->status_condition));
	json_object_set_new(o, "status_agrees", json_boolean(v->status_agrees));
	json_object_set_new(o, "status_note", json_string(v->status_note));
	json_object_set_new(o, "reason", json_string(v->reason));
	json_object_set_new(o, "families_won", json_string(v->families));
	json_object_set_new(o, "pairs", json_integer((json_int_t)v->n_pairs));
	json_object_set_new(o, "saved_basis", str_or_null(saved, mb_verdict_saved_basis_name(v->saved_basis)));
	json_object_set_new(o, "saved_ns_per_step", v->saved_basis == MB_SAVED_PER_STEP ? mb_json_real_or_null(v->saved_ns) : json_null());
	json_object_set_new(o, "saved_ns_per_call", v->saved_basis == MB_SAVED_PER_CALL ? mb_json_real_or_null(v->saved_ns) : json_null());
	json_object_set_new(o, "saved_mode", str_or_null(picked, v->saved_mode));
	json_object_set_new(o, "saved_dtype", str_or_null(picked, v->saved_dtype));
	json_object_set_new(o, "saved_shape", str_or_null(saved && v->saved_shape[0], v->saved_shape));
	json_object_set_new(o, "saved_unweighted_pairs", saved ? json_integer((json_int_t)v->saved_unweighted)
		: json_null());
	json_object_set_new(o, "largest", v->largest ? pair_json(v->largest) : json_null());
	pairs = json_array();
	for (size_t i = 0; i < v->n_pairs; i++)
		json_array_append_new(pairs, pair_json(&v->pairs[i]));
	json_object_set_new(o, "pair_results", pairs);
	return o;
}

static int dump(FILE *out, json_t *doc, mb_error *err)
{
	int rc = 0;

	if (!doc)
		return mb_error_set(err, MB_ENOMEM, "json", "no memory");
	if (json_dumpf(doc, out, JSON_FLAGS))
		rc = mb_error_set(err, MB_EIO, "json", "write failed");
	fputc('\n', out);
	json_decref(doc);
	return rc;
}

/* Each status check of the head (promotion.h). */
static json_t *promotions_json(const mb_diff *d)
{
	json_t *a = json_array();

	for (size_t i = 0; i < d->n_promotions; i++) {
		const mb_promotion *p = &d->promotions[i];

		json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:s, s:b, s:b, s:s}", "row", p->row,
			"base_status", p->base_status[0] ? p->base_status : "unknown", "head_status", p->head_status,
			"condition", p->condition, "supported", p->supported, "demotion", p->demotion,
			"message", p->message));
	}
	return a;
}

static int json_diff(FILE *out, const mb_diff *d, mb_error *err)
{
	char headline[MB_DIFF_TEXT_MAX], gate[MB_DIFF_TEXT_MAX];
	json_t *doc, *cases = json_array(), *findings = json_array(), *rows = json_array();

	mb_diff_headline(d, headline, sizeof(headline));
	mb_diff_gate_reason(d, gate, sizeof(gate));
	doc = json_pack("{s:s, s:b, s:b, s:s, s:s, s:o, s:o, s:o}", "kind", "megabench.diff",
		"comparable", d->comparable, "forced", d->forced, "reasons", d->reasons, "headline", headline,
		"base", side(d->base, d->base_name), "head", side(d->head, d->head_name),
		"policy", mb_policy_to_json(d->policy));
	json_object_set_new(doc, "inconsistent", json_boolean(d->inconsistent));
	json_object_set_new(doc, "gate_exit", json_integer(mb_diff_gate_exit(d)));
	json_object_set_new(doc, "gate_reason", json_string(gate));
	json_object_set_new(doc, "cases_not_shown", json_integer((json_int_t)d->n_hidden));
	json_object_set_new(doc, "counts", json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "slower",
		(json_int_t)d->n_slower, "faster", (json_int_t)d->n_faster, "same", (json_int_t)d->n_same,
		"ambiguous", (json_int_t)d->n_ambiguous, "machine_changed", (json_int_t)d->n_machine_changed,
		"wrong_answers", (json_int_t)d->n_wrong, "still_wrong", (json_int_t)d->n_still_wrong));
	for (size_t i = 0; i < d->n_cases; i++) {
		const mb_case_diff *cd = &d->cases[i];
		const json_t *c = mb_print_case_of(cd);
		char verdict[MB_PRINT_VERDICT_MAX];
		json_t *o;

		mb_print_case_verdict(verdict, sizeof(verdict), cd);
		o = json_pack("{s:s, s:s?, s:s?, s:s?, s:s?, s:s?, s:O?, s:s, s:b}", "id", cd->id,
			"row", json_string_value(json_object_get(c, "row")),
			"variant", json_string_value(json_object_get(c, "variant")),
			"dtype", json_string_value(json_object_get(c, "dtype")),
			"mode", json_string_value(json_object_get(c, "mode")),
			"family", json_string_value(json_object_get(c, "family")),
			"shape", json_object_get(c, "shape"), "verdict", verdict, "wrong_answer", cd->wrong_answer);
		json_object_set_new(o, "still_wrong", json_boolean(cd->still_wrong));
		json_object_set_new(o, "status_changed", json_boolean(cd->status_changed));
		json_object_set_new(o, "fields_missing", json_boolean(cd->fields_missing));
		json_object_set_new(o, "base_median_ns", cd->base ? mb_json_real_or_null(mb_text_median_ns(cd->base)) : json_null());
		json_object_set_new(o, "head_median_ns", cd->head ? mb_json_real_or_null(mb_text_median_ns(cd->head)) : json_null());
		json_object_set_new(o, "comparison", cd->compared ? comparison_json(&cd->cmp) : json_null());
		json_array_append_new(cases, o);
	}
	for (size_t i = 0; i < d->n_findings; i++)
		json_array_append_new(findings, json_pack("{s:s, s:s, s:s, s:b}",
			"kind", mb_finding_kind_name(d->findings[i].kind), "subject", d->findings[i].subject,
			"message", d->findings[i].message, "fails_gate", d->findings[i].fails));
	for (size_t i = 0; i < d->head_verdicts.n_rows; i++) {
		const mb_row_verdict *h = &d->head_verdicts.rows[i];

		json_array_append_new(rows, json_pack("{s:s, s:o, s:o}", "row", h->row,
			"base", row_json(mb_verdict_find(&d->base_verdicts, h->row)), "head", row_json(h)));
	}
	json_object_set_new(doc, "cases", cases);
	json_object_set_new(doc, "findings", findings);
	json_object_set_new(doc, "rows", rows);
	json_object_set_new(doc, "promotions", promotions_json(d));
	return dump(out, doc, err);
}

static int json_verdicts(FILE *out, const mb_verdict_set *set, const json_t *receipt, const char *name,
	const mb_policy *policy, mb_error *err)
{
	json_t *rows = json_array();
	json_t *doc = json_pack("{s:s, s:o, s:o}", "kind", "megabench.verdict", "receipt", side(receipt, name),
		"policy", mb_policy_to_json(policy));

	for (size_t i = 0; i < set->n_rows; i++)
		json_array_append_new(rows, row_json(&set->rows[i]));
	json_object_set_new(doc, "lanes_note", set->lanes_present ? json_string(set->lanes_note) : json_null());
	json_object_set_new(doc, "rows", rows);
	return dump(out, doc, err);
}

const mb_printer mb_printer_json = {"json", json_diff, json_verdicts};
