/* A small SIMT emulator: enough of a GPU to run the device code of
 * src/kernels/ssm_scan.cu's fused kernels on the CPU, so that their index
 * math, buffer rotation, barriers and state passing between CTAs are
 * tested here, where no GPU is (tests/unit/test_ssm_scan_emu.cpp).
 *
 * What it emulates, and how far:
 *  - threads: one ucontext fiber per GPU thread, every CTA of the grid at
 *    once, run cooperatively. A fiber gives up the CPU only at a warp
 *    collective, a barrier or __nanosleep, so the plain loads and stores
 *    between those points are atomic. Each round resumes the fibers in a
 *    shuffled (seeded) order, so a read of shared memory that misses a
 *    barrier sees other data under another seed.
 *  - warp collectives (ldmatrix, mma.sync, shuffles): every lane of a warp
 *    must reach the same one; the last to arrive computes all 32 results.
 *    Lanes that diverge around a collective hang, and a round in which no
 *    fiber arrives anywhere or finishes is reported as a deadlock.
 *  - ldmatrix .x4 (plain and .trans) and mma.m16n8k16 with fp16 operands
 *    and fp32 accumulators, by the PTX ISA's fragment layouts; ldmatrix
 *    addresses must be 16-byte aligned rows inside the CTA's shared
 *    memory. A product is exact and a sum is taken in double, then rounded
 *    to fp32 (the hardware's order differs; tolerances cover both).
 *  - warpgroup MMA (wgmma.mma_async m64nNk16, f16 in, f32 accumulate; the
 *    fused variant's sm_90a kernel): all 128 threads of the warpgroup must issue the
 *    same ops in the same commit groups with the same descriptors. A
 *    comes from shared memory through its descriptor (K-major) or from
 *    the threads' registers (the PTX ISA's A fragment: warp q's rows 16 q
 *    .. 16 q + 15 as mma.sync's m16n8k16 A), B through its descriptor
 *    (K-major or MN-major), each descriptor read the way
 *    tests/unit/wgmma_emu.h says the tensor cores read it; accumulators by
 *    the ISA's m64nN map. It is asynchronous as on the GPU: issued by
 *    each thread alone (A registers and accumulators taken then), computed
 *    when the first wait_group that covers it runs once every thread has
 *    issued it (shared memory read then), its results written into a
 *    thread's accumulators by that thread's wait: reading accumulators
 *    before their wait, or overwriting an operand between issue and wait,
 *    shows. Ops are kept to the launch's end. The fences do nothing.
 *    stmatrix .x4 is the inverse of ldmatrix. Shared addresses (smem_u32)
 *    are offsets from the CTA's shared memory.
 *  - barriers: __syncthreads and bar.sync with an id and a thread count.
 *  - shared memory: filled with 0xFF bytes (fp16 NaN) at launch, so that a
 *    read before any write shows; global memory is host memory; atomics are
 *    plain read-modify-writes (no fiber is preempted); fences do nothing.
 * Not emulated: timing, the memory model beyond sequential order, and
 * anything the kernel does not use. C++17, one translation unit. */
#ifndef MB_TESTS_SSM_SCAN_EMU_H
#define MB_TESTS_SSM_SCAN_EMU_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include "wgmma_emu.h"

#include <algorithm>
#include <functional>
#include <random>
#include <vector>

#define __launch_bounds__(...)

