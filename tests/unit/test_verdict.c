/* Row verdicts within one receipt, on the golden receipts of
 * tests/golden/gate/ edited in memory, and the policy file's parsing. The
 * expected time saved is recomputed here from the receipt's own medians and
 * weights. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "receipts/policy.h"
#include "receipts/receipt_io.h"
#include "receipts/verdict.h"
#include "testutil.h"

static json_t *load(void)
{
	json_t *r = NULL;
	mb_error err;

	if (mb_receipt_load(&r, mb_test_src("tests/golden/gate/regression/base.json"), &err)) {
		fprintf(stderr, "%s: %s\n", err.where, err.text);
		return NULL;
	}
	return r;
}

static json_t *find_case(json_t *r, const char *prefix)
{
	size_t i;
	json_t *c;

	json_array_foreach(json_object_get(r, "cases"), i, c)
		if (!strncmp(json_string_value(json_object_get(c, "id")), prefix, strlen(prefix)))
			return c;
	return NULL;
}

static mb_verdict_kind verdict_of(json_t *r, const char *row, mb_verdict_set *keep)
{
	mb_policy p;
	mb_verdict_set set;
	mb_verdict_kind k = MB_VERDICT_NOT_ENOUGH_EVIDENCE;
	const mb_row_verdict *v;

	mb_policy_defaults(&p);
	CHECK(mb_verdict_compute(&set, r, &p, NULL) == 0);
	v = mb_verdict_find(&set, row);
	CHECK_MSG(v != NULL, "no row %s", row);
	if (v)
		k = v->kind;
	if (keep)
		*keep = set;
	else
		mb_verdict_set_free(&set);
	return k;
}

/* Scale every sample (and the median) of a case's timing. */
static void scale_case(json_t *c, double f)
{
	json_t *t = json_object_get(c, "timing"), *s = json_object_get(t, "samples_ns");
	size_t i;
	json_t *v;

	json_array_foreach(s, i, v)
		json_real_set(v, json_number_value(v) * f);
	json_object_set_new(t, "median_ns", json_real(json_number_value(json_object_get(t, "median_ns")) * f));
}

/* The time saved per step recomputed from the receipt's own medians:
 * weight * (fallback - fused) over every fused case of `row` in `dtype`
 * (NULL: every dtype), each against the fallback case of its shape. */
static double saved_by_hand(json_t *r, const char *row, const char *dtype)
{
	char fused_prefix[64];
	double sum = 0.0;
	size_t i, n = (size_t)snprintf(fused_prefix, sizeof(fused_prefix), "%s/fused/", row);
	json_t *c;

	json_array_foreach(json_object_get(r, "cases"), i, c) {
		const char *id = json_string_value(json_object_get(c, "id"));
		char fb_id[256];
		json_t *fb;

		if (strncmp(id, fused_prefix, n)
			|| (dtype && strcmp(json_string_value(json_object_get(c, "dtype")), dtype)))
			continue;
		snprintf(fb_id, sizeof(fb_id), "%s/fallback/%s", row, id + n);
		fb = find_case(r, fb_id);
		CHECK(fb != NULL);
		if (fb)
			sum += json_number_value(json_object_get(c, "weight"))
				* (json_number_value(json_object_get(json_object_get(fb, "timing"), "median_ns"))
					- json_number_value(json_object_get(json_object_get(c, "timing"), "median_ns")));
	}
	return sum;
}

static void test_keep_and_saved(void)
{
	json_t *r = load();
	mb_verdict_set set;
	const mb_row_verdict *v;
	double want;

	if (!r)
		return;
	CHECK(verdict_of(r, "rmsnorm", &set) == MB_VERDICT_KEEP);
	v = mb_verdict_find(&set, "rmsnorm");
	want = saved_by_hand(r, "rmsnorm", NULL);
	CHECK(v && v->saved_known && fabs(v->saved_ns_per_step - want) < 1e-6 * want);
	CHECK(v && !strcmp(v->saved_mode, "hot") && v->n_pairs == 2);
	CHECK(v && strstr(v->families, "llama7b") && strstr(v->families, "llama70b"));
	CHECK(!set.lanes_present);
	mb_verdict_set_free(&set);
	json_decref(r);
}

static void test_drop_conditional_ambiguous(void)
{
	json_t *r = load();
	json_t *fused, *fb;
	mb_verdict_set set;
	const mb_row_verdict *v;

	if (!r)
		return;
	/* fused slower than fallback on mixtral: a loss is a drop */
	fused = find_case(r, "rope/fused/bf16/hot/mixtral");
	fb = find_case(r, "rope/fallback/bf16/hot/mixtral");
	scale_case(fused, 2.5);
	CHECK(verdict_of(r, "rope", NULL) == MB_VERDICT_DROP);
	/* the same time as the fallback on mixtral: wins on llama7b only */
	json_object_set_new(fused, "timing", json_deep_copy(json_object_get(fb, "timing")));
	CHECK(verdict_of(r, "rope", &set) == MB_VERDICT_CONDITIONAL);
	v = mb_verdict_find(&set, "rope");
	CHECK(v && !strcmp(v->families, "llama7b"));
	mb_verdict_set_free(&set);
	/* not converged: ambiguous, never keep or drop */
	json_object_set_new(json_object_get(fused, "timing"), "converged", json_false());
	CHECK(verdict_of(r, "rope", NULL) == MB_VERDICT_AMBIGUOUS);
	/* a wrong answer on the fallback drops the row too */
	json_object_set_new(json_object_get(find_case(r, "rmsnorm/fallback"), "correctness"), "passed", json_false());
	CHECK(verdict_of(r, "rmsnorm", NULL) == MB_VERDICT_DROP);
	json_decref(r);
}

