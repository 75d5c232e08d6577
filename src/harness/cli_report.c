/* diff, gate, verdict and report: load receipts and the policy, compute,
 * and hand the result to a printer. */
#include "harness/cli_report.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness/cli.h"
#include "receipts/atomic_write.h"
#include "receipts/diff.h"
#include "receipts/history.h"
#include "receipts/receipt_group.h"
#include "receipts/noise_floor.h"
#include "receipts/printer.h"
#include "receipts/receipt_io.h"
#include "receipts/report.h"
#include "receipts/select.h"
#include "receipts/text.h"
#include "receipts/verdict.h"

#define PATH_MAX_LEN 4096

/* The options of diff, gate, verdict and report, parsed by one loop; each
 * command's option strings say which of them it takes. */
typedef struct report_opts {
	const char *format;
	const char *policy_path;
	const char *baseline; /* gate */
	const char *baseline_dir; /* gate: the newest comparable receipt in it */
	const char *junit;    /* gate */
	const char *outdir;   /* report */
	bool force;
	bool always_test;     /* diff, gate: no identical-code shortcut */
	mb_select sel;        /* --filter, --exclude, --rows, --only-changed, --sort */
} report_opts;

typedef struct command {
	const char *name;
	const char *shortopts;
	const struct option *longopts;
	void (*usage)(FILE *f);
} command;

/* getopt_long hands back the letter of any long option in the table, and
 * verdict borrows diff's table, --force included: only the letters of the
 * command's own short options are its options. (strchr would also find the
 * terminator for 0 and the argument markers for ':'.) */
static bool takes_option(const command *cmd, int opt)
{
	return opt > 0 && opt != ':' && strchr(cmd->shortopts, opt);
}

/* Parse argv into `out` (optind is left at the first operand). Returns true
 * when the command ends here, with *out_status its exit code: 0 after
 * --help, a usage error for an unknown option. */
static bool parse_opts(report_opts *out, int *out_status, const command *cmd, int argc, char **argv)
{
	int opt;

	*out = (report_opts){.format = "table"};
	optind = 0;
	while ((opt = getopt_long(argc, argv, cmd->shortopts, cmd->longopts, NULL)) != -1) {
		if (!takes_option(cmd, opt)) {
			*out_status = mb_cli_usage_error(cmd->name, "unknown option");
			return true;
		}
		switch (opt) {
		case 'f': out->format = optarg; break;
		case 'p': out->policy_path = optarg; break;
		case 'F': out->force = true; break;
		case 'T': out->always_test = true; break;
		case 'b': out->baseline = optarg; break;
		case 'B': out->baseline_dir = optarg; break;
		case 'j': out->junit = optarg; break;
		case 'o': out->outdir = optarg; break;
		case 'I': out->sel.filter = optarg; break;
		case 'X': out->sel.exclude = optarg; break;
		case 'R': out->sel.rows = optarg; break;
		case 'C': out->sel.only_changed = true; break;
		case 'S': out->sel.sort = optarg; break;
		case 'h': cmd->usage(stdout); *out_status = 0; return true;
		}
	}
	return false;
}

/* The long options of a reporter's selection (select.h); their letters in
 * a command's short options ("I:X:R:CS:") say that it takes them. */
#define SELECT_LONG_OPTIONS \
	{"filter", required_argument, NULL, 'I'}, \
	{"exclude", required_argument, NULL, 'X'}, \
	{"rows", required_argument, NULL, 'R'}, \
	{"only-changed", no_argument, NULL, 'C'}, \
	{"sort", required_argument, NULL, 'S'}

/* What the selection options do, for a command's --help. */
static void select_usage(FILE *f, mb_select_of of, const char *changed)
{
	fprintf(f, "selection (a case id reads row/variant/dtype/mode/family/shape, as in run):\n"
		"  --filter REGEX   only cases whose id matches REGEX (POSIX extended)\n"
		"  --exclude REGEX  leave out cases whose id matches REGEX\n"
		"  --rows LIST      only these rows (comma-separated)\n"
		"  --only-changed   only %s\n"
		"  --sort KEY       %s\n"
		"The selection applies to every receipt before anything is computed; one that keeps no\n"
		"case, or names a row no receipt has, is exit 2.\n", changed,
		of == MB_SELECT_CASES ? "rank (default: drift and regressions first), id, or change (largest first)"
		: "receipt (default: the receipt's order), row (by name), action (a status the evidence\n"
		"                   does not support and demotions first, then drop, ambiguous, conditional,\n"
		"                   keep) or saved (most time saved first)");
}

/* Compile the selection; a usage error (64) when it cannot be. */
static int compile_selection(report_opts *o, const command *cmd, mb_select_of of)
{
	mb_error err;

	if (!mb_select_compile(&o->sel, of, &err))
		return 0;
	mb_select_free(&o->sel);
	return mb_cli_usage_error(cmd->name, "%s: %s", err.where, err.text);
}

/* 0, or the usage error's exit code when no printer has that name. */
static int find_printer(const mb_printer **out, const command *cmd, const char *format)
{
	*out = mb_printer_find(format);
	if (!*out)
		return mb_cli_usage_error(cmd->name, "unknown format \"%s\" (table, markdown, json, csv)", format);
	return 0;
}

/* Print a result into memory, then replace `path` atomically with it. */
typedef int (*render_fn)(FILE *out, const void *ctx, mb_error *err);

static int write_rendered(const char *path, render_fn render, const void *ctx, mb_error *err)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	int rc;

	if (!mem)
		return mb_error_set(err, MB_ENOMEM, path, "cannot buffer output: %s", strerror(errno));
	rc = render(mem, ctx, err);
	if (fclose(mem) && !rc)
		rc = mb_error_set(err, MB_EIO, path, "cannot buffer output");
	if (!rc)
		rc = mb_atomic_write(path, buf, len, err);
	free(buf);
	return rc;
}

/* The exit code of a file that failed to load: one that cannot be read
 * (missing, unreadable, too large) is bad input, 2, as in run and validate;
 * a receipt that reads but is not a valid receipt leaves the comparison
 * inconclusive, 3. */
static int load_exit(int rc)
{
	return rc == MB_EIO || rc == MB_ENOTFOUND ? MB_EXIT_INPUT : MB_GATE_INCONCLUSIVE;
}

