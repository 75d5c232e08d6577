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

const char *mb_cmp_why_name(mb_cmp_why why)
{
	switch (why) {
	case MB_WHY_NONE: return "";
	case MB_WHY_IDENTICAL_CODE: return "identical code";
	case MB_WHY_MACHINE_CHANGED: return "machine or harness changed";
	case MB_WHY_TAIL: return "tail";
	case MB_WHY_BETWEEN_RUNS: return "within the between-run noise";
	case MB_WHY_NO_TIMING: return "no timing";
	case MB_WHY_SOURCE_CHANGED: return "timing source changed";
	case MB_WHY_ALL_EXCLUDED: return "all samples excluded";
	case MB_WHY_NO_SAMPLES: return "no samples";
	case MB_WHY_NOT_POSITIVE: return "zero-time samples";
	case MB_WHY_NOT_CONVERGED: return "not converged";
	case MB_WHY_TOO_NOISY: return "too noisy";
	case MB_WHY_TOO_FEW_SAMPLES: return "too few samples";
	case MB_WHY_STRADDLES: return "interval straddles the effect";
	case MB_WHY_NOT_SIGNIFICANT: return "not significant";
	case MB_WHY_WITHIN_NOISE: return "within the noise";
	case MB_WHY_TAIL_CONFLICT: return "median and tail disagree";
	case MB_WHY_NOT_JUDGED: return "timing not judged (cpu backend)";
	case MB_WHY_COUNT: break;
	}
	return "";
}

const char *mb_cmp_direction_name(mb_cmp_direction dir)
{
	return dir == MB_DIR_FASTER ? "faster" : dir == MB_DIR_SLOWER ? "slower" : "";
}

