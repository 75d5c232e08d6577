/* linear_cross_entropy: loss and gradients of cross-entropy over the
 * logits z = h W^T, forward and backward in one call (the math, the
 * reference and the tolerance: src/reference/linear_cross_entropy.c).
 * In h [T,H], W [V,H] (bf16), labels [T,1] (int32); out loss [T,1], dh
 * [T,H], dW [V,H] (bf16). Gradients of the summed loss. Axes: T, H, V.
 *
 * Every GEMM is cublasGemmEx, bf16 in, fp32 accumulate
 * (CUBLAS_COMPUTE_32F), through the harness's handle (mb_ws_blas); both
 * variants forbid cuBLAS's reduced-precision split-K reductions for the
 * call (restoring the handle's math mode after), so each GEMM rounds once.
 * PyTorch allows them for bf16 by default; the tolerance is derived
 * without them. Scratch memory comes from mb_ws_reserve slots, so the
 * harness measures it. No host synchronisation.
 *
 * ---- materialized (the fallback: what a framework runs) -------------------
 *   logits = h W^T            cuBLAS, into a bf16 [T, V] buffer
 *   lse, loss                 lce_materialized_lse: a block per row, fp32
 *                             online max/sum over 16-byte loads
 *   G = softmax - onehot      lce_materialized_grad: in place, bf16
 *   dh = G W, dW = G^T h      cuBLAS
 * Extra memory: 2TV bytes (4.2 GB at T = 16384, V = 128256) + 4T + the
 * cuBLAS workspace slot (32 MiB).
 *
 * ---- chunked (the fused variant: never a [T, V] buffer) --------------------
 * The log-sum-exp of every token is needed before any entry of G, dh sums
 * over the vocabulary and dW over the tokens. Without the [T, V] buffer
 * one of three things has to give:
 *   - token chunks (3 GEMMs): dW sums over the chunks, in an fp32 [V, H]
 *     accumulator (4VH bytes: 2H/T of the materialised 2TV, 1/2 at
 *     H = 4096, T = 16384) or in the bf16 output (a rounding per chunk:
 *     ~sqrt(chunks) rho of error, too much);
 *   - vocabulary chunks with an fp32 [T, H] dh accumulator (4TH: 2H/V of
 *     2TV, 1/16 at H = 4096, V = 128256) and the logits computed twice
 *     (first for the log-sum-exp, then for G): 4 GEMMs;
 *   - what this variant does: 4 GEMMs, but dh's accumulator only over a
 *     token block. dh needs no final log-sum-exp if it is accumulated as
 *     flash attention accumulates its output: against a running max m,
 *     acc = sum_v exp(z_v - m) W_v, rescaled by exp(m_old - m_new) when m
 *     grows, dh = acc / sum - W[y] at the end. dW does need the final
 *     log-sum-exp (its per-token factors sit inside the sum over tokens),
 *     hence a second pass.
 *   Pass 1, per token block of TOKEN_BLOCK tokens, per vocabulary chunk of
 *   FWD_CHUNK:
 *     Z = h_b W_c^T          cuBLAS, bf16 [tb, vc]
 *     lce_chunked_online     per row: running max m and sum s in fp32,
 *                            E = exp(z - m) in place (bf16), the row of
 *                            acc scaled by exp(m_old - m) when m grew
 *     acc (+)= E W_c         cuBLAS, fp32 [tb, H] (beta 0 on the first chunk)
 *   then lce_chunked_finish per token: lse = m + log s, z_y = h_t . W_y
 *   in fp32, loss = lse - z_y, dh = acc / s - W_y (fp32, then bf16).
 *   Pass 2, per vocabulary chunk of DW_CHUNK over all tokens:
 *     Z = h W_c^T            cuBLAS, bf16 [T, vc]
 *     lce_chunked_grad       G = exp(z - lse) - onehot, in place (bf16)
 *     dW_c = G^T h           cuBLAS, straight into dW's rows (complete:
 *                            its sum runs over every token)
 *   The two passes share one slot (pass 1's acc and chunk, pass 2's
 *   chunk); m, s and lse are 12T bytes in another.
 *
 * Predicted time: 4 GEMMs of 2TVH against the materialised 3, and the
 * materialised path's [T, V] passes (write 2TV, lse read 2TV, grad read
 * and write 4TV, the two GEMMs' reads 4TV: ~24 GB at the largest shape,
 * ~5 ms at 4.8 TB/s next to ~74 ms of GEMMs at ~700 TFLOP/s) are mostly
 * L2 traffic here: chunked / materialized ~ 4/3 x 74 / 79 ~ 1.25 at the
 * largest shape, ~1.2 at the smallest. The 1.0x target is out of reach of
 * any cuBLAS design that never holds [T, V]: it needs the logits twice or
 * a [V, H] accumulator (above).
 * Predicted memory (scratch + the 32 MiB cuBLAS workspace, against the
 * materialised 2TV + 4T + 32 MiB):
 *   slot = max(TOKEN_BLOCK (4H + 2 FWD_CHUNK), 2 T DW_CHUNK) + 12T
 *   T      H     V       chunked   materialised   ratio
 *   8192   2048  65536    84 MB     1108 MB        1/13
 *   8192   2048  128256   84 MB     2135 MB        1/25
 *   8192   4096  65536   101 MB     1108 MB        1/11
 *   8192   4096  128256  101 MB     2135 MB        1/21
 *   16384  2048  65536   101 MB     2181 MB        1/22
 *   16384  2048  128256  101 MB     4236 MB        1/42
 *   16384  4096  65536   101 MB     2181 MB        1/22
 *   16384  4096  128256  101 MB     4236 MB        1/42
 * 1/32 holds at T = 16384, V = 128256 only: the cuBLAS workspace alone is
 * 1/33 of the materialised path at T = 8192, V = 65536, so no design
 * meets 1/32 there; smaller chunks would trade GEMM efficiency and launch
 * count (already 3 T V / (TOKEN_BLOCK FWD_CHUNK) + 3 V / DW_CHUNK, ~580
 * at the largest shape) for memory the target cannot get anyway.
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "kernels/launch.h"
#include "kernels/vec.cuh"
#include "kernels/workspace.h"

enum { AX_T, AX_H, AX_V };
enum { IN_H, IN_W, IN_LABELS };
enum { OUT_LOSS, OUT_DH, OUT_DW };

typedef __nv_bfloat16 bf16;

#define ROW_THREADS 256
#define ROW_VEC 8 /* bf16 per 16-byte access */
/* Chunk sizes of the chunked variant (see the file comment). */
#define TOKEN_BLOCK 2048
#define FWD_CHUNK 8192
#define DW_CHUNK 2048
#define SLOT_ALIGN 256

