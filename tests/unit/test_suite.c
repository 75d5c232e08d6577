/* Suite loading, the TOML bridge and plan expansion: type mapping, defaults,
 * expansion count and order, case ids, filters, and the exact text of the
 * errors the golden folders do not cover. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/suite.h"
#include "harness/suite_internal.h"
#include "receipts/toml_json.h"
#include "mb_config.h"
#include "receipts/provenance.h"
#include "testutil.h"

#define PATH_BYTES 512
#define MESSAGE_BYTES (MB_ERROR_WHERE_MAX + MB_ERROR_TEXT_MAX)

static char tmp_dir[PATH_BYTES];
/* Room for tmp_dir and "/suite.toml". */
static char suite_path[PATH_BYTES + 16];

/* The suite most tests start from. rope_qk comes first in the file though
 * it sorts after residual_rmsnorm: plans follow the file. H is given before
 * T, so H turns slowest. */
static const char good_suite[] =
	"[suite]\n"
	"name = \"unit\"\n"
	"description = \"unit test suite\"\n"
	"seed = 7\n"
	"\n"
	"[timing]\n"
	"modes = [\"cold\", \"hot\"]\n"
	"max_noise = 0.01\n"
	"\n"
	"[rows.rope_qk]\n"
	"[[rows.rope_qk.families]]\n"
	"name = \"gqa\"\n"
	"weight = 2.5\n"
	"axes = { T = 8, Hq = 4, Hk = 2, D = [16, 32] }\n"
	"\n"
	"[rows.residual_rmsnorm]\n"
	"dtypes = [\"fp32\", \"bf16\"]\n"
	"[[rows.residual_rmsnorm.families]]\n"
	"name = \"small\"\n"
	"axes = { H = [64, 128], T = [2, 4] }\n";

static const char minimal_suite[] =
	"[suite]\n"
	"name = \"minimal\"\n"
	"[rows.residual_rmsnorm]\n"
	"families = [{ name = \"one\", axes = { T = 1, H = 8 } }]\n";

static const char *write_suite(const char *text)
{
	FILE *f = fopen(suite_path, "wb");

	CHECK_MSG(f != NULL, "cannot write %s: %s", suite_path, strerror(errno));
	if (f) {
		fputs(text, f);
		fclose(f);
	}
	return suite_path;
}

/* Load `text`, expect failure with `code`, and compare "where: text" with
 * "<suite path>: <want>". */
/* "rope_qk, rope_qk_bwd, ...": the catalog's rows, as errors list them. */
static const char *known_rows(void)
{
	static char names[MESSAGE_BYTES / 2];

	mb_catalog_names(names, sizeof(names));
	return names;
}

/* Every variant name in the catalog, fused, fallback and reference first. */
static const char *known_variants(void)
{
	static char names[MESSAGE_BYTES / 2];

	mb_known_variants(names, sizeof(names));
	CHECK(strncmp(names, "fused, fallback, reference", 26) == 0);
	return names;
}

static void expect_load_error(const char *text, int code, const char *want)
{
	mb_suite *suite = NULL;
	mb_error err;
	char got[MESSAGE_BYTES], full[MESSAGE_BYTES];
	int rc;

	mb_error_clear(&err);
	rc = mb_suite_load(&suite, write_suite(text), &err);
	mb_error_format(&err, got, sizeof(got));
	snprintf(full, sizeof(full), "%s: %s", suite_path, want);
	CHECK_MSG(rc == code, "rc %d, want %d (%s)", rc, code, got);
	CHECK(err.code == code);
	CHECK(suite == NULL);
	CHECK_MSG(strcmp(got, full) == 0, "\n  got:  %s\n  want: %s", got, full);
	mb_suite_free(suite);
}

static mb_suite *load_ok(const char *text)
{
	mb_suite *suite = NULL;
	mb_error err;
	char msg[MESSAGE_BYTES];
	int rc;

	mb_error_clear(&err);
	rc = mb_suite_load(&suite, write_suite(text), &err);
	mb_error_format(&err, msg, sizeof(msg));
	CHECK_MSG(rc == 0 && suite, "load failed: %s", msg);
	return suite;
}

static void test_bridge_types(void)
{
	static const char text[] =
		"zeta = 1\n"
		"alpha = 2.5\n"
		"big = 9223372036854775807\n"
		"b = true\n"
		"s = \"x\\u00e9\"\n"
		"d = 1979-05-27\n"
		"t = 07:32:00.5\n"
		"dt = 1979-05-27T07:32:00-08:00\n"
		"ldt = 1979-05-27T07:32:00\n"
		"udt = 1979-05-27T07:32:00.25Z\n"
		"arr = [1, 2]\n"
		"[tbl]\n"
		"\"quoted key\" = 3\n"
		"[[aot]]\n"
		"x = 1\n"
		"[[aot]]\n"
		"x = 2\n";
	static const char want[] =
		"{\"zeta\":1,\"alpha\":2.5,\"big\":9223372036854775807,\"b\":true,\"s\":\"x\xc3\xa9\","
		"\"d\":\"1979-05-27\",\"t\":\"07:32:00.5\",\"dt\":\"1979-05-27T07:32:00-08:00\","
		"\"ldt\":\"1979-05-27T07:32:00\",\"udt\":\"1979-05-27T07:32:00.25Z\",\"arr\":[1,2],"
		"\"tbl\":{\"quoted key\":3},\"aot\":[{\"x\":1},{\"x\":2}]}";
	json_t *doc = NULL;
	mb_error err;
	char *dumped;

	mb_error_clear(&err);
	CHECK(mb_toml_parse_string(&doc, text, "t.toml", &err) == 0);
	CHECK(json_is_integer(json_object_get(doc, "zeta")));
	CHECK(json_is_real(json_object_get(doc, "alpha")));
	dumped = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	CHECK_MSG(dumped && strcmp(dumped, want) == 0, "\n  got:  %s\n  want: %s", dumped, want);
	free(dumped);
	json_decref(doc);
}