static void set_reason(mb_comparison *c, mb_cmp_class cls, mb_cmp_why why, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void set_reason(mb_comparison *c, mb_cmp_class cls, mb_cmp_why why, const char *fmt, ...)
{
	va_list ap;

	c->cls = cls;
	c->why = why;
	va_start(ap, fmt);
	vsnprintf(c->reason, sizeof(c->reason), fmt, ap);
	va_end(ap);
}

static mb_cmp_direction direction_of(double ratio)
{
	return ratio > 1.0 ? MB_DIR_SLOWER : ratio < 1.0 ? MB_DIR_FASTER : MB_DIR_NONE;
}

/* The tail may turn a SAME into a change, or contradict a FASTER median;
 * it never excuses a SLOWER median, and an AMBIGUOUS one stays so. The
 * whole interval must lie beyond the effect, as it must for the median
 * (a significant shift beyond the effect whose interval does not straddle
 * it). */
static void classify_tail(mb_comparison *c)
{
	const mb_quantile_ratio *q = &c->tail;
	bool slower, faster;

	if (!q->ci_available || (c->cls != MB_CMP_SAME && c->cls != MB_CMP_FASTER))
		return;
	slower = q->ratio_lo > 1.0 + c->effect;
	faster = q->ratio_hi < 1.0 - c->effect;
	if (c->cls == MB_CMP_SAME && (slower || faster)) {
		set_reason(c, slower ? MB_CMP_SLOWER : MB_CMP_FASTER, MB_WHY_TAIL,
			"tail: p%.0f %+.1f%% [%+.1f%%, %+.1f%%], median %+.1f%%", 100.0 * q->x.p,
			100.0 * (q->ratio - 1.0), 100.0 * (q->ratio_lo - 1.0), 100.0 * (q->ratio_hi - 1.0),
			100.0 * (c->shift.ratio - 1.0));
		c->direction = slower ? MB_DIR_SLOWER : MB_DIR_FASTER;
	} else if (c->cls == MB_CMP_FASTER && slower) {
		/* a faster median with a slower tail is not a speed-up to wave
		 * through: it counts as a slow-down until someone looks */
		set_reason(c, MB_CMP_AMBIGUOUS, MB_WHY_TAIL_CONFLICT,
			"median %+.1f%% but tail: p%.0f %+.1f%% [%+.1f%%, %+.1f%%]", 100.0 * (c->shift.ratio - 1.0),
			100.0 * q->x.p, 100.0 * (q->ratio - 1.0), 100.0 * (q->ratio_lo - 1.0), 100.0 * (q->ratio_hi - 1.0));
		c->direction = MB_DIR_SLOWER;
	}
}

/* The decision itself, once the statistics are in. */
static void classify(mb_comparison *c, bool base_converged, bool head_converged, const mb_thresholds *t)
{
	double shift = c->shift.ratio - 1.0;
	double lo = c->shift.ratio_lo - 1.0, hi = c->shift.ratio_hi - 1.0;
	double me = fmax(t->min_effect, t->noise_floor);
	double noise = fmax(c->base.rel_noise, c->head.rel_noise);
	bool significant = c->test.p_two_sided < t->alpha;

	if (c->reps.used)
		me = fmax(me, c->reps.threshold);
	c->effect = me;
	c->direction = direction_of(c->shift.ratio);
	if (!base_converged || !head_converged) {
		set_reason(c, MB_CMP_AMBIGUOUS, MB_WHY_NOT_CONVERGED, "%s did not converge",
			!base_converged && !head_converged ? "neither side" : !base_converged ? "base" : "head");
		return;
	}
	if (c->base.rel_noise > t->noise_ceiling || c->head.rel_noise > t->noise_ceiling) {
		set_reason(c, MB_CMP_AMBIGUOUS, MB_WHY_TOO_NOISY, "too noisy: %s noise %.2f%% is above the ceiling %.2f%%",
			c->base.rel_noise > c->head.rel_noise ? "base" : "head", 100.0 * noise, 100.0 * t->noise_ceiling);
		return;
	}
	if (!c->shift.ci_available) {
		set_reason(c, MB_CMP_AMBIGUOUS, MB_WHY_TOO_FEW_SAMPLES, "too few samples (%zu, %zu) for a %.0f%% interval",
			c->base.n, c->head.n, 100.0 * (1.0 - t->alpha));
		return;
	}
	if ((lo < me && hi > me) || (lo < -me && hi > -me)) {
		set_reason(c, MB_CMP_AMBIGUOUS, MB_WHY_STRADDLES,
			"interval [%+.2f%%, %+.2f%%] straddles the %.2f%% %s", 100.0 * lo, 100.0 * hi, 100.0 * me,
			me > t->min_effect ? "between-run noise" : "minimum effect");
		return;
	}
	if (fabs(shift) > me && fabs(shift) > noise) {
		if (!significant) {
			set_reason(c, MB_CMP_AMBIGUOUS, MB_WHY_NOT_SIGNIFICANT, "shift %+.2f%% is not significant (p = %.3g)",
				100.0 * shift, c->test.p_two_sided);
			return;
		}
		if (c->reps.used && !(shift > 0.0 ? c->reps.ratio - 1.0 > me : 1.0 - c->reps.ratio > me)) {
			set_reason(c, MB_CMP_AMBIGUOUS, MB_WHY_WITHIN_NOISE,
				"shift %+.2f%%, but the repetitions' medians moved %+.2f%%, within %.2f%%",
				100.0 * shift, 100.0 * (c->reps.ratio - 1.0), 100.0 * me);
			return;
		}
		c->cls = shift > 0.0 ? MB_CMP_SLOWER : MB_CMP_FASTER;
		return;
	}
	if (significant && fabs(shift) > me) {
		set_reason(c, MB_CMP_AMBIGUOUS, MB_WHY_WITHIN_NOISE, "shift %+.2f%% is within the noise %.2f%%",
			100.0 * shift, 100.0 * noise);
		return;
	}
	c->cls = MB_CMP_SAME;
	if (fabs(shift) > t->min_effect)
		set_reason(c, MB_CMP_SAME, MB_WHY_BETWEEN_RUNS, "%+.2f%% is within the between-run noise %.2f%% (%s)",
			100.0 * shift, 100.0 * me, c->reps.used && c->reps.threshold >= t->noise_floor ? "repetitions"
			: "noise floor");
	classify_tail(c);
}

/* The between-run rule of compare.h (mb_repetition_cmp). */
static void repetitions(mb_repetition_cmp *r, const double *b, size_t nb, const double *h, size_t nh, double alpha)
{
	double sb = 0.0, sh = 0.0, vb = 0.0, vh = 0.0, df;

	memset(r, 0, sizeof(*r));
	if (nb < 2 || nh < 2)
		return;
	for (size_t i = 0; i < nb; i++)
		sb += b[i];
	for (size_t i = 0; i < nh; i++)
		sh += h[i];
	r->base_mean = sb / (double)nb;
	r->head_mean = sh / (double)nh;
	if (!(r->base_mean > 0.0) || !(r->head_mean > 0.0))
		return;
	for (size_t i = 0; i < nb; i++)
		vb += (b[i] - r->base_mean) * (b[i] - r->base_mean);
	for (size_t i = 0; i < nh; i++)
		vh += (h[i] - r->head_mean) * (h[i] - r->head_mean);
	r->used = true;
	r->n_base = nb;
	r->n_head = nh;
	r->base_noise = sqrt(vb / (double)(nb - 1)) / r->base_mean;
	r->head_noise = sqrt(vh / (double)(nh - 1)) / r->head_mean;
	df = (double)(nb + nh - 2);
	r->pooled_noise = sqrt(((double)(nb - 1) * r->base_noise * r->base_noise
		+ (double)(nh - 1) * r->head_noise * r->head_noise) / df);
	r->k = mb_stats_t_quantile(1.0 - alpha / 2.0, df) * sqrt(1.0 / (double)nb + 1.0 / (double)nh);
	r->threshold = r->k * r->pooled_noise;
	r->ratio = r->head_mean / r->base_mean;
}

int mb_compare_samples_reps(mb_comparison *out, const double *base, size_t n_base, bool base_converged,
	const double *head, size_t n_head, bool head_converged, const double *base_rep_medians, size_t n_base_reps,
	const double *head_rep_medians, size_t n_head_reps, const mb_thresholds *t, mb_error *err)
{
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!n_base || !n_head) {
		set_reason(out, MB_CMP_AMBIGUOUS, MB_WHY_NO_SAMPLES, "no samples on the %s side", !n_base ? "base" : "head");
		goto cleanup;
	}
	if ((rc = mb_stats_summarize(&out->base, base, n_base, err))
		|| (rc = mb_stats_summarize(&out->head, head, n_head, err))
		|| (rc = mb_stats_mann_whitney(&out->test, base, n_base, head, n_head, err)))
		goto cleanup;
	rc = mb_stats_hodges_lehmann(&out->shift, base, n_base, head, n_head, t->alpha, err);
	if (!rc)
		rc = mb_stats_quantile_ratio(&out->tail, base, n_base, head, n_head, MB_COMPARE_TAIL_QUANTILE, t->alpha, err);
	if (rc == MB_EINVAL) {
		/* a zero-time sample has no ratio: that is unclear, not broken */
		set_reason(out, MB_CMP_AMBIGUOUS, MB_WHY_NOT_POSITIVE, "%s", err ? err->text : "samples are not positive");
		rc = 0;
		goto cleanup;
	}
	if (rc)
		goto cleanup;
	repetitions(&out->reps, base_rep_medians, n_base_reps, head_rep_medians, n_head_reps, t->alpha);
	out->have_stats = true;
	classify(out, base_converged, head_converged, t);
cleanup:
	return rc;
}

