/* Row verdicts within one receipt, on the golden receipts of
 * tests/golden/gate/ edited in memory and on small receipts made here (one
 * per rule of verdict.h), the words every printer shows, and the policy
 * file's parsing. The expected time saved is recomputed here from the
 * receipt's own medians and weights. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "receipts/policy.h"
#include "receipts/printer.h"
#include "receipts/receipt_io.h"
#include "receipts/verdict.h"
#include "testutil.h"

#define N_SAMPLES 20
#define TEXT_MAX 1024

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
 * (NULL: every dtype) whose weight is not the default 1, each against the
 * fallback case of its shape. Every pair of the callers wins. */
static double saved_by_hand(json_t *r, const char *row, const char *dtype, bool per_call_max)
{
	char fused_prefix[64];
	double sum = 0.0, max = 0.0;
	size_t i, n = (size_t)snprintf(fused_prefix, sizeof(fused_prefix), "%s/fused/", row);
	json_t *c;

	json_array_foreach(json_object_get(r, "cases"), i, c) {
		const char *id = json_string_value(json_object_get(c, "id"));
		double weight = json_number_value(json_object_get(c, "weight")), saved;
		char fb_id[256];
		json_t *fb;

		if (strncmp(id, fused_prefix, n)
			|| (dtype && strcmp(json_string_value(json_object_get(c, "dtype")), dtype)))
			continue;
		snprintf(fb_id, sizeof(fb_id), "%s/fallback/%s", row, id + n);
		fb = find_case(r, fb_id);
		CHECK(fb != NULL);
		if (!fb)
			continue;
		saved = json_number_value(json_object_get(json_object_get(fb, "timing"), "median_ns"))
			- json_number_value(json_object_get(json_object_get(c, "timing"), "median_ns"));
		max = saved > max ? saved : max;
		if (weight != 1.0)
			sum += weight * saved;
	}
	return per_call_max ? max : sum;
}

/* ---- small receipts made here ---- */

/* One pair to make: a fused and a fallback case of `row` at `family` and
 * T = `t`, with medians fused_ns and fallback_ns (the same number: the very
 * same samples, SAME). */
typedef struct pair_spec {
	const char *dtype, *mode, *family;
	json_int_t t;
	double fused_ns, fallback_ns;
	double weight;
} pair_spec;

static json_t *timing_of(double median_ns)
{
	json_t *samples = json_array();

	/* a spread of +-0.2%: converged, quiet, and clearly apart from a 2% change */
	for (int i = 0; i < N_SAMPLES; i++)
		json_array_append_new(samples, json_real(median_ns * (1.0 + 0.001 * (double)(i % 5 - 2))));
	return json_pack("{s:s, s:o, s:[], s:f, s:f, s:b}", "source", "cupti", "samples_ns", samples, "excluded",
		"median_ns", median_ns, "rel_noise", 0.001, "converged", 1);
}

static json_t *make_case(const char *row, const char *variant, const pair_spec *p, double median_ns)
{
	char id[256];

	snprintf(id, sizeof(id), "%s/%s/%s/%s/%s/T=%" JSON_INTEGER_FORMAT ",D=128", row, variant, p->dtype, p->mode,
		p->family, p->t);
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:{s:I, s:i}, s:f, s:s, s:{s:b}, s:o, s:{s:I}}",
		"id", id, "row", row, "block", "A", "variant", variant, "variant_kind", variant, "dtype", p->dtype,
		"mode", p->mode, "family", p->family, "shape", "T", p->t, "D", 128, "weight", p->weight ? p->weight : 1.0,
		"status", "ok", "correctness", "passed", 1, "timing", timing_of(median_ns),
		"throughput", "bytes", (json_int_t)(p->t * 128 * 4));
}

/* A receipt of one row "r" with the pairs given, in that order, and the
 * suite's modes in `modes` (a JSON array text). */
static json_t *make_receipt(const pair_spec *pairs, size_t n, const char *modes)
{
	json_t *cases = json_array();

	for (size_t i = 0; i < n; i++) {
		json_array_append_new(cases, make_case("r", "fused", &pairs[i], pairs[i].fused_ns));
		json_array_append_new(cases, make_case("r", "fallback", &pairs[i], pairs[i].fallback_ns));
	}
	return json_pack("{s:{s:o}, s:o}", "settings", "modes", json_loads(modes, 0, NULL), "cases", cases);
}

