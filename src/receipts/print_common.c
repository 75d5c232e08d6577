#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "receipts/printer.h"


const mb_printer *mb_printer_find(const char *name)
{
	static const mb_printer *const all[] = {&mb_printer_table, &mb_printer_markdown, &mb_printer_json,
		&mb_printer_csv};

	for (size_t i = 0; name && i < sizeof(all) / sizeof(all[0]); i++)
		if (!strcmp(all[i]->name, name))
			return all[i];
	return NULL;
}

void mb_print_change(char *buf, size_t len, double ratio)
{
	if (isnan(ratio))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%+.1f%%", 100.0 * (ratio - 1.0));
}

const char mb_print_model_note[] = "model: the speedup the row's bytes model predicts at that shape, the "
	"alternative's modelled bytes read and written over the fused kernel's (its launches over the fused "
	"kernel's where the bytes are equal); a measured speedup far below it is time left on the table.";
const char mb_print_ceiling_note[] = "of ceiling: achieved throughput over the device's measured ceiling for "
	"that case, named beside it: copy (the copy bandwidth), read+write (the read and write bandwidths weighted "
	"by the case's own bytes) or GEMM (the dense GEMM rate).";

void mb_print_ceiling_text(char *buf, size_t len, const json_t *kase)
{
	const json_t *tp = json_object_get(kase, "throughput");
	const json_t *frac = json_object_get(tp, "fraction_of_ceiling");
	const char *ceiling = json_string_value(json_object_get(tp, "ceiling"));

	if (!json_is_number(frac) || !ceiling) {
		snprintf(buf, len, "-");
		return;
	}
	snprintf(buf, len, "%.3f of %s", json_number_value(frac), !strcmp(ceiling, "gemm") ? "GEMM"
		: !strcmp(ceiling, "memory") ? "read+write" : ceiling);
}

void mb_print_shape(char *buf, size_t len, const json_t *kase)
{
	char shape[256];

	mb_verdict_shape_label(shape, sizeof(shape), kase);
	snprintf(buf, len, "%s (%s)", shape, json_string_value(json_object_get(kase, "mode")));
}

const json_t *mb_print_case_of(const mb_case_diff *cd)
{
	return cd->head ? cd->head : cd->base;
}

void mb_print_case_verdict(char *buf, size_t len, const mb_case_diff *cd)
{
	const char *word = !cd->head ? "MISSING" : !cd->base ? "NEW"
		: cd->cmp.why == MB_WHY_NO_TIMING ? "NOT TIMED" : cd->cmp.why == MB_WHY_NOT_JUDGED ? "NOT JUDGED"
		: mb_cmp_class_name(cd->cmp.cls);
	const char *dir = cd->compared && cd->cmp.cls == MB_CMP_AMBIGUOUS ? mb_cmp_direction_name(cd->cmp.direction) : "";
	const char *how = cd->compared && cd->cmp.machine_changed ? " (machine or harness changed)" : "";

	snprintf(buf, len, "%s%s%s%s%s%s%s%s", word, dir[0] ? ", " : "", dir, how,
		cd->wrong_answer ? ", wrong answer" : "", cd->still_wrong ? ", still wrong" : "",
		cd->status_changed ? ", now skipped" : "", cd->fields_missing ? ", fields missing" : "");
}

int mb_print_case_rank(const mb_case_diff *cd)
{
	if (cd->wrong_answer || cd->still_wrong || cd->status_changed || cd->fields_missing)
		return 0;
	if (cd->compared && (cd->cmp.cls == MB_CMP_SLOWER || cd->cmp.machine_changed))
		return 1;
	if (!cd->head)
		return 2;
	if (cd->compared && cd->cmp.cls == MB_CMP_AMBIGUOUS)
		return 3;
	if (cd->compared && cd->cmp.cls == MB_CMP_FASTER)
		return 4;
	if (!cd->base)
		return 5;
	return 6;
}