int mb_compare_samples(mb_comparison *out, const double *base, size_t n_base, bool base_converged,
	const double *head, size_t n_head, bool head_converged, const mb_thresholds *t, mb_error *err)
{
	return mb_compare_samples_reps(out, base, n_base, base_converged, head, n_head, head_converged,
		NULL, 0, NULL, 0, t, err);
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

/* The medians of a timing's repetitions, in a new array; *out_n == 0 when
 * there are fewer than two or one is not positive. */
static int rep_medians(double **out, size_t *out_n, const json_t *timing, const char *id, mb_error *err)
{
	const json_t *reps = json_object_get(timing, "repetitions");
	size_t n = json_array_size(reps);
	double *v = NULL;

	*out = NULL;
	*out_n = 0;
	if (n < 2)
		return 0;
	v = malloc(n * sizeof(*v));
	if (!v)
		return mb_error_set(err, MB_ENOMEM, id, "no memory for %zu repetitions", n);
	for (size_t i = 0; i < n; i++) {
		v[i] = json_number_value(json_object_get(json_array_get(reps, i), "median_ns"));
		if (!(v[i] > 0.0)) {
			free(v);
			return 0;
		}
	}
	*out = v;
	*out_n = n;
	return 0;
}

int mb_compare_cases(mb_comparison *out, const json_t *base_case, const json_t *head_case,
	const mb_thresholds *t, mb_error *err)
{
	const json_t *bt = json_object_get(base_case, "timing");
	const json_t *ht = json_object_get(head_case, "timing");
	const char *id = json_string_value(json_object_get(head_case, "id"));
	double *b = NULL, *h = NULL, *rb = NULL, *rh = NULL;
	size_t nb = 0, nh = 0, nrb = 0, nrh = 0;
	const char *bsrc, *hsrc;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(bt) || !json_is_object(ht)) {
		set_reason(out, MB_CMP_AMBIGUOUS, MB_WHY_NO_TIMING, "no timing on the %s side (status %s)",
			!json_is_object(bt) ? "base" : "head",
			json_string_value(json_object_get(!json_is_object(bt) ? base_case : head_case, "status")));
		goto cleanup;
	}
	bsrc = json_string_value(json_object_get(bt, "source"));
	hsrc = json_string_value(json_object_get(ht, "source"));
	if (bsrc && hsrc && strcmp(bsrc, hsrc)) {
		set_reason(out, MB_CMP_AMBIGUOUS, MB_WHY_SOURCE_CHANGED, "timing source changed (%s -> %s)", bsrc, hsrc);
		goto cleanup;
	}
	if ((rc = mb_compare_case_samples(&b, &nb, base_case, err))
		|| (rc = mb_compare_case_samples(&h, &nh, head_case, err)))
		goto cleanup;
	if ((!nb && json_array_size(json_object_get(bt, "samples_ns")))
		|| (!nh && json_array_size(json_object_get(ht, "samples_ns")))) {
		const json_t *all = !nb ? bt : ht;

		set_reason(out, MB_CMP_AMBIGUOUS, MB_WHY_ALL_EXCLUDED, "all %zu samples of the %s side are excluded",
			json_array_size(json_object_get(all, "samples_ns")), !nb ? "base" : "head");
		goto cleanup;
	}
	if ((rc = rep_medians(&rb, &nrb, bt, id, err)) || (rc = rep_medians(&rh, &nrh, ht, id, err)))
		goto cleanup;
	rc = mb_compare_samples_reps(out, b, nb, json_is_true(json_object_get(bt, "converged")),
		h, nh, json_is_true(json_object_get(ht, "converged")), rb, nrb, rh, nrh, t, err);
cleanup:
	free(b);
	free(h);
	free(rb);
	free(rh);
	return rc;
}

