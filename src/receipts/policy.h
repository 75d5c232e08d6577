/* The verdict policy: thresholds for diff, gate and verdict, per-row
 * overrides, and which findings fail the gate.
 *
 * Defaults are built in; a policy.toml (schemas/policy.schema.json) replaces
 * any of them. An mb_policy owns its row table: release it with
 * mb_policy_free.
 */
#ifndef MB_RECEIPTS_POLICY_H
#define MB_RECEIPTS_POLICY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "receipts/error.h"

#define MB_POLICY_DEFAULT_ALPHA 0.01
#define MB_POLICY_DEFAULT_MIN_EFFECT 0.02
#define MB_POLICY_DEFAULT_NOISE_CEILING 0.05
/* No between-run floor unless a policy (or `megabench noise-floor`) sets
 * one: today's behaviour. */
#define MB_POLICY_DEFAULT_NOISE_FLOOR 0.0
/* Under identical code only a change this large fails (as
 * machine_changed): far above the 2% minimum effect, so that ordinary
 * drift of a machine between runs passes, yet a case made 1.5x slower by
 * something outside the code does not. */
#define MB_POLICY_DEFAULT_IDENTICAL_CODE_MAX_CHANGE 0.10
/* A case whose variant needs this much more scratch memory than in the base
 * (relative) is a memory regression, like a slower time. */
#define MB_POLICY_DEFAULT_MEMORY_MAX_GROWTH 0.05
/* A lane step runs whole rounds until its median resolves 1% of the step
 * (harness/lane.h), so a row's run-level delta counts from half that: the
 * isolated cases' 2% would call every resolved 1% delta SAME. */
#define MB_POLICY_DEFAULT_LANE_MIN_EFFECT 0.005
#define MB_POLICY_SOURCE_MAX 512
/* The largest policy file read (mb_policy_load, and validate): a policy is
 * a few dozen lines (noise-floor writes one table per row), so this only
 * stops a mistaken path before parsing it costs the memory. The same cap
 * as a suite's. */
#define MB_POLICY_MAX_BYTES ((size_t)16 << 20)

/* Kinds of finding a diff can produce; the policy's [gate] fail_on names
 * them with mb_finding_kind_name. */
typedef enum mb_finding_kind {
	MB_FINDING_REGRESSION,
	MB_FINDING_WRONG_ANSWER,
	MB_FINDING_TOLERANCE_CHANGE,
	MB_FINDING_LAUNCH_CHANGE,
	MB_FINDING_KERNEL_CHANGE,
	MB_FINDING_MISSING_CASE,
	MB_FINDING_MISSING_FALLBACK,
	MB_FINDING_AMBIGUOUS,
	MB_FINDING_NEW_CASE,
	MB_FINDING_STILL_WRONG,      /* wrong in base and still wrong in head */
	MB_FINDING_MISSING_FIELD,    /* a field of the base case is gone from the head case */
	MB_FINDING_STATUS_CHANGE,    /* status ok in base, skipped in head */
	MB_FINDING_MACHINE_CHANGED,  /* identical code, yet the time moved beyond the loose bound */
	MB_FINDING_AMBIGUOUS_FASTER, /* ambiguous, but the estimate is a speed-up */
	MB_FINDING_UNSUPPORTED_PROMOTION, /* a head status the head's evidence does not show (promotion.h) */
	MB_FINDING_MEMORY_REGRESSION, /* more scratch memory than memory_max_growth allows */
	MB_FINDING_NO_BINARY_PROVENANCE,  /* a receipt without its binary's source ids: statistics on every row */
	MB_FINDING_WEIGHT_CHANGE,    /* a case's weight (calls per step) changed */
	MB_FINDING_VARIANT_KIND_CHANGE, /* a variant's kind changed (fused, fallback, vendor, reference) */
	MB_FINDING_KIND_COUNT
} mb_finding_kind;

const char *mb_finding_kind_name(mb_finding_kind kind);
/* MB_FINDING_KIND_COUNT when `name` is unknown. */
mb_finding_kind mb_finding_kind_parse(const char *name);

typedef struct mb_thresholds {
	double alpha;         /* significance level of the rank test */
	double min_effect;    /* smallest relative change that counts */
	double noise_ceiling; /* relative noise above which a side is too noisy */
	double noise_floor;   /* between-run noise, relative: a change must exceed it too */
	double identical_code_max_change; /* identical code: a larger change is machine_changed */
	double memory_max_growth; /* scratch memory growing more than this is a regression */
	double lane_min_effect; /* min_effect of a lane step's delta (verdicts' run-level evidence) */
} mb_thresholds;

typedef struct mb_policy_row {
	char *name;
	mb_thresholds t;      /* already merged over the top-level values */
} mb_policy_row;

typedef struct mb_policy {
	mb_thresholds t;
	mb_policy_row *rows;
	size_t n_rows;
	unsigned fail_on;     /* bit (1u << kind) set: that finding fails the gate */
	/* Where every file a row's code depends on is unchanged, as both
	 * binaries embedded it, call its cases SAME without statistics unless
	 * they moved beyond the loose bound (false: always run the statistics;
	 * [gate] identical_code_shortcut, or --always-test). */
	bool identical_code_shortcut;
	char source[MB_POLICY_SOURCE_MAX]; /* the file it came from, or "built-in defaults" */
} mb_policy;

/* The built-in policy (nothing to free, but mb_policy_free is harmless). */
void mb_policy_defaults(mb_policy *out);

/* `t` as a lane step's delta is judged: min_effect is lane_min_effect
 * (the lane's own deltas and the verdict's run-level evidence alike). */
mb_thresholds mb_policy_lane_thresholds(const mb_thresholds *t);

/* Read policy.toml at `path` (mb_toml_parse_file, at most
 * MB_POLICY_MAX_BYTES), validate it with mb_schema_builtin("policy") and
 * merge it over the defaults. Errors name the file and the key. The one
 * policy loader: every command and the fuzzer come through it. */
int mb_policy_load(mb_policy *out, const char *path, mb_error *err);

/* The same from an already parsed document; `where` names it in errors. */
int mb_policy_from_json(mb_policy *out, const json_t *doc, const char *where, mb_error *err);

void mb_policy_free(mb_policy *policy);

/* Thresholds for `row` (its override when there is one). Borrowed. */
const mb_thresholds *mb_policy_for_row(const mb_policy *policy, const char *row);

bool mb_policy_fails_on(const mb_policy *policy, mb_finding_kind kind);

/* The effective policy as JSON, every value spelled out (new reference). */
json_t *mb_policy_to_json(const mb_policy *policy);

/* The policy's thresholds with their built-in values (no rows). */
void mb_thresholds_defaults(mb_thresholds *out);

/* One line per value that differs from the defaults ("min_effect = 0.05",
 * "rows.rmsnorm.alpha = 0.05", "gate.fail_on = [...]"), into `buf`; empty
 * when the policy is the default. */
void mb_policy_describe_changes(const mb_policy *policy, char *buf, size_t len);

#endif
