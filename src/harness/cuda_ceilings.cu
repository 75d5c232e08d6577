/* Copy and GEMM ceilings; see cuda_ceilings.h. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mb_config.h"

#if MB_HAVE_CUBLAS
#include <cublas_v2.h>
#include <cuda_bf16.h>
#endif

extern "C" {
#include "receipts/error.h"
#include "receipts/stats.h"
}
#include "harness/cuda_blocker.h"
#include "harness/cuda_ceilings.h"
#include "harness/cuda_inputs.h"
#include "harness/cupti_timer.h"

namespace {

/* >= 2 GiB per buffer keeps the copy far out of the 50-60 MiB L2; if memory
 * is short we halve down to the floor and say so in copy_bytes. */
const size_t COPY_BYTES = (size_t)2 << 30;
const size_t COPY_BYTES_FLOOR = (size_t)256 << 20;
const int COPY_WARMUP = 2;
const int COPY_SAMPLES = 20;
const int COPY_THREADS = 512;
const int COPY_UNROLL = 4;
const int COPY_BLOCKS_PER_SM = 8;
const int GEMM_N = 8192;
const int GEMM_WARMUP = 3;
const int GEMM_SAMPLES = 10;
const unsigned long long COPY_SEED = 0x6d62636f7079ULL; /* "mbcopy" */
const unsigned long long GEMM_SEED = 0x6d6267656d6dULL; /* "mbgemm" */
/* The read probe stores its folded value only when it equals this key,
 * passed at run time so the compiler cannot drop the loads; the write
 * probe stores this pattern. */
const unsigned READ_SINK_KEY = 0x9e3779b9u;
const unsigned WRITE_VALUE = 0x3c003c00u;
const double NS_PER_S = 1e9;
const double BYTES_PER_GB = 1e9;
const double FLOPS_PER_TFLOP = 1e12;
/* External correlation ids of the probe, far from the backend's. */
const uint64_t PROBE_ID_BASE = 1ULL << 62;

/* Grid-stride copy with 16-byte accesses and COPY_UNROLL loads in flight
 * per thread before the first store. n16 counts 16-byte vectors. */
__global__ void __launch_bounds__(COPY_THREADS) mb_ceiling_copy_kernel(uint4 *__restrict__ dst,
	const uint4 *__restrict__ src, size_t n16)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i + (COPY_UNROLL - 1) * stride < n16; i += COPY_UNROLL * stride) {
		uint4 v[COPY_UNROLL];
#pragma unroll
		for (int u = 0; u < COPY_UNROLL; u++)
			v[u] = src[i + u * stride];
#pragma unroll
		for (int u = 0; u < COPY_UNROLL; u++)
			dst[i + u * stride] = v[u];
	}
	for (; i < n16; i += stride)
		dst[i] = src[i];
}

/* The read-only probe: the same loads as the copy, folded into a value
 * that is stored only when it equals a key given at run time (a chance of
 * 2^-32 per thread), so that the loads stay and almost nothing is
 * written. */
__global__ void __launch_bounds__(COPY_THREADS) mb_ceiling_read_kernel(const uint4 *__restrict__ src, size_t n16,
	unsigned *sink, unsigned key)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	unsigned acc = 0;
	for (; i + (COPY_UNROLL - 1) * stride < n16; i += COPY_UNROLL * stride) {
		uint4 v[COPY_UNROLL];
#pragma unroll
		for (int u = 0; u < COPY_UNROLL; u++)
			v[u] = src[i + u * stride];
#pragma unroll
		for (int u = 0; u < COPY_UNROLL; u++)
			acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
	}
	for (; i < n16; i += stride) {
		uint4 v = src[i];
		acc ^= v.x ^ v.y ^ v.z ^ v.w;
	}
	if (acc == key)
		*sink = acc;
}

/* The write-only probe: 16-byte stores of a value, COPY_UNROLL per step. */
__global__ void __launch_bounds__(COPY_THREADS) mb_ceiling_write_kernel(uint4 *__restrict__ dst, size_t n16,
	unsigned value)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;
	uint4 v = make_uint4(value, value, value, value);
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += stride)
		dst[i] = v;
}

