/* moe_alltoall: expert-parallel dispatch and combine, one rank's view.
 *
 * Tokens x [T, H] and router logits [T, E]; a token goes to its top-K
 * experts by score = logit + bias(e) (ties to the lower index), with
 * weights w = softmax of the K chosen scores; expert e's "FFN" is the
 * exactly defined s_e = 1 + e / E, and combine sums the weighted results:
 *
 *   y[t, j] = sum_k w[t,k] * (s_{e[t,k]} * x[t, j])          (k in order)
 *
 * y does not depend on how the E experts are spread over the G GPUs: G is
 * an axis only because the traffic does. One body serves both precisions;
 * REAL is the arithmetic type. Routing (the selection) is fp32 in both, so
 * that the oracle checks the arithmetic, not a tie between near-equal
 * scores; the oracle recomputes the weights from the chosen scores in
 * double.
 *
 * Worked by hand (tests/unit/test_reference_moe_alltoall.c): E = 4, K = 2,
 * logits (0, 0, 0, 0): biases are (0, 11, 22 = 5, 33 = 16 mod 17) / 16 =
 * (0, 0.6875, 0.3125, 1), so experts 3 then 1 are chosen with scores 1 and
 * 0.6875, weights 1 / (1 + e^-0.3125) and e^-0.3125 / (1 + e^-0.3125), and
 * y = (w_0 * 1.75 + w_1 * 1.25) x. */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference/moe_alltoall.h"
#include "reference/row_common.h"
#include "reference/reference.h"
#include "reference/traffic.h"

enum { AX_T = MB_A2A_AX_T, AX_H = MB_A2A_AX_H, AX_E = MB_A2A_AX_E, AX_K = MB_A2A_AX_K, AX_G = MB_A2A_AX_G };
enum { IN_X, IN_LOGITS };
enum { OUT_Y };

/* ---- routing, shared with the harness (reference/moe_alltoall.h) ---- */

float mb_moe_a2a_bias(int64_t expert)
{
	return (float)((expert * MB_A2A_BIAS_MUL) % MB_A2A_BIAS_MOD) / MB_A2A_BIAS_DIV;
}

float mb_moe_a2a_scale(int64_t expert, int64_t n_experts)
{
	return 1.0f + (float)expert / (float)n_experts;
}

void mb_moe_a2a_topk(const float *logits, int64_t n_experts, int64_t k, int32_t *out_expert, float *out_score)
{
	/* insertion into a sorted list of k: K is at most MB_A2A_MAX_K, and a
	 * strict > keeps the earlier (lower) expert ahead on a tie */
	int64_t n = 0;

	for (int64_t e = 0; e < n_experts; e++) {
		float s = logits[e] + mb_moe_a2a_bias(e);
		int64_t at = n < k ? n : k;
		while (at > 0 && s > out_score[at - 1])
			at--;
		if (at >= k)
			continue;
		for (int64_t j = (n < k ? n : k - 1); j > at; j--) {
			out_score[j] = out_score[j - 1];
			out_expert[j] = out_expert[j - 1];
		}
		out_score[at] = s;
		out_expert[at] = (int32_t)e;
		if (n < k)
			n++;
	}
}

void mb_moe_a2a_route(const float *logits, int64_t n_experts, int64_t k, int32_t *out_expert, float *out_weight)
{
	float score[MB_A2A_MAX_K], sum = 0.0f;

	mb_moe_a2a_topk(logits, n_experts, k, out_expert, score);
	/* score[0] is the largest: every exponent is <= 0 */
	for (int64_t j = 0; j < k; j++) {
		out_weight[j] = expf(score[j] - score[0]);
		sum += out_weight[j];
	}
	for (int64_t j = 0; j < k; j++)
		out_weight[j] /= sum;
}

static const char *const VARIANT_NAMES[MB_A2A_N_VARIANTS] = {
	[MB_A2A_FALLBACK] = "grouped_sendrecv",
	[MB_A2A_FUSED] = "fused",
	[MB_A2A_VENDOR_ALLTOALL] = "nccl_alltoall",
	[MB_A2A_VENDOR_SENDRECV] = "nccl_sendrecv",
};

