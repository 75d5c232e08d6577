#include "harness/hostinfo.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#define OS_RELEASE_PATHS { "/etc/os-release", "/usr/lib/os-release" }
#define OS_NAME_KEY "PRETTY_NAME="
#define CPUINFO_PATH "/proc/cpuinfo"
#define CPU_MODEL_KEY "model name"
#define UNKNOWN "unknown"
#define LINE_MAX_BYTES 1024
#define ASCII_MAX 0x7f
/* HOST_NAME_MAX is 64 on Linux; leave room for the terminator that
 * gethostname may omit on truncation. */
#define HOSTNAME_BYTES (HOST_NAME_MAX + 1)

static void strip_newline(char *s)
{
	size_t n = strlen(s);

	while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r'))
		s[--n] = '\0';
}

/* os-release values are shell-quoted: take the text between matching quotes
 * and drop the backslashes that escape the next character. */
static void unquote(char *out, size_t len, const char *value)
{
	char quote = (*value == '"' || *value == '\'') ? *value : '\0';
	const char *p = quote ? value + 1 : value;
	size_t n = 0;

	for (; *p && *p != quote && n + 1 < len; p++) {
		if (*p == '\\' && quote == '"' && p[1])
			p++;
		out[n++] = *p;
	}
	out[n] = '\0';
}

/* Returns 1 when an os-release file named the system. */
static int read_os_name(char *out, size_t len)
{
	static const char *const paths[] = OS_RELEASE_PATHS;
	char line[LINE_MAX_BYTES];
	int found = 0;

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]) && !found; i++) {
		FILE *f = fopen(paths[i], "r");

		if (!f)
			continue;
		while (!found && fgets(line, sizeof(line), f)) {
			if (strncmp(line, OS_NAME_KEY, strlen(OS_NAME_KEY)) != 0)
				continue;
			strip_newline(line);
			unquote(out, len, line + strlen(OS_NAME_KEY));
			found = out[0] != '\0';
		}
		fclose(f);
	}
	return found;
}

static void read_cpu_model(char *out, size_t len)
{
	char line[LINE_MAX_BYTES];
	FILE *f = fopen(CPUINFO_PATH, "r");

	snprintf(out, len, "%s", UNKNOWN);
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');
		char *value;

		if (strncmp(line, CPU_MODEL_KEY, strlen(CPU_MODEL_KEY)) != 0 || !colon)
			continue;
		value = colon + 1;
		while (isspace((unsigned char)*value))
			value++;
		strip_newline(value);
		if (*value) {
			snprintf(out, len, "%s", value);
			break;
		}
	}
	fclose(f);
}

uint64_t mb_host_memory_bytes(void)
{
	long pages = sysconf(_SC_PHYS_PAGES);
	long page_bytes = sysconf(_SC_PAGESIZE);

	if (pages <= 0 || page_bytes <= 0)
		return 0;
	return (uint64_t)pages * (uint64_t)page_bytes;
}

/* A JSON string of `s`; bytes that are not valid UTF-8 (a hostname or CPU
 * name from an odd firmware) become '?' rather than failing the run. */
static json_t *text(const char *s)
{
	char copy[LINE_MAX_BYTES];
	json_t *value = json_string(s);

	if (value)
		return value;
	snprintf(copy, sizeof(copy), "%s", s);
	for (char *p = copy; *p; p++)
		if ((unsigned char)*p > ASCII_MAX)
			*p = '?';
	return json_string(copy);
}

json_t *mb_host_instrumentation(void)
{
	static const char *const vars[] = {"CUDA_INJECTION64_PATH", "LD_PRELOAD"};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *by = getenv(vars[i]);
		const char *tool;

		if (!by || !*by)
			continue;
		/* the libraries' names: compute-sanitizer's collection library,
		 * Nsight's ToolsInjection (ncu and nsys) */
		tool = strstr(by, "sanitizer") ? "compute-sanitizer"
			: strstr(by, "ToolsInjection") || strstr(by, "nsight") || strstr(by, "Nsight") ? "nsight" : "unknown";
		return json_pack("{s:s, s:s, s:s}", "tool", tool, "by", by, "variable", vars[i]);
	}
	return NULL;
}

int mb_host_identity(json_t **out, mb_error *err)
{
	char hostname[HOSTNAME_BYTES] = "";
	char os[LINE_MAX_BYTES];
	char cpu_model[LINE_MAX_BYTES];
	struct utsname uts;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t memory_bytes = mb_host_memory_bytes();
	json_t *host = NULL;
	int rc = 0;

	*out = NULL;
	if (uname(&uts) != 0) {
		rc = mb_error_set(err, MB_EIO, "host", "uname failed: %s", strerror(errno));
		goto cleanup;
	}
	if (gethostname(hostname, sizeof(hostname) - 1) != 0) {
		rc = mb_error_set(err, MB_EIO, "host", "gethostname failed: %s", strerror(errno));
		goto cleanup;
	}
	if (!read_os_name(os, sizeof(os)))
		snprintf(os, sizeof(os), "%s", uts.sysname);
	read_cpu_model(cpu_model, sizeof(cpu_model));
	/* The schema asks for at least one CPU; sysconf fails only on exotic
	 * systems, and the process is evidently running on one. */
	if (cpus < 1)
		cpus = 1;
	/* json_int_t is long long (JSON_INTEGER_IS_LONG_LONG). */
	if (memory_bytes > (uint64_t)LLONG_MAX)
		memory_bytes = (uint64_t)LLONG_MAX;

	host = json_object();
	if (!host
	    || json_object_set_new(host, "hostname", text(hostname))
	    || json_object_set_new(host, "os", text(os))
	    || json_object_set_new(host, "kernel", text(uts.release))
	    || json_object_set_new(host, "arch", text(uts.machine))
	    || json_object_set_new(host, "cpu_model", text(cpu_model))
	    || json_object_set_new(host, "cpu_count", json_integer(cpus))
	    || json_object_set_new(host, "memory_bytes", json_integer((json_int_t)memory_bytes))) {
		rc = mb_error_set(err, MB_ENOMEM, "host",
			"out of memory");
		goto cleanup;
	}
	*out = host;
	host = NULL;

cleanup:
	json_decref(host);
	return rc;
}
