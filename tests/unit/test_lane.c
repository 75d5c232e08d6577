/* Lanes on the host: the step a pattern expands to (every row the
 * pattern's letters use, forward and backward, buffers flowing from op to
 * op, parameters only where a row has them), the configurations per mode
 * (the host-syncing MoE variants out of graph mode, and said), the suite's
 * lanes and their errors, the shuffle, the rounds' stop rule on synthetic
 * rounds, and the receipt's lane object, which must be valid against the
 * receipt schema, call a 5% slower alternative's step SLOWER and name each
 * delta's variant. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/lane.h"
#include "receipts/printer.h"
#include "receipts/schema.h"
#include "testutil.h"

/* NAM56R's lane at a shape small enough for the host, big enough for
 * every row's shape rules (MoE's 128-column tiles, the scan's P and N). */
static mb_lane_spec small_spec(const char *pattern)
{
	mb_lane_spec s;

	memset(&s, 0, sizeof(s));
	snprintf(s.name, sizeof(s.name), "t");
	snprintf(s.pattern, sizeof(s.pattern), "%s", pattern);
	s.tokens = 256, s.sequences = 2, s.hidden = 256, s.heads = 2, s.kv_heads = 1, s.head_dim = 64;
	s.n_attention = 2, s.attention[0] = MB_LANE_GQA, s.attention[1] = MB_LANE_MLA;
	s.mla_nope_dim = 64, s.mla_rope_dim = 32, s.mla_kv_rank = 64;
	s.experts = 8, s.top_k = 2, s.expert_ffn = 128;
	s.n_moe = 2, snprintf(s.moe[0], sizeof(s.moe[0]), "moe_ffn"), snprintf(s.moe[1], sizeof(s.moe[1]), "moe_ffn_swiglu");
	s.mlp_ffn = 512;
	s.n_mlp = 2, snprintf(s.mlp[0], sizeof(s.mlp[0]), "swiglu"), snprintf(s.mlp[1], sizeof(s.mlp[1]), "relu2");
	s.ssm_heads = 4, s.ssm_head_dim = 64, s.ssm_state = 16, s.recurrent_width = 256;
	s.mhc_streams = 4, s.mhc_iterations = 20;
	s.backward = true;
	s.steps = 10, s.warmup = 1, s.min_rounds = 3, s.max_rounds = 8, s.budget_s = 60, s.resolve = 0.01, s.seed = 7;
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

/* The parameters a row may have: the inputs no op of a step writes. The
 * step's own inputs ("step input: ...") may feed any row. */
static bool may_be_parameter(const char *row, const char *tensor)
{
	static const char *const allowed[][6] = {
		{"residual_rmsnorm", "w"}, {"residual_rmsnorm_bwd", "w"}, {"rope_qk", "cos", "sin"},
		{"rope_qk_bwd", "cos", "sin"}, {"mla_partial_rope", "cos", "sin"}, {"moe_ffn", "W1", "W2"},
		{"moe_ffn_swiglu", "W1", "W2"}, {"ssm_scan", "A", "dt_bias"},
		{"recurrent_scan", "w_a", "b_a", "w_i", "b_i", "lambda"}, {"mhc_sinkhorn", "P"},
	};

	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
		if (!strcmp(allowed[i][0], row))
			for (int j = 1; j < 6 && allowed[i][j]; j++)
				if (!strcmp(allowed[i][j], tensor))
					return true;
	return false;
}

/* Buffers flow: every input was written earlier in the step or is a
 * parameter; a row's parameters are only those it has; every write is
 * read before it is written again, except what a step leaves behind. */
static void check_flow(const mb_lane_recipe *r)
{
	static const char *const left_behind[] = {".dw", "block output", "residual gradient", "mhc streams"};
	bool *written = calloc((size_t)r->n_buffers, sizeof(*written));

	for (int i = 0; i < r->n_ops; i++) {
		const mb_lane_op *op = &r->ops[i];
		mb_tensor_spec t[MB_MAX_TENSORS];
		int n = op->row ? op->row->tensors(op->axis, t) : 0, in = 0;
		for (int j = 0; j < op->n_in; j++) {
			const mb_lane_buffer *b = &r->buffers[op->in[j]];
			CHECK_MSG(b->param || written[op->in[j]], "%s reads %s before it is written", op->label, b->name);
			while (op->row && in < n && t[in].is_output)
				in++;
			if (op->row && b->param && strncmp(b->name, "step input:", 11))
				CHECK_MSG(may_be_parameter(op->row->name, t[in].name), "%s: its %s is a parameter (%s)", op->label,
					t[in].name, b->name);
			in++;
		}
		for (int j = 0; j < op->n_out; j++) {
			int buf = op->out[j], reader = -1;
			bool allowed = false;
			written[buf] = true;
			for (int k = i + 1; k < r->n_ops && reader < 0; k++) {
				for (int x = 0; x < r->ops[k].n_in; x++)
					reader = r->ops[k].in[x] == buf ? k : reader;
				for (int x = 0; reader < 0 && x < r->ops[k].n_out; x++)
					if (r->ops[k].out[x] == buf)
						k = r->n_ops; /* written again first */
			}
			for (size_t x = 0; x < sizeof(left_behind) / sizeof(left_behind[0]); x++)
				allowed = allowed || strstr(r->buffers[buf].name, left_behind[x]);
			CHECK_MSG(reader >= 0 || allowed, "%s writes %s, which nothing reads", op->label, r->buffers[buf].name);
		}
	}
	free(written);
}

static void test_nam56r_step(void)
{
	mb_lane_spec s = small_spec("AEMEAEMEAEMR");
	mb_lane_recipe r;
	mb_error err;
	int64_t len = s.tokens / s.sequences, kv = s.kv_heads * s.head_dim;
	int gemms = 0, stand_in = 0, backward_rows = 0;

	CHECK_MSG(mb_lane_recipe_build(&r, &s, &err) == 0, "%s: %s", err.where, err.text);
	/* every block normalises (and mixes mHC's streams) forward and back */
	CHECK(calls_of(&r, "residual_rmsnorm") == 12);
	CHECK(calls_of(&r, "residual_rmsnorm_bwd") == 12);
	CHECK(calls_of(&r, "mhc_sinkhorn") == 12);
	/* A0 and A8 gqa, A4 mla; E blocks moe_ffn, swiglu, moe_ffn, ... */
	CHECK(calls_of(&r, "rope_qk") == 2 && calls_of(&r, "rope_qk_bwd") == 2);
	CHECK(calls_of(&r, "mla_partial_rope") == 1);
	CHECK(calls_of(&r, "moe_ffn") == 3 && calls_of(&r, "moe_ffn_swiglu") == 2);
	CHECK(calls_of(&r, "ssm_scan") == 3 && calls_of(&r, "recurrent_scan") == 1);
	CHECK(r.n_rows == 10);
	for (int i = 0; i < r.n_ops; i++) {
		const mb_lane_op *op = &r.ops[i];
		gemms += op->kind == MB_LANE_OP_GEMM;
		backward_rows += op->backward && op->kind == MB_LANE_OP_ROW;
		/* the gqa stand-in's scores, K V^T per sequence: 2 L^2 Hk D each */
		if (!strcmp(op->label, "A0 attention core (stand-in): scores")) {
			stand_in++;
			CHECK(op->g.batch == s.sequences && op->flops == 2 * s.sequences * len * len * kv);
		}
		/* the norm reads the previous h and writes its own */
		if (op->row && !strcmp(op->row->name, "residual_rmsnorm"))
			CHECK(op->in[1] != op->out[1]);
		/* no row sees a buffer both in and out */
		for (int a = 0; op->kind == MB_LANE_OP_ROW && a < op->n_in; a++)
			for (int b = 0; b < op->n_out; b++)
				CHECK_MSG(op->in[a] != op->out[b], "%s reads what it writes", op->label);
	}
	CHECK(stand_in == 1);
	/* 12 residual_rmsnorm_bwd and 2 rope_qk_bwd */
	CHECK(backward_rows == 14);
	/* forward: gqa 3 + 2 + 1, mla 5 + 2 + 1, E 1, M 5 + 1, R 2; backward
	 * of each gqa block 1 + 4 + 3 */
	CHECK_MSG(gemms == 2 * 6 + 8 + 5 * 1 + 3 * 6 + 2 + 2 * 8, "%d GEMMs", gemms);
	check_flow(&r);
	/* what the step leaves out is said */
	CHECK(notes_mention(&r, "moe_ffn") && notes_mention(&r, "ssm_scan") && notes_mention(&r, "recurrent_scan"));
	CHECK(notes_mention(&r, "mla_partial_rope") && notes_mention(&r, "mhc_sinkhorn has no backward row"));
	CHECK(notes_mention(&r, "stand-in") && notes_mention(&r, "row_gather"));
	CHECK(r.device_bytes > 0);
	mb_lane_recipe_free(&r);

	/* forward only */
	s.backward = false;
	CHECK(mb_lane_recipe_build(&r, &s, &err) == 0 && calls_of(&r, "residual_rmsnorm_bwd") == 0);
	mb_lane_recipe_free(&r);
}

static void test_dense_step(void)
{
	mb_lane_spec s = small_spec("ADAD");
	mb_lane_recipe r;
	mb_error err;

	s.mhc_streams = 0, s.n_attention = 1;
	CHECK_MSG(mb_lane_recipe_build(&r, &s, &err) == 0, "%s: %s", err.where, err.text);
	CHECK(calls_of(&r, "swiglu") == 1 && calls_of(&r, "relu2") == 1 && calls_of(&r, "rope_qk_bwd") == 2);
	CHECK(calls_of(&r, "mhc_sinkhorn") == 0 && calls_of(&r, "residual_rmsnorm") == 4);
	check_flow(&r);
	mb_lane_recipe_free(&r);
}

static void test_recipe_errors(void)
{
	mb_lane_spec s = small_spec("AXA");
	mb_lane_recipe r;
	mb_error err;

	CHECK(mb_lane_recipe_build(&r, &s, &err) == MB_EINVAL && strstr(err.text, "'X'"));
	mb_lane_recipe_free(&r);
	/* a shape the row refuses, named with the block */
	s = small_spec("AE");
	s.expert_ffn = 100;
	CHECK(mb_lane_recipe_build(&r, &s, &err) == MB_EINVAL);
	CHECK_MSG(strstr(err.where, "E1") && strstr(err.text, "moe_ffn refuses"), "%s: %s", err.where, err.text);
	s = small_spec("M");
	s.sequences = 3;
	CHECK(mb_lane_recipe_build(&r, &s, &err) == MB_EINVAL && strstr(err.text, "multiple of sequences"));
}

static mb_lane_config *configs_of(const mb_lane_recipe *r, const mb_lane_spec *s, int *n)
{
	mb_lane_config *c = calloc(MB_LANE_MAX_CONFIGS, sizeof(*c));

	*n = mb_lane_configs(c, MB_LANE_MAX_CONFIGS, r, s);
	return c;
}

static int find(const mb_lane_config *c, int n, const char *name, mb_lane_mode mode)
{
	for (int i = 0; i < n; i++)
		if (c[i].mode == mode && !strcmp(c[i].name, name))
			return i;
	return -1;
}

static void test_configs(void)
{
	mb_lane_spec s = small_spec("AEMEAEMEAEMR");
	mb_lane_recipe r;
	mb_error err;
	mb_lane_config *c;
	json_t *fused_only;
	int n, eager = 0, moe = -1, fb;
	size_t i;
	json_t *e;

	CHECK(mb_lane_recipe_build(&r, &s, &err) == 0);
	c = configs_of(&r, &s, &n);
	for (int k = 0; k < r.n_rows; k++)
		moe = strcmp(r.rows[k]->name, "moe_ffn") ? moe : k;
	/* eager: fused, fallback, one per alternative (moe_ffn and
	 * moe_ffn_swiglu have two each); graph: neither MoE row's */
	for (int k = 0; k < n; k++)
		eager += c[k].mode == MB_LANE_EAGER;
	CHECK_MSG(eager == 2 + 8 + 2 * 2 && n - eager == 2 + 8, "%d eager, %d graph", eager, n - eager);
	CHECK(find(c, n, "moe_ffn:cublas_grouped", MB_LANE_EAGER) >= 0);
	CHECK(find(c, n, "moe_ffn_swiglu:standard", MB_LANE_EAGER) >= 0);
	CHECK(find(c, n, "moe_ffn:cublas_grouped", MB_LANE_GRAPH) < 0);
	CHECK(find(c, n, "rope_qk:fallback", MB_LANE_GRAPH) >= 0);
	/* each alternative configuration differs from all fused in its row only */
	for (int k = 0; k < n; k++) {
		int f = find(c, n, "fused", c[k].mode), diff = 0;
		for (int x = 0; x < r.n_rows; x++)
			diff += c[k].variant[x] != c[f].variant[x];
		if (c[k].row >= 0)
			CHECK_MSG(diff == 1 && c[k].variant[c[k].row] != c[f].variant[c[k].row], "%s", c[k].name);
	}
	/* all fallback in graph mode keeps the MoE rows fused, and says why */
	fb = find(c, n, "fallback", MB_LANE_GRAPH);
	CHECK(fb >= 0 && r.rows[moe]->variants[c[fb].variant[moe]].kind == MB_VARIANT_FUSED);
	fb = find(c, n, "fallback", MB_LANE_EAGER);
	CHECK(fb >= 0 && r.rows[moe]->variants[c[fb].variant[moe]].kind == MB_VARIANT_FALLBACK);
	fused_only = mb_lane_fused_only(&r, &s);
	CHECK(json_array_size(fused_only) == 2);
	json_array_foreach(fused_only, i, e) {
		CHECK(!strcmp(json_string_value(json_object_get(e, "mode")), "graph"));
		CHECK(strstr(json_string_value(json_object_get(e, "why")), "syncs_host"));
	}
	CHECK(mb_lane_configs(c, 3, &r, &s) == -1);
	json_decref(fused_only);
	free(c);
	mb_lane_recipe_free(&r);
}

static void test_suite_lanes(void)
{
	mb_suite suite, *real = NULL;
	mb_lane_spec *specs = NULL;
	size_t n = 0;
	mb_error err;

	memset(&suite, 0, sizeof(suite));
	suite.path = (char *)"x.toml";
	suite.settings.seed = 5;
	suite.doc = json_pack("{s:[{s:s, s:s, s:i, s:i, s:i, s:i}]}", "lanes", "name", "dense", "pattern", "AAAA",
		"tokens", 1024, "hidden", 512, "heads", 4, "head_dim", 128);
	CHECK(mb_lanes_from_suite(&specs, &n, &suite, &err) == 0 && n == 1);
	CHECK(specs && specs[0].kv_heads == 4 && specs[0].steps == 5 && specs[0].min_rounds == 3
		&& specs[0].max_rounds == 64 && specs[0].n_modes == 2 && specs[0].backward && specs[0].sequences == 1);
	CHECK(specs && specs[0].budget_s == 60 && specs[0].resolve == 0.01 && specs[0].seed != 0);
	free(specs);
	json_decref(suite.doc);
	/* errors name the file and the lane */
	suite.doc = json_pack("{s:[{s:s, s:s, s:i, s:i, s:i, s:i}]}", "lanes", "name", "odd", "pattern", "AA",
		"tokens", 1024, "hidden", 512, "heads", 4, "head_dim", 127);
	CHECK(mb_lanes_from_suite(&specs, &n, &suite, &err) == MB_EINVAL && n == 0);
	CHECK_MSG(strstr(err.where, "x.toml: lanes[0]") && strstr(err.text, "even"), "%s: %s", err.where, err.text);
	json_decref(suite.doc);
	suite.doc = json_pack("{s:[{s:s, s:s, s:i, s:i, s:i, s:i, s:[s]}]}", "lanes", "name", "m", "pattern", "A",
		"tokens", 1024, "hidden", 512, "heads", 4, "head_dim", 128, "attention", "flash");
	CHECK(mb_lanes_from_suite(&specs, &n, &suite, &err) == MB_EINVAL && strstr(err.text, "attention[0]"));
	json_decref(suite.doc);
	/* a shape a row refuses fails at load, naming the lane and the block */
	suite.doc = json_pack("{s:[{s:s, s:s, s:i, s:i, s:i, s:i, s:i}]}", "lanes", "name", "e", "pattern", "AE",
		"tokens", 1024, "hidden", 512, "heads", 4, "head_dim", 128, "expert_ffn", 100);
	CHECK(mb_lanes_from_suite(&specs, &n, &suite, &err) == MB_EINVAL);
	CHECK_MSG(strstr(err.where, "x.toml: lanes[0]") && strstr(err.text, "E1") && strstr(err.text, "moe_ffn"), "%s: %s",
		err.where, err.text);
	json_decref(suite.doc);

	/* the suite's own lanes load, with every row of their patterns */
	CHECK_MSG(mb_suite_load(&real, mb_test_src("suites/nam56r.toml"), &err) == 0, "%s: %s", err.where, err.text);
	if (real) {
		CHECK_MSG(mb_lanes_from_suite(&specs, &n, real, &err) == 0 && n == 2, "%s: %s", err.where, err.text);
		for (size_t i = 0; i < n; i++) {
			mb_lane_recipe r;
			CHECK(mb_lane_recipe_build(&r, &specs[i], &err) == 0);
			CHECK(r.n_rows == (strcmp(specs[i].name, "nam56r") ? 6 : 10));
			CHECK(r.device_bytes < ((uint64_t)24 << 30));
			mb_lane_recipe_free(&r);
		}
		free(specs);
		mb_suite_free(real);
	}
}

static void test_shuffle(void)
{
	int a[6], b[6], first[6] = {0};
	bool differs = false;

	for (int round = 0; round < 600; round++) {
		int seen = 0;
		mb_lane_shuffle(a, 6, 42, round);
		mb_lane_shuffle(b, 6, 42, round);
		CHECK(!memcmp(a, b, sizeof(a)));
		for (int i = 0; i < 6; i++)
			seen |= 1 << a[i];
		CHECK(seen == 0x3f);
		first[a[0]]++;
		mb_lane_shuffle(b, 6, 43, round);
		differs = differs || memcmp(a, b, sizeof(a));
	}
	CHECK(differs);
	/* no configuration keeps the first place: each about 100 in 600 */
	for (int i = 0; i < 6; i++)
		CHECK_MSG(first[i] > 60 && first[i] < 140, "configuration %d first %d times in 600", i, first[i]);
}

/* All fused's steps in a sweep: the square root of the alternatives going
 * in its mode, rounded, within 1 .. MB_LANE_MAX_FUSED_STEPS. */
static void test_fused_steps(void)
{
	static const int alternatives[] = {-1, 0, 1, 2, 3, 5, 6, 9, 12, 13, 20, 100};
	static const int want[] = {1, 1, 1, 1, 2, 2, 2, 3, 3, 4, 4, 4};

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		CHECK_MSG(mb_lane_fused_steps(alternatives[i]) == want[i], "%d alternatives: %d fused steps, want %d",
			alternatives[i], mb_lane_fused_steps(alternatives[i]), want[i]);
}

/* Round shifts for fill(): rounds 0.1% apart, and 2% apart. */
static const double quiet[] = {0.001, -0.001, 0.0005, -0.0005};
static const double noisy[] = {0.02, -0.02, 0.015, -0.015};

/* `n` steps over `rounds` rounds at `median` ns, round r scaled by
 * 1 + round_shift[r % 4], steps within a round spread by 0.1%. */
static void fill(mb_lane_samples *s, double median, int n, int rounds, const double *round_shift)
{
	static const double spread[] = {-0.001, 0.0005, 0.0, 0.001, -0.0005};

	memset(s, 0, sizeof(*s));
	CHECK(mb_lane_samples_reserve(s, n) == 0);
	s->n = n;
	for (int i = 0; i < n; i++) {
		int r = i * rounds / n;
		s->step_ns[i] = median * (1 + spread[i % 5]) * (1 + (round_shift ? round_shift[r % 4] : 0));
		s->busy_ns[i] = 0.97 * s->step_ns[i];
		s->memcpy_ns[i] = s->memset_ns[i] = 0;
		s->host_ns[i] = 0.1 * median;
		s->round[i] = r;
	}
	s->first_step_host_ns = 3 * median;
}

static void test_stop_rule(void)
{
	mb_lane_spec s = small_spec("A");
	mb_lane_config c[2];
	mb_lane_samples x[2];
	mb_lane_progress p[MB_LANE_MODE_COUNT];
	mb_lane_noise noise;
	mb_error err;

	memset(c, 0, sizeof(c));
	memset(p, 0, sizeof(p));
	snprintf(c[0].name, sizeof(c[0].name), "fused");
	snprintf(c[1].name, sizeof(c[1].name), "rope_qk:fallback");
	c[0].row = -1, c[1].row = 0;
	s.n_modes = 1, s.modes[0] = MB_LANE_EAGER, s.max_rounds = 4;

	/* quiet rounds: a 1% delta resolves at min_rounds */
	fill(&x[0], 1e6, 30, 3, quiet);
	fill(&x[1], 1.01e6, 30, 3, quiet);
	CHECK(mb_lane_noise_of(&noise, c, x, 2, MB_LANE_EAGER, &s, &err) == 0);
	CHECK_MSG(noise.resolvable < 0.01 && noise.worst == 1, "resolvable %g", noise.resolvable);
	CHECK_MSG(noise.fused_round_noise > 0 && noise.fused_round_noise < 0.002, "noise %g", noise.fused_round_noise);
	p[0].rounds = 3;
	mb_lane_after_round(&p[0], &s, &noise);
	CHECK(p[0].stopped && !strcmp(p[0].stopped, "target"));
	mb_lane_samples_free(&x[0]), mb_lane_samples_free(&x[1]);

	/* 2% between rounds: not resolved, so the rounds go on to max_rounds */
	memset(p, 0, sizeof(p));
	fill(&x[0], 1e6, 30, 3, noisy);
	fill(&x[1], 1.01e6, 30, 3, noisy);
	CHECK(mb_lane_noise_of(&noise, c, x, 2, MB_LANE_EAGER, &s, &err) == 0);
	CHECK_MSG(noise.resolvable > 0.01 && noise.fused_round_noise > 0.01, "resolvable %g", noise.resolvable);
	p[0].rounds = 3;
	mb_lane_after_round(&p[0], &s, &noise);
	CHECK(!p[0].stopped);
	p[0].round_ns = 10e9;
	/* the budget: 60 s, 45 s gone and a 10 s round fits; 55 s gone it does not */
	CHECK(mb_lane_next_round(p, &s, 45e9) && !p[0].stopped);
	p[0].rounds = 4;
	mb_lane_after_round(&p[0], &s, &noise);
	CHECK(p[0].stopped && !strcmp(p[0].stopped, "max_rounds"));
	CHECK(!mb_lane_next_round(p, &s, 0));
	p[0].stopped = NULL;
	CHECK(!mb_lane_next_round(p, &s, 55e9) && p[0].stopped && !strcmp(p[0].stopped, "budget"));
	mb_lane_samples_free(&x[0]), mb_lane_samples_free(&x[1]);

	/* one round: nothing to say about the spread yet */
	fill(&x[0], 1e6, 10, 1, NULL);
	fill(&x[1], 1e6, 10, 1, NULL);
	CHECK(mb_lane_noise_of(&noise, c, x, 2, MB_LANE_EAGER, &s, &err) == 0);
	CHECK(isinf(noise.resolvable) && isnan(noise.fused_round_noise));
	mb_lane_samples_free(&x[0]), mb_lane_samples_free(&x[1]);
}

/* A configuration whose own delta is resolved settles (it sits out the
 * later rounds); a noisy one and all fused do not, nor any before
 * min_rounds; one settles again only while it still resolves. */
static void test_settle(void)
{
	mb_lane_spec s = small_spec("A");
	mb_lane_config c[3];
	mb_lane_samples x[3];
	mb_lane_noise noise;
	mb_error err;

	memset(c, 0, sizeof(c));
	snprintf(c[0].name, sizeof(c[0].name), "fused");
	snprintf(c[1].name, sizeof(c[1].name), "rope_qk:fallback");
	snprintf(c[2].name, sizeof(c[2].name), "residual_rmsnorm:fallback");
	c[0].row = -1, c[1].row = 0, c[2].row = 1;

	fill(&x[0], 1e6, 30, 3, quiet);
	fill(&x[1], 1.05e6, 30, 3, quiet);
	fill(&x[2], 1.01e6, 30, 3, noisy);
	CHECK(mb_lane_noise_of(&noise, c, x, 3, MB_LANE_EAGER, &s, &err) == 0);
	CHECK_MSG(!noise.settled[0] && noise.settled[1] && !noise.settled[2] && noise.n_settled == 1,
		"settled %d %d %d", noise.settled[0], noise.settled[1], noise.settled[2]);
	CHECK(noise.worst == 2 && noise.resolvable > s.resolve);

	/* the same rounds, but min_rounds not reached: nothing settles */
	s.min_rounds = 4;
	CHECK(mb_lane_noise_of(&noise, c, x, 3, MB_LANE_EAGER, &s, &err) == 0);
	CHECK(noise.n_settled == 0 && !noise.settled[1]);
	s.min_rounds = 3;

	/* all fused grows noisy rounds: the settled one no longer resolves */
	mb_lane_samples_free(&x[0]);
	fill(&x[0], 1e6, 30, 3, noisy);
	CHECK(mb_lane_noise_of(&noise, c, x, 3, MB_LANE_EAGER, &s, &err) == 0);
	CHECK(!noise.settled[1] && noise.n_settled == 0);
	for (int i = 0; i < 3; i++)
		mb_lane_samples_free(&x[i]);
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
		CHECK_MSG(strstr(buf, "stopped by target") || strstr(buf, "stopped: target"), "no stop reason:\n%s", buf);
		free(buf);
	}
	json_decref(receipt);
}

