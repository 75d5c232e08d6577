/* megabench alltoall: the moe_alltoall row (expert-parallel dispatch and
 * combine over NCCL, kernels/moe_alltoall.h) across G GPUs, into a receipt
 * and a table as nccl-tests prints one.
 *
 * The cases run through the case driver as every row's do, on the
 * multi-rank backend over an NCCL world: every GPU of this host from one
 * process, or one GPU per process under an MPI launcher (world_run.h).
 * What this file adds: the options (sizes as a list or a sweep), the plan
 * (one case per size and variant, in hot mode, exactly --samples timed
 * calls), the save (`run`'s) and the table (mb_print_alltoall). NCCL's
 * communicators live in this process, so `run`'s child per row is not
 * used; a watchdog ends the process when no step makes progress for
 * --timeout seconds (a hang in NCCL). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mb_config.h"
#include "harness/cli.h"
#include "harness/suite.h"
#include "reference/moe_alltoall.h"

#if MB_HAVE_CUDA && MB_HAVE_NCCL
#define A2A_BUILT 1
#include "harness/clock.h"
#include "harness/console.h"
#include "harness/hostinfo.h"
#include "harness/nccl_world.h"
#include "harness/runner.h"
#include "harness/world_run.h"
#include "receipts/atomic_write.h"
#include "receipts/printer.h"
#include "receipts/provenance.h"
#else
#define A2A_BUILT 0
#endif

#define CMD "alltoall"
#define ROW_NAME "moe_alltoall"
#define FAMILY "ep"
#define PATH_BYTES 4096
#define NOTE_BYTES 1024
#define MAX_SIZES 32
#define DEFAULT_HIDDEN 2048
#define DEFAULT_EXPERTS 64
#define DEFAULT_TOPK 6
#define DEFAULT_SAMPLES 50
#define DEFAULT_WARMUP 5
#define DEFAULT_TIMEOUT_S 600
#define DEFAULT_STEP_FACTOR 2
#define DEFAULT_DIR "receipts"
#define DIR_MODE 0777
#define NS_PER_MS 1000000L
/* ncclAlltoAll came with NCCL 2.28 (NCCL_VERSION_CODE 22800). */
#define NCCL_ALLTOALL_VERSION 22800

/* ---- arguments ------------------------------------------------------------ */

