/* Lanes: recipes, configurations, the suite's lanes and the receipt's lane
 * object; see lane.h. The device side is cuda_lane.cu. */
#include "harness/lane.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/case_common.h"
#include "receipts/compare.h"
#include "receipts/policy.h"

#define DEFAULT_STEPS 20
#define DEFAULT_WARMUP 3
#define DEFAULT_ROUNDS 3
#define DEFAULT_EXPERTS 64
#define MAX_STEPS 1000
#define MAX_ROUNDS 16
/* The M block's inner width, as a multiple of the hidden size (Mamba's
 * in projection makes x and z). */
#define SSM_EXPAND 2

const char *mb_lane_mode_name(mb_lane_mode mode)
{
	return mode == MB_LANE_GRAPH ? "graph" : "eager";
}

/* ---- recipes -------------------------------------------------------------- */

typedef struct builder {
	mb_lane_recipe *r;
	const mb_lane_spec *spec;
	int block;
	mb_error *err;
	int rc;
} builder;

static mb_lane_op *next_op(builder *b, mb_lane_op_kind kind, const char *label)
{
	mb_lane_op *op;

	if (b->rc)
		return NULL;
	if (b->r->n_ops == MB_LANE_MAX_OPS) {
		b->rc = mb_error_set(b->err, MB_EINVAL, b->spec->name, "the pattern makes more than %d ops", MB_LANE_MAX_OPS);
		return NULL;
	}
	op = &b->r->ops[b->r->n_ops++];
	memset(op, 0, sizeof(*op));
	op->kind = kind;
	op->block = b->block;
	snprintf(op->label, sizeof(op->label), "%c%d %s", b->spec->pattern[b->block], b->block, label);
	return op;
}

static void gemm(builder *b, const char *label, mb_lane_buffer a, mb_lane_buffer w, mb_lane_buffer c, int64_t m,
	int64_t n, int64_t k)
{
	mb_lane_op *op = next_op(b, MB_LANE_OP_GEMM, label);

	if (!op)
		return;
	op->a = a, op->b = w, op->c = c;
	op->m = m, op->n = n, op->k = k;
	op->flops = 2 * m * n * k;
}

static void note(builder *b, const char *fmt, const char *name)
{
	char text[256];

	snprintf(text, sizeof(text), fmt, b->spec->pattern[b->block], b->block, name);
	json_array_append_new(b->r->notes, json_string(text));
}

/* A catalog row's op, or a note when the catalog does not have it. */
static mb_lane_op *row_op(builder *b, const char *name, const char *label)
{
	const mb_row *row = mb_catalog_find(name);
	mb_lane_op *op;
	int i;

	if (!row) {
		note(b, "%c%d: %s is not in the catalog yet: left out of the step", name);
		return NULL;
	}
	if (!(op = next_op(b, MB_LANE_OP_ROW, label)))
		return NULL;
	op->row = row;
	for (i = 0; i < b->r->n_rows && b->r->rows[i] != row; i++)
		;
	if (i == b->r->n_rows && i < MB_LANE_MAX_ROWS)
		b->r->rows[b->r->n_rows++] = row;
	if (i < MB_LANE_MAX_ROWS)
		b->r->calls_per_step[i]++;
	return op;
}

/* A row the block would hold, whose buffers and axes the lane does not
 * wire yet (the MoE, state-space and recurrent rows): named in the notes
 * and left out of the step, so that no step runs an op without its
 * operands. */
static void unwired_row(builder *b, const char *name)
{
	note(b, mb_catalog_find(name) ? "%c%d: %s is in the catalog but not wired into lanes yet: left out of the step"
		: "%c%d: %s is not in the catalog yet: left out of the step", name);
}

/* residual_rmsnorm on the block's stream and residual; the residual
 * buffers swap roles every block so that no launch reads what it writes. */
