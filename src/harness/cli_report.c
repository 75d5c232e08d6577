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
#include "receipts/printer.h"
#include "receipts/receipt_io.h"
#include "receipts/verdict.h"

#define PATH_MAX_LEN 4096
#define DIR_MODE 0755

typedef struct common_opts {
	const char *format;
	const char *policy_path;
	bool force;
} common_opts;

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

static int load_policy(mb_policy *out, const char *path, mb_error *err)
{
	if (!path) {
		mb_policy_defaults(out);
		return 0;
	}
	return mb_policy_load(out, path, err);
}

/* ---- diff and gate ---------------------------------------------------------- */

static int load_pair(json_t **base, json_t **head, const char *a, const char *b, mb_error *err)
{
	int rc = mb_receipt_load(base, a, err);

	if (!rc)
		rc = mb_receipt_load(head, b, err);
	return rc;
}

static void diff_usage(FILE *f)
{
	fputs("usage: megabench diff [--format table|markdown|json|csv] [--policy policy.toml] [--force]\n"
		"                      BASE.json HEAD.json\n"
		"Compare two receipts case by case: SAME, FASTER, SLOWER or AMBIGUOUS per case (rank\n"
		"test on raw samples), correctness, tolerance, launch and kernel drift, and row verdicts.\n"
		"Receipts from different devices, drivers, runtimes, backends, suites, timing modes or\n"
		"warm-up are refused (exit 3) unless --force, which marks every output FORCED.\n", f);
}

