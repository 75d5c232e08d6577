/* Running a lane on the device; see lane.h. One stream, cuBLAS for the
 * GEMMs, the catalog's launch functions for the rows, three small kernels
 * of the lane's own (the attention stand-in's softmax, mHC's read-out and
 * write-back), CUPTI for each step's busy, copy and set time, events for
 * its span on the device. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mb_config.h"

#if MB_HAVE_CUBLAS
#include <cublas_v2.h>
#endif

extern "C" {
#include "harness/clock.h"
#include "harness/lane.h"
#include "kernels/workspace.h"
#include "receipts/error.h"
}
#include "harness/cuda_device.h"
#include "harness/cuda_inputs.h"
#include "harness/cupti_timer.h"

namespace {

typedef __nv_bfloat16 bf16;

const int SOFTMAX_THREADS = 256;
const int ELEMENTWISE_THREADS = 256;
const int ELEMENTWISE_MAX_BLOCKS = 8192; /* a grid-stride loop past this */
const int VEC = 8;                       /* bf16 per 16-byte access */
const size_t CUBLAS_WORKSPACE_BYTES = (size_t)32 << 20;
const uint64_t LANE_ID_BASE = 1ULL << 61; /* external correlation ids, apart from the cases' */
const int64_t SETTLE_NS = 1000000000;      /* settle()'s steady load before the rounds */
const uint64_t LANE_SEED = 0x6c616e65ULL;  /* "lane" */
const double NS_PER_MS = 1e6;

/* The stand-in's row launch: a numerically safe softmax over each row of
 * `n` bf16 values, in place (max, sum of exponentials, scale). */
__global__ void __launch_bounds__(SOFTMAX_THREADS) mb_lane_softmax_kernel(bf16 *x, int64_t n)
{
	__shared__ float red[SOFTMAX_THREADS];
	bf16 *row = x + (int64_t)blockIdx.x * n;
	float m = -INFINITY, s = 0;

	for (int64_t j = threadIdx.x; j < n; j += SOFTMAX_THREADS)
		m = fmaxf(m, __bfloat162float(row[j]));
	red[threadIdx.x] = m;
	__syncthreads();
	for (int w = SOFTMAX_THREADS / 2; w > 0; w /= 2) {
		if (threadIdx.x < w)
			red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + w]);
		__syncthreads();
	}
	m = red[0];
	__syncthreads();
	for (int64_t j = threadIdx.x; j < n; j += SOFTMAX_THREADS)
		s += __expf(__bfloat162float(row[j]) - m);
	red[threadIdx.x] = s;
	__syncthreads();
	for (int w = SOFTMAX_THREADS / 2; w > 0; w /= 2) {
		if (threadIdx.x < w)
			red[threadIdx.x] += red[threadIdx.x + w];
		__syncthreads();
	}
	s = red[0];
	for (int64_t j = threadIdx.x; j < n; j += SOFTMAX_THREADS)
		row[j] = __float2bfloat16_rn(__expf(__bfloat162float(row[j]) - m) / s);
}

__device__ void load8(float *v, const bf16 *p)
{
	uint4 raw = *(const uint4 *)p;
	const __nv_bfloat162 *h = (const __nv_bfloat162 *)&raw;

	for (int i = 0; i < VEC / 2; i++) {
		float2 f = __bfloat1622float2(h[i]);
		v[2 * i] = f.x, v[2 * i + 1] = f.y;
	}
}

__device__ void store8(bf16 *p, const float *v)
{
	uint4 raw;
	__nv_bfloat162 *h = (__nv_bfloat162 *)&raw;

	for (int i = 0; i < VEC / 2; i++)
		h[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
	*(uint4 *)p = raw;
}

/* mHC's read-out: out[t, :] = mean over the streams of mix[t, n, :]. */
__global__ void __launch_bounds__(ELEMENTWISE_THREADS) mb_lane_mhc_read_kernel(const bf16 *__restrict__ mix,
	bf16 *__restrict__ out, int64_t tokens, int64_t width, int streams)
{
	const int64_t per_row = width / VEC, vecs = tokens * per_row;

	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < vecs; i += (int64_t)gridDim.x * blockDim.x) {
		int64_t t = i / per_row, j = (i % per_row) * VEC;
		float acc[VEC] = {0}, v[VEC];
		for (int n = 0; n < streams; n++) {
			load8(v, mix + (t * streams + n) * width + j);
			for (int e = 0; e < VEC; e++)
				acc[e] += v[e];
		}
		for (int e = 0; e < VEC; e++)
			acc[e] /= (float)streams;
		store8(out + t * width + j, acc);
	}
}

