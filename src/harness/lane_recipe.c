/* A lane's step: the block pattern expanded to ops on named buffers (see
 * lane.h for what each letter holds and why). Rows are bound by their
 * tensors' names, so that a row whose interface changes fails here, with
 * its name, rather than on the device; a row's parameters (the inputs no
 * op of the step writes) are made as its descriptor makes them. */
#include "harness/lane.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* mHC's lane kernels move 16 bytes (8 bf16) an access */
#define MHC_KERNEL_VEC 8

typedef struct saved {
	bool gqa;                    /* its backward runs through rope_qk_bwd */
	int h, w;                    /* residual_rmsnorm's h and weight */
	int q_rot, k_rot, v, scores; /* gqa: what the backward reads */
	int wq, wk, wv, wo;
	char rows[160];              /* its forward rows, for the notes */
} saved;

typedef struct builder {
	mb_lane_recipe *r;
	const mb_lane_spec *spec;
	int block;
	bool backward;
	mb_error *err;
	int rc;
	int stream;                  /* the previous block's output */
	int residual;                /* the previous block's h */
	int wide;                    /* mHC: the streams the next block mixes */
	int normed;                  /* this block's normalised input */
	int n_a, n_e, n_d;           /* blocks of each letter so far (their choices cycle) */
	saved blocks[MB_LANE_MAX_BLOCKS];
} builder;

/* A row's tensor bound to a buffer by its name; `shared` instead names a
 * parameter several blocks share (the RoPE tables), made as the row
 * makes that tensor. */
typedef struct binding {
	const char *tensor;
	int buffer;
	const char *shared;
} binding;

#define BIND(t, b) ((binding){(t), (b), NULL})
#define SHARED(t, name) ((binding){(t), -1, (name)})
#define MAX_BINDINGS MB_MAX_TENSORS

