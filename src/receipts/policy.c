#include "receipts/policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "receipts/toml_json.h"
#include "receipts/schema.h"

/* Row overrides: the catalog has a dozen rows. mb_policy_for_row looks
 * them up in order, once per case, so their number must stay small. */
#define MB_POLICY_MAX_ROWS 1024

static const char *const finding_names[MB_FINDING_KIND_COUNT] = {
	[MB_FINDING_REGRESSION] = "regression",
	[MB_FINDING_WRONG_ANSWER] = "wrong_answer",
	[MB_FINDING_TOLERANCE_CHANGE] = "tolerance_change",
	[MB_FINDING_LAUNCH_CHANGE] = "launch_change",
	[MB_FINDING_KERNEL_CHANGE] = "kernel_change",
	[MB_FINDING_MISSING_CASE] = "missing_case",
	[MB_FINDING_MISSING_FALLBACK] = "missing_fallback",
	[MB_FINDING_AMBIGUOUS] = "ambiguous",
	[MB_FINDING_NEW_CASE] = "new_case",
	[MB_FINDING_STILL_WRONG] = "still_wrong",
	[MB_FINDING_MISSING_FIELD] = "missing_field",
	[MB_FINDING_STATUS_CHANGE] = "status_change",
	[MB_FINDING_MACHINE_CHANGED] = "machine_changed",
	[MB_FINDING_AMBIGUOUS_FASTER] = "ambiguous_faster",
	[MB_FINDING_UNSUPPORTED_PROMOTION] = "unsupported_promotion",
	[MB_FINDING_MEMORY_REGRESSION] = "memory_regression",
	[MB_FINDING_NO_BINARY_PROVENANCE] = "no_binary_provenance",
	[MB_FINDING_WEIGHT_CHANGE] = "weight_change",
	[MB_FINDING_VARIANT_KIND_CHANGE] = "variant_kind_change",
};

/* A new case is information, not a failure: adding shapes must not break CI.
 * An ambiguous speed-up is not a failure either: whatever the truth, the
 * code did not get slower by any measure the data supports. Nor is a
 * receipt without binary provenance: it only costs the shortcut, and its
 * rows get the statistics. */
#define DEFAULT_FAIL_ON (((1u << MB_FINDING_KIND_COUNT) - 1u) & ~(1u << MB_FINDING_NEW_CASE) \
	& ~(1u << MB_FINDING_AMBIGUOUS_FASTER) & ~(1u << MB_FINDING_NO_BINARY_PROVENANCE))

const char *mb_finding_kind_name(mb_finding_kind kind)
{
	return (unsigned)kind < MB_FINDING_KIND_COUNT ? finding_names[kind] : "unknown";
}

mb_finding_kind mb_finding_kind_parse(const char *name)
{
	for (int k = 0; k < MB_FINDING_KIND_COUNT; k++)
		if (!strcmp(finding_names[k], name))
			return (mb_finding_kind)k;
	return MB_FINDING_KIND_COUNT;
}

void mb_thresholds_defaults(mb_thresholds *out)
{
	memset(out, 0, sizeof(*out));
	out->alpha = MB_POLICY_DEFAULT_ALPHA;
	out->min_effect = MB_POLICY_DEFAULT_MIN_EFFECT;
	out->noise_ceiling = MB_POLICY_DEFAULT_NOISE_CEILING;
	out->noise_floor = MB_POLICY_DEFAULT_NOISE_FLOOR;
	out->identical_code_max_change = MB_POLICY_DEFAULT_IDENTICAL_CODE_MAX_CHANGE;
	out->memory_max_growth = MB_POLICY_DEFAULT_MEMORY_MAX_GROWTH;
	out->lane_min_effect = MB_POLICY_DEFAULT_LANE_MIN_EFFECT;
}

void mb_policy_defaults(mb_policy *out)
{
	memset(out, 0, sizeof(*out));
	mb_thresholds_defaults(&out->t);
	out->fail_on = DEFAULT_FAIL_ON;
	out->identical_code_shortcut = true;
	snprintf(out->source, sizeof(out->source), "built-in defaults");
}

mb_thresholds mb_policy_lane_thresholds(const mb_thresholds *t)
{
	mb_thresholds lane = *t;

	lane.min_effect = t->lane_min_effect;
	return lane;
}

void mb_policy_free(mb_policy *policy)
{
	if (!policy)
		return;
	for (size_t i = 0; i < policy->n_rows; i++)
		free(policy->rows[i].name);
	free(policy->rows);
	policy->rows = NULL;
	policy->n_rows = 0;
}

/* Copy the threshold keys present in `obj` over `t`. The schema already
 * checked types and ranges. */