static void expect_bridge_error(const char *text, const char *name, int code, const char *where,
	const char *msg)
{
	json_t *doc = NULL;
	mb_error err;
	int rc;

	mb_error_clear(&err);
	rc = mb_toml_parse_string(&doc, text, name, &err);
	CHECK_MSG(rc == code, "rc %d, want %d for %s", rc, code, text);
	CHECK(doc == NULL);
	CHECK_MSG(strcmp(err.where, where) == 0, "where \"%s\", want \"%s\"", err.where, where);
	if (msg)
		CHECK_MSG(strcmp(err.text, msg) == 0, "text \"%s\", want \"%s\"", err.text, msg);
	else
		CHECK(err.text[0] != '\0');
	json_decref(doc);
}

static void test_bridge_errors(void)
{
	json_t *doc = NULL;
	mb_error err;

	expect_bridge_error("[a]\nb = [1.0, nan]\n", "t.toml", MB_EINVAL, "t.toml: a.b[1]",
		"expected a finite number, got nan");
	expect_bridge_error("x = -inf\n", "t.toml", MB_EINVAL, "t.toml: x",
		"expected a finite number, got -inf");
	expect_bridge_error("[\"odd key\"]\nv = inf\n", "t.toml", MB_EINVAL, "t.toml: \"odd key\".v",
		"expected a finite number, got inf");
	expect_bridge_error("a = 1\nb = \n", "t.toml", MB_EINVAL, "t.toml:2:5", NULL);
	expect_bridge_error("a = 1\na = 2\n", NULL, MB_EINVAL, "<string>:2:5", NULL);

	mb_error_clear(&err);
	CHECK(mb_toml_parse_string(&doc, NULL, "t.toml", &err) == MB_EINVAL);
	CHECK(strcmp(err.where, "t.toml") == 0 && strcmp(err.text, "no TOML text given") == 0);
	CHECK(mb_toml_parse_file(&doc, "/nonexistent/megabench/x.toml", MB_SUITE_MAX_BYTES, "a suite", &err) == MB_ENOTFOUND);
	CHECK(doc == NULL);
	CHECK(strcmp(err.where, "/nonexistent/megabench/x.toml") == 0);
	CHECK_MSG(strcmp(err.text, "cannot open: No such file or directory") == 0, "%s", err.text);

	write_suite("k = 'v'\n");
	CHECK(mb_toml_parse_file(&doc, suite_path, MB_SUITE_MAX_BYTES, "a suite", &err) == 0);
	CHECK(strcmp(json_string_value(json_object_get(doc, "k")), "v") == 0);
	json_decref(doc);
}

static void test_modes(void)
{
	mb_mode m = MB_MODE_COUNT;

	for (int i = 0; i < MB_MODE_COUNT; i++) {
		CHECK(mb_mode_parse(mb_mode_name((mb_mode)i), &m) == 0);
		CHECK(m == (mb_mode)i);
	}
	CHECK(mb_mode_parse("warm", &m) == MB_ENOTFOUND);
	CHECK(strcmp(mb_mode_name(MB_MODE_GRAPH), "graph") == 0);
}

static void test_load_and_defaults(void)
{
	mb_suite *suite = load_ok(good_suite);
	char blob[MB_OID_HEX_LEN + 1];

	if (!suite)
		return;
	CHECK(strcmp(suite->path, suite_path) == 0);
	CHECK(strcmp(suite->name, "unit") == 0);
	CHECK(strcmp(suite->description, "unit test suite") == 0);
	CHECK(mb_blob_id(blob, good_suite, strlen(good_suite)) == 0);
	CHECK(strcmp(suite->blob_id, blob) == 0);
	CHECK(suite->settings.seed == 7);
	CHECK(suite->settings.n_modes == 2);
	CHECK(suite->settings.modes[0] == MB_MODE_COLD && suite->settings.modes[1] == MB_MODE_HOT);
	CHECK(suite->settings.max_noise == 0.01);
	CHECK(suite->settings.min_samples == MB_DEFAULT_MIN_SAMPLES);
	CHECK(suite->settings.max_samples == MB_DEFAULT_MAX_SAMPLES);
	CHECK(suite->settings.warmup == MB_DEFAULT_WARMUP);
	CHECK(suite->settings.timeout_s == MB_DEFAULT_TIMEOUT_S);
	mb_suite_free(suite);

	suite = load_ok(minimal_suite);
	if (!suite)
		return;
	CHECK(strcmp(suite->description, "") == 0);
	CHECK(suite->settings.seed == MB_DEFAULT_SEED);
	CHECK(suite->settings.n_modes == 1 && suite->settings.modes[0] == MB_MODE_COLD);
	CHECK(suite->settings.max_noise == MB_DEFAULT_MAX_NOISE);
	CHECK(suite->settings.min_time_s == MB_DEFAULT_MIN_TIME_S);
	CHECK(suite->settings.max_check_rows == MB_DEFAULT_MAX_CHECK_ROWS);
	mb_suite_free(suite);
	mb_suite_free(NULL);
}

static mb_plan *plan_ok(const mb_suite *suite, const mb_plan_filter *filter, const char *backend)
{
	mb_plan *plan = NULL;
	mb_error err;
	char msg[MESSAGE_BYTES];
	int rc;

	mb_error_clear(&err);
	rc = mb_plan_build(&plan, suite, filter, backend, &err);
	mb_error_format(&err, msg, sizeof(msg));
	CHECK_MSG(rc == 0 && plan, "plan failed: %s", msg);
	return plan;
}

