/* Lanes: the suite's lanes, the configurations, the rounds' stop rule and
 * shuffle, and the receipt's lane object; see lane.h. The recipes are
 * lane_recipe.c, the device side cuda_lane.cu. */
#include "harness/lane.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/rng.h"
#include "harness/sampler.h"
#include "receipts/compare.h"
#include "receipts/policy.h"
#include "receipts/stats.h"

#define DEFAULT_SEQUENCES 1
#define DEFAULT_MLA_ROPE_DIM 64
#define DEFAULT_MLA_KV_RANK 512
#define DEFAULT_EXPERTS 64
#define DEFAULT_TOP_K 6
#define DEFAULT_EXPERT_FFN 1408
#define DEFAULT_MLP_FFN_PER_HIDDEN 4
#define DEFAULT_SSM_HEAD_DIM 64
#define DEFAULT_SSM_STATE 128
#define DEFAULT_MHC_ITERATIONS 20
#define DEFAULT_STEPS 5
#define DEFAULT_WARMUP 1
#define DEFAULT_MIN_ROUNDS 3
#define DEFAULT_MAX_ROUNDS 64
#define DEFAULT_BUDGET_S 60.0
#define DEFAULT_RESOLVE 0.01
#define MAX_STEPS 1000
#define MAX_ROUNDS 1000
#define MAX_BUDGET_S 3600.0
#define NS_PER_S 1e9
/* fewer rounds than this give no between-round spread */
#define ROUNDS_FOR_SPREAD 2

const char *mb_lane_mode_name(mb_lane_mode mode)
{
	return mode == MB_LANE_GRAPH ? "graph" : "eager";
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

static int int_setting(int *out, const json_t *lane, const char *key, int fallback, int lo, int hi, const char *where,
	mb_error *err)
{
	int64_t v;
	int rc = int_field(&v, lane, key, fallback, lo, hi, where, err);

	*out = (int)v;
	return rc;
}

static int number_field(double *out, const json_t *lane, const char *key, double fallback, double lo, double hi,
	const char *where, mb_error *err)
{
	const json_t *v = json_object_get(lane, key);

	*out = v ? json_number_value(v) : fallback;
	if (v && (!json_is_number(v) || !(*out > lo) || *out > hi))
		return mb_error_set(err, MB_EINVAL, where, "%s: expected a number in (%g, %g]", key, lo, hi);
	return 0;
}

/* A list of names, each one of `allowed` (NULL-terminated); `fallback`
 * when absent. */
static int names_field(char (*out)[MB_LANE_ROW_NAME_MAX], int *n, const json_t *lane, const char *key,
	const char *const *allowed, const char *fallback, const char *where, mb_error *err)
{
	const json_t *v = json_object_get(lane, key), *x;
	size_t i;

	*n = 0;
	if (!v) {
		snprintf(out[(*n)++], MB_LANE_ROW_NAME_MAX, "%s", fallback);
		return 0;
	}
	if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > MB_LANE_MAX_CHOICES)
		return mb_error_set(err, MB_EINVAL, where, "%s: expected a list of 1 to %d names", key, MB_LANE_MAX_CHOICES);
	json_array_foreach(v, i, x) {
		const char *s = json_string_value(x);
		int a;
		for (a = 0; s && allowed[a] && strcmp(allowed[a], s); a++)
			;
		if (!s || !allowed[a])
			return mb_error_set(err, MB_EINVAL, where, "%s[%zu]: expected one of %s%s%s", key, i, allowed[0],
				allowed[1] ? ", " : "", allowed[1] ? allowed[1] : "");
		snprintf(out[(*n)++], MB_LANE_ROW_NAME_MAX, "%s", s);
	}
	return 0;
}