static int64_t round_up(int64_t x, int64_t to)
{
	return (x + to - 1) / to * to;
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

/* ---- materialized ------------------------------------------------------------ */

/* Row t of the [T, V] logits: lse in fp32 (online max and sum per thread,
 * then over the block), loss = lse - z[y] (the bf16 logit, as a framework
 * reads it) in bf16. */
__global__ void __launch_bounds__(ROW_THREADS) lce_materialized_lse_kernel(const bf16 *__restrict__ logits,
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

/* Row t in place: softmax - onehot in bf16. */
__global__ void __launch_bounds__(ROW_THREADS) lce_materialized_grad_kernel(bf16 *__restrict__ logits, int64_t ld,
	int vocab, const int *__restrict__ labels, const float *__restrict__ lse)
{
	const int64_t t = blockIdx.x;
	row_grad(logits + t * ld, vocab, 0, labels[t], lse[t]);
}

/* ---- chunked ---------------------------------------------------------------- */

/* Row r of a token block's logit chunk (vc columns): the running max m and
 * sum s of the token move on over the chunk, the chunk becomes
 * E = exp(z - m) (bf16, in place, the new m), and the token's dh
 * accumulator row is scaled to the new m if m grew. `first`: the chunk is
 * the token's first (m and s start from it; the accumulator is about to be
 * overwritten). */
__global__ void __launch_bounds__(ROW_THREADS) lce_chunked_online_kernel(bf16 *__restrict__ z, int64_t ld, int vc,
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
__global__ void __launch_bounds__(ROW_THREADS) lce_chunked_finish_kernel(const bf16 *__restrict__ h,
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

/* Pass 2, row t of a vocabulary chunk starting at v0: G in place. */
__global__ void __launch_bounds__(ROW_THREADS) lce_chunked_grad_kernel(bf16 *__restrict__ z, int64_t ld, int vc,
	int64_t v0, const int *__restrict__ labels, const float *__restrict__ lse)
{
	const int64_t t = blockIdx.x;
	row_grad(z + t * ld, vc, v0, labels[t], lse[t]);
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

/* dw[v0 : v0 + vc] = g [T, vc]^T (row stride ldg) h [T, H] */
static int gemm_dw(cublasHandle_t blas, const bf16 *g, int64_t ldg, int64_t tokens, const bf16 *h, int64_t v0,
	int64_t vc, int64_t hidden, bf16 *dw)
{
	return gemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, hidden, vc, tokens, h, hidden, g, ldg, 0.0f, dw + v0 * hidden,
		CUDA_R_16BF, hidden);
}

/* The harness's handle on `stream` with split-K reductions kept in fp32;
 * *old gets the math mode to put back. */
static int blas_begin(cudaStream_t stream, cublasHandle_t *out, cublasMath_t *old)
{
	int status = 0;
	cublasHandle_t blas = (cublasHandle_t)mb_ws_blas(stream, &status);
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

/* ---- materialized: the calls ------------------------------------------------ */

static mb_ws_slot mat_logits_ws, mat_lse_ws;

static int materialized(cudaStream_t stream, cublasHandle_t blas, const int64_t *axis, const void *const *in,
	void *const *out)
{
	const int64_t tokens = axis[AX_T], hidden = axis[AX_H], vocab = axis[AX_V];
	const int64_t ld = round_up(vocab, ROW_VEC);
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
	lce_materialized_lse_kernel<<<(unsigned)tokens, ROW_THREADS, 0, stream>>>(logits, ld, (int)vocab, labels, lse,
		(bf16 *)out[OUT_LOSS]);
	if ((rc = launched()) != 0)
		return rc;
	lce_materialized_grad_kernel<<<(unsigned)tokens, ROW_THREADS, 0, stream>>>(logits, ld, (int)vocab, labels, lse);
	if ((rc = launched()) != 0)
		return rc;
	if ((rc = gemm_dh(blas, logits, ld, tokens, w, 0, vocab, hidden, 0.0f, out[OUT_DH], CUDA_R_16BF)) != 0)
		return rc;
	return gemm_dw(blas, logits, ld, tokens, h, 0, vocab, hidden, (bf16 *)out[OUT_DW]);
}

extern "C" MB_DECLARE_LAUNCH(mb_linear_cross_entropy_materialized_launch)
{
	cublasHandle_t blas = NULL;
	cublasMath_t old = CUBLAS_DEFAULT_MATH;
	int rc;

	if (dtype != MB_BF16)
		return (int)cudaErrorNotSupported;
	if ((rc = blas_begin((cudaStream_t)stream, &blas, &old)) != 0)
		return blas ? blas_end(blas, old, rc) : rc;
	return blas_end(blas, old, materialized((cudaStream_t)stream, blas, axis, in, out));
}

/* ---- chunked: the calls ----------------------------------------------------- */

/* One slot for both passes' buffers (they never live at once), one for
 * the per-token m, s and lse. */
static mb_ws_slot chunk_ws, state_ws;

typedef struct chunked_plan {
	int64_t tokens, hidden, vocab;
	int64_t block;     /* tokens per pass-1 block */
	int64_t fwd, ld1;  /* pass-1 chunk width and its buffer's row stride */
	int64_t dw, ld2;   /* pass-2 chunk width and row stride */
	int64_t acc_bytes; /* pass 1: acc [block, H] fp32, then the chunk */
} chunked_plan;

static chunked_plan chunked_plan_for(const int64_t *axis)
{
	chunked_plan p;

	p.tokens = axis[AX_T];
	p.hidden = axis[AX_H];
	p.vocab = axis[AX_V];
	p.block = p.tokens < TOKEN_BLOCK ? p.tokens : TOKEN_BLOCK;
	p.fwd = p.vocab < FWD_CHUNK ? p.vocab : FWD_CHUNK;
	p.ld1 = round_up(p.fwd, ROW_VEC);
	p.dw = p.vocab < DW_CHUNK ? p.vocab : DW_CHUNK;
	p.ld2 = round_up(p.dw, ROW_VEC);
	p.acc_bytes = round_up(p.block * p.hidden * (int64_t)sizeof(float), SLOT_ALIGN);
	return p;
}

static size_t chunk_slot_bytes(const chunked_plan *p)
{
	const int64_t pass1 = p->acc_bytes + p->block * p->ld1 * (int64_t)sizeof(bf16);
	const int64_t pass2 = p->tokens * p->ld2 * (int64_t)sizeof(bf16);
	return (size_t)(pass1 > pass2 ? pass1 : pass2);
}

/* Pass 1 over the tokens [t0, t0 + tb): loss, dh and lse. */
static int chunked_block(cudaStream_t stream, cublasHandle_t blas, const chunked_plan *p, const void *const *in,
	void *const *out, char *slot, float *m, float *s, float *lse, int64_t t0, int64_t tb)
{
	const bf16 *h = (const bf16 *)in[IN_H], *w = (const bf16 *)in[IN_W];
	const int *labels = (const int *)in[IN_LABELS];
	float *acc = (float *)slot;
	bf16 *z = (bf16 *)(slot + p->acc_bytes);
	int rc;

	for (int64_t v0 = 0; v0 < p->vocab; v0 += p->fwd) {
		const int64_t vc = p->vocab - v0 < p->fwd ? p->vocab - v0 : p->fwd;
		const int first = v0 == 0;
		if ((rc = gemm_logits(blas, h + t0 * p->hidden, tb, w, v0, vc, p->hidden, z, p->ld1)) != 0)
			return rc;
		lce_chunked_online_kernel<<<(unsigned)tb, ROW_THREADS, 0, stream>>>(z, p->ld1, (int)vc, m + t0, s + t0, acc,
			(int)p->hidden, first);
		if ((rc = launched()) != 0)
			return rc;
		if ((rc = gemm_dh(blas, z, p->ld1, tb, w, v0, vc, p->hidden, first ? 0.0f : 1.0f, acc, CUDA_R_32F)) != 0)
			return rc;
	}
	lce_chunked_finish_kernel<<<(unsigned)tb, ROW_THREADS, 0, stream>>>(h, w, labels, acc, m, s, lse,
		(bf16 *)out[OUT_LOSS], (bf16 *)out[OUT_DH], t0, (int)p->hidden, (int)p->vocab);
	return launched();
}

/* Pass 2: dW, a vocabulary chunk at a time. */
static int chunked_dw(cudaStream_t stream, cublasHandle_t blas, const chunked_plan *p, const void *const *in,
	void *const *out, char *slot, const float *lse)
{
	const bf16 *h = (const bf16 *)in[IN_H], *w = (const bf16 *)in[IN_W];
	const int *labels = (const int *)in[IN_LABELS];
	bf16 *z = (bf16 *)slot;
	int rc;

	for (int64_t v0 = 0; v0 < p->vocab; v0 += p->dw) {
		const int64_t vc = p->vocab - v0 < p->dw ? p->vocab - v0 : p->dw;
		if ((rc = gemm_logits(blas, h, p->tokens, w, v0, vc, p->hidden, z, p->ld2)) != 0)
			return rc;
		lce_chunked_grad_kernel<<<(unsigned)p->tokens, ROW_THREADS, 0, stream>>>(z, p->ld2, (int)vc, v0, labels, lse);
		if ((rc = launched()) != 0)
			return rc;
		if ((rc = gemm_dw(blas, z, p->ld2, p->tokens, h, v0, vc, p->hidden, (bf16 *)out[OUT_DW])) != 0)
			return rc;
	}
	return 0;
}

static int chunked(cudaStream_t stream, cublasHandle_t blas, const int64_t *axis, const void *const *in,
	void *const *out)
{
	const chunked_plan p = chunked_plan_for(axis);
	void *slot = NULL, *state = NULL;
	int rc;

	if ((rc = mb_ws_reserve(&chunk_ws, chunk_slot_bytes(&p), &slot)) != 0
		|| (rc = mb_ws_reserve(&state_ws, 3 * (size_t)p.tokens * sizeof(float), &state)) != 0)
		return rc;
	float *m = (float *)state, *s = m + p.tokens, *lse = s + p.tokens;
	for (int64_t t0 = 0; t0 < p.tokens; t0 += p.block) {
		const int64_t tb = p.tokens - t0 < p.block ? p.tokens - t0 : p.block;
		if ((rc = chunked_block(stream, blas, &p, in, out, (char *)slot, m, s, lse, t0, tb)) != 0)
			return rc;
	}
	return chunked_dw(stream, blas, &p, in, out, (char *)slot, lse);
}

extern "C" MB_DECLARE_LAUNCH(mb_linear_cross_entropy_chunked_launch)
{
	cublasHandle_t blas = NULL;
	cublasMath_t old = CUBLAS_DEFAULT_MATH;
	int rc;

	if (dtype != MB_BF16)
		return (int)cudaErrorNotSupported;
	if ((rc = blas_begin((cudaStream_t)stream, &blas, &old)) != 0)
		return blas ? blas_end(blas, old, rc) : rc;
	return blas_end(blas, old, chunked((cudaStream_t)stream, blas, axis, in, out));
}
