/* The nightly history (history.h). */
#include "receipts/history.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "receipts/promotion.h"
#include "receipts/text.h"

#define PERCENT 100.0
#define DATE_BYTES 16

const char *mb_history_decision_name(mb_history_decision d)
{
	switch (d) {
	case MB_HISTORY_DEMOTE: return "demote";
	case MB_HISTORY_CONFIRMED: return "confirmed";
	case MB_HISTORY_DROPPED: return "dropped";
	default: return "watch";
	}
}

/* The decision from the trailing streak of the row's own nightlies: the
 * receipts that ran it (one that left the row out says nothing about it). */
static void decide(mb_history_row *r, size_t n)
{
	size_t losses = 0, keeps = 0, last[MB_HISTORY_STREAK], seen = 0;
	bool losing = true, keeping = true;

	for (size_t k = n; k-- > 0;) {
		if (r->marks[k] == MB_HISTORY_ABSENT)
			continue;
		losing = losing && r->marks[k] == MB_HISTORY_LOSS;
		keeping = keeping && r->cells[k]->kind == MB_VERDICT_KEEP;
		losses += losing;
		keeps += keeping;
		if (seen < MB_HISTORY_STREAK)
			last[seen++] = k;
		if (!losing && !keeping)
			break;
	}
	r->decision = MB_HISTORY_WATCH;
	if (losses >= MB_HISTORY_STREAK) {
		r->decision = MB_HISTORY_DEMOTE;
		r->streak = losses;
		r->to = last[0];
		r->from = last[1];
	} else if (keeps >= MB_HISTORY_STREAK) {
		r->decision = MB_HISTORY_CONFIRMED;
		r->streak = keeps;
	}
}

void mb_history_init(mb_history *h, const mb_policy *policy)
{
	memset(h, 0, sizeof(*h));
	h->policy = policy;
}

/* `key` of `src` into `dst` (a copy), when `src` has it. */
static int keep_member(json_t *dst, const json_t *src, const char *key)
{
	const json_t *v = json_object_get(src, key);

	return v ? json_object_set_new(dst, key, json_deep_copy(v)) : 0;
}

/* What grouping, ordering and the printers read of a receipt (history.h). */
static json_t *digest_of(const json_t *receipt)
{
	static const char *const top[] = {"kind", "run_id", "status", "started_at", "backend", "catalog"};
	static const char *const prov_keys[] = {"commit", "commit_time", "describe"};
	const json_t *prov = json_object_get(receipt, "provenance");
	json_t *d = json_object(), *p = json_object(), *dev = json_object(), *suite = json_object(), *lanes = json_array();
	json_t *lane;
	size_t i;
	int rc = !d || !p || !dev || !suite || !lanes;

	for (i = 0; !rc && i < sizeof(top) / sizeof(top[0]); i++)
		rc = keep_member(d, receipt, top[i]);
	for (i = 0; !rc && i < sizeof(prov_keys) / sizeof(prov_keys[0]); i++)
		rc = keep_member(p, prov, prov_keys[i]);
	rc = rc || keep_member(dev, json_object_get(receipt, "device"), "name")
		|| keep_member(suite, json_object_get(receipt, "suite"), "name");
	json_array_foreach(json_object_get(receipt, "lanes"), i, lane) {
		json_t *named = json_object();

		rc = rc || !named || keep_member(named, lane, "name") || json_array_append_new(lanes, named);
	}
	if (!rc && !json_object_set(d, "provenance", p) && !json_object_set(d, "device", dev)
		&& !json_object_set(d, "suite", suite) && !json_object_set(d, "lanes", lanes)) {
		json_decref(p);
		json_decref(dev);
		json_decref(suite);
		json_decref(lanes);
		return d;
	}
	json_decref(d);
	json_decref(p);
	json_decref(dev);
	json_decref(suite);
	json_decref(lanes);
	return NULL;
}

static void rev_free(mb_history_rev *rev)
{
	for (size_t i = 0; i < rev->n_rows; i++) {
		free(rev->rows[i]);
		free(rev->cells[i].label);
		free(rev->cells[i].lane);
		free(rev->cells[i].status);
		free(rev->cells[i].alt);
		free(rev->cells[i].shape);
	}
	free(rev->rows);
	free(rev->cells);
	free(rev->name);
	json_decref(rev->digest);
	memset(rev, 0, sizeof(*rev));
}