static int shape_fields(mb_lane_spec *s, const json_t *lane, const char *where, mb_error *err)
{
	static const char *const attention[] = {"gqa", "mla", NULL};
	static const char *const moe[] = {"moe_ffn", "moe_ffn_swiglu", NULL};
	static const char *const mlp[] = {"swiglu", "relu2", NULL};
	char kinds[MB_LANE_MAX_CHOICES][MB_LANE_ROW_NAME_MAX];
	int rc;

	if ((rc = int_field(&s->tokens, lane, "tokens", -1, 1, INT32_MAX, where, err))
		|| (rc = int_field(&s->hidden, lane, "hidden", -1, 1, INT32_MAX, where, err))
		|| (rc = int_field(&s->sequences, lane, "sequences", DEFAULT_SEQUENCES, 1, INT32_MAX, where, err))
		|| (rc = int_field(&s->heads, lane, "heads", -1, 1, INT32_MAX, where, err))
		|| (rc = int_field(&s->kv_heads, lane, "kv_heads", s->heads, 1, INT32_MAX, where, err))
		|| (rc = int_field(&s->head_dim, lane, "head_dim", -1, 2, INT32_MAX, where, err))
		|| (rc = names_field(kinds, &s->n_attention, lane, "attention", attention, "gqa", where, err))
		|| (rc = int_field(&s->mla_nope_dim, lane, "mla_nope_dim", s->head_dim, 1, INT32_MAX, where, err))
		|| (rc = int_field(&s->mla_rope_dim, lane, "mla_rope_dim", DEFAULT_MLA_ROPE_DIM, 2, INT32_MAX, where, err))
		|| (rc = int_field(&s->mla_kv_rank, lane, "mla_kv_rank", DEFAULT_MLA_KV_RANK, 1, INT32_MAX, where, err))
		|| (rc = int_field(&s->experts, lane, "experts", DEFAULT_EXPERTS, 1, INT32_MAX, where, err))
		|| (rc = int_field(&s->top_k, lane, "top_k", DEFAULT_TOP_K, 1, INT32_MAX, where, err))
		|| (rc = int_field(&s->expert_ffn, lane, "expert_ffn", DEFAULT_EXPERT_FFN, 1, INT32_MAX, where, err))
		|| (rc = names_field(s->moe, &s->n_moe, lane, "moe", moe, "moe_ffn", where, err))
		|| (rc = int_field(&s->mlp_ffn, lane, "mlp_ffn", DEFAULT_MLP_FFN_PER_HIDDEN * s->hidden, 1, INT32_MAX, where,
			err))
		|| (rc = names_field(s->mlp, &s->n_mlp, lane, "mlp", mlp, "swiglu", where, err))
		|| (rc = int_field(&s->ssm_head_dim, lane, "ssm_head_dim", DEFAULT_SSM_HEAD_DIM, 1, INT32_MAX, where, err))
		|| (rc = int_field(&s->ssm_heads, lane, "ssm_heads",
			s->hidden / s->ssm_head_dim > 0 ? s->hidden / s->ssm_head_dim : 1, 1, INT32_MAX, where, err))
		|| (rc = int_field(&s->ssm_state, lane, "ssm_state", DEFAULT_SSM_STATE, 1, INT32_MAX, where, err))
		|| (rc = int_field(&s->recurrent_width, lane, "recurrent_width", s->hidden, 1, INT32_MAX, where, err))
		|| (rc = int_field(&s->mhc_streams, lane, "mhc_streams", 0, 0, INT32_MAX, where, err))
		|| (rc = int_field(&s->mhc_iterations, lane, "mhc_iterations", DEFAULT_MHC_ITERATIONS, 1, INT32_MAX, where,
			err)))
		return rc;
	for (int i = 0; i < s->n_attention; i++)
		s->attention[i] = strcmp(kinds[i], "mla") ? MB_LANE_GQA : MB_LANE_MLA;
	if (s->head_dim % 2 || s->heads % s->kv_heads)
		return mb_error_set(err, MB_EINVAL, where, "head_dim must be even and heads a multiple of kv_heads");
	return 0;
}

