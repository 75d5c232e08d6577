/* Lanes on the host: recipes from patterns (rows the catalog lacks left
 * out with a note), the configurations, the suite's lanes and their errors,
 * and the receipt's lane object from synthetic samples, which must be valid
 * against the receipt schema and call a 5% slower fallback step SLOWER. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/lane.h"
#include "receipts/printer.h"
#include "receipts/schema.h"
#include "testutil.h"

static mb_lane_spec spec_of(const char *pattern)
{
	mb_lane_spec s;

	memset(&s, 0, sizeof(s));
	snprintf(s.name, sizeof(s.name), "t");
	snprintf(s.pattern, sizeof(s.pattern), "%s", pattern);
	s.tokens = 64, s.hidden = 256, s.heads = 2, s.kv_heads = 1, s.head_dim = 128, s.experts = 8;
	s.steps = 10, s.warmup = 1, s.rounds = 3;
	s.n_modes = 2, s.modes[0] = MB_LANE_EAGER, s.modes[1] = MB_LANE_GRAPH;
	return s;
}

static int calls_of(const mb_lane_recipe *r, const char *row)
{
	for (int i = 0; i < r->n_rows; i++)
		if (!strcmp(r->rows[i]->name, row))
			return r->calls_per_step[i];
	return 0;
}

static bool notes_mention(const mb_lane_recipe *r, const char *text)
{
	size_t i;
	json_t *n;

	json_array_foreach(r->notes, i, n)
		if (strstr(json_string_value(n), text))
			return true;
	return false;
}

static void test_recipes(void)
{
	mb_lane_spec s = spec_of("AEMEAEMEAEMR");
	mb_lane_recipe r;
	mb_lane_config configs[2 + MB_LANE_MAX_ROWS];
	mb_error err;
	int gemms = 0, n;

	CHECK(mb_lane_recipe_build(&r, &s, &err) == 0);
	/* every block normalises; three attention blocks rotate */
	CHECK(calls_of(&r, "residual_rmsnorm") == 12);
	CHECK(calls_of(&r, "rope_qk") == 3);
	/* rows the lane does not wire yet are named, and nothing stands in */
	CHECK(notes_mention(&r, "moe_ffn") && notes_mention(&r, "ssm_scan") && notes_mention(&r, "recurrent_scan"));
	CHECK(calls_of(&r, "moe_ffn") == 0);
	for (int i = 0; i < r.n_ops; i++)
		gemms += r.ops[i].kind == MB_LANE_OP_GEMM;
	/* three A (Q, K, V, attention, output), five E (router), three M (in, out) */
	CHECK_MSG(gemms == 3 * 5 + 5 * 1 + 3 * 2, "%d GEMMs", gemms);
	/* the residual stream alternates: no norm reads what it writes */
	for (int i = 0; i < r.n_ops; i++)
		if (r.ops[i].row && !strcmp(r.ops[i].row->name, "residual_rmsnorm"))
			CHECK(r.ops[i].in[1] != r.ops[i].out[1]);
	/* the stand-in has causal attention's FLOPs: 2 T^2 Hq D */
	for (int i = 0; i < r.n_ops; i++)
		if (strstr(r.ops[i].label, "attention core (stand-in GEMM)"))
			CHECK(r.ops[i].flops == 2 * s.tokens * s.tokens * s.heads * s.head_dim);
	n = mb_lane_configs(configs, 2 + MB_LANE_MAX_ROWS, &r);
	CHECK(n == 4);
	CHECK(!strcmp(configs[0].name, "fused") && !strcmp(configs[1].name, "fallback"));
	CHECK(!strcmp(configs[2].name, "fallback:residual_rmsnorm") && configs[2].fallback[0] && !configs[2].fallback[1]);
	mb_lane_recipe_free(&r);

	s = spec_of("AXA");
	CHECK(mb_lane_recipe_build(&r, &s, &err) == MB_EINVAL && strstr(err.text, "'X'"));
}

static void test_suite_lanes(void)
{
	mb_suite suite;
	mb_lane_spec *specs = NULL;
	size_t n = 0;
	mb_error err;

	memset(&suite, 0, sizeof(suite));
	suite.path = (char *)"x.toml";
	suite.doc = json_pack("{s:[{s:s, s:s, s:i, s:i, s:i, s:i}]}", "lanes", "name", "dense", "pattern", "AAAA",
		"tokens", 1024, "hidden", 512, "heads", 4, "head_dim", 128);
	CHECK(mb_lanes_from_suite(&specs, &n, &suite, &err) == 0 && n == 1);
	CHECK(specs && specs[0].kv_heads == 4 && specs[0].steps == 20 && specs[0].rounds == 3 && specs[0].n_modes == 2);
	free(specs);
	json_decref(suite.doc);
	suite.doc = json_pack("{s:[{s:s, s:s, s:i, s:i, s:i, s:i}]}", "lanes", "name", "odd", "pattern", "AA",
		"tokens", 1024, "hidden", 512, "heads", 4, "head_dim", 127);
	CHECK(mb_lanes_from_suite(&specs, &n, &suite, &err) == MB_EINVAL && n == 0);
	CHECK_MSG(strstr(err.where, "x.toml: lanes[0]") && strstr(err.text, "even"), "%s: %s", err.where, err.text);
	json_decref(suite.doc);
}

