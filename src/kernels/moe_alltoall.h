/* moe_alltoall: expert-parallel token dispatch and combine across G GPUs.
 *
 * What the row's three files share. Each rank holds tokens x [T, H]; a
 * token is routed to its top-K of E experts, expert e living on GPU
 * e / (E / G). Dispatch sends the token to the GPUs owning its experts; the
 * "expert" there multiplies by s_e = 1 + e / E in fp32; combine brings the
 * results back and sums them weighted by the routing weights:
 *
 *   y[t] = sum_k w[t,k] * s_{e[t,k]} * x[t]            (in k order)
 *
 * The answer does not depend on G: only the traffic does. Routing is made
 * on the host from the row's seeded logits (mb_moe_a2a_route, defined with
 * the reference in src/reference/moe_alltoall.c), so that the reference,
 * the oracle and every GPU variant see the same experts and weights.
 *
 * The device side (src/kernels/moe_alltoall.cu, built with CUDA and NCCL):
 * one mb_a2a_rank per GPU rank, driven by one host thread for all the
 * ranks of its process (the multi-rank backend, harness/nccl_backend.c,
 * under `megabench alltoall`). The exact check of what a dispatch
 * delivered is host code beside the reference.
 * Nothing here prints; failures come back as text in a caller's buffer.
 */
#ifndef MB_KERNELS_MOE_ALLTOALL_H
#define MB_KERNELS_MOE_ALLTOALL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Axes, in the descriptor's order. */
enum { MB_A2A_AX_T, MB_A2A_AX_H, MB_A2A_AX_E, MB_A2A_AX_K, MB_A2A_AX_G, MB_A2A_N_AXES };

/* A dispatched row's metadata holds at most this many experts. */
#define MB_A2A_MAX_K 8
/* Experts a kernel's shared-memory tables hold. */
#define MB_A2A_MAX_E 1024
/* GPUs one communicator may span here (the fused pack keeps a 64-bit
 * destination mask per token). */
#define MB_A2A_MAX_GPUS 64

/* The fixed per-expert routing bias that makes loads uneven: expert e's
 * score is logit + ((11 e) mod 17) / 16. Every value is k / 16 with
 * k <= 16, exact in fp32. With unit-variance logits and E = 64, K = 6 the
 * hottest expert gets about 2x the mean load and the coldest 0.3x. */
#define MB_A2A_BIAS_MUL 11
#define MB_A2A_BIAS_MOD 17
#define MB_A2A_BIAS_DIV 16.0f

float mb_moe_a2a_bias(int64_t expert);
/* s_e = 1 + e / E, one fp32 division and one fp32 add (the device
 * computes it the same way, with the round-to-nearest intrinsics). */
float mb_moe_a2a_scale(int64_t expert, int64_t n_experts);

/* Top-K of score_e = logits[e] + bias(e) (fp32, one rounding) over the E
 * logits of one token, best first, ties to the lower expert index: the
 * experts and their scores. */
void mb_moe_a2a_topk(const float *logits, int64_t n_experts, int64_t k, int32_t *out_expert,
	float *out_score);
/* The routing of one token: mb_moe_a2a_topk, then weights = softmax of the
 * chosen scores in fp32 (max subtracted, expf, sum in k order, divide). */
void mb_moe_a2a_route(const float *logits, int64_t n_experts, int64_t k, int32_t *out_expert,
	float *out_weight);

/* What a fused dispatch sends beside each row: the source token and the
 * experts of the destination it goes to, with their weights, in k order. */
typedef struct mb_a2a_meta {
	int32_t token;
	int32_t n;
	int32_t expert[MB_A2A_MAX_K];
	float weight[MB_A2A_MAX_K];
} mb_a2a_meta;

typedef enum mb_a2a_variant {
	/* as a framework: per-(peer, expert) counts exchanged first, one copy
	 * per (token, k) sorted by expert, grouped ncclSend/ncclRecv per peer
	 * for dispatch and for combine */
	MB_A2A_FALLBACK,
	/* one kernel packs each token once per destination GPU with its
	 * local experts and weights; the destination pre-sums its experts */
	MB_A2A_FUSED,
	/* NCCL alone on the fallback's bytes with equal counts per peer:
	 * ncclAlltoAll (NCCL >= 2.28) there and back */
	MB_A2A_VENDOR_ALLTOALL,
	/* the same with grouped ncclSend/ncclRecv, as nccl-tests' alltoall_perf */
	MB_A2A_VENDOR_SENDRECV,
	MB_A2A_N_VARIANTS
} mb_a2a_variant;

/* The catalog's name of a variant ("grouped_sendrecv", "fused",
 * "nccl_alltoall", "nccl_sendrecv"), and back (-1 when unknown). */
const char *mb_a2a_variant_name(mb_a2a_variant v);
int mb_a2a_variant_parse(const char *name, mb_a2a_variant *out);