static void expect_plan_error(const mb_suite *suite, const mb_plan_filter *filter,
	const char *backend, int code, const char *want)
{
	mb_plan *plan = NULL;
	mb_error err;
	char got[MESSAGE_BYTES];
	int rc;

	mb_error_clear(&err);
	rc = mb_plan_build(&plan, suite, filter, backend, &err);
	mb_error_format(&err, got, sizeof(got));
	CHECK_MSG(rc == code, "rc %d, want %d (%s)", rc, code, got);
	CHECK(plan == NULL);
	CHECK_MSG(strcmp(got, want) == 0, "\n  got:  %s\n  want: %s", got, want);
	mb_plan_free(plan);
}

static size_t plan_count(const mb_suite *suite, const char *rows, const char *dtypes,
	const char *modes)
{
	mb_plan_filter f = {.rows = rows, .dtypes = dtypes, .modes = modes};
	mb_plan *plan = plan_ok(suite, &f, "cpu");
	size_t n = plan ? plan->n_cases : 0;

	mb_plan_free(plan);
	return n;
}

static void test_plan_order(void)
{
	/* rope_qk: 2 shapes x 3 dtypes x 2 modes; residual_rmsnorm: 4 shapes x
	 * 2 dtypes x 2 modes; the CPU runs the reference only. */
	enum { rope_cases = 12, rms_cases = 16 };
	mb_suite *suite = load_ok(good_suite);
	mb_plan *plan = suite ? plan_ok(suite, NULL, "cpu") : NULL;

	if (!plan)
		goto cleanup;
	CHECK_MSG(plan->n_cases == rope_cases + rms_cases, "%zu cases", plan->n_cases);
	if (plan->n_cases != rope_cases + rms_cases)
		goto cleanup;
	CHECK(strcmp(plan->cases[0].id, "rope_qk/reference/bf16/cold/gqa/T=8,Hq=4,Hk=2,D=16") == 0);
	CHECK(strcmp(plan->cases[1].id, "rope_qk/reference/bf16/hot/gqa/T=8,Hq=4,Hk=2,D=16") == 0);
	CHECK(strcmp(plan->cases[2].id, "rope_qk/reference/fp16/cold/gqa/T=8,Hq=4,Hk=2,D=16") == 0);
	CHECK(strcmp(plan->cases[5].id, "rope_qk/reference/fp32/hot/gqa/T=8,Hq=4,Hk=2,D=16") == 0);
	CHECK(strcmp(plan->cases[6].id, "rope_qk/reference/bf16/cold/gqa/T=8,Hq=4,Hk=2,D=32") == 0);
	CHECK(strcmp(plan->cases[12].id, "residual_rmsnorm/reference/fp32/cold/small/T=2,H=64") == 0);
	CHECK(strcmp(plan->cases[14].id, "residual_rmsnorm/reference/bf16/cold/small/T=2,H=64") == 0);
	CHECK(strcmp(plan->cases[16].id, "residual_rmsnorm/reference/fp32/cold/small/T=4,H=64") == 0);
	CHECK(strcmp(plan->cases[20].id, "residual_rmsnorm/reference/fp32/cold/small/T=2,H=128") == 0);
	CHECK(plan->cases[0].weight == 2.5 && plan->cases[12].weight == 1.0);
	CHECK(strcmp(plan->cases[0].family, "gqa") == 0);
	CHECK(plan->cases[6].axis[3] == 32 && plan->cases[6].axis[0] == 8);
	CHECK(plan->cases[20].axis[0] == 2 && plan->cases[20].axis[1] == 128);
	CHECK(plan->cases[1].mode == MB_MODE_HOT && plan->cases[2].dtype == MB_FP16);
	for (size_t i = 0; i < plan->n_cases; i++)
		CHECK(strcmp(plan->cases[i].variant->backend, "cpu") == 0);
cleanup:
	mb_plan_free(plan);
	mb_suite_free(suite);
}

static void test_plan_filters(void)
{
	mb_suite *suite = load_ok(good_suite);
	mb_plan_filter f = {0};
	char want[MESSAGE_BYTES];

	if (!suite)
		return;
	CHECK(plan_count(suite, "residual_rmsnorm", NULL, NULL) == 16);
	CHECK(plan_count(suite, NULL, "bf16", NULL) == 12);
	CHECK(plan_count(suite, NULL, NULL, "hot") == 14);
	CHECK(plan_count(suite, "rope_qk", "fp32,fp16", "cold") == 4);
	CHECK(plan_count(suite, "rope_qk,residual_rmsnorm", NULL, NULL) == 28);

	f.rows = "rope_qk,nope";
	snprintf(want, sizeof(want), "--rows: unknown row \"nope\"; known rows: %s", known_rows());
	expect_plan_error(suite, &f, "cpu", MB_ENOTFOUND, want);
	f.rows = "rope_qk,";
	expect_plan_error(suite, &f, "cpu", MB_EINVAL, "--rows: empty name in the list \"rope_qk,\"");
	f.rows = NULL;
	f.dtypes = "fp8";
	expect_plan_error(suite, &f, "cpu", MB_ENOTFOUND,
		"--dtypes: unknown dtype \"fp8\"; known dtypes: fp32, fp16, bf16");
	f.dtypes = NULL;
	f.modes = "warm";
	expect_plan_error(suite, &f, "cpu", MB_ENOTFOUND,
		"--modes: unknown mode \"warm\"; known modes: cold, hot, graph");
	f.modes = "graph";
	snprintf(want, sizeof(want), "%s: no case left after filters (backend cpu; --modes=graph)",
		suite_path);
	expect_plan_error(suite, &f, "cpu", MB_EINVAL, want);
	f.modes = NULL;
	f.variants = "turbo";
	snprintf(want, sizeof(want), "--variants: unknown variant \"turbo\"; known variants: %s", known_variants());
	expect_plan_error(suite, &f, "cpu", MB_ENOTFOUND, want);
	f.variants = NULL;
	expect_plan_error(suite, &f, "gpu", MB_EINVAL,
		"backend: unknown backend \"gpu\"; known backends: cpu, cuda");
	mb_suite_free(suite);
}

