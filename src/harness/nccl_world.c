/* The world of a case across GPUs; see nccl_world.h. */
#include "harness/nccl_world.h"

#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/cuda_device.h"
#include "harness/cuda_headers.h"
#include "harness/cuda_topology.h"

#if MB_HAVE_MPI
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wundef"
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <mpi.h>
#pragma GCC diagnostic pop
#endif

/* A rank's device identity as JSON text, exchanged between processes. */
#define DEVICE_JSON_BYTES 4096

/* ---- processes ------------------------------------------------------------ */

/* Started by an MPI launcher: Open MPI, PMI (MPICH, Slurm) or PMIx. */
static bool launched_by_mpi(void)
{
	static const char *const VARS[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"};

	for (size_t i = 0; i < sizeof(VARS) / sizeof(VARS[0]); i++)
		if (getenv(VARS[i]))
			return true;
	return false;
}

int mb_world_start(mb_world *w, mb_error *err)
{
	memset(w, 0, sizeof(*w));
	w->size = 1;
	if (!launched_by_mpi())
		return 0;
#if MB_HAVE_MPI
	int provided = 0;
	/* only this thread calls MPI; CUDA's and NCCL's own threads never do */
	MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
	w->mpi = true;
	MPI_Comm_size(MPI_COMM_WORLD, &w->size);
	MPI_Comm_rank(MPI_COMM_WORLD, &w->proc);
	if (w->size > MB_WORLD_MAX_RANKS)
		return mb_error_set(err, MB_EINVAL, "MPI", "%d ranks; at most %d", w->size, MB_WORLD_MAX_RANKS);
	return 0;
#else
	return mb_error_set(err, MB_EUNSUPPORTED, "MPI", "started by an MPI launcher, but this megabench was built "
		"without MPI (meson configure -Dmpi=enabled): each process would drive every GPU");
#endif
}

void mb_world_end(mb_world *w)
{
#if MB_HAVE_MPI
	if (w->mpi)
		MPI_Finalize();
#endif
	(void)w;
}

bool mb_world_root(const mb_world *w)
{
	return w->proc == 0;
}

bool mb_world_agree(const mb_world *w, bool ok)
{
#if MB_HAVE_MPI
	if (w->mpi) {
		int mine = ok, all = 0;
		MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
		return all != 0;
	}
#endif
	(void)w;
	return ok;
}

/* What one process says of a step, for mb_world_agree_why. */
typedef struct said {
	int ok, code;
	char text[MB_WORLD_TEXT_BYTES];
} said;

bool mb_world_agree_why(const mb_world *w, bool ok, int *code, char *text)
{
#if MB_HAVE_MPI
	if (w->mpi && !mb_world_agree(w, ok)) {
		/* every process's word, in a buffer that needs no allocation: the
		 * exchange must take place on every process */
		static said all[MB_WORLD_MAX_RANKS];
		said mine = {ok, *code, ""};
		snprintf(mine.text, sizeof(mine.text), "%s", text);
		MPI_Allgather(&mine, (int)sizeof(mine), MPI_BYTE, all, (int)sizeof(mine), MPI_BYTE, MPI_COMM_WORLD);
		for (int p = 0; p < w->size; p++) {
			if (!all[p].ok) {
				*code = all[p].code;
				snprintf(text, MB_WORLD_TEXT_BYTES, "%s", all[p].text);
				break;
			}
		}
		return false;
	}
	if (w->mpi)
		return true;
#endif
	(void)w, (void)code, (void)text;
	return ok;
}

void mb_world_max(const mb_world *w, double *v, int n)
{
#if MB_HAVE_MPI
	if (w->mpi)
		MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
#endif
	(void)w, (void)v, (void)n;
}

void mb_world_gather(const mb_world *w, const void *mine, void *all, size_t bytes)
{
#if MB_HAVE_MPI
	if (w->mpi) {
		MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
		return;
	}
#endif
	memmove((char *)all + (size_t)w->first * bytes, mine, (size_t)w->n_local * bytes);
}

int mb_world_gatherv(const mb_world *w, void *all, const size_t *counts, mb_error *err)
{
#if MB_HAVE_MPI
	if (w->mpi) {
		int n[MB_WORLD_MAX_RANKS], at[MB_WORLD_MAX_RANKS];
		size_t total = 0;
		/* every process has the same counts, so each refuses alike */
		for (int p = 0; p < w->size; p++)
			total += counts[p];
		if (total > INT_MAX)
			return mb_error_set(err, MB_EINVAL, "MPI", "%zu bytes of rows to exchange: more than one MPI call "
				"takes", total);
		for (int p = 0, off = 0; p < w->size; p++) {
			n[p] = (int)counts[p];
			at[p] = off;
			off += n[p];
		}
		MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, n, at, MPI_BYTE, MPI_COMM_WORLD);
		return 0;
	}
#endif
	(void)w, (void)all, (void)counts, (void)err;
	return 0;
}

