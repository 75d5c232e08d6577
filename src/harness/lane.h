/* Lanes: a training-step slice strung from catalog rows and GEMMs, run for
 * many steps, so that a row's win is measured where it sits.
 *
 * A lane names a block pattern, one letter per block (A attention, E
 * expert, M state space, R recurrent, D dense MLP) and a shape. The step is
 * the forward over the blocks in pattern order, then (unless `backward` is
 * off) the backward in reverse order. Each letter expands to ops
 * (mb_lane_op) on named buffers (mb_lane_buffer); every block starts with
 * its X work:
 *   mHC (mhc_streams > 0): mhc_sinkhorn mixes the N residual streams, a
 *     lane kernel reads them out (their mean), and after the norm another
 *     writes the previous block's output back into every stream;
 *   residual_rmsnorm of the previous block's output and the residual (the
 *     mHC read-out), saving the block's residual h for the backward.
 * Then, by letter:
 *   A (attention, by `attention` in turn):
 *     gqa: Q, K, V projections -> rope_qk -> attention core -> output
 *       projection;
 *     mla: Q projection, KV latent and k_pe projections, K and V
 *       up-projections -> mla_partial_rope -> attention core -> output
 *       projection.
 *     The attention core is a labelled stand-in, per sequence: scores
 *     S = K V^T (gqa) or S = q_out k_out^T (mla), a softmax launch over
 *     each row of S, then S Q_rot (gqa) or S v (mla). Attention itself is
 *     not a catalog row.
 *   E: router GEMM -> moe_ffn or moe_ffn_swiglu (by `moe` in turn), which
 *     route, sort, run the experts and combine.
 *   M: x, dt, lambda, B and C projections -> ssm_scan -> out projection.
 *   R: in projection -> recurrent_scan -> out projection.
 *   D: up projection -> relu2 or swiglu (by `mlp` in turn) -> down
 *     projection.
 * The backward holds the rows that have a backward: each gqa block runs
 * the output projection's input gradient, the stand-in's four products,
 * rope_qk_bwd and the Q, K, V projections' input gradients; every block
 * ends with residual_rmsnorm_bwd. A block whose rows have no backward row
 * passes the gradient at its output to residual_rmsnorm_bwd as dy; the
 * lane's notes say so. Weight gradients are left out (they lie between no
 * rows, and every configuration runs them alike).
 *
 * Buffers flow as in a step: every input of an op is written by an earlier
 * op of the same step, or is a parameter (weights, tables, and the step's
 * own inputs: the embedding output, the first residual, the loss
 * gradient), filled once. A row's parameters are filled as its descriptor
 * fills them. The projections write token-major buffers that ssm_scan and
 * recurrent_scan read in their own layouts: the same elements and bytes
 * (the lane times; it checks no values).
 *
 * The configurations (mb_lane_config), per mode: all fused; all fallback;
 * and, for each row and each alternative variant it has (kind fallback or
 * vendor), that row alone on it. Eager mode launches op by op; graph mode
 * captures the step once and replays it, so a variant that waits for the
 * host inside a call (syncs_host) cannot run there: the row stays fused,
 * and the lane's `fused_only` says so.
 *
 * Rounds: after a second of all fused steps, untimed, that brings the
 * device from the set-up's idle gaps to a steady load, each round runs
 * `steps` sweeps. A sweep is one timed step of every configuration of
 * every mode still going (all fused mb_lane_fused_steps of them, against
 * which every delta is taken), in an order shuffled from the lane's seed and
 * the sweep's number, after `warmup` untimed steps of its first
 * configuration, which keep the device busy while the host reads the
 * sweep before back. A configuration's steps are thus spread over the
 * round, not run back to back: the power controller's slow swings (on a
 * card at its power cap, episodes of a few steps 5 to 10% slow) then
 * fall on every configuration alike instead of on the one whose block
 * they hit (runs h to j on H100s: the dense lane's round medians of one
 * configuration spread 0.7 to 3.4%, its steps within a block 0.5 to
 * 1.7%). After each round a mode stops when
 * every alternative configuration's step median resolves a delta of
 * `resolve` (the between-round rule of receipts/compare.h, mb_repetition_cmp,
 * and the medians' own noise) after `min_rounds`, or at `max_rounds`; the
 * rounds stop before one that would overrun `budget_s`, counted from the
 * lane's start. The receipt says which, per mode. A configuration whose
 * own delta is already resolved sits out the later rounds (settled, in
 * mb_lane_noise), so that the rounds left go to the unresolved ones; its
 * round medians are then fewer than all fused's.
 */