static void test_suite_filters(void)
{
	static const char filtered[] =
		"[suite]\n"
		"name = \"filtered\"\n"
		"[filters]\n"
		"rows = [\"rope_qk\"]\n"
		"dtypes = [\"fp16\", \"fp32\"]\n"
		"[rows.rope_qk]\n"
		"variants = [\"fused\"]\n"
		"families = [{ name = \"a\", axes = { T = 4, Hq = 2, Hk = 1, D = 8 } }]\n"
		"[rows.residual_rmsnorm]\n"
		"families = [{ name = \"b\", axes = { T = 4, H = 8 } }]\n";
	mb_suite *suite = load_ok(filtered);
	mb_plan *plan = NULL;
	mb_plan_filter f = {0};
	json_t *rows = NULL, *dtypes = NULL, *variants = NULL;
	char *dumped;
	char want[MESSAGE_BYTES];
	mb_error err;

	if (!suite)
		return;
	/* On the CPU the row's `variants` cannot apply: the reference runs. */
	plan = plan_ok(suite, NULL, "cpu");
	CHECK(plan && plan->n_cases == 2);
	if (plan && plan->n_cases == 2) {
		CHECK(strcmp(plan->cases[0].id, "rope_qk/reference/fp16/cold/a/T=4,Hq=2,Hk=1,D=8") == 0);
		CHECK(strcmp(plan->cases[1].id, "rope_qk/reference/fp32/cold/a/T=4,Hq=2,Hk=1,D=8") == 0);
	}
	mb_plan_free(plan);

	f.rows = "residual_rmsnorm";
	snprintf(want, sizeof(want), "--rows residual_rmsnorm: the suite %s runs none of these rows (check its "
		"[rows] and filters.rows)", suite_path);
	expect_plan_error(suite, &f, "cpu", MB_EINVAL, want);

#if MB_HAVE_CUDA
	plan = plan_ok(suite, NULL, "cuda");
	for (size_t i = 0; plan && i < plan->n_cases; i++)
		CHECK(strcmp(plan->cases[i].variant->name, "fused") == 0);
	mb_plan_free(plan);
#else
	/* Without CUDA no variant has a launch function. */
	snprintf(want, sizeof(want), "%s: no case left after filters (backend cuda; "
		"filters.rows = [\"rope_qk\"]; filters.dtypes = [\"fp16\", \"fp32\"])", suite_path);
	expect_plan_error(suite, NULL, "cuda", MB_EINVAL, want);
#endif

	f.rows = "rope_qk";
	f.dtypes = "bf16,fp16";
	mb_error_clear(&err);
	CHECK(mb_plan_filters_json_on(&rows, &dtypes, &variants, suite, &f, "cuda", &err) == 0);
	dumped = json_dumps(rows, JSON_COMPACT);
	CHECK_MSG(dumped && strcmp(dumped, "[\"rope_qk\"]") == 0, "%s", dumped);
	free(dumped);
	dumped = json_dumps(dtypes, JSON_COMPACT);
	CHECK_MSG(dumped && strcmp(dumped, "[\"fp16\"]") == 0, "%s", dumped);
	free(dumped);
	CHECK(json_is_array(variants) && json_array_size(variants) == 0);
	json_decref(rows);
	json_decref(dtypes);
	json_decref(variants);
	mb_suite_free(suite);

	suite = load_ok(minimal_suite);
	f.rows = NULL;
	f.dtypes = "bf16,fp16";
	f.variants = "fused";
	CHECK(suite && mb_plan_filters_json_on(&rows, &dtypes, &variants, suite, &f, "cuda", &err) == 0);
	dumped = json_dumps(dtypes, JSON_COMPACT);
	CHECK_MSG(dumped && strcmp(dumped, "[\"bf16\",\"fp16\"]") == 0, "%s", dumped);
	free(dumped);
	CHECK(json_array_size(rows) == 0 && json_array_size(variants) == 1);
	json_decref(rows);
	json_decref(dtypes);
	json_decref(variants);
	/* on the cpu backend --variants fused did not apply: not recorded */
	f.variants = "fused,reference";
	CHECK(suite && mb_plan_filters_json_on(&rows, &dtypes, &variants, suite, &f, "cpu", &err) == 0);
	dumped = json_dumps(variants, JSON_COMPACT);
	CHECK_MSG(dumped && strcmp(dumped, "[\"reference\"]") == 0, "%s", dumped);
	free(dumped);
	json_decref(rows);
	json_decref(dtypes);
	json_decref(variants);
	mb_suite_free(suite);
}