/* Reasons that say the data is missing or means something else: identical
 * code does not make those SAME. The others are about noise, which is what
 * the identical-code rule is there to ignore. */
static bool data_missing(mb_cmp_why why)
{
	return why == MB_WHY_NO_TIMING || why == MB_WHY_SOURCE_CHANGED || why == MB_WHY_ALL_EXCLUDED
		|| why == MB_WHY_NO_SAMPLES || why == MB_WHY_NOT_POSITIVE;
}

int mb_compare_under_identical_code(mb_comparison *out, const json_t *base_case, const json_t *head_case,
	const mb_thresholds *t, mb_error *err)
{
	double bound, est, lo, hi;
	bool slower, faster;
	int rc = mb_compare_cases(out, base_case, head_case, t, err);

	if (rc || (!out->have_stats && data_missing(out->why)))
		return rc;
	out->identical_code = true;
	bound = fmax(t->identical_code_max_change, t->noise_floor);
	if (out->reps.used)
		bound = fmax(bound, out->reps.threshold);
	out->effect = bound;
	est = out->shift.ratio;
	lo = out->shift.ci_available ? out->shift.ratio_lo : est;
	hi = out->shift.ci_available ? out->shift.ratio_hi : est;
	slower = out->have_stats && lo > 1.0 + bound && (!out->reps.used || out->reps.ratio > 1.0 + bound);
	faster = out->have_stats && hi < 1.0 - bound && (!out->reps.used || out->reps.ratio < 1.0 - bound);
	if (slower || faster) {
		out->machine_changed = true;
		out->direction = slower ? MB_DIR_SLOWER : MB_DIR_FASTER;
		set_reason(out, slower ? MB_CMP_SLOWER : MB_CMP_FASTER, MB_WHY_MACHINE_CHANGED,
			"identical code, yet %+.1f%% [%+.1f%%, %+.1f%%] is beyond the %.0f%% bound: machine or harness changed",
			100.0 * (est - 1.0), 100.0 * (lo - 1.0), 100.0 * (hi - 1.0), 100.0 * bound);
		return 0;
	}
	out->direction = MB_DIR_NONE;
	set_reason(out, MB_CMP_SAME, MB_WHY_IDENTICAL_CODE, "identical code");
	return 0;
}