static void alltoall_usage(FILE *f)
{
	fprintf(f,
		"usage: megabench alltoall [options]\n"
		"\n"
		"Runs the moe_alltoall row across GPUs with NCCL: expert-parallel token dispatch\n"
		"and combine (tokens [T, H] per GPU routed top-K over E experts spread evenly\n"
		"over the GPUs; expert e scales by 1 + e/E; combine sums the weighted results).\n"
		"One case per (T, variant): fused, grouped_sendrecv (the fallback: grouped\n"
		"ncclSend/ncclRecv per peer, one copy per (token, k)), and NCCL's own all-to-all\n"
		"on the fallback's bytes with equal counts (nccl_alltoall: ncclAlltoAll;\n"
		"nccl_sendrecv: grouped send/recv as nccl-tests), each through the case driver\n"
		"like every row's: y against the reference, every row a dispatch moved against\n"
		"the routing, each call's time the slowest rank's (CUDA events).\n"
		"\n"
		"      --gpus N|all      GPUs of this host, 0 .. N-1 (default all; at least 2).\n"
		"                        Under an MPI launcher (a build with -Dmpi=enabled):\n"
		"                        one rank per process, GPU = the rank on its node\n"
		"  -T, --tokens LIST     tokens per GPU (default 4096,16384)\n"
		"  -b, --min-tokens T    a sweep, as nccl-tests' -b/-e/-f but counted in tokens\n"
		"  -e, --max-tokens T    per GPU: T from -b to -e, times -f each step (K and M\n"
		"  -f, --step-factor F   suffixes: 1K = 1024); F defaults to %d; instead of -T\n"
		"      --hidden H        hidden size (default 2048)\n"
		"      --experts E       experts (default 64; the GPU count must divide it)\n"
		"      --topk K          experts per token (default 6, at most %d)\n"
		"      --variants LIST   fused,grouped_sendrecv,nccl_alltoall,nccl_sendrecv (default all\n"
		"                        built; nccl_alltoall needs NCCL 2.28)\n"
		"      --dtype NAME      bf16 (default), fp16 or fp32\n"
		"      --samples N       timed calls per case after the warm-up (default %d); one more,\n"
		"                        checked, closes the case\n"
		"      --warmup N        untimed calls first (default %d)\n"
		"      --seed N          input generator seed (default %u)\n"
		"      --check           compare everything: every token's y on every rank with\n"
		"                        the reference, and every received row in full (slow at\n"
		"                        large T); by default a sample of %d tokens over the ranks,\n"
		"                        and every received row by a 64-bit hash of its bits\n"
		"      --timeout S       give up when a step makes no progress for S seconds\n"
		"                        (default %d; a hang in NCCL)\n"
		"  -o, --output FILE     receipt path (default receipts/alltoall-YYYYMMDDTHHMMSS.mmmZ-PID.json;\n"
		"                        '-' = stdout, the table then goes to stderr)\n"
		"      --force           replace FILE when it exists\n"
		"  -q, --quiet           no progress lines\n"
		"  -h, --help            this text\n"
		"\n"
		"The table (stdout) reads as nccl-tests': one line per size and variant with the\n"
		"size (bytes each rank sends per call, dispatch and combine), count (token rows\n"
		"each rank sends per call), time (the median call), algbw, busbw, #wrong and\n"
		"busbw over the best of NCCL's own all-to-all at that size; then '# Out of\n"
		"bounds values' and each variant's '# Avg bus bandwidth' over the sizes.\n"
		"NCCL_NVLS_ENABLE=0 is set unless the environment sets it (NVLink multicast off).\n"
		"Ctrl-C or SIGTERM stops after the case running and writes what finished.\n"
		"exit codes: 0 every case correct; 1 a case failed or crashed (the receipt is\n"
		"written); 2 built without CUDA or NCCL, fewer than 2 GPUs, a shape the GPU\n"
		"count cannot take, unwritable or existing output; 64 usage error; 130\n"
		"interrupted (the receipt is written, marked so).\n",
		DEFAULT_STEP_FACTOR, MB_A2A_MAX_K, DEFAULT_SAMPLES, DEFAULT_WARMUP, MB_DEFAULT_SEED,
		(int)MB_DEFAULT_MAX_CHECK_ROWS, DEFAULT_TIMEOUT_S);
}

typedef struct a2a_args {
	const char *gpus;
	int64_t tokens[MAX_SIZES];
	int n_tokens;
	bool tokens_given;
	int64_t sweep[3];   /* -b, -e, -f; 0: not given */
	int64_t hidden, experts, topk;
	bool variant_on[MB_A2A_N_VARIANTS];
	mb_dtype dtype;
	int64_t samples, warmup, timeout_s, seed;
	bool check, force, quiet;
	const char *output;
} a2a_args;

_Static_assert(MB_A2A_N_VARIANTS == 4, "DEFAULTS turns every variant on");
static const a2a_args DEFAULTS = {.tokens = {4096, 16384}, .n_tokens = 2, .hidden = DEFAULT_HIDDEN,
	.experts = DEFAULT_EXPERTS, .topk = DEFAULT_TOPK, .variant_on = {true, true, true, true}, .dtype = MB_BF16,
	.samples = DEFAULT_SAMPLES, .warmup = DEFAULT_WARMUP, .timeout_s = DEFAULT_TIMEOUT_S, .seed = MB_DEFAULT_SEED};

/* A whole number in [lo, hi], with a K (1024) or M (1024^2) suffix where
 * `suffix`. */
static int int_arg(int64_t *out, const char *opt, const char *text, int64_t lo, int64_t hi, bool suffix)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(text, &end, 10);
	if (suffix && end != text && (*end == 'K' || *end == 'k' || *end == 'M' || *end == 'm') && !end[1]
		&& llabs(v) <= INT32_MAX) {
		v *= *end == 'K' || *end == 'k' ? 1024LL : 1024LL * 1024LL;
		end++;
	}
	if (errno || end == text || *end || v < lo || v > hi)
		return mb_cli_usage_error(CMD, "%s expects a whole number from %lld to %lld, got \"%s\"", opt,
			(long long)lo, (long long)hi, text);
	*out = v;
	return 0;
}

