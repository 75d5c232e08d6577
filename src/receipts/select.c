/* What a reporter shows (select.h). */
#include "receipts/select.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "receipts/text.h"

#define REGEX_ERROR_BYTES 256
#define ROW_LIST_BYTES 512
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

/* Whether any receipt has a case of `row`. */
static bool some_receipt_has(json_t *const *receipts, size_t n, const char *row)
{
	for (size_t k = 0; k < n; k++) {
		size_t i;
		json_t *c;

		json_array_foreach(json_object_get(receipts[k], "cases"), i, c)
			if (!strcmp(mb_text_get(c, "row"), row))
				return true;
	}
	return false;
}

/* "a, b, c": the rows the receipts have, each once. */
static void rows_present(char *buf, size_t len, json_t *const *receipts, size_t n)
{
	buf[0] = '\0';
	for (size_t k = 0; k < n; k++) {
		size_t i;
		json_t *c;

		json_array_foreach(json_object_get(receipts[k], "cases"), i, c) {
			const char *row = mb_text_get(c, "row");
			size_t used = strlen(buf), rn = strlen(row);
			bool seen = false;

			for (const char *p = buf; !seen && (p = strstr(p, row)); p += rn)
				seen = (p == buf || p[-1] == ' ') && (p[rn] == ',' || p[rn] == '\0');
			if (!seen && used + rn + 3 < len)
				snprintf(buf + used, len - used, "%s%s", used ? ", " : "", row);
		}
	}
}

/* The option whose emptying of the selection the error names: the last of
 * --rows, --filter, --exclude that removed anything. */
static int nothing_left(const mb_select *s, size_t total, const char *first_id, const char *names, mb_error *err)
{
	char where[MB_ERROR_WHERE_MAX];

	if (s->have_exclude)
		snprintf(where, sizeof(where), "--exclude %s", s->exclude);
	if (s->have_filter)
		snprintf(where, sizeof(where), "--filter %s", s->filter);
	if (s->n_rows && !s->have_filter && !s->have_exclude)
		snprintf(where, sizeof(where), "--rows %s", s->rows);
	return mb_error_set(err, MB_EINVAL, where, "the selection keeps none of the %zu cases of %s (such as %s; "
		"a case id reads row/variant/dtype/mode/family/shape)", total, names, first_id);
}

