/* Catalog verdicts within one receipt (src/README.md, "Verdicts", has the
 * vocabulary and the rules in prose; this header is their contract).
 *
 * A pair is one shape of a row in one dtype and mode: the fused case
 * against its best alternative, the fastest case of the same work whose
 * variant is a fallback or a vendor library (correct, timed, not skipped).
 * The fallback case of the same work is kept beside it, so that printers
 * show both speedups. A pair's outcome:
 *
 *   win (time)    the fused case is FASTER than the best alternative (rank
 *                 test p < alpha and a shift above the minimum effect,
 *                 compare.h);
 *   win (memory)  not faster, but the fused variant needs at least
 *                 MB_VERDICT_MEMORY_MIN_FRACTION less scratch memory than
 *                 the best alternative, and at least
 *                 MB_VERDICT_MEMORY_MIN_BYTES less, and the row trades for
 *                 memory (its descriptor says "memory" or "both"; receipts
 *                 made before rows declared it count as "both");
 *   same, loss, noisy  SAME, SLOWER, AMBIGUOUS otherwise.
 *
 * Then one word per row:
 *
 *   keep         correct everywhere, a fallback present and correct, a time
 *                win on every pair, and run-level evidence: in every lane
 *                step that holds the row, the step with the row alone on
 *                its best alternative is significantly slower
 *                (MB_EVIDENCE_LANES). A row in no lane is "keep (isolated
 *                evidence only)"; one whose lane steps show no loss but not
 *                every win is "keep on isolated evidence; lanes
 *                inconclusive" (MB_EVIDENCE_LANES_INCONCLUSIVE).
 *   conditional  wins on some pairs, or wins memory at the cost of time:
 *                `condition` always says where the kernel wins as a
 *                selector a user can act on ("wins at T >= 16384, bf16"),
 *                the simplest conjunction of modes, dtypes, families and
 *                one threshold on a shape axis that separates the wins from
 *                the rest, and/or the resource it saves ("saves 3.94 GiB
 *                (98%) of scratch at 1.35x the time of materialized"). A
 *                row that wins every isolated pair but loses in some lane
 *                step is conditional on the lane modes where it wins, or
 *                drop where it wins in none.
 *   drop         no win on any pair (the verdict names the alternative that
 *                beats it and where), or a wrong answer from the fused
 *                variant or the fallback.
 *   ambiguous    no win, no loss, some pair too noisy to say.
 *   not enough evidence  no fused case with an alternative (a CPU receipt
 *                has only reference variants).
 *
 * Time saved (keep and conditional only). One mode and one dtype: the first
 * of cold, hot, graph and then of bf16, fp16, fp32 in which the row has a
 * winning pair (else any pair). A pair saves alternative median - fused
 * median per call when it wins on time, zero otherwise.
 *   per step  sum of weight x saved per call over the pairs whose suite
 *             family gave `weight` explicitly (calls per training step);
 *             other pairs are counted in saved_unweighted.
 *   per call  no pair has an explicit weight: the largest saving per call,
 *             with its shape.
 * Receipts without "weight_source" take any weight but 1 as explicit.
 *
 * Model speedup of a pair: alternative bytes over fused bytes (throughput
 * read_bytes + write_bytes when both have them, else bytes); when those are
 * equal, the alternative's launches over the fused variant's. Old receipts
 * (bytes only) counted the same bytes for every variant: "model n/a".
 *
 * Status: each row's catalog status as built (the receipt's "catalog") is
 * carried beside its verdict, with whether the two agree (status_note).
 *
 * A set owns its rows; the receipt it was computed from must outlive it
 * (pairs borrow its cases).
 */
#ifndef MB_RECEIPTS_VERDICT_H
#define MB_RECEIPTS_VERDICT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "receipts/error.h"
#include "receipts/compare.h"
#include "receipts/policy.h"

#define MB_VERDICT_TEXT_MAX 512
#define MB_VERDICT_SHAPE_MAX 256
#define MB_VERDICT_NAME_MAX 64
/* A memory win: the fused variant's scratch at most (1 - this) of the
 * alternative's ... */
#define MB_VERDICT_MEMORY_MIN_FRACTION 0.5
/* ... and this much less in absolute terms: a row whose alternative holds a
 * few MiB saves nothing a training step would notice. */
#define MB_VERDICT_MEMORY_MIN_BYTES (64ll << 20)

typedef enum mb_verdict_kind {
	MB_VERDICT_KEEP,
	MB_VERDICT_CONDITIONAL,
	MB_VERDICT_DROP,
	MB_VERDICT_AMBIGUOUS,
	MB_VERDICT_NOT_ENOUGH_EVIDENCE
} mb_verdict_kind;

