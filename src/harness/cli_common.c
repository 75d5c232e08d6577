#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/cli.h"
#include "harness/console.h"
#include "kernels/catalog.h"
#include "receipts/printer.h"
#include "receipts/receipt_io.h"
#include "receipts/toml_json.h"

/* Escaping can make a message up to four times longer. */
#define ESCAPE_GROWTH 4

void mb_cli_error(const mb_error *err)
{
	char text[MB_ERROR_WHERE_MAX + MB_ERROR_TEXT_MAX];
	char safe[ESCAPE_GROWTH * sizeof(text)];

	mb_error_format(err, text, sizeof(text));
	/* messages quote suites and receipts: no raw control characters */
	fprintf(stderr, "megabench: %s\n", mb_print_terminal_safe(safe, sizeof(safe), text));
}

int mb_cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "megabench %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(see 'megabench %s --help')\n", cmd);
	return MB_EXIT_USAGE;
}

int mb_cli_read_toml(json_t **out, const char *path, size_t max_bytes, const char *what, mb_error *err)
{
	char *text = NULL;
	size_t len = 0;
	int rc;

	*out = NULL;
	rc = mb_read_file(&text, &len, path, max_bytes, what, err);
	if (!rc && strlen(text) != len)
		rc = mb_error_set(err, MB_EINVAL, path, "contains a NUL byte at offset %zu; a TOML file is text",
			strlen(text));
	if (!rc)
		rc = mb_toml_parse_string(out, text, path, err);
	free(text);
	return rc;
}

int mb_cli_policy_rows_known(const json_t *doc, const char *path, mb_error *err)
{
	const char *name;
	const json_t *row;

	json_object_foreach((json_t *)json_object_get(doc, "rows"), name, row) {
		char where[MB_ERROR_WHERE_MAX], known[MB_ERROR_TEXT_MAX / 2];
		if (mb_catalog_find(name))
			continue;
		mb_catalog_names(known, sizeof(known));
		snprintf(where, sizeof(where), "%s: rows.%s", path, name);
		return mb_error_set(err, MB_ENOTFOUND, where, "unknown row \"%s\" (its thresholds would apply to "
			"nothing); known rows: %s", name, known);
	}
	return 0;
}

int mb_cli_policy_load(mb_policy *out, const char *path, bool strict, mb_error *err)
{
	json_t *doc = NULL;
	mb_error warn;
	int rc = mb_cli_read_toml(&doc, path, MB_POLICY_MAX_BYTES, "a policy", err);

	if (!rc)
		rc = mb_policy_from_json(out, doc, path, err);
	if (!rc) {
		mb_error_clear(&warn);
		if (mb_cli_policy_rows_known(doc, path, strict ? err : &warn)) {
			if (strict)
				rc = MB_ENOTFOUND;
			else
				mb_cli_error(&warn);
		}
	}
	json_decref(doc);
	return rc;
}
