#include "receipts/verdict.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "receipts/text.h"

#define MAX_VALUES 64
#define MAX_FAMILIES 64
/* A list of winning cases stops short of this, so that a label fits a
 * table cell, and keeps room for "and N more". */
#define LIST_TEXT_MAX 240
#define LIST_TAIL_ROOM 24
/* Categorical dimensions with at most this many values are searched over
 * every subset of them; more, over single values only. */
#define SUBSET_VALUES_MAX 6
/* Distinct values of one shape axis a threshold is tried at. */
#define AXIS_VALUES_MAX 32
#define MAX_AXES 8
/* Selectors of one or two terms kept as candidates for a union of two. */
#define UNION_CANDIDATES_MAX 4096

/* The time saved is taken in one mode and one dtype, the first of these
 * that the row wins in: cold first (the L2 of a training step rarely holds
 * the operands), bf16 first (what training stacks run). A step runs in one
 * of each, so neither is added up across. The same orders sort the values
 * a condition names. */
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
	case MB_EVIDENCE_LANES_INCONCLUSIVE: return "lanes inconclusive";
	case MB_EVIDENCE_NONE: break;
	}
	return "none";
}

const char *mb_verdict_trade_name(mb_verdict_trade trade)
{
	switch (trade) {
	case MB_TRADE_TIME: return "time";
	case MB_TRADE_MEMORY: return "memory";
	case MB_TRADE_BOTH: return "both";
	case MB_TRADE_UNDECLARED: break;
	}
	return "undeclared";
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

const char *mb_verdict_outcome_name(mb_pair_outcome outcome)
{
	switch (outcome) {
	case MB_PAIR_WIN_TIME: return "win (time)";
	case MB_PAIR_WIN_MEMORY: return "win (memory)";
	case MB_PAIR_SAME: return "same";
	case MB_PAIR_LOSS: return "loss";
	case MB_PAIR_NOISY: break;
	}
	return "noisy";
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

static bool kind_is(const json_t *kase, const char *kind)
{
	return !strcmp(mb_text_get(kase, "variant_kind"), kind);
}

/* A variant the user could run instead of the fused kernel. */
static bool is_alternative(const json_t *kase)
{
	return kind_is(kase, "fallback") || kind_is(kase, "vendor");
}

static bool in_list(const char *const *list, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(list[i], s))
			return true;
	return false;
}

int64_t mb_verdict_scratch_bytes(const json_t *kase)
{
	const json_t *mem = json_object_get(kase, "memory");
	const json_t *v = json_object_get(mem, "scratch_bytes");

	if (!v)
		v = json_object_get(mem, "extra_bytes"); /* schema version 1 */
	return json_is_integer(v) ? (int64_t)json_integer_value(v) : -1;
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

/* Alternative bytes over fused bytes; the launch ratio when the read/write
 * model says both move the same bytes. Bytes-only receipts (made before the
 * read/write model) counted the same bytes for every variant, so there
 * equal bytes say nothing: no model. */
static void model_speedup(mb_verdict_pair *p)
{
	bool split = has_split_bytes(p->fused) && has_split_bytes(p->alt);
	double fused = model_bytes(p->fused, split), alt = model_bytes(p->alt, split);
	double fused_launches, alt_launches;

	p->model_basis = MB_MODEL_NONE;
	p->model_speedup = NAN;
	if (!(fused > 0.0) || !(alt > 0.0))
		return;
	if (fused != alt) {
		p->model_basis = MB_MODEL_BYTES;
		p->model_speedup = alt / fused;
		return;
	}
	fused_launches = model_launches(p->fused);
	alt_launches = model_launches(p->alt);
	if (split && fused_launches > 0.0 && alt_launches > 0.0) {
		p->model_basis = MB_MODEL_LAUNCHES;
		p->model_speedup = alt_launches / fused_launches;
	}
}

static bool trades_memory(mb_verdict_trade trade)
{
	return trade != MB_TRADE_TIME;
}

/* The fused variant needs much less scratch than the alternative (verdict.h). */
static bool memory_win(const mb_verdict_pair *p)
{
	double saved = (double)p->alt_scratch_bytes - (double)p->fused_scratch_bytes;

	if (p->fused_scratch_bytes < 0 || p->alt_scratch_bytes <= 0)
		return false;
	return saved >= (double)MB_VERDICT_MEMORY_MIN_BYTES
		&& saved >= MB_VERDICT_MEMORY_MIN_FRACTION * (double)p->alt_scratch_bytes;
}

static void pair_numbers(mb_verdict_pair *p, mb_verdict_trade trade)
{
	double fused = mb_text_median_ns(p->fused), alt = mb_text_median_ns(p->alt);
	double fb = p->fallback ? mb_text_median_ns(p->fallback) : NAN;
	bool timed = isfinite(fused) && isfinite(alt);

	p->speedup = timed && fused > 0.0 ? alt / fused : NAN;
	p->speedup_fallback = isfinite(fused) && isfinite(fb) && fused > 0.0 ? fb / fused : NAN;
	/* a pair that is not significantly faster saves no time */
	p->saved_ns_per_call = !timed ? NAN : p->cmp.cls == MB_CMP_FASTER ? alt - fused : 0.0;
	p->weight = json_number_value(json_object_get(p->fused, "weight"));
	p->weight_explicit = weight_explicit(p->fused);
	p->fused_scratch_bytes = mb_verdict_scratch_bytes(p->fused);
	p->alt_scratch_bytes = mb_verdict_scratch_bytes(p->alt);
	model_speedup(p);
	switch (p->cmp.cls) {
	case MB_CMP_FASTER: p->outcome = MB_PAIR_WIN_TIME; break;
	case MB_CMP_SLOWER: p->outcome = MB_PAIR_LOSS; break;
	case MB_CMP_AMBIGUOUS: p->outcome = MB_PAIR_NOISY; break;
	case MB_CMP_SAME: p->outcome = MB_PAIR_SAME; break;
	}
	if (p->outcome != MB_PAIR_WIN_TIME && trades_memory(trade) && memory_win(p))
		p->outcome = MB_PAIR_WIN_MEMORY;
}

/* The fastest correct, timed alternative of the same work as `fused`, and
 * the fallback case of that work (any status); NULL where there is none. */
static const json_t *best_alternative(const json_t *const *cases, size_t n, const json_t *fused,
	const json_t **fallback)
{
	const json_t *best = NULL;

	*fallback = NULL;
	for (size_t j = 0; j < n; j++) {
		if (!is_alternative(cases[j]) || !same_work(fused, cases[j]))
			continue;
		if (kind_is(cases[j], "fallback") && !*fallback)
			*fallback = cases[j];
		if (mb_verdict_case_wrong(cases[j]) || strcmp(mb_text_get(cases[j], "status"), "ok")
			|| !isfinite(mb_text_median_ns(cases[j])))
			continue;
		if (!best || mb_text_median_ns(cases[j]) < mb_text_median_ns(best))
			best = cases[j];
	}
	return best;
}

/* Pair each fused case with its best alternative and compare them; counts
 * the fused cases without one. */
static int make_pairs(mb_row_verdict *v, const json_t *const *cases, size_t n, const mb_thresholds *t,
	size_t *unmatched, mb_error *err)
{
	int rc = 0;

	v->pairs = calloc(n ? n : 1, sizeof(*v->pairs));
	if (!v->pairs)
		return mb_error_set(err, MB_ENOMEM, v->row, "no memory for pairs");
	*unmatched = 0;
	for (size_t i = 0; i < n; i++) {
		const json_t *fb, *alt;
		mb_verdict_pair *p;

		if (!kind_is(cases[i], "fused") || !strcmp(mb_text_get(cases[i], "status"), "skipped"))
			continue;
		alt = best_alternative(cases, n, cases[i], &fb);
		if (!alt) {
			(*unmatched)++;
			continue;
		}
		p = &v->pairs[v->n_pairs++];
		p->fused = cases[i];
		p->alt = alt;
		p->fallback = fb;
		rc = mb_compare_cases(&p->cmp, alt, cases[i], t, err);
		if (rc) {
			mb_error_prefix(err, mb_text_get(cases[i], "id"));
			return rc;
		}
		pair_numbers(p, v->trade);
		v->n_outcome[p->outcome]++;
	}
	return rc;
}

static bool is_win(mb_pair_outcome o)
{
	return o == MB_PAIR_WIN_TIME || o == MB_PAIR_WIN_MEMORY;
}

/* The alternative that was best on most pairs (the first of equals). */
static void name_best_alt(mb_row_verdict *v)
{
	size_t best_count = 0;

	for (size_t i = 0; i < v->n_pairs; i++) {
		const char *name = mb_text_get(v->pairs[i].alt, "variant");
		size_t count = 0;

		for (size_t j = 0; j < v->n_pairs; j++)
			count += !strcmp(mb_text_get(v->pairs[j].alt, "variant"), name);
		if (count > best_count) {
			best_count = count;
			snprintf(v->best_alt, sizeof(v->best_alt), "%s", name);
		}
	}
}

/* ---- the selector of a conditional row --------------------------------------- */

/* A fused case and whether it won, with its value index in each
 * categorical dimension and its shape axes. */
typedef struct point {
	const json_t *kase;
	bool win;
	int cat[3];                  /* mode, dtype, family */
	json_int_t axis[MAX_AXES];
} point;

enum { DIM_MODE, DIM_DTYPE, DIM_FAMILY, N_CAT };

typedef struct cat_dim {
	const char *value[MAX_VALUES];
	size_t n;
} cat_dim;

typedef struct axis_dim {
	const char *name;
	json_int_t value[AXIS_VALUES_MAX]; /* sorted, distinct */
	size_t n;
} axis_dim;

/* One option of a dimension: a set of categorical values (mask), or a
 * threshold on an axis (x >= value, or x <= value). `any` covers all. */
typedef struct term {
	bool any;
	uint64_t mask;
	int axis;
	bool at_least;
	json_int_t value;
} term;

typedef struct selector {
	term t[N_CAT + 1];           /* the three categorical, then the threshold */
	size_t terms, named;
	size_t covered;              /* wins covered */
} selector;

typedef struct space {
	const point *pts;
	size_t n, n_win;
	cat_dim cat[N_CAT];
	axis_dim axes[MAX_AXES];
	size_t n_axes;
	term *options[N_CAT + 1];
	size_t n_options[N_CAT + 1];
} space;

static int cat_index(cat_dim *d, const char *s)
{
	size_t k = 0;

	while (k < d->n && strcmp(d->value[k], s))
		k++;
	if (k == d->n) {
		if (d->n == MAX_VALUES)
			return -1;
		d->value[d->n++] = s;
	}
	return (int)k;
}

static int compare_ints(const void *a, const void *b)
{
	json_int_t x = *(const json_int_t *)a, y = *(const json_int_t *)b;

	return x < y ? -1 : x > y;
}

/* The values of each dimension; categorical values of mode and dtype in
 * MODE_ORDER and DTYPE_ORDER, so that texts do not follow the receipt's
 * order. False when a dimension has more values than can be named. */
static bool collect_values(space *s, point *pts)
{
	static const char *const keys[N_CAT] = {"mode", "dtype", "family"};
	const json_t *shape0 = json_object_get(pts[0].kase, "shape");
	const char *key;
	json_t *val;

	for (size_t o = 0; o < N_MODES; o++)
		for (size_t i = 0; i < s->n; i++)
			if (!strcmp(mb_text_get(pts[i].kase, "mode"), MODE_ORDER[o]) && cat_index(&s->cat[DIM_MODE], MODE_ORDER[o]) < 0)
				return false;
	for (size_t o = 0; o < N_DTYPES; o++)
		for (size_t i = 0; i < s->n; i++)
			if (!strcmp(mb_text_get(pts[i].kase, "dtype"), DTYPE_ORDER[o])
				&& cat_index(&s->cat[DIM_DTYPE], DTYPE_ORDER[o]) < 0)
				return false;
	for (size_t i = 0; i < s->n; i++)
		for (int d = 0; d < N_CAT; d++)
			if ((pts[i].cat[d] = cat_index(&s->cat[d], mb_text_get(pts[i].kase, keys[d]))) < 0)
				return false;
	/* axes every point has, as integers */
	json_object_foreach((json_t *)shape0, key, val) {
		axis_dim *a;
		bool usable = s->n_axes < MAX_AXES;

		for (size_t i = 0; i < s->n && usable; i++)
			usable = json_is_integer(json_object_get(json_object_get(pts[i].kase, "shape"), key));
		if (!usable)
			continue;
		a = &s->axes[s->n_axes];
		a->name = key;
		a->n = 0;
		for (size_t i = 0; i < s->n; i++) {
			json_int_t x = json_integer_value(json_object_get(json_object_get(pts[i].kase, "shape"), key));
			bool seen = false;

			pts[i].axis[s->n_axes] = x;
			for (size_t k = 0; k < a->n && !seen; k++)
				seen = a->value[k] == x;
			if (!seen && a->n < AXIS_VALUES_MAX)
				a->value[a->n++] = x;
		}
		qsort(a->value, a->n, sizeof(a->value[0]), compare_ints);
		s->n_axes++;
	}
	return true;
}

static size_t popcount64(uint64_t x)
{
	size_t n = 0;

	for (; x; x &= x - 1)
		n++;
	return n;
}

/* The options of every dimension: "any" first, then every proper subset of
 * a small categorical dimension (single values of a large one), and every
 * threshold of every axis that leaves something on either side. */
static int build_options(space *s)
{
	for (int d = 0; d < N_CAT; d++) {
		size_t n = s->cat[d].n, k = 0, cap;

		cap = 1 + (n <= SUBSET_VALUES_MAX ? ((size_t)1 << n) : n);
		if (!(s->options[d] = calloc(cap, sizeof(term))))
			return MB_ENOMEM;
		s->options[d][k++].any = true;
		if (n < 2)
			;
		else if (n <= SUBSET_VALUES_MAX)
			for (uint64_t m = 1; m + 1 < ((uint64_t)1 << n); m++)
				s->options[d][k++].mask = m;
		else
			for (size_t v = 0; v < n; v++)
				s->options[d][k++].mask = (uint64_t)1 << v;
		s->n_options[d] = k;
	}
	s->options[N_CAT] = calloc(1 + 2 * MAX_AXES * AXIS_VALUES_MAX, sizeof(term));
	if (!s->options[N_CAT])
		return MB_ENOMEM;
	s->options[N_CAT][0].any = true;
	s->n_options[N_CAT] = 1;
	for (size_t a = 0; a < s->n_axes; a++)
		for (size_t k = 0; k < s->axes[a].n; k++)
			for (int ge = 0; ge < 2; ge++) {
				term *t;

				/* x >= the smallest (x <= the largest) holds everywhere */
				if ((ge && k == 0) || (!ge && k + 1 == s->axes[a].n))
					continue;
				t = &s->options[N_CAT][s->n_options[N_CAT]++];
				t->axis = (int)a;
				t->at_least = ge;
				t->value = s->axes[a].value[k];
			}
	return 0;
}

static bool term_covers(const term *t, int dim, const point *p)
{
	if (t->any)
		return true;
	if (dim < N_CAT)
		return (t->mask >> p->cat[dim]) & 1u;
	return t->at_least ? p->axis[t->axis] >= t->value : p->axis[t->axis] <= t->value;
}

/* Covers no point that did not win, and how many wins. */
static bool pure(const space *s, const selector *sel, size_t *covered)
{
	*covered = 0;
	for (size_t i = 0; i < s->n; i++) {
		bool in = true;

		for (int d = 0; d <= N_CAT && in; d++)
			in = term_covers(&sel->t[d], d, &s->pts[i]);
		if (in && !s->pts[i].win)
			return false;
		*covered += in;
	}
	return true;
}

/* Is `a` a better selector than `b`: more wins covered, then fewer terms,
 * then fewer values named. */
static bool better(const selector *a, const selector *b)
{
	if (a->covered != b->covered)
		return a->covered > b->covered;
	if (a->terms != b->terms)
		return a->terms < b->terms;
	return a->named < b->named;
}

/* The selector at the odometer's position `idx` (one option per
 * dimension), with its count of terms and of values named. */
static void selector_at(selector *sel, const space *s, const size_t *idx)
{
	memset(sel, 0, sizeof(*sel));
	for (int d = 0; d <= N_CAT; d++) {
		sel->t[d] = s->options[d][idx[d]];
		if (!sel->t[d].any) {
			sel->terms++;
			sel->named += d < N_CAT ? popcount64(sel->t[d].mask) : 1;
		}
	}
}

/* The odometer's next position over every dimension's options; false after
 * the last. */
static bool odometer_next(size_t *idx, const space *s)
{
	for (int d = 0; d <= N_CAT; d++) {
		if (++idx[d] < s->n_options[d])
			return true;
		idx[d] = 0;
	}
	return false;
}

/* Every selector of at most `max_terms` terms; the best pure one in *best.
 * Stops at the first number of terms that covers every win. */
static void search(const space *s, selector *best)
{
	size_t idx[N_CAT + 1] = {0};

	memset(best, 0, sizeof(*best));
	for (size_t want = 1; want <= N_CAT + 1; want++) {
		memset(idx, 0, sizeof(idx));
		do {
			selector sel;
			size_t covered;

			selector_at(&sel, s, idx);
			if (sel.terms == want && pure(s, &sel, &covered)) {
				sel.covered = covered;
				if (!best->covered || better(&sel, best))
					*best = sel;
			}
		} while (odometer_next(idx, s));
		if (best->covered == s->n_win)
			return;
	}
}

/* "bf16", "bf16 or fp16" from a mask of a categorical dimension. */
static void join_mask(char *buf, size_t len, const cat_dim *d, uint64_t mask, const char *last)
{
	size_t total = popcount64(mask), k = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < d->n; i++) {
		if (!((mask >> i) & 1u))
			continue;
		mb_text_appendf(buf, len, "%s%s", k == 0 ? "" : k + 1 == total ? last : ", ", d->value[i]);
		k++;
	}
}

/* One categorical term alone, in the words of the single-dimension rules:
 * "wins in cold mode only", "wins in bf16 and fp16, not fp32", "wins on
 * family x only". */
static void one_dimension_text(char *buf, size_t len, const cat_dim *d, int dim, uint64_t mask)
{
	char won[MB_VERDICT_TEXT_MAX], other[MB_VERDICT_TEXT_MAX];
	uint64_t all = d->n >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << d->n) - 1);
	size_t n_won = popcount64(mask);
	const char *unit = dim == DIM_MODE ? (n_won == 1 ? " mode" : " modes") : "";

	join_mask(won, sizeof(won), d, mask, " and ");
	join_mask(other, sizeof(other), d, all & ~mask, " or ");
	buf[0] = '\0';
	if (dim == DIM_FAMILY)
		mb_text_appendf(buf, len, "wins on famil%s %s only", n_won == 1 ? "y" : "ies", won);
	else if (n_won == 1)
		mb_text_appendf(buf, len, "wins in %s%s only", won, unit);
	else
		mb_text_appendf(buf, len, "wins in %s%s, not %s", won, unit, other);
}

