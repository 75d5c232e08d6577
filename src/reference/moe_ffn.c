/* Mixture-of-experts FFN, two rows: moe_ffn (squared-ReLU experts) and
 * moe_ffn_swiglu (SwiGLU experts), with token-choice top-K routing and an
 * uneven (biased) router:
 *   score[t, e] = logit[t, e] + bias(e)          (fp32, one add)
 *   chosen(t)   = the K experts of largest score, ties to the lower index
 *   w[t, k]     = softmax over the K chosen scores (in rank order k)
 *   moe_ffn:        y[t] = sum_k w[t, k] * relu(x[t] W1_e)^2 W2_e
 *   moe_ffn_swiglu: y[t] = sum_k w[t, k] * (silu(x[t] W1g_e) * (x[t] W1u_e)) W2_e
 * with e = chosen(t)[k] and silu(g) = g / (1 + exp(-g)), on x [T, H],
 * logits [T, E], W1 [E*H, F] (moe_ffn; expert e's [H, F] are rows e*H ..
 * e*H+H-1) or [E*H, 2F] (moe_ffn_swiglu), W2 [E*F, H] (expert e's [F, H]);
 * out y [T, H]. The routing, its logits and weights are the same in both.
 *
 * moe_ffn_swiglu's W1 layout: expert e's [H, 2F] alternates MOE_GLU_BLOCK
 * (8) gate columns and the 8 up columns of the same activation columns:
 * activation column f takes its gate W1g from column (f / 8) * 16 + f % 8
 * and its up W1u from 8 columns further on. 8 columns are one n8 fragment
 * of the fused kernel's grouped GEMM (GG_GLU_BLOCK, src/kernels/
 * grouped_gemm.cuh), so its epilogue finds a gate and its up in one
 * thread's registers; the reference and every variant read this layout.
 *
 * The score is part of the row's definition in fp32 (logit + bias rounded
 * once) for every variant, the fp64 oracle included: routing is a discrete
 * choice, and with one rounding and the index tie-break it is the same bit
 * for bit everywhere (bf16 logits tie often). Everything after the choice is
 * REAL arithmetic. The reference does not round the intermediate
 * activation (relu(x W1)^2, or silu(gate) * up); the GPU variants store
 * it in the case dtype (bf16 or fp16) and the tolerances below pay for
 * that.
 *
 * Worked by hand (H = 1, F = 1, E = 2, K = 2: a shape check_shape refuses,
 * the math only; bias(0) = 0.921875, bias(1)
 * = 0): x = 2, logits (0, 0), W1 = (1, -1), W2 = (3, 5). Scores 0.921875
 * and 0: expert 0 first, weights 1/(1 + e^-0.921875) = 0.7154 and 0.2846.
 * Expert 0: relu(2)^2 * 3 = 12; expert 1: relu(-2)^2 * 5 = 0; y = 8.585.
 * SwiGLU, the same x, logits and weights, F = 16 (2F = 32 columns), W1 and
 * W2 zero but for: expert 0 gate/up (column 0, column 8) = (1, 1.5), so
 * g = 2, u = 3, a_0 = 3 silu(2) = 5.28478; the up of f = 8 (column 24) = 5
 * with its gate (column 16) 0, so a_8 = silu(0) * 10 = 0; gate/up of f = 9
 * (columns 17, 25) = (-1, 0.5), a_9 = silu(-2) = -0.238406; W2_0 rows
 * 0, 8, 9 = 1, 7, 4: o_0 = 5.28478 - 0.953624 = 4.33116. Expert 1: gate/up
 * of f = 0 = (ln 3 / 2, 1), g = ln 3, u = 2, a_0 = 1.5 ln 3; W2_1 row 0 = 2:
 * o_1 = 3 ln 3 = 3.29584. y = 0.71542 * 4.33116 + 0.28458 * 3.29584
 * = 4.03653 (gate and up read as the two halves of the row: 143.1).
 *
 * The reference computes only the sampled tokens, grouped by expert so that
 * a block of tokens shares each pass over the expert's weights, on all the
 * host's cores (threads take (expert, token block) items from a shared
 * counter); each item writes its weighted rows to a per-(token, k) slot,
 * and the slots are summed per token in k order afterwards, so the result
 * does not depend on the thread count or schedule. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference/row_common.h"
#include "reference/parallel.h"
#include "reference/reference.h"
#include "reference/traffic.h"

/* The GPU variants the descriptors name, defined in src/kernels/moe_ffn.cu:
 * in x [T,H], logits [T,E], W1 [E*H,F] (moe_ffn) or [E*H,2F]
 * (moe_ffn_swiglu), W2 [E*F,H]; out y [T,H]. */
MB_DECLARE_LAUNCH(mb_moe_ffn_fused_launch);
MB_DECLARE_LAUNCH(mb_moe_ffn_standard_launch);
MB_DECLARE_LAUNCH(mb_moe_ffn_cublas_grouped_launch);
MB_DECLARE_LAUNCH(mb_moe_ffn_swiglu_fused_launch);
MB_DECLARE_LAUNCH(mb_moe_ffn_swiglu_standard_launch);
MB_DECLARE_LAUNCH(mb_moe_ffn_swiglu_cublas_grouped_launch);

enum { AX_T, AX_H, AX_E, AX_K, AX_F };
enum { IN_X, IN_LOGITS, IN_W1, IN_W2 };
enum { OUT_Y };