/* The policy at `policy_path` (defaults when NULL), then the receipt at each
 * of `paths` into `receipts`, stopping at the first failure, with the exit
 * code it means in *out_exit (a bad policy is bad input: 2). `policy` must
 * hold defaults already and `receipts` NULLs, so that the caller frees both
 * the same way whether this failed or not. */
static int load_inputs(mb_policy *policy, json_t **receipts, const char *policy_path,
	const char *const *paths, size_t n, const mb_select *sel, int *out_exit, mb_error *err)
{
	int rc = policy_path ? mb_cli_policy_load(policy, policy_path, false, err) : 0;

	*out_exit = rc ? MB_EXIT_INPUT : 0;
	for (size_t i = 0; !rc && i < n; i++) {
		rc = mb_receipt_load(&receipts[i], paths[i], err);
		if (rc)
			*out_exit = load_exit(rc);
	}
	/* a selection that keeps nothing is bad input, as in run */
	if (!rc && (rc = mb_select_receipts(sel, receipts, paths, n, err)))
		*out_exit = MB_EXIT_INPUT;
	return rc;
}

/* The receipt files PATH... name: a folder's *.json and *.json.gz entries
 * (sorted by name), or the file itself. */
static int receipt_paths(char ***out, size_t *n_out, char **args, size_t n_args, mb_error *err)
{
	char **all = NULL;
	size_t n = 0;
	int rc = 0;

	for (size_t i = 0; !rc && i < n_args; i++) {
		struct stat st;
		char **found = NULL, **grown;
		size_t n_found = 0;

		if (stat(args[i], &st) == 0 && S_ISDIR(st.st_mode)) {
			rc = mb_receipt_dir_list(&found, &n_found, args[i], err);
			if (!rc && !n_found)
				rc = mb_error_set(err, MB_ENOTFOUND, args[i], "no *.json or *.json.gz receipt here");
		} else {
			found = malloc(sizeof(*found));
			if (found && (found[0] = strdup(args[i])))
				n_found = 1;
			else
				rc = mb_error_set(err, MB_ENOMEM, args[i], "no memory");
		}
		grown = rc ? NULL : realloc(all, (n + n_found + 1) * sizeof(*all));
		if (!rc && !grown)
			rc = mb_error_set(err, MB_ENOMEM, args[i], "no memory");
		if (!rc) {
			all = grown;
			memcpy(all + n, found, n_found * sizeof(*found));
			n += n_found;
			free(found);
		} else {
			mb_receipt_paths_free(found, n_found);
		}
	}
	if (rc) {
		mb_receipt_paths_free(all, n);
		all = NULL;
		n = 0;
	}
	*out = all;
	*n_out = n;
	return rc;
}

/* ---- diff and gate ---------------------------------------------------------- */

/* What a diff points into: both receipts and the policy live as long as it. */
typedef struct diff_run {
	mb_policy policy;
	json_t *pair[2]; /* base, head */
	mb_diff d;
} diff_run;

static void diff_run_init(diff_run *r)
{
	memset(r, 0, sizeof(*r));
	mb_policy_defaults(&r->policy);
}

static void diff_run_free(diff_run *r)
{
	mb_diff_free(&r->d);
	json_decref(r->pair[0]);
	json_decref(r->pair[1]);
	mb_policy_free(&r->policy);
}

/* Load, compare and print to standard output: the part diff and gate share.
 * Incomparable receipts are no error here; each command decides what they
 * mean for its exit code. */
static int diff_run_print(diff_run *r, const mb_printer *printer, const report_opts *o, const char *base_path,
	const char *head_path, int *out_exit, mb_error *err)
{
	const char *paths[2] = {base_path, head_path};
	int rc = load_inputs(&r->policy, r->pair, o->policy_path, paths, 2, &o->sel, out_exit, err);

	if (o->always_test)
		r->policy.identical_code_shortcut = false;
	if (!rc) {
		rc = mb_diff_receipts(&r->d, r->pair[0], r->pair[1], base_path, head_path, &r->policy, o->force, err);
		*out_exit = MB_GATE_INCONCLUSIVE;
	}
	if (!rc)
		mb_select_diff(&r->d, &o->sel);
	if (!rc)
		rc = printer->diff(stdout, &r->d, err);
	if (!rc)
		fflush(stdout);
	return rc;
}

/* After the printed diff, on standard error: why the receipts were refused. */
static void report_incomparable(const mb_diff *d, const char *hint)
{
	mb_error err;

	if (d->inconsistent)
		mb_error_set(&err, MB_EINVAL, d->head_name, "not compared with %s: inconsistent receipt: %s",
			d->base_name, d->reasons);
	else
		mb_error_set(&err, MB_EINVAL, d->head_name, "not comparable with %s: %s%s", d->base_name, d->reasons,
			hint);
	mb_cli_error(&err);
}