static int timing_fields(mb_lane_spec *s, const json_t *lane, uint64_t suite_seed, const char *where, mb_error *err)
{
	const json_t *modes = json_object_get(lane, "modes"), *backward = json_object_get(lane, "backward"), *m;
	const json_t *seed = json_object_get(lane, "seed");
	char name[96];
	size_t i;
	int rc;

	if ((rc = int_setting(&s->steps, lane, "steps", DEFAULT_STEPS, 1, MAX_STEPS, where, err))
		|| (rc = int_setting(&s->warmup, lane, "warmup", DEFAULT_WARMUP, 0, MAX_STEPS, where, err))
		|| (rc = int_setting(&s->min_rounds, lane, "min_rounds", DEFAULT_MIN_ROUNDS, 1, MAX_ROUNDS, where, err))
		|| (rc = int_setting(&s->max_rounds, lane, "max_rounds", DEFAULT_MAX_ROUNDS > s->min_rounds
			? DEFAULT_MAX_ROUNDS : s->min_rounds, s->min_rounds, MAX_ROUNDS, where, err))
		|| (rc = number_field(&s->budget_s, lane, "budget_s", DEFAULT_BUDGET_S, 0, MAX_BUDGET_S, where, err))
		|| (rc = number_field(&s->resolve, lane, "resolve", DEFAULT_RESOLVE, 0, 1, where, err)))
		return rc;
	if (backward && !json_is_boolean(backward))
		return mb_error_set(err, MB_EINVAL, where, "backward: expected true or false");
	s->backward = !backward || json_is_true(backward);
	if (seed && (!json_is_integer(seed) || json_integer_value(seed) < 0))
		return mb_error_set(err, MB_EINVAL, where, "seed: expected a non-negative integer");
	snprintf(name, sizeof(name), "lane %s", s->name);
	s->seed = seed ? (uint64_t)json_integer_value(seed) : mb_case_seed(suite_seed, name);
	if (!modes) {
		s->modes[s->n_modes++] = MB_LANE_EAGER;
		s->modes[s->n_modes++] = MB_LANE_GRAPH;
		return 0;
	}
	json_array_foreach(modes, i, m) {
		const char *text = json_string_value(m);
		mb_lane_mode mode = text && !strcmp(text, "graph") ? MB_LANE_GRAPH : MB_LANE_EAGER;
		if (!text || (strcmp(text, "eager") && strcmp(text, "graph")) || s->n_modes == MB_LANE_MODE_COUNT
			|| (s->n_modes == 1 && s->modes[0] == mode))
			return mb_error_set(err, MB_EINVAL, where, "modes[%zu]: expected \"eager\" or \"graph\", each once", i);
		s->modes[s->n_modes++] = mode;
	}
	if (s->n_modes == 0)
		return mb_error_set(err, MB_EINVAL, where, "modes: expected at least one of \"eager\", \"graph\"");
	return 0;
}

static int lane_from_json(mb_lane_spec *s, const json_t *lane, uint64_t suite_seed, const char *where,
	mb_error *err)
{
	const char *name = json_string_value(json_object_get(lane, "name"));
	const char *pattern = json_string_value(json_object_get(lane, "pattern"));
	mb_lane_recipe recipe;
	mb_error e;
	int rc;

	memset(s, 0, sizeof(*s));
	if (!name || !*name || strlen(name) >= sizeof(s->name))
		return mb_error_set(err, MB_EINVAL, where, "name: expected a string of 1 to %zu characters", sizeof(s->name) - 1);
	if (!pattern || !*pattern || strlen(pattern) > MB_LANE_MAX_BLOCKS || strspn(pattern, "AEMRD") != strlen(pattern))
		return mb_error_set(err, MB_EINVAL, where, "pattern: expected 1 to %d letters of A, E, M, R, D",
			MB_LANE_MAX_BLOCKS);
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->pattern, sizeof(s->pattern), "%s", pattern);
	if ((rc = shape_fields(s, lane, where, err)) || (rc = timing_fields(s, lane, suite_seed, where, err)))
		return rc;
	/* a shape some row refuses fails here, at load, not in the lane's child */
	mb_error_clear(&e);
	rc = mb_lane_recipe_build(&recipe, s, &e);
	mb_lane_recipe_free(&recipe);
	if (rc)
		return mb_error_set(err, rc, where, "%s: %s", e.where, e.text);
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
		if ((rc = lane_from_json(&(*out)[i], lane, suite->settings.seed, where, err)))
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

/* ---- configurations ------------------------------------------------------- */

/* Planned from the catalog's kinds and flags, not from whether this build
 * links the launches: a build without CUDA plans what one with it runs. */
bool mb_lane_variant_usable(const mb_variant *v, mb_lane_mode mode)
{
	return v->kind != MB_VARIANT_REFERENCE && v->backend && !strcmp(v->backend, "cuda")
		&& (v->dtype_mask & (1u << MB_BF16)) && !(mode == MB_LANE_GRAPH && v->syncs_host);
}

static int first_usable(const mb_row *row, mb_variant_kind kind, mb_lane_mode mode)
{
	for (int v = 0; v < row->n_variants; v++)
		if (row->variants[v].kind == kind && mb_lane_variant_usable(&row->variants[v], mode))
			return v;
	return -1;
}

static bool alternative(const mb_variant *v, mb_lane_mode mode)
{
	return (v->kind == MB_VARIANT_FALLBACK || v->kind == MB_VARIANT_VENDOR) && mb_lane_variant_usable(v, mode);
}