namespace mb_emu {

enum {
	WARP = 32,
	MAX_WARPS = 32,
	MAX_BARRIERS = 16,
	STACK_BYTES = 256 << 10,
	IN_WORDS = 12,
	OUT_WORDS = 4,
};

enum kind { K_NONE, K_LDSM, K_LDSM_T, K_MMA, K_SHFL, K_STSM };

enum {
	WG_THREADS = 128, /* one warpgroup */
	WG_M = 64,
	WG_K = 16,
	WG_N_MAX = 128,
	WG_ACC_MAX = WG_M * WG_N_MAX / WG_THREADS,
};

/* One wgmma of the warpgroup: what each thread issued (its accumulators'
 * address and values then, its A registers, the descriptors), and the
 * result once computed. */
struct wg_op {
	int kind = 0, group = 0, issued = 0;
	bool computed = false;
	float *d[WG_THREADS];
	float d_in[WG_THREADS][WG_ACC_MAX], d_out[WG_THREADS][WG_ACC_MAX];
	int chain[WG_THREADS]; /* the op whose result is this one's input, or -1 */
	uint32_t a[WG_THREADS][4];
	uint64_t da[WG_THREADS], db[WG_THREADS];
	int scale_d[WG_THREADS];
};

/* The warpgroup's ops in issue order, and each thread's progress: ops
 * issued, groups committed, ops whose results it has taken. */
struct wg_state {
	std::vector<wg_op *> ops;
	int issued[WG_THREADS] = {0}, committed[WG_THREADS] = {0}, taken[WG_THREADS] = {0};
};

struct warp_slot {
	int kind = K_NONE, arrived = 0;
	unsigned gen = 0;
	uint32_t in[WARP][IN_WORDS];
	const void *addr[WARP];
	uint32_t out[WARP][OUT_WORDS];
};

struct cta_state {
	unsigned char *smem = nullptr;
	size_t smem_bytes = 0;
	int bar_arrived[MAX_BARRIERS] = {0};
	int bar_count[MAX_BARRIERS] = {0};
	unsigned bar_gen[MAX_BARRIERS] = {0};
	warp_slot warps[MAX_WARPS];
	wg_state wg;
};

struct fiber {
	ucontext_t ctx;
	void *stack = nullptr;
	uint3 tid, bid;
	int cta = 0;
	bool done = false;
};

struct machine {
	ucontext_t sched;
	std::vector<fiber> fibers;
	std::vector<cta_state> ctas;
	fiber *cur = nullptr;
	dim3 grid, block;
	unsigned long long progress = 0;
	std::function<void()> body;
	const char *failure = nullptr;
};

inline machine *&the()
{
	static machine *m;
	return m;
}

[[noreturn]] inline void die(const char *what)
{
	fprintf(stderr, "ssm_scan_emu: %s (block %u, thread %u)\n", what, the()->cur ? the()->cur->bid.x : 0u,
		the()->cur ? the()->cur->tid.x : 0u);
	abort();
}

inline void yield()
{
	machine *m = the();
	swapcontext(&m->cur->ctx, &m->sched);
}

inline cta_state &my_cta()
{
	return the()->ctas[the()->cur->cta];
}

inline unsigned my_lane()
{
	return the()->cur->tid.x % WARP;
}

inline warp_slot &my_warp()
{
	unsigned w = the()->cur->tid.x / WARP;
	if (w >= MAX_WARPS)
		die("more warps than the emulator holds");
	return my_cta().warps[w];
}

/* Deposit this lane's inputs, wait for the warp, take this lane's outputs;
 * the last lane to arrive runs `compute` over the whole slot. */
template <typename F>
inline void collective(int kind, const uint32_t *in, int n_in, const void *addr, uint32_t *out, int n_out, F compute)
{
	warp_slot &w = my_warp();
	const unsigned lane = my_lane();

	if (w.arrived == 0)
		w.kind = kind;
	else if (w.kind != kind)
		die("lanes of a warp reached different collectives");
	for (int i = 0; i < n_in; i++)
		w.in[lane][i] = in[i];
	w.addr[lane] = addr;
	const unsigned gen = w.gen;
	the()->progress++;
	if (++w.arrived == WARP) {
		compute(w);
		w.arrived = 0;
		w.gen++;
	} else {
		while (w.gen == gen)
			yield();
	}
	for (int i = 0; i < n_out; i++)
		out[i] = w.out[lane][i];
}

inline void barrier(int id, int count)
{
	cta_state &c = my_cta();

	if (id < 0 || id >= MAX_BARRIERS)
		die("barrier id out of range");
	if (c.bar_arrived[id] == 0)
		c.bar_count[id] = count;
	else if (c.bar_count[id] != count)
		die("threads reached one barrier with different counts");
	const unsigned gen = c.bar_gen[id];
	the()->progress++;
	if (++c.bar_arrived[id] == count) {
		c.bar_arrived[id] = 0;
		c.bar_gen[id]++;
	} else {
		while (c.bar_gen[id] == gen)
			yield();
	}
}

inline float half_bits_f32(uint16_t u)
{
	__half_raw r;
	r.x = u;
	return __half2float(__half(r));
}

inline void check_row(const void *p)
{
	const cta_state &c = my_cta();
	const unsigned char *b = (const unsigned char *)p;
	if (b < c.smem || b + 16 > c.smem + c.smem_bytes)
		die("ldmatrix row outside shared memory");
	if ((uintptr_t)b % 16 != 0)
		die("ldmatrix row not 16-byte aligned");
}

/* ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16: lane 8 i + r gives row
 * r of matrix i; lane l receives, of each matrix, row l / 4 at columns
 * 2 (l % 4) and 2 (l % 4) + 1 (plain) or those of the transpose. */
inline void ldsm(uint32_t (&r)[4], const void *p, bool trans)
{
	check_row(p);
	collective(trans ? K_LDSM_T : K_LDSM, nullptr, 0, p, r, 4, [trans](warp_slot &w) {
		for (int l = 0; l < WARP; l++) {
			const int row = l / 4, col = 2 * (l % 4);
			for (int i = 0; i < 4; i++) {
				uint16_t e0, e1;
				if (!trans) {
					const uint16_t *rp = (const uint16_t *)w.addr[8 * i + row];
					e0 = rp[col];
					e1 = rp[col + 1];
				} else {
					e0 = ((const uint16_t *)w.addr[8 * i + col])[row];
					e1 = ((const uint16_t *)w.addr[8 * i + col + 1])[row];
				}
				w.out[l][i] = (uint32_t)e0 | (uint32_t)e1 << 16;
			}
		}
	});
}

/* mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32, d += a b: with
 * g = lane / 4, q = lane % 4, register k of a holds A at row g + 8 (k % 2),
 * columns 2 q + 8 (k / 2) and the next; b0 and b1 hold B at rows 2 q and
 * 2 q + 8 (and the next), column g; d[r] is D at row g + 8 (r / 2),
 * column 2 q + r % 2. */
inline void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
	uint32_t in[10], out[4];
	for (int i = 0; i < 4; i++) {
		in[i] = a[i];
		memcpy(&in[6 + i], &d[i], 4);
	}
	in[4] = b0;
	in[5] = b1;
	collective(K_MMA, in, 10, nullptr, out, 4, [](warp_slot &w) {
		float A[16][16], B[16][8], C[16][8];
		for (int l = 0; l < WARP; l++) {
			const int g = l / 4, q = l % 4;
			for (int k = 0; k < 4; k++) {
				const int row = g + 8 * (k % 2), col = 2 * q + 8 * (k / 2);
				A[row][col] = half_bits_f32((uint16_t)(w.in[l][k] & 0xffff));
				A[row][col + 1] = half_bits_f32((uint16_t)(w.in[l][k] >> 16));
			}
			for (int k = 0; k < 2; k++) {
				const int row = 2 * q + 8 * k;
				B[row][g] = half_bits_f32((uint16_t)(w.in[l][4 + k] & 0xffff));
				B[row + 1][g] = half_bits_f32((uint16_t)(w.in[l][4 + k] >> 16));
			}
			for (int r = 0; r < 4; r++)
				memcpy(&C[g + 8 * (r / 2)][2 * q + r % 2], &w.in[l][6 + r], 4);
		}
		for (int l = 0; l < WARP; l++) {
			const int g = l / 4, q = l % 4;
			for (int r = 0; r < 4; r++) {
				const int row = g + 8 * (r / 2), col = 2 * q + r % 2;
				double s = C[row][col];
				for (int k = 0; k < 16; k++)
					s += (double)A[row][k] * (double)B[k][col];
				const float f = (float)s;
				memcpy(&w.out[l][r], &f, 4);
			}
		}
	});
	for (int i = 0; i < 4; i++)
		memcpy(&d[i], &out[i], 4);
}

