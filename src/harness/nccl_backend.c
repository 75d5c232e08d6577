/* The multi-rank backend: a case of the moe_alltoall row on every rank of
 * an NCCL world (nccl_world.h), for the case driver (backend.h).
 *
 * - Every operation fans out over this process's ranks and is agreed
 *   between processes (mb_world_agree_why): a rank that fails fails the
 *   step on every process, so that they stay in step; nothing here returns
 *   a harness error that only one process would see.
 * - The driver sees every rank's rows stacked (whole_case: G x T tokens):
 *   rank g fills rows g T .. g T + T - 1 of x from the case's generator
 *   (mb_input_params_at), and read_rows gathers each row from the rank,
 *   and under MPI the process, that holds it.
 * - Filling the logits makes the routing, on the host as a framework's
 *   router and the reference see it: every rank's logits, every token
 *   routed, each rank given its own; then the variant's workspaces are
 *   opened, sized by the routing.
 * - A timed call is one call on every rank between CUDA events on each
 *   rank's stream; its time is the slowest rank's, over every process. One
 *   call per batch: every process then sees the same samples, so the
 *   driver's stopping rule takes every process to the same next call.
 * - check_exact compares what each rank received with what the routing
 *   sends it (kernels/moe_alltoall.h): every row by its hash, and on the
 *   first check the sampled tokens' rows in full, bit for bit.
 * - report gives the bytes each rank moved per call and the case's
 *   collective record, every rank's, for the receipt.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/backend.h"
#include "harness/cuda_headers.h"
#include "harness/cuda_inputs.h"
#include "harness/host_inputs.h"
#include "harness/nccl_world.h"
#include "reference/moe_alltoall.h"

/* Rows read back per batch (fp32, H wide). */
#define GATHER_BATCH 2048
#define EXACT_REFERENCE "the rows sent, bit for bit: every received and returned row by a 64-bit hash of its bits, " \
	"the sampled tokens' rows in full"
#define BYTES_DEFINITION "bytes each rank sends per call, dispatch and combine, its rows to itself included " \
	"(mean over ranks), as nccl-tests' alltoall counts them"

/* Failure codes as every process hears them (mb_world_agree_why). */
enum { FAIL_CRASHED, FAIL_OOM, FAIL_SKIPPED };
static const char *const FAIL_STATUS[] = {"crashed", "oom", "skipped"};

/* The world this process drives (mb_backend_nccl). */
static mb_world *W;

/* What one rank moved and saw in a case, exchanged between processes for
 * the collective record. */
typedef struct rank_record {
	int32_t rank, device;
	int64_t sent_bytes, received_bytes, remote_sent_bytes;
	int64_t dispatch_rows_sent, dispatch_rows_received;
	int64_t device_bytes;   /* device memory the case took on the rank */
	uint64_t rows_hashed, rows_compared, misplaced;
	char problem[MB_A2A_PROBLEM_BYTES];
} rank_record;

/* One rank's side of the case. */
typedef struct rank_case {
	mb_world_rank *wr;
	void *x, *y;
	int32_t *expert;
	float *weight;
	uint64_t *hash;         /* row hashes, hash_cap of them */
	int64_t hash_cap;
	float *gathered;        /* rows read back, GATHER_BATCH x H fp32 */
	int64_t *gather_rows;   /* their indices */
	mb_a2a_rank *ar;
	rank_record rec;
} rank_case;

struct mb_dev_case {
	const mb_case_plan *plan;
	mb_a2a_dims d;
	mb_a2a_variant v;
	int64_t row_bytes;
	mb_input_params x_params;   /* the whole case's x, for comparisons in full */
	mb_a2a_routing rt;
	int checks;                 /* exact checks so far */
	rank_case rank[MB_WORLD_MAX_RANKS];
	float *rows;                /* read_rows's, every rank's */
	size_t rows_cap;            /* floats */
};

static bool vendor(mb_a2a_variant v)
{
	return v == MB_A2A_VENDOR_ALLTOALL || v == MB_A2A_VENDOR_SENDRECV;
}

/* ---- failures, agreed ---------------------------------------------------------- */

static int failed(mb_outcome *o, const rank_case *rk, const char *what, cudaError_t ce)
{
	o->status = ce == cudaErrorMemoryAllocation ? "oom" : "crashed";
	snprintf(o->text, sizeof(o->text), "rank %d (device %d): %s: %s", rk->wr->rank, rk->wr->device, what,
		cudaGetErrorString(ce));
	return MB_DEVICE_FAILED;
}

static int failed_text(mb_outcome *o, const char *status, const char *text)
{
	o->status = status;
	snprintf(o->text, sizeof(o->text), "%.255s", text);
	return MB_DEVICE_FAILED;
}

