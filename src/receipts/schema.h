/* JSON Schema draft-07 validation over jansson values.
 *
 * Supported: type, enum, const, properties, required, additionalProperties,
 * patternProperties, propertyNames, dependencies, items, additionalItems,
 * contains, minItems, maxItems, uniqueItems, minimum, maximum,
 * exclusiveMinimum, exclusiveMaximum, multipleOf, minLength, maxLength,
 * pattern, format (annotation only), minProperties, maxProperties, allOf,
 * anyOf, oneOf, not, if/then/else, boolean schemas, and local $ref ("#",
 * "#/definitions/x", any JSON pointer into the root document, and
 * $id-relative fragments). Remote references are refused with
 * MB_EUNSUPPORTED. Schema and instance may be any JSON value.
 *
 * Patterns (pattern, patternProperties) are ECMA-262 regular expressions
 * matched against code points, the whole string (a NUL inside it too):
 * literals, ".", classes with ranges and \d \w \s \D \W \S, \b \B, ^ $,
 * groups ((...), (?:...), (?<name>...)), alternation, * + ? {n} {n,} {n,m}
 * (lazy or not), and the escapes \n \r \t \f \v \0 \cX \xHH \uHHHH
 * \u{H...}. Refused, as a bad regex, because they cannot be matched in
 * bounded time or are not there to be had: back-references (\1, \k<name>),
 * lookahead and lookbehind, Unicode property escapes (\p, \P).
 *
 * Limits: whatever the input, a validation ends in time linear in the
 * schema and the instance (up to the counted-repetition and alternation
 * factors below). Each limit refuses with MB_EINVAL and a one-line reason
 * ("refused: ..." or "bad regex ...: ..."):
 *   - a schema or an instance whose arrays and objects nest deeper than
 *     MB_SCHEMA_MAX_NESTING levels; subschemas deeper than 256 levels;
 *   - a pattern longer than MB_SCHEMA_PATTERN_MAX_BYTES, with groups nested
 *     deeper than 32 levels, a count above 1000 in {n,m}, or more than 8192
 *     steps once its counted repetitions are unrolled ((a{100}){100});
 *   - pattern matching: 4 million + 256 per byte of the instance's strings
 *     and member names, in steps of the matcher; validation: 4 million +
 *     256 per value of the schema and instance, in schema checks. A $ref
 *     target is checked once per value (its result is remembered), so no
 *     real document comes near either;
 *   - a file (mb_schema_load_file) larger than MB_SCHEMA_FILE_MAX_BYTES.
 * uniqueItems and enums of more than 8 values compare hashes first (with a
 * per-validation random seed), so they are linear in the array, not
 * quadratic. Messages never span lines: control characters in keys,
 * values and patterns are written as \n, \t or \xHH.
 */
#ifndef MB_RECEIPTS_SCHEMA_H
#define MB_RECEIPTS_SCHEMA_H

#include <jansson.h>
#include <stddef.h>

#include "receipts/error.h"

#define MB_SCHEMA_MAX_ISSUES 16
/* Arrays and objects inside each other, in a schema or an instance. */
#define MB_SCHEMA_MAX_NESTING 512
/* A pattern's length in bytes (plain number: messages print it). */
#define MB_SCHEMA_PATTERN_MAX_BYTES 4096
/* The largest JSON file mb_schema_load_file reads: 256 MiB, far above the
 * largest receipt (tens of MiB) and far below what would exhaust memory. */
#define MB_SCHEMA_FILE_MAX_BYTES 268435456u
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
 * regex) or a limit above was reached, with `err` saying why,
 * MB_EUNSUPPORTED for a remote $ref, MB_ENOMEM. */
int mb_schema_validate(const json_t *schema, const json_t *instance,
	mb_schema_report *report, mb_error *err);

/* Read any JSON document (object, array, string, number, boolean or null,
 * as draft-07 allows for schemas and instances) from `path`: `*out` is a
 * new value the caller owns, NULL on failure. Duplicate keys are refused.
 * The file is read by mb_read_file (receipts/read_file.h): a regular
 * file of at most MB_SCHEMA_FILE_MAX_BYTES, refused unread otherwise.
 * Errors: MB_ENOTFOUND, or MB_EIO (cannot open or read, not a regular
 * file, too large), where = path; MB_EINVAL, where = "PATH:LINE:COLUMN",
 * "not valid JSON: ...". */
int mb_schema_load_file(json_t **out, const char *path, mb_error *err);

/* The same from `len` bytes at `text`; `name` labels errors (the path). */
int mb_schema_load_buffer(json_t **out, const char *text, size_t len, const char *name, mb_error *err);

/* One line per kept issue: "<prefix><pointer>: <keyword>: <message>". */
void mb_schema_report_print(const mb_schema_report *report, const char *prefix, void *file);

/* The schemas shipped in schemas/, compiled into the binary.
 * `name` is "receipt", "suite", "catalog" or "policy". The returned value is
 * borrowed: parsed once, owned by the library, valid until exit. */
const json_t *mb_schema_builtin(const char *name, mb_error *err);

#endif
