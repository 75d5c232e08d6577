/* GPU identity and the links between GPUs; see cuda_topology.h. */
#include "harness/cuda_topology.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "harness/cuda_headers.h"

/* The toolkit ships no nvml.h: the few declarations used here, written
 * from the NVML API reference (nvmlGpuP2PCapsIndex_t, nvmlGpuP2PStatus_t,
 * nvmlGpuTopologyLevel_t, nvmlEnableState_t). */
typedef struct nvml_device_st *nvml_device;
typedef int nvml_return;
enum { NVML_OK = 0 };
enum { NVML_P2P_CAPS_INDEX_NVLINK = 2 };
enum { NVML_P2P_STATUS_OK = 0 };
enum { NVML_FEATURE_ENABLED = 1 };
/* NVML_NVLINK_MAX_LINKS of the current nvml.h (18 on Hopper and
 * Blackwell); asking past a device's links fails, which ends the count. */
#define NVML_NVLINK_MAX_LINKS 18
#define NVML_LIBRARY "libnvidia-ml.so.1"
#define PCI_BUS_ID_BYTES 32
#define UUID_BYTES 64
#define NOTE_BYTES 256
/* Most GPUs one topology describes (one node). */
#define MAX_GPUS 64

/* nvmlGpuTopologyLevel_t, in nvidia-smi topo -m's words. */
static const char *path_name(int level)
{
	switch (level) {
	case 0: return "board";  /* both on one board (NVML_TOPOLOGY_INTERNAL) */
	case 10: return "PIX";   /* one PCIe switch */
	case 20: return "PXB";   /* several PCIe switches, no host bridge */
	case 30: return "PHB";   /* a PCIe host bridge */
	case 40: return "NODE";  /* host bridges within one NUMA node */
	case 50: return "SYS";   /* across NUMA nodes (SMP interconnect) */
	default: return NULL;
	}
}

typedef struct nvml_api {
	void *lib;
	bool open;
	nvml_return (*init)(void);
	nvml_return (*shutdown)(void);
	nvml_return (*by_pci)(const char *bus_id, nvml_device *out);
	nvml_return (*p2p_status)(nvml_device a, nvml_device b, int caps_index, int *status);
	nvml_return (*common_ancestor)(nvml_device a, nvml_device b, int *level);
	nvml_return (*nvlink_state)(nvml_device dev, unsigned link, int *active);
} nvml_api;

static bool nvml_load(nvml_api *n, char *why, size_t why_len)
{
	memset(n, 0, sizeof(*n));
	n->lib = dlopen(NVML_LIBRARY, RTLD_NOW | RTLD_LOCAL);
	if (!n->lib) {
		snprintf(why, why_len, "NVML unavailable (%s not found): links classified by CUDA only", NVML_LIBRARY);
		return false;
	}
	*(void **)&n->init = dlsym(n->lib, "nvmlInit_v2");
	*(void **)&n->shutdown = dlsym(n->lib, "nvmlShutdown");
	*(void **)&n->by_pci = dlsym(n->lib, "nvmlDeviceGetHandleByPciBusId_v2");
	*(void **)&n->p2p_status = dlsym(n->lib, "nvmlDeviceGetP2PStatus");
	*(void **)&n->common_ancestor = dlsym(n->lib, "nvmlDeviceGetTopologyCommonAncestor");
	*(void **)&n->nvlink_state = dlsym(n->lib, "nvmlDeviceGetNvLinkState");
	if (!n->init || !n->shutdown || !n->by_pci || !n->p2p_status || !n->common_ancestor || !n->nvlink_state) {
		snprintf(why, why_len, "NVML unavailable (%s lacks a needed symbol): links classified by CUDA only",
			NVML_LIBRARY);
	} else if (n->init() != NVML_OK) {
		snprintf(why, why_len, "NVML unavailable (nvmlInit_v2 failed): links classified by CUDA only");
	} else {
		n->open = true;
		return true;
	}
	dlclose(n->lib);
	n->lib = NULL;
	return false;
}

static void nvml_unload(nvml_api *n)
{
	if (n->open)
		n->shutdown();
	if (n->lib)
		dlclose(n->lib);
	memset(n, 0, sizeof(*n));
}

