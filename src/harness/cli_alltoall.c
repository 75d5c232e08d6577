/* megabench alltoall: the moe_alltoall row (expert-parallel dispatch and
 * combine over NCCL, kernels/moe_alltoall.h) across G GPUs, into a
 * receipt.
 *
 * One process drives every GPU of this host (ncclCommInitAll, one stream
 * per GPU), or, in a build with -Dmpi=enabled started by an MPI launcher,
 * each process drives one GPU (ncclGetUniqueId on rank 0, MPI_Bcast,
 * ncclCommInitRank), as nccl-tests does. The sequence is the same either
 * way; only the "world" functions below differ.
 *
 * Per tokens-per-GPU T, the host makes every rank's routing from its
 * seeded logits, the rows each rank will receive, and the reference on a
 * sample of each rank's tokens; then per variant: buffers, one checked
 * call (what every rank received is compared with what the routing says
 * it must receive: counts exactly, every row by a 64-bit hash of its
 * bits, the sampled rows in full; and y against the reference), warm-up,
 * timed calls (CUDA events on every rank's stream, the call's time the
 * slowest rank's), one more checked call. Bandwidth as nccl-tests defines
 * it for all-to-all: algbw = bytes sent per rank / time, busbw = algbw
 * (G - 1) / G.
 *
 * The parent-child isolation of `megabench run` is not used: NCCL's
 * communicators live in this process. A watchdog ends the process when a
 * phase makes no progress for --timeout seconds (a hang in NCCL).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mb_config.h"
#include "harness/case_common.h"
#include "harness/case_driver.h"
#include "harness/cli.h"
#include "harness/console.h"
#include "harness/host_inputs.h"
#include "harness/hostinfo.h"
#include "harness/runner.h"
#include "kernels/moe_alltoall.h"
#include "receipts/atomic_write.h"
#include "receipts/provenance.h"
#include "receipts/receipt_io.h"
#include "receipts/schema.h"
#include "reference/reference.h"

#if MB_HAVE_CUDA && MB_HAVE_NCCL
#define A2A_BUILT 1
#include "harness/cuda_device.h"
#include "harness/cuda_headers.h"
#include "harness/cuda_inputs.h"
#else
#define A2A_BUILT 0
#endif

#if MB_HAVE_MPI && A2A_BUILT
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wundef"
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <mpi.h>
#pragma GCC diagnostic pop
#define A2A_MPI 1
#else
#define A2A_MPI 0
#endif

#define CMD "alltoall"
#define ROW_NAME "moe_alltoall"
#define FAMILY "ep"
#define PATH_BYTES 4096
#define WHY_BYTES 1024
#define NOTE_BYTES 1024
#define MAX_TOKEN_SIZES 16
#define DEFAULT_HIDDEN 2048
#define DEFAULT_EXPERTS 64
#define DEFAULT_TOPK 6
#define DEFAULT_SAMPLES 50
#define DEFAULT_WARMUP 5
#define DEFAULT_TIMEOUT_S 600
#define DEFAULT_DIR "receipts"
#define DIR_MODE 0777
#define NS_PER_MS 1000000L
#define NS_PER_S 1e9
#define BYTES_PER_GB 1e9
/* Rows read back per batch when comparing in full (fp32, H wide). */
#define GATHER_BATCH 2048
/* A rank's device identity as JSON text, gathered under MPI. */
#define DEVICE_JSON_BYTES 4096
#define NVLS_ENV "NCCL_NVLS_ENABLE"
#define NVLS_OFF "0"
#define OTHER_RANK_FAILED "another rank failed"
/* ncclAlltoAll came with NCCL 2.28 (NCCL_VERSION_CODE 22800). */
#define NCCL_ALLTOALL_VERSION 22800

static const int64_t DEFAULT_TOKENS[] = {4096, 16384};

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
		"nccl_sendrecv: grouped send/recv as nccl-tests). Each case records every rank's\n"
		"correctness, the time of each call (the slowest rank's, CUDA events), algbw =\n"
		"bytes sent per rank / time and busbw = algbw (G-1)/G, as nccl-tests defines them\n"
		"for all-to-all.\n"
		"\n"
		"      --gpus N|all      GPUs of this host, 0 .. N-1 (default all; at least 2).\n"
		"                        Under an MPI launcher (a build with -Dmpi=enabled):\n"
		"                        one rank per process, GPU = the rank on its node\n"
		"  -T, --tokens LIST     tokens per GPU (default 4096,16384)\n"
		"      --hidden H        hidden size (default 2048)\n"
		"      --experts E       experts (default 64; the GPU count must divide it)\n"
		"      --topk K          experts per token (default 6, at most %d)\n"
		"      --variants LIST   fused,grouped_sendrecv,nccl_alltoall,nccl_sendrecv (default all\n"
		"                        built; nccl_alltoall needs NCCL 2.28)\n"
		"      --dtype NAME      bf16 (default), fp16 or fp32\n"
		"      --samples N       timed calls per case after the warm-up (default %d)\n"
		"      --warmup N        untimed calls first (default %d)\n"
		"      --seed N          input generator seed (default %u)\n"
		"      --check           compare everything: every token's y on every rank with\n"
		"                        the reference, and every received row in full (slow at\n"
		"                        large T); by default a sample of %d tokens per rank, and\n"
		"                        every received row by a 64-bit hash of its bits\n"
		"      --timeout S       give up when a phase makes no progress for S seconds\n"
		"                        (default %d; a hang in NCCL)\n"
		"  -o, --output FILE     receipt path (default receipts/alltoall-YYYYMMDDTHHMMSS.mmmZ-PID.json)\n"
		"      --force           replace FILE when it exists\n"
		"  -q, --quiet           no progress lines\n"
		"  -h, --help            this text\n"
		"\n"
		"NCCL_NVLS_ENABLE=0 is set unless the environment sets it (NVLink multicast off).\n"
		"exit codes: 0 every case correct; 1 a case failed or crashed (the receipt is\n"
		"written); 2 built without CUDA or NCCL, fewer than 2 GPUs, a shape the GPU\n"
		"count cannot take, unwritable or existing output; 64 usage error.\n",
		MB_A2A_MAX_K, DEFAULT_SAMPLES, DEFAULT_WARMUP, MB_DEFAULT_SEED, (int)MB_DEFAULT_MAX_CHECK_ROWS,
		DEFAULT_TIMEOUT_S);
}

typedef struct a2a_args {
	const char *gpus;
	int64_t tokens[MAX_TOKEN_SIZES];
	int n_tokens;
	int64_t hidden, experts, topk;
	bool variant_on[MB_A2A_N_VARIANTS];
	bool variants_given;
	mb_dtype dtype;
	int64_t samples, warmup, timeout_s;
	uint64_t seed;
	bool check, force, quiet;
	const char *output;
} a2a_args;

/* A whole number in [lo, hi]. */
static int int_arg(int64_t *out, const char *opt, const char *text, int64_t lo, int64_t hi)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(text, &end, 10);
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
	snprintf(copy, sizeof(copy), "%s", text);
	for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (a->n_tokens == MAX_TOKEN_SIZES)
			return mb_cli_usage_error(CMD, "--tokens lists more than %d sizes", MAX_TOKEN_SIZES);
		if (int_arg(&a->tokens[a->n_tokens++], "--tokens", t, 1, INT32_MAX))
			return MB_EXIT_USAGE;
	}
	return a->n_tokens ? 0 : mb_cli_usage_error(CMD, "--tokens expects sizes such as 4096,16384");
}