/* stmatrix.sync.aligned.m8n8.x4.shared.b16: lane 8 i + r gives the
 * address of row r of matrix i; lane l's register i holds that matrix's
 * row l / 4 at columns 2 (l % 4) and the next. */
inline void stsm(const void *p, const uint32_t (&r)[4])
{
	check_row(p);
	collective(K_STSM, r, 4, p, nullptr, 0, [](warp_slot &w) {
		for (int l = 0; l < WARP; l++)
			for (int i = 0; i < 4; i++) {
				uint16_t *row = (uint16_t *)w.addr[8 * i + l / 4];
				row[2 * (l % 4)] = (uint16_t)(w.in[l][i] & 0xffff);
				row[2 * (l % 4) + 1] = (uint16_t)(w.in[l][i] >> 16);
			}
	});
}

/* The fp16 element at shared offset `addr` of the CTA. */
inline float smem_half(const cta_state &c, uint32_t addr)
{
	if ((size_t)addr + 2 > c.smem_bytes || addr % 2 != 0)
		die("wgmma operand outside shared memory");
	uint16_t u;
	memcpy(&u, c.smem + addr, 2);
	return half_bits_f32(u);
}

/* wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16, issued: d (N / 2
 * registers a thread) = (scale_d ? d : 0) + A B; A from `a` (4 registers
 * a thread) when given, else K-major through da; B MN-major through db
 * when trans_b, else K-major. Asynchronous as on the GPU: the A registers
 * and d's values are taken now, shared memory is read and d written only
 * when a wait_group that covers it runs (so a read of d before its wait,
 * or an operand overwritten between issue and wait, shows). A later op on
 * the same accumulators before that wait chains on this one's result. */