/* The terms of a selector joined: "T >= 16384, bf16, cold mode". */
static void selector_phrase(char *buf, size_t len, const space *s, const selector *sel)
{
	char part[MB_VERDICT_TEXT_MAX];
	static const int order[] = {N_CAT, DIM_DTYPE, DIM_MODE, DIM_FAMILY};
	bool first = true;

	for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++) {
		int d = order[k];
		const term *t = &sel->t[d];

		if (t->any)
			continue;
		if (d == N_CAT) {
			snprintf(part, sizeof(part), "%s %s %" JSON_INTEGER_FORMAT, s->axes[t->axis].name,
				t->at_least ? ">=" : "<=", t->value);
		} else {
			join_mask(part, sizeof(part), &s->cat[d], t->mask, " or ");
			if (d == DIM_MODE) {
				mb_text_appendf(part, sizeof(part), " mode");
			} else if (d == DIM_FAMILY) {
				char names[MB_VERDICT_TEXT_MAX];

				snprintf(names, sizeof(names), "%s", part);
				part[0] = '\0';
				mb_text_appendf(part, sizeof(part), "famil%s %s", popcount64(t->mask) == 1 ? "y" : "ies", names);
			}
		}
		mb_text_appendf(buf, len, "%s%s", first ? "" : ", ", part);
		first = false;
	}
}

