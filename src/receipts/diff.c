#include "receipts/diff.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "receipts/text.h"

#define FINDINGS_INITIAL 16

static int add_finding(mb_diff *d, mb_finding_kind kind, const char *subject, mb_error *err,
	const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int add_finding(mb_diff *d, mb_finding_kind kind, const char *subject, mb_error *err,
	const char *fmt, ...)
{
	mb_finding *f;
	va_list ap;

	if (d->n_findings == d->cap_findings) {
		size_t cap = d->cap_findings ? 2 * d->cap_findings : FINDINGS_INITIAL;
		mb_finding *grown = realloc(d->findings, cap * sizeof(*grown));

		if (!grown)
			return mb_error_set(err, MB_ENOMEM, subject, "no memory for findings");
		d->findings = grown;
		d->cap_findings = cap;
	}
	f = &d->findings[d->n_findings++];
	memset(f, 0, sizeof(*f));
	f->kind = kind;
	f->fails = mb_policy_fails_on(d->policy, kind);
	snprintf(f->subject, sizeof(f->subject), "%s", subject);
	va_start(ap, fmt);
	vsnprintf(f->message, sizeof(f->message), fmt, ap);
	va_end(ap);
	return 0;
}

/* ---- comparability ------------------------------------------------------- */

/* The leading integer of a version string ("550.54.15" -> 550); -1 if none. */
static long version_major(const char *v)
{
	char *end;
	long major;

	if (!v || !*v)
		return -1;
	major = strtol(v, &end, 10);
	return end == v ? -1 : major;
}

static bool same_string_set(const json_t *a, const json_t *b)
{
	size_t i, j;
	json_t *x, *y;

	if (json_array_size(a) != json_array_size(b))
		return false;
	json_array_foreach(a, i, x) {
		bool found = false;

		json_array_foreach(b, j, y)
			found = found || json_equal(x, y);
		if (!found)
			return false;
	}
	return true;
}

static void check_versions(char *reasons, size_t len, const json_t *da, const json_t *db,
	const char *key, const char *what)
{
	long ma = version_major(mb_text_get(da, key)), mb = version_major(mb_text_get(db, key));

	if (ma >= 0 && mb >= 0 && ma != mb)
		mb_text_appendf(reasons, len, "%s%s major %ld vs %ld", reasons[0] ? "; " : "", what, ma, mb);
}

static void check_comparable(mb_diff *d)
{
	const json_t *da = json_object_get(d->base, "device"), *db = json_object_get(d->head, "device");
	const json_t *sa = json_object_get(d->base, "settings"), *sb = json_object_get(d->head, "settings");
	const char *suite_a = mb_text_get(json_object_get(d->base, "suite"), "name");
	const char *suite_b = mb_text_get(json_object_get(d->head, "suite"), "name");
	char *r = d->reasons;
	size_t len = sizeof(d->reasons);

	r[0] = '\0';
	if (strcmp(mb_text_get(d->base, "backend"), mb_text_get(d->head, "backend")))
		mb_text_appendf(r, len, "%sbackends differ (%s vs %s)", r[0] ? "; " : "",
			mb_text_get(d->base, "backend"), mb_text_get(d->head, "backend"));
	if (strcmp(mb_text_get(da, "name"), mb_text_get(db, "name")))
		mb_text_appendf(r, len, "%sdevice models differ (%s vs %s)", r[0] ? "; " : "", mb_text_get(da, "name"),
			mb_text_get(db, "name"));
	check_versions(r, len, da, db, "driver_version", "driver");
	check_versions(r, len, da, db, "runtime_version", "CUDA runtime");
	if (strcmp(suite_a, suite_b))
		mb_text_appendf(r, len, "%ssuites differ (%s vs %s)", r[0] ? "; " : "", suite_a, suite_b);
	/* modes decide what a sample is (cold L2, hot, graph replay) and warm-up
	 * decides the state it starts from; sample counts and time limits only
	 * change how many samples there are, which the rank test absorbs */
	if (!same_string_set(json_object_get(sa, "modes"), json_object_get(sb, "modes")))
		mb_text_appendf(r, len, "%ssettings.modes differ", r[0] ? "; " : "");
	if (!json_equal(json_object_get(sa, "warmup"), json_object_get(sb, "warmup")))
		mb_text_appendf(r, len, "%ssettings.warmup differs (%" JSON_INTEGER_FORMAT " vs %" JSON_INTEGER_FORMAT
			")", r[0] ? "; " : "", json_integer_value(json_object_get(sa, "warmup")),
			json_integer_value(json_object_get(sb, "warmup")));
	d->comparable = r[0] == '\0';
}

/* ---- drift ----------------------------------------------------------------- */

static void wrong_detail(char *buf, size_t len, const json_t *kase)
{
	const json_t *corr = json_object_get(kase, "correctness");

	if (strcmp(mb_text_get(kase, "status"), "ok") && strcmp(mb_text_get(kase, "status"), "failed"))
		snprintf(buf, len, "status %s: %s", mb_text_get(kase, "status"), mb_text_get(kase, "error"));
	else if (json_is_object(corr))
		snprintf(buf, len, "correctness failed: max_abs %.3g, max_rel %.3g, %" JSON_INTEGER_FORMAT
			" elements over tolerance", json_number_value(json_object_get(corr, "max_abs")),
			json_number_value(json_object_get(corr, "max_rel")),
			json_integer_value(json_object_get(corr, "over_tolerance")));
	else
		snprintf(buf, len, "status %s", mb_text_get(kase, "status"));
}

static int tolerance_drift(mb_diff *d, const char *id, const json_t *b, const json_t *h, mb_error *err)
{
	const json_t *tb = json_object_get(json_object_get(b, "correctness"), "tolerance");
	const json_t *th = json_object_get(json_object_get(h, "correctness"), "tolerance");
	double ab, ah, rb, rh;

	if (!json_is_object(tb) || !json_is_object(th) || json_equal(tb, th))
		return 0;
	ab = json_number_value(json_object_get(tb, "abs"));
	ah = json_number_value(json_object_get(th, "abs"));
	rb = json_number_value(json_object_get(tb, "rel"));
	rh = json_number_value(json_object_get(th, "rel"));
	return add_finding(d, MB_FINDING_TOLERANCE_CHANGE, id, err,
		"tolerance %s: abs %g -> %g, rel %g -> %g; rationale \"%s\" -> \"%s\"",
		(ah > ab || rh > rb) ? "loosened" : (ah < ab || rh < rb) ? "tightened" : "changed",
		ab, ah, rb, rh, mb_text_get(tb, "rationale"), mb_text_get(th, "rationale"));
}

static int launch_drift(mb_diff *d, const char *id, const json_t *b, const json_t *h, mb_error *err)
{
	const json_t *lb = json_object_get(json_object_get(b, "timing"), "launches_per_call");
	const json_t *lh = json_object_get(json_object_get(h, "timing"), "launches_per_call");
	const json_t *ob = json_object_get(json_object_get(b, "signature"), "observed_launches");
	const json_t *oh = json_object_get(json_object_get(h, "signature"), "observed_launches");

	if (json_is_integer(lb) && json_is_integer(lh) && !json_equal(lb, lh))
		return add_finding(d, MB_FINDING_LAUNCH_CHANGE, id, err,
			"launches per call %" JSON_INTEGER_FORMAT " -> %" JSON_INTEGER_FORMAT,
			json_integer_value(lb), json_integer_value(lh));
	if (json_is_integer(ob) && json_is_integer(oh) && !json_equal(ob, oh))
		return add_finding(d, MB_FINDING_LAUNCH_CHANGE, id, err,
			"observed launches %" JSON_INTEGER_FORMAT " -> %" JSON_INTEGER_FORMAT,
			json_integer_value(ob), json_integer_value(oh));
	return 0;
}

static bool has_kernel(const json_t *kernels, const char *name)
{
	size_t i;
	json_t *k;

	json_array_foreach(kernels, i, k)
		if (!strcmp(mb_text_get(k, "name"), name))
			return true;
	return false;
}

/* Names in `a` that `b` lacks, "a, b" into buf. */
static void kernel_names_missing(char *buf, size_t len, const json_t *a, const json_t *b)
{
	size_t i;
	json_t *k;

	buf[0] = '\0';
	json_array_foreach(a, i, k)
		if (!has_kernel(b, mb_text_get(k, "name")))
			mb_text_appendf(buf, len, "%s%s", buf[0] ? ", " : "", mb_text_get(k, "name"));
}

static int kernel_drift(mb_diff *d, const char *id, const json_t *b, const json_t *h, mb_error *err)
{
	const json_t *kb = json_object_get(b, "kernels"), *kh = json_object_get(h, "kernels");
	char gone[MB_DIFF_TEXT_MAX / 2], added[MB_DIFF_TEXT_MAX / 2];

	if (!json_is_array(kb) || !json_is_array(kh))
		return 0;
	kernel_names_missing(gone, sizeof(gone), kb, kh);
	kernel_names_missing(added, sizeof(added), kh, kb);
	if (!gone[0] && !added[0])
		return 0;
	return add_finding(d, MB_FINDING_KERNEL_CHANGE, id, err, "kernels changed: removed [%s], added [%s]",
		gone, added);
}

static bool row_has_fallback(const json_t *receipt, const char *row)
{
	size_t i;
	json_t *c;

	json_array_foreach(json_object_get(receipt, "cases"), i, c)
		if (!strcmp(mb_text_get(c, "row"), row) && !strcmp(mb_text_get(c, "variant_kind"), "fallback"))
			return true;
	return false;
}

static int missing_fallbacks(mb_diff *d, mb_error *err)
{
	size_t i;
	json_t *c;
	int rc = 0;

	json_array_foreach(json_object_get(d->base, "cases"), i, c) {
		const char *row = mb_text_get(c, "row");
		bool first = true;

		if (strcmp(mb_text_get(c, "variant_kind"), "fallback") || row_has_fallback(d->head, row))
			continue;
		/* report each row once: at its first fallback case in base */
		for (size_t j = 0; j < i && first; j++) {
			const json_t *e = json_array_get(json_object_get(d->base, "cases"), j);

			first = strcmp(mb_text_get(e, "row"), row)
				|| strcmp(mb_text_get(e, "variant_kind"), "fallback");
		}
		if (first && (rc = add_finding(d, MB_FINDING_MISSING_FALLBACK, row, err,
			"row %s has no fallback variant any more", row)))
			break;
	}
	return rc;
}

/* ---- cases ----------------------------------------------------------------- */

static const json_t *find_case(const json_t *receipt, const char *id)
{
	size_t i;
	json_t *c;

	json_array_foreach(json_object_get(receipt, "cases"), i, c)
		if (!strcmp(mb_text_get(c, "id"), id))
			return c;
	return NULL;
}

static int compare_pair(mb_diff *d, mb_case_diff *cd, mb_error *err)
{
	const char *row = mb_text_get(cd->head, "row");
	char detail[MB_DIFF_TEXT_MAX / 2];
	int rc = 0;

	cd->compared = true;
	if (d->policy->identical_code_shortcut && mb_compare_identical_code(d->base, d->head, row)) {
		memset(&cd->cmp, 0, sizeof(cd->cmp));
		cd->cmp.cls = MB_CMP_SAME;
		cd->cmp.identical_code = true;
		snprintf(cd->cmp.reason, sizeof(cd->cmp.reason), "identical code");
	} else {
		rc = mb_compare_cases(&cd->cmp, cd->base, cd->head, mb_policy_for_row(d->policy, row), err);
		if (rc) {
			mb_error_prefix(err, cd->id);
			return rc;
		}
	}
	switch (cd->cmp.cls) {
	case MB_CMP_SAME: d->n_same++; break;
	case MB_CMP_FASTER: d->n_faster++; break;
	case MB_CMP_SLOWER:
		d->n_slower++;
		rc = add_finding(d, MB_FINDING_REGRESSION, cd->id, err, "slower: %+.1f%% [%+.1f%%, %+.1f%%], p = %.2g",
			100.0 * (cd->cmp.shift.ratio - 1.0), 100.0 * (cd->cmp.shift.ratio_lo - 1.0),
			100.0 * (cd->cmp.shift.ratio_hi - 1.0), cd->cmp.test.p_two_sided);
		break;
	case MB_CMP_AMBIGUOUS:
		d->n_ambiguous++;
		rc = add_finding(d, MB_FINDING_AMBIGUOUS, cd->id, err, "ambiguous: %s", cd->cmp.reason);
		break;
	}
	if (rc)
		return rc;
	if (!mb_verdict_case_wrong(cd->base) && mb_verdict_case_wrong(cd->head)) {
		cd->wrong_answer = true;
		d->n_wrong++;
		wrong_detail(detail, sizeof(detail), cd->head);
		if ((rc = add_finding(d, MB_FINDING_WRONG_ANSWER, cd->id, err, "new wrong answer: %s", detail)))
			return rc;
	}
	if ((rc = tolerance_drift(d, cd->id, cd->base, cd->head, err))
		|| (rc = launch_drift(d, cd->id, cd->base, cd->head, err))
		|| (rc = kernel_drift(d, cd->id, cd->base, cd->head, err)))
		return rc;
	return 0;
}

static int diff_cases(mb_diff *d, mb_error *err)
{
	const json_t *bc = json_object_get(d->base, "cases"), *hc = json_object_get(d->head, "cases");
	char detail[MB_DIFF_TEXT_MAX / 2];
	size_t i;
	json_t *c;
	int rc = 0;

	d->cases = calloc(json_array_size(bc) + json_array_size(hc) + 1, sizeof(*d->cases));
	if (!d->cases)
		return mb_error_set(err, MB_ENOMEM, "diff", "no memory for cases");
	json_array_foreach(bc, i, c) {
		mb_case_diff *cd = &d->cases[d->n_cases++];

		cd->id = mb_text_get(c, "id");
		cd->base = c;
		cd->head = find_case(d->head, cd->id);
		if (!cd->head)
			rc = add_finding(d, MB_FINDING_MISSING_CASE, cd->id, err, "case disappeared");
		else
			rc = compare_pair(d, cd, err);
		if (rc)
			return rc;
	}
	json_array_foreach(hc, i, c) {
		mb_case_diff *cd;

		if (find_case(d->base, mb_text_get(c, "id")))
			continue;
		cd = &d->cases[d->n_cases++];
		cd->id = mb_text_get(c, "id");
		cd->head = c;
		if ((rc = add_finding(d, MB_FINDING_NEW_CASE, cd->id, err, "new case")))
			return rc;
		if (mb_verdict_case_wrong(c)) {
			cd->wrong_answer = true;
			d->n_wrong++;
			wrong_detail(detail, sizeof(detail), c);
			if ((rc = add_finding(d, MB_FINDING_WRONG_ANSWER, cd->id, err, "new case is wrong: %s", detail)))
				return rc;
		}
	}
	return missing_fallbacks(d, err);
}

int mb_diff_receipts(mb_diff *out, json_t *base, json_t *head, const char *base_name,
	const char *head_name, const mb_policy *policy, bool force, mb_error *err)
{
	int rc = 0;

	memset(out, 0, sizeof(*out));
	out->base = json_incref(base);
	out->head = json_incref(head);
	out->base_name = base_name;
	out->head_name = head_name;
	out->policy = policy;
	out->forced = force;
	check_comparable(out);
	if (!out->comparable && !force)
		goto cleanup;
	if ((rc = diff_cases(out, err)))
		goto cleanup;
	if ((rc = mb_verdict_compute(&out->base_verdicts, base, policy, err))) {
		mb_error_prefix(err, base_name);
		goto cleanup;
	}
	if ((rc = mb_verdict_compute(&out->head_verdicts, head, policy, err))) {
		mb_error_prefix(err, head_name);
		goto cleanup;
	}
cleanup:
	return rc;
}

static bool any_failing(const mb_diff *d, mb_finding_kind kind)
{
	for (size_t i = 0; i < d->n_findings; i++)
		if (d->findings[i].kind == kind && d->findings[i].fails)
			return true;
	return false;
}

int mb_diff_gate_exit(const mb_diff *d)
{
	static const mb_finding_kind drift[] = {MB_FINDING_WRONG_ANSWER, MB_FINDING_TOLERANCE_CHANGE,
		MB_FINDING_LAUNCH_CHANGE, MB_FINDING_KERNEL_CHANGE, MB_FINDING_MISSING_CASE,
		MB_FINDING_MISSING_FALLBACK, MB_FINDING_NEW_CASE};

	if (!d->comparable && !d->forced)
		return MB_GATE_INCONCLUSIVE;
	for (size_t k = 0; k < sizeof(drift) / sizeof(drift[0]); k++)
		if (any_failing(d, drift[k]))
			return MB_GATE_DRIFT;
	if (any_failing(d, MB_FINDING_REGRESSION))
		return MB_GATE_REGRESSION;
	if (any_failing(d, MB_FINDING_AMBIGUOUS))
		return MB_GATE_INCONCLUSIVE;
	return MB_GATE_PASS;
}

static size_t count_kind(const mb_diff *d, mb_finding_kind kind)
{
	size_t n = 0;

	for (size_t i = 0; i < d->n_findings; i++)
		n += d->findings[i].kind == kind;
	return n;
}

void mb_diff_headline(const mb_diff *d, char *buf, size_t len)
{
	static const struct {
		mb_finding_kind kind;
		const char *one, *many;
	} extra[] = {
		{MB_FINDING_TOLERANCE_CHANGE, "tolerance change", "tolerance changes"},
		{MB_FINDING_LAUNCH_CHANGE, "launch-count change", "launch-count changes"},
		{MB_FINDING_KERNEL_CHANGE, "kernel change", "kernel changes"},
		{MB_FINDING_MISSING_CASE, "missing case", "missing cases"},
		{MB_FINDING_NEW_CASE, "new case", "new cases"},
		{MB_FINDING_MISSING_FALLBACK, "missing fallback", "missing fallbacks"},
	};

	buf[0] = '\0';
	if (d->forced)
		mb_text_appendf(buf, len, "FORCED: ");
	if (!d->comparable && !d->forced) {
		mb_text_appendf(buf, len, "not compared: %s", d->reasons);
		return;
	}
	mb_text_appendf(buf, len, "%zu slower, %zu faster, %zu same, %zu ambiguous; %zu wrong answer%s",
		d->n_slower, d->n_faster, d->n_same, d->n_ambiguous, d->n_wrong, d->n_wrong == 1 ? "" : "s");
	for (size_t k = 0; k < sizeof(extra) / sizeof(extra[0]); k++) {
		size_t n = count_kind(d, extra[k].kind);

		if (n)
			mb_text_appendf(buf, len, "; %zu %s", n, n == 1 ? extra[k].one : extra[k].many);
	}
}

void mb_diff_free(mb_diff *d)
{
	if (!d)
		return;
	json_decref(d->base);
	json_decref(d->head);
	free(d->cases);
	free(d->findings);
	mb_verdict_set_free(&d->base_verdicts);
	mb_verdict_set_free(&d->head_verdicts);
	memset(d, 0, sizeof(*d));
}