/* The router bias: every MOE_BIAS_PERIOD-th expert (e % 8 == 0) gets
 * MOE_BIAS_HEAVY (59/64, exact in every dtype), the rest 0. With unit-
 * variance logits, E = 64 and K = 6, a biased expert is then chosen with
 * probability 0.281 (the Gaussian integral; 3.00x the mean load K/E =
 * 0.09375) and an unbiased one with 0.0670 (0.714x); a Monte Carlo of the
 * harness's Irwin-Hall logits rounded to bf16 gives 3.01x and 0.712x. At
 * T = 16384 that is 4610 token rows for each of the 8 heavy experts and
 * 1097 for each of the 56 others (mean 1536). At the smoke shape (E = 8,
 * K = 2) expert 0 carries 2.22x the mean. src/kernels/moe_ffn.cu has the
 * same two constants. */
#define MOE_BIAS_PERIOD 8
#define MOE_BIAS_HEAVY 0.921875f

/* check_shape's limits: K within the GPU router's register list; H and F
 * whole 128-column tiles of the grouped GEMM (and so whole 16-byte
 * vectors); every (token, k) pair an int32 index. */
#define MOE_K_MAX 16
#define MOE_E_MAX 512
#define MOE_TILE_COLS 128

static float moe_bias(int64_t e)
{
	return e % MOE_BIAS_PERIOD == 0 ? MOE_BIAS_HEAVY : 0.0f;
}

/* The expert activation, which tells the two rows apart. */
typedef enum moe_act { MOE_RELU2, MOE_SWIGLU } moe_act;

/* moe_ffn_swiglu's gate/up interleave (see the top of this file;
 * src/kernels/grouped_gemm.cuh has the same GG_GLU_BLOCK). */
#define MOE_GLU_BLOCK 8

/* W1's columns per expert row: F, or 2F for SwiGLU's gates and ups. */
static int64_t moe_w1_cols(moe_act act, int64_t ffn)
{
	return act == MOE_SWIGLU ? 2 * ffn : ffn;
}

/* The W1 column of activation column f's gate; its up is MOE_GLU_BLOCK
 * further on. */
static int64_t moe_glu_gate_col(int64_t f)
{
	return f / MOE_GLU_BLOCK * 2 * MOE_GLU_BLOCK + f % MOE_GLU_BLOCK;
}

/* The K chosen experts of one token in rank order, and their fp32 scores:
 * K passes, each taking the largest score not yet taken, the lower index
 * on ties (a strict > while scanning upwards). */
static void moe_route(const float *logit, int64_t experts, int64_t k_top, int32_t *chosen, float *score)
{
	for (int64_t k = 0; k < k_top; k++) {
		int32_t best = -1;
		float best_score = 0.0f;
		for (int64_t e = 0; e < experts; e++) {
			bool taken = false;
			for (int64_t j = 0; j < k; j++)
				taken = taken || chosen[j] == (int32_t)e;
			float s = logit[e] + moe_bias(e);
			if (!taken && (best < 0 || s > best_score)) {
				best = (int32_t)e;
				best_score = s;
			}
		}
		chosen[k] = best;
		score[k] = best_score;
	}
}

/* Tokens per work item: each item streams its expert's weights once for
 * this many tokens. Columns per pass of the inner loops: a 128-column strip
 * of the item's rows stays in L1 while the weight rows go by. */
#define MOE_REF_BLOCK 16
#define MOE_REF_STRIP 128
/* Samples per round: the per-(token, k) slots of a round hold at most this
 * many REALs (about 128 MiB as double). */
#define MOE_REF_ROUND_ELEMS ((int64_t)1 << 24)
/* The share of the host's cores the items run on: all of them. */
#define MOE_REF_CORES_SHARE 1.0

/* One round's plan, shared by the threads: `entries` are (sample, k) pairs
 * sorted by expert, `items` cut them into blocks of one expert. */
typedef struct moe_ref_plan {
	const int64_t *axis;
	moe_act act;
	const float *x, *w1, *w2;
	const int64_t *token;   /* token of each sample of the round */
	const int32_t *expert;  /* [n * K] chosen expert of (sample, k) */
	const void *weight;     /* [n * K] REAL routing weight */
	const int32_t *entries; /* (sample * K + k), sorted by expert */
	const int64_t *item_start, *item_len;
	int64_t n_items;
	void *slot;             /* [n * K, H] REAL weighted expert rows */
	void (*item_fn)(struct moe_ref_plan *p, int64_t item, void *scratch);
} moe_ref_plan;

/* y[0 .. n) += a * x[0 .. n) in REAL, in index order (each element its
 * own chain). A strip's fixed count and restrict parameters let -O2
 * vectorize it (inline restrict pointers did not: perf showed the scalar
 * loop). */
#define DEFINE_AXPY(fn, REAL) \
	static void fn(REAL *restrict y, const float *restrict x, REAL a, int64_t n) \
	{ \
		if (n == MOE_REF_STRIP) { \
			for (int j = 0; j < MOE_REF_STRIP; j++) \
				y[j] += a * (REAL)x[j]; \
			return; \
		} \
		for (int64_t j = 0; j < n; j++) \
			y[j] += a * (REAL)x[j]; \
	}

DEFINE_AXPY(axpy_f32, float)
DEFINE_AXPY(axpy_f64, double)

