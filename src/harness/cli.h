/* Subcommands of the megabench executable. Each takes argv with argv[0] the
 * subcommand name and returns the process exit code (see README.md). */
#ifndef MB_HARNESS_CLI_H
#define MB_HARNESS_CLI_H

#include <stdio.h>

#include "receipts/error.h"

/* Exit codes shared by every subcommand. */
enum {
	MB_EXIT_OK = 0,
	MB_EXIT_FAILED = 1,      /* run: a case failed; validate: invalid document */
	MB_EXIT_INPUT = 2,       /* bad or unreadable input, unwritable output */
	MB_EXIT_INCOMPARABLE = 3,
	MB_EXIT_USAGE = 64,
	MB_EXIT_INTERRUPTED = 130
};

int mb_cli_run(int argc, char **argv);
int mb_cli_validate(int argc, char **argv);
int mb_cli_catalog(int argc, char **argv);
int mb_cli_version(int argc, char **argv);
/* In cli_report.c with the other reporter commands. */
int mb_cli_noise_floor(int argc, char **argv);

/* "megabench: where: text" on stderr. */
void mb_cli_error(const mb_error *err);
/* "megabench <cmd>: message" plus a hint to --help, on stderr; returns
 * MB_EXIT_USAGE. */
int mb_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