static void test_lane_json(void)
{
	mb_lane_spec s = small_spec("AA");
	mb_lane_recipe r;
	mb_lane_config *c;
	mb_lane_samples *samples;
	mb_lane_outcome o;
	mb_error err;
	json_t *lane, *wrap, *d;
	const json_t *schema;
	mb_schema_report rep;
	int n, slower = 0, same = 0;
	size_t i;

	s.mhc_streams = 0, s.n_attention = 1;
	CHECK(mb_lane_recipe_build(&r, &s, &err) == 0);
	c = configs_of(&r, &s, &n);
	samples = calloc((size_t)n, sizeof(*samples));
	for (int k = 0; k < n; k++)
		/* the rope_qk fallback makes the step 5% slower, residual_rmsnorm_bwd's
		 * 1.5% (a lane delta counts from lane_min_effect, not from the
		 * isolated cases' 2%), the others nothing */
		fill(&samples[k], strstr(c[k].name, "rope_qk:") || !strcmp(c[k].name, "fallback") ? 1.05e6
			: strstr(c[k].name, "residual_rmsnorm_bwd:") ? 1.015e6 : 1.0e6, 30, 3, quiet);
	memset(&o, 0, sizeof(o));
	o.configs = c, o.n_configs = n, o.samples = samples, o.wall_ns = 2.5e9;
	for (int m = 0; m < s.n_modes; m++) {
		CHECK(mb_lane_noise_of(&o.progress[s.modes[m]].noise, c, samples, n, s.modes[m], &s, &err) == 0);
		o.progress[s.modes[m]].rounds = 3;
		o.progress[s.modes[m]].stopped = "target";
	}
	lane = mb_lane_json(&s, &r, &o);
	schema = mb_schema_builtin("receipt", &err);
	wrap = json_pack("{s:s, s:O}", "$ref", "#/definitions/lane", "definitions", json_object_get(schema, "definitions"));
	memset(&rep, 0, sizeof(rep));
	CHECK_MSG(mb_schema_validate(wrap, lane, &rep, &err) == 0, "the lane object breaks the schema: %s",
		rep.count ? rep.items[0].message : err.text);
	json_array_foreach(json_object_get(lane, "deltas"), i, d) {
		const char *row = json_string_value(json_object_get(d, "row"));
		const char *cls = json_string_value(json_object_get(d, "fallback_is"));
		CHECK(json_string_value(json_object_get(d, "variant")));
		if (!strcmp(row, "rope_qk"))
			slower += !strcmp(cls, "SLOWER") && fabs(json_number_value(json_object_get(d, "delta_fraction")) - 0.05) < 1e-3;
		else if (!strcmp(row, "residual_rmsnorm_bwd"))
			slower += !strcmp(cls, "SLOWER") && fabs(json_number_value(json_object_get(d, "delta_fraction")) - 0.015) < 1e-3;
		else
			same += !strcmp(cls, "SAME");
	}
	/* rope_qk and residual_rmsnorm_bwd in two modes; residual_rmsnorm and
	 * rope_qk_bwd SAME */
	CHECK_MSG(slower == 4 && same == 4, "%d slower, %d same", slower, same);
	CHECK(json_array_size(json_object_get(lane, "runs")) == (size_t)n);
	CHECK(json_array_size(json_object_get(lane, "stopping")) == 2);
	CHECK(json_number_value(json_object_get(lane, "wall_ns")) == 2.5e9);
	check_printed(lane);
	json_decref(wrap);
	json_decref(lane);
	for (int k = 0; k < n; k++)
		mb_lane_samples_free(&samples[k]);
	free(samples);
	free(c);
	mb_lane_recipe_free(&r);
}

int main(void)
{
	test_nam56r_step();
	test_dense_step();
	test_recipe_errors();
	test_configs();
	test_suite_lanes();
	test_shuffle();
	test_fused_steps();
	test_stop_rule();
	test_settle();
	test_lane_json();
	return mb_test_finish("test_lane");
}
