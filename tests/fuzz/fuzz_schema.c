/* The schema validator, schema and instance both from the input:
 * SCHEMA NUL INSTANCE, each any JSON document (a NUL cannot occur inside
 * JSON text). Without a NUL the document is checked against itself, so a
 * seed corpus of schemas needs no pairing.
 *
 * Beyond "no crash, no hang": the result is one of the documented codes,
 * the same with and without a report (and from one run to the next: the
 * hashes are seeded afresh each time), an invalid instance is said to be
 * so by at least one issue, and no message spans lines. */
#include <string.h>

#include "fuzz_common.h"
#include "receipts/schema.h"

static bool one_line(const char *s)
{
	return !strchr(s, '\n') && !strchr(s, '\r');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t schema_len = nul ? (size_t)(nul - data) : size;
	const char *text = (const char *)data;
	json_t *schema = NULL, *inst = NULL;
	mb_schema_report report;
	mb_error err, quiet_err;
	size_t i;
	int rc, quiet;

	mb_error_clear(&err);
	if (mb_schema_load_buffer(&schema, text, schema_len, "schema.json", &err)
		|| mb_schema_load_buffer(&inst, nul ? text + schema_len + 1 : text, nul ? size - schema_len - 1 : size,
			"instance.json", &err))
		goto done;
	rc = mb_schema_validate(schema, inst, &report, &err);
	fuzz_require(rc == 0 || rc == MB_ESCHEMA || rc == MB_EINVAL || rc == MB_EUNSUPPORTED || rc == MB_ENOMEM,
		"mb_schema_validate returns a documented code");
	fuzz_require(rc != MB_ESCHEMA || report.total >= 1, "an invalid instance has an issue");
	fuzz_require(report.count <= MB_SCHEMA_MAX_ISSUES && report.count <= report.total, "the report's counts hold");
	for (i = 0; i < report.count; i++)
		fuzz_require(one_line(report.items[i].pointer) && one_line(report.items[i].message), "issues are one line");
	if (rc && rc != MB_ESCHEMA)
		fuzz_require(one_line(err.where) && one_line(err.text), "a refusal is one line");
	mb_schema_report_print(&report, "fuzz: ", fuzz_sink());
	mb_error_clear(&quiet_err);
	quiet = mb_schema_validate(schema, inst, NULL, &quiet_err);
	fuzz_require(quiet == rc || quiet == MB_ENOMEM || rc == MB_ENOMEM, "a report does not change the result");
done:
	json_decref(schema);
	json_decref(inst);
	return 0;
}
