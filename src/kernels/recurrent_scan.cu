/* recurrent_scan: Griffin's RG-LRU with diagonal gates, per sequence
 * (row b*D + c of x [B*D, L]: channel c of batch b, steps contiguous):
 *   r = sigmoid(x w_a + b_a), i = sigmoid(x w_i + b_i),
 *   a = exp(-8 softplus(lambda) r), h = a h + sqrt(1 - a^2) i x, y = h.
 * w_a, b_a, w_i, b_i, lambda [1, D]. Math in fp32, storage in the case
 * dtype; axes, in catalog order: B, L, D. src/reference/recurrent_scan.c
 * derives the tolerance this file's approximations are held to.
 *
 * The scan. h_t is an affine function of h_{t-1}, so a run of steps is one
 * affine map h -> P h + H (P the product of its decays, H its state from
 * h = 0), and maps compose associatively: (P2, H2) after (P1, H1) is
 * (P2 P1, P2 H1 + H2). A block takes whole sequences, one chunk of
 * blockDim.x * SCAN_ITEMS steps at a time: each thread runs its
 * SCAN_ITEMS consecutive steps from h = 0 (keeping each step's H and
 * running P), the warp scans the threads' maps with shuffles, the block
 * folds the warps' totals through shared memory onto the carry from the
 * previous chunk, and each thread then finishes its steps as
 * y = P_s h_in + H_s. One sequence of 4096 steps is one chunk of 256
 * threads; longer ones carry over. The grid is persistent (as many blocks
 * as are resident), each block a contiguous run of sequences in
 * channel-major order (so consecutive sequences share a channel's
 * constants), and a thread loads the next chunk's inputs before it works
 * on the current one, so a chunk's loads are in flight for a whole chunk's
 * work.
 *
 * The fallback's scan launch runs the same block scan over (a, input)
 * read from memory: the speedup measures the fusion of the gates, not a
 * better scan.
 */
#include <limits.h>
#include <stdint.h>

#include "kernels/launch.h"
#include "kernels/vec.cuh"
#include "kernels/workspace.h"

enum { AX_B, AX_L, AX_D };
enum { IN_X, IN_WA, IN_BA, IN_WI, IN_BI, IN_LAMBDA };
enum { OUT_Y };

/* Griffin's c: a = exp(-c softplus(lambda) r). */
#define RGLRU_C 8.0f
#define LOG2E 1.4426950408889634f

/* Consecutive steps a thread takes per chunk (two 16-byte vectors of
 * bf16, four of fp32); a chunk is blockDim.x of them. */
#define SCAN_ITEMS 16
#define SCAN_MAX_THREADS 256
#define SCAN_MAX_WARPS (SCAN_MAX_THREADS / MB_WARP_THREADS)
/* The fused kernel's blocks resident per SM: 4 caps it at 64 registers
 * (79 uncapped, 3 blocks) without spills on the 16-byte path (4 bytes on
 * the scalar one); on the H200 that is 6.9% faster at L = 16384 (0.549
 * against 0.589 ms, two runs each way). 5 blocks spill 48 bytes. */
#define SCAN_MIN_BLOCKS 4
#define FULL_MASK 0xffffffffu

/* ---- the fused step ------------------------------------------------------- */

/* With y = 16 softplus(lambda) r = -2 log a, the decay is a = exp(-y/2) and
 * the multiplier m = sqrt(1 - a^2) = sqrt(1 - exp(-y)) = sqrt(y) S(y),
 * S(y) = sqrt((1 - exp(-y)) / y); sqrt(y) = 4 sqrt(softplus) sqrt(r), and
 * sqrt(r) = 1/sqrt(1 + exp(-v)) is what rsqrt gives. On y <= FAST_Y_MAX
 * (a channel with 16 softplus(lambda) <= FAST_Y_MAX, so that every r <= 1
 * keeps y there) exp(-y/2) and S(y) are degree-5 polynomials (Chebyshev
 * fits on [0, 0.5], errors 2^-32 and 2^-34, under an ulp with fp32
 * Horner): per step two exponentials' worth of MUFU (ex2 and rsqrt) for r,
 * a and m together, and no cancellation in 1 - a^2 however close a is to 1.
 * That covers Griffin's decays (a^c >= 0.78 at r = 1; its initialisation
 * spans 0.9 .. 0.999); other channels take the accurate library path. */
