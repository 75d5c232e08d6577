/* Walking the official JSON Schema test suite (draft-07, Debian package
 * json-schema-test-suite): shared by test_schema_conformance (through the
 * library) and test_schema_cli (through `megabench validate --schema`),
 * which differ only in how they run one group. */
#ifndef MB_TESTS_SCHEMA_SUITE_H
#define MB_TESTS_SCHEMA_SUITE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define SCHEMA_SUITE_SKIP 77
#define SCHEMA_SUITE_PATH_BYTES 4096

typedef struct tally {
	size_t passed;
	size_t failed;
	size_t skipped;
} tally;

/* Runs one group (a schema and its cases) of the file `label`; `index`
 * counts the groups of that file. */
typedef tally (*schema_suite_group_fn)(void *ctx, const char *label, size_t index, const json_t *group);

/* The suite's draft-07 folder: $MB_SCHEMA_SUITE_DIR, else the Debian
 * package's. NULL when it is not there (the caller skips). */
const char *schema_suite_dir(void);

/* Every *.json of `dir` but refRemote.json (it needs the suite's HTTP
 * server), sorted, and with `recurse` every sub-folder's; each file's
 * tally printed on a line of its own. */
tally schema_suite_run_dir(const char *dir, const char *label_prefix, bool recurse, schema_suite_group_fn fn,
	void *ctx);

void schema_suite_add(tally *into, tally t);

#endif
