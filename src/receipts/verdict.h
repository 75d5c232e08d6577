/* Catalog verdicts within one receipt: each row's fused variant against its
 * fallback at the same shape, dtype and mode (a "pair"), then one word per
 * row (src/README.md, Verdicts). A pair wins when the fused side is FASTER
 * (rank test p < alpha and a shift above the minimum effect, compare.h).
 *
 *   keep         correct everywhere, fallback present and correct, and a
 *                significant win on every pair (every mode, dtype and
 *                shape), and in every lane step that holds the row the
 *                row on its fallback significantly slower (run-level
 *                evidence, MB_EVIDENCE_LANES). A row in no lane keeps
 *                MB_EVIDENCE_ISOLATED and is shown as
 *                "keep (isolated evidence only)" by every printer: table,
 *                Markdown, CSV and HTML print that label; JSON writes
 *                "verdict": "keep", "evidence": "isolated" and the label
 *                in "label".
 *   conditional  significant wins on some pairs, no loss; the other pairs
 *                SAME or the fused case has no fallback. `condition` names
 *                what the win depends on, the simplest of: one mode
 *                ("wins in cold mode only"), dtypes ("wins in bf16 and
 *                fp16, not fp32"), families ("wins on family x only") or a
 *                threshold on one shape axis ("wins at T >= 32768"); when
 *                none of them separates the wins from the rest, the
 *                winning cases are listed.
 *   drop         no pair wins significantly, a loss on any pair, or a wrong
 *                answer from either variant;
 *   ambiguous    some pair too noisy to say;
 *   not enough evidence  no fused/fallback pair to compare (a CPU receipt
 *                has only reference variants).
 *
 * Time saved (keep and conditional only; none for the others). One mode and
 * one dtype, picked whatever their order in the receipt: the first of cold,
 * hot, graph with a pair, then the first of bf16, fp16, fp32 in it. A pair
 * saves fallback median - fused median per call when it wins significantly,
 * zero otherwise.
 *   per step  sum of weight x saved per call over the pairs whose suite
 *             family gave `weight` explicitly (the weight is the family's
 *             calls per training step); pairs with the default weight are
 *             alternative shapes, not parts of one step, and are counted in
 *             saved_unweighted instead.
 *   per call  no pair has an explicit weight: the largest saving per call,
 *             with its shape.
 * Stop-gap: receipts do not yet say whether a weight was given; a case with
 * "weight_source" uses it ("suite" = explicit), otherwise weight != 1 is
 * taken as explicit and 1 as the default.
 *
 * Model speedup of a pair: fallback bytes over fused bytes (throughput
 * read_bytes + write_bytes when both sides have them, else bytes); when the
 * read/write bytes are present and equal, the fallback's launches over the
 * fused variant's. Old receipts (bytes only) counted the same bytes for both
 * variants, so equal bytes there give no model ("model n/a").
 *
 * A set owns its rows; the receipt it was computed from must outlive it
 * (pairs borrow its cases).
 */
#ifndef MB_RECEIPTS_VERDICT_H
#define MB_RECEIPTS_VERDICT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "receipts/error.h"
#include "receipts/compare.h"
#include "receipts/policy.h"

#define MB_VERDICT_TEXT_MAX 512
#define MB_VERDICT_SHAPE_MAX 256

typedef enum mb_verdict_kind {
	MB_VERDICT_KEEP,
	MB_VERDICT_CONDITIONAL,
	MB_VERDICT_DROP,
	MB_VERDICT_AMBIGUOUS,
	MB_VERDICT_NOT_ENOUGH_EVIDENCE
} mb_verdict_kind;

/* What a verdict rests on: a row that runs in a lane of the receipt has
 * run-level evidence (see lane_evidence in verdict.c). */
typedef enum mb_verdict_evidence {
	MB_EVIDENCE_NONE,      /* no fused/fallback pair */
	MB_EVIDENCE_ISOLATED,  /* isolated cases only */
	MB_EVIDENCE_LANES      /* run-level lanes agree with the cases */
} mb_verdict_evidence;

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