static int variants_arg(a2a_args *a, const char *text)
{
	char copy[PATH_BYTES];

	memset(a->variant_on, 0, sizeof(a->variant_on));
	a->variants_given = true;
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

static int parse_args(a2a_args *a, int argc, char **argv)
{
	enum { OPT_GPUS = 256, OPT_HIDDEN, OPT_EXPERTS, OPT_TOPK, OPT_VARIANTS, OPT_DTYPE, OPT_SAMPLES, OPT_WARMUP,
		OPT_SEED, OPT_CHECK, OPT_TIMEOUT, OPT_FORCE };
	static const struct option opts[] = {
		{"gpus", required_argument, NULL, OPT_GPUS},
		{"tokens", required_argument, NULL, 'T'},
		{"hidden", required_argument, NULL, OPT_HIDDEN},
		{"experts", required_argument, NULL, OPT_EXPERTS},
		{"topk", required_argument, NULL, OPT_TOPK},
		{"variants", required_argument, NULL, OPT_VARIANTS},
		{"dtype", required_argument, NULL, OPT_DTYPE},
		{"samples", required_argument, NULL, OPT_SAMPLES},
		{"warmup", required_argument, NULL, OPT_WARMUP},
		{"seed", required_argument, NULL, OPT_SEED},
		{"check", no_argument, NULL, OPT_CHECK},
		{"timeout", required_argument, NULL, OPT_TIMEOUT},
		{"output", required_argument, NULL, 'o'},
		{"force", no_argument, NULL, OPT_FORCE},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int64_t seed = MB_DEFAULT_SEED;
	int c, rc = 0;

	memset(a, 0, sizeof(*a));
	memcpy(a->tokens, DEFAULT_TOKENS, sizeof(DEFAULT_TOKENS));
	a->n_tokens = (int)(sizeof(DEFAULT_TOKENS) / sizeof(DEFAULT_TOKENS[0]));
	a->hidden = DEFAULT_HIDDEN;
	a->experts = DEFAULT_EXPERTS;
	a->topk = DEFAULT_TOPK;
	for (int v = 0; v < MB_A2A_N_VARIANTS; v++)
		a->variant_on[v] = true;
	a->dtype = MB_BF16;
	a->samples = DEFAULT_SAMPLES;
	a->warmup = DEFAULT_WARMUP;
	a->timeout_s = DEFAULT_TIMEOUT_S;
	optind = 1;
	while (!rc && (c = getopt_long(argc, argv, "T:o:qh", opts, NULL)) != -1) {
		switch (c) {
		case OPT_GPUS: a->gpus = optarg; break;
		case 'T': rc = tokens_arg(a, optarg); break;
		case OPT_HIDDEN: rc = int_arg(&a->hidden, "--hidden", optarg, 1, INT32_MAX); break;
		case OPT_EXPERTS: rc = int_arg(&a->experts, "--experts", optarg, 1, MB_A2A_MAX_E); break;
		case OPT_TOPK: rc = int_arg(&a->topk, "--topk", optarg, 1, MB_A2A_MAX_K); break;
		case OPT_VARIANTS: rc = variants_arg(a, optarg); break;
		case OPT_DTYPE:
			if (mb_dtype_parse(optarg, &a->dtype))
				rc = mb_cli_usage_error(CMD, "--dtype must be bf16, fp16 or fp32, got \"%s\"", optarg);
			break;
		case OPT_SAMPLES: rc = int_arg(&a->samples, "--samples", optarg, 1, MB_DEFAULT_MAX_SAMPLES); break;
		case OPT_WARMUP: rc = int_arg(&a->warmup, "--warmup", optarg, 0, MB_DEFAULT_MAX_SAMPLES); break;
		case OPT_SEED: rc = int_arg(&seed, "--seed", optarg, 0, INT64_MAX); break;
		case OPT_CHECK: a->check = true; break;
		case OPT_TIMEOUT: rc = int_arg(&a->timeout_s, "--timeout", optarg, 1, 86400); break;
		case 'o': a->output = optarg; break;
		case OPT_FORCE: a->force = true; break;
		case 'q': a->quiet = true; break;
		case 'h': alltoall_usage(stdout); return -1;
		default: return mb_cli_usage_error(CMD, "unknown or incomplete option");
		}
	}
	if (rc)
		return rc;
	if (optind != argc)
		return mb_cli_usage_error(CMD, "takes no operands, got \"%s\"", argv[optind]);
	if (a->gpus && strcmp(a->gpus, "all") != 0) {
		int64_t n;
		if (int_arg(&n, "--gpus", a->gpus, 1, MB_A2A_MAX_GPUS))
			return MB_EXIT_USAGE;
	}
	a->seed = (uint64_t)seed;
	return 0;
}

#if A2A_BUILT

/* "T=4096,H=2048,E=64,K=6,G=2", as a plan's case ids name shapes. */
static void shape_text(char *out, size_t len, const mb_row *row, const int64_t *axis)
{
	size_t used = 0;

	out[0] = '\0';
	for (int i = 0; i < row->n_axes && used < len; i++)
		used += (size_t)snprintf(out + used, len - used, "%s%s=%lld", i ? "," : "", row->axes[i],
			(long long)axis[i]);
}

/* The shape every size must take with G GPUs, checked as a suite would be. */
static int check_shapes(const a2a_args *a, const mb_row *row, int gpus, mb_error *err)
{
	for (int i = 0; i < a->n_tokens; i++) {
		int64_t axis[MB_MAX_AXES] = {a->tokens[i], a->hidden, a->experts, a->topk, gpus};
		char why[512], shape[256];
		if (row->check_shape(axis, why, sizeof(why))) {
			shape_text(shape, sizeof(shape), row, axis);
			return mb_error_set(err, MB_EINVAL, shape, "%s", why);
		}
	}
	return 0;
}

/* ---- the receipt's frame (what `run` writes around its cases) --------------- */


/* The receipt's provenance, as `run` records it (the binary's). */
static json_t *provenance_json(mb_error *err)
{
	mb_run_options o = {0};
	json_t *p = NULL;

	return mb_run_provenance(&p, &o, err) ? NULL : p;
}


/* Whether the receipt schema built in takes case.<field>: the per-case
 * collective record goes there once the schema has it, and into the
 * notices until then. */
static bool schema_has_case_field(const char *field)
{
	mb_error err;
	const json_t *s = mb_schema_builtin("receipt", &err);
	const json_t *props = json_object_get(json_object_get(json_object_get(s, "definitions"), "case"), "properties");

	return json_object_get(props, field) != NULL;
}

/* ---- the world: this process's ranks, and the others' ----------------------- */

typedef struct world {
	bool mpi;
	int size;    /* G: ranks of the communicator */
	int proc;    /* this process (0 without MPI) */
	int n_local; /* ranks this process drives: first .. first + n_local - 1 */
	int first;
	int device[MB_A2A_MAX_GPUS];
#if A2A_MPI
	MPI_Comm comm;
#endif
} world;

/* Started by an MPI launcher: Open MPI, PMI (MPICH, Slurm) or PMIx. */
static bool launched_by_mpi(void)
{
	static const char *const VARS[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"};

	for (size_t i = 0; i < sizeof(VARS) / sizeof(VARS[0]); i++)
		if (getenv(VARS[i]))
			return true;
	return false;
}

static bool is_root(const world *w)
{
	return w->proc == 0;
}

/* Whether every process says ok. */
static bool world_agree(const world *w, bool ok)
{
#if A2A_MPI
	if (w->mpi) {
		int mine = ok, all = 0;
		MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, w->comm);
		return all != 0;
	}
#endif
	(void)w;
	return ok;
}

/* `n` doubles: the elementwise maximum over processes, at the root. */
static void world_max(const world *w, double *v, int n)
{
#if A2A_MPI
	if (w->mpi) {
		double *all = is_root(w) ? malloc((size_t)n * sizeof(*all)) : NULL;
		MPI_Reduce(v, all, n, MPI_DOUBLE, MPI_MAX, 0, w->comm);
		if (all) {
			memcpy(v, all, (size_t)n * sizeof(*v));
			free(all);
		}
	}
#endif
	(void)w, (void)v, (void)n;
}

/* Every rank's `bytes` (this process's ranks contiguous in `mine`) into
 * `all` (G of them), at the root, or everywhere when `everywhere`. */
static void world_gather(const world *w, const void *mine, void *all, size_t bytes, bool everywhere)
{
#if A2A_MPI
	if (w->mpi) {
		if (everywhere)
			MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, w->comm);
		else
			MPI_Gather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, 0, w->comm);
		return;
	}
#endif
	(void)everywhere;
	memcpy((char *)all + (size_t)w->first * bytes, mine, (size_t)w->n_local * bytes);
}

static void world_bcast_int(const world *w, int *v)
{
#if A2A_MPI
	if (w->mpi)
		MPI_Bcast(v, 1, MPI_INT, 0, w->comm);
#endif
	(void)w, (void)v;
}

/* ---- the watchdog ---------------------------------------------------------- */

static volatile sig_atomic_t watchdog_s;

static void on_watchdog(int sig)
{
	static const char msg[] = "megabench alltoall: no progress within --timeout (a hang in NCCL or a kernel); "
		"giving up, no receipt written\n";

	(void)sig;
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {
		/* nothing more can be said */
	}
	_exit(MB_EXIT_FAILED);
}

/* A phase starts: it has --timeout seconds. */
static void progress_mark(void)
{
	if (watchdog_s > 0)
		alarm((unsigned)watchdog_s);
}

/* ---- one rank of this process ---------------------------------------------- */

typedef struct local_rank {
	int rank;      /* in the communicator */
	int device;
	cudaStream_t stream;
	ncclComm_t comm;
	cudaEvent_t start, stop;
	/* the case's arrays */
	void *x, *y;
	int32_t *expert;
	float *weight;
	uint64_t *hash;        /* row hashes, hash_cap of them */
	int64_t hash_cap;
	float *gathered;       /* rows read back, GATHER_BATCH x H fp32 */
	int64_t *gather_rows;  /* their indices */
	json_t *identity;      /* mb_cuda_device_json */
} local_rank;

/* What one rank saw in one case: gathered to the root as bytes. */
typedef struct rank_result {
	int32_t rank, device;
	int32_t ok;                    /* every call and check ran */
	mb_check first, last;          /* y against the reference */
	int64_t rows_checked;          /* sampled tokens of y */
	uint64_t rows_hashed;          /* received rows compared by hash */
	uint64_t rows_compared;        /* received rows compared in full */
	uint64_t misplaced;            /* received rows or counts not as the routing says */
	int64_t dispatch_rows_sent, dispatch_rows_received;
	int64_t sent_bytes, received_bytes, remote_sent_bytes; /* one call, both directions */
	int64_t device_bytes;          /* device memory the case took on this rank */
	char problem[256];             /* the first misplaced row, or the error */
} rank_result;

/* The host side of one T: every rank's routing and row hashes, each
 * rank's row sample with the inputs it reads and, for this process's
 * ranks, the reference there. */
typedef struct case_host {
	mb_a2a_dims d;
	int64_t axis[MB_MAX_AXES];
	mb_case_plan plan;             /* the reference variant's: tensors, seeds */
	uint64_t input_seed, row_seed;
	uint64_t seed[MB_A2A_MAX_GPUS];      /* each rank's inputs */
	uint64_t rsample[MB_A2A_MAX_GPUS];   /* each rank's row sample */
	int32_t *expert;               /* [G][T][K] */
	float *weight;                 /* [G][T][K] */
	uint64_t *xhash;               /* [G][T] */
	int32_t *sample_of;            /* [G][T]: the token's place in its rank's sample, or -1 */
	int64_t *rows[MB_A2A_MAX_GPUS];
	int64_t n_rows[MB_A2A_MAX_GPUS];
	mb_host_tensors twin[MB_A2A_MAX_GPUS];
	float *want[MB_A2A_MAX_GPUS][MB_MAX_TENSORS];
	bool want_made[MB_A2A_MAX_GPUS];
	int64_t cap[MB_A2A_N_VARIANTS][MB_A2A_MAX_GPUS]; /* rows each rank receives */
} case_host;

typedef struct a2a_run {
	const a2a_args *a;
	const mb_row *row;
	world w;
	local_rank local[MB_A2A_MAX_GPUS];
	mb_settings settings;
	mb_phase_ns phases;
	mb_console con;
	json_t *cases, *notices;
	bool collective_in_schema;
	size_t n_cases, case_index;
	char nccl_version[32];
} a2a_run;

static void notice(a2a_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void notice(a2a_run *r, const char *fmt, ...)
{
	char text[NOTE_BYTES];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (!is_root(&r->w))
		return;
	json_array_append_new(r->notices, json_string(text));
	r->con.progress.notice(r->con.progress.ctx, text);
}

/* ---- world setup: devices, streams, communicators --------------------------- */

/* How many ranks, and which GPU each of this process's drives. */
static int world_devices(a2a_run *r, mb_error *err)
{
	world *w = &r->w;
	int count = 0, gpus;
	cudaError_t ce = cudaGetDeviceCount(&count);

	if (ce != cudaSuccess)
		count = 0;
	if (w->mpi) {
		w->n_local = 1;
		w->first = w->proc;
#if A2A_MPI
		MPI_Comm node;
		int node_rank = 0;
		MPI_Comm_split_type(w->comm, MPI_COMM_TYPE_SHARED, w->proc, MPI_INFO_NULL, &node);
		MPI_Comm_rank(node, &node_rank);
		MPI_Comm_free(&node);
		w->device[0] = node_rank;
#endif
		if (w->device[0] >= count)
			return mb_error_set(err, MB_ENOTFOUND, "--gpus", "MPI rank %d is rank %d on its node, which has %d "
				"CUDA device%s: one rank per GPU", w->proc, w->device[0], count, count == 1 ? "" : "s");
		gpus = w->size;
	} else {
		gpus = count;
		if (r->a->gpus && strcmp(r->a->gpus, "all") != 0)
			gpus = atoi(r->a->gpus);
		if (count < 2)
			return mb_error_set(err, MB_ENOTFOUND, "--gpus", "moe_alltoall needs at least 2 GPUs; this host "
				"has %d%s%s%s", count, ce != cudaSuccess ? " (" : "", ce != cudaSuccess ? cudaGetErrorString(ce)
				: "", ce != cudaSuccess ? ")" : "");
		if (gpus > count)
			return mb_error_set(err, MB_ENOTFOUND, "--gpus", "%d GPUs asked for; this host has %d", gpus, count);
		if (gpus < 2)
			return mb_error_set(err, MB_EINVAL, "--gpus", "moe_alltoall needs at least 2 GPUs, got %d", gpus);
		w->size = gpus;
		w->n_local = gpus;
		w->first = 0;
		for (int i = 0; i < gpus; i++)
			w->device[i] = i;
	}
	if (w->size < 2)
		return mb_error_set(err, MB_EINVAL, "--gpus", "moe_alltoall needs at least 2 ranks, the MPI launcher "
			"started %d", w->size);
	if (w->mpi && r->a->gpus && (strcmp(r->a->gpus, "all") == 0 ? false : atoi(r->a->gpus) != w->size))
		return mb_error_set(err, MB_EINVAL, "--gpus", "under MPI the launcher's %d ranks are the GPUs; --gpus %s "
			"disagrees", w->size, r->a->gpus);
	return 0;
}

/* Streams, events, identities and the communicators. */
static int world_comms(a2a_run *r, mb_error *err)
{
	world *w = &r->w;
	ncclComm_t comms[MB_A2A_MAX_GPUS];
	ncclResult_t nr;
	cudaError_t ce;

	for (int i = 0; i < w->n_local; i++) {
		local_rank *l = &r->local[i];
		l->rank = w->first + i;
		l->device = w->device[i];
		if ((ce = cudaSetDevice(l->device)) != cudaSuccess
			|| (ce = cudaStreamCreateWithFlags(&l->stream, cudaStreamNonBlocking)) != cudaSuccess
			|| (ce = cudaEventCreate(&l->start)) != cudaSuccess || (ce = cudaEventCreate(&l->stop)) != cudaSuccess)
			return mb_error_set(err, MB_EDEVICE, "device setup", "rank %d, device %d: %s", l->rank, l->device,
				cudaGetErrorString(ce));
		if (mb_cuda_device_json(&l->identity, l->device, err))
			return err->code;
	}
	/* NVLink multicast stays off unless the environment says otherwise */
	setenv(NVLS_ENV, NVLS_OFF, 0);
	progress_mark();
	if (!w->mpi) {
		nr = ncclCommInitAll(comms, w->size, w->device);
		if (nr != ncclSuccess)
			return mb_error_set(err, MB_EDEVICE, "ncclCommInitAll", "%s", ncclGetErrorString(nr));
		for (int i = 0; i < w->n_local; i++)
			r->local[i].comm = comms[i];
	} else {
#if A2A_MPI
		ncclUniqueId id;
		int root_nr;
		memset(&id, 0, sizeof(id));
		nr = is_root(w) ? ncclGetUniqueId(&id) : ncclSuccess;
		/* every rank learns whether the root has an id before it waits in
		 * ncclCommInitRank for the others */
		root_nr = (int)nr;
		MPI_Bcast(&root_nr, 1, MPI_INT, 0, w->comm);
		MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, w->comm);
		if (root_nr != (int)ncclSuccess)
			return mb_error_set(err, MB_EDEVICE, "ncclGetUniqueId", "rank 0: %s",
				ncclGetErrorString((ncclResult_t)root_nr));
		cudaSetDevice(r->local[0].device);
		nr = ncclCommInitRank(&r->local[0].comm, w->size, id, w->proc);
		if (nr != ncclSuccess)
			return mb_error_set(err, MB_EDEVICE, "ncclCommInitRank", "rank %d: %s", w->proc,
				ncclGetErrorString(nr));
#endif
	}
	return 0;
}

