#include "receipts/verdict.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "receipts/printer.h"
#include "receipts/text.h"

#define MAX_VALUES 64
#define MAX_FAMILIES 64
/* A list of winning cases stops short of this, so that a label fits a
 * table cell, and keeps room for "and N more". */
#define LIST_TEXT_MAX 240
#define LIST_TAIL_ROOM 24

/* The time saved is taken in one mode and one dtype, the first of these
 * that the row has a pair in: cold first (the L2 of a training step rarely
 * holds the operands), bf16 first (what training stacks run). A step runs in
 * one of each, so neither is added up across. The same orders sort the
 * values a condition names. */
static const char *const MODE_ORDER[] = {"cold", "hot", "graph"};
static const char *const DTYPE_ORDER[] = {"bf16", "fp16", "fp32"};
#define N_MODES (sizeof(MODE_ORDER) / sizeof(MODE_ORDER[0]))
#define N_DTYPES (sizeof(DTYPE_ORDER) / sizeof(DTYPE_ORDER[0]))

const char *mb_verdict_kind_name(mb_verdict_kind kind)
{
	switch (kind) {
	case MB_VERDICT_KEEP: return "keep";
	case MB_VERDICT_CONDITIONAL: return "conditional";
	case MB_VERDICT_DROP: return "drop";
	case MB_VERDICT_AMBIGUOUS: return "ambiguous";
	case MB_VERDICT_NOT_ENOUGH_EVIDENCE: return "not enough evidence";
	}
	return "not enough evidence";
}

const char *mb_verdict_evidence_name(mb_verdict_evidence evidence)
{
	switch (evidence) {
	case MB_EVIDENCE_ISOLATED: return "isolated";
	case MB_EVIDENCE_LANES: return "lanes";
	case MB_EVIDENCE_NONE: break;
	}
	return "none";
}

const char *mb_verdict_saved_basis_name(mb_saved_basis basis)
{
	switch (basis) {
	case MB_SAVED_PER_STEP: return "per step";
	case MB_SAVED_PER_CALL: return "per call";
	case MB_SAVED_NONE: break;
	}
	return "none";
}

const char *mb_verdict_model_basis_name(mb_model_basis basis)
{
	switch (basis) {
	case MB_MODEL_BYTES: return "bytes";
	case MB_MODEL_LAUNCHES: return "launches";
	case MB_MODEL_NONE: break;
	}
	return "none";
}

void mb_verdict_shape_label(char *buf, size_t len, const json_t *kase)
{
	const json_t *shape = json_object_get(kase, "shape");
	const char *key;
	json_t *val;
	size_t used;
	int n;

	n = snprintf(buf, len, "%s/", mb_text_get(kase, "family"));
	used = n > 0 ? (size_t)n : 0;
	json_object_foreach((json_t *)shape, key, val) {
		if (used >= len)
			break;
		n = snprintf(buf + used, len - used, "%s%s=%" JSON_INTEGER_FORMAT,
			buf[used - 1] == '/' ? "" : ",", key, json_integer_value(val));
		used += n > 0 ? (size_t)n : 0;
	}
}

/* Same dtype, mode, family and shape: the two cases time the same work. */
static bool same_work(const json_t *a, const json_t *b)
{
	return !strcmp(mb_text_get(a, "dtype"), mb_text_get(b, "dtype"))
		&& !strcmp(mb_text_get(a, "mode"), mb_text_get(b, "mode"))
		&& !strcmp(mb_text_get(a, "family"), mb_text_get(b, "family"))
		&& json_equal(json_object_get(a, "shape"), json_object_get(b, "shape"));
}

bool mb_verdict_case_wrong(const json_t *kase)
{
	const char *status = mb_text_get(kase, "status");
	const json_t *corr = json_object_get(kase, "correctness");

	if (!strcmp(status, "skipped"))
		return false;
	if (strcmp(status, "ok"))
		return true;
	return json_is_object(corr) && !json_is_true(json_object_get(corr, "passed"));
}

static bool in_list(const char *const *list, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(list[i], s))
			return true;
	return false;
}

static double median_of(const json_t *kase)
{
	const json_t *t = json_object_get(kase, "timing");

	return json_is_object(t) ? json_number_value(json_object_get(t, "median_ns")) : NAN;
}

/* "bf16/cold/family/A=1,B=2": a case id without its row and variant. */
static const char *case_tail(const json_t *kase)
{
	const char *id = mb_text_get(kase, "id");
	const char *slash = strchr(id, '/');

	slash = slash ? strchr(slash + 1, '/') : NULL;
	return slash ? slash + 1 : id;
}

/* ---- one pair ------------------------------------------------------------ */

