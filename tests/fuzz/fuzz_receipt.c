/* The receipt reader as the command line uses it (mb_receipt_load: read,
 * parse, validate against the receipt schema), then what every command does
 * with a receipt it accepted: verdicts, and every printer's verdict table.
 * The Markdown one must keep its tables and hold no receipt markup. */
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "../unit/mdcheck.h"
#include "receipts/policy.h"
#include "receipts/printer.h"
#include "receipts/receipt_io.h"
#include "receipts/verdict.h"

static void print_verdicts(const json_t *receipt, const mb_policy *policy)
{
	static const char *const formats[] = { "table", "markdown", "json", "csv" };
	mb_verdict_set set;
	mb_error err;
	const char *why;
	char *md = NULL;
	size_t i, len = 0;
	FILE *out;

	mb_error_clear(&err);
	if (mb_verdict_compute(&set, receipt, policy, &err))
		return;
	for (i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
		mb_printer_find(formats[i])->verdicts(fuzz_sink(), &set, receipt, "fuzz.json", policy, &err);
	out = open_memstream(&md, &len);
	if (out) {
		mb_printer_markdown.verdicts(out, &set, receipt, "fuzz.json", policy, &err);
		fclose(out);
		why = md ? mdcheck_violation(md) : NULL;
		fuzz_require(!why, why ? why : "");
	}
	free(md);
	mb_verdict_set_free(&set);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64];
	int fd = fuzz_memfile(data, size, path, sizeof(path));
	json_t *receipt = NULL;
	mb_policy policy;
	mb_error err;

	if (fd < 0)
		return 0;
	mb_error_clear(&err);
	if (mb_receipt_load(&receipt, path, &err) == 0) {
		mb_policy_defaults(&policy);
		print_verdicts(receipt, &policy);
	}
	json_decref(receipt);
	close(fd);
	return 0;
}