/* The verdict of row "r" in `r`; the set goes to `out` (freed by the caller). */
static const mb_row_verdict *row_r(json_t *r, mb_verdict_set *out)
{
	mb_policy p;
	mb_error err;
	const mb_row_verdict *v = NULL;

	mb_policy_defaults(&p);
	if (mb_verdict_compute(out, r, &p, &err)) {
		CHECK_MSG(0, "%s: %s", err.where, err.text);
		memset(out, 0, sizeof(*out));
		return NULL;
	}
	v = mb_verdict_find(out, "r");
	CHECK(v != NULL);
	return v;
}

/* What the printer `name` writes for the verdicts of `r`, in `buf`. */
static void printed(char *buf, size_t len, const char *name, const mb_verdict_set *set, const json_t *r)
{
	char *text = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);
	mb_policy p;
	mb_error err;

	buf[0] = '\0';
	mb_policy_defaults(&p);
	CHECK(f != NULL);
	if (!f)
		return;
	CHECK(mb_printer_find(name)->verdicts(f, set, r, "r.json", &p, &err) == 0);
	fclose(f);
	snprintf(buf, len, "%s", text ? text : "");
	free(text);
}

/* Every pair wins: keep, labelled isolated since receipts have no lanes;
 * per step sums the explicitly weighted families only (llama7b, weight 2;
 * llama70b has the default 1). */
static void test_keep_and_saved(void)
{
	json_t *r = load();
	mb_verdict_set set;
	const mb_row_verdict *v;
	char label[TEXT_MAX], text[TEXT_MAX];
	double want;

	if (!r)
		return;
	CHECK(verdict_of(r, "rmsnorm", &set) == MB_VERDICT_KEEP);
	v = mb_verdict_find(&set, "rmsnorm");
	want = saved_by_hand(r, "rmsnorm", NULL, false);
	CHECK(v && v->evidence == MB_EVIDENCE_ISOLATED);
	CHECK(v && v->saved_basis == MB_SAVED_PER_STEP && fabs(v->saved_ns - want) < 1e-6 * want);
	CHECK(v && v->saved_unweighted == 1 && !strcmp(v->saved_mode, "hot") && v->n_pairs == 2);
	CHECK(v && strstr(v->families, "llama7b") && strstr(v->families, "llama70b"));
	mb_verdict_label(label, sizeof(label), v);
	CHECK_MSG(!strcmp(label, "keep (isolated evidence only)"), "%s", label);
	mb_verdict_saved_text(text, sizeof(text), v);
	CHECK_MSG(strstr(text, "per step (bf16, hot)") && strstr(text, "1 pair without a suite weight"), "%s", text);
	CHECK(!set.lanes_present);
	mb_verdict_set_free(&set);
	json_decref(r);
}

/* Every printer says "keep (isolated evidence only)"; JSON as verdict keep
 * with evidence isolated and the label. */
