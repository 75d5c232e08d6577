/* The world of a case across GPUs: the ranks of one NCCL communicator, the
 * processes that drive them, and what those processes agree on.
 *
 * One process drives every GPU of its host (ncclCommInitAll, one stream
 * per GPU), or, in a build with -Dmpi=enabled started by an MPI launcher,
 * each process drives one GPU (ncclGetUniqueId on rank 0, MPI_Bcast,
 * ncclCommInitRank), as nccl-tests does. Everything above this file runs
 * the same code either way: every process makes the same calls in the
 * same order, and the functions below that exchange between processes
 * are collective (each process must call them, in step); without MPI they
 * cost nothing.
 *
 * A watchdog ends the process when no progress is marked for the seconds
 * it was given (a hang in NCCL, or a process that died under MPI).
 * CUDA and NCCL builds only (nccl_world.c).
 */
#ifndef MB_HARNESS_NCCL_WORLD_H
#define MB_HARNESS_NCCL_WORLD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "receipts/error.h"

/* Ranks of one communicator (the fused pack keeps a 64-bit mask of them). */
#define MB_WORLD_MAX_RANKS 64
/* Set before the communicators are made, unless the environment sets it:
 * NVLink multicast off. */
#define MB_WORLD_NVLS_ENV "NCCL_NVLS_ENABLE"
#define MB_WORLD_NVLS_OFF "0"
/* A failure's text, as every process hears it. */
#define MB_WORLD_TEXT_BYTES 256

/* One rank this process drives. The CUDA and NCCL handles are opaque here
 * (cudaStream_t, ncclComm_t, cudaEvent_t), so that this header needs no
 * toolkit. */
typedef struct mb_world_rank {
	int rank;        /* in the communicator */
	int device;      /* CUDA's index in this process */
	void *stream;
	void *comm;
	void *start, *stop;
} mb_world_rank;

typedef struct mb_world {
	bool mpi;        /* started by an MPI launcher, one rank per process */
	int size;        /* G: ranks of the communicator */
	int proc;        /* this process (0 without MPI) */
	int n_local;     /* ranks this process drives: first .. first + n_local - 1 */
	int first;
	mb_world_rank local[MB_WORLD_MAX_RANKS];
	/* every rank's device (mb_cuda_device_json), on every process */
	json_t *identity[MB_WORLD_MAX_RANKS];
	char nccl_version[32];   /* "2.28.9" */
	bool connected;
} mb_world;

/* MPI_Init when an MPI launcher started this process (a build without MPI
 * refuses then: each process would drive every GPU). `w` is cleared first;
 * call mb_world_end whatever this returns. */
int mb_world_start(mb_world *w, mb_error *err);
/* Which GPUs: `gpus` ("all", NULL or a count) of this host, or one per MPI
 * rank (the rank's index on its node), at least 2. Every process. */
int mb_world_devices(mb_world *w, const char *gpus, mb_error *err);
/* Streams, events, every rank's identity (on every process) and the
 * communicators. Every process; agreed. */
int mb_world_connect(mb_world *w, mb_error *err);
/* The receipt's "gpus" and "topology" (both the caller's): the topology
 * probe (cuda_topology.h) over every rank's GPU where this process sees
 * them all (one host); else each rank's word on its GPU, links unknown. */
void mb_world_gpus(const mb_world *w, json_t **out_gpus, json_t **out_topology);
/* Communicators, streams, events, identities. */
void mb_world_close(mb_world *w);
/* MPI_Finalize, when started by a launcher. */
void mb_world_end(mb_world *w);

/* Whether this process writes (rank 0's process). */
bool mb_world_root(const mb_world *w);
/* Whether `ok` holds on every process. */
bool mb_world_agree(const mb_world *w, bool ok);
/* The same, and where it does not: `code` and `text` (MB_WORLD_TEXT_BYTES)
 * become the first failing process's, on every process. */
bool mb_world_agree_why(const mb_world *w, bool ok, int *code, char *text);
/* v[0 .. n): the elementwise maximum over processes, everywhere. */
void mb_world_max(const mb_world *w, double *v, int n);
/* Every rank's `bytes` (this process's ranks' contiguous in `mine`) into
 * `all` (G of them, rank order), everywhere. */
void mb_world_gather(const mb_world *w, const void *mine, void *all, size_t bytes);
/* `all` holds each process's `counts[p]` bytes one after the other
 * (process order), this process's already in place: afterwards every
 * process has every part. Without MPI they are all in place already. */
int mb_world_gatherv(const mb_world *w, void *all, const size_t *counts, mb_error *err);
void mb_world_bcast_int(const mb_world *w, int *v);

/* The watchdog: from now on, ending the process when no mb_world_alive
 * comes within `seconds` (0: never). */
void mb_world_watch(int seconds);
void mb_world_alive(void);

/* The multi-rank backend (backend.h) over `w`, which must outlive its use:
 * the moe_alltoall row's GPU variants on the world's ranks
 * (nccl_backend.c). */
struct mb_backend;
const struct mb_backend *mb_backend_nccl(mb_world *w);

#endif