static void uuid_text(char *buf, size_t len, const unsigned char *b)
{
	/* nvidia-smi's spelling, as cuda_device.c writes it */
	snprintf(buf, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

/* Active NVLinks of one GPU; -1 when NVML cannot say. */
static int nvlinks_active(const nvml_api *n, nvml_device dev)
{
	int count = 0;

	if (!n->open || !dev)
		return -1;
	for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; link++) {
		int active = 0;

		if (n->nvlink_state(dev, link, &active) != NVML_OK)
			break; /* past the device's links, or no NVLink at all */
		count += active == NVML_FEATURE_ENABLED;
	}
	return count;
}

static json_t *gpu_json(int device, const char *bus_id, int nvlinks, mb_error *err)
{
	struct cudaDeviceProp prop;
	char uuid[UUID_BYTES];
	cudaError_t ce = cudaGetDeviceProperties(&prop, device);

	if (ce != cudaSuccess) {
		mb_error_set(err, MB_EDEVICE, "topology", "cudaGetDeviceProperties(%d): %s", device,
			cudaGetErrorString(ce));
		return NULL;
	}
	uuid_text(uuid, sizeof(uuid), (const unsigned char *)prop.uuid.bytes);
	return json_pack("{s:i, s:s, s:s, s:s, s:o}", "index", device, "name", prop.name, "uuid", uuid,
		"pci_bus_id", bus_id, "nvlinks_active", nvlinks >= 0 ? json_integer(nvlinks) : json_null());
}

/* One pair: what NVML and CUDA say about the path from a to b. */
static json_t *link_json(const nvml_api *n, int a, int b, int dev_a, int dev_b, nvml_device na, nvml_device nb)
{
	int can = 0, rank = 0, status = -1, level = -1;
	bool have_rank = cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, dev_a, dev_b) == cudaSuccess;
	bool have_can = cudaDeviceCanAccessPeer(&can, dev_a, dev_b) == cudaSuccess;
	bool have_nvml = n->open && na && nb;
	const char *kind = "unknown", *path = NULL;

	if (have_nvml && n->p2p_status(na, nb, NVML_P2P_CAPS_INDEX_NVLINK, &status) == NVML_OK)
		kind = status == NVML_P2P_STATUS_OK ? "nvlink" : "pcie";
	if (have_nvml && n->common_ancestor(na, nb, &level) == NVML_OK)
		path = path_name(level);
	return json_pack("{s:i, s:i, s:s, s:o, s:o, s:o}", "a", a, "b", b, "kind", kind,
		"pcie_path", path ? json_string(path) : json_null(),
		"peer_access", have_can ? json_boolean(can) : json_null(),
		"performance_rank", have_rank ? json_integer(rank) : json_null());
}

/* single, nvlink, pcie, mixed (both kinds) or unknown (a link NVML could
 * not classify). */
static const char *topology_class(const json_t *links)
{
	size_t i, nvlink = 0, pcie = 0;
	json_t *l;

	if (json_array_size(links) == 0)
		return "single";
	json_array_foreach(links, i, l) {
		const char *kind = json_string_value(json_object_get(l, "kind"));

		nvlink += !strcmp(kind, "nvlink");
		pcie += !strcmp(kind, "pcie");
	}
	if (nvlink + pcie < json_array_size(links))
		return "unknown";
	return pcie == 0 ? "nvlink" : nvlink == 0 ? "pcie" : "mixed";
}

int mb_cuda_topology(json_t **out_gpus, json_t **out_topology, const int *devices, int n, mb_error *err)
{
	nvml_api nvml;
	nvml_device handles[MAX_GPUS] = {0};
	char bus_ids[MAX_GPUS][PCI_BUS_ID_BYTES], note[NOTE_BYTES] = "";
	json_t *gpus = json_array(), *links = json_array(), *topo = NULL;
	bool have_nvml;
	int rc = 0;

	*out_gpus = *out_topology = NULL;
	if (n < 1 || n > MAX_GPUS) {
		rc = mb_error_set(err, MB_EINVAL, "topology", "%d GPUs: at most %d are described", n, MAX_GPUS);
		goto cleanup;
	}
	have_nvml = nvml_load(&nvml, note, sizeof(note));
	for (int i = 0; i < n && rc == 0; i++) {
		cudaError_t ce = cudaDeviceGetPCIBusId(bus_ids[i], PCI_BUS_ID_BYTES, devices[i]);
		json_t *g;

		if (ce != cudaSuccess) {
			rc = mb_error_set(err, MB_EDEVICE, "topology", "cudaDeviceGetPCIBusId(%d): %s", devices[i],
				cudaGetErrorString(ce));
			break;
		}
		if (have_nvml && nvml.by_pci(bus_ids[i], &handles[i]) != NVML_OK)
			handles[i] = NULL;
		g = gpu_json(devices[i], bus_ids[i], nvlinks_active(&nvml, handles[i]), err);
		if (!g || json_array_append_new(gpus, g))
			rc = err && err->code ? err->code : MB_ENOMEM;
	}
	for (int i = 0; i < n && rc == 0; i++)
		for (int j = i + 1; j < n && rc == 0; j++)
			if (json_array_append_new(links, link_json(&nvml, i, j, devices[i], devices[j], handles[i], handles[j])))
				rc = mb_error_set(err, MB_ENOMEM, "topology", "out of memory");
	if (rc == 0) {
		topo = json_pack("{s:s, s:s, s:O}", "source", have_nvml ? "nvml" : "cuda", "class", topology_class(links),
			"links", links);
		if (topo && note[0])
			json_object_set_new(topo, "note", json_string(note));
		if (!topo)
			rc = mb_error_set(err, MB_ENOMEM, "topology", "out of memory");
	}
	if (have_nvml)
		nvml_unload(&nvml);
	if (rc == 0) {
		*out_gpus = gpus;
		*out_topology = topo;
		gpus = topo = NULL;
	}
cleanup:
	json_decref(gpus);
	json_decref(links);
	json_decref(topo);
	return rc;
}
