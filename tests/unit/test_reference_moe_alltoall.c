/* moe_alltoall's host side: the routing (bias, top-K with ties to the
 * lower expert, softmax weights) and the fp32 reference worked by hand,
 * the reference against its fp64 oracle at small shapes (every dtype's
 * rounded inputs, one planted error caught), the shape rules, the
 * variants' names, the launch-by-launch bytes model, and the exact check
 * of a dispatch: what each variant must deliver, built here from the
 * routing independently, passes, and each way of delivering it wrongly
 * (a row moved, a count, a duplicate, a weight, a returned row) is caught.
 * The GPU variants run only under `megabench alltoall` on two or more
 * GPUs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference/moe_alltoall.h"
#include "harness/host_inputs.h"
#include "reference/reference.h"
#include "refcheck.h"
#include "testutil.h"

/* e^-0.3125: scores 1 and 0.6875 below */
#define E_GAP 0.7316156289466418

static const mb_row *row(void)
{
	return mb_catalog_find("moe_alltoall");
}

static void routing_by_hand(void)
{
	/* E = 4, K = 2, logits 0: biases (0, 11, 22 mod 17 = 5, 33 mod 17 =
	 * 16) / 16 = (0, 0.6875, 0.3125, 1): experts 3 then 1 */
	const float zeros[4] = {0, 0, 0, 0};
	int32_t e[2];
	float w[2], s[2];

	CHECK(mb_moe_a2a_bias(0) == 0.0f && mb_moe_a2a_bias(1) == 0.6875f && mb_moe_a2a_bias(2) == 0.3125f
		&& mb_moe_a2a_bias(3) == 1.0f && mb_moe_a2a_bias(17) == 0.0f);
	mb_moe_a2a_topk(zeros, 4, 2, e, s);
	CHECK(e[0] == 3 && e[1] == 1 && s[0] == 1.0f && s[1] == 0.6875f);
	mb_moe_a2a_route(zeros, 4, 2, e, w);
	CHECK(e[0] == 3 && e[1] == 1);
	CHECK_MSG(fabs(w[0] - 1 / (1 + E_GAP)) < 1e-7 && fabs(w[1] - E_GAP / (1 + E_GAP)) < 1e-7, "w %.9g %.9g",
		(double)w[0], (double)w[1]);
	CHECK(w[0] + w[1] > 0.9999999f && w[0] + w[1] < 1.0000001f);
}

static void ties_to_the_lower_expert(void)
{
	/* scores (1, 1, -4.6875, 1): three equal, the two lowest win, in order */
	const float logits[4] = {1.0f, 0.3125f, -5.0f, 0.0f};
	int32_t e[3];
	float s[3];

	mb_moe_a2a_topk(logits, 4, 2, e, s);
	CHECK_MSG(e[0] == 0 && e[1] == 1, "got %d %d", e[0], e[1]);
	mb_moe_a2a_topk(logits, 4, 3, e, s);
	CHECK_MSG(e[0] == 0 && e[1] == 1 && e[2] == 3, "got %d %d %d", e[0], e[1], e[2]);
	/* the best comes first even when it is the last expert */
	const float last[4] = {0.0f, 0.0f, 0.0f, 2.0f};
	mb_moe_a2a_topk(last, 4, 1, e, s);
	CHECK(e[0] == 3 && s[0] == 3.0f);
}

