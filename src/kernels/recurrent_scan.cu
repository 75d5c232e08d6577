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
 * (P2 P1, P2 H1 + H2). One warp takes a whole sequence, in chunks of
 * 32 * SCAN_ITEMS = 512 steps: each lane runs its SCAN_ITEMS consecutive
 * steps (lane 0 from the carry of the previous chunk, the others from
 * h = 0), keeping each step's H and running P; a shuffle scan of the
 * lanes' maps gives each lane the state entering its steps, and each lane
 * finishes them as y = P_s h_in + H_s. The last lane's state is the next
 * chunk's carry. Warps never wait for each other: no barrier, no shared
 * memory. The grid is persistent (every resident warp); a warp takes its
 * sequences one at a time from a ticket counter, and a lane loads the
 * next chunk's inputs (the next sequence's first, at a sequence's last
 * chunk) before it works on the current one, so that a chunk's loads are
 * in flight for a whole chunk's work. Taking sequences as they come
 * rather than a fixed run of them (4 a warp at B=4, D=4096): 343.0
 * against 382.8 us in bf16 at L=16384 on an H200 (0.733 of the
 * read+write ceiling against 0.656), 92.7 against 99.7 us at L=4096
 * (reports/h200, runs rs-a to rs-e): ncu counted on average 24.1 of an
 * SM's 32 resident warps active with the fixed runs, 29.9 with tickets,
 * so a warp done with its run early no longer idles while the slowest
 * finish. In bf16 and fp16, the chunks of a sequence that a full chunk of
 * the same sequence follows (30 of 32 at L=16384) take a steady loop
 * (steady_chunks) with no bounds, tickets or kinds of step to test, the
 * gates' biases in lane registers (in_lanes): 256.8 M warp instructions
 * against 280.8 M at L=16384, 332.8 against 343.4 us on one H200, 0.754
 * to 0.757 of the read+write ceiling against 0.732 (run rs-o). By
 * tests/gpu/sass_profile.py, the loop alone took the compares, branches
 * and counters from 4.3 an element to 1.9 but added 1.2 moves out of
 * uniform registers (269.9 M instructions, 340.8 us), which in_lanes
 * removes. In fp32 the loop was 0.5% to 1.8% slower, and in the
 * fallback's scan no faster in bf16 and 1.6% slower in fp32 (112 bytes
 * spilled), so those take the general loop alone; two load buffers used
 * in turn in the steady loop took 342.9 us (rs-m). Slower, and not
 * kept: asking for the next ticket a chunk early (349.4 us) or computing
 * the next channel's constants then too (360.0 us), for the registers
 * they hold; 4096 warps, the count that splits 16384 sequences evenly,
 * rather than every resident one (349.0 us); and
 * two-warp blocks of 8 steps a lane, to hold more warps an SM (476.8 us:
 * the sequence counters leave the uniform registers and the shuffle scan
 * is amortised over half the steps).
 * Nor a step of four MUFU operations (sqrt(y) from rsqrt((1 + e_r)/c16),
 * i from rcp(1 + e_i): no scaled range, no clamp, 19 instructions a step
 * against 21): 6% fewer instructions, but the MUFU pipe then ran at 75%
 * of its peak, issue fell from 81% to 75% busy, and it took 351.6 against
 * 345.0 us; mixing it into 6, 8, 11 or 13 of a lane's 16 steps took 350.6,
 * 346.2, 360.3 and 359.5 against 344.9 (reports/h200 runs rs-g, rs-h).
 * Nor asking L2 for later chunks (cp.async.bulk.prefetch.L2 from one
 * lane): a warp waited on its loads far less (ncu: 0.2 to 0.9 cycles of
 * long-scoreboard stall an issue against 2.9) and issue rose from 82% to
 * 85% busy, but the requests cost instructions (2.6% more for one chunk
 * two ahead, 5.7% for a group of four every four chunks) and groups
 * brought 16% more bytes from DRAM: 345.2 us one chunk ahead, 350.6,
 * 348.4 and 379.6 in groups of 2, 4 and 8, against 343.4 and 343.9
 * (runs rs-i, rs-k); the fallback's scan with it, 1.612 against 1.585
 * ms. Nor two load buffers used in turn instead of the copy of one into
 * the other (8 moves a chunk): the loop written twice issued 296.7 M
 * instructions against 280.8 M, 358.5 against 343.4 us (run rs-j).
 * tests/gpu/sass_profile.py over ncu's source counters gives the cost:
 * before the steady loop 33.5 warp instructions an element (run src-b),
 * with it 30.6 (run rs-p): 14.4 FFMA, 6.2 FMUL, 3.0 MUFU, 1.3 MOV, 1.0
 * FMNMX, 1.8 of compares, branches and counters, and a third of the
 * stall samples on the first use of a chunk's loads.
 *
 * The fallback's scan launch runs the same warp scan, on the same
 * schedule, over (a, input) read from memory: the speedup measures the
 * fusion of the gates, not a better scan.
 */
