#include "receipts/atomic_write.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "receipts/gzip.h"

#define STDOUT_PATH "-"
/* mkstemp replaces exactly these six characters. */
#define TEMP_SUFFIX ".XXXXXX"
/* open(O_CREAT, 0666) under the usual 022 umask; chosen explicitly because
 * mkstemp creates 0600 and a receipt is meant to be shared. */
#define NEW_FILE_MODE 0644
#define PERMISSION_BITS 07777
/* Directories made for a file: 0777 under the usual 022 umask. */
#define NEW_DIR_MODE 0755
#define JSON_WRITE_FLAGS (JSON_INDENT(1) | JSON_REAL_PRECISION(17))
/* What the temporary adds to the name: the leading dot and TEMP_SUFFIX. */
#define TEMP_EXTRA_CHARS (1 + sizeof(TEMP_SUFFIX) - 1)
/* The probe writes one block, so that a full disk fails before the work. */
#define PROBE_BYTES 4096

/* Returns 0 or the errno of the failing write. */
static int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		/* write(2) returning 0 for a non-zero count means no progress is
		 * possible; treat it like a full disk rather than spin. */
		if (n == 0)
			return ENOSPC;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int write_stdout(const void *data, size_t len, mb_error *err)
{
	int rc = write_all(STDOUT_FILENO, data, len);

	if (rc)
		return mb_error_set(err, MB_EIO, "<stdout>", "write failed: %s", strerror(rc));
	return 0;
}

/* The longest file name the directory takes. */
static size_t name_max(const char *dir)
{
	long n = pathconf(dir, _PC_NAME_MAX);

	return n > 0 ? (size_t)n : NAME_MAX;
}

/* Split `path` into its directory ("." when it has none) and a temporary
 * name beside it. The temporary keeps as much of the name as fits: a name
 * at the file system's limit must not fail only because ".XXXXXX" made its
 * temporary longer. */
static int temp_names(char *out_dir, char *out_temp, const char *path, mb_error *err)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	size_t limit, keep;
	int n;

	if (!*base)
		return mb_error_set(err, MB_EINVAL, path, "expected a file name, got a directory");
	if (!slash)
		n = snprintf(out_dir, PATH_MAX, ".");
	else if (slash == path)
		n = snprintf(out_dir, PATH_MAX, "/");
	else
		n = snprintf(out_dir, PATH_MAX, "%.*s", (int)(slash - path), path);
	if (n < 0 || n >= PATH_MAX)
		return mb_error_set(err, MB_EINVAL, path, "path is too long");
	limit = name_max(out_dir);
	if (strlen(base) > limit)
		return mb_error_set(err, MB_EINVAL, path, "the file name is %zu bytes, longer than the %zu that %s takes",
			strlen(base), limit, out_dir);
	keep = strlen(base);
	if (keep + TEMP_EXTRA_CHARS > limit)
		keep = limit - TEMP_EXTRA_CHARS;
	n = snprintf(out_temp, PATH_MAX, "%.*s.%.*s" TEMP_SUFFIX,
		(int)(base - path), path, (int)keep, base);
	if (n < 0 || n >= PATH_MAX)
		return mb_error_set(err, MB_EINVAL, path, "path is too long");
	return 0;
}

/* Flush the directory entry written by rename. Some file systems cannot
 * fsync a directory and say EINVAL; that is not a failure of ours. */
static int sync_dir(const char *dir)
{
	int rc = 0;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return errno;
	if (fsync(fd) != 0 && errno != EINVAL)
		rc = errno;
	if (close(fd) != 0 && !rc)
		rc = errno;
	return rc;
}

/* rename(2) that refuses to replace: renameat2's RENAME_NOREPLACE, or where
 * the file system lacks it, link(2) (which never replaces) and unlink. 0 or
 * an errno (EEXIST when `path` exists). */
