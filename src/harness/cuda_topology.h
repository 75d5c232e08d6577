/* The GPUs of a sharded run and the links between them, as the driver
 * reports them: the receipt's "gpus" and "topology" (schemas/
 * receipt.schema.json says what each field means).
 *
 * Each pair of GPUs is classified from NVML, loaded at run time as
 * cuda_device.c loads it: NVLink when nvmlDeviceGetP2PStatus says the pair
 * can talk over NVLink (what nvidia-smi topo -m shows as NV#), else PCIe,
 * with the PCIe path from nvmlDeviceGetTopologyCommonAncestor (PIX, PXB,
 * PHB, NODE, SYS). Each GPU's active NVLinks are counted with
 * nvmlDeviceGetNvLinkState. CUDA's own view is recorded beside it
 * (cudaDeviceCanAccessPeer, cudaDevP2PAttrPerformanceRank); without NVML
 * that is all there is, and a link is "unknown": CUDA's attributes do not
 * say whether peer traffic goes over NVLink or PCIe.
 *
 * Call it in a child process (the parent of a run never initialises CUDA).
 */
#ifndef MB_HARNESS_CUDA_TOPOLOGY_H
#define MB_HARNESS_CUDA_TOPOLOGY_H

#include <jansson.h>

#include "receipts/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The identity of CUDA devices `devices[0 .. n)` (index, name, uuid,
 * pci_bus_id, nvlinks_active) into *out_gpus, and the links between every
 * pair with the class of the whole into *out_topology; both belong to the
 * caller. Fails (MB_EDEVICE) when CUDA cannot describe a device. */
int mb_cuda_topology(json_t **out_gpus, json_t **out_topology, const int *devices, int n, mb_error *err);

#ifdef __cplusplus
}
#endif

#endif
