/* The nightly history (history.h). */
#include "receipts/history.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "receipts/printer.h"
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

static mb_history_mark mark_of(const mb_row_verdict *v)
{
	if (!v)
		return MB_HISTORY_ABSENT;
	switch (v->kind) {
	case MB_VERDICT_KEEP:
	case MB_VERDICT_CONDITIONAL:
		return MB_HISTORY_WIN;
	case MB_VERDICT_DROP:
		return MB_HISTORY_LOSS;
	default:
		return MB_HISTORY_NEITHER;
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

/* The row's status in the newest receipt of the group, else in the newest
 * that ran it; "" where neither records it. */
static const char *status_now(const mb_receipt_group *g, const mb_history_row *r)
{
	const char *st = mb_promotion_status(g->revs[g->n - 1], r->row, NULL);

	return st ? st : r->cells[r->to]->status;
}

static int group_build(mb_history_group *hg, const mb_receipt_group *g, const mb_policy *policy, mb_error *err)
{
	mb_group_row *order = NULL;
	size_t n_order = 0;
	int rc;

	hg->g = g;
	rc = mb_receipt_group_verdicts(&hg->sets, &hg->n_sets, &order, &n_order, g, policy, "history", err);
	if (!rc && !(hg->rows = calloc(n_order + 1, sizeof(*hg->rows))))
		rc = mb_error_set(err, MB_ENOMEM, "history", "no memory");
	for (size_t i = 0; !rc && i < n_order; i++) {
		const char *name = order[i].v->row;
		mb_history_row *r = &hg->rows[hg->n_rows++];

		r->row = strdup(name);
		r->cells = calloc(g->n, sizeof(*r->cells));
		r->marks = calloc(g->n, sizeof(*r->marks));
		if (!r->row || !r->cells || !r->marks) {
			rc = mb_error_set(err, MB_ENOMEM, "history", "no memory");
			break;
		}
		for (size_t m = 0; m < g->n; m++) {
			r->cells[m] = mb_verdict_find(&hg->sets[m], name);
			/* a row with cases but no pair says nothing either way */
			r->marks[m] = mark_of(r->cells[m]);
		}
		decide(r, g->n);
		/* a row already at drop (in the newest receipt's catalog, which
		 * records every row's status as built) has nothing to demote */
		if (r->decision == MB_HISTORY_DEMOTE && !strcmp(status_now(g, r), "drop"))
			r->decision = MB_HISTORY_DROPPED;
	}
	free(order);
	return rc;
}

int mb_history_build(mb_history *out, json_t *const *receipts, const char *const *names, size_t n,
	const mb_policy *policy, mb_error *err)
{
	int rc;

	memset(out, 0, sizeof(*out));
	out->policy = policy;
	rc = mb_receipt_groups_build(&out->rg, receipts, names, n, err);
	if (rc)
		return rc;
	out->groups = calloc(out->rg.n_groups + 1, sizeof(*out->groups));
	if (!out->groups)
		return mb_error_set(err, MB_ENOMEM, "history", "no memory");
	for (size_t g = 0; !rc && g < out->rg.n_groups; g++) {
		rc = group_build(&out->groups[g], &out->rg.groups[g], policy, err);
		out->n_groups++;
	}
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
		for (size_t k = 0; k < hg->n_sets; k++)
			mb_verdict_set_free(&hg->sets[k]);
		free(hg->sets);
	}
	free(h->groups);
	mb_receipt_groups_free(&h->rg);
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
	snprintf(buf, len, "%s%s%s", date, date[0] ? " " : "", mb_print_revision(receipt, name));
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
	mb_print_duration(saved, sizeof(saved), v->lane_saved_ns);
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
