/* Suite files and the plan of cases they expand into.
 *
 * mb_suite_load parses a TOML suite (toml++, through receipts/toml_json), turns it
 * into a jansson value, validates it against schemas/suite.schema.json, then
 * checks what a schema cannot: row names exist in the catalog, every family
 * gives exactly the row's axes, shapes are possible (positive, products fit
 * in 64 bits, row rules such as "D is even"). Errors name the file and the
 * key path: "suites/x.toml: rows.rope_qk.families[1].axes.D: ...".
 *
 * mb_plan_build expands a suite into cases (row x variant x family shape x
 * dtype x mode), applying the suite's filters and the command line's.
 */
#ifndef MB_HARNESS_SUITE_H
#define MB_HARNESS_SUITE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "receipts/error.h"
#include "kernels/catalog.h"

typedef enum mb_mode {
	MB_MODE_COLD,
	MB_MODE_HOT,
	MB_MODE_GRAPH,
	MB_MODE_COUNT
} mb_mode;

const char *mb_mode_name(mb_mode mode);
int mb_mode_parse(const char *name, mb_mode *out);

#define MB_DEFAULT_SEED 20261121u
#define MB_DEFAULT_MAX_NOISE 0.005
#define MB_DEFAULT_MIN_SAMPLES 10
#define MB_DEFAULT_MAX_SAMPLES 10000
#define MB_DEFAULT_MIN_TIME_S 0.5
#define MB_DEFAULT_TIMEOUT_S 15.0
#define MB_DEFAULT_WARMUP 3
#define MB_DEFAULT_MAX_CHECK_ROWS 4096
/* The largest suite file read: suites are a page or two of TOML, and a
 * mistaken path (/dev/zero, a log) must not be read until memory runs out. */
#define MB_SUITE_MAX_BYTES ((size_t)16 << 20)
/* A plan this big is a typo in an axis list, not a benchmark. */
#define MB_PLAN_MAX_CASES 1000000

/* Harness settings: the suite's [timing] and [correctness] with defaults
 * filled in; the command line may override some. */
typedef struct mb_settings {
	uint64_t seed;
	int n_modes;
	mb_mode modes[MB_MODE_COUNT];
	double max_noise;
	int min_samples;
	int max_samples;
	double min_time_s;
	double timeout_s;
	int warmup;
	int64_t max_check_rows;
} mb_settings;

typedef struct mb_suite {
	char *path;          /* as given */
	char *name;
	char *description;   /* "" when absent */
	char blob_id[41];    /* git blob id of the file's bytes */
	json_t *doc;         /* the suite as JSON (owned) */
	mb_settings settings;
} mb_suite;

/* One case: everything needed to run and record it. */
typedef struct mb_case_plan {
	const mb_row *row;
	const mb_variant *variant;
	mb_dtype dtype;
	mb_mode mode;
	char family[64];
	double weight;
	bool weight_given;           /* the family set `weight` (else 1) */
	int64_t axis[MB_MAX_AXES];   /* in row->axes order */
	char id[256];                /* row/variant/dtype/mode/family/A=1,B=2 */
} mb_case_plan;

/* What mb_plan_build says of the cases it leaves out for host memory. */
#define MB_PLAN_NOTE_MAX 1024

typedef struct mb_plan {
	mb_case_plan *cases;
	size_t n_cases;
	/* Cases left out because their shape needs more host memory than this
	 * machine has available now: how many, and a notice naming them (""
	 * when none). Fitting the host is the run's concern, not the suite's:
	 * validate ("any") checks nothing of it. */
	size_t n_host_skipped;
	char host_note[MB_PLAN_NOTE_MAX];
} mb_plan;

/* Narrowing from the command line: comma-separated lists, NULL = no filter. */
typedef struct mb_plan_filter {
	const char *rows;
	const char *dtypes;
	const char *variants;
	const char *modes;
} mb_plan_filter;

/* Narrowing by case id (row/variant/dtype/mode/family/shape): POSIX
 * extended regular expressions, NULL = none. A case runs when `filter`
 * matches somewhere in its id and `exclude` does not. */
typedef struct mb_plan_match {
	const char *filter;
	const char *exclude;
} mb_plan_match;