/* What the page charts of a row in one receipt: its pair at the largest
 * shape, the fused and the best alternative's medians. */
static int cell_pair(mb_history_cell *c, const mb_verdict_pair *p)
{
	char shape[MB_VERDICT_SHAPE_MAX];

	c->fused_median_ns = c->alt_median_ns = NAN;
	if (!p)
		return 0;
	mb_verdict_shape_label(shape, sizeof(shape), p->fused);
	c->fused_median_ns = mb_text_median_ns(p->fused);
	c->alt_median_ns = mb_text_median_ns(p->alt);
	c->alt = strdup(mb_text_get(p->alt, "variant"));
	c->shape = strdup(shape);
	snprintf(c->dtype, sizeof(c->dtype), "%s", mb_text_get(p->fused, "dtype"));
	snprintf(c->mode, sizeof(c->mode), "%s", mb_text_get(p->fused, "mode"));
	return !c->alt || !c->shape;
}

/* The cells of a receipt's verdicts. */
static int rev_cells(mb_history_rev *rev, const mb_verdict_set *set)
{
	char text[MB_VERDICT_TEXT_MAX + 64];

	rev->rows = calloc(set->n_rows + 1, sizeof(*rev->rows));
	rev->cells = calloc(set->n_rows + 1, sizeof(*rev->cells));
	if (!rev->rows || !rev->cells)
		return MB_ENOMEM;
	for (size_t i = 0; i < set->n_rows; i++) {
		const mb_row_verdict *v = &set->rows[i];
		mb_history_cell *c = &rev->cells[rev->n_rows];

		c->kind = v->kind;
		c->evidence = v->evidence;
		c->status_agrees = v->status_agrees;
		c->saved_ns = v->saved_basis != MB_SAVED_NONE ? v->saved_ns : NAN;
		mb_verdict_label(text, sizeof(text), v);
		c->label = strdup(text);
		mb_history_lane_text(text, sizeof(text), v);
		c->lane = strdup(text);
		mb_verdict_status_text(text, sizeof(text), v);
		c->status = strdup(text);
		rev->rows[rev->n_rows++] = strdup(v->row);
		if (!c->label || !c->lane || !c->status || !rev->rows[rev->n_rows - 1] || cell_pair(c, v->largest))
			return MB_ENOMEM;
	}
	return 0;
}

int mb_history_add(mb_history *h, const json_t *receipt, const char *name, mb_error *err)
{
	mb_verdict_set set;
	mb_history_rev *rev;
	int rc;

	if (h->n_revs == h->cap_revs) {
		size_t cap = h->cap_revs ? 2 * h->cap_revs : 16;
		mb_history_rev *grown = realloc(h->revs, cap * sizeof(*grown));

		if (!grown)
			return mb_error_set(err, MB_ENOMEM, name, "no memory for the history");
		h->revs = grown;
		h->cap_revs = cap;
	}
	rc = mb_verdict_compute(&set, receipt, h->policy, err);
	if (rc) {
		mb_error_prefix(err, name);
		return rc;
	}
	rev = &h->revs[h->n_revs];
	memset(rev, 0, sizeof(*rev));
	rev->digest = digest_of(receipt);
	rev->name = strdup(name);
	rc = !rev->digest || !rev->name ? MB_ENOMEM : rev_cells(rev, &set);
	mb_verdict_set_free(&set);
	if (rc) {
		rev_free(rev);
		return mb_error_set(err, MB_ENOMEM, name, "no memory for the history");
	}
	h->n_revs++;
	return 0;
}

/* The cell of `row` in `rev`, or NULL. */
static const mb_history_cell *cell_of(const mb_history_rev *rev, const char *row)
{
	for (size_t i = 0; i < rev->n_rows; i++)
		if (!strcmp(rev->rows[i], row))
			return &rev->cells[i];
	return NULL;
}

static mb_history_mark mark_of(const mb_history_cell *c)
{
	if (!c)
		return MB_HISTORY_ABSENT;
	switch (c->kind) {
	case MB_VERDICT_KEEP:
	case MB_VERDICT_CONDITIONAL:
		return MB_HISTORY_WIN;
	case MB_VERDICT_DROP:
		return MB_HISTORY_LOSS;
	default:
		return MB_HISTORY_NEITHER;
	}
}

