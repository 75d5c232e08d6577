/* mb_atomic_write: a path holds the old bytes or the new bytes, never a
 * mixture, and no temporary file outlives a failure. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "receipts/atomic_write.h"
#include "testutil.h"

#define PATH_BYTES 4096
/* Short enough that every path built from it fits in PATH_BYTES. */
#define ROOT_BYTES 256
#define DIR_BYTES 1024
#define FILE_MAX_BYTES 65536
/* Small enough that the big write below crosses it part way. */
#define FSIZE_LIMIT_BYTES 100
#define BIG_WRITE_BYTES 8192
#define TEMP_PREFIX ".r.json."
#define NFTW_FDS 16

static char root[ROOT_BYTES];

/* Bytes of `path` into `buf` (NUL-terminated); -1 when it cannot be read. */
static long slurp(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "rb");
	size_t n;

	if (!f)
		return -1;
	n = fread(buf, 1, cap - 1, f);
	buf[n] = '\0';
	fclose(f);
	return (long)n;
}

static void spit(const char *path, const char *text)
{
	FILE *f = fopen(path, "wb");

	CHECK_MSG(f != NULL, "cannot create %s: %s", path, strerror(errno));
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

/* Entries of `dir` whose names start with `prefix`. */
static int count_prefixed(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
			n++;
	closedir(d);
	return n;
}

static int count_entries(const char *dir)
{
	return count_prefixed(dir, "") - 2; /* "." and ".." */
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	chmod(path, S_IRWXU); /* undo the read-only directory test */
	return remove(path);
}

static void test_new_and_replace(void)
{
	char path[PATH_BYTES];
	char buf[FILE_MAX_BYTES];
	struct stat before;
	struct stat after;
	mb_error err;
	int rc;

	snprintf(path, sizeof(path), "%s/r.json", root);
	rc = mb_atomic_write(path, "first\n", strlen("first\n"), &err);
	CHECK_MSG(rc == 0, "%s: %s", err.where, err.text);
	CHECK(slurp(path, buf, sizeof(buf)) == (long)strlen("first\n"));
	CHECK(strcmp(buf, "first\n") == 0);
	CHECK(stat(path, &before) == 0);
	CHECK_MSG((before.st_mode & 0777) == 0644, "new file mode %o", before.st_mode & 0777);
	CHECK(count_prefixed(root, TEMP_PREFIX) == 0);

	/* Replacing goes through a new inode (write beside, rename over), and
	 * the old file's permissions survive. */
	CHECK(chmod(path, 0600) == 0);
	CHECK(stat(path, &before) == 0);
	rc = mb_atomic_write(path, "second content\n", strlen("second content\n"), &err);
	CHECK_MSG(rc == 0, "%s: %s", err.where, err.text);
	CHECK(slurp(path, buf, sizeof(buf)) >= 0 && strcmp(buf, "second content\n") == 0);
	CHECK(stat(path, &after) == 0);
	CHECK(after.st_ino != before.st_ino);
	CHECK_MSG((after.st_mode & 0777) == 0600, "replaced file mode %o", after.st_mode & 0777);
	CHECK(count_prefixed(root, TEMP_PREFIX) == 0);

	/* An empty file is a legitimate write. */
	snprintf(path, sizeof(path), "%s/empty", root);
	CHECK(mb_atomic_write(path, NULL, 0, &err) == 0);
	CHECK(slurp(path, buf, sizeof(buf)) == 0);
	CHECK(remove(path) == 0);
}

static void test_missing_directory(void)
{
	char path[PATH_BYTES];
	char dir[DIR_BYTES];
	mb_error err;
	int before = count_entries(root);
	int rc;

	snprintf(dir, sizeof(dir), "%s/missing", root);
	snprintf(path, sizeof(path), "%s/r.json", dir);
	mb_error_clear(&err);
	rc = mb_atomic_write(path, "x", 1, &err);
	CHECK(rc == MB_EIO);
	CHECK_MSG(strcmp(err.where, path) == 0, "where: %s", err.where);
	CHECK_MSG(strstr(err.text, strerror(ENOENT)) != NULL, "text: %s", err.text);
	CHECK(access(dir, F_OK) != 0);
	CHECK(count_entries(root) == before);

	/* A path naming a directory is refused before anything is created. */
	snprintf(path, sizeof(path), "%s/", root);
	CHECK(mb_atomic_write(path, "x", 1, &err) == MB_EINVAL);
	CHECK(count_entries(root) == before);
}

/* The child hits RLIMIT_FSIZE part way through its write: with SIGXFSZ
 * ignored, write(2) says EFBIG, as it would say ENOSPC on a full disk. */
static void test_write_fails_midway(void)
{
	char path[PATH_BYTES];
	char buf[FILE_MAX_BYTES];
	pid_t pid;
	int status = 0;

	snprintf(path, sizeof(path), "%s/r.json", root);
	CHECK(slurp(path, buf, sizeof(buf)) >= 0 && strcmp(buf, "second content\n") == 0);
	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		static char big[BIG_WRITE_BYTES];
		struct rlimit lim = { FSIZE_LIMIT_BYTES, FSIZE_LIMIT_BYTES };
		mb_error err;
		int rc;

		memset(big, 'x', sizeof(big));
		signal(SIGXFSZ, SIG_IGN);
		if (setrlimit(RLIMIT_FSIZE, &lim) != 0)
			_exit(2);
		mb_error_clear(&err);
		rc = mb_atomic_write(path, big, sizeof(big), &err);
		if (rc != MB_EIO || strcmp(err.where, path) != 0
		    || strstr(err.text, "write failed") == NULL
		    || strstr(err.text, strerror(EFBIG)) == NULL) {
			fprintf(stderr, "child: rc %d: %s: %s\n", rc, err.where, err.text);
			_exit(1);
		}
		_exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
	CHECK(slurp(path, buf, sizeof(buf)) >= 0);
	CHECK_MSG(strcmp(buf, "second content\n") == 0, "target now holds %.40s", buf);
	CHECK(count_prefixed(root, TEMP_PREFIX) == 0);
}

static void test_unwritable_parent(void)
{
	char dir[DIR_BYTES];
	char path[PATH_BYTES];
	char buf[FILE_MAX_BYTES];
	mb_error err;

	/* root ignores directory permissions, so only a real user can see
	 * EACCES; the regular-file parent below fails for everyone. */
	if (geteuid() != 0) {
		snprintf(dir, sizeof(dir), "%s/readonly", root);
		CHECK(mkdir(dir, 0700) == 0);
		CHECK(chmod(dir, 0500) == 0);
		snprintf(path, sizeof(path), "%s/r.json", dir);
		CHECK(mb_atomic_write(path, "x", 1, &err) == MB_EIO);
		CHECK_MSG(strcmp(err.where, path) == 0 && strstr(err.text, strerror(EACCES)),
			"%s: %s", err.where, err.text);
		CHECK(count_entries(dir) == 0);
	} else {
		printf("running as root: directory permission check skipped\n");
	}

	snprintf(dir, sizeof(dir), "%s/plain", root);
	spit(dir, "plain\n");
	snprintf(path, sizeof(path), "%s/r.json", dir);
	CHECK(mb_atomic_write(path, "x", 1, &err) == MB_EIO);
	CHECK_MSG(strcmp(err.where, path) == 0 && strstr(err.text, strerror(ENOTDIR)),
		"%s: %s", err.where, err.text);
	CHECK(slurp(dir, buf, sizeof(buf)) >= 0 && strcmp(buf, "plain\n") == 0);
}

static void test_stdout(void)
{
	char path[PATH_BYTES];
	char buf[FILE_MAX_BYTES];
	pid_t pid;
	int status = 0;

	snprintf(path, sizeof(path), "%s/stdout.txt", root);
	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0)
			_exit(2);
		_exit(mb_atomic_write("-", "to stdout\n", strlen("to stdout\n"), NULL) == 0 ? 0 : 1);
	}
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(slurp(path, buf, sizeof(buf)) >= 0 && strcmp(buf, "to stdout\n") == 0);
}