static void reference_by_hand(void)
{
	/* T = 1, H = 2, E = 4, K = 2, G = 2, logits 0: s_3 = 1.75, s_1 = 1.25,
	 * y = (w0 1.75 + w1 1.25) x */
	int64_t axis[MB_A2A_N_AXES] = {1, 2, 4, 2, 2};
	float x[2] = {1.0f, -2.0f}, logits[4] = {0, 0, 0, 0}, y[2], y2[2];
	double yd[2];
	const float *in[2] = {x, logits};
	float *out[1] = {y};
	double *outd[1] = {yd};
	double w0 = 1 / (1 + E_GAP), w1 = E_GAP / (1 + E_GAP), f = w0 * 1.75 + w1 * 1.25;

	CHECK(mb_moe_a2a_scale(3, 4) == 1.75f && mb_moe_a2a_scale(1, 4) == 1.25f && mb_moe_a2a_scale(32, 64) == 1.5f);
	mb_ref_moe_alltoall(axis, in, out, NULL, 1);
	CHECK_MSG(fabs(y[0] - f) < 1e-6 && fabs(y[1] + 2 * f) < 2e-6, "y %.9g %.9g, want %.9g %.9g", (double)y[0],
		(double)y[1], f, -2 * f);
	mb_oracle_moe_alltoall(axis, in, outd, NULL, 1);
	CHECK(fabs(yd[0] - f) < 1e-12 && fabs(yd[1] + 2 * f) < 1e-12);
	/* y does not depend on G: the experts' placement moves traffic only */
	axis[MB_A2A_AX_G] = 4;
	out[0] = y2;
	mb_ref_moe_alltoall(axis, in, out, NULL, 1);
	CHECK(y2[0] == y[0] && y2[1] == y[1]);
}

static void plant_in_y(refcheck_case *c)
{
	c->ref[c->t.n_inputs][c->rows / 2] += 1e-3f;
}

static void against_oracle(const int64_t *axis)
{
	const refcheck_oracle_test test = {.seed = 4242, .plant = plant_in_y};

	refcheck_against_oracle(row(), axis, &test);
}

/* The bias makes loads uneven, as the row promises: over 4096 tokens of
 * seeded logits the hottest of 64 experts gets well over its share, and
 * the two GPUs of G = 2 are not loaded alike. */
static void loads_are_uneven(void)
{
	enum { T = 4096, E = 64, K = 6 };
	mb_tensor_spec spec = {"logits", false, T, E, MB_FILL_NORMAL, 0, 1};
	mb_input_params p = mb_input_params_for(&spec, 1, 99);
	static float logits[T * E];
	int count[E] = {0}, hottest = 0, per_gpu[2] = {0, 0};

	mb_host_fill(logits, T * E, &p, MB_BF16);
	for (int t = 0; t < T; t++) {
		int32_t e[K];
		float w[K];
		mb_moe_a2a_route(logits + t * E, E, K, e, w);
		for (int k = 0; k < K; k++) {
			CHECK(e[k] >= 0 && e[k] < E && w[k] > 0 && w[k] <= 1);
			for (int j = 0; j < k; j++)
				CHECK(e[j] != e[k]);
			count[e[k]]++;
			per_gpu[e[k] / (E / 2)]++;
		}
	}
	for (int e = 0; e < E; e++)
		hottest = count[e] > hottest ? count[e] : hottest;
	CHECK_MSG(hottest > 1.5 * T * K / E, "hottest expert %d of %d copies", hottest, T * K);
	CHECK(per_gpu[0] != per_gpu[1] && per_gpu[0] + per_gpu[1] == T * K);
}

static void shape_rules(void)
{
	const mb_row *r = row();
	mb_error why;

	CHECK(r && r->min_gpus == 2 && r->block == 'E' && r->n_axes == MB_A2A_N_AXES);
	if (!r)
		return;
	CHECK(r->check_shape((int64_t[]){4096, 2048, 64, 6, 2}, &why) == 0);
	CHECK(r->check_shape((int64_t[]){4096, 2048, 64, 6, 8}, &why) == 0);
	CHECK(r->check_shape((int64_t[]){4096, 2048, 64, 6, 3}, &why) == MB_EINVAL && strstr(why.text, "divide"));
	CHECK(r->check_shape((int64_t[]){4096, 2048, 4, 6, 2}, &why) == MB_EINVAL && strstr(why.text, "K <= E"));
	CHECK(r->check_shape((int64_t[]){4096, 2048, 64, 9, 2}, &why) == MB_EINVAL);
	CHECK(r->check_shape((int64_t[]){4096, 2048, 2048, 6, 2}, &why) == MB_EINVAL);
	CHECK(r->check_shape((int64_t[]){INT32_MAX, 2048, 64, 6, 2}, &why) == MB_EINVAL && strstr(why.text, "32 bits"));
}