/* mHC's write-back: out[t, n, :] = mix[t, n, :] + x[t, :]. */
__global__ void __launch_bounds__(ELEMENTWISE_THREADS) mb_lane_mhc_write_kernel(const bf16 *__restrict__ mix,
	const bf16 *__restrict__ x, bf16 *__restrict__ out, int64_t tokens, int64_t width, int streams)
{
	const int64_t per_row = width / VEC, vecs = tokens * streams * per_row;

	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < vecs; i += (int64_t)gridDim.x * blockDim.x) {
		int64_t t = i / (streams * per_row), j = (i % per_row) * VEC;
		float a[VEC], b[VEC];
		load8(a, mix + i * VEC);
		load8(b, x + t * width + j);
		for (int e = 0; e < VEC; e++)
			a[e] += b[e];
		store8(out + i * VEC, a);
	}
}

unsigned elementwise_blocks(int64_t vecs)
{
	int64_t blocks = (vecs + ELEMENTWISE_THREADS - 1) / ELEMENTWISE_THREADS;

	return (unsigned)(blocks < ELEMENTWISE_MAX_BLOCKS ? (blocks > 0 ? blocks : 1) : ELEMENTWISE_MAX_BLOCKS);
}

struct lane_run {
	const mb_lane_spec *spec;
	mb_lane_recipe recipe;
	mb_lane_config configs[MB_LANE_MAX_CONFIGS];
	int n_configs;
	mb_lane_samples samples[MB_LANE_MAX_CONFIGS];
	mb_lane_progress progress[MB_LANE_MODE_COUNT];
	cudaGraphExec_t graph[MB_LANE_MAX_CONFIGS];
	void **buf;
	cudaStream_t stream;
	/* two events per step of a sweep, for two sweeps: the one queued and
	 * the one before, read back while it runs */
	cudaEvent_t ev[2][2 * MB_LANE_MAX_SWEEP];
	mb_cupti_call calls[MB_LANE_MAX_SWEEP]; /* one per step of a sweep */
	/* the sweep queued, not read back: its configurations in the order
	 * they ran, its round, its events' half and first correlation id */
	int pending[MB_LANE_MAX_SWEEP];
	int n_pending;
	int pending_round;
	int pending_half;
	uint64_t pending_id;
	double round_gpu_ns[MB_LANE_MODE_COUNT]; /* the round's timed steps so far, per mode */
	bool cupti;
	uint64_t next_id;
	int64_t start_ns;
#if MB_HAVE_CUBLAS
	cublasHandle_t blas;
	void *workspace;
#endif
	char error[512];
};

#if MB_HAVE_CUBLAS
/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the
 * stored matrices swap places and keep their own leading dimensions. */