static void norm(builder *b)
{
	const mb_lane_spec *s = b->spec;
	mb_lane_op *op = row_op(b, "residual_rmsnorm", "residual_rmsnorm");
	mb_lane_buffer r = b->block % 2 ? LB_RESIDUAL2 : LB_RESIDUAL, h = b->block % 2 ? LB_RESIDUAL : LB_RESIDUAL2;

	if (!op)
		return;
	op->axis[0] = s->tokens, op->axis[1] = s->hidden;
	op->n_in = 3, op->in[0] = LB_STREAM, op->in[1] = r, op->in[2] = LB_NORM_W;
	op->n_out = 2, op->out[0] = LB_NORMED, op->out[1] = h;
}

static void attention_block(builder *b)
{
	const mb_lane_spec *s = b->spec;
	int64_t t = s->tokens, h = s->hidden, q = s->heads * s->head_dim, kv = s->kv_heads * s->head_dim;
	mb_lane_op *op;

	norm(b);
	gemm(b, "Q projection", LB_NORMED, LB_WQ, LB_Q, t, q, h);
	gemm(b, "K projection", LB_NORMED, LB_WK, LB_K, t, kv, h);
	gemm(b, "V projection", LB_NORMED, LB_WV, LB_V, t, kv, h);
	if ((op = row_op(b, "rope_qk", "rope_qk"))) {
		op->axis[0] = t, op->axis[1] = s->heads, op->axis[2] = s->kv_heads, op->axis[3] = s->head_dim;
		op->n_in = 4, op->in[0] = LB_Q, op->in[1] = LB_K, op->in[2] = LB_COS, op->in[3] = LB_SIN;
		op->n_out = 2, op->out[0] = LB_Q_ROT, op->out[1] = LB_K_ROT;
	}
	/* the stand-in: a [T, T] matrix times the rotated queries has causal
	 * attention's FLOPs (2 T^2 Hq D); then a softmax-like row launch */
	gemm(b, "attention core (stand-in GEMM)", LB_SCORES, LB_Q_ROT, LB_ATTN, t, q, t);
	if ((op = next_op(b, MB_LANE_OP_SOFTMAX, "attention core (stand-in softmax)")))
		op->m = t, op->n = q;
	gemm(b, "output projection", LB_ATTN, LB_WO, LB_STREAM, t, h, q);
}

static void expert_block(builder *b)
{
	const mb_lane_spec *s = b->spec;

	norm(b);
	gemm(b, "router", LB_NORMED, LB_WROUTER, LB_ROUTER, s->tokens, s->experts, s->hidden);
	unwired_row(b, "moe_ffn");
}

static void state_space_block(builder *b)
{
	const mb_lane_spec *s = b->spec;
	int64_t inner = SSM_EXPAND * s->hidden;

	norm(b);
	gemm(b, "in projection", LB_NORMED, LB_WIN, LB_INNER, s->tokens, inner, s->hidden);
	unwired_row(b, "ssm_scan");
	gemm(b, "out projection", LB_INNER, LB_WOUT, LB_STREAM, s->tokens, s->hidden, inner);
}

static void recurrent_block(builder *b)
{
	norm(b);
	unwired_row(b, "recurrent_scan");
}

static void buffer_sizes(mb_lane_recipe *r, const mb_lane_spec *s)
{
	int64_t t = s->tokens, h = s->hidden, q = s->heads * s->head_dim, kv = s->kv_heads * s->head_dim;
	int64_t inner = SSM_EXPAND * h;
	const int64_t sizes[LB_COUNT] = {
		[LB_STREAM] = t * h, [LB_RESIDUAL] = t * h, [LB_RESIDUAL2] = t * h, [LB_NORMED] = t * h,
		[LB_NORM_W] = h, [LB_Q] = t * q, [LB_K] = t * kv, [LB_V] = t * kv, [LB_Q_ROT] = t * q,
		[LB_K_ROT] = t * kv, [LB_COS] = t * s->head_dim / 2, [LB_SIN] = t * s->head_dim / 2,
		[LB_SCORES] = t * t, [LB_ATTN] = t * q, [LB_WQ] = h * q, [LB_WK] = h * kv, [LB_WV] = h * kv,
		[LB_WO] = q * h, [LB_WROUTER] = h * s->experts, [LB_ROUTER] = t * s->experts,
		[LB_WIN] = h * inner, [LB_WOUT] = inner * h, [LB_INNER] = t * inner,
	};

	memcpy(r->buffer_elems, sizes, sizeof(sizes));
}

