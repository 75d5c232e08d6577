#include "schema_suite.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SUITE_DIR_DEFAULT "/usr/share/json-schema-test-suite/tests/draft7"

const char *schema_suite_dir(void)
{
	const char *dir = getenv("MB_SCHEMA_SUITE_DIR");
	struct stat st;

	if (!dir || !*dir)
		dir = SUITE_DIR_DEFAULT;
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		printf("%s not found (install json-schema-test-suite): skipped\n", dir);
		return NULL;
	}
	return dir;
}

void schema_suite_add(tally *into, tally t)
{
	into->passed += t.passed;
	into->failed += t.failed;
	into->skipped += t.skipped;
}

static int json_file_filter(const struct dirent *entry)
{
	size_t len = strlen(entry->d_name);

	return len > 5 && strcmp(entry->d_name + len - 5, ".json") == 0
		&& strcmp(entry->d_name, "refRemote.json") != 0;
}

static int dir_filter(const struct dirent *entry)
{
	return entry->d_name[0] != '.';
}

static tally run_file(const char *path, const char *label, schema_suite_group_fn fn, void *ctx)
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
		schema_suite_add(&t, fn(ctx, label, i, json_array_get(groups, i)));
	json_decref(groups);
	printf("  %-36s %4zu passed, %zu failed, %zu skipped\n", label, t.passed, t.failed, t.skipped);
	return t;
}

tally schema_suite_run_dir(const char *dir, const char *label_prefix, bool recurse, schema_suite_group_fn fn,
	void *ctx)
{
	struct dirent **names = NULL;
	char path[SCHEMA_SUITE_PATH_BYTES], label[SCHEMA_SUITE_PATH_BYTES];
	struct stat st;
	tally t = { 0, 0, 0 };
	int i, n = scandir(dir, &names, recurse ? dir_filter : json_file_filter, alphasort);

	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
		snprintf(label, sizeof(label), "%s%s", label_prefix, names[i]->d_name);
		if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
			if (recurse) {
				snprintf(label, sizeof(label), "%s%s/", label_prefix, names[i]->d_name);
				schema_suite_add(&t, schema_suite_run_dir(path, label, recurse, fn, ctx));
			}
		} else if (json_file_filter(names[i])) {
			schema_suite_add(&t, run_file(path, label, fn, ctx));
		}
		free(names[i]);
	}
	free(names);
	return t;
}