/* One override of a suite value from the command line (--set KEY=VALUE).
 *
 * KEY is a key path into the suite as its TOML reads: `timing.modes`,
 * `suite.seed`, `correctness.max_check_rows`, `rows.rope_qk.dtypes`,
 * `rows.rope_qk.families[0].axes.T`. Two shorthands reach axes without
 * counting families: `axes.T` sets axis T in every family of every row
 * that has one, `rows.rope_qk.axes.T` in every family of that row.
 * VALUE is a TOML value (`[8192, 32768]`, `"x"`, `0.5`, `true`), or a
 * comma-separated list of numbers and bare words (`hot,graph`,
 * `4096,8192`), or one of them alone; a single value where the suite takes
 * an array (`timing.modes=hot`) becomes an array of one. The suite is then
 * checked as if the file said so, and an error about an overridden key
 * names the override: "suites/x.toml: timing.modes[0] (from --set
 * timing.modes=warm): expected one of ...". */
typedef struct mb_suite_set {
	const char *text;  /* "KEY=VALUE" */
	const char *label; /* how the user wrote it ("--modes hot"); NULL: "--set TEXT" */
} mb_suite_set;

/* The most overrides one load applies. */
#define MB_SUITE_MAX_SETS 32

int mb_suite_load(mb_suite **out, const char *path, mb_error *err);
/* mb_suite_load with `n_sets` overrides applied, in order, to the parsed
 * file before any check. */
int mb_suite_load_with(mb_suite **out, const char *path, const mb_suite_set *sets, size_t n_sets,
	mb_error *err);
void mb_suite_free(mb_suite *suite);

/* backend: "cpu" plans the reference variant only; "cuda" plans every
 * variant with backend "cuda" that was built in (launch != NULL); "any"
 * plans every variant of every backend, built in or not (what `validate`
 * counts, so that a suite it accepts is one every backend can plan).
 * A filter that names an unknown row or dtype is an error that lists the
 * known ones; a filter that leaves no case is an error that says which
 * filter removed the cases and why (--variants on the cpu backend, a
 * --filter that matches no id, a dtype the rows do not list). On "cpu" and
 * "cuda", a shape whose host copies need more memory than is available
 * now (MemAvailable, not the total) has its cases left out and named in
 * plan->host_note; a plan that loses every case so is an error naming the
 * first. "any" checks nothing of the host: a suite is valid or not
 * whatever the machine. */
int mb_plan_build(mb_plan **out, const mb_suite *suite, const mb_plan_filter *filter,
	const char *backend, mb_error *err);
/* mb_plan_build with case-id expressions too (`match` may be NULL). */
int mb_plan_build_ex(mb_plan **out, const mb_suite *suite, const mb_plan_filter *filter,
	const mb_plan_match *match, const char *backend, mb_error *err);
void mb_plan_free(mb_plan *plan);

/* One case as mb_plan_build makes it, weight 1 (not given): its id reads
 * row/variant/dtype/mode/family/shape. MB_EINVAL, said at `where`, when
 * the id does not fit. */
int mb_plan_case(mb_case_plan *out, const mb_row *row, const mb_variant *v, mb_dtype dtype, mb_mode mode,
	const char *family, const int64_t *axis, const char *where, mb_error *err);

/* The suite's row/dtype/variant filters plus the command line's, for the
 * receipt's settings block (arrays of strings, owned by the caller). */
int mb_plan_filters_json(json_t **out_rows, json_t **out_dtypes, json_t **out_variants,
	const mb_suite *suite, const mb_plan_filter *filter, mb_error *err);
/* The same, with the variant filters recorded only as far as they apply on
 * `backend`: the cpu backend runs the reference variant whatever they say
 * (its receipt must not claim "fused"), so there only "reference" can
 * appear. What `run` records. */
int mb_plan_filters_json_on(json_t **out_rows, json_t **out_dtypes, json_t **out_variants,
	const mb_suite *suite, const mb_plan_filter *filter, const char *backend, mb_error *err);

/* Variant names of `filter->variants` (and the suite's variant filters)
 * that `backend` cannot run, as "fused, fallback" into `out` (empty when
 * every one applies): what the run's notice says it ignored. */
void mb_plan_ignored_variants(char *out, size_t len, const mb_suite *suite, const mb_plan_filter *filter,
	const char *backend);

#endif
