/* linear_cross_entropy: loss and gradients of cross-entropy over the
 * logits z = h W^T, forward and backward in one call (the math, the
 * reference and the tolerance: src/reference/linear_cross_entropy.c).
 * In h [T,H], W [V,H] (bf16), labels [T,1] (int32); out loss [T,1] and
 * dh [T,H] (bf16), and dW [V,H] in fp32: the weight's main-grad buffer
 * (training stacks with gradient-accumulation fusion keep one, so a
 * variant may accumulate into it over chunks at no cost in memory). Every
 * variant writes dW; gradients of the summed loss. Axes: T, H, V.
 *
 * Every GEMM is cuBLAS, bf16 in, fp32 accumulate (CUBLAS_COMPUTE_32F),
 * through the harness's handle; every variant forbids cuBLAS's
 * reduced-precision split-K reductions for the call (restoring the
 * handle's math mode after), so each GEMM rounds once. PyTorch allows them
 * for bf16 by default; the tolerance is derived without them. Scratch
 * memory comes from mb_ws_reserve slots, so the harness measures it. No
 * host synchronisation.
 *
 * ---- materialized (the fallback: what a framework runs) -------------------
 *   logits = h W^T            cuBLAS, into a bf16 [T, V] buffer
 *   lse, loss                 lce_lse: a block per row, fp32 online max/sum
 *                             over 16-byte loads; loss from the bf16 logit
 *   G = softmax - onehot      lce_grad: in place, bf16
 *   dh = G W                  cuBLAS, bf16 out
 *   dW = G^T h                cuBLAS, fp32 out (a framework with
 *                             gradient-accumulation fusion adds it to the
 *                             main grad: beta 1, 4VH bytes more read)
 * Extra memory: 2TV bytes (4.2 GB at T = 16384, V = 128256) + 4T + the
 * cuBLAS workspace slot (MB_WS_BLAS_BYTES, 32 MiB).
 *
 * ---- the fused variants: at most 1/32 of that --------------------------------
 * Both size their chunks so that their slots, cuBLAS's workspace
 * included, hold at most 1/MEM_DIVISOR of what materialized holds at the
 * same shape (materialized_bytes), and give cuBLAS FUSED_BLAS_WS of
 * workspace (none of their GEMMs wants split-K): 32 MiB alone is 1/33 of
 * materialized at T = 8192, V = 65536.
 *
 * Why neither reaches materialized's time. G needs each token's
 * log-sum-exp, a sum over the whole vocabulary, before any of its entries;
 * dW sums over every token, dh over the whole vocabulary. Whatever holds
 * logits for tokens whose lse is not yet known can hold at most 1/32 of
 * [T, V], so one of two costs is unavoidable:
 *   - recompute: a first pass finds lse (dh can come with it, the way
 *     flash attention accumulates its output against a running max), a
 *     second recomputes the logits for G and dW: 4 GEMMs of 2TVH where
 *     materialized runs 3 (vocab_chunked);
 *   - accumulate: take T/32 tokens at a time through the three GEMMs and
 *     add each chunk's dW into the fp32 main grad (token_chunked). Each
 *     chunk then reads and writes all of dW, 8VH bytes, against 2 C V H
 *     FLOPs: with C <= T/32 that is at least 256 VH bytes in all, 34 GB at
 *     T = 8192, H = 2048, V = 65536 (8.0 ms at 4.27 TB/s, where
 *     materialized takes 9.1 ms in all) and 134 GB at H = 4096,
 *     V = 128256 (31 ms of its 77.7); the dW GEMM of a chunk is
 *     memory-bound (its K is C) and the dh GEMM has only C x H outputs
 *     over K = V, so it needs a split of its own (more memory, fewer
 *     tokens a chunk).
 * The plans at suites/nam56r.toml's shapes (tests/unit/test_lce_plan.c
 * holds the memory to 1/32), and the time predicted from 750 TFLOP/s for
 * GEMMs (vocab_chunked's 4 with 10% for its other kernels; token_chunked's
 * logits and dh with 10-15%, its dW as the larger of its FLOPs and its
 * main-grad traffic at 4 TB/s) against materialized as run d measured it:
 *   T      H     V       vocab_chunked                token_chunked
 *                        block  dw   memory  time    chunk split memory  time
 *   8192   2048  65536   1344  1984  1/32.4  1.42x    128    8   1/42.2  2.73x
 *   8192   2048  128256  2624  3968  1/32.3  1.30x    192    8   1/34.0  1.93x
 *   8192   4096  65536    960  1984  1/32.9  1.34x    128    5   1/39.1  2.53x
 *   8192   4096  128256  1984  3968  1/32.3  1.34x    192    5   1/32.3  1.94x
 *   16384  2048  65536   2688  1984  1/32.4  1.32x    384    5   1/32.5  1.38x
 *   16384  2048  128256  5312  3968  1/32.1  1.29x    384    5   1/36.7  1.34x
 *   16384  4096  65536   1984  1984  1/32.9  1.31x    320    3   1/37.1  1.43x
 *   16384  4096  128256  3968  3968  1/32.3  1.30x    384    3   1/35.8  1.30x
 * (about 101 ms for either at the largest shape, against the 90.5 ms of
 * torch.compile's token-chunked path, which holds 6.1 GB, 45 times
 * these). Neither is predicted to meet 1.0x anywhere; both are measured
 * so that the GPU settles which pays where.
 *
 * ---- vocab_chunked (4 GEMMs, never a [T, V] buffer) ------------------------
 *   Pass 1, per token block of `block` tokens, per vocabulary chunk of
 *   FWD_CHUNK:
 *     Z = h_b W_c^T          cuBLAS, bf16 [tb, vc]
 *     lce_online             per row: running max m and sum s in fp32,
 *                            E = exp(z - m) in place (bf16), the row of
 *                            acc scaled by exp(m_old - m) when m grew
 *     acc (+)= E W_c         cuBLAS, fp32 [tb, H] (beta 0 on the first chunk)
 *   then lce_finish per token: lse = m + log s, z_y = h_t . W_y in fp32,
 *   loss = lse - z_y, dh = acc / s - W_y (fp32, then bf16).
 *   Pass 2, per vocabulary chunk of `dw` over all tokens:
 *     Z = h W_c^T            cuBLAS, bf16 [T, vc]
 *     lce_grad               G = exp(z - lse) - onehot, in place (bf16)
 *     dW_c = G^T h           cuBLAS, fp32, straight into dW's rows (complete:
 *                            its sum runs over every token)
 *   The two passes share one slot (pass 1's acc and chunk, pass 2's
 *   chunk); m, s and lse are 12T bytes in another.
 *
 * ---- token_chunked (3 GEMMs, dW accumulated over token chunks) -------------
 *   Per chunk of `chunk` tokens [t0, t0 + c):
 *     Z = h_c W^T            cuBLAS, bf16 [c, V]
 *     lce_lse, lce_grad      materialized's row kernels on the chunk
 *     dh_c = G W             cuBLAS; when the c x H output has too few
 *                            tiles for the SMs, `split` vocabulary slices
 *                            (one strided-batched call) into fp32 partials
 *                            and lce_dh_reduce sums them into bf16 dh
 *     dW (+)= G^T h_c        cuBLAS, fp32, beta 0 on the first chunk
 *   Slots: Z, lse of the chunk, the partials.
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/launch.h"
#include "kernels/vec.cuh"
#include "kernels/workspace.h"

enum { AX_T, AX_H, AX_V };
enum { IN_H, IN_W, IN_LABELS };
enum { OUT_LOSS, OUT_DH, OUT_DW };

typedef __nv_bfloat16 bf16;

#define ROW_THREADS 256
#define ROW_VEC 8 /* bf16 per 16-byte access */
#define SLOT_ALIGN 256 /* mb_ws_reserve rounds every slot up to this */
/* The fused variants hold at most 1/MEM_DIVISOR of materialized's bytes. */
#define MEM_DIVISOR 32
/* Their cuBLAS workspace: enough for a kernel's own bookkeeping; none of
 * their GEMMs is split over K by cuBLAS. */
