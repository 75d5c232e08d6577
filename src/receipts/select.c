/* What a reporter shows (select.h). */
#include "receipts/select.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "receipts/text.h"

#define REGEX_ERROR_BYTES 256
/* A verdict's place when rows are sorted by what to act on. */
#define ACTION_STATUS_AGREES 10

void mb_select_free(mb_select *s)
{
	if (!s)
		return;
	if (s->have_filter)
		regfree(&s->filter_re);
	if (s->have_exclude)
		regfree(&s->exclude_re);
	s->have_filter = s->have_exclude = false;
	free(s->rows_buf);
	free(s->row_names);
	s->rows_buf = NULL;
	s->row_names = NULL;
	s->n_rows = 0;
}

int mb_select_regcomp(regex_t *re, bool *compiled, const char *text, const char *flag, mb_error *err)
{
	char why[REGEX_ERROR_BYTES];
	int rc;

	if (!text)
		return 0;
	rc = regcomp(re, text, REG_EXTENDED | REG_NOSUB);
	if (rc) {
		regerror(rc, re, why, sizeof(why));
		return mb_error_set(err, MB_EINVAL, flag, "invalid regular expression \"%s\": %s", text, why);
	}
	*compiled = true;
	return 0;
}

/* --rows a,b: split in place; an empty name is a mistake to report. */
static int split_rows(mb_select *s, mb_error *err)
{
	size_t cap = 1;

	if (!s->rows)
		return 0;
	for (const char *p = s->rows; *p; p++)
		cap += *p == ',';
	s->rows_buf = strdup(s->rows);
	s->row_names = calloc(cap, sizeof(*s->row_names));
	if (!s->rows_buf || !s->row_names)
		return mb_error_set(err, MB_ENOMEM, "--rows", "out of memory");
	for (char *tok = s->rows_buf;;) {
		char *comma = strchr(tok, ',');

		if (comma)
			*comma = '\0';
		if (!*tok)
			return mb_error_set(err, MB_EINVAL, "--rows", "empty name in the list \"%s\"", s->rows);
		if (s->n_rows == MB_SELECT_MAX_ROWS)
			return mb_error_set(err, MB_EINVAL, "--rows", "more than %d rows in \"%s\"", MB_SELECT_MAX_ROWS, s->rows);
		s->row_names[s->n_rows++] = tok;
		if (!comma)
			return 0;
		tok = comma + 1;
	}
}

static int parse_sort(mb_select *s, mb_select_of of, mb_error *err)
{
	static const struct {
		const char *name;
		mb_sort_key key;
		mb_select_of of;
	} keys[] = {
		{"rank", MB_SORT_DEFAULT, MB_SELECT_CASES}, {"id", MB_SORT_ID, MB_SELECT_CASES},
		{"change", MB_SORT_CHANGE, MB_SELECT_CASES}, {"receipt", MB_SORT_DEFAULT, MB_SELECT_ROWS},
		{"row", MB_SORT_ROW, MB_SELECT_ROWS}, {"action", MB_SORT_ACTION, MB_SELECT_ROWS},
		{"saved", MB_SORT_SAVED, MB_SELECT_ROWS},
	};
	char where[MB_ERROR_WHERE_MAX];

	s->key = MB_SORT_DEFAULT;
	if (!s->sort)
		return 0;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (keys[i].of == of && !strcmp(keys[i].name, s->sort)) {
			s->key = keys[i].key;
			return 0;
		}
	snprintf(where, sizeof(where), "--sort %s", s->sort);
	return mb_error_set(err, MB_EINVAL, where, of == MB_SELECT_CASES ? "cases sort by rank (the default: drift "
		"and regressions first), id or change" : "rows sort by receipt (the default), row, action or saved");
}

int mb_select_compile(mb_select *s, mb_select_of of, mb_error *err)
{
	int rc = mb_select_regcomp(&s->filter_re, &s->have_filter, s->filter, "--filter", err);

	if (!rc)
		rc = mb_select_regcomp(&s->exclude_re, &s->have_exclude, s->exclude, "--exclude", err);
	if (!rc)
		rc = split_rows(s, err);
	if (!rc)
		rc = parse_sort(s, of, err);
	return rc;
}

bool mb_select_narrows(const mb_select *s)
{
	return s->have_filter || s->have_exclude || s->n_rows;
}

static bool row_named(const mb_select *s, const char *row)
{
	for (size_t i = 0; i < s->n_rows; i++)
		if (!strcmp(s->row_names[i], row))
			return true;
	return s->n_rows == 0;
}

bool mb_select_keeps(const mb_select *s, const char *id, const char *row)
{
	if (!row_named(s, row))
		return false;
	if (s->have_filter && regexec(&s->filter_re, id, 0, NULL, 0) != 0)
		return false;
	return !(s->have_exclude && regexec(&s->exclude_re, id, 0, NULL, 0) == 0);
}

