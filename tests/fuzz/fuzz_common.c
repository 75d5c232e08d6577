#include "fuzz_common.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int fuzz_memfile(const uint8_t *data, size_t size, char *path, size_t len)
{
	int fd = memfd_create("fuzz-input", MFD_CLOEXEC);
	size_t done = 0;
	ssize_t n;

	if (fd < 0)
		return -1;
	while (done < size) {
		n = write(fd, data + done, size - done);
		if (n <= 0) {
			close(fd);
			return -1;
		}
		done += (size_t)n;
	}
	snprintf(path, len, "/proc/self/fd/%d", fd);
	return fd;
}

void fuzz_require(bool ok, const char *what)
{
	if (ok)
		return;
	fprintf(stderr, "fuzz invariant broken: %s\n", what);
	abort();
}

FILE *fuzz_sink(void)
{
	static FILE *sink;

	if (!sink)
		sink = fopen("/dev/null", "w");
	fuzz_require(sink != NULL, "/dev/null opens");
	return sink;
}
