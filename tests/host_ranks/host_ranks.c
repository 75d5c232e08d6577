/* A host stand-in for CUDA, NCCL and moe_alltoall's device side, so that
 * megabench alltoall (the multi-rank backend, its world, the driver, the
 * receipt, the table) runs end to end on a machine without GPUs: the test
 * executable megabench-host-ranks links this file in their place. Never
 * part of megabench: its "GPUs" are host memory and its clock advances a
 * fixed step per event.
 *
 * Devices: cudaMalloc is malloc, copies are memcpy, streams and events do
 * nothing but events read a clock that advances 0.25 ms (plus 0.01 ms per
 * device index) each time one is recorded. The moe_alltoall variants
 * exchange rows between the ranks of one call as kernels/moe_alltoall.h
 * says their dispatch does (the fallback by expert in token order, the
 * fused variant once per destination with its metadata, in reverse token
 * order, the vendors equal chunks of x tiled and echoed back), compute in
 * fp32 and round once to the dtype where the GPU does.
 *
 * The environment steers it: MB_HOST_RANKS_GPUS (devices, default 2),
 * MB_HOST_RANKS_FAIL_CALL=N (the Nth call of the variants fails, as NCCL
 * would), MB_HOST_RANKS_CORRUPT (a bit of every rank 1's first received row
 * flips in every call), MB_HOST_RANKS_SLOW_US (each call sleeps so long). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/cuda_headers.h"
#include "harness/cuda_inputs.h"
#include "harness/cuda_topology.h"
#include "harness/cuda_device.h"
#include "harness/host_inputs.h"
#include "kernels/dtype.h"
#include "kernels/moe_alltoall.h"

#define MAX_DEVICES 64
#define DEVICE_BYTES ((size_t)80 << 30)
#define EVENT_STEP_MS 0.25
#define EVENT_DEVICE_MS 0.01
#define NCCL_VERSION_HERE 22809

static int current;
static size_t used[MAX_DEVICES];
static double clock_ms;
static long calls;

static long env_number(const char *name, long fallback)
{
	const char *v = getenv(name);

	return v && *v ? strtol(v, NULL, 10) : fallback;
}

/* ---- the CUDA runtime, what megabench's C files call -------------------------- */

cudaError_t cudaGetDeviceCount(int *n)
{
	*n = (int)env_number("MB_HOST_RANKS_GPUS", 2);
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int d)
{
	current = d >= 0 && d < MAX_DEVICES ? d : 0;
	return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t bytes)
{
	*p = malloc(bytes ? bytes : 1);
	used[current] += bytes;
	return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void *p)
{
	free(p);
	return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	(void)kind;
	memcpy(dst, src, n);
	return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s)
{
	(void)kind, (void)s;
	memcpy(dst, src, n);
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	(void)s;
	return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
	(void)flags;
	*s = (cudaStream_t)malloc(1);
	return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	free(s);
	return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
	*e = (cudaEvent_t)calloc(1, sizeof(double));
	return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	free(e);
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
	(void)s;
	*(double *)e = clock_ms;
	clock_ms += EVENT_STEP_MS + EVENT_DEVICE_MS * current;
	return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	(void)e;
	return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
	*ms = (float)(*(double *)end - *(double *)start);
	return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
	*total = DEVICE_BYTES;
	*free_bytes = DEVICE_BYTES - used[current];
	return cudaSuccess;
}

const char *cudaGetErrorString(cudaError_t e)
{
	return e == cudaSuccess ? "no error" : "host stand-in error";
}

/* ---- NCCL ---------------------------------------------------------------------- */

ncclResult_t ncclGetVersion(int *version)
{
	*version = NCCL_VERSION_HERE;
	return ncclSuccess;
}

ncclResult_t ncclCommInitAll(ncclComm_t *comms, int n, const int *devices)
{
	(void)devices;
	for (int i = 0; i < n; i++)
		comms[i] = (ncclComm_t)(intptr_t)(i + 1);
	return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	(void)comm;
	return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r)
{
	(void)r;
	return "host stand-in NCCL error";
}