static void diff_usage(FILE *f)
{
	fputs("usage: megabench diff [--format table|markdown|json|csv] [--policy policy.toml] [--force]\n"
		"                      [--always-test] BASE.json HEAD.json\n"
		"Compare two receipts case by case: SAME, FASTER, SLOWER or AMBIGUOUS per case (a rank\n"
		"test and a Hodges-Lehmann shift on the raw samples, and the p90 of each side with an\n"
		"order-statistic interval: a change only in the tail is SLOWER or FASTER \"tail: p90 ...\");\n"
		"an AMBIGUOUS case says where its estimate points (\"AMBIGUOUS, faster\" or \", slower\").\n"
		"A change must exceed the policy's min_effect and noise_floor and, when both receipts\n"
		"carry repetitions, the spread between their repetitions' medians (a t test on them).\n"
		"Also shown: correctness (new wrong answers and cases still wrong), tolerance, launch,\n"
		"kernel, field (fields of the base case missing in the head) and status drift, and row\n"
		"verdicts, then the gate's exit code with its reason.\n"
		"Receipts from different devices, drivers, runtimes, backends, suites, timing modes or\n"
		"warm-up are refused (exit 3, naming the fields) unless --force, which marks every\n"
		"output FORCED. A receipt whose correctness.passed contradicts its own counts is refused\n"
		"(exit 3), --force or not.\n"
		"A row whose code is identical in both binaries (its kernel, reference and harness\n"
		"files and the shared ones, as each executable embedded them at build time; the\n"
		"compilers, flags and device) is SAME without the tests unless its time moved beyond\n"
		"identical_code_max_change and the noise floor (then \"machine or harness changed\") or a\n"
		"side did not converge (AMBIGUOUS). Receipts without binary provenance (schema version\n"
		"1: ids read from a checkout) get the tests on every row, and the output says so.\n"
		"--always-test, or the policy's [gate] identical_code_shortcut = false, runs the tests\n"
		"on every row.\n"
		"Receipts of the cpu backend are compared for correctness and structure only: their\n"
		"timings, taken on a shared CPU, measure nothing about GPU kernels, so each case is\n"
		"NOT JUDGED and the headline and the gate's reason say so.\n"
		"Cases are named by their ids (row/variant/dtype/mode/family/shape), which paste into\n"
		"run --filter.\n", f);
	select_usage(f, MB_SELECT_CASES, "the cases that changed (not SAME, or any drift) and the rows\n"
		"                   whose verdict changed; the counts still cover every case");
	fprintf(f, "\nthresholds (built-in defaults; a --policy file, schemas/policy.schema.json, sets any of them,\n"
		"also per row under [rows.NAME]):\n"
		"  alpha                      %-6g significance level of the rank test (p < alpha)\n"
		"  min_effect                 %-6g smallest relative change that counts (%g%%)\n"
		"  noise_ceiling              %-6g a side whose relative noise is above this is AMBIGUOUS\n"
		"  noise_floor                %-6g between-run noise a change must exceed too (megabench\n"
		"                                    noise-floor learns it from A/A receipts)\n"
		"  identical_code_max_change  %-6g under identical code, a larger change is \"machine or\n"
		"                                    harness changed\" (%g%%)\n"
		"  memory_max_growth          %-6g scratch memory (memory.scratch_bytes) growing by more than\n"
		"                                    this (%g%%, and at least 1 MiB) is a memory regression\n"
		"  lane_min_effect            %-6g a lane step's delta counts from this (verdict's run-level\n"
		"                                    evidence; lanes resolve 1%% of a step)\n"
		"exit codes: 0 compared; 2 a receipt or the policy cannot be read; 3 refused or an invalid\n"
		"receipt; 64 usage error.\n",
		MB_POLICY_DEFAULT_ALPHA, MB_POLICY_DEFAULT_MIN_EFFECT, 100.0 * MB_POLICY_DEFAULT_MIN_EFFECT,
		MB_POLICY_DEFAULT_NOISE_CEILING, MB_POLICY_DEFAULT_NOISE_FLOOR,
		MB_POLICY_DEFAULT_IDENTICAL_CODE_MAX_CHANGE, 100.0 * MB_POLICY_DEFAULT_IDENTICAL_CODE_MAX_CHANGE,
		MB_POLICY_DEFAULT_MEMORY_MAX_GROWTH, 100.0 * MB_POLICY_DEFAULT_MEMORY_MAX_GROWTH,
		MB_POLICY_DEFAULT_LANE_MIN_EFFECT);
}

static const struct option diff_long[] = {
	{"format", required_argument, NULL, 'f'},
	{"policy", required_argument, NULL, 'p'},
	{"force", no_argument, NULL, 'F'},
	{"always-test", no_argument, NULL, 'T'},
	{"help", no_argument, NULL, 'h'},
	SELECT_LONG_OPTIONS,
	{NULL, 0, NULL, 0},
};

static const command diff_cmd = {"diff", "f:p:FThI:X:R:CS:", diff_long, diff_usage};

int mb_cli_diff(int argc, char **argv)
{
	report_opts o;
	const mb_printer *printer;
	diff_run r;
	mb_error err;
	int status;

	if (parse_opts(&o, &status, &diff_cmd, argc, argv))
		return status;
	if (argc - optind != 2)
		return mb_cli_usage_error("diff", "expected two receipts, got %d", argc - optind);
	if ((status = find_printer(&printer, &diff_cmd, o.format)) || (status = compile_selection(&o, &diff_cmd,
		MB_SELECT_CASES)))
		return status;
	diff_run_init(&r);
	if (diff_run_print(&r, printer, &o, argv[optind], argv[optind + 1], &status, &err)) {
		mb_cli_error(&err);
	} else if (mb_diff_refused(&r.d)) {
		report_incomparable(&r.d, " (use --force to compare anyway)");
		status = MB_GATE_INCONCLUSIVE;
	} else {
		status = 0;
	}
	diff_run_free(&r);
	mb_select_free(&o.sel);
	return status;
}

static void gate_usage(FILE *f)
{
	fputs("usage: megabench gate (--baseline BASE.json | --baseline-dir DIR) [--policy policy.toml]\n"
		"                      [--junit out.xml] [--format table|markdown|json|csv] [--force] [--always-test]\n"
		"                      HEAD.json\n"
		"--baseline-dir DIR takes as the baseline the newest receipt in DIR (by commit time, then\n"
		"start time) of the head's device, backend and suite, other than the head's own run,\n"
		"that is a complete run with every case the head has, and says on standard error which\n"
		"it took; files in DIR that are not valid receipts, copies of a run counted already and\n"
		"newer receipts that cannot be the baseline (interrupted, empty, a smaller plan) are\n"
		"named and passed over; none that can be is exit 3.\n"
		"Exit 0 pass, 1 performance regression (median or tail, or more scratch memory than\n"
		"memory_max_growth allows), 2 drift: new wrong answers,\n"
		"cases still wrong, tolerance, launch, kernel, missing field, ok -> skipped, missing case\n"
		"or fallback, weight or variant kind changed (2 wins over 1), and also a receipt, policy\n"
		"or --junit path that cannot be read or written; 3 incomparable, inconsistent or invalid\n"
		"receipts, or inconclusive timing: not converged (under identical code too), timing\n"
		"source changed, all samples excluded, too noisy, an ambiguous slow-down, or a machine or\n"
		"harness change under identical code; cpu-backend receipts: correctness and structure\n"
		"only (see diff --help);\n"
		"4 a row's catalog status in the head claims more than the head's own evidence on its\n"
		"device shows (keep needs a keep verdict with lane evidence; conditional a win under its\n"
		"named condition; either needs the row's cases); a demotion never fails;\n"
		"64 usage error. The output names the reason of the exit code. An ambiguous speed-up\n"
		"does not fail. The policy's [gate] fail_on names the findings that fail;\n"
		"noise_floor (see megabench noise-floor) raises the effect a change must exceed.\n"
		"--always-test (or [gate] identical_code_shortcut = false) runs the statistics on rows\n"
		"whose code is identical in both binaries too (see diff --help, which lists the thresholds).\n"
		"--junit FILE writes JUnit XML (replaced atomically; its directory must exist): one\n"
		"testcase per case with time, failures for failing findings, skipped for cases not\n"
		"compared, and comparability as a property.\n", f);
	select_usage(f, MB_SELECT_CASES, "the cases that changed (not SAME, or any drift) and the rows\n"
		"                   whose verdict changed; the exit code is the selected cases'");
}