#ifndef MB_HARNESS_LANE_H
#define MB_HARNESS_LANE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness/suite.h"
#include "kernels/catalog.h"
#include "receipts/error.h"

#define MB_LANE_MAX_BLOCKS 64
#define MB_LANE_MAX_ROWS 16
#define MB_LANE_MAX_CHOICES 8      /* entries of `attention`, `moe`, `mlp` */
#define MB_LANE_ROW_NAME_MAX 32
/* per mode: fused, fallback, and every row's alternatives */
#define MB_LANE_MAX_CONFIGS (2 * (2 + MB_LANE_MAX_ROWS * (MB_MAX_VARIANTS - 1)))
/* steps in a sweep: every configuration once, all fused up to
 * MB_LANE_MAX_FUSED_STEPS times a mode (mb_lane_fused_steps) */
#define MB_LANE_MAX_FUSED_STEPS 4
#define MB_LANE_MAX_SWEEP (MB_LANE_MAX_CONFIGS + MB_LANE_MODE_COUNT * (MB_LANE_MAX_FUSED_STEPS - 1))

typedef enum mb_lane_mode {
	MB_LANE_EAGER,
	MB_LANE_GRAPH,
	MB_LANE_MODE_COUNT
} mb_lane_mode;

const char *mb_lane_mode_name(mb_lane_mode mode);

typedef enum mb_lane_attention {
	MB_LANE_GQA,
	MB_LANE_MLA
} mb_lane_attention;

typedef struct mb_lane_spec {
	char name[64];
	char pattern[MB_LANE_MAX_BLOCKS + 1];
	int64_t tokens, hidden;
	int64_t sequences;           /* tokens = sequences x their length */
	int64_t heads, kv_heads, head_dim;
	int n_attention;             /* A blocks take these in turn */
	mb_lane_attention attention[MB_LANE_MAX_CHOICES];
	int64_t mla_nope_dim, mla_rope_dim, mla_kv_rank;
	int64_t experts, top_k, expert_ffn;
	int n_moe;                   /* E blocks take these rows in turn */
	char moe[MB_LANE_MAX_CHOICES][MB_LANE_ROW_NAME_MAX];
	int64_t mlp_ffn;
	int n_mlp;                   /* D blocks take these rows in turn */
	char mlp[MB_LANE_MAX_CHOICES][MB_LANE_ROW_NAME_MAX];
	int64_t ssm_heads, ssm_head_dim, ssm_state;
	int64_t recurrent_width;
	int64_t mhc_streams;         /* 0: no mHC */
	int64_t mhc_iterations;
	bool backward;
	int steps;                   /* sweeps per round: timed steps per configuration, mode and round */
	int warmup;                  /* untimed steps before each sweep */
	int min_rounds, max_rounds;
	double budget_s;             /* the lane's wall time, set-up included */
	double resolve;              /* the step delta (a fraction) the rounds must resolve */
	uint64_t seed;               /* of the shuffles */
	int n_modes;
	mb_lane_mode modes[MB_LANE_MODE_COUNT];
} mb_lane_spec;

/* A device buffer of the step (bf16, or int32 for an index fill). */
typedef struct mb_lane_buffer {
	char name[64];               /* "A0 q rotated", "rope cos", "E1 moe_ffn.W1" */
	int64_t elems;
	int elem_bytes;
	/* never written by the step: filled once (weights, tables, the step's
	 * inputs), as `fill`, `lo`, `hi` say */
	bool param;
	mb_fill fill;
	float lo, hi;
} mb_lane_buffer;

typedef enum mb_lane_op_kind {
	MB_LANE_OP_ROW,       /* a catalog row's variant */
	MB_LANE_OP_GEMM,      /* cuBLAS, bf16 with fp32 accumulation */
	MB_LANE_OP_SOFTMAX,   /* the attention stand-in's row launch, in place */
	MB_LANE_OP_MHC_READ,  /* out[t, :] = mean over n of in[t, n, :] */
	MB_LANE_OP_MHC_WRITE, /* out[t, n, :] = in0[t, n, :] + in1[t, :] */
} mb_lane_op_kind;