/* A failure of moe_alltoall's device side: "oom" where memory ran out. */
static int failed_code(mb_outcome *o, int code, const mb_error *why)
{
	return failed_text(o, code == MB_ENOMEM ? "oom" : "crashed", why->text);
}

/* Every process's outcome of a step: 0 where all went well, else
 * MB_DEVICE_FAILED with the first failing process's status and text. */
static int agreed(int rc, mb_outcome *o)
{
	int code = FAIL_CRASHED;
	char text[MB_WORLD_TEXT_BYTES] = "";

	mb_world_alive();
	if (rc) {
		code = o->status && !strcmp(o->status, "oom") ? FAIL_OOM
			: o->status && !strcmp(o->status, "skipped") ? FAIL_SKIPPED : FAIL_CRASHED;
		snprintf(text, sizeof(text), "%s", o->text);
	}
	if (mb_world_agree_why(W, rc == 0, &code, text))
		return 0;
	o->status = FAIL_STATUS[code];
	snprintf(o->text, sizeof(o->text), "%s", text[0] ? text : "another rank failed");
	return MB_DEVICE_FAILED;
}

/* ---- the case ---------------------------------------------------------------- */

static void nb_whole_case(const mb_case_plan *plan, mb_case_plan *out)
{
	*out = *plan;
	out->axis[MB_A2A_AX_T] = plan->axis[MB_A2A_AX_T] * plan->axis[MB_A2A_AX_G];
}

static int rank_alloc(const mb_dev_case *dc, rank_case *rk, mb_outcome *o)
{
	const mb_a2a_dims *d = &dc->d;
	const size_t tk = (size_t)(d->T * d->K);
	cudaError_t ce;

	if ((ce = cudaSetDevice(rk->wr->device)) != cudaSuccess
		|| (ce = cudaMalloc(&rk->x, (size_t)d->T * (size_t)dc->row_bytes)) != cudaSuccess
		|| (ce = cudaMalloc(&rk->y, (size_t)d->T * (size_t)dc->row_bytes)) != cudaSuccess
		|| (ce = cudaMalloc((void **)&rk->expert, tk * sizeof(int32_t))) != cudaSuccess
		|| (ce = cudaMalloc((void **)&rk->weight, tk * sizeof(float))) != cudaSuccess
		|| (ce = cudaMalloc((void **)&rk->gathered, (size_t)(GATHER_BATCH * d->H) * sizeof(float))) != cudaSuccess
		|| (ce = cudaMalloc((void **)&rk->gather_rows, GATHER_BATCH * sizeof(int64_t))) != cudaSuccess)
		return failed(o, rk, "case arrays", ce);
	rk->rec.rank = rk->wr->rank;
	rk->rec.device = rk->wr->device;
	return 0;
}

static int nb_open(mb_dev_case **out, const mb_case_plan *plan, const mb_tensor_spec *spec, int n_tensors,
	mb_phase_ns *phases, mb_outcome *o, mb_error *err)
{
	const int64_t *a = plan->axis;
	mb_dev_case *dc = calloc(1, sizeof(*dc));
	int rc = 0;

	(void)spec, (void)phases;
	*out = NULL;
	if (!dc)
		return mb_error_set(err, MB_ENOMEM, plan->id, "out of host memory");
	if (mb_a2a_variant_parse(plan->variant->name, &dc->v) || n_tensors != 3 || a[MB_A2A_AX_G] != W->size) {
		free(dc);
		return mb_error_set(err, MB_EINVAL, plan->id, "the multi-rank backend runs the GPU variants of "
			"moe_alltoall across its %d ranks", W->size);
	}
	dc->plan = plan;
	dc->d = (mb_a2a_dims){a[MB_A2A_AX_T], a[MB_A2A_AX_H], a[MB_A2A_AX_E], a[MB_A2A_AX_K], W->size, plan->dtype};
	dc->row_bytes = dc->d.H * (int64_t)mb_dtype_size(plan->dtype);
	*out = dc;
	for (int i = 0; i < W->n_local && !rc; i++) {
		dc->rank[i].wr = &W->local[i];
		rc = rank_alloc(dc, &dc->rank[i], o);
	}
	return agreed(rc, o);
}

/* Each rank's rows of x from the whole case's generator. */
static int fill_x(mb_dev_case *dc, const mb_input_params *p, mb_outcome *o)
{
	const mb_a2a_dims *d = &dc->d;

	dc->x_params = *p;
	for (int i = 0; i < W->n_local; i++) {
		rank_case *rk = &dc->rank[i];
		mb_input_params q = mb_input_params_at(p, (uint64_t)(rk->wr->rank * d->T * d->H));
		cudaError_t ce;
		if ((ce = cudaSetDevice(rk->wr->device)) != cudaSuccess
			|| (ce = (cudaError_t)mb_cuda_fill(rk->wr->stream, rk->x, (uint64_t)(d->T * d->H), &q, d->dtype))
				!= cudaSuccess
			|| (ce = cudaStreamSynchronize((cudaStream_t)rk->wr->stream)) != cudaSuccess)
			return failed(o, rk, "filling x", ce);
	}
	return 0;
}