static int rename_noreplace(const char *temp, const char *path)
{
	if (renameat2(AT_FDCWD, temp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
		return errno;
	if (link(temp, path) != 0)
		return errno;
	unlink(temp);
	return 0;
}

int mb_atomic_write(const char *path, const void *data, size_t len, mb_error *err)
{
	return mb_atomic_write_ex(path, data, len, 0, err);
}

int mb_atomic_write_ex(const char *path, const void *data, size_t len, unsigned flags, mb_error *err)
{
	char dir[PATH_MAX];
	char temp[PATH_MAX];
	struct stat old;
	mode_t mode = NEW_FILE_MODE;
	int fd = -1;
	int temp_exists = 0;
	int rc;
	int sys;

	if (!path || (!data && len > 0)) {
		rc = mb_error_set(err, MB_EINVAL, path ? path : "", "no path or no data to write");
		goto cleanup;
	}
	if (strcmp(path, STDOUT_PATH) == 0) {
		rc = write_stdout(data, len, err);
		goto cleanup;
	}
	rc = temp_names(dir, temp, path, err);
	if (rc)
		goto cleanup;
	if (stat(path, &old) == 0) {
		if (flags & MB_ATOMIC_NO_REPLACE) {
			rc = mb_error_set(err, MB_EIO, path, "already exists (not replaced)");
			goto cleanup;
		}
		mode = old.st_mode & PERMISSION_BITS;
	}

	fd = mkostemp(temp, O_CLOEXEC);
	if (fd < 0) {
		rc = mb_error_set(err, MB_EIO, path, "cannot create a temporary file in %s: %s",
			dir, strerror(errno));
		goto cleanup;
	}
	temp_exists = 1;
	if (fchmod(fd, mode) != 0) {
		rc = mb_error_set(err, MB_EIO, path, "chmod failed: %s", strerror(errno));
		goto cleanup;
	}
	sys = write_all(fd, data, len);
	if (sys) {
		rc = mb_error_set(err, MB_EIO, path, "write failed: %s", strerror(sys));
		goto cleanup;
	}
	if (fsync(fd) != 0) {
		rc = mb_error_set(err, MB_EIO, path, "fsync failed: %s", strerror(errno));
		goto cleanup;
	}
	/* close can report a deferred write error (NFS, quota); the fd is gone
	 * either way, so forget it before looking at the result. */
	sys = close(fd);
	fd = -1;
	if (sys != 0) {
		rc = mb_error_set(err, MB_EIO, path, "close failed: %s", strerror(errno));
		goto cleanup;
	}
	if (flags & MB_ATOMIC_NO_REPLACE) {
		sys = rename_noreplace(temp, path);
		if (sys == EEXIST) {
			rc = mb_error_set(err, MB_EIO, path, "already exists (created while this file was written; "
				"not replaced)");
			goto cleanup;
		}
		if (sys) {
			rc = mb_error_set(err, MB_EIO, path, "rename from %s failed: %s", temp, strerror(sys));
			goto cleanup;
		}
	} else if (rename(temp, path) != 0) {
		rc = mb_error_set(err, MB_EIO, path, "rename from %s failed: %s", temp, strerror(errno));
		goto cleanup;
	}
	temp_exists = 0;
	sys = sync_dir(dir);
	if (sys)
		rc = mb_error_set(err, MB_EIO, path,
			"written, but syncing directory %s failed (the file may not survive a crash): %s",
			dir, strerror(sys));

cleanup:
	if (fd >= 0)
		close(fd);
	if (temp_exists)
		unlink(temp);
	return rc;
}

int mb_atomic_write_probe(const char *path, unsigned flags, mb_error *err)
{
	static const char block[PROBE_BYTES];
	char dir[PATH_MAX];
	char temp[PATH_MAX];
	struct stat st;
	int fd = -1;
	int rc;
	int sys;

	if (!path)
		return mb_error_set(err, MB_EINVAL, "", "no path to write");
	if (strcmp(path, STDOUT_PATH) == 0)
		return 0;
	rc = temp_names(dir, temp, path, err);
	if (rc)
		goto cleanup;
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode)) {
			rc = mb_error_set(err, MB_EINVAL, path, "is a directory, expected a file path");
			goto cleanup;
		}
		if (flags & MB_ATOMIC_NO_REPLACE) {
			rc = mb_error_set(err, MB_EIO, path, "already exists (not replaced)");
			goto cleanup;
		}
	}
	if (stat(dir, &st) != 0) {
		rc = mb_error_set(err, MB_EIO, path, "cannot write: directory %s %s", dir,
			errno == ENOENT ? "does not exist" : strerror(errno));
		goto cleanup;
	}
	if (!S_ISDIR(st.st_mode)) {
		rc = mb_error_set(err, MB_EIO, path, "cannot write: %s is a file, not a directory", dir);
		goto cleanup;
	}
	fd = mkostemp(temp, O_CLOEXEC);
	if (fd < 0) {
		rc = mb_error_set(err, MB_EIO, path, "cannot create a temporary file in %s: %s", dir, strerror(errno));
		goto cleanup;
	}
	sys = write_all(fd, block, sizeof(block));
	if (!sys && fsync(fd) != 0)
		sys = errno;
	if (sys)
		rc = mb_error_set(err, MB_EIO, path, "cannot write a temporary file in %s: %s", dir, strerror(sys));
