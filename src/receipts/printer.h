/* Every byte the reporter shows goes through a printer: one small interface,
 * one file per format (print_table.c, print_markdown.c, print_json.c,
 * print_csv.c), plus JUnit XML for the gate and the HTML report. Printers
 * write to a FILE the caller owns; they never decide anything, they only
 * show what diff and verdict computed.
 */
#ifndef MB_RECEIPTS_PRINTER_H
#define MB_RECEIPTS_PRINTER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "receipts/error.h"
#include "receipts/diff.h"
#include "receipts/policy.h"
#include "receipts/verdict.h"

struct mb_report;        /* report.h */
struct mb_report_group;

typedef struct mb_printer {
	const char *name;
	/* A diff, comparable or refused (then only the refusal is shown). */
	int (*diff)(FILE *out, const mb_diff *diff, mb_error *err);
	/* The verdicts of one receipt (`name` labels it). */
	int (*verdicts)(FILE *out, const mb_verdict_set *set, const json_t *receipt, const char *name,
		const mb_policy *policy, mb_error *err);
} mb_printer;

extern const mb_printer mb_printer_table;
extern const mb_printer mb_printer_markdown;
extern const mb_printer mb_printer_json;
extern const mb_printer mb_printer_csv;

/* The printer called `name` ("table", "markdown", "json", "csv"), or NULL. */
const mb_printer *mb_printer_find(const char *name);

/* JUnit XML: one testcase per case id, a failure for each failing finding. */
int mb_print_junit(FILE *out, const mb_diff *diff, mb_error *err);

/* The maintainer's report (report.h: built once by mb_report_build, which
 * groups, orders, judges and diffs the receipts) as an HTML page
 * (report_html.c) and as Markdown (print_report_md.c). */
int mb_print_report_html(FILE *out, const struct mb_report *report, mb_error *err);
int mb_print_report_markdown(FILE *out, const struct mb_report *report, mb_error *err);

/* The nightly history (history.h): Markdown and a self-contained HTML
 * page (print_history.c), and JSON of kind megabench.history
 * (print_history_json.c, schemas/history.schema.json). */
struct mb_history;
int mb_print_history_markdown(FILE *out, const struct mb_history *history, mb_error *err);
int mb_print_history_html(FILE *out, const struct mb_history *history, mb_error *err);
int mb_print_history_json(FILE *out, const struct mb_history *history, mb_error *err);

/* The formats a section shared by several printers comes in. */
typedef enum mb_print_format { MB_PRINT_TEXT, MB_PRINT_MARKDOWN, MB_PRINT_HTML } mb_print_format;

/* The lanes of a receipt, if any: each lane's step time and goodput per
 * configuration and mode, then its rows ranked by what their fused kernel
 * saves per step (print_lanes.c). Nothing when the receipt has no lanes. */
void mb_print_lanes(FILE *out, const json_t *receipt, mb_print_format fmt);
/* The lanes of every receipt of a report's group that ran them (or all but
 * the newest, whose lanes its verdicts print), newest first, each under its
 * revision: a lane run once is not hidden by a newer receipt without
 * lanes. HTML or Markdown (print_lanes.c). */
void mb_print_report_lanes(FILE *out, const struct mb_report_group *g, mb_print_format fmt, bool skip_newest);

/* The run's table of cases (print_run.c): row, family, variant, dtype,
 * mode, shape, status, median, noise, spread between --repetitions passes,
 * the fused case's speedup against its best alternative (its pair in
 * `set`, the receipt's verdicts; NULL: none shown), GB/s, fraction of the
 * named ceiling, correctness with the error over the tolerance, and
 * convergence; as a terminal table, Markdown or CSV. */
