/* JUnit XML for CI dashboards, in the common schema (the Ant/Jenkins
 * junit.xsd): <testsuites> and one <testsuite> with name, tests, failures,
 * errors, skipped, time, timestamp and hostname; one <testcase> per case id
 * (classname = row) with its time; a <failure> for every finding that fails
 * the gate, a <skipped> for a case that was not compared (new, not timed).
 * Comparability is a property of the suite, not a test: a refused
 * comparison lists the head's cases, each failed as "incomparable", so that
 * the dashboard shows what was not checked and why. */
#include <math.h>
#include <string.h>

#include "receipts/printer.h"
#include "receipts/text.h"

#define NS_PER_S 1e9
/* junit.xsd's timestamp: ISO 8601 without a zone or fractions. */
#define TIMESTAMP_CHARS 19
#define TIMESTAMP_BYTES 32

/* A failing finding belongs to a case: its subject is the case id, or the
 * case's row (row-level findings such as a missing fallback). */
static bool belongs(const mb_finding *f, const char *id, const char *row)
{
	/* a status claim is the row's own testcase (promotion_cases), not
	 * its cases': a promoted row may have none */
	return f->fails && f->kind != MB_FINDING_UNSUPPORTED_PROMOTION
		&& (!strcmp(f->subject, id) || (row && !strcmp(f->subject, row)));
}

static size_t failures_for(const mb_diff *d, const char *id, const char *row)
{
	size_t n = 0;

	for (size_t i = 0; i < d->n_findings; i++)
		n += belongs(&d->findings[i], id, row);
	return n;
}

static void failures(FILE *out, const mb_diff *d, const char *id, const char *row)
{
	for (size_t i = 0; i < d->n_findings; i++) {
		const mb_finding *f = &d->findings[i];

		if (!belongs(f, id, row))
			continue;
		fprintf(out, "      <failure type=\"%s\" message=\"", mb_finding_kind_name(f->kind));
		mb_print_xml_escaped(out, f->message);
		fputs("\">", out);
		mb_print_xml_escaped(out, f->message);
		fputs("</failure>\n", out);
	}
}

/* Why a case was not compared (NULL: it was). */
static const char *skip_reason(const mb_case_diff *cd)
{
	if (!cd->base)
		return "new case: not in the baseline, nothing to compare";
	if (!cd->head)
		return "missing from the head receipt";
	if (!cd->compared || cd->cmp.why == MB_WHY_NO_TIMING)
		return "not timed on one side (its status says why)";
	return NULL;
}

/* Seconds the case spent being timed, from the head (else the base). */
static double case_seconds(const json_t *kase)
{
	const json_t *t = json_object_get(kase, "timing");
	double ns = json_number_value(json_object_get(t, "sampling_ns"));

	return isfinite(ns) && ns > 0 ? ns / NS_PER_S : 0.0;
}

static void timestamp_of(char *out, size_t len, const json_t *receipt)
{
	snprintf(out, len, "%.*s", TIMESTAMP_CHARS, mb_text_get(receipt, "started_at"));
}

static void property(FILE *out, const char *name, const char *value)
{
	fprintf(out, "      <property name=\"%s\" value=\"", name);
	mb_print_xml_escaped(out, value);
	fputs("\"/>\n", out);
}

/* A status check fails unless the head's evidence supports the claim; a
 * demotion never fails. */
static bool promotion_passes(const mb_promotion *p)
{
	return p->supported || p->demotion;
}

/* One testcase per status check (classname the row, name "status ROW"),
 * failed with its own type, unsupported_promotion. */
static void promotion_cases(FILE *out, const mb_diff *d)
{
	for (size_t i = 0; i < d->n_promotions; i++) {
		const mb_promotion *p = &d->promotions[i];

		fputs("    <testcase classname=\"", out);
		mb_print_xml_escaped(out, p->row);
		fputs("\" name=\"status ", out);
		mb_print_xml_escaped(out, p->row);
		fputs("\" time=\"0\">\n", out);
		if (!promotion_passes(p)) {
			fprintf(out, "      <failure type=\"%s\" message=\"",
				mb_finding_kind_name(MB_FINDING_UNSUPPORTED_PROMOTION));
			mb_print_xml_escaped(out, p->message);
			fputs("\">", out);
			mb_print_xml_escaped(out, p->message);
			fputs("</failure>\n", out);
		}
		fputs("    </testcase>\n", out);
	}
}

typedef struct junit_counts {
	size_t tests, failures, skipped;
	double seconds;
} junit_counts;