static int fallback_of(const mb_row *row, mb_lane_mode mode)
{
	int v = first_usable(row, MB_VARIANT_FALLBACK, mode);

	if (v < 0)
		v = first_usable(row, MB_VARIANT_VENDOR, mode);
	return v < 0 ? first_usable(row, MB_VARIANT_FUSED, mode) : v;
}

int mb_lane_configs(mb_lane_config *out, int cap, const mb_lane_recipe *r, const mb_lane_spec *spec)
{
	int n = 0;

	for (int m = 0; m < spec->n_modes; m++) {
		mb_lane_mode mode = spec->modes[m];
		mb_lane_config fused, *c;
		memset(&fused, 0, sizeof(fused));
		fused.mode = mode;
		fused.row = -1;
		for (int i = 0; i < r->n_rows; i++)
			fused.variant[i] = first_usable(r->rows[i], MB_VARIANT_FUSED, mode);
		if (n + 2 > cap)
			return -1;
		out[n] = fused;
		snprintf(out[n++].name, sizeof(out->name), "fused");
		c = &out[n++];
		*c = fused;
		snprintf(c->name, sizeof(c->name), "fallback");
		for (int i = 0; i < r->n_rows; i++)
			c->variant[i] = fallback_of(r->rows[i], mode);
		for (int i = 0; i < r->n_rows; i++) {
			for (int v = 0; v < r->rows[i]->n_variants; v++) {
				if (!alternative(&r->rows[i]->variants[v], mode))
					continue;
				if (n == cap)
					return -1;
				c = &out[n++];
				*c = fused;
				c->row = i;
				c->variant[i] = v;
				snprintf(c->name, sizeof(c->name), "%s:%s", r->rows[i]->name, r->rows[i]->variants[v].name);
			}
		}
	}
	return n;
}

json_t *mb_lane_fused_only(const mb_lane_recipe *r, const mb_lane_spec *spec)
{
	json_t *out = json_array();

	for (int m = 0; m < spec->n_modes; m++) {
		for (int i = 0; i < r->n_rows; i++) {
			const mb_row *row = r->rows[i];
			char names[256] = "", why[512];
			bool any = false, in_graph = false;
			for (int v = 0; v < row->n_variants; v++) {
				const mb_variant *x = &row->variants[v];
				any = any || alternative(x, spec->modes[m]);
				if ((x->kind == MB_VARIANT_FALLBACK || x->kind == MB_VARIANT_VENDOR)
					&& mb_lane_variant_usable(x, MB_LANE_EAGER)) {
					size_t len = strlen(names);
					in_graph = true;
					snprintf(names + len, sizeof(names) - len, "%s%s", len ? ", " : "", x->name);
				}
			}
			if (any)
				continue;
			if (in_graph)
				snprintf(why, sizeof(why), "its alternatives (%s) wait for the host inside a call (syncs_host), "
					"which a CUDA graph cannot capture: the fused kernel is the only variant this mode can run", names);
			else
				snprintf(why, sizeof(why), "the catalog has no fallback or vendor variant of it that runs bf16 on "
					"CUDA: the fused kernel is the only variant a lane can run");
			json_array_append_new(out, json_pack("{s:s, s:s, s:s}", "row", row->name, "mode",
				mb_lane_mode_name(spec->modes[m]), "why", why));
		}
	}
	return out;
}

/* ---- samples, rounds and the stop rule ------------------------------------ */

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

static bool grow_doubles(double **v, int n)
{
	double *p = realloc(*v, (size_t)n * sizeof(**v));

	if (p)
		*v = p;
	return p != NULL;
}

int mb_lane_samples_reserve(mb_lane_samples *s, int more)
{
	int n = s->n + more;
	int *round = realloc(s->round, (size_t)(n ? n : 1) * sizeof(*round));

	if (round)
		s->round = round;
	if (!round || !grow_doubles(&s->step_ns, n) || !grow_doubles(&s->busy_ns, n) || !grow_doubles(&s->memcpy_ns, n)
		|| !grow_doubles(&s->memset_ns, n) || !grow_doubles(&s->host_ns, n))
		return MB_ENOMEM;
	return 0;
}

/* The median of n values; NAN for none (a configuration a failure cut short). */
static double median_of(const double *v, int n)
{
	return n > 0 ? mb_stats_median(v, (size_t)n) : NAN;
}

/* The median step time of each round that has steps, in round order (*out
 * belongs to the caller); the count. */