/* One item: up to MOE_REF_BLOCK (sample, k) entries of expert e.
 * h = x W1_e (C = F or 2F columns), a = relu(h)^2 (in place) or
 * silu(gate) * up (into a buffer of its own), o = a W2_e, slot = w * o,
 * each product accumulated in REAL over H, then over F, in index order. */
#define DEFINE_MOE_ITEM(fn, REAL, AXPY, EXP) \
	static void fn(moe_ref_plan *p, int64_t item, void *scratch) \
	{ \
		const int64_t hidden = p->axis[AX_H], ffn = p->axis[AX_F], k_top = p->axis[AX_K]; \
		const int64_t cols = moe_w1_cols(p->act, ffn); \
		const int32_t *ent = p->entries + p->item_start[item]; \
		const int64_t nb = p->item_len[item], e = p->expert[ent[0]]; \
		const REAL *weight = p->weight; \
		REAL *h = scratch, *a = p->act == MOE_SWIGLU ? h + MOE_REF_BLOCK * cols : h; \
		REAL *o = a + MOE_REF_BLOCK * ffn, *slot = p->slot; \
		const float *xrow[MOE_REF_BLOCK]; \
		for (int64_t b = 0; b < nb; b++) \
			xrow[b] = p->x + p->token[ent[b] / k_top] * hidden; \
		for (int64_t f0 = 0; f0 < cols; f0 += MOE_REF_STRIP) { \
			const int64_t len = cols - f0 < MOE_REF_STRIP ? cols - f0 : MOE_REF_STRIP; \
			for (int64_t b = 0; b < nb; b++) \
				memset(h + b * cols + f0, 0, (size_t)len * sizeof(REAL)); \
			for (int64_t i = 0; i < hidden; i++) { \
				const float *wr = p->w1 + (e * hidden + i) * cols + f0; \
				for (int64_t b = 0; b < nb; b++) { \
					const REAL xv = (REAL)xrow[b][i]; \
					AXPY(h + b * cols + f0, wr, xv, len); \
				} \
			} \
		} \
		if (p->act == MOE_SWIGLU) { \
			for (int64_t b = 0; b < nb; b++) \
				for (int64_t f = 0; f < ffn; f++) { \
					const REAL g = h[b * cols + moe_glu_gate_col(f)]; \
					const REAL u = h[b * cols + moe_glu_gate_col(f) + MOE_GLU_BLOCK]; \
					a[b * ffn + f] = g / ((REAL)1 + EXP(-g)) * u; \
				} \
		} else { \
			for (int64_t j = 0; j < nb * ffn; j++) \
				h[j] = h[j] > 0 ? h[j] * h[j] : (REAL)0; \
		} \
		for (int64_t j0 = 0; j0 < hidden; j0 += MOE_REF_STRIP) { \
			const int64_t len = hidden - j0 < MOE_REF_STRIP ? hidden - j0 : MOE_REF_STRIP; \
			for (int64_t b = 0; b < nb; b++) \
				memset(o + b * hidden + j0, 0, (size_t)len * sizeof(REAL)); \
			for (int64_t f = 0; f < ffn; f++) { \
				const float *wr = p->w2 + (e * ffn + f) * hidden + j0; \
				for (int64_t b = 0; b < nb; b++) { \
					const REAL av = a[b * ffn + f]; \
					if (av != 0) /* relu's zeros add nothing */ \
						AXPY(o + b * hidden + j0, wr, av, len); \
				} \
			} \
		} \
		for (int64_t b = 0; b < nb; b++) { \
			const REAL wk = weight[ent[b]]; \
			for (int64_t j = 0; j < hidden; j++) \
				slot[ent[b] * hidden + j] = wk * o[b * hidden + j]; \
		} \
	}

DEFINE_MOE_ITEM(moe_item_f32, float, axpy_f32, expf)
DEFINE_MOE_ITEM(moe_item_f64, double, axpy_f64, exp)

/* The item_fn of the plan `arg` for one item, with its thread's scratch. */
static void moe_ref_item(void *arg, int64_t item, void *scratch)
{
	moe_ref_plan *p = arg;

	p->item_fn(p, item, scratch);
}

/* Route the round's samples, sort their (sample, k) entries by expert,
 * cut them into items, run the items and sum each token's K slots in k
 * order. */
