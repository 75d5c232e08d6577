/* Golden suites: every folder of tests/golden/suites/ is one case.
 *
 *   suite.toml  the suite to load
 *   args        optional, one line of key=value words: rows=, dtypes=,
 *               variants=, modes= (the command-line filter) and backend=
 *               (default cpu)
 *   expected    the one line `megabench run` would print: "megabench: " and
 *               the formatted error, or "ok: N cases" when the suite loads
 *               and plans. A '*' matches any run of characters, for the
 *               parts that depend on the machine (its memory size), and
 *               @KNOWN_ROWS@ stands for the catalog's list of rows, so that
 *               adding a row changes no expected file.
 *
 * Paths in messages are relative to the source root, so the runner works
 * from there and expected files read the same on every machine.
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/suite.h"
#include "testutil.h"

#define GOLDEN_DIR "tests/golden/suites"
#define MAX_CASES 256
#define NAME_BYTES 256
#define DIR_BYTES 512
#define PATH_BYTES 1024
#define LINE_BYTES 2048
#define PREFIX "megabench: "

/* One line of a small file, without its newline; false when absent. */
#define KNOWN_ROWS "@KNOWN_ROWS@"

/* The first line of `path`, with @KNOWN_ROWS@ replaced by the catalog's
 * row names. */
static bool read_line(char *out, size_t len, const char *path)
{
	FILE *f = fopen(path, "r");
	char line[LINE_BYTES], names[LINE_BYTES / 2], *at;
	bool ok;

	out[0] = '\0';
	if (!f)
		return false;
	ok = fgets(line, (int)sizeof(line), f) != NULL;
	fclose(f);
	line[strcspn(line, "\r\n")] = '\0';
	at = strstr(line, KNOWN_ROWS);
	if (at) {
		*at = '\0';
		mb_catalog_names(names, sizeof(names));
		return ok && snprintf(out, len, "%s%s%s", line, names, at + strlen(KNOWN_ROWS)) < (int)len;
	}
	return ok && snprintf(out, len, "%s", line) < (int)len;
}

/* Only '*' is special: suite messages are full of [ ] that fnmatch would
 * read as bracket expressions. */
static bool star_match(const char *pattern, const char *s)
{
	if (!*pattern)
		return !*s;
	if (*pattern == '*') {
		for (;; s++) {
			if (star_match(pattern + 1, s))
				return true;
			if (!*s)
				return false;
		}
	}
	return *s && *s == *pattern && star_match(pattern + 1, s + 1);
}

typedef struct golden_args {
	char buf[LINE_BYTES];
	mb_plan_filter filter;
	const char *backend;
} golden_args;

static bool parse_args(golden_args *a, const char *path, char *why, size_t why_len)
{
	char *save = NULL;

	memset(a, 0, sizeof(*a));
	a->backend = "cpu";
	read_line(a->buf, sizeof(a->buf), path);
	for (char *w = strtok_r(a->buf, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
		char *eq = strchr(w, '=');
		if (!eq) {
			snprintf(why, why_len, "args: \"%s\" is not key=value", w);
			return false;
		}
		*eq = '\0';
		if (strcmp(w, "rows") == 0)
			a->filter.rows = eq + 1;
		else if (strcmp(w, "dtypes") == 0)
			a->filter.dtypes = eq + 1;
		else if (strcmp(w, "variants") == 0)
			a->filter.variants = eq + 1;
		else if (strcmp(w, "modes") == 0)
			a->filter.modes = eq + 1;
		else if (strcmp(w, "backend") == 0)
			a->backend = eq + 1;
		else {
			snprintf(why, why_len, "args: unknown key \"%s\"", w);
			return false;
		}
	}
	return true;
}

/* What megabench would print for this folder. */
static void run_case(char *got, size_t len, const char *dir)
{
	char path[PATH_BYTES], msg[MB_ERROR_WHERE_MAX + MB_ERROR_TEXT_MAX];
	golden_args args;
	mb_suite *suite = NULL;
	mb_plan *plan = NULL;
	mb_error err;
	int rc;

	mb_error_clear(&err);
	snprintf(path, sizeof(path), "%s/args", dir);
	if (!parse_args(&args, path, got, len))
		return;
	snprintf(path, sizeof(path), "%s/suite.toml", dir);
	rc = mb_suite_load(&suite, path, &err);
	if (!rc)
		rc = mb_plan_build(&plan, suite, &args.filter, args.backend, &err);
	if (rc) {
		mb_error_format(&err, msg, sizeof(msg));
		snprintf(got, len, PREFIX "%s", msg);
	} else {
		snprintf(got, len, "ok: %zu cases", plan->n_cases);
	}
	mb_plan_free(plan);
	mb_suite_free(suite);
}

static int compare_names(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

static size_t list_cases(char names[][NAME_BYTES], size_t max)
{
	DIR *d = opendir(GOLDEN_DIR);
	struct dirent *e;
	size_t n = 0;

	if (!d) {
		fprintf(stderr, "cannot open %s: %s\n", GOLDEN_DIR, strerror(errno));
		return 0;
	}
	while ((e = readdir(d)) && n < max) {
		char path[PATH_BYTES];
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/suite.toml", GOLDEN_DIR, e->d_name);
		if (access(path, F_OK) == 0)
			snprintf(names[n++], NAME_BYTES, "%s", e->d_name);
	}
	closedir(d);
	qsort(names, n, NAME_BYTES, compare_names);
	return n;
}

int main(void)
{
	static char names[MAX_CASES][NAME_BYTES];
	const char *root = getenv("MB_SOURCE_ROOT");
	size_t n, passed = 0, failed = 0;

	if (root && *root && chdir(root) != 0) {
		fprintf(stderr, "cannot enter %s: %s\n", root, strerror(errno));
		return 1;
	}
	n = list_cases(names, MAX_CASES);
	for (size_t i = 0; i < n; i++) {
		char dir[DIR_BYTES], path[PATH_BYTES], want[LINE_BYTES], got[LINE_BYTES];
		snprintf(dir, sizeof(dir), "%s/%s", GOLDEN_DIR, names[i]);
		snprintf(path, sizeof(path), "%s/expected", dir);
		if (!read_line(want, sizeof(want), path)) {
			printf("FAIL %s: no expected file\n", names[i]);
			failed++;
			continue;
		}
		run_case(got, sizeof(got), dir);
		if (star_match(want, got)) {
			passed++;
			continue;
		}
		failed++;
		printf("FAIL %s\n  expected: %s\n  got:      %s\n", names[i], want, got);
	}
	printf("golden suites: %zu passed, %zu failed\n", passed, failed);
	/* An empty folder would pass vacuously: that is a broken test. */
	return failed || n == 0 ? 1 : 0;
}