/* ---- megabench's own device helpers -------------------------------------------- */

int mb_cuda_fill(void *stream, void *dst, uint64_t n, const mb_input_params *p, mb_dtype dtype)
{
	float *f = malloc(n * sizeof(float));

	(void)stream;
	if (!f)
		return cudaErrorMemoryAllocation;
	mb_host_fill(f, n, p, dtype);
	mb_dtype_pack(dtype, f, dst, n);
	free(f);
	return 0;
}

int mb_cuda_rows_f32(void *stream, float *dst, const void *src, const int64_t *rows, int64_t n_rows,
	int64_t row_elems, mb_dtype dtype, int index)
{
	const size_t size = mb_dtype_size(dtype);

	(void)stream, (void)index;
	for (int64_t i = 0; i < n_rows; i++)
		mb_dtype_unpack(dtype, (const char *)src + (size_t)((rows ? rows[i] : i) * row_elems) * size,
			dst + i * row_elems, (size_t)row_elems);
	return 0;
}

static void uuid_of(char *buf, size_t len, int device)
{
	snprintf(buf, len, "GPU-00000000-0000-0000-0000-%012d", device);
}

int mb_cuda_device_json(json_t **out, int device, mb_error *err)
{
	char uuid[64];

	(void)err;
	uuid_of(uuid, sizeof(uuid), device);
	*out = json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:n}", "backend", "cuda", "name", "Host stand-in GPU", "uuid",
		uuid, "index", device, "driver_version", "host stand-in", "runtime_version", "13.0", "nccl_version");
	return 0;
}

void mb_cuda_nvml_close(void)
{
}

int mb_cuda_topology(json_t **out_gpus, json_t **out_topology, const int *devices, int n, mb_error *err)
{
	json_t *links = json_array();

	(void)err;
	*out_gpus = json_array();
	for (int i = 0; i < n; i++) {
		char uuid[64];
		uuid_of(uuid, sizeof(uuid), devices[i]);
		json_array_append_new(*out_gpus, json_pack("{s:i, s:s, s:s, s:n}", "index", devices[i], "name",
			"Host stand-in GPU", "uuid", uuid, "pci_bus_id"));
		for (int j = 0; j < i; j++)
			json_array_append_new(links, json_pack("{s:i, s:i, s:s}", "a", j, "b", i, "kind", "nvlink"));
	}
	*out_topology = json_pack("{s:s, s:s, s:o, s:s}", "source", "nvml", "class", "nvlink", "links", links, "note",
		"host stand-in (tests/host_ranks): no GPU was asked");
	return 0;
}

/* ---- moe_alltoall's device side on the host -------------------------------------- */

struct mb_a2a_rank {
	mb_a2a_dims d;
	mb_a2a_variant v;
	mb_a2a_io io;
	int device;
	int64_t row, per_gpu, recv_cap, send_cap, chunk;
	char *send, *recv, *out, *ret;
	mb_a2a_meta *send_meta, *recv_meta;
	int32_t *pos, *slot;
	int32_t counts[MB_A2A_MAX_E], recv_counts[MB_A2A_MAX_E];
	int64_t send_rows[MB_A2A_MAX_GPUS], send_off[MB_A2A_MAX_GPUS];
	int64_t recv_rows[MB_A2A_MAX_GPUS], recv_off[MB_A2A_MAX_GPUS];
};

static bool vendor(mb_a2a_variant v)
{
	return v == MB_A2A_VENDOR_ALLTOALL || v == MB_A2A_VENDOR_SENDRECV;
}

int mb_a2a_nccl_version(void)
{
	return NCCL_VERSION_HERE;
}

/* The device's hash in spirit (kernels/moe_alltoall.h): the sum of a mix
 * of each 16-bit word with its position. */
int mb_a2a_row_hash(void *stream, const void *rows, int64_t n_rows, int64_t row_bytes, uint64_t *out)
{
	(void)stream;
	for (int64_t r = 0; r < n_rows; r++) {
		const uint16_t *w = (const uint16_t *)((const char *)rows + r * row_bytes);
		uint64_t h = 0;
		for (int64_t i = 0; i < row_bytes / 2; i++)
			h += mb_rng_mix((uint64_t)i << 16 | w[i]);
		out[r] = h;
	}
	return 0;
}