#define FAST_Y_MAX 0.5f
#define DECAY_C5 -2.299451735e-04f
#define DECAY_C4 2.587396419e-03f
#define DECAY_C3 -2.082902938e-02f
#define DECAY_C2 1.249995008e-01f
#define DECAY_C1 -4.999999702e-01f
#define DECAY_C0 1.000000000e+00f
#define SQRTPHI_C5 -6.525818753e-05f
#define SQRTPHI_C4 8.528232574e-04f
#define SQRTPHI_C3 -7.811377291e-03f
#define SQRTPHI_C2 5.208320171e-02f
#define SQRTPHI_C1 -2.500000000e-01f
#define SQRTPHI_C0 1.000000000e+00f

__device__ __forceinline__ float decay_poly(float y)
{
	float p = fmaf(DECAY_C5, y, DECAY_C4);
	p = fmaf(p, y, DECAY_C3);
	p = fmaf(p, y, DECAY_C2);
	p = fmaf(p, y, DECAY_C1);
	return fmaf(p, y, DECAY_C0);
}

__device__ __forceinline__ float sqrtphi_poly(float y)
{
	float p = fmaf(SQRTPHI_C5, y, SQRTPHI_C4);
	p = fmaf(p, y, SQRTPHI_C3);
	p = fmaf(p, y, SQRTPHI_C2);
	p = fmaf(p, y, SQRTPHI_C1);
	return fmaf(p, y, SQRTPHI_C0);
}

/* Single MUFU instructions (flush-to-zero forms: no subnormal fix-up). */
__device__ __forceinline__ float ex2_approx(float x)
{
	float y;
	asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
	return y;
}

__device__ __forceinline__ float rsqrt_approx(float x)
{
	float y;
	asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
	return y;
}

/* A channel's constants, from its accurately computed softplus. */
struct rglru_channel {
	float ka, kb; /* -w_a log2 e, -b_a log2 e: exp(-(w_a x + b_a)) = 2^(ka x + kb) */
	float ki, bi; /* -w_i log2 e, -b_i log2 e, the same for the input gate */
	float c16;    /* 16 softplus(lambda): y = c16 r */
	float cm;     /* m = cm sqrt(r) S(y) */
	bool fast;    /* every y of the channel is in the polynomials' range */
};

/* The input gate times x, i x = x / (1 + exp(-v)), from ex2 and a fast
 * division: a few ulps of fp32. Not tanh.approx (one MUFU fewer): its
 * 2^-11 steps are coarse enough that a gate which barely moves with x
 * repeats its error, and that adds up over a slow channel's memory
 * (src/reference/recurrent_scan.c). */
__device__ __forceinline__ float gated_input(float x, const rglru_channel &c)
{
	return __fdividef(x, 1.0f + ex2_approx(fmaf(x, c.ki, c.bi)));
}

template <typename T>
__device__ __forceinline__ void channel_constants(rglru_channel &c, const T *wa, const T *ba, const T *wi,
	const T *bi, const T *lambda, int64_t ch)
{
	const float lam = mb_to_f32<T>(lambda[ch]);
	const float softplus = fmaxf(lam, 0.0f) + log1pf(expf(-fabsf(lam)));

	c.ka = -mb_to_f32<T>(wa[ch]) * LOG2E;
	c.kb = -mb_to_f32<T>(ba[ch]) * LOG2E;
	c.ki = -mb_to_f32<T>(wi[ch]) * LOG2E;
	c.bi = -mb_to_f32<T>(bi[ch]) * LOG2E;
	c.c16 = 2.0f * RGLRU_C * softplus;
	c.cm = 4.0f * sqrtf(softplus);
	c.fast = c.c16 <= FAST_Y_MAX;
}

/* One step of the fused kernel: the decay a and the increment u. */
template <bool FAST>
__device__ __forceinline__ void rglru_step(float x, const rglru_channel &c, float &a, float &u)
{
	const float g = rsqrt_approx(1.0f + ex2_approx(fmaf(x, c.ka, c.kb))); /* sqrt(r) */
	const float y = c.c16 * g * g;
	const float gx = gated_input(x, c);

	if (FAST) {
		a = decay_poly(y);
		u = c.cm * g * sqrtphi_poly(y) * gx;
	} else {
		a = expf(-0.5f * y);
		u = sqrtf(-expm1f(-y)) * gx;
	}
}

/* ---- the block scan, shared by the fused kernel and the fallback's scan --- */

/* A source gives the scan its inputs: `buf` holds one thread's SCAN_ITEMS
 * steps as loaded, load() fills it (zero past the sequence's end),
 * begin_channel() sets up a channel's constants, steps<FAST>() turns a
 * buffer into per-step (a, u). */

