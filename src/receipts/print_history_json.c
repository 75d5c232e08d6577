/* The nightly history as JSON (kind megabench.history,
 * schemas/history.schema.json): per group its nightlies and per row the
 * decision, the status and each nightly's verdict with the medians the
 * page charts. The same words as the Markdown and the page; NaN is null. */
#include <math.h>

#include "receipts/history.h"
#include "receipts/printer.h"
#include "receipts/text.h"

#define JSON_FLAGS (JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10))
#define LABEL_MAX 512

static json_t *nightly_json(const mb_receipt_group *g, size_t k)
{
	const json_t *r = g->revs[k], *prov = json_object_get(r, "provenance");
	char label[LABEL_MAX];

	mb_history_revision_label(label, sizeof(label), r, g->names[k]);
	return json_pack("{s:I, s:s, s:s, s:O?, s:O?, s:s, s:I}", "index", (json_int_t)k + 1, "receipt", g->names[k],
		"label", label, "commit", json_object_get(prov, "commit"), "commit_time", json_object_get(prov, "commit_time"),
		"started_at", mb_text_get(r, "started_at"), "lanes", (json_int_t)json_array_size(json_object_get(r, "lanes")));
}

static json_t *cell_json(const mb_history_cell *c)
{
	bool pair = c && c->alt;
	json_t *o;

	if (!c)
		return json_null();
	o = json_pack("{s:s, s:s, s:s, s:s}", "verdict", mb_verdict_kind_name(c->kind), "label", c->label,
		"evidence", mb_verdict_evidence_name(c->evidence), "lane", c->lane);
	json_object_set_new(o, "best_alternative", pair ? json_string(c->alt) : json_null());
	json_object_set_new(o, "shape", pair ? json_string(c->shape) : json_null());
	json_object_set_new(o, "dtype", pair ? json_string(c->dtype) : json_null());
	json_object_set_new(o, "mode", pair ? json_string(c->mode) : json_null());
	json_object_set_new(o, "fused_median_ns", pair ? mb_json_real_or_null(c->fused_median_ns) : json_null());
	json_object_set_new(o, "alternative_median_ns", pair ? mb_json_real_or_null(c->alt_median_ns) : json_null());
	json_object_set_new(o, "status", json_string(c->status));
	return o;
}

static json_t *row_json(const mb_history_group *hg, const mb_history_row *r)
{
	char text[LABEL_MAX];
	bool span = r->decision == MB_HISTORY_DEMOTE || r->decision == MB_HISTORY_DROPPED;
	json_t *o, *cells = json_array();

	mb_history_decision_text(text, sizeof(text), hg, r);
	o = json_pack("{s:s, s:s, s:s, s:I}", "row", r->row, "decision", mb_history_decision_name(r->decision),
		"decision_text", text, "streak", (json_int_t)r->streak);
	json_object_set_new(o, "losing_from", span ? json_integer((json_int_t)r->from + 1) : json_null());
	json_object_set_new(o, "losing_to", span ? json_integer((json_int_t)r->to + 1) : json_null());
	for (size_t k = 0; k < hg->g->n; k++)
		json_array_append_new(cells, cell_json(r->cells[k]));
	json_object_set_new(o, "nightlies", cells);
	return o;
}

int mb_print_history_json(FILE *out, const mb_history *h, mb_error *err)
{
	json_t *doc = json_pack("{s:s, s:s, s:i}", "kind", "megabench.history", "policy", h->policy->source,
		"streak", MB_HISTORY_STREAK), *groups = json_array();
	int rc = 0;

	for (size_t g = 0; doc && g < h->n_groups; g++) {
		const mb_history_group *hg = &h->groups[g];
		const json_t *first = hg->g->first;
		json_t *nightlies = json_array(), *rows = json_array();

		for (size_t k = 0; k < hg->g->n; k++)
			json_array_append_new(nightlies, nightly_json(hg->g, k));
		for (size_t i = 0; i < hg->n_rows; i++)
			json_array_append_new(rows, row_json(hg, &hg->rows[i]));
		json_array_append_new(groups, json_pack("{s:s, s:s, s:s, s:o, s:o}",
			"device", mb_text_get(json_object_get(first, "device"), "name"), "backend", mb_text_get(first, "backend"),
			"suite", mb_text_get(json_object_get(first, "suite"), "name"), "nightlies", nightlies, "rows", rows));
	}
	if (!doc) {
		json_decref(groups);
		return mb_error_set(err, MB_ENOMEM, "history", "no memory");
	}
	json_object_set_new(doc, "groups", groups);
	if (json_dumpf(doc, out, JSON_FLAGS))
		rc = mb_error_set(err, MB_EIO, "history", "write failed");
	fputc('\n', out);
	json_decref(doc);
	return rc;
}
