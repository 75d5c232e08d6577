#include "receipts/receipt_io.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "receipts/atomic_write.h"
#include "receipts/gzip.h"
#include "receipts/read_file.h"
#include "receipts/schema.h"

#define RECEIPT_KIND "megabench.receipt"
#define RECEIPT_SCHEMA "receipt"
/* Duplicate keys would make a receipt mean two things. */
#define JSON_LOAD_FLAGS JSON_REJECT_DUPLICATES
#define ROOT_POINTER_NAME "(document root)"

/* "PATH: /pointer", or "PATH: (document root)" for the empty pointer. */
static void where_pointer(mb_error *err, const char *path, const char *pointer)
{
	if (!err)
		return;
	snprintf(err->where, sizeof(err->where), "%s: %s", path,
		*pointer ? pointer : ROOT_POINTER_NAME);
}

/* Say "this is not a receipt" before the schema says forty things about
 * it, so a suite file or a policy given by mistake reads plainly. */
static int check_kind(const json_t *doc, const char *path, mb_error *err)
{
	const json_t *kind = json_object_get(doc, "kind");
	const json_t *version = json_object_get(doc, "schema_version");
	int rc = 0;

	if (!json_is_object(doc)) {
		rc = mb_error_set(err, MB_ESCHEMA, NULL,
			"not a megabench receipt: expected a JSON object");
		where_pointer(err, path, "");
	} else if (!json_is_string(kind)) {
		rc = mb_error_set(err, MB_ESCHEMA, NULL,
			"not a megabench receipt: no \"kind\": \"" RECEIPT_KIND "\" member");
		where_pointer(err, path, "/kind");
	} else if (strcmp(json_string_value(kind), RECEIPT_KIND) != 0) {
		rc = mb_error_set(err, MB_ESCHEMA, NULL,
			"not a megabench receipt: kind is \"%s\", expected \"" RECEIPT_KIND "\"",
			json_string_value(kind));
		where_pointer(err, path, "/kind");
	} else if (json_is_integer(version) && (json_integer_value(version) < MB_RECEIPT_SCHEMA_VERSION_OLDEST
		|| json_integer_value(version) > MB_RECEIPT_SCHEMA_VERSION)) {
		rc = mb_error_set(err, MB_ESCHEMA, NULL,
			"receipt schema version %" JSON_INTEGER_FORMAT " is not supported"
			" (this megabench reads versions %d to %d)",
			json_integer_value(version), MB_RECEIPT_SCHEMA_VERSION_OLDEST, MB_RECEIPT_SCHEMA_VERSION);
		where_pointer(err, path, "/schema_version");
	}
	return rc;
}

/* The first schema issue, and how many more there are, into `err`. */
static void report_first_issue(mb_error *err, const mb_schema_report *report, const char *path)
{
	const mb_schema_issue *first = &report->items[0];

	if (report->count == 0) {
		mb_error_set(err, MB_ESCHEMA, path, "breaks the receipt schema");
		return;
	}
	if (report->total > 1)
		mb_error_set(err, MB_ESCHEMA, NULL, "%s: %s (and %zu more)",
			first->keyword, first->message, report->total - 1);
	else
		mb_error_set(err, MB_ESCHEMA, NULL, "%s: %s", first->keyword, first->message);
	where_pointer(err, path, first->pointer);
}

/* A GPU reference (case.gpu, a topology link's end, a shard's gpu) that
 * names no entry of `gpus`. */
static int gpu_ref(const json_t *ref, size_t n_gpus, const char *path, const char *pointer, mb_error *err)
{
	if (!json_is_integer(ref) || (json_integer_value(ref) >= 0 && (size_t)json_integer_value(ref) < n_gpus))
		return 0;
	mb_error_set(err, MB_ESCHEMA, NULL, "names GPU %" JSON_INTEGER_FORMAT "; the receipt lists %zu (gpus)",
		json_integer_value(ref), n_gpus);
	where_pointer(err, path, pointer);
	return MB_ESCHEMA;
}

