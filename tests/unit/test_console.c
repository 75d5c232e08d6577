/* The run's console: text from suites and receipts reaches the terminal
 * escaped, the summary table's columns follow their contents, and the live
 * line is cleared before anything else is printed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/console.h"
#include "receipts/printer.h"
#include "testutil.h"

#define TEXT_BYTES 4096

static void test_escape(void)
{
	char out[64];

	CHECK(strcmp(mb_print_terminal_safe(out, sizeof(out), "plain text"), "plain text") == 0);
	CHECK(strcmp(mb_print_terminal_safe(out, sizeof(out), "a\033[31mb"), "a\\x1b[31mb") == 0);
	CHECK(strcmp(mb_print_terminal_safe(out, sizeof(out), "tab\there\nnl\x7f"), "tab\\x09here\\x0anl\\x7f") == 0);
	/* C1 controls in UTF-8 (CSI is U+009B); other UTF-8 passes */
	CHECK(strcmp(mb_print_terminal_safe(out, sizeof(out), "\xc2\x9b" "2J \xc2\xb7"), "\\u009b2J \xc2\xb7") == 0);
	CHECK(strcmp(mb_print_terminal_safe(out, sizeof(out), NULL), "") == 0);
	/* cut short, never overflowing, never half an escape */
	CHECK(strcmp(mb_print_terminal_safe(out, 6, "ab\033cd"), "ab") == 0);
}

/* A row name longer than the old fixed column keeps the columns in line. */
static void test_table_columns(void)
{
	static const char receipt_text[] =
		"{\"cases\": ["
		"{\"row\": \"residual_rmsnorm_bwd_with_a_long_name\", \"variant\": \"fused\", \"dtype\": \"bf16\","
		" \"mode\": \"cold\", \"shape\": {\"T\": 8, \"H\": 64}, \"status\": \"ok\", \"findings\": []},"
		"{\"row\": \"relu2\", \"variant\": \"fallback\\u001b[2J\", \"dtype\": \"fp32\", \"mode\": \"hot\","
		" \"shape\": {\"R\": 8, \"C\": 64}, \"status\": \"failed\", \"findings\": [{\"kind\": \"wrong\","
		" \"message\": \"bad \\u001b]0;title\\u0007\"}]}]}";
	json_error_t jerr;
	json_t *receipt = json_loads(receipt_text, 0, &jerr);
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	char *line, *save = NULL;
	long status_at = -1;
	int lines = 0;

	CHECK_MSG(receipt != NULL, "%s", jerr.text);
	if (!receipt || !mem)
		return;
	mb_console_print_table(mem, receipt);
	fclose(mem);
	CHECK(strchr(text, '\033') == NULL && strchr(text, '\a') == NULL);
	CHECK(strstr(text, "fallback\\x1b[2J") != NULL);
	CHECK(strstr(text, "bad \\x1b]0;title\\x07") != NULL);
	for (line = strtok_r(text, "\n", &save); line && lines < 3; line = strtok_r(NULL, "\n", &save), lines++) {
		const char *word = lines == 0 ? "status" : lines == 1 ? "ok" : "failed";
		const char *at = strstr(line, word);
		CHECK_MSG(at != NULL, "line %d: %s", lines, line);
		if (!at)
			continue;
		if (status_at < 0)
			status_at = at - line;
		CHECK_MSG(at - line == status_at, "the status column moved in line %d:\n%s", lines, line);
	}
	free(text);
	json_decref(receipt);
}

/* The run table of a GPU receipt: each fused case's speedup against its
 * best alternative, its error over tolerance, its family, and the same
 * cases in Markdown and CSV. */
static void test_run_table(void)
{
	json_error_t jerr;
	json_t *receipt = json_load_file(mb_test_src("tests/golden/gate/regression/head.json"), 0, &jerr);
	static const mb_run_table_format formats[] = {MB_RUN_TABLE_TEXT, MB_RUN_TABLE_MARKDOWN, MB_RUN_TABLE_CSV};

	CHECK_MSG(receipt != NULL, "%s", jerr.text);
	for (size_t f = 0; receipt && f < sizeof(formats) / sizeof(formats[0]); f++) {
		char *text = NULL;
		size_t len = 0;
		FILE *mem = open_memstream(&text, &len);

		mb_console_print_table_as(mem, receipt, formats[f]);
		fclose(mem);
		if (formats[f] == MB_RUN_TABLE_CSV) {
			CHECK(strncmp(text, "id,row,family,variant,", 22) == 0);
			CHECK_MSG(strstr(text, ",fallback,") && strstr(text, "llama7b"), "%s", text);
			CHECK(strstr(text, "passed, ") == NULL);
		} else {
			/* rmsnorm's fused cases beat their fallback by about 1.6x */
			CHECK_MSG(strstr(text, "1.66x vs fallback") != NULL, "%s", text);
			CHECK(strstr(text, "llama70b") != NULL && strstr(text, "pass ~") != NULL);
			CHECK(strstr(text, "passed, 0 failed\n") != NULL);
		}
		if (formats[f] == MB_RUN_TABLE_MARKDOWN)
			CHECK(strstr(text, "| row | family | variant |") != NULL);
		free(text);
	}
	json_decref(receipt);
}

/* After Ctrl-C the table must not start on the live line. */
static void test_finish(void)
{
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	mb_console con;

	if (!mem)
		return;
	mb_console_init(&con, mem, false);
	con.line_open = true; /* as live_line leaves it */
	mb_console_finish(&con);
	fclose(mem);
	CHECK(text && strcmp(text, "\r\033[K") == 0);
	free(text);
}

int main(void)
{
	test_escape();
	test_table_columns();
	test_run_table();
	test_finish();
	return mb_test_finish("test_console");
}
