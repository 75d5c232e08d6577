/* The reporter's commands: diff, gate, report and verdict. argv[0] is the
 * command's name; options are parsed with getopt_long. Each returns the
 * process exit code: results go to standard output, errors to standard
 * error as "megabench: <where>: <text>", --help prints usage and returns 0,
 * a usage error returns 64.
 *
 *   diff A.json B.json    0, or 3 when the receipts are incomparable
 *   gate --baseline A B   0 pass, 1 regression, 2 wrong answers or drift,
 *                         3 incomparable or inconclusive input, 4 a
 *                         catalog status the head's evidence does not show
 *   history DIR           0, 2 unreadable, 3 an invalid receipt
 *   verdict R.json        0, or 3 when the receipt cannot be read
 *   report R.json... -o D 0, or 3 when a receipt cannot be read
 */
#ifndef MB_HARNESS_CLI_REPORT_H
#define MB_HARNESS_CLI_REPORT_H

int mb_cli_diff(int argc, char **argv);
int mb_cli_gate(int argc, char **argv);
int mb_cli_report(int argc, char **argv);
int mb_cli_verdict(int argc, char **argv);
int mb_cli_history(int argc, char **argv);

#endif