/* Stop-gap until receipts say where a case's weight came from (verdict.h):
 * "weight_source" when present, else any weight but the default 1. */
static bool weight_explicit(const json_t *kase)
{
	const char *source = json_string_value(json_object_get(kase, "weight_source"));

	if (source)
		return !strcmp(source, "suite");
	return json_number_value(json_object_get(kase, "weight")) != 1.0;
}

/* A variant's modelled bytes: read + write when `split`, else the total;
 * NaN when the receipt has neither. */
static double model_bytes(const json_t *kase, bool split)
{
	const json_t *t = json_object_get(kase, "throughput");

	if (split)
		return (double)(json_integer_value(json_object_get(t, "read_bytes"))
			+ json_integer_value(json_object_get(t, "write_bytes")));
	return json_is_number(json_object_get(t, "bytes")) ? json_number_value(json_object_get(t, "bytes")) : NAN;
}

static bool has_split_bytes(const json_t *kase)
{
	const json_t *t = json_object_get(kase, "throughput");

	return json_is_integer(json_object_get(t, "read_bytes")) && json_is_integer(json_object_get(t, "write_bytes"));
}

/* Launches in the variant's bytes model, else its declared signature. */
static double model_launches(const json_t *kase)
{
	const json_t *launches = json_object_get(json_object_get(kase, "throughput"), "model_launches");
	const json_t *expected = json_object_get(json_object_get(kase, "signature"), "expected_launches");

	if (json_array_size(launches))
		return (double)json_array_size(launches);
	return json_is_integer(expected) ? (double)json_integer_value(expected) : NAN;
}

/* Fallback bytes over fused bytes; the launch ratio when the read/write
 * model says both move the same bytes. Bytes-only receipts (made before the
 * read/write model) counted the same bytes for both variants, so there
 * equal bytes say nothing: no model. */
static void model_speedup(mb_verdict_pair *p)
{
	bool split = has_split_bytes(p->fused) && has_split_bytes(p->fallback);
	double fused = model_bytes(p->fused, split), fallback = model_bytes(p->fallback, split);
	double fused_launches, fallback_launches;

	p->model_basis = MB_MODEL_NONE;
	p->model_speedup = NAN;
	if (!(fused > 0.0) || !(fallback > 0.0))
		return;
	if (fused != fallback) {
		p->model_basis = MB_MODEL_BYTES;
		p->model_speedup = fallback / fused;
		return;
	}
	fused_launches = model_launches(p->fused);
	fallback_launches = model_launches(p->fallback);
	if (split && fused_launches > 0.0 && fallback_launches > 0.0) {
		p->model_basis = MB_MODEL_LAUNCHES;
		p->model_speedup = fallback_launches / fused_launches;
	}
}

static void pair_numbers(mb_verdict_pair *p)
{
	double fused = median_of(p->fused), fallback = median_of(p->fallback);
	bool timed = isfinite(fused) && isfinite(fallback);

	p->speedup = timed && fused > 0.0 ? fallback / fused : NAN;
	/* a pair that is not significantly faster saves nothing */
	p->saved_ns_per_call = !timed ? NAN : p->cmp.cls == MB_CMP_FASTER ? fallback - fused : 0.0;
	p->weight = json_number_value(json_object_get(p->fused, "weight"));
	p->weight_explicit = weight_explicit(p->fused);
	model_speedup(p);
}

/* Pair each fused case with the fallback case of the same work and compare
 * them; counts the fused cases without a fallback. */
static int make_pairs(mb_row_verdict *v, const json_t *const *cases, size_t n, const mb_thresholds *t,
	size_t *unmatched, mb_error *err)
{
	int rc = 0;

	v->pairs = calloc(n ? n : 1, sizeof(*v->pairs));
	if (!v->pairs)
		return mb_error_set(err, MB_ENOMEM, v->row, "no memory for pairs");
	*unmatched = 0;
	for (size_t i = 0; i < n; i++) {
		const json_t *fb = NULL;
		mb_verdict_pair *p;

		if (strcmp(mb_text_get(cases[i], "variant_kind"), "fused"))
			continue;
		for (size_t j = 0; j < n && !fb; j++)
			if (!strcmp(mb_text_get(cases[j], "variant_kind"), "fallback") && same_work(cases[i], cases[j]))
				fb = cases[j];
		if (!fb) {
			(*unmatched)++;
			continue;
		}
		p = &v->pairs[v->n_pairs++];
		p->fused = cases[i];
		p->fallback = fb;
		rc = mb_compare_cases(&p->cmp, fb, cases[i], t, err);
		if (rc) {
			mb_error_prefix(err, mb_text_get(cases[i], "id"));
			return rc;
		}
		pair_numbers(p);
	}
	return rc;
}