#include <limits.h>
#include <stdint.h>

#include "kernels/launch.h"
#include "kernels/recurrent_scan_math.h"
#include "kernels/vec.cuh"
#include "kernels/workspace.h"

enum { AX_B, AX_L, AX_D };
enum { IN_X, IN_WA, IN_BA, IN_WI, IN_BI, IN_LAMBDA };
enum { OUT_Y };

/* Consecutive steps a lane takes per chunk (two 16-byte vectors of bf16,
 * four of fp32); a chunk is a warp's 32 lanes of them. */
#define SCAN_ITEMS 16
#define SCAN_CHUNK_STEPS (MB_WARP_THREADS * SCAN_ITEMS)
/* Warps are independent: a block is one warp, so that the scan's
 * sequence and chunk counters derive from blockIdx alone and live in
 * uniform registers. Counted by threadIdx they took 16 registers and
 * spilled 118 bytes at 64 a thread.
 * Warps an SM: fewer warps with more registers each beat more warps. The
 * fused kernel in bf16 and fp16 at 24 warps an SM (80 registers), the fp32
 * one and the fallback's scan (which holds a chunk of a in fp32 too) at 16
 * (126 and 106 registers). One H200, f4deb30's 32 and 24 against these,
 * two passes each (reports/h200 runs rs-q, rs-r), B=4 D=4096:
 *   fused bf16, L=16384    330.0-330.3 us (0.766)  323.7-323.8 us (0.782)
 *   fused bf16, L=4096      91.6-91.8 us (0.689)    87.3-87.4 us (0.724)
 *   fused fp32, L=16384    709.5-712.6 us (0.710)  652.8-658.3 us (0.770)
 *   fused fp32, L=4096     179.0-179.1 us (0.707)  146.4-146.7 us (0.863)
 *   fallback fp32, 16384   2.017-2.019 ms          1.916 ms
 * (the bf16 fallback 1.565 against 1.572 ms in rs-r). 16 warps in bf16 (114
 * registers) took 353.3 us, 20 in fp32 702-704 us, 28 in fp32 (68 bytes
 * spilled in the fallback's scan) 716-718 us, and 32 everywhere 842 us
 * in fp32; on another H200 (run rs-s) 20 and 28 in bf16 took 91.1 and
 * 89.1-89.2 us at L = 4096 against 24's 86.3. */
#define SCAN_THREADS MB_WARP_THREADS
#define SCAN_MIN_BLOCKS 24
#define SCAN_STORED_MIN_BLOCKS 16
#define FULL_MASK 0xffffffffu

/* ---- the fused step ------------------------------------------------------- */

/* Channels outside the fast step's range (recurrent_scan_math.h): r from
 * ex2 and rsqrt, the input gate from ex2 and a fast division, a and the
 * multiplier from the library (accurate, several MUFU operations more). */
__device__ __forceinline__ void rglru_step_slow(float x, const rs_channel &c, float &a, float &u)
{
	const float g = rs_rsqrt(1.0f + rs_ex2(fmaf(x, c.ka, c.kb))); /* sqrt(r) */
	const float y = c.c16 * g * g;
	const float gx = __fdividef(x, 1.0f + rs_ex2(fmaf(x, c.ki, c.bi)));

	a = expf(-0.5f * y);
	u = sqrtf(-expm1f(-y)) * gx;
}

/* ---- what the warp scan reads ----------------------------------------------- */

/* A source gives the scan its inputs: `buf` holds one lane's SCAN_ITEMS
 * steps as loaded, load() fills it from element `at` of the [B*D, L]
 * tensors, `left` steps of the sequence from there (zero past its end;
 * FULL: all SCAN_ITEMS are in it),
 * begin_channel() sets up a channel's constants, step<FAST>() gives step
 * s's (a, u). */