typedef enum mb_run_table_format { MB_RUN_TABLE_TEXT, MB_RUN_TABLE_MARKDOWN, MB_RUN_TABLE_CSV } mb_run_table_format;
void mb_print_run_table(FILE *out, const json_t *receipt, const mb_verdict_set *set, mb_run_table_format fmt);
/* A case's largest error as a fraction of its tolerance (over 1 fails):
 * correctness.error_over_tolerance, or for receipts before it the smaller
 * of max_abs / abs and max_rel / rel (*estimate set); NaN without one. */
double mb_print_error_over_tolerance(const json_t *kase, bool *estimate);
/* One CSV field (RFC 4180 quoting), then a comma, or a newline if `last`. */
void mb_print_csv_field(FILE *out, const char *s, bool last);
/* A receipt of cases across GPUs (megabench alltoall) as nccl-tests prints
 * its all-to-all: the GPUs, one line per size and variant (T, size, count,
 * type, variant, time, algbw, busbw, #wrong, busbw over NCCL's own), then
 * "# Out of bounds values" and each variant's "# Avg bus bandwidth"
 * (print_alltoall.c). */
void mb_print_alltoall(FILE *out, const json_t *receipt);

/* ---- helpers shared by the printers (print_common.c) ---- */

/* "+3.1%" from a ratio; "-" for NaN. */
void mb_print_change(char *buf, size_t len, double ratio);
/* A case's throughput over its ceiling with the ceiling named: "0.953 of
 * copy", "0.41 of GEMM", "0.88 of read+write" (the read and write
 * bandwidths weighted by the case's bytes); "-" without one. */
void mb_print_ceiling_text(char *buf, size_t len, const json_t *kase);
/* One line on what "model" and "of ceiling" mean, the same in every
 * printer that shows them. */
extern const char mb_print_model_note[];
extern const char mb_print_ceiling_note[];
/* The case's shape label with its mode: "family/A=1,B=2 (hot)". */
void mb_print_shape(char *buf, size_t len, const json_t *kase);
/* Word shown for a case of a diff: SLOWER, FASTER, SAME, AMBIGUOUS (with
 * ", faster" or ", slower" where its estimate points), NOT TIMED (a side
 * without timing, its status says why), MISSING, NEW; then
 * " (machine or harness changed)" when that decided it, and
 * ", wrong answer", ", still wrong", ", now skipped", ", fields missing"
 * when they apply. 128 bytes hold any of them. */
void mb_print_case_verdict(char *buf, size_t len, const mb_case_diff *cd);
#define MB_PRINT_VERDICT_MAX 128
/* Whether the table printers show the comparison's reason after that word:
 * for every AMBIGUOUS, a change decided by the tail ("tail: p90 ...") and a
 * SAME that only the between-run noise made so. */
bool mb_print_case_reason_shown(const mb_case_diff *cd);
/* Display order of a diff's cases: drift (wrong answers, still wrong, now
 * skipped, fields missing), regressions and machine changes first, then
 * missing, ambiguous, faster, new, same; or the diff's own order where a
 * selection sorted it (diff->ordered). `order` has n_cases entries. */
void mb_print_case_order(size_t *order, const mb_diff *diff);
/* A case diff's rank in that order (0 first). */
int mb_print_case_rank(const mb_case_diff *cd);
/* The case a diff row shows (head when present, else base). */
const json_t *mb_print_case_of(const mb_case_diff *cd);
/* `s` made safe for a terminal: control characters (C0, DEL and C1)
 * become \xNN / \uNNNN, so that text from a suite or a receipt cannot move
 * the cursor, recolour or retitle the window. Cut short to fit `len`;
 * returns `out`. The console and the error messages use it too. */
const char *mb_print_terminal_safe(char *out, size_t len, const char *s);
/* Text from a receipt inside a Markdown table cell or line, with every
 * byte that could end the cell or the line or make markup escaped. */
void mb_print_md_cell(FILE *out, const char *s);
/* Escape for HTML / XML text and attributes. */
void mb_print_xml_escaped(FILE *out, const char *s);

#endif
