/* JUnit XML for CI dashboards: one testcase per case id (classname = row),
 * a <failure> for every finding that fails the gate, and one testcase for
 * comparability itself, so a refused comparison is visible too. */
#include <string.h>

#include "receipts/printer.h"

static size_t failures_for(const mb_diff *d, const char *subject, const char *row)
{
	size_t n = 0;

	for (size_t i = 0; i < d->n_findings; i++)
		if (d->findings[i].fails && (!strcmp(d->findings[i].subject, subject)
			|| (row && !strcmp(d->findings[i].subject, row))))
			n++;
	return n;
}

static void failures(FILE *out, const mb_diff *d, const char *subject, const char *row)
{
	for (size_t i = 0; i < d->n_findings; i++) {
		const mb_finding *f = &d->findings[i];

		if (!f->fails || (strcmp(f->subject, subject) && (!row || strcmp(f->subject, row))))
			continue;
		fprintf(out, "      <failure type=\"%s\" message=\"", mb_finding_kind_name(f->kind));
		mb_print_xml_escaped(out, f->message);
		fputs("\">", out);
		mb_print_xml_escaped(out, f->message);
		fputs("</failure>\n", out);
	}
}

int mb_print_junit(FILE *out, const mb_diff *d, mb_error *err)
{
	char headline[MB_DIFF_TEXT_MAX], gate[MB_DIFF_TEXT_MAX];
	size_t total_fail = 0;
	bool refused = mb_diff_refused(d);

	(void)err;
	for (size_t i = 0; i < d->n_findings; i++)
		total_fail += d->findings[i].fails;
	mb_diff_headline(d, headline, sizeof(headline));
	mb_diff_gate_reason(d, gate, sizeof(gate));
	fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", out);
	fprintf(out, "<testsuites name=\"megabench gate\" tests=\"%zu\" failures=\"%zu\">\n",
		d->n_cases + 1, total_fail + (refused ? 1 : 0));
	fputs("  <testsuite name=\"", out);
	mb_print_xml_escaped(out, mb_print_revision(d->head, d->head_name));
	fprintf(out, "\" tests=\"%zu\" failures=\"%zu\">\n", d->n_cases + 1, total_fail + (refused ? 1 : 0));
	fputs("    <properties>\n      <property name=\"headline\" value=\"", out);
	mb_print_xml_escaped(out, headline);
	fprintf(out, "\"/>\n      <property name=\"gate_exit\" value=\"%d\"/>\n", mb_diff_gate_exit(d));
	fputs("      <property name=\"gate_reason\" value=\"", out);
	mb_print_xml_escaped(out, gate);
	fputs("\"/>\n      <property name=\"base\" value=\"", out);
	mb_print_xml_escaped(out, mb_print_revision(d->base, d->base_name));
	fprintf(out, "\"/>\n      <property name=\"forced\" value=\"%s\"/>\n    </properties>\n",
		d->forced ? "FORCED" : "no");
	fputs("    <testcase classname=\"megabench\" name=\"comparable\">\n", out);
	if (refused) {
		fprintf(out, "      <failure type=\"%s\" message=\"", d->inconsistent ? "inconsistent" : "incomparable");
		mb_print_xml_escaped(out, d->reasons);
		fputs("\"/>\n", out);
	}
	fputs("    </testcase>\n", out);
	for (size_t i = 0; i < d->n_cases; i++) {
		const mb_case_diff *cd = &d->cases[i];
		const char *row = json_string_value(json_object_get(mb_print_case_of(cd), "row"));
		/* row-level findings (a missing fallback) attach to the row's cases */
		bool row_level = false;

		for (size_t k = 0; k < d->n_findings; k++)
			row_level |= d->findings[k].kind == MB_FINDING_MISSING_FALLBACK;
		fputs("    <testcase classname=\"", out);
		mb_print_xml_escaped(out, row);
		fputs("\" name=\"", out);
		mb_print_xml_escaped(out, cd->id);
		fputs("\">\n", out);
		if (failures_for(d, cd->id, row_level ? row : NULL))
			failures(out, d, cd->id, row_level ? row : NULL);
		fputs("    </testcase>\n", out);
	}
	fputs("  </testsuite>\n</testsuites>\n", out);
	return ferror(out) ? mb_error_set(err, MB_EIO, "junit", "write failed") : 0;
}