/* The selector in words: one categorical term as the single-dimension
 * rules say it, anything else as "wins at T >= 16384, bf16". */
static void selector_text(char *buf, size_t len, const space *s, const selector *sel)
{
	buf[0] = '\0';
	if (sel->terms == 1 && sel->t[N_CAT].any) {
		for (int d = 0; d < N_CAT; d++)
			if (!sel->t[d].any)
				one_dimension_text(buf, len, &s->cat[d], d, sel->t[d].mask);
		return;
	}
	mb_text_appendf(buf, len, "wins at ");
	selector_phrase(buf, len, s, sel);
}

/* The wins a selector covers, as a bit per point. */
static void coverage(uint64_t *bits, size_t words, const space *s, const selector *sel)
{
	memset(bits, 0, words * sizeof(*bits));
	for (size_t i = 0; i < s->n; i++) {
		bool in = true;

		for (int d = 0; d <= N_CAT && in; d++)
			in = term_covers(&sel->t[d], d, &s->pts[i]);
		if (in)
			bits[i / 64] |= (uint64_t)1 << (i % 64);
	}
}

/* No one selector covers every win and nothing else: two that do together,
 * each of at most two terms and covering no loss, the fewest terms first.
 * False when no two do. */
static bool union_search(const space *s, selector *out_a, selector *out_b)
{
	size_t words = (s->n + 63) / 64, n_pure = 0, best_cost = SIZE_MAX;
	selector *pure_sel = calloc(UNION_CANDIDATES_MAX, sizeof(*pure_sel));
	uint64_t *bits = calloc(UNION_CANDIDATES_MAX * (words ? words : 1), sizeof(*bits));
	size_t idx[N_CAT + 1] = {0};
	bool found = false;

	if (!pure_sel || !bits)
		goto cleanup;
	do {
		selector sel;
		size_t covered;

		selector_at(&sel, s, idx);
		if (sel.terms >= 1 && sel.terms <= 2 && n_pure < UNION_CANDIDATES_MAX && pure(s, &sel, &covered)
			&& covered) {
			sel.covered = covered;
			coverage(bits + n_pure * words, words, s, &sel);
			pure_sel[n_pure++] = sel;
		}
	} while (odometer_next(idx, s));
	for (size_t i = 0; i < n_pure; i++)
		for (size_t j = i + 1; j < n_pure; j++) {
			size_t covered = 0, cost = 16 * (pure_sel[i].terms + pure_sel[j].terms) + pure_sel[i].named
				+ pure_sel[j].named;

			if (cost >= best_cost)
				continue;
			for (size_t w = 0; w < words; w++)
				covered += popcount64(bits[i * words + w] | bits[j * words + w]);
			if (covered == s->n_win) {
				best_cost = cost;
				*out_a = pure_sel[i];
				*out_b = pure_sel[j];
				found = true;
			}
		}
cleanup:
	free(pure_sel);
	free(bits);
	return found;
}