static int fail(builder *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(builder *b, const char *fmt, ...)
{
	char text[MB_ERROR_TEXT_MAX], where[MB_ERROR_WHERE_MAX];
	va_list ap;

	if (b->rc)
		return b->rc;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (b->spec->pattern[b->block])
		snprintf(where, sizeof(where), "lane %s: %c%d%s", b->spec->name, b->spec->pattern[b->block], b->block,
			b->backward ? " (backward)" : "");
	else
		snprintf(where, sizeof(where), "lane %s", b->spec->name);
	b->rc = mb_error_set(b->err, MB_EINVAL, where, "%s", text);
	return b->rc;
}

static void note_once(builder *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note_once(builder *b, const char *fmt, ...)
{
	char text[512];
	va_list ap;
	size_t i;
	json_t *n;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	json_array_foreach(b->r->notes, i, n)
		if (!strcmp(json_string_value(n), text))
			return;
	json_array_append_new(b->r->notes, json_string(text));
}

static char letter(const builder *b)
{
	return b->spec->pattern[b->block];
}

/* ---- buffers ---------------------------------------------------------------- */

static bool grow(void **items, int *cap, int need, size_t size)
{
	int n = *cap ? *cap : 1;
	void *p;

	if (need <= *cap)
		return true;
	while (n < need)
		n *= 2;
	if (!(p = realloc(*items, (size_t)n * size)))
		return false;
	*items = p;
	*cap = n;
	return true;
}

/* The buffer called `name`: made on first use, the same size ever after. */
static int buffer(builder *b, const char *name, int64_t elems, int elem_bytes, bool param, mb_fill fill, float lo,
	float hi)
{
	mb_lane_recipe *r = b->r;
	mb_lane_buffer *x;

	if (b->rc)
		return -1;
	for (int i = 0; i < r->n_buffers; i++) {
		if (strcmp(r->buffers[i].name, name))
			continue;
		if (r->buffers[i].elems != elems || r->buffers[i].elem_bytes != elem_bytes || r->buffers[i].param != param)
			return fail(b, "buffer \"%s\" asked for as %lld elements of %d bytes, made as %lld of %d", name,
				(long long)elems, elem_bytes, (long long)r->buffers[i].elems, r->buffers[i].elem_bytes), -1;
		return i;
	}
	if (elems <= 0)
		return fail(b, "buffer \"%s\" would have %lld elements", name, (long long)elems), -1;
	if (!grow((void **)&r->buffers, &r->cap_buffers, r->n_buffers + 1, sizeof(*r->buffers))) {
		b->rc = mb_error_set(b->err, MB_ENOMEM, b->spec->name, "out of memory for the lane's buffers");
		return -1;
	}
	x = &r->buffers[r->n_buffers];
	memset(x, 0, sizeof(*x));
	snprintf(x->name, sizeof(x->name), "%s", name);
	x->elems = elems, x->elem_bytes = elem_bytes, x->param = param;
	x->fill = fill, x->lo = lo, x->hi = hi;
	r->device_bytes += (uint64_t)elems * (uint64_t)elem_bytes;
	return r->n_buffers++;
}

/* An activation: written by an op of the step before any op reads it. */
static int act(builder *b, const char *name, int64_t elems)
{
	return buffer(b, name, elems, 2, false, MB_FILL_NORMAL, 0, 1);
}

/* An activation of this block alone (kept for its backward). */
static int block_act(builder *b, const char *name, int64_t elems)
{
	char full[64];

	snprintf(full, sizeof(full), "%c%d %s", letter(b), b->block, name);
	return act(b, full, elems);
}

/* A weight [k, n] of this block scaled so that a unit input gives outputs
 * of standard deviation `out_scale`. */
static int weight(builder *b, const char *name, int64_t k, int64_t n, float out_scale)
{
	char full[64];

	snprintf(full, sizeof(full), "%c%d %s", letter(b), b->block, name);
	return buffer(b, full, k * n, 2, true, MB_FILL_NORMAL, 0, out_scale / sqrtf((float)k));
}

/* ---- ops -------------------------------------------------------------------- */

static mb_lane_op *next_op(builder *b, mb_lane_op_kind kind, const char *label)
{
	mb_lane_recipe *r = b->r;
	mb_lane_op *op;

	if (b->rc)
		return NULL;
	if (!grow((void **)&r->ops, &r->cap_ops, r->n_ops + 1, sizeof(*r->ops))) {
		b->rc = mb_error_set(b->err, MB_ENOMEM, b->spec->name, "out of memory for the lane's ops");
		return NULL;
	}
	op = &r->ops[r->n_ops++];
	memset(op, 0, sizeof(*op));
	op->kind = kind;
	op->block = b->block;
	op->backward = b->backward;
	op->row_index = -1;
	snprintf(op->label, sizeof(op->label), "%c%d %s%s", letter(b), b->block, b->backward ? "backward: " : "", label);
	return op;
}

/* Elements the stored matrix needs: `batch` of them `stride` apart, each
 * `rows` rows of `cols` columns `ld` apart. */
static int64_t extent(int64_t batch, int64_t stride, int64_t rows, int64_t cols, int64_t ld)
{
	return (batch - 1) * stride + (rows - 1) * ld + cols;
}

static bool fits(builder *b, int buf, int64_t need, const char *label, const char *which)
{
	if (b->rc || buf < 0)
		return false;
	if (need <= b->r->buffers[buf].elems)
		return true;
	fail(b, "%s: %s needs %lld elements of \"%s\", which has %lld", label, which, (long long)need,
		b->r->buffers[buf].name, (long long)b->r->buffers[buf].elems);
	return false;
}

/* A GEMM as mb_lane_gemm describes it; the leading dimensions are the
 * stored matrices' widths unless `g` gives them. */
static void gemm_op(builder *b, const char *label, int a, int w, int c, mb_lane_gemm g)
{
	mb_lane_op *op = next_op(b, MB_LANE_OP_GEMM, label);
	int64_t a_rows = g.ta ? g.k : g.m, a_cols = g.ta ? g.m : g.k;
	int64_t b_rows = g.tb ? g.n : g.k, b_cols = g.tb ? g.k : g.n;

	if (!op)
		return;
	if (!g.batch)
		g.batch = 1;
	g.lda = g.lda ? g.lda : a_cols;
	g.ldb = g.ldb ? g.ldb : b_cols;
	g.ldc = g.ldc ? g.ldc : g.n;
	if (!fits(b, a, extent(g.batch, g.stride_a, a_rows, a_cols, g.lda), op->label, "A")
		|| !fits(b, w, extent(g.batch, g.stride_b, b_rows, b_cols, g.ldb), op->label, "B")
		|| !fits(b, c, extent(g.batch, g.stride_c, g.m, g.n, g.ldc), op->label, "C"))
		return;
	op->g = g;
	op->n_in = 2, op->in[0] = a, op->in[1] = w;
	if (g.beta != 0.0f)
		op->in[op->n_in++] = c;
	op->n_out = 1, op->out[0] = c;
	op->flops = 2 * g.batch * g.m * g.n * g.k;
}

/* C[m, n] = A[m, k] B[k, n] (+ C with accumulate), B^T with `tb`. */
static void gemm(builder *b, const char *label, int a, int w, int c, int64_t m, int64_t n, int64_t k, bool tb,
	bool accumulate)
{
	gemm_op(b, label, a, w, c, (mb_lane_gemm){.m = m, .n = n, .k = k, .tb = tb, .beta = accumulate ? 1.0f : 0.0f});
}

/* The same GEMM once per sequence: A, B and C each advance by the
 * sequence's share of their rows (the stand-in's per-sequence products). */
static void gemm_per_sequence(builder *b, const char *label, int a, int w, int c, int64_t m, int64_t n, int64_t k,
	bool ta, bool tb)
{
	int64_t seqs = b->spec->sequences;

	gemm_op(b, label, a, w, c, (mb_lane_gemm){.m = m, .n = n, .k = k, .ta = ta, .tb = tb, .batch = seqs,
		.stride_a = m * k, .stride_b = k * n, .stride_c = m * n});
}

/* The projection of this block's normalised input to a row's input, its
 * weight scaled to the standard deviation the row's descriptor draws that
 * input with. */
static void projection(builder *b, const char *label, int out, int64_t n, const mb_tensor_spec *spec)
{
	const mb_lane_spec *s = b->spec;
	float scale = spec && spec->fill == MB_FILL_NORMAL && spec->hi > 0 ? spec->hi : 1.0f;

	gemm(b, label, b->normed, weight(b, label, s->hidden, n, scale), out, s->tokens, n, s->hidden, false, false);
}

static int tensor_index(const mb_tensor_spec *t, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(t[i].name, name))
			return i;
	return -1;
}

/* A row's tensors at `axis`, after its shape check. Returns the count, or
 * 0 with the error set. */
static int row_tensors(builder *b, const mb_row *row, const int64_t *axis, mb_tensor_spec *t)
{
	mb_error why = {0};

	if (row->check_shape && row->check_shape(axis, &why))
		return fail(b, "%s refuses the lane's shape: %s", row->name, why.text), 0;
	return row->tensors(axis, t);
}

static const mb_row *find_row(builder *b, const char *name)
{
	const mb_row *row = mb_catalog_find(name);

	if (!row)
		fail(b, "%s is not in the catalog", name);
	else if (row->min_gpus > 1)
		fail(b, "%s runs across GPUs; a lane runs on one", name);
	return row;
}

static int recipe_row(builder *b, const mb_row *row)
{
	mb_lane_recipe *r = b->r;
	int i;

	for (i = 0; i < r->n_rows && r->rows[i] != row; i++)
		;
	if (i == r->n_rows) {
		if (r->n_rows == MB_LANE_MAX_ROWS)
			return fail(b, "more than %d distinct rows in one step", MB_LANE_MAX_ROWS), -1;
		r->rows[r->n_rows++] = row;
	}
	r->calls_per_step[i]++;
	return i;
}

/* A catalog row's op: each tensor bound by name; an input left unbound is
 * a parameter of this block, an output left unbound a buffer of its own
 * that nothing in the step reads (a weight gradient), both made as the
 * descriptor makes them. */
static mb_lane_op *row_op(builder *b, const char *name, const int64_t *axis, const binding *bind, int n_bind)
{
	const mb_row *row = find_row(b, name);
	mb_tensor_spec t[MB_MAX_TENSORS];
	mb_lane_op *op;
	int n, fused = 0;

	if (!row || !(n = row_tensors(b, row, axis, t)))
		return NULL;
	for (int v = 0; v < row->n_variants; v++)
		fused += row->variants[v].kind == MB_VARIANT_FUSED && mb_lane_variant_usable(&row->variants[v], MB_LANE_EAGER);
	if (!fused)
		return fail(b, "%s has no fused variant a lane can run (CUDA, bf16)", name), NULL;
	for (int i = 0; i < n_bind; i++)
		if (tensor_index(t, n, bind[i].tensor) < 0)
			return fail(b, "%s has no tensor \"%s\"", name, bind[i].tensor), NULL;
	if (!(op = next_op(b, MB_LANE_OP_ROW, name)))
		return NULL;
	op->row = row;
	memcpy(op->axis, axis, sizeof(op->axis));
	for (int i = 0; i < n && !b->rc; i++) {
		int64_t elems = t[i].rows * t[i].row_elems;
		int bytes = t[i].fill == MB_FILL_INDEX ? 4 : 2, buf = -1;
		char own[64];
		for (int j = 0; j < n_bind; j++) {
			if (strcmp(bind[j].tensor, t[i].name))
				continue;
			buf = bind[j].shared ? buffer(b, bind[j].shared, elems, bytes, true, t[i].fill, t[i].lo, t[i].hi)
				: bind[j].buffer;
		}
		snprintf(own, sizeof(own), "%c%d %s.%s", letter(b), b->block, name, t[i].name);
		if (buf < 0 && !b->rc)
			buf = t[i].is_output ? act(b, own, elems) : buffer(b, own, elems, bytes, true, t[i].fill, t[i].lo, t[i].hi);
		if (buf >= 0 && (b->r->buffers[buf].elems != elems || b->r->buffers[buf].elem_bytes != bytes))
			fail(b, "%s's %s is %lld elements of %d bytes at the lane's shape; \"%s\" has %lld of %d", name,
				t[i].name, (long long)elems, bytes, b->r->buffers[buf].name, (long long)b->r->buffers[buf].elems,
				b->r->buffers[buf].elem_bytes);
		if (t[i].is_output)
			op->out[op->n_out++] = buf;
		else
			op->in[op->n_in++] = buf;
	}
	if (!b->rc)
		op->row_index = recipe_row(b, row);
	if (!b->backward && !b->rc) {
		saved *s = &b->blocks[b->block];
		size_t len = strlen(s->rows);
		if (!strstr(s->rows, name) && strcmp(name, "residual_rmsnorm") && strcmp(name, "mhc_sinkhorn"))
			snprintf(s->rows + len, sizeof(s->rows) - len, "%s%s", len ? " and " : "", name);
	}
	return b->rc ? NULL : op;
}

/* The buffer bound to a row op's tensor `name`. */
static int op_tensor(builder *b, const mb_lane_op *op, const char *name)
{
	mb_tensor_spec t[MB_MAX_TENSORS];
	int n, i, in = 0, out = 0;

	if (!op)
		return -1;
	n = op->row->tensors(op->axis, t);
	for (i = 0; i < n && strcmp(t[i].name, name); i++)
		t[i].is_output ? out++ : in++;
	if (i == n)
		return fail(b, "%s has no tensor \"%s\"", op->row->name, name), -1;
	return t[i].is_output ? op->out[out] : op->in[in];
}

/* A row's tensor specs at `axis` before its op exists (to scale the
 * projections that feed it). */
static const mb_tensor_spec *spec_of(const mb_tensor_spec *t, int n, const char *name)
{
	int i = tensor_index(t, n, name);

	return i < 0 ? NULL : &t[i];
}

static void lane_kernel(builder *b, mb_lane_op_kind kind, const char *label, const int *in, int n_in, int out,
	int64_t m, int64_t n, int64_t k)
{
	mb_lane_op *op = next_op(b, kind, label);

	if (!op)
		return;
	op->n_in = n_in;
	memcpy(op->in, in, (size_t)n_in * sizeof(*in));
	op->n_out = 1, op->out[0] = out;
	op->g.m = m, op->g.n = n, op->g.k = k;
}

/* ---- the forward ------------------------------------------------------------- */

/* Every block's X work: mHC's mix and read-out, residual_rmsnorm of the
 * previous block's output and the residual, and mHC's write-back. */
static void block_input(builder *b)
{
	const mb_lane_spec *s = b->spec;
	int64_t t = s->tokens, h = s->hidden, n = s->mhc_streams;
	int residual = b->residual, mix = -1, x = b->stream;
	saved *sv = &b->blocks[b->block];
	mb_lane_op *op;

	if (n) {
		const int64_t axis[MB_MAX_AXES] = {t, n, h, s->mhc_iterations};
		if (h % MHC_KERNEL_VEC) {
			fail(b, "mHC: hidden (%lld) must be a multiple of %d (the read-out and write-back move 16 bytes an "
				"access)", (long long)h, MHC_KERNEL_VEC);
			return;
		}
		mix = act(b, "mhc mixed streams", t * n * h);
		const binding bind[] = {BIND("x", b->wide), BIND("y", mix)};
		row_op(b, "mhc_sinkhorn", axis, bind, 2);
		residual = act(b, "mhc read-out", t * h);
		lane_kernel(b, MB_LANE_OP_MHC_READ, "mhc read-out (lane kernel: the streams' mean)", &mix, 1, residual, t,
			h, n);
	}
	{
		const int64_t axis[MB_MAX_AXES] = {t, h};
		b->normed = act(b, "normed", t * h);
		sv->h = block_act(b, "h", t * h);
		const binding bind[] = {BIND("x", x), BIND("r", residual), BIND("y", b->normed), BIND("h", sv->h)};
		op = row_op(b, "residual_rmsnorm", axis, bind, 4);
		sv->w = op_tensor(b, op, "w");
	}
	if (n) {
		/* the previous block's output into every stream; the norm has
		 * added it to the read-out already (uniform weights) */
		const int in[] = {mix, x};
		int wide = act(b, b->block % 2 ? "mhc streams b" : "mhc streams a", t * n * h);
		lane_kernel(b, MB_LANE_OP_MHC_WRITE, "mhc write-back (lane kernel: the previous output into each stream)",
			in, 2, wide, t, h, n);
		b->wide = wide;
	}
	b->residual = sv->h;
}

static int block_output(builder *b)
{
	return b->stream = act(b, "block output", b->spec->tokens * b->spec->hidden);
}

/* The attention core's stand-in: S = keys x values^T per sequence, a
 * softmax over each row of S, then S x queries; see lane.h. */
static int attention_core(builder *b, int keys, int values, int64_t kv_width, int queries, int64_t q_width,
	const char *out_name, int *out_scores)
{
	const mb_lane_spec *s = b->spec;
	int64_t len = s->tokens / s->sequences;
	int scores = block_act(b, "attention scores (stand-in)", s->sequences * len * len);
	int out = act(b, out_name, s->tokens * q_width);

	if (out_scores)
		*out_scores = scores;

	gemm_per_sequence(b, "attention core (stand-in): scores", keys, values, scores, len, len, kv_width, false, true);
	lane_kernel(b, MB_LANE_OP_SOFTMAX, "attention core (stand-in): softmax", &scores, 1, scores,
		s->sequences * len, len, 0);
	gemm_per_sequence(b, "attention core (stand-in): scores x values", scores, queries, out, len, q_width, len,
		false, false);
	return out;
}

static void gqa_block(builder *b)
{
	const mb_lane_spec *s = b->spec;
	int64_t t = s->tokens, h = s->hidden, q = s->heads * s->head_dim, kv = s->kv_heads * s->head_dim;
	const int64_t axis[MB_MAX_AXES] = {t, s->heads, s->kv_heads, s->head_dim};
	saved *sv = &b->blocks[b->block];
	int wq = weight(b, "Wq", h, q, 1), wk = weight(b, "Wk", h, kv, 1), wv = weight(b, "Wv", h, kv, 1);
	int qb = act(b, "q", t * q), kb = act(b, "k", t * kv), attn;

	sv->gqa = true;
	sv->v = block_act(b, "v", t * kv);
	gemm(b, "Q projection", b->normed, wq, qb, t, q, h, false, false);
	gemm(b, "K projection", b->normed, wk, kb, t, kv, h, false, false);
	gemm(b, "V projection", b->normed, wv, sv->v, t, kv, h, false, false);
	sv->q_rot = block_act(b, "q rotated", t * q);
	sv->k_rot = block_act(b, "k rotated", t * kv);
	{
		const binding bind[] = {BIND("q", qb), BIND("k", kb), SHARED("cos", "rope cos"), SHARED("sin", "rope sin"),
			BIND("q_out", sv->q_rot), BIND("k_out", sv->k_rot)};
		row_op(b, "rope_qk", axis, bind, 6);
	}
	attn = attention_core(b, sv->k_rot, sv->v, kv, sv->q_rot, q, "attention output", &sv->scores);
	sv->wq = wq, sv->wk = wk, sv->wv = wv, sv->wo = weight(b, "Wo", q, h, 1);
	gemm(b, "output projection", attn, sv->wo, block_output(b), t, h, q, false, false);
}

static void mla_block(builder *b)
{
	const mb_lane_spec *s = b->spec;
	int64_t t = s->tokens, h = s->hidden, dn = s->mla_nope_dim, dr = s->mla_rope_dim, rank = s->mla_kv_rank;
	int64_t qw = s->heads * (dn + dr), vw = s->heads * dn;
	const int64_t axis[MB_MAX_AXES] = {t, s->heads, dn, dr};
	int q = act(b, "mla q", t * qw), latent = act(b, "mla kv latent", t * rank), kpe = act(b, "mla k_pe", t * dr);
	int kn = act(b, "mla k_nope", t * vw), v = act(b, "mla v", t * vw);
	int q_out = block_act(b, "mla q_out", t * qw), k_out = block_act(b, "mla k_out", t * qw), attn;

	gemm(b, "Q projection", b->normed, weight(b, "Wq", h, qw, 1), q, t, qw, h, false, false);
	gemm(b, "KV latent projection", b->normed, weight(b, "Wdkv", h, rank, 1), latent, t, rank, h, false, false);
	gemm(b, "k_pe projection", b->normed, weight(b, "Wkpe", h, dr, 1), kpe, t, dr, h, false, false);
	gemm(b, "K up-projection", latent, weight(b, "Wuk", rank, vw, 1), kn, t, vw, rank, false, false);
	gemm(b, "V up-projection", latent, weight(b, "Wuv", rank, vw, 1), v, t, vw, rank, false, false);
	{
		const binding bind[] = {BIND("q", q), BIND("k_nope", kn), BIND("k_pe", kpe), SHARED("cos", "mla rope cos"),
			SHARED("sin", "mla rope sin"), BIND("q_out", q_out), BIND("k_out", k_out)};
		row_op(b, "mla_partial_rope", axis, bind, 7);
	}
	/* scores q_out k_out^T, then S v: the widths line up without GQA */
	attn = attention_core(b, q_out, k_out, qw, v, vw, "mla attention output", NULL);
	gemm(b, "output projection", attn, weight(b, "Wo", vw, h, 1), block_output(b), t, h, vw, false, false);
}

static void attention_block(builder *b)
{
	const mb_lane_spec *s = b->spec;

	if (s->attention[b->n_a++ % s->n_attention] == MB_LANE_MLA)
		mla_block(b);
	else
		gqa_block(b);
}

static void expert_block(builder *b)
{
	const mb_lane_spec *s = b->spec;
	const char *name = s->moe[b->n_e++ % s->n_moe];
	const int64_t axis[MB_MAX_AXES] = {s->tokens, s->hidden, s->experts, s->top_k, s->expert_ffn};
	const mb_row *row = find_row(b, name);
	mb_tensor_spec t[MB_MAX_TENSORS];
	int n = row ? row_tensors(b, row, axis, t) : 0, logits = act(b, "router logits", s->tokens * s->experts);

	if (!n)
		return;
	projection(b, "router", logits, s->experts, spec_of(t, n, "logits"));
	{
		int y = block_output(b);
		const binding bind[] = {BIND("x", b->normed), BIND("logits", logits), BIND("y", y)};
		row_op(b, name, axis, bind, 3);
	}
}

static void state_space_block(builder *b)
{
	const mb_lane_spec *s = b->spec;
	int64_t t = s->tokens, nh = s->ssm_heads, p = s->ssm_head_dim, ns = s->ssm_state;
	const int64_t axis[MB_MAX_AXES] = {s->sequences, t / s->sequences, nh, p, ns};
	const mb_row *row = find_row(b, "ssm_scan");
	mb_tensor_spec ts[MB_MAX_TENSORS];
	int n = row ? row_tensors(b, row, axis, ts) : 0;
	int x = act(b, "ssm x", t * nh * p), dt = act(b, "ssm dt", t * nh), lam = act(b, "ssm lambda", t * nh);
	int bm = act(b, "ssm B", t * ns), cm = act(b, "ssm C", t * ns), y = act(b, "ssm y", t * nh * p);

	if (!n)
		return;
	projection(b, "x projection", x, nh * p, spec_of(ts, n, "x"));
	projection(b, "dt projection", dt, nh, spec_of(ts, n, "dt_raw"));
	projection(b, "lambda projection", lam, nh, spec_of(ts, n, "lambda_raw"));
	projection(b, "B projection", bm, ns, spec_of(ts, n, "B_ssm"));
	projection(b, "C projection", cm, ns, spec_of(ts, n, "C_ssm"));
	{
		const binding bind[] = {BIND("x", x), BIND("dt_raw", dt), BIND("lambda_raw", lam), BIND("B_ssm", bm),
			BIND("C_ssm", cm), BIND("y", y)};
		row_op(b, "ssm_scan", axis, bind, 6);
	}
	gemm(b, "out projection", y, weight(b, "Wout", nh * p, s->hidden, 1), block_output(b), t, s->hidden, nh * p,
		false, false);
}

static void recurrent_block(builder *b)
{
	const mb_lane_spec *s = b->spec;
	int64_t t = s->tokens, d = s->recurrent_width;
	const int64_t axis[MB_MAX_AXES] = {s->sequences, t / s->sequences, d};
	const mb_row *row = find_row(b, "recurrent_scan");
	mb_tensor_spec ts[MB_MAX_TENSORS];
	int n = row ? row_tensors(b, row, axis, ts) : 0;
	int x = act(b, "recurrent x", t * d), y = act(b, "recurrent y", t * d);

	if (!n)
		return;
	projection(b, "in projection", x, d, spec_of(ts, n, "x"));
	{
		const binding bind[] = {BIND("x", x), BIND("y", y)};
		row_op(b, "recurrent_scan", axis, bind, 2);
	}
	gemm(b, "out projection", y, weight(b, "Wout", d, s->hidden, 1), block_output(b), t, s->hidden, d, false, false);
}

static void mlp_block(builder *b)
{
	const mb_lane_spec *s = b->spec;
	const char *name = s->mlp[b->n_d++ % s->n_mlp];
	int64_t t = s->tokens, f = s->mlp_ffn;
	/* swiglu reads the gate and up halves [T, 2F]; relu2 its input [T, F] */
	bool glu = !strcmp(name, "swiglu");
	int up = act(b, glu ? "mlp gate and up" : "mlp up", t * f * (glu ? 2 : 1)), a = act(b, "mlp activation", t * f);
	const int64_t axis[MB_MAX_AXES] = {t, f};
	const binding bind[] = {BIND(glu ? "gu" : "x", up), BIND("y", a)};

	if (strcmp(name, "swiglu") && strcmp(name, "relu2")) {
		fail(b, "mlp: \"%s\" is not relu2 or swiglu", name);
		return;
	}
	projection(b, "up projection", up, f * (glu ? 2 : 1), NULL);
	row_op(b, name, axis, bind, 2);
	gemm(b, "down projection", a, weight(b, "Wdown", f, s->hidden, 1), block_output(b), t, s->hidden, f, false,
		false);
}

/* ---- the backward ------------------------------------------------------------ */

/* A gqa block's backward up to the gradient of its normalised input: the
 * output projection's input gradient, the stand-in's four products (for
 * S = K V^T and O = S Q: dS = dO Q^T, dQ = S^T dO, dK = dS V, dV = dS^T K;
 * softmax's backward launch is left out), rope_qk_bwd, and the Q, K, V
 * projections' input gradients summed. */
static int gqa_backward(builder *b, int grad)
{
	const mb_lane_spec *s = b->spec;
	const saved *sv = &b->blocks[b->block];
	int64_t t = s->tokens, h = s->hidden, q = s->heads * s->head_dim, kv = s->kv_heads * s->head_dim;
	int64_t len = t / s->sequences;
	const int64_t axis[MB_MAX_AXES] = {t, s->heads, s->kv_heads, s->head_dim};
	int d_attn = act(b, "attention output gradient", t * q);
	int d_scores = act(b, "attention scores gradient", s->sequences * len * len);
	int dq_rot = act(b, "q rotated gradient", t * q), dk_rot = act(b, "k rotated gradient", t * kv);
	int dv = act(b, "v gradient", t * kv), dq = act(b, "q gradient", t * q), dk = act(b, "k gradient", t * kv);
	int d_normed = act(b, "normed gradient", t * h);

	gemm(b, "output projection input gradient", grad, sv->wo, d_attn, t, q, h, true, false);
	gemm_per_sequence(b, "attention core (stand-in): dS = dO Q^T", d_attn, sv->q_rot, d_scores, len, len, q, false,
		true);
	gemm_per_sequence(b, "attention core (stand-in): dQ = S^T dO", sv->scores, d_attn, dq_rot, len, q, len, true,
		false);
	gemm_per_sequence(b, "attention core (stand-in): dK = dS V", d_scores, sv->v, dk_rot, len, kv, len, false, false);
	gemm_per_sequence(b, "attention core (stand-in): dV = dS^T K", d_scores, sv->k_rot, dv, len, kv, len, true,
		false);
	{
		const binding bind[] = {BIND("dq_out", dq_rot), BIND("dk_out", dk_rot), SHARED("cos", "rope cos"),
			SHARED("sin", "rope sin"), BIND("dq", dq), BIND("dk", dk)};
		row_op(b, "rope_qk_bwd", axis, bind, 6);
	}
	gemm(b, "Q projection input gradient", dq, sv->wq, d_normed, t, h, q, true, false);
	gemm(b, "K projection input gradient", dk, sv->wk, d_normed, t, h, kv, true, true);
	gemm(b, "V projection input gradient", dv, sv->wv, d_normed, t, h, kv, true, true);
	return d_normed;
}

static void backward(builder *b)
{
	const mb_lane_spec *s = b->spec;
	int64_t t = s->tokens, h = s->hidden;
	int grad = buffer(b, "step input: the loss gradient", t * h, 2, true, MB_FILL_NORMAL, 0, 1);
	int n = (int)strlen(s->pattern);

	b->backward = true;
	for (b->block = n - 1; b->block >= 0 && !b->rc; b->block--) {
		const saved *sv = &b->blocks[b->block];
		const int64_t axis[MB_MAX_AXES] = {t, h};
		int dy = grad, out = act(b, b->block % 2 ? "residual gradient b" : "residual gradient a", t * h);
		if (sv->gqa)
			dy = gqa_backward(b, grad);
		else if (sv->rows[0])
			note_once(b, "%c blocks with %s: no backward row in the catalog, so the block's backward is "
				"residual_rmsnorm_bwd alone, with the gradient at the block's output as its dy", letter(b), sv->rows);
		{
			const binding bind[] = {BIND("dy", dy), BIND("dh_in", grad), BIND("h", sv->h), BIND("w", sv->w),
				BIND("dx", out)};
			row_op(b, "residual_rmsnorm_bwd", axis, bind, 5);
		}
		grad = out;
	}
}

/* ---- the recipe ---------------------------------------------------------------- */

/* Every input of every op written by an earlier op of the step, or a
 * parameter; nothing written that is a parameter. A failure is a bug in
 * the recipe above, named. */
static void check_flow(builder *b)
{
	const mb_lane_recipe *r = b->r;
	bool *written = calloc((size_t)r->n_buffers + 1, sizeof(*written));

	if (!written) {
		b->rc = mb_error_set(b->err, MB_ENOMEM, b->spec->name, "out of memory");
		return;
	}
	for (int i = 0; i < r->n_ops && !b->rc; i++) {
		const mb_lane_op *op = &r->ops[i];
		for (int j = 0; j < op->n_in && !b->rc; j++)
			if (!r->buffers[op->in[j]].param && !written[op->in[j]])
				b->rc = mb_error_set(b->err, MB_EINVAL, b->spec->name, "%s reads \"%s\" before the step writes it",
					op->label, r->buffers[op->in[j]].name);
		for (int j = 0; j < op->n_out && !b->rc; j++) {
			if (r->buffers[op->out[j]].param)
				b->rc = mb_error_set(b->err, MB_EINVAL, b->spec->name, "%s writes the parameter \"%s\"", op->label,
					r->buffers[op->out[j]].name);
			written[op->out[j]] = true;
		}
	}
	free(written);
}

static void notes(builder *b)
{
	const mb_lane_spec *s = b->spec;

	if (strchr(s->pattern, 'A'))
		note_once(b, "attention's core is a labelled stand-in per sequence (scores, a softmax launch, scores x "
			"values; its backward four products): attention is not a catalog row");
	if (s->mhc_streams && s->backward)
		note_once(b, "mhc_sinkhorn has no backward row in the catalog: the streams' gradient is not in the step");
	if (s->mhc_streams)
		note_once(b, "mHC's read-out and write-back of the %lld streams are lane kernels with uniform weights, the "
			"same in every configuration", (long long)s->mhc_streams);
	if (strchr(s->pattern, 'M') || strchr(s->pattern, 'R'))
		note_once(b, "the projections write token-major buffers that ssm_scan and recurrent_scan read in their own "
			"layouts: the same elements and bytes (the lane times; it checks no values)");
	if (s->backward)
		note_once(b, "the backward leaves out the weight gradients (dW = X^T dY), which lie between no rows and run "
			"alike in every configuration");
	else
		note_once(b, "forward only (backward = false): residual_rmsnorm_bwd and rope_qk_bwd are not in the step");
	note_once(b, "row_gather and row_gather_pair: the step has no document masking or token dropping");
	note_once(b, "linear_cross_entropy: the loss head is outside the block pattern; the step starts from a given "
		"loss gradient");
}

void mb_lane_recipe_free(mb_lane_recipe *r)
{
	if (!r)
		return;
	json_decref(r->notes);
	free(r->ops);
	free(r->buffers);
	memset(r, 0, sizeof(*r));
}

int mb_lane_recipe_build(mb_lane_recipe *out, const mb_lane_spec *spec, mb_error *err)
{
	builder *b = calloc(1, sizeof(*b));
	int64_t t = spec->tokens, h = spec->hidden;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!b || !(out->notes = json_array()))
		return free(b), mb_error_set(err, MB_ENOMEM, spec->name, "out of memory");
	b->r = out, b->spec = spec, b->err = err;
	b->block = (int)strlen(spec->pattern); /* errors before the first block name the lane only */
	if (spec->sequences < 1 || t % spec->sequences)
		fail(b, "tokens (%lld) must be a multiple of sequences (%lld)", (long long)t, (long long)spec->sequences);
	b->stream = buffer(b, "step input: the first block's x", t * h, 2, true, MB_FILL_NORMAL, 0, 1);
	b->residual = buffer(b, "step input: the first residual", t * h, 2, true, MB_FILL_NORMAL, 0, 1);
	if (spec->mhc_streams)
		b->wide = buffer(b, "step input: the mhc streams", t * h * spec->mhc_streams, 2, true, MB_FILL_NORMAL, 0, 1);
	for (b->block = 0; spec->pattern[b->block] && !b->rc; b->block++) {
		char c = spec->pattern[b->block];
		block_input(b);
		if (c == 'A')
			attention_block(b);
		else if (c == 'E')
			expert_block(b);
		else if (c == 'M')
			state_space_block(b);
		else if (c == 'R')
			recurrent_block(b);
		else if (c == 'D')
			mlp_block(b);
		else
			fail(b, "pattern \"%s\": block %d is '%c', expected A, E, M, R or D", spec->pattern, b->block, c);
	}
	if (spec->backward && !b->rc)
		backward(b);
	b->block = (int)strlen(spec->pattern);
	b->backward = false;
	if (!b->rc)
		check_flow(b);
	if (!b->rc)
		notes(b);
	rc = b->rc;
	free(b);
	if (rc)
		mb_lane_recipe_free(out);
	return rc;
}