#define FUSED_BLAS_WS ((size_t)1 << 20)
/* Chunks of tokens and of the vocabulary are whole multiples of this
 * (whole 64-wide GEMM tiles), unless the axis is shorter. */
#define CHUNK_ALIGN 64
/* vocab_chunked: pass 1's vocabulary chunk. */
#define FWD_CHUNK 8192
/* token_chunked: dh's c x H output is split over the vocabulary until it
 * has DH_WAVES waves of DH_TILE x DH_TILE tiles, in at most DH_MAX_SPLIT
 * slices. */
#define DH_TILE 128
#define DH_WAVES 2
#define DH_MAX_SPLIT 8
/* The SM count when the device cannot say (an H100 or H200). */
#define DEFAULT_SMS 132
#define REDUCE_THREADS 256
#define REDUCE_VEC 4 /* fp32 partials per 16-byte access */

static int64_t round_up(int64_t x, int64_t to)
{
	return (x + to - 1) / to * to;
}

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

static int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}
/* ---- block reductions ------------------------------------------------------ */

__device__ __forceinline__ float warp_max(float v)
{
	for (int o = MB_WARP_THREADS / 2; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

__device__ __forceinline__ float warp_sum(float v)
{
	for (int o = MB_WARP_THREADS / 2; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

/* The max (is_max) or sum of v over the block, in every thread. `smem`
 * holds a value per warp; the leading barrier lets a block call this
 * back to back. */
__device__ float block_reduce(float v, float *smem, bool is_max)
{
	const int lane = threadIdx.x % MB_WARP_THREADS, warp = threadIdx.x / MB_WARP_THREADS;
	const int warps = blockDim.x / MB_WARP_THREADS;
	const float none = is_max ? -INFINITY : 0.0f;

	v = is_max ? warp_max(v) : warp_sum(v);
	__syncthreads();
	if (lane == 0)
		smem[warp] = v;
	__syncthreads();
	if (warp == 0) {
		v = lane < warps ? smem[lane] : none;
		v = is_max ? warp_max(v) : warp_sum(v);
		if (lane == 0)
			smem[0] = v;
	}
	__syncthreads();
	return smem[0];
}

/* ---- row passes over bf16 logits -------------------------------------------
 * A row of n logits starts 16-byte aligned (its buffer's row stride is a
 * multiple of 8); each thread takes 8 at a time, then the tail one by one. */

/* This thread's max over the row. */
__device__ float row_max(const bf16 *row, int n)
{
	const int body = n / ROW_VEC * ROW_VEC;
	float m = -INFINITY;

	for (int j = threadIdx.x * ROW_VEC; j < body; j += blockDim.x * ROW_VEC) {
		mb_packed<bf16, ROW_VEC> x;
		x.load(row + j);
#pragma unroll
		for (int e = 0; e < ROW_VEC; e++)
			m = fmaxf(m, x.get(e));
	}
	for (int j = body + threadIdx.x; j < n; j += blockDim.x)
		m = fmaxf(m, __bfloat162float(row[j]));
	return m;
}

/* Each logit x of the row becomes f(j, x) (j its column), stored in place
 * as bf16; returns this thread's sum of the new values taken before the
 * rounding (the online kernel's sum of exp(z - m)). */
template <typename F> __device__ float row_rewrite(bf16 *row, int n, F f)
{
	const int body = n / ROW_VEC * ROW_VEC;
	float sum = 0.0f;

	for (int j = threadIdx.x * ROW_VEC; j < body; j += blockDim.x * ROW_VEC) {
		mb_packed<bf16, ROW_VEC> x;
		float y[ROW_VEC];
		x.load(row + j);
#pragma unroll
		for (int e = 0; e < ROW_VEC; e++) {
			y[e] = f(j + e, x.get(e));
			sum += y[e];
		}
		mb_store_f32<bf16, ROW_VEC>(row + j, y);
	}
	for (int j = body + threadIdx.x; j < n; j += blockDim.x) {
		float y = f(j, __bfloat162float(row[j]));
		sum += y;
		row[j] = __float2bfloat16_rn(y);
	}
	return sum;
}

/* softmax - onehot over a row whose log-sum-exp is lse, columns offset by
 * v0 in the vocabulary. */
__device__ __forceinline__ void row_grad(bf16 *row, int n, int64_t v0, int label, float lse)
{
	const int64_t y = (int64_t)label - v0; /* the label's column in this row, if any */
	row_rewrite(row, n, [=](int j, float x) { return __expf(x - lse) - (j == y ? 1.0f : 0.0f); });
}

/* ---- materialized and token_chunked: rows of whole logits ------------------- */

/* Row t of [rows, V] logits: lse in fp32 (online max and sum per thread,
 * then over the block), loss = lse - z[y] (the bf16 logit, as a framework
 * reads it) in bf16. */
__global__ void __launch_bounds__(ROW_THREADS) lce_lse_kernel(const bf16 *__restrict__ logits,
	int64_t ld, int vocab, const int *__restrict__ labels, float *__restrict__ lse_out, bf16 *__restrict__ loss)
{
	__shared__ float smem[ROW_THREADS / MB_WARP_THREADS];
	const int64_t t = blockIdx.x;
	const bf16 *row = logits + t * ld;
	const int body = vocab / ROW_VEC * ROW_VEC;
	float m = -INFINITY, s = 0.0f;

	for (int j = threadIdx.x * ROW_VEC; j < body; j += blockDim.x * ROW_VEC) {
		mb_packed<bf16, ROW_VEC> x;
		float mx = m;
		x.load(row + j);
#pragma unroll
		for (int e = 0; e < ROW_VEC; e++)
			mx = fmaxf(mx, x.get(e));
		s *= __expf(m - mx); /* m = -inf on the first vector: s is 0, and stays 0 */
		m = mx;
#pragma unroll
		for (int e = 0; e < ROW_VEC; e++)
			s += __expf(x.get(e) - m);
	}
	for (int j = body + threadIdx.x; j < vocab; j += blockDim.x) {
		float x = __bfloat162float(row[j]), mx = fmaxf(m, x);
		s = s * __expf(m - mx) + __expf(x - mx);
		m = mx;
	}
	const float bm = block_reduce(m, smem, true);
	/* a thread that saw no logit has s = 0: 0 * exp(-inf) = 0 */
	const float bs = block_reduce(m == -INFINITY ? 0.0f : s * __expf(m - bm), smem, false);
	if (threadIdx.x == 0) {
		const int y = labels[t];
		const float lse = bm + __logf(bs);
		const float zy = y >= 0 && y < vocab ? __bfloat162float(row[y]) : NAN;
		lse_out[t] = lse;
		loss[t] = __float2bfloat16_rn(lse - zy);
	}
}

/* Row t of logits whose columns start at v0 in the vocabulary (all three
 * variants), in place: softmax - onehot in bf16. */
__global__ void __launch_bounds__(ROW_THREADS) lce_grad_kernel(bf16 *__restrict__ z, int64_t ld, int n, int64_t v0,
	const int *__restrict__ labels, const float *__restrict__ lse)
{
	const int64_t t = blockIdx.x;
	row_grad(z + t * ld, n, v0, labels[t], lse[t]);
}

/* dh = the sum of `split` fp32 partials, n elements `stride` apart, in
 * bf16: REDUCE_VEC elements a thread, in order of the slices (a fixed
 * order: the result does not depend on the launch). */
__global__ void __launch_bounds__(REDUCE_THREADS) lce_dh_reduce_kernel(const float *__restrict__ part, int split,
	int64_t stride, int64_t n, bf16 *__restrict__ dh)
{
	const int64_t i = ((int64_t)blockIdx.x * REDUCE_THREADS + threadIdx.x) * REDUCE_VEC;

	if (i + REDUCE_VEC <= n) {
		float acc[REDUCE_VEC] = {0};
		for (int s = 0; s < split; s++) {
			mb_packed<float, REDUCE_VEC> x;
			x.load(part + s * stride + i);
#pragma unroll
			for (int e = 0; e < REDUCE_VEC; e++)
				acc[e] += x.get(e);
		}
		/* 8-byte bf16 stores: i is a multiple of REDUCE_VEC */
		__nv_bfloat162 lo = __floats2bfloat162_rn(acc[0], acc[1]), hi = __floats2bfloat162_rn(acc[2], acc[3]);
		*reinterpret_cast<__nv_bfloat162 *>(dh + i) = lo;
		*reinterpret_cast<__nv_bfloat162 *>(dh + i + 2) = hi;
	} else {
		for (int64_t k = i; k < n; k++) {
			float acc = 0.0f;
			for (int s = 0; s < split; s++)
				acc += part[s * stride + k];
			dh[k] = __float2bfloat16_rn(acc);
		}
	}
}

/* ---- vocab_chunked ------------------------------------------------------------ */

/* Row r of a token block's logit chunk (vc columns): the running max m and
 * sum s of the token move on over the chunk, the chunk becomes
 * E = exp(z - m) (bf16, in place, the new m), and the token's dh
 * accumulator row is scaled to the new m if m grew. `first`: the chunk is
 * the token's first (m and s start from it; the accumulator is about to be
 * overwritten). */
__global__ void __launch_bounds__(ROW_THREADS) lce_online_kernel(bf16 *__restrict__ z, int64_t ld, int vc,
	float *__restrict__ m_state, float *__restrict__ s_state, float *__restrict__ acc, int hidden, int first)
{
	__shared__ float smem[ROW_THREADS / MB_WARP_THREADS];
	const int64_t r = blockIdx.x;
	bf16 *row = z + r * ld;
	const float m_old = first ? -INFINITY : m_state[r];
	const float m_new = fmaxf(m_old, block_reduce(row_max(row, vc), smem, true));
	const float sum = block_reduce(row_rewrite(row, vc, [=](int, float x) { return __expf(x - m_new); }), smem,
		false);

	if (first) {
		if (threadIdx.x == 0) {
			m_state[r] = m_new;
			s_state[r] = sum;
		}
		return;
	}
	const float alpha = __expf(m_old - m_new); /* 1 unless m grew */
	if (m_new > m_old) {
		float *a = acc + r * (int64_t)hidden;
		for (int k = threadIdx.x; k < hidden; k += blockDim.x)
			a[k] *= alpha;
	}
	if (threadIdx.x == 0) {
		m_state[r] = m_new;
		s_state[r] = s_state[r] * alpha + sum;
	}
}

/* Token t = t0 + r after its block's last chunk: lse, the loss with z_y
 * from h_t . W_y in fp32, dh = acc / s - W_y, and lse kept for pass 2. */
__global__ void __launch_bounds__(ROW_THREADS) lce_finish_kernel(const bf16 *__restrict__ h,
	const bf16 *__restrict__ w, const int *__restrict__ labels, const float *__restrict__ acc,
	const float *__restrict__ m_state, const float *__restrict__ s_state, float *__restrict__ lse_out,
	bf16 *__restrict__ loss, bf16 *__restrict__ dh, int64_t t0, int hidden, int vocab)
{
	__shared__ float smem[ROW_THREADS / MB_WARP_THREADS];
	const int64_t r = blockIdx.x, t = t0 + r;
	const int y = labels[t];
	const bool has_label = y >= 0 && y < vocab;
	const bf16 *ht = h + t * hidden, *wy = w + (has_label ? (int64_t)y : 0) * hidden;
	const float *a = acc + r * (int64_t)hidden;
	bf16 *out = dh + t * hidden;
	const float s = s_state[t], inv = 1.0f / s, lse = m_state[t] + __logf(s);
	float dot = 0.0f;

	for (int k = threadIdx.x; k < hidden; k += blockDim.x) {
		const float wk = has_label ? __bfloat162float(wy[k]) : 0.0f;
		dot += __bfloat162float(ht[k]) * wk;
		out[k] = __float2bfloat16_rn(a[k] * inv - wk);
	}
	dot = block_reduce(dot, smem, false);
	if (threadIdx.x == 0) {
		lse_out[t] = lse;
		loss[t] = __float2bfloat16_rn(has_label ? lse - dot : NAN);
	}
}

/* ---- cuBLAS --------------------------------------------------------------------
 * Row-major [R, C] with row stride ld is column-major [C, R] with leading
 * dimension ld, so each product below is written for the transposes. */

/* C = op(A) op(B) + beta C, A and B bf16, fp32 accumulate. */
static int gemm(cublasHandle_t blas, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
	const void *a, int64_t lda, const void *b, int64_t ldb, float beta, void *c, cudaDataType_t ctype, int64_t ldc)
{
	const float alpha = 1.0f;
	cublasStatus_t st = cublasGemmEx(blas, ta, tb, (int)m, (int)n, (int)k, &alpha, a, CUDA_R_16BF, (int)lda, b,
		CUDA_R_16BF, (int)ldb, &beta, c, ctype, (int)ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
	return mb_ws_blas_error((int)st);
}

/* z [rows, vc] (row stride ldz, bf16) = x [rows, H] w[v0 : v0 + vc]^T */
static int gemm_logits(cublasHandle_t blas, const bf16 *x, int64_t rows, const bf16 *w, int64_t v0, int64_t vc,
	int64_t hidden, bf16 *z, int64_t ldz)
{
	return gemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, vc, rows, hidden, w + v0 * hidden, hidden, x, hidden, 0.0f, z,
		CUDA_R_16BF, ldz);
}

/* out [rows, H] = g [rows, vc] (row stride ldg) w[v0 : v0 + vc] (+ out) */
static int gemm_dh(cublasHandle_t blas, const bf16 *g, int64_t ldg, int64_t rows, const bf16 *w, int64_t v0,
	int64_t vc, int64_t hidden, float beta, void *out, cudaDataType_t otype)
{
	return gemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, hidden, rows, vc, w + v0 * hidden, hidden, g, ldg, beta, out, otype,
		hidden);
}

/* part[s] [rows, H] (fp32, `stride` elements apart) = g[:, s sw : (s+1) sw]
 * w[s sw : (s+1) sw] for s < split, one strided-batched call: dh's
 * product over the vocabulary cut into slices that run side by side. */
static int gemm_dh_slices(cublasHandle_t blas, const bf16 *g, int64_t ldg, int64_t rows, const bf16 *w,
	int64_t sw, int split, int64_t hidden, float *part, int64_t stride)
{
	const float alpha = 1.0f, beta = 0.0f;
	cublasStatus_t st = cublasGemmStridedBatchedEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)hidden, (int)rows, (int)sw,
		&alpha, w, CUDA_R_16BF, (int)hidden, (long long)(sw * hidden), g, CUDA_R_16BF, (int)ldg, (long long)sw,
		&beta, part, CUDA_R_32F, (int)hidden, (long long)stride, split, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
	return mb_ws_blas_error((int)st);
}

/* dw[v0 : v0 + vc] (fp32) = g [rows, vc]^T (row stride ldg) x [rows, H]
 * (+ dw when beta is 1) */
static int gemm_dw(cublasHandle_t blas, const bf16 *g, int64_t ldg, int64_t rows, const bf16 *x, int64_t v0,
	int64_t vc, int64_t hidden, float beta, float *dw)
{
	return gemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, hidden, vc, rows, x, hidden, g, ldg, beta, dw + v0 * hidden,
		CUDA_R_32F, hidden);
}

/* The harness's handle on `stream` with `ws_bytes` of workspace and
 * split-K reductions kept in fp32; *old gets the math mode to put back. */
static int blas_begin(cudaStream_t stream, size_t ws_bytes, cublasHandle_t *out, cublasMath_t *old)
{
	int status = 0;
	cublasHandle_t blas = (cublasHandle_t)mb_ws_blas_sized(stream, ws_bytes, &status);
	cublasStatus_t st;

	if (blas == NULL)
		return status;
	st = cublasGetMathMode(blas, old);
	if (st == CUBLAS_STATUS_SUCCESS)
		st = cublasSetMathMode(blas, (cublasMath_t)(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
	*out = blas;
	return mb_ws_blas_error((int)st);
}

static int blas_end(cublasHandle_t blas, cublasMath_t old, int rc)
{
	cublasStatus_t st = cublasSetMathMode(blas, old);
	return rc != 0 ? rc : mb_ws_blas_error((int)st);
}

static int launched(void)
{
	return (int)cudaGetLastError();
}

/* A variant's calls on `stream` through `blas`. */
typedef int (*variant_fn)(cudaStream_t stream, cublasHandle_t blas, const int64_t *axis, const void *const *in,
	void *const *out);

/* One call of a variant: bf16 only, on the harness's handle with ws_bytes
 * of workspace and split-K reductions kept in fp32, the handle's math
 * mode put back after. */
static int run_variant(void *stream, mb_dtype dtype, size_t ws_bytes, variant_fn fn, const int64_t *axis,
	const void *const *in, void *const *out)
{
	cublasHandle_t blas = NULL;
	cublasMath_t old = CUBLAS_DEFAULT_MATH;
	int rc;

	if (dtype != MB_BF16)
		return (int)cudaErrorNotSupported;
	if ((rc = blas_begin((cudaStream_t)stream, ws_bytes, &blas, &old)) != 0)
		return blas ? blas_end(blas, old, rc) : rc;
	return blas_end(blas, old, fn((cudaStream_t)stream, blas, axis, in, out));
}

/* ---- memory plans ----------------------------------------------------------------
 * What each variant's slots hold, cuBLAS's workspace included: the
 * tally the harness reads (workspace.h) is their sum. */

static int64_t slot_bytes(int64_t bytes)
{
	return round_up(bytes, SLOT_ALIGN);
}

/* The row stride of a buffer of n bf16 logits a row: whole 16-byte
 * vectors. */
static int64_t ld_of(int64_t n)
{
	return round_up(n, ROW_VEC);
}

/* The largest multiple of CHUNK_ALIGN whose `per` bytes fit in `bytes`,
 * at least CHUNK_ALIGN, at most `whole` (then exactly `whole`). */
static int64_t chunk_of(int64_t bytes, int64_t per, int64_t whole)
{
	int64_t n = bytes / per / CHUNK_ALIGN * CHUNK_ALIGN;

	return min64(max64(n, CHUNK_ALIGN), whole);
}

/* materialized: the [T, V] logits, lse, and mb_ws_blas's workspace. */
static int64_t materialized_bytes(const int64_t *axis)
{
	return slot_bytes(axis[AX_T] * ld_of(axis[AX_V]) * (int64_t)sizeof(bf16))
		+ slot_bytes(axis[AX_T] * (int64_t)sizeof(float)) + (int64_t)MB_WS_BLAS_BYTES;
}

/* What a fused variant may hold beside its cuBLAS workspace. */
static int64_t fused_budget(const int64_t *axis)
{
	return materialized_bytes(axis) / MEM_DIVISOR - (int64_t)FUSED_BLAS_WS;
}

typedef struct vocab_plan {
	int64_t tokens, hidden, vocab;
	int64_t block;       /* tokens per pass-1 block */
	int64_t fwd, ld1;    /* pass-1 chunk width and its buffer's row stride */
	int64_t dw, ld2;     /* pass-2 chunk width and row stride */
	int64_t acc_bytes;   /* pass 1: acc [block, H] fp32, then the chunk */
	int64_t chunk_slot, state_slot;
} vocab_plan;

static vocab_plan vocab_plan_for(const int64_t *axis)
{
	vocab_plan p;
	int64_t left;

	p.tokens = axis[AX_T];
	p.hidden = axis[AX_H];
	p.vocab = axis[AX_V];
	p.state_slot = slot_bytes(3 * p.tokens * (int64_t)sizeof(float));
	/* the chunk slot's share, with room for two roundings up */
	left = fused_budget(axis) - p.state_slot - 2 * SLOT_ALIGN;
	p.fwd = min64(p.vocab, FWD_CHUNK);
	p.ld1 = ld_of(p.fwd);
	p.block = chunk_of(left, p.hidden * (int64_t)sizeof(float) + p.ld1 * (int64_t)sizeof(bf16), p.tokens);
	p.dw = chunk_of(left, p.tokens * (int64_t)sizeof(bf16), p.vocab);
	p.ld2 = ld_of(p.dw);
	p.acc_bytes = slot_bytes(p.block * p.hidden * (int64_t)sizeof(float));
	p.chunk_slot = slot_bytes(max64(p.acc_bytes + p.block * p.ld1 * (int64_t)sizeof(bf16),
		p.tokens * p.ld2 * (int64_t)sizeof(bf16)));
	return p;
}

typedef struct token_plan {
	int64_t tokens, hidden, vocab, ldz;
	int64_t chunk;       /* tokens a chunk */
	int split;           /* dh's vocabulary slices (1: none) */
	int64_t slice;       /* their width; the last takes the rest */
	int64_t stride;      /* elements between two partials */
	int64_t z_slot, lse_slot, part_slot;
} token_plan;

/* Tokens a chunk for `split` slices of dh. */
static int64_t token_chunk(const int64_t *axis, int split)
{
	const int64_t per = ld_of(axis[AX_V]) * (int64_t)sizeof(bf16) + (int64_t)sizeof(float)
		+ (split > 1 ? split * axis[AX_H] * (int64_t)sizeof(float) : 0);

	return chunk_of(fused_budget(axis) - 3 * SLOT_ALIGN, per, axis[AX_T]);
}

/* The slices dh needs for DH_WAVES waves of tiles on `sms` SMs. */
static int dh_split(int64_t chunk, int64_t hidden, int sms)
{
	const int64_t tiles = ((chunk + DH_TILE - 1) / DH_TILE) * ((hidden + DH_TILE - 1) / DH_TILE);
	const int64_t want = (DH_WAVES * (int64_t)sms + tiles - 1) / tiles;

	return (int)min64(max64(want, 1), DH_MAX_SPLIT);
}

static token_plan token_plan_for(const int64_t *axis, int sms)
{
	token_plan p;

	p.tokens = axis[AX_T];
	p.hidden = axis[AX_H];
	p.vocab = axis[AX_V];
	p.ldz = ld_of(p.vocab);
	/* the split that the chunk without one would need, then the chunk
	 * that leaves room for it */
	p.split = dh_split(token_chunk(axis, 1), p.hidden, sms);
	p.chunk = token_chunk(axis, p.split);
	p.slice = p.vocab / p.split / CHUNK_ALIGN * CHUNK_ALIGN;
	if (p.slice == 0)
		p.split = 1;
	p.stride = round_up(p.chunk * p.hidden, REDUCE_VEC);
	p.z_slot = slot_bytes(p.chunk * p.ldz * (int64_t)sizeof(bf16));
	p.lse_slot = slot_bytes(p.chunk * (int64_t)sizeof(float));
	p.part_slot = p.split > 1 ? slot_bytes(p.split * p.stride * (int64_t)sizeof(float)) : 0;
	return p;
}

static int device_sms(void)
{
	static int sms;
	int dev = 0;

	if (sms == 0 && (cudaGetDevice(&dev) != cudaSuccess
		|| cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms <= 0))
		sms = DEFAULT_SMS;
	return sms;
}

/* For tests/unit/test_lce_plan.c: the bytes `variant`'s slots hold at the
 * shape (T, H, V), cuBLAS's workspace included, with the token plan made
 * for `sms` SMs; -1 for an unknown variant. */
extern "C" int64_t mb_lce_scratch_bytes(const int64_t *axis, const char *variant, int sms)
{
	if (strcmp(variant, "materialized") == 0)
		return materialized_bytes(axis);
	if (strcmp(variant, "vocab_chunked") == 0) {
		const vocab_plan p = vocab_plan_for(axis);
		return p.chunk_slot + p.state_slot + (int64_t)FUSED_BLAS_WS;
	}
	if (strcmp(variant, "token_chunked") == 0) {
		const token_plan p = token_plan_for(axis, sms);
		return p.z_slot + p.lse_slot + p.part_slot + (int64_t)FUSED_BLAS_WS;
	}
	return -1;
}

/* ---- materialized: the calls ------------------------------------------------ */

static mb_ws_slot mat_logits_ws, mat_lse_ws;

static int materialized(cudaStream_t stream, cublasHandle_t blas, const int64_t *axis, const void *const *in,
	void *const *out)
{
	const int64_t tokens = axis[AX_T], hidden = axis[AX_H], vocab = axis[AX_V];
	const int64_t ld = ld_of(vocab);
	const bf16 *h = (const bf16 *)in[IN_H], *w = (const bf16 *)in[IN_W];
	const int *labels = (const int *)in[IN_LABELS];
	void *logits_v = NULL, *lse_v = NULL;
	int rc;

	if ((rc = mb_ws_reserve(&mat_logits_ws, (size_t)(tokens * ld) * sizeof(bf16), &logits_v)) != 0
		|| (rc = mb_ws_reserve(&mat_lse_ws, (size_t)tokens * sizeof(float), &lse_v)) != 0)
		return rc;
	bf16 *logits = (bf16 *)logits_v;
	float *lse = (float *)lse_v;

	if ((rc = gemm_logits(blas, h, tokens, w, 0, vocab, hidden, logits, ld)) != 0)
		return rc;
	lce_lse_kernel<<<(unsigned)tokens, ROW_THREADS, 0, stream>>>(logits, ld, (int)vocab, labels, lse,
		(bf16 *)out[OUT_LOSS]);
	if ((rc = launched()) != 0)
		return rc;
	lce_grad_kernel<<<(unsigned)tokens, ROW_THREADS, 0, stream>>>(logits, ld, (int)vocab, 0, labels, lse);
	if ((rc = launched()) != 0)
		return rc;
	if ((rc = gemm_dh(blas, logits, ld, tokens, w, 0, vocab, hidden, 0.0f, out[OUT_DH], CUDA_R_16BF)) != 0)
		return rc;
	return gemm_dw(blas, logits, ld, tokens, h, 0, vocab, hidden, 0.0f, (float *)out[OUT_DW]);
}

extern "C" MB_DECLARE_LAUNCH(mb_linear_cross_entropy_materialized_launch)
{
	return run_variant(stream, dtype, MB_WS_BLAS_BYTES, materialized, axis, in, out);
}

/* ---- vocab_chunked: the calls ----------------------------------------------- */

/* One slot for both passes' buffers (they never live at once), one for
 * the per-token m, s and lse. */
static mb_ws_slot vocab_chunk_ws, vocab_state_ws;

/* Pass 1 over the tokens [t0, t0 + tb): loss, dh and lse. */
static int vocab_block(cudaStream_t stream, cublasHandle_t blas, const vocab_plan *p, const void *const *in,
	void *const *out, char *slot, float *m, float *s, float *lse, int64_t t0, int64_t tb)
{
	const bf16 *h = (const bf16 *)in[IN_H], *w = (const bf16 *)in[IN_W];
	const int *labels = (const int *)in[IN_LABELS];
	float *acc = (float *)slot;
	bf16 *z = (bf16 *)(slot + p->acc_bytes);
	int rc;

	for (int64_t v0 = 0; v0 < p->vocab; v0 += p->fwd) {
		const int64_t vc = min64(p->vocab - v0, p->fwd);
		const int first = v0 == 0;
		if ((rc = gemm_logits(blas, h + t0 * p->hidden, tb, w, v0, vc, p->hidden, z, p->ld1)) != 0)
			return rc;
		lce_online_kernel<<<(unsigned)tb, ROW_THREADS, 0, stream>>>(z, p->ld1, (int)vc, m + t0, s + t0, acc,
			(int)p->hidden, first);
		if ((rc = launched()) != 0)
			return rc;
		if ((rc = gemm_dh(blas, z, p->ld1, tb, w, v0, vc, p->hidden, first ? 0.0f : 1.0f, acc, CUDA_R_32F)) != 0)
			return rc;
	}
	lce_finish_kernel<<<(unsigned)tb, ROW_THREADS, 0, stream>>>(h, w, labels, acc, m, s, lse,
		(bf16 *)out[OUT_LOSS], (bf16 *)out[OUT_DH], t0, (int)p->hidden, (int)p->vocab);
	return launched();
}

/* Pass 2: dW, a vocabulary chunk at a time. */
static int vocab_dw(cudaStream_t stream, cublasHandle_t blas, const vocab_plan *p, const void *const *in,
	void *const *out, char *slot, const float *lse)
{
	const bf16 *h = (const bf16 *)in[IN_H], *w = (const bf16 *)in[IN_W];
	const int *labels = (const int *)in[IN_LABELS];
	bf16 *z = (bf16 *)slot;
	int rc;

	for (int64_t v0 = 0; v0 < p->vocab; v0 += p->dw) {
		const int64_t vc = min64(p->vocab - v0, p->dw);
		if ((rc = gemm_logits(blas, h, p->tokens, w, v0, vc, p->hidden, z, p->ld2)) != 0)
			return rc;
		lce_grad_kernel<<<(unsigned)p->tokens, ROW_THREADS, 0, stream>>>(z, p->ld2, (int)vc, v0, labels, lse);
		if ((rc = launched()) != 0)
			return rc;
		if ((rc = gemm_dw(blas, z, p->ld2, p->tokens, h, v0, vc, p->hidden, 0.0f, (float *)out[OUT_DW])) != 0)
			return rc;
	}
	return 0;
}

static int vocab_chunked(cudaStream_t stream, cublasHandle_t blas, const int64_t *axis, const void *const *in,
	void *const *out)
{
	const vocab_plan p = vocab_plan_for(axis);
	void *slot = NULL, *state = NULL;
	int rc;

	if ((rc = mb_ws_reserve(&vocab_chunk_ws, (size_t)p.chunk_slot, &slot)) != 0
		|| (rc = mb_ws_reserve(&vocab_state_ws, 3 * (size_t)p.tokens * sizeof(float), &state)) != 0)
		return rc;
	float *m = (float *)state, *s = m + p.tokens, *lse = s + p.tokens;
	for (int64_t t0 = 0; t0 < p.tokens; t0 += p.block) {
		const int64_t tb = min64(p.tokens - t0, p.block);
		if ((rc = vocab_block(stream, blas, &p, in, out, (char *)slot, m, s, lse, t0, tb)) != 0)
			return rc;
	}
	return vocab_dw(stream, blas, &p, in, out, (char *)slot, lse);
}

extern "C" MB_DECLARE_LAUNCH(mb_linear_cross_entropy_vocab_chunked_launch)
{
	return run_variant(stream, dtype, FUSED_BLAS_WS, vocab_chunked, axis, in, out);
}

/* ---- token_chunked: the calls ----------------------------------------------- */

static mb_ws_slot token_z_ws, token_lse_ws, token_part_ws;

/* dh for the chunk's c tokens from G in z: one product into bf16, or
 * p->split slices into fp32 partials and their sum. */
static int token_dh(cudaStream_t stream, cublasHandle_t blas, const token_plan *p, const bf16 *z, const bf16 *w,
	int64_t c, float *part, bf16 *dh)
{
	const int64_t done = p->split * p->slice, n = c * p->hidden;
	int rc;

	if (p->split == 1)
		return gemm_dh(blas, z, p->ldz, c, w, 0, p->vocab, p->hidden, 0.0f, dh, CUDA_R_16BF);
	if ((rc = gemm_dh_slices(blas, z, p->ldz, c, w, p->slice, p->split, p->hidden, part, p->stride)) != 0)
		return rc;
	/* the columns past the last whole slice, into the first partial */
	if (done < p->vocab && (rc = gemm_dh(blas, z + done, p->ldz, c, w, done, p->vocab - done, p->hidden, 1.0f, part,
		CUDA_R_32F)) != 0)
		return rc;
	const int64_t threads = (n + REDUCE_VEC - 1) / REDUCE_VEC;
	lce_dh_reduce_kernel<<<(unsigned)((threads + REDUCE_THREADS - 1) / REDUCE_THREADS), REDUCE_THREADS, 0, stream>>>(
		part, p->split, p->stride, n, dh);
	return launched();
}

static int token_chunked(cudaStream_t stream, cublasHandle_t blas, const int64_t *axis, const void *const *in,
	void *const *out)
{
	const token_plan p = token_plan_for(axis, device_sms());
	const bf16 *h = (const bf16 *)in[IN_H], *w = (const bf16 *)in[IN_W];
	const int *labels = (const int *)in[IN_LABELS];
	void *z_v = NULL, *lse_v = NULL, *part_v = NULL;
	int rc;

	if ((rc = mb_ws_reserve(&token_z_ws, (size_t)p.z_slot, &z_v)) != 0
		|| (rc = mb_ws_reserve(&token_lse_ws, (size_t)p.lse_slot, &lse_v)) != 0
		|| (rc = mb_ws_reserve(&token_part_ws, (size_t)p.part_slot, &part_v)) != 0)
		return rc;
	bf16 *z = (bf16 *)z_v;
	float *lse = (float *)lse_v;
	for (int64_t t0 = 0; t0 < p.tokens; t0 += p.chunk) {
		const int64_t c = min64(p.tokens - t0, p.chunk);
		if ((rc = gemm_logits(blas, h + t0 * p.hidden, c, w, 0, p.vocab, p.hidden, z, p.ldz)) != 0)
			return rc;
		lce_lse_kernel<<<(unsigned)c, ROW_THREADS, 0, stream>>>(z, p.ldz, (int)p.vocab, labels + t0, lse,
			(bf16 *)out[OUT_LOSS] + t0);
		if ((rc = launched()) != 0)
			return rc;
		lce_grad_kernel<<<(unsigned)c, ROW_THREADS, 0, stream>>>(z, p.ldz, (int)p.vocab, 0, labels + t0, lse);
		if ((rc = launched()) != 0)
			return rc;
		bf16 *dh = (bf16 *)out[OUT_DH] + t0 * p.hidden;
		if ((rc = token_dh(stream, blas, &p, z, w, c, (float *)part_v, dh)) != 0)
			return rc;
		if ((rc = gemm_dw(blas, z, p.ldz, c, h + t0 * p.hidden, 0, p.vocab, p.hidden, t0 == 0 ? 0.0f : 1.0f,
			(float *)out[OUT_DW])) != 0)
			return rc;
	}
	return 0;
}

extern "C" MB_DECLARE_LAUNCH(mb_linear_cross_entropy_token_chunked_launch)
{
	return run_variant(stream, dtype, FUSED_BLAS_WS, token_chunked, axis, in, out);
}