int mb_lane_recipe_build(mb_lane_recipe *out, const mb_lane_spec *spec, mb_error *err)
{
	builder b = {out, spec, 0, err, 0};

	memset(out, 0, sizeof(*out));
	out->notes = json_array();
	buffer_sizes(out, spec);
	for (b.block = 0; spec->pattern[b.block] && b.rc == 0; b.block++) {
		switch (spec->pattern[b.block]) {
		case 'A': attention_block(&b); break;
		case 'E': expert_block(&b); break;
		case 'M': state_space_block(&b); break;
		case 'R': recurrent_block(&b); break;
		default:
			b.rc = mb_error_set(err, MB_EINVAL, spec->name, "pattern \"%s\": block %d is '%c', expected A, E, M or R",
				spec->pattern, b.block, spec->pattern[b.block]);
		}
	}
	if (b.rc)
		mb_lane_recipe_free(out);
	return b.rc;
}

void mb_lane_recipe_free(mb_lane_recipe *r)
{
	if (!r)
		return;
	json_decref(r->notes);
	r->notes = NULL;
}

/* ---- configurations ------------------------------------------------------- */

/* The catalog's variant kinds, not whether this build links their launches:
 * a build without CUDA must plan the same configurations as one with it. */
static bool has_kind(const mb_row *row, mb_variant_kind kind)
{
	for (int v = 0; v < row->n_variants; v++)
		if (row->variants[v].kind == kind)
			return true;
	return false;
}

int mb_lane_configs(mb_lane_config *out, int cap, const mb_lane_recipe *r)
{
	int n = 0;

	if (cap < 2)
		return 0;
	memset(out, 0, (size_t)cap * sizeof(*out));
	snprintf(out[n++].name, sizeof(out->name), "fused");
	snprintf(out[n].name, sizeof(out->name), "fallback");
	for (int i = 0; i < r->n_rows; i++)
		out[n].fallback[i] = has_kind(r->rows[i], MB_VARIANT_FALLBACK);
	n++;
	for (int i = 0; i < r->n_rows && n < cap; i++) {
		if (!has_kind(r->rows[i], MB_VARIANT_FALLBACK) || !has_kind(r->rows[i], MB_VARIANT_FUSED))
			continue;
		snprintf(out[n].name, sizeof(out->name), "fallback:%s", r->rows[i]->name);
		out[n].fallback[i] = true;
		n++;
	}
	return n;
}

/* ---- the suite's lanes ------------------------------------------------------ */

