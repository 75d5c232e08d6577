/* diff and gate on a pair of receipts: BASE NUL HEAD (without a NUL, the
 * receipt against itself), each read as the command line reads them
 * (mb_receipt_load), compared with the default policy, with and without
 * the identical-code shortcut, forced when they are not comparable, and
 * printed by every printer and JUnit. The gate's exit code is one of its
 * five; the Markdown keeps its tables and holds no receipt markup. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "../unit/mdcheck.h"
#include "receipts/diff.h"
#include "receipts/policy.h"
#include "receipts/printer.h"
#include "receipts/receipt_io.h"

#define REASON_BYTES 1024

static void print_all(const mb_diff *d)
{
	static const char *const formats[] = { "table", "json", "csv" };
	char reason[REASON_BYTES], *md = NULL;
	const char *why;
	size_t i, len = 0;
	mb_error err;
	int exit_code = mb_diff_gate_exit(d);
	FILE *out;

	fuzz_require(exit_code >= MB_GATE_PASS && exit_code <= MB_GATE_PROMOTION, "the gate exits 0 to 4");
	mb_diff_gate_reason(d, reason, sizeof(reason));
	mb_diff_headline(d, reason, sizeof(reason));
	mb_error_clear(&err);
	for (i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
		mb_printer_find(formats[i])->diff(fuzz_sink(), d, &err);
	mb_print_junit(fuzz_sink(), d, &err);
	out = open_memstream(&md, &len);
	if (out) {
		mb_printer_markdown.diff(out, d, &err);
		fclose(out);
		why = md ? mdcheck_violation(md) : NULL;
		fuzz_require(!why, why ? why : "");
	}
	free(md);
}

static void diff_pair(json_t *base, json_t *head, bool shortcut)
{
	mb_policy policy;
	mb_diff d;
	mb_error err;

	mb_policy_defaults(&policy);
	policy.identical_code_shortcut = shortcut;
	mb_error_clear(&err);
	if (mb_diff_receipts(&d, base, head, "base.json", "head.json", &policy, false, &err) == 0) {
		print_all(&d);
		if (!d.comparable && !d.inconsistent) {
			mb_diff_free(&d);
			if (mb_diff_receipts(&d, base, head, "base.json", "head.json", &policy, true, &err) == 0)
				print_all(&d);
		}
	}
	mb_diff_free(&d);
}

static json_t *load(const uint8_t *data, size_t size)
{
	char path[64];
	int fd = fuzz_memfile(data, size, path, sizeof(path));
	json_t *receipt = NULL;
	mb_error err;

	if (fd < 0)
		return NULL;
	mb_error_clear(&err);
	mb_receipt_load(&receipt, path, &err);
	close(fd);
	return receipt;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t base_len = nul ? (size_t)(nul - data) : size;
	json_t *base = load(data, base_len);
	json_t *head = base && nul ? load(nul + 1, size - base_len - 1) : json_incref(base);

	if (base && head) {
		diff_pair(base, head, true);
		diff_pair(base, head, false);
	}
	json_decref(base);
	json_decref(head);
	return 0;
}