/* Row-major C[m, n] = op(A)[m, k] op(B)[k, n] + beta C, `batch` times with
 * the strides (elements) between batches; op(X) = X^T when t* is set. The
 * leading dimensions are those of the stored matrices. */
typedef struct mb_lane_gemm {
	int64_t m, n, k, batch;
	bool ta, tb;
	float beta;
	int64_t lda, ldb, ldc;
	int64_t stride_a, stride_b, stride_c;
} mb_lane_gemm;

typedef struct mb_lane_op {
	mb_lane_op_kind kind;
	int block;                   /* index into the pattern */
	bool backward;               /* in the backward pass */
	char label[96];
	const mb_row *row;           /* MB_LANE_OP_ROW */
	int row_index;               /* into mb_lane_recipe.rows */
	int64_t axis[MB_MAX_AXES];
	/* buffer indices: a row's tensors in its order; a GEMM's A, B (and C
	 * when beta is not 0) in, C out; the lane kernels' as above */
	int n_in, n_out;
	int in[MB_MAX_TENSORS], out[MB_MAX_TENSORS];
	mb_lane_gemm g;              /* GEMM; the lane kernels use m (rows), n (width), k (streams) */
	int64_t flops;               /* GEMMs */
} mb_lane_op;

typedef struct mb_lane_recipe {
	int n_ops, cap_ops;
	mb_lane_op *ops;
	int n_buffers, cap_buffers;
	mb_lane_buffer *buffers;
	int n_rows;                  /* distinct catalog rows in the step */
	const mb_row *rows[MB_LANE_MAX_ROWS];
	int calls_per_step[MB_LANE_MAX_ROWS];
	uint64_t device_bytes;       /* every buffer */
	json_t *notes;               /* owned: what the step leaves out or stands in for, and why */
} mb_lane_recipe;

/* Expand `spec` into the ops of one step. Returns 0 or MB_EINVAL with err
 * naming the lane, the block and what is wrong (a letter, a shape a row
 * refuses, a row the catalog lacks). mb_lane_recipe_free releases it
 * (also after a failure, and on a zeroed recipe). */
int mb_lane_recipe_build(mb_lane_recipe *out, const mb_lane_spec *spec, mb_error *err);
void mb_lane_recipe_free(mb_lane_recipe *r);

/* The suite's lanes (`[[lanes]]` tables; see schemas/suite.schema.json),
 * with defaults filled in, each checked by building its recipe. *out is
 * owned by the caller (free()); *n may be 0. Errors name the suite file
 * and the key. */
int mb_lanes_from_suite(mb_lane_spec **out, size_t *n, const mb_suite *suite, mb_error *err);

/* Whether a variant can run in a lane step in `mode`: a CUDA variant (not
 * the reference) that runs bf16 and, in graph mode, does not wait for the
 * host inside a call. */
bool mb_lane_variant_usable(const mb_variant *v, mb_lane_mode mode);

/* One configuration in one mode: the variant each recipe row runs. */
typedef struct mb_lane_config {
	char name[80];               /* "fused", "fallback", "moe_ffn:cublas_grouped" */
	mb_lane_mode mode;
	int row;                     /* the row alone on an alternative, or -1 */
	int variant[MB_LANE_MAX_ROWS]; /* index into rows[i]->variants */
} mb_lane_config;

/* The configurations a lane runs, mode by mode in the spec's order: all
 * fused; all fallback (each row on its first usable fallback variant,
 * else its first usable vendor variant, else fused); then each row alone
 * on each usable alternative (kind fallback or vendor). Returns the count,
 * or -1 when `cap` is too small. */
int mb_lane_configs(mb_lane_config *out, int cap, const mb_lane_recipe *r, const mb_lane_spec *spec);

/* The rows that run fused in every configuration of a mode, each with
 * why: [{row, mode, why}] (new reference). */
json_t *mb_lane_fused_only(const mb_lane_recipe *r, const mb_lane_spec *spec);

/* One configuration in one mode over every round: per step, the GPU time
 * from first launch to last end (events), the kernels' busy time (CUPTI),
 * memcpy and memset time, and the host's wall time. */
typedef struct mb_lane_samples {
	int n;
	double *step_ns, *busy_ns, *memcpy_ns, *memset_ns, *host_ns;
	int *round;                  /* which round each step belongs to */
	double first_step_host_ns;   /* the very first step: loads, library set-up, capture */
} mb_lane_samples;

