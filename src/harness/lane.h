/* Lanes: a training-step slice strung from catalog rows and GEMMs, run for
 * many steps, so that a row's win is measured where it sits.
 *
 * A lane names a block pattern, one letter per block (A attention, M state
 * space, E expert, R recurrent) and a shape. Each letter expands to a
 * recipe (mb_lane_recipe):
 *   A: residual_rmsnorm -> Q, K, V projections (three GEMMs) -> rope_qk
 *      -> attention core -> output projection. The attention core is a
 *      labelled stand-in with causal attention's FLOPs: one GEMM of a
 *      [T, T] matrix by [T, Hq*D] (2 T^2 Hq D FLOPs, what QK^T and PV cost
 *      under a causal mask) and a softmax-like row launch; attention itself
 *      is not a catalog row. (An MLA block, with mla_partial_rope, is not
 *      built yet.)
 *   E: residual_rmsnorm -> router GEMM -> moe_ffn
 *   M: residual_rmsnorm -> in projection GEMM -> ssm_scan -> out projection
 *   R: residual_rmsnorm -> recurrent_scan
 * A row the catalog does not have is left out of the step and named in the
 * lane's notes; nothing stands in for it.
 *
 * The lane runs every configuration (all rows fused, all fallback, and each
 * row alone on its fallback) in each mode (eager: launch by launch; graph:
 * the step captured once and replayed), interleaved over rounds, so that a
 * row's run-level delta is its configuration's step time against the
 * all-fused one, with the spread between rounds.
 */
#ifndef MB_HARNESS_LANE_H
#define MB_HARNESS_LANE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness/suite.h"
#include "receipts/error.h"

#define MB_LANE_MAX_BLOCKS 64
#define MB_LANE_MAX_OPS 512
#define MB_LANE_MAX_ROWS 16

typedef enum mb_lane_mode {
	MB_LANE_EAGER,
	MB_LANE_GRAPH,
	MB_LANE_MODE_COUNT
} mb_lane_mode;

const char *mb_lane_mode_name(mb_lane_mode mode);

typedef struct mb_lane_spec {
	char name[64];
	char pattern[MB_LANE_MAX_BLOCKS + 1];
	int64_t tokens, hidden, heads, kv_heads, head_dim, experts;
	int steps;      /* timed steps per configuration, mode and round */
	int warmup;     /* untimed steps first */
	int rounds;     /* interleaved rounds over the configurations */
	int n_modes;
	mb_lane_mode modes[MB_LANE_MODE_COUNT];
} mb_lane_spec;

/* The buffers a lane step works on. Every op reads and writes these by
 * index; their sizes come from the lane shape. */
typedef enum mb_lane_buffer {
	LB_STREAM,    /* the block's input, then its output [T, H] */
	LB_RESIDUAL,  /* the residual stream: r of even blocks, h of odd ones */
	LB_RESIDUAL2, /* and the other way round [T, H] */
	LB_NORMED,    /* y [T, H] */
	LB_NORM_W,    /* RMSNorm weight [1, H] */
	LB_Q, LB_K, LB_V,           /* [T, Hq*D], [T, Hk*D], [T, Hk*D] */
	LB_Q_ROT, LB_K_ROT,         /* after RoPE */
	LB_COS, LB_SIN,             /* [T, D/2] */
	LB_SCORES,    /* the attention stand-in's [T, T] */
	LB_ATTN,      /* attention output [T, Hq*D] */
	LB_WQ, LB_WK, LB_WV, LB_WO, /* projections */
	LB_WROUTER, LB_ROUTER,      /* [H, E], [T, E] */
	LB_WIN, LB_WOUT, LB_INNER,  /* state-space projections and their [T, 2H] */
	LB_COUNT
} mb_lane_buffer;

typedef enum mb_lane_op_kind {
	MB_LANE_OP_ROW,      /* a catalog row's variant */
	MB_LANE_OP_GEMM,     /* C[m, n] = A[m, k] B[k, n], bf16, fp32 accumulate */
	MB_LANE_OP_SOFTMAX,  /* the attention stand-in's row launch */
} mb_lane_op_kind;

typedef struct mb_lane_op {
	mb_lane_op_kind kind;
	int block;                   /* index into the pattern */
	char label[64];
	const mb_row *row;           /* MB_LANE_OP_ROW */
	int64_t axis[MB_MAX_AXES];
	int n_in, n_out;
	mb_lane_buffer in[MB_MAX_TENSORS], out[MB_MAX_TENSORS];
	int64_t m, n, k;             /* MB_LANE_OP_GEMM: a, b -> c */
	mb_lane_buffer a, b, c;
	int64_t flops;               /* the GEMMs' and stand-in's */
} mb_lane_op;

typedef struct mb_lane_recipe {
	int n_ops;
	mb_lane_op ops[MB_LANE_MAX_OPS];
	int n_rows;                  /* distinct catalog rows in the step */
	const mb_row *rows[MB_LANE_MAX_ROWS];
	int calls_per_step[MB_LANE_MAX_ROWS];
	int64_t buffer_elems[LB_COUNT];
	json_t *notes;               /* owned: what was left out and why */
} mb_lane_recipe;

/* Expand `spec` into the ops of one step. Returns 0 or MB_EINVAL with err
 * naming the lane and the letter. */
int mb_lane_recipe_build(mb_lane_recipe *out, const mb_lane_spec *spec, mb_error *err);
void mb_lane_recipe_free(mb_lane_recipe *r);

/* The suite's lanes (`[[lanes]]` tables; see schemas/suite.schema.json),
 * with defaults filled in. *out is owned by the caller (free()); *n may be
 * 0. Errors name the suite file and the key. */
int mb_lanes_from_suite(mb_lane_spec **out, size_t *n, const mb_suite *suite, mb_error *err);

/* Which variant each of the recipe's rows runs in one configuration:
 * fallback[i] for recipe row i. */
typedef struct mb_lane_config {
	char name[80];               /* "fused", "fallback", "fallback:rope_qk" */
	bool fallback[MB_LANE_MAX_ROWS];
} mb_lane_config;

/* The configurations a lane runs: all fused, all fallback, and each row on
 * its fallback alone (only rows that have both variants). */
int mb_lane_configs(mb_lane_config *out, int cap, const mb_lane_recipe *r);

/* One configuration in one mode over every round: per step, the GPU time
 * from first launch to last end (events), the kernels' busy time (CUPTI),
 * memcpy and memset time, and the host's wall time. */
typedef struct mb_lane_samples {
	int n;
	double *step_ns, *busy_ns, *memcpy_ns, *memset_ns, *host_ns;
	int *round;                  /* which round each step belongs to */
	double first_step_host_ns;   /* the very first step, warm-up included */
} mb_lane_samples;

void mb_lane_samples_free(mb_lane_samples *s);

/* Run the lane on the device (in the current child): every configuration
 * in every mode. *out is the receipt's lane object (owned by the caller).
 * Returns 0, or a negative MB_E* code; a CUDA failure is recorded in the
 * object as the lane's error, not returned. */
int mb_lane_run(json_t **out, const mb_lane_spec *spec, mb_error *err);

/* Build the receipt's lane object from measured samples (exposed for tests
 * and for the device code): samples[c][m] for configuration c, mode m. */
json_t *mb_lane_json(const mb_lane_spec *spec, const mb_lane_recipe *r, const mb_lane_config *configs, int n_configs,
	mb_lane_samples (*samples)[MB_LANE_MODE_COUNT]);

#endif