/* A rank's routing on its device, room for row hashes, and its tokens'
 * hashes into `mine` (T of them). */
static int rank_routing(mb_dev_case *dc, rank_case *rk, uint64_t *mine, mb_outcome *o)
{
	const mb_a2a_dims *d = &dc->d;
	const size_t tk = (size_t)(d->T * d->K), at = (size_t)rk->wr->rank * tk;
	int64_t cap = d->T * d->K > (int64_t)d->G * d->T ? d->T * d->K : (int64_t)d->G * d->T;
	const int64_t received = mb_a2a_rows_received(&dc->rt, dc->v, rk->wr->rank);
	cudaStream_t s = (cudaStream_t)rk->wr->stream;
	cudaError_t ce;

	cap = received > cap ? received : cap;
	if ((ce = cudaSetDevice(rk->wr->device)) != cudaSuccess
		|| (ce = cudaMalloc((void **)&rk->hash, (size_t)cap * sizeof(uint64_t))) != cudaSuccess)
		return failed(o, rk, "row hashes", ce);
	rk->hash_cap = cap;
	if ((ce = cudaMemcpyAsync(rk->expert, dc->rt.expert + at, tk * sizeof(int32_t), cudaMemcpyHostToDevice, s))
			!= cudaSuccess
		|| (ce = cudaMemcpyAsync(rk->weight, dc->rt.weight + at, tk * sizeof(float), cudaMemcpyHostToDevice, s))
			!= cudaSuccess
		|| (ce = (cudaError_t)mb_a2a_row_hash(s, rk->x, d->T, dc->row_bytes, rk->hash)) != cudaSuccess
		|| (ce = cudaMemcpyAsync(mine, rk->hash, (size_t)d->T * sizeof(uint64_t), cudaMemcpyDeviceToHost, s))
			!= cudaSuccess
		|| (ce = cudaStreamSynchronize(s)) != cudaSuccess)
		return failed(o, rk, "routing and row hashes", ce);
	return 0;
}

/* The variant's workspace on each rank, sized by the routing; the device
 * memory it took, with x and y, is the rank's share of the case. */
static int open_ranks(mb_dev_case *dc, mb_outcome *o)
{
	for (int i = 0; i < W->n_local; i++) {
		rank_case *rk = &dc->rank[i];
		mb_a2a_io io = {rk->x, rk->expert, rk->weight, rk->y};
		size_t before = 0, after = 0, total = 0;
		mb_error why;
		int rc;
		cudaSetDevice(rk->wr->device);
		cudaMemGetInfo(&before, &total);
		if ((rc = mb_a2a_rank_open(&rk->ar, &dc->d, dc->v, rk->wr->rank, rk->wr->device, rk->wr->comm,
			rk->wr->stream, &io, vendor(dc->v) ? 0 : mb_a2a_rows_received(&dc->rt, dc->v, rk->wr->rank), &why)))
			return failed_code(o, rc, &why);
		cudaMemGetInfo(&after, &total);
		rk->rec.device_bytes = (int64_t)(before > after ? before - after : 0) + 2 * dc->d.T * dc->row_bytes;
	}
	return 0;
}

/* Filling the logits makes the routing (every rank's, on the host), gives
 * each rank its own, hashes every rank's tokens (x is filled: it comes
 * first) and opens the variant's workspaces. */
static int route(mb_dev_case *dc, const mb_input_params *p, mb_outcome *o)
{
	const mb_a2a_dims *d = &dc->d;
	const uint64_t n = (uint64_t)d->G * (uint64_t)(d->T * d->E);
	float *logits = malloc(n * sizeof(float));
	uint64_t *mine = malloc((size_t)(W->n_local * d->T) * sizeof(uint64_t));
	mb_error why;
	int rc = 0;

	if (logits)
		mb_host_fill(logits, n, p, d->dtype);
	if (!logits || !mine || mb_a2a_routing_make(&dc->rt, d, logits))
		rc = failed_text(o, "oom", "out of host memory for the routing");
	free(logits);
	for (int i = 0; i < W->n_local && !rc; i++)
		rc = rank_routing(dc, &dc->rank[i], mine + (size_t)i * (size_t)d->T, o);
	if ((rc = agreed(rc, o)) == 0) {
		mb_world_gather(W, mine, dc->rt.xhash, (size_t)d->T * sizeof(uint64_t));
		/* every process has every hash: each decides alike */
		if (mb_a2a_hashes_distinct(&dc->rt, &why))
			rc = failed_text(o, "skipped", why.text);
	}
	free(mine);
	return rc ? rc : open_ranks(dc, o);
}