/* ---- identical code ----------------------------------------------------- */

#define STEM_MAX 256

/* The file name of `path` up to its first dot: "src/kernels/rope.cuh" ->
 * "rope". */
static void file_stem(char *buf, size_t len, const char *path)
{
	const char *base = strrchr(path, '/');
	size_t n;

	base = base ? base + 1 : path;
	n = strcspn(base, ".");
	snprintf(buf, len, "%.*s", (int)(n < len ? n : len - 1), base);
}

static bool same_member(const json_t *a, const json_t *b, const char *key)
{
	const json_t *va = json_object_get(a, key), *vb = json_object_get(b, key);

	if (!va && !vb)
		return true;
	return va && vb && json_equal(va, vb);
}

/* ---- the identical-code index ------------------------------------------ */

/* The identical-code rule of compare.h, answered for every row from one
 * pass over both receipts: diff asks it for every case, and a pass over
 * the cases per question made diff quadratic in the cases. A source file
 * is attributed to the row its stem names or, failing that, to the row
 * named by the stem's longest "_"-separated prefix (ssm_scan_sm90_layout.h
 * to ssm_scan, recurrent_scan_math.h to recurrent_scan), among the rows of
 * either receipt; it belongs to that row and every row built on it. A
 * helper named after its row is that row's code: counted as shared it made
 * a comment in ssm_scan_sm90.cuh "changed code" for every row, and unchanged
 * rows got the statistics across two machines. Only a stem with no such
 * prefix (vec, launch, rope when no row is called rope) is shared by every
 * row. So each source's verdict (its blob id is the same on the other
 * side) is folded into its row's group once, at one look-up per prefix of
 * its stem, and a question costs one look-up per "_"-separated prefix of
 * the row's name. */
struct mb_code_index {
	bool same_build;     /* binary provenance on both sides, same build and device */
	json_t *groups;      /* row -> [all its sources match, sources counted] */
	bool shared_match;   /* every source attributed to no row matches */
	size_t shared_count;
};

