#include "receipts/compare.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *mb_cmp_class_name(mb_cmp_class cls)
{
	switch (cls) {
	case MB_CMP_SAME: return "SAME";
	case MB_CMP_FASTER: return "FASTER";
	case MB_CMP_SLOWER: return "SLOWER";
	case MB_CMP_AMBIGUOUS: return "AMBIGUOUS";
	}
	return "AMBIGUOUS";
}

static void set_reason(mb_comparison *c, mb_cmp_class cls, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_reason(mb_comparison *c, mb_cmp_class cls, const char *fmt, ...)
{
	va_list ap;

	c->cls = cls;
	va_start(ap, fmt);
	vsnprintf(c->reason, sizeof(c->reason), fmt, ap);
	va_end(ap);
}

/* The decision itself, once the statistics are in. */
static void classify(mb_comparison *c, bool base_converged, bool head_converged, const mb_thresholds *t)
{
	double shift = c->shift.ratio - 1.0;
	double lo = c->shift.ratio_lo - 1.0, hi = c->shift.ratio_hi - 1.0;
	double me = t->min_effect;
	double noise = fmax(c->base.rel_noise, c->head.rel_noise);
	bool significant = c->test.p_two_sided < t->alpha;

	if (!base_converged || !head_converged) {
		set_reason(c, MB_CMP_AMBIGUOUS, "%s did not converge",
			!base_converged && !head_converged ? "neither side" : !base_converged ? "base" : "head");
		return;
	}
	if (c->base.rel_noise > t->noise_ceiling || c->head.rel_noise > t->noise_ceiling) {
		set_reason(c, MB_CMP_AMBIGUOUS, "noise %.2f%% is above the ceiling %.2f%%",
			100.0 * noise, 100.0 * t->noise_ceiling);
		return;
	}
	if (!c->shift.ci_available) {
		set_reason(c, MB_CMP_AMBIGUOUS, "too few samples (%zu, %zu) for a %.0f%% interval",
			c->base.n, c->head.n, 100.0 * (1.0 - t->alpha));
		return;
	}
	if ((lo < me && hi > me) || (lo < -me && hi > -me)) {
		set_reason(c, MB_CMP_AMBIGUOUS, "interval [%+.2f%%, %+.2f%%] straddles the %.2f%% minimum effect",
			100.0 * lo, 100.0 * hi, 100.0 * me);
		return;
	}
	if (fabs(shift) > me && fabs(shift) > noise) {
		if (significant) {
			c->cls = shift > 0.0 ? MB_CMP_SLOWER : MB_CMP_FASTER;
			return;
		}
		set_reason(c, MB_CMP_AMBIGUOUS, "shift %+.2f%% is not significant (p = %.3g)",
			100.0 * shift, c->test.p_two_sided);
		return;
	}
	if (significant && fabs(shift) > me) {
		set_reason(c, MB_CMP_AMBIGUOUS, "shift %+.2f%% is within the noise %.2f%%",
			100.0 * shift, 100.0 * noise);
		return;
	}
	c->cls = MB_CMP_SAME;
}

int mb_compare_samples(mb_comparison *out, const double *base, size_t n_base, bool base_converged,
	const double *head, size_t n_head, bool head_converged, const mb_thresholds *t, mb_error *err)
{
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!n_base || !n_head) {
		set_reason(out, MB_CMP_AMBIGUOUS, "no samples on the %s side", !n_base ? "base" : "head");
		goto cleanup;
	}
	if ((rc = mb_stats_summarize(&out->base, base, n_base, err))
		|| (rc = mb_stats_summarize(&out->head, head, n_head, err))
		|| (rc = mb_stats_mann_whitney(&out->test, base, n_base, head, n_head, err)))
		goto cleanup;
	rc = mb_stats_hodges_lehmann(&out->shift, base, n_base, head, n_head, t->alpha, err);
	if (rc == MB_EINVAL) {
		/* a zero-time sample has no ratio: that is unclear, not broken */
		set_reason(out, MB_CMP_AMBIGUOUS, "%s", err ? err->text : "samples are not positive");
		rc = 0;
		goto cleanup;
	}
	if (rc)
		goto cleanup;
	out->have_stats = true;
	classify(out, base_converged, head_converged, t);
cleanup:
	return rc;
}

int mb_compare_case_samples(double **out, size_t *out_n, const json_t *kase, mb_error *err)
{
	const json_t *timing = json_object_get(kase, "timing");
	const json_t *samples = json_object_get(timing, "samples_ns");
	const json_t *excluded = json_object_get(timing, "excluded");
	size_t n = json_array_size(samples), kept = 0;
	double *v = NULL;
	bool *skip = NULL;
	int rc = 0;

	*out = NULL;
	*out_n = 0;
	if (!n)
		goto cleanup;
	v = malloc(n * sizeof(*v));
	skip = calloc(n, sizeof(*skip));
	if (!v || !skip) {
		rc = mb_error_set(err, MB_ENOMEM, json_string_value(json_object_get(kase, "id")),
			"no memory for %zu samples", n);
		goto cleanup;
	}
	for (size_t i = 0; i < json_array_size(excluded); i++) {
		json_int_t k = json_integer_value(json_array_get(excluded, i));

		if (k >= 0 && (size_t)k < n)
			skip[k] = true;
	}
	for (size_t i = 0; i < n; i++)
		if (!skip[i])
			v[kept++] = json_number_value(json_array_get(samples, i));
	*out = v;
	*out_n = kept;
	v = NULL;
cleanup:
	free(v);
	free(skip);
	return rc;
}