typedef struct mb_a2a_dims {
	int64_t T, H, E, K;
	int G;
	mb_dtype dtype;
} mb_a2a_dims;

/* The case's device arrays of one rank, owned by the caller: x [T, H] and
 * y [T, H] in the dtype, the routing [T, K] (expert int32, weight fp32). */
typedef struct mb_a2a_io {
	const void *x;
	const int32_t *expert;
	const float *weight;
	void *y;
} mb_a2a_io;

/* The fallback's and the vendors' rows per peer with equal counts: the
 * fallback's T * K copies spread evenly, floor(T * K / G) rows each. */
int64_t mb_a2a_vendor_rows_per_peer(const mb_a2a_dims *d);

/* What a rank's last call moved, for the checks and the bytes: rows sent
 * to and received from each peer (host values), where they sit in the
 * device buffers, and the device buffers themselves (borrowed). */
typedef struct mb_a2a_view {
	int G;
	int64_t send_rows[MB_A2A_MAX_GPUS], send_off[MB_A2A_MAX_GPUS];
	int64_t recv_rows[MB_A2A_MAX_GPUS], recv_off[MB_A2A_MAX_GPUS];
	/* fallback: rows received per (source, local expert), [G][E / G]
	 * (host, owned by the rank); NULL for the other variants */
	const int32_t *recv_expert_counts;
	const void *send;           /* dispatch send buffer (vendor: x tiled) */
	const void *recv;           /* what the dispatch delivered here */
	const mb_a2a_meta *recv_meta; /* fused: beside each received row */
	const void *ret;            /* what the combine brought back, in the
	                               send buffer's layout */
	int64_t meta_bytes;         /* sent per dispatched row beside it */
} mb_a2a_view;

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
/* 0 when the row hashes of each rank's tokens are distinct, else -1 with
 * `why` set: a received row is known by its hash, and a hash kernel that
 * returned a constant would otherwise pass every row. */
int mb_a2a_hashes_distinct(const mb_a2a_routing *rt, char *why, size_t why_len);

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

/* ---- device side (moe_alltoall.cu; CUDA and NCCL builds only) ---- */

/* One rank's workspace for one variant: send, receive, expert-output and
 * return buffers, counts (pinned host memory too). */
typedef struct mb_a2a_rank mb_a2a_rank;

/* Open rank `rank` of communicator `comm` (an ncclComm_t) on CUDA device
 * `device` with stream `stream` (a cudaStream_t on that device): buffers
 * for a dispatch that receives at most `recv_cap_rows` rows. `io` is
 * borrowed and must outlive the rank. The vendor variants fill their send
 * buffer here (row j is x[j mod T]). 0, or -1 with `why` set. The current
 * device is `device` on return. */
int mb_a2a_rank_open(mb_a2a_rank **out, const mb_a2a_dims *d, mb_a2a_variant v, int rank, int device,
	void *comm, void *stream, const mb_a2a_io *io, int64_t recv_cap_rows, char *why, size_t why_len);
void mb_a2a_rank_close(mb_a2a_rank *r);

/* NaN bytes (0xff) over what the next call writes on this rank (y, the
 * receive, expert-output and return buffers), queued on its stream: a
 * call that fails to write something cannot pass a check with what an
 * earlier call left behind. 0, or -1 with `why` set. */
int mb_a2a_rank_poison(mb_a2a_rank *r, char *why, size_t why_len);

/* One call of the variant on `n` ranks of one communicator (every rank of
 * this process), queued on their streams: pack, counts, dispatch, expert,
 * combine. The fallback and the fused variant wait inside for the counts
 * (the host needs them to size the sends, as a framework's MoE layer
 * does); the vendor variants never wait. 0, or -1 with `why` set (a CUDA
 * or NCCL error, or a dispatch larger than a rank's receive buffers). */
int mb_a2a_call(mb_a2a_rank *const *ranks, int n, char *why, size_t why_len);

/* What the rank's last call moved (mb_a2a_view). */
void mb_a2a_rank_view(const mb_a2a_rank *r, mb_a2a_view *out);

/* A 64-bit hash of each of `n_rows` rows of `row_bytes` bytes at `rows`
 * (device; row i at rows + i * row_bytes) into out[i] (device): the sum
 * mod 2^64 of splitmix64(position << 16 | 16-bit word), so that any
 * changed, moved or missing word changes it. Queued on `stream`; 0 or a
 * cudaError_t value. row_bytes must be even (every dtype's is). */
int mb_a2a_row_hash(void *stream, const void *rows, int64_t n_rows, int64_t row_bytes, uint64_t *out);

/* The version of the NCCL library linked in, as NCCL_VERSION_CODE reads
 * (22809), or 0 without NCCL. */
int mb_a2a_nccl_version(void);

#ifdef __cplusplus
}
#endif

#endif