cudaError_t enqueue_gemm(lane_run *L, const mb_lane_op *op)
{
	const mb_lane_gemm *g = &op->g;
	const float alpha = 1.0f, beta = g->beta;
	const void *a = L->buf[op->in[0]], *b = L->buf[op->in[1]];
	void *c = L->buf[op->out[0]];
	cublasOperation_t ob = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N, oa = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
	cublasStatus_t st;

	if (g->batch > 1)
		st = cublasGemmStridedBatchedEx(L->blas, ob, oa, (int)g->n, (int)g->m, (int)g->k, &alpha, b, CUDA_R_16BF,
			(int)g->ldb, g->stride_b, a, CUDA_R_16BF, (int)g->lda, g->stride_a, &beta, c, CUDA_R_16BF, (int)g->ldc,
			g->stride_c, (int)g->batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
	else
		st = cublasGemmEx(L->blas, ob, oa, (int)g->n, (int)g->m, (int)g->k, &alpha, b, CUDA_R_16BF, (int)g->ldb, a,
			CUDA_R_16BF, (int)g->lda, &beta, c, CUDA_R_16BF, (int)g->ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
	return st == CUBLAS_STATUS_SUCCESS ? cudaGetLastError() : (cudaError_t)mb_ws_blas_error((int)st);
}
#endif

/* Queue one op; returns a CUDA error (cuBLAS failures as mb_ws_blas_error
 * maps them). */
cudaError_t enqueue(lane_run *L, const mb_lane_op *op, const mb_lane_config *c)
{
	switch (op->kind) {
	case MB_LANE_OP_ROW: {
		const void *in[MB_MAX_TENSORS];
		void *out[MB_MAX_TENSORS];
		int v = c->variant[op->row_index];
		if (v < 0 || !op->row->variants[v].launch)
			return cudaErrorNotSupported;
		for (int i = 0; i < op->n_in; i++)
			in[i] = L->buf[op->in[i]];
		for (int i = 0; i < op->n_out; i++)
			out[i] = L->buf[op->out[i]];
		return (cudaError_t)op->row->variants[v].launch(L->stream, op->axis, MB_BF16, in, out);
	}
	case MB_LANE_OP_SOFTMAX:
		mb_lane_softmax_kernel<<<(unsigned)op->g.m, SOFTMAX_THREADS, 0, L->stream>>>((bf16 *)L->buf[op->out[0]],
			op->g.n);
		return cudaGetLastError();
	case MB_LANE_OP_MHC_READ:
		mb_lane_mhc_read_kernel<<<elementwise_blocks(op->g.m * op->g.n / VEC), ELEMENTWISE_THREADS, 0, L->stream>>>(
			(const bf16 *)L->buf[op->in[0]], (bf16 *)L->buf[op->out[0]], op->g.m, op->g.n, (int)op->g.k);
		return cudaGetLastError();
	case MB_LANE_OP_MHC_WRITE:
		mb_lane_mhc_write_kernel<<<elementwise_blocks(op->g.m * op->g.k * op->g.n / VEC), ELEMENTWISE_THREADS, 0,
			L->stream>>>((const bf16 *)L->buf[op->in[0]], (const bf16 *)L->buf[op->in[1]], (bf16 *)L->buf[op->out[0]],
			op->g.m, op->g.n, (int)op->g.k);
		return cudaGetLastError();
	case MB_LANE_OP_GEMM:
#if MB_HAVE_CUBLAS
		return enqueue_gemm(L, op);
#else
		return cudaErrorNotSupported;
#endif
	}
	return cudaErrorInvalidValue;
}

/* One step of configuration `c`, op by op; on a failure, what failed goes
 * into L->error. */
cudaError_t enqueue_step(lane_run *L, int c)
{
	const mb_lane_config *cfg = &L->configs[c];

	for (int i = 0; i < L->recipe.n_ops; i++) {
		const mb_lane_op *op = &L->recipe.ops[i];
		cudaError_t ce = enqueue(L, op, cfg);
		if (ce != cudaSuccess) {
			int v = op->row ? cfg->variant[op->row_index] : -1;
			snprintf(L->error, sizeof(L->error), "%s, %s: %s%s%s", cfg->name, mb_lane_mode_name(cfg->mode), op->label,
				v >= 0 ? " on " : "", v >= 0 ? op->row->variants[v].name : "");
			return ce;
		}
	}
	return cudaSuccess;
}

cudaError_t capture(lane_run *L, int c)
{
	cudaGraph_t g = NULL;
	cudaError_t ce = cudaStreamBeginCapture(L->stream, cudaStreamCaptureModeThreadLocal), launch;

	if (ce != cudaSuccess)
		return ce;
	launch = enqueue_step(L, c);
	ce = cudaStreamEndCapture(L->stream, &g);
	if (launch == cudaSuccess && ce == cudaSuccess)
		ce = cudaGraphInstantiate(&L->graph[c], g, 0);
	if (g)
		cudaGraphDestroy(g);
	return launch != cudaSuccess ? launch : ce;
}

cudaError_t one_step(lane_run *L, int c)
{
	if (L->configs[c].mode == MB_LANE_GRAPH)
		return cudaGraphLaunch(L->graph[c], L->stream);
	return enqueue_step(L, c);
}

/* A failed CUDA call: its name and error after what enqueue_step said
 * (cut to the error's size). Returns 1, the device failure. */
int failed(lane_run *L, const char *what, cudaError_t ce)
{
	char text[2 * sizeof(L->error)];
	size_t len;

	snprintf(text, sizeof(text), "%s%s%s: %s", L->error, L->error[0] ? ": " : "", what, cudaGetErrorString(ce));
	len = strnlen(text, sizeof(L->error) - 1);
	memcpy(L->error, text, len);
	L->error[len] = '\0';
	return 1;
}

#define LANE_TRY(call, what) \
	do { \
		cudaError_t ce_ = (call); \
		if (ce_ != cudaSuccess) \
			return failed(L, (what), ce_); \
	} while (0)

/* Queue `warmup` untimed steps of c, unbracketed (CUPTI drops their
 * records). They run while the host reads the sweep before back
 * (finish_sweep), so the device does not idle between sweeps: an idle
 * gap lets the clocks rise, and the steps after it start fast and slow
 * down step by step (runs c to e on H100s: the first timed step of a
 * configuration's block 0.7 to 1.4% under its round's median). */
int queue_warmup(lane_run *L, int c)
{
	for (int i = 0; i < L->spec->warmup; i++)
		LANE_TRY(one_step(L, c), "warm-up");
	return 0;
}

/* Queue one timed step of each of configs[0 .. n-1], in that order, each
 * bracketed and between two events; the sweep is then pending until
 * finish_sweep reads it back. Returns 0, 1 with L->error set for a device
 * failure, or a negative MB_E*. */
int queue_sweep(lane_run *L, const int *configs, int n, int round, mb_error *err)
{
	cudaEvent_t *ev;

	L->pending_half ^= 1;
	ev = L->ev[L->pending_half];
	L->pending_round = round;
	L->pending_id = L->next_id;
	for (int i = 0; i < n; i++) {
		mb_lane_samples *out = &L->samples[configs[i]];
		int64_t t0 = mb_now_ns();
		int rc;
		L->pending[i] = configs[i];
		L->n_pending = i + 1;
		if (L->cupti && (rc = mb_cupti_call_begin(L->next_id++, err)))
			return rc;
		LANE_TRY(cudaEventRecord(ev[2 * i], L->stream), "step");
		LANE_TRY(one_step(L, configs[i]), "step");
		LANE_TRY(cudaEventRecord(ev[2 * i + 1], L->stream), "step");
		if (L->cupti && (rc = mb_cupti_call_end(err)))
			return rc;
		out->host_ns[out->n] = (double)(mb_now_ns() - t0);
	}
	return 0;
}

/* Wait for the pending sweep's last step (not for work queued after it)
 * and read its steps back: event times and CUPTI records, a sample each.
 * Returns as queue_sweep does; 0 when nothing is pending. */
int finish_sweep(lane_run *L, mb_error *err)
{
	int n = L->n_pending, rc = 0;
	cudaEvent_t *ev = L->ev[L->pending_half];

	if (n == 0)
		return 0;
	L->n_pending = 0;
	LANE_TRY(cudaEventSynchronize(ev[2 * n - 1]), "steps");
	if (L->cupti && ((rc = mb_cupti_flush(err))
		|| (rc = mb_cupti_collect(L->calls, L->pending_id, n, NULL, 0, NULL, 0, err))))
		return rc;
	for (int i = 0; i < n; i++) {
		int c = L->pending[i];
		mb_lane_samples *out = &L->samples[c];
		float ms = 0;
		LANE_TRY(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]), "step");
		out->step_ns[out->n] = (double)ms * NS_PER_MS;
		out->busy_ns[out->n] = L->cupti ? (double)L->calls[i].busy_ns : NAN;
		out->memcpy_ns[out->n] = L->cupti ? (double)L->calls[i].memcpy_ns : NAN;
		out->memset_ns[out->n] = L->cupti ? (double)L->calls[i].memset_ns : NAN;
		out->round[out->n] = L->pending_round;
		out->n++;
		L->round_gpu_ns[L->configs[c].mode] += out->step_ns[out->n - 1];
	}
	return 0;
}