/* The row's catalog status as built in the newest receipt of the group
 * (its digest keeps the catalog); "" where it records none. */
static const char *status_now(const mb_history *h, const mb_history_group *hg, const mb_history_row *r)
{
	const char *st = mb_promotion_status(h->revs[hg->revs[hg->g->n - 1]].digest, r->row, NULL);

	return st ? st : "";
}

/* Whether `hg` has `row` already. */
static bool has_row(const mb_history_group *hg, const char *row)
{
	for (size_t i = 0; i < hg->n_rows; i++)
		if (!strcmp(hg->rows[i].row, row))
			return true;
	return false;
}

/* The group's rows: the newest receipt's in its order, then rows only
 * older receipts have, newest first (a small receipt newer than a full one
 * must not hide the rows it did not run); each with its cells and its
 * decision. */
static int group_build(mb_history_group *hg, const mb_history *h, const mb_receipt_group *g)
{
	size_t cap = 0;

	for (size_t k = 0; k < g->n; k++)
		cap += h->revs[hg->revs[k]].n_rows;
	hg->g = g;
	hg->rows = calloc(cap + 1, sizeof(*hg->rows));
	if (!hg->rows)
		return MB_ENOMEM;
	for (size_t k = g->n; k-- > 0;) {
		const mb_history_rev *rev = &h->revs[hg->revs[k]];

		for (size_t i = 0; i < rev->n_rows; i++) {
			mb_history_row *r;

			if (has_row(hg, rev->rows[i]))
				continue;
			r = &hg->rows[hg->n_rows++];
			r->row = strdup(rev->rows[i]);
			r->cells = calloc(g->n, sizeof(*r->cells));
			r->marks = calloc(g->n, sizeof(*r->marks));
			if (!r->row || !r->cells || !r->marks)
				return MB_ENOMEM;
			for (size_t m = 0; m < g->n; m++) {
				r->cells[m] = cell_of(&h->revs[hg->revs[m]], r->row);
				/* a row with cases but no pair says nothing either way */
				r->marks[m] = mark_of(r->cells[m]);
			}
			decide(r, g->n);
			/* a row already at drop (in the newest receipt's catalog, which
			 * records every row's status as built) has nothing to demote */
			if (r->decision == MB_HISTORY_DEMOTE && !strcmp(status_now(h, hg, r), "drop"))
				r->decision = MB_HISTORY_DROPPED;
		}
	}
	return 0;
}

int mb_history_finish(mb_history *h, mb_error *err)
{
	json_t **digests = calloc(h->n_revs + 1, sizeof(*digests));
	const char **names = calloc(h->n_revs + 1, sizeof(*names));
	size_t *filled = NULL;
	int rc = 0;

	if (!digests || !names) {
		rc = mb_error_set(err, MB_ENOMEM, "history", "no memory");
		goto cleanup;
	}
	for (size_t i = 0; i < h->n_revs; i++) {
		digests[i] = h->revs[i].digest;
		names[i] = h->revs[i].name;
	}
	if ((rc = mb_receipt_groups_build(&h->rg, digests, names, h->n_revs, err)))
		goto cleanup;
	h->groups = calloc(h->rg.n_groups + 1, sizeof(*h->groups));
	filled = calloc(h->rg.n_groups + 1, sizeof(*filled));
	if (!h->groups || !filled) {
		rc = mb_error_set(err, MB_ENOMEM, "history", "no memory");
		goto cleanup;
	}
	for (size_t g = 0; g < h->rg.n_groups; g++) {
		h->groups[g].revs = calloc(h->rg.groups[g].n + 1, sizeof(*h->groups[g].revs));
		h->n_groups++;
		if (!h->groups[g].revs) {
			rc = mb_error_set(err, MB_ENOMEM, "history", "no memory");
			goto cleanup;
		}
	}
	/* the groups list their revisions oldest first, as the order does */
	for (size_t i = 0; i < h->n_revs; i++) {
		size_t k = h->rg.order[i];
		size_t g = (size_t)h->rg.group_of[k];

		h->groups[g].revs[filled[g]++] = k;
	}
	for (size_t g = 0; !rc && g < h->n_groups; g++)
		if (group_build(&h->groups[g], h, &h->rg.groups[g]))
			rc = mb_error_set(err, MB_ENOMEM, "history", "no memory");
cleanup:
	free(digests);
	free(names);
	free(filled);
	return rc;
}