/* The fused kernel's source: x and the channel parameters. */
template <typename T, int VEC> struct fused_source {
	typedef T value_type;
	static constexpr int NV = SCAN_ITEMS / VEC;
	struct buf {
		mb_packed<T, VEC> x[NV];
	};
	const T *x, *wa, *ba, *wi, *bi, *lambda;
	rglru_channel c;

	__device__ __forceinline__ void load(buf &b, int64_t row, int64_t t, int64_t len) const
	{
		const T *src = x + row * len + t;
#pragma unroll
		for (int k = 0; k < NV; k++) {
			if (t + k * VEC < len)
				b.x[k].load(src + k * VEC);
			else
				b.x[k] = mb_packed<T, VEC>{};
		}
	}
	__device__ __forceinline__ void begin_channel(int64_t ch)
	{
		channel_constants<T>(c, wa, ba, wi, bi, lambda, ch);
	}
	__device__ __forceinline__ bool fast() const { return c.fast; }
	template <bool FAST> __device__ __forceinline__ void step(const buf &b, int s, float &a, float &u) const
	{
		rglru_step<FAST>(b.x[s / VEC].get(s % VEC), c, a, u);
	}
};

/* The fallback scan's source: a (fp32) and the normalised input (dtype). */
template <typename T, int VEC> struct stored_source {
	typedef T value_type;
	static constexpr int NV = SCAN_ITEMS / VEC;
	static constexpr int AVEC = VEC > 1 ? 4 : 1; /* floats per load of a */
	static constexpr int NA = SCAN_ITEMS / AVEC;
	struct buf {
		mb_packed<float, AVEC> a[NA];
		mb_packed<T, VEC> u[NV];
	};
	const float *a;
	const T *u;

	__device__ __forceinline__ void load(buf &b, int64_t row, int64_t t, int64_t len) const
	{
#pragma unroll
		for (int k = 0; k < NA; k++) {
			if (t + k * AVEC < len)
				b.a[k].load(a + row * len + t + k * AVEC);
			else
				b.a[k] = mb_packed<float, AVEC>{};
		}
#pragma unroll
		for (int k = 0; k < NV; k++) {
			if (t + k * VEC < len)
				b.u[k].load(u + row * len + t + k * VEC);
			else
				b.u[k] = mb_packed<T, VEC>{};
		}
	}
	__device__ __forceinline__ void begin_channel(int64_t) {}
	__device__ __forceinline__ bool fast() const { return true; }
	template <bool FAST> __device__ __forceinline__ void step(const buf &b, int s, float &av, float &uv) const
	{
		av = b.a[s / AVEC].get(s % AVEC);
		uv = b.u[s / VEC].get(s % VEC);
	}
};

/* The thread's steps from h = 0: running state H_s and decay product P_s
 * after each step, and the thread's map (p, h). Steps at or past `valid`
 * are the identity (a = 1, u = 0). */
template <bool FAST, bool MASKED, class Src>
__device__ __forceinline__ void local_scan(const Src &src, const typename Src::buf &b, int valid,
	float (&hs)[SCAN_ITEMS], float (&ps)[SCAN_ITEMS], float &p, float &h)
{
	p = 1.0f;
	h = 0.0f;
#pragma unroll
	for (int s = 0; s < SCAN_ITEMS; s++) {
		float a, u;
		src.template step<FAST>(b, s, a, u);
		if (MASKED && s >= valid) {
			a = 1.0f;
			u = 0.0f;
		}
		h = fmaf(a, h, u);
		p *= a;
		hs[s] = h;
		ps[s] = p;
	}
}

template <class Src>
__device__ __forceinline__ void local_scan_any(const Src &src, const typename Src::buf &b, int valid,
	float (&hs)[SCAN_ITEMS], float (&ps)[SCAN_ITEMS], float &p, float &h)
{
	if (valid >= SCAN_ITEMS) {
		if (src.fast())
			local_scan<true, false>(src, b, valid, hs, ps, p, h);
		else
			local_scan<false, false>(src, b, valid, hs, ps, p, h);
	} else {
		if (src.fast())
			local_scan<true, true>(src, b, valid, hs, ps, p, h);
		else
			local_scan<false, true>(src, b, valid, hs, ps, p, h);
	}
}

template <typename T, int VEC>
__device__ __forceinline__ void store_steps(T *dst, int64_t t, int64_t len, const float (&ys)[SCAN_ITEMS])
{
#pragma unroll
	for (int k = 0; k < SCAN_ITEMS / VEC; k++) {
		if (t + k * VEC < len) {
			float v[VEC];
#pragma unroll
			for (int e = 0; e < VEC; e++)
				v[e] = ys[k * VEC + e];
			mb_store_f32<T, VEC>(dst + k * VEC, v);
		}
	}
}

