/* Promotions gated by evidence (promotion.h). */
#include "receipts/promotion.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "receipts/text.h"

static const char *const ranks[] = {"drop", "experimental", "conditional", "keep"};

int mb_promotion_rank(const char *status)
{
	for (int i = 0; status && i < (int)(sizeof(ranks) / sizeof(ranks[0])); i++)
		if (!strcmp(status, ranks[i]))
			return i;
	return -1;
}

bool mb_promotion_recorded(const json_t *receipt)
{
	return json_is_object(json_object_get(receipt, "catalog"));
}

const char *mb_promotion_status(const json_t *receipt, const char *row, const char **condition)
{
	const json_t *entry = json_object_get(json_object_get(receipt, "catalog"), row);
	const char *status = json_string_value(json_object_get(entry, "status"));

	if (condition)
		*condition = json_string_value(json_object_get(entry, "condition"));
	return status;
}

bool mb_promotion_supported(const char *status, const char *condition, const mb_row_verdict *v,
	char *why, size_t why_len)
{
	char label[MB_VERDICT_TEXT_MAX];
	bool lanes_keep = v && v->kind == MB_VERDICT_KEEP && v->evidence == MB_EVIDENCE_LANES;

	why[0] = '\0';
	if (mb_promotion_rank(status) < mb_promotion_rank("conditional"))
		return true; /* experimental and drop claim nothing */
	if (!v || !v->n_pairs) {
		snprintf(why, why_len, "the receipt has %s of the row", v ? "no fused/fallback pair" : "no case");
		return false;
	}
	if (lanes_keep)
		return true;
	mb_verdict_label(label, sizeof(label), v);
	if (!strcmp(status, "keep")) {
		snprintf(why, why_len, "its verdict is %s: keep needs a keep verdict with lane evidence", label);
		return false;
	}
	if (v->kind == MB_VERDICT_CONDITIONAL && mb_verdict_condition_same(v->condition, condition))
		return true;
	snprintf(why, why_len, "its verdict is %s: conditional (%s) needs a win under that condition", label,
		condition ? condition : "no condition named");
	return false;
}

static const char *device_of(const json_t *receipt)
{
	return mb_text_get(json_object_get(receipt, "device"), "name");
}

/* One row's entry; NULL-free strings throughout. */
static void check_row(mb_promotion *p, const json_t *base, const json_t *head, const char *row,
	const mb_verdict_set *hv, const mb_verdict_set *bv)
{
	const char *cond = NULL, *bcond = NULL;
	const char *hs = mb_promotion_status(head, row, &cond);
	const char *bs = base ? mb_promotion_status(base, row, &bcond) : NULL;
	char why[MB_PROMOTION_TEXT_MAX / 2];

	memset(p, 0, sizeof(*p));
	snprintf(p->row, sizeof(p->row), "%s", row);
	snprintf(p->head_status, sizeof(p->head_status), "%s", hs ? hs : "");
	snprintf(p->base_status, sizeof(p->base_status), "%s", bs ? bs : "");
	snprintf(p->condition, sizeof(p->condition), "%s", cond ? cond : "");
	p->demotion = bs && mb_promotion_rank(hs) < mb_promotion_rank(bs);
	p->promotion = mb_promotion_rank(hs) > mb_promotion_rank(bs);
	/* the CPU backend runs the reference variant only: it has no evidence
	 * about a fused kernel either way, and a CPU gate must not fail every
	 * promoted row */
	if (!strcmp(mb_text_get(head, "backend"), MB_PROMOTION_UNCHECKED_BACKEND)) {
		p->supported = true;
		p->unchecked = true;
		snprintf(p->message, sizeof(p->message), "%s%s%s: not checked on the %s backend, which runs no fused "
			"variant", bs && strcmp(bs, hs ? hs : "") ? bs : "", bs && strcmp(bs, hs ? hs : "") ? " -> " : "",
			hs ? hs : "unknown", MB_PROMOTION_UNCHECKED_BACKEND);
		return;
	}
	p->claims = mb_promotion_rank(hs) >= mb_promotion_rank("conditional");
	/* a row the head did not run keeps the status it had: only a change of
	 * status needs the head's cases to show it */
	if (!mb_verdict_find(hv, row) && bs && !strcmp(bs, hs ? hs : "")) {
		p->supported = true;
		p->unchecked = true;
		snprintf(p->message, sizeof(p->message), "%s: the head ran no case of the row, and its "
			"status is the base's", hs ? hs : "unknown");
		return;
	}
	p->supported = mb_promotion_supported(hs, cond, mb_verdict_find(hv, row), why, sizeof(why));
	if (p->demotion) {
		snprintf(p->message, sizeof(p->message), "%s -> %s: a demotion never fails the gate", bs, hs);
		if (!p->supported)
			mb_text_appendf(p->message, sizeof(p->message), " (and %s still claims more than %s shows: %s)", hs,
				device_of(head), why);
		return;
	}
	if (p->supported) {
		snprintf(p->message, sizeof(p->message), "%s%s%s%s: ", bs && p->promotion ? bs : "",
			bs && p->promotion ? " -> " : "", hs ? hs : "unknown", bs || !p->promotion ? "" : " (base status unknown)");
		if (p->claims)
			mb_text_appendf(p->message, sizeof(p->message), "supported by the head's evidence on %s",
				device_of(head));
		else
			mb_text_appendf(p->message, sizeof(p->message), "claims nothing");
		return;
	}
	snprintf(p->message, sizeof(p->message), "status %s%s%s%s in the head claims more than the head's evidence on %s "
		"shows: %s", hs, cond ? " (" : "", cond ? cond : "", cond ? ")" : "", device_of(head), why);
	/* evidence from another device kind is no evidence for this one */
	if (base && bv && strcmp(device_of(base), device_of(head))) {
		char other[MB_PROMOTION_TEXT_MAX / 2];
		if (mb_promotion_supported(hs, cond, mb_verdict_find(bv, row), other, sizeof(other)))
			mb_text_appendf(p->message, sizeof(p->message), "; the base on %s would support it, but evidence "
				"from another device kind does not count", device_of(base));
	}
}

int mb_promotion_check(mb_promotion **out, size_t *n_out, const json_t *base, const json_t *head,
	const mb_verdict_set *head_verdicts, const mb_verdict_set *base_verdicts, mb_error *err)
{
	const json_t *catalog = json_object_get(head, "catalog");
	const char *row;
	json_t *entry;
	size_t n = 0;

	*out = calloc(json_object_size(catalog) + 1, sizeof(**out));
	*n_out = 0;
	if (!*out)
		return mb_error_set(err, MB_ENOMEM, "promotion", "no memory");
	json_object_foreach((json_t *)catalog, row, entry) {
		mb_promotion *p = &(*out)[n];
		const char *hs = json_string_value(json_object_get(entry, "status"));
		const char *bs = base ? mb_promotion_status(base, row, NULL) : NULL;

		if (mb_promotion_rank(hs) < mb_promotion_rank("conditional") && (!bs || !strcmp(bs, hs ? hs : "")))
			continue; /* claims nothing and did not change */
		check_row(p, base, head, row, head_verdicts, base_verdicts);
		n++;
	}
	*n_out = n;
	return 0;
}