static int int_field(int64_t *out, const json_t *lane, const char *key, int64_t fallback, int64_t lo, int64_t hi,
	const char *where, mb_error *err)
{
	const json_t *v = json_object_get(lane, key);

	if (!v) {
		if (fallback < 0)
			return mb_error_set(err, MB_EINVAL, where, "%s: missing (a positive integer)", key);
		*out = fallback;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return mb_error_set(err, MB_EINVAL, where, "%s: expected an integer in [%lld, %lld]", key, (long long)lo,
			(long long)hi);
	*out = json_integer_value(v);
	return 0;
}

static int lane_from_json(mb_lane_spec *s, const json_t *lane, const char *where, mb_error *err)
{
	const char *name = json_string_value(json_object_get(lane, "name"));
	const char *pattern = json_string_value(json_object_get(lane, "pattern"));
	const json_t *modes = json_object_get(lane, "modes");
	int64_t v;
	int rc;
	size_t i;
	const json_t *m;

	memset(s, 0, sizeof(*s));
	if (!name || !*name || strlen(name) >= sizeof(s->name))
		return mb_error_set(err, MB_EINVAL, where, "name: expected a string of 1 to %zu characters", sizeof(s->name) - 1);
	if (!pattern || !*pattern || strlen(pattern) > MB_LANE_MAX_BLOCKS || strspn(pattern, "AEMR") != strlen(pattern))
		return mb_error_set(err, MB_EINVAL, where, "pattern: expected 1 to %d letters of A, E, M, R",
			MB_LANE_MAX_BLOCKS);
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->pattern, sizeof(s->pattern), "%s", pattern);
	if ((rc = int_field(&s->tokens, lane, "tokens", -1, 1, INT32_MAX, where, err))
		|| (rc = int_field(&s->hidden, lane, "hidden", -1, 1, INT32_MAX, where, err))
		|| (rc = int_field(&s->heads, lane, "heads", -1, 1, INT32_MAX, where, err))
		|| (rc = int_field(&s->kv_heads, lane, "kv_heads", s->heads, 1, INT32_MAX, where, err))
		|| (rc = int_field(&s->head_dim, lane, "head_dim", -1, 2, INT32_MAX, where, err))
		|| (rc = int_field(&s->experts, lane, "experts", DEFAULT_EXPERTS, 1, INT32_MAX, where, err)))
		return rc;
	if (s->head_dim % 2 || s->heads % s->kv_heads)
		return mb_error_set(err, MB_EINVAL, where, "head_dim must be even and heads a multiple of kv_heads");
	if ((rc = int_field(&v, lane, "steps", DEFAULT_STEPS, 1, MAX_STEPS, where, err)))
		return rc;
	s->steps = (int)v;
	if ((rc = int_field(&v, lane, "warmup", DEFAULT_WARMUP, 0, MAX_STEPS, where, err)))
		return rc;
	s->warmup = (int)v;
	if ((rc = int_field(&v, lane, "rounds", DEFAULT_ROUNDS, 1, MAX_ROUNDS, where, err)))
		return rc;
	s->rounds = (int)v;
	if (!modes) {
		s->modes[s->n_modes++] = MB_LANE_EAGER;
		s->modes[s->n_modes++] = MB_LANE_GRAPH;
		return 0;
	}
	json_array_foreach(modes, i, m) {
		const char *text = json_string_value(m);
		mb_lane_mode mode = text && !strcmp(text, "graph") ? MB_LANE_GRAPH : MB_LANE_EAGER;
		if (!text || (strcmp(text, "eager") && strcmp(text, "graph")) || s->n_modes == MB_LANE_MODE_COUNT)
			return mb_error_set(err, MB_EINVAL, where, "modes[%zu]: expected \"eager\" or \"graph\", each once", i);
		s->modes[s->n_modes++] = mode;
	}
	if (s->n_modes == 0)
		return mb_error_set(err, MB_EINVAL, where, "modes: expected at least one of \"eager\", \"graph\"");
	return 0;
}

int mb_lanes_from_suite(mb_lane_spec **out, size_t *n, const mb_suite *suite, mb_error *err)
{
	const json_t *lanes = json_object_get(suite->doc, "lanes");
	size_t i;
	const json_t *lane;
	int rc = 0;

	*out = NULL;
	*n = 0;
	if (!lanes)
		return 0;
	*out = calloc(json_array_size(lanes) + 1, sizeof(**out));
	if (!*out)
		return mb_error_set(err, MB_ENOMEM, suite->path, "out of memory");
	json_array_foreach(lanes, i, lane) {
		char where[MB_ERROR_WHERE_MAX];
		snprintf(where, sizeof(where), "%.400s: lanes[%zu]", suite->path, i);
		if ((rc = lane_from_json(&(*out)[i], lane, where, err)))
			break;
		(*n)++;
	}
	if (rc) {
		free(*out);
		*out = NULL;
		*n = 0;
	}
	return rc;
}