/* What a verdict rests on. */
typedef enum mb_verdict_evidence {
	MB_EVIDENCE_NONE,               /* no fused case with an alternative */
	MB_EVIDENCE_ISOLATED,           /* isolated cases only: no lane holds the row */
	MB_EVIDENCE_LANES,              /* every lane step holding the row agrees */
	MB_EVIDENCE_LANES_INCONCLUSIVE  /* lanes hold the row; no loss, not every step a win */
} mb_verdict_evidence;

/* What the fused kernel is for (the row descriptor's `trades`). */
typedef enum mb_verdict_trade {
	MB_TRADE_UNDECLARED,  /* a receipt made before rows declared it: time or memory */
	MB_TRADE_TIME,
	MB_TRADE_MEMORY,
	MB_TRADE_BOTH
} mb_verdict_trade;

/* How the time saved is expressed (see the header comment). */
typedef enum mb_saved_basis {
	MB_SAVED_NONE,
	MB_SAVED_PER_STEP,
	MB_SAVED_PER_CALL
} mb_saved_basis;

/* How a pair's model speedup was obtained. */
typedef enum mb_model_basis {
	MB_MODEL_NONE,         /* "model n/a" */
	MB_MODEL_BYTES,
	MB_MODEL_LAUNCHES
} mb_model_basis;

typedef enum mb_pair_outcome {
	MB_PAIR_WIN_TIME,
	MB_PAIR_WIN_MEMORY,
	MB_PAIR_SAME,
	MB_PAIR_LOSS,
	MB_PAIR_NOISY
} mb_pair_outcome;

/* "keep", "conditional", "drop", "ambiguous", "not enough evidence". */
const char *mb_verdict_kind_name(mb_verdict_kind kind);
/* "none", "isolated", "lanes", "lanes inconclusive". */
const char *mb_verdict_evidence_name(mb_verdict_evidence evidence);
/* "undeclared", "time", "memory", "both". */
const char *mb_verdict_trade_name(mb_verdict_trade trade);
/* "per step", "per call", "none". */
const char *mb_verdict_saved_basis_name(mb_saved_basis basis);
/* "bytes", "launches", "none". */
const char *mb_verdict_model_basis_name(mb_model_basis basis);
/* "win (time)", "win (memory)", "same", "loss", "noisy". */
const char *mb_verdict_outcome_name(mb_pair_outcome outcome);

/* The scratch memory a case's variant needed beyond its inputs and outputs,
 * measured (memory.scratch_bytes; memory.extra_bytes in receipts before
 * schema version 2); -1 where the receipt has none. */
int64_t mb_verdict_scratch_bytes(const json_t *kase);

/* One shape of a row in one dtype and mode (see the header comment). */
typedef struct mb_verdict_pair {
	const json_t *fused;     /* borrowed from the receipt */
	const json_t *alt;       /* the best alternative: the base of cmp */
	const json_t *fallback;  /* the fallback case of the same work, or NULL; may be alt */
	mb_comparison cmp;       /* FASTER = the fused variant wins */
	mb_pair_outcome outcome;
	double speedup;          /* alt median / fused median; NaN without both */
	double speedup_fallback; /* fallback median / fused median; NaN without a fallback */
	double model_speedup;    /* against alt; NaN when model_basis is MB_MODEL_NONE */
	mb_model_basis model_basis;
	double saved_ns_per_call; /* alt - fused median on a time win, else 0; NaN without medians */
	int64_t fused_scratch_bytes; /* -1: not measured */
	int64_t alt_scratch_bytes;
	double weight;           /* the fused case's calls per step */
	bool weight_explicit;    /* the suite gave it (or the stop-gap says so) */
} mb_verdict_pair;