static const struct option gate_long[] = {
	{"baseline", required_argument, NULL, 'b'},
	{"baseline-dir", required_argument, NULL, 'B'},
	{"policy", required_argument, NULL, 'p'},
	{"junit", required_argument, NULL, 'j'},
	{"format", required_argument, NULL, 'f'},
	{"force", no_argument, NULL, 'F'},
	{"always-test", no_argument, NULL, 'T'},
	{"help", no_argument, NULL, 'h'},
	SELECT_LONG_OPTIONS,
	{NULL, 0, NULL, 0},
};

static const command gate_cmd = {"gate", "b:B:p:j:f:FThI:X:R:CS:", gate_long, gate_usage};

static int render_junit(FILE *out, const void *ctx, mb_error *err)
{
	return mb_print_junit(out, ctx, err);
}

/* Say on standard error that `path` was passed over, and why. */
static void passed_over(const char *who, const char *path, const char *why)
{
	mb_error e;

	mb_error_set(&e, MB_EINVAL, path, "%s", why);
	mb_error_prefix(&e, who);
	mb_cli_error(&e);
}

/* A file that names a run counted already: named, once. */
static void duplicate_run(const char *who, const char *path, const char *first, const json_t *receipt)
{
	char why[MB_ERROR_TEXT_MAX];

	snprintf(why, sizeof(why), "the same run as %s (run_id %s): counted once", first,
		mb_text_get(receipt, "run_id"));
	passed_over(who, path, why);
}

/* Why `r` cannot be the baseline of `head`: not a complete run, or it
 * lacks a case the head has (it does not cover the head's plan). False
 * when it can. */
static bool not_a_baseline(char *why, size_t len, const json_t *r, const json_t *head)
{
	json_t *ids = json_object(), *c;
	const char *first = NULL;
	size_t i, missing = 0, n_head = json_array_size(json_object_get(head, "cases"));

	if (!mb_receipt_complete(r, why, len)) {
		json_decref(ids);
		return true;
	}
	json_array_foreach(json_object_get(r, "cases"), i, c)
		if (!ids || json_object_set_new(ids, mb_text_get(c, "id"), json_true())) {
			json_decref(ids);
			snprintf(why, len, "no memory to index its cases");
			return true;
		}
	json_array_foreach(json_object_get(head, "cases"), i, c)
		if (!json_object_get(ids, mb_text_get(c, "id")) && missing++ == 0)
			first = mb_text_get(c, "id");
	json_decref(ids);
	if (missing)
		snprintf(why, len, "does not cover the head's plan: it lacks %zu of the head's %zu cases (first: %s)",
			missing, n_head, first);
	return missing > 0;
}

/* When a receipt of the head's group ran: what mb_receipt_later reads. */
static json_t *time_key(const json_t *r)
{
	return json_pack("{s:{s:I}, s:s}", "provenance", "commit_time",
		json_integer_value(json_object_get(json_object_get(r, "provenance"), "commit_time")), "started_at",
		mb_text_get(r, "started_at"));
}

/* A receipt of the head's group that is no baseline, named afterwards if
 * it is newer than the one taken. */
typedef struct rejected {
	const char *path;   /* borrowed from the folder's list */
	json_t *when;       /* time_key */
	char why[MB_ERROR_TEXT_MAX / 2];
} rejected;

/* The newest receipt in `dir` that can be the head's baseline into `out`
 * (the caller frees it): same device, backend and suite; not the head's
 * own run; a complete run (status complete, with cases) that has every
 * case the head has. Files that do not load are named on standard error
 * and passed over, as are copies of a run counted already and the head's
 * group's receipts that are no baseline and newer than the one taken (all
 * of them when none is). Returns 0, or an error with *out_exit set: 2 the
 * head or the folder cannot be read, 3 the head is invalid or no receipt
 * of the folder can be its baseline. */