static int tokens_arg(a2a_args *a, const char *text)
{
	char copy[PATH_BYTES];

	a->n_tokens = 0;
	a->tokens_given = true;
	snprintf(copy, sizeof(copy), "%s", text);
	for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (a->n_tokens == MAX_SIZES)
			return mb_cli_usage_error(CMD, "--tokens lists more than %d sizes", MAX_SIZES);
		if (int_arg(&a->tokens[a->n_tokens++], "--tokens", t, 1, INT32_MAX, true))
			return MB_EXIT_USAGE;
	}
	return a->n_tokens ? 0 : mb_cli_usage_error(CMD, "--tokens expects sizes such as 4096,16384");
}

static int variants_arg(a2a_args *a, const char *text)
{
	char copy[PATH_BYTES];

	memset(a->variant_on, 0, sizeof(a->variant_on));
	snprintf(copy, sizeof(copy), "%s", text);
	for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		mb_a2a_variant v;
		if (mb_a2a_variant_parse(t, &v))
			return mb_cli_usage_error(CMD, "--variants: unknown variant \"%s\"; known: fused, grouped_sendrecv, "
				"nccl_alltoall, nccl_sendrecv", t);
		a->variant_on[v] = true;
	}
	for (int v = 0; v < MB_A2A_N_VARIANTS; v++)
		if (a->variant_on[v])
			return 0;
	return mb_cli_usage_error(CMD, "--variants names no variant");
}

/* -b/-e/-f: the sizes from -b to -e, times -f each step. */
static int sweep_sizes(a2a_args *a)
{
	int64_t lo = a->sweep[0] ? a->sweep[0] : a->sweep[1], hi = a->sweep[1] ? a->sweep[1] : a->sweep[0];
	int64_t f = a->sweep[2] ? a->sweep[2] : DEFAULT_STEP_FACTOR;

	if (a->tokens_given)
		return mb_cli_usage_error(CMD, "--tokens or a sweep (-b/-e/-f), not both");
	if (!a->sweep[0] && !a->sweep[1])
		return mb_cli_usage_error(CMD, "-f needs -b or -e");
	if (lo > hi)
		return mb_cli_usage_error(CMD, "-b %lld is over -e %lld", (long long)lo, (long long)hi);
	a->n_tokens = 0;
	for (int64_t t = lo; t <= hi; t *= f) {
		if (a->n_tokens == MAX_SIZES)
			return mb_cli_usage_error(CMD, "-b %lld -e %lld -f %lld makes more than %d sizes", (long long)lo,
				(long long)hi, (long long)f, MAX_SIZES);
		a->tokens[a->n_tokens++] = t;
	}
	return 0;
}

/* One option; 0, a usage error's exit code, or -1 after --help. */
static int one_option(a2a_args *a, int c)
{
	switch (c) {
	case 'T': return tokens_arg(a, optarg);
	case 'b': return int_arg(&a->sweep[0], "-b", optarg, 1, INT32_MAX, true);
	case 'e': return int_arg(&a->sweep[1], "-e", optarg, 1, INT32_MAX, true);
	case 'f': return int_arg(&a->sweep[2], "-f", optarg, 2, 1024, false);
	case 'G': a->gpus = optarg; return 0;
	case 'H': return int_arg(&a->hidden, "--hidden", optarg, 1, INT32_MAX, false);
	case 'E': return int_arg(&a->experts, "--experts", optarg, 1, MB_A2A_MAX_E, false);
	case 'K': return int_arg(&a->topk, "--topk", optarg, 1, MB_A2A_MAX_K, false);
	case 'V': return variants_arg(a, optarg);
	case 'D':
		return mb_dtype_parse(optarg, &a->dtype) ? mb_cli_usage_error(CMD, "--dtype must be bf16, fp16 or fp32, "
			"got \"%s\"", optarg) : 0;
	case 'S': return int_arg(&a->samples, "--samples", optarg, 1, MB_DEFAULT_MAX_SAMPLES, false);
	case 'W': return int_arg(&a->warmup, "--warmup", optarg, 0, MB_DEFAULT_MAX_SAMPLES, false);
	case 's': return int_arg(&a->seed, "--seed", optarg, 0, INT64_MAX, false);
	case 'c': a->check = true; return 0;
	case 't': return int_arg(&a->timeout_s, "--timeout", optarg, 1, 86400, false);
	case 'o': a->output = optarg; return 0;
	case 'F': a->force = true; return 0;
	case 'q': a->quiet = true; return 0;
	case 'h': alltoall_usage(stdout); return -1;
	default: return mb_cli_usage_error(CMD, "unknown or incomplete option");
	}
}