/* The sequences [n_seq * blockIdx.x / gridDim.x, n_seq * (blockIdx.x + 1)
 * / gridDim.x) in channel-major order (sequence s is channel s / batch of
 * batch s % batch, row (s % batch) * dim + s / batch), each in chunks of
 * blockDim.x * SCAN_ITEMS steps. blockDim.x is a whole number of warps, at
 * most SCAN_MAX_THREADS. */
template <int VEC, class Src>
__device__ __forceinline__ void scan_sequences(Src &src, typename Src::value_type *__restrict__ y, int64_t batch,
	int64_t dim, int64_t len)
{
	typedef typename Src::value_type T;
	__shared__ float2 warp_map[2][SCAN_MAX_WARPS]; /* by chunk parity: one barrier a chunk */
	const int lane = threadIdx.x % MB_WARP_THREADS, warp = threadIdx.x / MB_WARP_THREADS;
	const int n_warps = blockDim.x / MB_WARP_THREADS;
	const int64_t n_seq = batch * dim;
	const int64_t chunk_steps = (int64_t)blockDim.x * SCAN_ITEMS;
	const int64_t chunks = (len + chunk_steps - 1) / chunk_steps;
	const int64_t s_end = n_seq * (blockIdx.x + 1) / gridDim.x;
	const int64_t my_step = (int64_t)threadIdx.x * SCAN_ITEMS;
	/* the current chunk: sequence s, its batch b and channel c */
	int64_t s = n_seq * blockIdx.x / gridDim.x, b = s % batch, c = s / batch, chunk = 0, channel = -1;
	float carry = 0.0f;
	int parity = 0;
	typename Src::buf cur;

	if (s >= s_end)
		return;
	src.load(cur, b * dim + c, my_step, len);
	for (;;) {
		const int64_t row = b * dim + c, t = chunk * chunk_steps + my_step;
		int64_t next_s = s, next_b = b, next_c = c, next_chunk = chunk + 1;
		typename Src::buf next;
		float hs[SCAN_ITEMS], ps[SCAN_ITEMS], p, h;

		if (next_chunk == chunks) {
			next_chunk = 0;
			next_s = s + 1;
			if (++next_b == batch) {
				next_b = 0;
				next_c++;
			}
		}
		/* the next chunk's loads go out before this one's work */
		if (next_s < s_end)
			src.load(next, next_b * dim + next_c, next_chunk * chunk_steps + my_step, len);
		if (chunk == 0) {
			carry = 0.0f;
			if (c != channel) {
				channel = c;
				src.begin_channel(channel);
			}
		}
		const int64_t left = len - t;
		local_scan_any(src, cur, left < SCAN_ITEMS ? (int)(left > 0 ? left : 0) : SCAN_ITEMS, hs, ps, p, h);

		/* the warp's inclusive scan of the thread maps */
#pragma unroll
		for (int off = 1; off < MB_WARP_THREADS; off *= 2) {
			const float p_up = __shfl_up_sync(FULL_MASK, p, off), h_up = __shfl_up_sync(FULL_MASK, h, off);
			if (lane >= off) {
				h = fmaf(p, h_up, h);
				p *= p_up;
			}
		}
		float p_before = __shfl_up_sync(FULL_MASK, p, 1), h_before = __shfl_up_sync(FULL_MASK, h, 1);
		if (lane == 0) {
			p_before = 1.0f;
			h_before = 0.0f;
		}
		if (lane == MB_WARP_THREADS - 1)
			warp_map[parity][warp] = make_float2(p, h);
		__syncthreads();
		/* the warps' totals folded onto the carry: the state entering this
		 * warp, and the chunk's last state (the next chunk's carry) */
		float h_warp = carry;
		for (int w = 0; w < n_warps; w++) {
			const float2 m = warp_map[parity][w];
			if (w == warp)
				h_warp = carry;
			carry = fmaf(m.x, carry, m.y);
		}
		const float h_in = fmaf(p_before, h_warp, h_before);
#pragma unroll
		for (int k = 0; k < SCAN_ITEMS; k++)
			hs[k] = fmaf(ps[k], h_in, hs[k]);
		if (t < len)
			store_steps<T, VEC>(y + row * len + t, t, len, hs);

		parity ^= 1;
		if (next_s >= s_end)
			break;
		s = next_s;
		b = next_b;
		c = next_c;
		chunk = next_chunk;
		cur = next;
	}
}

