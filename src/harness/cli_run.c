/* megabench run SUITE: plan, run in isolated children, write the receipt.
 *
 * A run's results are worth minutes of a GPU, so losing them is the one
 * failure this file is built against: the output is proved writable, with
 * the temporary name the save will use, before the first case; signals
 * that arrive during the save wait until it is done; a save that still
 * fails writes the receipt to a fallback path and says where; and an
 * existing receipt is replaced only with --force.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness/backend.h"
#include "harness/cli.h"
#include "harness/console.h"
#include "harness/cuda_device.h"
#include "harness/repetitions.h"
#include "harness/runner.h"
#include "harness/shard.h"
#include "harness/suite.h"
#include "receipts/atomic_write.h"
#include "receipts/receipt_io.h"

#define PATH_BYTES 4096
#define NOTE_BYTES 512
#define NS_PER_MS 1000000L
/* The most GPUs one --devices list names. */
#define MAX_DEVICES 16
/* The highest device index --devices takes (CUDA numbers far fewer). */
#define MAX_DEVICE_INDEX 1023
#define DEFAULT_DIR "receipts"
/* Under --save-to DIR, where a receipt that is not a complete run goes
 * (DIR/incomplete/NAME): kept, but out of the folder gate --baseline-dir
 * and history read. */
#define INCOMPLETE_DIR "incomplete"
/* The most --costs options one run takes. */
#define MAX_COSTS 64
#define JSON_SUFFIX ".json"
#define JSON_GZ_SUFFIX ".json.gz"

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
		"selection (a case id reads row/variant/dtype/mode/family/shape):\n"
		"      --rows LIST       only these rows (comma-separated)\n"
		"      --dtypes LIST     only these dtypes (fp32, fp16, bf16)\n"
		"      --variants LIST   only these variants (fused, fallback, vendor; the cpu backend\n"
		"                        runs only the reference variant)\n"
		"      --modes LIST      time in these modes (cold, hot, graph), whatever the suite says\n"
		"      --filter REGEX    only cases whose id matches REGEX (POSIX extended), e.g.\n"
		"                        --filter 'rope_qk/fused/bf16/.*/T=32768'\n"
		"      --exclude REGEX   leave out cases whose id matches REGEX\n"
		"      --set KEY=VALUE   override a suite value (repeatable): timing.modes=hot,graph,\n"
		"                        timing.min_time_s=0.2, suite.seed=7, rows.rope_qk.dtypes=bf16,\n"
		"                        rows.rope_qk.families[0].axes.T=4096,8192; axes.T=4096 sets\n"
		"                        axis T in every family that has it, rows.ROW.axes.T=4096 in\n"
		"                        every family of ROW\n"
		"      --list            print the ids of the cases the plan would run, one per line,\n"
		"                        and exit\n"
		"      --dry-run         print the plan and its case count (with --gpus, what each GPU\n"
		"                        would run), and exit\n");
	fprintf(f,
		"\n"
		"where and how:\n"
		"  -o, --output FILE     receipt path (default receipts/SUITE-YYYYMMDDTHHMMSS.mmmZ-PID.json;\n"
		"                        '-' = stdout, the table then goes to stderr)\n"
		"      --force           replace FILE when it exists (without it, an existing receipt is\n"
		"                        never replaced)\n"
		"      --save-to DIR     store the receipt in DIR (every missing level made) as\n"
		"                        YYYYMMDDTHHMMSS.mmmZ-SUITE-PID.json: names sort by time, and an\n"
		"                        existing file is never replaced (not with -o or --force); a run\n"
		"                        that is not complete (interrupted, failed, no case) goes to\n"
		"                        DIR/incomplete/ instead, out of what gate --baseline-dir and\n"
		"                        history read\n"
		"      --gzip            write the receipt gzip-compressed: the default name and\n"
		"                        --save-to's end in .json.gz (-o NAME.gz compresses without it);\n"
		"                        every command reads .json.gz receipts\n"
		"  -b, --backend NAME    auto (default: cuda when a device is visible, else cpu), cuda, cpu\n"
		"      --devices LIST    GPU indices (default 0): the whole plan runs on each in turn,\n"
		"                        one receipt per device (FILE-gpuN.json when there are several);\n"
		"                        with --gpus, the GPUs the plan is spread over\n"
		"      --gpus N|all      spread the rows over N GPUs (all: every visible one, or every\n"
		"                        --devices GPU), a worker process per GPU, longest rows first to\n"
		"                        the least loaded; one receipt, each case naming its GPU. A GPU\n"
		"                        whose worker dies loses only its unfinished cases (crashed).\n"
		"                        A row that would end after the others is split over GPUs by\n"
		"                        shape group (or case), so that no GPU ends later than the mean\n"
		"                        load plus one case; --dry-run prints the deal for N GPUs\n"
		"      --costs FROM      with --gpus: deal by the costs a receipt measured (each case's\n"
		"                        wall_ns) instead of the bytes model; FROM is a receipt or a\n"
		"                        folder of them, repeatable, the newest receipt of a case wins.\n"
		"                        Without it, --save-to DIR's newest receipt of the suite does\n"
		"                        (the plan and a notice say which costs were used)\n"
		"      --seed N          input generator seed (default: the suite's)\n"
		"      --min-time S      override the suite's min_time_s\n"
		"      --timeout S       override the suite's timeout_s\n"
		"      --repetitions N   run the whole plan N times (2..64), each row in fresh child\n"
		"                        processes every time, each pass in a shuffled row order drawn\n"
		"                        from the seed; each case keeps every pass's samples and the\n"
		"                        spread of their medians (between-run noise)\n"
		"  -q, --quiet           no progress lines (the summary table is still printed)\n"
		"      --format FMT      the summary table as table (default), markdown or csv (the\n"
		"                        cases only: id, family, median, noise, spread, speedup against\n"
		"                        the best alternative, GB/s, fraction of ceiling, error over\n"
		"                        tolerance, ...)\n"
		"  -h, --help            this text\n");
	fprintf(f,
		"\n"
		"Provenance (git commit, dirty flag, the blob id of every source file) is what\n"
		"this megabench was built from, embedded by the build, and the blob id of the\n"
		"executable; run it from any directory. Inside a checkout of megabench whose\n"
		"sources differ from the binary's, a notice names the differing files and the\n"
		"receipt records them (provenance.checkout).\n"
		"\n"
		"The output is proved writable before the first case. Should the save still\n"
		"fail (a full disk), the receipt is written to $TMPDIR (else /tmp, else the\n"
		"current directory) and the error names that path. Ctrl-C or SIGTERM stops\n"
		"the run and writes what finished; a signal during the save waits for it.\n"
		"\n"
		"Progress goes to stderr, the summary table to stdout; its last line reads\n"
		"'N passed, N failed'.\n"
		"exit codes: 0 every case ok; 1 a case failed, crashed, timed out or ran out of\n"
		"memory (the receipt is written); 2 bad suite, unknown row or dtype, impossible\n"
		"shape, a filter that leaves no case, unwritable or existing output, no such\n"
		"device; 64 usage error; 130 interrupted (a receipt marked interrupted is written\n"
		"with the cases that finished).\n");
}