static void world_close(a2a_run *r)
{
	for (int i = 0; i < r->w.n_local; i++) {
		local_rank *l = &r->local[i];
		cudaSetDevice(l->device);
		if (l->comm)
			ncclCommDestroy(l->comm);
		if (l->stream)
			cudaStreamDestroy(l->stream);
		if (l->start)
			cudaEventDestroy(l->start);
		if (l->stop)
			cudaEventDestroy(l->stop);
		json_decref(l->identity);
	}
	mb_cuda_nvml_close();
}

/* ---- the host side of one T ------------------------------------------------- */

static void case_host_free(case_host *h)
{
	for (int g = 0; g < MB_A2A_MAX_GPUS; g++) {
		if (h->want_made[g])
			mb_reference_free(h->want[g], &h->twin[g]);
		mb_host_tensors_free(&h->twin[g]);
		free(h->rows[g]);
	}
	free(h->expert);
	free(h->weight);
	free(h->xhash);
	free(h->sample_of);
	memset(h, 0, sizeof(*h));
}

static void plan_for(mb_case_plan *p, const a2a_run *r, const int64_t *axis, const mb_variant *v)
{
	char shape[192];

	memset(p, 0, sizeof(*p));
	p->row = r->row;
	p->variant = v;
	p->dtype = r->a->dtype;
	p->mode = MB_MODE_HOT;
	p->weight = 1.0;
	snprintf(p->family, sizeof(p->family), "%s", FAMILY);
	memcpy(p->axis, axis, sizeof(p->axis));
	shape_text(shape, sizeof(shape), r->row, axis);
	/* five axes of at most 10 digits: never cut short */
	if (snprintf(p->id, sizeof(p->id), "%s/%s/%s/%s/%s/%s", r->row->name, v->name, mb_dtype_name(p->dtype),
		mb_mode_name(p->mode), p->family, shape) >= (int)sizeof(p->id))
		p->id[sizeof(p->id) - 1] = '\0';
}

/* Every rank's routing from its logits (the host twin of its generator),
 * and the rows each rank receives in each variant's dispatch. */
static int route_all(case_host *h, mb_error *err)
{
	const mb_a2a_dims *d = &h->d;
	const int64_t per_gpu = d->E / d->G, tk = d->T * d->K;
	mb_tensor_spec spec[MB_MAX_TENSORS];
	float *logits = malloc((size_t)(d->T * d->E) * sizeof(float));

	h->expert = malloc((size_t)(d->G * tk) * sizeof(int32_t));
	h->weight = malloc((size_t)(d->G * tk) * sizeof(float));
	if (!logits || !h->expert || !h->weight) {
		free(logits);
		return mb_error_set(err, MB_ENOMEM, h->plan.id, "out of host memory for the routing");
	}
	h->plan.row->tensors(h->axis, spec);
	for (int s = 0; s < d->G; s++) {
		mb_input_params p = mb_input_params_for(&spec[1], 1, h->seed[s]);
		mb_host_fill(logits, (uint64_t)(d->T * d->E), &p, d->dtype);
		for (int64_t t = 0; t < d->T; t++) {
			const int32_t *e = h->expert + s * tk + t * d->K;
			uint64_t seen = 0;
			mb_moe_a2a_route(logits + t * d->E, d->E, d->K, h->expert + s * tk + t * d->K,
				h->weight + s * tk + t * d->K);
			for (int64_t k = 0; k < d->K; k++) {
				const int dst = (int)(e[k] / per_gpu);
				h->cap[MB_A2A_FALLBACK][dst]++;
				if (!(seen >> dst & 1u))
					h->cap[MB_A2A_FUSED][dst]++;
				seen |= 1ull << dst;
			}
		}
	}
	free(logits);
	return 0;
}

/* Each rank's row sample, the inputs it reads (every rank's: received rows
 * are compared with their source's), and the reference for this
 * process's ranks. */
static int sample_all(a2a_run *r, case_host *h, mb_error *err)
{
	const mb_a2a_dims *d = &h->d;
	const int64_t max_rows = r->a->check ? d->T : r->settings.max_check_rows;
	int64_t t0 = mb_now_ns();

	h->sample_of = malloc((size_t)(d->G * d->T) * sizeof(int32_t));
	if (!h->sample_of)
		return mb_error_set(err, MB_ENOMEM, h->plan.id, "out of host memory");
	for (int s = 0; s < d->G; s++) {
		int rc = mb_check_rows_pick(&h->rows[s], &h->n_rows[s], d->T, max_rows, h->rsample[s], err);
		if (!rc)
			rc = mb_host_tensors_twin(&h->twin[s], &h->plan, h->seed[s], h->rows[s], h->n_rows[s], err);
		if (rc)
			return rc;
		for (int64_t t = 0; t < d->T; t++)
			h->sample_of[s * d->T + t] = -1;
		for (int64_t i = 0; i < h->n_rows[s]; i++)
			h->sample_of[s * d->T + mb_ref_row(h->rows[s], i)] = (int32_t)i;
	}
	r->phases.input_generation += mb_now_ns() - t0;
	t0 = mb_now_ns();
	for (int i = 0; i < r->w.n_local; i++) {
		const int g = r->local[i].rank;
		int rc = mb_reference_run(h->want[g], &h->plan, &h->twin[g], h->rows[g], h->n_rows[g], err);
		if (rc)
			return rc;
		h->want_made[g] = true;
	}
	r->phases.reference += mb_now_ns() - t0;
	return 0;
}

/* ---- device arrays of one T -------------------------------------------------- */

static int cuda_error(mb_error *err, const local_rank *l, const char *what, cudaError_t ce)
{
	return mb_error_set(err, ce == cudaErrorMemoryAllocation ? MB_ENOMEM : MB_EDEVICE, what,
		"rank %d (device %d): %s", l->rank, l->device, cudaGetErrorString(ce));
}