const char *mb_a2a_variant_name(mb_a2a_variant v)
{
	return v >= 0 && v < MB_A2A_N_VARIANTS ? VARIANT_NAMES[v] : "?";
}

int mb_a2a_variant_parse(const char *name, mb_a2a_variant *out)
{
	for (int v = 0; v < MB_A2A_N_VARIANTS; v++) {
		if (strcmp(name, VARIANT_NAMES[v]) == 0) {
			*out = (mb_a2a_variant)v;
			return 0;
		}
	}
	return -1;
}

int64_t mb_a2a_vendor_rows_per_peer(const mb_a2a_dims *d)
{
	return d->T * d->K / d->G;
}

/* ---- the exact-dispatch check (reference/moe_alltoall.h) ------------ */

int mb_a2a_routing_make(mb_a2a_routing *out, const mb_a2a_dims *d, const float *logits)
{
	const size_t entries = (size_t)d->G * (size_t)(d->T * d->K);

	memset(out, 0, sizeof(*out));
	out->d = *d;
	out->expert = malloc(entries * sizeof(*out->expert));
	out->weight = malloc(entries * sizeof(*out->weight));
	out->xhash = calloc((size_t)d->G * (size_t)d->T, sizeof(*out->xhash));
	if (!out->expert || !out->weight || !out->xhash) {
		mb_a2a_routing_free(out);
		return -1;
	}
	for (int64_t t = 0; t < d->G * d->T; t++)
		mb_moe_a2a_route(logits + t * d->E, d->E, d->K, out->expert + t * d->K, out->weight + t * d->K);
	return 0;
}

void mb_a2a_routing_free(mb_a2a_routing *rt)
{
	free(rt->expert);
	free(rt->weight);
	free(rt->xhash);
	rt->expert = NULL;
	rt->weight = NULL;
	rt->xhash = NULL;
}

static bool is_vendor(mb_a2a_variant v)
{
	return v == MB_A2A_VENDOR_ALLTOALL || v == MB_A2A_VENDOR_SENDRECV;
}

/* Source s's routing entries [T][K]. */
static const int32_t *experts_of(const mb_a2a_routing *rt, int s)
{
	return rt->expert + (int64_t)s * rt->d.T * rt->d.K;
}

/* Tokens of s with an expert on d: the fused dispatch's rows from s to d. */
static int64_t tokens_routed(const mb_a2a_routing *rt, int s, int d)
{
	const int64_t per_gpu = rt->d.E / rt->d.G;
	const int32_t *ex = experts_of(rt, s);
	int64_t n = 0;

	for (int64_t t = 0; t < rt->d.T; t++) {
		bool here = false;
		for (int64_t k = 0; k < rt->d.K; k++)
			here = here || ex[t * rt->d.K + k] / per_gpu == d;
		n += here;
	}
	return n;
}

/* The rows the fallback or a vendor delivers to d from s, in order, into
 * `tok` (NULL: count only), and the fallback's count per expert of d
 * (NULL, or E / G long). The fused dispatch's count: tokens_routed. */
static int64_t expected_rows(const mb_a2a_routing *rt, mb_a2a_variant v, int s, int d, int32_t *tok,
	int32_t *per_expert)
{
	const int64_t per_gpu = rt->d.E / rt->d.G;
	const int32_t *ex = experts_of(rt, s);
	int64_t n = 0;

	if (is_vendor(v)) {
		const int64_t c = mb_a2a_vendor_rows_per_peer(&rt->d);
		for (int64_t i = 0; tok && i < c; i++)
			tok[i] = (int32_t)((d * c + i) % rt->d.T);
		return c;
	}
	if (v == MB_A2A_FUSED)
		return tokens_routed(rt, s, d);
	for (int64_t j = 0; j < per_gpu; j++) {
		const int32_t e = (int32_t)(d * per_gpu + j);
		int64_t here = 0;
		for (int64_t t = 0; t < rt->d.T; t++)
			for (int64_t k = 0; k < rt->d.K; k++)
				if (ex[t * rt->d.K + k] == e) {
					if (tok)
						tok[n + here] = (int32_t)t;
					here++;
				}
		if (per_expert)
			per_expert[j] = (int32_t)here;
		n += here;
	}
	return n;
}