static int nb_fill(mb_dev_case *dc, int tensor, const mb_input_params *p, mb_outcome *o)
{
	int rc = tensor == 0 ? fill_x(dc, p, o) : route(dc, p, o);

	return agreed(rc, o);
}

static int nb_poison(mb_dev_case *dc, mb_outcome *o)
{
	mb_error why;
	int rc = 0;

	for (int i = 0; i < W->n_local && !rc; i++)
		if (mb_a2a_rank_poison(dc->rank[i].ar, &why))
			rc = failed_text(o, "crashed", why.text);
	return agreed(rc, o);
}

static int call_ranks(mb_dev_case *dc, mb_outcome *o)
{
	mb_a2a_rank *ranks[MB_WORLD_MAX_RANKS];
	mb_error why;
	int rc;

	for (int i = 0; i < W->n_local; i++)
		ranks[i] = dc->rank[i].ar;
	if ((rc = mb_a2a_call(ranks, W->n_local, &why)))
		return failed_code(o, rc, &why);
	return 0;
}

static int nb_call(mb_dev_case *dc, mb_outcome *o)
{
	return agreed(call_ranks(dc, o), o);
}

static int nb_sync(mb_dev_case *dc, mb_outcome *o, mb_error *err)
{
	int rc = 0;

	(void)err;
	for (int i = 0; i < W->n_local && !rc; i++) {
		cudaError_t ce = cudaSetDevice(dc->rank[i].wr->device);
		if (ce == cudaSuccess)
			ce = cudaStreamSynchronize((cudaStream_t)dc->rank[i].wr->stream);
		if (ce != cudaSuccess)
			rc = failed(o, &dc->rank[i], "synchronising", ce);
	}
	return agreed(rc, o);
}

static int nb_arm(mb_dev_case *dc, mb_outcome *o)
{
	(void)dc, (void)o;
	return 0;
}

/* An event on every local rank's stream. */
static int record_all(mb_dev_case *dc, bool stop, mb_outcome *o)
{
	for (int i = 0; i < W->n_local; i++) {
		mb_world_rank *wr = dc->rank[i].wr;
		cudaError_t ce = cudaSetDevice(wr->device);
		if (ce == cudaSuccess)
			ce = cudaEventRecord((cudaEvent_t)(stop ? wr->stop : wr->start), (cudaStream_t)wr->stream);
		if (ce != cudaSuccess)
			return failed(o, &dc->rank[i], "recording an event", ce);
	}
	return 0;
}

/* One call on every local rank between events on each rank's stream;
 * *ns the slowest local rank's time. */
static int timed_call(mb_dev_case *dc, double *ns, mb_outcome *o)
{
	float ms = 0, worst = 0;
	int rc;

	if ((rc = record_all(dc, false, o)) || (rc = call_ranks(dc, o)) || (rc = record_all(dc, true, o)))
		return rc;
	for (int i = 0; i < W->n_local; i++) {
		mb_world_rank *wr = dc->rank[i].wr;
		cudaError_t ce = cudaEventSynchronize((cudaEvent_t)wr->stop);
		if (ce == cudaSuccess)
			ce = cudaEventElapsedTime(&ms, (cudaEvent_t)wr->start, (cudaEvent_t)wr->stop);
		if (ce != cudaSuccess)
			return failed(o, &dc->rank[i], "timing a call", ce);
		worst = ms > worst ? ms : worst;
	}
	*ns = (double)worst * 1e6;
	return 0;
}

static int nb_time_batch(mb_dev_case *dc, mb_batch *b, mb_phase_ns *phases, mb_outcome *o, mb_error *err)
{
	int rc = 0;

	(void)phases, (void)err;
	b->events_ns = b->span_ns = b->launch_ns = NULL;
	b->launches = NULL;
	for (int i = 0; i < b->n && rc == 0; i++) {
		/* the slowest rank's time over every process, and whether any
		 * failed, in one exchange */
		double v[2] = {0, 0};
		rc = timed_call(dc, &v[0], o);
		v[1] = rc != 0;
		mb_world_max(W, v, 2);
		b->sample_ns[i] = v[0];
		if (v[1] > 0)
			rc = agreed(rc, o);
	}
	mb_world_alive();
	return rc;
}

/* ---- reading back ---------------------------------------------------------------- */

/* Rows `at[0 .. n)` of `src` (device, H wide, the dtype) on rank `rk` into
 * `out` (fp32, packed), GATHER_BATCH at a time. */