int fill_from(mb_fill fill)
{
	return fill == MB_FILL_UNIFORM ? MB_INPUT_UNIFORM : fill == MB_FILL_INDEX ? MB_INPUT_INDEX : MB_INPUT_NORMAL;
}

/* Every buffer from the generator: parameters as the recipe says (their
 * values are what the rows see), activations too, though the step writes
 * them before it reads them. */
int fill_buffers(lane_run *L)
{
	const mb_lane_recipe *r = &L->recipe;

	L->buf = (void **)calloc((size_t)r->n_buffers + 1, sizeof(void *));
	if (!L->buf) {
		snprintf(L->error, sizeof(L->error), "out of memory for the buffers' table");
		return 1;
	}
	for (int b = 0; b < r->n_buffers; b++) {
		const mb_lane_buffer *x = &r->buffers[b];
		mb_input_params p = {mb_input_key(LANE_SEED, b), fill_from(x->param ? x->fill : MB_FILL_NORMAL),
			x->param ? x->lo : 0.0f, x->param ? x->hi : 1.0f};
		snprintf(L->error, sizeof(L->error), "buffer \"%s\" (%lld elements)", x->name, (long long)x->elems);
		LANE_TRY(cudaMalloc(&L->buf[b], (size_t)x->elems * (size_t)x->elem_bytes), "cudaMalloc");
		LANE_TRY((cudaError_t)mb_cuda_fill(L->stream, L->buf[b], (uint64_t)x->elems, &p, MB_BF16), "fill");
	}
	L->error[0] = '\0';
	LANE_TRY(cudaStreamSynchronize(L->stream), "filling the buffers");
	return 0;
}