#define DEFINE_MOE_FFN(fn, REAL, OUT, EXP, ITEM) \
	static void fn(moe_act act, const int64_t *axis, const float *const *in, OUT *const *out, \
		const int64_t *rows, int64_t n_rows) \
	{ \
		const int64_t hidden = axis[AX_H], experts = axis[AX_E], k_top = axis[AX_K], ffn = axis[AX_F]; \
		const int64_t glu_ffn = act == MOE_SWIGLU ? ffn : 0; /* the SwiGLU activation's own buffer */ \
		int64_t round = MOE_REF_ROUND_ELEMS / (k_top * hidden); \
		if (round < 1) \
			round = 1; \
		if (round > n_rows) \
			round = n_rows; \
		const int64_t cap = round * k_top; \
		int64_t *token = malloc((size_t)round * sizeof(int64_t)); \
		int32_t *expert = malloc((size_t)cap * sizeof(int32_t)); \
		int32_t *entries = malloc((size_t)cap * sizeof(int32_t)); \
		REAL *weight = malloc((size_t)cap * sizeof(REAL)); \
		int64_t *count = calloc((size_t)experts + 1, sizeof(int64_t)); \
		int64_t *item_start = malloc((size_t)(cap + experts) * sizeof(int64_t)); \
		int64_t *item_len = malloc((size_t)(cap + experts) * sizeof(int64_t)); \
		REAL *slot = malloc((size_t)(cap * hidden) * sizeof(REAL)); \
		if (!token || !expert || !entries || !weight || !count || !item_start || !item_len || !slot) \
			abort(); /* the harness sized host memory before calling */ \
		for (int64_t r0 = 0; r0 < n_rows; r0 += round) { \
			const int64_t n = n_rows - r0 < round ? n_rows - r0 : round; \
			moe_ref_plan plan = {.axis = axis, .act = act, .x = in[IN_X], .w1 = in[IN_W1], .w2 = in[IN_W2], \
				.token = token, .expert = expert, .weight = weight, .entries = entries, \
				.item_start = item_start, .item_len = item_len, .slot = slot, .item_fn = ITEM}; \
			memset(count, 0, (size_t)(experts + 1) * sizeof(int64_t)); \
			for (int64_t i = 0; i < n; i++) { \
				float score[MOE_K_MAX]; \
				REAL ex[MOE_K_MAX], sum = 0; \
				token[i] = mb_ref_row(rows, r0 + i); \
				moe_route(in[IN_LOGITS] + token[i] * experts, experts, k_top, expert + i * k_top, score); \
				for (int64_t k = 0; k < k_top; k++) { \
					ex[k] = EXP((REAL)(score[k] - score[0])); \
					sum += ex[k]; \
					count[expert[i * k_top + k] + 1]++; \
				} \
				for (int64_t k = 0; k < k_top; k++) \
					weight[i * k_top + k] = ex[k] / sum; \
			} \
			for (int64_t e = 0; e < experts; e++) \
				count[e + 1] += count[e]; \
			for (int64_t j = 0; j < n * k_top; j++) \
				entries[count[expert[j]]++] = (int32_t)j; \
			/* count[e] is now the end of expert e's entries */ \
			for (int64_t e = 0, start = 0; e < experts; start = count[e], e++) { \
				for (int64_t s = start; s < count[e]; s += MOE_REF_BLOCK) { \
					item_start[plan.n_items] = s; \
					item_len[plan.n_items] = count[e] - s < MOE_REF_BLOCK ? count[e] - s : MOE_REF_BLOCK; \
					plan.n_items++; \
				} \
			} \
			mb_ref_parallel_scratch(plan.n_items, MOE_REF_CORES_SHARE, \
				(size_t)(MOE_REF_BLOCK * (moe_w1_cols(act, ffn) + glu_ffn + hidden)) * sizeof(REAL), \
				moe_ref_item, &plan); \
			for (int64_t i = 0; i < n; i++) { \
				OUT *y = out[OUT_Y] + token[i] * hidden; \
				for (int64_t j = 0; j < hidden; j++) { \
					REAL acc = 0; \
					for (int64_t k = 0; k < k_top; k++) \
						acc += slot[(i * k_top + k) * hidden + j]; \
					y[j] = (OUT)acc; \
				} \
			} \
		} \
		free(token); \
		free(expert); \
		free(entries); \
		free(weight); \
		free(count); \
		free(item_start); \
		free(item_len); \
		free(slot); \
	}

DEFINE_MOE_FFN(moe_ffn_f32, float, float, expf, moe_item_f32)
DEFINE_MOE_FFN(moe_ffn_f64, double, double, exp, moe_item_f64)

/* A row's reference and oracle: the two bodies above at its activation. */
#define DEFINE_MOE_ROW_REFERENCES(row, ACT) \
	void mb_ref_##row(const int64_t *axis, const float *const *in, float *const *out, const int64_t *rows, \
		int64_t n_rows) \
	{ \
		moe_ffn_f32(ACT, axis, in, out, rows, n_rows); \
	} \
	void mb_oracle_##row(const int64_t *axis, const float *const *in, double *const *out, const int64_t *rows, \
		int64_t n_rows) \
	{ \
		moe_ffn_f64(ACT, axis, in, out, rows, n_rows); \
	}

DEFINE_MOE_ROW_REFERENCES(moe_ffn, MOE_RELU2)
DEFINE_MOE_ROW_REFERENCES(moe_ffn_swiglu, MOE_SWIGLU)

/* ---- the moe_ffn and moe_ffn_swiglu catalog rows: shapes, bytes, tolerances, variants ------------------------------------- */

static int moe_check_shape(const int64_t *a, mb_error *err)
{
	if (a[AX_K] > a[AX_E] || a[AX_K] > MOE_K_MAX)
		return mb_error_set(err, MB_EINVAL, NULL, "K (%lld) must be at most E (%lld) and at most %d",
			(long long)a[AX_K], (long long)a[AX_E], MOE_K_MAX);
	if (a[AX_E] > MOE_E_MAX)
		return mb_error_set(err, MB_EINVAL, NULL, "E (%lld) must be at most %d", (long long)a[AX_E], MOE_E_MAX);
	if (a[AX_H] % MOE_TILE_COLS != 0 || a[AX_F] % MOE_TILE_COLS != 0)
		return mb_error_set(err, MB_EINVAL, NULL,
			"H (%lld) and F (%lld) must be multiples of %d (the grouped GEMM's column tile)",
			(long long)a[AX_H], (long long)a[AX_F], MOE_TILE_COLS);
	if (a[AX_T] > INT32_MAX / a[AX_K] || a[AX_H] > INT32_MAX / 8 || a[AX_F] > INT32_MAX / 8)
		return mb_error_set(err, MB_EINVAL, NULL, "T*K (T %lld, K %lld), H and F must fit in 32 bits",
			(long long)a[AX_T], (long long)a[AX_K]);
	return 0;
}