template <typename T, int VEC>
__global__ void __launch_bounds__(SCAN_MAX_THREADS, SCAN_MIN_BLOCKS) mb_recurrent_scan_fused_kernel(
	fused_source<T, VEC> src, T *__restrict__ y, int64_t batch, int64_t dim, int64_t len)
{
	scan_sequences<VEC>(src, y, batch, dim, len);
}

template <typename T, int VEC>
__global__ void __launch_bounds__(SCAN_MAX_THREADS) mb_recurrent_scan_fb_scan_kernel(stored_source<T, VEC> src,
	T *__restrict__ y, int64_t batch, int64_t dim, int64_t len)
{
	scan_sequences<VEC>(src, y, batch, dim, len);
}

/* Threads a block: enough warps for one chunk to cover the sequence, at
 * most SCAN_MAX_THREADS. */
static int scan_threads(int64_t len)
{
	const int64_t per_thread = (len + SCAN_ITEMS - 1) / SCAN_ITEMS;
	const int64_t warps = (per_thread + MB_WARP_THREADS - 1) / MB_WARP_THREADS;
	return (int)(warps < SCAN_MAX_WARPS ? warps : SCAN_MAX_WARPS) * MB_WARP_THREADS;
}

/* The persistent grid: every resident block, or one per sequence if there
 * are fewer. `per_sm` caches the occupancy by warps a block (asked on the
 * first call of a shape, which the harness makes outside any capture). */
template <typename K>
static int scan_grid(K kernel, int threads, int64_t n_seq, int (&per_sm)[SCAN_MAX_WARPS + 1], unsigned *blocks)
{
	int device = 0, sms = 0;
	int &cached = per_sm[threads / MB_WARP_THREADS];
	cudaError_t ce = cudaGetDevice(&device);

	if (ce == cudaSuccess)
		ce = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
	if (ce == cudaSuccess && cached == 0)
		ce = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&cached, kernel, threads, 0);
	if (ce != cudaSuccess)
		return (int)ce;
	int64_t b = (int64_t)sms * (cached > 0 ? cached : 1);
	if (b > n_seq)
		b = n_seq;
	if (b < 1 || b > INT32_MAX)
		return (int)cudaErrorInvalidValue;
	*blocks = (unsigned)b;
	return 0;
}

static bool shape_ok(const int64_t *axis)
{
	return axis[AX_B] > 0 && axis[AX_D] > 0 && axis[AX_L] > 0 && axis[AX_B] <= INT64_MAX / axis[AX_D] &&
		axis[AX_B] * axis[AX_D] <= INT64_MAX / axis[AX_L];
}

template <typename T, int VEC>
static int fused_launch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	static int per_sm[SCAN_MAX_WARPS + 1];
	const int threads = scan_threads(axis[AX_L]);
	fused_source<T, VEC> src;
	unsigned blocks = 0;
	int rc;

	src.x = (const T *)in[IN_X];
	src.wa = (const T *)in[IN_WA];
	src.ba = (const T *)in[IN_BA];
	src.wi = (const T *)in[IN_WI];
	src.bi = (const T *)in[IN_BI];
	src.lambda = (const T *)in[IN_LAMBDA];
	if ((rc = scan_grid(mb_recurrent_scan_fused_kernel<T, VEC>, threads, axis[AX_B] * axis[AX_D], per_sm,
		     &blocks)) != 0)
		return rc;
	mb_recurrent_scan_fused_kernel<T, VEC><<<blocks, threads, 0, stream>>>(src, (T *)out[OUT_Y], axis[AX_B],
		axis[AX_D], axis[AX_L]);
	return (int)cudaGetLastError();
}

template <typename T>
static int fused_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	constexpr int vec = mb_vec16_elems<T>();

	if (!shape_ok(axis))
		return (int)cudaErrorInvalidValue;
	/* 16-byte accesses need aligned bases and sequences of whole vectors;
	 * other shapes run the same kernel one element per access */
	if (mb_aligned16(in[IN_X]) && mb_aligned16(out[OUT_Y]) && axis[AX_L] % vec == 0)
		return fused_launch<T, vec>(stream, axis, in, out);
	return fused_launch<T, 1>(stream, axis, in, out);
}

/* One launch: gates, decay, increment, scan and output in one pass over x. */
extern "C" MB_DECLARE_LAUNCH(mb_recurrent_scan_fused_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fused_dispatch, (cudaStream_t)stream, axis, in, out);
}

/* ---- fallback: Griffin's RG-LRU as a framework runs it -------------------- */

