#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/cli.h"
#include "harness/console.h"
#include "kernels/catalog.h"
#include "receipts/atomic_write.h"
#include "receipts/printer.h"
#include "receipts/receipt_io.h"

/* Escaping can make a message up to four times longer. */
#define ESCAPE_GROWTH 4
#define PATH_BYTES 4096
#define NAME_BYTES 512
#define FALLBACK_NAME_FMT "megabench-%s.json"

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

/* 0 when the catalog knows the policy row `name`, else the error about
 * "PATH: rows.NAME". */
static int policy_row_known(const char *name, const char *path, mb_error *err)
{
	char where[MB_ERROR_WHERE_MAX], known[MB_ERROR_TEXT_MAX / 2];

	if (mb_catalog_find(name))
		return 0;
	mb_catalog_names(known, sizeof(known));
	snprintf(where, sizeof(where), "%s: rows.%s", path, name);
	return mb_error_set(err, MB_ENOTFOUND, where, "unknown row \"%s\" (its thresholds would apply to "
		"nothing); known rows: %s", name, known);
}

int mb_cli_policy_rows_known(const json_t *doc, const char *path, mb_error *err)
{
	const char *name;
	const json_t *row;
	int rc = 0;

	json_object_foreach((json_t *)json_object_get(doc, "rows"), name, row)
		if (!rc)
			rc = policy_row_known(name, path, err);
	return rc;
}

int mb_cli_policy_load(mb_policy *out, const char *path, bool strict, mb_error *err)
{
	mb_error warn;
	int rc = mb_policy_load(out, path, err);

	mb_error_clear(&warn);
	/* the policy's rows are the document's, in its order */
	for (size_t i = 0; !rc && i < out->n_rows; i++) {
		if (!policy_row_known(out->rows[i].name, path, strict ? err : &warn))
			continue;
		if (strict)
			rc = MB_ENOTFOUND;
		else
			mb_cli_error(&warn);
		break;
	}
	return rc;
}

/* Where a receipt goes when its own path failed: $TMPDIR (else /tmp), then
 * the current directory. Returns 0 with the path in `out`. */
static int save_fallback(char *out, size_t len, const json_t *receipt, mb_error *err)
{
	const char *tmpdir = getenv("TMPDIR");
	const char *dirs[] = {tmpdir && *tmpdir ? tmpdir : "/tmp", "."};
	char name[NAME_BYTES];
	int rc = MB_EIO;

	snprintf(name, sizeof(name), FALLBACK_NAME_FMT, json_string_value(json_object_get(receipt, "run_id")));
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]) && rc; i++) {
		snprintf(out, len, "%s/%s", dirs[i], name);
		rc = mb_receipt_save_ex(receipt, out, MB_ATOMIC_NO_REPLACE, err);
	}
	return rc;
}

/* Append `s` to the string in `buf`, cut short at its end. */
static void append(char *buf, size_t len, const char *s)
{
	size_t used = strlen(buf), n = strlen(s);

	if (used + 1 >= len)
		return;
	if (n > len - used - 1)
		n = len - used - 1;
	memcpy(buf + used, s, n);
	buf[used + n] = '\0';
}

int mb_cli_save_receipt(const json_t *receipt, const char *path, bool force, bool existed, mb_error *err)
{
	char fallback[PATH_BYTES];
	mb_error fb_err;
	int rc = mb_receipt_save_ex(receipt, path, force ? 0 : MB_ATOMIC_NO_REPLACE, err);

	if (rc == 0 || strcmp(path, "-") == 0)
		return rc;
	if (rc == MB_ESCHEMA) {
		/* a receipt that breaks its schema is a bug, and it is not written
		 * anywhere: say so plainly */
		mb_error_prefix(err, "the receipt breaks its schema (not written)");
		return rc;
	}
	mb_error_clear(&fb_err);
	if (save_fallback(fallback, sizeof(fallback), receipt, &fb_err) == 0) {
		append(err->text, sizeof(err->text), "; the receipt was saved to ");
		append(err->text, sizeof(err->text), fallback);
		append(err->text, sizeof(err->text), existed ? " instead; the receipt already at this path is untouched"
			: " instead; nothing was written here");
	} else {
		append(err->text, sizeof(err->text), "; the fallback ");
		append(err->text, sizeof(err->text), fallback);
		append(err->text, sizeof(err->text), " failed too (");
		append(err->text, sizeof(err->text), fb_err.text);
		append(err->text, sizeof(err->text), "): the results of this run are lost");
	}
	return rc;
}
