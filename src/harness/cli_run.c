/* megabench run SUITE: plan, run in isolated children, write the receipt. */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness/backend.h"
#include "harness/cli.h"
#include "harness/console.h"
#include "harness/repetitions.h"
#include "harness/runner.h"
#include "harness/suite.h"
#include "receipts/receipt_io.h"

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

static void run_usage(FILE *f)
{
	fprintf(f,
		"usage: megabench run SUITE.toml [options]\n"
		"\n"
		"Runs every case of the suite (row x variant x shape x dtype x mode), each row\n"
		"in a child process of its own, and writes a receipt (JSON, validated against\n"
		"schemas/receipt.schema.json, written atomically).\n"
		"\n"
		"options:\n"
		"  -o, --output FILE     receipt path (default receipts/SUITE-UTCTIME.json; '-' = stdout)\n"
		"  -b, --backend NAME    auto (default: cuda when a device is visible, else cpu), cuda, cpu\n"
		"      --rows LIST       only these rows (comma-separated)\n"
		"      --dtypes LIST     only these dtypes (fp32, fp16, bf16)\n"
		"      --variants LIST   only these variants (fused, fallback, reference, ...)\n"
		"      --modes LIST      only these timing modes (cold, hot, graph)\n"
		"      --seed N          input generator seed (default: the suite's)\n"
		"      --min-time S      override the suite's min_time_s\n"
		"      --timeout S       override the suite's timeout_s\n"
		"      --repetitions N   run the whole plan N times (2..64), each row in fresh child\n"
		"                        processes every time; each case keeps every pass's samples\n"
		"                        and the spread of their medians (between-run noise)\n"
		"      --dry-run         print the plan and exit without running\n"
		"  -q, --quiet           no progress lines (the summary table is still printed)\n"
		"  -h, --help            this text\n"
		"\n"
		"Provenance (git commit, dirty flag, kernel source blob ids) is read from the\n"
		"checkout holding the current directory, else the tree megabench was built\n"
		"from; MEGABENCH_SOURCE_DIR=DIR names the checkout instead.\n"
		"\n"
		"Progress goes to stderr, the summary table to stdout; its last line reads\n"
		"'N passed, N failed'.\n"
		"exit codes: 0 every case ok; 1 a case failed, crashed, timed out or ran out of\n"
		"memory (the receipt is written); 2 bad suite, unknown row or dtype, impossible\n"
		"shape, unwritable output; 64 usage error; 130 interrupted (a receipt marked\n"
		"interrupted is written with the cases that finished).\n");
}

typedef struct run_args {
	const char *suite_path;
	const char *output;
	const char *backend;
	mb_plan_filter filter;
	const char *seed;
	const char *min_time;
	const char *repetitions;
	const char *timeout;
	int dry_run, quiet;
} run_args;

static int parse_args(run_args *a, int argc, char **argv)
{
	enum { OPT_ROWS = 256, OPT_DTYPES, OPT_VARIANTS, OPT_MODES, OPT_SEED, OPT_MIN_TIME, OPT_TIMEOUT, OPT_DRY,
		OPT_REPETITIONS };
	static const struct option opts[] = {
		{"output", required_argument, NULL, 'o'},
		{"backend", required_argument, NULL, 'b'},
		{"rows", required_argument, NULL, OPT_ROWS},
		{"dtypes", required_argument, NULL, OPT_DTYPES},
		{"variants", required_argument, NULL, OPT_VARIANTS},
		{"modes", required_argument, NULL, OPT_MODES},
		{"seed", required_argument, NULL, OPT_SEED},
		{"min-time", required_argument, NULL, OPT_MIN_TIME},
		{"timeout", required_argument, NULL, OPT_TIMEOUT},
		{"dry-run", no_argument, NULL, OPT_DRY},
		{"repetitions", required_argument, NULL, OPT_REPETITIONS},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c;

	memset(a, 0, sizeof(*a));
	a->backend = "auto";
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:b:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'o': a->output = optarg; break;
		case 'b': a->backend = optarg; break;
		case OPT_ROWS: a->filter.rows = optarg; break;
		case OPT_DTYPES: a->filter.dtypes = optarg; break;
		case OPT_VARIANTS: a->filter.variants = optarg; break;
		case OPT_MODES: a->filter.modes = optarg; break;
		case OPT_SEED: a->seed = optarg; break;
		case OPT_MIN_TIME: a->min_time = optarg; break;
		case OPT_TIMEOUT: a->timeout = optarg; break;
		case OPT_DRY: a->dry_run = 1; break;
		case OPT_REPETITIONS: a->repetitions = optarg; break;
		case 'q': a->quiet = 1; break;
		case 'h': run_usage(stdout); return -1;
		default: return mb_cli_usage_error("run", "unknown or incomplete option");
		}
	}
	if (optind != argc - 1)
		return mb_cli_usage_error("run", optind >= argc ? "no suite file given" : "one suite file at a time");
	a->suite_path = argv[optind];
	if (strcmp(a->backend, "auto") && strcmp(a->backend, "cpu") && strcmp(a->backend, "cuda"))
		return mb_cli_usage_error("run", "--backend must be auto, cuda or cpu, got \"%s\"", a->backend);
	return 0;
}