static void test_keep_label_printed(void)
{
	static const char *const printers[] = {"table", "markdown", "json", "csv"};
	json_t *r = load();
	mb_verdict_set set;
	char text[16384];

	if (!r)
		return;
	verdict_of(r, "rmsnorm", &set);
	for (size_t i = 0; i < sizeof(printers) / sizeof(printers[0]); i++) {
		printed(text, sizeof(text), printers[i], &set, r);
		CHECK_MSG(strstr(text, "keep (isolated evidence only)"), "%s: %s", printers[i], text);
	}
	printed(text, sizeof(text), "json", &set, r);
	CHECK_MSG(strstr(text, "\"verdict\": \"keep\"") && strstr(text, "\"evidence\": \"isolated\""), "%s", text);
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
	/* fused slower than fallback on mixtral: not a win there, still one on
	 * llama7b (a loss at one shape is no drop of the row) */
	fused = find_case(r, "rope/fused/bf16/hot/mixtral");
	fb = find_case(r, "rope/fallback/bf16/hot/mixtral");
	scale_case(fused, 2.5);
	CHECK(verdict_of(r, "rope", &set) == MB_VERDICT_CONDITIONAL);
	v = mb_verdict_find(&set, "rope");
	CHECK_MSG(v && !strcmp(v->condition, "wins on family llama7b only") && strstr(v->reason, "1 slower")
		&& strstr(v->reason, "fallback is 1.50x faster") && strstr(v->reason, "faster at mixtral/"), "%s", v ? v->reason : "");
	mb_verdict_set_free(&set);
	/* the same time as the fallback on mixtral: wins on llama7b only */
	json_object_set_new(fused, "timing", json_deep_copy(json_object_get(fb, "timing")));
	CHECK(verdict_of(r, "rope", &set) == MB_VERDICT_CONDITIONAL);
	v = mb_verdict_find(&set, "rope");
	CHECK(v && !strcmp(v->families, "llama7b"));
	CHECK_MSG(v && !strcmp(v->condition, "wins on family llama7b only"), "%s", v ? v->condition : "");
	mb_verdict_set_free(&set);
	/* a loss wherever it runs: drop */
	scale_case(fused, 2.5);
	scale_case(find_case(r, "rope/fused/bf16/hot/llama7b"), 2.5);
	CHECK(verdict_of(r, "rope", NULL) == MB_VERDICT_DROP);
	/* not converged where it does not lose: ambiguous, never keep or drop */
	json_object_set_new(fused, "timing", json_deep_copy(json_object_get(fb, "timing")));
	json_object_set_new(json_object_get(fused, "timing"), "converged", json_false());
	json_object_set_new(find_case(r, "rope/fused/bf16/hot/llama7b"), "timing",
		json_deep_copy(json_object_get(find_case(r, "rope/fallback/bf16/hot/llama7b"), "timing")));
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
	/* a lane that does not hold the row leaves it on isolated evidence */
	json_object_set_new(r, "lanes", json_pack("[{s:s, s:s, s:[], s:[], s:[]}]", "name", "l", "pattern", "A",
		"rows", "runs", "deltas"));
	verdict_of(r, "rmsnorm", &set);
	CHECK(set.lanes_present && strstr(set.lanes_note, "run-level evidence from 1 lane"));
	CHECK(mb_verdict_find(&set, "rmsnorm")->evidence == MB_EVIDENCE_ISOLATED);
	mb_verdict_set_free(&set);
	json_decref(r);
}

/* A lane run: `steps` step times around `median` (a fixed, seeded spread),
 * three rounds. */
static json_t *lane_run_json(const char *config, const char *mode, double median, int steps)
{
	json_t *step = json_array(), *rounds = json_array();
	double spread[] = {-0.002, 0.001, 0.0, 0.002, -0.001};

	for (int i = 0; i < steps; i++)
		json_array_append_new(step, json_real(median * (1 + spread[i % 5])));
	for (int k = 0; k < 3; k++)
		json_array_append_new(rounds, json_real(median * (1 + spread[k])));
	return json_pack("{s:s, s:s, s:o, s:o, s:f}", "config", config, "mode", mode, "step_ns", step,
		"round_medians_ns", rounds, "median_step_ns", median);
}

/* keep needs a significant lane win: a row whose fallback makes the step
 * 5% slower in every mode keeps with lane evidence; one whose fallback
 * costs the step nothing keeps on isolated evidence, the lanes
 * inconclusive (never a conditional without a condition); one whose
 * fallback makes the step faster loses where it runs: drop. */