typedef struct mb_row_verdict {
	char *row;
	char block[2];
	mb_verdict_kind kind;
	mb_verdict_evidence evidence;
	mb_verdict_trade trade;
	char reason[MB_VERDICT_TEXT_MAX];
	char condition[MB_VERDICT_TEXT_MAX]; /* conditional: where it wins, what it saves; "" otherwise */
	char families[MB_VERDICT_TEXT_MAX];  /* families every pair of which won */
	/* The alternative that was best most often, and a summary of what the
	 * fused kernel does against it ("1.14x slower than cublas_grouped at
	 * nam56r_moe/T=4096,..."). */
	char best_alt[MB_VERDICT_NAME_MAX];
	mb_verdict_pair *pairs;
	size_t n_pairs;
	size_t n_outcome[MB_PAIR_NOISY + 1];
	/* Memory, at the largest pair: what the fused variant saves against
	 * the best alternative (negative: costs), and the fraction of the
	 * alternative's scratch. NaN where either side was not measured. */
	double memory_saved_bytes;
	double memory_saved_fraction;
	/* time saved, in saved_mode and saved_dtype */
	mb_saved_basis saved_basis;
	double saved_ns;                     /* per step: the sum; per call: the largest */
	char saved_mode[16];
	char saved_dtype[8];
	char saved_shape[MB_VERDICT_SHAPE_MAX]; /* per call: the shape of the largest */
	size_t saved_unweighted;             /* per step: pairs left out, no explicit weight */
	/* The pair at the row's largest shape in saved_mode and saved_dtype (the
	 * most alternative bytes), or NULL; borrowed from `pairs`. */
	const mb_verdict_pair *largest;
	/* Run-level evidence: the lane steps that hold the row, the row alone
	 * on its best alternative against all fused. */
	size_t lane_steps, lane_wins, lane_losses;
	bool lane_win;                       /* lane_steps > 0 and every one a win */
	double lane_saved_ns;                /* the largest significant delta per step */
	double lane_saved_fraction;          /* of that lane's fused step */
	char lane_text[MB_VERDICT_TEXT_MAX]; /* one line per lane and mode, "; "-joined */
	char lane_won[MB_VERDICT_TEXT_MAX];  /* the lane steps it wins: "nam56r (graph), dense (graph)" */
	/* The row's catalog status as built, from the receipt ("" when the
	 * receipt predates it), its condition, and whether the verdict agrees:
	 * status_note says how ("agrees", "demote?", "promotion to keep
	 * supported", ...). */
	char status[16];
	char status_condition[MB_VERDICT_TEXT_MAX];
	bool status_agrees;
	char status_note[MB_VERDICT_TEXT_MAX];
} mb_row_verdict;

typedef struct mb_verdict_set {
	mb_row_verdict *rows;
	size_t n_rows;
	bool lanes_present;
	char lanes_note[MB_VERDICT_TEXT_MAX];
} mb_verdict_set;

/* Verdicts for every row of `receipt`, rows in the order they first appear. */
int mb_verdict_compute(mb_verdict_set *out, const json_t *receipt, const mb_policy *policy, mb_error *err);

void mb_verdict_set_free(mb_verdict_set *set);

/* The row named `row`, or NULL. Borrowed. */
const mb_row_verdict *mb_verdict_find(const mb_verdict_set *set, const char *row);

/* A wrong answer: correctness failed, or the case did not finish. A skipped
 * case says nothing either way. */
bool mb_verdict_case_wrong(const json_t *kase);

/* Whether a verdict's condition is the one a status names. The words
 * decide: a condition on shapes, modes or dtypes ("wins at T >= 32768")
 * must be the very text; a memory trade ("saves 3.84 GiB (97%) of scratch
 * at 1.84x the time of materialized") also where only its figures differ
 * (the unit and the alternative stay), since they move a little from run
 * to run while the trade stays (the gate's memory_regression finding
 * watches the bytes themselves). */
bool mb_verdict_condition_same(const char *verdict_condition, const char *status_condition);

/* "family/A=1,B=2" label of a case's shape, for printers. */
void mb_verdict_shape_label(char *buf, size_t len, const json_t *kase);

/* ---- the words every printer shows, so that they say the same ---- */

/* The verdict as shown: "keep", "keep (isolated evidence only)", "keep on
 * isolated evidence; lanes inconclusive", "conditional (wins at T >=
 * 32768)", "drop", ...; "-" for NULL. */
void mb_verdict_label(char *buf, size_t len, const mb_row_verdict *v);
/* "32.08 us per step (bf16, hot)", "up to 1.234 ms per call (bf16, cold, at
 * dense_mlp_14336/R=32768,C=14336)", or "-" when there is no saving. */
void mb_verdict_saved_text(char *buf, size_t len, const mb_row_verdict *v);
/* Against the best alternative at the largest shape: "1.96x vs fallback
 * (model 2.00x) at dense_mlp_14336/R=32768,C=14336 (bf16, cold)"; "-"
 * without a largest pair. */
void mb_verdict_speedup_text(char *buf, size_t len, const mb_row_verdict *v);
/* Against the fallback at the same shape: "1.18x vs standard", or "-" where
 * the best alternative is the fallback or there is none. */
void mb_verdict_fallback_text(char *buf, size_t len, const mb_row_verdict *v);
/* "saves 3.94 GiB (98%)", "costs 12.0 MiB more (+4%)", "same", or "-" where
 * not measured; against the best alternative at the largest shape. */
void mb_verdict_memory_text(char *buf, size_t len, const mb_row_verdict *v);
/* "model 1.60x", "model 4.00x (launches)" or "model n/a". */
void mb_verdict_model_text(char *buf, size_t len, const mb_verdict_pair *p);
/* "experimental", "conditional (wins at T >= 32768)", or "-" when the
 * receipt has no status; where the verdict disagrees, " ! " and what to do:
 * "experimental ! demote to drop?". */
void mb_verdict_status_text(char *buf, size_t len, const mb_row_verdict *v);

#endif