typedef struct run_args {
	const char *suite_path;
	const char *output;
	const char *backend;
	mb_plan_filter filter;
	mb_plan_match match;
	const char *modes;
	const char *devices;
	const char *gpus;
	const char *seed;
	const char *min_time;
	const char *repetitions;
	const char *timeout;
	const char *save_to;
	const char *costs[MAX_COSTS];
	size_t n_costs;
	mb_suite_set sets[MB_SUITE_MAX_SETS];
	size_t n_sets;
	char modes_set[PATH_BYTES], modes_label[PATH_BYTES];
	int dry_run, list, quiet, force, gzip;
	mb_run_table_format format;
} run_args;

/* A second --filter or --exclude would silently win over the first. */
static int once(const char **slot, const char *flag)
{
	if (*slot)
		return mb_cli_usage_error("run", "%s given twice; combine the expressions with |", flag);
	*slot = optarg;
	return 0;
}

/* The options that name each other or need parsing, once all are read. */
static int check_args(run_args *a)
{
	if (strcmp(a->backend, "auto") && strcmp(a->backend, "cpu") && strcmp(a->backend, "cuda"))
		return mb_cli_usage_error("run", "--backend must be auto, cuda or cpu, got \"%s\"", a->backend);
	if (a->gpus && strcmp(a->gpus, "all")) {
		char *end;
		long n;
		errno = 0;
		n = strtol(a->gpus, &end, 10);
		if (errno || end == a->gpus || *end || n < 1 || n > MB_SHARD_MAX_GPUS)
			return mb_cli_usage_error("run", "--gpus expects a number of GPUs from 1 to %d, or all, got \"%s\"",
				MB_SHARD_MAX_GPUS, a->gpus);
	}
	if (a->n_costs && !a->gpus)
		return mb_cli_usage_error("run", "--costs deals a run over GPUs: it needs --gpus");
	if (a->save_to && (a->output || a->force))
		return mb_cli_usage_error("run", "--save-to names the file itself and never replaces one: "
			"not with %s", a->output ? "-o" : "--force");
	/* compression follows the name: -o says it, --gzip names the file */
	if (a->gzip && a->output)
		return mb_cli_usage_error("run", "--gzip names the receipt NAME.json.gz; with -o, name it so yourself "
			"(-o %s.gz%s)", a->output, strcmp(a->output, "-") ? "" : ": standard output gets plain JSON");
	if (a->modes) {
		/* --modes chooses the modes to time: the suite's timing.modes
		 * replaced, so that --modes hot runs hot on a suite that says cold */
		mb_mode m;
		char copy[PATH_BYTES];
		snprintf(copy, sizeof(copy), "%s", a->modes);
		for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
			if (mb_mode_parse(t, &m))
				return mb_cli_usage_error("run", "--modes: unknown mode \"%s\"; known modes: cold, hot, graph",
					t);
		snprintf(a->modes_set, sizeof(a->modes_set), "timing.modes=%s", a->modes);
		snprintf(a->modes_label, sizeof(a->modes_label), "--modes %s", a->modes);
		a->sets[a->n_sets++] = (mb_suite_set){a->modes_set, a->modes_label};
	}
	return 0;
}