static int gather_rows(const mb_dev_case *dc, rank_case *rk, const void *src, const int64_t *at, int64_t n,
	float *out, mb_outcome *o)
{
	const int64_t H = dc->d.H;
	cudaStream_t s = (cudaStream_t)rk->wr->stream;

	for (int64_t b = 0; b < n; b += GATHER_BATCH) {
		const int64_t m = n - b < GATHER_BATCH ? n - b : GATHER_BATCH;
		cudaError_t ce;
		if ((ce = cudaSetDevice(rk->wr->device)) != cudaSuccess
			|| (ce = cudaMemcpyAsync(rk->gather_rows, at + b, (size_t)m * sizeof(int64_t), cudaMemcpyHostToDevice, s))
				!= cudaSuccess
			|| (ce = (cudaError_t)mb_cuda_rows_f32(s, rk->gathered, src, rk->gather_rows, m, H, dc->d.dtype, 0))
				!= cudaSuccess
			|| (ce = cudaMemcpyAsync(out + b * H, rk->gathered, (size_t)(m * H) * sizeof(float),
				cudaMemcpyDeviceToHost, s)) != cudaSuccess
			|| (ce = cudaStreamSynchronize(s)) != cudaSuccess)
			return failed(o, rk, "reading rows back", ce);
	}
	return 0;
}

/* The run rows[lo .. hi) of the whole case's rows that rank g holds (the
 * driver's sample is sorted; rows NULL: 0 .. n - 1). */
static void rows_of_rank(const mb_dev_case *dc, int g, const int64_t *rows, int64_t n, int64_t *lo, int64_t *hi)
{
	const int64_t first = (int64_t)g * dc->d.T, end = first + dc->d.T;
	int64_t i = 0;

	while (i < n && (rows ? rows[i] : i) < first)
		i++;
	*lo = i;
	while (i < n && (rows ? rows[i] : i) < end)
		i++;
	*hi = i;
}

static int nb_read_rows(mb_dev_case *dc, int tensor, const int64_t *rows, int64_t n_rows, const float **out,
	mb_outcome *o)
{
	const int64_t H = dc->d.H;
	size_t counts[MB_WORLD_MAX_RANKS];
	int64_t *local = malloc((size_t)(n_rows + 1) * sizeof(*local));
	mb_error err;
	int rc = 0;

	(void)tensor; /* y, the one output */
	if ((size_t)(n_rows * H) > dc->rows_cap) {
		float *p = realloc(dc->rows, (size_t)(n_rows * H) * sizeof(float));
		if (p) {
			dc->rows = p;
			dc->rows_cap = (size_t)(n_rows * H);
		}
	}
	if (!local || (size_t)(n_rows * H) > dc->rows_cap)
		rc = failed_text(o, "oom", "out of host memory for the rows read back");
	for (int64_t k = 1; rows && k < n_rows && !rc; k++)
		if (rows[k] <= rows[k - 1])
			rc = failed_text(o, "crashed", "rows to read back out of order: each rank's must be one run");
	for (int i = 0; i < W->n_local && !rc; i++) {
		rank_case *rk = &dc->rank[i];
		int64_t lo, hi;
		rows_of_rank(dc, rk->wr->rank, rows, n_rows, &lo, &hi);
		for (int64_t k = lo; k < hi; k++)
			local[k - lo] = (rows ? rows[k] : k) - (int64_t)rk->wr->rank * dc->d.T;
		rc = gather_rows(dc, rk, rk->y, local, hi - lo, dc->rows + lo * H, o);
	}
	free(local);
	if ((rc = agreed(rc, o)))
		return rc;
	/* under MPI each process has its rank's run: exchange them */
	for (int g = 0; g < W->size; g++) {
		int64_t lo, hi;
		rows_of_rank(dc, g, rows, n_rows, &lo, &hi);
		counts[g] = (size_t)((hi - lo) * H) * sizeof(float);
	}
	mb_error_clear(&err);
	if (mb_world_gatherv(W, dc->rows, counts, &err))
		return failed_text(o, "crashed", err.text);
	*out = dc->rows;
	return 0;
}

/* ---- the exact check ---------------------------------------------------------------- */