/* Append `item` to the ", "-list in `buf` unless it is there already. */
static void list_once(char *buf, size_t len, const char *item)
{
	size_t used = strlen(buf), n = strlen(item);

	for (const char *p = buf; (p = strstr(p, item)); p += n)
		if ((p == buf || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0'))
			return;
	if (used + n + 3 < len)
		snprintf(buf + used, len - used, "%s%s", used ? ", " : "", item);
}

void mb_select_cases(const mb_select *s, json_t *receipt, const char *name, mb_select_tally *t)
{
	json_t *cases = json_object_get(receipt, "cases"), *c;
	size_t i;

	if (!mb_select_narrows(s))
		return;
	list_once(t->names, sizeof(t->names), name);
	json_array_foreach(cases, i, c) {
		const char *row = mb_text_get(c, "row");

		t->total++;
		list_once(t->rows, sizeof(t->rows), row);
		for (size_t r = 0; r < s->n_rows; r++)
			if (!strcmp(s->row_names[r], row))
				t->rows_seen |= (uint64_t)1 << r;
		if (!t->first_id[0])
			snprintf(t->first_id, sizeof(t->first_id), "%s", mb_text_get(c, "id"));
	}
	/* then take out what the selection leaves out, from the end */
	for (i = json_array_size(cases); i-- > 0;) {
		const char *row = mb_text_get(json_array_get(cases, i), "row");

		if (mb_select_keeps(s, mb_text_get(json_array_get(cases, i), "id"), row))
			t->kept++;
		else
			json_array_remove(cases, i);
	}
}

int mb_select_check(const mb_select *s, const mb_select_tally *t, mb_error *err)
{
	char where[MB_ERROR_WHERE_MAX];

	if (!mb_select_narrows(s))
		return 0;
	for (size_t r = 0; r < s->n_rows; r++) {
		if (t->rows_seen & ((uint64_t)1 << r))
			continue;
		snprintf(where, sizeof(where), "--rows %s", s->rows);
		return mb_error_set(err, MB_EINVAL, where, "no receipt has a case of row \"%s\"; their rows: %s",
			s->row_names[r], t->rows[0] ? t->rows : "none");
	}
	if (t->kept)
		return 0;
	/* name the last of --rows, --filter, --exclude that removed anything */
	if (s->have_exclude)
		snprintf(where, sizeof(where), "--exclude %s", s->exclude);
	if (s->have_filter)
		snprintf(where, sizeof(where), "--filter %s", s->filter);
	if (s->n_rows && !s->have_filter && !s->have_exclude)
		snprintf(where, sizeof(where), "--rows %s", s->rows);
	return mb_error_set(err, MB_EINVAL, where, "the selection keeps none of the %zu cases of %s (such as %s; "
		"a case id reads row/variant/dtype/mode/family/shape)", t->total, t->names, t->first_id[0] ? t->first_id
		: "none");
}

int mb_select_receipts(const mb_select *s, json_t *const *receipts, const char *const *names, size_t n,
	mb_error *err)
{
	mb_select_tally t;

	memset(&t, 0, sizeof(t));
	for (size_t k = 0; k < n; k++)
		mb_select_cases(s, receipts[k], names[k], &t);
	return mb_select_check(s, &t, err);
}

/* ---- diff ---- */

static bool case_changed(const mb_case_diff *cd)
{
	if (cd->wrong_answer || cd->still_wrong || cd->status_changed || cd->fields_missing || cd->memory_regression)
		return true;
	return !cd->compared || cd->cmp.cls != MB_CMP_SAME;
}

/* |log ratio| of a compared case with statistics; -1 without. */
static double change_size(const mb_case_diff *cd)
{
	return cd->compared && cd->cmp.have_stats && cd->cmp.shift.ratio > 0 ? fabs(log(cd->cmp.shift.ratio)) : -1;
}

typedef struct keyed_case {
	mb_case_diff cd;
	size_t index;
} keyed_case;

static int by_case_key(const void *pa, const void *pb, void *key)
{
	const keyed_case *a = pa, *b = pb;
	int c = 0;

	if (*(const mb_sort_key *)key == MB_SORT_ID)
		c = strcmp(a->cd.id, b->cd.id);
	else if (*(const mb_sort_key *)key == MB_SORT_CHANGE)
		c = (change_size(&b->cd) > change_size(&a->cd)) - (change_size(&b->cd) < change_size(&a->cd));
	return c ? c : (a->index > b->index) - (a->index < b->index);
}

static void label_of(char *buf, size_t len, const mb_row_verdict *v)
{
	mb_verdict_label(buf, len, v);
}

void mb_select_diff(mb_diff *d, const mb_select *s)
{
	keyed_case *keyed;
	size_t kept = 0;

	if (s->only_changed) {
		for (size_t i = 0; i < d->n_cases; i++)
			if (case_changed(&d->cases[i]))
				d->cases[kept++] = d->cases[i];
		d->n_hidden += d->n_cases - kept;
		d->n_cases = kept;
		kept = 0;
		for (size_t i = 0; i < d->head_verdicts.n_rows; i++) {
			mb_row_verdict *h = &d->head_verdicts.rows[i];
			char a[MB_VERDICT_TEXT_MAX + 32], b[MB_VERDICT_TEXT_MAX + 32];

			label_of(a, sizeof(a), mb_verdict_find(&d->base_verdicts, h->row));
			label_of(b, sizeof(b), h);
			if (strcmp(a, b) || !h->status_agrees) {
				d->head_verdicts.rows[kept++] = *h;
			} else {
				free(h->row);
				free(h->pairs);
			}
		}
		d->head_verdicts.n_rows = kept;
	}
	if (s->key == MB_SORT_DEFAULT || !d->n_cases || !(keyed = malloc(d->n_cases * sizeof(*keyed))))
		return;
	for (size_t i = 0; i < d->n_cases; i++)
		keyed[i] = (keyed_case){d->cases[i], i};
	qsort_r(keyed, d->n_cases, sizeof(*keyed), by_case_key, (void *)&s->key);
	for (size_t i = 0; i < d->n_cases; i++)
		d->cases[i] = keyed[i].cd;
	d->ordered = true;
	free(keyed);
}

/* ---- rows ---- */

static int kind_rank(mb_verdict_kind k)
{
	switch (k) {
	case MB_VERDICT_DROP: return 0;
	case MB_VERDICT_AMBIGUOUS: return 1;
	case MB_VERDICT_CONDITIONAL: return 2;
	case MB_VERDICT_KEEP: return 3;
	default: return 4;
	}
}

/* What a row is sorted by: its name, where it stands for action (its own
 * rank first, a history's decision; then a status the verdict does not
 * support; then the verdict), the time it saves, and its place. */
typedef struct row_key {
	const char *name;
	int rank;
	double saved;
	size_t index;
} row_key;

static row_key key_of(const char *name, int own, bool has_verdict, bool agrees, mb_verdict_kind kind, double saved,
	size_t index)
{
	int action = has_verdict ? (agrees ? ACTION_STATUS_AGREES : 0) + kind_rank(kind) : 2 * ACTION_STATUS_AGREES;

	return (row_key){name, own * 4 * ACTION_STATUS_AGREES + action, isfinite(saved) ? saved : -1, index};
}

static int row_order(mb_sort_key key, const row_key *a, const row_key *b)
{
	int c = 0;

	if (key == MB_SORT_ROW)
		c = strcmp(a->name, b->name);
	else if (key == MB_SORT_ACTION)
		c = (a->rank > b->rank) - (a->rank < b->rank);
	else if (key == MB_SORT_SAVED)
		c = (b->saved > a->saved) - (b->saved < a->saved);
	return c ? c : (a->index > b->index) - (a->index < b->index);
}

static row_key verdict_key(const mb_row_verdict *v, size_t index)
{
	return key_of(v->row, 0, true, v->status_agrees, v->kind, v->saved_basis != MB_SAVED_NONE ? v->saved_ns : NAN,
		index);
}

typedef struct keyed_row {
	mb_row_verdict v;
	row_key k;
} keyed_row;

static int by_verdict(const void *pa, const void *pb, void *key)
{
	return row_order(*(const mb_sort_key *)key, &((const keyed_row *)pa)->k, &((const keyed_row *)pb)->k);
}

void mb_select_verdicts(mb_verdict_set *set, const mb_select *s)
{
	keyed_row *keyed;
	size_t kept = 0;

	if (s->only_changed) {
		for (size_t i = 0; i < set->n_rows; i++) {
			if (!set->rows[i].status_agrees) {
				set->rows[kept++] = set->rows[i];
			} else {
				free(set->rows[i].row);
				free(set->rows[i].pairs);
			}
		}
		set->n_rows = kept;
	}
	if (s->key == MB_SORT_DEFAULT || !set->n_rows || !(keyed = malloc(set->n_rows * sizeof(*keyed))))
		return;
	for (size_t i = 0; i < set->n_rows; i++)
		keyed[i] = (keyed_row){set->rows[i], verdict_key(&set->rows[i], i)};
	qsort_r(keyed, set->n_rows, sizeof(*keyed), by_verdict, (void *)&s->key);
	for (size_t i = 0; i < set->n_rows; i++)
		set->rows[i] = keyed[i].v;
	free(keyed);
}

/* The row's verdict differs between the receipts that have it, or its
 * newest disagrees with its status: kinds[k] < 0 where receipt k has no
 * verdict of the row. */
static bool row_changed(const int *kinds, size_t n, bool newest_agrees)
{
	int newest = -1;

	for (size_t k = n; k-- > 0;) {
		if (kinds[k] < 0)
			continue;
		if (newest < 0)
			newest = kinds[k];
		else if (kinds[k] != newest)
			return true;
	}
	return newest >= 0 && !newest_agrees;
}

typedef struct keyed_group_row {
	mb_group_row r;
	row_key k;
} keyed_group_row;

static int by_group_row(const void *pa, const void *pb, void *key)
{
	return row_order(*(const mb_sort_key *)key, &((const keyed_group_row *)pa)->k,
		&((const keyed_group_row *)pb)->k);
}

void mb_select_group_rows(mb_group_row *rows, size_t *n_rows, const mb_verdict_set *sets, size_t n_sets,
	const mb_select *s)
{
	keyed_group_row *keyed;
	int *kinds = calloc(n_sets + 1, sizeof(*kinds));
	size_t kept = 0;

	if (s->only_changed && kinds) {
		for (size_t i = 0; i < *n_rows; i++) {
			for (size_t k = 0; k < n_sets; k++) {
				const mb_row_verdict *v = mb_verdict_find(&sets[k], rows[i].v->row);
				kinds[k] = v ? (int)v->kind : -1;
			}
			if (row_changed(kinds, n_sets, rows[i].v->status_agrees))
				rows[kept++] = rows[i];
		}
		*n_rows = kept;
	}
	free(kinds);
	if (s->key == MB_SORT_DEFAULT || !*n_rows || !(keyed = malloc(*n_rows * sizeof(*keyed))))
		return;
	for (size_t i = 0; i < *n_rows; i++)
		keyed[i] = (keyed_group_row){rows[i], verdict_key(rows[i].v, i)};
	qsort_r(keyed, *n_rows, sizeof(*keyed), by_group_row, (void *)&s->key);
	for (size_t i = 0; i < *n_rows; i++)
		rows[i] = keyed[i].r;
	free(keyed);
}

/* ---- history ---- */

typedef struct keyed_history_row {
	mb_history_row r;
	row_key k;
} keyed_history_row;

static int decision_rank(mb_history_decision d)
{
	return d == MB_HISTORY_DEMOTE ? 0 : d == MB_HISTORY_CONFIRMED ? 2 : 1;
}

static int by_history_row(const void *pa, const void *pb, void *key)
{
	return row_order(*(const mb_sort_key *)key, &((const keyed_history_row *)pa)->k,
		&((const keyed_history_row *)pb)->k);
}

static const mb_history_cell *newest_cell(const mb_history_row *r, size_t n)
{
	while (n > 0 && !r->cells[n - 1])
		n--;
	return n ? r->cells[n - 1] : NULL;
}

static void history_group(mb_history_group *hg, const mb_select *s)
{
	keyed_history_row *keyed;
	size_t kept = 0, n = hg->g->n;
	int *kinds = calloc(n + 1, sizeof(*kinds));

	if (s->only_changed && kinds) {
		for (size_t i = 0; i < hg->n_rows; i++) {
			mb_history_row *r = &hg->rows[i];
			const mb_history_cell *c = newest_cell(r, n);

			for (size_t k = 0; k < n; k++)
				kinds[k] = r->cells[k] ? (int)r->cells[k]->kind : -1;
			if (row_changed(kinds, n, !c || c->status_agrees) || r->decision == MB_HISTORY_DEMOTE) {
				hg->rows[kept++] = *r;
			} else {
				free(r->row);
				free(r->cells);
				free(r->marks);
			}
		}
		hg->n_rows = kept;
	}
	free(kinds);
	if (s->key == MB_SORT_DEFAULT || !hg->n_rows || !(keyed = malloc(hg->n_rows * sizeof(*keyed))))
		return;
	for (size_t i = 0; i < hg->n_rows; i++) {
		const mb_history_cell *c = newest_cell(&hg->rows[i], n);

		keyed[i] = (keyed_history_row){hg->rows[i], key_of(hg->rows[i].row, decision_rank(hg->rows[i].decision),
			c != NULL, c && c->status_agrees, c ? c->kind : MB_VERDICT_NOT_ENOUGH_EVIDENCE, c ? c->saved_ns : NAN, i)};
	}
	qsort_r(keyed, hg->n_rows, sizeof(*keyed), by_history_row, (void *)&s->key);
	for (size_t i = 0; i < hg->n_rows; i++)
		hg->rows[i] = keyed[i].r;
	free(keyed);
}

void mb_select_history(mb_history *h, const mb_select *s)
{
	for (size_t g = 0; g < h->n_groups; g++)
		history_group(&h->groups[g], s);
}