/* ---- tolerance ---------------------------------------------------------------------------------------------------------------
 *
 * Scales, from the fills: x ~ 1 and W1 ~ 1/sqrt(H) (standard deviations)
 * give h = x W1_e ~ N(0, 1); a = relu(h)^2 has E[a^2] = E[relu(h)^4] = 1.5;
 * W2 ~ 1/sqrt(F) gives o = a W2_e with E[o^2] = 1.5 (rms 1.22, measured
 * 1.22), whatever H and F. y = sum_k w_k o_k with sum_k w_k = 1. The
 * errors below are sums of many independent roundings, so they are
 * written as standard deviations (sigma) and the bound is a multiple of
 * sigma; worst-case sums of |terms| (hundreds of times larger) cannot
 * happen with unbiased rounding. No result is relative to |y|: o sums
 * terms of both signs, so y can be near 0 where its errors are not.
 *
 * bf16 (u_b = 2^-8, the relative bound of one rounding; a rounding error is
 * at most u_b |v| and, spread evenly, has sigma <= u_b |v| / sqrt(3)):
 *  - the intermediate: the fused kernel rounds a once (sigma u_b/sqrt(3)
 *    relative); the cuBLAS variants round h = x W1 (their GEMM output),
 *    square it (doubling that error) and round a: sigma^2 = (4 + 1) u_b^2
 *    / 3 relative, the worse case. Through o = sum_f a_f W2_f, independent
 *    per f: sigma_o^2 = (5/3) u_b^2 sum_f a_f^2 W2_f^2 = (5/3) 1.5 u_b^2:
 *    sigma 1.58 u_b per expert row (simulated: 1.17 u_b; the fused path's
 *    0.71 u_b bound simulates at 0.52 u_b).
 *  - each (token, k) row rounded to bf16 before the sum over k (all GPU
 *    variants): sigma <= u_b / sqrt(3) * rms(o) = 0.71 u_b.
 *  - over k: weights summing to 1 give sum w_k^2 <= 1, so y's sigma is at
 *    most sqrt(1.58^2 + 0.71^2) u_b = 1.73 u_b.
 *  - fp32 accumulation (reference and GPU, sigma of the rounding walk of
 *    partial sums that grow as sqrt(i)): u sqrt(H/3) through GEMM1 and
 *    u sqrt(F)/2 through GEMM2, under 70u for H, F <= 8192: 4e-6, 0.1% of
 *    the bf16 term; the softmax's few-ulp weights add as little.
 *  - y rounded to bf16: u_b |y|, the relative term.
 * The sum over f is a scale mixture: sum_f a_f^2 W2_f^2 is itself
 * heavy-tailed when F is small (one large a_f dominates), so the tail is
 * wider than a Gaussian's: simulated at F = 128 the largest of 10^6 errors
 * of the cuBLAS path is 7.8 of its measured sigmas (5.8 of the bound
 * sigma), at F = 1408 4.0. We take 10 bound sigmas, 17.3 u_b = 0.068
 * absolute (y's rms is about 1): a wrong expert, weight or row moves y by
 * O(0.3 .. 1).
 * fp32 (the CPU backend compares the fp32 reference with the fp64 oracle,
 * routing identical by construction): the accumulation walks above, under
 * 70u of sigma for H, F <= 8192, 10 sigmas as for bf16: 700u; the
 * weights' few ulps times |o| < 8 and the K adds of the combine add under
 * 100u: 2^10 u = 2^-14 absolute, and the oracle's final rounding to fp32
 * (u) relative.
 * fp16 (every GPU variant runs it): the bf16 derivation with u = 2^-11.
 * fp16's range holds every intermediate (|h| < 8 but for 8-sigma events,
 * so a = h^2 < 64; o and y smaller), and a value under 2^-14 (subnormal)
 * keeps an absolute error under 2^-25, far below the absolute term. */
#define MOE_SIGMA_BOUND 1.73       /* y's sigma in units of the storage rounding */
#define MOE_SIGMAS 10.0
#define MOE_ABS(sigma_bound, half_ulp) (MOE_SIGMAS * (sigma_bound) * (half_ulp))
#define MOE_F32_ABS 0x1p-14
#define MOE_F32_REL (4 * F32_EPS)

