/* The host's cores dealt among the workers of a sharded run: each worker
 * (and every process it forks: row children, the reference worker) runs on
 * its own slice, so that N workers do not each start a thread per core of
 * the whole host and slow every worker's host work (the references,
 * correctness checks and input generation) by contention. */
#ifndef MB_HARNESS_CPU_SLICES_H
#define MB_HARNESS_CPU_SLICES_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

/* The slices of this process's cores for n workers. Worker k's GPU is at
 * PCI address bus_ids[k] (NULL or unknown: no locality known); workers
 * whose GPUs are local to the same cores (the GPU's NUMA node, as the
 * kernel lists it) divide those cores in contiguous shares, the others
 * divide the whole mask. out[k] is the slice; pinned[k] says whether
 * there is one (false where a group has fewer cores than workers: the
 * worker is left on every core). */
void mb_cpu_slices(cpu_set_t *out, bool *pinned, int n, const char *const *bus_ids);

/* "16-31" or "0-3,8-11": the cores of a set, for notices. */
void mb_cpu_set_text(char *buf, size_t len, const cpu_set_t *set);

#endif