inline void wgmma(float *d, int n, const uint32_t *a, uint64_t da, uint64_t db, int scale_d, bool trans_b)
{
	wg_state &w = my_cta().wg;
	const unsigned t = the()->cur->tid.x;
	const int regs = n / 2, kind = (a ? 1 : 2) + 4 * n + (trans_b ? 4096 : 0);

	if (t >= WG_THREADS)
		die("wgmma outside warpgroup 0");
	if (n % 8 != 0 || n > WG_N_MAX)
		die("wgmma N");
	const int idx = w.issued[t]++;
	if ((int)w.ops.size() <= idx) {
		w.ops.push_back(new wg_op());
		w.ops.back()->kind = kind;
		w.ops.back()->group = w.committed[t];
	}
	wg_op &op = *w.ops[(size_t)idx];
	if (op.kind != kind || op.group != w.committed[t])
		die("threads of a warpgroup issued different wgmma");
	op.d[t] = d;
	memcpy(op.d_in[t], d, (size_t)regs * sizeof(float));
	op.chain[t] = -1;
	for (int j = idx - 1; j >= w.taken[t]; j--)
		if (w.ops[(size_t)j]->d[t] == d) {
			op.chain[t] = j;
			break;
		}
	if (a)
		memcpy(op.a[t], a, sizeof(op.a[t]));
	op.da[t] = da;
	op.db[t] = db;
	op.scale_d[t] = scale_d;
	op.issued++;
	the()->progress++;
}