static int round_medians(double **out, const mb_lane_samples *s)
{
	int rounds = 0, n_out = 0;
	double *v = malloc((size_t)(s->n ? s->n : 1) * sizeof(*v));

	for (int i = 0; i < s->n; i++)
		rounds = s->round[i] + 1 > rounds ? s->round[i] + 1 : rounds;
	*out = malloc((size_t)(rounds ? rounds : 1) * sizeof(**out));
	for (int r = 0; v && *out && r < rounds; r++) {
		int n = 0;
		for (int i = 0; i < s->n; i++)
			if (s->round[i] == r)
				v[n++] = s->step_ns[i];
		if (n)
			(*out)[n_out++] = median_of(v, n);
	}
	free(v);
	return *out ? n_out : -1;
}

/* The comparison the receipt's delta and the verdict make: all fused
 * against `head`, with the rounds' medians as repetitions, and a delta
 * counting from the lane's least effect (policy.h), as in the verdict. */
static int compare_steps(mb_comparison *cmp, const mb_lane_samples *fused, const mb_lane_samples *head,
	mb_error *err)
{
	double *bm = NULL, *hm = NULL;
	int nb = round_medians(&bm, fused), nh = round_medians(&hm, head), rc;
	mb_policy policy;
	mb_thresholds t;

	mb_policy_defaults(&policy);
	t = mb_policy_lane_thresholds(&policy.t);
	if (nb < 0 || nh < 0)
		rc = mb_error_set(err, MB_ENOMEM, "lane", "out of memory for the rounds' medians");
	else
		rc = mb_compare_samples_reps(cmp, fused->step_ns, (size_t)fused->n, true, head->step_ns, (size_t)head->n,
			true, bm, nb >= ROUNDS_FOR_SPREAD ? (size_t)nb : 0, hm, nh >= ROUNDS_FOR_SPREAD ? (size_t)nh : 0,
			&t, err);
	free(bm);
	free(hm);
	return rc;
}

static double relative_sd(const double *v, int n)
{
	double mean = 0, var = 0;

	if (n < ROUNDS_FOR_SPREAD)
		return NAN;
	for (int i = 0; i < n; i++)
		mean += v[i] / n;
	for (int i = 0; i < n; i++)
		var += (v[i] - mean) * (v[i] - mean) / (n - 1);
	return mean > 0 ? sqrt(var) / mean : NAN;
}

static int find_config(const mb_lane_config *configs, int n, const char *name, mb_lane_mode mode)
{
	for (int i = 0; i < n; i++)
		if (configs[i].mode == mode && !strcmp(configs[i].name, name))
			return i;
	return -1;
}

int mb_lane_noise_of(mb_lane_noise *out, const mb_lane_config *configs, const mb_lane_samples *samples, int n,
	mb_lane_mode mode, const mb_lane_spec *spec, mb_error *err)
{
	int f = find_config(configs, n, "fused", mode), rc = 0, nm;
	double *medians = NULL;

	memset(out, 0, sizeof(*out));
	out->fused_round_noise = NAN;
	out->resolvable = INFINITY;
	out->worst = -1;
	if (f < 0 || (nm = round_medians(&medians, &samples[f])) < 0)
		return f < 0 ? 0 : mb_error_set(err, MB_ENOMEM, "lane", "out of memory for the rounds' medians");
	out->fused_round_noise = relative_sd(medians, nm);
	free(medians);
	if (nm < ROUNDS_FOR_SPREAD)
		return 0;
	out->resolvable = 0;
	for (int c = 0; c < n && rc == 0; c++) {
		mb_comparison cmp;
		double least;
		if (c == f || configs[c].mode != mode)
			continue;
		if (samples[c].n == 0 || (rc = compare_steps(&cmp, &samples[f], &samples[c], err)))
			least = INFINITY;
		else
			least = fmax(cmp.reps.used ? cmp.reps.threshold : INFINITY, fmax(cmp.base.rel_noise, cmp.head.rel_noise));
		if (!(least <= out->resolvable)) {
			out->resolvable = least;
			out->worst = c;
		}
		if (nm >= spec->min_rounds && least <= spec->resolve) {
			out->settled[c] = true;
			out->n_settled++;
		}
	}
	return rc;
}

void mb_lane_after_round(mb_lane_progress *p, const mb_lane_spec *spec, const mb_lane_noise *noise)
{
	p->noise = *noise;
	if (p->stopped)
		return;
	if (p->rounds >= spec->min_rounds && noise->resolvable <= spec->resolve)
		p->stopped = "target";
	else if (p->rounds >= spec->max_rounds)
		p->stopped = "max_rounds";
}