bool mb_print_case_reason_shown(const mb_case_diff *cd)
{
	return cd->compared && cd->cmp.reason[0] && (cd->cmp.cls == MB_CMP_AMBIGUOUS || cd->cmp.why == MB_WHY_TAIL
		|| cd->cmp.why == MB_WHY_BETWEEN_RUNS);
}

void mb_print_case_order(size_t *order, const mb_diff *diff)
{
	size_t k = 0;

	if (diff->ordered) { /* sorted as asked (--sort) */
		for (size_t i = 0; i < diff->n_cases; i++)
			order[i] = i;
		return;
	}
	/* a stable bucket pass keeps receipt order inside each group */
	for (int rank = 0; rank <= 6; rank++)
		for (size_t i = 0; i < diff->n_cases; i++)
			if (mb_print_case_rank(&diff->cases[i]) == rank)
				order[k++] = i;
}

/* UTF-8 of the C1 controls U+0080..U+009F: 0xC2 then 0x80..0x9F. */
#define UTF8_C1_LEAD 0xC2
#define UTF8_C1_FIRST 0x80
#define UTF8_C1_LAST 0x9F
#define ASCII_DEL 0x7F
#define ASCII_SPACE 0x20

const char *mb_print_terminal_safe(char *out, size_t len, const char *s)
{
	size_t used = 0;

	if (len == 0)
		return out;
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		char piece[8];
		size_t n;
		if (*p < ASCII_SPACE || *p == ASCII_DEL) {
			n = (size_t)snprintf(piece, sizeof(piece), "\\x%02x", *p);
		} else if (*p == UTF8_C1_LEAD && p[1] >= UTF8_C1_FIRST && p[1] <= UTF8_C1_LAST) {
			n = (size_t)snprintf(piece, sizeof(piece), "\\u%04x", p[1]);
			p++;
		} else {
			piece[0] = (char)*p;
			n = 1;
		}
		if (used + n + 1 > len)
			break;
		memcpy(out + used, piece, n);
		used += n;
	}
	out[used] = '\0';
	return out;
}

/* Text from a receipt (or made from one: reasons quote device names,
 * ids, errors, rationales) inside a table cell or a line of prose: nothing
 * in it may end the cell or the line, open HTML, or make a link, an image,
 * code or emphasis. Every such byte is written as a Markdown escape or an
 * HTML entity, so the rendered text reads as the receipt has it:
 *   |  \  `  *      backslash-escaped (a pipe ends a cell, even in code);
 *   <  &           entities (HTML tags, autolinks, entity tricks);
 *   ](             the "(" escaped: no inline link or image can form;
 *   line breaks and other control characters: a space.
 * ">" is left alone: it only opens a quote at the start of a line, where
 * no receipt text is ever printed ("3 -> 2" stays readable). */
void mb_print_md_cell(FILE *out, const char *s)
{
	unsigned char ch, prev = 0;

	for (; s && *s; s++, prev = ch) {
		ch = (unsigned char)*s;
		if (ch == '|' || ch == '\\' || ch == '`' || ch == '*')
			fprintf(out, "\\%c", ch);
		else if (ch == '<')
			fputs("&lt;", out);
		else if (ch == '&')
			fputs("&amp;", out);
		else if (ch == '(' && prev == ']')
			fputs("\\(", out);
		else if (ch < ASCII_SPACE || ch == ASCII_DEL)
			fputc(' ', out);
		else
			fputc(ch, out);
	}
}

void mb_print_xml_escaped(FILE *out, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", out); break;
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '"': fputs("&quot;", out); break;
		case '\'': fputs("&#39;", out); break;
		default:
			/* control characters other than tab and newline are not valid XML */
			if ((unsigned char)*s < 0x20 && *s != '\t' && *s != '\n')
				fputc(' ', out);
			else
				fputc(*s, out);
		}
	}
}