static const struct option diff_long[] = {
	{"format", required_argument, NULL, 'f'},
	{"policy", required_argument, NULL, 'p'},
	{"force", no_argument, NULL, 'F'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

int mb_cli_diff(int argc, char **argv)
{
	common_opts o = {"table", NULL, false};
	const mb_printer *printer;
	json_t *base = NULL, *head = NULL;
	mb_policy policy;
	mb_diff d;
	mb_error err;
	int opt, status = MB_GATE_INCONCLUSIVE;

	mb_policy_defaults(&policy);
	memset(&d, 0, sizeof(d));
	optind = 0;
	while ((opt = getopt_long(argc, argv, "f:p:Fh", diff_long, NULL)) != -1) {
		switch (opt) {
		case 'f': o.format = optarg; break;
		case 'p': o.policy_path = optarg; break;
		case 'F': o.force = true; break;
		case 'h': diff_usage(stdout); return 0;
		default: return mb_cli_usage_error("diff", "unknown option");
		}
	}
	if (argc - optind != 2)
		return mb_cli_usage_error("diff", "expected two receipts, got %d", argc - optind);
	printer = mb_printer_find(o.format);
	if (!printer)
		return mb_cli_usage_error("diff", "unknown format \"%s\" (table, markdown, json, csv)", o.format);
	if (load_policy(&policy, o.policy_path, &err) || load_pair(&base, &head, argv[optind], argv[optind + 1], &err)
		|| mb_diff_receipts(&d, base, head, argv[optind], argv[optind + 1], &policy, o.force, &err)) {
		mb_cli_error(&err);
		goto cleanup;
	}
	if (printer->diff(stdout, &d, &err)) {
		mb_cli_error(&err);
		goto cleanup;
	}
	fflush(stdout);
	if (!d.comparable && !d.forced) {
		mb_error_set(&err, MB_EINVAL, argv[optind + 1], "not comparable with %s: %s (use --force to compare anyway)",
			argv[optind], d.reasons);
		mb_cli_error(&err);
		goto cleanup;
	}
	status = 0;
cleanup:
	mb_diff_free(&d);
	json_decref(base);
	json_decref(head);
	mb_policy_free(&policy);
	return status;
}

static void gate_usage(FILE *f)
{
	fputs("usage: megabench gate --baseline BASE.json [--policy policy.toml] [--junit out.xml]\n"
		"                      [--format table|markdown|json|csv] [--force] HEAD.json\n"
		"Exit 0 pass, 1 performance regression, 2 wrong answers or tolerance, launch, kernel or\n"
		"case drift (2 wins over 1), 3 incomparable or inconclusive input, 64 usage error.\n"
		"The policy's [gate] fail_on names the findings that fail.\n", f);
}

static const struct option gate_long[] = {
	{"baseline", required_argument, NULL, 'b'},
	{"policy", required_argument, NULL, 'p'},
	{"junit", required_argument, NULL, 'j'},
	{"format", required_argument, NULL, 'f'},
	{"force", no_argument, NULL, 'F'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

static int render_junit(FILE *out, const void *ctx, mb_error *err)
{
	return mb_print_junit(out, ctx, err);
}

int mb_cli_gate(int argc, char **argv)
{
	common_opts o = {"table", NULL, false};
	const char *baseline = NULL, *junit = NULL;
	const mb_printer *printer;
	json_t *base = NULL, *head = NULL;
	mb_policy policy;
	mb_diff d;
	mb_error err;
	int opt, status = MB_GATE_INCONCLUSIVE;

	mb_policy_defaults(&policy);
	memset(&d, 0, sizeof(d));
	optind = 0;
	while ((opt = getopt_long(argc, argv, "b:p:j:f:Fh", gate_long, NULL)) != -1) {
		switch (opt) {
		case 'b': baseline = optarg; break;
		case 'p': o.policy_path = optarg; break;
		case 'j': junit = optarg; break;
		case 'f': o.format = optarg; break;
		case 'F': o.force = true; break;
		case 'h': gate_usage(stdout); return 0;
		default: return mb_cli_usage_error("gate", "unknown option");
		}
	}
	if (!baseline)
		return mb_cli_usage_error("gate", "--baseline is required");
	if (argc - optind != 1)
		return mb_cli_usage_error("gate", "expected one head receipt, got %d", argc - optind);
	printer = mb_printer_find(o.format);
	if (!printer)
		return mb_cli_usage_error("gate", "unknown format \"%s\" (table, markdown, json, csv)", o.format);
	if (load_policy(&policy, o.policy_path, &err) || load_pair(&base, &head, baseline, argv[optind], &err)
		|| mb_diff_receipts(&d, base, head, baseline, argv[optind], &policy, o.force, &err)) {
		mb_cli_error(&err);
		goto cleanup;
	}
	if (printer->diff(stdout, &d, &err)) {
		mb_cli_error(&err);
		goto cleanup;
	}
	fflush(stdout);
	if (junit && write_rendered(junit, render_junit, &d, &err)) {
		mb_cli_error(&err);
		goto cleanup;
	}
	status = mb_diff_gate_exit(&d);
	if (!d.comparable && !d.forced) {
		mb_error_set(&err, MB_EINVAL, argv[optind], "not comparable with %s: %s", baseline, d.reasons);
		mb_cli_error(&err);
	}
cleanup:
	mb_diff_free(&d);
	json_decref(base);
	json_decref(head);
	mb_policy_free(&policy);
	return status;
}

/* ---- verdict ------------------------------------------------------------------ */

static void verdict_usage(FILE *f)
{
	fputs("usage: megabench verdict [--format table|markdown|json|csv] [--policy policy.toml] RECEIPT.json\n"
		"Per catalog row, the fused variant against its fallback: keep, conditional, drop,\n"
		"ambiguous or not enough evidence, with the time saved per training step.\n", f);
}

int mb_cli_verdict(int argc, char **argv)
{
	common_opts o = {"table", NULL, false};
	const mb_printer *printer;
	json_t *receipt = NULL;
	mb_verdict_set set;
	mb_policy policy;
	mb_error err;
	int opt, status = MB_GATE_INCONCLUSIVE;

	memset(&set, 0, sizeof(set));
	mb_policy_defaults(&policy);
	optind = 0;
	while ((opt = getopt_long(argc, argv, "f:p:h", diff_long, NULL)) != -1) {
		switch (opt) {
		case 'f': o.format = optarg; break;
		case 'p': o.policy_path = optarg; break;
		case 'h': verdict_usage(stdout); return 0;
		default: return mb_cli_usage_error("verdict", "unknown option");
		}
	}
	if (argc - optind != 1)
		return mb_cli_usage_error("verdict", "expected one receipt, got %d", argc - optind);
	printer = mb_printer_find(o.format);
	if (!printer)
		return mb_cli_usage_error("verdict", "unknown format \"%s\" (table, markdown, json, csv)", o.format);
	if (load_policy(&policy, o.policy_path, &err) || mb_receipt_load(&receipt, argv[optind], &err)
		|| mb_verdict_compute(&set, receipt, &policy, &err)
		|| printer->verdicts(stdout, &set, receipt, argv[optind], &policy, &err)) {
		mb_cli_error(&err);
		goto cleanup;
	}
	status = 0;
cleanup:
	mb_verdict_set_free(&set);
	json_decref(receipt);
	mb_policy_free(&policy);
	return status;
}

/* ---- report ------------------------------------------------------------------- */

static void report_usage(FILE *f)
{
	fputs("usage: megabench report [--policy policy.toml] -o DIR RECEIPT.json...\n"
		"Write DIR/index.html (self-contained: inline CSS and SVG, no scripts) and DIR/summary.md:\n"
		"the catalog verdict table, time by shape per variant against the ceiling, and the\n"
		"history across revisions when several receipts of one suite are given.\n", f);
}

static const struct option report_long[] = {
	{"output", required_argument, NULL, 'o'},
	{"policy", required_argument, NULL, 'p'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

typedef struct report_ctx {
	json_t *const *receipts;
	const char *const *names;
	size_t n;
	const mb_policy *policy;
} report_ctx;

static int render_html(FILE *out, const void *ctx, mb_error *err)
{
	const report_ctx *r = ctx;

	return mb_print_report_html(out, r->receipts, r->names, r->n, r->policy, err);
}

static int render_md(FILE *out, const void *ctx, mb_error *err)
{
	const report_ctx *r = ctx;

	return mb_print_report_markdown(out, r->receipts, r->names, r->n, r->policy, err);
}

/* mkdir -p */
static int make_dirs(const char *path, mb_error *err)
{
	char buf[PATH_MAX_LEN];

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return mb_error_set(err, MB_EINVAL, path, "path too long");
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, DIR_MODE) && errno != EEXIST)
			return mb_error_set(err, MB_EIO, buf, "cannot create directory: %s", strerror(errno));
		*p = '/';
	}
	if (mkdir(buf, DIR_MODE) && errno != EEXIST)
		return mb_error_set(err, MB_EIO, buf, "cannot create directory: %s", strerror(errno));
	return 0;
}

int mb_cli_report(int argc, char **argv)
{
	const char *outdir = NULL, *policy_path = NULL;
	json_t **receipts = NULL;
	char path[PATH_MAX_LEN];
	size_t n = 0;
	mb_policy policy;
	mb_error err;
	report_ctx ctx;
	int opt, status = MB_GATE_INCONCLUSIVE;

	mb_policy_defaults(&policy);
	optind = 0;
	while ((opt = getopt_long(argc, argv, "o:p:h", report_long, NULL)) != -1) {
		switch (opt) {
		case 'o': outdir = optarg; break;
		case 'p': policy_path = optarg; break;
		case 'h': report_usage(stdout); return 0;
		default: return mb_cli_usage_error("report", "unknown option");
		}
	}
	if (!outdir)
		return mb_cli_usage_error("report", "-o DIR is required");
	if (argc - optind < 1)
		return mb_cli_usage_error("report", "expected at least one receipt");
	receipts = calloc((size_t)(argc - optind), sizeof(*receipts));
	if (!receipts) {
		mb_error_set(&err, MB_ENOMEM, "report", "no memory");
		mb_cli_error(&err);
		goto cleanup;
	}
	if (load_policy(&policy, policy_path, &err)) {
		mb_cli_error(&err);
		goto cleanup;
	}
	for (; n < (size_t)(argc - optind); n++) {
		if (mb_receipt_load(&receipts[n], argv[optind + (int)n], &err)) {
			mb_cli_error(&err);
			goto cleanup;
		}
	}
	ctx = (report_ctx){receipts, (const char *const *)(argv + optind), n, &policy};
	if (make_dirs(outdir, &err)) {
		mb_cli_error(&err);
		goto cleanup;
	}
	snprintf(path, sizeof(path), "%s/index.html", outdir);
	if (write_rendered(path, render_html, &ctx, &err)) {
		mb_cli_error(&err);
		goto cleanup;
	}
	snprintf(path, sizeof(path), "%s/summary.md", outdir);
	if (write_rendered(path, render_md, &ctx, &err)) {
		mb_cli_error(&err);
		goto cleanup;
	}
	printf("wrote %s/index.html and %s/summary.md\n", outdir, outdir);
	status = 0;
cleanup:
	for (size_t i = 0; receipts && i < n; i++)
		json_decref(receipts[i]);
	free(receipts);
	mb_policy_free(&policy);
	return status;
}