bool mb_lane_next_round(mb_lane_progress *p, const mb_lane_spec *spec, double elapsed_ns)
{
	double next_ns = 0;
	bool going = false;

	for (int m = 0; m < spec->n_modes; m++) {
		const mb_lane_progress *x = &p[spec->modes[m]];
		going = going || !x->stopped;
		next_ns += x->stopped ? 0 : x->round_ns;
	}
	if (!going)
		return false;
	if (elapsed_ns + next_ns <= spec->budget_s * NS_PER_S)
		return true;
	for (int m = 0; m < spec->n_modes; m++)
		if (!p[spec->modes[m]].stopped)
			p[spec->modes[m]].stopped = "budget";
	return false;
}

int mb_lane_fused_steps(int alternatives)
{
	int k = (int)lround(sqrt(alternatives > 0 ? (double)alternatives : 1.0));

	return k < 1 ? 1 : k > MB_LANE_MAX_FUSED_STEPS ? MB_LANE_MAX_FUSED_STEPS : k;
}

void mb_lane_shuffle(int *order, int n, uint64_t seed, int number)
{
	char name[32];
	mb_rng rng;

	snprintf(name, sizeof(name), "sweep %d", number);
	mb_rng_seed(&rng, mb_case_seed(seed, name));
	for (int i = 0; i < n; i++)
		order[i] = i;
	/* Fisher-Yates; the modulo's bias is below n / 2^64 */
	for (int i = n - 1; i > 0; i--) {
		int j = (int)(mb_rng_next(&rng) % (uint64_t)(i + 1)), t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
}

/* ---- the receipt's lane object -------------------------------------------- */

/* A time for the receipt: what was not measured (busy times without
 * CUPTI, whose busy_note says why) is 0, never a negative number. */
static json_t *ns_json(double ns)
{
	return mb_ns_json(isfinite(ns) && ns > 0 ? ns : 0);
}

static json_t *array_of(const double *v, int n)
{
	json_t *a = json_array();

	for (int i = 0; i < n; i++)
		json_array_append_new(a, ns_json(v[i]));
	return a;
}

static json_t *run_json(const mb_lane_recipe *r, const mb_lane_config *c, const mb_lane_samples *s)
{
	double step = median_of(s->step_ns, s->n), busy = median_of(s->busy_ns, s->n);
	double host = median_of(s->host_ns, s->n), *medians = NULL;
	int n_rounds = round_medians(&medians, s);
	json_t *swapped = json_array(), *run;

	for (int i = 0; i < r->n_rows; i++)
		if (c->variant[i] >= 0 && r->rows[i]->variants[c->variant[i]].kind != MB_VARIANT_FUSED)
			json_array_append_new(swapped, json_pack("{s:s, s:s}", "row", r->rows[i]->name, "variant",
				r->rows[i]->variants[c->variant[i]].name));
	run = json_pack("{s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
		"config", c->name, "mode", mb_lane_mode_name(c->mode), "swapped", swapped,
		"step_ns", array_of(s->step_ns, s->n), "busy_ns", array_of(s->busy_ns, s->n),
		"round_medians_ns", array_of(medians, n_rounds > 0 ? n_rounds : 0),
		"median_step_ns", ns_json(step), "median_busy_ns", ns_json(busy),
		"goodput", json_real(step > 0 && busy > 0 ? busy / step : 0),
		"launch_gap_ns", ns_json(step - busy),
		"memcpy_ns", ns_json(median_of(s->memcpy_ns, s->n)),
		"memset_ns", ns_json(median_of(s->memset_ns, s->n)),
		"median_host_ns", ns_json(host),
		"first_step_ns", ns_json(s->first_step_host_ns - host));
	free(medians);
	return run;
}

/* A row's run-level delta in one mode: the step with that row alone on
 * one alternative variant against all fused. */
static json_t *delta_json(const mb_lane_recipe *r, const mb_lane_config *c, const mb_lane_samples *fused,
	const mb_lane_samples *swapped)
{
	mb_comparison cmp;
	mb_error err;
	double base = median_of(fused->step_ns, fused->n), head = median_of(swapped->step_ns, swapped->n);
	const char *cls = "AMBIGUOUS";

	if (fused->n && swapped->n && compare_steps(&cmp, fused, swapped, &err) == 0)
		cls = mb_cmp_class_name(cmp.cls);
	return json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:f, s:s}", "row", r->rows[c->row]->name, "config", c->name,
		"mode", mb_lane_mode_name(c->mode), "variant", r->rows[c->row]->variants[c->variant[c->row]].name,
		"fused_step_ns", ns_json(base), "delta_ns", mb_ns_json(head - base),
		"delta_fraction", base > 0 && isfinite(head) ? (head - base) / base : 0.0,
		/* the alternative slower is the fused row winning */
		"fallback_is", cls);
}