/* Hashes of `n` rows at `rows` (device) on rank `rk` into host `out`. */
static int hash_rows(const mb_dev_case *dc, rank_case *rk, const void *rows, int64_t n, uint64_t *out, mb_outcome *o)
{
	cudaStream_t s = (cudaStream_t)rk->wr->stream;
	cudaError_t ce;

	if (n > rk->hash_cap) {
		char text[128];
		snprintf(text, sizeof(text), "rank %d: %lld rows to hash, room for %lld", rk->wr->rank, (long long)n,
			(long long)rk->hash_cap);
		return failed_text(o, "crashed", text);
	}
	if (n == 0)
		return 0;
	if ((ce = cudaSetDevice(rk->wr->device)) != cudaSuccess
		|| (ce = (cudaError_t)mb_a2a_row_hash(s, rows, n, dc->row_bytes, rk->hash)) != cudaSuccess
		|| (ce = cudaMemcpyAsync(out, rk->hash, (size_t)n * sizeof(uint64_t), cudaMemcpyDeviceToHost, s))
			!= cudaSuccess
		|| (ce = cudaStreamSynchronize(s)) != cudaSuccess)
		return failed(o, rk, "hashing rows", ce);
	return 0;
}

/* The received rows whose token is in the sample, against that token's x
 * row made again on the host from the generator, bit for bit. */
static int compare_full(const mb_dev_case *dc, rank_case *rk, const void *recv, const mb_a2a_origin *origin,
	int64_t total, const unsigned char *sampled, mb_a2a_tally *t, mb_outcome *o)
{
	const int64_t H = dc->d.H, T = dc->d.T;
	int64_t *at = malloc((size_t)(total + 1) * sizeof(*at)), n = 0;
	float *got = malloc((size_t)(GATHER_BATCH * H) * sizeof(float)), *want = malloc((size_t)H * sizeof(float));
	int rc = 0;

	if (!at || !got || !want)
		rc = failed_text(o, "oom", "out of host memory for the comparison in full");
	for (int64_t p = 0; p < total && !rc; p++)
		if (origin[p].token >= 0 && sampled[origin[p].rank * T + origin[p].token])
			at[n++] = p;
	for (int64_t b = 0; b < n && !rc; b += GATHER_BATCH) {
		const int64_t m = n - b < GATHER_BATCH ? n - b : GATHER_BATCH;
		if ((rc = gather_rows(dc, rk, recv, at + b, m, got, o)))
			break;
		for (int64_t i = 0; i < m; i++) {
			const mb_a2a_origin src = origin[at[b + i]];
			mb_input_params q = mb_input_params_at(&dc->x_params, (uint64_t)((src.rank * T + src.token) * H));
			mb_host_fill(want, (uint64_t)H, &q, dc->d.dtype);
			rk->rec.rows_compared++;
			for (int64_t c = 0; c < H; c++) {
				if (got[i * H + c] != want[c]) {
					mb_a2a_tally_wrong(t, "received row %lld (rank %d's token %d) differs from it at column %lld: "
						"%g, not %g", (long long)at[b + i], src.rank, src.token, (long long)c,
						(double)got[i * H + c], (double)want[c]);
					break;
				}
			}
		}
	}
	free(at);
	free(got);
	free(want);
	return rc;
}

/* What rank `rk` received in the last call, against the routing, into
 * `t`; with `sampled` (the first check) the sampled tokens' rows in full. */
static int check_rank(mb_dev_case *dc, rank_case *rk, const unsigned char *sampled, mb_a2a_tally *t, mb_outcome *o)
{
	const int64_t ret_rows = vendor(dc->v) ? mb_a2a_vendor_rows_per_peer(&dc->d) * dc->d.G : 0;
	mb_a2a_delivery got = {0};
	uint64_t *recv_hash = NULL, *ret_hash = NULL;
	mb_a2a_meta *meta = NULL;
	mb_a2a_origin *origin = NULL;
	int64_t total = 0;
	int rc = 0;

	mb_a2a_rank_view(rk->ar, &got.view);
	for (int s = 0; s < dc->d.G; s++)
		total += got.view.recv_rows[s];
	recv_hash = malloc((size_t)(total + 1) * sizeof(*recv_hash));
	origin = malloc((size_t)(total + 1) * sizeof(*origin));
	ret_hash = malloc((size_t)(ret_rows + 1) * sizeof(*ret_hash));
	meta = dc->v == MB_A2A_FUSED ? malloc((size_t)(total + 1) * sizeof(*meta)) : NULL;
	if (!recv_hash || !origin || !ret_hash || (dc->v == MB_A2A_FUSED && !meta)) {
		rc = failed_text(o, "oom", "out of host memory for the exact check");
		goto cleanup;
	}
	if ((rc = hash_rows(dc, rk, got.view.recv, total, recv_hash, o))
		|| (ret_rows && (rc = hash_rows(dc, rk, got.view.ret, ret_rows, ret_hash, o))))
		goto cleanup;
	if (meta && total > 0) {
		cudaError_t ce = cudaMemcpy(meta, got.view.recv_meta, (size_t)total * sizeof(*meta), cudaMemcpyDeviceToHost);
		if (ce != cudaSuccess) {
			rc = failed(o, rk, "reading the received metadata", ce);
			goto cleanup;
		}
	}
	got.recv_hash = recv_hash;
	got.recv_meta = meta;
	got.ret_hash = ret_rows ? ret_hash : NULL;
	if (mb_a2a_check_delivery(t, origin, &dc->rt, dc->v, rk->wr->rank, &got)) {
		rc = failed_text(o, "oom", "out of host memory for the exact check");
		goto cleanup;
	}
	if (sampled)
		rc = compare_full(dc, rk, got.view.recv, origin, total, sampled, t, o);
cleanup:
	free(recv_hash);
	free(ret_hash);
	free(meta);
	free(origin);
	return rc;
}