/* ---- the receipt's lane object -------------------------------------------- */

void mb_lane_samples_free(mb_lane_samples *s)
{
	if (!s)
		return;
	free(s->step_ns);
	free(s->busy_ns);
	free(s->memcpy_ns);
	free(s->memset_ns);
	free(s->host_ns);
	free(s->round);
	memset(s, 0, sizeof(*s));
}

static double median_copy(const double *v, int n)
{
	double *c = malloc((size_t)(n ? n : 1) * sizeof(*c)), m;

	if (!c || n == 0) {
		free(c);
		return NAN;
	}
	memcpy(c, v, (size_t)n * sizeof(*c));
	qsort(c, (size_t)n, sizeof(*c), mb_cmp_double);
	m = mb_quantile_sorted(c, n, 0.5);
	free(c);
	return m;
}

static json_t *array_of(const double *v, int n)
{
	json_t *a = json_array();

	for (int i = 0; i < n; i++)
		json_array_append_new(a, mb_ns_json(v[i]));
	return a;
}

/* The median step time of each round. */
static int round_medians(double *out, const mb_lane_samples *s, int rounds)
{
	double *v = malloc((size_t)(s->n ? s->n : 1) * sizeof(*v));
	int n_out = 0;

	for (int r = 0; v && r < rounds; r++) {
		int n = 0;
		for (int i = 0; i < s->n; i++)
			if (s->round[i] == r)
				v[n++] = s->step_ns[i];
		if (n)
			out[n_out++] = median_copy(v, n);
	}
	free(v);
	return n_out;
}

static json_t *run_json(const mb_lane_config *c, mb_lane_mode mode, const mb_lane_samples *s, int rounds)
{
	double step = median_copy(s->step_ns, s->n), busy = median_copy(s->busy_ns, s->n);
	double host = median_copy(s->host_ns, s->n), medians[MAX_ROUNDS];
	int n_rounds = round_medians(medians, s, rounds);

	return json_pack("{s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
		"config", c->name, "mode", mb_lane_mode_name(mode),
		"step_ns", array_of(s->step_ns, s->n), "busy_ns", array_of(s->busy_ns, s->n),
		"round_medians_ns", array_of(medians, n_rounds),
		"median_step_ns", mb_ns_json(step), "median_busy_ns", mb_ns_json(busy),
		"goodput", json_real(step > 0 ? busy / step : 0),
		"launch_gap_ns", mb_ns_json(step > busy ? step - busy : 0),
		"memcpy_ns", mb_ns_json(median_copy(s->memcpy_ns, s->n)),
		"memset_ns", mb_ns_json(median_copy(s->memset_ns, s->n)),
		"median_host_ns", mb_ns_json(host),
		"first_step_ns", mb_ns_json(s->first_step_host_ns > host ? s->first_step_host_ns - host : 0));
}

/* A row's run-level delta in one mode: its fallback configuration against
 * all fused, with the receipts' statistics (the rounds' medians carry the
 * spread between rounds). */