static const mb_verdict_pair *pair_of(const mb_row_verdict *v, const json_t *fused)
{
	for (size_t p = 0; p < v->n_pairs; p++)
		if (v->pairs[p].fused == fused)
			return &v->pairs[p];
	return NULL;
}

/* ---- the condition of a conditional row ------------------------------------ */

/* A fused case and whether it won: paired and significantly faster. A fused
 * case without a fallback did not win. */
typedef struct point {
	const json_t *kase;
	bool win;
} point;

/* The values of one dimension (mode, dtype or family) over the points. */
typedef struct dim_values {
	const char *value[MAX_VALUES];
	bool any_win[MAX_VALUES], any_other[MAX_VALUES];
	size_t n;
	bool overflow;
} dim_values;

/* The index of value `s`, added when new; MAX_VALUES when full. */
static size_t value_index(dim_values *d, const char *s)
{
	size_t k = 0;

	while (k < d->n && strcmp(d->value[k], s))
		k++;
	if (k == d->n && d->n < MAX_VALUES)
		d->value[d->n++] = s;
	return k < d->n ? k : MAX_VALUES;
}

/* The values of `key` in the order of `order` (n_order entries, may be
 * none), then any others as first seen. */
static void collect(dim_values *d, const point *pts, size_t n, const char *key, const char *const *order,
	size_t n_order)
{
	memset(d, 0, sizeof(*d));
	for (size_t o = 0; o < n_order; o++)
		for (size_t i = 0; i < n; i++)
			if (!strcmp(mb_text_get(pts[i].kase, key), order[o])) {
				value_index(d, order[o]);
				break;
			}
	for (size_t i = 0; i < n; i++) {
		size_t k = value_index(d, mb_text_get(pts[i].kase, key));

		if (k == MAX_VALUES) {
			d->overflow = true;
			return;
		}
		d->any_win[k] |= pts[i].win;
		d->any_other[k] |= !pts[i].win;
	}
}

/* Every value has only wins or only non-wins, and there are both: the
 * dimension alone says where the fused variant wins. Returns the number of
 * winning values (the cost of naming them), 0 when it does not separate. */
static size_t separates(const dim_values *d)
{
	size_t won = 0;

	if (d->overflow || d->n < 2)
		return 0;
	for (size_t i = 0; i < d->n; i++) {
		if (d->any_win[i] && d->any_other[i])
			return 0;
		won += d->any_win[i];
	}
	return won < d->n ? won : 0;
}

/* "a", "a<last>b", "a, b<last>c" of the winning (or the other) values. */
static void join_values(char *buf, size_t len, const dim_values *d, bool winning, const char *last)
{
	size_t total = 0, k = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < d->n; i++)
		total += d->any_win[i] == winning;
	for (size_t i = 0; i < d->n; i++) {
		if (d->any_win[i] != winning)
			continue;
		mb_text_appendf(buf, len, "%s%s", k == 0 ? "" : k + 1 == total ? last : ", ", d->value[i]);
		k++;
	}
}

static void categorical_text(char *buf, size_t len, const dim_values *d, const char *dim)
{
	char won[MB_VERDICT_TEXT_MAX], other[MB_VERDICT_TEXT_MAX];
	size_t n_won = separates(d);

	join_values(won, sizeof(won), d, true, " and ");
	join_values(other, sizeof(other), d, false, " or ");
	buf[0] = '\0';
	if (!strcmp(dim, "family"))
		mb_text_appendf(buf, len, "wins on famil%s %s only", n_won == 1 ? "y" : "ies", won);
	else if (n_won == 1)
		mb_text_appendf(buf, len, "wins in %s%s only", won, !strcmp(dim, "mode") ? " mode" : "");
	else
		mb_text_appendf(buf, len, "wins in %s%s, not %s", won, !strcmp(dim, "mode") ? " modes" : "", other);
}

/* A threshold on one shape axis: every win at or above (below) it, every
 * other case below (above). Present in every point's shape, or no
 * threshold. */
static bool axis_threshold(char *buf, size_t len, const point *pts, size_t n, const char *axis)
{
	json_int_t win_lo = 0, win_hi = 0, other_lo = 0, other_hi = 0;
	bool any_win = false, any_other = false;

	for (size_t i = 0; i < n; i++) {
		const json_t *val = json_object_get(json_object_get(pts[i].kase, "shape"), axis);
		json_int_t x;

		if (!json_is_integer(val))
			return false;
		x = json_integer_value(val);
		if (pts[i].win) {
			win_lo = any_win && win_lo < x ? win_lo : x;
			win_hi = any_win && win_hi > x ? win_hi : x;
			any_win = true;
		} else {
			other_lo = any_other && other_lo < x ? other_lo : x;
			other_hi = any_other && other_hi > x ? other_hi : x;
			any_other = true;
		}
	}
	if (!any_win || !any_other)
		return false;
	if (other_hi < win_lo)
		snprintf(buf, len, "wins at %s >= %" JSON_INTEGER_FORMAT, axis, win_lo);
	else if (win_hi < other_lo)
		snprintf(buf, len, "wins at %s <= %" JSON_INTEGER_FORMAT, axis, win_hi);
	else
		return false;
	return true;
}