static void merge_thresholds(mb_thresholds *t, const json_t *obj)
{
	json_t *v;

	if ((v = json_object_get(obj, "alpha")))
		t->alpha = json_number_value(v);
	if ((v = json_object_get(obj, "min_effect")))
		t->min_effect = json_number_value(v);
	if ((v = json_object_get(obj, "noise_ceiling")))
		t->noise_ceiling = json_number_value(v);
	if ((v = json_object_get(obj, "noise_floor")))
		t->noise_floor = json_number_value(v);
	if ((v = json_object_get(obj, "identical_code_max_change")))
		t->identical_code_max_change = json_number_value(v);
	if ((v = json_object_get(obj, "memory_max_growth")))
		t->memory_max_growth = json_number_value(v);
	if ((v = json_object_get(obj, "lane_min_effect")))
		t->lane_min_effect = json_number_value(v);
}

int mb_policy_from_json(mb_policy *out, const json_t *doc, const char *where, mb_error *err)
{
	const json_t *schema;
	mb_schema_report report;
	json_t *rows, *gate, *fail_on;
	int rc;

	mb_policy_defaults(out);
	schema = mb_schema_builtin("policy", err);
	if (!schema) {
		rc = err ? err->code : MB_EINVAL;
		goto cleanup;
	}
	rc = mb_schema_validate(schema, doc, &report, err);
	if (rc == MB_ESCHEMA) {
		mb_error_set(err, MB_ESCHEMA, where, "%s%s: %s: %s",
			report.count ? "" : "(root)",
			report.count ? report.items[0].pointer : "",
			report.count ? report.items[0].keyword : "schema",
			report.count ? report.items[0].message : "invalid policy");
		goto cleanup;
	}
	if (rc)
		goto cleanup;
	merge_thresholds(&out->t, doc);
	rows = json_object_get(doc, "rows");
	if (json_object_size(rows) > MB_POLICY_MAX_ROWS) {
		rc = mb_error_set(err, MB_EINVAL, where, "rows: refused: %zu row overrides, more than the %d a policy may have",
			json_object_size(rows), MB_POLICY_MAX_ROWS);
		goto cleanup;
	}
	if (rows && json_object_size(rows)) {
		const char *name;
		json_t *val;

		out->rows = calloc(json_object_size(rows), sizeof(*out->rows));
		if (!out->rows) {
			rc = mb_error_set(err, MB_ENOMEM, where, "no memory for row overrides");
			goto cleanup;
		}
		json_object_foreach(rows, name, val) {
			mb_policy_row *r = &out->rows[out->n_rows];

			r->name = strdup(name);
			if (!r->name) {
				rc = mb_error_set(err, MB_ENOMEM, where, "no memory for row %s", name);
				goto cleanup;
			}
			r->t = out->t;
			merge_thresholds(&r->t, val);
			out->n_rows++;
		}
	}
	gate = json_object_get(doc, "gate");
	if (json_is_boolean(json_object_get(gate, "identical_code_shortcut")))
		out->identical_code_shortcut = json_is_true(json_object_get(gate, "identical_code_shortcut"));
	fail_on = gate ? json_object_get(gate, "fail_on") : NULL;
	if (fail_on) {
		size_t i;
		json_t *item;

		out->fail_on = 0;
		json_array_foreach(fail_on, i, item) {
			mb_finding_kind k = mb_finding_kind_parse(json_string_value(item));

			if (k == MB_FINDING_KIND_COUNT) {
				rc = mb_error_set(err, MB_EINVAL, where, "gate.fail_on[%zu]: unknown finding \"%s\"",
					i, json_string_value(item));
				goto cleanup;
			}
			out->fail_on |= 1u << k;
		}
	}
	snprintf(out->source, sizeof(out->source), "%s", where);
cleanup:
	if (rc)
		mb_policy_free(out);
	return rc;
}

int mb_policy_load(mb_policy *out, const char *path, mb_error *err)
{
	json_t *doc = NULL;
	int rc;

	mb_policy_defaults(out);
	rc = mb_toml_parse_file(&doc, path, MB_POLICY_MAX_BYTES, "a policy", err);
	if (!rc)
		rc = mb_policy_from_json(out, doc, path, err);
	json_decref(doc);
	return rc;
}

const mb_thresholds *mb_policy_for_row(const mb_policy *policy, const char *row)
{
	for (size_t i = 0; row && i < policy->n_rows; i++)
		if (!strcmp(policy->rows[i].name, row))
			return &policy->rows[i].t;
	return &policy->t;
}

bool mb_policy_fails_on(const mb_policy *policy, mb_finding_kind kind)
{
	return (policy->fail_on >> kind) & 1u;
}