/* Two axis lists of 400 values: 160000 shapes, past the per-family cap. */
static void test_too_many_shapes(void)
{
	enum { values = 400 };
	char *text = malloc(16384);
	size_t used;

	if (!text)
		return;
	used = (size_t)sprintf(text, "[suite]\nname = \"x\"\n[rows.residual_rmsnorm]\n"
		"[[rows.residual_rmsnorm.families]]\nname = \"a\"\naxes.T = [");
	for (int i = 1; i <= values; i++)
		used += (size_t)sprintf(text + used, "%s%d", i > 1 ? "," : "", i);
	used += (size_t)sprintf(text + used, "]\naxes.H = [");
	for (int i = 1; i <= values; i++)
		used += (size_t)sprintf(text + used, "%s%d", i > 1 ? "," : "", i);
	sprintf(text + used, "]\n");
	expect_load_error(text, MB_EINVAL,
		"rows.residual_rmsnorm.families[0].axes: the axis lists expand into more than 100000 shapes");
	free(text);
}

/* The errors the golden folders do not pin. */
static void test_load_errors(void)
{
	mb_suite *suite = NULL;
	mb_error err;
	char want[MESSAGE_BYTES];

	mb_error_clear(&err);
	CHECK(mb_suite_load(&suite, "/nonexistent/megabench/s.toml", &err) == MB_EIO);
	CHECK(strcmp(err.where, "/nonexistent/megabench/s.toml") == 0);
	CHECK(strcmp(err.text, "cannot open: No such file or directory") == 0);
	CHECK(suite == NULL);

	expect_load_error("[rows.rope_qk]\nfamilies = [{ name = \"a\", axes = { T = 1, Hq = 1, Hk = 1, D = 2 } }]\n",
		MB_ESCHEMA, "(top level): missing required key \"suite\"");
	expect_load_error("[suite]\nname = \"x\"\n[rows.rope_qk]\nfamilies = []\n",
		MB_ESCHEMA, "rows.rope_qk.families: expected at least 1 item, got 0");
	expect_load_error("[suite]\nname = \"x\"\n[rows.\"Bad Row\"]\nfamilies = []\n", MB_ESCHEMA,
		"rows.\"Bad Row\": expected a name of lowercase letters, digits and _ that starts with "
		"a letter, got string \"Bad Row\"");
	expect_load_error("[suite]\nname = \"x\"\n[rows.rope_qk]\ndtypes = [\"fp32\", \"fp32\"]\n"
		"families = [{ name = \"a\", axes = { T = 1, Hq = 1, Hk = 1, D = 2 } }]\n",
		MB_ESCHEMA, "rows.rope_qk.dtypes[1]: duplicate value string \"fp32\" (already given at [0])");
	/* the first duplicate in file order, not the first of the sorted values */
	expect_load_error("[suite]\nname = \"x\"\n[rows.rope_qk]\n"
		"families = [{ name = \"a\", axes = { T = [9, 5, 3, 7, 3, 5, 5], Hq = 1, Hk = 1, D = 2 } }]\n",
		MB_ESCHEMA, "rows.rope_qk.families[0].axes.T[4]: duplicate value 3 (already given at [2])");
	expect_load_error("[suite]\nname = \"x\"\n[rows.rope_qk]\n"
		"families = [{ name = \"a\", axes = { T = [8, 6, 8, 6], Hq = 1, Hk = 1, D = 2 } }]\n",
		MB_ESCHEMA, "rows.rope_qk.families[0].axes.T[2]: duplicate value 8 (already given at [0])");
	expect_load_error("[suite]\nname = \"x\"\n[rows.rope_qk]\n"
		"families = [{ name = \"a\", axes = { T = 1, Hq = 1, Hk = 1, D = [2, 0] } }]\n",
		MB_ESCHEMA, "rows.rope_qk.families[0].axes.D[1]: expected a positive integer, got 0");
	expect_load_error("[suite]\nname = \"x\"\n[rows.rope_qk]\n"
		"families = [{ name = \"a\", axes = { T = 1, Hq = 1.5, Hk = 1, D = 2 } }]\n",
		MB_ESCHEMA, "rows.rope_qk.families[0].axes.Hq: expected a positive integer or an array of "
		"positive integers, got float 1.5");
	expect_load_error("[suite]\nname = \"x\"\n[rows.rope_qk]\n"
		"families = [{ name = \"a\", axes = { T = [8, 16.0], Hq = 1, Hk = 1, D = 2 } }]\n",
		MB_ESCHEMA, "rows.rope_qk.families[0].axes.T[1]: expected a positive integer, got float 16.0");
	expect_load_error("[suite]\nname = \"x\"\nseed = 3.0\n[rows.rope_qk]\n"
		"families = [{ name = \"a\", axes = { T = 8, Hq = 1, Hk = 1, D = 2 } }]\n",
		MB_ESCHEMA, "suite.seed: expected a non-negative integer, got float 3.0");
	expect_load_error("[suite]\nname = \"x\"\n[rows.rope_qk]\n"
		"families = [{ name = \"a\", axes = { T = true, Hq = 1, Hk = 1, D = 2 } }]\n",
		MB_ESCHEMA, "rows.rope_qk.families[0].axes.T: expected a positive integer or an array of "
		"positive integers, got boolean true");
	expect_load_error("[suite]\nname = \"x\"\n[timing]\nmax_noise = 1.5\n[rows.rope_qk]\n"
		"families = [{ name = \"a\", axes = { T = 1, Hq = 1, Hk = 1, D = 2 } }]\n",
		MB_ESCHEMA, "timing.max_noise: expected a number > 0 and < 1, got float 1.5");
	expect_load_error("[suite]\nname = \"x\"\n[timing]\nwarmup = 5000\n[rows.rope_qk]\n"
		"families = [{ name = \"a\", axes = { T = 1, Hq = 1, Hk = 1, D = 2 } }]\n",
		MB_ESCHEMA, "timing.warmup: expected an integer from 0 to 1000, got 5000");
	expect_load_error("[suite]\nname = \"x\"\n[timing]\nmin_samples = 100\nmax_samples = 20\n"
		"[rows.rope_qk]\nfamilies = [{ name = \"a\", axes = { T = 1, Hq = 1, Hk = 1, D = 2 } }]\n",
		MB_EINVAL, "timing.min_samples: min_samples (100) is more than max_samples (20)");
	expect_load_error("[suite]\nname = \"x\"\n[rows.rope_qk]\nvariants = [\"fused\", \"turbo\"]\n"
		"families = [{ name = \"a\", axes = { T = 1, Hq = 1, Hk = 1, D = 2 } }]\n",
		MB_ENOTFOUND, "rows.rope_qk.variants[1]: unknown variant \"turbo\" of row rope_qk; "
		"known variants: fused, fallback, reference");
	expect_load_error("[suite]\nname = \"x\"\n[filters]\nrows = [\"rope_qk\", \"nope\"]\n"
		"[rows.rope_qk]\nfamilies = [{ name = \"a\", axes = { T = 1, Hq = 1, Hk = 1, D = 2 } }]\n",
		MB_ENOTFOUND, (snprintf(want, sizeof(want), "filters.rows[1]: unknown row \"nope\"; known rows: %s",
			known_rows()), want));
	expect_load_error("[suite]\nname = \"x\"\n[filters]\nvariants = [\"turbo\"]\n"
		"[rows.rope_qk]\nfamilies = [{ name = \"a\", axes = { T = 1, Hq = 1, Hk = 1, D = 2 } }]\n",
		MB_ENOTFOUND, (snprintf(want, sizeof(want), "filters.variants[0]: unknown variant \"turbo\"; "
			"known variants: %s", known_variants()), want));
	expect_load_error("[suite]\nname = \"x\"\n[rows.rope_qk]\n"
		"families = [{ name = \"a\", axes = { T = 1, Hq = 1, Hk = 1, D = 2 } },\n"
		"            { name = \"a\", axes = { T = 2, Hq = 1, Hk = 1, D = 2 } }]\n",
		MB_EINVAL, "rows.rope_qk.families[1].name: duplicate family name \"a\" (already used by "
		"families[0])");
	test_too_many_shapes();
}