static void test_not_enough_evidence_and_lanes(void)
{
	json_t *r = load();
	json_t *cases, *kept;
	mb_verdict_set set;
	size_t i;
	json_t *c;

	if (!r)
		return;
	/* a CPU receipt: reference variants only */
	json_array_foreach(json_object_get(r, "cases"), i, c)
		json_object_set_new(c, "variant_kind", json_string("reference"));
	CHECK(verdict_of(r, "rmsnorm", NULL) == MB_VERDICT_NOT_ENOUGH_EVIDENCE);
	CHECK(verdict_of(r, "rope", NULL) == MB_VERDICT_NOT_ENOUGH_EVIDENCE);
	json_decref(r);

	/* no fallback variant left for rope */
	r = load();
	if (!r)
		return;
	cases = json_object_get(r, "cases");
	kept = json_array();
	json_array_foreach(cases, i, c)
		if (strncmp(json_string_value(json_object_get(c, "id")), "rope/fallback", 13))
			json_array_append(kept, c);
	json_object_set_new(r, "cases", kept);
	CHECK(verdict_of(r, "rope", NULL) == MB_VERDICT_NOT_ENOUGH_EVIDENCE);
	CHECK(verdict_of(r, "rmsnorm", NULL) == MB_VERDICT_KEEP);
	/* lanes are noted, not evaluated */
	json_object_set_new(r, "lanes", json_pack("[{}]"));
	verdict_of(r, "rmsnorm", &set);
	CHECK(set.lanes_present && strstr(set.lanes_note, "not evaluated"));
	mb_verdict_set_free(&set);
	json_decref(r);
}

static void test_policy(void)
{
	mb_policy p;
	mb_error err;
	json_t *doc = json_pack("{s:f, s:{s:{s:f}}, s:{s:[s, s]}}", "min_effect", 0.03,
		"rows", "rope", "alpha", 0.05, "gate", "fail_on", "wrong_answer", "regression");
	char text[512];

	CHECK(mb_policy_from_json(&p, doc, "policy.toml", &err) == 0);
	CHECK(p.t.min_effect == 0.03 && p.t.alpha == MB_POLICY_DEFAULT_ALPHA);
	CHECK(mb_policy_for_row(&p, "rope")->alpha == 0.05);
	CHECK(mb_policy_for_row(&p, "rope")->min_effect == 0.03); /* inherits the top level */
	CHECK(mb_policy_for_row(&p, "rmsnorm") == &p.t);
	CHECK(mb_policy_fails_on(&p, MB_FINDING_WRONG_ANSWER) && !mb_policy_fails_on(&p, MB_FINDING_TOLERANCE_CHANGE));
	mb_policy_describe_changes(&p, text, sizeof(text));
	CHECK_MSG(strstr(text, "min_effect = 0.03") && strstr(text, "rows.rope.alpha = 0.05")
		&& strstr(text, "gate.fail_on = [regression, wrong_answer]"), "%s", text);
	mb_policy_free(&p);
	json_decref(doc);

	/* unknown key and out-of-range value are refused, naming the file */
	doc = json_pack("{s:f}", "alpah", 0.05);
	CHECK(mb_policy_from_json(&p, doc, "bad.toml", &err) == MB_ESCHEMA && strstr(err.where, "bad.toml"));
	json_decref(doc);
	doc = json_pack("{s:f}", "alpha", 1.5);
	CHECK(mb_policy_from_json(&p, doc, "bad.toml", &err) == MB_ESCHEMA);
	json_decref(doc);
	doc = json_pack("{s:{s:[s]}}", "gate", "fail_on", "everything");
	CHECK(mb_policy_from_json(&p, doc, "bad.toml", &err) == MB_ESCHEMA);
	json_decref(doc);
	mb_policy_defaults(&p);
	mb_policy_describe_changes(&p, text, sizeof(text));
	CHECK(text[0] == '\0');
}

/* A receipt with every dtype (the committed H200 one): time saved per step
 * sums one dtype only, bf16 first, since a training step runs in one. */
static void test_saved_one_dtype(void)
{
	json_t *r = NULL;
	mb_error err;
	mb_verdict_set set;
	const mb_row_verdict *v;
	double want, all;

	if (mb_receipt_load(&r, mb_test_src("reports/h200/nam56r-a.json"), &err)) {
		CHECK_MSG(0, "%s: %s", err.where, err.text);
		return;
	}
	CHECK(verdict_of(r, "rope_qk", &set) == MB_VERDICT_KEEP);
	v = mb_verdict_find(&set, "rope_qk");
	want = saved_by_hand(r, "rope_qk", "bf16");
	all = saved_by_hand(r, "rope_qk", NULL);
	CHECK(v && v->saved_known && !strcmp(v->saved_dtype, "bf16") && !strcmp(v->saved_mode, "cold"));
	CHECK(v && fabs(v->saved_ns_per_step - want) < 1e-6 * want && want < 0.5 * all);
	mb_verdict_set_free(&set);
	json_decref(r);
}

int main(void)
{
	test_keep_and_saved();
	test_saved_one_dtype();
	test_drop_conditional_ambiguous();
	test_not_enough_evidence_and_lanes();
	test_policy();
	return mb_test_finish("test_verdict");
}