/* Parse a number option: a finite value in [lo, hi]. */
static int number_arg(double *out, const char *opt, const char *text, double lo, double hi)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(text, &end);
	if (errno || end == text || *end || !(v >= lo && v <= hi))
		return mb_cli_usage_error("run", "%s expects a number in [%g, %g], got \"%s\"", opt, lo, hi, text);
	*out = v;
	return 0;
}

static int apply_overrides(mb_settings *s, const run_args *a)
{
	double v;

	if (a->seed) {
		if (number_arg(&v, "--seed", a->seed, 0, 9007199254740992.0) || v != (double)(uint64_t)v)
			return mb_cli_usage_error("run", "--seed expects a non-negative integer, got \"%s\"", a->seed);
		s->seed = (uint64_t)v;
	}
	if (a->min_time) {
		if (number_arg(&v, "--min-time", a->min_time, 0, 3600))
			return MB_EXIT_USAGE;
		s->min_time_s = v;
	}
	if (a->timeout) {
		if (number_arg(&v, "--timeout", a->timeout, 1e-3, 86400))
			return MB_EXIT_USAGE;
		s->timeout_s = v;
	}
	return 0;
}

/* --repetitions: 1 when absent. */
static int repetitions_arg(int *out, const run_args *a)
{
	double v = 1;

	if (a->repetitions && (number_arg(&v, "--repetitions", a->repetitions, 1, MB_MAX_REPETITIONS)
		|| v != (double)(int)v))
		return mb_cli_usage_error("run", "--repetitions expects a whole number from 1 to %d, got \"%s\"",
			MB_MAX_REPETITIONS, a->repetitions);
	*out = (int)v;
	return 0;
}

/* Fail before running when the receipt could not be written at the end. */
static int check_output(const char *path, mb_error *err)
{
	char *copy, *dir;
	struct stat st;
	int rc = 0;

	if (strcmp(path, "-") == 0)
		return 0;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return mb_error_set(err, MB_EIO, path, "is a directory, expected a receipt file path");
	copy = strdup(path);
	if (!copy)
		return mb_error_set(err, MB_ENOMEM, path, "out of memory");
	dir = dirname(copy);
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		rc = mb_error_set(err, MB_EIO, path, "cannot write the receipt: directory %s does not exist", dir);
	else if (access(dir, W_OK | X_OK) != 0)
		rc = mb_error_set(err, MB_EIO, path, "cannot write the receipt: directory %s is not writable (%s)",
			dir, strerror(errno));
	free(copy);
	return rc;
}

static void default_output(char *buf, size_t len, const mb_suite *suite)
{
	time_t now = time(NULL);
	struct tm tm;
	char stamp[32];

	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	mkdir("receipts", 0777); /* may exist; check_output reports real problems */
	snprintf(buf, len, "receipts/%s-%s.json", suite->name, stamp);
}

static const mb_backend *choose_backend(const char *requested, char *note, size_t note_len, mb_error *err)
{
	char why[256] = "";
	int devices;

	note[0] = '\0';
	if (strcmp(requested, "cpu") == 0)
		return mb_backend_cpu();
	devices = mb_backend_cuda_devices(why, sizeof(why));
	if (devices > 0 && mb_backend_cuda())
		return mb_backend_cuda();
	if (strcmp(requested, "cuda") == 0) {
		mb_error_set(err, MB_EUNSUPPORTED, "--backend cuda", "no usable CUDA device: %s", why[0] ? why : "none found");
		return NULL;
	}
	snprintf(note, note_len, "no CUDA device (%s): using the CPU backend, which times the fp32 C references only",
		why[0] ? why : "none found");
	return mb_backend_cpu();
}

