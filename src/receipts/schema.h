/* JSON Schema draft-07 validation over jansson values.
 *
 * Supported: type, enum, const, properties, required, additionalProperties,
 * patternProperties, propertyNames, dependencies, items, additionalItems,
 * contains, minItems, maxItems, uniqueItems, minimum, maximum,
 * exclusiveMinimum, exclusiveMaximum, multipleOf, minLength, maxLength,
 * pattern (POSIX extended regex over the ECMA subset schemas use), format
 * (annotation only), minProperties, maxProperties, allOf, anyOf, oneOf, not,
 * if/then/else, boolean schemas, and local $ref ("#", "#/definitions/x",
 * any JSON pointer into the root document, and $id-relative fragments).
 * Remote references are refused with MB_EUNSUPPORTED.
 */
#ifndef MB_RECEIPTS_SCHEMA_H
#define MB_RECEIPTS_SCHEMA_H

#include <jansson.h>
#include <stddef.h>

#include "receipts/error.h"

#define MB_SCHEMA_MAX_ISSUES 16
#define MB_SCHEMA_POINTER_MAX 256
#define MB_SCHEMA_MESSAGE_MAX 256

typedef struct mb_schema_issue {
	char pointer[MB_SCHEMA_POINTER_MAX]; /* JSON pointer of the failing value, "" = root */
	char keyword[32];                    /* the schema keyword that failed */
	char message[MB_SCHEMA_MESSAGE_MAX]; /* "expected integer, got string" */
} mb_schema_issue;

typedef struct mb_schema_report {
	size_t total;                               /* issues found */
	size_t count;                               /* issues kept in items (<= MAX) */
	mb_schema_issue items[MB_SCHEMA_MAX_ISSUES];
} mb_schema_report;

/* Validate `instance` against `schema` (the root document, used to resolve
 * $ref). Returns 0 when valid, MB_ESCHEMA when invalid (report filled, if
 * given), MB_EINVAL when the schema itself is unusable (bad $ref, bad
 * regex) with `err` saying why, MB_EUNSUPPORTED for a remote $ref. */
int mb_schema_validate(const json_t *schema, const json_t *instance,
	mb_schema_report *report, mb_error *err);

/* One line per kept issue: "<prefix><pointer>: <keyword>: <message>". */
void mb_schema_report_print(const mb_schema_report *report, const char *prefix, void *file);

/* The schemas shipped in schemas/, compiled into the binary.
 * `name` is "receipt", "suite", "catalog" or "policy". The returned value is
 * borrowed: parsed once, owned by the library, valid until exit. */
const json_t *mb_schema_builtin(const char *name, mb_error *err);

#endif