static int compare_strings(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* No single dimension separates the wins: name them, sorted, as many as fit. */
static void list_wins(char *buf, size_t len, const point *pts, size_t n, size_t n_win)
{
	const char **won = calloc(n_win ? n_win : 1, sizeof(*won));
	size_t k = 0, listed = 0;

	snprintf(buf, len, "wins on %zu of %zu cases only: ", n_win, n);
	if (!won)
		return;
	for (size_t i = 0; i < n; i++)
		if (pts[i].win)
			won[k++] = case_tail(pts[i].kase);
	qsort(won, k, sizeof(*won), compare_strings);
	for (size_t i = 0; i < k; i++) {
		if (strlen(buf) + strlen(won[i]) + LIST_TAIL_ROOM >= (len < LIST_TEXT_MAX ? len : LIST_TEXT_MAX))
			break;
		mb_text_appendf(buf, len, "%s%s", i ? ", " : "", won[i]);
		listed++;
	}
	if (listed < k)
		mb_text_appendf(buf, len, " and %zu more", k - listed);
	free(won);
}

/* The simplest condition that separates the winning fused cases from the
 * rest: a mode, dtypes, families (each costing the number of values named)
 * or a threshold on one shape axis (cost 1); ties go to that order. None
 * separates: the winning cases. */
static void find_condition(mb_row_verdict *v, const point *pts, size_t n, size_t n_win)
{
	static const struct {
		const char *key;
		const char *const *order;
		size_t n_order;
	} dims[] = {{"mode", MODE_ORDER, N_MODES}, {"dtype", DTYPE_ORDER, N_DTYPES}, {"family", NULL, 0}};
	size_t best = 0;
	char text[MB_VERDICT_TEXT_MAX];
	const char *key;
	json_t *val;

	for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++) {
		dim_values d;
		size_t cost;

		collect(&d, pts, n, dims[i].key, dims[i].order, dims[i].n_order);
		cost = separates(&d);
		if (cost && (!best || cost < best)) {
			categorical_text(v->condition, sizeof(v->condition), &d, dims[i].key);
			best = cost;
		}
	}
	json_object_foreach((json_t *)json_object_get(pts[0].kase, "shape"), key, val) {
		if (best != 1 && axis_threshold(text, sizeof(text), pts, n, key)) {
			snprintf(v->condition, sizeof(v->condition), "%s", text);
			best = 1;
		}
	}
	if (!best)
		list_wins(v->condition, sizeof(v->condition), pts, n, n_win);
}

/* ---- the verdict ------------------------------------------------------------ */

/* A family is won when every fused case of it has a fallback and a win. */
static void families_won(mb_row_verdict *v, const json_t *const *cases, size_t n, size_t *n_fams, size_t *n_won)
{
	const char *fams[MAX_FAMILIES];

	*n_fams = *n_won = 0;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(mb_text_get(cases[i], "variant_kind"), "fused") && *n_fams < MAX_FAMILIES
			&& !in_list(fams, *n_fams, mb_text_get(cases[i], "family")))
			fams[(*n_fams)++] = mb_text_get(cases[i], "family");
	for (size_t f = 0; f < *n_fams; f++) {
		bool won = true;

		for (size_t i = 0; i < n && won; i++) {
			const mb_verdict_pair *p;

			if (strcmp(mb_text_get(cases[i], "variant_kind"), "fused")
				|| strcmp(mb_text_get(cases[i], "family"), fams[f]))
				continue;
			p = pair_of(v, cases[i]);
			won = p && p->cmp.cls == MB_CMP_FASTER;
		}
		if (won) {
			mb_text_appendf(v->families, sizeof(v->families), "%s%s", *n_won ? ", " : "", fams[f]);
			(*n_won)++;
		}
	}
}

/* Wrong answers, missing pairs, losses and noise, in that order; true when
 * one of them decided the row. */