static json_t *thresholds_json(const mb_thresholds *t)
{
	return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "alpha", t->alpha, "min_effect", t->min_effect,
		"noise_ceiling", t->noise_ceiling, "noise_floor", t->noise_floor,
		"identical_code_max_change", t->identical_code_max_change, "memory_max_growth", t->memory_max_growth,
		"lane_min_effect", t->lane_min_effect);
}

json_t *mb_policy_to_json(const mb_policy *policy)
{
	json_t *out = thresholds_json(&policy->t);
	json_t *rows = json_object(), *fail_on = json_array();

	for (size_t i = 0; i < policy->n_rows; i++)
		json_object_set_new(rows, policy->rows[i].name, thresholds_json(&policy->rows[i].t));
	for (int k = 0; k < MB_FINDING_KIND_COUNT; k++)
		if (mb_policy_fails_on(policy, (mb_finding_kind)k))
			json_array_append_new(fail_on, json_string(finding_names[k]));
	json_object_set_new(out, "rows", rows);
	json_object_set_new(out, "gate", json_pack("{s:o, s:b}", "fail_on", fail_on, "identical_code_shortcut",
		policy->identical_code_shortcut));
	json_object_set_new(out, "source", json_string(policy->source));
	return out;
}

static void append(char *buf, size_t len, size_t *used, const char *fmt, double v, const char *name)
{
	int n;

	if (*used >= len)
		return;
	n = snprintf(buf + *used, len - *used, fmt, name, v);
	if (n > 0)
		*used += (size_t)n;
}

static void describe_thresholds(char *buf, size_t len, size_t *used, const char *prefix,
	const mb_thresholds *t, const mb_thresholds *ref)
{
	char name[256];

	if (t->alpha != ref->alpha) {
		snprintf(name, sizeof(name), "%salpha", prefix);
		append(buf, len, used, "%s = %g\n", t->alpha, name);
	}
	if (t->min_effect != ref->min_effect) {
		snprintf(name, sizeof(name), "%smin_effect", prefix);
		append(buf, len, used, "%s = %g\n", t->min_effect, name);
	}
	if (t->noise_ceiling != ref->noise_ceiling) {
		snprintf(name, sizeof(name), "%snoise_ceiling", prefix);
		append(buf, len, used, "%s = %g\n", t->noise_ceiling, name);
	}
	if (t->noise_floor != ref->noise_floor) {
		snprintf(name, sizeof(name), "%snoise_floor", prefix);
		append(buf, len, used, "%s = %g\n", t->noise_floor, name);
	}
	if (t->identical_code_max_change != ref->identical_code_max_change) {
		snprintf(name, sizeof(name), "%sidentical_code_max_change", prefix);
		append(buf, len, used, "%s = %g\n", t->identical_code_max_change, name);
	}
	if (t->lane_min_effect != ref->lane_min_effect) {
		snprintf(name, sizeof(name), "%slane_min_effect", prefix);
		append(buf, len, used, "%s = %g\n", t->lane_min_effect, name);
	}
	if (t->memory_max_growth != ref->memory_max_growth) {
		snprintf(name, sizeof(name), "%smemory_max_growth", prefix);
		append(buf, len, used, "%s = %g\n", t->memory_max_growth, name);
	}
}

void mb_policy_describe_changes(const mb_policy *policy, char *buf, size_t len)
{
	mb_policy def;
	size_t used = 0;

	if (!len)
		return;
	buf[0] = '\0';
	mb_policy_defaults(&def);
	describe_thresholds(buf, len, &used, "", &policy->t, &def.t);
	for (size_t i = 0; i < policy->n_rows; i++) {
		char prefix[128];

		snprintf(prefix, sizeof(prefix), "rows.%s.", policy->rows[i].name);
		/* a row override counts against the top level it refines */
		describe_thresholds(buf, len, &used, prefix, &policy->rows[i].t, &policy->t);
	}
	if (policy->fail_on != def.fail_on && used < len) {
		int n = snprintf(buf + used, len - used, "gate.fail_on = [");

		used += n > 0 ? (size_t)n : 0;
		for (int k = 0, first = 1; k < MB_FINDING_KIND_COUNT && used < len; k++) {
			if (!mb_policy_fails_on(policy, (mb_finding_kind)k))
				continue;
			n = snprintf(buf + used, len - used, "%s%s", first ? "" : ", ", finding_names[k]);
			used += n > 0 ? (size_t)n : 0;
			first = 0;
		}
		if (used < len) {
			n = snprintf(buf + used, len - used, "]\n");
			used += n > 0 ? (size_t)n : 0;
		}
	}
	if (!policy->identical_code_shortcut && used < len) {
		int n = snprintf(buf + used, len - used,
			"gate.identical_code_shortcut = false (statistics on rows of identical code too)\n");
		used += n > 0 ? (size_t)n : 0;
	}
	if (used >= len)
		buf[len - 1] = '\0';
}