/* Every elementwise launch is a framework's vectorized kernel (vec.cuh's
 * flat launch: MB_FLAT_VECS vectors a thread, loads issued together,
 * blocks that cover the data once). Vector i of a [B*D, L] tensor is in
 * row i / (L/VEC), channel row % D. IDX is uint32_t when every element
 * offset fits (vec.cuh: mb_index32_fits).
 *
 * The gates, the decay and the multiplier stay in fp32 between launches,
 * as a framework upcasts a recurrence's inputs (Mamba's selective_scan_ref,
 * the fp32 accumulation of recurrentgemma's scan); only the normalised
 * input, the scan's input, is stored in the dtype. recurrentgemma's torch
 * RGLRU as written stores r, i and the multiplier in bf16, and that is not
 * accurate: a gate whose weight is small barely moves with x, so its
 * rounding repeats, correlated with x, and the bias adds up over the
 * channel's memory (src/reference/recurrent_scan.c). That path missed
 * the tolerance on the H200 (954 of 67 M elements at L = 16384, max
 * abs 0.078; reports/h200/heavy-b.json.gz). */

/* Gate: sigmoid(x w + b) of the diagonal projection, computed and stored
 * in fp32 (see above); expf and an IEEE division, as a framework's
 * sigmoid. */
template <typename T, int VEC, typename IDX>
__global__ void __launch_bounds__(MB_FLAT_THREADS) mb_recurrent_scan_fb_gate_kernel(const T *__restrict__ x,
	const T *__restrict__ w, const T *__restrict__ b, float *__restrict__ gate, IDX nvec, IDX row_vecs, IDX dim)
{
	mb_packed<T, VEC> xv[MB_FLAT_VECS];
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const IDX i = mb_flat_index<IDX>(k);
		if (i < nvec)
			xv[k].load(x + i * VEC);
	}
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const IDX i = mb_flat_index<IDX>(k);
		if (i < nvec) {
			const IDX c = i / row_vecs % dim;
			const float wc = mb_to_f32<T>(w[c]), bc = mb_to_f32<T>(b[c]);
			float out[VEC];
#pragma unroll
			for (int e = 0; e < VEC; e++)
				out[e] = __fdiv_rn(1.0f, 1.0f + expf(-(xv[k].get(e) * wc + bc)));
			mb_store_f32<float, VEC>(gate + i * VEC, out);
		}
	}
}

/* Decay, step 1: softplus(lambda) over the D channels, as torch's
 * (threshold 20: above it, lambda itself). */
template <typename T>
__global__ void __launch_bounds__(MB_FLAT_THREADS) mb_recurrent_scan_fb_decay_softplus_kernel(
	const T *__restrict__ lambda, float *__restrict__ sp, int64_t dim)
{
	const int64_t c = (int64_t)blockIdx.x * MB_FLAT_THREADS + threadIdx.x;
	if (c < dim) {
		const float l = mb_to_f32<T>(lambda[c]);
		sp[c] = l > 20.0f ? l : log1pf(expf(l));
	}
}

/* Decay, step 2: log a = (-8 r) * softplus, in fp32. */
template <int VEC, typename IDX>
__global__ void __launch_bounds__(MB_FLAT_THREADS) mb_recurrent_scan_fb_decay_log_a_kernel(
	const float *__restrict__ r, const float *__restrict__ sp, float *__restrict__ log_a, IDX nvec, IDX row_vecs,
	IDX dim)
{
	mb_packed<float, VEC> rv[MB_FLAT_VECS];
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const IDX i = mb_flat_index<IDX>(k);
		if (i < nvec)
			rv[k].load(r + i * VEC);
	}
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const IDX i = mb_flat_index<IDX>(k);
		if (i < nvec) {
			const float s = sp[i / row_vecs % dim];
			float out[VEC];
#pragma unroll
			for (int e = 0; e < VEC; e++)
				out[e] = (-RGLRU_C * rv[k].get(e)) * s;
			mb_store_f32<float, VEC>(log_a + i * VEC, out);
		}
	}
}

/* The fp32-to-fp32 launches over log a: vector i of log_a through `op`
 * into vector i of `out`. */
template <int VEC, typename IDX, class Op>
__device__ __forceinline__ void fb_from_log_a(const float *__restrict__ log_a, float *__restrict__ out, IDX nvec,
	Op op)
{
	mb_packed<float, VEC> lv[MB_FLAT_VECS];
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const IDX i = mb_flat_index<IDX>(k);
		if (i < nvec)
			lv[k].load(log_a + i * VEC);
	}
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const IDX i = mb_flat_index<IDX>(k);
		if (i < nvec) {
			float v[VEC];
#pragma unroll
			for (int e = 0; e < VEC; e++)
				v[e] = op(lv[k].get(e));
			mb_store_f32<float, VEC>(out + i * VEC, v);
		}
	}
}