static void test_lane_evidence(void)
{
	static const double fallback_step[] = {1.05e6, 1.0e6, 0.95e6};

	for (int k = 0; k < 3; k++) {
		json_t *r = load();
		mb_verdict_set set;
		const mb_row_verdict *v;
		double fallback = fallback_step[k];
		bool win = k == 0;
		char label[TEXT_MAX];

		if (!r)
			return;
		json_object_set_new(r, "lanes", json_pack("[{s:s, s:s, s:[{s:s, s:i}], s:[o, o, o, o], s:[{s:s, s:s, s:s}, {s:s, s:s, s:s}]}]",
			"name", "dense", "pattern", "AA", "rows", "row", "rmsnorm", "calls_per_step", 2,
			"runs", lane_run_json("fused", "eager", 1.0e6, 30), lane_run_json("fallback:rmsnorm", "eager", fallback, 30),
			lane_run_json("fused", "graph", 0.98e6, 30), lane_run_json("fallback:rmsnorm", "graph", 0.98 * fallback, 30),
			"deltas", "row", "rmsnorm", "config", "fallback:rmsnorm", "mode", "eager",
			"row", "rmsnorm", "config", "fallback:rmsnorm", "mode", "graph"));
		verdict_of(r, "rmsnorm", &set);
		v = mb_verdict_find(&set, "rmsnorm");
		mb_verdict_label(label, sizeof(label), v);
		if (win) {
			CHECK(v && v->evidence == MB_EVIDENCE_LANES);
			CHECK_MSG(v && v->kind == MB_VERDICT_KEEP && v->lane_win, "%s", v ? v->reason : "");
			CHECK(v && fabs(v->lane_saved_ns - 0.05e6) < 1e3 && fabs(v->lane_saved_fraction - 0.05) < 1e-3);
			CHECK_MSG(!strcmp(label, "keep"), "%s", label);
		} else if (k == 1) {
			CHECK(v && v->evidence == MB_EVIDENCE_LANES_INCONCLUSIVE && v->kind == MB_VERDICT_KEEP && !v->lane_win);
			CHECK_MSG(!strcmp(label, "keep on isolated evidence; lanes inconclusive"), "%s", label);
			CHECK(v && !v->condition[0] && strstr(v->reason, "lane dense (eager)"));
		} else {
			CHECK_MSG(v && v->kind == MB_VERDICT_DROP && v->lane_losses == 2, "%s", v ? v->reason : "");
		}
		mb_verdict_set_free(&set);
		json_decref(r);
	}
}

/* Several alternatives in a lane: the verdict holds the fused row against
 * the fastest of them. On its fallback the step is 5% slower; on a vendor
 * library 3% slower (still a win, beyond lane_min_effect) or 3% faster (a
 * loss where the row runs: drop). */