/* Which of the whole case's tokens the driver sampled (rows NULL: all). */
static unsigned char *sample_map(const mb_dev_case *dc, const int64_t *rows, int64_t n_rows)
{
	const int64_t all = (int64_t)dc->d.G * dc->d.T;
	unsigned char *m = calloc((size_t)all, 1);

	for (int64_t i = 0; m && i < n_rows; i++) {
		const int64_t r = rows ? rows[i] : i;
		if (r >= 0 && r < all)
			m[r] = 1;
	}
	return m;
}

static int nb_check_exact(mb_dev_case *dc, const int64_t *rows, int64_t n_rows, mb_exact *out, mb_outcome *o,
	mb_error *err)
{
	mb_a2a_tally mine[MB_WORLD_MAX_RANKS], all[MB_WORLD_MAX_RANKS];
	unsigned char *sampled = NULL;
	int rc = 0;

	(void)err;
	memset(mine, 0, sizeof(mine));
	/* the first checked call's rows are compared in full too */
	if (dc->checks++ == 0 && !(sampled = sample_map(dc, rows, n_rows)))
		rc = failed_text(o, "oom", "out of host memory for the row sample");
	for (int i = 0; i < W->n_local && !rc; i++) {
		rank_record *rec = &dc->rank[i].rec;
		rc = check_rank(dc, &dc->rank[i], sampled, &mine[i], o);
		rec->rows_hashed += mine[i].hashed;
		rec->misplaced += mine[i].wrong;
		if (!rec->problem[0])
			snprintf(rec->problem, sizeof(rec->problem), "%s", mine[i].first);
	}
	free(sampled);
	if ((rc = agreed(rc, o)))
		return rc;
	mb_world_gather(W, mine, all, sizeof(mine[0]));
	out->reference = EXACT_REFERENCE;
	out->moves_only = vendor(dc->v);
	for (int g = 0; g < W->size; g++) {
		out->checked += all[g].hashed;
		out->wrong += all[g].wrong;
		if (all[g].wrong && !out->first[0])
			snprintf(out->first, sizeof(out->first), "rank %d: %.200s", g, all[g].first);
	}
	return 0;
}

/* ---- the record ---------------------------------------------------------------- */

/* Bytes one call moves for rank `rk` (dispatch and combine; the rows to
 * itself included, as nccl-tests counts them). */
static void count_bytes(const mb_dev_case *dc, rank_case *rk)
{
	rank_record *rec = &rk->rec;
	mb_a2a_view v;

	mb_a2a_rank_view(rk->ar, &v);
	rec->sent_bytes = rec->received_bytes = rec->remote_sent_bytes = 0;
	rec->dispatch_rows_sent = rec->dispatch_rows_received = 0;
	for (int p = 0; p < v.G; p++) {
		const int64_t out = v.send_rows[p] * (dc->row_bytes + v.meta_bytes) + v.recv_rows[p] * dc->row_bytes;
		rec->sent_bytes += out;
		rec->received_bytes += v.recv_rows[p] * (dc->row_bytes + v.meta_bytes) + v.send_rows[p] * dc->row_bytes;
		rec->dispatch_rows_sent += v.send_rows[p];
		rec->dispatch_rows_received += v.recv_rows[p];
		if (p != rk->wr->rank)
			rec->remote_sent_bytes += out;
	}
}

static json_t *rank_json(const rank_record *x)
{
	const json_t *dev = W->identity[x->rank];
	json_t *o = json_pack("{s:i, s:i, s:s?, s:s?, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b}", "rank", x->rank,
		"device_index", x->device, "device_name", json_string_value(json_object_get(dev, "name")), "device_uuid",
		json_string_value(json_object_get(dev, "uuid")), "sent_bytes", (json_int_t)x->sent_bytes, "received_bytes",
		(json_int_t)x->received_bytes, "remote_sent_bytes", (json_int_t)x->remote_sent_bytes, "dispatch_rows_sent",
		(json_int_t)x->dispatch_rows_sent, "dispatch_rows_received", (json_int_t)x->dispatch_rows_received,
		"rows_hashed", (json_int_t)x->rows_hashed, "rows_compared", (json_int_t)x->rows_compared, "misplaced",
		(json_int_t)x->misplaced, "device_bytes", (json_int_t)x->device_bytes, "passed", x->misplaced == 0);

	if (o && x->problem[0])
		json_object_set_new(o, "first_problem", json_string(x->problem));
	return o;
}

