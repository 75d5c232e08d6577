/* megabench validate: receipts and suites by their own kind, or any JSON
 * document against a schema file. */
#include <errno.h>
#include <getopt.h>
#include <string.h>

#include "harness/cli.h"
#include "harness/suite.h"
#include "receipts/schema.h"

static void validate_usage(FILE *f)
{
	fprintf(f,
		"usage: megabench validate FILE...\n"
		"       megabench validate --schema SCHEMA.json INSTANCE.json...\n"
		"\n"
		"Without --schema, each FILE is checked as what it is: a .toml file as a suite\n"
		"(schema, known rows and dtypes, possible shapes), a .json file by its \"kind\"\n"
		"(megabench.receipt, megabench.catalog) against the schema built into megabench.\n"
		"With --schema, each instance is checked against that JSON Schema (draft-07).\n"
		"\n"
		"exit codes: 0 every file valid; 1 a file is invalid (reasons on stderr, one line\n"
		"each, with the JSON pointer and keyword); 2 a file could not be read; 64 usage.\n");
}

/* A JSON file that cannot be opened is unreadable (2); one that is not JSON
 * is invalid (1). */
static int load_json(json_t **out, const char *path)
{
	json_error_t jerr;
	FILE *f = fopen(path, "rb");

	*out = NULL;
	if (!f) {
		fprintf(stderr, "megabench: %s: cannot read: %s\n", path, strerror(errno));
		return MB_EXIT_INPUT;
	}
	*out = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
	fclose(f);
	if (!*out) {
		fprintf(stderr, "megabench: %s:%d:%d: not valid JSON: %s\n", path, jerr.line, jerr.column, jerr.text);
		return MB_EXIT_FAILED;
	}
	return MB_EXIT_OK;
}

static int check_against(const json_t *schema, const json_t *doc, const char *path)
{
	mb_schema_report report;
	mb_error err;
	char prefix[4200];
	int rc;

	mb_error_clear(&err);
	rc = mb_schema_validate(schema, doc, &report, &err);
	if (rc == 0)
		return MB_EXIT_OK;
	if (rc != MB_ESCHEMA) {
		mb_cli_error(&err);
		return MB_EXIT_INPUT;
	}
	snprintf(prefix, sizeof(prefix), "megabench: %s: ", path);
	mb_schema_report_print(&report, prefix, stderr);
	if (report.total > report.count)
		fprintf(stderr, "megabench: %s: ... and %zu more\n", path, report.total - report.count);
	return MB_EXIT_FAILED;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int validate_suite(const char *path)
{
	mb_suite *suite = NULL;
	mb_error err;
	int rc;

	mb_error_clear(&err);
	rc = mb_suite_load(&suite, path, &err);
	mb_suite_free(suite);
	if (rc == 0)
		return MB_EXIT_OK;
	mb_cli_error(&err);
	return rc == MB_EIO ? MB_EXIT_INPUT : MB_EXIT_FAILED;
}

static int validate_by_kind(const char *path)
{
	static const struct { const char *kind, *schema; } kinds[] = {
		{"megabench.receipt", "receipt"},
		{"megabench.catalog", "catalog"},
	};
	json_t *doc = NULL;
	const char *kind;
	int code;

	if (ends_with(path, ".toml"))
		return validate_suite(path);
	code = load_json(&doc, path);
	if (code)
		return code;
	kind = json_string_value(json_object_get(doc, "kind"));
	code = MB_EXIT_FAILED;
	if (!kind) {
		fprintf(stderr, "megabench: %s: no \"kind\" key: expected a receipt (kind megabench.receipt) "
			"or a catalog; use --schema to check other documents\n", path);
	} else {
		size_t i;
		for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]) && strcmp(kinds[i].kind, kind) != 0; i++)
			;
		if (i == sizeof(kinds) / sizeof(kinds[0])) {
			fprintf(stderr, "megabench: %s: /kind: unknown document kind \"%s\"\n", path, kind);
		} else {
			mb_error err;
			const json_t *schema = mb_schema_builtin(kinds[i].schema, &err);
			code = schema ? check_against(schema, doc, path) : (mb_cli_error(&err), MB_EXIT_INPUT);
		}
	}
	json_decref(doc);
	return code;
}

int mb_cli_validate(int argc, char **argv)
{
	static const struct option opts[] = {
		{"schema", required_argument, NULL, 's'},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *schema_path = NULL;
	json_t *schema = NULL;
	int c, worst = MB_EXIT_OK, quiet = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "s:qh", opts, NULL)) != -1) {
		switch (c) {
		case 's': schema_path = optarg; break;
		case 'q': quiet = 1; break;
		case 'h': validate_usage(stdout); return MB_EXIT_OK;
		default: return mb_cli_usage_error("validate", "unknown or incomplete option");
		}
	}
	if (optind >= argc)
		return mb_cli_usage_error("validate", "no file given");
	if (schema_path) {
		int code = load_json(&schema, schema_path);
		if (code)
			return MB_EXIT_INPUT; /* a schema that is not JSON makes nothing checkable */
	}
	for (int i = optind; i < argc; i++) {
		int code;
		if (schema) {
			json_t *doc = NULL;
			code = load_json(&doc, argv[i]);
			if (code == MB_EXIT_OK)
				code = check_against(schema, doc, argv[i]);
			json_decref(doc);
		} else {
			code = validate_by_kind(argv[i]);
		}
		if (code == MB_EXIT_OK && !quiet)
			printf("%s: valid\n", argv[i]);
		/* unreadable (2) outranks invalid (1) */
		if (code > worst)
			worst = code;
	}
	json_decref(schema);
	return worst;
}
