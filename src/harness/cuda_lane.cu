/* Running a lane on the device; see lane.h. One stream, cuBLAS for the
 * GEMMs, the catalog's launch functions for the rows, CUPTI for each step's
 * busy, copy and set time, events for its span on the device. */
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
#include "harness/case_common.h"
#include "harness/lane.h"
#include "receipts/error.h"
}
#include "harness/cuda_device.h"
#include "harness/cuda_inputs.h"
#include "harness/cupti_timer.h"

namespace {

const int SOFTMAX_THREADS = 256;
const size_t CUBLAS_WORKSPACE_BYTES = (size_t)32 << 20;
const uint64_t LANE_ID_BASE = 1ULL << 61; /* external correlation ids, apart from the cases' */
const uint64_t LANE_SEED = 0x6c616e65ULL;  /* "lane" */
const int MAX_CONFIGS = 2 + MB_LANE_MAX_ROWS;
const double NS_PER_MS = 1e6;

/* The stand-in's row launch: a numerically safe softmax over each row of
 * `n` bf16 values, in place (max, sum of exponentials, scale). */
__global__ void __launch_bounds__(SOFTMAX_THREADS) mb_lane_softmax_kernel(__nv_bfloat16 *x, int64_t n)
{
	__shared__ float red[SOFTMAX_THREADS];
	__nv_bfloat16 *row = x + (int64_t)blockIdx.x * n;
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

struct lane_run {
	const mb_lane_spec *spec;
	mb_lane_recipe recipe;
	mb_lane_config configs[MAX_CONFIGS];
	int n_configs;
	mb_lane_samples samples[MAX_CONFIGS][MB_LANE_MODE_COUNT];
	void *buf[LB_COUNT];
	cudaStream_t stream;
	cudaEvent_t *ev;
	mb_cupti_call *calls;        /* one per timed step */
	cudaGraphExec_t graph[MAX_CONFIGS];
	bool cupti;
	uint64_t next_id;
#if MB_HAVE_CUBLAS
	cublasHandle_t blas;
	void *workspace;
#endif
	char error[512];
};

const mb_variant *variant_of(const mb_row *row, mb_variant_kind kind)
{
	for (int v = 0; v < row->n_variants; v++)
		if (row->variants[v].kind == kind && row->variants[v].launch)
			return &row->variants[v];
	return NULL;
}

int row_index(const mb_lane_recipe *r, const mb_row *row)
{
	for (int i = 0; i < r->n_rows; i++)
		if (r->rows[i] == row)
			return i;
	return 0;
}

/* Queue one op; returns a CUDA error (cuBLAS failures as cudaErrorUnknown). */
cudaError_t enqueue(lane_run *L, const mb_lane_op *op, const mb_lane_config *c)
{
	if (op->kind == MB_LANE_OP_ROW) {
		const void *in[MB_MAX_TENSORS];
		void *out[MB_MAX_TENSORS];
		int ri = row_index(&L->recipe, op->row);
		const mb_variant *v = variant_of(op->row, c->fallback[ri] ? MB_VARIANT_FALLBACK : MB_VARIANT_FUSED);
		if (!v)
			return cudaErrorInvalidValue;
		for (int i = 0; i < op->n_in; i++)
			in[i] = L->buf[op->in[i]];
		for (int i = 0; i < op->n_out; i++)
			out[i] = L->buf[op->out[i]];
		return (cudaError_t)v->launch(L->stream, op->axis, MB_BF16, in, out);
	}
	if (op->kind == MB_LANE_OP_SOFTMAX) {
		mb_lane_softmax_kernel<<<(unsigned)op->m, SOFTMAX_THREADS, 0, L->stream>>>((__nv_bfloat16 *)L->buf[LB_ATTN],
			op->n);
		return cudaGetLastError();
	}
#if MB_HAVE_CUBLAS
	/* row-major C[m, n] = A[m, k] B[k, n] is column-major C^T = B^T A^T */
	const float alpha = 1.0f, beta = 0.0f;
	cublasStatus_t st = cublasGemmEx(L->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)op->n, (int)op->m, (int)op->k, &alpha,
		L->buf[op->b], CUDA_R_16BF, (int)op->n, L->buf[op->a], CUDA_R_16BF, (int)op->k, &beta, L->buf[op->c],
		CUDA_R_16BF, (int)op->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
	return st == CUBLAS_STATUS_SUCCESS ? cudaGetLastError() : cudaErrorUnknown;
#else
	return cudaErrorNotSupported;
#endif
}

cudaError_t enqueue_step(lane_run *L, int c)
{
	cudaError_t ce = cudaSuccess;

	for (int i = 0; i < L->recipe.n_ops && ce == cudaSuccess; i++)
		ce = enqueue(L, &L->recipe.ops[i], &L->configs[c]);
	return ce;
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

cudaError_t one_step(lane_run *L, int c, mb_lane_mode mode)
{
	if (mode == MB_LANE_GRAPH)
		return cudaGraphLaunch(L->graph[c], L->stream);
	return enqueue_step(L, c);
}

bool grow_samples(mb_lane_samples *s, int cap)
{
	s->step_ns = (double *)realloc(s->step_ns, (size_t)cap * sizeof(double));
	s->busy_ns = (double *)realloc(s->busy_ns, (size_t)cap * sizeof(double));
	s->memcpy_ns = (double *)realloc(s->memcpy_ns, (size_t)cap * sizeof(double));
	s->memset_ns = (double *)realloc(s->memset_ns, (size_t)cap * sizeof(double));
	s->host_ns = (double *)realloc(s->host_ns, (size_t)cap * sizeof(double));
	s->round = (int *)realloc(s->round, (size_t)cap * sizeof(int));
	return s->step_ns && s->busy_ns && s->memcpy_ns && s->memset_ns && s->host_ns && s->round;
}

#define LANE_TRY(call, what) \
	do { \
		cudaError_t ce_ = (call); \
		if (ce_ != cudaSuccess) { \
			snprintf(L->error, sizeof(L->error), "%s: %s", (what), cudaGetErrorString(ce_)); \
			return 1; \
		} \
	} while (0)

/* One configuration in one mode for one round. Returns 0, 1 with L->error
 * set for a device failure, or a negative MB_E*. */
int run_steps(lane_run *L, int c, mb_lane_mode mode, int round, mb_error *err)
{
	const mb_lane_spec *s = L->spec;
	mb_lane_samples *out = &L->samples[c][mode];
	mb_cupti_call *calls = L->calls;
	uint64_t first_id = L->next_id;
	int rc = 0;

	if (!grow_samples(out, s->rounds * s->steps))
		return mb_error_set(err, MB_ENOMEM, s->name, "out of memory for lane samples");
	/* the first step of a configuration and mode pays for module loads,
	 * cuBLAS's choices and, in graph mode, the capture */
	if (round == 0) {
		int64_t t0 = mb_now_ns();
		if (mode == MB_LANE_GRAPH && !L->graph[c])
			LANE_TRY(capture(L, c), "graph capture");
		LANE_TRY(one_step(L, c, mode), "first step");
		LANE_TRY(cudaStreamSynchronize(L->stream), "first step");
		out->first_step_host_ns = (double)(mb_now_ns() - t0);
	}
	for (int i = 0; i < s->warmup; i++)
		LANE_TRY(one_step(L, c, mode), "warm-up");
	LANE_TRY(cudaStreamSynchronize(L->stream), "warm-up");
	if (L->cupti)
		mb_cupti_discard();
	for (int i = 0; i < s->steps; i++) {
		int64_t t0 = mb_now_ns();
		if (L->cupti && (rc = mb_cupti_call_begin(L->next_id++, err)))
			break;
		LANE_TRY(cudaEventRecord(L->ev[2 * i], L->stream), "step");
		LANE_TRY(one_step(L, c, mode), "step");
		LANE_TRY(cudaEventRecord(L->ev[2 * i + 1], L->stream), "step");
		if (L->cupti && (rc = mb_cupti_call_end(err)))
			break;
		out->host_ns[out->n + i] = (double)(mb_now_ns() - t0);
	}
	if (rc == 0)
		LANE_TRY(cudaStreamSynchronize(L->stream), "steps");
	if (rc == 0 && L->cupti && ((rc = mb_cupti_flush(err)) == 0))
		rc = mb_cupti_collect(calls, first_id, s->steps, NULL, 0, err);
	for (int i = 0; rc == 0 && i < s->steps; i++) {
		float ms = 0;
		LANE_TRY(cudaEventElapsedTime(&ms, L->ev[2 * i], L->ev[2 * i + 1]), "step");
		out->step_ns[out->n + i] = (double)ms * NS_PER_MS;
		out->busy_ns[out->n + i] = L->cupti ? (double)calls[i].busy_ns : NAN;
		out->memcpy_ns[out->n + i] = L->cupti ? (double)calls[i].memcpy_ns : NAN;
		out->memset_ns[out->n + i] = L->cupti ? (double)calls[i].memset_ns : NAN;
		out->round[out->n + i] = round;
	}
	if (rc == 0)
		out->n += s->steps;
	return rc;
}

/* Weights scaled by about 1/sqrt(fan-in) keep activations near unit size
 * (the values only need to be finite: a lane is timed, not checked). */
int fill_buffers(lane_run *L)
{
	for (int b = 0; b < LB_COUNT; b++) {
		int64_t n = L->recipe.buffer_elems[b];
		mb_input_params p = {mb_input_key(LANE_SEED, b), MB_INPUT_NORMAL, 0, 1};
		if (b == LB_NORM_W)
			p.fill = MB_INPUT_UNIFORM, p.lo = 0.5f, p.hi = 1.5f;
		else if (b == LB_COS || b == LB_SIN)
			p.fill = MB_INPUT_UNIFORM, p.lo = -1, p.hi = 1;
		else if (b == LB_SCORES)
			p.hi = 1.0f / sqrtf((float)L->spec->tokens);
		else if (b >= LB_WQ && b != LB_ROUTER && b != LB_INNER)
			p.hi = 1.0f / sqrtf((float)L->spec->hidden);
		LANE_TRY(cudaMalloc(&L->buf[b], (size_t)(n > 0 ? n : 1) * sizeof(__nv_bfloat16)), "lane buffers");
		LANE_TRY((cudaError_t)mb_cuda_fill(L->stream, L->buf[b], (uint64_t)n, &p, MB_BF16), "lane buffers");
	}
	return 0;
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
	L->ev = (cudaEvent_t *)calloc(2 * (size_t)L->spec->steps, sizeof(cudaEvent_t));
	L->calls = (mb_cupti_call *)calloc((size_t)L->spec->steps, sizeof(mb_cupti_call));
	if (!L->ev || !L->calls)
		return mb_error_set(err, MB_ENOMEM, L->spec->name, "out of memory");
	for (int i = 0; i < 2 * L->spec->steps; i++)
		LANE_TRY(cudaEventCreate(&L->ev[i]), "events");
	if ((rc = fill_buffers(L)))
		return rc;
	/* rounds interleave the configurations, so that a drift of the
	 * machine's state over the minutes of a lane touches them all alike */
	for (int round = 0; round < L->spec->rounds; round++)
		for (int c = 0; c < L->n_configs; c++)
			for (int m = 0; m < L->spec->n_modes; m++)
				if ((rc = run_steps(L, c, L->spec->modes[m], round, err)))
					return rc;
	return 0;
}

void release(lane_run *L)
{
	for (int c = 0; c < MAX_CONFIGS; c++)
		if (L->graph[c])
			cudaGraphExecDestroy(L->graph[c]);
	for (int i = 0; L->ev && i < 2 * L->spec->steps; i++)
		if (L->ev[i])
			cudaEventDestroy(L->ev[i]);
	free(L->ev);
	free(L->calls);
	for (int b = 0; b < LB_COUNT; b++)
		cudaFree(L->buf[b]);
#if MB_HAVE_CUBLAS
	if (L->blas)
		cublasDestroy(L->blas);
	cudaFree(L->workspace);
#endif
	if (L->stream)
		cudaStreamDestroy(L->stream);
	for (int c = 0; c < MAX_CONFIGS; c++)
		for (int m = 0; m < MB_LANE_MODE_COUNT; m++)
			mb_lane_samples_free(&L->samples[c][m]);
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
	L->spec = spec;
	L->next_id = LANE_ID_BASE;
	if ((rc = mb_lane_recipe_build(&L->recipe, spec, err))) {
		free(L);
		return rc;
	}
	L->n_configs = mb_lane_configs(L->configs, MAX_CONFIGS, &L->recipe);
	mb_error_clear(&cerr);
	L->cupti = mb_cupti_start(&cerr) == 0;
	rc = run_all(L, err);
	if (rc >= 0) {
		*out = mb_lane_json(spec, &L->recipe, L->configs, L->n_configs, L->samples);
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