static void variants(void)
{
	const mb_row *r = row();
	static const char *const names[] = {"fused", "grouped_sendrecv", "nccl_alltoall", "nccl_sendrecv"};

	for (size_t i = 0; r && i < sizeof(names) / sizeof(names[0]); i++) {
		const mb_variant *v = mb_row_find_variant(r, names[i]);
		mb_a2a_variant a;
		CHECK_MSG(v && v->launch == NULL && strcmp(v->backend, "cuda") == 0, "%s", names[i]);
		CHECK(mb_a2a_variant_parse(names[i], &a) == 0 && strcmp(mb_a2a_variant_name(a), names[i]) == 0);
	}
	CHECK(mb_a2a_variant_parse("grouped", &(mb_a2a_variant){0}) == -1);
	CHECK(mb_a2a_vendor_rows_per_peer(&(mb_a2a_dims){4096, 2048, 64, 6, 4, MB_BF16}) == 6144);
	CHECK(mb_a2a_vendor_rows_per_peer(&(mb_a2a_dims){7, 2048, 64, 6, 4, MB_BF16}) == 10);
}

/* Each variant's launches as its bytes model has them: as many as it
 * declares, each named by one of its patterns and moving bytes; the fused
 * model and the reference add up to `bytes`; the fallback moves more. */
static void traffic_model(const int64_t *axis)
{
	const mb_row *r = row();
	uint64_t fused = 0, fallback = 0;

	for (int d = 0; r && d < MB_DTYPE_COUNT; d++) {
		for (int i = 0; i < r->n_variants; i++) {
			const mb_variant *v = &r->variants[i];
			const int n = r->traffic(axis, (mb_dtype)d, v, NULL);
			mb_launch_traffic *l = n > 0 ? calloc((size_t)n, sizeof(*l)) : NULL;
			uint64_t total = 0;
			CHECK_MSG(n == (v->kind == MB_VARIANT_REFERENCE ? 1 : v->launches_per_call), "%s: %d launches", v->name,
				n);
			CHECK(l && r->traffic(axis, (mb_dtype)d, v, l) == n);
			for (int k = 0; l && k < n; k++) {
				bool named = v->kind == MB_VARIANT_REFERENCE;
				for (int p = 0; p < MB_MAX_KERNEL_PATTERNS && v->kernel_patterns[p]; p++)
					named = named || strcmp(v->kernel_patterns[p], l[k].kernel) == 0;
				CHECK_MSG(named && l[k].read_bytes + l[k].write_bytes > 0, "%s launch %d", v->name, k);
				total += l[k].read_bytes + l[k].write_bytes;
			}
			free(l);
			if (v->kind == MB_VARIANT_FUSED || v->kind == MB_VARIANT_REFERENCE)
				CHECK_MSG(total == r->bytes(axis, (mb_dtype)d), "%s: %llu, bytes() %llu", v->name,
					(unsigned long long)total, (unsigned long long)r->bytes(axis, (mb_dtype)d));
			if (v->kind == MB_VARIANT_FUSED)
				fused = total;
			if (v->kind == MB_VARIANT_FALLBACK)
				fallback = total;
		}
		CHECK_MSG(fallback > fused, "fallback %llu bytes, fused %llu", (unsigned long long)fallback,
			(unsigned long long)fused);
	}
}


/* ---- the exact check -------------------------------------------------------- */

/* What rank d must receive, built from the routing as the variants are
 * documented to send it (kernels/moe_alltoall.h): the fallback expert by
 * expert in token order, the fused dispatch one row per routed token in
 * the reverse order (any order passes, with its metadata), the vendors
 * equal chunks of x tiled, echoed back. */
typedef struct delivery_buf {
	mb_a2a_delivery got;
	uint64_t recv_hash[4096], ret_hash[4096];
	mb_a2a_meta meta[4096];
	int32_t counts[MB_A2A_MAX_GPUS * 64];
	mb_a2a_origin origin[4096];
} delivery_buf;