static int compare_strings(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* No selector covers any win alone: name the wins, sorted, as many as fit. */
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

static const mb_verdict_pair *pair_of(const mb_row_verdict *v, const json_t *fused)
{
	for (size_t p = 0; p < v->n_pairs; p++)
		if (v->pairs[p].fused == fused)
			return &v->pairs[p];
	return NULL;
}

static bool is_point(const json_t *kase)
{
	return kind_is(kase, "fused") && strcmp(mb_text_get(kase, "status"), "skipped");
}

/* Where the fused kernel wins, as the simplest selector that covers every
 * win and nothing else; where none does, the selector that covers most wins
 * and nothing else, with how many it leaves out; where none covers any,
 * the winning cases. The points are the row's fused cases (one without an
 * alternative does not win); `win` says which pairs count as wins. */
static int where_it_wins(char *buf, size_t len, const mb_row_verdict *v, const json_t *const *cases, size_t n,
	bool (*win)(const mb_verdict_pair *))
{
	space s = {0};
	point *pts = calloc(n ? n : 1, sizeof(*pts));
	selector best, one, other;
	int rc = 0;

	if (!pts)
		return MB_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const mb_verdict_pair *p;

		if (!is_point(cases[i]))
			continue;
		p = pair_of(v, cases[i]);
		pts[s.n].kase = cases[i];
		pts[s.n].win = p && win(p);
		s.n_win += pts[s.n++].win;
	}
	s.pts = pts;
	if (!collect_values(&s, pts)) {
		list_wins(buf, len, pts, s.n, s.n_win);
		goto cleanup;
	}
	if ((rc = build_options(&s)))
		goto cleanup;
	search(&s, &best);
	if (best.covered && best.covered < s.n_win && union_search(&s, &one, &other)) {
		buf[0] = '\0';
		mb_text_appendf(buf, len, "wins at ");
		selector_phrase(buf, len, &s, &one);
		mb_text_appendf(buf, len, "; and at ");
		selector_phrase(buf, len, &s, &other);
		goto cleanup;
	}
	if (!best.covered) {
		list_wins(buf, len, pts, s.n, s.n_win);
		goto cleanup;
	}
	selector_text(buf, len, &s, &best);
	if (best.covered < s.n_win)
		mb_text_appendf(buf, len, " (and %zu other case%s)", s.n_win - best.covered,
			s.n_win - best.covered == 1 ? "" : "s");
cleanup:
	for (int d = 0; d <= N_CAT; d++)
		free(s.options[d]);
	free(pts);
	return rc;
}

static bool won_any(const mb_verdict_pair *p)
{
	return is_win(p->outcome);
}