/* Decay, step 3: a = exp(log a). */
struct fb_decay_op {
	__device__ __forceinline__ float operator()(float log_a) const { return expf(log_a); }
};

template <int VEC, typename IDX>
__global__ void __launch_bounds__(MB_FLAT_THREADS) mb_recurrent_scan_fb_decay_exp_kernel(
	const float *__restrict__ log_a, float *__restrict__ a, IDX nvec)
{
	fb_from_log_a<VEC>(log_a, a, nvec, fb_decay_op());
}

/* Input, step 1: the multiplier sqrt(1 - a^2) from log a, written with
 * expm1 (sqrt(-expm1(2 log a))): 1 - exp(2 log a) would lose 1 - a^2 to
 * cancellation on the slow channels. */
struct fb_multiplier_op {
	__device__ __forceinline__ float operator()(float log_a) const { return sqrtf(-expm1f(2.0f * log_a)); }
};

template <int VEC, typename IDX>
__global__ void __launch_bounds__(MB_FLAT_THREADS) mb_recurrent_scan_fb_input_multiplier_kernel(
	const float *__restrict__ log_a, float *__restrict__ m, IDX nvec)
{
	fb_from_log_a<VEC>(log_a, m, nvec, fb_multiplier_op());
}

/* Input, step 2: the gated, normalised input x * i * m in fp32, stored in
 * the dtype: the scan's input, the one rounding of the increment. */
template <typename T, int VEC, typename IDX>
__global__ void __launch_bounds__(MB_FLAT_THREADS) mb_recurrent_scan_fb_input_normalize_kernel(
	const T *__restrict__ x, const float *__restrict__ gate, const float *__restrict__ m, T *__restrict__ nx,
	IDX nvec)
{
	mb_packed<T, VEC> xv[MB_FLAT_VECS];
	mb_packed<float, VEC> gv[MB_FLAT_VECS], mv[MB_FLAT_VECS];
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const IDX i = mb_flat_index<IDX>(k);
		if (i < nvec) {
			xv[k].load(x + i * VEC);
			gv[k].load(gate + i * VEC);
			mv[k].load(m + i * VEC);
		}
	}
#pragma unroll
	for (int k = 0; k < MB_FLAT_VECS; k++) {
		const IDX i = mb_flat_index<IDX>(k);
		if (i < nvec) {
			float out[VEC];
#pragma unroll
			for (int e = 0; e < VEC; e++)
				out[e] = xv[k].get(e) * gv[k].get(e) * mv[k].get(e);
			mb_store_f32<T, VEC>(nx + i * VEC, out);
		}
	}
}

/* Workspace (fp32 slots): r, then the multiplier (r is dead once log a is
 * made); i; softplus; log a, then the normalised input (log a is dead once
 * a and the multiplier are made); a. */
static mb_ws_slot ws_r, ws_i, ws_sp, ws_log_a, ws_a;