/* ---- moe_ffn_swiglu's tolerance: the derivation above, with a = silu(g) u -----------------------------------------------
 *
 * Scales: g = x W1g_e and u = x W1u_e are independent N(0, 1) (distinct
 * columns of W1 ~ 1/sqrt(H)); a = silu(g) u has E[a^2] = E[silu(g)^2]
 * = 0.356 (the Gaussian integral; rms 0.596), and o = a W2_e the same
 * (rms 0.596), whatever H and F. silu is Lipschitz with L = max |silu'|
 * = 1.0998 (at g = 2.40).
 *
 * bf16:
 *  - the intermediate: the fused kernel computes silu(g) u from GEMM1's
 *    fp32 accumulators and rounds a once: sigma u_b/sqrt(3) rms(a)
 *    = 0.34 u_b. The cuBLAS variants round g and u (their GEMM output,
 *    errors g e_g and u e_u), then a (a e_a): da = g silu'(g) u e_g
 *    + a e_u + a e_a, so E[da^2] = (u_b^2/3) (E[g^2 silu'(g)^2] E[u^2]
 *    + 2 E[a^2]) <= (u_b^2/3) (L^2 + 2 * 0.356) = 0.641 u_b^2, the worse
 *    case. Through o = sum_f a_f W2_f, independent per f, with W2 ~
 *    1/sqrt(F): sigma_o^2 = E[da^2], sigma 0.80 u_b per expert row
 *    (simulated: 0.47 u_b, since E[g^2 silu'(g)^2] = 0.52 < L^2 = 1.21;
 *    the fused path's 0.34 u_b bound simulates at 0.25 u_b).
 *  - each (token, k) row rounded to bf16 before the sum over k:
 *    u_b/sqrt(3) rms(o) = 0.34 u_b.
 *  - over k (sum w_k^2 <= 1): y's sigma is at most sqrt(0.641 + 0.344^2)
 *    u_b = 0.871 u_b.
 *  - silu itself: expf within 2 ulp on the GPU, 1 ulp on the host, an
 *    add, an IEEE division and the product by u: 13u relative on a
 *    (src/reference/swiglu.c's derivation), 3e-4 of the rounding of a.
 *    The fp32 accumulation walks reach a through |silu'| <= L and |u|,
 *    no more than through relu^2's 2|h|: 0.1% of the bf16 term, as above.
 *  - y rounded to bf16: u_b |y|, the relative term.
 * The tail: what makes the scale mixture sum_f a_f^2 W2_f^2 heavy is a's
 * fourth moment; E[a^4] / E[a^2]^2 = 3 E[silu^4] / E[silu^2]^2 = 21.8 for
 * silu(g) u against 52.5 / 1.5^2 = 23.3 for relu(h)^2, so the tail is no
 * wider than moe_ffn's and the same 10 bound sigmas hold: 8.71 u_b = 0.034
 * absolute (simulated: the largest of 10^6 cuBLAS-path errors at F = 128
 * is 5.1 u_b, 5.8 bound sigmas; at F = 1408 3.0 u_b). y's rms is 0.596
 * sqrt(sum w_k^2), 0.24 .. 0.6: a wrong expert, weight or row moves y by
 * O(0.1 .. 0.6).
 * fp32: moe_ffn's 2^-14 absolute: the walks reach a no more strongly than
 * through relu^2 (above), and the host's silu (expf within 1 ulp, the add,
 * division and product: 5u relative on a, 3u of o through GEMM2) fits the
 * 100u margin. fp16: as bf16 with u = 2^-11. */
#define MOE_GLU_SIGMA_BOUND 0.871  /* y's sigma in units of the storage rounding */

/* x, logits, W1 (F or 2F columns per expert row), W2 and y. */
static int moe_tensors_act(const int64_t *a, mb_tensor_spec *t, moe_act act)
{
	t[0] = (mb_tensor_spec){"x", false, a[AX_T], a[AX_H], MB_FILL_NORMAL, 0, 1};
	t[1] = (mb_tensor_spec){"logits", false, a[AX_T], a[AX_E], MB_FILL_NORMAL, 0, 1};
	/* x W1 and a W2 of unit scale: standard deviations 1/sqrt(H), 1/sqrt(F) */
	t[2] = (mb_tensor_spec){"W1", false, a[AX_E] * a[AX_H], moe_w1_cols(act, a[AX_F]), MB_FILL_NORMAL, 0,
		(float)(1.0 / sqrt((double)a[AX_H]))};
	t[3] = (mb_tensor_spec){"W2", false, a[AX_E] * a[AX_F], a[AX_H], MB_FILL_NORMAL, 0,
		(float)(1.0 / sqrt((double)a[AX_F]))};
	t[4] = (mb_tensor_spec){"y", true, a[AX_T], a[AX_H], MB_FILL_NORMAL, 0, 0};
	return 5;
}

static uint64_t moe_bytes_act(const int64_t *a, mb_dtype dtype, moe_act act)
{
	/* x, logits, W1 (E*H*C, C = F or 2F), W2 read once, y written once */
	const uint64_t t = (uint64_t)a[AX_T], h = (uint64_t)a[AX_H], e = (uint64_t)a[AX_E], f = (uint64_t)a[AX_F];
	const uint64_t c = (uint64_t)moe_w1_cols(act, a[AX_F]);
	return (2 * t * h + t * e + e * h * (c + f)) * mb_dtype_size(dtype);
}

static uint64_t moe_flops_act(const int64_t *a, moe_act act)
{
	/* GEMM1 2 * (T*K) * H * C (C = F, or 2F for SwiGLU's gates and ups)
	 * and GEMM2 2 * (T*K) * F * H; routing, the activation and the
	 * weighting are O(T*K*(E + F + H)) and not counted */
	const uint64_t tk = (uint64_t)a[AX_T] * (uint64_t)a[AX_K], h = (uint64_t)a[AX_H];
	return 2ull * tk * h * ((uint64_t)moe_w1_cols(act, a[AX_F]) + (uint64_t)a[AX_F]);
}

/* A row's tensors, bytes and FLOPs models: the three above at its
 * activation. */
