/* The host's cores dealt among the workers of a sharded run (cpu_slices.h). */
#include "harness/cpu_slices.h"

#include <stdio.h>
#include <string.h>

#include "receipts/text.h"

#define PATH_BYTES 128
#define LIST_BYTES 4096

/* The cores the kernel lists as local to the PCI device at `bus_id`
 * (CUDA writes "00000000:18:00.0", sysfs names "0000:18:00.0"); false
 * where the address or the list cannot be read. */
static bool local_cores(cpu_set_t *out, const char *bus_id)
{
	unsigned domain, bus, dev, fn, a, b;
	char path[PATH_BYTES], list[LIST_BYTES];
	const char *p = list;
	FILE *f;
	int used;
	bool ok;

	CPU_ZERO(out);
	if (!bus_id || sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4)
		return false;
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%04x:%02x:%02x.%x/local_cpulist", domain, bus, dev, fn);
	if (!(f = fopen(path, "r")))
		return false;
	ok = fgets(list, sizeof(list), f) != NULL;
	fclose(f);
	/* "0-15,32-47" */
	while (ok && sscanf(p, "%u%n", &a, &used) == 1) {
		p += used;
		b = a;
		if (*p == '-' && sscanf(p + 1, "%u%n", &b, &used) == 1)
			p += 1 + used;
		for (unsigned c = a; c <= b && c < CPU_SETSIZE; c++)
			CPU_SET(c, out);
		if (*p != ',')
			break;
		p++;
	}
	return ok && CPU_COUNT(out) > 0;
}

/* The part-th of parts contiguous shares of the cores in `set`. */
static void share_of(cpu_set_t *out, const cpu_set_t *set, int part, int parts)
{
	int n = CPU_COUNT(set), from = n * part / parts, to = n * (part + 1) / parts, seen = 0;

	CPU_ZERO(out);
	for (int c = 0; c < CPU_SETSIZE && seen < to; c++) {
		if (!CPU_ISSET(c, set))
			continue;
		if (seen >= from)
			CPU_SET(c, out);
		seen++;
	}
}

void mb_cpu_slices(cpu_set_t *out, bool *pinned, int n, const char *const *bus_ids)
{
	cpu_set_t mine, group[n > 0 ? n : 1];

	if (sched_getaffinity(0, sizeof(mine), &mine) != 0) {
		for (int k = 0; k < n; k++)
			pinned[k] = false;
		return;
	}
	/* each worker's group: its GPU's local cores that this process may
	 * use, or all of them */
	for (int k = 0; k < n; k++) {
		cpu_set_t local, both;

		group[k] = mine;
		if (bus_ids && local_cores(&local, bus_ids[k])) {
			CPU_AND(&both, &local, &mine);
			if (CPU_COUNT(&both) > 0)
				group[k] = both;
		}
	}
	for (int k = 0; k < n; k++) {
		int part = 0, parts = 0;

		for (int j = 0; j < n; j++) {
			if (CPU_EQUAL(&group[j], &group[k])) {
				part += j < k;
				parts++;
			}
		}
		pinned[k] = CPU_COUNT(&group[k]) >= parts;
		if (pinned[k])
			share_of(&out[k], &group[k], part, parts);
	}
}

void mb_cpu_set_text(char *buf, size_t len, const cpu_set_t *set)
{
	buf[0] = '\0';
	for (int c = 0; c < CPU_SETSIZE; c++) {
		int end = c;

		if (!CPU_ISSET(c, set))
			continue;
		while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, set))
			end++;
		if (end > c)
			mb_text_appendf(buf, len, "%s%d-%d", buf[0] ? "," : "", c, end);
		else
			mb_text_appendf(buf, len, "%s%d", buf[0] ? "," : "", c);
		c = end;
	}
}