/* The case's collective record, from every rank's; `moves_only`: the
 * variant moves bytes and computes nothing (NCCL's own all-to-all). The
 * bandwidths follow from the median (collective.h). */
static json_t *collective_json(const mb_dev_case *dc, const rank_record *all, int64_t bytes_per_rank)
{
	const char *nvls = getenv(MB_WORLD_NVLS_ENV);
	json_t *ranks = json_array();

	for (int g = 0; g < W->size; g++)
		json_array_append_new(ranks, rank_json(&all[g]));
	return json_pack("{s:i, s:s, s:s, s:s, s:I, s:s, s:b, s:o}", "gpus", W->size, "launcher", W->mpi ? "mpi"
		: "single_process", "nvls_enable", nvls ? nvls : "", "nccl_version", W->nccl_version, "bytes_per_rank",
		(json_int_t)bytes_per_rank, "bytes_definition", BYTES_DEFINITION, "moves_only", vendor(dc->v), "ranks",
		ranks);
}

static void nb_report(mb_dev_case *dc, mb_dev_report *out)
{
	rank_record mine[MB_WORLD_MAX_RANKS], all[MB_WORLD_MAX_RANKS];
	int64_t sent = 0, peak = 0;

	memset(out, 0, sizeof(*out));
	out->sample_source = "events";
	out->scratch_bytes = -1;
	out->driver_scratch_bytes = INT64_MIN;
	for (int i = 0; i < W->n_local; i++) {
		count_bytes(dc, &dc->rank[i]);
		mine[i] = dc->rank[i].rec;
	}
	mb_world_gather(W, mine, all, sizeof(mine[0]));
	for (int g = 0; g < W->size; g++) {
		sent += all[g].sent_bytes;
		peak = all[g].device_bytes > peak ? all[g].device_bytes : peak;
	}
	/* nccl-tests' size for all-to-all: the bytes each rank sends; routing
	 * loads the ranks unevenly, so their mean */
	out->moved_bytes = llround((double)sent / W->size);
	out->io_bytes = peak;
	out->collective = collective_json(dc, all, out->moved_bytes);
}

static void nb_close(mb_dev_case *dc)
{
	if (!dc)
		return;
	for (int i = 0; i < W->n_local; i++) {
		rank_case *rk = &dc->rank[i];
		if (!rk->wr)
			continue;
		cudaSetDevice(rk->wr->device);
		mb_a2a_rank_close(rk->ar);
		cudaFree(rk->x);
		cudaFree(rk->y);
		cudaFree(rk->expert);
		cudaFree(rk->weight);
		cudaFree(rk->hash);
		cudaFree(rk->gathered);
		cudaFree(rk->gather_rows);
	}
	mb_a2a_routing_free(&dc->rt);
	free(dc->rows);
	free(dc);
}

/* Rank 0's device; no ceilings: the row is judged against NCCL's own
 * all-to-all on the same GPUs instead. */
static int nb_probe(json_t **out_device, json_t **out_ceilings, mb_phase_ns *phases, mb_error *err)
{
	(void)phases;
	*out_device = json_deep_copy(W->identity[0]);
	*out_ceilings = json_pack("{s:n, s:n}", "copy_gbps", "gemm_tflops");
	if (!*out_device || !*out_ceilings) {
		json_decref(*out_device);
		json_decref(*out_ceilings);
		*out_device = *out_ceilings = NULL;
		return mb_error_set(err, MB_ENOMEM, "device", "out of memory");
	}
	return 0;
}

static const mb_backend NCCL_BACKEND = {
	.name = "cuda",
	.fp32_variants = false,
	/* the fused variant and the fallback wait for the host inside a call,
	 * and NCCL's proxy threads run on it: host work beside the timed calls
	 * would be timed with them */
	.overlap_host_work = false,
	/* one call a batch: see the top of this file */
	.max_batch = 1,
	.probe = nb_probe,
	.open = nb_open,
	.fill = nb_fill,
	.poison = nb_poison,
	.call = nb_call,
	.sync = nb_sync,
	.arm = nb_arm,
	.time_batch = nb_time_batch,
	.read_rows = nb_read_rows,
	.report = nb_report,
	.close = nb_close,
	.shutdown = NULL,
	.whole_case = nb_whole_case,
	.check_exact = nb_check_exact,
};

const mb_backend *mb_backend_nccl(mb_world *w)
{
	W = w;
	return &NCCL_BACKEND;
}