int mb_a2a_rank_open(mb_a2a_rank **out, const mb_a2a_dims *d, mb_a2a_variant v, int rank, int device, void *comm,
	void *stream, const mb_a2a_io *io, int64_t recv_cap_rows, mb_error *err)
{
	mb_a2a_rank *r = calloc(1, sizeof(*r));

	(void)rank, (void)comm, (void)stream;
	if (!r)
		return mb_error_set(err, MB_ENOMEM, NULL, "out of host memory");
	r->d = *d;
	r->v = v;
	r->io = *io;
	r->device = device;
	r->row = d->H * (int64_t)mb_dtype_size(d->dtype);
	r->per_gpu = d->E / d->G;
	r->chunk = mb_a2a_vendor_rows_per_peer(d);
	r->send_cap = v == MB_A2A_FALLBACK ? d->T * d->K : v == MB_A2A_FUSED ? d->G * d->T : r->chunk * d->G;
	r->recv_cap = vendor(v) ? r->send_cap : recv_cap_rows;
	r->send = malloc((size_t)(r->send_cap * r->row) + 1);
	r->recv = malloc((size_t)(r->recv_cap * r->row) + 1);
	r->out = malloc((size_t)(r->recv_cap * r->row) + 1);
	r->ret = malloc((size_t)(r->send_cap * r->row) + 1);
	r->send_meta = malloc((size_t)r->send_cap * sizeof(mb_a2a_meta) + 1);
	r->recv_meta = malloc((size_t)r->recv_cap * sizeof(mb_a2a_meta) + 1);
	r->pos = malloc((size_t)(d->T * d->K) * sizeof(int32_t));
	r->slot = malloc((size_t)(d->T * d->G) * sizeof(int32_t));
	if (!r->send || !r->recv || !r->out || !r->ret || !r->send_meta || !r->recv_meta || !r->pos || !r->slot) {
		mb_a2a_rank_close(r);
		return mb_error_set(err, MB_ENOMEM, NULL, "out of host memory");
	}
	used[device] += (size_t)((2 * r->send_cap + 2 * r->recv_cap) * r->row);
	for (int64_t j = 0; vendor(v) && j < r->send_cap; j++)
		memcpy(r->send + j * r->row, (const char *)io->x + (j % d->T) * r->row, (size_t)r->row);
	*out = r;
	return 0;
}

void mb_a2a_rank_close(mb_a2a_rank *r)
{
	if (!r)
		return;
	used[r->device] -= used[r->device] >= (size_t)((2 * r->send_cap + 2 * r->recv_cap) * r->row)
		? (size_t)((2 * r->send_cap + 2 * r->recv_cap) * r->row) : 0;
	free(r->send);
	free(r->recv);
	free(r->out);
	free(r->ret);
	free(r->send_meta);
	free(r->recv_meta);
	free(r->pos);
	free(r->slot);
	free(r);
}

int mb_a2a_rank_poison(mb_a2a_rank *r, mb_error *err)
{
	(void)err;
	memset(r->io.y, 0xff, (size_t)(r->d.T * r->row));
	memset(r->recv, 0xff, (size_t)(r->recv_cap * r->row));
	memset(r->out, 0xff, (size_t)(r->recv_cap * r->row));
	memset(r->ret, 0xff, (size_t)(r->send_cap * r->row));
	memset(r->recv_meta, 0xff, (size_t)r->recv_cap * sizeof(mb_a2a_meta));
	return 0;
}