int mb_receipt_check_gpus(const json_t *doc, const char *path, mb_error *err)
{
	const json_t *gpus = json_object_get(doc, "gpus"), *count = json_object_get(doc, "gpu_count");
	size_t n = json_array_size(gpus), i;
	json_int_t most = json_integer_value(count);
	char pointer[64];
	json_t *v;
	int rc = 0;

	if (json_is_integer(count) && (size_t)json_integer_value(count) != n) {
		mb_error_set(err, MB_ESCHEMA, NULL, "gpu_count is %" JSON_INTEGER_FORMAT ", but gpus lists %zu",
			json_integer_value(count), n);
		where_pointer(err, path, "/gpu_count");
		return MB_ESCHEMA;
	}
	json_array_foreach(json_object_get(doc, "cases"), i, v) {
		const json_t *span = json_object_get(json_object_get(v, "collective"), "gpus");

		snprintf(pointer, sizeof(pointer), "/cases/%zu/gpu", i);
		if ((rc = gpu_ref(json_object_get(v, "gpu"), n, path, pointer, err)))
			return rc;
		/* without gpu_count the receipt does not say; diff then refuses
		 * the case (no topology to compare) */
		if (json_is_integer(count) && json_is_integer(span) && json_integer_value(span) > most) {
			mb_error_set(err, MB_ESCHEMA, NULL, "spans %" JSON_INTEGER_FORMAT " GPUs; the run had %" JSON_INTEGER_FORMAT
				" (gpu_count)", json_integer_value(span), most);
			snprintf(pointer, sizeof(pointer), "/cases/%zu/collective/gpus", i);
			where_pointer(err, path, pointer);
			return MB_ESCHEMA;
		}
	}
	json_array_foreach(json_object_get(json_object_get(doc, "topology"), "links"), i, v) {
		snprintf(pointer, sizeof(pointer), "/topology/links/%zu/a", i);
		if ((rc = gpu_ref(json_object_get(v, "a"), n, path, pointer, err)))
			return rc;
		snprintf(pointer, sizeof(pointer), "/topology/links/%zu/b", i);
		if ((rc = gpu_ref(json_object_get(v, "b"), n, path, pointer, err)))
			return rc;
	}
	json_array_foreach(json_object_get(doc, "shards"), i, v) {
		snprintf(pointer, sizeof(pointer), "/shards/%zu/gpu", i);
		if ((rc = gpu_ref(json_object_get(v, "gpu"), n, path, pointer, err)))
			return rc;
	}
	return 0;
}

static int check_receipt(const json_t *doc, const char *path, mb_error *err)
{
	mb_schema_report report;
	mb_error inner;
	const json_t *schema;
	int rc;

	rc = check_kind(doc, path, err);
	if (rc)
		goto cleanup;
	mb_error_clear(&inner);
	memset(&report, 0, sizeof(report));
	schema = mb_schema_builtin(RECEIPT_SCHEMA, &inner);
	if (!schema)
		rc = inner.code ? inner.code : MB_EINVAL;
	else
		rc = mb_schema_validate(schema, doc, &report, &inner);
	if (rc == MB_ESCHEMA) {
		report_first_issue(err, &report, path);
	} else if (rc && err) {
		/* The schema itself is broken: say so, naming the receipt too. */
		*err = inner;
		err->code = rc;
		mb_error_prefix(err, path);
	}
	if (rc == 0)
		rc = mb_receipt_check_gpus(doc, path, err);

cleanup:
	return rc;
}

int mb_receipt_load(json_t **out, const char *path, mb_error *err)
{
	json_error_t jerr;
	char *text = NULL;
	size_t len = 0;
	json_t *doc = NULL;
	int rc;

	*out = NULL;
	rc = mb_read_file(&text, &len, path, MB_RECEIPT_MAX_BYTES, "a receipt", err);
	if (!rc)
		rc = mb_gzip_decode(&text, &len, path, MB_RECEIPT_MAX_BYTES, "a receipt", err);
	if (rc)
		goto cleanup;
	doc = json_loadb(text, len, JSON_LOAD_FLAGS, &jerr);
	if (!doc) {
		char where[MB_ERROR_WHERE_MAX];

		snprintf(where, sizeof(where), "%s:%d:%d", path, jerr.line, jerr.column);
		rc = mb_error_set(err, MB_EINVAL, where, "not valid JSON: %s", jerr.text);
		goto cleanup;
	}
	rc = check_receipt(doc, path, err);
	if (rc)
		goto cleanup;
	*out = doc;
	doc = NULL;

cleanup:
	json_decref(doc);
	free(text);
	return rc;
}

int mb_receipt_save(const json_t *receipt, const char *path, mb_error *err)
{
	return mb_receipt_save_ex(receipt, path, 0, err);
}

int mb_receipt_save_ex(const json_t *receipt, const char *path, unsigned flags, mb_error *err)
{
	int rc = check_receipt(receipt, path, err);

	if (rc == 0)
		rc = mb_json_write_atomic_ex(receipt, path, flags | (mb_gzip_path(path) ? MB_ATOMIC_GZIP : 0), err);
	return rc;
}