/* --- overrides (--set) ----------------------------------------------------- */

static mb_suite *load_with(const char *text, const mb_suite_set *sets, size_t n, mb_error *err)
{
	mb_suite *suite = NULL;

	mb_error_clear(err);
	mb_suite_load_with(&suite, write_suite(text), sets, n, err);
	return suite;
}

/* One --set on `text`; compare "where: text" with `want` (the suite path
 * spelled %s, when it appears). */
static void expect_set_error(const char *text, const char *set, const char *want_fmt)
{
	mb_suite_set one = {set, NULL};
	mb_error err;
	char got[MESSAGE_BYTES], want[MESSAGE_BYTES];
	mb_suite *suite = load_with(text, &one, 1, &err);

	mb_error_format(&err, got, sizeof(got));
	snprintf(want, sizeof(want), want_fmt, suite_path);
	CHECK(suite == NULL);
	CHECK_MSG(strcmp(got, want) == 0, "\n  got:  %s\n  want: %s", got, want);
	mb_suite_free(suite);
}

static void test_overrides(void)
{
	mb_suite_set sets[] = {
		{"timing.modes=hot,graph", NULL},
		{"axes.T=4096,8192", NULL},
		{"rows.rope_qk.axes.D=64", NULL},
		{"suite.seed=99", NULL},
		{"timing.min_time_s=0.25", NULL},
		{"rows.residual_rmsnorm.families[0].axes.H=[512]", NULL},
		{"correctness.max_check_rows=8", NULL},
	};
	mb_error err;
	mb_suite *suite = load_with(good_suite, sets, sizeof(sets) / sizeof(sets[0]), &err);
	mb_plan *plan;

	CHECK_MSG(suite != NULL, "%s: %s", err.where, err.text);
	if (!suite)
		return;
	CHECK(suite->settings.n_modes == 2);
	CHECK(suite->settings.modes[0] == MB_MODE_HOT && suite->settings.modes[1] == MB_MODE_GRAPH);
	CHECK(suite->settings.seed == 99);
	CHECK(suite->settings.min_time_s == 0.25);
	CHECK(suite->settings.max_check_rows == 8);
	plan = plan_ok(suite, NULL, "cpu");
	/* rope_qk: T in {4096, 8192}, D = 64: 2 shapes x 3 dtypes x 2 modes;
	 * residual_rmsnorm: T in {4096, 8192}, H = 512: 2 x 2 x 2 */
	CHECK_MSG(plan && plan->n_cases == 12 + 8, "%zu cases", plan ? plan->n_cases : 0);
	if (plan && plan->n_cases == 20) {
		CHECK(strcmp(plan->cases[0].id, "rope_qk/reference/bf16/hot/gqa/T=4096,Hq=4,Hk=2,D=64") == 0);
		CHECK(strcmp(plan->cases[19].id, "residual_rmsnorm/reference/bf16/graph/small/T=8192,H=512") == 0);
	}
	mb_plan_free(plan);
	mb_suite_free(suite);

	/* a single value where the suite takes an array: an array of one */
	sets[0] = (mb_suite_set){"timing.modes=hot", NULL};
	suite = load_with(minimal_suite, sets, 1, &err);
	CHECK(suite && suite->settings.n_modes == 1 && suite->settings.modes[0] == MB_MODE_HOT);
	mb_suite_free(suite);
	/* the label names how the user wrote it */
	sets[0] = (mb_suite_set){"timing.modes=warm", "--modes warm"};
	suite = load_with(minimal_suite, sets, 1, &err);
	CHECK(!suite && strstr(err.where, "(from --modes warm)"));
	mb_suite_free(suite);

	expect_set_error(minimal_suite, "timing.modes=warm",
		"%s: timing.modes[0] (from --set timing.modes=warm): expected one of \"cold\", \"hot\", \"graph\", "
		"got string \"warm\"");
	expect_set_error(minimal_suite, "timing.mdoes=hot",
		"%s: timing.mdoes (from --set timing.mdoes=hot): unknown key; expected one of: modes, max_noise, "
		"min_samples, max_samples, min_time_s, timeout_s, warmup");
	expect_set_error(minimal_suite, "suite.seed=-3",
		"%s: suite.seed (from --set suite.seed=-3): expected a non-negative integer, got -3");
	expect_set_error(minimal_suite, "rows.residual_rmsnorm.families[2].axes.T=3",
		"%s: rows.residual_rmsnorm.families[2] (from --set rows.residual_rmsnorm.families[2].axes.T=3): "
		"the array has 1 item");
	expect_set_error(minimal_suite, "axes.D=64", "--set axes.D=64: no row of %s has an axis \"D\"");
	expect_set_error(minimal_suite, "rows.rope_qk.axes.T=8",
		"%s: rows.rope_qk (from --set rows.rope_qk.axes.T=8): the suite has no row rope_qk");
	expect_set_error(minimal_suite, "rows.residual_rmsnorm.axes.D=8",
		"%s: rows.residual_rmsnorm (from --set rows.residual_rmsnorm.axes.D=8): row residual_rmsnorm has no "
		"axis \"D\"; its axes: T, H");
	expect_set_error(good_suite, "axes.D=3",
		"%s: rows.rope_qk.families[0].axes (from --set axes.D=3): shape T=8,Hq=4,Hk=2,D=3: D must be even for "
		"rotate-half RoPE, got 3");
	expect_set_error(minimal_suite, "timing.modes", "--set timing.modes: expected KEY=VALUE, e.g. "
		"timing.modes=hot,graph or axes.T=4096");
	expect_set_error(minimal_suite, "timing..modes=hot", "--set timing..modes=hot: expected a key of letters, "
		"digits, _ or - at \".modes\" (KEY=VALUE, keys joined by '.', [N] for an array element)");
	expect_set_error(minimal_suite, "timing.modes=hot,,cold",
		"--set timing.modes=hot,,cold: empty item in the list \"hot,,cold\"");
	{
		/* a TOML value that does not parse: toml++'s words, after the label */
		mb_suite_set bad = {"timing.max_noise=[0.1", NULL};
		mb_error err2;
		mb_suite *none = load_with(minimal_suite, &bad, 1, &err2);
		CHECK(none == NULL && strncmp(err2.where, "--set timing.max_noise=[0.1:1:", 30) == 0);
		mb_suite_free(none);
	}
}

