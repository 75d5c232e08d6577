/* Device identity and NVML clocks; see cuda_device.h. */
#include "harness/cuda_device.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/cuda_headers.h"
#include "harness/cupti_timer.h"
#include "mb_config.h"

#define DEVICE_DEFAULT 0

int mb_cuda_device_index(void)
{
	const char *text = getenv(MB_DEVICE_ENV);
	char *end;
	long v;

	if (!text || !*text)
		return DEVICE_DEFAULT;
	v = strtol(text, &end, 10);
	return *end || v < 0 || v > INT_MAX ? DEVICE_DEFAULT : (int)v;
}

/* The toolkit ships no nvml.h; these are the few NVML declarations we use,
 * written from the NVML API reference. */
typedef struct nvml_device_st *nvml_device;
typedef int nvml_return;
enum { NVML_OK = 0 };
enum { NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };
#define NVML_LIBRARY "libnvidia-ml.so.1"
#define NVML_DRIVER_TEXT_BYTES 96
#define PCI_BUS_ID_BYTES 32
/* CUDA packs versions as 1000 * major + 10 * minor. */
#define CUDA_VERSION_MAJOR 1000
#define CUDA_VERSION_MINOR 10
/* NCCL since 2.9: 10000 * major + 100 * minor + patch. */
#define NCCL_VERSION_MAJOR 10000
#define NCCL_VERSION_MINOR 100

static struct {
	void *lib;
	nvml_device dev;
	bool open;
	nvml_return (*init)(void);
	nvml_return (*shutdown)(void);
	nvml_return (*by_pci)(const char *bus_id, nvml_device *out);
	nvml_return (*clock)(nvml_device dev, int type, unsigned *mhz);
	nvml_return (*max_clock)(nvml_device dev, int type, unsigned *mhz);
	nvml_return (*driver)(char *buf, unsigned len);
} N;

static void *sym(const char *name)
{
	return dlsym(N.lib, name);
}

bool mb_cuda_nvml_open(int device, char *why, size_t why_len)
{
	char bus_id[PCI_BUS_ID_BYTES];
	bool ok = false;
	if (N.open)
		return true;
	if (N.lib == NULL)
		N.lib = dlopen(NVML_LIBRARY, RTLD_NOW | RTLD_LOCAL);
	if (N.lib == NULL) {
		snprintf(why, why_len, "NVML unavailable: %s not found; SM clocks were not watched", NVML_LIBRARY);
		goto cleanup;
	}
	*(void **)&N.init = sym("nvmlInit_v2");
	*(void **)&N.shutdown = sym("nvmlShutdown");
	*(void **)&N.by_pci = sym("nvmlDeviceGetHandleByPciBusId_v2");
	*(void **)&N.clock = sym("nvmlDeviceGetClockInfo");
	*(void **)&N.max_clock = sym("nvmlDeviceGetMaxClockInfo");
	*(void **)&N.driver = sym("nvmlSystemGetDriverVersion");
	if (!N.init || !N.shutdown || !N.by_pci || !N.clock || !N.max_clock || !N.driver) {
		snprintf(why, why_len, "NVML unavailable: %s lacks a needed symbol", NVML_LIBRARY);
		goto cleanup;
	}
	if (N.init() != NVML_OK) {
		snprintf(why, why_len, "NVML unavailable: nvmlInit_v2 failed");
		goto cleanup;
	}
	if (cudaDeviceGetPCIBusId(bus_id, (int)sizeof bus_id, device) != cudaSuccess ||
	    N.by_pci(bus_id, &N.dev) != NVML_OK) {
		N.shutdown();
		snprintf(why, why_len, "NVML unavailable: no NVML device for CUDA device %d", device);
		goto cleanup;
	}
	N.open = true;
	ok = true;
cleanup:
	if (!ok && N.lib != NULL) {
		dlclose(N.lib);
		N.lib = NULL;
	}
	return ok;
}

bool mb_cuda_nvml_sm_clock_mhz(unsigned *out_mhz)
{
	return N.open && N.clock(N.dev, NVML_CLOCK_SM, out_mhz) == NVML_OK;
}

void mb_cuda_nvml_close(void)
{
	if (N.open)
		N.shutdown();
	if (N.lib != NULL)
		dlclose(N.lib);
	memset(&N, 0, sizeof N);
}

void mb_cuda_version_text(char *buf, size_t len, int version)
{
	snprintf(buf, len, "%d.%d", version / CUDA_VERSION_MAJOR,
		(version % CUDA_VERSION_MAJOR) / CUDA_VERSION_MINOR);
}

static json_t *clock_json(int type, bool max)
{
	unsigned mhz = 0;
	if (!N.open)
		return json_null();
	nvml_return r = max ? N.max_clock(N.dev, type, &mhz) : N.clock(N.dev, type, &mhz);
	return r == NVML_OK ? json_integer((json_int_t)mhz) : json_null();
}