/* The fused kernel's source: x and the channel parameters; the channel's
 * constants live in the scan's registers (the source itself stays in the
 * kernel's parameter space). */
template <typename T, int VEC> struct fused_source {
	typedef T value_type;
	typedef rs_channel channel;
	static constexpr int NV = SCAN_ITEMS / VEC;
	/* steady_chunks for 16-bit x in 16-byte vectors: in fp32, and in the
	 * fallback's scan, it was slower (see the header) */
	static constexpr bool STEADY = sizeof(T) == 2 && VEC > 1;
	struct buf {
		mb_packed<T, VEC> x[NV];
	};
	const T *x, *wa, *ba, *wi, *bi, *lambda;

	template <bool FULL> __device__ __forceinline__ void load(buf &b, int64_t at, int64_t left) const
	{
#pragma unroll
		for (int k = 0; k < NV; k++) {
			if (FULL || k * VEC < left)
				b.x[k].load(x + at + k * VEC);
			else
				b.x[k] = mb_packed<T, VEC>{};
		}
	}
	__device__ __forceinline__ channel begin_channel(int64_t ch) const
	{
		return rs_channel_make(mb_to_f32<T>(wa[ch]), mb_to_f32<T>(ba[ch]), mb_to_f32<T>(wi[ch]),
			mb_to_f32<T>(bi[ch]), mb_to_f32<T>(lambda[ch]));
	}
	static __device__ __forceinline__ bool fast(const channel &c) { return c.fast; }
	template <bool FAST>
	__device__ __forceinline__ void step(const buf &b, const channel &c, int s, float &a, float &u) const
	{
		const float xs = b.x[s / VEC].get(s % VEC);
		if (FAST)
			rs_step_fast(xs, &c, &a, &u);
		else
			rglru_step_slow(xs, c, a, u);
	}
};

/* The fallback scan's source: a (fp32) and the normalised input (dtype). */
template <typename T, int VEC> struct stored_source {
	typedef T value_type;
	static constexpr int NV = SCAN_ITEMS / VEC;
	static constexpr int AVEC = VEC > 1 ? 4 : 1; /* floats per load of a */
	static constexpr int NA = SCAN_ITEMS / AVEC;
	static constexpr bool STEADY = false;
	struct buf {
		mb_packed<float, AVEC> a[NA];
		mb_packed<T, VEC> u[NV];
	};
	const float *a;
	const T *u;

	template <bool FULL> __device__ __forceinline__ void load(buf &b, int64_t at, int64_t left) const
	{
#pragma unroll
		for (int k = 0; k < NA; k++) {
			if (FULL || k * AVEC < left)
				b.a[k].load(a + at + k * AVEC);
			else
				b.a[k] = mb_packed<float, AVEC>{};
		}
#pragma unroll
		for (int k = 0; k < NV; k++) {
			if (FULL || k * VEC < left)
				b.u[k].load(u + at + k * VEC);
			else
				b.u[k] = mb_packed<T, VEC>{};
		}
	}
	struct channel {};
	__device__ __forceinline__ channel begin_channel(int64_t) const { return channel{}; }
	static __device__ __forceinline__ bool fast(const channel &) { return true; }
	template <bool FAST>
	__device__ __forceinline__ void step(const buf &b, const channel &, int s, float &av, float &uv) const
	{
		av = b.a[s / AVEC].get(s % AVEC);
		uv = b.u[s / VEC].get(s % VEC);
	}
};

/* ---- the warp scan, shared by the fused kernel and the fallback's scan ------ */

/* The lane's steps from h = h0: running state H_s and decay product P_s
 * after each step, and the lane's map (p, h). Steps at or past `valid`
 * are the identity (a = 1, u = 0). */