static void test_lane_best_alternative(void)
{
	static const double vendor_step[] = {1.03e6, 0.97e6};

	for (int k = 0; k < 2; k++) {
		json_t *r = load();
		mb_verdict_set set;
		const mb_row_verdict *v;

		if (!r)
			return;
		json_object_set_new(r, "lanes", json_pack("[{s:s, s:s, s:[{s:s, s:i}], s:[o, o, o], s:[{s:s, s:s, s:s, s:s}, "
			"{s:s, s:s, s:s, s:s}]}]", "name", "moe", "pattern", "E", "rows", "row", "rmsnorm", "calls_per_step", 1,
			"runs", lane_run_json("fused", "eager", 1.0e6, 30), lane_run_json("rmsnorm:fallback", "eager", 1.05e6, 30),
			lane_run_json("rmsnorm:vendorx", "eager", vendor_step[k], 30),
			"deltas", "row", "rmsnorm", "config", "rmsnorm:fallback", "mode", "eager", "variant", "fallback",
			"row", "rmsnorm", "config", "rmsnorm:vendorx", "mode", "eager", "variant", "vendorx"));
		verdict_of(r, "rmsnorm", &set);
		v = mb_verdict_find(&set, "rmsnorm");
		CHECK(v && v->lane_steps == 1);
		CHECK_MSG(v && strstr(v->lane_text, "on vendorx the step is"), "%s", v ? v->lane_text : "");
		if (k == 0)
			CHECK_MSG(v && v->kind == MB_VERDICT_KEEP && v->evidence == MB_EVIDENCE_LANES
				&& fabs(v->lane_saved_fraction - 0.03) < 1e-3, "%s", v ? v->reason : "");
		else
			CHECK_MSG(v && v->kind == MB_VERDICT_DROP && v->lane_losses == 1, "%s", v ? v->reason : "");
		mb_verdict_set_free(&set);
		json_decref(r);
	}
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

/* A receipt with every dtype (the committed H200 one) and no weights: the
 * saving is per call, the largest in cold bf16, never a sum over dtypes or
 * over alternative shapes. */
static void test_saved_one_dtype(void)
{
	json_t *r = NULL;
	mb_error err;
	mb_verdict_set set;
	const mb_row_verdict *v;
	char text[TEXT_MAX];
	double want;

	if (mb_receipt_load(&r, mb_test_src("reports/h200/nam56r-a.json"), &err)) {
		CHECK_MSG(0, "%s: %s", err.where, err.text);
		return;
	}
	CHECK(verdict_of(r, "rope_qk", &set) == MB_VERDICT_KEEP);
	v = mb_verdict_find(&set, "rope_qk");
	want = saved_by_hand(r, "rope_qk", "bf16", true);
	CHECK(v && v->saved_basis == MB_SAVED_PER_CALL && !strcmp(v->saved_dtype, "bf16")
		&& !strcmp(v->saved_mode, "cold"));
	CHECK(v && fabs(v->saved_ns - want) < 1e-6 * want);
	CHECK(v && strstr(v->saved_shape, "T=32768"));
	mb_verdict_saved_text(text, sizeof(text), v);
	CHECK_MSG(strstr(text, "per call (bf16, cold, at dense_attention/T=32768") && !strstr(text, "per step"),
		"%s", text);
	mb_verdict_speedup_text(text, sizeof(text), v);
	CHECK_MSG(strstr(text, "(model n/a) at dense_attention/T=32768"), "%s", text);
	mb_verdict_set_free(&set);
	json_decref(r);
}

/* 9x faster at T = 32768, the same at T = 8192, in two dtypes: conditional
 * on the shape axis, not drop. */
static void test_condition_shape_axis(void)
{
	const pair_spec pairs[] = {
		{"bf16", "cold", "attn", 8192, 100e3, 100e3, 0}, {"bf16", "cold", "attn", 32768, 100e3, 900e3, 0},
		{"fp16", "cold", "attn", 8192, 100e3, 100e3, 0}, {"fp16", "cold", "attn", 32768, 100e3, 900e3, 0},
	};
	json_t *r = make_receipt(pairs, 4, "[\"cold\"]");
	mb_verdict_set set;
	const mb_row_verdict *v = row_r(r, &set);
	char label[TEXT_MAX];

	CHECK(v && v->kind == MB_VERDICT_CONDITIONAL);
	CHECK_MSG(v && !strcmp(v->condition, "wins at T >= 32768"), "%s", v ? v->condition : "");
	mb_verdict_label(label, sizeof(label), v);
	CHECK_MSG(!strcmp(label, "conditional (wins at T >= 32768)"), "%s", label);
	/* the speedup is shown at the largest shape */
	CHECK(v && v->largest && fabs(v->largest->speedup - 9.0) < 1e-9);
	mb_verdict_set_free(&set);
	json_decref(r);
}

/* A win in hot mode only (the same time cold) is conditional on the mode;
 * its saving is taken in hot, where it wins (cold would say it saves
 * nothing). */
static void test_condition_mode(void)
{
	const pair_spec pairs[] = {
		{"bf16", "cold", "attn", 8192, 100e3, 100e3, 0}, {"bf16", "hot", "attn", 8192, 50e3, 100e3, 0},
		{"bf16", "cold", "attn", 32768, 400e3, 400e3, 0}, {"bf16", "hot", "attn", 32768, 200e3, 400e3, 0},
	};
	json_t *r = make_receipt(pairs, 4, "[\"cold\", \"hot\"]");
	mb_verdict_set set;
	const mb_row_verdict *v = row_r(r, &set);

	CHECK(v && v->kind == MB_VERDICT_CONDITIONAL);
	CHECK_MSG(v && !strcmp(v->condition, "wins in hot mode only"), "%s", v ? v->condition : "");
	CHECK_MSG(v && !strcmp(v->saved_mode, "hot") && fabs(v->saved_ns - 200e3) < 1e3, "%s %g",
		v ? v->saved_mode : "", v ? v->saved_ns : NAN);
	mb_verdict_set_free(&set);
	json_decref(r);
}

/* Wins in bf16 and fp16, the same in fp32: the dtypes are named. */
static void test_condition_dtype(void)
{
	const pair_spec pairs[] = {
		{"fp32", "cold", "attn", 8192, 100e3, 100e3, 0}, {"bf16", "cold", "attn", 8192, 50e3, 100e3, 0},
		{"fp16", "cold", "attn", 8192, 50e3, 100e3, 0}, {"fp32", "cold", "attn", 32768, 400e3, 400e3, 0},
		{"bf16", "cold", "attn", 32768, 200e3, 400e3, 0}, {"fp16", "cold", "attn", 32768, 200e3, 400e3, 0},
	};
	json_t *r = make_receipt(pairs, 6, "[\"cold\"]");
	mb_verdict_set set;
	const mb_row_verdict *v = row_r(r, &set);

	CHECK(v && v->kind == MB_VERDICT_CONDITIONAL);
	CHECK_MSG(v && !strcmp(v->condition, "wins in bf16 and fp16, not fp32"), "%s", v ? v->condition : "");
	mb_verdict_set_free(&set);
	json_decref(r);
}

/* No one selector separates the wins, two together do: both named. On a
 * diagonal that no two separate, the selector covering most wins and how
 * many it leaves out. */
static void test_condition_union(void)
{
	const pair_spec pairs[] = {
		{"bf16", "cold", "attn", 8192, 100e3, 100e3, 0}, {"bf16", "cold", "attn", 32768, 100e3, 300e3, 0},
		{"fp32", "cold", "attn", 8192, 100e3, 300e3, 0}, {"fp32", "cold", "attn", 32768, 100e3, 100e3, 0},
	};
	const pair_spec diagonal[] = {
		{"bf16", "cold", "attn", 8192, 100e3, 300e3, 0}, {"bf16", "cold", "attn", 16384, 100e3, 100e3, 0},
		{"bf16", "cold", "attn", 32768, 100e3, 100e3, 0}, {"fp16", "cold", "attn", 8192, 100e3, 100e3, 0},
		{"fp16", "cold", "attn", 16384, 100e3, 300e3, 0}, {"fp16", "cold", "attn", 32768, 100e3, 100e3, 0},
		{"fp32", "cold", "attn", 8192, 100e3, 100e3, 0}, {"fp32", "cold", "attn", 16384, 100e3, 100e3, 0},
		{"fp32", "cold", "attn", 32768, 100e3, 300e3, 0},
	};
	json_t *r = make_receipt(pairs, 4, "[\"cold\"]");
	mb_verdict_set set;
	const mb_row_verdict *v = row_r(r, &set);

	CHECK(v && v->kind == MB_VERDICT_CONDITIONAL);
	CHECK_MSG(v && !strcmp(v->condition, "wins at T <= 8192, fp32; and at T >= 32768, bf16"), "%s",
		v ? v->condition : "");
	mb_verdict_set_free(&set);
	json_decref(r);
	r = make_receipt(diagonal, 9, "[\"cold\"]");
	v = row_r(r, &set);
	CHECK(v && v->kind == MB_VERDICT_CONDITIONAL);
	CHECK_MSG(v && !strcmp(v->condition, "wins at T <= 8192, bf16 (and 2 other cases)"), "%s",
		v ? v->condition : "");
	mb_verdict_set_free(&set);
	json_decref(r);
}

/* Per step: calls per step x saved per call over the explicitly weighted
 * pairs; a pair 1% faster (SAME, under the 2% minimum effect) counts zero. */
static void test_same_counts_zero(void)
{
	const pair_spec pairs[] = {
		{"bf16", "cold", "attn", 8192, 99e3, 100e3, 3}, {"bf16", "cold", "attn", 32768, 100e3, 300e3, 2},
	};
	json_t *r = make_receipt(pairs, 2, "[\"cold\"]");
	mb_verdict_set set;
	const mb_row_verdict *v = row_r(r, &set);

	CHECK(v && v->kind == MB_VERDICT_CONDITIONAL);
	CHECK(v && v->pairs[0].cmp.cls == MB_CMP_SAME && v->pairs[0].saved_ns_per_call == 0.0);
	CHECK_MSG(v && v->saved_basis == MB_SAVED_PER_STEP && fabs(v->saved_ns - 2 * 200e3) < 1e-6,
		"%g", v ? v->saved_ns : NAN);
	mb_verdict_set_free(&set);
	json_decref(r);
}

/* A row without a significant win, or with a loss, is dropped and saves
 * nothing, even when its medians are a little apart. */
static void test_drop_saves_nothing(void)
{
	const pair_spec same[] = {
		{"bf16", "cold", "attn", 8192, 99e3, 100e3, 3}, {"bf16", "cold", "attn", 32768, 99e3, 100e3, 0},
	};
	const pair_spec loss[] = {
		{"bf16", "cold", "attn", 8192, 200e3, 100e3, 3}, {"bf16", "cold", "attn", 32768, 900e3, 100e3, 0},
	};
	json_t *r = make_receipt(same, 2, "[\"cold\"]");
	mb_verdict_set set;
	const mb_row_verdict *v = row_r(r, &set);
	char text[TEXT_MAX];

	CHECK(v && v->kind == MB_VERDICT_DROP && v->saved_basis == MB_SAVED_NONE);
	mb_verdict_saved_text(text, sizeof(text), v);
	CHECK_MSG(!strcmp(text, "-"), "%s", text);
	mb_verdict_set_free(&set);
	json_decref(r);
	r = make_receipt(loss, 2, "[\"cold\"]");
	v = row_r(r, &set);
	CHECK(v && v->kind == MB_VERDICT_DROP && v->saved_basis == MB_SAVED_NONE);
	mb_verdict_set_free(&set);
	json_decref(r);
}

/* The order of the suite's modes and of the receipt's cases changes nothing:
 * the saving is taken in cold whatever the order. */
static void test_modes_order(void)
{
	const pair_spec pairs[] = {
		{"bf16", "cold", "attn", 8192, 50e3, 100e3, 2}, {"bf16", "hot", "attn", 8192, 20e3, 100e3, 2},
		{"bf16", "cold", "attn", 32768, 200e3, 400e3, 2}, {"bf16", "hot", "attn", 32768, 90e3, 400e3, 2},
	};
	const pair_spec reversed[] = {pairs[3], pairs[2], pairs[1], pairs[0]};
	json_t *a = make_receipt(pairs, 4, "[\"cold\", \"hot\"]");
	json_t *b = make_receipt(reversed, 4, "[\"hot\", \"cold\"]");
	mb_verdict_set sa, sb;
	const mb_row_verdict *va = row_r(a, &sa), *vb = row_r(b, &sb);
	char ta[TEXT_MAX], tb[TEXT_MAX];

	CHECK(va && vb && va->kind == MB_VERDICT_KEEP && vb->kind == MB_VERDICT_KEEP);
	CHECK(va && !strcmp(va->saved_mode, "cold") && fabs(va->saved_ns - 2 * (50e3 + 200e3)) < 1e-6);
	mb_verdict_saved_text(ta, sizeof(ta), va);
	mb_verdict_saved_text(tb, sizeof(tb), vb);
	CHECK_MSG(!strcmp(ta, tb), "%s / %s", ta, tb);
	mb_verdict_speedup_text(ta, sizeof(ta), va);
	mb_verdict_speedup_text(tb, sizeof(tb), vb);
	CHECK_MSG(!strcmp(ta, tb), "%s / %s", ta, tb);
	mb_verdict_set_free(&sa);
	mb_verdict_set_free(&sb);
	json_decref(a);
	json_decref(b);
}

/* Without explicit weights the saving is per call, the largest, at its
 * shape; every printer says "per call" and none "per step". */
static void test_per_call_without_weights(void)
{
	static const char *const printers[] = {"table", "markdown", "csv"};
	const pair_spec pairs[] = {
		{"bf16", "cold", "mb4", 8192, 50e3, 100e3, 0}, {"bf16", "cold", "mb16", 32768, 200e3, 500e3, 0},
	};
	json_t *r = make_receipt(pairs, 2, "[\"cold\"]");
	mb_verdict_set set;
	const mb_row_verdict *v = row_r(r, &set);
	char text[16384];

	CHECK(v && v->kind == MB_VERDICT_KEEP && v->saved_basis == MB_SAVED_PER_CALL);
	CHECK(v && fabs(v->saved_ns - 300e3) < 1e-6 && !strcmp(v->saved_shape, "mb16/T=32768,D=128"));
	for (size_t i = 0; i < sizeof(printers) / sizeof(printers[0]); i++) {
		printed(text, sizeof(text), printers[i], &set, r);
		CHECK_MSG(strstr(text, "per call") && !strstr(text, "per step"), "%s: %s", printers[i], text);
	}
	printed(text, sizeof(text), "json", &set, r);
	CHECK_MSG(strstr(text, "\"saved_basis\": \"per call\"") && strstr(text, "\"saved_ns_per_step\": null"),
		"%s", text);
	mb_verdict_set_free(&set);
	json_decref(r);
}

static void set_bytes(json_t *kase, json_int_t read_bytes, json_int_t write_bytes)
{
	json_t *t = json_object_get(kase, "throughput");

	json_object_set_new(t, "read_bytes", json_integer(read_bytes));
	json_object_set_new(t, "write_bytes", json_integer(write_bytes));
}

/* The model speedup: bytes when they differ, launches when the read/write
 * model has equal bytes, none for old receipts with equal bytes. */
static void test_model_speedup(void)
{
	const pair_spec pairs[] = {{"bf16", "cold", "attn", 8192, 50e3, 100e3, 0}};
	json_t *r = make_receipt(pairs, 1, "[\"cold\"]");
	json_t *fused = json_array_get(json_object_get(r, "cases"), 0);
	json_t *fb = json_array_get(json_object_get(r, "cases"), 1);
	mb_verdict_set set;
	const mb_row_verdict *v = row_r(r, &set);
	char text[TEXT_MAX];

	CHECK(v && v->largest && v->largest->model_basis == MB_MODEL_NONE && fabs(v->largest->speedup - 2.0) < 1e-9);
	mb_verdict_model_text(text, sizeof(text), v ? v->largest : NULL);
	CHECK_MSG(!strcmp(text, "model n/a"), "%s", text);
	mb_verdict_set_free(&set);
	set_bytes(fused, 1000, 1000);
	set_bytes(fb, 2000, 1200);
	v = row_r(r, &set);
	CHECK(v && v->largest && v->largest->model_basis == MB_MODEL_BYTES && fabs(v->largest->model_speedup - 1.6) < 1e-9);
	mb_verdict_set_free(&set);
	set_bytes(fb, 1000, 1000);
	json_object_set_new(fused, "signature", json_pack("{s:i}", "expected_launches", 1));
	json_object_set_new(fb, "signature", json_pack("{s:i}", "expected_launches", 4));
	v = row_r(r, &set);
	CHECK(v && v->largest && v->largest->model_basis == MB_MODEL_LAUNCHES
		&& fabs(v->largest->model_speedup - 4.0) < 1e-9);
	mb_verdict_model_text(text, sizeof(text), v ? v->largest : NULL);
	CHECK_MSG(!strcmp(text, "model 4.00x (launches)"), "%s", text);
	mb_verdict_set_free(&set);
	json_decref(r);
}

/* A status's condition matches the verdict's words: exactly for shapes,
 * modes and dtypes; a memory trade whatever its figures, in the same
 * unit, against the same alternative. */
static void test_condition_same(void)
{
	const char *trade = "saves 3.84 GiB (97%) of scratch at 1.84x the time of materialized";

	CHECK(mb_verdict_condition_same("wins at T >= 32768", "wins at T >= 32768"));
	CHECK(!mb_verdict_condition_same("wins at T >= 32768", "wins at T >= 8192"));
	CHECK(mb_verdict_condition_same(trade, trade));
	CHECK(mb_verdict_condition_same("saves 3.85 GiB (98%) of scratch at 1.87x the time of materialized", trade));
	CHECK(mb_verdict_condition_same("saves 3 GiB (100%) of scratch at 2x the time of materialized", trade));
	/* a saving a unit smaller is another trade, for a reviewer to name again */
	CHECK(!mb_verdict_condition_same("saves 3.84 MiB (97%) of scratch at 1.84x the time of materialized", trade));
	CHECK(!mb_verdict_condition_same("saves 3.84 GiB (97%) of scratch at 1.84x the time of vocab_chunked", trade));
	CHECK(!mb_verdict_condition_same("wins at fp32", trade));
	CHECK(!mb_verdict_condition_same(NULL, trade) && !mb_verdict_condition_same(trade, NULL));
}

int main(void)
{
	test_keep_and_saved();
	test_keep_label_printed();
	test_saved_one_dtype();
	test_condition_shape_axis();
	test_condition_mode();
	test_condition_dtype();
	test_condition_union();
	test_same_counts_zero();
	test_drop_saves_nothing();
	test_modes_order();
	test_per_call_without_weights();
	test_model_speedup();
	test_drop_conditional_ambiguous();
	test_not_enough_evidence_and_lanes();
	test_lane_evidence();
	test_lane_best_alternative();
	test_policy();
	test_condition_same();
	return mb_test_finish("test_verdict");
}