/* --- selection: regexes, why a filter leaves nothing, recorded variants ---- */

static void expect_match_error(const mb_suite *suite, const mb_plan_match *m, const char *want)
{
	mb_plan *plan = NULL;
	mb_error err;
	char got[MESSAGE_BYTES];

	mb_error_clear(&err);
	CHECK(mb_plan_build_ex(&plan, suite, NULL, m, "cpu", &err) == MB_EINVAL);
	mb_error_format(&err, got, sizeof(got));
	CHECK(plan == NULL);
	CHECK_MSG(strcmp(got, want) == 0, "\n  got:  %s\n  want: %s", got, want);
	mb_plan_free(plan);
}

static void test_selection(void)
{
	mb_suite *suite = load_ok(good_suite);
	mb_plan_filter f = {0};
	mb_plan_match m = {0};
	mb_plan *plan = NULL;
	mb_error err;
	char want[MESSAGE_BYTES], ignored[MESSAGE_BYTES];

	if (!suite)
		return;
	mb_error_clear(&err);
	m.filter = "^rope_qk/.*/(bf16|fp32)/cold/";
	CHECK(mb_plan_build_ex(&plan, suite, NULL, &m, "cpu", &err) == 0);
	CHECK_MSG(plan && plan->n_cases == 4, "%zu cases", plan ? plan->n_cases : 0);
	mb_plan_free(plan);
	plan = NULL;
	m.exclude = "D=32";
	CHECK(mb_plan_build_ex(&plan, suite, NULL, &m, "cpu", &err) == 0);
	CHECK(plan && plan->n_cases == 2);
	for (size_t i = 0; plan && i < plan->n_cases; i++)
		CHECK(strstr(plan->cases[i].id, "D=16") != NULL);
	mb_plan_free(plan);

	m = (mb_plan_match){.filter = "("};
	expect_match_error(suite, &m, "--filter: invalid regular expression \"(\": Unmatched ( or \\(");
	m = (mb_plan_match){.filter = "nothing-like-this"};
	expect_match_error(suite, &m, "--filter nothing-like-this: matches none of the 28 case ids left by the suite "
		"and the other filters (such as rope_qk/reference/bf16/cold/gqa/T=8,Hq=4,Hk=2,D=16; --list prints them "
		"all)");
	m = (mb_plan_match){.exclude = "/"};
	expect_match_error(suite, &m, "--exclude /: removes every one of the 28 cases left by the suite and the "
		"other filters");
	/* --variants fused on the cpu backend says why, instead of running
	 * the reference and recording "fused" */
	f = (mb_plan_filter){.variants = "fused"};
	expect_plan_error(suite, &f, "cpu", MB_EINVAL, "--variants fused: the cpu backend runs only the reference "
		"variant (the fp32 C reference); fused, fallback and vendor variants need --backend cuda");
	mb_plan_ignored_variants(ignored, sizeof(ignored), suite, &f, "cpu");
	CHECK_MSG(strcmp(ignored, "fused") == 0, "%s", ignored);
	f = (mb_plan_filter){.variants = "reference"};
	plan = plan_ok(suite, &f, "cpu");
	CHECK(plan && plan->n_cases == 28);
	mb_plan_free(plan);
	/* --dtypes the rows do not list: which they do, and how to run it */
	f = (mb_plan_filter){.rows = "residual_rmsnorm", .dtypes = "fp16"};
	snprintf(want, sizeof(want), "--dtypes fp16: the selected rows list only fp32, bf16 (rows.NAME.dtypes in %s; "
		"--set rows.NAME.dtypes=fp16 runs it anyway)", suite_path);
	expect_plan_error(suite, &f, "cpu", MB_EINVAL, want);
	/* "any" plans every variant, built in or not: what validate counts */
	plan = plan_ok(suite, NULL, "any");
	CHECK_MSG(plan && plan->n_cases == 3 * 28, "%zu cases", plan ? plan->n_cases : 0);
	mb_plan_free(plan);
	mb_suite_free(suite);
}