/* Every configuration's first step, eager, before any capture: the rows'
 * scratch slots reach the size every later call needs (a slot that grew
 * under a captured graph would leave it pointing at freed memory); then
 * each graph configuration's capture and first replay. The first step's
 * cost (module loads, cuBLAS's choices, the capture) is recorded apart. */
int prime(lane_run *L)
{
	for (int c = 0; c < L->n_configs; c++) {
		int64_t t0 = mb_now_ns();
		LANE_TRY(enqueue_step(L, c), "first step");
		LANE_TRY(cudaStreamSynchronize(L->stream), "first step");
		if (L->configs[c].mode == MB_LANE_EAGER)
			L->samples[c].first_step_host_ns = (double)(mb_now_ns() - t0);
	}
	for (int c = 0; c < L->n_configs; c++) {
		int64_t t0 = mb_now_ns();
		if (L->configs[c].mode != MB_LANE_GRAPH)
			continue;
		LANE_TRY(capture(L, c), "graph capture");
		LANE_TRY(cudaGraphLaunch(L->graph[c], L->stream), "first replay");
		LANE_TRY(cudaStreamSynchronize(L->stream), "first replay");
		L->samples[c].first_step_host_ns = (double)(mb_now_ns() - t0);
	}
	return 0;
}

/* Before the first round: all fused steps back to back, untimed, for
 * SETTLE_NS. prime() idles the device long enough between its one-off
 * steps (captures, syncs) for the clocks to fall towards idle, and they
 * take a while to come back under load (a gap of a few milliseconds
 * within a round does the opposite: queue_warmup); the first
 * configuration of round 0 then ran 7 to 14% slow in the dense lane
 * (eager, runs g and h on H100s), always the same configuration, since
 * the order follows the lane's seed. */
int settle(lane_run *L)
{
	int c = -1;
	int64_t t0 = mb_now_ns();

	for (int i = 0; i < L->n_configs && c < 0; i++)
		if (!strcmp(L->configs[i].name, "fused"))
			c = i;
	while (c >= 0 && mb_now_ns() - t0 < SETTLE_NS) {
		LANE_TRY(one_step(L, c), "settling");
		LANE_TRY(cudaStreamSynchronize(L->stream), "settling");
	}
	return 0;
}

