/* Mixture-of-experts FFN with squared-ReLU experts, token-choice top-K
 * routing and an uneven (biased) router:
 *   score[t, e] = logit[t, e] + bias(e)          (fp32, one add)
 *   chosen(t)   = the K experts of largest score, ties to the lower index
 *   w[t, k]     = softmax over the K chosen scores (in rank order k)
 *   y[t]        = sum_k w[t, k] * relu(x[t] W1_e)^2 W2_e,   e = chosen(t)[k]
 * on x [T, H], logits [T, E], W1 [E*H, F] (expert e's [H, F] are rows
 * e*H .. e*H+H-1), W2 [E*F, H] (expert e's [F, H]); out y [T, H].
 *
 * The score is part of the row's definition in fp32 (logit + bias rounded
 * once) for every variant, the fp64 oracle included: routing is a discrete
 * choice, and with one rounding and the index tie-break it is the same bit
 * for bit everywhere (bf16 logits tie often). Everything after the choice is
 * REAL arithmetic. The reference does not round the intermediate
 * relu(x W1)^2; the GPU variants store it in bf16 and the tolerance below
 * pays for that.
 *
 * Worked by hand (H = 1, F = 1, E = 2, K = 2: a shape check_shape refuses,
 * the math only; bias(0) = 0.921875, bias(1)
 * = 0): x = 2, logits (0, 0), W1 = (1, -1), W2 = (3, 5). Scores 0.921875
 * and 0: expert 0 first, weights 1/(1 + e^-0.921875) = 0.7154 and 0.2846.
 * Expert 0: relu(2)^2 * 3 = 12; expert 1: relu(-2)^2 * 5 = 0; y = 8.585.
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

#include "kernels/row_common.h"
#include "reference/parallel.h"
#include "reference/reference.h"
#include "reference/traffic.h"

/* The GPU variants the descriptor names, defined in src/kernels/moe_ffn.cu:
 * in x [T,H], logits [T,E], W1 [E*H,F], W2 [E*F,H]; out y [T,H]. */
MB_DECLARE_LAUNCH(mb_moe_ffn_fused_launch);
MB_DECLARE_LAUNCH(mb_moe_ffn_standard_launch);
MB_DECLARE_LAUNCH(mb_moe_ffn_cublas_grouped_launch);

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
 * h = x W1_e, a = relu(h)^2, o = a W2_e, slot = w * o, each product
 * accumulated in REAL over H, then over F, in index order. */