static bool decide_early(mb_row_verdict *v, const json_t *const *cases, size_t n)
{
	bool any_fused = false, any_fallback = false;

	for (size_t i = 0; i < n; i++) {
		const char *kind = mb_text_get(cases[i], "variant_kind");

		any_fused |= !strcmp(kind, "fused");
		any_fallback |= !strcmp(kind, "fallback");
		if ((!strcmp(kind, "fused") || !strcmp(kind, "fallback")) && mb_verdict_case_wrong(cases[i])) {
			v->kind = MB_VERDICT_DROP;
			snprintf(v->reason, sizeof(v->reason), "wrong answer: %s (%s)", mb_text_get(cases[i], "id"),
				mb_text_get(cases[i], "status"));
			return true;
		}
	}
	if (!any_fused || !any_fallback || !v->n_pairs) {
		v->kind = MB_VERDICT_NOT_ENOUGH_EVIDENCE;
		snprintf(v->reason, sizeof(v->reason), "%s",
			!any_fused && !any_fallback ? "no fused/fallback pair (reference variants only)"
			: !any_fallback ? "no fallback variant" : !any_fused ? "no fused variant"
			: "no fallback case on the same shape as a fused case");
		return true;
	}
	for (size_t p = 0; p < v->n_pairs; p++) {
		const mb_comparison *c = &v->pairs[p].cmp;

		if (c->cls == MB_CMP_SLOWER) {
			v->kind = MB_VERDICT_DROP;
			snprintf(v->reason, sizeof(v->reason), "fused is slower than fallback on %s (%+.1f%%)",
				mb_text_get(v->pairs[p].fused, "id"), 100.0 * (c->shift.ratio - 1.0));
			return true;
		}
	}
	for (size_t p = 0; p < v->n_pairs; p++) {
		const mb_comparison *c = &v->pairs[p].cmp;

		if (c->cls == MB_CMP_AMBIGUOUS) {
			v->kind = MB_VERDICT_AMBIGUOUS;
			snprintf(v->reason, sizeof(v->reason), "%s: %s", mb_text_get(v->pairs[p].fused, "id"),
				c->reason);
			return true;
		}
	}
	return false;
}

static int decide(mb_row_verdict *v, const json_t *const *cases, size_t n, size_t unmatched, mb_error *err)
{
	point *pts = NULL;
	size_t n_pts = 0, n_win = 0, n_fams, n_fams_won;

	if (decide_early(v, cases, n))
		return 0;
	families_won(v, cases, n, &n_fams, &n_fams_won);
	pts = calloc(n ? n : 1, sizeof(*pts));
	if (!pts)
		return mb_error_set(err, MB_ENOMEM, v->row, "no memory for the row's cases");
	for (size_t i = 0; i < n; i++) {
		const mb_verdict_pair *p;

		if (strcmp(mb_text_get(cases[i], "variant_kind"), "fused"))
			continue;
		p = pair_of(v, cases[i]);
		pts[n_pts].kase = cases[i];
		pts[n_pts].win = p && p->cmp.cls == MB_CMP_FASTER;
		n_win += pts[n_pts++].win;
	}
	if (n_win == n_pts && v->evidence == MB_EVIDENCE_LANES && !v->lane_win) {
		/* wins in isolation, not in the step it sits in */
		v->kind = MB_VERDICT_CONDITIONAL;
		snprintf(v->condition, sizeof(v->condition), "wins in isolated cases, not in every lane step");
		snprintf(v->reason, sizeof(v->reason), "significant win on each of %zu pairs in isolation; ", v->n_pairs);
		mb_text_appendf(v->reason, sizeof(v->reason), "%s", v->lane_text);
	} else if (n_win == n_pts) {
		v->kind = MB_VERDICT_KEEP;
		mb_text_appendf(v->reason, sizeof(v->reason), "significant win on each of %zu pairs, every family (%s)%s%s",
			v->n_pairs, v->families, v->evidence == MB_EVIDENCE_LANES ? "; " : "; no lane (run-level) evidence yet",
			v->evidence == MB_EVIDENCE_LANES ? v->lane_text : "");
	} else if (n_win) {
		v->kind = MB_VERDICT_CONDITIONAL;
		find_condition(v, pts, n_pts, n_win);
		snprintf(v->reason, sizeof(v->reason), "significant win on %zu of %zu pairs, the other %zu SAME",
			n_win, v->n_pairs, v->n_pairs - n_win);
		if (unmatched)
			mb_text_appendf(v->reason, sizeof(v->reason), "; %zu fused case%s without a fallback", unmatched,
				unmatched == 1 ? "" : "s");
	} else {
		v->kind = MB_VERDICT_DROP;
		snprintf(v->reason, sizeof(v->reason), "no significant win over the fallback (%zu pair%s SAME)",
			v->n_pairs, v->n_pairs == 1 ? "" : "s");
	}
	free(pts);
	return 0;
}

/* ---- time saved and the largest shape ---------------------------------------- */