static int fail(mb_error *err, cudaError_t ce, const char *what)
{
	return mb_error_set(err, ce == cudaErrorMemoryAllocation ? MB_ENOMEM : MB_EDEVICE,
		"ceilings", "%s: %s", what, cudaGetErrorString(ce));
}

/* Sorts `v` in place. */
static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, mb_stats_cmp_double);
	return mb_stats_quantile_sorted(v, (size_t)n, 0.5);
}

/* One probe operation: enqueue one call on the stream. */
typedef cudaError_t (*probe_op)(void *ctx, cudaStream_t stream);

struct copy_ctx {
	void *dst;
	const void *src;
	size_t bytes;
	int blocks;
};

cudaError_t own_copy(void *p, cudaStream_t stream)
{
	copy_ctx *c = (copy_ctx *)p;
	mb_ceiling_copy_kernel<<<c->blocks, COPY_THREADS, 0, stream>>>((uint4 *)c->dst,
		(const uint4 *)c->src, c->bytes / sizeof(uint4));
	return cudaGetLastError();
}

cudaError_t vendor_copy(void *p, cudaStream_t stream)
{
	copy_ctx *c = (copy_ctx *)p;
	return cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, stream);
}

cudaError_t own_read(void *p, cudaStream_t stream)
{
	copy_ctx *c = (copy_ctx *)p;
	mb_ceiling_read_kernel<<<c->blocks, COPY_THREADS, 0, stream>>>((const uint4 *)c->src, c->bytes / sizeof(uint4),
		(unsigned *)c->dst, READ_SINK_KEY);
	return cudaGetLastError();
}

cudaError_t own_write(void *p, cudaStream_t stream)
{
	copy_ctx *c = (copy_ctx *)p;
	mb_ceiling_write_kernel<<<c->blocks, COPY_THREADS, 0, stream>>>((uint4 *)c->dst, c->bytes / sizeof(uint4),
		WRITE_VALUE);
	return cudaGetLastError();
}

cudaError_t vendor_write(void *p, cudaStream_t stream)
{
	copy_ctx *c = (copy_ctx *)p;
	return cudaMemsetAsync(c->dst, (int)(WRITE_VALUE & 0xFF), c->bytes, stream);
}

/* Holds the stream while each probe call is enqueued (see cuda_blocker.h);
 * NULL when it could not be set up. */
static mb_blocker *probe_blocker;

/* Run `warmup` untimed then `n` timed calls, one at a time; CUPTI busy time
 * into cupti_ns (when use_cupti) and event time into events_ns. */
static int time_op(double *cupti_ns, double *events_ns, probe_op op, void *ctx, cudaStream_t stream,
	int warmup, int n, bool use_cupti, uint64_t *next_id, bool *used_events, mb_error *err)
{
	int rc = 0;
	cudaEvent_t ev[2] = {NULL, NULL};
	cudaError_t ce = cudaSuccess;
	mb_cupti_call call;
	for (int i = 0; i < 2 && ce == cudaSuccess; i++)
		ce = cudaEventCreate(&ev[i]);
	for (int i = 0; i < warmup && ce == cudaSuccess; i++)
		ce = op(ctx, stream);
	if (ce == cudaSuccess)
		ce = cudaStreamSynchronize(stream);
	if (ce != cudaSuccess) {
		rc = fail(err, ce, "warm-up");
		goto cleanup;
	}
	if (use_cupti)
		mb_cupti_discard();
	for (int i = 0; i < n; i++) {
		uint64_t id = (*next_id)++;
		if (probe_blocker && (ce = (cudaError_t)mb_blocker_hold(probe_blocker, stream)) != cudaSuccess) {
			rc = fail(err, ce, "stream hold");
			goto cleanup;
		}
		if (use_cupti && (rc = mb_cupti_call_begin(id, err)) != 0) {
			if (probe_blocker)
				mb_blocker_release(probe_blocker);
			goto cleanup;
		}
		ce = cudaEventRecord(ev[0], stream);
		if (ce == cudaSuccess)
			ce = op(ctx, stream);
		if (ce == cudaSuccess)
			ce = cudaEventRecord(ev[1], stream);
		if (probe_blocker)
			mb_blocker_release(probe_blocker);
		if (use_cupti && (rc = mb_cupti_call_end(err)) != 0)
			goto cleanup;
		if (ce == cudaSuccess)
			ce = cudaEventSynchronize(ev[1]);
		float ms = 0.0f;
		if (ce == cudaSuccess)
			ce = cudaEventElapsedTime(&ms, ev[0], ev[1]);
		if (ce != cudaSuccess) {
			rc = fail(err, ce, "timed call");
			goto cleanup;
		}
		events_ns[i] = (double)ms * 1e6;
		if (use_cupti) {
			if ((rc = mb_cupti_flush(err)) != 0 || (rc = mb_cupti_collect(&call, id, 1, NULL, 0, NULL, 0, err)) != 0)
				goto cleanup;
			/* A call CUPTI attributed nothing to would read as zero
			 * time: take the event time and say so. */
			cupti_ns[i] = call.launches > 0 ? (double)call.busy_ns : events_ns[i];
			*used_events = *used_events || call.launches == 0;
		} else {
			cupti_ns[i] = events_ns[i];
		}
	}
cleanup:
	for (int i = 0; i < 2; i++)
		if (ev[i] != NULL)
			cudaEventDestroy(ev[i]);
	return rc;
}