static void deliver(delivery_buf *b, const mb_a2a_routing *rt, mb_a2a_variant v, int d)
{
	const mb_a2a_dims *dm = &rt->d;
	const int64_t per_gpu = dm->E / dm->G, T = dm->T, K = dm->K;
	int64_t n = 0;

	memset(b, 0, sizeof(*b));
	b->got.view.G = dm->G;
	for (int s = 0; s < dm->G; s++) {
		const int32_t *ex = rt->expert + s * T * K;
		const float *w = rt->weight + s * T * K;
		b->got.view.recv_off[s] = n;
		if (v == MB_A2A_VENDOR_ALLTOALL || v == MB_A2A_VENDOR_SENDRECV) {
			const int64_t c = mb_a2a_vendor_rows_per_peer(dm);
			for (int64_t i = 0; i < c; i++)
				b->recv_hash[n++] = rt->xhash[s * T + (d * c + i) % T];
		} else if (v == MB_A2A_FALLBACK) {
			for (int64_t j = 0; j < per_gpu; j++)
				for (int64_t t = 0; t < T; t++)
					for (int64_t k = 0; k < K; k++)
						if (ex[t * K + k] == d * per_gpu + j) {
							b->recv_hash[n++] = rt->xhash[s * T + t];
							b->counts[s * per_gpu + j]++;
						}
		} else {
			for (int64_t t = T - 1; t >= 0; t--) {
				mb_a2a_meta m = {(int32_t)t, 0, {0}, {0}};
				for (int64_t k = 0; k < K; k++)
					if (ex[t * K + k] / per_gpu == d) {
						m.expert[m.n] = ex[t * K + k];
						m.weight[m.n++] = w[t * K + k];
					}
				if (m.n) {
					b->meta[n] = m;
					b->recv_hash[n++] = rt->xhash[s * T + t];
				}
			}
		}
		b->got.view.recv_rows[s] = n - b->got.view.recv_off[s];
	}
	for (int64_t j = 0; j < mb_a2a_vendor_rows_per_peer(dm) * dm->G; j++)
		b->ret_hash[j] = rt->xhash[d * T + j % T];
	b->got.view.recv_expert_counts = v == MB_A2A_FALLBACK ? b->counts : NULL;
	b->got.recv_hash = b->recv_hash;
	b->got.recv_meta = v == MB_A2A_FUSED ? b->meta : NULL;
	b->got.ret_hash = v == MB_A2A_VENDOR_ALLTOALL || v == MB_A2A_VENDOR_SENDRECV ? b->ret_hash : NULL;
}

static uint64_t check(delivery_buf *b, const mb_a2a_routing *rt, mb_a2a_variant v, int d, mb_a2a_tally *t)
{
	memset(t, 0, sizeof(*t));
	CHECK(mb_a2a_check_delivery(t, b->origin, rt, v, d, &b->got) == 0);
	return t->wrong;
}

static void routing_of(mb_a2a_routing *rt, const mb_a2a_dims *d)
{
	mb_tensor_spec spec = {"logits", false, d->G * d->T, d->E, MB_FILL_NORMAL, 0, 1};
	mb_input_params p = mb_input_params_for(&spec, 1, 17);
	float *logits = malloc((size_t)(d->G * d->T * d->E) * sizeof(float));

	CHECK(logits && mb_a2a_routing_make(rt, d, logits ? (mb_host_fill(logits, (uint64_t)(d->G * d->T * d->E), &p,
		d->dtype), logits) : NULL) == 0);
	for (int64_t i = 0; i < d->G * d->T; i++)
		rt->xhash[i] = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1) ^ 0x1234u;
	free(logits);
}

