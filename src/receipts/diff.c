#include "receipts/diff.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "receipts/text.h"

#define FINDINGS_INITIAL 16
/* Kernel lists up to this long are compared name by name; longer ones
 * through a set of names. */
#define KERNELS_LINEAR_MAX 16

/* What a diff looks up per case, built once: every step that scanned a
 * receipt per case made diff quadratic in the cases. */
typedef struct diff_index {
	json_t *base_ids;            /* case id -> first base case with it */
	json_t *head_ids;            /* case id -> first head case with it */
	json_t *head_fallback_rows;  /* rows with a fallback case in head */
	mb_code_index *code;         /* NULL: the identical-code shortcut is off */
} diff_index;

static int vadd_finding(mb_diff *d, mb_finding_kind kind, mb_cmp_why why, const char *subject, mb_error *err,
	const char *fmt, va_list ap)
{
	mb_finding *f;

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
	f->why = why;
	f->fails = mb_policy_fails_on(d->policy, kind);
	snprintf(f->subject, sizeof(f->subject), "%s", subject);
	vsnprintf(f->message, sizeof(f->message), fmt, ap);
	return 0;
}

static int add_finding(mb_diff *d, mb_finding_kind kind, const char *subject, mb_error *err,
	const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int add_finding(mb_diff *d, mb_finding_kind kind, const char *subject, mb_error *err,
	const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vadd_finding(d, kind, MB_WHY_NONE, subject, err, fmt, ap);
	va_end(ap);
	return rc;
}

/* A finding about a timing comparison, which keeps its reason's kind. */
static int add_timing_finding(mb_diff *d, mb_finding_kind kind, mb_cmp_why why, const char *subject,
	mb_error *err, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static int add_timing_finding(mb_diff *d, mb_finding_kind kind, mb_cmp_why why, const char *subject,
	mb_error *err, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vadd_finding(d, kind, why, subject, err, fmt, ap);
	va_end(ap);
	return rc;
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
	const char *key)
{
	long ma = version_major(mb_text_get(da, key)), mb = version_major(mb_text_get(db, key));

	if (ma >= 0 && mb >= 0 && ma != mb)
		mb_text_appendf(reasons, len, "%sdevice.%s major differs (%ld vs %ld)", reasons[0] ? "; " : "", key,
			ma, mb);
}

/* "[hot, cold]" */
static void string_list(char *buf, size_t len, const json_t *arr)
{
	size_t i;
	json_t *v;

	snprintf(buf, len, "[");
	json_array_foreach(arr, i, v)
		mb_text_appendf(buf, len, "%s%s", i ? ", " : "", json_string_value(v) ? json_string_value(v) : "?");
	mb_text_appendf(buf, len, "]");
}

/* ---- GPUs ------------------------------------------------------------------
 * The rule (schemas/receipt.schema.json, "gpus"): a case compares with its
 * counterpart only on the same GPU model; sharding alone never matters,
 * since each case's samples come from one GPU; a case across GPUs compares
 * only with one across as many, over the same known topology class. */

/* The model a case ran on: its GPU's (gpus[case.gpu]), else the device's. */
static const char *case_model(const json_t *receipt, const json_t *kase)
{
	const json_t *gpu = json_object_get(kase, "gpu");
	const char *name = NULL;

	if (json_is_integer(gpu))
		name = mb_text_get(json_array_get(json_object_get(receipt, "gpus"), (size_t)json_integer_value(gpu)), "name");
	return name && *name ? name : mb_text_get(json_object_get(receipt, "device"), "name");
}

/* The one model every GPU of the receipt is, or NULL when they differ. */
static const char *receipt_model(const json_t *receipt)
{
	const char *model = mb_text_get(json_object_get(receipt, "device"), "name");
	size_t i;
	json_t *g;

	json_array_foreach(json_object_get(receipt, "gpus"), i, g)
		if (strcmp(mb_text_get(g, "name"), model))
			return NULL;
	return model;
}

/* GPUs one case spans: its collective's, else 1. */
static json_int_t case_span(const json_t *kase)
{
	const json_t *n = json_object_get(json_object_get(kase, "collective"), "gpus");

	return json_is_integer(n) ? json_integer_value(n) : 1;
}

/* A class two receipts can share: a link the driver named on every pair. */
static bool topology_known(const char *cls)
{
	return !strcmp(cls, "nvlink") || !strcmp(cls, "pcie") || !strcmp(cls, "mixed");
}

/* Why the pair of cases ran on unlike GPUs, into buf; false when alike. */
static bool unlike_gpus(char *buf, size_t len, const mb_diff *d, const json_t *b, const json_t *h, bool per_case)
{
	const char *cb = mb_text_get(json_object_get(d->base, "topology"), "class");
	const char *ch = mb_text_get(json_object_get(d->head, "topology"), "class");
	json_int_t gb = case_span(b), gh = case_span(h);

	if (per_case && strcmp(case_model(d->base, b), case_model(d->head, h))) {
		snprintf(buf, len, "ran on %s in base, %s in head", case_model(d->base, b), case_model(d->head, h));
		return true;
	}
	if (gb == 1 && gh == 1)
		return false;
	if (gb == gh && !strcmp(cb, ch) && topology_known(cb))
		return false;
	snprintf(buf, len, "spans %" JSON_INTEGER_FORMAT " GPU%s over topology %s in base, %" JSON_INTEGER_FORMAT
		" over %s in head", gb, gb == 1 ? "" : "s", *cb ? cb : "(none recorded)", gh, *ch ? ch : "(none recorded)");
	return true;
}

/* The cases present on both sides that ran on unlike GPUs: the first
 * named, and how many. A pair of one-model receipts was checked as a
 * whole (device.name). */
static void check_gpus(mb_diff *d, const json_t *head_ids, char *r, size_t len)
{
	bool per_case = !receipt_model(d->base) || !receipt_model(d->head);
	char why[MB_DIFF_TEXT_MAX / 2], first[MB_DIFF_TEXT_MAX / 2] = "";
	size_t i, n = 0;
	json_t *b;

	json_array_foreach(json_object_get(d->base, "cases"), i, b) {
		const json_t *h = json_object_get(head_ids, mb_text_get(b, "id"));

		if (!h || !unlike_gpus(why, sizeof(why), d, b, h, per_case))
			continue;
		if (n++ == 0)
			mb_text_appendf(first, sizeof(first), "%s %s", mb_text_get(b, "id"), why);
	}
	if (n)
		mb_text_appendf(r, len, "%sGPUs differ for %zu case%s (%s%s)", r[0] ? "; " : "", n, n == 1 ? "" : "s",
			n > 1 ? "first: " : "", first);
}

/* Every reason names the field that differs, with both values. */
static void check_comparable(mb_diff *d, const json_t *head_ids)
{
	const json_t *da = json_object_get(d->base, "device"), *db = json_object_get(d->head, "device");
	const json_t *sa = json_object_get(d->base, "settings"), *sb = json_object_get(d->head, "settings");
	const char *suite_a = mb_text_get(json_object_get(d->base, "suite"), "name");
	const char *suite_b = mb_text_get(json_object_get(d->head, "suite"), "name");
	char *r = d->reasons;
	size_t len = sizeof(d->reasons);

	r[0] = '\0';
	if (strcmp(mb_text_get(d->base, "backend"), mb_text_get(d->head, "backend")))
		mb_text_appendf(r, len, "%sbackend differs (%s vs %s)", r[0] ? "; " : "",
			mb_text_get(d->base, "backend"), mb_text_get(d->head, "backend"));
	/* receipts of one GPU model each compare as wholes; where either holds
	 * several models, case by case (check_gpus) */
	if (receipt_model(d->base) && receipt_model(d->head) && strcmp(mb_text_get(da, "name"), mb_text_get(db, "name")))
		mb_text_appendf(r, len, "%sdevice.name differs (%s vs %s)", r[0] ? "; " : "", mb_text_get(da, "name"),
			mb_text_get(db, "name"));
	check_gpus(d, head_ids, r, len);
	check_versions(r, len, da, db, "driver_version");
	check_versions(r, len, da, db, "runtime_version");
	if (strcmp(suite_a, suite_b))
		mb_text_appendf(r, len, "%ssuite.name differs (%s vs %s)", r[0] ? "; " : "", suite_a, suite_b);
	/* modes decide what a sample is (cold L2, hot, graph replay) and warm-up
	 * decides the state it starts from; sample counts, time limits and
	 * repetitions only change how many samples there are, which the tests
	 * absorb */
	if (!same_string_set(json_object_get(sa, "modes"), json_object_get(sb, "modes"))) {
		char ma[MB_DIFF_TEXT_MAX / 4], mb[MB_DIFF_TEXT_MAX / 4];

		string_list(ma, sizeof(ma), json_object_get(sa, "modes"));
		string_list(mb, sizeof(mb), json_object_get(sb, "modes"));
		mb_text_appendf(r, len, "%ssettings.modes differ (%s vs %s)", r[0] ? "; " : "", ma, mb);
	}
	if (!json_equal(json_object_get(sa, "warmup"), json_object_get(sb, "warmup")))
		mb_text_appendf(r, len, "%ssettings.warmup differs (%" JSON_INTEGER_FORMAT " vs %" JSON_INTEGER_FORMAT
			")", r[0] ? "; " : "", json_integer_value(json_object_get(sa, "warmup")),
			json_integer_value(json_object_get(sb, "warmup")));
	d->comparable = r[0] == '\0';
}

/* ---- consistency ----------------------------------------------------------- */

/* How many inconsistent cases a refusal names before "and N more". */
#define INCONSISTENT_NAMED 3
/* README: a case passes when its output norm is within 1% of the
 * reference's (and nothing is over tolerance, NaN or Inf). */
#define NORM_RATIO_TOLERANCE 0.01

/* Why `corr` contradicts itself, into buf; false when it does not. */
static bool correctness_contradiction(char *buf, size_t len, const json_t *corr)
{
	json_int_t over = json_integer_value(json_object_get(corr, "over_tolerance"));
	json_int_t nan = json_integer_value(json_object_get(corr, "nan_count"));
	json_int_t inf = json_integer_value(json_object_get(corr, "inf_count"));
	const json_t *norm = json_object_get(corr, "norm_ratio");
	const json_t *passed = json_object_get(corr, "passed");

	if (!json_is_object(corr) || !json_is_boolean(passed))
		return false;
	if (json_is_true(passed) && (over > 0 || nan > 0 || inf > 0)) {
		snprintf(buf, len, "correctness.passed is true with over_tolerance %" JSON_INTEGER_FORMAT
			", nan_count %" JSON_INTEGER_FORMAT ", inf_count %" JSON_INTEGER_FORMAT, over, nan, inf);
		return true;
	}
	if (json_is_false(passed) && over == 0 && nan == 0 && inf == 0 && json_is_number(norm)
		&& fabs(json_number_value(norm) - 1.0) <= NORM_RATIO_TOLERANCE) {
		snprintf(buf, len, "correctness.passed is false with no element over tolerance, no NaN or Inf "
			"and norm_ratio %.6g (within 1%%)", json_number_value(norm));
		return true;
	}
	return false;
}

bool mb_diff_receipt_consistent(const json_t *receipt, const char *name, char *reasons, size_t len)
{
	size_t i, bad = 0;
	json_t *c;

	json_array_foreach(json_object_get(receipt, "cases"), i, c) {
		char why[MB_DIFF_TEXT_MAX / 2];

		if (!correctness_contradiction(why, sizeof(why), json_object_get(c, "correctness")))
			continue;
		if (bad++ < INCONSISTENT_NAMED)
			mb_text_appendf(reasons, len, "%s%s is inconsistent: case %s: %s", reasons[0] ? "; " : "", name,
				mb_text_get(c, "id"), why);
	}
	if (bad > INCONSISTENT_NAMED)
		mb_text_appendf(reasons, len, " (and %zu more cases of %s)", bad - INCONSISTENT_NAMED, name);
	return bad == 0;
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

/* The same for long lists, through a set of `b`'s names. */
static int kernel_names_missing_long(char *buf, size_t len, const json_t *a, const json_t *b)
{
	json_t *names = json_object(), *k;
	size_t i;

	buf[0] = '\0';
	if (!names)
		return MB_ENOMEM;
	json_array_foreach(b, i, k)
		if (json_object_set_new(names, mb_text_get(k, "name"), json_true())) {
			json_decref(names);
			return MB_ENOMEM;
		}
	json_array_foreach(a, i, k)
		if (!json_object_get(names, mb_text_get(k, "name")))
			mb_text_appendf(buf, len, "%s%s", buf[0] ? ", " : "", mb_text_get(k, "name"));
	json_decref(names);
	return 0;
}

static int kernel_drift(mb_diff *d, const char *id, const json_t *b, const json_t *h, mb_error *err)
{
	const json_t *kb = json_object_get(b, "kernels"), *kh = json_object_get(h, "kernels");
	char gone[MB_DIFF_TEXT_MAX / 2], added[MB_DIFF_TEXT_MAX / 2];

	if (!json_is_array(kb) || !json_is_array(kh))
		return 0;
	if (json_array_size(kb) > KERNELS_LINEAR_MAX || json_array_size(kh) > KERNELS_LINEAR_MAX) {
		if (kernel_names_missing_long(gone, sizeof(gone), kb, kh)
			|| kernel_names_missing_long(added, sizeof(added), kh, kb))
			return mb_error_set(err, MB_ENOMEM, id, "no memory for kernel names");
	} else {
		kernel_names_missing(gone, sizeof(gone), kb, kh);
		kernel_names_missing(added, sizeof(added), kh, kb);
	}
	if (!gone[0] && !added[0])
		return 0;
	return add_finding(d, MB_FINDING_KERNEL_CHANGE, id, err, "kernels changed: removed [%s], added [%s]",
		gone, added);
}

/* A row with fallback cases in base and none in head, once per row, at its
 * first fallback case in base. */
static int missing_fallbacks(mb_diff *d, const diff_index *ix, mb_error *err)
{
	json_t *reported = json_object(), *c;
	size_t i;
	int rc = 0;

	if (!reported)
		return mb_error_set(err, MB_ENOMEM, "diff", "no memory for rows");
	json_array_foreach(json_object_get(d->base, "cases"), i, c) {
		const char *row = mb_text_get(c, "row");

		if (strcmp(mb_text_get(c, "variant_kind"), "fallback") || json_object_get(ix->head_fallback_rows, row)
			|| json_object_get(reported, row))
			continue;
		if (json_object_set_new(reported, row, json_true())) {
			rc = mb_error_set(err, MB_ENOMEM, "diff", "no memory for rows");
			break;
		}
		if ((rc = add_finding(d, MB_FINDING_MISSING_FALLBACK, row, err,
			"row %s has no fallback variant any more", row)))
			break;
	}
	json_decref(reported);
	return rc;
}

/* A case's weight: how often its shape occurs in a training step, which
 * the time saved per step multiplies. */
static int weight_drift(mb_diff *d, const char *id, const json_t *b, const json_t *h, mb_error *err)
{
	const json_t *wb = json_object_get(b, "weight"), *wh = json_object_get(h, "weight");

	if (!json_is_number(wb) || !json_is_number(wh) || json_number_value(wb) == json_number_value(wh))
		return 0;
	return add_finding(d, MB_FINDING_WEIGHT_CHANGE, id, err, "weight %g -> %g (calls per training step): the time "
		"saved per step changes with it, whatever the kernels did", json_number_value(wb), json_number_value(wh));
}

/* A variant's kind decides which pair a verdict compares (fused against
 * fallback), so a variant that changed kind under the same name is
 * another comparison. */
static int kind_drift(mb_diff *d, const char *id, const json_t *b, const json_t *h, mb_error *err)
{
	const char *kb = mb_text_get(b, "variant_kind"), *kh = mb_text_get(h, "variant_kind");

	if (!strcmp(kb, kh))
		return 0;
	return add_finding(d, MB_FINDING_VARIANT_KIND_CHANGE, id, err, "variant kind %s -> %s: the row's verdict "
		"compares other pairs", *kb ? kb : "(none)", *kh ? kh : "(none)");
}

/* ---- fields and status ------------------------------------------------------- */

/* Fields of a case that may come and go without anything drifting: `error`
 * is null exactly when the case is ok, and the repetitions follow
 * settings.repetitions, which may differ like the sample counts. */
static bool optional_field(const char *path)
{
	/* gpu comes with sharding, which never changes what a sample means;
	 * wall_ns is what a case cost the run, which older receipts lack */
	return !strcmp(path, "error") || !strcmp(path, "timing.repetitions")
		|| !strcmp(path, "timing.between_run_noise") || !strcmp(path, "gpu") || !strcmp(path, "wall_ns");
}

/* Append to `buf` the path of every member of `b` (recursively through
 * objects) that `h` lacks or has as null while `b` does not. */
static void missing_fields(char *buf, size_t len, const json_t *b, const json_t *h, const char *prefix)
{
	const char *key;
	json_t *bv;

	json_object_foreach((json_t *)b, key, bv) {
		const json_t *hv = json_object_get(h, key);
		char path[MB_DIFF_TEXT_MAX / 4];

		snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ? "." : "", key);
		if (json_is_null(bv) || optional_field(path))
			continue;
		if (!hv || json_is_null(hv))
			mb_text_appendf(buf, len, "%s%s", buf[0] ? ", " : "", path);
		else if (json_is_object(bv) && json_is_object(hv))
			missing_fields(buf, len, bv, hv, path);
	}
}

static int field_drift(mb_diff *d, mb_case_diff *cd, mb_error *err)
{
	const char *bs = mb_text_get(cd->base, "status"), *hs = mb_text_get(cd->head, "status");
	char gone[MB_DIFF_TEXT_MAX / 2] = "";

	if (!strcmp(bs, "ok") && !strcmp(hs, "skipped")) {
		cd->status_changed = true;
		return add_finding(d, MB_FINDING_STATUS_CHANGE, cd->id, err, "status ok -> skipped: %s",
			mb_text_get(cd->head, "error"));
	}
	/* a head that failed or crashed lacks timing for that reason, which
	 * the wrong-answer findings say */
	if (strcmp(hs, "ok") && strcmp(hs, bs))
		return 0;
	missing_fields(gone, sizeof(gone), cd->base, cd->head, "");
	if (!gone[0])
		return 0;
	cd->fields_missing = true;
	return add_finding(d, MB_FINDING_MISSING_FIELD, cd->id, err, "missing in head: %s", gone);
}

/* ---- cases ----------------------------------------------------------------- */

/* Every case by id (the first of an id wins, as a scan would find it). */
static int index_cases(json_t **out, const json_t *receipt)
{
	json_t *ids = json_object(), *c;
	size_t i;

	*out = ids;
	if (!ids)
		return MB_ENOMEM;
	json_array_foreach(json_object_get(receipt, "cases"), i, c) {
		const char *id = mb_text_get(c, "id");

		if (!json_object_get(ids, id) && json_object_set(ids, id, c))
			return MB_ENOMEM;
	}
	return 0;
}

static int index_fallback_rows(json_t **out, const json_t *receipt)
{
	json_t *rows = json_object(), *c;
	size_t i;

	*out = rows;
	if (!rows)
		return MB_ENOMEM;
	json_array_foreach(json_object_get(receipt, "cases"), i, c)
		if (!strcmp(mb_text_get(c, "variant_kind"), "fallback")
			&& json_object_set_new(rows, mb_text_get(c, "row"), json_true()))
			return MB_ENOMEM;
	return 0;
}

static void diff_index_free(diff_index *ix)
{
	json_decref(ix->base_ids);
	json_decref(ix->head_ids);
	json_decref(ix->head_fallback_rows);
	mb_code_index_free(ix->code);
	memset(ix, 0, sizeof(*ix));
}

static int diff_index_build(diff_index *ix, const mb_diff *d, mb_error *err)
{
	int rc;

	memset(ix, 0, sizeof(*ix));
	if ((rc = index_cases(&ix->base_ids, d->base)) || (rc = index_cases(&ix->head_ids, d->head))
		|| (rc = index_fallback_rows(&ix->head_fallback_rows, d->head)))
		return mb_error_set(err, rc, "diff", "no memory to index the cases");
	if (d->policy->identical_code_shortcut)
		return mb_code_index_build(&ix->code, d->base, d->head, err);
	return 0;
}

/* The timing comparison's findings. A case without timing because of its
 * status (skipped, crashed, failed before timing) has its status findings
 * instead, and one skipped on both sides has nothing to say. */
static int timing_findings(mb_diff *d, mb_case_diff *cd, mb_error *err)
{
	const mb_comparison *c = &cd->cmp;
	bool status_explains = c->why == MB_WHY_NO_TIMING
		&& (strcmp(mb_text_get(cd->base, "status"), "ok") || strcmp(mb_text_get(cd->head, "status"), "ok"));

	if (c->machine_changed) {
		d->n_machine_changed++;
		return add_timing_finding(d, MB_FINDING_MACHINE_CHANGED, c->why, cd->id, err,
			"machine or harness changed: %s %+.1f%% [%+.1f%%, %+.1f%%] with identical code (bound %.0f%%)",
			c->cls == MB_CMP_SLOWER ? "slower" : "faster", 100.0 * (c->shift.ratio - 1.0),
			100.0 * (c->shift.ratio_lo - 1.0), 100.0 * (c->shift.ratio_hi - 1.0), 100.0 * c->effect);
	}
	switch (c->cls) {
	case MB_CMP_SAME: d->n_same++; break;
	case MB_CMP_FASTER: d->n_faster++; break;
	case MB_CMP_SLOWER:
		d->n_slower++;
		if (c->why == MB_WHY_TAIL)
			return add_timing_finding(d, MB_FINDING_REGRESSION, c->why, cd->id, err, "slower in the %s", c->reason);
		return add_timing_finding(d, MB_FINDING_REGRESSION, c->why, cd->id, err,
			"slower: %+.1f%% [%+.1f%%, %+.1f%%], p = %.2g", 100.0 * (c->shift.ratio - 1.0),
			100.0 * (c->shift.ratio_lo - 1.0), 100.0 * (c->shift.ratio_hi - 1.0), c->test.p_two_sided);
	case MB_CMP_AMBIGUOUS:
		if (status_explains)
			break; /* "NOT TIMED", counted by its status findings */
		d->n_ambiguous++;
		if (c->direction == MB_DIR_FASTER)
			return add_timing_finding(d, MB_FINDING_AMBIGUOUS_FASTER, c->why, cd->id, err,
				"ambiguous, faster: %s", c->reason);
		return add_timing_finding(d, MB_FINDING_AMBIGUOUS, c->why, cd->id, err, "ambiguous%s%s: %s",
			c->direction == MB_DIR_SLOWER ? ", " : "", mb_cmp_direction_name(c->direction), c->reason);
	}
	return 0;
}

/* More scratch memory in the head than the policy allows: a regression
 * like a slower time. Receipts before schema version 2 call it extra_bytes
 * (mb_verdict_scratch_bytes reads both). */
static int memory_drift(mb_diff *d, mb_case_diff *cd, const mb_thresholds *t, mb_error *err)
{
	int64_t b = mb_verdict_scratch_bytes(cd->base), h = mb_verdict_scratch_bytes(cd->head);
	char from[32], to[32];

	if (b < 0 || h < 0 || h - b < MB_DIFF_MEMORY_MIN_BYTES || (double)h <= (double)b * (1.0 + t->memory_max_growth))
		return 0;
	mb_text_bytes(from, sizeof(from), (double)b);
	mb_text_bytes(to, sizeof(to), (double)h);
	cd->memory_regression = true;
	if (b > 0)
		return add_finding(d, MB_FINDING_MEMORY_REGRESSION, cd->id, err,
			"scratch memory %s -> %s (%+.1f%%, over the %g%% allowed)", from, to,
			100.0 * ((double)h / (double)b - 1.0), 100.0 * t->memory_max_growth);
	return add_finding(d, MB_FINDING_MEMORY_REGRESSION, cd->id, err, "scratch memory %s -> %s", from, to);
}

bool mb_diff_cpu_timing(const json_t *receipt)
{
	return !strcmp(mb_text_get(receipt, "backend"), "cpu");
}

/* The comparison of a case whose timing is not judged (diff.h). */
static void not_judged(mb_diff *d, mb_comparison *c)
{
	memset(c, 0, sizeof(*c));
	c->cls = MB_CMP_SAME;
	c->why = MB_WHY_NOT_JUDGED;
	snprintf(c->reason, sizeof(c->reason), "cpu backend: timing not judged");
	d->n_not_judged++;
}

static bool converged(const json_t *kase)
{
	return !json_is_false(json_object_get(json_object_get(kase, "timing"), "converged"));
}

/* Identical code holds a case to a loose bound on a time it must know: a
 * side that did not converge leaves it as AMBIGUOUS as any other case. */
static void unconverged_under_identical_code(mb_case_diff *cd)
{
	mb_comparison *c = &cd->cmp;
	bool base = converged(cd->base), head = converged(cd->head);

	if (c->why != MB_WHY_IDENTICAL_CODE || (base && head))
		return;
	c->cls = MB_CMP_AMBIGUOUS;
	c->why = MB_WHY_NOT_CONVERGED;
	c->direction = MB_DIR_NONE;
	snprintf(c->reason, sizeof(c->reason), "identical code, but %s did not converge: its time is not known well "
		"enough to hold it to the loose bound", !base && !head ? "neither side" : !head ? "the head" : "the base");
}

static int compare_pair(mb_diff *d, const diff_index *ix, mb_case_diff *cd, mb_error *err)
{
	const char *row = mb_text_get(cd->head, "row");
	const mb_thresholds *t = mb_policy_for_row(d->policy, row);
	bool base_wrong = mb_verdict_case_wrong(cd->base), head_wrong = mb_verdict_case_wrong(cd->head);
	char detail[MB_DIFF_TEXT_MAX / 2];
	int rc = 0;

	cd->compared = true;
	if (!d->timings_judged)
		not_judged(d, &cd->cmp);
	else if (mb_code_index_identical(ix->code, row))
		rc = mb_compare_under_identical_code(&cd->cmp, cd->base, cd->head, t, err);
	else
		rc = mb_compare_cases(&cd->cmp, cd->base, cd->head, t, err);
	if (rc) {
		mb_error_prefix(err, cd->id);
		return rc;
	}
	unconverged_under_identical_code(cd);
	if ((d->timings_judged && (rc = timing_findings(d, cd, err))) || (rc = memory_drift(d, cd, t, err)))
		return rc;
	if (head_wrong) {
		wrong_detail(detail, sizeof(detail), cd->head);
		if (base_wrong) {
			cd->still_wrong = true;
			d->n_still_wrong++;
			rc = add_finding(d, MB_FINDING_STILL_WRONG, cd->id, err, "still wrong: %s", detail);
		} else {
			cd->wrong_answer = true;
			d->n_wrong++;
			rc = add_finding(d, MB_FINDING_WRONG_ANSWER, cd->id, err, "new wrong answer: %s", detail);
		}
		if (rc)
			return rc;
	}
	if ((rc = field_drift(d, cd, err))
		|| (rc = tolerance_drift(d, cd->id, cd->base, cd->head, err))
		|| (rc = launch_drift(d, cd->id, cd->base, cd->head, err))
		|| (rc = kernel_drift(d, cd->id, cd->base, cd->head, err))
		|| (rc = weight_drift(d, cd->id, cd->base, cd->head, err))
		|| (rc = kind_drift(d, cd->id, cd->base, cd->head, err)))
		return rc;
	return 0;
}

static int diff_cases(mb_diff *d, const diff_index *ix, mb_error *err)
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
		cd->head = json_object_get(ix->head_ids, cd->id);
		if (!cd->head)
			rc = add_finding(d, MB_FINDING_MISSING_CASE, cd->id, err, "case disappeared");
		else
			rc = compare_pair(d, ix, cd, err);
		if (rc)
			return rc;
	}
	json_array_foreach(hc, i, c) {
		mb_case_diff *cd;

		if (json_object_get(ix->base_ids, mb_text_get(c, "id")))
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
	return missing_fallbacks(d, ix, err);
}

/* The identical-code shortcut needs both binaries' source ids: without
 * them every row gets the statistics, and the output says why. */
static int provenance_finding(mb_diff *d, mb_error *err)
{
	bool base = mb_compare_binary_provenance(d->base), head = mb_compare_binary_provenance(d->head);
	char subject[256];

	if (!d->policy->identical_code_shortcut || (base && head))
		return 0;
	snprintf(subject, sizeof(subject), "%s%s%s", base ? "" : d->base_name ? d->base_name : "base",
		!base && !head ? ", " : "", head ? "" : d->head_name ? d->head_name : "head");
	return add_finding(d, MB_FINDING_NO_BINARY_PROVENANCE, subject, err, "no binary provenance: statistics on "
		"every row (%s from a checkout, not from the binary that ran)",
		!base && !head ? "both receipts took their source ids" : "the receipt took its source ids");
}

/* Each head status against the head's own evidence: a claim it does not
 * support is a finding; a demotion never is. */
static int promotions(mb_diff *d, mb_error *err)
{
	int rc = mb_promotion_check(&d->promotions, &d->n_promotions, d->base, d->head, &d->head_verdicts,
		&d->base_verdicts, err);

	for (size_t i = 0; !rc && i < d->n_promotions; i++) {
		const mb_promotion *p = &d->promotions[i];

		if (p->claims && !p->supported && !p->demotion)
			rc = add_finding(d, MB_FINDING_UNSUPPORTED_PROMOTION, p->row, err, "%s", p->message);
	}
	return rc;
}

int mb_diff_receipts(mb_diff *out, json_t *base, json_t *head, const char *base_name,
	const char *head_name, const mb_policy *policy, bool force, mb_error *err)
{
	diff_index ix = { NULL, NULL, NULL, NULL };
	int rc = 0;

	memset(out, 0, sizeof(*out));
	out->base = json_incref(base);
	out->head = json_incref(head);
	out->base_name = base_name;
	out->head_name = head_name;
	out->policy = policy;
	out->forced = force;
	/* both checked, so that the refusal names every inconsistent side */
	out->inconsistent = !mb_diff_receipt_consistent(base, base_name, out->reasons, sizeof(out->reasons));
	out->inconsistent |= !mb_diff_receipt_consistent(head, head_name, out->reasons, sizeof(out->reasons));
	if (out->inconsistent) {
		out->comparable = false;
		goto cleanup;
	}
	if ((rc = diff_index_build(&ix, out, err)))
		goto cleanup;
	check_comparable(out, ix.head_ids);
	out->timings_judged = !mb_diff_cpu_timing(base) && !mb_diff_cpu_timing(head);
	if (!out->comparable && !force)
		goto cleanup;
	if ((rc = diff_cases(out, &ix, err)) || (rc = provenance_finding(out, err)))
		goto cleanup;
	if ((rc = mb_verdict_compute(&out->base_verdicts, base, policy, err))) {
		mb_error_prefix(err, base_name);
		goto cleanup;
	}
	if ((rc = mb_verdict_compute(&out->head_verdicts, head, policy, err))) {
		mb_error_prefix(err, head_name);
		goto cleanup;
	}
	rc = promotions(out, err);
cleanup:
	diff_index_free(&ix);
	return rc;
}

bool mb_diff_refused(const mb_diff *d)
{
	return d->inconsistent || (!d->comparable && !d->forced);
}

/* Kinds that mean the head computes something else or lost something: exit
 * 2, which wins over a regression. */
static const mb_finding_kind drift_kinds[] = {MB_FINDING_WRONG_ANSWER, MB_FINDING_STILL_WRONG,
	MB_FINDING_TOLERANCE_CHANGE, MB_FINDING_LAUNCH_CHANGE, MB_FINDING_KERNEL_CHANGE, MB_FINDING_MISSING_CASE,
	MB_FINDING_MISSING_FALLBACK, MB_FINDING_NEW_CASE, MB_FINDING_MISSING_FIELD, MB_FINDING_STATUS_CHANGE,
	MB_FINDING_WEIGHT_CHANGE, MB_FINDING_VARIANT_KIND_CHANGE};
/* Kinds that say the timing cannot be judged: exit 3. */
static const mb_finding_kind inconclusive_kinds[] = {MB_FINDING_AMBIGUOUS, MB_FINDING_MACHINE_CHANGED,
	MB_FINDING_AMBIGUOUS_FASTER, MB_FINDING_NO_BINARY_PROVENANCE};

#define N_KINDS(a) (sizeof(a) / sizeof((a)[0]))

static size_t count_failing(const mb_diff *d, mb_finding_kind kind)
{
	size_t n = 0;

	for (size_t i = 0; i < d->n_findings; i++)
		n += d->findings[i].kind == kind && d->findings[i].fails;
	return n;
}

int mb_diff_gate_exit(const mb_diff *d)
{
	if (mb_diff_refused(d))
		return MB_GATE_INCONCLUSIVE;
	for (size_t k = 0; k < N_KINDS(drift_kinds); k++)
		if (count_failing(d, drift_kinds[k]))
			return MB_GATE_DRIFT;
	if (count_failing(d, MB_FINDING_REGRESSION) || count_failing(d, MB_FINDING_MEMORY_REGRESSION))
		return MB_GATE_REGRESSION;
	if (count_failing(d, MB_FINDING_UNSUPPORTED_PROMOTION))
		return MB_GATE_PROMOTION;
	for (size_t k = 0; k < N_KINDS(inconclusive_kinds); k++)
		if (count_failing(d, inconclusive_kinds[k]))
			return MB_GATE_INCONCLUSIVE;
	return MB_GATE_PASS;
}

/* The failing findings of `kinds`, grouped by reason: ambiguous ones by
 * why they are ambiguous ("not converged (2)"), the others by kind. */
static void list_failing(char *buf, size_t len, const mb_diff *d, const mb_finding_kind *kinds, size_t n_kinds)
{
	for (size_t k = 0; k < n_kinds; k++) {
		bool by_why = kinds[k] == MB_FINDING_AMBIGUOUS || kinds[k] == MB_FINDING_AMBIGUOUS_FASTER;

		for (int why = 0; why < (by_why ? MB_WHY_COUNT : 1); why++) {
			size_t n = 0;

			for (size_t i = 0; i < d->n_findings; i++)
				n += d->findings[i].kind == kinds[k] && d->findings[i].fails
					&& (!by_why || d->findings[i].why == (mb_cmp_why)why);
			if (!n)
				continue;
			if (kinds[k] == MB_FINDING_MACHINE_CHANGED)
				mb_text_appendf(buf, len, "%smachine or harness changed (%zu)", buf[0] ? ", " : "", n);
			else if (by_why)
				mb_text_appendf(buf, len, "%s%s%s (%zu)", buf[0] ? ", " : "",
					kinds[k] == MB_FINDING_AMBIGUOUS_FASTER ? "ambiguous speed-up, " : "",
					mb_cmp_why_name((mb_cmp_why)why), n);
			else
				mb_text_appendf(buf, len, "%s%s (%zu)", buf[0] ? ", " : "", mb_finding_kind_name(kinds[k]), n);
		}
	}
}

void mb_diff_gate_reason(const mb_diff *d, char *buf, size_t len)
{
	char list[MB_DIFF_TEXT_MAX] = "";
	size_t n, tail = 0, n_listed = 0;

	buf[0] = '\0';
	switch (mb_diff_gate_exit(d)) {
	case MB_GATE_PASS:
		n = 0;
		for (size_t i = 0; i < d->n_findings; i++)
			n += d->findings[i].kind == MB_FINDING_AMBIGUOUS_FASTER;
		mb_text_appendf(buf, len, "pass");
		if (n)
			mb_text_appendf(buf, len, " (%zu ambiguous speed-up%s, not failing)", n, n == 1 ? "" : "s");
		if (!d->timings_judged)
			mb_text_appendf(buf, len, " (correctness and structure only: cpu-backend timings are not judged)");
		break;
	case MB_GATE_DRIFT:
		list_failing(list, sizeof(list), d, drift_kinds, N_KINDS(drift_kinds));
		mb_text_appendf(buf, len, "drift: %s", list);
		break;
	case MB_GATE_REGRESSION:
		n = count_failing(d, MB_FINDING_REGRESSION);
		for (size_t i = 0; i < d->n_findings; i++)
			tail += d->findings[i].kind == MB_FINDING_REGRESSION && d->findings[i].fails
				&& d->findings[i].why == MB_WHY_TAIL;
		mb_text_appendf(buf, len, "regression: ");
		if (n)
			mb_text_appendf(buf, len, "%zu case%s slower", n, n == 1 ? "" : "s");
		if (tail)
			mb_text_appendf(buf, len, " (%zu in the tail only)", tail);
		n_listed = count_failing(d, MB_FINDING_MEMORY_REGRESSION);
		if (n_listed)
			mb_text_appendf(buf, len, "%s%zu case%s need%s more scratch memory", n ? ", " : "", n_listed,
				n_listed == 1 ? "" : "s", n_listed == 1 ? "s" : "");
		break;
	case MB_GATE_PROMOTION:
		mb_text_appendf(buf, len, "unsupported promotion:");
		for (size_t i = 0; i < d->n_findings; i++)
			if (d->findings[i].kind == MB_FINDING_UNSUPPORTED_PROMOTION && d->findings[i].fails)
				mb_text_appendf(buf, len, "%s %s", n_listed++ ? "," : "", d->findings[i].subject);
		break;
	default:
		if (d->inconsistent)
			mb_text_appendf(buf, len, "inconclusive: inconsistent receipt: %s", d->reasons);
		else if (mb_diff_refused(d))
			mb_text_appendf(buf, len, "inconclusive: not comparable: %s", d->reasons);
		else {
			list_failing(list, sizeof(list), d, inconclusive_kinds, N_KINDS(inconclusive_kinds));
			mb_text_appendf(buf, len, "inconclusive: %s", list);
		}
		break;
	}
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
		{MB_FINDING_MISSING_FIELD, "case with missing fields", "cases with missing fields"},
		{MB_FINDING_STATUS_CHANGE, "case now skipped", "cases now skipped"},
		{MB_FINDING_WEIGHT_CHANGE, "weight change", "weight changes"},
		{MB_FINDING_VARIANT_KIND_CHANGE, "variant-kind change", "variant-kind changes"},
	};

	buf[0] = '\0';
	if (d->forced && !d->inconsistent)
		mb_text_appendf(buf, len, "FORCED: ");
	if (d->inconsistent) {
		mb_text_appendf(buf, len, "not compared: inconsistent receipt: %s", d->reasons);
		return;
	}
	if (mb_diff_refused(d)) {
		mb_text_appendf(buf, len, "not compared: %s", d->reasons);
		return;
	}
	if (!d->timings_judged)
		mb_text_appendf(buf, len, "timings not judged (cpu backend: taken on a shared CPU, they measure nothing "
			"about GPU kernels): %zu cases compared for correctness and structure only", d->n_not_judged);
	else
		mb_text_appendf(buf, len, "%zu slower, %zu faster, %zu same, %zu ambiguous",
			d->n_slower, d->n_faster, d->n_same, d->n_ambiguous);
	if (d->n_machine_changed)
		mb_text_appendf(buf, len, ", %zu machine or harness change%s", d->n_machine_changed,
			d->n_machine_changed == 1 ? "" : "s");
	/* "wrong answers" are new ones; cases wrong on both sides are counted
	 * apart, so that "0 wrong answers" never hides one */
	if (d->n_still_wrong)
		mb_text_appendf(buf, len, "; %zu new wrong answer%s, %zu still wrong", d->n_wrong,
			d->n_wrong == 1 ? "" : "s", d->n_still_wrong);
	else
		mb_text_appendf(buf, len, "; %zu wrong answer%s", d->n_wrong, d->n_wrong == 1 ? "" : "s");
	for (size_t k = 0; k < N_KINDS(extra); k++) {
		size_t n = count_kind(d, extra[k].kind);

		if (n)
			mb_text_appendf(buf, len, "; %zu %s", n, n == 1 ? extra[k].one : extra[k].many);
	}
	if (d->n_hidden)
		mb_text_appendf(buf, len, " (%zu unchanged case%s not shown: --only-changed)", d->n_hidden,
			d->n_hidden == 1 ? "" : "s");
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
	free(d->promotions);
	memset(d, 0, sizeof(*d));
}