int mb_select_receipts(const mb_select *s, json_t *const *receipts, const char *const *names, size_t n,
	mb_error *err)
{
	char first_id[MB_VERDICT_SHAPE_MAX] = "", list[ROW_LIST_BYTES], where[MB_ERROR_WHERE_MAX];
	size_t total = 0, kept = 0;

	if (!mb_select_narrows(s))
		return 0;
	for (size_t r = 0; r < s->n_rows; r++) {
		if (some_receipt_has(receipts, n, s->row_names[r]))
			continue;
		rows_present(list, sizeof(list), receipts, n);
		snprintf(where, sizeof(where), "--rows %s", s->rows);
		return mb_error_set(err, MB_EINVAL, where, "no receipt has a case of row \"%s\"; their rows: %s",
			s->row_names[r], list[0] ? list : "none");
	}
	for (size_t k = 0; k < n; k++) {
		json_t *cases = json_object_get(receipts[k], "cases");

		for (size_t i = json_array_size(cases); i-- > 0;) {
			const json_t *c = json_array_get(cases, i);

			total++;
			if (!first_id[0] || i == 0)
				snprintf(first_id, sizeof(first_id), "%s", mb_text_get(c, "id"));
			if (mb_select_keeps(s, mb_text_get(c, "id"), mb_text_get(c, "row")))
				kept++;
			else
				json_array_remove(cases, i);
		}
	}
	if (kept)
		return 0;
	list[0] = '\0';
	for (size_t k = 0; k < n && strlen(list) + 8 < sizeof(list); k++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", k ? ", " : "", names[k]);
	return nothing_left(s, total, first_id[0] ? first_id : "none", list, err);
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

/* Rows to act on first: a status the verdict does not support, then by
 * verdict; rows without one last. */
static int action_rank(const mb_row_verdict *v)
{
	return v ? (v->status_agrees ? ACTION_STATUS_AGREES : 0) + kind_rank(v->kind) : 2 * ACTION_STATUS_AGREES;
}

static double saved_of(const mb_row_verdict *v)
{
	return v && v->saved_basis != MB_SAVED_NONE && isfinite(v->saved_ns) ? v->saved_ns : -1;
}

/* Compare two rows by the key: name, verdict, their own rank (a history's
 * decision), then the order they came in. */
static int row_order(mb_sort_key key, const char *name_a, const mb_row_verdict *a, int rank_a, size_t i_a,
	const char *name_b, const mb_row_verdict *b, int rank_b, size_t i_b)
{
	int c = 0;

	if (key == MB_SORT_ROW)
		c = strcmp(name_a, name_b);
	else if (key == MB_SORT_ACTION)
		c = rank_a != rank_b ? (rank_a > rank_b) - (rank_a < rank_b) : action_rank(a) - action_rank(b);
	else if (key == MB_SORT_SAVED)
		c = (saved_of(b) > saved_of(a)) - (saved_of(b) < saved_of(a));
	return c ? c : (i_a > i_b) - (i_a < i_b);
}

typedef struct keyed_row {
	mb_row_verdict v;
	size_t index;
} keyed_row;

static int by_verdict(const void *pa, const void *pb, void *key)
{
	const keyed_row *a = pa, *b = pb;

	return row_order(*(const mb_sort_key *)key, a->v.row, &a->v, 0, a->index, b->v.row, &b->v, 0, b->index);
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
		keyed[i] = (keyed_row){set->rows[i], i};
	qsort_r(keyed, set->n_rows, sizeof(*keyed), by_verdict, (void *)&s->key);
	for (size_t i = 0; i < set->n_rows; i++)
		set->rows[i] = keyed[i].v;
	free(keyed);
}

/* The row's verdict differs between receipts that have it, or its newest
 * disagrees with its status. */
static bool row_changed(const mb_row_verdict *const *cells, size_t n)
{
	const mb_row_verdict *newest = NULL;

	for (size_t k = n; k-- > 0;) {
		if (!cells[k])
			continue;
		if (!newest)
			newest = cells[k];
		else if (cells[k]->kind != newest->kind)
			return true;
	}
	return newest && !newest->status_agrees;
}

typedef struct keyed_group_row {
	mb_group_row r;
	size_t index;
} keyed_group_row;

static int by_group_row(const void *pa, const void *pb, void *key)
{
	const keyed_group_row *a = pa, *b = pb;

	return row_order(*(const mb_sort_key *)key, a->r.v->row, a->r.v, 0, a->index, b->r.v->row, b->r.v, 0, b->index);
}

void mb_select_group_rows(mb_group_row *rows, size_t *n_rows, const mb_verdict_set *sets, size_t n_sets,
	const mb_select *s)
{
	keyed_group_row *keyed;
	const mb_row_verdict **cells = calloc(n_sets + 1, sizeof(*cells));
	size_t kept = 0;

	if (s->only_changed && cells) {
		for (size_t i = 0; i < *n_rows; i++) {
			for (size_t k = 0; k < n_sets; k++)
				cells[k] = mb_verdict_find(&sets[k], rows[i].v->row);
			if (row_changed(cells, n_sets))
				rows[kept++] = rows[i];
		}
		*n_rows = kept;
	}
	free(cells);
	if (s->key == MB_SORT_DEFAULT || !*n_rows || !(keyed = malloc(*n_rows * sizeof(*keyed))))
		return;
	for (size_t i = 0; i < *n_rows; i++)
		keyed[i] = (keyed_group_row){rows[i], i};
	qsort_r(keyed, *n_rows, sizeof(*keyed), by_group_row, (void *)&s->key);
	for (size_t i = 0; i < *n_rows; i++)
		rows[i] = keyed[i].r;
	free(keyed);
}

/* ---- history ---- */

typedef struct keyed_history_row {
	mb_history_row r;
	const mb_row_verdict *newest;
	size_t index;
} keyed_history_row;

static int decision_rank(mb_history_decision d)
{
	return d == MB_HISTORY_DEMOTE ? 0 : d == MB_HISTORY_CONFIRMED ? 2 : 1;
}

static int by_history_row(const void *pa, const void *pb, void *key)
{
	const keyed_history_row *a = pa, *b = pb;

	return row_order(*(const mb_sort_key *)key, a->r.row, a->newest, decision_rank(a->r.decision), a->index, b->r.row, b->newest,
		decision_rank(b->r.decision), b->index);
}

static const mb_row_verdict *newest_cell(const mb_history_row *r, size_t n)
{
	while (n > 0 && !r->cells[n - 1])
		n--;
	return n ? r->cells[n - 1] : NULL;
}

static void history_group(mb_history_group *hg, const mb_select *s)
{
	keyed_history_row *keyed;
	size_t kept = 0, n = hg->g->n;

	if (s->only_changed) {
		for (size_t i = 0; i < hg->n_rows; i++) {
			mb_history_row *r = &hg->rows[i];

			if (row_changed(r->cells, n) || r->decision == MB_HISTORY_DEMOTE) {
				hg->rows[kept++] = *r;
			} else {
				free(r->row);
				free(r->cells);
				free(r->marks);
			}
		}
		hg->n_rows = kept;
	}
	if (s->key == MB_SORT_DEFAULT || !hg->n_rows || !(keyed = malloc(hg->n_rows * sizeof(*keyed))))
		return;
	for (size_t i = 0; i < hg->n_rows; i++)
		keyed[i] = (keyed_history_row){hg->rows[i], newest_cell(&hg->rows[i], n), i};
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