void mb_lane_samples_free(mb_lane_samples *s);
/* Room for `n` more steps; 0 or MB_ENOMEM. */
int mb_lane_samples_reserve(mb_lane_samples *s, int n);

/* The noise of a mode after some rounds. */
typedef struct mb_lane_noise {
	/* standard deviation of the fused step's round medians over their
	 * mean: the round-to-round noise; NAN under two rounds */
	double fused_round_noise;
	/* the least step delta (a fraction) that every alternative
	 * configuration of the mode resolves against all fused: the largest,
	 * over them, of the between-round threshold (k times the pooled noise
	 * of the two sides' round medians) and either side's median noise;
	 * INFINITY under two rounds */
	double resolvable;
	int worst;                   /* the configuration that sets it, or -1 */
	/* per configuration of the mode: its own least resolvable delta is
	 * within `resolve` (after min_rounds). A settled configuration sits
	 * out the rounds after, so that the budget goes to the ones still
	 * unresolved; all fused never settles (every delta is against it),
	 * and one that no longer resolves as the fused rounds grow comes
	 * back. */
	bool settled[MB_LANE_MAX_CONFIGS];
	int n_settled;
} mb_lane_noise;

/* `samples[i]` belongs to `configs[i]`; `spec` gives min_rounds and
 * resolve, for `settled`. Returns 0 or a negative MB_E*. */
int mb_lane_noise_of(mb_lane_noise *out, const mb_lane_config *configs, const mb_lane_samples *samples, int n,
	mb_lane_mode mode, const mb_lane_spec *spec, mb_error *err);

/* Where a mode's rounds stand. */
typedef struct mb_lane_progress {
	int rounds;                  /* done */
	const char *stopped;         /* NULL while going on; "target", "budget" or "max_rounds" */
	mb_lane_noise noise;         /* after the last round */
	double round_ns;             /* its configurations' wall time in the last round */
	double wall_ns;              /* in every round */
} mb_lane_progress;

/* After a round of `p`'s mode, with its noise: stop at the target (after
 * min_rounds) or at max_rounds. */
void mb_lane_after_round(mb_lane_progress *p, const mb_lane_spec *spec, const mb_lane_noise *noise);

/* Before the next round: whether it fits the budget, `elapsed_ns` into
 * the lane, its length guessed from each going mode's last round. When it
 * does not, every going mode stops with "budget". Returns whether a round
 * is to run (some mode goes on and it fits). */
bool mb_lane_next_round(mb_lane_progress *p, const mb_lane_spec *spec, double elapsed_ns);

/* How many steps all fused takes in a sweep beside one of each of
 * `alternatives` configurations still going in its mode: the square root
 * of their count, rounded (1 to MB_LANE_MAX_FUSED_STEPS). Every delta is
 * against all fused, so its median's noise enters every comparison; for
 * k comparisons with one control, the control's share that makes them
 * most precise for a given number of steps is sqrt(k) times each
 * treatment's (Dunnett's allocation). */
int mb_lane_fused_steps(int alternatives);

/* order[0 .. n-1]: a permutation of 0 .. n-1, the same for the same seed
 * and number (a sweep's, counted over the lane), different between
 * numbers. */
void mb_lane_shuffle(int *order, int n, uint64_t seed, int number);

/* What a lane measured, for the receipt. */
typedef struct mb_lane_outcome {
	const mb_lane_config *configs;
	int n_configs;
	const mb_lane_samples *samples; /* one per configuration */
	mb_lane_progress progress[MB_LANE_MODE_COUNT];
	double wall_ns;              /* the whole lane, set-up included; 0: not measured */
} mb_lane_outcome;

/* The receipt's lane object (new reference), from measured samples
 * (exposed for tests and for the device code). */
json_t *mb_lane_json(const mb_lane_spec *spec, const mb_lane_recipe *r, const mb_lane_outcome *o);

/* Run the lane on the device (in the current child): every configuration
 * in every mode. *out is the receipt's lane object (owned by the caller).
 * Returns 0, or a negative MB_E* code; a CUDA failure is recorded in the
 * object as the lane's error, not returned. */
int mb_lane_run(json_t **out, const mb_lane_spec *spec, mb_error *err);

#endif