void mb_world_bcast_int(const mb_world *w, int *v)
{
#if MB_HAVE_MPI
	if (w->mpi)
		MPI_Bcast(v, 1, MPI_INT, 0, MPI_COMM_WORLD);
#endif
	(void)w, (void)v;
}

/* ---- the watchdog ----------------------------------------------------------- */

static volatile sig_atomic_t watch_s;

static void on_watchdog(int sig)
{
	static const char msg[] = "megabench: no progress within --timeout (a hang in NCCL or a kernel, or another "
		"rank's process died); giving up, no receipt written\n";

	(void)sig;
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {
		/* nothing more can be said */
	}
	_exit(1);
}

void mb_world_watch(int seconds)
{
	watch_s = seconds;
	signal(SIGALRM, on_watchdog);
	mb_world_alive();
}

void mb_world_alive(void)
{
	alarm(watch_s > 0 ? (unsigned)watch_s : 0);
}

/* ---- devices, streams, communicators ----------------------------------------- */

/* Under MPI: one rank per process, the GPU its index on its node. */
static int mpi_devices(mb_world *w, const char *gpus, int count, mb_error *err)
{
	w->n_local = 1;
	w->first = w->proc;
#if MB_HAVE_MPI
	MPI_Comm node;
	int node_rank = 0;
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w->proc, MPI_INFO_NULL, &node);
	MPI_Comm_rank(node, &node_rank);
	MPI_Comm_free(&node);
	w->local[0].device = node_rank;
#endif
	if (w->local[0].device >= count)
		return mb_error_set(err, MB_ENOTFOUND, "--gpus", "MPI rank %d is rank %d on its node, which has %d CUDA "
			"device%s: one rank per GPU", w->proc, w->local[0].device, count, count == 1 ? "" : "s");
	if (w->size < 2)
		return mb_error_set(err, MB_EINVAL, "--gpus", "a case across GPUs needs at least 2 ranks; the MPI "
			"launcher started %d", w->size);
	if (gpus && strcmp(gpus, "all") != 0 && atoi(gpus) != w->size)
		return mb_error_set(err, MB_EINVAL, "--gpus", "under MPI the launcher's %d ranks are the GPUs; --gpus %s "
			"disagrees", w->size, gpus);
	return 0;
}

int mb_world_devices(mb_world *w, const char *gpus, mb_error *err)
{
	int count = 0, n;
	cudaError_t ce = cudaGetDeviceCount(&count);

	if (ce != cudaSuccess)
		count = 0;
	if (w->mpi)
		return mpi_devices(w, gpus, count, err);
	if (count < 2)
		return mb_error_set(err, MB_ENOTFOUND, "--gpus", "a case across GPUs needs at least 2 GPUs; this host has "
			"%d%s%s%s", count, ce != cudaSuccess ? " (" : "", ce != cudaSuccess ? cudaGetErrorString(ce) : "",
			ce != cudaSuccess ? ")" : "");
	n = gpus && strcmp(gpus, "all") != 0 ? atoi(gpus) : count;
	if (n > count)
		return mb_error_set(err, MB_ENOTFOUND, "--gpus", "%d GPUs asked for; this host has %d", n, count);
	if (n < 2)
		return mb_error_set(err, MB_EINVAL, "--gpus", "a case across GPUs needs at least 2 GPUs, got %d", n);
	if (n > MB_WORLD_MAX_RANKS)
		n = MB_WORLD_MAX_RANKS;
	w->size = w->n_local = n;
	w->first = 0;
	for (int i = 0; i < n; i++)
		w->local[i].device = i;
	return 0;
}