static int set_num(json_t *o, const char *key, double v, bool valid)
{
	return json_object_set_new(o, key, valid ? json_real(v) : json_null());
}

static int measure_copy(json_t *o, cudaStream_t stream, bool use_cupti, uint64_t *next_id, mb_error *err)
{
	int rc = 0;
	void *a = NULL, *b = NULL;
	size_t bytes = COPY_BYTES;
	cudaError_t ce;
	double own_ns[COPY_SAMPLES], own_ev[COPY_SAMPLES], ven_ns[COPY_SAMPLES], ven_ev[COPY_SAMPLES];
	double rd_ns[COPY_SAMPLES], rd_ev[COPY_SAMPLES], wr_ns[COPY_SAMPLES], wr_ev[COPY_SAMPLES];
	double vwr_ns[COPY_SAMPLES], vwr_ev[COPY_SAMPLES];
	mb_input_params fill = {COPY_SEED, MB_INPUT_UNIFORM, -1.0f, 1.0f};
	int dev = 0, sms = 0;
	copy_ctx ctx;
	json_t *samples = NULL;
	bool used_events = !use_cupti;

	while (true) {
		ce = cudaMalloc(&a, bytes);
		if (ce == cudaSuccess)
			ce = cudaMalloc(&b, bytes);
		if (ce == cudaSuccess)
			break;
		cudaFree(a);
		a = NULL;
		cudaGetLastError(); /* an allocation failure is not sticky */
		if (ce != cudaErrorMemoryAllocation || bytes / 2 < COPY_BYTES_FLOOR) {
			rc = fail(err, ce, "cudaMalloc for the copy probe");
			goto cleanup;
		}
		bytes /= 2;
	}
	cudaGetDevice(&dev);
	cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
	if ((ce = (cudaError_t)mb_cuda_fill(stream, a, bytes / 4, &fill, MB_FP32)) != cudaSuccess) {
		rc = fail(err, ce, "fill");
		goto cleanup;
	}
	ctx.dst = b;
	ctx.src = a;
	ctx.bytes = bytes;
	ctx.blocks = sms * COPY_BLOCKS_PER_SM;
	if ((rc = time_op(own_ns, own_ev, own_copy, &ctx, stream, COPY_WARMUP, COPY_SAMPLES, use_cupti, next_id, &used_events, err)) ||
	    (rc = time_op(ven_ns, ven_ev, vendor_copy, &ctx, stream, COPY_WARMUP, COPY_SAMPLES, use_cupti, next_id, &used_events, err)) ||
	    (rc = time_op(rd_ns, rd_ev, own_read, &ctx, stream, COPY_WARMUP, COPY_SAMPLES, use_cupti, next_id, &used_events, err)) ||
	    (rc = time_op(wr_ns, wr_ev, own_write, &ctx, stream, COPY_WARMUP, COPY_SAMPLES, use_cupti, next_id, &used_events, err)) ||
	    (rc = time_op(vwr_ns, vwr_ev, vendor_write, &ctx, stream, COPY_WARMUP, COPY_SAMPLES, use_cupti, next_id, &used_events, err)))
		goto cleanup;
	{
		samples = json_array();
		for (int i = 0; samples != NULL && i < COPY_SAMPLES; i++)
			json_array_append_new(samples, json_integer((json_int_t)own_ns[i]));
		/* Bytes read plus bytes written, as the roofline counts them. */
		double moved = 2.0 * (double)bytes;
		double own_gbps = moved / (median(own_ns, COPY_SAMPLES) / NS_PER_S) / BYTES_PER_GB;
		double ven_gbps = moved / (median(ven_ns, COPY_SAMPLES) / NS_PER_S) / BYTES_PER_GB;
		bool own_wins = own_gbps >= ven_gbps;
		set_num(o, "copy_gbps", own_wins ? own_gbps : ven_gbps, true);
		const char *source = own_wins ? (used_events ? "own_copy_kernel (events)" : "own_copy_kernel")
			: (used_events ? "cudaMemcpy (events)" : "cudaMemcpy");
		json_object_set_new(o, "copy_source", json_string(source));
		json_object_set_new(o, "copy_bytes", json_integer((json_int_t)bytes));
		set_num(o, "own_copy_gbps", own_gbps, true);
		set_num(o, "vendor_copy_gbps", ven_gbps, true);
		/* The own kernel's samples and events let a reader check CUPTI
		 * against events on one long, well-understood call. */
		json_object_set_new(o, "copy_samples_ns", samples);
		samples = NULL;
		set_num(o, "copy_events_median_ns", median(own_ev, COPY_SAMPLES), true);
		/* One direction at a time: a kernel that reads more than it writes
		 * can beat the copy rate, and its ceiling follows its own mix
		 * (mb_throughput_json interpolates between these and the copy). */
		double read_gbps = (double)bytes / (median(rd_ns, COPY_SAMPLES) / NS_PER_S) / BYTES_PER_GB;
		double own_write_gbps = (double)bytes / (median(wr_ns, COPY_SAMPLES) / NS_PER_S) / BYTES_PER_GB;
		double ven_write_gbps = (double)bytes / (median(vwr_ns, COPY_SAMPLES) / NS_PER_S) / BYTES_PER_GB;
		set_num(o, "read_gbps", read_gbps, true);
		set_num(o, "write_gbps", own_write_gbps > ven_write_gbps ? own_write_gbps : ven_write_gbps, true);
	}
cleanup:
	json_decref(samples);
	cudaFree(a);
	cudaFree(b);
	return rc;
}

