/* megabench validate: receipts, catalogs, suites and policies by their own
 * kind, or any JSON document against a schema file. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "harness/cli.h"
#include "harness/suite.h"
#include "kernels/catalog.h"
#include "receipts/gzip.h"
#include "receipts/read_file.h"
#include "receipts/receipt_io.h"
#include "receipts/schema.h"
#include "receipts/toml_json.h"

#define KIND_PREFIX "megabench."

/* Keys a policy may have at its top level (schemas/policy.schema.json). */
static const char *const policy_keys[] = {"alpha", "min_effect", "noise_ceiling", "noise_floor",
	"identical_code_max_change", "memory_max_growth", "lane_min_effect", "rows", "gate"};

static void validate_usage(FILE *f)
{
	fprintf(f,
		"usage: megabench validate [--kind suite|policy|receipt|catalog|verdict|diff|history] FILE...\n"
		"       megabench validate --schema SCHEMA.json INSTANCE.json...\n"
		"\n"
		"Without --schema, each FILE is checked as what it is. A .toml file is a suite when it\n"
		"has a [suite] table, else a policy (--kind says which, where a file is ambiguous):\n"
		"  suite   schema, known rows and dtypes, possible shapes, and planned as `run` would\n"
		"          plan it for every backend (at most %d cases); whether a shape fits this\n"
		"          machine's memory is the run's concern (run names the cases it leaves out)\n"
		"  policy  schemas/policy.schema.json, and every [rows.NAME] a row of the catalog\n"
		"A .json (or .json.gz) file is checked by its \"kind\" against the schema built into\n"
		"megabench: megabench.receipt, megabench.catalog (catalog --format json), and what the\n"
		"reporters print with --format json: megabench.verdict (verdict), megabench.diff (diff\n"
		"and gate) and megabench.history (history): schemas/KIND.schema.json. With --schema,\n"
		"each instance is checked against that JSON Schema (draft-07).\n"
		"\n"
		"exit codes: 0 every file valid; 1 a file is invalid (reasons on stderr, one line\n"
		"each, with the key path or JSON pointer); 2 a file could not be read; 64 usage.\n",
		MB_PLAN_MAX_CASES);
}

/* A JSON file that cannot be read is unreadable (2); one that is not JSON
 * is invalid (1). */