static bool in_picked(const mb_row_verdict *v, const mb_verdict_pair *p)
{
	return !strcmp(mb_text_get(p->fused, "mode"), v->saved_mode)
		&& !strcmp(mb_text_get(p->fused, "dtype"), v->saved_dtype) && isfinite(p->saved_ns_per_call);
}

/* The first mode of MODE_ORDER, then the first dtype of DTYPE_ORDER in it,
 * with a timed pair: independent of the receipt's order of modes and cases. */
static bool pick_mode_dtype(mb_row_verdict *v)
{
	for (size_t m = 0; m < N_MODES; m++)
		for (size_t d = 0; d < N_DTYPES; d++) {
			snprintf(v->saved_mode, sizeof(v->saved_mode), "%s", MODE_ORDER[m]);
			snprintf(v->saved_dtype, sizeof(v->saved_dtype), "%s", DTYPE_ORDER[d]);
			for (size_t p = 0; p < v->n_pairs; p++)
				if (in_picked(v, &v->pairs[p]))
					return true;
		}
	v->saved_mode[0] = v->saved_dtype[0] = '\0';
	return false;
}

static double shape_volume(const json_t *kase)
{
	const char *key;
	json_t *val;
	double volume = 1.0;

	json_object_foreach((json_t *)json_object_get(kase, "shape"), key, val)
		volume *= (double)json_integer_value(val);
	return volume;
}

/* Is `a` at a larger shape than `b`: more fallback bytes, then a larger
 * product of the axes, then the smaller id (so that order does not count). */
static bool larger_shape(const mb_verdict_pair *a, const mb_verdict_pair *b)
{
	bool split = has_split_bytes(a->fallback) && has_split_bytes(b->fallback);
	double bytes_a = model_bytes(a->fallback, split), bytes_b = model_bytes(b->fallback, split);

	if (bytes_a != bytes_b && isfinite(bytes_a) && isfinite(bytes_b))
		return bytes_a > bytes_b;
	if (shape_volume(a->fused) != shape_volume(b->fused))
		return shape_volume(a->fused) > shape_volume(b->fused);
	return strcmp(mb_text_get(a->fused, "id"), mb_text_get(b->fused, "id")) < 0;
}

/* Per step: weight x saved per call over the pairs with an explicit weight.
 * Without any: the largest saving per call and its shape. Keep and
 * conditional rows only: a dropped row saves nothing. */
static void time_saved(mb_row_verdict *v)
{
	const mb_verdict_pair *best = NULL;
	double step_ns = 0.0;
	size_t n_weighted = 0, n_unweighted = 0;

	if (!pick_mode_dtype(v))
		return;
	for (size_t i = 0; i < v->n_pairs; i++) {
		const mb_verdict_pair *p = &v->pairs[i];

		if (!in_picked(v, p))
			continue;
		if (!v->largest || larger_shape(p, v->largest))
			v->largest = p;
		if (p->weight_explicit) {
			step_ns += p->weight * p->saved_ns_per_call;
			n_weighted++;
		} else {
			n_unweighted++;
		}
		if (!best || p->saved_ns_per_call > best->saved_ns_per_call
			|| (p->saved_ns_per_call == best->saved_ns_per_call
				&& strcmp(mb_text_get(p->fused, "id"), mb_text_get(best->fused, "id")) < 0))
			best = p;
	}
	if (v->kind != MB_VERDICT_KEEP && v->kind != MB_VERDICT_CONDITIONAL)
		return;
	if (n_weighted) {
		v->saved_basis = MB_SAVED_PER_STEP;
		v->saved_ns = step_ns;
		v->saved_unweighted = n_unweighted;
		v->saved_known = true;
		v->saved_ns_per_step = step_ns;
	} else {
		v->saved_basis = MB_SAVED_PER_CALL;
		v->saved_ns = best->saved_ns_per_call;
		if (best->saved_ns_per_call > 0.0)
			mb_verdict_shape_label(v->saved_shape, sizeof(v->saved_shape), best->fused);
	}
}

/* A lane's run of one configuration in one mode, or NULL. */
static const json_t *lane_run(const json_t *lane, const char *config, const char *mode)
{
	size_t i;
	json_t *run;

	json_array_foreach(json_object_get(lane, "runs"), i, run)
		if (!strcmp(mb_text_get(run, "config"), config) && !strcmp(mb_text_get(run, "mode"), mode))
			return run;
	return NULL;
}

/* An array of numbers as doubles (caller frees); *n its length. */
static double *numbers(const json_t *a, size_t *n)
{
	double *v = malloc((json_array_size(a) + 1) * sizeof(*v));
	size_t i;
	json_t *x;

	*n = 0;
	json_array_foreach(a, i, x)
		if (v && json_is_number(x))
			v[(*n)++] = json_number_value(x);
	return v;
}