#if MB_HAVE_CUBLAS
struct gemm_ctx {
	cublasHandle_t handle;
	const void *a, *b;
	void *c;
};

cudaError_t vendor_gemm(void *p, cudaStream_t)
{
	gemm_ctx *g = (gemm_ctx *)p;
	float alpha = 1.0f, beta = 0.0f;
	cublasStatus_t s = cublasGemmEx(g->handle, CUBLAS_OP_N, CUBLAS_OP_N, GEMM_N, GEMM_N, GEMM_N,
		&alpha, g->a, CUDA_R_16BF, GEMM_N, g->b, CUDA_R_16BF, GEMM_N, &beta, g->c, CUDA_R_16BF,
		GEMM_N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
	return s == CUBLAS_STATUS_SUCCESS ? cudaGetLastError() : cudaErrorUnknown;
}

static int measure_gemm(json_t *o, cudaStream_t stream, bool use_cupti, uint64_t *next_id, mb_error *err)
{
	int rc = 0;
	gemm_ctx g = {NULL, NULL, NULL, NULL};
	void *a = NULL, *b = NULL, *c = NULL;
	size_t n = (size_t)GEMM_N * GEMM_N, bytes = n * sizeof(__nv_bfloat16);
	double ns[GEMM_SAMPLES], ev[GEMM_SAMPLES];
	int dev = 0, sms = 0;
	bool used_events = !use_cupti;
	mb_input_params fill_a = {GEMM_SEED, MB_INPUT_UNIFORM, -1.0f, 1.0f}, fill_b = fill_a;
	cudaError_t ce;

	fill_b.key = GEMM_SEED + 1;
	if (cublasCreate(&g.handle) != CUBLAS_STATUS_SUCCESS ||
	    cublasSetStream(g.handle, stream) != CUBLAS_STATUS_SUCCESS) {
		rc = mb_error_set(err, MB_EDEVICE, "ceilings", "cublasCreate failed");
		goto cleanup;
	}
	if ((ce = cudaMalloc(&a, bytes)) != cudaSuccess || (ce = cudaMalloc(&b, bytes)) != cudaSuccess ||
	    (ce = cudaMalloc(&c, bytes)) != cudaSuccess) {
		rc = fail(err, ce, "cudaMalloc for the GEMM probe");
		goto cleanup;
	}
	cudaGetDevice(&dev);
	cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
	/* Random data: a GEMM on zeros runs measurably faster than on real
	 * values, which would inflate the ceiling. */
	if ((ce = (cudaError_t)mb_cuda_fill(stream, a, n, &fill_a, MB_BF16)) != cudaSuccess ||
	    (ce = (cudaError_t)mb_cuda_fill(stream, b, n, &fill_b, MB_BF16)) != cudaSuccess) {
		rc = fail(err, ce, "fill");
		goto cleanup;
	}
	g.a = a, g.b = b, g.c = c;
	if ((rc = time_op(ns, ev, vendor_gemm, &g, stream, GEMM_WARMUP, GEMM_SAMPLES, use_cupti, next_id, &used_events, err)))
		goto cleanup;
	{
		double flops = 2.0 * (double)GEMM_N * GEMM_N * GEMM_N;
		double tflops = flops / (median(ns, GEMM_SAMPLES) / NS_PER_S) / FLOPS_PER_TFLOP;
		set_num(o, "gemm_tflops", tflops, true);
		json_object_set_new(o, "gemm_source", json_string(used_events
			? "cublasGemmEx bf16, fp32 accumulate (events)" : "cublasGemmEx bf16, fp32 accumulate"));
		json_object_set_new(o, "gemm_shape", json_pack("[iii]", GEMM_N, GEMM_N, GEMM_N));
		set_num(o, "own_gemm_tflops", 0.0, false);
		set_num(o, "vendor_gemm_tflops", tflops, true);
	}
cleanup:
	if (g.handle != NULL)
		cublasDestroy(g.handle);
	cudaFree(a);
	cudaFree(b);
	cudaFree(c);
	return rc;
}
#endif

} /* namespace */

extern "C" int mb_cuda_ceilings_measure(json_t **out, void *stream_ptr, bool use_cupti, mb_error *err)
{
	int rc = 0;
	cudaStream_t stream = (cudaStream_t)stream_ptr;
	uint64_t next_id = PROBE_ID_BASE;
	json_t *o = json_object();
	mb_blocker blocker;
	*out = NULL;
	probe_blocker = mb_blocker_init(&blocker) == 0 ? &blocker : NULL;
	if (o == NULL) {
		rc = mb_error_set(err, MB_ENOMEM, "ceilings", "out of memory");
		goto cleanup;
	}
	if ((rc = measure_copy(o, stream, use_cupti, &next_id, err)) != 0)
		goto cleanup;
#if MB_HAVE_CUBLAS
	if ((rc = measure_gemm(o, stream, use_cupti, &next_id, err)) != 0)
		goto cleanup;
#else
	json_object_set_new(o, "gemm_tflops", json_null());
	json_object_set_new(o, "gemm_source", json_string("none: built without cuBLAS"));
#endif
	*out = o;
	o = NULL;
cleanup:
	if (probe_blocker)
		mb_blocker_free(probe_blocker);
	probe_blocker = NULL;
	json_decref(o);
	return rc;
}