static void test_json_layout(void)
{
	static const char expected[] =
		"{\n \"b\": 1,\n \"a\": [\n  0.10000000000000001,\n  true\n ]\n}\n";
	char path[PATH_BYTES];
	char buf[FILE_MAX_BYTES];
	json_t *doc = json_pack("{s:i, s:[f, b]}", "b", 1, "a", 0.1, 1);
	mb_error err;
	int rc;

	snprintf(path, sizeof(path), "%s/doc.json", root);
	CHECK(doc != NULL);
	rc = mb_json_write_atomic(doc, path, &err);
	CHECK_MSG(rc == 0, "%s: %s", err.where, err.text);
	CHECK(slurp(path, buf, sizeof(buf)) >= 0);
	CHECK_MSG(strcmp(buf, expected) == 0, "got:\n%s", buf);
	CHECK(mb_json_write_atomic(NULL, path, &err) == MB_EINVAL);
	json_decref(doc);
}


/* Never replace: an existing file is refused and left as it was, whether
 * it was there before the write began or appeared while it ran. */
static void test_no_replace(void)
{
	char path[PATH_BYTES];
	char buf[FILE_MAX_BYTES];
	mb_error err;

	snprintf(path, sizeof(path), "%s/keep.json", root);
	spit(path, "old\n");
	CHECK(mb_atomic_write_ex(path, "new\n", 4, MB_ATOMIC_NO_REPLACE, &err) == MB_EIO);
	CHECK_MSG(strcmp(err.where, path) == 0 && strstr(err.text, "already exists"), "%s: %s", err.where, err.text);
	CHECK(slurp(path, buf, sizeof(buf)) >= 0 && strcmp(buf, "old\n") == 0);
	CHECK(count_prefixed(root, ".keep.json.") == 0);
	CHECK(mb_atomic_write_probe(path, MB_ATOMIC_NO_REPLACE, &err) == MB_EIO);
	CHECK(mb_atomic_write_probe(path, 0, &err) == 0);
	CHECK(remove(path) == 0);
	CHECK(mb_atomic_write_ex(path, "new\n", 4, MB_ATOMIC_NO_REPLACE, &err) == 0);
	CHECK(slurp(path, buf, sizeof(buf)) >= 0 && strcmp(buf, "new\n") == 0);
	CHECK(remove(path) == 0);
}

