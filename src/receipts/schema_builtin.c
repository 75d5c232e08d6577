/* The schemas of schemas/, compiled into the binary by schemas/embed.py and
 * parsed on first use. Parsed documents live until the process exits: every
 * caller borrows them, so none may be freed early. Not thread-safe; nothing
 * validates from two threads. */
#include "receipts/schema.h"

#include <stdlib.h>
#include <string.h>

/* Generated at build time (schemas_embedded.c); NULL for an unknown name. */
const char *mb_schema_embedded(const char *name, size_t *len);

typedef struct builtin_schema {
	struct builtin_schema *next;
	json_t *doc;
	char name[];
} builtin_schema;

static builtin_schema *parsed_schemas;

const json_t *mb_schema_builtin(const char *name, mb_error *err)
{
	builtin_schema *entry = NULL;
	const char *text;
	json_error_t parse_error;
	json_t *doc = NULL;
	size_t len = 0;

	if (!name) {
		mb_error_set(err, MB_EINVAL, "", "mb_schema_builtin: a schema name is required");
		goto cleanup;
	}
	for (entry = parsed_schemas; entry; entry = entry->next)
		if (strcmp(entry->name, name) == 0)
			goto cleanup;
	text = mb_schema_embedded(name, &len);
	if (!text) {
		mb_error_set(err, MB_ENOTFOUND, name,
			"no built-in schema of that name (known: receipt, suite, catalog, policy, verdict, diff, history)");
		goto cleanup;
	}
	doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &parse_error);
	if (!doc) {
		mb_error_set(err, MB_EINVAL, name, "built-in schema is not JSON: line %d column %d: %s",
			parse_error.line, parse_error.column, parse_error.text);
		goto cleanup;
	}
	entry = malloc(sizeof(*entry) + strlen(name) + 1);
	if (!entry) {
		mb_error_set(err, MB_ENOMEM, name, "out of memory");
		goto cleanup;
	}
	strcpy(entry->name, name);
	entry->doc = doc;
	entry->next = parsed_schemas;
	parsed_schemas = entry;
	doc = NULL;
cleanup:
	json_decref(doc);
	return entry ? entry->doc : NULL;
}