void mb_a2a_rank_view(const mb_a2a_rank *r, mb_a2a_view *out)
{
	memset(out, 0, sizeof(*out));
	out->G = r->d.G;
	memcpy(out->send_rows, r->send_rows, sizeof(out->send_rows));
	memcpy(out->send_off, r->send_off, sizeof(out->send_off));
	memcpy(out->recv_rows, r->recv_rows, sizeof(out->recv_rows));
	memcpy(out->recv_off, r->recv_off, sizeof(out->recv_off));
	out->recv_expert_counts = r->v == MB_A2A_FALLBACK ? r->recv_counts : NULL;
	out->send = r->send;
	out->recv = r->recv;
	out->recv_meta = r->recv_meta;
	out->ret = r->ret;
	out->meta_bytes = r->v == MB_A2A_FUSED ? (int64_t)sizeof(mb_a2a_meta) : 0;
}

static float get(const mb_a2a_rank *r, const char *buf, int64_t row, int64_t c)
{
	float f;

	mb_dtype_unpack(r->d.dtype, buf + row * r->row + c * (int64_t)mb_dtype_size(r->d.dtype), &f, 1);
	return f;
}

static void put(const mb_a2a_rank *r, char *buf, int64_t row, int64_t c, float v)
{
	mb_dtype_pack(r->d.dtype, &v, buf + row * r->row + c * (int64_t)mb_dtype_size(r->d.dtype), 1);
}

/* The fallback's send rows for destination g: its experts in order, each's
 * copies in token order; pos remembers each (token, k)'s row. */
static int64_t pack_fallback(mb_a2a_rank *r, int g, int64_t n)
{
	const mb_a2a_dims *d = &r->d;

	for (int64_t j = 0; j < r->per_gpu; j++)
		for (int64_t t = 0; t < d->T; t++)
			for (int64_t k = 0; k < d->K; k++)
				if (r->io.expert[t * d->K + k] == g * r->per_gpu + j) {
					memcpy(r->send + n * r->row, (const char *)r->io.x + t * r->row, (size_t)r->row);
					r->pos[t * d->K + k] = (int32_t)n++;
					r->counts[g * r->per_gpu + j]++;
				}
	return n;
}

/* The fused send rows for destination g: each token with an expert there
 * once, in reverse token order (the metadata names the token). */
static int64_t pack_fused(mb_a2a_rank *r, int g, int64_t n)
{
	const mb_a2a_dims *d = &r->d;

	for (int64_t t = d->T - 1; t >= 0; t--) {
		mb_a2a_meta m = {(int32_t)t, 0, {0}, {0}};
		for (int64_t k = 0; k < d->K; k++)
			if (r->io.expert[t * d->K + k] / r->per_gpu == g) {
				m.expert[m.n] = r->io.expert[t * d->K + k];
				m.weight[m.n++] = r->io.weight[t * d->K + k];
			}
		r->slot[t * d->G + g] = m.n ? (int32_t)n : -1;
		if (m.n) {
			memcpy(r->send + n * r->row, (const char *)r->io.x + t * r->row, (size_t)r->row);
			r->send_meta[n++] = m;
		}
	}
	return n;
}

static void pack(mb_a2a_rank *r)
{
	int64_t n = 0;

	memset(r->counts, 0, sizeof(r->counts));
	for (int g = 0; g < r->d.G; g++) {
		r->send_off[g] = n;
		n = r->v == MB_A2A_FALLBACK ? pack_fallback(r, g, n) : r->v == MB_A2A_FUSED ? pack_fused(r, g, n) : n + r->chunk;
		r->send_rows[g] = n - r->send_off[g];
	}
}

/* Every source's rows to `dst`, source by source, and the counts it
 * announced. */
static void dispatch(mb_a2a_rank *const *ranks, int n, int di)
{
	mb_a2a_rank *dst = ranks[di];
	int64_t at = 0;

	for (int s = 0; s < n; s++) {
		const mb_a2a_rank *src = ranks[s];
		dst->recv_off[s] = at;
		dst->recv_rows[s] = src->send_rows[di];
		memcpy(dst->recv + at * dst->row, src->send + src->send_off[di] * src->row,
			(size_t)(src->send_rows[di] * src->row));
		if (dst->v == MB_A2A_FUSED)
			memcpy(dst->recv_meta + at, src->send_meta + src->send_off[di], (size_t)src->send_rows[di]
				* sizeof(mb_a2a_meta));
		for (int64_t j = 0; j < dst->per_gpu; j++)
			dst->recv_counts[s * dst->per_gpu + j] = src->counts[di * dst->per_gpu + j];
		at += src->send_rows[di];
	}
}