void mb_history_free(mb_history *h)
{
	if (!h)
		return;
	for (size_t g = 0; h->groups && g < h->n_groups; g++) {
		mb_history_group *hg = &h->groups[g];

		for (size_t i = 0; hg->rows && i < hg->n_rows; i++) {
			free(hg->rows[i].row);
			free(hg->rows[i].cells);
			free(hg->rows[i].marks);
		}
		free(hg->rows);
		free(hg->revs);
	}
	free(h->groups);
	mb_receipt_groups_free(&h->rg);
	for (size_t i = 0; i < h->n_revs; i++)
		rev_free(&h->revs[i]);
	free(h->revs);
	memset(h, 0, sizeof(*h));
}

void mb_history_revision_label(char *buf, size_t len, const json_t *receipt, const char *name)
{
	const json_t *prov = json_object_get(receipt, "provenance");
	const json_t *when = json_object_get(prov, "commit_time");
	char date[DATE_BYTES] = "";

	if (json_is_integer(when)) {
		time_t t = (time_t)json_integer_value(when);
		struct tm tm;
		if (gmtime_r(&t, &tm))
			strftime(date, sizeof(date), "%Y-%m-%d", &tm);
	}
	snprintf(buf, len, "%s%s%s", date, date[0] ? " " : "", mb_text_revision(receipt, name));
}

void mb_history_lane_text(char *buf, size_t len, const mb_row_verdict *v)
{
	char saved[64];

	if (!v || (v->evidence != MB_EVIDENCE_LANES && v->evidence != MB_EVIDENCE_LANES_INCONCLUSIVE)) {
		snprintf(buf, len, "no lane");
		return;
	}
	if (v->lane_saved_ns <= 0) {
		snprintf(buf, len, "lane: no win");
		return;
	}
	mb_text_duration(saved, sizeof(saved), v->lane_saved_ns);
	snprintf(buf, len, "lane %s/step (%+.2f%%)%s", saved, PERCENT * v->lane_saved_fraction,
		v->lane_win ? "" : ", not in every step");
}

void mb_history_decision_text(char *buf, size_t len, const mb_history_group *g, const mb_history_row *r)
{
	char a[MB_VERDICT_TEXT_MAX], b[MB_VERDICT_TEXT_MAX];
	size_t n = g->g->n;

	/* the newest receipt that ran the row */
	while (n > 1 && !r->cells[n - 1])
		n--;

	switch (r->decision) {
	case MB_HISTORY_DROPPED:
		snprintf(buf, len, "dropped: drop in the last %zu nightlies that ran it, and its status is drop already: "
			"nothing to demote", r->streak);
		break;
	case MB_HISTORY_DEMOTE:
		mb_history_revision_label(a, sizeof(a), g->g->revs[r->from], g->g->names[r->from]);
		mb_history_revision_label(b, sizeof(b), g->g->revs[r->to], g->g->names[r->to]);
		snprintf(buf, len, "demote: drop (the fallback wins, or the win is under the minimum effect) in the last "
			"%zu nightlies that ran it, the newest two %s (%s) and %s (%s)", r->streak, a, g->g->names[r->from], b,
			g->g->names[r->to]);
		break;
	case MB_HISTORY_CONFIRMED:
		snprintf(buf, len, "confirmed: keep in the last %zu nightlies%s", r->streak,
			r->cells[n - 1]->evidence == MB_EVIDENCE_LANES ? ", with lane evidence in the newest"
			: r->cells[n - 1]->evidence == MB_EVIDENCE_LANES_INCONCLUSIVE
			? " (lanes inconclusive in the newest: not enough for status keep)"
			: " (isolated evidence only in the newest: not enough for status keep)");
		break;
	default:
		if (!n || !r->cells[n - 1])
			snprintf(buf, len, "watch: in no nightly");
		else if (r->marks[n - 1] == MB_HISTORY_LOSS)
			snprintf(buf, len, "watch: drop in the newest nightly only");
		else if (r->cells[n - 1]->kind == MB_VERDICT_KEEP)
			snprintf(buf, len, "watch: keep in the newest nightly only");
		else
			snprintf(buf, len, "watch: %s in the newest nightly", mb_verdict_kind_name(r->cells[n - 1]->kind));
		break;
	}
}