/* The most steps a sweep of this lane can hold: every configuration,
 * and all fused's extra steps in each mode. */
int sweep_room(const lane_run *L)
{
	const int n = L->n_configs + MB_LANE_MODE_COUNT * (MB_LANE_MAX_FUSED_STEPS - 1);

	return n < MB_LANE_MAX_SWEEP ? n : MB_LANE_MAX_SWEEP;
}

/* Rounds until every mode stops (lane.h: the target, the budget or
 * max_rounds). A round is `steps` sweeps; a sweep runs one step of every
 * configuration of the modes still going that has not settled, and
 * mb_lane_fused_steps of all fused per mode, in an order shuffled from
 * the lane's seed and the sweep's number. */
int rounds(lane_run *L, mb_error *err)
{
	const mb_lane_spec *s = L->spec;
	int units[MB_LANE_MAX_SWEEP], order[MB_LANE_MAX_SWEEP], sweep[MB_LANE_MAX_SWEEP], rc;

	for (int round = 0;; round++) {
		double gpu_ns = 0;
		int64_t t0 = mb_now_ns();
		int n = 0, alternatives[MB_LANE_MODE_COUNT] = {0};
		for (int c = 0; c < L->n_configs; c++) {
			const mb_lane_progress *p = &L->progress[L->configs[c].mode];
			if (!p->stopped && !p->noise.settled[c] && strcmp(L->configs[c].name, "fused") != 0)
				alternatives[L->configs[c].mode]++;
		}
		for (int c = 0; c < L->n_configs; c++) {
			const mb_lane_progress *p = &L->progress[L->configs[c].mode];
			const int copies = strcmp(L->configs[c].name, "fused") != 0 ? 1
				: mb_lane_fused_steps(alternatives[L->configs[c].mode]);
			if (p->stopped || p->noise.settled[c])
				continue;
			if (mb_lane_samples_reserve(&L->samples[c], s->steps * copies))
				return mb_error_set(err, MB_ENOMEM, s->name, "out of memory for lane samples");
			for (int k = 0; k < copies; k++)
				units[n++] = c;
		}
		if (n == 0) /* all fused never settles: a going mode has it */
			return 0;
		memset(L->round_gpu_ns, 0, sizeof(L->round_gpu_ns));
		for (int k = 0; k < s->steps; k++) {
			mb_lane_shuffle(order, n, s->seed, round * s->steps + k);
			for (int i = 0; i < n; i++)
				sweep[i] = units[order[i]];
			if ((rc = queue_warmup(L, sweep[0])) || (rc = finish_sweep(L, err))
				|| (rc = queue_sweep(L, sweep, n, round, err)))
				return rc;
		}
		if ((rc = finish_sweep(L, err)))
			return rc;
		/* the round's wall time, shared between the modes as their
		 * steps shared the device */
		for (int m = 0; m < MB_LANE_MODE_COUNT; m++)
			gpu_ns += L->round_gpu_ns[m];
		for (int m = 0; m < s->n_modes; m++) {
			mb_lane_progress *p = &L->progress[s->modes[m]];
			mb_lane_noise noise;
			if (p->stopped)
				continue;
			p->rounds++;
			p->round_ns = gpu_ns > 0 ? (double)(mb_now_ns() - t0) * L->round_gpu_ns[s->modes[m]] / gpu_ns : 0;
			p->wall_ns += p->round_ns;
			if ((rc = mb_lane_noise_of(&noise, L->configs, L->samples, L->n_configs, s->modes[m], s, err)))
				return rc;
			mb_lane_after_round(p, s, &noise);
		}
		if (!mb_lane_next_round(L->progress, s, (double)(mb_now_ns() - L->start_ns)))
			return 0;
	}
}