/* The probe: the real temporary is made and removed, the path untouched. */
static void test_probe(void)
{
	enum { at_limit = 255, over_limit = 256 };
	char path[PATH_BYTES], name[over_limit + 1];
	char buf[FILE_MAX_BYTES];
	mb_error err;
	int before = count_entries(root);

	snprintf(path, sizeof(path), "%s/probe.json", root);
	CHECK_MSG(mb_atomic_write_probe(path, MB_ATOMIC_NO_REPLACE, &err) == 0, "%s: %s", err.where, err.text);
	CHECK(count_entries(root) == before);
	CHECK(access(path, F_OK) != 0);
	CHECK(mb_atomic_write_probe("-", 0, &err) == 0);
	snprintf(path, sizeof(path), "%s/no/such/dir/r.json", root);
	CHECK(mb_atomic_write_probe(path, 0, &err) == MB_EIO);
	CHECK_MSG(strstr(err.text, "does not exist"), "%s", err.text);
	snprintf(path, sizeof(path), "%s", root);
	CHECK(mb_atomic_write_probe(path, 0, &err) == MB_EINVAL);

	/* A name at the file system's limit: the temporary (".NAME.XXXXXX")
	 * would be 8 longer, so it is cut short, and the write succeeds. */
	memset(name, 'a', at_limit);
	name[at_limit] = '\0';
	snprintf(path, sizeof(path), "%s/%s", root, name);
	CHECK_MSG(mb_atomic_write_probe(path, 0, &err) == 0, "%s", err.text);
	CHECK_MSG(mb_atomic_write(path, "long\n", 5, &err) == 0, "%s", err.text);
	CHECK(slurp(path, buf, sizeof(buf)) >= 0 && strcmp(buf, "long\n") == 0);
	CHECK(remove(path) == 0);
	CHECK(count_entries(root) == before);
	/* one more is not a file name at all: said before anything is written */
	memset(name, 'a', over_limit);
	name[over_limit] = '\0';
	snprintf(path, sizeof(path), "%s/%s", root, name);
	CHECK(mb_atomic_write_probe(path, 0, &err) == MB_EINVAL);
	CHECK_MSG(strstr(err.text, "longer than the 255"), "%s", err.text);
}

/* A full disk (here: the file size limit) fails the probe, so that a run
 * never starts whose receipt cannot be written. */
static void test_probe_full(void)
{
	enum { probe_limit_bytes = 1024 };
	char path[PATH_BYTES];
	pid_t pid;
	int status = 0;

	snprintf(path, sizeof(path), "%s/full.json", root);
	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct rlimit lim = {probe_limit_bytes, probe_limit_bytes};
		mb_error err;

		signal(SIGXFSZ, SIG_IGN);
		if (setrlimit(RLIMIT_FSIZE, &lim) != 0)
			_exit(2);
		_exit(mb_atomic_write_probe(path, 0, &err) == MB_EIO && strstr(err.text, "File too large") ? 0 : 1);
	}
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
	CHECK(count_prefixed(root, ".full.json.") == 0);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(root, sizeof(root), "%s/mb-atomic-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	test_new_and_replace();
	test_missing_directory();
	test_write_fails_midway();
	test_unwritable_parent();
	test_stdout();
	test_json_layout();
	test_no_replace();
	test_probe();
	test_probe_full();
	nftw(root, remove_one, NFTW_FDS, FTW_DEPTH | FTW_PHYS);
	return mb_test_finish("test_atomic_write");
}