static int parse_args(a2a_args *a, int argc, char **argv)
{
	/* long options without a short one take letters getopt never sees */
	static const struct option opts[] = {
		{"gpus", required_argument, NULL, 'G'}, {"tokens", required_argument, NULL, 'T'},
		{"min-tokens", required_argument, NULL, 'b'}, {"max-tokens", required_argument, NULL, 'e'},
		{"step-factor", required_argument, NULL, 'f'}, {"hidden", required_argument, NULL, 'H'},
		{"experts", required_argument, NULL, 'E'}, {"topk", required_argument, NULL, 'K'},
		{"variants", required_argument, NULL, 'V'}, {"dtype", required_argument, NULL, 'D'},
		{"samples", required_argument, NULL, 'S'}, {"warmup", required_argument, NULL, 'W'},
		{"seed", required_argument, NULL, 's'}, {"check", no_argument, NULL, 'c'},
		{"timeout", required_argument, NULL, 't'}, {"output", required_argument, NULL, 'o'},
		{"force", no_argument, NULL, 'F'}, {"quiet", no_argument, NULL, 'q'}, {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int64_t n;
	int c, rc = 0;

	*a = DEFAULTS;
	optind = 1;
	while (!rc && (c = getopt_long(argc, argv, "T:b:e:f:o:qh", opts, NULL)) != -1)
		rc = one_option(a, c);
	if (rc)
		return rc;
	if (optind != argc)
		return mb_cli_usage_error(CMD, "takes no operands, got \"%s\"", argv[optind]);
	if (a->gpus && strcmp(a->gpus, "all") != 0 && int_arg(&n, "--gpus", a->gpus, 1, MB_A2A_MAX_GPUS, false))
		return MB_EXIT_USAGE;
	return a->sweep[0] || a->sweep[1] || a->sweep[2] ? sweep_sizes(a) : 0;
}

#if A2A_BUILT

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

typedef struct a2a_run {
	a2a_args *a;
	const mb_row *row;
	mb_world w;
	mb_console con;
	/* what the run was, in place of a suite file */
	mb_suite suite;
	char suite_path[32], suite_name[16], description[NOTE_BYTES], variants[NOTE_BYTES];
	mb_plan plan;
	mb_world_run_options wo;
	mb_settings sampling;       /* the driver's: see make_suite */
	json_t *device, *ceilings, *prov, *host, *notices;
	bool alltoall_missing;      /* NCCL without ncclAlltoAll */
} a2a_run;

static void notice(a2a_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void notice(a2a_run *r, const char *fmt, ...)
{
	char text[NOTE_BYTES];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (!mb_world_root(&r->w))
		return;
	json_array_append_new(r->notices, json_string(text));
	r->con.progress.notice(r->con.progress.ctx, text);
}

/* One case per size and variant, sizes first, variants in the row's
 * order, as a plan makes them; every size's shape checked as a suite's
 * would be (the first variant's case id names it). */
static int make_plan(a2a_run *r, mb_error *err)
{
	const a2a_args *a = r->a;
	int rc = 0;

	r->plan.cases = calloc((size_t)a->n_tokens * MB_A2A_N_VARIANTS, sizeof(mb_case_plan));
	if (!r->plan.cases)
		return mb_error_set(err, MB_ENOMEM, CMD, "out of memory");
	for (int i = 0; i < a->n_tokens && !rc; i++) {
		const int64_t axis[MB_MAX_AXES] = {a->tokens[i], a->hidden, a->experts, a->topk, r->w.size};
		size_t first = r->plan.n_cases;
		for (int v = 0; v < MB_A2A_N_VARIANTS && !rc; v++)
			if (a->variant_on[v])
				rc = mb_plan_case(&r->plan.cases[r->plan.n_cases++], r->row, mb_row_find_variant(r->row,
					mb_a2a_variant_name((mb_a2a_variant)v)), a->dtype, MB_MODE_HOT, FAMILY, axis, CMD, err);
		if (!rc && (rc = r->row->check_shape(axis, err)))
			mb_error_prefix(err, r->plan.cases[first].id);
	}
	return rc;
}

/* The suite the receipt names: the settings as text, with their blob id,
 * so that two receipts of the same settings compare. Exactly --samples
 * timed calls: the driver's stopping rule is given no clock to stop on
 * (under MPI each process's clock would stop it at another call, and the
 * collectives would no longer meet); --timeout is the watchdog's. */
static void make_suite(a2a_run *r)
{
	const a2a_args *a = r->a;
	char tokens[256] = "";
	size_t used = 0;
	int64_t most = 0;

	for (int i = 0; i < a->n_tokens && used < sizeof(tokens); i++) {
		used += (size_t)snprintf(tokens + used, sizeof(tokens) - used, "%s%lld", i ? "," : "", (long long)a->tokens[i]);
		most = a->tokens[i] > most ? a->tokens[i] : most;
	}
	snprintf(r->description, sizeof(r->description), "megabench alltoall: moe_alltoall on %d GPUs, T=%s H=%lld "
		"E=%lld K=%lld %s, %lld timed calls after %lld", r->w.size, tokens, (long long)a->hidden,
		(long long)a->experts, (long long)a->topk, mb_dtype_name(a->dtype), (long long)a->samples,
		(long long)a->warmup);
	snprintf(r->suite_path, sizeof(r->suite_path), "(megabench alltoall)");
	snprintf(r->suite_name, sizeof(r->suite_name), "alltoall");
	r->suite.path = r->suite_path;
	r->suite.name = r->suite_name;
	r->suite.description = r->description;
	if (mb_blob_id(r->suite.blob_id, r->description, strlen(r->description)))
		snprintf(r->suite.blob_id, sizeof(r->suite.blob_id), "%040d", 0);
	r->suite.settings = (mb_settings){.seed = (uint64_t)a->seed, .n_modes = 1, .modes = {MB_MODE_HOT},
		.max_noise = MB_DEFAULT_MAX_NOISE, .min_samples = (int)a->samples, .max_samples = (int)a->samples,
		.min_time_s = 0, .timeout_s = (double)a->timeout_s, .warmup = (int)a->warmup,
		.max_check_rows = a->check ? (int64_t)r->w.size * most : MB_DEFAULT_MAX_CHECK_ROWS};
	r->sampling = r->suite.settings;
	r->sampling.timeout_s = INFINITY;
	used = 0;
	for (int v = 0; v < MB_A2A_N_VARIANTS; v++)
		if (a->variant_on[v] && used < sizeof(r->variants))
			used += (size_t)snprintf(r->variants + used, sizeof(r->variants) - used, "%s%s", used ? "," : "",
				mb_a2a_variant_name((mb_a2a_variant)v));
}

static void world_notices(a2a_run *r)
{
	const char *nvls = getenv(MB_WORLD_NVLS_ENV);
	char text[MB_RUN_NOTICE_MAX];

	if (!json_is_true(json_object_get(r->prov, "available")))
		notice(r, "no git provenance: %s", json_string_value(json_object_get(r->prov, "reason")));
	if (mb_run_checkout_notice(text, sizeof(text), r->prov))
		notice(r, "%s", text);
	notice(r, "%d GPUs, %s; NCCL %s; %s=%s", r->w.size, r->w.mpi ? "one MPI rank per GPU (ncclCommInitRank)"
		: "one process driving all of them (ncclCommInitAll)", r->w.nccl_version, MB_WORLD_NVLS_ENV,
		nvls ? nvls : "(unset)");
	if (!nvls || strcmp(nvls, MB_WORLD_NVLS_OFF) != 0)
		notice(r, "%s is not %s in the environment: NVLink multicast may be on", MB_WORLD_NVLS_ENV,
			MB_WORLD_NVLS_OFF);
	if (r->alltoall_missing)
		notice(r, "nccl_alltoall needs ncclAlltoAll (NCCL 2.28); NCCL %s here: not run", r->w.nccl_version);
}

/* ---- the output ------------------------------------------------------------------ */

static int probe_output(const a2a_args *a, char *out_path, size_t len, mb_error *err)
{
	struct timespec ts;
	struct tm tm;
	char stamp[32];

	if (a->output) {
		snprintf(out_path, len, "%s", a->output);
	} else {
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", &tm);
		mkdir(DEFAULT_DIR, DIR_MODE); /* may exist; the probe reports real problems */
		snprintf(out_path, len, DEFAULT_DIR "/alltoall-%s.%03ldZ-%ld.json", stamp, ts.tv_nsec / NS_PER_MS,
			(long)getpid());
	}
	return mb_atomic_write_probe(out_path, a->force ? 0 : MB_ATOMIC_NO_REPLACE, err);
}

/* Save the receipt (signals wait until it is written) and print its
 * table. Returns the exit code. */
static int save_and_print(const a2a_args *a, json_t *receipt, const char *path)
{
	FILE *table = strcmp(path, "-") == 0 ? stderr : stdout;
	const json_t *summary = json_object_get(receipt, "summary");
	const char *status = json_string_value(json_object_get(receipt, "status"));
	sigset_t hold, old;
	struct stat st;
	bool existed = strcmp(path, "-") != 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode);
	mb_error err;
	int rc;

	mb_error_clear(&err);
	sigemptyset(&hold);
	sigaddset(&hold, SIGINT);
	sigaddset(&hold, SIGTERM);
	sigprocmask(SIG_BLOCK, &hold, &old);
	rc = mb_cli_save_receipt(receipt, path, a->force, existed, &err);
	sigprocmask(SIG_SETMASK, &old, NULL);
	mb_print_alltoall(table, receipt);
	fflush(table);
	if (rc) {
		mb_cli_error(&err);
		return MB_EXIT_INPUT;
	}
	if (strcmp(path, "-") != 0)
		fprintf(stderr, "megabench: receipt written to %s%s\n", path, strcmp(status, "interrupted") == 0
			? " (interrupted: partial)" : "");
	if (strcmp(status, "interrupted") == 0)
		return MB_EXIT_INTERRUPTED;
	return strcmp(status, "complete") == 0 && json_integer_value(json_object_get(summary, "ok"))
		== json_integer_value(json_object_get(summary, "cases")) ? MB_EXIT_OK : MB_EXIT_FAILED;
}

/* ---- the command ------------------------------------------------------------- */

/* A step every process takes: its error printed where it happened, and
 * whether every process succeeded. */
static bool agreed(a2a_run *r, int rc, mb_error *err)
{
	if (rc)
		mb_cli_error(err);
	return mb_world_agree(&r->w, rc == 0);
}

/* The GPUs, the plan and the shapes, the output, the communicators, then
 * the devices and the root's identity of the run: each step agreed by
 * every process before the next. */
static bool set_up(a2a_run *r, char *out_path, size_t len)
{
	const bool root = mb_world_root(&r->w);
	a2a_args *a = r->a;
	int64_t t0 = mb_now_ns();
	const mb_backend *be;
	mb_error err;
	bool ok;

	mb_error_clear(&err);
	r->alltoall_missing = a->variant_on[MB_A2A_VENDOR_ALLTOALL] && mb_a2a_nccl_version() < NCCL_ALLTOALL_VERSION;
	a->variant_on[MB_A2A_VENDOR_ALLTOALL] = a->variant_on[MB_A2A_VENDOR_ALLTOALL] && !r->alltoall_missing;
	ok = agreed(r, r->row ? 0 : mb_error_set(&err, MB_ENOTFOUND, ROW_NAME, "not in this megabench's catalog"), &err)
		&& agreed(r, mb_world_devices(&r->w, a->gpus, &err), &err)
		&& agreed(r, make_plan(r, &err), &err)
		&& agreed(r, root ? probe_output(a, out_path, len, &err) : 0, &err)
		&& agreed(r, mb_world_connect(&r->w, &err), &err);
	r->wo.phases.context_load += mb_now_ns() - t0;
	if (!ok)
		return false;
	be = mb_backend_nccl(&r->w);
	return agreed(r, be->probe(&r->device, &r->ceilings, &r->wo.phases, &err), &err)
		&& agreed(r, root ? mb_run_provenance(&r->prov, NULL, &err) : 0, &err)
		&& agreed(r, root ? mb_host_identity(&r->host, &err) : 0, &err);
}

static void run_free(a2a_run *r)
{
	json_decref(r->device);
	json_decref(r->ceilings);
	json_decref(r->prov);
	json_decref(r->host);
	json_decref(r->notices);
	free(r->plan.cases);
	if (r->w.n_local)
		mb_world_close(&r->w);
	mb_world_end(&r->w);
	free(r);
}

/* Set up, run every case through the driver (world_run.h), and at the
 * root save the receipt and print the table. Returns the exit code, the
 * root's on every process. */
static int run_all(a2a_args *a, int argc, char **argv, int64_t t0)
{
	a2a_run *r = calloc(1, sizeof(*r));
	json_t *receipt = NULL;
	char out_path[PATH_BYTES] = "", started[64];
	mb_plan_filter filter = {ROW_NAME, NULL, NULL, NULL};
	mb_run_options o = {.backend_requested = "cuda", .argc = argc, .argv = argv, .interrupted = &interrupted};
	mb_error err;
	int code = MB_EXIT_INPUT;

	if (!r) {
		fprintf(stderr, "megabench: out of memory\n");
		return MB_EXIT_INPUT;
	}
	mb_error_clear(&err);
	r->a = a;
	r->row = mb_catalog_find(ROW_NAME);
	r->notices = json_array();
	mb_run_timestamp(started, sizeof(started));
	if (mb_world_start(&r->w, &err)) {
		mb_cli_error(&err);
		run_free(r);
		return MB_EXIT_INPUT;
	}
	mb_console_init(&r->con, stderr, a->quiet || !mb_world_root(&r->w));
	if (set_up(r, out_path, sizeof(out_path))) {
		make_suite(r);
		world_notices(r);
		filter.dtypes = mb_dtype_name(a->dtype);
		filter.variants = r->variants;
		o.suite = &r->suite;
		o.plan = &r->plan;
		o.filter = &filter;
		o.backend = mb_backend_nccl(&r->w);
		o.progress = &r->con.progress;
		o.provenance = r->prov;
		o.host = r->host;
		r->wo = (mb_world_run_options){&r->w, &o, &r->sampling, r->device, r->ceilings, r->notices, r->wo.phases,
			started, t0};
		code = mb_world_run(&receipt, &r->wo, &err) ? (mb_cli_error(&err), MB_EXIT_INPUT) : MB_EXIT_FAILED;
		mb_console_finish(&r->con);
		if (receipt)
			code = save_and_print(a, receipt, out_path);
	}
	mb_world_bcast_int(&r->w, &code);
	json_decref(receipt);
	run_free(r);
	return code;
}

#endif /* A2A_BUILT */

int mb_cli_alltoall(int argc, char **argv)
{
	a2a_args a;
	int code = parse_args(&a, argc, argv);

	if (code)
		return code < 0 ? MB_EXIT_OK : code;
#if A2A_BUILT
	struct sigaction sa = {0};
	int64_t t0 = mb_now_ns();

	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	mb_world_watch((int)a.timeout_s);
	/* main hands us argv + 1: argv[-1] is the program as it was invoked */
	code = run_all(&a, argc + 1, argv - 1, t0);
	mb_world_watch(0);
	return code;
#else
	fprintf(stderr, "megabench alltoall: moe_alltoall runs across GPUs with NCCL, and this megabench was built "
		"without %s (meson setup -Dcuda=enabled -Dnccl=enabled, with the toolkit and libnccl-dev)\n",
		MB_HAVE_CUDA ? "NCCL" : "CUDA");
	return MB_EXIT_INPUT;
#endif
}