/* Every rank's identity, on every process (rank order). */
static int gather_identities(mb_world *w, mb_error *err)
{
	char *mine = calloc((size_t)w->n_local, DEVICE_JSON_BYTES);
	char *all = calloc((size_t)w->size, DEVICE_JSON_BYTES);
	json_t *own[MB_WORLD_MAX_RANKS] = {NULL};
	int rc = 0;

	for (int i = 0; i < w->n_local && mine && !rc; i++) {
		char *text = NULL;
		if ((rc = mb_cuda_device_json(&own[i], w->local[i].device, err)))
			break;
		text = json_dumps(own[i], JSON_COMPACT);
		if (text && strlen(text) < DEVICE_JSON_BYTES)
			memcpy(mine + (size_t)i * DEVICE_JSON_BYTES, text, strlen(text) + 1);
		free(text);
	}
	if (!mine || !all)
		rc = mb_error_set(err, MB_ENOMEM, "device identity", "out of host memory");
	if (mb_world_agree(w, rc == 0))
		mb_world_gather(w, mine, all, DEVICE_JSON_BYTES);
	else if (!rc)
		rc = mb_error_set(err, MB_EDEVICE, "device identity", "another rank could not say what its GPU is");
	for (int g = 0; g < w->size && !rc; g++) {
		w->identity[g] = json_loads(all + (size_t)g * DEVICE_JSON_BYTES, 0, NULL);
		if (!w->identity[g])
			w->identity[g] = json_pack("{s:s, s:s, s:i}", "backend", "cuda", "name", "unknown", "index", -1);
	}
	for (int i = 0; i < w->n_local; i++)
		json_decref(own[i]);
	free(mine);
	free(all);
	return rc;
}

static int rank_setup(mb_world_rank *l, mb_error *err)
{
	cudaStream_t stream = NULL;
	cudaEvent_t start = NULL, stop = NULL;
	cudaError_t ce;

	/* each handle kept as it is made, so that mb_world_close frees it */
	if ((ce = cudaSetDevice(l->device)) == cudaSuccess
		&& (ce = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)) == cudaSuccess)
		l->stream = stream;
	if (ce == cudaSuccess && (ce = cudaEventCreate(&start)) == cudaSuccess)
		l->start = start;
	if (ce == cudaSuccess && (ce = cudaEventCreate(&stop)) == cudaSuccess)
		l->stop = stop;
	if (ce != cudaSuccess)
		return mb_error_set(err, MB_EDEVICE, "device setup", "rank %d, device %d: %s", l->rank, l->device,
			cudaGetErrorString(ce));
	return 0;
}

/* The communicators: all at once, or one per process from rank 0's id. */
static int communicators(mb_world *w, mb_error *err)
{
	ncclComm_t comms[MB_WORLD_MAX_RANKS];
	int devices[MB_WORLD_MAX_RANKS];
	ncclResult_t nr = ncclSuccess;

	if (!w->mpi) {
		for (int i = 0; i < w->n_local; i++)
			devices[i] = w->local[i].device;
		nr = ncclCommInitAll(comms, w->size, devices);
		if (nr != ncclSuccess)
			return mb_error_set(err, MB_EDEVICE, "ncclCommInitAll", "%s", ncclGetErrorString(nr));
		for (int i = 0; i < w->n_local; i++)
			w->local[i].comm = comms[i];
		return 0;
	}
#if MB_HAVE_MPI
	ncclUniqueId id;
	int root_nr;
	memset(&id, 0, sizeof(id));
	nr = mb_world_root(w) ? ncclGetUniqueId(&id) : ncclSuccess;
	/* every rank learns whether the root has an id before it waits in
	 * ncclCommInitRank for the others */
	root_nr = (int)nr;
	MPI_Bcast(&root_nr, 1, MPI_INT, 0, MPI_COMM_WORLD);
	MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
	if (root_nr != (int)ncclSuccess)
		return mb_error_set(err, MB_EDEVICE, "ncclGetUniqueId", "rank 0: %s", ncclGetErrorString((ncclResult_t)root_nr));
	cudaSetDevice(w->local[0].device);
	nr = ncclCommInitRank(&comms[0], w->size, id, w->proc);
	if (nr != ncclSuccess)
		return mb_error_set(err, MB_EDEVICE, "ncclCommInitRank", "rank %d: %s", w->proc, ncclGetErrorString(nr));
	w->local[0].comm = comms[0];
#endif
	return 0;
}