static json_t *delta_json(const char *row, const mb_lane_config *c, mb_lane_mode mode, const mb_lane_samples *fused,
	const mb_lane_samples *swapped, int rounds)
{
	mb_policy policy;
	mb_comparison cmp;
	mb_error err;
	double bm[MAX_ROUNDS], hm[MAX_ROUNDS], base = median_copy(fused->step_ns, fused->n);
	double head = median_copy(swapped->step_ns, swapped->n);
	int nb = round_medians(bm, fused, rounds), nh = round_medians(hm, swapped, rounds);
	const char *cls = "AMBIGUOUS";

	mb_policy_defaults(&policy);
	if (mb_compare_samples_reps(&cmp, fused->step_ns, (size_t)fused->n, true, swapped->step_ns, (size_t)swapped->n,
		true, bm, nb >= 2 ? (size_t)nb : 0, hm, nh >= 2 ? (size_t)nh : 0, &policy.t, &err) == 0)
		cls = mb_cmp_class_name(cmp.cls);
	return json_pack("{s:s, s:s, s:s, s:o, s:o, s:f, s:s}", "row", row, "config", c->name,
		"mode", mb_lane_mode_name(mode), "fused_step_ns", mb_ns_json(base), "delta_ns", mb_ns_json(head - base),
		"delta_fraction", base > 0 ? (head - base) / base : 0.0,
		/* the fallback slower is the fused row winning */
		"fallback_is", cls);
}

json_t *mb_lane_json(const mb_lane_spec *spec, const mb_lane_recipe *r, const mb_lane_config *configs, int n_configs,
	mb_lane_samples (*samples)[MB_LANE_MODE_COUNT])
{
	json_t *lane = json_object(), *ops = json_array(), *rows = json_array(), *runs = json_array();
	json_t *deltas = json_array(), *modes = json_array();

	for (int i = 0; i < r->n_ops; i++) {
		const mb_lane_op *op = &r->ops[i];
		json_t *o = json_pack("{s:i, s:s, s:s}", "block", op->block, "label", op->label, "kind",
			op->kind == MB_LANE_OP_ROW ? "row" : op->kind == MB_LANE_OP_GEMM ? "gemm" : "stand-in");
		if (op->row)
			json_object_set_new(o, "row", json_string(op->row->name));
		if (op->flops)
			json_object_set_new(o, "flops", json_integer(op->flops));
		json_array_append_new(ops, o);
	}
	for (int i = 0; i < r->n_rows; i++)
		json_array_append_new(rows, json_pack("{s:s, s:i}", "row", r->rows[i]->name, "calls_per_step",
			r->calls_per_step[i]));
	for (int m = 0; m < spec->n_modes; m++)
		json_array_append_new(modes, json_string(mb_lane_mode_name(spec->modes[m])));
	for (int c = 0; c < n_configs; c++)
		for (int m = 0; m < spec->n_modes; m++)
			json_array_append_new(runs, run_json(&configs[c], spec->modes[m], &samples[c][spec->modes[m]],
				spec->rounds));
	for (int c = 0; c < n_configs; c++) {
		const char *row = strncmp(configs[c].name, "fallback:", 9) == 0 ? configs[c].name + 9 : NULL;
		for (int m = 0; row && m < spec->n_modes; m++)
			json_array_append_new(deltas, delta_json(row, &configs[c], spec->modes[m], &samples[0][spec->modes[m]],
				&samples[c][spec->modes[m]], spec->rounds));
	}
	json_object_set_new(lane, "name", json_string(spec->name));
	json_object_set_new(lane, "pattern", json_string(spec->pattern));
	json_object_set_new(lane, "shape", json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "tokens", (json_int_t)spec->tokens,
		"hidden", (json_int_t)spec->hidden, "heads", (json_int_t)spec->heads, "kv_heads", (json_int_t)spec->kv_heads,
		"head_dim", (json_int_t)spec->head_dim, "experts", (json_int_t)spec->experts));
	json_object_set_new(lane, "steps", json_integer(spec->steps));
	json_object_set_new(lane, "warmup", json_integer(spec->warmup));
	json_object_set_new(lane, "rounds", json_integer(spec->rounds));
	json_object_set_new(lane, "modes", modes);
	json_object_set_new(lane, "ops", ops);
	json_object_set_new(lane, "rows", rows);
	json_object_set(lane, "notes", r->notes);
	json_object_set_new(lane, "runs", runs);
	json_object_set_new(lane, "deltas", deltas);
	return lane;
}