/* Keep needs run-level evidence (src/README.md, Verdicts): for every lane
 * and mode whose step holds the row, the step with the row alone on its
 * fallback against the all-fused step, with the policy's statistics (the
 * rounds' medians carry the spread between rounds). The row has lane
 * evidence when some lane holds it; it wins when every such step is
 * significantly slower on the fallback. */
static int lane_evidence(mb_row_verdict *v, const json_t *receipt, const mb_thresholds *t, mb_error *err)
{
	size_t i, j;
	json_t *lane, *delta;
	int found = 0, rc = 0;

	v->lane_win = true;
	json_array_foreach(json_object_get(receipt, "lanes"), i, lane) {
		json_array_foreach(json_object_get(lane, "deltas"), j, delta) {
			const char *mode = mb_text_get(delta, "mode");
			const json_t *base = lane_run(lane, "fused", mode), *head = lane_run(lane, mb_text_get(delta, "config"), mode);
			double *b = NULL, *h = NULL, *bm = NULL, *hm = NULL, fb, fh;
			size_t nb, nh, nbm, nhm;
			mb_comparison cmp;

			if (strcmp(mb_text_get(delta, "row"), v->row) || !base || !head)
				continue;
			b = numbers(json_object_get(base, "step_ns"), &nb);
			h = numbers(json_object_get(head, "step_ns"), &nh);
			bm = numbers(json_object_get(base, "round_medians_ns"), &nbm);
			hm = numbers(json_object_get(head, "round_medians_ns"), &nhm);
			if (!b || !h || !bm || !hm)
				rc = mb_error_set(err, MB_ENOMEM, v->row, "no memory for the lane's steps");
			else
				rc = mb_compare_samples_reps(&cmp, b, nb, true, h, nh, true, bm, nbm >= 2 ? nbm : 0, hm,
					nhm >= 2 ? nhm : 0, t, err);
			fb = json_number_value(json_object_get(base, "median_step_ns"));
			fh = json_number_value(json_object_get(head, "median_step_ns"));
			free(b), free(h), free(bm), free(hm);
			if (rc)
				return rc;
			found++;
			/* the fallback slower is the fused row winning in the step */
			if (cmp.cls == MB_CMP_SLOWER && fh - fb > v->lane_saved_ns) {
				v->lane_saved_ns = fh - fb;
				v->lane_saved_fraction = fb > 0 ? (fh - fb) / fb : 0;
			}
			v->lane_win = v->lane_win && cmp.cls == MB_CMP_SLOWER;
			mb_text_appendf(v->lane_text, sizeof(v->lane_text), "%slane %s (%s): the fallback makes the step %+.2f%% (%s)",
				v->lane_text[0] ? "; " : "", mb_text_get(lane, "name"), mode, fb > 0 ? 100.0 * (fh - fb) / fb : 0.0,
				mb_cmp_class_name(cmp.cls));
		}
	}
	v->lane_win = v->lane_win && found > 0;
	v->evidence = found ? MB_EVIDENCE_LANES : MB_EVIDENCE_ISOLATED;
	return 0;
}

static int row_verdict(mb_row_verdict *v, const json_t *receipt, const char *row,
	const mb_policy *policy, mb_error *err)
{
	const json_t *all = json_object_get(receipt, "cases");
	const json_t **mine = calloc(json_array_size(all) + 1, sizeof(*mine));
	size_t n = 0, unmatched = 0, i;
	json_t *c;
	int rc = 0;

	v->row = strdup(row);
	if (!mine || !v->row) {
		rc = mb_error_set(err, MB_ENOMEM, row, "no memory for the row's cases");
		goto cleanup;
	}
	json_array_foreach(all, i, c)
		if (!strcmp(mb_text_get(c, "row"), row))
			mine[n++] = c;
	snprintf(v->block, sizeof(v->block), "%s", n ? mb_text_get(mine[0], "block") : "");
	rc = make_pairs(v, mine, n, mb_policy_for_row(policy, row), &unmatched, err);
	if (rc)
		goto cleanup;
	v->evidence = MB_EVIDENCE_NONE;
	if (v->n_pairs && (rc = lane_evidence(v, receipt, mb_policy_for_row(policy, row), err)))
		goto cleanup;
	if ((rc = decide(v, mine, n, unmatched, err)))
		goto cleanup;
	time_saved(v);
cleanup:
	free(mine);
	return rc;
}