/* Sources by path, the first of each path (as sources_match found it). */
static int sources_by_path(json_t **out, const json_t *sources)
{
	size_t i;
	json_t *s, *map = json_object();
	const char *path;

	*out = map;
	if (!map)
		return MB_ENOMEM;
	json_array_foreach(sources, i, s) {
		path = json_string_value(json_object_get(s, "path"));
		if (path && !json_object_get(map, path) && json_object_set(map, path, s))
			return MB_ENOMEM;
	}
	return 0;
}

/* The sources that decide a timing: the kernels, the references (inputs
 * and checks), the harness (the timing itself), the quantiles the
 * harness's sampler takes its median and noise from (receipts/stats.c) and
 * the build files that set every compiler flag. Printers and the rest of
 * the receipts code do not change a number a case records. */
static const char *const timing_sources[] = {"src/kernels/", "src/reference/", "src/harness/",
	"src/receipts/stats.c", "src/receipts/stats.h", "meson.build", "meson_options.txt"};

static bool decides_timing(const char *path)
{
	for (size_t i = 0; i < sizeof(timing_sources) / sizeof(timing_sources[0]); i++) {
		size_t n = strlen(timing_sources[i]);

		if (timing_sources[i][n - 1] == '/' ? strncmp(path, timing_sources[i], n) == 0
			: strcmp(path, timing_sources[i]) == 0)
			return true;
	}
	return false;
}

/* The row a source of stem `stem` is attributed to, left in `stem`: the
 * stem itself or its longest "_"-separated prefix that is a row. Cut only
 * at "_": ssm_scanner.cu is no file of ssm_scan's. False when no prefix is
 * a row, and the source is shared. */
static bool owning_row(char *stem, const json_t *rows)
{
	char *cut;

	while (!json_object_get(rows, stem)) {
		cut = strrchr(stem, '_');
		if (!cut)
			return false;
		*cut = '\0';
	}
	return true;
}

/* Fold every source of `from` that decides a timing into its group: it
 * matches when `to` lists its path with an equal blob id. */
static int fold_sources(mb_code_index *ix, const json_t *from, const json_t *to_by_path, const json_t *rows)
{
	char stem[STEM_MAX];
	size_t i;
	json_t *s, *group;
	const char *path;
	const json_t *other, *blob;
	bool match;

	json_array_foreach(from, i, s) {
		path = json_string_value(json_object_get(s, "path"));
		if (!path || !decides_timing(path))
			continue;
		other = json_object_get(to_by_path, path);
		blob = json_object_get(s, "blob_id");
		match = other && blob && json_equal(blob, json_object_get(other, "blob_id"));
		file_stem(stem, sizeof(stem), path);
		if (!owning_row(stem, rows)) {
			ix->shared_match = ix->shared_match && match;
			ix->shared_count++;
			continue;
		}
		group = json_object_get(ix->groups, stem);
		if (!group) {
			group = json_pack("[b,I]", 1, (json_int_t)0);
			if (!group || json_object_set_new(ix->groups, stem, group))
				return MB_ENOMEM;
		}
		if (!match && json_array_set_new(group, 0, json_false()))
			return MB_ENOMEM;
		if (json_array_set_new(group, 1, json_integer(json_integer_value(json_array_get(group, 1)) + 1)))
			return MB_ENOMEM;
	}
	return 0;
}

static int add_rows(json_t *rows, const json_t *receipt)
{
	size_t i;
	json_t *c;
	const char *row;

	json_array_foreach(json_object_get(receipt, "cases"), i, c) {
		row = json_string_value(json_object_get(c, "row"));
		if (row && json_object_set_new(rows, row, json_true()))
			return MB_ENOMEM;
	}
	return 0;
}

bool mb_compare_binary_provenance(const json_t *receipt)
{
	const json_t *p = json_object_get(receipt, "provenance");
	const char *origin = json_string_value(json_object_get(p, "origin"));

	return origin && strcmp(origin, "binary") == 0 && json_is_array(json_object_get(p, "sources"));
}