inline void wgmma_compute(cta_state &c, int idx)
{
	wg_op &op = *c.wg.ops[(size_t)idx];
	const int n = ((op.kind - 1) % 4096) / 4, regs = n / 2;
	const bool rs = op.kind % 4 == 1, trans_b = op.kind >= 4096;
	static double A[WG_M][WG_K], B[WG_K][WG_N_MAX];

	for (int u = 0; u < WG_THREADS; u++)
		if (op.db[u] != op.db[0] || (!rs && op.da[u] != op.da[0]) || (op.scale_d[u] != 0) != (op.scale_d[0] != 0))
			die("threads of a warpgroup gave one wgmma different operands");
	for (int u = 0; rs && u < WG_THREADS; u++) {
		const int q = u / WARP, l = u % WARP;
		for (int r = 0; r < 4; r++)
			for (int h = 0; h < 2; h++)
				A[16 * q + l / 4 + 8 * (r % 2)][2 * (l % 4) + 8 * (r / 2) + h] =
					half_bits_f32((uint16_t)(h ? op.a[u][r] >> 16 : op.a[u][r] & 0xffff));
	}
	for (int m = 0; !rs && m < WG_M; m++)
		for (int k = 0; k < WG_K; k++)
			A[m][k] = smem_half(c, kmajor_address(op.da[0], m, k));
	for (int k = 0; k < WG_K; k++)
		for (int j = 0; j < n; j++)
			B[k][j] = smem_half(c, trans_b ? mnmajor_address(op.db[0], k, j) : kmajor_address(op.db[0], j, k));
	for (int u = 0; u < WG_THREADS; u++) {
		const int q = u / WARP, l = u % WARP;
		const float *in = op.chain[u] >= 0 ? c.wg.ops[(size_t)op.chain[u]]->d_out[u] : op.d_in[u];
		for (int i = 0; i < regs; i++) {
			const int row = 16 * q + l / 4 + 8 * ((i / 2) % 2), col = 8 * (i / 4) + 2 * (l % 4) + i % 2;
			double sum = op.scale_d[0] ? (double)in[i] : 0.0;
			for (int k = 0; k < WG_K; k++)
				sum += A[row][k] * B[k][col];
			op.d_out[u][i] = (float)sum;
		}
	}
	op.computed = true;
}

inline void wgmma_commit()
{
	wg_state &w = my_cta().wg;
	w.committed[the()->cur->tid.x]++;
}

/* wgmma.wait_group N: this thread's ops of all but its N newest groups
 * complete, in order (each computed once every thread has issued it),
 * their results into its accumulators. */
inline void wgmma_wait(int pending)
{
	cta_state &c = my_cta();
	wg_state &w = c.wg;
	const unsigned t = the()->cur->tid.x;

	while (w.taken[t] < w.issued[t] && w.ops[(size_t)w.taken[t]]->group < w.committed[t] - pending) {
		const int idx = w.taken[t];
		wg_op &op = *w.ops[(size_t)idx];
		the()->progress++;
		while (op.issued < WG_THREADS)
			yield();
		if (!op.computed)
			wgmma_compute(c, idx);
		memcpy(op.d[t], op.d_out[t], (size_t)(((op.kind - 1) % 4096) / 4 / 2) * sizeof(float));
		w.taken[t]++;
	}
}

enum shfl_mode { SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_XOR };

template <typename T> inline T shfl(unsigned mask, T v, int arg, int mode)
{
	static_assert(sizeof(T) <= 8, "a shuffled value fits two words");
	if (mask != 0xffffffffu)
		die("a shuffle with a partial mask");
	uint32_t in[3] = {0, 0, (uint32_t)arg}, out[2];
	memcpy(in, &v, sizeof(T));
	collective(K_SHFL, in, 3, nullptr, out, 2, [mode](warp_slot &w) {
		for (int l = 0; l < WARP; l++) {
			const int arg = (int)w.in[l][2];
			int src = l;
			switch (mode) {
			case SHFL_IDX: src = arg & (WARP - 1); break;
			case SHFL_UP: src = l - arg >= 0 ? l - arg : l; break;
			case SHFL_DOWN: src = l + arg < WARP ? l + arg : l; break;
			default: src = l ^ arg; break;
			}
			w.out[l][0] = w.in[src][0];
			w.out[l][1] = w.in[src][1];
		}
	});
	T r;
	memcpy(&r, out, sizeof(T));
	return r;
}