template <typename T, int VEC, typename IDX>
static int fallback_launch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	static int per_sm[SCAN_MAX_WARPS + 1];
	const int64_t dim = axis[AX_D], len = axis[AX_L], n = axis[AX_B] * dim * len;
	const IDX nvec = (IDX)(n / VEC), row_vecs = (IDX)(len / VEC);
	const unsigned blocks = mb_flat_blocks(n / VEC);
	const int64_t fvec = n % 4 == 0 ? 4 : 1; /* the fp32-only exp launch's vector */
	const int threads = scan_threads(len);
	const T *x = (const T *)in[IN_X];
	void *r = NULL, *gi = NULL, *sp = NULL, *log_a = NULL, *a = NULL;
	unsigned scan_blocks = 0;
	cudaError_t ce;
	int rc;

	if (blocks == 0 || mb_flat_blocks(n / fvec) == 0 || dim > INT32_MAX)
		return (int)cudaErrorInvalidValue;
	if ((rc = mb_ws_reserve(&ws_r, (size_t)n * sizeof(float), &r)) != 0 ||
		(rc = mb_ws_reserve(&ws_i, (size_t)n * sizeof(float), &gi)) != 0 ||
		(rc = mb_ws_reserve(&ws_sp, (size_t)dim * sizeof(float), &sp)) != 0 ||
		(rc = mb_ws_reserve(&ws_log_a, (size_t)n * sizeof(float), &log_a)) != 0 ||
		(rc = mb_ws_reserve(&ws_a, (size_t)n * sizeof(float), &a)) != 0)
		return rc;
	if ((rc = scan_grid(mb_recurrent_scan_fb_scan_kernel<T, VEC>, threads, axis[AX_B] * dim, per_sm,
		     &scan_blocks)) != 0)
		return rc;

	mb_recurrent_scan_fb_gate_kernel<T, VEC, IDX><<<blocks, MB_FLAT_THREADS, 0, stream>>>(x,
		(const T *)in[IN_WA], (const T *)in[IN_BA], (float *)r, nvec, row_vecs, (IDX)dim);
	if ((ce = cudaGetLastError()) != cudaSuccess)
		return (int)ce;
	mb_recurrent_scan_fb_gate_kernel<T, VEC, IDX><<<blocks, MB_FLAT_THREADS, 0, stream>>>(x,
		(const T *)in[IN_WI], (const T *)in[IN_BI], (float *)gi, nvec, row_vecs, (IDX)dim);
	if ((ce = cudaGetLastError()) != cudaSuccess)
		return (int)ce;
	mb_recurrent_scan_fb_decay_softplus_kernel<T><<<(unsigned)((dim + MB_FLAT_THREADS - 1) / MB_FLAT_THREADS),
		MB_FLAT_THREADS, 0, stream>>>((const T *)in[IN_LAMBDA], (float *)sp, dim);
	if ((ce = cudaGetLastError()) != cudaSuccess)
		return (int)ce;
	mb_recurrent_scan_fb_decay_log_a_kernel<VEC, IDX><<<blocks, MB_FLAT_THREADS, 0, stream>>>((const float *)r,
		(const float *)sp, (float *)log_a, nvec, row_vecs, (IDX)dim);
	if ((ce = cudaGetLastError()) != cudaSuccess)
		return (int)ce;
	if (fvec == 4)
		mb_recurrent_scan_fb_decay_exp_kernel<4, IDX><<<mb_flat_blocks(n / 4), MB_FLAT_THREADS, 0, stream>>>(
			(const float *)log_a, (float *)a, (IDX)(n / 4));
	else
		mb_recurrent_scan_fb_decay_exp_kernel<1, IDX><<<mb_flat_blocks(n), MB_FLAT_THREADS, 0, stream>>>(
			(const float *)log_a, (float *)a, (IDX)n);
	if ((ce = cudaGetLastError()) != cudaSuccess)
		return (int)ce;
	mb_recurrent_scan_fb_input_multiplier_kernel<VEC, IDX><<<blocks, MB_FLAT_THREADS, 0, stream>>>(
		(const float *)log_a, (float *)r, nvec);
	if ((ce = cudaGetLastError()) != cudaSuccess)
		return (int)ce;
	mb_recurrent_scan_fb_input_normalize_kernel<T, VEC, IDX><<<blocks, MB_FLAT_THREADS, 0, stream>>>(x,
		(const float *)gi, (const float *)r, (T *)log_a, nvec);
	if ((ce = cudaGetLastError()) != cudaSuccess)
		return (int)ce;
	stored_source<T, VEC> src;
	src.a = (const float *)a;
	src.u = (const T *)log_a;
	mb_recurrent_scan_fb_scan_kernel<T, VEC><<<scan_blocks, threads, 0, stream>>>(src, (T *)out[OUT_Y],
		axis[AX_B], dim, len);
	return (int)cudaGetLastError();
}

template <typename T, int VEC>
static int fallback_index(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	if (mb_index32_fits(axis[AX_B] * axis[AX_D] * axis[AX_L]))
		return fallback_launch<T, VEC, uint32_t>(stream, axis, in, out);
	return fallback_launch<T, VEC, uint64_t>(stream, axis, in, out);
}

template <typename T>
static int fallback_dispatch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	constexpr int vec = mb_vec16_elems<T>();

	if (!shape_ok(axis))
		return (int)cudaErrorInvalidValue;
	if (mb_aligned16(in[IN_X]) && mb_aligned16(out[OUT_Y]) && axis[AX_L] % vec == 0)
		return fallback_index<T, vec>(stream, axis, in, out);
	return fallback_index<T, 1>(stream, axis, in, out);
}

/* Eight launches: two gates, softplus, log a, exp, the multiplier, the
 * normalised input, the scan; r, i, softplus, log a, a and the multiplier
 * through memory in fp32, the normalised input in the dtype. */
extern "C" MB_DECLARE_LAUNCH(mb_recurrent_scan_fallback_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fallback_dispatch, (cudaStream_t)stream, axis, in, out);
}