static void uuid_text(char *buf, size_t len, const unsigned char *b)
{
	/* nvidia-smi's spelling: GPU-8-4-4-4-12 hex digits. */
	snprintf(buf, len,
		"GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
		b[12], b[13], b[14], b[15]);
}

static int set_new(json_t *o, const char *key, json_t *v, mb_error *err)
{
	if (v == NULL || json_object_set_new(o, key, v) != 0)
		return mb_error_set(err, MB_ENOMEM, "device", "out of memory setting %s", key);
	return 0;
}

int mb_cuda_device_json(json_t **out, int device, mb_error *err)
{
	int rc = 0;
	json_t *o = NULL;
	struct cudaDeviceProp prop;
	char text[NVML_DRIVER_TEXT_BYTES], cc[32], uuid[64], version[32], why[256] = "";
	int driver = 0, runtime = 0;
	cudaError_t ce;

	*out = NULL;
	ce = cudaGetDeviceProperties(&prop, device);
	if (ce != cudaSuccess) {
		rc = mb_error_set(err, MB_EDEVICE, "device", "cudaGetDeviceProperties(%d): %s",
			device, cudaGetErrorString(ce));
		goto cleanup;
	}
	cudaDriverGetVersion(&driver);
	cudaRuntimeGetVersion(&runtime);
	bool nvml = mb_cuda_nvml_open(device, why, sizeof why);

	o = json_object();
	if (o == NULL) {
		rc = mb_error_set(err, MB_ENOMEM, "device", "out of memory");
		goto cleanup;
	}
	snprintf(cc, sizeof cc, "%d.%d", prop.major, prop.minor);
	uuid_text(uuid, sizeof uuid, (const unsigned char *)prop.uuid.bytes);
	if ((rc = set_new(o, "backend", json_string("cuda"), err)) ||
	    (rc = set_new(o, "name", json_string(prop.name), err)) ||
	    (rc = set_new(o, "uuid", json_string(uuid), err)) ||
	    (rc = set_new(o, "index", json_integer(device), err)) ||
	    (rc = set_new(o, "compute_capability", json_string(cc), err)) ||
	    (rc = set_new(o, "sm_count", json_integer(prop.multiProcessorCount), err)) ||
	    (rc = set_new(o, "memory_bytes", json_integer((json_int_t)prop.totalGlobalMem), err)) ||
	    (rc = set_new(o, "l2_bytes", json_integer(prop.l2CacheSize), err)) ||
	    (rc = set_new(o, "persisting_l2_max_bytes", json_integer(prop.persistingL2CacheMaxSize), err)) ||
	    (rc = set_new(o, "sm_clock_max_mhz", clock_json(NVML_CLOCK_SM, true), err)) ||
	    (rc = set_new(o, "sm_clock_mhz", clock_json(NVML_CLOCK_SM, false), err)) ||
	    (rc = set_new(o, "mem_clock_max_mhz", clock_json(NVML_CLOCK_MEM, true), err)) ||
	    (rc = set_new(o, "mem_clock_mhz", clock_json(NVML_CLOCK_MEM, false), err)) ||
	    (rc = set_new(o, "ecc", json_boolean(prop.ECCEnabled != 0), err)) ||
	    (rc = set_new(o, "clocks_monitored", json_boolean(nvml), err)))
		goto cleanup;
	if (!nvml && (rc = set_new(o, "clocks_note", json_string(why), err)))
		goto cleanup;

	mb_cuda_version_text(version, sizeof version, driver);
	if (nvml && N.driver(text, sizeof text) == NVML_OK) {
		char both[sizeof text + sizeof version + 16];
		snprintf(both, sizeof both, "%s (CUDA %s)", text, version);
		rc = set_new(o, "driver_version", json_string(both), err);
	} else {
		rc = set_new(o, "driver_version", json_string(version), err);
	}
	if (rc)
		goto cleanup;
	mb_cuda_version_text(version, sizeof version, runtime);
	if ((rc = set_new(o, "runtime_version", json_string(version), err)))
		goto cleanup;

	if (mb_cupti_version(text, sizeof text, NULL) == 0)
		rc = set_new(o, "cupti_version", json_string(text), err);
	else
		rc = set_new(o, "cupti_version", json_null(), err);
	if (rc)
		goto cleanup;
#if MB_HAVE_NCCL
	int nccl = 0;
	if (ncclGetVersion(&nccl) == ncclSuccess) {
		snprintf(text, sizeof text, "%d.%d.%d", nccl / NCCL_VERSION_MAJOR,
			(nccl % NCCL_VERSION_MAJOR) / NCCL_VERSION_MINOR, nccl % NCCL_VERSION_MINOR);
		rc = set_new(o, "nccl_version", json_string(text), err);
	} else {
		rc = set_new(o, "nccl_version", json_null(), err);
	}
#else
	rc = set_new(o, "nccl_version", json_null(), err);
#endif
	if (rc)
		goto cleanup;
	*out = o;
	o = NULL;
cleanup:
	json_decref(o);
	return rc;
}