/* The grid, every CTA's threads at once; `body` is the kernel call. Returns
 * 0, or -1 after a deadlock (which it prints). `seed` orders the fibers. */
inline int launch(dim3 grid, dim3 block, size_t smem_bytes, std::function<void()> body, uint64_t seed)
{
	machine m;
	const unsigned n_ctas = grid.x * grid.y * grid.z, n_threads = block.x * block.y * block.z;
	std::mt19937_64 rng(seed);
	volatile int rc = 0; /* set after swapcontext returns */

	if (grid.y != 1 || grid.z != 1 || block.y != 1 || block.z != 1)
		die("only one-dimensional launches");
	the() = &m;
	m.grid = grid;
	m.block = block;
	m.body = std::move(body);
	m.ctas.resize(n_ctas);
	for (cta_state &c : m.ctas) {
		c.smem = (unsigned char *)aligned_alloc(128, (smem_bytes + 127) / 128 * 128 + 128);
		c.smem_bytes = smem_bytes;
		memset(c.smem, 0xff, smem_bytes);
	}
	m.fibers.resize((size_t)n_ctas * n_threads);
	for (size_t i = 0; i < m.fibers.size(); i++) {
		fiber &f = m.fibers[i];
		f.cta = (int)(i / n_threads);
		f.bid = make_uint3((unsigned)f.cta, 0, 0);
		f.tid = make_uint3((unsigned)(i % n_threads), 0, 0);
		f.stack = mmap(nullptr, STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			-1, 0);
		if (f.stack == MAP_FAILED)
			die("no memory for a fiber's stack");
		getcontext(&f.ctx);
		f.ctx.uc_stack.ss_sp = f.stack;
		f.ctx.uc_stack.ss_size = STACK_BYTES;
		f.ctx.uc_link = &m.sched;
		makecontext(&f.ctx, (void (*)())+[] {
			the()->body();
			the()->cur->done = true;
			the()->progress++;
		}, 0);
	}
	std::vector<size_t> live(m.fibers.size());
	for (size_t i = 0; i < live.size(); i++)
		live[i] = i;
	while (!live.empty()) {
		const unsigned long long before = m.progress;
		std::shuffle(live.begin(), live.end(), rng);
		for (size_t i : live) {
			m.cur = &m.fibers[i];
			swapcontext(&m.sched, &m.cur->ctx);
		}
		m.cur = nullptr;
		live.erase(std::remove_if(live.begin(), live.end(), [&](size_t i) { return m.fibers[i].done; }),
			live.end());
		if (!live.empty() && m.progress == before) {
			fprintf(stderr, "ssm_scan_emu: deadlock: %zu threads wait and none can go on (first: block %u, "
					"thread %u)\n", live.size(), m.fibers[live[0]].bid.x, m.fibers[live[0]].tid.x);
			rc = -1;
			break;
		}
	}
	for (fiber &f : m.fibers)
		munmap(f.stack, STACK_BYTES);
	for (cta_state &c : m.ctas) {
		free(c.smem);
		for (wg_op *op : c.wg.ops)
			delete op;
	}
	the() = nullptr;
	return rc;
}

/* A test's storage of a dtype and its fp32 value (fp32 and bf16). */
template <typename T> T store(float f);
template <> inline float store<float>(float f)
{
	return f;
}
template <> inline __nv_bfloat16 store<__nv_bfloat16>(float f)
{
	return __float2bfloat16_rn(f);
}
template <typename T> float value(T v);
template <> inline float value<float>(float v)
{
	return v;
}
template <> inline float value<__nv_bfloat16>(__nv_bfloat16 v)
{
	return __bfloat162float(v);
}

} /* namespace mb_emu */

/* ---- what the kernel's source calls ---- */

#define threadIdx (mb_emu::the()->cur->tid)
#define blockIdx (mb_emu::the()->cur->bid)
#define gridDim (mb_emu::the()->grid)
#define blockDim (mb_emu::the()->block)

