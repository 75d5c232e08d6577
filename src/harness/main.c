/* megabench: decides which GPU kernels earn their place in a training stack. */
#include <stdio.h>
#include <string.h>

#include "harness/cli.h"
#include "harness/cli_report.h"

typedef struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
} command;

static const command commands[] = {
	{"run", mb_cli_run, "run a suite and write a receipt"},
	{"alltoall", mb_cli_alltoall, "run moe_alltoall across GPUs with NCCL and write a receipt"},
	{"validate", mb_cli_validate, "check receipts and suites (or any JSON against a schema)"},
	{"catalog", mb_cli_catalog, "list the kernel catalog: rows, variants, tolerances"},
	{"diff", mb_cli_diff, "compare two receipts case by case"},
	{"gate", mb_cli_gate, "pass or block a change: exit code from a receipt pair"},
	{"verdict", mb_cli_verdict, "keep / conditional / drop per row within one receipt"},
	{"report", mb_cli_report, "write an HTML and Markdown report of receipts"},
	{"history", mb_cli_history, "nightly history: verdicts over time, rows to demote"},
	{"noise-floor", mb_cli_noise_floor, "learn the between-run noise floor from A/A receipts"},
	{"version", mb_cli_version, "print the version and the features built in"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: megabench <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n'megabench <command> --help' describes each command.\n"
		"exit codes: 0 ok, 1 a case failed, a document is invalid or (gate) a performance\n"
		"regression, 2 bad input (gate: also wrong answers or drift), 3 incomparable or\n"
		"inconclusive receipts, 4 (gate) a row's catalog status claims more than the head's\n"
		"evidence shows, 64 usage error, 130 interrupted.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return MB_EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return MB_EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0)
		return mb_cli_version(argc - 1, argv + 1);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].fn(argc - 1, argv + 1);
	}
	fprintf(stderr, "megabench: unknown command \"%s\"\n", argv[1]);
	usage(stderr);
	return MB_EXIT_USAGE;
}