int run_all(lane_run *L, mb_error *err)
{
	int rc;

	/* the device `--devices` gave this process (MB_DEVICE_ENV) */
	LANE_TRY(cudaSetDevice(mb_cuda_device_index()), "cudaSetDevice");
	LANE_TRY(cudaStreamCreateWithFlags(&L->stream, cudaStreamNonBlocking), "stream");
#if MB_HAVE_CUBLAS
	if (cublasCreate(&L->blas) != CUBLAS_STATUS_SUCCESS) {
		snprintf(L->error, sizeof(L->error), "cublasCreate failed");
		return 1;
	}
	/* a workspace of our own, so that nothing is allocated during capture */
	LANE_TRY(cudaMalloc(&L->workspace, CUBLAS_WORKSPACE_BYTES), "cuBLAS workspace");
	if (cublasSetStream(L->blas, L->stream) != CUBLAS_STATUS_SUCCESS ||
	    cublasSetWorkspace(L->blas, L->workspace, CUBLAS_WORKSPACE_BYTES) != CUBLAS_STATUS_SUCCESS) {
		snprintf(L->error, sizeof(L->error), "cuBLAS stream or workspace");
		return 1;
	}
#else
	snprintf(L->error, sizeof(L->error), "built without cuBLAS: lanes need it for their GEMMs");
	return 1;
#endif
	for (int h = 0; h < 2; h++)
		for (int i = 0; i < 2 * sweep_room(L); i++)
			LANE_TRY(cudaEventCreate(&L->ev[h][i]), "events");
	if ((rc = fill_buffers(L)) || (rc = prime(L)) || (rc = settle(L)))
		return rc;
	return rounds(L, err);
}

void release(lane_run *L)
{
	for (int c = 0; c < MB_LANE_MAX_CONFIGS; c++)
		if (L->graph[c])
			cudaGraphExecDestroy(L->graph[c]);
	for (int h = 0; h < 2; h++)
		for (int i = 0; i < 2 * sweep_room(L); i++)
			if (L->ev[h][i])
				cudaEventDestroy(L->ev[h][i]);
	for (int b = 0; L->buf && b < L->recipe.n_buffers; b++)
		cudaFree(L->buf[b]);
	free(L->buf);
#if MB_HAVE_CUBLAS
	if (L->blas)
		cublasDestroy(L->blas);
	cudaFree(L->workspace);
#endif
	if (L->stream)
		cudaStreamDestroy(L->stream);
	for (int c = 0; c < MB_LANE_MAX_CONFIGS; c++)
		mb_lane_samples_free(&L->samples[c]);
	mb_lane_recipe_free(&L->recipe);
}

} /* namespace */

extern "C" int mb_lane_run(json_t **out, const mb_lane_spec *spec, mb_error *err)
{
	lane_run *L = (lane_run *)calloc(1, sizeof(lane_run));
	mb_error cerr;
	int rc;

	*out = NULL;
	if (!L)
		return mb_error_set(err, MB_ENOMEM, spec->name, "out of memory");
	L->start_ns = mb_now_ns();
	L->spec = spec;
	L->next_id = LANE_ID_BASE;
	if ((rc = mb_lane_recipe_build(&L->recipe, spec, err))) {
		free(L);
		return rc;
	}
	L->n_configs = mb_lane_configs(L->configs, MB_LANE_MAX_CONFIGS, &L->recipe, spec);
	if (L->n_configs < 0) {
		release(L);
		free(L);
		return mb_error_set(err, MB_EINVAL, spec->name, "more than %d configurations", MB_LANE_MAX_CONFIGS);
	}
	mb_error_clear(&cerr);
	L->cupti = mb_cupti_start(&cerr) == 0;
	rc = run_all(L, err);
	if (rc >= 0) {
		mb_lane_outcome o = {L->configs, L->n_configs, L->samples, {}, (double)(mb_now_ns() - L->start_ns)};
		for (int m = 0; m < MB_LANE_MODE_COUNT; m++) {
			o.progress[m] = L->progress[m];
			if (rc == 1 && !o.progress[m].stopped)
				o.progress[m].stopped = "error";
		}
		*out = mb_lane_json(spec, &L->recipe, &o);
		if (rc == 1)
			json_object_set_new(*out, "error", json_string(L->error));
		if (!L->cupti)
			json_object_set_new(*out, "busy_note", json_string(cerr.text));
		rc = 0;
	}
	release(L);
	free(L);
	return rc;
}