static void exact_check(const mb_a2a_dims *dims)
{
	static delivery_buf b;
	mb_a2a_routing rt;
	mb_a2a_tally t;
	mb_error why;

	routing_of(&rt, dims);
	CHECK(mb_a2a_hashes_distinct(&rt, &why) == 0);
	for (int v = 0; v < MB_A2A_N_VARIANTS; v++) {
		for (int d = 0; d < dims->G; d++) {
			int64_t total = 0;
			deliver(&b, &rt, (mb_a2a_variant)v, d);
			for (int s = 0; s < dims->G; s++)
				total += b.got.view.recv_rows[s];
			CHECK_MSG(check(&b, &rt, (mb_a2a_variant)v, d, &t) == 0, "%s to rank %d: %s",
				mb_a2a_variant_name((mb_a2a_variant)v), d, t.first);
			CHECK(total == mb_a2a_rows_received(&rt, (mb_a2a_variant)v, d) && total > 1);
			CHECK(t.hashed >= (uint64_t)total);
			for (int64_t p = 0; p < total; p++)
				CHECK(b.origin[p].token >= 0 && b.recv_hash[p] == rt.xhash[b.origin[p].rank * dims->T
					+ b.origin[p].token]);
			/* two rows swapped */
			uint64_t h = b.recv_hash[0];
			b.recv_hash[0] = b.recv_hash[total - 1];
			b.recv_hash[total - 1] = h;
			CHECK(check(&b, &rt, (mb_a2a_variant)v, d, &t) >= 1 && strstr(t.first, "hash differs"));
			/* one row fewer from the last source */
			deliver(&b, &rt, (mb_a2a_variant)v, d);
			b.got.view.recv_rows[dims->G - 1]--;
			CHECK(check(&b, &rt, (mb_a2a_variant)v, d, &t) >= 1 && strstr(t.first, "rows arrived from rank"));
		}
	}
	/* the fallback's announced counts, the fused metadata, the return leg */
	deliver(&b, &rt, MB_A2A_FALLBACK, 0);
	b.counts[0]++;
	CHECK(check(&b, &rt, MB_A2A_FALLBACK, 0, &t) == 1 && strstr(t.first, "announced"));
	deliver(&b, &rt, MB_A2A_FUSED, 1);
	b.meta[0].weight[0] = nextafterf(b.meta[0].weight[0], 2.0f);
	CHECK(check(&b, &rt, MB_A2A_FUSED, 1, &t) == 1 && strstr(t.first, "weights"));
	deliver(&b, &rt, MB_A2A_FUSED, 1);
	b.meta[1].token = b.meta[0].token;
	CHECK(check(&b, &rt, MB_A2A_FUSED, 1, &t) >= 1 && strstr(t.first, "arrived twice"));
	deliver(&b, &rt, MB_A2A_FUSED, 1);
	b.meta[2].token = (int32_t)dims->T;
	CHECK(check(&b, &rt, MB_A2A_FUSED, 1, &t) == 1 && strstr(t.first, "outside"));
	deliver(&b, &rt, MB_A2A_VENDOR_SENDRECV, 1);
	b.ret_hash[3] ^= 1;
	CHECK(check(&b, &rt, MB_A2A_VENDOR_SENDRECV, 1, &t) == 1 && strstr(t.first, "returned row 3"));
	/* a hash that cannot tell two tokens apart is refused */
	rt.xhash[dims->T + 1] = rt.xhash[dims->T + 2];
	CHECK(mb_a2a_hashes_distinct(&rt, &why) == MB_EINVAL && strstr(why.text, "rank 1"));
	mb_a2a_routing_free(&rt);
}

int main(void)
{
	CHECK(row() != NULL);
	if (!row())
		return mb_test_finish("test_reference_moe_alltoall");
	routing_by_hand();
	ties_to_the_lower_expert();
	reference_by_hand();
	against_oracle((int64_t[]){33, 40, 8, 3, 2});
	against_oracle((int64_t[]){64, 72, 64, 6, 8});
	against_oracle((int64_t[]){17, 64, 12, 8, 3});
	loads_are_uneven();
	shape_rules();
	variants();
	traffic_model((int64_t[]){4096, 2048, 64, 6, 2});
	traffic_model((int64_t[]){16384, 2048, 64, 6, 8});
	/* rows of 512 bytes and more: under it the fused metadata (72 bytes a
	 * row) outweighs the copies it saves at K = 2 */
	traffic_model((int64_t[]){64, 256, 8, 2, 2});
	exact_check(&(mb_a2a_dims){37, 8, 8, 3, 2, MB_BF16});
	exact_check(&(mb_a2a_dims){29, 8, 16, 4, 4, MB_FP16});
	return mb_test_finish("test_reference_moe_alltoall");
}