static bool won_time(const mb_verdict_pair *p)
{
	return p->outcome == MB_PAIR_WIN_TIME;
}

/* ---- the verdict ------------------------------------------------------------ */

/* A family is won when every fused case of it has an alternative and a win. */
static void families_won(mb_row_verdict *v, const json_t *const *cases, size_t n)
{
	const char *fams[MAX_FAMILIES];
	size_t n_fams = 0, n_won = 0;

	for (size_t i = 0; i < n; i++)
		if (kind_is(cases[i], "fused") && n_fams < MAX_FAMILIES
			&& !in_list(fams, n_fams, mb_text_get(cases[i], "family")))
			fams[n_fams++] = mb_text_get(cases[i], "family");
	for (size_t f = 0; f < n_fams; f++) {
		bool won = true, any = false;

		for (size_t p = 0; p < v->n_pairs && won; p++) {
			if (strcmp(mb_text_get(v->pairs[p].fused, "family"), fams[f]))
				continue;
			any = true;
			won = is_win(v->pairs[p].outcome);
		}
		if (won && any) {
			mb_text_appendf(v->families, sizeof(v->families), "%s%s", n_won ? ", " : "", fams[f]);
			n_won++;
		}
	}
}

/* Wrong answers and missing pairs; true when one of them decided the row. */
static bool decide_early(mb_row_verdict *v, const json_t *const *cases, size_t n)
{
	bool any_fused = false, any_alt = false;

	for (size_t i = 0; i < n; i++) {
		bool fused = kind_is(cases[i], "fused"), fallback = kind_is(cases[i], "fallback");

		any_fused |= fused;
		any_alt |= is_alternative(cases[i]);
		if ((fused || fallback) && mb_verdict_case_wrong(cases[i])) {
			v->kind = MB_VERDICT_DROP;
			snprintf(v->reason, sizeof(v->reason), "wrong answer: %s (%s)", mb_text_get(cases[i], "id"),
				mb_text_get(cases[i], "status"));
			return true;
		}
	}
	if (!any_fused || !any_alt || !v->n_pairs) {
		v->kind = MB_VERDICT_NOT_ENOUGH_EVIDENCE;
		snprintf(v->reason, sizeof(v->reason), "%s",
			!any_fused && !any_alt ? "no fused/fallback pair (reference variants only)"
			: !any_alt ? "no fallback or vendor variant" : !any_fused ? "no fused variant"
			: "no correct, timed alternative on the same shape as a fused case");
		return true;
	}
	return false;
}

/* The pair that says most about a loss: the largest slow-down. */
static const mb_verdict_pair *worst_pair(const mb_row_verdict *v, mb_pair_outcome outcome)
{
	const mb_verdict_pair *worst = NULL;

	for (size_t i = 0; i < v->n_pairs; i++)
		if (v->pairs[i].outcome == outcome
			&& (!worst || v->pairs[i].speedup < worst->speedup))
			worst = &v->pairs[i];
	return worst;
}

/* "cublas_grouped is 1.14x faster at nam56r_moe/T=4096,... (bf16, cold)" */
static void loss_text(char *buf, size_t len, const mb_verdict_pair *p)
{
	char shape[MB_VERDICT_SHAPE_MAX];

	mb_verdict_shape_label(shape, sizeof(shape), p->fused);
	mb_text_appendf(buf, len, "%s is %.2fx faster at %s (%s, %s)", mb_text_get(p->alt, "variant"),
		p->speedup > 0.0 ? 1.0 / p->speedup : NAN, shape, mb_text_get(p->fused, "dtype"),
		mb_text_get(p->fused, "mode"));
}

/* What the memory wins buy and cost, at the largest of them: "saves 3.94
 * GiB (98%) of scratch at 1.35x the time of materialized". */
static void memory_trade_text(char *buf, size_t len, const mb_row_verdict *v)
{
	const mb_verdict_pair *big = NULL;
	char saved[32];

	for (size_t i = 0; i < v->n_pairs; i++) {
		const mb_verdict_pair *p = &v->pairs[i];

		if (p->outcome == MB_PAIR_WIN_MEMORY
			&& (!big || p->alt_scratch_bytes - p->fused_scratch_bytes > big->alt_scratch_bytes - big->fused_scratch_bytes))
			big = p;
	}
	if (!big)
		return;
	mb_text_bytes(saved, sizeof(saved), (double)(big->alt_scratch_bytes - big->fused_scratch_bytes));
	mb_text_appendf(buf, len, "saves %s (%.0f%%) of scratch at %.2fx the time of %s", saved,
		100.0 * (double)(big->alt_scratch_bytes - big->fused_scratch_bytes) / (double)big->alt_scratch_bytes,
		big->speedup > 0.0 ? 1.0 / big->speedup : NAN, mb_text_get(big->alt, "variant"));
}

/* The words of a memory trade (memory_trade_text) without its figures. */
#define MEMORY_TRADE_PREFIX "saves "

static bool figure_char(char c)
{
	return (c >= '0' && c <= '9') || c == '.';
}

bool mb_verdict_condition_same(const char *verdict_condition, const char *status_condition)
{
	const char *a = verdict_condition, *b = status_condition;
	size_t n = strlen(MEMORY_TRADE_PREFIX);

	if (!a || !b)
		return false;
	if (!strcmp(a, b))
		return true;
	if (strncmp(a, MEMORY_TRADE_PREFIX, n) || strncmp(b, MEMORY_TRADE_PREFIX, n) || !strstr(a, " of scratch at "))
		return false;
	/* figure runs stand for one another; every other character must match */
	while (*a && *b) {
		if (figure_char(*a) && figure_char(*b)) {
			while (figure_char(*a))
				a++;
			while (figure_char(*b))
				b++;
		} else if (*a++ != *b++) {
			return false;
		}
	}
	return !*a && !*b;
}

/* The counts of outcomes other than wins: "2 same, 1 loss (...), 1 noisy". */
static void others_text(char *buf, size_t len, const mb_row_verdict *v)
{
	const mb_verdict_pair *loss = worst_pair(v, MB_PAIR_LOSS);

	if (v->n_outcome[MB_PAIR_SAME])
		mb_text_appendf(buf, len, "; %zu SAME", v->n_outcome[MB_PAIR_SAME]);
	if (loss) {
		mb_text_appendf(buf, len, "; %zu slower: ", v->n_outcome[MB_PAIR_LOSS]);
		loss_text(buf, len, loss);
	}
	if (v->n_outcome[MB_PAIR_NOISY])
		mb_text_appendf(buf, len, "; %zu too noisy to say", v->n_outcome[MB_PAIR_NOISY]);
}

