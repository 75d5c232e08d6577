/* Runs the official JSON Schema test suite (draft-07, Debian package
 * json-schema-test-suite) through the command line: for every group, its
 * schema and each case's data are written to files and checked with
 * `megabench validate --schema SCHEMA.json CASE.json...`. Each case must be
 * reported "CASE.json: valid" exactly when the suite says it is valid, the
 * exit code must be 1 when a case is invalid and 0 otherwise, and nothing
 * may be refused as unreadable (exit 2).
 *
 * This is what a user sees, so it also pins what the library test
 * (test_schema_conformance.c) cannot: that top-level numbers, strings,
 * booleans and null are accepted as documents, boolean schemas too.
 * Groups that need a remote $ref (the library answers MB_EUNSUPPORTED) are
 * skipped and counted apart, as is refRemote.json. Exit 77 (skip) when the
 * suite is not installed.
 */
#include "receipts/schema.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "schema_suite.h"

#define PATH_BYTES SCHEMA_SUITE_PATH_BYTES
#define EXIT_INVALID 1

extern char **environ;

/* Where the cases go and what checks them. */
typedef struct cli {
	const char *megabench;
	const char *tmp;
} cli;

static bool write_json(const char *path, const json_t *value)
{
	FILE *f = fopen(path, "wb");
	bool ok = f && json_dumpf(value, f, JSON_ENCODE_ANY) == 0;

	if (f && fclose(f) != 0)
		ok = false;
	return ok;
}

/* The whole of a small file, NUL-terminated; NULL when it cannot be read. */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *text = NULL;
	long len;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		text = calloc(1, (size_t)len + 1);
		if (text && fread(text, 1, (size_t)len, f) != (size_t)len) {
			free(text);
			text = NULL;
		}
	}
	fclose(f);
	return text;
}

/* Run argv with stdout and stderr into files; the exit status, or -1. */
static int run(char *const *argv, const char *out_path, const char *err_path)
{
	posix_spawn_file_actions_t actions;
	pid_t pid;
	int status = -1, rc;

	posix_spawn_file_actions_init(&actions);
	posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	rc = posix_spawn(&pid, argv[0], &actions, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&actions);
	if (rc != 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* Whether `out` has the line "PATH: valid". */
static bool said_valid(const char *out, const char *path)
{
	char line[PATH_BYTES + 16];
	const char *at;
	size_t n;

	snprintf(line, sizeof(line), "%s: valid\n", path);
	n = strlen(line);
	for (at = out; at && *at; at = strchr(at, '\n') ? strchr(at, '\n') + 1 : NULL)
		if (strncmp(at, line, n) == 0)
			return true;
	return false;
}

/* Is the group's schema one the library refuses as needing a remote $ref? */
static bool needs_remote(const json_t *schema, const json_t *tests)
{
	mb_error err;

	mb_error_clear(&err);
	return mb_schema_validate(schema, json_object_get(json_array_get(tests, 0), "data"), NULL, &err)
		== MB_EUNSUPPORTED;
}

static tally run_group(void *ctx, const char *label, size_t group_index, const json_t *group)
{
	const char *megabench = ((const cli *)ctx)->megabench, *tmp = ((const cli *)ctx)->tmp;
	const json_t *schema = json_object_get(group, "schema");
	const json_t *tests = json_object_get(group, "tests");
	const char *group_name = json_string_value(json_object_get(group, "description"));
	size_t i, n = json_array_size(tests);
	char schema_path[PATH_BYTES], out_path[PATH_BYTES], err_path[PATH_BYTES];
	char (*paths)[PATH_BYTES] = calloc(n ? n : 1, sizeof(*paths));
	char **argv = calloc(n + 5, sizeof(*argv));
	char *out = NULL, *errors = NULL;
	bool any_invalid = false;
	tally t = { 0, 0, 0 };
	int code, want_code;

	if (!paths || !argv) {
		t.failed = n;
		goto cleanup;
	}
	if (needs_remote(schema, tests)) {
		t.skipped = n;
		goto cleanup;
	}
	snprintf(schema_path, sizeof(schema_path), "%s/schema-%zu.json", tmp, group_index);
	snprintf(out_path, sizeof(out_path), "%s/out", tmp);
	snprintf(err_path, sizeof(err_path), "%s/err", tmp);
	argv[0] = (char *)megabench;
	argv[1] = "validate";
	argv[2] = "--schema";
	argv[3] = schema_path;
	if (!write_json(schema_path, schema)) {
		fprintf(stderr, "%s: cannot write %s\n", label, schema_path);
		t.failed = n;
		goto cleanup;
	}
	for (i = 0; i < n; i++) {
		const json_t *test = json_array_get(tests, i);

		snprintf(paths[i], sizeof(paths[i]), "%s/case-%zu-%zu.json", tmp, group_index, i);
		argv[4 + i] = paths[i];
		any_invalid = any_invalid || !json_is_true(json_object_get(test, "valid"));
		if (!write_json(paths[i], json_object_get(test, "data"))) {
			fprintf(stderr, "%s: cannot write %s\n", label, paths[i]);
			t.failed = n;
			goto cleanup;
		}
	}
	code = run(argv, out_path, err_path);
	want_code = any_invalid ? EXIT_INVALID : 0;
	out = slurp(out_path);
	errors = slurp(err_path);
	for (i = 0; i < n; i++) {
		const json_t *test = json_array_get(tests, i);
		bool want_valid = json_is_true(json_object_get(test, "valid"));
		bool ok = code == want_code && out && said_valid(out, paths[i]) == want_valid;

		if (ok) {
			t.passed++;
			continue;
		}
		t.failed++;
		fprintf(stderr, "FAIL %s: %s / %s: expected %s (exit %d), got exit %d%s\n", label,
			group_name ? group_name : "?", json_string_value(json_object_get(test, "description")),
			want_valid ? "valid" : "invalid", want_code, code,
			out && said_valid(out, paths[i]) ? ", said valid" : ", not said valid");
	}
	if (t.failed && errors)
		fprintf(stderr, "  megabench said:\n%s", errors);
	for (i = 0; i < n; i++)
		remove(paths[i]);
	remove(schema_path);
cleanup:
	free(out);
	free(errors);
	free(paths);
	free(argv);
	return t;
}

int main(void)
{
	const char *dir = schema_suite_dir();
	char tmp[] = "/tmp/mb-schema-cli-XXXXXX", path[PATH_BYTES];
	cli c = { getenv("MEGABENCH"), tmp };
	tally total;

	if (!dir)
		return SCHEMA_SUITE_SKIP;
	if (!c.megabench || access(c.megabench, X_OK) != 0) {
		fprintf(stderr, "MEGABENCH must name the megabench binary\n");
		return 1;
	}
	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		return 1;
	}
	printf("draft-07 suite through %s validate --schema: %s\n", c.megabench, dir);
	total = schema_suite_run_dir(dir, "", false, run_group, &c);
	snprintf(path, sizeof(path), "%s/out", tmp);
	remove(path);
	snprintf(path, sizeof(path), "%s/err", tmp);
	remove(path);
	rmdir(tmp);
	printf("conformance (command line): %zu passed, %zu failed, %zu skipped (remote refs)\n",
		total.passed, total.failed, total.skipped);
	return total.failed || total.passed == 0 ? 1 : 0;
}
