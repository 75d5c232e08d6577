/* Subcommands of the megabench executable. Each takes argv with argv[0] the
 * subcommand name and returns the process exit code (see README.md). */
#ifndef MB_HARNESS_CLI_H
#define MB_HARNESS_CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "receipts/error.h"
#include "receipts/policy.h"

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
/* In cli_alltoall.c: the moe_alltoall row across GPUs (NCCL, MPI). */
int mb_cli_alltoall(int argc, char **argv);
/* In cli_report.c with the other reporter commands. */
int mb_cli_noise_floor(int argc, char **argv);

/* "megabench: where: text" on stderr. */
void mb_cli_error(const mb_error *err);
/* "megabench <cmd>: message" plus a hint to --help, on stderr; returns
 * MB_EXIT_USAGE. */
int mb_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The first row of a parsed policy (`doc`) that this megabench's catalog
 * does not know, as an error about "PATH: rows.NAME"; 0 when every row is
 * known. A policy row the catalog lacks is a typo whose thresholds would
 * apply to nothing. */
int mb_cli_policy_rows_known(const json_t *doc, const char *path, mb_error *err);

/* Save a receipt as `run` does (receipts/atomic_write.h): validated,
 * written to a temporary and renamed, never over an existing file unless
 * `force`. A save that still fails writes the receipt to $TMPDIR (else
 * /tmp, else the current directory) and the error names where, and
 * whether a receipt already at `path` (`existed`) is untouched. A receipt
 * that breaks its schema is written nowhere. */
int mb_cli_save_receipt(const json_t *receipt, const char *path, bool force, bool existed, mb_error *err);

/* Load the policy at `path` over the defaults (mb_policy_load, the one
 * loader). An unknown row is an error when `strict`, else a warning on
 * stderr. */
int mb_cli_policy_load(mb_policy *out, const char *path, bool strict, mb_error *err);

#endif
