/* moe_alltoall: expert-parallel token dispatch and combine across G GPUs.
 *
 * What the row's device side (moe_alltoall.cu) shares with the host: the
 * shapes, the dispatched rows' metadata, the variants, a rank's view of
 * what it moved, and the device entry points. The host half (routing, the
 * variants' names, the exact-dispatch check) is declared with the
 * reference, in src/reference/moe_alltoall.h.
 *
 * Each rank holds tokens x [T, H]; a token is routed to its top-K of E
 * experts, expert e living on GPU e / (E / G). Dispatch sends the token to
 * the GPUs owning its experts; the "expert" there multiplies by s_e = 1 + e / E in fp32; combine brings the
 * results back and sums them weighted by the routing weights:
 *
 *   y[t] = sum_k w[t,k] * s_{e[t,k]} * x[t]            (in k order)
 *
 * The answer does not depend on G: only the traffic does. Routing is made
 * on the host from the row's seeded logits (mb_moe_a2a_route, defined with
 * the reference in src/reference/moe_alltoall.c), so that the reference,
 * the oracle and every GPU variant see the same experts and weights. The
 * scale s_e and the vendors' rows per peer are host functions the device
 * side calls too; they are defined with the reference as well.
 *
 * The device side (src/kernels/moe_alltoall.cu, built with CUDA and NCCL):
 * one mb_a2a_rank per GPU rank, driven by one host thread for all the
 * ranks of its process (the multi-rank backend, harness/nccl_backend.c,
 * under `megabench alltoall`). Nothing here prints; failures come back as
 * a negative MB_E* code and the caller's mb_error (receipts/error.h, the
 * lowest layer), its text the whole message and its `where` empty.
 */
#ifndef MB_KERNELS_MOE_ALLTOALL_H
#define MB_KERNELS_MOE_ALLTOALL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/dtype.h"
#include "receipts/error.h"

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

/* s_e = 1 + e / E, one fp32 division and one fp32 add (the device
 * computes it the same way, with the round-to-nearest intrinsics). */
float mb_moe_a2a_scale(int64_t expert, int64_t n_experts);

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

/* ---- device side (moe_alltoall.cu; CUDA and NCCL builds only) ---- */

/* One rank's workspace for one variant: send, receive, expert-output and
 * return buffers, counts (pinned host memory too). */
typedef struct mb_a2a_rank mb_a2a_rank;

/* Open rank `rank` of communicator `comm` (an ncclComm_t) on CUDA device
 * `device` with stream `stream` (a cudaStream_t on that device): buffers
 * for a dispatch that receives at most `recv_cap_rows` rows. `io` is
 * borrowed and must outlive the rank. The vendor variants fill their send
 * buffer here (row j is x[j mod T]). 0, or a negative MB_E* code with
 * `err`'s text set: MB_ENOMEM when memory, the device's or the host's, ran
 * out. The current device is `device` on return. */
int mb_a2a_rank_open(mb_a2a_rank **out, const mb_a2a_dims *d, mb_a2a_variant v, int rank, int device,
	void *comm, void *stream, const mb_a2a_io *io, int64_t recv_cap_rows, mb_error *err);
void mb_a2a_rank_close(mb_a2a_rank *r);

/* NaN bytes (0xff) over what the next call writes on this rank (y, the
 * receive, expert-output and return buffers), queued on its stream: a
 * call that fails to write something cannot pass a check with what an
 * earlier call left behind. 0, or a negative MB_E* code with `err`'s text
 * set. */
int mb_a2a_rank_poison(mb_a2a_rank *r, mb_error *err);

/* One call of the variant on `n` ranks of one communicator (every rank of
 * this process), queued on their streams: pack, counts, dispatch, expert,
 * combine. The fallback and the fused variant wait inside for the counts
 * (the host needs them to size the sends, as a framework's MoE layer
 * does); the vendor variants never wait. 0, or a negative MB_E* code with
 * `err`'s text set: MB_ENOMEM when the device ran out of memory,
 * MB_EDEVICE for another CUDA or NCCL error, MB_EINVAL for a dispatch
 * larger than a rank's receive buffers. */
int mb_a2a_call(mb_a2a_rank *const *ranks, int n, mb_error *err);

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
