/* Runs the official JSON Schema test suite (draft-07, Debian package
 * json-schema-test-suite) through mb_schema_validate.
 *
 * Every case must match its "valid" expectation. A group whose schema makes
 * the validator answer MB_EUNSUPPORTED (a remote $ref, such as the draft-07
 * meta-schema) is skipped and counted apart; refRemote.json needs a server
 * and is left out. The optional/ folder runs for information only.
 * Exit 77 (skip) when the suite is not installed.
 */
#include "receipts/schema.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "schema_suite.h"

/* One group: a schema and its cases. Returns the group's tally. */
static tally run_group(void *ctx, const char *file, size_t index, const json_t *group)
{
	const bool verbose = *(const bool *)ctx;
	const json_t *schema = json_object_get(group, "schema");
	const json_t *tests = json_object_get(group, "tests");
	const char *group_name = json_string_value(json_object_get(group, "description"));
	size_t i, n = json_array_size(tests);
	int *codes = calloc(n ? n : 1, sizeof(*codes));
	mb_schema_report report;
	mb_error err;
	tally t = { 0, 0, 0 };
	bool unsupported = false;

	(void)index;
	for (i = 0; codes && i < n; i++) {
		mb_error_clear(&err);
		codes[i] = mb_schema_validate(schema, json_object_get(json_array_get(tests, i), "data"),
			&report, &err);
		unsupported = unsupported || codes[i] == MB_EUNSUPPORTED;
	}
	if (!codes) {
		fprintf(stderr, "%s: out of memory\n", file);
		t.failed = n;
	} else if (unsupported) {
		t.skipped = n;
	}
	for (i = 0; codes && !unsupported && i < n; i++) {
		const json_t *test = json_array_get(tests, i);
		bool want_valid = json_is_true(json_object_get(test, "valid"));
		bool ok = codes[i] == (want_valid ? 0 : MB_ESCHEMA);

		if (ok) {
			t.passed++;
			continue;
		}
		t.failed++;
		if (verbose)
			fprintf(stderr, "FAIL %s: %s / %s: expected %s, got %s (%d)\n", file,
				group_name ? group_name : "?",
				json_string_value(json_object_get(test, "description")),
				want_valid ? "valid" : "invalid", mb_error_code_name(codes[i]), codes[i]);
	}
	free(codes);
	return t;
}

int main(void)
{
	const char *dir = schema_suite_dir();
	char optional[SCHEMA_SUITE_PATH_BYTES];
	struct stat st;
	tally main_tally, extra;
	bool verbose = true, quiet = false;

	if (!dir)
		return SCHEMA_SUITE_SKIP;
	printf("draft-07 suite: %s\n", dir);
	main_tally = schema_suite_run_dir(dir, "", false, run_group, &verbose);

	snprintf(optional, sizeof(optional), "%s/optional", dir);
	if (stat(optional, &st) == 0 && S_ISDIR(st.st_mode)) {
		printf("optional (informative, not counted; format is annotation only):\n");
		extra = schema_suite_run_dir(optional, "optional/", true, run_group, &quiet);
		printf("optional: %zu passed, %zu failed, %zu skipped\n", extra.passed, extra.failed, extra.skipped);
	}
	printf("conformance: %zu passed, %zu failed, %zu skipped (remote refs)\n",
		main_tally.passed, main_tally.failed, main_tally.skipped);
	return main_tally.failed || main_tally.passed == 0 ? 1 : 0;
}