static void print_plan(const mb_plan *plan)
{
	for (size_t i = 0; i < plan->n_cases; i++)
		printf("%s\n", plan->cases[i].id);
	printf("%zu cases\n", plan->n_cases);
}

static int exit_code_for(const json_t *receipt, int run_rc)
{
	const json_t *s = json_object_get(receipt, "summary");
	json_int_t bad = 0;

	if (run_rc == MB_EINTERRUPTED)
		return MB_EXIT_INTERRUPTED;
	if (run_rc)
		return MB_EXIT_FAILED;
	bad = json_integer_value(json_object_get(s, "failed")) + json_integer_value(json_object_get(s, "crashed"))
		+ json_integer_value(json_object_get(s, "timeout")) + json_integer_value(json_object_get(s, "oom"));
	return bad ? MB_EXIT_FAILED : MB_EXIT_OK;
}

int mb_cli_run(int argc, char **argv)
{
	run_args a;
	mb_suite *suite = NULL;
	mb_plan *plan = NULL;
	const mb_backend *backend;
	json_t *receipt = NULL;
	mb_console con;
	mb_error err;
	char out_path[4096], note[512];
	const char *notices[1];
	size_t n_notices = 0;
	struct sigaction sa = {0}, old_int, old_term;
	int code, rc, repetitions = 1;

	mb_error_clear(&err);
	code = parse_args(&a, argc, argv);
	if (code)
		return code < 0 ? MB_EXIT_OK : code;
	rc = mb_suite_load(&suite, a.suite_path, &err);
	if (rc) {
		mb_cli_error(&err);
		code = MB_EXIT_INPUT;
		goto cleanup;
	}
	code = apply_overrides(&suite->settings, &a);
	if (!code)
		code = repetitions_arg(&repetitions, &a);
	if (code)
		goto cleanup;
	/* a dry run only plans: it needs the backend built in, not a device */
	if (a.dry_run && strcmp(a.backend, "cuda") == 0 && mb_backend_cuda()) {
		backend = mb_backend_cuda();
		note[0] = '\0';
	} else {
		backend = choose_backend(a.backend, note, sizeof(note), &err);
	}
	if (!backend) {
		mb_cli_error(&err);
		code = MB_EXIT_INPUT;
		goto cleanup;
	}
	if (note[0])
		notices[n_notices++] = note;
	rc = mb_plan_build(&plan, suite, &a.filter, backend->name, &err);
	if (rc) {
		mb_cli_error(&err);
		code = MB_EXIT_INPUT;
		goto cleanup;
	}
	if (a.dry_run) {
		print_plan(plan);
		code = MB_EXIT_OK;
		goto cleanup;
	}
	if (a.output)
		snprintf(out_path, sizeof(out_path), "%s", a.output);
	else
		default_output(out_path, sizeof(out_path), suite);
	rc = check_output(out_path, &err);
	if (rc) {
		mb_cli_error(&err);
		code = MB_EXIT_INPUT;
		goto cleanup;
	}

	mb_console_init(&con, stderr, a.quiet);
	if (note[0])
		con.progress.notice(&con, note);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	{
		mb_run_options o = {
			.suite = suite, .plan = plan, .filter = &a.filter, .backend = backend,
			.backend_requested = a.backend, .progress = &con.progress, .argc = argc + 1,
			.argv = argv - 1, .interrupted = &interrupted, .notices = notices, .n_notices = n_notices,
			.source_dir = getenv("MEGABENCH_SOURCE_DIR"), .repetitions = repetitions,
		};
		rc = mb_run(&receipt, &o, &err);
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	if (!receipt) {
		mb_cli_error(&err);
		code = MB_EXIT_INPUT;
		goto cleanup;
	}
	if (rc && rc != MB_EINTERRUPTED)
		mb_cli_error(&err);
	code = exit_code_for(receipt, rc);
	{
		mb_error save_err;
		mb_error_clear(&save_err);
		if (mb_receipt_save(receipt, out_path, &save_err)) {
			mb_cli_error(&save_err);
			code = MB_EXIT_INPUT;
			goto cleanup;
		}
	}
	if (strcmp(out_path, "-") != 0) {
		mb_console_print_table(stdout, receipt);
		fprintf(stderr, "megabench: receipt written to %s%s\n", out_path,
			rc == MB_EINTERRUPTED ? " (interrupted: partial)" : "");
	}
cleanup:
	json_decref(receipt);
	mb_plan_free(plan);
	mb_suite_free(suite);
	return code;
}