/* Lanes are noted at the level of the set too: which rows they hold. */
static void note_lanes(mb_verdict_set *set, const json_t *receipt)
{
	const json_t *lanes = json_object_get(receipt, "lanes");
	size_t i;
	json_t *lane;

	set->lanes_present = json_array_size(lanes) > 0;
	if (!set->lanes_present)
		return;
	snprintf(set->lanes_note, sizeof(set->lanes_note), "run-level evidence from %zu lane%s:", json_array_size(lanes),
		json_array_size(lanes) == 1 ? "" : "s");
	json_array_foreach(lanes, i, lane)
		mb_text_appendf(set->lanes_note, sizeof(set->lanes_note), "%s %s (%s, %zu rows)", i ? "," : "",
			mb_text_get(lane, "name"), mb_text_get(lane, "pattern"), json_array_size(json_object_get(lane, "rows")));
}

int mb_verdict_compute(mb_verdict_set *out, const json_t *receipt, const mb_policy *policy, mb_error *err)
{
	const json_t *cases = json_object_get(receipt, "cases");
	size_t i;
	json_t *c;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	out->rows = calloc(json_array_size(cases) + 1, sizeof(*out->rows));
	if (!out->rows) {
		rc = mb_error_set(err, MB_ENOMEM, "verdict", "no memory for rows");
		goto cleanup;
	}
	json_array_foreach(cases, i, c) {
		const char *row = mb_text_get(c, "row");

		if (mb_verdict_find(out, row))
			continue;
		rc = row_verdict(&out->rows[out->n_rows++], receipt, row, policy, err);
		if (rc)
			goto cleanup;
	}
	note_lanes(out, receipt);
cleanup:
	if (rc)
		mb_verdict_set_free(out);
	return rc;
}

const mb_row_verdict *mb_verdict_find(const mb_verdict_set *set, const char *row)
{
	for (size_t i = 0; i < set->n_rows; i++)
		if (set->rows[i].row && !strcmp(set->rows[i].row, row))
			return &set->rows[i];
	return NULL;
}

void mb_verdict_set_free(mb_verdict_set *set)
{
	if (!set)
		return;
	for (size_t i = 0; i < set->n_rows; i++) {
		free(set->rows[i].row);
		free(set->rows[i].pairs);
	}
	free(set->rows);
	set->rows = NULL;
	set->n_rows = 0;
}

/* ---- words for the printers ---------------------------------------------------- */

void mb_verdict_label(char *buf, size_t len, const mb_row_verdict *v)
{
	if (!v)
		snprintf(buf, len, "-");
	else if (v->kind == MB_VERDICT_KEEP && v->evidence != MB_EVIDENCE_LANES)
		snprintf(buf, len, "keep (isolated evidence only)");
	else if (v->kind == MB_VERDICT_CONDITIONAL)
		snprintf(buf, len, "conditional (%s)", v->condition);
	else
		snprintf(buf, len, "%s", mb_verdict_kind_name(v->kind));
}

void mb_verdict_saved_text(char *buf, size_t len, const mb_row_verdict *v)
{
	char duration[64];

	if (!v || v->saved_basis == MB_SAVED_NONE) {
		snprintf(buf, len, "-");
		return;
	}
	mb_print_duration(duration, sizeof(duration), v->saved_ns);
	if (v->saved_basis == MB_SAVED_PER_STEP) {
		snprintf(buf, len, "%s per step (%s, %s)", duration, v->saved_dtype, v->saved_mode);
		if (v->saved_unweighted)
			mb_text_appendf(buf, len, "; %zu pair%s without a suite weight not counted", v->saved_unweighted,
				v->saved_unweighted == 1 ? "" : "s");
	} else if (v->saved_shape[0]) {
		snprintf(buf, len, "up to %s per call (%s, %s, at %s)", duration, v->saved_dtype, v->saved_mode,
			v->saved_shape);
	} else {
		snprintf(buf, len, "%s per call (%s, %s: no significant win there)", duration, v->saved_dtype,
			v->saved_mode);
	}
}

void mb_verdict_model_text(char *buf, size_t len, const mb_verdict_pair *p)
{
	if (!p || p->model_basis == MB_MODEL_NONE)
		snprintf(buf, len, "model n/a");
	else
		snprintf(buf, len, "model %.2fx%s", p->model_speedup, p->model_basis == MB_MODEL_LAUNCHES
			? " (launches)" : "");
}

void mb_verdict_speedup_text(char *buf, size_t len, const mb_row_verdict *v)
{
	char model[64], shape[MB_VERDICT_SHAPE_MAX];

	if (!v || !v->largest) {
		snprintf(buf, len, "-");
		return;
	}
	mb_verdict_model_text(model, sizeof(model), v->largest);
	mb_verdict_shape_label(shape, sizeof(shape), v->largest->fused);
	snprintf(buf, len, "%.2fx (%s) at %s (%s, %s)", v->largest->speedup, model, shape, v->saved_dtype,
		v->saved_mode);
}