int64_t mb_a2a_rows_received(const mb_a2a_routing *rt, mb_a2a_variant v, int dst)
{
	int64_t n = 0;

	for (int s = 0; s < rt->d.G; s++)
		n += expected_rows(rt, v, s, dst, NULL, NULL);
	return n;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

int mb_a2a_hashes_distinct(const mb_a2a_routing *rt, mb_error *err)
{
	const int64_t T = rt->d.T;
	uint64_t *sorted = malloc((size_t)T * sizeof(*sorted));
	int rc = 0;

	if (!sorted)
		return mb_error_set(err, MB_ENOMEM, NULL, "out of host memory");
	for (int s = 0; s < rt->d.G && !rc; s++) {
		memcpy(sorted, rt->xhash + s * T, (size_t)T * sizeof(*sorted));
		qsort(sorted, (size_t)T, sizeof(*sorted), cmp_u64);
		for (int64_t t = 1; t < T && !rc; t++)
			if (sorted[t] == sorted[t - 1])
				rc = mb_error_set(err, MB_EINVAL, NULL, "two of rank %d's tokens have one row hash "
					"(%016llx): the dispatch check could not tell them apart", s,
					(unsigned long long)sorted[t]);
	}
	free(sorted);
	return rc;
}

void mb_a2a_tally_wrong(mb_a2a_tally *t, const char *fmt, ...)
{
	va_list ap;

	if (t->wrong++ > 0)
		return;
	va_start(ap, fmt);
	vsnprintf(t->first, sizeof(t->first), fmt, ap);
	va_end(ap);
}

/* The fused metadata of received row p from s on d: a token routed here,
 * not seen before, with its experts here and their weights in k order.
 * Returns the token, or -1 when the metadata names none. */
static int32_t check_meta(const mb_a2a_routing *rt, const mb_a2a_meta *m, int s, int d, int64_t p,
	unsigned char *seen, mb_a2a_tally *out)
{
	const int64_t per_gpu = rt->d.E / rt->d.G, K = rt->d.K;
	const int32_t *ex = experts_of(rt, s);
	const float *w = rt->weight + (int64_t)s * rt->d.T * K;
	int n = 0;

	if (m->token < 0 || m->token >= rt->d.T) {
		mb_a2a_tally_wrong(out, "received row %lld from rank %d names token %d, outside 0..%lld", (long long)p, s,
			m->token, (long long)rt->d.T - 1);
		return -1;
	}
	if (seen[m->token]++) {
		mb_a2a_tally_wrong(out, "rank %d's token %d arrived twice", s, m->token);
		return m->token;
	}
	for (int64_t k = 0; k < K; k++) {
		const int32_t e = ex[m->token * K + k];
		if (e / per_gpu != d)
			continue;
		if (n >= m->n || m->expert[n] != e || memcmp(&m->weight[n], &w[m->token * K + k], sizeof(float))) {
			mb_a2a_tally_wrong(out, "rank %d's token %d arrived with experts or weights that are not its "
				"routing's (expert %d, weight %.9g expected at place %d)", s, m->token, e,
				(double)w[m->token * K + k], n);
			return m->token;
		}
		n++;
	}
	if (n == 0 || m->n != n)
		mb_a2a_tally_wrong(out, "rank %d's token %d arrived with %d experts; its routing has %d here", s, m->token,
			m->n, n);
	return m->token;
}

/* The rows from source s: the count, the fallback's announced counts, and
 * which token each row must hold. */
static void check_source(const mb_a2a_routing *rt, mb_a2a_variant v, int s, int d, const mb_a2a_delivery *got,
	unsigned char *seen, mb_a2a_origin *origin, mb_a2a_tally *out)
{
	const int64_t off = got->view.recv_off[s], n = got->view.recv_rows[s], per_gpu = rt->d.E / rt->d.G;
	int32_t per_expert[MB_A2A_MAX_E], *tok = NULL;
	const int64_t want = expected_rows(rt, v, s, d, NULL, per_expert);

	for (int64_t i = 0; i < n; i++)
		origin[off + i] = (mb_a2a_origin){s, -1};
	if (n != want) {
		mb_a2a_tally_wrong(out, "%lld rows arrived from rank %d, its routing sends %lld", (long long)n, s,
			(long long)want);
		return;
	}
	for (int64_t j = 0; v == MB_A2A_FALLBACK && j < per_gpu; j++)
		if (got->view.recv_expert_counts[s * per_gpu + j] != per_expert[j])
			mb_a2a_tally_wrong(out, "rank %d announced %d rows for expert %lld, its routing has %d", s,
				got->view.recv_expert_counts[s * per_gpu + j], (long long)(d * per_gpu + j), per_expert[j]);
	if (v == MB_A2A_FUSED) {
		memset(seen, 0, (size_t)rt->d.T);
		for (int64_t i = 0; i < n; i++)
			origin[off + i].token = check_meta(rt, &got->recv_meta[off + i], s, d, off + i, seen, out);
		return;
	}
	tok = malloc((size_t)(n + 1) * sizeof(*tok));
	if (!tok) {
		mb_a2a_tally_wrong(out, "out of host memory");
		return;
	}
	expected_rows(rt, v, s, d, tok, NULL);
	for (int64_t i = 0; i < n; i++)
		origin[off + i].token = tok[i];
	free(tok);
}

int mb_a2a_check_delivery(mb_a2a_tally *out, mb_a2a_origin *origin, const mb_a2a_routing *rt, mb_a2a_variant v,
	int rank, const mb_a2a_delivery *got)
{
	const int64_t T = rt->d.T;
	unsigned char *seen = calloc((size_t)T, 1);
	int64_t total = 0;

	if (!seen)
		return -1;
	for (int s = 0; s < rt->d.G; s++) {
		check_source(rt, v, s, rank, got, seen, origin, out);
		total += got->view.recv_rows[s];
	}
	for (int64_t p = 0; p < total; p++) {
		const mb_a2a_origin o = origin[p];
		out->hashed++;
		if (o.token >= 0 && got->recv_hash[p] != rt->xhash[o.rank * T + o.token])
			mb_a2a_tally_wrong(out, "received row %lld is not rank %d's token %d (row hash differs)", (long long)p,
				o.rank, o.token);
	}
	if (is_vendor(v)) {
		/* the return leg: chunk p of ret is what p echoed of our chunk p,
		 * our send rows p c .. p c + c - 1, which are x[j mod T] */
		const int64_t n = mb_a2a_vendor_rows_per_peer(&rt->d) * rt->d.G;
		for (int64_t j = 0; j < n; j++) {
			out->hashed++;
			if (got->ret_hash[j] != rt->xhash[(int64_t)rank * T + j % T])
				mb_a2a_tally_wrong(out, "returned row %lld is not this rank's row %lld", (long long)j,
					(long long)(j % T));
		}
	}
	free(seen);
	return 0;
}

/* ---- the reference and the oracle ---------------------------------- */

void mb_ref_moe_alltoall(const int64_t *axis, const float *const *in, float *const *out, const int64_t *rows,
	int64_t n_rows)
{
	const int64_t h = axis[AX_H], e = axis[AX_E], k = axis[AX_K];

	for (int64_t i = 0; i < n_rows; i++) {
		int64_t t = mb_ref_row(rows, i);
		const float *x = in[IN_X] + t * h;
		float *y = out[OUT_Y] + t * h;
		int32_t expert[MB_A2A_MAX_K];
		float w[MB_A2A_MAX_K], s[MB_A2A_MAX_K];

		mb_moe_a2a_route(in[IN_LOGITS] + t * e, e, k, expert, w);
		for (int64_t j = 0; j < k; j++)
			s[j] = mb_moe_a2a_scale(expert[j], e);
		for (int64_t c = 0; c < h; c++) {
			float acc = 0.0f;
			for (int64_t j = 0; j < k; j++)
				acc += w[j] * (s[j] * x[c]);
			y[c] = acc;
		}
	}
}

void mb_oracle_moe_alltoall(const int64_t *axis, const float *const *in, double *const *out, const int64_t *rows,
	int64_t n_rows)
{
	const int64_t h = axis[AX_H], e = axis[AX_E], k = axis[AX_K];

	for (int64_t i = 0; i < n_rows; i++) {
		int64_t t = mb_ref_row(rows, i);
		const float *x = in[IN_X] + t * h;
		double *y = out[OUT_Y] + t * h;
		int32_t expert[MB_A2A_MAX_K];
		float score[MB_A2A_MAX_K];
		double w[MB_A2A_MAX_K], s[MB_A2A_MAX_K], sum = 0;

		mb_moe_a2a_topk(in[IN_LOGITS] + t * e, e, k, expert, score);
		for (int64_t j = 0; j < k; j++) {
			w[j] = exp((double)score[j] - (double)score[0]);
			sum += w[j];
			s[j] = 1.0 + (double)expert[j] / (double)e;
		}
		for (int64_t c = 0; c < h; c++) {
			double acc = 0;
			for (int64_t j = 0; j < k; j++)
				acc += w[j] / sum * (s[j] * x[c]);
			y[c] = acc;
		}
	}
}

/* ---- the moe_alltoall catalog row ----------------------------------------------------------- */

/* Row positions (the fallback's, the fused variant's slot map) are int32. */
#define MAX_COPIES INT32_MAX

static int a2a_check_shape(const int64_t *a, mb_error *err)
{
	if (a[AX_K] > a[AX_E] || a[AX_K] > MB_A2A_MAX_K)
		return mb_error_set(err, MB_EINVAL, NULL, "K = %lld: top-K needs K <= E (%lld) and K <= %d",
			(long long)a[AX_K], (long long)a[AX_E], MB_A2A_MAX_K);
	if (a[AX_E] > MB_A2A_MAX_E)
		return mb_error_set(err, MB_EINVAL, NULL, "E = %lld: at most %d experts", (long long)a[AX_E],
			MB_A2A_MAX_E);
	if (a[AX_G] > MB_A2A_MAX_GPUS || a[AX_E] % a[AX_G] != 0)
		return mb_error_set(err, MB_EINVAL, NULL, "G = %lld: the E = %lld experts are spread evenly over at "
			"most %d GPUs, so G must divide E", (long long)a[AX_G], (long long)a[AX_E], MB_A2A_MAX_GPUS);
	if (a[AX_T] > MAX_COPIES / a[AX_K] || a[AX_T] > MAX_COPIES / a[AX_G])
		return mb_error_set(err, MB_EINVAL, NULL, "T = %lld: T x K and T x G must fit in 32 bits (row "
			"positions)", (long long)a[AX_T]);
	return 0;
}

static int a2a_tensors(const int64_t *a, mb_tensor_spec *t)
{
	t[0] = (mb_tensor_spec){"x", false, a[AX_T], a[AX_H], MB_FILL_NORMAL, 0, 1};
	t[1] = (mb_tensor_spec){"logits", false, a[AX_T], a[AX_E], MB_FILL_NORMAL, 0, 1};
	t[2] = (mb_tensor_spec){"y", true, a[AX_T], a[AX_H], MB_FILL_NORMAL, 0, 0};
	return 3;
}

/* ---- bytes: one rank's device traffic, by launch ----
 *
 * The counts depend on the routing, so the model takes the uniform
 * routing's expectation (the bias moves loads between experts, and so the
 * receipts' measured bytes, by a few percent). A token's K experts miss a
 * given GPU's E / G with probability C(E - E/G, K) / C(E, K), so a rank
 * sends D = T G (1 - that) rows in the fused dispatch (each token once per
 * destination), against T K copies in the fallback's. Each rank receives
 * as much as it sends, in expectation. */
typedef struct a2a_model {
	uint64_t row;        /* bytes of one token row */
	uint64_t tokens;     /* T rows of x, or of y */
	uint64_t routing;    /* expert ids and weights, [T, K] each */
	uint64_t copies;     /* the fallback's T K rows */
	uint64_t pairs;      /* the fused variant's expected (token, GPU) rows */
	uint64_t meta;       /* bytes beside each fused row */
	uint64_t slots;      /* the fused slot map [T, G] int32 */
	uint64_t counts;     /* the fallback's count exchange: [E] int32 */
	uint64_t dest_counts; /* the fused variant's: [G] int32 */
	uint64_t vendor;     /* the vendors' rows, G x floor(T K / G) */
} a2a_model;

static void a2a_model_make(a2a_model *m, const int64_t *a, mb_dtype dtype)
{
	const int64_t per_gpu = a[AX_E] / a[AX_G];
	double miss = 1.0;

	for (int64_t i = 0; i < a[AX_K]; i++)
		miss *= (double)(a[AX_E] - per_gpu - i) / (double)(a[AX_E] - i);
	if (miss < 0)
		miss = 0;
	m->row = (uint64_t)a[AX_H] * mb_dtype_size(dtype);
	m->tokens = (uint64_t)a[AX_T] * m->row;
	m->routing = (uint64_t)a[AX_T] * (uint64_t)a[AX_K] * (sizeof(int32_t) + sizeof(float));
	m->copies = (uint64_t)a[AX_T] * (uint64_t)a[AX_K];
	m->pairs = (uint64_t)llround((double)a[AX_T] * (double)a[AX_G] * (1.0 - miss));
	m->meta = sizeof(mb_a2a_meta);
	m->slots = (uint64_t)a[AX_T] * (uint64_t)a[AX_G] * sizeof(int32_t);
	m->counts = (uint64_t)a[AX_E] * sizeof(int32_t);
	m->dest_counts = (uint64_t)a[AX_G] * sizeof(int32_t);
	m->vendor = (uint64_t)a[AX_G] * (uint64_t)(a[AX_T] * a[AX_K] / a[AX_G]);
}

/* The fused variant's launches per call, a2a_fused_traffic's entries. */
#define A2A_FUSED_LAUNCHES 6

/* The fused variant, launch by launch: pack (x and the routing read,
 * each token's rows and metadata written per destination, the slot map
 * written), the count exchange, the dispatch, the expert (rows and
 * metadata read, one pre-summed row written per received row), the
 * combine's return, and the combine (returned rows and the slot map read,
 * y written). */
static int a2a_fused_traffic(const a2a_model *m, const mb_variant *v, mb_launch_traffic *out)
{
	const char *own = v->kernel_patterns[0], *nccl = v->kernel_patterns[1];
	const uint64_t sent = m->pairs * (m->row + m->meta), back = m->pairs * m->row;
	int n = 0;

	mb_traffic_add(out, &n, own, m->tokens + m->routing, sent + m->slots);
	mb_traffic_add(out, &n, nccl, m->dest_counts, m->dest_counts);
	mb_traffic_add(out, &n, nccl, sent, sent);
	mb_traffic_add(out, &n, own, sent, back);
	mb_traffic_add(out, &n, nccl, back, back);
	mb_traffic_add(out, &n, own, back + m->slots, m->tokens);
	return n;
}

/* The fused model's totals: what `bytes` and the reference report. */
static void a2a_fused_totals(const int64_t *a, mb_dtype dtype, uint64_t *read_bytes, uint64_t *write_bytes)
{
	static const mb_variant fused = {.name = "fused", .kernel_patterns = {"own", "nccl"}};
	mb_launch_traffic launches[A2A_FUSED_LAUNCHES];
	a2a_model m;
	int n;

	a2a_model_make(&m, a, dtype);
	n = a2a_fused_traffic(&m, &fused, launches);
	*read_bytes = *write_bytes = 0;
	for (int i = 0; i < n; i++) {
		*read_bytes += launches[i].read_bytes;
		*write_bytes += launches[i].write_bytes;
	}
}

static uint64_t a2a_bytes(const int64_t *a, mb_dtype dtype)
{
	uint64_t r, w;

	a2a_fused_totals(a, dtype, &r, &w);
	return r + w;
}

/* The fallback, as a framework's MoE layer runs it: per-block expert
 * counts (the routing's expert ids read), their scan (counts read, per-
 * block offsets and per-expert totals written), the per-(peer, expert)
 * count exchange (which the host reads), the pack into expert order (ids
 * and offsets read, one row per (token, k) copied, positions written), the
 * dispatch of every copy, the expert (each received copy read, scaled and
 * written), the return, and the unpermute-and-combine (positions, weights
 * and K returned rows per token read, y written). The vendors: NCCL's
 * all-to-all on the fallback's bytes, there and back. */
static int a2a_traffic(const int64_t *a, mb_dtype dtype, const mb_variant *v, mb_launch_traffic *out)
{
	a2a_model m;
	int n = 0;

	a2a_model_make(&m, a, dtype);
	const uint64_t ids = m.copies * sizeof(int32_t), copies = m.copies * m.row;
	switch (v->kind) {
	case MB_VARIANT_FUSED:
		return a2a_fused_traffic(&m, v, out);
	case MB_VARIANT_REFERENCE: {
		uint64_t r, w;
		a2a_fused_totals(a, dtype, &r, &w);
		return mb_traffic_one(v, r, w, out);
	}
	case MB_VARIANT_FALLBACK: {
		const char *own = v->kernel_patterns[0], *nccl = v->kernel_patterns[1];
		const uint64_t blocks = m.counts * ((m.copies + 255) / 256);
		mb_traffic_add(out, &n, own, ids, blocks);
		mb_traffic_add(out, &n, own, blocks, blocks + m.counts);
		mb_traffic_add(out, &n, nccl, m.counts, m.counts);
		mb_traffic_add(out, &n, own, ids + blocks + m.tokens, copies + ids);
		mb_traffic_add(out, &n, nccl, copies, copies);
		mb_traffic_add(out, &n, own, copies, copies);
		mb_traffic_add(out, &n, nccl, copies, copies);
		mb_traffic_add(out, &n, own, copies + ids + m.routing, m.tokens);
		return n;
	}
	case MB_VARIANT_VENDOR: {
		const uint64_t bytes = m.vendor * m.row;
		mb_traffic_add(out, &n, v->kernel_patterns[0], bytes, bytes);
		mb_traffic_add(out, &n, v->kernel_patterns[0], bytes, bytes);
		return n;
	}
	default:
		return -1;
	}
}

static uint64_t a2a_flops(const int64_t *a)
{
	/* per element and chosen expert: the scale, the weight, the sum */
	return 3ull * (uint64_t)a[AX_T] * (uint64_t)a[AX_H] * (uint64_t)a[AX_K];
}

/* fp16 values in its subnormal range (under 2^-14) round with an absolute
 * error of at most 2^-25: two such roundings on the GPU path. */
#define F16_SUBNORMAL_TWO_ROUNDINGS 0x1p-24
/* No subnormal arises in fp32 or bf16: |x| >= 1.3e-5 and weights are
 * above e^-8 / K; below fp32's normal range the relative bound would give
 * way to an absolute one of this size. */
#define F32_NORMAL_MIN 0x1p-126

const mb_row mb_row_moe_alltoall = {
	MB_ROW_NAME(moe_alltoall, "fp32, "),
	.block = 'E',
	.status = MB_ROW_EXPERIMENTAL,
	.summary = "expert-parallel dispatch and combine over NCCL: x [T,H] per GPU to its top-K of E experts "
		"spread over G GPUs and back, y = sum_k w_k s_e x (megabench alltoall)",
	.min_gpus = 2,
	.n_axes = MB_A2A_N_AXES,
	.axes = {"T", "H", "E", "K", "G"},
	.check_shape = a2a_check_shape,
	.tensors = a2a_tensors,
	.bytes = a2a_bytes,
	.traffic = a2a_traffic,
	.flops = a2a_flops,
	.source_files = {MB_ROW_FILES(moe_alltoall), "src/kernels/moe_alltoall.h",
		"src/harness/nccl_backend.c"},
	/* Every term of y has the sign of x (w > 0, s >= 1): no cancellation,
	 * so relative bounds hold element by element. The GPU variants use the
	 * host's routing weights bit for bit. u = 2^-24 below; K <= 8. */
	.tolerance = {
		[MB_FP32] = {F32_NORMAL_MIN, (2 * MB_A2A_MAX_K + 24) * F32_EPS,
			"reference vs the fp64 oracle: score differences under 8 rounded (2^-21 absolute, 8u in exp), "
			"expf 2u, the sum of K exps (K-1)u, the division u: weights (K+20)u; s_e 2u, s*x u, w*(s*x) u, "
			"the sum (K-1)u, the oracle's rounding u: (2K+24)u; the GPU's reassociation stays under it"},
		[MB_FP16] = {F16_SUBNORMAL_TWO_ROUNDINGS, 2 * F16_HALF_ULP + F16_HALF_ULP * F16_HALF_ULP
			+ (3 * MB_A2A_MAX_K + 3) * F32_EPS,
			"two fp16 roundings (the expert's output or a destination's pre-sum, then y): 2^-10 + 2^-22 "
			"relative, plus fp32 sums on both sides (3K+3)u; 2^-24 absolute for values in fp16's "
			"subnormal range"},
		[MB_BF16] = {F32_NORMAL_MIN, 2 * BF16_HALF_ULP + BF16_HALF_ULP * BF16_HALF_ULP
			+ (3 * MB_A2A_MAX_K + 3) * F32_EPS,
			"two bf16 roundings (the expert's output or a destination's pre-sum, then y): 2^-7 + 2^-16 "
			"relative, plus fp32 sums on both sides (3K+3)u"},
	},
	.n_variants = 5,
	.variants = {
		{.name = "fused", .kind = MB_VARIANT_FUSED, .backend = "cuda",
			.description = "one kernel packs each token once per destination GPU with its local "
			"experts and weights (block-reserved slots), counts exchanged and read by the host, "
			"one grouped ncclSend/ncclRecv for the rows and metadata, the destination pre-sums its "
			"experts, one row per (token, GPU) back, one kernel sums them into y",
			.launches_per_call = A2A_FUSED_LAUNCHES, .kernel_patterns = {"moe_a2a_fused", "SendRecv"},
			.dtype_mask = MB_DTYPE_ALL, .syncs_host = true},
		{.name = "grouped_sendrecv", .kind = MB_VARIANT_FALLBACK, .backend = "cuda",
			.description = "grouped ncclSend/ncclRecv as a framework's MoE layer: per-block expert "
			"counts and their scan, per-(peer, expert) counts exchanged and read by the host, then "
			"one copy per (token, k) sorted by expert (duplicates to one GPU included), grouped "
			"send/recv per peer for dispatch, the expert scales each copy, grouped send/recv back, "
			"unpermute and weighted sum",
			.launches_per_call = 8, .kernel_patterns = {"moe_a2a_fallback", "SendRecv"},
			.dtype_mask = MB_DTYPE_ALL, .syncs_host = true},
		{.name = "nccl_alltoall", .kind = MB_VARIANT_VENDOR, .backend = "cuda",
			.description = "NCCL's own all-to-all on the fallback's bytes with equal counts per "
			"peer (ncclAlltoAll, NCCL >= 2.28), there and back: what NCCL reaches on this machine, "
			"no packing or expert",
			.launches_per_call = 2, .kernel_patterns = {"nccl"}, .dtype_mask = MB_DTYPE_ALL,
			.library_kernels = true},
		{.name = "nccl_sendrecv", .kind = MB_VARIANT_VENDOR, .backend = "cuda",
			.description = "the same bytes with grouped ncclSend/ncclRecv of equal counts to every "
			"peer, as nccl-tests' alltoall_perf, there and back",
			.launches_per_call = 2, .kernel_patterns = {"SendRecv"}, .dtype_mask = MB_DTYPE_ALL,
			.library_kernels = true},
		MB_REFERENCE_VARIANT,
	},
};
