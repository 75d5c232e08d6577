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

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SUITE_DIR_DEFAULT "/usr/share/json-schema-test-suite/tests/draft7"
#define EXIT_SKIP 77
#define PATH_BYTES 4096

typedef struct tally {
	size_t passed;
	size_t failed;
	size_t skipped;
} tally;

static const char *const excluded_files[] = {
	"refRemote.json", /* needs the suite's HTTP server on localhost:1234 */
};

static bool is_excluded(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(excluded_files) / sizeof(excluded_files[0]); i++)
		if (strcmp(name, excluded_files[i]) == 0)
			return true;
	return false;
}

static int json_file_filter(const struct dirent *entry)
{
	size_t len = strlen(entry->d_name);

	return len > 5 && strcmp(entry->d_name + len - 5, ".json") == 0;
}

static int dir_filter(const struct dirent *entry)
{
	return entry->d_name[0] != '.';
}

/* One group: a schema and its cases. Returns the group's tally. */
static tally run_group(const char *file, const json_t *group, bool verbose)
{
	const json_t *schema = json_object_get(group, "schema");
	const json_t *tests = json_object_get(group, "tests");
	const char *group_name = json_string_value(json_object_get(group, "description"));
	size_t i, n = json_array_size(tests);
	int *codes = calloc(n ? n : 1, sizeof(*codes));
	mb_schema_report report;
	mb_error err;
	tally t = { 0, 0, 0 };
	bool unsupported = false;

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

static void add(tally *into, tally t)
{
	into->passed += t.passed;
	into->failed += t.failed;
	into->skipped += t.skipped;
}

static tally run_file(const char *path, const char *label, bool verbose)
{
	json_error_t parse_error;
	json_t *groups = json_load_file(path, 0, &parse_error);
	tally t = { 0, 0, 0 };
	size_t i;

	if (!json_is_array(groups)) {
		/* jansson refuses integers beyond 64 bits (optional/bignum.json) */
		fprintf(stderr, "%s: cannot load: line %d: %s\n", label, parse_error.line, parse_error.text);
		t.failed = 1;
	}
	for (i = 0; i < json_array_size(groups); i++)
		add(&t, run_group(label, json_array_get(groups, i), verbose));
	json_decref(groups);
	printf("  %-36s %4zu passed, %zu failed, %zu skipped\n", label, t.passed, t.failed, t.skipped);
	return t;
}

/* Every *.json of `dir` (and, when `recurse`, of its sub-folders), sorted. */
static tally run_dir(const char *dir, const char *label_prefix, bool recurse, bool verbose)
{
	struct dirent **names = NULL;
	char path[PATH_BYTES], label[PATH_BYTES];
	struct stat st;
	tally t = { 0, 0, 0 };
	int i, n = scandir(dir, &names, recurse ? dir_filter : json_file_filter, alphasort);

	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
		snprintf(label, sizeof(label), "%s%s", label_prefix, names[i]->d_name);
		if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
			if (recurse) {
				snprintf(label, sizeof(label), "%s%s/", label_prefix, names[i]->d_name);
				add(&t, run_dir(path, label, recurse, verbose));
			}
		} else if (json_file_filter(names[i]) && !is_excluded(names[i]->d_name)) {
			add(&t, run_file(path, label, verbose));
		}
		free(names[i]);
	}
	free(names);
	return t;
}

int main(void)
{
	const char *dir = getenv("MB_SCHEMA_SUITE_DIR");
	char optional[PATH_BYTES];
	struct stat st;
	tally main_tally, extra;

	if (!dir || !*dir)
		dir = SUITE_DIR_DEFAULT;
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		printf("conformance: %s not found (install json-schema-test-suite): skipped\n", dir);
		return EXIT_SKIP;
	}
	printf("draft-07 suite: %s\n", dir);
	main_tally = run_dir(dir, "", false, true);

	snprintf(optional, sizeof(optional), "%s/optional", dir);
	if (stat(optional, &st) == 0 && S_ISDIR(st.st_mode)) {
		printf("optional (informative, not counted; format is annotation only):\n");
		extra = run_dir(optional, "optional/", true, false);
		printf("optional: %zu passed, %zu failed, %zu skipped\n", extra.passed, extra.failed, extra.skipped);
	}
	printf("conformance: %zu passed, %zu failed, %zu skipped (remote refs)\n",
		main_tally.passed, main_tally.failed, main_tally.skipped);
	return main_tally.failed || main_tally.passed == 0 ? 1 : 0;
}