template <bool FAST, bool MASKED, class Src>
__device__ __forceinline__ void local_scan(const Src &src, const typename Src::buf &b,
	const typename Src::channel &c, int valid, float h0,
	float (&hs)[SCAN_ITEMS], float (&ps)[SCAN_ITEMS], float &p, float &h)
{
	p = 1.0f;
	h = h0;
#pragma unroll
	for (int s = 0; s < SCAN_ITEMS; s++) {
		float a, u;
		src.template step<FAST>(b, c, s, a, u);
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
__device__ __forceinline__ void local_scan_any(const Src &src, const typename Src::buf &b,
	const typename Src::channel &c, int valid, float h0, float (&hs)[SCAN_ITEMS], float (&ps)[SCAN_ITEMS],
	float &p, float &h)
{
	if (valid >= SCAN_ITEMS) {
		if (Src::fast(c))
			local_scan<true, false>(src, b, c, valid, h0, hs, ps, p, h);
		else
			local_scan<false, false>(src, b, c, valid, h0, hs, ps, p, h);
	} else {
		if (Src::fast(c))
			local_scan<true, true>(src, b, c, valid, h0, hs, ps, p, h);
		else
			local_scan<false, true>(src, b, c, valid, h0, hs, ps, p, h);
	}
}

/* Two fp32 values rounded to a 16-bit dtype, packed low then high: one
 * conversion instruction (F2FP) for both. */
__device__ __forceinline__ unsigned pack2(float lo, float hi, __nv_bfloat16)
{
	const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
	return (unsigned)__bfloat16_as_ushort(v.x) | (unsigned)__bfloat16_as_ushort(v.y) << 16;
}

__device__ __forceinline__ unsigned pack2(float lo, float hi, __half)
{
	const __half2 v = __floats2half2_rn(lo, hi);
	return (unsigned)__half_as_ushort(v.x) | (unsigned)__half_as_ushort(v.y) << 16;
}

/* VEC values as one 16-byte access, built as four words and stored
 * through the intrinsic (st.global.wb): a vec.cuh struct of eight bf16,
 * or a plain uint4 store, came out of this kernel as several 2- and
 * 4-byte stores in its PTX. Not evict-first: a lane's two stores fill
 * the two halves of the same 32-byte sectors, which should meet in L2. */
template <typename T, int VEC> __device__ __forceinline__ void store_vec(T *dst, const float (&v)[VEC])
{
	if constexpr (sizeof(T) * VEC != MB_VEC_BYTES) {
		mb_store_f32<T, VEC>(dst, v);
	} else if constexpr (sizeof(T) == sizeof(float)) {
		__stwb(reinterpret_cast<float4 *>(dst), make_float4(v[0], v[1], v[2], v[3]));
	} else {
		__stwb(reinterpret_cast<uint4 *>(dst), make_uint4(pack2(v[0], v[1], T()), pack2(v[2], v[3], T()),
			pack2(v[4], v[5], T()), pack2(v[6], v[7], T())));
	}
}

/* The lane's SCAN_ITEMS outputs from dst, `left` steps of the sequence
 * from there (FULL: all of them). */
template <typename T, int VEC, bool FULL>
__device__ __forceinline__ void store_steps(T *dst, int64_t left, const float (&ys)[SCAN_ITEMS])
{
#pragma unroll
	for (int k = 0; k < SCAN_ITEMS / VEC; k++) {
		if (FULL || k * VEC < left) {
			float v[VEC];
#pragma unroll
			for (int e = 0; e < VEC; e++)
				v[e] = ys[k * VEC + e];
			store_vec<T, VEC>(dst + k * VEC, v);
		}
	}
}

/* The gates' biases as each lane's own values. In the steady loop the
 * compiler kept the channel's constants in uniform registers, and as a
 * multiply-add takes at most one uniform operand, each step moved each
 * gate's weight into a lane register first (1.2 moves an element with
 * those of k). A shuffle's result is a lane's, whatever its value: two a
 * sequence. Shuffling k in as well spilled 6 bytes and was no faster
 * (run rs-o). */
__device__ __forceinline__ rs_channel in_lanes(rs_channel c, int lane)
{
	c.kb = __shfl_sync(FULL_MASK, c.kb, lane);
	c.bi = __shfl_sync(FULL_MASK, c.bi, lane);
	return c;
}

/* The warp's inclusive scan of the lane maps (p, h): lane 0's carries the
 * chunk's carry (its h0), so every lane's state includes it. Each lane's
 * steps become final states (hs), and `carry` the chunk's last. */
__device__ __forceinline__ void finish_chunk(int lane, float p, float h, const float (&ps)[SCAN_ITEMS],
	float (&hs)[SCAN_ITEMS], float &carry)
{
#pragma unroll
	for (int off = 1; off < MB_WARP_THREADS; off *= 2) {
		const float p_up = __shfl_up_sync(FULL_MASK, p, off), h_up = __shfl_up_sync(FULL_MASK, h, off);
		if (lane >= off) {
			h = fmaf(p, h_up, h);
			p *= p_up;
		}
	}
	/* the state entering this lane's steps (lane 0's are final) */
	float h_in = __shfl_up_sync(FULL_MASK, h, 1);
	carry = __shfl_sync(FULL_MASK, h, MB_WARP_THREADS - 1);
	if (lane == 0)
		h_in = 0.0f;
#pragma unroll
	for (int k = 0; k < SCAN_ITEMS; k++)
		hs[k] = fmaf(ps[k], h_in, hs[k]);
}

/* Chunks `chunk` .. full_chunks - 2 of one sequence (row from element
 * `base`): every one full and followed by a full one of the same
 * sequence, so the loop has no bounds, no tickets and one kind of step.
 * `cur` holds chunk `chunk`'s inputs on entry, chunk full_chunks - 1's on
 * return. */
template <bool FAST, int VEC, class Src>
__device__ __forceinline__ void steady_chunks(const Src &src, typename Src::value_type *__restrict__ y, int64_t base,
	int64_t full_chunks, int64_t &chunk, const typename Src::channel &channel, typename Src::buf &cur, float &carry)
{
	const int lane = threadIdx.x;
	const int my_step = lane * SCAN_ITEMS;
	const typename Src::channel ch = in_lanes(channel, lane);

	for (; chunk + 1 < full_chunks; chunk++) {
		const int64_t at = base + chunk * SCAN_CHUNK_STEPS + my_step;
		typename Src::buf next;
		float hs[SCAN_ITEMS], ps[SCAN_ITEMS], p, h;

		src.template load<true>(next, at + SCAN_CHUNK_STEPS, SCAN_ITEMS);
		local_scan<FAST, false>(src, cur, ch, SCAN_ITEMS, lane == 0 ? carry : 0.0f, hs, ps, p, h);
		finish_chunk(lane, p, h, ps, hs, carry);
		store_steps<typename Src::value_type, VEC, true>(y + at, SCAN_ITEMS, hs);
		cur = next;
	}
}

/* Which sequences a warp scans: it takes the next from the launch's
 * ticket counter, the next but one as it starts the last chunk of that
 * one (whose loads go out then), and so on, so that a warp that runs fast
 * takes more. The last warp to finish zeroes the counters for the next
 * launch. Sequence s is channel s / batch of batch s % batch (row
 * (s % batch) * dim + s / batch). */
enum { TICKET_NEXT, TICKET_DONE, TICKET_WORDS };

__device__ __forceinline__ int64_t take_sequence(unsigned long long *tickets, int lane)
{
	unsigned long long t = 0;

	if (lane == 0)
		t = atomicAdd(&tickets[TICKET_NEXT], 1ull);
	return (int64_t)__shfl_sync(FULL_MASK, t, 0);
}

/* Every warp of the grid calls it once, after its last take. */
__device__ __forceinline__ void finish_sequences(unsigned long long *tickets, int lane)
{
	if (lane != 0)
		return;
	__threadfence();
	if (atomicAdd(&tickets[TICKET_DONE], 1ull) == gridDim.x - 1ull) {
		tickets[TICKET_NEXT] = 0;
		tickets[TICKET_DONE] = 0;
	}
}

/* Each sequence in chunks of SCAN_CHUNK_STEPS; every chunk but a
 * sequence's last is full, and takes the path without bounds. blockDim.x
 * is SCAN_THREADS, one warp. */
template <int VEC, class Src>
__device__ __forceinline__ void scan_sequences(const Src &src, typename Src::value_type *__restrict__ y, int64_t batch,
	int64_t dim, int64_t len, unsigned long long *tickets)
{
	typedef typename Src::value_type T;
	const int lane = threadIdx.x;
	const int64_t n_seq = batch * dim;
	const int64_t full_chunks = len / SCAN_CHUNK_STEPS;
	const int64_t chunks = (len + SCAN_CHUNK_STEPS - 1) / SCAN_CHUNK_STEPS;
	const int my_step = lane * SCAN_ITEMS;
	/* the element where sequence q's row starts */
	const auto row_start = [=](int64_t q) { return (q % batch * dim + q / batch) * len; };
	/* the current chunk: sequence s (channel c, its row starting at
	 * element `base`) and its chunk */
	int64_t s = take_sequence(tickets, lane), c = s / batch, base = row_start(s), chunk = 0;
	float carry = 0.0f;
	typename Src::buf cur;
	typename Src::channel ch;

	if (s >= n_seq) {
		finish_sequences(tickets, lane);
		return;
	}
	ch = src.begin_channel(c);
	if (full_chunks > 0)
		src.template load<true>(cur, base + my_step, len - my_step);
	else
		src.template load<false>(cur, base + my_step, len - my_step);
	for (;;) {
		/* the chunks followed by a full one of the same sequence, where
		 * the source takes the steady loop */
		if constexpr (Src::STEADY) {
			if (chunk + 1 < full_chunks) {
				if (Src::fast(ch))
					steady_chunks<true, VEC>(src, y, base, full_chunks, chunk, ch, cur, carry);
				else
					steady_chunks<false, VEC>(src, y, base, full_chunks, chunk, ch, cur, carry);
			}
		}
		/* then the rest of the sequence (all of it, without the steady
		 * loop): the next chunk is partial, or another sequence's */
		const int64_t t = chunk * SCAN_CHUNK_STEPS + my_step;
		const bool full = chunk < full_chunks;
		int64_t next_s = s, next_c = c, next_base = base, next_chunk = chunk + 1;
		typename Src::buf next;
		float hs[SCAN_ITEMS], ps[SCAN_ITEMS], p, h;

		if (next_chunk == chunks) {
			next_chunk = 0;
			next_s = take_sequence(tickets, lane);
			next_c = next_s / batch;
			next_base = row_start(next_s);
		}
		/* the next chunk's loads go out before this one's work */
		if (next_s < n_seq) {
			const int64_t next_t = next_chunk * SCAN_CHUNK_STEPS + my_step;
			if (next_chunk < full_chunks)
				src.template load<true>(next, next_base + next_t, len - next_t);
			else
				src.template load<false>(next, next_base + next_t, len - next_t);
		}
		const float h0 = lane == 0 ? carry : 0.0f;
		if (full) {
			if (Src::fast(ch))
				local_scan<true, false>(src, cur, ch, SCAN_ITEMS, h0, hs, ps, p, h);
			else
				local_scan<false, false>(src, cur, ch, SCAN_ITEMS, h0, hs, ps, p, h);
		} else {
			const int64_t left = len - t;
			local_scan_any(src, cur, ch, left < SCAN_ITEMS ? (int)(left > 0 ? left : 0) : SCAN_ITEMS, h0, hs,
				ps, p, h);
		}
		finish_chunk(lane, p, h, ps, hs, carry);
		if (full)
			store_steps<T, VEC, true>(y + base + t, SCAN_ITEMS, hs);
		else if (t < len)
			store_steps<T, VEC, false>(y + base + t, len - t, hs);

		if (next_s >= n_seq)
			break;
		if (next_chunk == 0) {
			carry = 0.0f;
			if (next_c != c)
				ch = src.begin_channel(next_c);
		}
		s = next_s;
		c = next_c;
		base = next_base;
		chunk = next_chunk;
		cur = next;
	}
	finish_sequences(tickets, lane);
}

template <typename T, int VEC>
__global__ void __launch_bounds__(SCAN_THREADS, sizeof(T) == 2 ? SCAN_MIN_BLOCKS : SCAN_STORED_MIN_BLOCKS)
	mb_recurrent_scan_fused_kernel(fused_source<T, VEC> src, T *__restrict__ y, int64_t batch, int64_t dim,
		int64_t len, unsigned long long *tickets)
{
	scan_sequences<VEC>(src, y, batch, dim, len, tickets);
}

template <typename T, int VEC>
__global__ void __launch_bounds__(SCAN_THREADS, SCAN_STORED_MIN_BLOCKS) mb_recurrent_scan_fb_scan_kernel(
	stored_source<T, VEC> src, T *__restrict__ y, int64_t batch, int64_t dim, int64_t len,
	unsigned long long *tickets)
{
	scan_sequences<VEC>(src, y, batch, dim, len, tickets);
}

#ifndef MB_RS_EMU
/* The host side: under MB_RS_EMU the kernels above are compiled for the
 * CPU and run by the SIMT emulator of tests/unit/ssm_scan_emu.h
 * (tests/unit/test_recurrent_scan_emu.cpp), which launches them itself. */

/* The persistent grid, every resident block (warp) and at most one a
 * sequence, and the launch's ticket counters in `slot`. `per_sm` caches
 * the occupancy (asked on the first call, which the harness makes outside
 * any capture). The counters are zeroed when their memory is new (the
 * harness frees every slot before a case, so that is the case's first,
 * untimed call); after that each launch leaves them zero for the next, so
 * launches that share a slot follow each other on one stream. */
template <typename K>
static int scan_setup(K kernel, int64_t n_seq, int *per_sm, mb_ws_slot *slot, cudaStream_t stream, unsigned *blocks,
	unsigned long long **tickets)
{
	const size_t bytes = TICKET_WORDS * sizeof(unsigned long long);
	const bool new_memory = slot->ptr == NULL || slot->bytes < bytes;
	int device = 0, sms = 0, rc;
	cudaError_t ce = cudaGetDevice(&device);
	void *p = NULL;

	if (ce == cudaSuccess)
		ce = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
	if (ce == cudaSuccess && *per_sm == 0)
		ce = cudaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, kernel, SCAN_THREADS, 0);
	if (ce != cudaSuccess)
		return (int)ce;
	const int64_t resident = (int64_t)sms * (*per_sm > 0 ? *per_sm : 1);
	const int64_t b = n_seq < resident ? n_seq : resident;
	if (b < 1 || b > INT32_MAX)
		return (int)cudaErrorInvalidValue;
	*blocks = (unsigned)b;
	if ((rc = mb_ws_reserve(slot, bytes, &p)) != 0)
		return rc;
	if (new_memory && (ce = cudaMemsetAsync(p, 0, bytes, stream)) != cudaSuccess)
		return (int)ce;
	*tickets = (unsigned long long *)p;
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
	static int per_sm;
	static mb_ws_slot tickets_slot;
	fused_source<T, VEC> src;
	unsigned long long *tickets = NULL;
	unsigned blocks = 0;
	int rc;

	src.x = (const T *)in[IN_X];
	src.wa = (const T *)in[IN_WA];
	src.ba = (const T *)in[IN_BA];
	src.wi = (const T *)in[IN_WI];
	src.bi = (const T *)in[IN_BI];
	src.lambda = (const T *)in[IN_LAMBDA];
	if ((rc = scan_setup(mb_recurrent_scan_fused_kernel<T, VEC>, axis[AX_B] * axis[AX_D], &per_sm, &tickets_slot,
		     stream, &blocks, &tickets)) != 0)
		return rc;
	mb_recurrent_scan_fused_kernel<T, VEC><<<blocks, SCAN_THREADS, 0, stream>>>(src, (T *)out[OUT_Y], axis[AX_B],
		axis[AX_D], axis[AX_L], tickets);
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

#endif

/* ---- fallback: the RG-LRU as a compiled framework runs it ------------------ */

/* Two launches, as torch.compile makes of the RG-LRU written with an
 * associative scan (recurrentgemma's RGLRU, its scan
 * associative_scan((a, x i m))): one fused elementwise kernel for the
 * gates, the decay and the normalised input, and one scan kernel over
 * (a, normalised input) with fp32 state. The decay leaves in fp32 (1 - a
 * is down to 1e-5, under a bf16 quantum of a), the normalised input in the
 * dtype, as recurrentgemma rounds it (its one rounding in the error
 * analysis of src/reference/recurrent_scan.c).
 *
 * The gate kernel computes as the eager launches it replaces did, each
 * intermediate in fp32: r and i a sigmoid each (expf and an IEEE
 * reciprocal, the same bits as 1 / (1 + e) divided, in about half the
 * instructions of a division), softplus(lambda) once a vector
 * (torch's, threshold 20), log a = (-8 r) softplus, a = exp(log a), the
 * multiplier sqrt(1 - a^2) = sqrt(-expm1(2 log a)) (1 - exp(2 log a)
 * would lose 1 - a^2 to cancellation on the slow channels), then x i m.
 * A vectorized flat launch (vec.cuh: MB_FLAT_VECS vectors a thread, loads
 * issued together); vector i of [B*D, L] is in row i / (L/VEC), channel
 * row % D. IDX is uint32_t when every element offset fits
 * (mb_index32_fits).
 *
 * An earlier fallback stored r, i and the multiplier in bf16, as
 * recurrentgemma's eager torch code does, and that is not accurate: a
 * gate whose weight is small barely moves with x, so its rounding
 * repeats, correlated with x, and the bias adds up over the channel's
 * memory (954 of 67 M elements over the tolerance at L = 16384, max abs
 * 0.078; reports/h200/heavy-b.json.gz). */
template <typename T, int VEC, typename IDX>
__global__ void __launch_bounds__(MB_FLAT_THREADS) mb_recurrent_scan_fb_gate_kernel(const T *__restrict__ x,
	const T *__restrict__ w_a, const T *__restrict__ b_a, const T *__restrict__ w_i, const T *__restrict__ b_i,
	const T *__restrict__ lambda, float *__restrict__ a, T *__restrict__ nx, IDX nvec, IDX row_vecs, IDX dim)
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
			const float wa = mb_to_f32<T>(w_a[c]), ba = mb_to_f32<T>(b_a[c]);
			const float wi = mb_to_f32<T>(w_i[c]), bi = mb_to_f32<T>(b_i[c]);
			const float l = mb_to_f32<T>(lambda[c]);
			const float sp = l > 20.0f ? l : log1pf(expf(l));
			float av[VEC], nv[VEC];
#pragma unroll
			for (int e = 0; e < VEC; e++) {
				const float xe = xv[k].get(e);
				const float r = __frcp_rn(1.0f + expf(-(xe * wa + ba)));
				const float ig = __frcp_rn(1.0f + expf(-(xe * wi + bi)));
				const float log_a = (-RS_RGLRU_C * r) * sp;
				const float m = sqrtf(-expm1f(2.0f * log_a));
				av[e] = expf(log_a);
				nv[e] = xe * ig * m;
			}
			mb_store_f32<float, VEC>(a + i * VEC, av);
			mb_store_f32<T, VEC>(nx + i * VEC, nv);
		}
	}
}

