/* The one whole-file reader (read_file.h). */
#include "receipts/read_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What a file that is not a regular one is, for the refusal. */
static const char *file_kind(mode_t mode)
{
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISCHR(mode))
		return "a character device";
	if (S_ISBLK(mode))
		return "a block device";
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISSOCK(mode))
		return "a socket";
	return "not a regular file";
}

static int too_large(const char *path, size_t max_bytes, const char *what, mb_error *err)
{
	return mb_error_set(err, MB_EIO, path, "larger than %zu bytes, the limit for %s; is this the right file?",
		max_bytes, what);
}

int mb_read_file(char **out, size_t *out_len, const char *path, size_t max_bytes, const char *what,
	mb_error *err)
{
	struct stat st;
	char *buf = NULL;
	size_t len = 0, cap;
	int fd, rc = 0;

	*out = NULL;
	*out_len = 0;
	/* non-blocking, so that opening a FIFO nobody writes to returns at once;
	 * it is refused below with every other file that is not a regular one */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return mb_error_set(err, errno == ENOENT ? MB_ENOTFOUND : MB_EIO, path, "cannot open: %s",
			strerror(errno));
	if (fstat(fd, &st)) {
		rc = mb_error_set(err, MB_EIO, path, "cannot stat: %s", strerror(errno));
		goto cleanup;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = mb_error_set(err, MB_EIO, path, "%s, not a regular file: refused unread", file_kind(st.st_mode));
		goto cleanup;
	}
	if ((uintmax_t)st.st_size > max_bytes) {
		rc = too_large(path, max_bytes, what, err);
		goto cleanup;
	}
	/* the size is known: one allocation (+1 for the NUL, +1 to see growth),
	 * doubled only should the file grow while it is read */
	cap = (size_t)st.st_size + 1;
	for (;;) {
		ssize_t n;

		if (len == cap) {
			size_t grown_cap = cap > max_bytes / 2 ? max_bytes + 1 : 2 * cap;
			char *grown = realloc(buf, grown_cap + 1);

			if (!grown) {
				rc = mb_error_set(err, MB_ENOMEM, path, "out of memory reading the file");
				goto cleanup;
			}
			buf = grown;
			cap = grown_cap;
		} else if (!buf && !(buf = malloc(cap + 1))) {
			rc = mb_error_set(err, MB_ENOMEM, path, "out of memory reading the file");
			goto cleanup;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = mb_error_set(err, MB_EIO, path, "read failed: %s", strerror(errno));
			goto cleanup;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > max_bytes) {
			rc = too_large(path, max_bytes, what, err);
			goto cleanup;
		}
	}
	buf[len] = '\0';
	*out = buf;
	*out_len = len;
	buf = NULL;

cleanup:
	free(buf);
	close(fd);
	return rc;
}