/* Every isolated pair wins on time: keep, unless a lane step says the row
 * loses where it runs. */
static int decide_keep(mb_row_verdict *v)
{
	mb_text_appendf(v->reason, sizeof(v->reason), "faster than the best alternative (%s) on each of %zu pairs, every "
		"family (%s)", v->best_alt, v->n_pairs, v->families);
	if (v->lane_steps == 0) {
		v->kind = MB_VERDICT_KEEP;
		v->evidence = MB_EVIDENCE_ISOLATED;
		mb_text_appendf(v->reason, sizeof(v->reason), "; no lane (run-level) evidence yet");
		return 0;
	}
	mb_text_appendf(v->reason, sizeof(v->reason), "; %s", v->lane_text);
	if (v->lane_win) {
		v->kind = MB_VERDICT_KEEP;
		v->evidence = MB_EVIDENCE_LANES;
	} else if (!v->lane_losses) {
		v->kind = MB_VERDICT_KEEP;
		v->evidence = MB_EVIDENCE_LANES_INCONCLUSIVE;
	} else {
		/* the step is faster with the row on its alternative somewhere */
		v->kind = v->lane_wins ? MB_VERDICT_CONDITIONAL : MB_VERDICT_DROP;
		v->evidence = MB_EVIDENCE_LANES;
		if (v->lane_wins)
			mb_text_appendf(v->condition, sizeof(v->condition), "wins in the steps of lane%s %s only",
				v->lane_wins == 1 ? "" : "s", v->lane_won);
	}
	return 0;
}

static int decide(mb_row_verdict *v, const json_t *const *cases, size_t n, size_t unmatched)
{
	size_t wins = v->n_outcome[MB_PAIR_WIN_TIME] + v->n_outcome[MB_PAIR_WIN_MEMORY];
	size_t total = v->n_pairs + unmatched;
	char *cond = v->condition;
	size_t cond_len = sizeof(v->condition);
	int rc = 0;

	if (decide_early(v, cases, n))
		return 0;
	families_won(v, cases, n);
	name_best_alt(v);
	v->evidence = MB_EVIDENCE_ISOLATED;
	if (v->n_outcome[MB_PAIR_WIN_TIME] == total)
		return decide_keep(v);
	if (wins == total && !v->n_outcome[MB_PAIR_WIN_TIME]) {
		v->kind = MB_VERDICT_CONDITIONAL;
		memory_trade_text(cond, cond_len, v);
	} else if (wins == total) {
		/* faster somewhere, and elsewhere buys memory with time */
		v->kind = MB_VERDICT_CONDITIONAL;
		rc = where_it_wins(cond, cond_len, v, cases, n, won_time);
		mb_text_appendf(cond, cond_len, "; elsewhere ");
		memory_trade_text(cond, cond_len, v);
	} else if (wins) {
		v->kind = MB_VERDICT_CONDITIONAL;
		rc = where_it_wins(cond, cond_len, v, cases, n, won_any);
		if (v->n_outcome[MB_PAIR_WIN_MEMORY]) {
			mb_text_appendf(cond, cond_len, "; where slower it ");
			memory_trade_text(cond, cond_len, v);
		}
	} else if (v->n_outcome[MB_PAIR_NOISY] && !v->n_outcome[MB_PAIR_LOSS]) {
		const mb_verdict_pair *noisy = worst_pair(v, MB_PAIR_NOISY);

		v->kind = MB_VERDICT_AMBIGUOUS;
		snprintf(v->reason, sizeof(v->reason), "no win and no loss; %s: %s", mb_text_get(noisy->fused, "id"),
			noisy->cmp.reason);
	} else {
		v->kind = MB_VERDICT_DROP;
		snprintf(v->reason, sizeof(v->reason), "no significant win over the best alternative on %zu pair%s",
			v->n_pairs, v->n_pairs == 1 ? "" : "s");
		others_text(v->reason, sizeof(v->reason), v);
	}
	if (v->kind == MB_VERDICT_CONDITIONAL) {
		snprintf(v->reason, sizeof(v->reason), "wins %zu of %zu pairs against the best alternative (%zu on time, "
			"%zu on memory)", wins, v->n_pairs, v->n_outcome[MB_PAIR_WIN_TIME], v->n_outcome[MB_PAIR_WIN_MEMORY]);
		others_text(v->reason, sizeof(v->reason), v);
	}
	if (unmatched)
		mb_text_appendf(v->reason, sizeof(v->reason), "; %zu fused case%s without an alternative", unmatched,
			unmatched == 1 ? "" : "s");
	return rc;
}

/* ---- time saved, the largest shape and its memory ------------------------------ */

static bool in_mode_dtype(const mb_verdict_pair *p, const char *mode, const char *dtype)
{
	return !strcmp(mb_text_get(p->fused, "mode"), mode) && !strcmp(mb_text_get(p->fused, "dtype"), dtype)
		&& isfinite(p->saved_ns_per_call);
}

/* The first mode of MODE_ORDER, then the first dtype of DTYPE_ORDER in it,
 * with a winning pair; failing that, with any timed pair: independent of the
 * receipt's order of modes and cases. */
