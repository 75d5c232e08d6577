/* Markdown output (diff --format markdown, and the verdict table that
 * summary.md is made of) with hostile receipt text: every string a receipt
 * carries into the output holds table pipes, line breaks, HTML, a link, an
 * image, backticks and emphasis. The output must keep every table row's
 * cells, hold no HTML but the printer's own <details>, no inline link, and
 * show the text escaped, not interpreted. */
#include "receipts/diff.h"
#include "receipts/policy.h"
#include "receipts/printer.h"
#include "receipts/report.h"
#include "receipts/verdict.h"
#include "mdcheck.h"
#include "testutil.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVIL "x|y\n| z <img src=x onerror=alert(1)> [a](http://e.invalid) ![i](http://e.invalid/p.png) `c` *b* &amp;\\|"
#define EVIL_ID "a`b``c|\n<i>"

static json_t *load(const char *rel)
{
	json_error_t error;
	json_t *value = json_load_file(mb_test_src(rel), 0, &error);

	CHECK_MSG(value != NULL, "cannot load %s: %s", rel, error.text);
	return value;
}

/* Put hostile text wherever a receipt's strings reach the Markdown. */
static void poison(json_t *receipt, bool head)
{
	json_t *cases = json_object_get(receipt, "cases"), *c;
	size_t i;

	json_object_set_new(json_object_get(receipt, "device"), "name", json_string(EVIL));
	json_object_set_new(json_object_get(receipt, "provenance"), "describe", json_string(EVIL));
	json_array_foreach(cases, i, c) {
		json_object_set_new(c, "variant", json_string(i % 2 ? EVIL : "fused"));
		json_object_set_new(c, "family", json_string(EVIL));
		json_object_set_new(c, "block", json_string(EVIL));
		if (i == 0) {
			json_object_set_new(c, "id", json_string(EVIL_ID));
			if (head) {
				json_object_set_new(c, "status", json_string("crashed"));
				json_object_set_new(c, "error", json_string(EVIL));
			}
		}
		if (i == 1)
			json_object_set_new(json_object_get(json_object_get(c, "correctness"), "tolerance"), "rationale",
				json_string(head ? EVIL : "the old rationale"));
	}
}

/* Every table keeps its cells; no HTML but the printer's; no inline link;
 * and the hostile text is shown escaped. */
static void check_markdown(const char *what, const char *md_text)
{
	char *md = mdcheck_without_code_spans(md_text);
	const char *why = mdcheck_violation(md_text);

	CHECK_MSG(!why, "%s: %s", what, why);
	if (!md)
		return;
	CHECK_MSG(strstr(md, "&lt;img src=x onerror=alert(1)>"), "%s: the HTML is not shown escaped", what);
	CHECK_MSG(strstr(md, "x\\|y \\| z"), "%s: the pipes and line break are not shown escaped", what);
	CHECK_MSG(strstr(md, "[a]\\(http://e.invalid) ![i]\\(http"), "%s: the link is not shown escaped", what);
	CHECK_MSG(strstr(md, "\\`c\\` \\*b\\* &amp;amp;\\\\\\|"), "%s: code, emphasis or entity not escaped", what);
	free(md);
}

static char *render_diff(const mb_diff *d)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	mb_error err;

	CHECK(out != NULL);
	if (!out)
		return NULL;
	mb_error_clear(&err);
	CHECK(mb_printer_markdown.diff(out, d, &err) == 0);
	fclose(out);
	return text;
}

static void test_diff(void)
{
	json_t *base = load("tests/golden/gate/wrong_answer/base.json");
	json_t *head = load("tests/golden/gate/wrong_answer/head.json");
	mb_policy policy;
	mb_diff d;
	mb_error err;
	char *md;

	if (!base || !head)
		goto cleanup;
	poison(base, false);
	poison(head, true);
	mb_policy_defaults(&policy);
	mb_error_clear(&err);
	CHECK_MSG(mb_diff_receipts(&d, base, head, "base.json", "head.json", &policy, true, &err) == 0, "diff: %s: %s",
		err.where, err.text);
	md = render_diff(&d);
	if (md) {
		check_markdown("diff", md);
		/* the case id with backticks stays one code span */
		CHECK_MSG(strstr(md, "- wrong_answer ```a`b``c| <i>```: "), "code span of the id:\n%s", md);
		CHECK_MSG(strstr(md, "## megabench diff: x\\|y \\| z &lt;img"), "revision in the heading:\n%s", md);
	}
	free(md);
	mb_diff_free(&d);
	/* refused: the reasons (device names) are printed too */
	json_object_set_new(json_object_get(head, "device"), "name", json_string("other " EVIL));
	CHECK(mb_diff_receipts(&d, base, head, "base.json", "head.json", &policy, false, &err) == 0);
	md = render_diff(&d);
	if (md)
		check_markdown("refused diff", md);
	free(md);
	mb_diff_free(&d);
cleanup:
	json_decref(base);
	json_decref(head);
}

/* The verdict table of summary.md. */
static void test_verdicts(void)
{
	json_t *receipt = load("tests/golden/gate/wrong_answer/head.json");
	mb_verdict_set set;
	mb_policy policy;
	mb_error err;
	char *text = NULL;
	size_t len = 0;
	FILE *out;

	if (!receipt)
		return;
	poison(receipt, true);
	mb_policy_defaults(&policy);
	mb_error_clear(&err);
	CHECK(mb_verdict_compute(&set, receipt, &policy, &err) == 0);
	out = open_memstream(&text, &len);
	CHECK(out != NULL);
	if (out) {
		CHECK(mb_printer_markdown.verdicts(out, &set, receipt, "head.json", &policy, &err) == 0);
		fclose(out);
		check_markdown("verdicts", text);
	}
	free(text);
	mb_verdict_set_free(&set);
	json_decref(receipt);
}

/* summary.md of `megabench report`: two groups (their headings name the
 * device), a history across two revisions, hostile text everywhere. */
static void test_report(void)
{
	json_t *r[3] = {load("tests/golden/gate/wrong_answer/base.json"), load("tests/golden/gate/wrong_answer/head.json"),
		load("tests/golden/gate/wrong_answer/head.json")};
	const char *names[3] = {"base.json", "head.json", "other.json"};
	mb_policy policy;
	mb_report model;
	mb_error err;
	char *text = NULL;
	size_t len = 0;
	FILE *out;

	if (r[0] && r[1] && r[2]) {
		poison(r[0], false);
		poison(r[1], true);
		poison(r[2], true);
		json_object_set_new(json_object_get(r[2], "device"), "name", json_string("other " EVIL));
		mb_policy_defaults(&policy);
		mb_error_clear(&err);
		out = open_memstream(&text, &len);
		CHECK(out != NULL);
		if (out) {
			CHECK_MSG(mb_report_build(&model, r, names, 3, &policy, NULL, &err) == 0, "%s", err.text);
			CHECK_MSG(mb_print_report_markdown(out, &model, &err) == 0, "%s", err.text);
			mb_report_free(&model);
			fclose(out);
			CHECK_MSG(strstr(text, "## 2. other x\\|y"), "no second group's heading:\n%s", text);
			CHECK_MSG(strstr(text, "### History across 2 revisions"), "no history:\n%s", text);
			check_markdown("report", text);
		}
		free(text);
	}
	for (int i = 0; i < 3; i++)
		json_decref(r[i]);
}

int main(void)
{
	test_diff();
	test_verdicts();
	test_report();
	return mb_test_finish("test_markdown_escape");
}