cleanup:
	if (fd >= 0) {
		close(fd);
		unlink(temp);
	}
	return rc;
}

/* mkdir of one level: 0, or an error naming the level. A level that
 * exists is fine when it is a directory, whatever mkdir said (a read-only
 * or unwritable parent may answer EROFS or EACCES before EEXIST). */
static int make_dir(const char *dir, mb_error *err)
{
	struct stat st;
	int sys;

	if (mkdir(dir, NEW_DIR_MODE) == 0)
		return 0;
	sys = errno;
	if (stat(dir, &st) == 0)
		return S_ISDIR(st.st_mode) ? 0 : mb_error_set(err, MB_EIO, dir, "is a file, not a directory");
	return mb_error_set(err, MB_EIO, dir, "cannot create directory: %s", strerror(sys));
}

int mb_make_dirs(const char *dir, mb_error *err)
{
	char buf[PATH_MAX];
	int rc = 0;

	if (!dir || !*dir)
		return mb_error_set(err, MB_EINVAL, "", "no directory named");
	if (snprintf(buf, sizeof(buf), "%s", dir) >= (int)sizeof(buf))
		return mb_error_set(err, MB_EINVAL, dir, "path is too long");
	for (char *p = buf + 1; !rc && *p; p++) {
		if (*p != '/' || p[-1] == '/')
			continue;
		*p = '\0';
		rc = make_dir(buf, err);
		*p = '/';
	}
	return rc ? rc : make_dir(buf, err);
}

int mb_json_write_atomic(const json_t *doc, const char *path, mb_error *err)
{
	return mb_json_write_atomic_ex(doc, path, 0, err);
}

int mb_json_write_atomic_ex(const json_t *doc, const char *path, unsigned flags, mb_error *err)
{
	char *text = NULL;
	size_t len;
	int rc = 0;

	if (!doc) {
		rc = mb_error_set(err, MB_EINVAL, path ? path : "", "no JSON document to write");
		goto cleanup;
	}
	len = json_dumpb(doc, NULL, 0, JSON_WRITE_FLAGS);
	if (len == 0) {
		rc = mb_error_set(err, MB_EINVAL, path ? path : "",
			"cannot serialize the document (not an object or array, or a NaN/Inf real)");
		goto cleanup;
	}
	text = malloc(len + 1);
	if (!text) {
		rc = mb_error_set(err, MB_ENOMEM, path ? path : "", "out of memory serializing JSON");
		goto cleanup;
	}
	if (json_dumpb(doc, text, len, JSON_WRITE_FLAGS) != len) {
		rc = mb_error_set(err, MB_EINVAL, path ? path : "", "document changed while being serialized");
		goto cleanup;
	}
	text[len++] = '\n';
	if (flags & MB_ATOMIC_GZIP) {
		char *packed = NULL;
		rc = mb_gzip_encode(&packed, &len, text, len, path ? path : "", err);
		free(text);
		text = packed;
		if (rc)
			goto cleanup;
	}
	rc = mb_atomic_write_ex(path, text, len, flags & ~MB_ATOMIC_GZIP, err);

cleanup:
	free(text);
	return rc;
}