static bool pick_mode_dtype(mb_row_verdict *v)
{
	for (int need_win = 1; need_win >= 0; need_win--)
		for (size_t m = 0; m < N_MODES; m++)
			for (size_t d = 0; d < N_DTYPES; d++)
				for (size_t p = 0; p < v->n_pairs; p++)
					if (in_mode_dtype(&v->pairs[p], MODE_ORDER[m], DTYPE_ORDER[d])
						&& (!need_win || is_win(v->pairs[p].outcome))) {
						snprintf(v->saved_mode, sizeof(v->saved_mode), "%s", MODE_ORDER[m]);
						snprintf(v->saved_dtype, sizeof(v->saved_dtype), "%s", DTYPE_ORDER[d]);
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

/* Is `a` at a larger shape than `b`: more alternative bytes, then a larger
 * product of the axes, then the smaller id (so that order does not count). */
static bool larger_shape(const mb_verdict_pair *a, const mb_verdict_pair *b)
{
	bool split = has_split_bytes(a->alt) && has_split_bytes(b->alt);
	double bytes_a = model_bytes(a->alt, split), bytes_b = model_bytes(b->alt, split);

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

	v->memory_saved_bytes = v->memory_saved_fraction = NAN;
	if (!pick_mode_dtype(v))
		return;
	for (size_t i = 0; i < v->n_pairs; i++) {
		const mb_verdict_pair *p = &v->pairs[i];

		if (!in_mode_dtype(p, v->saved_mode, v->saved_dtype))
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
	if (v->largest && v->largest->fused_scratch_bytes >= 0 && v->largest->alt_scratch_bytes >= 0) {
		v->memory_saved_bytes = (double)(v->largest->alt_scratch_bytes - v->largest->fused_scratch_bytes);
		v->memory_saved_fraction = v->largest->alt_scratch_bytes > 0
			? v->memory_saved_bytes / (double)v->largest->alt_scratch_bytes : NAN;
	}
	/* a memory trade saves memory, not time */
	if ((v->kind != MB_VERDICT_KEEP && v->kind != MB_VERDICT_CONDITIONAL) || !v->n_outcome[MB_PAIR_WIN_TIME])
		return;
	if (n_weighted) {
		v->saved_basis = MB_SAVED_PER_STEP;
		v->saved_ns = step_ns;
		v->saved_unweighted = n_unweighted;
	} else {
		v->saved_basis = MB_SAVED_PER_CALL;
		v->saved_ns = best->saved_ns_per_call;
		if (best->saved_ns_per_call > 0.0)
			mb_verdict_shape_label(v->saved_shape, sizeof(v->saved_shape), best->fused);
	}
}

/* ---- run-level evidence ------------------------------------------------------- */

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

/* The step of `head` against the all-fused step of `base`, with the
 * policy's statistics (the rounds' medians carry the spread between
 * rounds). */
static int compare_steps(mb_comparison *cmp, const json_t *base, const json_t *head, const mb_thresholds *t,
	const char *row, mb_error *err)
{
	double *b, *h, *bm, *hm;
	size_t nb, nh, nbm, nhm;
	int rc;

	b = numbers(json_object_get(base, "step_ns"), &nb);
	h = numbers(json_object_get(head, "step_ns"), &nh);
	bm = numbers(json_object_get(base, "round_medians_ns"), &nbm);
	hm = numbers(json_object_get(head, "round_medians_ns"), &nhm);
	if (!b || !h || !bm || !hm)
		rc = mb_error_set(err, MB_ENOMEM, row, "no memory for the lane's steps");
	else
		rc = mb_compare_samples_reps(cmp, b, nb, true, h, nh, true, bm, nbm >= 2 ? nbm : 0, hm,
			nhm >= 2 ? nhm : 0, t, err);
	free(b), free(h), free(bm), free(hm);
	return rc;
}

/* The row's best alternative in one lane and mode: of the configurations
 * that put the row alone on an alternative (a delta per alternative
 * variant; receipts before vendor configurations have one, on the
 * fallback), the one with the fastest step. */
static const json_t *lane_best_delta(const json_t *lane, const char *row, const char *mode)
{
	const json_t *best = NULL;
	double best_ns = INFINITY;
	size_t j;
	json_t *delta;

	json_array_foreach(json_object_get(lane, "deltas"), j, delta) {
		const json_t *run;
		double ns;

		if (strcmp(mb_text_get(delta, "row"), row) || strcmp(mb_text_get(delta, "mode"), mode))
			continue;
		run = lane_run(lane, mb_text_get(delta, "config"), mode);
		ns = run ? json_number_value(json_object_get(run, "median_step_ns")) : NAN;
		if (run && lane_run(lane, "fused", mode) && (!best || ns < best_ns)) {
			best = delta;
			best_ns = ns;
		}
	}
	return best;
}

/* Keep needs run-level evidence (src/README.md, Verdicts): for every lane
 * and mode whose step holds the row, the step with the row alone on its
 * best alternative against the all-fused step, with lane_min_effect as
 * the minimum effect (lanes resolve 1% of a step). */
static int lane_evidence(mb_row_verdict *v, const json_t *receipt, const mb_thresholds *t, mb_error *err)
{
	static const char *const modes[] = {"eager", "graph"};
	const mb_thresholds lt = mb_policy_lane_thresholds(t);
	size_t i;
	json_t *lane;

	json_array_foreach(json_object_get(receipt, "lanes"), i, lane) {
		for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
			const json_t *delta = lane_best_delta(lane, v->row, modes[m]);
			const json_t *base, *head;
			const char *alt;
			mb_comparison cmp;
			double fb, fh;
			int rc;

			if (!delta)
				continue;
			base = lane_run(lane, "fused", modes[m]);
			head = lane_run(lane, mb_text_get(delta, "config"), modes[m]);
			if ((rc = compare_steps(&cmp, base, head, &lt, v->row, err)))
				return rc;
			fb = json_number_value(json_object_get(base, "median_step_ns"));
			fh = json_number_value(json_object_get(head, "median_step_ns"));
			v->lane_steps++;
			/* the alternative slower is the fused row winning in the step */
			v->lane_wins += cmp.cls == MB_CMP_SLOWER;
			if (cmp.cls == MB_CMP_SLOWER)
				mb_text_appendf(v->lane_won, sizeof(v->lane_won), "%s%s (%s)", v->lane_won[0] ? ", " : "",
					mb_text_get(lane, "name"), modes[m]);
			v->lane_losses += cmp.cls == MB_CMP_FASTER;
			if (cmp.cls == MB_CMP_SLOWER && fh - fb > v->lane_saved_ns) {
				v->lane_saved_ns = fh - fb;
				v->lane_saved_fraction = fb > 0 ? (fh - fb) / fb : 0;
			}
			alt = json_string_value(json_object_get(delta, "variant"));
			mb_text_appendf(v->lane_text, sizeof(v->lane_text), "%slane %s (%s): on %s the step is %+.2f%% (%s)",
				v->lane_text[0] ? "; " : "", mb_text_get(lane, "name"), modes[m], alt ? alt : "the fallback",
				fb > 0 ? 100.0 * (fh - fb) / fb : 0.0, mb_cmp_class_name(cmp.cls));
		}
	}
	v->lane_win = v->lane_steps > 0 && v->lane_wins == v->lane_steps;
	return 0;
}

/* ---- status beside the verdict ------------------------------------------------- */

static mb_verdict_trade trade_of(const json_t *receipt, const char *row)
{
	const char *trades = mb_text_get(json_object_get(json_object_get(receipt, "catalog"), row), "trades");

	if (!strcmp(trades, "time"))
		return MB_TRADE_TIME;
	if (!strcmp(trades, "memory"))
		return MB_TRADE_MEMORY;
	if (!strcmp(trades, "both"))
		return MB_TRADE_BOTH;
	return MB_TRADE_UNDECLARED;
}

/* Whether the verdict supports the row's status as built, and what a
 * reviewer should do where it does not. */
static void status_agreement(mb_row_verdict *v, const json_t *receipt)
{
	const json_t *entry = json_object_get(json_object_get(receipt, "catalog"), v->row);
	bool keep_lanes = v->kind == MB_VERDICT_KEEP && v->evidence == MB_EVIDENCE_LANES;
	const char *st;

	snprintf(v->status, sizeof(v->status), "%s", mb_text_get(entry, "status"));
	snprintf(v->status_condition, sizeof(v->status_condition), "%s", mb_text_get(entry, "condition"));
	st = v->status;
	v->status_agrees = true;
	if (!st[0]) {
		snprintf(v->status_note, sizeof(v->status_note), "status not recorded in this receipt");
	} else if (v->kind == MB_VERDICT_AMBIGUOUS || v->kind == MB_VERDICT_NOT_ENOUGH_EVIDENCE) {
		snprintf(v->status_note, sizeof(v->status_note), "no decision to hold the status against");
	} else if (!strcmp(st, "keep")) {
		v->status_agrees = keep_lanes;
		snprintf(v->status_note, sizeof(v->status_note), "%s", keep_lanes ? "agrees"
			: "keep claims more than this evidence shows: demote?");
	} else if (!strcmp(st, "conditional")) {
		v->status_agrees = v->kind == MB_VERDICT_CONDITIONAL
			&& mb_verdict_condition_same(v->condition, v->status_condition);
		snprintf(v->status_note, sizeof(v->status_note), "%s", v->status_agrees ? "agrees"
			: keep_lanes ? "promotion to keep supported"
			: v->kind == MB_VERDICT_CONDITIONAL ? "the verdict names another condition"
			: "conditional claims more than this evidence shows: demote?");
	} else if (!strcmp(st, "drop")) {
		v->status_agrees = v->kind == MB_VERDICT_DROP;
		snprintf(v->status_note, sizeof(v->status_note), "%s", v->status_agrees ? "agrees (already dropped)"
			: "dropped, yet this evidence shows wins: review the demotion");
	} else {
		/* experimental: a drop is a demotion to make, a lane-backed keep or a
		 * named condition a promotion the gate would accept */
		v->status_agrees = !(v->kind == MB_VERDICT_DROP || keep_lanes || v->kind == MB_VERDICT_CONDITIONAL);
		snprintf(v->status_note, sizeof(v->status_note), "%s",
			v->kind == MB_VERDICT_DROP ? "demote to drop?"
			: keep_lanes ? "promotion to keep supported"
			: v->kind == MB_VERDICT_CONDITIONAL ? "promotion to conditional supported"
			: "agrees (keep needs lane evidence)");
	}
}

/* ---- one row, every row ------------------------------------------------------------ */

static int row_verdict(mb_row_verdict *v, const json_t *receipt, const char *row,
	const mb_policy *policy, mb_error *err)
{
	const json_t *all = json_object_get(receipt, "cases");
	const json_t **mine = calloc(json_array_size(all) + 1, sizeof(*mine));
	const mb_thresholds *t = mb_policy_for_row(policy, row);
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
	v->trade = trade_of(receipt, row);
	v->evidence = MB_EVIDENCE_NONE;
	if ((rc = make_pairs(v, mine, n, t, &unmatched, err)))
		goto cleanup;
	if (v->n_pairs && (rc = lane_evidence(v, receipt, t, err)))
		goto cleanup;
	if ((rc = decide(v, mine, n, unmatched))) {
		rc = mb_error_set(err, rc, row, "no memory for the row's condition");
		goto cleanup;
	}
	time_saved(v);
	status_agreement(v, receipt);
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
	else if (v->kind == MB_VERDICT_KEEP && v->evidence == MB_EVIDENCE_LANES_INCONCLUSIVE)
		snprintf(buf, len, "keep on isolated evidence; lanes inconclusive");
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
	mb_text_duration(duration, sizeof(duration), v->saved_ns);
	if (v->saved_basis == MB_SAVED_PER_STEP) {
		snprintf(buf, len, "%s per step (%s, %s)", duration, v->saved_dtype, v->saved_mode);
		if (v->saved_unweighted)
			mb_text_appendf(buf, len, "; %zu pair%s without a suite weight not counted", v->saved_unweighted,
				v->saved_unweighted == 1 ? "" : "s");
	} else if (v->saved_shape[0]) {
		snprintf(buf, len, "up to %s per call (%s, %s, at %s)", duration, v->saved_dtype, v->saved_mode,
			v->saved_shape);
	} else {
		snprintf(buf, len, "%s per call (%s, %s: no time win there)", duration, v->saved_dtype, v->saved_mode);
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
	snprintf(buf, len, "%.2fx vs %s (%s) at %s (%s, %s)", v->largest->speedup,
		mb_text_get(v->largest->alt, "variant"), model, shape, v->saved_dtype, v->saved_mode);
}

void mb_verdict_fallback_text(char *buf, size_t len, const mb_row_verdict *v)
{
	const mb_verdict_pair *p = v ? v->largest : NULL;

	if (!p || !p->fallback || p->fallback == p->alt || !isfinite(p->speedup_fallback))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.2fx vs %s", p->speedup_fallback, mb_text_get(p->fallback, "variant"));
}

void mb_verdict_memory_text(char *buf, size_t len, const mb_row_verdict *v)
{
	char amount[32];

	if (!v || !isfinite(v->memory_saved_bytes)) {
		snprintf(buf, len, "-");
		return;
	}
	mb_text_bytes(amount, sizeof(amount), v->memory_saved_bytes);
	if (v->memory_saved_bytes > 0)
		snprintf(buf, len, "saves %s (%.0f%%)", amount, 100.0 * v->memory_saved_fraction);
	else if (v->memory_saved_bytes < 0)
		snprintf(buf, len, "costs %s more", amount);
	else
		snprintf(buf, len, "same");
	if (v->memory_saved_bytes < 0 && isfinite(v->memory_saved_fraction))
		mb_text_appendf(buf, len, " (%+.0f%%)", -100.0 * v->memory_saved_fraction);
}

void mb_verdict_status_text(char *buf, size_t len, const mb_row_verdict *v)
{
	if (!v || !v->status[0]) {
		snprintf(buf, len, "-");
		return;
	}
	snprintf(buf, len, "%s", v->status);
	if (v->status_condition[0])
		mb_text_appendf(buf, len, " (%s)", v->status_condition);
	if (!v->status_agrees)
		mb_text_appendf(buf, len, " ! %s", v->status_note);
}