/* The experts of rank `r`: the fallback scales each copy by its expert's
 * s_e, the fused variant pre-sums sum_i w_i s_e_i x; fp32, one rounding. */
static void experts(mb_a2a_rank *r, int rank)
{
	const mb_a2a_dims *d = &r->d;

	for (int s = 0; s < d->G; s++) {
		int64_t p = r->recv_off[s];
		for (int64_t j = 0; r->v == MB_A2A_FALLBACK && j < r->per_gpu; j++) {
			const float scale = mb_moe_a2a_scale(rank * r->per_gpu + j, d->E);
			for (int64_t q = 0; q < r->recv_counts[s * r->per_gpu + j]; q++, p++)
				for (int64_t c = 0; c < d->H; c++)
					put(r, r->out, p, c, scale * get(r, r->recv, p, c));
		}
		for (int64_t q = 0; r->v == MB_A2A_FUSED && q < r->recv_rows[s]; q++, p++) {
			const mb_a2a_meta *m = &r->recv_meta[p];
			for (int64_t c = 0; c < d->H; c++) {
				float x = get(r, r->recv, p, c), acc = 0;
				for (int i = 0; i < m->n; i++)
					acc += m->weight[i] * (mb_moe_a2a_scale(m->expert[i], d->E) * x);
				put(r, r->out, p, c, acc);
			}
		}
	}
}

/* y of rank `r` from what came back: the fallback sums w_k times each
 * copy, the fused variant the pre-sums of every destination; fp32, one
 * rounding. */
static void combine(mb_a2a_rank *r)
{
	const mb_a2a_dims *d = &r->d;

	for (int64_t t = 0; t < d->T; t++) {
		for (int64_t c = 0; c < d->H; c++) {
			float acc = 0;
			for (int64_t k = 0; r->v == MB_A2A_FALLBACK && k < d->K; k++)
				acc += r->io.weight[t * d->K + k] * get(r, r->ret, r->pos[t * d->K + k], c);
			for (int g = 0; r->v == MB_A2A_FUSED && g < d->G; g++)
				if (r->slot[t * d->G + g] >= 0)
					acc += get(r, r->ret, r->slot[t * d->G + g], c);
			put(r, r->io.y, t, c, acc);
		}
	}
}

int mb_a2a_call(mb_a2a_rank *const *ranks, int n, mb_error *err)
{
	const long slow_us = env_number("MB_HOST_RANKS_SLOW_US", 0);

	if (calls++ == env_number("MB_HOST_RANKS_FAIL_CALL", -1))
		return mb_error_set(err, MB_EDEVICE, NULL, "rank 1 (device 1): ncclGroupEnd: host stand-in failure");
	for (int i = 0; i < n; i++)
		pack(ranks[i]);
	for (int i = 0; i < n; i++)
		dispatch(ranks, n, i);
	if (getenv("MB_HOST_RANKS_CORRUPT") && n > 1 && ranks[1]->recv_rows[0] > 0)
		ranks[1]->recv[3] ^= 0x40;
	if (slow_us > 0)
		usleep((useconds_t)slow_us);
	for (int i = 0; i < n; i++)
		if (!vendor(ranks[i]->v))
			experts(ranks[i], i);
	/* the return leg: each source's send layout, from what its peers made
	 * of its rows (the vendors echo what they received) */
	for (int s = 0; s < n; s++) {
		mb_a2a_rank *src = ranks[s];
		for (int di = 0; di < n; di++) {
			const mb_a2a_rank *dst = ranks[di];
			memcpy(src->ret + src->send_off[di] * src->row, (vendor(dst->v) ? dst->recv : dst->out)
				+ dst->recv_off[s] * dst->row, (size_t)(src->send_rows[di] * src->row));
		}
	}
	for (int i = 0; i < n; i++)
		if (!vendor(ranks[i]->v))
			combine(ranks[i]);
	return 0;
}
