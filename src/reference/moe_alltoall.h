/* moe_alltoall's host half, defined with the reference
 * (src/reference/moe_alltoall.c): the routing every rank and the reference
 * share, the variants' catalog names, and the exact check of what a
 * dispatch delivered, which the multi-rank backend (harness/nccl_backend.c)
 * runs after every checked call. The shapes, metadata and device side are
 * in kernels/moe_alltoall.h. Nothing here prints; failures come back as
 * text in a caller's buffer.
 */
#ifndef MB_REFERENCE_MOE_ALLTOALL_H
#define MB_REFERENCE_MOE_ALLTOALL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/moe_alltoall.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The fixed per-expert routing bias that makes loads uneven: expert e's
 * score is logit + ((11 e) mod 17) / 16. Every value is k / 16 with
 * k <= 16, exact in fp32. With unit-variance logits and E = 64, K = 6 the
 * hottest expert gets about 2x the mean load and the coldest 0.3x. */
#define MB_A2A_BIAS_MUL 11
#define MB_A2A_BIAS_MOD 17
#define MB_A2A_BIAS_DIV 16.0f

float mb_moe_a2a_bias(int64_t expert);

/* Top-K of score_e = logits[e] + bias(e) (fp32, one rounding) over the E
 * logits of one token, best first, ties to the lower expert index: the
 * experts and their scores. */
void mb_moe_a2a_topk(const float *logits, int64_t n_experts, int64_t k, int32_t *out_expert,
	float *out_score);
/* The routing of one token: mb_moe_a2a_topk, then weights = softmax of the
 * chosen scores in fp32 (max subtracted, expf, sum in k order, divide). */
void mb_moe_a2a_route(const float *logits, int64_t n_experts, int64_t k, int32_t *out_expert,
	float *out_weight);

/* The catalog's name of a variant ("grouped_sendrecv", "fused",
 * "nccl_alltoall", "nccl_sendrecv"), and back (-1 when unknown). */
const char *mb_a2a_variant_name(mb_a2a_variant v);
int mb_a2a_variant_parse(const char *name, mb_a2a_variant *out);

/* ---- the exact-dispatch check (host; with the reference) ----
 *
 * What a dispatch delivers follows from every rank's routing, so it is
 * checked exactly: the fallback sends rank s's copies of the experts on
 * rank d, expert by expert, token order within each (a stable sort by
 * expert), and announces its count per expert; the fused dispatch sends
 * each token of s that has an expert on d once, in an order its metadata
 * names, with those experts and their weights in k order; the vendors send
 * rows d c .. d c + c - 1 of s's x tiled (row j is x_s[j mod T]) and each
 * peer echoes back what it received. A received row is known by the 64-bit
 * hash of its bits (mb_a2a_row_hash), so every row is checked; a caller
 * may compare a sample in full as well. */

/* Every rank's routing ([G][T][K], experts and weights) and the row hash
 * of every rank's tokens ([G][T], filled by the caller). Owned. */
typedef struct mb_a2a_routing {
	mb_a2a_dims d;
	int32_t *expert;
	float *weight;
	uint64_t *xhash;
} mb_a2a_routing;

/* Route every token of every rank from its logits ([G][T][E], fp32), and
 * room for the row hashes. 0, or -1 when out of memory. */
int mb_a2a_routing_make(mb_a2a_routing *out, const mb_a2a_dims *d, const float *logits);
void mb_a2a_routing_free(mb_a2a_routing *rt);
/* Rows rank `dst` receives in variant v's dispatch, from every rank. */
int64_t mb_a2a_rows_received(const mb_a2a_routing *rt, mb_a2a_variant v, int dst);
/* 0 when the row hashes of each rank's tokens are distinct, else MB_EINVAL
 * (MB_ENOMEM out of host memory) with `err`'s text set: a received row is
 * known by its hash, and a hash kernel that returned a constant would
 * otherwise pass every row. */
int mb_a2a_hashes_distinct(const mb_a2a_routing *rt, mb_error *err);

#define MB_A2A_PROBLEM_BYTES 256

/* What checks found: rows compared by hash, and rows or counts not as the
 * routing says, the first of them said. */
typedef struct mb_a2a_tally {
	uint64_t hashed;
	uint64_t wrong;
	char first[MB_A2A_PROBLEM_BYTES];
} mb_a2a_tally;

/* One more wrong row or count; the first is said. */
void mb_a2a_tally_wrong(mb_a2a_tally *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The source rank and token a received row must hold (-1: the fused
 * metadata names no valid token). */
typedef struct mb_a2a_origin {
	int32_t rank, token;
} mb_a2a_origin;

/* What one rank's last call delivered, read back to the host: the view's
 * counts and offsets (its device pointers are not read), the received
 * rows' hashes in receive-buffer order, the fused dispatch's metadata
 * beside them (else NULL), and the vendors' returned rows' hashes, G c of
 * them (else NULL). */
typedef struct mb_a2a_delivery {
	mb_a2a_view view;
	const uint64_t *recv_hash;
	const mb_a2a_meta *recv_meta;
	const uint64_t *ret_hash;
} mb_a2a_delivery;

/* Check what rank `rank` received in variant v's last call against the
 * routing, into `out`: from each source exactly the rows its routing
 * sends; the fallback's per-expert counts; the fused metadata (a token
 * routed here, once, with its experts here and their weights in k order);
 * every received row, and every returned one, by hash. `origin` (one per
 * received row) gets the token each row must hold, for a comparison in
 * full. 0, or -1 when out of memory. */
int mb_a2a_check_delivery(mb_a2a_tally *out, mb_a2a_origin *origin, const mb_a2a_routing *rt, mb_a2a_variant v,
	int rank, const mb_a2a_delivery *got);

#ifdef __cplusplus
}
#endif

#endif