static bool same_build(const json_t *base_receipt, const json_t *head_receipt)
{
	/* what builds the code: a new compiler or flag is new code */
	static const char *const build_keys[] = {"c_compiler", "cxx_compiler", "cuda_compiler", "c_args",
		"cuda_args", "cuda_archs", "buildtype", "features"};
	const json_t *ba = json_object_get(base_receipt, "build");
	const json_t *bb = json_object_get(head_receipt, "build");

	if (!mb_compare_binary_provenance(base_receipt) || !mb_compare_binary_provenance(head_receipt))
		return false;
	for (size_t k = 0; k < sizeof(build_keys) / sizeof(build_keys[0]); k++)
		if (!same_member(ba, bb, build_keys[k]))
			return false;
	return same_member(json_object_get(base_receipt, "device"), json_object_get(head_receipt, "device"), "name");
}

int mb_code_index_build(mb_code_index **out, const json_t *base_receipt, const json_t *head_receipt,
	mb_error *err)
{
	const json_t *sa = json_object_get(json_object_get(base_receipt, "provenance"), "sources");
	const json_t *sb = json_object_get(json_object_get(head_receipt, "provenance"), "sources");
	mb_code_index *ix = calloc(1, sizeof(*ix));
	json_t *rows = json_object(), *a_by_path = NULL, *b_by_path = NULL;
	int rc = 0;

	*out = NULL;
	if (!ix || !rows || !(ix->groups = json_object())) {
		rc = MB_ENOMEM;
		goto cleanup;
	}
	ix->shared_match = true;
	ix->same_build = same_build(base_receipt, head_receipt);
	if (!ix->same_build)
		goto cleanup;
	/* both directions: a file that only the head has is a change too */
	if ((rc = add_rows(rows, base_receipt)) || (rc = add_rows(rows, head_receipt))
		|| (rc = sources_by_path(&a_by_path, sa)) || (rc = sources_by_path(&b_by_path, sb))
		|| (rc = fold_sources(ix, sa, b_by_path, rows)) || (rc = fold_sources(ix, sb, a_by_path, rows)))
		goto cleanup;
cleanup:
	json_decref(rows);
	json_decref(a_by_path);
	json_decref(b_by_path);
	if (rc) {
		mb_code_index_free(ix);
		return mb_error_set(err, rc, "identical code", "out of memory indexing the receipts' sources");
	}
	*out = ix;
	return 0;
}

bool mb_code_index_identical(const mb_code_index *ix, const char *row)
{
	char prefix[STEM_MAX];
	const json_t *group;
	bool match;
	size_t n, checked;

	if (!ix || !row || !ix->same_build)
		return false;
	match = ix->shared_match;
	checked = ix->shared_count;
	/* the row's own files, and those of each row it extends: "a_b_c" is
	 * built on "a_b" and "a" when those are rows */
	for (n = 0; row[n] && match; n++) {
		if (row[n + 1] != '_' && row[n + 1] != '\0')
			continue;
		if (n + 1 >= sizeof(prefix))
			break;
		memcpy(prefix, row, n + 1);
		prefix[n + 1] = '\0';
		group = json_object_get(ix->groups, prefix);
		if (!group)
			continue;
		match = json_is_true(json_array_get(group, 0));
		checked += (size_t)json_integer_value(json_array_get(group, 1));
	}
	return match && checked > 0;
}

void mb_code_index_free(mb_code_index *ix)
{
	if (!ix)
		return;
	json_decref(ix->groups);
	free(ix);
}

bool mb_compare_identical_code(const json_t *base_receipt, const json_t *head_receipt, const char *row)
{
	mb_code_index *ix = NULL;
	bool identical;

	if (!row || mb_code_index_build(&ix, base_receipt, head_receipt, NULL))
		return false;
	identical = mb_code_index_identical(ix, row);
	mb_code_index_free(ix);
	return identical;
}
