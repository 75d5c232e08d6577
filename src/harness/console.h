/* The run's console printer: a live progress line on a terminal, plain
 * lines otherwise (both on stderr), and the summary table at the end (on
 * stdout, so that results and chatter can be separated). */
#ifndef MB_HARNESS_CONSOLE_H
#define MB_HARNESS_CONSOLE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "harness/runner.h"
#include "receipts/printer.h"

typedef struct mb_console {
	FILE *out;
	bool tty;
	bool quiet;
	size_t n_cases, done;
	int64_t start_ns, case_start_ns;
	char current[256];
	int samples;          /* of the current case, as last reported */
	double rel_noise;
	bool line_open;       /* a live line is drawn without its newline */
	mb_progress progress;
} mb_console;

void mb_console_init(mb_console *con, FILE *out, bool quiet);

/* Clear the live line, if one is drawn, so that what is printed next (the
 * table, after Ctrl-C) starts on a line of its own. */
void mb_console_finish(mb_console *con);

/* The run table (receipts' mb_print_run_table: per case its family,
 * status, median, noise, spread between repetitions, speedup against the
 * best alternative, GB/s, fraction of the named ceiling, error over
 * tolerance, convergence); then findings, lanes, goodput, and last "N
 * passed, N failed". */
void mb_console_print_table(FILE *out, const json_t *receipt);
/* The same as Markdown (findings a list) or CSV (the cases alone). */
void mb_console_print_table_as(FILE *out, const json_t *receipt, mb_run_table_format fmt);


#endif