static void local_free(local_rank *l)
{
	cudaSetDevice(l->device);
	cudaFree(l->x);
	cudaFree(l->y);
	cudaFree(l->expert);
	cudaFree(l->weight);
	cudaFree(l->hash);
	cudaFree(l->gathered);
	cudaFree(l->gather_rows);
	l->x = l->y = NULL;
	l->expert = NULL;
	l->weight = NULL;
	l->hash = NULL;
	l->gathered = NULL;
	l->gather_rows = NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* A received row is known by its hash, so the hashes of one rank's tokens
 * must tell them apart (a hash kernel that returned a constant would
 * otherwise pass every row). */
static int hashes_distinct(const case_host *h, mb_error *err)
{
	uint64_t *sorted = malloc((size_t)h->d.T * sizeof(*sorted));
	int rc = 0;

	if (!sorted)
		return mb_error_set(err, MB_ENOMEM, h->plan.id, "out of host memory");
	for (int s = 0; s < h->d.G && !rc; s++) {
		memcpy(sorted, h->xhash + s * h->d.T, (size_t)h->d.T * sizeof(*sorted));
		qsort(sorted, (size_t)h->d.T, sizeof(*sorted), cmp_u64);
		for (int64_t t = 1; t < h->d.T && !rc; t++)
			if (sorted[t] == sorted[t - 1])
				rc = mb_error_set(err, MB_EINVAL, h->plan.id, "two of rank %d's tokens have one row hash "
					"(%016" PRIx64 "): the dispatch check could not tell them apart", s, sorted[t]);
	}
	free(sorted);
	return rc;
}

/* x from the generator, the host's routing, y, and scratch for the checks;
 * then x's row hashes, gathered from every rank into h->xhash. */
static int local_make(a2a_run *r, case_host *h, mb_error *err)
{
	const mb_a2a_dims *d = &h->d;
	const size_t row = (size_t)d->H * mb_dtype_size(d->dtype), tk = (size_t)(d->T * d->K);
	mb_tensor_spec spec[MB_MAX_TENSORS];
	uint64_t *mine = malloc((size_t)(r->w.n_local * d->T) * sizeof(uint64_t));
	int64_t cap = d->T;
	int rc = 0;

	h->xhash = malloc((size_t)(d->G * d->T) * sizeof(uint64_t));
	if (!mine || !h->xhash) {
		free(mine);
		return mb_error_set(err, MB_ENOMEM, h->plan.id, "out of host memory");
	}
	for (int v = 0; v < MB_A2A_N_VARIANTS; v++)
		for (int g = 0; g < d->G; g++)
			cap = h->cap[v][g] > cap ? h->cap[v][g] : cap;
	cap = cap > (int64_t)d->G * d->T ? cap : (int64_t)d->G * d->T;
	cap = cap > d->T * d->K ? cap : d->T * d->K;
	h->plan.row->tensors(h->axis, spec);
	for (int i = 0; i < r->w.n_local && !rc; i++) {
		local_rank *l = &r->local[i];
		mb_input_params p = mb_input_params_for(&spec[0], 0, h->seed[l->rank]);
		cudaError_t ce;
		if ((ce = cudaSetDevice(l->device)) != cudaSuccess || (ce = cudaMalloc(&l->x, (size_t)d->T * row)) != cudaSuccess
			|| (ce = cudaMalloc(&l->y, (size_t)d->T * row)) != cudaSuccess
			|| (ce = cudaMalloc((void **)&l->expert, tk * sizeof(int32_t))) != cudaSuccess
			|| (ce = cudaMalloc((void **)&l->weight, tk * sizeof(float))) != cudaSuccess
			|| (ce = cudaMalloc((void **)&l->hash, (size_t)cap * sizeof(uint64_t))) != cudaSuccess
			|| (ce = cudaMalloc((void **)&l->gathered, (size_t)(GATHER_BATCH * d->H) * sizeof(float)))
				!= cudaSuccess
			|| (ce = cudaMalloc((void **)&l->gather_rows, GATHER_BATCH * sizeof(int64_t))) != cudaSuccess) {
			rc = cuda_error(err, l, "case arrays", ce);
			break;
		}
		l->hash_cap = cap;
		if ((ce = (cudaError_t)mb_cuda_fill(l->stream, l->x, (uint64_t)(d->T * d->H), &p, d->dtype)) != cudaSuccess
			|| (ce = cudaMemcpyAsync(l->expert, h->expert + (size_t)l->rank * tk, tk * sizeof(int32_t),
				cudaMemcpyHostToDevice, l->stream)) != cudaSuccess
			|| (ce = cudaMemcpyAsync(l->weight, h->weight + (size_t)l->rank * tk, tk * sizeof(float),
				cudaMemcpyHostToDevice, l->stream)) != cudaSuccess
			|| (ce = (cudaError_t)mb_a2a_row_hash(l->stream, l->x, d->T, (int64_t)row, l->hash)) != cudaSuccess
			|| (ce = cudaMemcpyAsync(mine + (size_t)i * (size_t)d->T, l->hash, (size_t)d->T * sizeof(uint64_t),
				cudaMemcpyDeviceToHost, l->stream)) != cudaSuccess
			|| (ce = cudaStreamSynchronize(l->stream)) != cudaSuccess)
			rc = cuda_error(err, l, "case inputs", ce);
	}
	if (world_agree(&r->w, rc == 0))
		world_gather(&r->w, mine, h->xhash, (size_t)d->T * sizeof(uint64_t), true);
	else if (!rc)
		rc = mb_error_set(err, MB_EDEVICE, h->plan.id, "another rank could not make its inputs");
	free(mine);
	if (!rc)
		rc = hashes_distinct(h, err);
	return rc;
}

/* ---- checks ---------------------------------------------------------------- */

static void problem(rank_result *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void problem(rank_result *res, const char *fmt, ...)
{
	va_list ap;

	res->misplaced++;
	if (res->problem[0])
		return;
	va_start(ap, fmt);
	vsnprintf(res->problem, sizeof(res->problem), fmt, ap);
	va_end(ap);
}

/* Rows `at[i]` of `src` (device, H wide, the dtype) against the source
 * token rows they must hold, bit for bit: src_rank[i]'s token tok[i], from
 * that rank's twin (only sampled tokens are asked for). */
static int compare_full(local_rank *l, const case_host *h, const void *src, const int64_t *at, const int32_t *src_rank,
	const int32_t *tok, int64_t n, rank_result *res, mb_error *err)
{
	const int64_t H = h->d.H;
	float *got = malloc((size_t)(GATHER_BATCH * H) * sizeof(float));
	int rc = 0;

	if (!got)
		return mb_error_set(err, MB_ENOMEM, h->plan.id, "out of host memory");
	for (int64_t b = 0; b < n && !rc; b += GATHER_BATCH) {
		const int64_t m = n - b < GATHER_BATCH ? n - b : GATHER_BATCH;
		cudaError_t ce;
		if ((ce = cudaMemcpyAsync(l->gather_rows, at + b, (size_t)m * sizeof(int64_t), cudaMemcpyHostToDevice,
				l->stream)) != cudaSuccess
			|| (ce = (cudaError_t)mb_cuda_rows_f32(l->stream, l->gathered, src, l->gather_rows, m, H, h->d.dtype, 0))
				!= cudaSuccess
			|| (ce = cudaMemcpyAsync(got, l->gathered, (size_t)(m * H) * sizeof(float), cudaMemcpyDeviceToHost,
				l->stream)) != cudaSuccess
			|| (ce = cudaStreamSynchronize(l->stream)) != cudaSuccess) {
			rc = cuda_error(err, l, "reading received rows back", ce);
			break;
		}
		for (int64_t i = 0; i < m; i++) {
			const float *want = h->twin[src_rank[b + i]].data[0] + (int64_t)tok[b + i] * H;
			res->rows_compared++;
			for (int64_t c = 0; c < H; c++) {
				if (got[i * H + c] != want[c]) {
					problem(res, "received row %lld (rank %d's token %d) differs from it at column %lld: %g, "
						"not %g", (long long)at[b + i], src_rank[b + i], tok[b + i], (long long)c,
						got[i * H + c], want[c]);
					break;
				}
			}
		}
	}
	free(got);
	return rc;
}

/* Hashes of `n` rows of `rows` (device) into host `out`. */
static int hash_rows(local_rank *l, const case_host *h, const void *rows, int64_t n, uint64_t *out, mb_error *err)
{
	const int64_t row = h->d.H * (int64_t)mb_dtype_size(h->d.dtype);
	cudaError_t ce;

	if (n > l->hash_cap)
		return mb_error_set(err, MB_EINVAL, h->plan.id, "rank %d: %lld rows to hash, room for %lld", l->rank,
			(long long)n, (long long)l->hash_cap);
	if (n == 0)
		return 0;
	if ((ce = (cudaError_t)mb_a2a_row_hash(l->stream, rows, n, row, l->hash)) != cudaSuccess
		|| (ce = cudaMemcpyAsync(out, l->hash, (size_t)n * sizeof(uint64_t), cudaMemcpyDeviceToHost, l->stream))
			!= cudaSuccess
		|| (ce = cudaStreamSynchronize(l->stream)) != cudaSuccess)
		return cuda_error(err, l, "hashing rows", ce);
	return 0;
}

/* The rows a dispatch must deliver to rank `d` from `s`, in order:
 * fallback, source s's copies of the experts of d, expert by expert, token
 * order within each (a stable sort by expert); vendors, s's send rows
 * d c .. d c + c - 1, which are x_s[j mod T]. The fused dispatch's order
 * is the pack's and comes with its metadata. Returns the count, tokens in
 * `tok` (NULL: count only). */
static int64_t expected_rows(const case_host *h, mb_a2a_variant v, int s, int d, int32_t *tok, int32_t *per_expert)
{
	const mb_a2a_dims *dm = &h->d;
	const int64_t per_gpu = dm->E / dm->G, tk = dm->T * dm->K;
	const int32_t *ex = h->expert + s * tk;
	int64_t n = 0;

	if (v == MB_A2A_VENDOR_ALLTOALL || v == MB_A2A_VENDOR_SENDRECV) {
		const int64_t c = mb_a2a_vendor_rows_per_peer(dm);
		for (int64_t i = 0; tok && i < c; i++)
			tok[i] = (int32_t)((d * c + i) % dm->T);
		return c;
	}
	for (int64_t j = 0; j < per_gpu; j++) {
		const int32_t e = (int32_t)(d * per_gpu + j);
		int64_t here = 0;
		for (int64_t t = 0; t < dm->T; t++)
			for (int64_t k = 0; k < dm->K; k++)
				if (ex[t * dm->K + k] == e) {
					if (tok)
						tok[n + here] = (int32_t)t;
					here++;
				}
		if (per_expert)
			per_expert[j] = (int32_t)here;
		n += here;
	}
	return n;
}

/* The fused dispatch's metadata for row p from s: a token routed here,
 * not seen before, with its experts here and their weights in k order. */
static void check_meta(const case_host *h, const mb_a2a_meta *m, int s, int d, int64_t p, unsigned char *seen,
	rank_result *res)
{
	const mb_a2a_dims *dm = &h->d;
	const int64_t per_gpu = dm->E / dm->G, tk = dm->T * dm->K;
	int n = 0;

	if (m->token < 0 || m->token >= dm->T) {
		problem(res, "received row %lld from rank %d names token %d, outside 0..%lld", (long long)p, s, m->token,
			(long long)dm->T - 1);
		return;
	}
	if (seen[m->token]++) {
		problem(res, "rank %d's token %d arrived twice", s, m->token);
		return;
	}
	for (int64_t k = 0; k < dm->K; k++) {
		const int32_t e = h->expert[s * tk + m->token * dm->K + k];
		const float w = h->weight[s * tk + m->token * dm->K + k];
		if (e / per_gpu != d)
			continue;
		if (n >= m->n || m->expert[n] != e || memcmp(&m->weight[n], &w, sizeof(w)) != 0) {
			problem(res, "rank %d's token %d arrived with experts or weights that are not its routing's "
				"(expert %d, weight %.9g expected at place %d)", s, m->token, e, (double)w, n);
			return;
		}
		n++;
	}
	if (n == 0 || m->n != n)
		problem(res, "rank %d's token %d arrived with %d experts; its routing has %d here", s, m->token, m->n, n);
}

/* Tokens of source s with at least one expert on rank d: the fused
 * dispatch's rows from s to d. */
static int64_t tokens_routed(const case_host *h, int s, int d)
{
	const mb_a2a_dims *dm = &h->d;
	const int64_t per_gpu = dm->E / dm->G;
	const int32_t *ex = h->expert + s * dm->T * dm->K;
	int64_t n = 0;

	for (int64_t t = 0; t < dm->T; t++)
		for (int64_t k = 0; k < dm->K; k++)
			if (ex[t * dm->K + k] / per_gpu == d) {
				n++;
				break;
			}
	return n;
}

/* What rank `l` received in the last call's dispatch (and, for the
 * vendors, what came back), against the routing: the counts from every
 * source exactly, every row by its hash, and with `full` the sampled
 * tokens' rows in full. */
static int check_dispatch(local_rank *l, const case_host *h, mb_a2a_rank *ar, mb_a2a_variant v, bool full,
	rank_result *res, mb_error *err)
{
	const mb_a2a_dims *dm = &h->d;
	const int64_t per_gpu = dm->E / dm->G;
	const int d = l->rank;
	const bool vendor = v == MB_A2A_VENDOR_ALLTOALL || v == MB_A2A_VENDOR_SENDRECV;
	const size_t seen_bytes = dm->T > 0 && dm->T <= INT32_MAX ? (size_t)dm->T : 1;
	mb_a2a_view view;
	int64_t total = 0, n_full = 0;
	uint64_t *got = NULL;
	int32_t *tok = NULL, *full_src = NULL, *full_tok = NULL, per_expert[MB_A2A_MAX_E];
	int64_t *full_at = NULL;
	mb_a2a_meta *meta = NULL;
	unsigned char *seen = NULL;
	int rc = 0;

	mb_a2a_rank_view(ar, &view);
	for (int s = 0; s < dm->G; s++)
		total += view.recv_rows[s];
	got = malloc((size_t)(total + 1) * sizeof(*got));
	tok = malloc((size_t)(total + 1) * sizeof(*tok));
	full_src = malloc((size_t)(total + 1) * sizeof(*full_src));
	full_tok = malloc((size_t)(total + 1) * sizeof(*full_tok));
	full_at = malloc((size_t)(total + 1) * sizeof(*full_at));
	seen = calloc(seen_bytes, 1);
	if (v == MB_A2A_FUSED)
		meta = malloc((size_t)(total + 1) * sizeof(*meta));
	if (!got || !tok || !full_src || !full_tok || !full_at || !seen || (v == MB_A2A_FUSED && !meta)) {
		rc = mb_error_set(err, MB_ENOMEM, h->plan.id, "out of host memory");
		goto cleanup;
	}
	if ((rc = hash_rows(l, h, view.recv, total, got, err)))
		goto cleanup;
	if (meta && total > 0) {
		cudaError_t ce = cudaMemcpy(meta, view.recv_meta, (size_t)total * sizeof(*meta), cudaMemcpyDeviceToHost);
		if (ce != cudaSuccess) {
			rc = cuda_error(err, l, "reading the received metadata", ce);
			goto cleanup;
		}
	}
	for (int s = 0; s < dm->G; s++) {
		const int64_t off = view.recv_off[s], n = view.recv_rows[s];
		const int64_t want = v == MB_A2A_FUSED ? tokens_routed(h, s, d) : expected_rows(h, v, s, d, NULL, per_expert);
		if (n != want) {
			problem(res, "%lld rows arrived from rank %d, its routing sends %lld", (long long)n, s, (long long)want);
			continue;
		}
		if (v == MB_A2A_FALLBACK) {
			for (int64_t j = 0; j < per_gpu; j++)
				if (view.recv_expert_counts[s * per_gpu + j] != per_expert[j])
					problem(res, "rank %d announced %d rows for expert %lld, its routing has %d", s,
						view.recv_expert_counts[s * per_gpu + j], (long long)(d * per_gpu + j), per_expert[j]);
		}
		/* which token each row must be: the routing's order, or for the
		 * fused dispatch the metadata's (checked against the routing) */
		if (meta) {
			memset(seen, 0, seen_bytes);
			for (int64_t i = 0; i < n; i++) {
				check_meta(h, &meta[off + i], s, d, off + i, seen, res);
				tok[off + i] = meta[off + i].token >= 0 && meta[off + i].token < dm->T ? meta[off + i].token : 0;
			}
		} else {
			expected_rows(h, v, s, d, tok + off, NULL);
		}
		for (int64_t i = 0; i < n; i++) {
			const int64_t p = off + i;
			res->rows_hashed++;
			if (got[p] != h->xhash[s * dm->T + tok[p]])
				problem(res, "received row %lld is not rank %d's token %d (row hash differs)", (long long)p, s,
					tok[p]);
			if (full && h->sample_of[s * dm->T + tok[p]] >= 0) {
				full_at[n_full] = p;
				full_src[n_full] = s;
				full_tok[n_full] = tok[p];
				n_full++;
			}
		}
	}
	res->dispatch_rows_received = total;
	if (n_full && (rc = compare_full(l, h, view.recv, full_at, full_src, full_tok, n_full, res, err)))
		goto cleanup;
	if (vendor) {
		/* the return leg: ret's chunk p is what p echoed of our chunk p,
		 * our send rows p c .. p c + c - 1, which are x[j mod T] */
		const int64_t c = mb_a2a_vendor_rows_per_peer(dm), n = c * dm->G;
		if ((rc = hash_rows(l, h, view.ret, n, got, err)))
			goto cleanup;
		for (int64_t j = 0; j < n; j++) {
			res->rows_hashed++;
			if (got[j] != h->xhash[(int64_t)d * dm->T + j % dm->T])
				problem(res, "returned row %lld is not this rank's row %lld", (long long)j, (long long)(j % dm->T));
		}
	}
cleanup:
	free(got);
	free(tok);
	free(full_src);
	free(full_tok);
	free(full_at);
	free(seen);
	free(meta);
	return rc;
}

/* y on rank `l`, sampled tokens, against the reference. */
static int check_output(local_rank *l, const case_host *h, mb_check *out, mb_error *err)
{
	const int g = l->rank;
	const int64_t H = h->d.H, n = h->n_rows[g];
	const mb_tolerance *tol = &h->plan.row->tolerance[h->d.dtype];
	mb_tensor_spec spec[MB_MAX_TENSORS];
	float *got = malloc((size_t)(GATHER_BATCH * H) * sizeof(float));
	int64_t *idx = malloc((size_t)GATHER_BATCH * sizeof(int64_t));
	int rc = 0;

	mb_check_init(out);
	h->plan.row->tensors(h->axis, spec);
	if (!got || !idx) {
		rc = mb_error_set(err, MB_ENOMEM, h->plan.id, "out of host memory");
		goto cleanup;
	}
	for (int64_t b = 0; b < n; b += GATHER_BATCH) {
		const int64_t m = n - b < GATHER_BATCH ? n - b : GATHER_BATCH;
		cudaError_t ce;
		for (int64_t i = 0; i < m; i++)
			idx[i] = mb_ref_row(h->rows[g], b + i);
		if ((ce = cudaMemcpyAsync(l->gather_rows, idx, (size_t)m * sizeof(int64_t), cudaMemcpyHostToDevice,
				l->stream)) != cudaSuccess
			|| (ce = (cudaError_t)mb_cuda_rows_f32(l->stream, l->gathered, l->y, l->gather_rows, m, H, h->d.dtype, 0))
				!= cudaSuccess
			|| (ce = cudaMemcpyAsync(got, l->gathered, (size_t)(m * H) * sizeof(float), cudaMemcpyDeviceToHost,
				l->stream)) != cudaSuccess
			|| (ce = cudaStreamSynchronize(l->stream)) != cudaSuccess) {
			rc = cuda_error(err, l, "reading y back", ce);
			goto cleanup;
		}
		mb_check_add_packed(out, &spec[2], got, h->want[g][2], idx, m, h->d.T, tol);
	}
cleanup:
	free(got);
	free(idx);
	return rc;
}

/* ---- one case ------------------------------------------------------------------ */

/* One call on every local rank, synchronised; `ns` (may be NULL) gets the
 * slowest local rank's event time. */
static int timed_call(a2a_run *r, mb_a2a_rank **ranks, double *ns, char *why, size_t why_len)
{
	cudaError_t ce = cudaSuccess;
	float ms, worst = 0;

	for (int i = 0; i < r->w.n_local && ce == cudaSuccess; i++) {
		ce = cudaSetDevice(r->local[i].device);
		if (ce == cudaSuccess)
			ce = cudaEventRecord(r->local[i].start, r->local[i].stream);
	}
	if (ce == cudaSuccess && mb_a2a_call(ranks, r->w.n_local, why, why_len))
		return -1;
	for (int i = 0; i < r->w.n_local && ce == cudaSuccess; i++) {
		ce = cudaSetDevice(r->local[i].device);
		if (ce == cudaSuccess)
			ce = cudaEventRecord(r->local[i].stop, r->local[i].stream);
	}
	for (int i = 0; i < r->w.n_local && ce == cudaSuccess; i++) {
		ce = cudaEventSynchronize(r->local[i].stop);
		if (ce == cudaSuccess)
			ce = cudaEventElapsedTime(&ms, r->local[i].start, r->local[i].stop);
		if (ce == cudaSuccess && ms > worst)
			worst = ms;
	}
	if (ce != cudaSuccess) {
		snprintf(why, why_len, "%s", cudaGetErrorString(ce));
		return -1;
	}
	if (ns)
		*ns = (double)worst * NS_PER_MS;
	return 0;
}

static int poison_all(a2a_run *r, mb_a2a_rank **ranks, char *why, size_t why_len)
{
	for (int i = 0; i < r->w.n_local; i++)
		if (mb_a2a_rank_poison(ranks[i], why, why_len))
			return -1;
	return 0;
}

/* Bytes one call moves for rank `ar` (dispatch and combine; the rows to
 * itself included, as nccl-tests counts them). */
static void count_bytes(const case_host *h, mb_a2a_rank *ar, int self, rank_result *res)
{
	const int64_t row = h->d.H * (int64_t)mb_dtype_size(h->d.dtype);
	mb_a2a_view v;

	mb_a2a_rank_view(ar, &v);
	res->sent_bytes = res->received_bytes = res->remote_sent_bytes = res->dispatch_rows_sent = 0;
	for (int p = 0; p < v.G; p++) {
		const int64_t out = v.send_rows[p] * (row + v.meta_bytes) + v.recv_rows[p] * row;
		res->sent_bytes += out;
		res->received_bytes += v.recv_rows[p] * (row + v.meta_bytes) + v.send_rows[p] * row;
		res->dispatch_rows_sent += v.send_rows[p];
		if (p != self)
			res->remote_sent_bytes += out;
	}
}

typedef struct variant_run {
	mb_a2a_variant v;
	const mb_variant *desc;
	mb_case_plan plan;
	rank_result res[MB_A2A_MAX_GPUS];   /* local ranks' */
	rank_result all[MB_A2A_MAX_GPUS];   /* every rank's, at the root */
	double *samples;                     /* samples, the slowest rank's */
	int64_t sampling_ns;
	char why[WHY_BYTES];
	bool fatal;                          /* a call or a check could not run */
} variant_run;

/* The first or last checked call's checks on every local rank. */
static int check_all(a2a_run *r, const case_host *h, mb_a2a_rank **ranks, variant_run *vr, bool first, mb_error *err)
{
	const bool vendor = vr->v == MB_A2A_VENDOR_ALLTOALL || vr->v == MB_A2A_VENDOR_SENDRECV;

	for (int i = 0; i < r->w.n_local; i++) {
		rank_result *res = &vr->res[i];
		cudaError_t ce = cudaSetDevice(r->local[i].device);
		if (ce != cudaSuccess)
			return cuda_error(err, &r->local[i], "cudaSetDevice", ce);
		int rc = check_dispatch(&r->local[i], h, ranks[i], vr->v, first, res, err);
		if (!rc && !vendor) {
			rc = check_output(&r->local[i], h, first ? &res->first : &res->last, err);
			res->rows_checked = h->n_rows[r->local[i].rank];
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* One checked call on every local rank: outputs poisoned, the call, then
 * the first or last call's checks; its time is correctness badput. False
 * with vr->why set when any step fails here. */
static bool checked_call(a2a_run *r, const case_host *h, mb_a2a_rank **ranks, variant_run *vr, bool first)
{
	int64_t t0 = mb_now_ns();
	mb_error err;
	bool ok;

	progress_mark();
	mb_error_clear(&err);
	ok = poison_all(r, ranks, vr->why, sizeof(vr->why)) == 0
		&& timed_call(r, ranks, NULL, vr->why, sizeof(vr->why)) == 0;
	if (ok && check_all(r, h, ranks, vr, first, &err)) {
		mb_error_format(&err, vr->why, sizeof(vr->why));
		ok = false;
	}
	r->phases.correctness += mb_now_ns() - t0;
	return ok;
}

/* Open, check, warm up, time, check again, close: the local side of one
 * variant's case. Failures leave vr->fatal and vr->why set. */
static void run_variant(a2a_run *r, const case_host *h, variant_run *vr)
{
	const a2a_args *a = r->a;
	mb_a2a_rank *ranks[MB_A2A_MAX_GPUS] = {NULL};
	size_t free_before[MB_A2A_MAX_GPUS] = {0};
	int64_t t0;
	bool ok = true;

	for (int i = 0; i < r->w.n_local; i++) {
		vr->res[i].rank = r->local[i].rank;
		vr->res[i].device = r->local[i].device;
	}
	for (int i = 0; i < r->w.n_local; i++) {
		local_rank *l = &r->local[i];
		mb_a2a_io io = {l->x, l->expert, l->weight, l->y};
		size_t free_after = 0, total = 0;
		cudaSetDevice(l->device);
		cudaMemGetInfo(&free_before[i], &total);
		if (mb_a2a_rank_open(&ranks[i], &h->d, vr->v, l->rank, l->device, l->comm, l->stream, &io,
			h->cap[vr->v][l->rank], vr->why, sizeof(vr->why))) {
			ok = false;
			break;
		}
		cudaMemGetInfo(&free_after, &total);
		vr->res[i].device_bytes = (int64_t)(free_before[i] > free_after ? free_before[i] - free_after : 0)
			+ h->d.T * h->d.H * 2 * (int64_t)mb_dtype_size(h->d.dtype);
	}
	if (!world_agree(&r->w, ok))
		goto fail;
	/* the first call, checked in full */
	ok = checked_call(r, h, ranks, vr, true);
	if (!world_agree(&r->w, ok))
		goto fail;
	for (int i = 0; i < r->w.n_local; i++)
		count_bytes(h, ranks[i], r->local[i].rank, &vr->res[i]);
	/* warm-up, then the timed calls */
	t0 = mb_now_ns();
	progress_mark();
	for (int64_t k = 0; k < a->warmup && ok; k++)
		ok = timed_call(r, ranks, NULL, vr->why, sizeof(vr->why)) == 0;
	r->phases.warmup += mb_now_ns() - t0;
	t0 = mb_now_ns();
	for (int64_t k = 0; k < a->samples && ok; k++) {
		progress_mark();
		ok = timed_call(r, ranks, &vr->samples[k], vr->why, sizeof(vr->why)) == 0;
		if (ok && is_root(&r->w) && r->con.progress.case_tick)
			r->con.progress.case_tick(r->con.progress.ctx, r->case_index, (int)k + 1, 0.0,
				(double)(mb_now_ns() - t0) / NS_PER_S);
	}
	vr->sampling_ns = mb_now_ns() - t0;
	if (!world_agree(&r->w, ok))
		goto fail;
	/* the last call: poisoned first, checked again */
	ok = checked_call(r, h, ranks, vr, false);
	if (!world_agree(&r->w, ok))
		goto fail;
	for (int i = 0; i < r->w.n_local; i++)
		vr->res[i].ok = 1;
	goto done;
fail:
	vr->fatal = true;
	for (int i = 0; i < r->w.n_local; i++)
		if (!vr->res[i].problem[0])
			snprintf(vr->res[i].problem, sizeof(vr->res[i].problem), "%.255s",
				vr->why[0] ? vr->why : OTHER_RANK_FAILED);
done:
	for (int i = 0; i < r->w.n_local; i++)
		mb_a2a_rank_close(ranks[i]);
	world_gather(&r->w, vr->res, vr->all, sizeof(rank_result), false);
	world_max(&r->w, vr->samples, (int)a->samples);
}

/* ---- the case's JSON (root) -------------------------------------------------- */

static json_t *exact_correctness(const case_host *h, uint64_t hashed, uint64_t misplaced)
{
	json_t *o = json_object();

	json_object_set_new(o, "reference", json_string("the rows sent, bit for bit: every received and returned row "
		"by a 64-bit hash of its bits, the sampled tokens' rows in full"));
	json_object_set_new(o, "tolerance", json_pack("{s:f, s:f, s:s}", "abs", 0.0, "rel", 0.0, "rationale",
		"bytes moved, not computed: exact"));
	json_object_set_new(o, "max_abs", json_null());
	json_object_set_new(o, "max_rel", json_null());
	json_object_set_new(o, "rel_l2", json_null());
	json_object_set_new(o, "over_tolerance", json_integer((json_int_t)misplaced));
	json_object_set_new(o, "nan_count", json_integer(0));
	json_object_set_new(o, "inf_count", json_integer(0));
	json_object_set_new(o, "norm_ratio", json_null());
	json_object_set_new(o, "rows_checked", json_integer((json_int_t)hashed));
	json_object_set_new(o, "rows_total", json_integer((json_int_t)hashed));
	json_object_set_new(o, "input_seed", json_integer((json_int_t)h->input_seed));
	json_object_set_new(o, "checks", json_pack("[s,s]", "first", "last"));
	json_object_set_new(o, "passed", json_boolean(misplaced == 0 && hashed > 0));
	return o;
}

static json_t *ranks_json(const a2a_run *r, const variant_run *vr, json_t *const *identity)
{
	json_t *list = json_array();

	for (int g = 0; g < r->w.size; g++) {
		const rank_result *x = &vr->all[g];
		mb_check both = x->first;
		json_t *o, *dev = identity[g];
		mb_check_merge(&both, &x->last);
		o = json_pack("{s:i, s:i, s:s?, s:s?, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b}", "rank", x->rank,
			"device_index", x->device, "device_name", json_string_value(json_object_get(dev, "name")), "device_uuid",
			json_string_value(json_object_get(dev, "uuid")), "sent_bytes", (json_int_t)x->sent_bytes,
			"received_bytes", (json_int_t)x->received_bytes, "remote_sent_bytes", (json_int_t)x->remote_sent_bytes,
			"dispatch_rows_sent", (json_int_t)x->dispatch_rows_sent, "dispatch_rows_received",
			(json_int_t)x->dispatch_rows_received, "rows_hashed", (json_int_t)x->rows_hashed, "rows_compared",
			(json_int_t)x->rows_compared, "misplaced", (json_int_t)x->misplaced, "device_bytes",
			(json_int_t)x->device_bytes, "passed", x->ok && x->misplaced == 0 && (x->rows_checked == 0
				|| (mb_check_passed(&x->first) && mb_check_passed(&x->last))));
		if (x->rows_checked > 0) {
			json_object_set_new(o, "output_rows_checked", json_integer(x->rows_checked));
			json_object_set_new(o, "output_max_rel", both.compared ? json_real(both.max_rel) : json_null());
		}
		if (x->problem[0])
			json_object_set_new(o, "first_problem", json_string(x->problem));
		json_array_append_new(list, o);
	}
	return list;
}

/* The case as the receipt holds it, from every rank's result. */
static json_t *case_json(a2a_run *r, const case_host *h, variant_run *vr, json_t *const *identity)
{
	const int G = r->w.size;
	const bool vendor = vr->v == MB_A2A_VENDOR_ALLTOALL || vr->v == MB_A2A_VENDOR_SENDRECV;
	const mb_tolerance *tol = &r->row->tolerance[h->d.dtype];
	json_t *c = mb_case_json_new(&vr->plan, "cuda"), *coll;
	mb_check merged;
	mb_sampler s;
	mb_error err;
	uint64_t hashed = 0, misplaced = 0;
	int64_t rows_checked = 0, sent = 0, peak = 0;
	bool all_ok = true;
	double median, bytes, algbw, busbw;

	mb_check_init(&merged);
	for (int g = 0; g < G; g++) {
		const rank_result *x = &vr->all[g];
		hashed += x->rows_hashed;
		misplaced += x->misplaced;
		rows_checked += x->rows_checked;
		sent += x->sent_bytes;
		peak = x->device_bytes > peak ? x->device_bytes : peak;
		all_ok = all_ok && x->ok;
		mb_check_merge(&merged, &x->first);
		mb_check_merge(&merged, &x->last);
		if (x->misplaced)
			mb_case_json_add_finding(c, "correctness", "rank %d: %" PRIu64 " of %" PRIu64 " received rows or counts "
				"not as the routing says; first: %s", x->rank, x->misplaced, x->rows_hashed, x->problem);
		else if (x->rows_checked && !(mb_check_passed(&x->first) && mb_check_passed(&x->last))) {
			char text[256];
			mb_check_describe(mb_check_passed(&x->first) ? &x->last : &x->first, text, sizeof(text));
			mb_case_json_add_finding(c, "correctness", "rank %d: y %s", x->rank, text);
		}
	}
	json_object_set_new(json_object_get(c, "memory"), "io_bytes", json_integer(peak));
	if (vr->fatal || !all_ok) {
		char text[WHY_BYTES + 64];
		/* the root's own error, else the first rank that had one of its own */
		snprintf(text, sizeof(text), "%s", vr->why[0] ? vr->why : "a rank failed");
		for (int g = 0; g < G && !vr->why[0]; g++) {
			if (vr->all[g].problem[0] && strcmp(vr->all[g].problem, OTHER_RANK_FAILED) != 0) {
				snprintf(text, sizeof(text), "rank %d: %s", g, vr->all[g].problem);
				break;
			}
		}
		mb_case_json_set_status(c, strstr(text, "out of memory") ? "oom" : "crashed", text);
		return c;
	}
	/* correctness: y against the reference on every rank, and the dispatch
	 * exactly as routed */
	if (vendor) {
		json_object_set_new(c, "correctness", exact_correctness(h, hashed, misplaced));
	} else {
		json_t *corr = mb_correctness_json(&merged, r->row->reference_name, tol, rows_checked,
			(int64_t)G * h->d.T, h->input_seed, h->row_seed, json_pack("[s,s]", "first", "last"));
		if (misplaced)
			json_object_set_new(corr, "passed", json_false());
		json_object_set_new(c, "correctness", corr);
	}
	if (!json_is_true(json_object_get(json_object_get(c, "correctness"), "passed")))
		mb_case_json_set_status(c, "failed", NULL);
	/* timing: each call the slowest rank's */
	mb_error_clear(&err);
	if (mb_sampler_init(&s, &r->settings, &err) == 0) {
		for (int64_t k = 0; k < r->a->samples; k++)
			mb_sampler_add(&s, vr->samples[k], false, &err);
		median = mb_sampler_median(&s);
		json_t *timing = mb_sampler_json(&s, "events", (int)r->a->warmup,
			mb_sampler_rel_noise(&s) <= r->settings.max_noise);
		json_object_set_new(timing, "sampling_ns", json_integer(vr->sampling_ns));
		json_object_set_new(timing, "launches_per_call", json_integer(vr->desc->launches_per_call));
		json_object_set_new(c, "timing", timing);
		if (!json_is_true(json_object_get(timing, "converged")))
			mb_case_json_add_finding(c, "not_converged", "relative noise of the median %.2f%% after %lld calls, "
				"over the %.2f%% target", 100 * mb_sampler_rel_noise(&s), (long long)r->a->samples,
				100 * r->settings.max_noise);
		r->phases.goodput += mb_sampler_kept_sum_ns(&s);
		mb_sampler_free(&s);
	} else {
		median = NAN;
	}
	/* nccl-tests' all-to-all bandwidth: bytes each rank sends (the mean
	 * over ranks: routing loads them unevenly) over the time */
	bytes = (double)sent / G;
	algbw = median > 0 ? bytes / median : NAN; /* bytes per ns = GB/s */
	busbw = algbw * (G - 1) / G;
	json_object_set_new(c, "throughput", json_pack("{s:I, s:I, s:o, s:o, s:n, s:n}", "bytes", (json_int_t)llround(bytes),
		"flops", (json_int_t)(vendor ? 0 : r->row->flops(h->axis)), "gbps", isfinite(algbw) ? json_real(algbw)
		: json_null(), "tflops", vendor || !(median > 0) ? json_null() : json_real((double)r->row->flops(h->axis)
		/ median / 1e3), "ceiling", "fraction_of_ceiling"));
	coll = json_pack("{s:i, s:s, s:s, s:s, s:I, s:s, s:o, s:o}", "gpus", G, "launcher", r->w.mpi ? "mpi"
		: "single_process", "nvls_enable", getenv(NVLS_ENV) ? getenv(NVLS_ENV) : "", "nccl_version", r->nccl_version,
		"bytes_per_rank", (json_int_t)llround(bytes), "bytes_definition", "bytes each rank sends per call, dispatch "
		"and combine, its rows to itself included (mean over ranks), as nccl-tests' alltoall counts them",
		"algbw_gbps", isfinite(algbw) ? json_real(algbw) : json_null(), "busbw_gbps", isfinite(busbw)
		? json_real(busbw) : json_null());
	json_object_set_new(coll, "ranks", ranks_json(r, vr, identity));
	json_object_set_new(c, "collective", coll);
	return c;
}

/* Once every variant of a T has run: each case's busbw against the best
 * vendor's, and the collective record moved into a notice when the
 * schema has no place for it yet. */
static void finish_size(a2a_run *r, size_t first_case)
{
	double vendor = NAN;
	size_t i;
	json_t *c;

	for (i = first_case; i < json_array_size(r->cases); i++) {
		c = json_array_get(r->cases, i);
		double b = json_number_value(json_object_get(json_object_get(c, "collective"), "busbw_gbps"));
		if (strcmp(json_string_value(json_object_get(c, "variant_kind")), "vendor") == 0
			&& strcmp(json_string_value(json_object_get(c, "status")), "ok") == 0 && b > 0
			&& !(b <= vendor))
			vendor = b;
	}
	for (i = first_case; i < json_array_size(r->cases); i++) {
		json_t *coll;
		char text[NOTE_BYTES], frac[128] = "";
		c = json_array_get(r->cases, i);
		coll = json_object_get(c, "collective");
		if (!coll)
			continue;
		double b = json_number_value(json_object_get(coll, "busbw_gbps"));
		json_object_set_new(coll, "vendor_busbw_gbps", isfinite(vendor) ? json_real(vendor) : json_null());
		json_object_set_new(coll, "busbw_fraction_of_vendor", isfinite(vendor) && b > 0 ? json_real(b / vendor)
			: json_null());
		if (isfinite(vendor) && b > 0)
			snprintf(frac, sizeof(frac), " (%.3f of NCCL's all-to-all here, %.1f GB/s)", b / vendor, vendor);
		snprintf(text, sizeof(text), "%s: %d GPUs, %.0f bytes per rank, algbw %.1f GB/s, busbw %.1f GB/s%s",
			json_string_value(json_object_get(c, "id")), (int)json_integer_value(json_object_get(coll, "gpus")),
			json_number_value(json_object_get(coll, "bytes_per_rank")),
			json_number_value(json_object_get(coll, "algbw_gbps")), b, frac);
		notice(r, "%s", text);
		if (!r->collective_in_schema) {
			/* until the schema takes it: the record, compact, as a notice */
			char *dump = json_dumps(coll, JSON_COMPACT);
			if (dump)
				json_array_append_new(r->notices, json_sprintf("collective %s %s",
					json_string_value(json_object_get(c, "id")), dump));
			free(dump);
			json_object_del(c, "collective");
		}
	}
}

/* A case that never ran. */
static void skip_case(a2a_run *r, const mb_case_plan *plan, const char *why)
{
	json_t *c = mb_case_json_new(plan, "cuda");

	mb_case_json_set_status(c, "skipped", why);
	if (is_root(&r->w)) {
		json_array_append_new(r->cases, c);
		r->con.progress.case_done(r->con.progress.ctx, r->case_index, plan, c);
	} else {
		json_decref(c);
	}
	r->case_index++;
}

/* Every variant at one T. After a failed call the communicators are not
 * to be trusted: *stopped_why says why, and every later case is skipped. */
static void run_size(a2a_run *r, int64_t tokens, json_t *const *identity, const char **stopped_why, char *why_buf,
	size_t why_len)
{
	const a2a_args *a = r->a;
	case_host h;
	mb_error err;
	size_t first_case = json_array_size(r->cases);
	bool alive = true, ready;
	int64_t t0 = mb_now_ns();
	char name[64];

	memset(&h, 0, sizeof(h));
	mb_error_clear(&err);
	if (*stopped_why) {
		/* the communicators are not to be trusted after a failed call */
		int64_t axis[MB_MAX_AXES] = {tokens, a->hidden, a->experts, a->topk, r->w.size};
		for (int v = 0; v < MB_A2A_N_VARIANTS; v++) {
			mb_case_plan plan;
			if (!a->variant_on[v])
				continue;
			plan_for(&plan, r, axis, mb_row_find_variant(r->row, mb_a2a_variant_name((mb_a2a_variant)v)));
			skip_case(r, &plan, *stopped_why);
		}
		return;
	}
	h.d = (mb_a2a_dims){tokens, a->hidden, a->experts, a->topk, r->w.size, a->dtype};
	h.axis[MB_A2A_AX_T] = tokens;
	h.axis[MB_A2A_AX_H] = a->hidden;
	h.axis[MB_A2A_AX_E] = a->experts;
	h.axis[MB_A2A_AX_K] = a->topk;
	h.axis[MB_A2A_AX_G] = r->w.size;
	plan_for(&h.plan, r, h.axis, mb_row_find_variant(r->row, "reference"));
	mb_driver_group_seeds(&h.plan, r->settings.seed, &h.input_seed, &h.row_seed);
	for (int g = 0; g < r->w.size; g++) {
		snprintf(name, sizeof(name), "rank=%d", g);
		h.seed[g] = mb_case_seed(h.input_seed, name);
		h.rsample[g] = mb_case_seed(h.row_seed, name);
	}
	progress_mark();
	ready = route_all(&h, &err) == 0;
	r->phases.input_generation += mb_now_ns() - t0;
	ready = ready && sample_all(r, &h, &err) == 0;
	/* every process enters local_make (it gathers) or none does */
	ready = world_agree(&r->w, ready);
	t0 = mb_now_ns();
	ready = ready && local_make(r, &h, &err) == 0;
	r->phases.input_generation += mb_now_ns() - t0;
	ready = world_agree(&r->w, ready);
	for (int v = 0; v < MB_A2A_N_VARIANTS; v++) {
		variant_run vr;
		if (!a->variant_on[v])
			continue;
		memset(&vr, 0, sizeof(vr));
		vr.v = (mb_a2a_variant)v;
		vr.desc = mb_row_find_variant(r->row, mb_a2a_variant_name(vr.v));
		plan_for(&vr.plan, r, h.axis, vr.desc);
		if (!ready || !alive) {
			if (!ready && !*stopped_why) {
				mb_error_format(&err, why_buf, why_len);
				*stopped_why = why_buf[0] ? why_buf : "another rank could not make its inputs";
			}
			skip_case(r, &vr.plan, *stopped_why ? *stopped_why : "not run");
			continue;
		}
		if (is_root(&r->w))
			r->con.progress.case_start(r->con.progress.ctx, r->case_index, &vr.plan);
		vr.samples = calloc((size_t)a->samples, sizeof(double));
		if (!vr.samples) {
			skip_case(r, &vr.plan, "out of host memory");
			continue;
		}
		run_variant(r, &h, &vr);
		if (is_root(&r->w)) {
			json_t *c = case_json(r, &h, &vr, identity);
			json_array_append_new(r->cases, c);
			r->con.progress.case_done(r->con.progress.ctx, r->case_index, &vr.plan, c);
		}
		r->case_index++;
		if (vr.fatal) {
			alive = false;
			snprintf(why_buf, why_len, "not run: %.255s failed before it (%.700s)", vr.plan.id, vr.why[0] ? vr.why
				: "a rank failed");
			*stopped_why = why_buf;
		}
		free(vr.samples);
	}
	for (int i = 0; i < r->w.n_local; i++)
		local_free(&r->local[i]);
	case_host_free(&h);
	if (is_root(&r->w))
		finish_size(r, first_case);
}

/* ---- the receipt ------------------------------------------------------------- */

static json_t *settings_json(const a2a_run *r)
{
	json_t *variants = json_array();

	for (int v = 0; v < MB_A2A_N_VARIANTS; v++)
		if (r->a->variant_on[v])
			json_array_append_new(variants, json_string(mb_a2a_variant_name((mb_a2a_variant)v)));
	return json_pack("{s:s, s:I, s:[s], s:f, s:i, s:i, s:f, s:f, s:i, s:I, s:[s], s:[s], s:o, s:i}",
		"backend_requested", "cuda", "seed", (json_int_t)r->settings.seed, "modes", "hot", "max_noise",
		r->settings.max_noise, "min_samples", r->settings.min_samples, "max_samples", r->settings.max_samples,
		"min_time_s", r->settings.min_time_s, "timeout_s", r->settings.timeout_s, "warmup", r->settings.warmup,
		"max_check_rows", (json_int_t)r->settings.max_check_rows, "rows", ROW_NAME, "dtypes",
		mb_dtype_name(r->a->dtype), "variants", variants, "repetitions", 1);
}

/* What the run was, in place of a suite file: the settings as text, and
 * their blob id, so that two receipts of the same settings compare. */
static json_t *suite_json(const a2a_run *r)
{
	char text[NOTE_BYTES], tokens[256] = "", blob[MB_OID_HEX_LEN + 1];
	size_t used = 0;

	for (int i = 0; i < r->a->n_tokens && used < sizeof(tokens); i++)
		used += (size_t)snprintf(tokens + used, sizeof(tokens) - used, "%s%lld", i ? "," : "",
			(long long)r->a->tokens[i]);
	snprintf(text, sizeof(text), "megabench alltoall: moe_alltoall on %d GPUs, T=%s H=%lld E=%lld K=%lld %s, "
		"%lld timed calls after %lld", r->w.size, tokens, (long long)r->a->hidden, (long long)r->a->experts,
		(long long)r->a->topk, mb_dtype_name(r->a->dtype), (long long)r->a->samples, (long long)r->a->warmup);
	if (mb_blob_id(blob, text, strlen(text)))
		snprintf(blob, sizeof(blob), "%040d", 0);
	return json_pack("{s:s, s:s, s:s, s:s}", "path", "(megabench alltoall)", "name", "alltoall", "description",
		text, "blob_id", blob);
}



static json_t *receipt_json(a2a_run *r, json_t *prov, json_t *host, json_t *device, const char *started,
	const char *run_id, int argc, char **argv, int64_t t0, const char *error)
{
	json_t *rc = json_object(), *command = json_array();
	char finished[64];

	for (int i = 0; i < argc; i++)
		json_array_append_new(command, json_string(argv[i]));
	mb_run_timestamp(finished, sizeof(finished));
	json_object_set_new(rc, "kind", json_string("megabench.receipt"));
	json_object_set_new(rc, "schema_version", json_integer(MB_RECEIPT_SCHEMA_VERSION));
	json_object_set_new(rc, "run_id", json_string(run_id));
	json_object_set_new(rc, "status", json_string(error ? "failed" : "complete"));
	json_object_set_new(rc, "started_at", json_string(started));
	json_object_set_new(rc, "finished_at", json_string(finished));
	json_object_set_new(rc, "backend", json_string("cuda"));
	json_object_set_new(rc, "tool", json_pack("{s:s, s:s}", "name", "megabench", "version", MB_VERSION));
	json_object_set_new(rc, "command", command);
	json_object_set(rc, "provenance", prov);
	json_object_set_new(rc, "build", mb_build_identity());
	json_object_set(rc, "host", host);
	json_object_set(rc, "device", device);
	json_object_set_new(rc, "suite", suite_json(r));
	json_object_set_new(rc, "catalog", mb_run_catalog_json());
	json_object_set_new(rc, "settings", settings_json(r));
	json_object_set_new(rc, "ceilings", json_pack("{s:n, s:n}", "copy_gbps", "gemm_tflops"));
	json_object_set_new(rc, "goodput", mb_run_goodput_json(&r->phases, mb_now_ns() - t0));
	json_object_set_new(rc, "summary", mb_run_summary_json(r->cases));
	if (error)
		json_object_set_new(rc, "error", json_string(error));
	json_object_set(rc, "notices", r->notices);
	json_object_set(rc, "cases", r->cases);
	return rc;
}

/* Every rank's device identity, at the root (rank order). */
static int gather_identities(a2a_run *r, json_t **out, mb_error *err)
{
	char *mine = calloc((size_t)r->w.n_local, DEVICE_JSON_BYTES);
	char *all = calloc((size_t)r->w.size, DEVICE_JSON_BYTES);
	int rc = 0;

	if (!mine || !all) {
		rc = mb_error_set(err, MB_ENOMEM, "device identity", "out of host memory");
		goto cleanup;
	}
	for (int i = 0; i < r->w.n_local; i++) {
		char *text = json_dumps(r->local[i].identity, JSON_COMPACT);
		if (text && strlen(text) < DEVICE_JSON_BYTES)
			memcpy(mine + (size_t)i * DEVICE_JSON_BYTES, text, strlen(text) + 1);
		free(text);
	}
	world_gather(&r->w, mine, all, DEVICE_JSON_BYTES, false);
	for (int g = 0; is_root(&r->w) && g < r->w.size; g++) {
		out[g] = json_loads(all + (size_t)g * DEVICE_JSON_BYTES, 0, NULL);
		if (!out[g])
			out[g] = json_pack("{s:s, s:s}", "backend", "cuda", "name", "unknown");
	}
cleanup:
	free(mine);
	free(all);
	return rc;
}

/* ---- the command ------------------------------------------------------------- */

static int save(const json_t *receipt, const char *path, bool force, mb_error *err)
{
	int rc = mb_receipt_save_ex(receipt, path, force ? 0 : MB_ATOMIC_NO_REPLACE, err);
	char fallback[PATH_BYTES];
	const char *tmp = getenv("TMPDIR");
	mb_error fb;

	if (rc == 0 || rc == MB_ESCHEMA || strcmp(path, "-") == 0)
		return rc;
	/* as `run` does: the results of a run are not lost to a full disk */
	snprintf(fallback, sizeof(fallback), "%s/megabench-%s.json", tmp && *tmp ? tmp : "/tmp",
		json_string_value(json_object_get(receipt, "run_id")));
	mb_error_clear(&fb);
	if (mb_receipt_save_ex(receipt, fallback, MB_ATOMIC_NO_REPLACE, &fb) == 0) {
		size_t used = strlen(err->text);
		snprintf(err->text + used, sizeof(err->text) - used, "; the receipt was saved to %.900s instead", fallback);
	}
	return rc;
}

static void default_output(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;
	char stamp[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", &tm);
	mkdir(DEFAULT_DIR, DIR_MODE);
	snprintf(buf, len, DEFAULT_DIR "/alltoall-%s.%03ldZ-%ld.json", stamp, ts.tv_nsec / NS_PER_MS, (long)getpid());
}

/* A step every process takes: its error printed where it happened, and
 * whether every process succeeded. */
static bool agreed(a2a_run *r, int rc, mb_error *err)
{
	if (rc)
		mb_cli_error(err);
	return world_agree(&r->w, rc == 0);
}

static int probe_output(const a2a_args *a, char *out_path, size_t len, mb_error *err)
{
	if (a->output)
		snprintf(out_path, len, "%s", a->output);
	else
		default_output(out_path, len);
	return mb_atomic_write_probe(out_path, a->force ? 0 : MB_ATOMIC_NO_REPLACE, err);
}

static int world_start(world *w, mb_error *err)
{
	memset(w, 0, sizeof(*w));
	w->size = 1;
	if (!launched_by_mpi())
		return 0;
#if A2A_MPI
	int provided = 0;
	MPI_Init_thread(NULL, NULL, MPI_THREAD_SINGLE, &provided);
	w->mpi = true;
	w->comm = MPI_COMM_WORLD;
	MPI_Comm_size(w->comm, &w->size);
	MPI_Comm_rank(w->comm, &w->proc);
	if (w->size > MB_A2A_MAX_GPUS)
		return mb_error_set(err, MB_EINVAL, "MPI", "%d ranks; at most %d", w->size, MB_A2A_MAX_GPUS);
	return 0;
#else
	return mb_error_set(err, MB_EUNSUPPORTED, "MPI", "started by an MPI launcher, but this megabench was built "
		"without MPI (meson configure -Dmpi=enabled): each process would drive every GPU");
#endif
}

static void world_end(world *w)
{
#if A2A_MPI
	if (w->mpi)
		MPI_Finalize();
#endif
	(void)w;
}

static int run_all(const a2a_args *given, int argc, char **argv, int64_t wall_t0)
{
	a2a_run *r = calloc(1, sizeof(*r));
	a2a_args args = *given, *a = &args;
	int64_t t0;
	json_t *identity[MB_A2A_MAX_GPUS] = {NULL}, *prov = NULL, *host = NULL, *receipt = NULL;
	const char *stopped = NULL;
	char out_path[PATH_BYTES], started[64], run_id[33], stop_buf[WHY_BYTES] = "", checkout_text[MB_RUN_NOTICE_MAX];
	mb_error err;
	int code = MB_EXIT_OK, rc;
	bool setup_ok, unavailable = false;

	out_path[0] = '\0';

	mb_error_clear(&err);
	if (!r) {
		fprintf(stderr, "megabench: out of memory\n");
		return MB_EXIT_INPUT;
	}
	r->a = a;
	r->row = mb_catalog_find(ROW_NAME);
	r->cases = json_array();
	r->notices = json_array();
	r->settings = (mb_settings){.seed = a->seed, .n_modes = 1, .modes = {MB_MODE_HOT},
		.max_noise = MB_DEFAULT_MAX_NOISE, .min_samples = (int)a->samples, .max_samples = (int)a->samples,
		.min_time_s = 0, .timeout_s = (double)a->timeout_s, .warmup = (int)a->warmup,
		.max_check_rows = MB_DEFAULT_MAX_CHECK_ROWS};
	r->collective_in_schema = schema_has_case_field("collective");
	mb_run_timestamp(started, sizeof(started));
	mb_run_new_id(run_id);
	rc = world_start(&r->w, &err);
	mb_console_init(&r->con, stderr, a->quiet || !is_root(&r->w));
	if (rc) {
		mb_cli_error(&err);
		code = MB_EXIT_INPUT;
		goto cleanup;
	}
	/* the GPUs, the shapes they can take, the output, then the
	 * communicators: each step agreed by every process before the next */
	t0 = mb_now_ns();
	setup_ok = agreed(r, r->row ? 0 : mb_error_set(&err, MB_ENOTFOUND, ROW_NAME, "not in this megabench's "
		"catalog"), &err)
		&& agreed(r, world_devices(r, &err), &err)
		&& agreed(r, check_shapes(a, r->row, r->w.size, &err), &err)
		&& agreed(r, is_root(&r->w) ? probe_output(a, out_path, sizeof(out_path), &err) : 0, &err)
		&& agreed(r, world_comms(r, &err), &err);
	r->phases.context_load += mb_now_ns() - t0;
	if (!setup_ok) {
		code = MB_EXIT_INPUT;
		goto cleanup;
	}
	snprintf(r->nccl_version, sizeof(r->nccl_version), "%d.%d.%d", mb_a2a_nccl_version() / 10000,
		mb_a2a_nccl_version() / 100 % 100, mb_a2a_nccl_version() % 100);
	if (gather_identities(r, identity, &err)) {
		mb_cli_error(&err);
		code = MB_EXIT_INPUT;
		goto cleanup;
	}
	if (is_root(&r->w)) {
		if (!(prov = provenance_json(&err)) || mb_host_identity(&host, &err)) {
			mb_cli_error(&err);
			code = MB_EXIT_INPUT;
		}
	}
	world_bcast_int(&r->w, &code);
	if (code)
		goto cleanup;
	if (a->variant_on[MB_A2A_VENDOR_ALLTOALL] && mb_a2a_nccl_version() < NCCL_ALLTOALL_VERSION) {
		a->variant_on[MB_A2A_VENDOR_ALLTOALL] = false;
		unavailable = true;
	}
	r->n_cases = 0;
	for (int v = 0; v < MB_A2A_N_VARIANTS; v++)
		r->n_cases += a->variant_on[v] ? (size_t)a->n_tokens : 0;
	if (is_root(&r->w)) {
		r->con.progress.begin(r->con.progress.ctx, r->n_cases, "cuda");
		if (!json_is_true(json_object_get(prov, "available")))
			notice(r, "no git provenance: %s", json_string_value(json_object_get(prov, "reason")));
		if (mb_run_checkout_notice(checkout_text, sizeof(checkout_text), prov))
			notice(r, "%s", checkout_text);
		notice(r, "%d GPUs, %s; NCCL %s; %s=%s", r->w.size, r->w.mpi ? "one MPI rank per GPU (ncclCommInitRank)"
			: "one process driving all of them (ncclCommInitAll)", r->nccl_version, NVLS_ENV,
			getenv(NVLS_ENV) ? getenv(NVLS_ENV) : "(unset)");
		if (!getenv(NVLS_ENV) || strcmp(getenv(NVLS_ENV), NVLS_OFF) != 0)
			notice(r, "%s is not %s in the environment: NVLink multicast may be on", NVLS_ENV, NVLS_OFF);
		for (int g = 0; g < r->w.size; g++)
			notice(r, "rank %d: device %lld, %s, uuid %s", g, (long long)json_integer_value(json_object_get(identity[g],
				"index")), json_string_value(json_object_get(identity[g], "name")),
				json_string_value(json_object_get(identity[g], "uuid")) ? json_string_value(json_object_get(
				identity[g], "uuid")) : "?");
	}
	if (unavailable)
		notice(r, "nccl_alltoall needs ncclAlltoAll (NCCL 2.28); NCCL %s here: not run", r->nccl_version);
	for (int i = 0; i < a->n_tokens; i++)
		run_size(r, a->tokens[i], identity, &stopped, stop_buf, sizeof(stop_buf));
	if (is_root(&r->w)) {
		mb_console_finish(&r->con);
		receipt = receipt_json(r, prov, host, identity[0], started, run_id, argc + 1, argv - 1, wall_t0,
			stopped);
		code = json_integer_value(json_object_get(json_object_get(receipt, "summary"), "ok"))
			== (json_int_t)json_array_size(r->cases) && !stopped ? MB_EXIT_OK : MB_EXIT_FAILED;
		rc = save(receipt, out_path, a->force, &err);
		mb_console_print_table(strcmp(out_path, "-") == 0 ? stderr : stdout, receipt);
		if (rc) {
			mb_cli_error(&err);
			code = MB_EXIT_INPUT;
		} else if (strcmp(out_path, "-") != 0) {
			fprintf(stderr, "megabench: receipt written to %s\n", out_path);
		}
	}
	world_bcast_int(&r->w, &code);
cleanup:
	for (int g = 0; g < MB_A2A_MAX_GPUS; g++)
		json_decref(identity[g]);
	json_decref(receipt);
	json_decref(prov);
	json_decref(host);
	if (r->w.n_local)
		world_close(r);
	world_end(&r->w);
	json_decref(r->cases);
	json_decref(r->notices);
	free(r);
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
	watchdog_s = (sig_atomic_t)a.timeout_s;
	signal(SIGALRM, on_watchdog);
	code = run_all(&a, argc, argv, mb_now_ns());
	alarm(0);
	return code;
#else
	fprintf(stderr, "megabench alltoall: moe_alltoall runs across GPUs with NCCL, and this megabench was built "
		"without %s (meson setup -Dcuda=enabled -Dnccl=enabled, with the toolkit and libnccl-dev)\n",
		MB_HAVE_CUDA ? "NCCL" : "CUDA");
	return MB_EXIT_INPUT;
#endif
}