static int parse_args(run_args *a, int argc, char **argv)
{
	enum { OPT_ROWS = 256, OPT_DTYPES, OPT_VARIANTS, OPT_MODES, OPT_SEED, OPT_MIN_TIME, OPT_TIMEOUT, OPT_DRY,
		OPT_REPETITIONS, OPT_FILTER, OPT_EXCLUDE, OPT_LIST, OPT_SET, OPT_DEVICES, OPT_FORCE, OPT_SAVE_TO, OPT_GPUS,
		OPT_COSTS, OPT_GZIP, OPT_FORMAT };
	static const struct option opts[] = {
		{"output", required_argument, NULL, 'o'},
		{"backend", required_argument, NULL, 'b'},
		{"rows", required_argument, NULL, OPT_ROWS},
		{"dtypes", required_argument, NULL, OPT_DTYPES},
		{"variants", required_argument, NULL, OPT_VARIANTS},
		{"modes", required_argument, NULL, OPT_MODES},
		{"filter", required_argument, NULL, OPT_FILTER},
		{"exclude", required_argument, NULL, OPT_EXCLUDE},
		{"set", required_argument, NULL, OPT_SET},
		{"list", no_argument, NULL, OPT_LIST},
		{"devices", required_argument, NULL, OPT_DEVICES},
		{"gpus", required_argument, NULL, OPT_GPUS},
		{"costs", required_argument, NULL, OPT_COSTS},
		{"force", no_argument, NULL, OPT_FORCE},
		{"save-to", required_argument, NULL, OPT_SAVE_TO},
		{"gzip", no_argument, NULL, OPT_GZIP},
		{"format", required_argument, NULL, OPT_FORMAT},
		{"seed", required_argument, NULL, OPT_SEED},
		{"min-time", required_argument, NULL, OPT_MIN_TIME},
		{"timeout", required_argument, NULL, OPT_TIMEOUT},
		{"dry-run", no_argument, NULL, OPT_DRY},
		{"repetitions", required_argument, NULL, OPT_REPETITIONS},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c, rc = 0;

	memset(a, 0, sizeof(*a));
	a->backend = "auto";
	optind = 1;
	while (!rc && (c = getopt_long(argc, argv, "o:b:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'o': a->output = optarg; break;
		case 'b': a->backend = optarg; break;
		case OPT_ROWS: a->filter.rows = optarg; break;
		case OPT_DTYPES: a->filter.dtypes = optarg; break;
		case OPT_VARIANTS: a->filter.variants = optarg; break;
		case OPT_MODES: a->modes = optarg; break;
		case OPT_FILTER: rc = once(&a->match.filter, "--filter"); break;
		case OPT_EXCLUDE: rc = once(&a->match.exclude, "--exclude"); break;
		case OPT_SET:
			/* one slot stays free for --modes */
			if (a->n_sets + 1 >= MB_SUITE_MAX_SETS)
				return mb_cli_usage_error("run", "more than %d --set options", MB_SUITE_MAX_SETS - 1);
			a->sets[a->n_sets++] = (mb_suite_set){optarg, NULL};
			break;
		case OPT_LIST: a->list = 1; break;
		case OPT_DEVICES: a->devices = optarg; break;
		case OPT_GPUS: a->gpus = optarg; break;
		case OPT_COSTS:
			if (a->n_costs == MAX_COSTS)
				return mb_cli_usage_error("run", "more than %d --costs options", MAX_COSTS);
			a->costs[a->n_costs++] = optarg;
			break;
		case OPT_FORCE: a->force = 1; break;
		case OPT_SAVE_TO: a->save_to = optarg; break;
		case OPT_GZIP: a->gzip = 1; break;
		case OPT_FORMAT:
			if (!strcmp(optarg, "markdown"))
				a->format = MB_RUN_TABLE_MARKDOWN;
			else if (!strcmp(optarg, "csv"))
				a->format = MB_RUN_TABLE_CSV;
			else if (strcmp(optarg, "table"))
				return mb_cli_usage_error("run", "--format must be table, markdown or csv, got \"%s\"", optarg);
			break;
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
	if (rc)
		return rc;
	if (optind != argc - 1)
		return mb_cli_usage_error("run", optind >= argc ? "no suite file given" : "one suite file at a time");
	a->suite_path = argv[optind];
	return check_args(a);
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

/* --devices 0,2: device indices, each once. */
static int devices_arg(int *out, int *out_n, const char *text)
{
	char copy[PATH_BYTES];
	int n = 0;

	snprintf(copy, sizeof(copy), "%s", text);
	for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *end;
		long v;
		errno = 0;
		v = strtol(t, &end, 10);
		if (errno || end == t || *end || v < 0 || v > MAX_DEVICE_INDEX)
			return mb_cli_usage_error("run", "--devices expects GPU indices such as 0 or 0,1, got \"%s\"", text);
		for (int i = 0; i < n; i++)
			if (out[i] == (int)v)
				return mb_cli_usage_error("run", "--devices names device %ld twice", v);
		if (n == MAX_DEVICES)
			return mb_cli_usage_error("run", "--devices names more than %d devices", MAX_DEVICES);
		out[n++] = (int)v;
	}
	if (n == 0)
		return mb_cli_usage_error("run", "--devices expects GPU indices such as 0 or 0,1, got \"%s\"", text);
	*out_n = n;
	return 0;
}

/* receipts/SUITE-20261123T215525.123Z-4242.json: two runs started in the
 * same second (or millisecond, on two hosts sharing a directory) still get
 * names of their own. With --save-to DIR the time comes first,
 * DIR/20261123T215525.123Z-SUITE-4242.json, so that a folder of nightlies
 * of several suites lists in the order they ran. */
static void default_output(char *buf, size_t len, const char *save_to, bool gzip, const mb_suite *suite)
{
	struct timespec ts;
	struct tm tm;
	char stamp[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", &tm);
	if (save_to)
		snprintf(buf, len, "%s/%s.%03ldZ-%s-%ld%s", save_to, stamp, ts.tv_nsec / NS_PER_MS, suite->name,
			(long)getpid(), gzip ? JSON_GZ_SUFFIX : JSON_SUFFIX);
	else
		snprintf(buf, len, DEFAULT_DIR "/%s-%s.%03ldZ-%ld%s", suite->name, stamp, ts.tv_nsec / NS_PER_MS,
			(long)getpid(), gzip ? JSON_GZ_SUFFIX : JSON_SUFFIX);
}

/* With several devices each gets its own receipt: r.json -> r-gpu1.json. */
static void device_output(char *buf, size_t len, const char *path, int device, int n_devices)
{
	const char *slash = strrchr(path, '/');
	const char *dot = strrchr(path, '.');

	if (n_devices < 2 || strcmp(path, "-") == 0) {
		snprintf(buf, len, "%s", path);
		return;
	}
	if (!dot || (slash && dot < slash))
		dot = path + strlen(path);
	/* r.json.gz -> r-gpu1.json.gz */
	if (strlen(path) > strlen(JSON_GZ_SUFFIX) && !strcmp(path + strlen(path) - strlen(JSON_GZ_SUFFIX), JSON_GZ_SUFFIX)
		&& (!slash || path + strlen(path) - strlen(JSON_GZ_SUFFIX) > slash))
		dot = path + strlen(path) - strlen(JSON_GZ_SUFFIX);
	snprintf(buf, len, "%.*s-gpu%d%s", (int)(dot - path), path, device, dot);
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

/* The devices must exist before anything runs: a typo in --devices would
 * otherwise be a probe failure after the context load. */
static int check_devices(const mb_backend *backend, const int *devices, int n, mb_error *err)
{
	char why[256] = "";
	int count;

	if (strcmp(backend->name, "cpu") == 0)
		return mb_error_set(err, MB_EINVAL, "--devices", "the cpu backend has no devices to choose; "
			"--devices takes GPU indices with --backend cuda");
	count = mb_backend_cuda_devices(why, sizeof(why));
	for (int i = 0; i < n; i++)
		if (devices[i] >= count)
			return mb_error_set(err, MB_ENOTFOUND, "--devices", "no CUDA device %d: this host has %d%s%s",
				devices[i], count, why[0] ? "; " : "", why);
	return 0;
}

/* --gpus: the GPUs a sharded run spreads over, by index. */
typedef struct gpu_pool {
	int devices[MB_SHARD_MAX_GPUS];
	int n;
	bool simulated; /* MEGABENCH_FAKE_GPUS: cpu-backend workers stand in */
} gpu_pool;

/* How many GPUs there are to take: CUDA's count, or on the cpu backend the
 * test-only MEGABENCH_FAKE_GPUS. */
static int visible_gpus(int *out, bool *out_simulated, const mb_backend *backend, mb_error *err)
{
	const char *fake = getenv(MB_SHARD_FAKE_GPUS_ENV);
	char why[256] = "", *end;
	long n;

	*out_simulated = strcmp(backend->name, "cpu") == 0;
	if (!*out_simulated) {
		*out = mb_backend_cuda_devices(why, sizeof(why));
		return *out > 0 ? 0 : mb_error_set(err, MB_ENOTFOUND, "--gpus", "no CUDA device: %s", why);
	}
	if (!fake || !*fake)
		return mb_error_set(err, MB_EUNSUPPORTED, "--gpus", "the cpu backend has no GPUs to spread a run over ("
			MB_SHARD_FAKE_GPUS_ENV "=N, for tests only, simulates N)");
	errno = 0;
	n = strtol(fake, &end, 10);
	if (errno || end == fake || *end || n < 1 || n > MB_SHARD_MAX_GPUS)
		return mb_error_set(err, MB_EINVAL, MB_SHARD_FAKE_GPUS_ENV, "expected a number of GPUs from 1 to %d, got "
			"\"%s\"", MB_SHARD_MAX_GPUS, fake);
	*out = (int)n;
	return 0;
}

/* The --devices GPUs, or the first N (or all) of those visible. The count
 * against --devices was checked with the arguments. */
static int gpu_pool_of(gpu_pool *out, const run_args *a, const mb_backend *backend, const int *devices,
	int n_devices, mb_error *err)
{
	int visible = 0, rc;
	bool all = strcmp(a->gpus, "all") == 0;

	memset(out, 0, sizeof(*out));
	if (a->dry_run && !all && !a->devices) {
		/* a deal for N GPUs can be shown on any machine */
		out->n = atoi(a->gpus);
		for (int i = 0; i < out->n; i++)
			out->devices[i] = i;
		return 0;
	}
	if ((rc = visible_gpus(&visible, &out->simulated, backend, err)))
		return rc;
	if (a->devices) {
		for (int i = 0; i < n_devices; i++)
			if (devices[i] >= visible)
				return mb_error_set(err, MB_ENOTFOUND, "--devices", "no %s GPU %d: this host has %d",
					out->simulated ? "simulated" : "CUDA", devices[i], visible);
		memcpy(out->devices, devices, (size_t)n_devices * sizeof(*devices));
		out->n = n_devices;
		return 0;
	}
	out->n = all ? visible : atoi(a->gpus);
	if (out->n > visible)
		return mb_error_set(err, MB_ENOTFOUND, "--gpus", "%d GPUs asked for: this host has %d%s", out->n, visible,
			out->simulated ? " (simulated)" : "");
	if (out->n > MB_SHARD_MAX_GPUS)
		out->n = MB_SHARD_MAX_GPUS;
	for (int i = 0; i < out->n; i++)
		out->devices[i] = i;
	return 0;
}

/* --dry-run --gpus: the costs used, which rows each GPU would run, the
 * rows split over GPUs and the balance. */
static int print_shards(const mb_plan *plan, const mb_shard_costs *costs, const gpu_pool *pool, mb_error *err)
{
	char text[MB_SHARD_TEXT_BYTES], lanes[MB_SHARD_TEXT_BYTES];
	mb_shard_deal_info deal;
	mb_shard_row *rows = NULL;
	json_t *shard_plan = NULL, *v;
	size_t n = 0, i;
	int rc = mb_shard_assign(&rows, &n, &deal, plan, costs, pool->n, err);

	if (rc)
		return rc;
	json_array_foreach(costs->notes, i, v)
		printf("note: %s\n", json_string_value(v));
	mb_shard_costs_describe(text, sizeof(text), costs);
	printf("cost model: %s\n", text);
	for (int k = 0; k < pool->n; k++) {
		json_t *dealt = mb_shard_slot_rows(rows, n, plan, k);
		size_t cases = 0;

		for (size_t r = 0; r < n; r++)
			cases += rows[r].slot == k ? rows[r].end - rows[r].begin : 0;
		mb_shard_slot_text(text, sizeof(text), dealt);
		json_decref(dealt);
		mb_shard_slot_lanes_text(lanes, sizeof(lanes), costs, &deal, k);
		printf("gpu%d: about %.1f s: %s%s%s; %zu cases\n", pool->devices[k], deal.load_s[k], lanes,
			lanes[0] && text[0] ? ", " : "", text[0] || lanes[0] ? text : "nothing", cases);
	}
	shard_plan = mb_shard_plan_json(costs, &deal, rows, n, plan, pool->n);
	json_array_foreach(json_object_get(shard_plan, "split_rows"), i, v)
		printf("%s%s", i ? ", " : "split across GPUs: ", json_string_value(v));
	if (json_array_size(json_object_get(shard_plan, "split_rows")))
		printf("\n");
	mb_shard_deal_describe(text, sizeof(text), &deal, pool->n);
	printf("balance: %s\n", text);
	json_decref(shard_plan);
	free(rows);
	return rc;
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

/* Signals stay caught from the first line of `run` to the exit: a SIGINT
 * or SIGTERM between the last case and the end of the save must not kill
 * the process (and its results) the way the default action would. */
typedef struct signal_guard {
	sigset_t blocked, old_mask;
} signal_guard;

static void signals_catch(signal_guard *g)
{
	struct sigaction sa = {0};

	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigemptyset(&g->blocked);
	sigaddset(&g->blocked, SIGINT);
	sigaddset(&g->blocked, SIGTERM);
}

/* During the save a signal waits: the temporary is finished and renamed,
 * or removed, never left half written. */
static void signals_hold(signal_guard *g)
{
	sigprocmask(SIG_BLOCK, &g->blocked, &g->old_mask);
}

static void signals_release(signal_guard *g)
{
	sigprocmask(SIG_SETMASK, &g->old_mask, NULL);
}

/* Everything one device's pass needs. */
typedef struct run_ctx {
	const run_args *a;
	const mb_suite *suite;
	const mb_plan *plan;
	const mb_backend *backend;
	const char *const *notices;
	size_t n_notices;
	int argc;
	char **argv;
	int repetitions;
	signal_guard *signals;
	const gpu_pool *pool;   /* --gpus: spread over these; NULL: the current device */
	const mb_shard_costs *costs; /* --gpus: what each case costs */
} run_ctx;

/* A complete run with cases: what a nightly store may hold. */
static bool complete_run(const json_t *receipt)
{
	return !strcmp(json_string_value(json_object_get(receipt, "status")), "complete")
		&& json_array_size(json_object_get(receipt, "cases")) > 0;
}

/* --save-to DIR: a receipt that is not a complete run with cases
 * (interrupted, failed, no case) goes to DIR/incomplete/ under the same
 * name, so that gate --baseline-dir and history never take it for a
 * nightly; `path` is then that path. Nothing changes otherwise. */
static void keep_out_of_store(char *path, size_t len, const char *save_to, const json_t *receipt,
	const char *out_path)
{
	const char *name = strrchr(out_path, '/');
	char dir[PATH_BYTES];
	mb_error ignored;

	snprintf(path, len, "%s", out_path);
	if (!save_to || complete_run(receipt))
		return;
	snprintf(dir, sizeof(dir), "%s/" INCOMPLETE_DIR, save_to);
	/* a folder that cannot be made fails the save, which then falls back
	 * to $TMPDIR and says so */
	mb_make_dirs(dir, &ignored);
	/* a path too long for that stays in the store, where the readers
	 * pass over an incomplete receipt by its status anyway */
	if (snprintf(path, len, "%s/%s", dir, name ? name + 1 : out_path) >= (int)len)
		snprintf(path, len, "%s", out_path);
}

/* Run the plan on the current device, or spread over the pool's GPUs, and
 * save its receipt to `out_path` (already probed; under --save-to, an
 * incomplete run goes beside it, keep_out_of_store). Returns the exit
 * code. */
static int run_and_save(const run_ctx *r, const char *out_path, bool existed)
{
	char kept[PATH_BYTES];
	bool kept_out;
	json_t *receipt = NULL;
	mb_console con;
	mb_error err;
	FILE *table_out = strcmp(out_path, "-") == 0 ? stderr : stdout;
	int code, rc;

	mb_error_clear(&err);
	mb_console_init(&con, stderr, r->a->quiet);
	for (size_t i = 0; i < r->n_notices; i++)
		con.progress.notice(&con, r->notices[i]);
	{
		mb_run_options o = {
			.suite = r->suite, .plan = r->plan, .filter = &r->a->filter, .backend = r->backend,
			.backend_requested = r->a->backend, .progress = &con.progress, .argc = r->argc,
			.argv = r->argv, .interrupted = &interrupted, .notices = r->notices, .n_notices = r->n_notices,
			.repetitions = r->repetitions,
		};
		if (r->pool) {
			mb_shard_options so = {&o, r->pool->devices, r->pool->n, r->pool->simulated, r->costs};
			rc = mb_shard_run(&receipt, &so, &err);
		} else {
			rc = mb_run(&receipt, &o, &err);
		}
	}
	mb_console_finish(&con);
	if (!receipt) {
		mb_cli_error(&err);
		return MB_EXIT_INPUT;
	}
	if (rc && rc != MB_EINTERRUPTED)
		mb_cli_error(&err);
	code = exit_code_for(receipt, rc);
	mb_error_clear(&err);
	keep_out_of_store(kept, sizeof(kept), r->a->save_to, receipt, out_path);
	kept_out = strcmp(kept, out_path) != 0;
	out_path = kept;
	signals_hold(r->signals);
	rc = mb_cli_save_receipt(receipt, out_path, r->a->force, existed, &err);
	signals_release(r->signals);
	if (rc) {
		mb_console_print_table_as(table_out, receipt, r->a->format);
		mb_cli_error(&err);
		json_decref(receipt);
		return MB_EXIT_INPUT;
	}
	mb_console_print_table_as(table_out, receipt, r->a->format);
	fflush(table_out);
	if (strcmp(out_path, "-") != 0)
		fprintf(stderr, "megabench: receipt written to %s%s%s%s%s\n", out_path,
			existed ? " (replaced the previous file, as --force asked)" : "",
			code == MB_EXIT_INTERRUPTED ? " (interrupted: partial)" : "",
			kept_out ? "; not a complete run, so kept out of " : "", kept_out ? r->a->save_to : "");
	json_decref(receipt);
	return code;
}

static void print_plan(const mb_plan *plan)
{
	for (size_t i = 0; i < plan->n_cases; i++)
		printf("%s\n", plan->cases[i].id);
}

/* argv as the user typed it: getopt_long moves operands behind the
 * options, and the receipt's `command` should read like the command. */
static char **copy_argv(int argc, char **argv)
{
	char **copy = calloc((size_t)argc + 2, sizeof(*copy));

	if (!copy)
		return NULL;
	/* main hands us argv + 1: argv[-1] is the program as it was invoked */
	copy[0] = argv[-1];
	for (int i = 0; i < argc; i++)
		copy[i + 1] = argv[i];
	return copy;
}

/* What a run has before its first case: the suite with the options
 * applied, the backend, the plan and the notices its receipts carry. */
typedef struct run_setup {
	mb_suite *suite;
	mb_plan *plan;
	const mb_backend *backend;
	const char *notices[3];
	size_t n_notices;
	int repetitions;
	char backend_note[NOTE_BYTES], ignored_note[2 * NOTE_BYTES];
} run_setup;

/* The suite, the backend and the plan; an exit code (0 to go on). */
static int setup_plan(run_setup *s, const run_args *a, mb_error *err)
{
	int code;

	if (mb_suite_load_with(&s->suite, a->suite_path, a->sets, a->n_sets, err)) {
		mb_cli_error(err);
		return MB_EXIT_INPUT;
	}
	code = apply_overrides(&s->suite->settings, a);
	if (!code)
		code = repetitions_arg(&s->repetitions, a);
	if (code)
		return code;
	/* planning needs the backend built in, not a device */
	s->backend_note[0] = '\0';
	if ((a->dry_run || a->list) && strcmp(a->backend, "cuda") == 0 && mb_backend_cuda())
		s->backend = mb_backend_cuda();
	else
		s->backend = choose_backend(a->backend, s->backend_note, sizeof(s->backend_note), err);
	if (!s->backend) {
		mb_cli_error(err);
		return MB_EXIT_INPUT;
	}
	if (s->backend_note[0])
		s->notices[s->n_notices++] = s->backend_note;
	if (mb_plan_build_ex(&s->plan, s->suite, &a->filter, &a->match, s->backend->name, err)) {
		mb_cli_error(err);
		return MB_EXIT_INPUT;
	}
	/* fitting the host is this run's concern: the cases that do not fit
	 * are named, and the rest runs */
	if (s->plan->host_note[0]) {
		s->notices[s->n_notices++] = s->plan->host_note;
		if (a->list || a->dry_run)
			fprintf(stderr, "megabench: notice: %s\n", s->plan->host_note);
	}
	return 0;
}

/* The suite's variants this backend does not run, as a notice. */
static void note_ignored_variants(run_setup *s, const run_args *a)
{
	char ignored[NOTE_BYTES];
	bool several;

	mb_plan_ignored_variants(ignored, sizeof(ignored), s->suite, &a->filter, s->backend->name);
	if (!ignored[0])
		return;
	several = strchr(ignored, ',') != NULL;
	snprintf(s->ignored_note, sizeof(s->ignored_note), "variant%s %s do%s not apply on the %s backend (it runs "
		"%s): the receipt's settings.variants records only the variants that ran", several ? "s" : "", ignored,
		several ? "" : "es", s->backend->name,
		strcmp(s->backend->name, "cpu") == 0 ? "the reference variant only" : "the variants built for it");
	s->notices[s->n_notices++] = s->ignored_note;
}

/* Where the receipts go: one for a --gpus run, else one per device. */
typedef struct run_outputs {
	char path[MAX_DEVICES][PATH_BYTES];
	bool existed[MAX_DEVICES];
	int n;
} run_outputs;

/* Every receipt's path, checked writable (and not taken, unless --force)
 * before any case runs; an exit code (0 to go on). */
static int prepare_outputs(run_outputs *o, const run_args *a, const mb_suite *suite, const int *devices,
	int n_devices, mb_error *err)
{
	char base_path[PATH_BYTES];

	/* every missing level of the folder is made; one that cannot be is
	 * named with the system's reason (read-only, permission, a file) */
	if (!a->output && mb_make_dirs(a->save_to ? a->save_to : DEFAULT_DIR, err)) {
		mb_cli_error(err);
		return MB_EXIT_INPUT;
	}
	if (a->output)
		snprintf(base_path, sizeof(base_path), "%s", a->output);
	else
		default_output(base_path, sizeof(base_path), a->save_to, a->gzip, suite);
	o->n = a->gpus ? 1 : n_devices;
	for (int d = 0; d < o->n; d++) {
		struct stat st;

		device_output(o->path[d], sizeof(o->path[d]), base_path, devices[d], o->n);
		o->existed[d] = strcmp(o->path[d], "-") != 0 && stat(o->path[d], &st) == 0 && S_ISREG(st.st_mode);
		if (mb_atomic_write_probe(o->path[d], a->force ? 0 : MB_ATOMIC_NO_REPLACE, err)) {
			if (o->existed[d] && a->save_to)
				snprintf(err->text, sizeof(err->text), "a receipt is already there (another run of the same "
					"millisecond and process id?); --save-to never replaces one: run again for a new name");
			else if (o->existed[d] && !a->force)
				snprintf(err->text, sizeof(err->text), "a receipt is already there; --force replaces it, "
					"or name another file with -o");
			mb_cli_error(err);
			return MB_EXIT_INPUT;
		}
	}
	return 0;
}

int mb_cli_run(int argc, char **argv)
{
	run_args a;
	run_setup s = {.repetitions = 1};
	run_outputs outputs = {0};
	signal_guard signals;
	mb_error err;
	char **command = copy_argv(argc, argv);
	int devices[MAX_DEVICES] = {0}, n_devices = 1;
	gpu_pool pool;
	mb_shard_costs costs = {0};
	int code;

	mb_error_clear(&err);
	signals_catch(&signals);
	/* past a file size limit a write should fail with EFBIG, which the save
	 * answers with its fallback, rather than end the process */
	signal(SIGXFSZ, SIG_IGN);
	if (!command) {
		fprintf(stderr, "megabench: out of memory\n");
		code = MB_EXIT_INPUT;
		goto cleanup;
	}
	code = parse_args(&a, argc, argv);
	if (code) {
		code = code < 0 ? MB_EXIT_OK : code;
		goto cleanup;
	}
	if (a.devices && (code = devices_arg(devices, &n_devices, a.devices)))
		goto cleanup;
	if (a.gpus && a.devices && strcmp(a.gpus, "all") && atoi(a.gpus) != n_devices) {
		code = mb_cli_usage_error("run", "--gpus %s with --devices %s (%d GPU%s): --gpus all, or --gpus %d, "
			"spreads the run over those", a.gpus, a.devices, n_devices, n_devices == 1 ? "" : "s", n_devices);
		goto cleanup;
	}
	if ((code = setup_plan(&s, &a, &err)))
		goto cleanup;
	if (a.list) {
		print_plan(s.plan);
		goto cleanup;
	}
	/* which GPUs, and what each case costs for the deal (shard.h): before
	 * the dry run, which shows what each would run */
	if ((a.gpus ? gpu_pool_of(&pool, &a, s.backend, devices, n_devices, &err)
			: !a.dry_run && a.devices && check_devices(s.backend, devices, n_devices, &err))
		|| (a.gpus && mb_shard_costs_load(&costs, s.plan, s.suite, s.backend->name, a.costs, a.n_costs, a.save_to,
			&err))) {
		mb_cli_error(&err);
		code = MB_EXIT_INPUT;
		goto cleanup;
	}
	if (a.dry_run) {
		print_plan(s.plan);
		if (a.gpus && print_shards(s.plan, &costs, &pool, &err)) {
			mb_cli_error(&err);
			code = MB_EXIT_INPUT;
			goto cleanup;
		}
		printf("%zu cases\n", s.plan->n_cases);
		goto cleanup;
	}
	note_ignored_variants(&s, &a);
	if ((code = prepare_outputs(&outputs, &a, s.suite, devices, n_devices, &err)))
		goto cleanup;
	if (interrupted) {
		fprintf(stderr, "megabench: interrupted before any case ran; no receipt written\n");
		code = MB_EXIT_INTERRUPTED;
		goto cleanup;
	}
	for (int d = 0; d < outputs.n && !interrupted; d++) {
		run_ctx r = {&a, s.suite, s.plan, s.backend, s.notices, s.n_notices, argc + 1, command, s.repetitions,
			&signals, a.gpus ? &pool : NULL, a.gpus ? &costs : NULL};
		char device[32];
		int one;

		if (a.devices && !a.gpus) {
			/* read by the CUDA backend and the lanes in the children it forks */
			snprintf(device, sizeof(device), "%d", devices[d]);
			setenv(MB_DEVICE_ENV, device, 1);
		}
		one = run_and_save(&r, outputs.path[d], outputs.existed[d]);
		/* the worst outcome wins: interrupted, then bad input, then failed */
		if (one == MB_EXIT_INTERRUPTED || (code != MB_EXIT_INTERRUPTED && one > code))
			code = one;
	}
cleanup:
	/* The handlers stay: `run` is the process's last act, and a signal
	 * between here and exit must not turn a finished run's exit code into
	 * "killed". */
	free(command);
	mb_shard_costs_free(&costs);
	mb_plan_free(s.plan);
	mb_suite_free(s.suite);
	return code;
}