static int pick_baseline(char **out, const char *dir, const char *head_path, int *out_exit, mb_error *err)
{
	static const char who[] = "--baseline-dir: passed over";
	json_t *head = NULL, *best = NULL;
	char **paths = NULL;
	rejected *rej = NULL;
	mb_run_set runs = {NULL};
	size_t n = 0, n_rej = 0, same_group = 0, n_ok = 0, best_i = 0;
	int rc = mb_receipt_load(&head, head_path, err);

	*out = NULL;
	*out_exit = load_exit(rc);
	if (!rc) {
		rc = mb_receipt_dir_list(&paths, &n, dir, err);
		*out_exit = MB_EXIT_INPUT;
	}
	if (!rc && ((rc = mb_run_set_init(&runs, err)) || !(rej = calloc(n + 1, sizeof(*rej)))))
		rc = mb_error_set(err, MB_ENOMEM, dir, "no memory");
	for (size_t i = 0; !rc && i < n; i++) {
		json_t *r = NULL;
		const char *first;
		mb_error skip;

		if (mb_receipt_load(&r, paths[i], &skip)) {
			mb_error_prefix(&skip, who);
			mb_cli_error(&skip);
			continue;
		}
		if (mb_receipt_same_group(r, head) && strcmp(mb_text_get(r, "run_id"), mb_text_get(head, "run_id"))) {
			same_group++;
			if ((rc = mb_run_set_add(&first, &runs, r, paths[i], err))) {
				json_decref(r);
				break;
			}
			if (first) {
				duplicate_run("--baseline-dir", paths[i], first, r);
			} else if (not_a_baseline(rej[n_rej].why, sizeof(rej[n_rej].why), r, head)) {
				rej[n_rej].path = paths[i];
				rej[n_rej++].when = time_key(r);
			} else {
				n_ok++;
				if (!best || mb_receipt_later(r, best)) {
					json_decref(best);
					best = json_incref(r);
					best_i = i;
				}
			}
		}
		json_decref(r);
	}
	/* a receipt newer than the one taken is named with why it was not */
	for (size_t k = 0; !rc && k < n_rej; k++)
		if (!best || mb_receipt_later(rej[k].when, best))
			passed_over(who, rej[k].path, rej[k].why);
	if (!rc && !best && !same_group) {
		*out_exit = MB_GATE_INCONCLUSIVE;
		rc = mb_error_set(err, MB_EINVAL, dir, "no receipt of device %s, backend %s and suite %s other than the "
			"head's own run among its %zu receipt files: nothing to gate against",
			mb_text_get(json_object_get(head, "device"), "name"), mb_text_get(head, "backend"),
			mb_text_get(json_object_get(head, "suite"), "name"), n);
	} else if (!rc && !best) {
		*out_exit = MB_GATE_INCONCLUSIVE;
		rc = mb_error_set(err, MB_EINVAL, dir, "none of its %zu receipts of device %s, backend %s and suite %s "
			"(other than the head's own run) can be the baseline: each is named above with why (a baseline is a "
			"complete run that has every one of the head's %zu cases); nothing to gate against", same_group,
			mb_text_get(json_object_get(head, "device"), "name"), mb_text_get(head, "backend"),
			mb_text_get(json_object_get(head, "suite"), "name"), json_array_size(json_object_get(head, "cases")));
	}
	if (!rc) {
		*out = strdup(paths[best_i]);
		if (!*out)
			rc = mb_error_set(err, MB_ENOMEM, dir, "no memory");
		else
			fprintf(stderr, "megabench: gate: baseline %s (the newest of %zu complete receipts in %s that cover "
				"the head's plan: %s)\n", *out, n_ok, dir, mb_text_revision(best, *out));
	}
	for (size_t k = 0; k < n_rej; k++)
		json_decref(rej[k].when);
	free(rej);
	mb_run_set_free(&runs);
	json_decref(best);
	json_decref(head);
	mb_receipt_paths_free(paths, n);
	return rc;
}

int mb_cli_gate(int argc, char **argv)
{
	report_opts o;
	const mb_printer *printer;
	diff_run r;
	mb_error err;
	char *picked = NULL;
	int rc, status;

	if (parse_opts(&o, &status, &gate_cmd, argc, argv))
		return status;
	if (!o.baseline == !o.baseline_dir)
		return mb_cli_usage_error("gate", "one of --baseline or --baseline-dir is required");
	if (argc - optind != 1)
		return mb_cli_usage_error("gate", "expected one head receipt, got %d", argc - optind);
	if ((status = find_printer(&printer, &gate_cmd, o.format)))
		return status;
	/* an unwritable --junit path is found before the comparison, and is bad
	 * input (2), never "incomparable" */
	if (o.junit && mb_atomic_write_probe(o.junit, 0, &err)) {
		mb_cli_error(&err);
		return MB_EXIT_INPUT;
	}
	if (o.baseline_dir) {
		if (pick_baseline(&picked, o.baseline_dir, argv[optind], &status, &err)) {
			mb_cli_error(&err);
			return status;
		}
		o.baseline = picked;
	}
	if ((status = compile_selection(&o, &gate_cmd, MB_SELECT_CASES))) {
		free(picked);
		return status;
	}
	diff_run_init(&r);
	rc = diff_run_print(&r, printer, &o, o.baseline, argv[optind], &status, &err);
	if (!rc && o.junit) {
		rc = write_rendered(o.junit, render_junit, &r.d, &err);
		status = MB_EXIT_INPUT;
	}
	if (rc) {
		mb_cli_error(&err);
	} else {
		status = mb_diff_gate_exit(&r.d);
		/* the exit code already says refused; say why */
		if (mb_diff_refused(&r.d))
			report_incomparable(&r.d, "");
	}
	diff_run_free(&r);
	free(picked);
	mb_select_free(&o.sel);
	return status;
}

/* ---- noise-floor ------------------------------------------------------------- */

static void noise_floor_usage(FILE *f)
{
	fprintf(f, "usage: megabench noise-floor [-o policy.toml] PATH...\n"
		"PATH is a receipt (.json or .json.gz) or a folder of them.\n"
		"Learn the between-run noise floor from A/A receipts: two or more runs of one revision\n"
		"(same commit and sources, build, device model, backend, suite, timing modes and\n"
		"warm-up; unlike receipts are refused, naming the fields). For every row, the relative\n"
		"difference max(r, 1/r) - 1 of the case medians between every pair of receipts; the\n"
		"row's floor is %.1f x the largest of them. Writes a policy TOML with\n"
		"[rows.NAME] noise_floor per row and a top-level noise_floor (the largest) to -o\n"
		"(replaced atomically) or standard output; give it to diff and gate with --policy.\n"
		"Exit 0; 2 when a receipt cannot be read or -o cannot be written; 3 when a receipt is\n"
		"invalid or the receipts are unlike; 64 usage error.\n",
		MB_NOISE_FLOOR_SAFETY);
}