int mb_compare_cases(mb_comparison *out, const json_t *base_case, const json_t *head_case,
	const mb_thresholds *t, mb_error *err)
{
	const json_t *bt = json_object_get(base_case, "timing");
	const json_t *ht = json_object_get(head_case, "timing");
	double *b = NULL, *h = NULL;
	size_t nb = 0, nh = 0;
	const char *bsrc, *hsrc;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(bt) || !json_is_object(ht)) {
		set_reason(out, MB_CMP_AMBIGUOUS, "no timing on the %s side (status %s)",
			!json_is_object(bt) ? "base" : "head",
			json_string_value(json_object_get(!json_is_object(bt) ? base_case : head_case, "status")));
		goto cleanup;
	}
	bsrc = json_string_value(json_object_get(bt, "source"));
	hsrc = json_string_value(json_object_get(ht, "source"));
	if (bsrc && hsrc && strcmp(bsrc, hsrc)) {
		set_reason(out, MB_CMP_AMBIGUOUS, "timing sources differ (%s, %s)", bsrc, hsrc);
		goto cleanup;
	}
	if ((rc = mb_compare_case_samples(&b, &nb, base_case, err))
		|| (rc = mb_compare_case_samples(&h, &nh, head_case, err)))
		goto cleanup;
	rc = mb_compare_samples(out, b, nb, json_is_true(json_object_get(bt, "converged")),
		h, nh, json_is_true(json_object_get(ht, "converged")), t, err);
cleanup:
	free(b);
	free(h);
	return rc;
}

/* ---- identical code ----------------------------------------------------- */

static bool under_code_dirs(const char *path)
{
	return strstr(path, "src/kernels/") || strstr(path, "src/reference/");
}

static bool names_a_row(const char *path, const json_t *receipt)
{
	const json_t *cases = json_object_get(receipt, "cases");
	size_t i;
	json_t *c;

	json_array_foreach(cases, i, c) {
		const char *row = json_string_value(json_object_get(c, "row"));

		if (row && strstr(path, row))
			return true;
	}
	return false;
}

static bool belongs_to_row(const char *path, const char *row, const json_t *a, const json_t *b)
{
	if (strstr(path, row))
		return true;
	return under_code_dirs(path) && !names_a_row(path, a) && !names_a_row(path, b);
}

/* Every source of `from` that belongs to the row has the same blob id in
 * `to`; counts how many were checked. */
static bool sources_match(const json_t *from, const json_t *to, const char *row,
	const json_t *ra, const json_t *rb, size_t *checked)
{
	size_t i, j;
	json_t *s, *o;

	json_array_foreach(from, i, s) {
		const char *path = json_string_value(json_object_get(s, "path"));
		bool found = false;

		if (!path || !belongs_to_row(path, row, ra, rb))
			continue;
		(*checked)++;
		json_array_foreach(to, j, o) {
			if (!strcmp(path, json_string_value(json_object_get(o, "path")) ? json_string_value(json_object_get(o, "path")) : "")) {
				found = json_equal(json_object_get(s, "blob_id"), json_object_get(o, "blob_id"));
				break;
			}
		}
		if (!found)
			return false;
	}
	return true;
}

static bool same_member(const json_t *a, const json_t *b, const char *key)
{
	const json_t *va = json_object_get(a, key), *vb = json_object_get(b, key);

	if (!va && !vb)
		return true;
	return va && vb && json_equal(va, vb);
}

bool mb_compare_identical_code(const json_t *base_receipt, const json_t *head_receipt, const char *row)
{
	const json_t *pa = json_object_get(base_receipt, "provenance");
	const json_t *pb = json_object_get(head_receipt, "provenance");
	const json_t *ba = json_object_get(base_receipt, "build");
	const json_t *bb = json_object_get(head_receipt, "build");
	const json_t *da = json_object_get(base_receipt, "device");
	const json_t *db = json_object_get(head_receipt, "device");
	size_t checked = 0;

	if (!json_is_true(json_object_get(pa, "available")) || !json_is_true(json_object_get(pb, "available")))
		return false;
	if (!same_member(ba, bb, "c_args") || !same_member(ba, bb, "cuda_args")
		|| !same_member(ba, bb, "cuda_archs") || !same_member(da, db, "name"))
		return false;
	if (!sources_match(json_object_get(pa, "sources"), json_object_get(pb, "sources"), row,
		base_receipt, head_receipt, &checked))
		return false;
	/* both directions: a file that only the head has is a change too */
	if (!sources_match(json_object_get(pb, "sources"), json_object_get(pa, "sources"), row,
		base_receipt, head_receipt, &checked))
		return false;
	return checked > 0;
}