inline void __syncthreads()
{
	mb_emu::barrier(0, (int)(blockDim.x));
}

inline void __threadfence() {}

inline void __nanosleep(unsigned)
{
	mb_emu::yield();
}

inline float __uint_as_float(unsigned u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

inline float __expf(float x)
{
	return expf(x);
}

inline float ex2_approx(float x)
{
	return exp2f(x);
}

inline float lg2_approx(float x)
{
	return log2f(x);
}

inline int min(int a, int b)
{
	return a < b ? a : b;
}

inline int max(int a, int b)
{
	return a > b ? a : b;
}

/* unsigned and unsigned long long, as the device's */
template <typename T> inline T atomicAdd(T *p, T v)
{
	const T old = *p;
	*p = old + v;
	return old;
}

inline unsigned atomicExch(unsigned *p, unsigned v)
{
	const unsigned old = *p;
	*p = v;
	return old;
}

template <typename T> inline T __ldcg(const T *p)
{
	return *p;
}

template <typename T> inline T __shfl_sync(unsigned mask, T v, int src)
{
	return mb_emu::shfl(mask, v, src, mb_emu::SHFL_IDX);
}

template <typename T> inline T __shfl_up_sync(unsigned mask, T v, unsigned d)
{
	return mb_emu::shfl(mask, v, (int)d, mb_emu::SHFL_UP);
}

template <typename T> inline T __shfl_down_sync(unsigned mask, T v, unsigned d)
{
	return mb_emu::shfl(mask, v, (int)d, mb_emu::SHFL_DOWN);
}

/* The primitives src/kernels/ssm_scan.cu defines with inline PTX on the
 * GPU, here on the emulator (the .cu leaves its own out under MB_SSM_EMU). */
inline void ldsm_x4(uint32_t (&r)[4], const __half *p)
{
	mb_emu::ldsm(r, p, false);
}

inline void ldsm_x4_trans(uint32_t (&r)[4], const __half *p)
{
	mb_emu::ldsm(r, p, true);
}

inline void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
	mb_emu::mma(d, a, b0, b1);
}

inline unsigned char *dyn_smem()
{
	return mb_emu::my_cta().smem;
}

/* The warpgroup kernel's primitives (ssm_scan_sm90.cuh). */
inline uint32_t smem_u32(const void *p)
{
	return (uint32_t)((const unsigned char *)p - mb_emu::my_cta().smem);
}

inline void gg_ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr)
{
	mb_emu::ldsm(r, mb_emu::my_cta().smem + addr, true);
}

inline void sw_stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3)
{
	const uint32_t r[4] = {r0, r1, r2, r3};
	mb_emu::stsm(mb_emu::my_cta().smem + addr, r);
}

inline void sw_mma_ss_n64(float (&d)[32], uint64_t da, uint64_t db, int scale_d)
{
	mb_emu::wgmma(d, 64, nullptr, da, db, scale_d, false);
}

inline void sw_mma_rs_n64(float (&d)[32], const uint32_t (&a)[4], uint64_t db)
{
	mb_emu::wgmma(d, 64, a, 0, db, 1, true);
}

inline void sw_mma_rs_n128(float (&d)[64], const uint32_t (&a)[4], uint64_t db)
{
	mb_emu::wgmma(d, 128, a, 0, db, 1, true);
}

template <int R> inline void sw_fence_regs(float (&)[R]) {}
template <int K> inline void sw_fence_regs(uint32_t (&)[K][4]) {}
inline void gw_wgmma_fence() {}
inline void gw_wgmma_commit()
{
	mb_emu::wgmma_commit();
}

template <int N> inline void gw_wgmma_wait()
{
	mb_emu::wgmma_wait(N);
}
inline void gw_fence_proxy_async() {}

inline unsigned ld_acquire_gpu(const unsigned *p)
{
	return *(const volatile unsigned *)p;
}

inline void st_release_gpu(unsigned *p, unsigned v)
{
	*(volatile unsigned *)p = v;
}

#endif