static const struct option noise_floor_long[] = {
	{"output", required_argument, NULL, 'o'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

static const command noise_floor_cmd = {"noise-floor", "o:h", noise_floor_long, noise_floor_usage};

typedef struct noise_floor_ctx {
	const mb_noise_floor *nf;
	json_t *const *receipts;
	const char *const *names;
} noise_floor_ctx;

static int render_noise_floor(FILE *out, const void *ctx, mb_error *err)
{
	const noise_floor_ctx *c = ctx;

	return mb_noise_floor_print_toml(out, c->nf, c->receipts, c->names, err);
}

int mb_cli_noise_floor(int argc, char **argv)
{
	report_opts o;
	json_t **receipts = NULL;
	char **paths = NULL;
	mb_noise_floor nf;
	noise_floor_ctx ctx;
	mb_error err;
	size_t n = 0;
	int rc = 0, status;

	if (parse_opts(&o, &status, &noise_floor_cmd, argc, argv))
		return status;
	if (argc - optind < 1)
		return mb_cli_usage_error("noise-floor", "expected at least two receipts, got %d", argc - optind);
	memset(&nf, 0, sizeof(nf));
	status = MB_EXIT_INPUT;
	rc = receipt_paths(&paths, &n, argv + optind, (size_t)(argc - optind), &err);
	if (!rc && n < 2) {
		mb_receipt_paths_free(paths, n);
		return mb_cli_usage_error("noise-floor", "expected at least two receipts, got %zu", n);
	}
	if (!rc && !(receipts = calloc(n, sizeof(*receipts))))
		rc = mb_error_set(&err, MB_ENOMEM, "noise-floor", "no memory");
	ctx = (noise_floor_ctx){&nf, receipts, (const char *const *)paths};
	if (!rc)
		status = MB_GATE_INCONCLUSIVE;
	for (size_t i = 0; !rc && i < n; i++) {
		rc = mb_receipt_load(&receipts[i], ctx.names[i], &err);
		if (rc)
			status = load_exit(rc);
	}
	if (!rc)
		rc = mb_noise_floor_compute(&nf, receipts, ctx.names, n, &err);
	if (!rc && o.outdir) {
		rc = write_rendered(o.outdir, render_noise_floor, &ctx, &err);
		status = MB_EXIT_INPUT;
	} else if (!rc) {
		rc = render_noise_floor(stdout, &ctx, &err);
	}
	if (rc)
		mb_cli_error(&err);
	else if (o.outdir)
		fprintf(stderr, "megabench: noise floor of %zu rows from %zu receipts written to %s\n", nf.n_rows, n,
			o.outdir);
	mb_noise_floor_free(&nf);
	for (size_t i = 0; receipts && i < n; i++)
		json_decref(receipts[i]);
	free(receipts);
	mb_receipt_paths_free(paths, n);
	return rc ? status : 0;
}

/* ---- verdict ------------------------------------------------------------------ */

static void verdict_usage(FILE *f)
{
	fputs("usage: megabench verdict [--format table|markdown|json|csv] [--policy policy.toml] RECEIPT.json\n"
		"Per catalog row, shape by shape, the fused variant against its best alternative (the\n"
		"fastest correct fallback or vendor variant of the same work, named): keep, conditional,\n"
		"drop, ambiguous or not enough evidence. keep without run-level (lane) evidence reads\n"
		"\"keep (isolated evidence only)\", with lanes that cannot tell \"keep on isolated\n"
		"evidence; lanes inconclusive\"; conditional names where the kernel wins as a selector\n"
		"on dtype, mode, family and a shape axis (\"wins at T >= 16384, bf16\"), or what it\n"
		"saves: a row that trades memory (catalog: trades) and needs far less scratch memory\n"
		"than its best alternative is \"conditional (saves 3.94 GiB (98%) of scratch at 1.35x\n"
		"the time of materialized)\" rather than drop. Each row shows its catalog status, with\n"
		"'!' and what to do where the verdict disagrees. Speedups are against the best\n"
		"alternative (beside the bytes model's) and against the fallback; memory is scratch\n"
		"memory against the best alternative. Time saved is per training step where the suite's\n"
		"families set weight (calls per step), else per call; pairs that are not significantly\n"
		"faster save nothing. src/README.md (Verdicts) has the rules.\n"
		"Exit 0; 2 when the receipt or the policy cannot be read; 3 when the receipt is invalid;\n"
		"64 usage error.\n", f);
	select_usage(f, MB_SELECT_ROWS, "the rows whose verdict disagrees with their catalog status");
}

/* diff's long options: verdict's short options leave --force out */
static const command verdict_cmd = {"verdict", "f:p:hI:X:R:CS:", diff_long, verdict_usage};

int mb_cli_verdict(int argc, char **argv)
{
	report_opts o;
	const mb_printer *printer;
	const char *path;
	json_t *receipt = NULL;
	mb_verdict_set set;
	mb_policy policy;
	mb_error err;
	int status;

	if (parse_opts(&o, &status, &verdict_cmd, argc, argv))
		return status;
	if (argc - optind != 1)
		return mb_cli_usage_error("verdict", "expected one receipt, got %d", argc - optind);
	if ((status = find_printer(&printer, &verdict_cmd, o.format))
		|| (status = compile_selection(&o, &verdict_cmd, MB_SELECT_ROWS)))
		return status;
	path = argv[optind];
	memset(&set, 0, sizeof(set));
	mb_policy_defaults(&policy);
	if (load_inputs(&policy, &receipt, o.policy_path, &path, 1, &o.sel, &status, &err)
		|| (status = MB_GATE_INCONCLUSIVE, mb_verdict_compute(&set, receipt, &policy, &err))
		|| (mb_select_verdicts(&set, &o.sel), printer->verdicts(stdout, &set, receipt, path, &policy, &err))) {
		mb_cli_error(&err);
	} else {
		status = 0;
	}
	mb_verdict_set_free(&set);
	json_decref(receipt);
	mb_policy_free(&policy);
	mb_select_free(&o.sel);
	return status;
}

/* ---- report ------------------------------------------------------------------- */

static void report_usage(FILE *f)
{
	fputs("usage: megabench report [--policy policy.toml] [--always-test] -o DIR PATH...\n"
		"PATH is a receipt (.json or .json.gz) or a folder of them.\n"
		"Write DIR/index.html (self-contained: inline CSS and SVG, no scripts) and DIR/summary.md.\n"
		"Receipts are grouped by device, backend and suite (receipts of unlike groups are never\n"
		"compared, and none is left out); per group, from its newest receipt: the catalog\n"
		"verdict table, per row the median time per call by shape with its p10-p90 interval\n"
		"(fused, fallback and vendor as distinct series), box plots of the raw samples (the\n"
		"noise), and, with several receipts, the history across revisions (commit and date)\n"
		"with every revision that has a case significantly slower than the revision before it\n"
		"marked (a red line) and the first named (--always-test: as in diff, no identical-code\n"
		"shortcut); the lanes of every receipt of the group that has them.\n"
		"A run given twice (a copy, a symlink: the same run_id) is counted once and named.\n"
		"Exit 0; 2 when a receipt or the policy cannot be read or DIR cannot be written; 3 when\n"
		"a receipt is invalid; 64 usage error.\n", f);
	select_usage(f, MB_SELECT_ROWS, "the rows whose verdict disagrees with their catalog status or\n"
		"                   differs between the receipts of their group");
}

static const struct option report_long[] = {
	{"output", required_argument, NULL, 'o'},
	{"policy", required_argument, NULL, 'p'},
	{"always-test", no_argument, NULL, 'T'},
	{"format", required_argument, NULL, 'f'},
	{"help", no_argument, NULL, 'h'},
	SELECT_LONG_OPTIONS,
	{NULL, 0, NULL, 0},
};

static const command report_cmd = {"report", "o:p:ThI:X:R:CS:", report_long, report_usage};

/* Keep the first receipt of each run (by run_id), naming the others:
 * `receipts` and `names` are compacted in place (a dropped receipt is
 * released) and *n becomes the count kept. */
static int drop_duplicate_runs(json_t **receipts, const char **names, size_t *n, const char *who, mb_error *err)
{
	mb_run_set runs;
	size_t kept = 0;
	int rc = mb_run_set_init(&runs, err);

	for (size_t i = 0; !rc && i < *n; i++) {
		json_t *r = receipts[i];
		const char *first;

		if ((rc = mb_run_set_add(&first, &runs, r, names[i], err)))
			break;
		receipts[i] = NULL;
		if (first) {
			duplicate_run(who, names[i], first, r);
			json_decref(r);
			continue;
		}
		receipts[kept] = r;
		names[kept++] = names[i];
	}
	mb_run_set_free(&runs);
	if (!rc)
		*n = kept;
	return rc;
}

static int render_html(FILE *out, const void *report, mb_error *err)
{
	return mb_print_report_html(out, report, err);
}

static int render_md(FILE *out, const void *report, mb_error *err)
{
	return mb_print_report_markdown(out, report, err);
}

/* Render one page (of the report, of the history) into DIR/NAME. */
static int write_page(const char *outdir, const char *name, render_fn render, const void *ctx, mb_error *err)
{
	char path[PATH_MAX_LEN];

	snprintf(path, sizeof(path), "%s/%s", outdir, name);
	return write_rendered(path, render, ctx, err);
}

int mb_cli_report(int argc, char **argv)
{
	report_opts o;
	json_t **receipts = NULL;
	char **paths = NULL;
	const char **names = NULL;
	size_t n = 0, n_loaded = 0;
	mb_policy policy;
	mb_error err;
	mb_report model = {0};
	int rc, status;

	if (parse_opts(&o, &status, &report_cmd, argc, argv))
		return status;
	if (!o.outdir)
		return mb_cli_usage_error("report", "-o DIR is required");
	if (argc - optind < 1)
		return mb_cli_usage_error("report", "expected at least one receipt or folder of receipts");
	if ((status = compile_selection(&o, &report_cmd, MB_SELECT_ROWS)))
		return status;
	mb_policy_defaults(&policy);
	status = MB_EXIT_INPUT;
	rc = receipt_paths(&paths, &n_loaded, argv + optind, (size_t)(argc - optind), &err);
	n = n_loaded;
	if (!rc) {
		receipts = calloc(n + 1, sizeof(*receipts));
		names = calloc(n + 1, sizeof(*names));
		if (!receipts || !names)
			rc = mb_error_set(&err, MB_ENOMEM, "report", "no memory");
	}
	if (!rc) {
		memcpy(names, paths, n * sizeof(*names));
		rc = load_inputs(&policy, receipts, o.policy_path, names, n, &o.sel, &status, &err);
	}
	/* a run given twice (a copy, a symlink) is one revision */
	if (!rc)
		rc = drop_duplicate_runs(receipts, names, &n, "report", &err);
	if (o.always_test)
		policy.identical_code_shortcut = false;
	if (!rc) {
		status = MB_EXIT_INPUT;
		rc = mb_make_dirs(o.outdir, &err);
	}
	/* the receipts grouped, judged and diffed once; both pages render it */
	if (!rc) {
		status = MB_GATE_INCONCLUSIVE;
		rc = mb_report_build(&model, receipts, names, n, &policy, &o.sel, &err);
	}
	if (!rc) {
		rc = write_page(o.outdir, "index.html", render_html, &model, &err);
		if (!rc)
			rc = write_page(o.outdir, "summary.md", render_md, &model, &err);
		/* a page that could not be written is bad output (2); one that
		 * could not be made from the receipts is inconclusive input (3) */
		status = rc == MB_EIO ? MB_EXIT_INPUT : MB_GATE_INCONCLUSIVE;
	}
	if (rc)
		mb_cli_error(&err);
	else
		printf("wrote %s/index.html and %s/summary.md\n", o.outdir, o.outdir);
	mb_report_free(&model);
	for (size_t i = 0; receipts && i < n_loaded; i++)
		json_decref(receipts[i]);
	free(receipts);
	free(names);
	mb_receipt_paths_free(paths, n_loaded);
	mb_policy_free(&policy);
	mb_select_free(&o.sel);
	return rc ? status : 0;
}

/* ---- history ------------------------------------------------------------------ */

static void history_usage(FILE *f)
{
	fputs("usage: megabench history [--policy policy.toml] [--format markdown|json] [-o DIR] PATH...\n"
		"The nightly history: every receipt under PATH (a folder: its *.json and *.json.gz files;\n"
		"or a receipt file), grouped by device, backend and suite and ordered by commit time\n"
		"(then start time); one line per catalog row: its decision and catalog status first,\n"
		"its verdict in the newest nightly, and per nightly its verdict and lane delta, with\n"
		"commit dates and commits. The decision: demote when the row is drop (its fallback wins,\n"
		"or its win is under the minimum effect) in the last two consecutive nightlies of its\n"
		"group that ran it, naming both receipts (a row whose status is drop already reads\n"
		"\"dropped\", not demote); confirmed when it is keep in the last two or more; else\n"
		"watch (one losing nightly between wins is not flagged). Markdown (or with --format\n"
		"json, a document of kind megabench.history: schemas/history.schema.json) to standard\n"
		"output; with -o DIR, DIR/index.html (self-contained: per row a chart of the median of\n"
		"its fused kernel and of its best alternative per nightly, the demote and confirm\n"
		"streaks marked), DIR/summary.md and DIR/history.json.\n"
		"Receipts are read one at a time, and only what the history shows of each is kept. A\n"
		"file that is no readable receipt, a receipt that is not a complete run, and a copy of a\n"
		"run counted already (the same run_id) are named on standard error and passed over.\n"
		"Exit 0 when a receipt was read; 2 when the policy cannot be read, DIR cannot be\n"
		"written, no file could be read or the selection keeps nothing; 3 when none of the\n"
		"receipts read is a valid complete run; 64 usage error.\n", f);
	select_usage(f, MB_SELECT_ROWS, "the rows whose verdict differs between nightlies, disagrees with\n"
		"                   their status in the newest, or that are to be demoted");
}

static const command history_cmd = {"history", "o:p:f:hI:X:R:CS:", report_long, history_usage};

static int render_history_html(FILE *out, const void *ctx, mb_error *err)
{
	return mb_print_history_html(out, ctx, err);
}

static int render_history_md(FILE *out, const void *ctx, mb_error *err)
{
	return mb_print_history_markdown(out, ctx, err);
}

static int render_history_json(FILE *out, const void *ctx, mb_error *err)
{
	return mb_print_history_json(out, ctx, err);
}

/* Add each receipt at `paths` to the history, one at a time (a receipt is
 * freed as soon as the history has its digest). A file that does not load,
 * a copy of a run counted already and a run that is not complete are named
 * on standard error and passed over. Fails only when none is left: *out_exit
 * 3 if some file was an invalid or incomplete receipt, else 2. */
static int history_add_all(mb_history *h, char **paths, size_t n, const mb_select *sel, int *out_exit,
	mb_error *err)
{
	static const char who[] = "history: passed over";
	mb_run_set runs;
	mb_select_tally tally;
	size_t added = 0, invalid = 0;
	int rc = mb_run_set_init(&runs, err);

	memset(&tally, 0, sizeof(tally));

	*out_exit = MB_EXIT_INPUT;
	for (size_t i = 0; !rc && i < n; i++) {
		/* a receipt is named by its file name: the folder is the run's choice */
		const char *slash = strrchr(paths[i], '/'), *name = slash ? slash + 1 : paths[i], *first;
		char why[MB_ERROR_TEXT_MAX / 2];
		json_t *r = NULL;
		mb_error skip;
		int lrc = mb_receipt_load(&r, paths[i], &skip);

		if (lrc) {
			invalid += load_exit(lrc) == MB_GATE_INCONCLUSIVE;
			mb_error_prefix(&skip, who);
			mb_cli_error(&skip);
		} else if ((rc = mb_run_set_add(&first, &runs, r, paths[i], err))) {
			/* no memory: stop */
		} else if (first) {
			duplicate_run("history", paths[i], first, r);
		} else if (!mb_receipt_complete(r, why, sizeof(why))) {
			invalid++;
			passed_over(who, paths[i], why);
		} else if (mb_select_cases(sel, r, name, &tally), !(rc = mb_history_add(h, r, name, err))) {
			added++;
		} else {
			*out_exit = MB_GATE_INCONCLUSIVE;
		}
		json_decref(r);
	}
	mb_run_set_free(&runs);
	/* a selection that keeps nothing is bad input, as in run */
	if (!rc && added && (rc = mb_select_check(sel, &tally, err)))
		*out_exit = MB_EXIT_INPUT;
	if (!rc && !added) {
		*out_exit = invalid ? MB_GATE_INCONCLUSIVE : MB_EXIT_INPUT;
		rc = mb_error_set(err, invalid ? MB_EINVAL : MB_EIO, "history", "none of the %zu files is a receipt of a "
			"complete run that could be read (each is named above)", n);
	}
	return rc;
}

int mb_cli_history(int argc, char **argv)
{
	report_opts o;
	char **paths = NULL;
	size_t n = 0;
	mb_policy policy;
	mb_history h;
	mb_error err;
	bool json;
	int rc, status;

	if (parse_opts(&o, &status, &history_cmd, argc, argv))
		return status;
	if (argc - optind < 1)
		return mb_cli_usage_error("history", "expected a folder of receipts (or receipt files)");
	json = !strcmp(o.format, "json");
	if (!json && strcmp(o.format, "markdown") && strcmp(o.format, "table"))
		return mb_cli_usage_error("history", "unknown format \"%s\" (markdown, json)", o.format);
	if ((status = compile_selection(&o, &history_cmd, MB_SELECT_ROWS)))
		return status;
	mb_policy_defaults(&policy);
	mb_history_init(&h, &policy);
	status = MB_EXIT_INPUT;
	rc = receipt_paths(&paths, &n, argv + optind, (size_t)(argc - optind), &err);
	if (!rc && o.policy_path)
		rc = mb_cli_policy_load(&policy, o.policy_path, false, &err);
	if (!rc)
		rc = history_add_all(&h, paths, n, &o.sel, &status, &err);
	if (!rc) {
		status = MB_GATE_INCONCLUSIVE;
		rc = mb_history_finish(&h, &err);
	}
	if (!rc)
		mb_select_history(&h, &o.sel);
	if (!rc && o.outdir) {
		status = MB_EXIT_INPUT;
		rc = mb_make_dirs(o.outdir, &err);
		if (!rc)
			rc = write_page(o.outdir, "index.html", render_history_html, &h, &err);
		if (!rc)
			rc = write_page(o.outdir, "summary.md", render_history_md, &h, &err);
		if (!rc)
			rc = write_page(o.outdir, "history.json", render_history_json, &h, &err);
	} else if (!rc) {
		rc = (json ? render_history_json : render_history_md)(stdout, &h, &err);
	}
	if (rc)
		mb_cli_error(&err);
	else if (o.outdir)
		printf("wrote %s/index.html, %s/summary.md and %s/history.json\n", o.outdir, o.outdir, o.outdir);
	mb_history_free(&h);
	mb_receipt_paths_free(paths, n);
	mb_policy_free(&policy);
	mb_select_free(&o.sel);
	return rc ? status : 0;
}