static void fill(mb_lane_samples *s, double median, int n, int rounds)
{
	static const double spread[] = {-0.002, 0.001, 0.0, 0.002, -0.001};

	s->n = n;
	s->step_ns = calloc((size_t)n, sizeof(double));
	s->busy_ns = calloc((size_t)n, sizeof(double));
	s->memcpy_ns = calloc((size_t)n, sizeof(double));
	s->memset_ns = calloc((size_t)n, sizeof(double));
	s->host_ns = calloc((size_t)n, sizeof(double));
	s->round = calloc((size_t)n, sizeof(int));
	for (int i = 0; i < n; i++) {
		s->step_ns[i] = median * (1 + spread[i % 5]);
		s->busy_ns[i] = 0.97 * s->step_ns[i];
		s->host_ns[i] = 0.1 * median;
		s->round[i] = i * rounds / n;
	}
	s->first_step_host_ns = 3 * median;
}

/* The printers rank the rows by their saving: rope_qk (5%) above the
 * rmsnorm that saves nothing, in text, Markdown and HTML. */
static void check_printed(json_t *lane)
{
	static const char *const deltas_head[] = {"saved per step", "| row |", "<th>row</th>"};
	static const char *const fused_run[] = {"fused ", "| fused | eager |", "<td>fused</td><td>eager</td>"};
	json_t *receipt = json_pack("{s:[O]}", "lanes", lane);

	for (int fmt = MB_PRINT_TEXT; fmt <= MB_PRINT_HTML; fmt++) {
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		const char *deltas, *rope, *norm;

		mb_print_lanes(f, receipt, (mb_print_format)fmt);
		fclose(f);
		deltas = strstr(buf, deltas_head[fmt]);
		rope = deltas ? strstr(deltas, "rope_qk") : NULL;
		norm = deltas ? strstr(deltas, "residual_rmsnorm") : NULL;
		CHECK_MSG(rope && norm && rope < norm, "rows not ranked by saving:\n%s", buf);
		CHECK_MSG(strstr(buf, "fused wins (SLOWER)") && strstr(buf, "+5.00%"), "no 5%% win shown:\n%s", buf);
		CHECK_MSG(strstr(buf, fused_run[fmt]), "no fused run:\n%s", buf);
		free(buf);
	}
	json_decref(receipt);
}

static void test_lane_json(void)
{
	mb_lane_spec s = spec_of("AA");
	mb_lane_recipe r;
	mb_lane_config configs[2 + MB_LANE_MAX_ROWS];
	mb_lane_samples samples[2 + MB_LANE_MAX_ROWS][MB_LANE_MODE_COUNT];
	mb_error err;
	json_t *lane, *wrap;
	const json_t *schema;
	mb_schema_report rep;
	int n;

	memset(samples, 0, sizeof(samples));
	CHECK(mb_lane_recipe_build(&r, &s, &err) == 0);
	n = mb_lane_configs(configs, 2 + MB_LANE_MAX_ROWS, &r);
	for (int c = 0; c < n; c++)
		for (int m = 0; m < MB_LANE_MODE_COUNT; m++)
			/* the rope_qk fallback makes the step 5% slower, rmsnorm's nothing */
			fill(&samples[c][m], strstr(configs[c].name, "rope_qk") || !strcmp(configs[c].name, "fallback")
				? 1.05e6 : 1.0e6, 30, s.rounds);
	lane = mb_lane_json(&s, &r, configs, n, samples);
	schema = mb_schema_builtin("receipt", &err);
	wrap = json_pack("{s:s, s:O}", "$ref", "#/definitions/lane", "definitions", json_object_get(schema, "definitions"));
	memset(&rep, 0, sizeof(rep));
	CHECK_MSG(mb_schema_validate(wrap, lane, &rep, &err) == 0, "the lane object breaks the schema: %s",
		rep.count ? rep.items[0].message : err.text);
	{
		size_t i;
		json_t *d;
		int slower = 0, same = 0;
		json_array_foreach(json_object_get(lane, "deltas"), i, d) {
			const char *row = json_string_value(json_object_get(d, "row"));
			const char *cls = json_string_value(json_object_get(d, "fallback_is"));
			if (!strcmp(row, "rope_qk"))
				slower += !strcmp(cls, "SLOWER") && fabs(json_number_value(json_object_get(d, "delta_fraction")) - 0.05) < 1e-3;
			else
				same += !strcmp(cls, "SAME");
		}
		CHECK_MSG(slower == 2 && same == 2, "%d slower, %d same", slower, same);
	}
	CHECK(json_array_size(json_object_get(lane, "runs")) == (size_t)(n * 2));
	check_printed(lane);
	json_decref(wrap);
	json_decref(lane);
	for (int c = 0; c < n; c++)
		for (int m = 0; m < MB_LANE_MODE_COUNT; m++)
			mb_lane_samples_free(&samples[c][m]);
	mb_lane_recipe_free(&r);
}

int main(void)
{
	test_recipes();
	test_suite_lanes();
	test_lane_json();
	return mb_test_finish("test_lane");
}