#ifndef MB_RS_EMU
/* Workspace: a (fp32) and the normalised input (dtype). */
static mb_ws_slot ws_a, ws_nx;

template <typename T, int VEC, typename IDX>
static int fallback_launch(cudaStream_t stream, const int64_t *axis, const void *const *in, void *const *out)
{
	static int per_sm;
	static mb_ws_slot tickets_slot;
	const int64_t dim = axis[AX_D], len = axis[AX_L], n = axis[AX_B] * dim * len;
	const IDX nvec = (IDX)(n / VEC), row_vecs = (IDX)(len / VEC);
	const unsigned blocks = mb_flat_blocks(n / VEC);
	void *a = NULL, *nx = NULL;
	unsigned long long *tickets = NULL;
	unsigned scan_blocks = 0;
	cudaError_t ce;
	int rc;

	if (blocks == 0 || dim > INT32_MAX)
		return (int)cudaErrorInvalidValue;
	if ((rc = mb_ws_reserve(&ws_a, (size_t)n * sizeof(float), &a)) != 0 ||
		(rc = mb_ws_reserve(&ws_nx, (size_t)n * sizeof(T), &nx)) != 0)
		return rc;
	if ((rc = scan_setup(mb_recurrent_scan_fb_scan_kernel<T, VEC>, axis[AX_B] * dim, &per_sm, &tickets_slot, stream,
		     &scan_blocks, &tickets)) != 0)
		return rc;

	mb_recurrent_scan_fb_gate_kernel<T, VEC, IDX><<<blocks, MB_FLAT_THREADS, 0, stream>>>((const T *)in[IN_X],
		(const T *)in[IN_WA], (const T *)in[IN_BA], (const T *)in[IN_WI], (const T *)in[IN_BI],
		(const T *)in[IN_LAMBDA], (float *)a, (T *)nx, nvec, row_vecs, (IDX)dim);
	if ((ce = cudaGetLastError()) != cudaSuccess)
		return (int)ce;
	stored_source<T, VEC> src;
	src.a = (const float *)a;
	src.u = (const T *)nx;
	mb_recurrent_scan_fb_scan_kernel<T, VEC><<<scan_blocks, SCAN_THREADS, 0, stream>>>(src, (T *)out[OUT_Y],
		axis[AX_B], dim, len, tickets);
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

/* Two launches: the gates, decay and normalised input in one elementwise
 * kernel (a in fp32, the normalised input in the dtype through memory),
 * then the scan. */
extern "C" MB_DECLARE_LAUNCH(mb_recurrent_scan_fallback_launch)
{
	return MB_DISPATCH_DTYPE(dtype, fallback_dispatch, (cudaStream_t)stream, axis, in, out);
}
#endif