static json_t *ops_json(const mb_lane_recipe *r)
{
	static const char *const kinds[] = {
		[MB_LANE_OP_ROW] = "row", [MB_LANE_OP_GEMM] = "gemm", [MB_LANE_OP_SOFTMAX] = "stand-in",
		[MB_LANE_OP_MHC_READ] = "kernel", [MB_LANE_OP_MHC_WRITE] = "kernel",
	};
	json_t *ops = json_array();

	for (int i = 0; i < r->n_ops; i++) {
		const mb_lane_op *op = &r->ops[i];
		json_t *o = json_pack("{s:i, s:s, s:s, s:s}", "block", op->block, "label", op->label, "kind", kinds[op->kind],
			"pass", op->backward ? "backward" : "forward");
		if (op->row)
			json_object_set_new(o, "row", json_string(op->row->name));
		if (op->flops)
			json_object_set_new(o, "flops", json_integer(op->flops));
		json_array_append_new(ops, o);
	}
	return ops;
}

static void set_int(json_t *o, const char *key, int64_t v)
{
	json_object_set_new(o, key, json_integer((json_int_t)v));
}

static json_t *names_json(const char (*names)[MB_LANE_ROW_NAME_MAX], int n)
{
	json_t *a = json_array();

	for (int i = 0; i < n; i++)
		json_array_append_new(a, json_string(names[i]));
	return a;
}

static bool uses_mla(const mb_lane_spec *s)
{
	for (int i = 0; i < s->n_attention; i++)
		if (s->attention[i] == MB_LANE_MLA)
			return true;
	return false;
}

/* The shape, with only what the pattern's letters use. */
static json_t *shape_json(const mb_lane_spec *s)
{
	json_t *shape = json_object();

	set_int(shape, "tokens", s->tokens);
	set_int(shape, "hidden", s->hidden);
	set_int(shape, "sequences", s->sequences);
	if (strchr(s->pattern, 'A')) {
		set_int(shape, "heads", s->heads);
		set_int(shape, "kv_heads", s->kv_heads);
		set_int(shape, "head_dim", s->head_dim);
		if (uses_mla(s)) {
			set_int(shape, "mla_nope_dim", s->mla_nope_dim);
			set_int(shape, "mla_rope_dim", s->mla_rope_dim);
			set_int(shape, "mla_kv_rank", s->mla_kv_rank);
		}
	}
	if (strchr(s->pattern, 'E')) {
		set_int(shape, "experts", s->experts);
		set_int(shape, "top_k", s->top_k);
		set_int(shape, "expert_ffn", s->expert_ffn);
	}
	if (strchr(s->pattern, 'D'))
		set_int(shape, "mlp_ffn", s->mlp_ffn);
	if (strchr(s->pattern, 'M')) {
		set_int(shape, "ssm_heads", s->ssm_heads);
		set_int(shape, "ssm_head_dim", s->ssm_head_dim);
		set_int(shape, "ssm_state", s->ssm_state);
	}
	if (strchr(s->pattern, 'R'))
		set_int(shape, "recurrent_width", s->recurrent_width);
	if (s->mhc_streams) {
		set_int(shape, "mhc_streams", s->mhc_streams);
		set_int(shape, "mhc_iterations", s->mhc_iterations);
	}
	return shape;
}

static json_t *choices_json(const mb_lane_spec *s)
{
	json_t *c = json_object(), *attention = json_array();

	for (int i = 0; i < s->n_attention; i++)
		json_array_append_new(attention, json_string(s->attention[i] == MB_LANE_MLA ? "mla" : "gqa"));
	if (strchr(s->pattern, 'A'))
		json_object_set_new(c, "attention", attention);
	else
		json_decref(attention);
	if (strchr(s->pattern, 'E'))
		json_object_set_new(c, "moe", names_json(s->moe, s->n_moe));
	if (strchr(s->pattern, 'D'))
		json_object_set_new(c, "mlp", names_json(s->mlp, s->n_mlp));
	return c;
}