#define DEFINE_MOE_ROW_MODELS(prefix, ACT) \
	static int prefix##_tensors(const int64_t *a, mb_tensor_spec *t) \
	{ \
		return moe_tensors_act(a, t, ACT); \
	} \
	static uint64_t prefix##_bytes(const int64_t *a, mb_dtype dtype) \
	{ \
		return moe_bytes_act(a, dtype, ACT); \
	} \
	static uint64_t prefix##_flops(const int64_t *a) \
	{ \
		return moe_flops_act(a, ACT); \
	}

DEFINE_MOE_ROW_MODELS(moe, MOE_RELU2)
DEFINE_MOE_ROW_MODELS(moe_glu, MOE_SWIGLU)

/* The GPU variants' dtypes: both 2-byte types the tensor cores take. */
#define MOE_GPU_DTYPES ((1u << MB_BF16) | (1u << MB_FP16))

/* What the two rows' descriptors share: block, axes and shape rules, the
 * models of DEFINE_MOE_ROW_MODELS(models, ...), the reference and oracle of
 * DEFINE_MOE_ROW_REFERENCES(row, ...); no launch-by-launch model (the
 * sort's launches move only intermediates, so the fused model must split
 * the row's bytes, and the cuBLAS variants' GEMM launches are the
 * library's); the weights read whole whatever tokens are sampled (they
 * could have the token count of rows at some shape, so say it); one set of
 * sources. */
#define MOE_ROW_SHARED(models, row) \
	MB_ROW_NAME_IN(row, moe_ffn, "fp32, sampled tokens grouped by expert, threaded, "), \
	.block = 'E', \
	.n_axes = 5, \
	.axes = {"T", "H", "E", "K", "F"}, \
	.check_shape = moe_check_shape, \
	.tensors = models##_tensors, \
	.bytes = models##_bytes, \
	.traffic = NULL, \
	.flops = models##_flops, \
	.reads = {[IN_W1] = MB_READS_ALL, [IN_W2] = MB_READS_ALL}, \
	.source_files = {MB_ROW_FILES(moe_ffn), "src/kernels/grouped_gemm_sm90.cuh", "src/kernels/grouped_gemm.cuh"}

/* Both rows' tolerances: fp32 the same, fp16 and bf16 MOE_SIGMAS of the
 * row's sigma bound in units of the storage rounding, plus y's rounding. */
#define MOE_TOLERANCES(sigma_bound, fp32_why, fp16_why, bf16_why) \
	{ \
		[MB_FP32] = {MOE_F32_ABS, MOE_F32_REL, fp32_why}, \
		[MB_FP16] = {MOE_ABS(sigma_bound, F16_HALF_ULP), F16_HALF_ULP + MOE_F32_REL, fp16_why}, \
		[MB_BF16] = {MOE_ABS(sigma_bound, BF16_HALF_ULP), BF16_HALF_ULP + MOE_F32_REL, bf16_why}, \
	}

/* The GPU variants' launches and kernels, one host path each in
 * src/kernels/moe_ffn.cu for both rows: only the activation pass's kernel
 * (standard) and the launch function differ. */
#define MOE_FUSED_VARIANT(what, launch_fn) \
	{.name = "fused", .kind = MB_VARIANT_FUSED, .backend = "cuda", \
		.description = what, \
		.launches_per_call = 6, \
		.kernel_patterns = {"moe_ffn_route", "moe_ffn_sort", "moe_ffn_grouped_gemm", "moe_ffn_combine"}, \
		.launch = GPU_LAUNCH(launch_fn), .dtype_mask = MOE_GPU_DTYPES}
#define MOE_STANDARD_VARIANT(what, act_kernel, launch_fn) \
	{.name = "standard", .kind = MB_VARIANT_FALLBACK, .backend = "cuda", \
		.description = what, \
		.launches_per_call = 5, \
		.kernel_patterns = {"moe_ffn_route", "moe_ffn_std_", act_kernel, "moe_ffn_lib_combine"}, \
		.launch = GPU_LAUNCH(launch_fn), .dtype_mask = MOE_GPU_DTYPES, .library_kernels = true, \
		.syncs_host = true}
#define MOE_CUBLAS_GROUPED_VARIANT(what, launch_fn) \
	{.name = "cublas_grouped", .kind = MB_VARIANT_VENDOR, .backend = "cuda", \
		.description = what, \
		.launches_per_call = 6, \
		.kernel_patterns = {"moe_ffn_route", "moe_ffn_sort", "moe_ffn_cublas_gather", "moe_ffn_lib_"}, \
		.launch = GPU_LAUNCH(launch_fn), .dtype_mask = MOE_GPU_DTYPES, .library_kernels = true, \
		.syncs_host = true}