/* "keep", "conditional", "drop", "ambiguous", "not enough evidence". */
const char *mb_verdict_kind_name(mb_verdict_kind kind);
/* "none", "isolated", "lanes". */
const char *mb_verdict_evidence_name(mb_verdict_evidence evidence);
/* "per step", "per call", "none". */
const char *mb_verdict_saved_basis_name(mb_saved_basis basis);
/* "bytes", "launches", "none". */
const char *mb_verdict_model_basis_name(mb_model_basis basis);

/* One shape of a row in one dtype and mode: fused against fallback (base =
 * fallback). */
typedef struct mb_verdict_pair {
	const json_t *fused;     /* borrowed from the receipt */
	const json_t *fallback;
	mb_comparison cmp;       /* FASTER = the fused variant wins */
	double speedup;          /* fallback median / fused median; NaN without both */
	double model_speedup;    /* NaN when model_basis is MB_MODEL_NONE */
	mb_model_basis model_basis;
	double saved_ns_per_call; /* fallback - fused median when FASTER, else 0; NaN without medians */
	double weight;           /* the fused case's calls per step */
	bool weight_explicit;    /* the suite gave it (or the stop-gap says so) */
} mb_verdict_pair;

typedef struct mb_row_verdict {
	char *row;
	char block[2];
	mb_verdict_kind kind;
	mb_verdict_evidence evidence;
	char reason[MB_VERDICT_TEXT_MAX];
	char condition[MB_VERDICT_TEXT_MAX]; /* conditional: what the win depends on; "" otherwise */
	char families[MB_VERDICT_TEXT_MAX];  /* families every pair of which won */
	mb_verdict_pair *pairs;
	size_t n_pairs;
	/* time saved, in saved_mode and saved_dtype */
	mb_saved_basis saved_basis;
	double saved_ns;                     /* per step: the sum; per call: the largest */
	char saved_mode[16];
	char saved_dtype[8];
	char saved_shape[MB_VERDICT_SHAPE_MAX]; /* per call: the shape of the largest */
	size_t saved_unweighted;             /* per step: pairs left out, no explicit weight */
	/* Legacy, for mb_print_saved (print_common.c) until it goes: true and
	 * equal to saved_ns only when saved_basis is MB_SAVED_PER_STEP. */
	bool saved_known;
	double saved_ns_per_step;
	/* The pair at the row's largest shape in saved_mode and saved_dtype (the
	 * most fallback bytes), or NULL; borrowed from `pairs`. */
	const mb_verdict_pair *largest;
	/* Run-level evidence (evidence == MB_EVIDENCE_LANES): does the step of
	 * every lane and mode that holds the row get significantly slower with
	 * the row on its fallback, and by how much per step at most. */
	bool lane_win;
	double lane_saved_ns;                /* the largest significant delta per step */
	double lane_saved_fraction;          /* of that lane's fused step */
	char lane_text[MB_VERDICT_TEXT_MAX]; /* one line per lane and mode, "; "-joined */
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

/* "family/A=1,B=2" label of a case's shape, for printers. */
void mb_verdict_shape_label(char *buf, size_t len, const json_t *kase);

/* ---- the words every printer shows, so that they say the same ---- */

/* The verdict as shown: "keep (isolated evidence only)", "conditional (wins
 * at T >= 32768)", "drop", ...; "-" for NULL. */
void mb_verdict_label(char *buf, size_t len, const mb_row_verdict *v);
/* "32.08 us per step (bf16, hot)", "up to 1.234 ms per call (bf16, cold, at
 * dense_mlp_14336/R=32768,C=14336)", or "-" when there is no saving. */
void mb_verdict_saved_text(char *buf, size_t len, const mb_row_verdict *v);
/* "9.61x (model n/a) at dense_attention/T=32768,Hq=32,Hk=8,D=128 (bf16,
 * cold)", "-" without a largest pair. */
void mb_verdict_speedup_text(char *buf, size_t len, const mb_row_verdict *v);
/* "model 1.60x", "model 4.00x (launches)" or "model n/a". */
void mb_verdict_model_text(char *buf, size_t len, const mb_verdict_pair *p);

#endif