int mb_world_connect(mb_world *w, mb_error *err)
{
	int rc = 0, version = 0;

	for (int i = 0; i < w->n_local && !rc; i++) {
		w->local[i].rank = w->first + i;
		rc = rank_setup(&w->local[i], err);
	}
	if (!mb_world_agree(w, rc == 0))
		return rc ? rc : mb_error_set(err, MB_EDEVICE, "device setup", "another rank could not set its GPU up");
	if ((rc = gather_identities(w, err)))
		return rc;
	if (ncclGetVersion(&version) == ncclSuccess)
		snprintf(w->nccl_version, sizeof(w->nccl_version), "%d.%d.%d", version / 10000, version / 100 % 100,
			version % 100);
	else
		snprintf(w->nccl_version, sizeof(w->nccl_version), "unknown");
	/* NVLink multicast stays off unless the environment says otherwise */
	setenv(MB_WORLD_NVLS_ENV, MB_WORLD_NVLS_OFF, 0);
	mb_world_alive();
	rc = communicators(w, err);
	w->connected = mb_world_agree(w, rc == 0);
	if (!w->connected && !rc)
		rc = mb_error_set(err, MB_EDEVICE, "NCCL", "another rank could not join the communicator");
	return rc;
}

void mb_world_close(mb_world *w)
{
	for (int i = 0; i < w->n_local; i++) {
		mb_world_rank *l = &w->local[i];
		cudaSetDevice(l->device);
		if (l->comm)
			ncclCommDestroy((ncclComm_t)l->comm);
		if (l->stream)
			cudaStreamDestroy((cudaStream_t)l->stream);
		if (l->start)
			cudaEventDestroy((cudaEvent_t)l->start);
		if (l->stop)
			cudaEventDestroy((cudaEvent_t)l->stop);
		memset(l, 0, sizeof(*l));
	}
	for (int g = 0; g < MB_WORLD_MAX_RANKS; g++) {
		json_decref(w->identity[g]);
		w->identity[g] = NULL;
	}
	mb_cuda_nvml_close();
}

void mb_world_gpus(const mb_world *w, json_t **out_gpus, json_t **out_topology)
{
	int devices[MB_WORLD_MAX_RANKS];
	json_t *gpus = NULL, *topo = NULL;
	bool same = true;
	mb_error err;

	for (int g = 0; g < w->size; g++)
		devices[g] = (int)json_integer_value(json_object_get(w->identity[g], "index"));
	if (mb_cuda_topology(&gpus, &topo, devices, w->size, &err) == 0)
		for (int g = 0; g < w->size; g++)
			same = same && json_equal(json_object_get(json_array_get(gpus, (size_t)g), "uuid"),
				json_object_get(w->identity[g], "uuid"));
	if (!gpus || !topo || !same) {
		json_decref(gpus);
		json_decref(topo);
		gpus = json_array();
		for (int g = 0; g < w->size; g++) {
			const json_t *id = w->identity[g];
			json_array_append_new(gpus, json_pack("{s:O, s:O, s:O, s:n}", "index", json_object_get(id, "index"),
				"name", json_object_get(id, "name"), "uuid", json_object_get(id, "uuid"), "pci_bus_id"));
		}
		topo = json_pack("{s:s, s:s, s:[], s:s}", "source", "none", "class", "unknown", "links", "note",
			"the ranks' GPUs are not all visible to rank 0's process: their links were not asked");
	}
	*out_gpus = gpus;
	*out_topology = topo;
}