static void count_cases(junit_counts *c, const mb_diff *d, bool refused)
{
	memset(c, 0, sizeof(*c));
	if (refused) {
		size_t i;
		json_t *kase;
		json_array_foreach(json_object_get(d->head, "cases"), i, kase) {
			c->tests++;
			c->failures++;
			c->seconds += case_seconds(kase);
		}
		return;
	}
	for (size_t i = 0; i < d->n_cases; i++) {
		const mb_case_diff *cd = &d->cases[i];
		const json_t *kase = mb_print_case_of(cd);
		const char *row = mb_text_get(kase, "row");

		c->tests++;
		c->seconds += case_seconds(kase);
		if (failures_for(d, cd->id, row))
			c->failures++;
		else if (skip_reason(cd))
			c->skipped++;
	}
	for (size_t i = 0; i < d->n_promotions; i++) {
		c->tests++;
		c->failures += !promotion_passes(&d->promotions[i]);
	}
}

static void testcase_open(FILE *out, const json_t *kase, const char *id)
{
	fputs("    <testcase classname=\"", out);
	mb_print_xml_escaped(out, mb_text_get(kase, "row"));
	fputs("\" name=\"", out);
	mb_print_xml_escaped(out, id);
	fprintf(out, "\" time=\"%.6f\">\n", case_seconds(kase));
}

/* A refused comparison checked none of the head's cases: each says why. */
static void refused_cases(FILE *out, const mb_diff *d)
{
	size_t i;
	json_t *kase;

	json_array_foreach(json_object_get(d->head, "cases"), i, kase) {
		testcase_open(out, kase, mb_text_get(kase, "id"));
		fprintf(out, "      <failure type=\"%s\" message=\"", d->inconsistent ? "inconsistent" : "incomparable");
		mb_print_xml_escaped(out, d->reasons);
		fputs("\"/>\n    </testcase>\n", out);
	}
}

static void compared_cases(FILE *out, const mb_diff *d)
{
	for (size_t i = 0; i < d->n_cases; i++) {
		const mb_case_diff *cd = &d->cases[i];
		const json_t *kase = mb_print_case_of(cd);
		const char *row = mb_text_get(kase, "row");

		testcase_open(out, kase, cd->id);
		if (failures_for(d, cd->id, row)) {
			failures(out, d, cd->id, row);
		} else if (skip_reason(cd)) {
			fputs("      <skipped message=\"", out);
			mb_print_xml_escaped(out, skip_reason(cd));
			fputs("\"/>\n", out);
		}
		fputs("    </testcase>\n", out);
	}
}

int mb_print_junit(FILE *out, const mb_diff *d, mb_error *err)
{
	char headline[MB_DIFF_TEXT_MAX], gate[MB_DIFF_TEXT_MAX], stamp[TIMESTAMP_BYTES];
	char comparable[MB_DIFF_TEXT_MAX + 32], exit_code[16];
	bool refused = mb_diff_refused(d);
	junit_counts c;

	mb_diff_headline(d, headline, sizeof(headline));
	mb_diff_gate_reason(d, gate, sizeof(gate));
	timestamp_of(stamp, sizeof(stamp), d->head);
	count_cases(&c, d, refused);
	if (d->inconsistent)
		snprintf(comparable, sizeof(comparable), "no (inconsistent): %s", d->reasons);
	else if (!d->comparable)
		snprintf(comparable, sizeof(comparable), "%s: %s", d->forced ? "no, FORCED" : "no", d->reasons);
	else
		snprintf(comparable, sizeof(comparable), "yes");
	snprintf(exit_code, sizeof(exit_code), "%d", mb_diff_gate_exit(d));

	fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", out);
	fprintf(out, "<testsuites name=\"megabench gate\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"%zu\" "
		"time=\"%.6f\" timestamp=\"", c.tests, c.failures, c.skipped, c.seconds);
	mb_print_xml_escaped(out, stamp);
	fputs("\">\n  <testsuite name=\"", out);
	mb_print_xml_escaped(out, mb_text_revision(d->head, d->head_name));
	fprintf(out, "\" id=\"0\" package=\"megabench\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"%zu\" "
		"time=\"%.6f\" timestamp=\"", c.tests, c.failures, c.skipped, c.seconds);
	mb_print_xml_escaped(out, stamp);
	fputs("\" hostname=\"", out);
	mb_print_xml_escaped(out, mb_text_get(json_object_get(d->head, "host"), "hostname"));
	fputs("\">\n    <properties>\n", out);
	property(out, "comparable", comparable);
	property(out, "headline", headline);
	property(out, "gate_exit", exit_code);
	property(out, "gate_reason", gate);
	property(out, "base", mb_text_revision(d->base, d->base_name));
	property(out, "forced", d->forced ? "FORCED" : "no");
	fputs("    </properties>\n", out);
	if (refused)
		refused_cases(out, d);
	else
		compared_cases(out, d);
	promotion_cases(out, d);
	fputs("    <system-out>", out);
	mb_print_xml_escaped(out, headline);
	fputs("; gate: ", out);
	mb_print_xml_escaped(out, gate);
	fputs("</system-out>\n    <system-err>", out);
	if (refused)
		mb_print_xml_escaped(out, d->reasons);
	fputs("</system-err>\n  </testsuite>\n</testsuites>\n", out);
	return ferror(out) ? mb_error_set(err, MB_EIO, "junit", "write failed") : 0;
}