/* A suite of more than MB_PLAN_MAX_CASES cases is refused by planning,
 * before it takes the memory of a million cases. */
static void test_plan_limit(void)
{
	enum { t_values = 300, h_values = 200 };
	char *text = malloc(65536);
	size_t used;
	mb_suite *suite;
	mb_plan *plan = NULL;
	mb_error err;
	char want[MESSAGE_BYTES], got[MESSAGE_BYTES];

	if (!text)
		return;
	used = (size_t)sprintf(text, "[suite]\nname = \"big\"\n[timing]\nmodes = [\"cold\", \"hot\", \"graph\"]\n"
		"[rows.residual_rmsnorm]\n");
	for (int fam = 0; fam < 2; fam++) {
		used += (size_t)sprintf(text + used, "[[rows.residual_rmsnorm.families]]\nname = \"f%d\"\naxes.T = [", fam);
		for (int i = 1; i <= t_values; i++)
			used += (size_t)sprintf(text + used, "%s%d", i > 1 ? "," : "", i + fam * t_values);
		used += (size_t)sprintf(text + used, "]\naxes.H = [");
		for (int i = 1; i <= h_values; i++)
			used += (size_t)sprintf(text + used, "%s%d", i > 1 ? "," : "", 8 * i);
		used += (size_t)sprintf(text + used, "]\n");
	}
	suite = load_ok(text);
	mb_error_clear(&err);
	CHECK(suite && mb_plan_build(&plan, suite, NULL, "cpu", &err) == MB_EINVAL);
	mb_error_format(&err, got, sizeof(got));
	snprintf(want, sizeof(want), "%s: the suite expands into more than %d cases", suite_path, MB_PLAN_MAX_CASES);
	CHECK_MSG(strcmp(got, want) == 0, "\n  got:  %s\n  want: %s", got, want);
	CHECK(plan == NULL);
	mb_suite_free(suite);
	free(text);
}

/* A suite over the cap is refused by its size, unread; /dev/zero, which
 * has no size, is refused as the device it is, unread too. */
static void test_size_cap(void)
{
	mb_suite *suite = NULL;
	mb_error err;
	char want[MESSAGE_BYTES];
	FILE *f = fopen(suite_path, "wb");

	/* sparse: one byte over the cap costs no disk */
	CHECK(f && ftruncate(fileno(f), (off_t)MB_SUITE_MAX_BYTES + 1) == 0);
	if (f)
		fclose(f);
	mb_error_clear(&err);
	CHECK(mb_suite_load(&suite, suite_path, &err) == MB_EIO);
	snprintf(want, sizeof(want), "larger than %zu bytes, the limit for a suite; is this the right file?",
		MB_SUITE_MAX_BYTES);
	CHECK_MSG(strcmp(err.where, suite_path) == 0 && strcmp(err.text, want) == 0, "%s: %s", err.where, err.text);
	CHECK(suite == NULL);
	mb_error_clear(&err);
	CHECK(mb_suite_load(&suite, "/dev/zero", &err) == MB_EIO);
	CHECK_MSG(strcmp(err.where, "/dev/zero") == 0
		&& strcmp(err.text, "a character device, not a regular file: refused unread") == 0, "%s: %s", err.where,
		err.text);
	CHECK(suite == NULL);
	/* a name that would not fit the receipt's file name */
	{
		enum { long_name = 300 };
		char text[1024];
		snprintf(text, sizeof(text), "[suite]\nname = \"%0*d\"\n[rows.residual_rmsnorm]\n"
			"families = [{ name = \"one\", axes = { T = 1, H = 8 } }]\n", long_name, 0);
		expect_load_error(text, MB_ESCHEMA, "suite.name: expected at most 128 characters, got 300");
	}
}

int main(void)
{
	snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/mb_test_suite.XXXXXX");
	if (!mkdtemp(tmp_dir)) {
		fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	snprintf(suite_path, sizeof(suite_path), "%s/suite.toml", tmp_dir);

	test_bridge_types();
	test_bridge_errors();
	test_modes();
	test_load_and_defaults();
	test_plan_order();
	test_plan_filters();
	test_suite_filters();
	test_load_errors();
	test_overrides();
	test_selection();
	test_plan_limit();
	test_size_cap();

	unlink(suite_path);
	rmdir(tmp_dir);
	return mb_test_finish("test_suite");
}