/* Per mode: the seed, the rounds, the noise reached and why they stopped. */
static json_t *stopping_json(const mb_lane_spec *spec, const mb_lane_outcome *o)
{
	json_t *out = json_array();

	for (int m = 0; m < spec->n_modes; m++) {
		const mb_lane_progress *p = &o->progress[spec->modes[m]];
		json_t *e = json_pack("{s:s, s:I, s:i, s:s, s:f, s:o}", "mode", mb_lane_mode_name(spec->modes[m]),
			"seed", (json_int_t)(spec->seed & INT64_MAX), "rounds", p->rounds,
			"stopped", p->stopped ? p->stopped : "interrupted", "target", spec->resolve,
			"wall_ns", mb_ns_json(p->wall_ns));
		if (isfinite(p->noise.fused_round_noise))
			json_object_set_new(e, "fused_round_noise", json_real(p->noise.fused_round_noise));
		if (isfinite(p->noise.resolvable))
			json_object_set_new(e, "resolvable_delta", json_real(p->noise.resolvable));
		if (p->noise.worst >= 0 && p->noise.worst < o->n_configs)
			json_object_set_new(e, "worst_config", json_string(o->configs[p->noise.worst].name));
		if (p->noise.n_settled) {
			json_t *settled = json_array();
			for (int c = 0; c < o->n_configs; c++)
				if (p->noise.settled[c])
					json_array_append_new(settled, json_string(o->configs[c].name));
			json_object_set_new(e, "settled", settled);
		}
		json_array_append_new(out, e);
	}
	return out;
}

json_t *mb_lane_json(const mb_lane_spec *spec, const mb_lane_recipe *r, const mb_lane_outcome *o)
{
	json_t *lane = json_object(), *rows = json_array(), *runs = json_array(), *deltas = json_array();
	json_t *modes = json_array();
	int64_t flops = 0;
	int rounds = 0;

	for (int i = 0; i < r->n_ops; i++)
		flops += r->ops[i].flops;
	for (int i = 0; i < r->n_rows; i++)
		json_array_append_new(rows, json_pack("{s:s, s:i}", "row", r->rows[i]->name, "calls_per_step",
			r->calls_per_step[i]));
	for (int m = 0; m < spec->n_modes; m++) {
		json_array_append_new(modes, json_string(mb_lane_mode_name(spec->modes[m])));
		rounds = o->progress[spec->modes[m]].rounds > rounds ? o->progress[spec->modes[m]].rounds : rounds;
	}
	/* a configuration a failure kept from running has no run and no
	 * delta; the lane's error says why */
	for (int c = 0; c < o->n_configs; c++) {
		int f = find_config(o->configs, o->n_configs, "fused", o->configs[c].mode);
		if (o->samples[c].n == 0)
			continue;
		json_array_append_new(runs, run_json(r, &o->configs[c], &o->samples[c]));
		if (o->configs[c].row >= 0 && f >= 0 && o->samples[f].n > 0)
			json_array_append_new(deltas, delta_json(r, &o->configs[c], &o->samples[f], &o->samples[c]));
	}
	json_object_set_new(lane, "name", json_string(spec->name));
	json_object_set_new(lane, "pattern", json_string(spec->pattern));
	json_object_set_new(lane, "shape", shape_json(spec));
	json_object_set_new(lane, "choices", choices_json(spec));
	json_object_set_new(lane, "backward", json_boolean(spec->backward));
	json_object_set_new(lane, "steps", json_integer(spec->steps));
	json_object_set_new(lane, "warmup", json_integer(spec->warmup));
	json_object_set_new(lane, "rounds", json_integer(rounds > 0 ? rounds : 1));
	json_object_set_new(lane, "min_rounds", json_integer(spec->min_rounds));
	json_object_set_new(lane, "max_rounds", json_integer(spec->max_rounds));
	json_object_set_new(lane, "budget_s", json_real(spec->budget_s));
	json_object_set_new(lane, "resolve", json_real(spec->resolve));
	json_object_set_new(lane, "modes", modes);
	json_object_set_new(lane, "stopping", stopping_json(spec, o));
	if (o->wall_ns > 0)
		json_object_set_new(lane, "wall_ns", mb_ns_json(o->wall_ns));
	json_object_set_new(lane, "device_bytes", json_integer((json_int_t)r->device_bytes));
	json_object_set_new(lane, "step_flops", json_integer((json_int_t)flops));
	json_object_set_new(lane, "ops", ops_json(r));
	json_object_set_new(lane, "rows", rows);
	json_object_set_new(lane, "fused_only", mb_lane_fused_only(r, spec));
	json_object_set(lane, "notes", r->notes);
	json_object_set_new(lane, "runs", runs);
	json_object_set_new(lane, "deltas", deltas);
	return lane;
}