const mb_row mb_row_moe_ffn = {
	.status = MB_ROW_KEEP,
	.summary = "MoE expert FFN: biased top-K routing of x [T,H] by logits [T,E] (softmax over the K chosen), "
		"y = sum_k w_k relu(x W1_e)^2 W2_e with W1 [E*H,F], W2 [E*F,H]; y [T,H]",
	MOE_ROW_SHARED(moe, moe_ffn),
	.tolerance = MOE_TOLERANCES(MOE_SIGMA_BOUND,
		"fp32 reference vs fp64 oracle, same routing: accumulation walks over H and F under 70u sigma "
		"for H, F <= 8192, 10 sigma plus the weights' and the combine's roundings: 2^-14 abs",
		"as bf16 with u = 2^-11 (every intermediate within fp16's range): 10 x 1.73 u abs, y's rounding relative",
		"bf16 intermediates: h and a rounded (sigma 1.58 u_b per expert row), each (t,k) row rounded "
		"(0.71 u_b): y sigma <= 1.73 u_b; 10 sigma for the heavy tail (7.8 measured at F=128) = 0.068 abs; "
		"y's rounding 2^-8 relative"),
	.n_variants = 4,
	.variants = {
		MOE_FUSED_VARIANT("route (top-K, softmax, per-block histograms), device counting sort of the (token, k) "
			"pairs (scan, scatter), our grouped GEMM over the jagged groups' tiles (persistent grid) with x "
			"rows gathered in GEMM1 and relu^2 in its epilogue (a in the case dtype), the routing weight in "
			"GEMM2's epilogue (a row per pair), then a combine over k in fixed order; no host sync. The "
			"GEMM: on compute capability 9.0 with sm_90a code, wgmma m64n256k16 from shared memory fed by "
			"TMA (B; A in GEMM2) and a gathering producer warpgroup (A in GEMM1), 4-stage mbarrier "
			"pipeline, 128x256 tiles, two consumer warpgroups (kernel moe_ffn_grouped_gemm_wgmma); "
			"elsewhere, or with MEGABENCH_MOE_GEMM=mma, mma.sync m16n8k16, ldmatrix, 4-stage cp.async, "
			"256x128 / 128x256 tiles (kernel moe_ffn_grouped_gemm_kernel)",
			mb_moe_ffn_fused_launch),
		MOE_STANDARD_VARIANT("a framework without grouped GEMM: route, count per expert, counts read back (host "
			"sync), tokens permuted into per-expert buffers padded to the largest load (rounded up to 128), "
			"cublasGemmStridedBatchedEx over all E experts, a relu^2 pass, the second strided-batched "
			"GEMM, un-permute with the weighted sum over k",
			"moe_ffn_lib_relu2", mb_moe_ffn_standard_launch),
		MOE_CUBLAS_GROUPED_VARIANT("the fused variant's route and sort, counts read back (host sync), tokens "
			"gathered into sorted order, cublasGemmGroupedBatchedEx over the non-empty experts, a relu^2 pass, "
			"the second grouped GEMM, the weighted sum over k",
			mb_moe_ffn_cublas_grouped_launch),
		MB_REFERENCE_VARIANT,
	},
};

const mb_row mb_row_moe_ffn_swiglu = {
	.status = MB_ROW_KEEP,
	.summary = "MoE expert FFN with SwiGLU experts: moe_ffn's routing of x [T,H] by logits [T,E], "
		"y = sum_k w_k (silu(x W1g_e) * (x W1u_e)) W2_e with W1 [E*H,2F] (gate and up columns alternating "
		"in blocks of 8), W2 [E*F,H]; y [T,H]",
	MOE_ROW_SHARED(moe_glu, moe_ffn_swiglu),
	.tolerance = MOE_TOLERANCES(MOE_GLU_SIGMA_BOUND,
		"fp32 reference vs fp64 oracle, same routing: moe_ffn's walks, reaching a through silu (Lipschitz "
		"1.1) and u no more than through relu^2, plus the host silu's 5u: 2^-14 abs",
		"as bf16 with u = 2^-11 (every intermediate within fp16's range): 10 x 0.871 u abs, y's rounding relative",
		"bf16 intermediates: gate and up rounded (silu Lipschitz 1.1), a = silu(g) u rounded (sigma "
		"0.80 u_b per expert row), each (t,k) row rounded (0.34 u_b): y sigma <= 0.871 u_b; 10 sigma as "
		"moe_ffn (a's fourth moment no heavier) = 0.034 abs; y's rounding 2^-8 relative"),
	.n_variants = 4,
	.variants = {
		MOE_FUSED_VARIANT("moe_ffn's fused path with SwiGLU in GEMM1's epilogue: route, device counting sort, "
			"our grouped GEMM over the jagged groups (wgmma/TMA on sm_90a, else mma.sync: moe_ffn's) with x "
			"rows gathered and silu(gate) * up from each thread's gate and up accumulators (a [rows, F] in "
			"the case dtype), the routing weight in GEMM2's epilogue, a combine over k in fixed order; no "
			"host sync, no padding",
			mb_moe_ffn_swiglu_fused_launch),
		MOE_STANDARD_VARIANT("moe_ffn's standard path: counts read back (host sync), tokens permuted into "
			"per-expert buffers padded to the largest load (rounded up to 128), cublasGemmStridedBatchedEx "
"to [cap, 2F], a SwiGLU pass into [cap, F], the second strided-batched GEMM, "
			"un-permute with the weighted sum",
			"moe_ffn_lib_swiglu", mb_moe_ffn_swiglu_standard_launch),
		MOE_CUBLAS_GROUPED_VARIANT("moe_ffn's cublas_grouped path: the fused variant's route and sort, counts "
			"read back (host sync), tokens gathered into sorted order, cublasGemmGroupedBatchedEx to "
			"[rows, 2F], a SwiGLU pass into [rows, F], the second grouped GEMM, the weighted sum",
			mb_moe_ffn_swiglu_cublas_grouped_launch),
		MB_REFERENCE_VARIANT,
	},
};