#define DEFINE_MOE_ITEM(fn, REAL, AXPY) \
	static void fn(moe_ref_plan *p, int64_t item, void *scratch) \
	{ \
		const int64_t hidden = p->axis[AX_H], ffn = p->axis[AX_F], k_top = p->axis[AX_K]; \
		const int32_t *ent = p->entries + p->item_start[item]; \
		const int64_t nb = p->item_len[item], e = p->expert[ent[0]]; \
		const REAL *weight = p->weight; \
		REAL *h = scratch, *o = h + MOE_REF_BLOCK * ffn, *slot = p->slot; \
		const float *xrow[MOE_REF_BLOCK]; \
		for (int64_t b = 0; b < nb; b++) \
			xrow[b] = p->x + p->token[ent[b] / k_top] * hidden; \
		for (int64_t f0 = 0; f0 < ffn; f0 += MOE_REF_STRIP) { \
			const int64_t len = ffn - f0 < MOE_REF_STRIP ? ffn - f0 : MOE_REF_STRIP; \
			for (int64_t b = 0; b < nb; b++) \
				memset(h + b * ffn + f0, 0, (size_t)len * sizeof(REAL)); \
			for (int64_t i = 0; i < hidden; i++) { \
				const float *wr = p->w1 + (e * hidden + i) * ffn + f0; \
				for (int64_t b = 0; b < nb; b++) { \
					const REAL xv = (REAL)xrow[b][i]; \
					AXPY(h + b * ffn + f0, wr, xv, len); \
				} \
			} \
		} \
		for (int64_t j = 0; j < nb * ffn; j++) \
			h[j] = h[j] > 0 ? h[j] * h[j] : (REAL)0; \
		for (int64_t j0 = 0; j0 < hidden; j0 += MOE_REF_STRIP) { \
			const int64_t len = hidden - j0 < MOE_REF_STRIP ? hidden - j0 : MOE_REF_STRIP; \
			for (int64_t b = 0; b < nb; b++) \
				memset(o + b * hidden + j0, 0, (size_t)len * sizeof(REAL)); \
			for (int64_t f = 0; f < ffn; f++) { \
				const float *wr = p->w2 + (e * ffn + f) * hidden + j0; \
				for (int64_t b = 0; b < nb; b++) { \
					const REAL av = h[b * ffn + f]; \
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

DEFINE_MOE_ITEM(moe_item_f32, float, axpy_f32)
DEFINE_MOE_ITEM(moe_item_f64, double, axpy_f64)

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
	void fn(const int64_t *axis, const float *const *in, OUT *const *out, \
		const int64_t *rows, int64_t n_rows) \
	{ \
		const int64_t hidden = axis[AX_H], experts = axis[AX_E], k_top = axis[AX_K], ffn = axis[AX_F]; \
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
			moe_ref_plan plan = {.axis = axis, .x = in[IN_X], .w1 = in[IN_W1], .w2 = in[IN_W2], \
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
				(size_t)(MOE_REF_BLOCK * (ffn + hidden)) * sizeof(REAL), moe_ref_item, &plan); \
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

DEFINE_MOE_FFN(mb_ref_moe_ffn, float, float, expf, moe_item_f32)
DEFINE_MOE_FFN(mb_oracle_moe_ffn, double, double, exp, moe_item_f64)

/* ---- the moe_ffn catalog row: shapes, bytes, tolerances, variants --------------------------------------------------------- */

static int moe_check_shape(const int64_t *a, char *why, size_t why_len)
{
	if (a[AX_K] > a[AX_E] || a[AX_K] > MOE_K_MAX) {
		snprintf(why, why_len, "K (%lld) must be at most E (%lld) and at most %d", (long long)a[AX_K],
			(long long)a[AX_E], MOE_K_MAX);
		return -1;
	}
	if (a[AX_E] > MOE_E_MAX) {
		snprintf(why, why_len, "E (%lld) must be at most %d", (long long)a[AX_E], MOE_E_MAX);
		return -1;
	}
	if (a[AX_H] % MOE_TILE_COLS != 0 || a[AX_F] % MOE_TILE_COLS != 0) {
		snprintf(why, why_len, "H (%lld) and F (%lld) must be multiples of %d (the grouped GEMM's column tile)",
			(long long)a[AX_H], (long long)a[AX_F], MOE_TILE_COLS);
		return -1;
	}
	if (a[AX_T] > INT32_MAX / a[AX_K] || a[AX_H] > INT32_MAX / 8 || a[AX_F] > INT32_MAX / 8) {
		snprintf(why, why_len, "T*K (T %lld, K %lld), H and F must fit in 32 bits", (long long)a[AX_T],
			(long long)a[AX_K]);
		return -1;
	}
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
 * fp16: no GPU variant runs it (dtype_mask is bf16); the bf16 derivation
 * with u = 2^-11. */
#define MOE_SIGMA_BOUND 1.73       /* y's sigma in units of the storage rounding */
#define MOE_SIGMAS 10.0
#define MOE_ABS(half_ulp) (MOE_SIGMAS * MOE_SIGMA_BOUND * (half_ulp))
#define MOE_F32_ABS 0x1p-14
#define MOE_F32_REL (4 * F32_EPS)

static int moe_tensors(const int64_t *a, mb_tensor_spec *t)
{
	t[0] = (mb_tensor_spec){"x", false, a[AX_T], a[AX_H], MB_FILL_NORMAL, 0, 1};
	t[1] = (mb_tensor_spec){"logits", false, a[AX_T], a[AX_E], MB_FILL_NORMAL, 0, 1};
	/* x W1 and a W2 of unit scale: standard deviations 1/sqrt(H), 1/sqrt(F) */
	t[2] = (mb_tensor_spec){"W1", false, a[AX_E] * a[AX_H], a[AX_F], MB_FILL_NORMAL, 0,
		(float)(1.0 / sqrt((double)a[AX_H]))};
	t[3] = (mb_tensor_spec){"W2", false, a[AX_E] * a[AX_F], a[AX_H], MB_FILL_NORMAL, 0,
		(float)(1.0 / sqrt((double)a[AX_F]))};
	t[4] = (mb_tensor_spec){"y", true, a[AX_T], a[AX_H], MB_FILL_NORMAL, 0, 0};
	return 5;
}

static uint64_t moe_bytes(const int64_t *a, mb_dtype dtype)
{
	/* x, logits, W1, W2 read once, y written once */
	const uint64_t t = (uint64_t)a[AX_T], h = (uint64_t)a[AX_H], e = (uint64_t)a[AX_E], f = (uint64_t)a[AX_F];
	return (2 * t * h + t * e + 2 * e * h * f) * mb_dtype_size(dtype);
}

static uint64_t moe_flops(const int64_t *a)
{
	/* two GEMMs of 2 * (T*K) * H * F each; routing, relu^2 and the
	 * weighting are O(T*K*(E + F + H)) and not counted */
	return 2ull * 2ull * (uint64_t)a[AX_T] * (uint64_t)a[AX_K] * (uint64_t)a[AX_H] * (uint64_t)a[AX_F];
}

#define MOE_BF16_ONLY (1u << MB_BF16)

const mb_row mb_row_moe_ffn = {
	.name = "moe_ffn",
	.block = 'E',
	.status = MB_ROW_EXPERIMENTAL,
	.summary = "MoE expert FFN: biased top-K routing of x [T,H] by logits [T,E] (softmax over the K chosen), "
		"y = sum_k w_k relu(x W1_e)^2 W2_e with W1 [E*H,F], W2 [E*F,H]; y [T,H]",
	.n_axes = 5,
	.axes = {"T", "H", "E", "K", "F"},
	.check_shape = moe_check_shape,
	.tensors = moe_tensors,
	.bytes = moe_bytes,
	/* no launch-by-launch model: the sort's launches move only
	 * intermediates (the fused model must split the row's bytes), and
	 * the cuBLAS variants' GEMM launches are the library's */
	.traffic = NULL,
	.flops = moe_flops,
	.reference = mb_ref_moe_ffn,
	.oracle = mb_oracle_moe_ffn,
	/* the weights are read whole whatever tokens are sampled (they could
	 * have the token count of rows at some shape, so say it) */
	.reads = {[IN_W1] = MB_READS_ALL, [IN_W2] = MB_READS_ALL},
	.reference_name = "mb_ref_moe_ffn (fp32, sampled tokens grouped by expert, threaded, src/reference/moe_ffn.c)",
	.source_files = {"src/kernels/moe_ffn.cu", "src/kernels/grouped_gemm.cuh", "src/reference/moe_ffn.c"},
	.tolerance = {
		[MB_FP32] = {MOE_F32_ABS, MOE_F32_REL,
			"fp32 reference vs fp64 oracle, same routing: accumulation walks over H and F under 70u sigma "
			"for H, F <= 8192, 10 sigma plus the weights' and the combine's roundings: 2^-14 abs"},
		[MB_FP16] = {MOE_ABS(F16_HALF_ULP), F16_HALF_ULP + MOE_F32_REL,
			"as bf16 with u = 2^-11 (no GPU variant runs fp16): 10 x 1.73 u abs, y's rounding relative"},
		[MB_BF16] = {MOE_ABS(BF16_HALF_ULP), BF16_HALF_ULP + MOE_F32_REL,
			"bf16 intermediates: h and a rounded (sigma 1.58 u_b per expert row), each (t,k) row rounded "
			"(0.71 u_b): y sigma <= 1.73 u_b; 10 sigma for the heavy tail (7.8 measured at F=128) = 0.068 abs; "
			"y's rounding 2^-8 relative"},
	},
	.n_variants = 4,
	.variants = {
		{"fused", MB_VARIANT_FUSED, "cuda",
			"route (top-K, softmax, per-block histograms), device counting sort of the (token, k) pairs "
			"(scan, scatter), our grouped GEMM (mma.sync m16n8k16 bf16, ldmatrix, 4-stage cp.async, "
			"persistent grid over the jagged groups' tiles, 256x128 / 128x256 tiles) with x rows gathered "
			"in GEMM1 and relu^2 in its epilogue (bf16 a), the routing weight in GEMM2's epilogue (bf16 "
			"row per pair), then a combine over k in fixed order; no host sync",
			6, {"moe_ffn_route", "moe_ffn_sort", "moe_ffn_grouped_gemm", "moe_ffn_combine"},
			GPU_LAUNCH(mb_moe_ffn_fused_launch), MOE_BF16_ONLY, false, false},
		{"standard", MB_VARIANT_FALLBACK, "cuda",
			"a framework without grouped GEMM: route, count per expert, counts read back (host sync), "
			"tokens permuted into per-expert buffers padded to the largest load (rounded up to 128), "
			"cublasGemmStridedBatchedEx over all E experts, a relu^2 pass, the second strided-batched "
			"GEMM, un-permute with the weighted sum over k",
			5, {"moe_ffn_route", "moe_ffn_std_", "moe_ffn_lib_relu2", "moe_ffn_lib_combine"},
			GPU_LAUNCH(mb_moe_ffn_standard_launch), MOE_BF16_ONLY, true, true},
		{"cublas_grouped", MB_VARIANT_VENDOR, "cuda",
			"the fused variant's route and sort, counts read back (host sync), tokens gathered into sorted "
			"order, cublasGemmGroupedBatchedEx over the non-empty experts, a relu^2 pass, the second "
			"grouped GEMM, the weighted sum over k",
			6, {"moe_ffn_route", "moe_ffn_sort", "moe_ffn_cublas_gather", "moe_ffn_lib_"},
			GPU_LAUNCH(mb_moe_ffn_cublas_grouped_launch), MOE_BF16_ONLY, true, true},
		MB_REFERENCE_VARIANT,
	},
};