static int load_json(json_t **out, const char *path)
{
	json_error_t jerr;
	mb_error err;
	char *text = NULL;
	size_t len = 0;

	*out = NULL;
	mb_error_clear(&err);
	if (mb_read_file(&text, &len, path, MB_RECEIPT_MAX_BYTES, "a JSON document", &err)) {
		mb_cli_error(&err);
		return MB_EXIT_INPUT;
	}
	/* a .json.gz receipt is checked as the receipt it holds */
	if (mb_gzip_decode(&text, &len, path, MB_RECEIPT_MAX_BYTES, "a JSON document", &err)) {
		mb_cli_error(&err);
		return err.code == MB_EINVAL ? MB_EXIT_FAILED : MB_EXIT_INPUT;
	}
	/* any JSON value: a schema may be true or false, a document a number */
	*out = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	free(text);
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

/* Load, then plan as `run` would: a suite that validates is one that runs.
 * "any" counts every variant, built in or not, so that the case limit
 * holds for the GPU backend too. */
static int validate_suite(const char *path)
{
	mb_suite *suite = NULL;
	mb_plan *plan = NULL;
	mb_error err;
	int rc;

	mb_error_clear(&err);
	rc = mb_suite_load(&suite, path, &err);
	if (!rc)
		rc = mb_plan_build(&plan, suite, NULL, "any", &err);
	mb_plan_free(plan);
	mb_suite_free(suite);
	if (rc == 0)
		return MB_EXIT_OK;
	mb_cli_error(&err);
	return rc == MB_EIO ? MB_EXIT_INPUT : MB_EXIT_FAILED;
}

/* The policy schema's findings, one line each, then the rows the catalog
 * does not know, then what the policy loader itself refuses. */
static int validate_policy_doc(const json_t *doc, const char *path)
{
	mb_error err;
	mb_policy policy;
	const json_t *schema;
	int code;

	mb_error_clear(&err);
	schema = mb_schema_builtin("policy", &err);
	if (!schema) {
		mb_cli_error(&err);
		return MB_EXIT_INPUT;
	}
	code = check_against(schema, doc, path);
	if (code)
		return code;
	if (mb_cli_policy_rows_known(doc, path, &err)) {
		mb_cli_error(&err);
		return MB_EXIT_FAILED;
	}
	mb_policy_defaults(&policy);
	if (mb_policy_from_json(&policy, doc, path, &err)) {
		mb_cli_error(&err);
		code = MB_EXIT_FAILED;
	}
	mb_policy_free(&policy);
	return code;
}

/* A TOML file with a [suite] table is a suite. One made only of a
 * policy's keys (and no row with families) is a policy. */
static bool looks_like_policy(const json_t *doc)
{
	const char *key;
	const json_t *v, *row;

	if (json_object_get(doc, "suite"))
		return false;
	json_object_foreach((json_t *)doc, key, v) {
		size_t i;
		for (i = 0; i < sizeof(policy_keys) / sizeof(policy_keys[0]) && strcmp(policy_keys[i], key); i++)
			;
		if (i == sizeof(policy_keys) / sizeof(policy_keys[0]))
			return false;
	}
	json_object_foreach((json_t *)json_object_get(doc, "rows"), key, row)
		if (json_object_get(row, "families"))
			return false;
	return true;
}

/* A .toml file: a suite or a policy (`kind` forces one; NULL guesses). */
static int validate_toml(const char *path, const char *kind)
{
	json_t *doc = NULL;
	mb_error err;
	int code;

	if (kind && strcmp(kind, "suite") == 0)
		return validate_suite(path);
	mb_error_clear(&err);
	if (mb_toml_parse_file(&doc, path, MB_POLICY_MAX_BYTES > MB_SUITE_MAX_BYTES ? MB_POLICY_MAX_BYTES
		: MB_SUITE_MAX_BYTES, "a suite or a policy", &err)) {
		mb_cli_error(&err);
		return err.code == MB_EIO || err.code == MB_ENOTFOUND ? MB_EXIT_INPUT : MB_EXIT_FAILED;
	}
	if (kind || looks_like_policy(doc))
		code = validate_policy_doc(doc, path);
	else
		code = validate_suite(path);
	json_decref(doc);
	return code;
}

static int validate_by_kind(const char *path, const char *forced)
{
	static const struct { const char *kind, *schema; } kinds[] = {
		{"megabench.receipt", "receipt"},
		{"megabench.catalog", "catalog"},
		{"megabench.verdict", "verdict"},
		{"megabench.diff", "diff"},
		{"megabench.history", "history"},
	};
	json_t *doc = NULL;
	const char *kind;
	int code;

	if (forced && (strcmp(forced, "suite") == 0 || strcmp(forced, "policy") == 0))
		return validate_toml(path, forced);
	if (!forced && ends_with(path, ".toml"))
		return validate_toml(path, NULL);
	code = load_json(&doc, path);
	if (code)
		return code;
	kind = json_string_value(json_object_get(doc, "kind"));
	code = MB_EXIT_FAILED;
	if (!kind) {
		fprintf(stderr, "megabench: %s: no \"kind\" key: expected a receipt (kind megabench.receipt), a "
			"catalog, or what verdict, diff, gate or history print with --format json; use --schema to check "
			"other documents\n", path);
	} else if (forced && strncmp(kind, KIND_PREFIX, strlen(KIND_PREFIX)) == 0
		&& strcmp(kind + strlen(KIND_PREFIX), forced) != 0) {
		fprintf(stderr, "megabench: %s: /kind: \"%s\", not a %s\n", path, kind, forced);
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
			/* a receipt's GPU references, as loading one checks them */
			if (code == MB_EXIT_OK && strcmp(kinds[i].schema, "receipt") == 0
				&& mb_receipt_check_gpus(doc, path, &err)) {
				mb_cli_error(&err);
				code = MB_EXIT_FAILED;
			}
		}
	}
	json_decref(doc);
	return code;
}

int mb_cli_validate(int argc, char **argv)
{
	static const struct option opts[] = {
		{"schema", required_argument, NULL, 's'},
		{"kind", required_argument, NULL, 'k'},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	static const char *const kinds[] = {"suite", "policy", "receipt", "catalog", "verdict", "diff", "history"};
	const char *schema_path = NULL, *kind = NULL;
	json_t *schema = NULL;
	int c, worst = MB_EXIT_OK, quiet = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "s:k:qh", opts, NULL)) != -1) {
		switch (c) {
		case 's': schema_path = optarg; break;
		case 'k': kind = optarg; break;
		case 'q': quiet = 1; break;
		case 'h': validate_usage(stdout); return MB_EXIT_OK;
		default: return mb_cli_usage_error("validate", "unknown or incomplete option");
		}
	}
	if (optind >= argc)
		return mb_cli_usage_error("validate", "no file given");
	if (kind) {
		size_t i;
		for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]) && strcmp(kinds[i], kind); i++)
			;
		if (i == sizeof(kinds) / sizeof(kinds[0]))
			return mb_cli_usage_error("validate", "--kind must be suite, policy, receipt, catalog, verdict, diff or "
				"history, got \"%s\"", kind);
		if (schema_path)
			return mb_cli_usage_error("validate", "--kind and --schema exclude each other");
	}
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
			code = validate_by_kind(argv[i], kind);
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
