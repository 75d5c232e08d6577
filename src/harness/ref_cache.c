/* The reference worker's cache; see ref_cache.h. */
#include "harness/ref_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness/clock.h"
#include "harness/rng.h"

#define MAGIC "megabench reference cache 1\n"
/* How often a driver waiting for the worker looks for its file. */
#define POLL_MS 20
#define NAME_BYTES 64

static char cache_dir[PATH_MAX];
static int cache_alive_fd = -1;

bool mb_ref_worker_wants(const mb_case_plan *c)
{
	const char *env = getenv("MEGABENCH_REF_WORKER");

	if (env && strcmp(env, "0") == 0)
		return false;
	if (env && strcmp(env, "all") == 0)
		return true;
	return (double)c->row->flops(c->axis) >= MB_REF_WORKER_MIN_FLOPS;
}

bool mb_ref_worker_wants_any(const mb_plan *plan, size_t begin, size_t end)
{
	for (size_t i = begin; i < end; i++)
		if (mb_ref_worker_wants(&plan->cases[i]))
			return true;
	return false;
}

bool mb_ref_worker_enabled(bool overlap)
{
	const char *env = getenv("MEGABENCH_REF_WORKER");

	if (env && *env)
		return strcmp(env, "0") != 0;
	return overlap;
}

void mb_ref_cache_attach(const char *dir, int alive_fd)
{
	if (!dir) {
		cache_dir[0] = '\0';
		cache_alive_fd = -1;
		return;
	}
	snprintf(cache_dir, sizeof(cache_dir), "%s", dir);
	cache_alive_fd = alive_fd;
}

bool mb_ref_cache_attached(void)
{
	return cache_dir[0] != '\0';
}

/* The file of a key: a hash of it (the key itself is checked inside). */
static void file_name(char *buf, size_t len, const char *dir, const char *key, const char *suffix)
{
	snprintf(buf, len, "%s/%016llx%s", dir, (unsigned long long)mb_case_seed(0, key), suffix);
}

static bool put(FILE *f, const void *p, size_t bytes)
{
	return bytes == 0 || fwrite(p, 1, bytes, f) == bytes;
}

static bool get(FILE *f, void *p, size_t bytes)
{
	return bytes == 0 || fread(p, 1, bytes, f) == bytes;
}

static int64_t row_of(const int64_t *rows, int64_t k)
{
	return rows ? rows[k] : k;
}

int mb_ref_cache_claim(const char *dir, const char *key)
{
	char path[PATH_MAX + 2 * NAME_BYTES];
	int fd;

	if (!dir && !mb_ref_cache_attached())
		return 0;
	file_name(path, sizeof(path), dir ? dir : cache_dir, key, ".claim");
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return 0;
	/* who claimed it: a waiter stops waiting once that process is gone */
	dprintf(fd, "%ld\n", (long)getpid());
	close(fd);
	return 1;
}

/* Whether the process that claimed the key's group is gone (a row child
 * that crashed on it: a later child computes it instead). A claim not yet
 * written counts as live. */
static bool claimer_gone(const char *key)
{
	char path[PATH_MAX + 2 * NAME_BYTES];
	long pid = 0;
	FILE *f;

	file_name(path, sizeof(path), cache_dir, key, ".claim");
	if (!(f = fopen(path, "r")))
		return false;
	if (fscanf(f, "%ld", &pid) != 1)
		pid = 0;
	fclose(f);
	return pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

int mb_ref_cache_store(const char *dir, const mb_ref_result *r, bool ok, mb_error *err)
{
	char path[PATH_MAX + NAME_BYTES], tmp[PATH_MAX + 2 * NAME_BYTES];
	uint64_t key_len = strlen(r->key);
	FILE *f = NULL;
	bool good;

	if (!dir && !mb_ref_cache_attached())
		return 0;
	dir = dir ? dir : cache_dir;
	file_name(path, sizeof(path), dir, r->key, ok ? "" : ".failed");
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "wb");
	if (!f)
		return mb_error_set(err, MB_EIO, tmp, "cannot write: %s", strerror(errno));
	good = put(f, MAGIC, strlen(MAGIC)) && put(f, &key_len, sizeof(key_len)) && put(f, r->key, key_len);
	for (int i = r->n_inputs; ok && good && i < r->n_tensors; i++) {
		const int64_t w = r->spec[i].row_elems;
		good = put(f, &r->out_n[i], sizeof(int64_t));
		for (int64_t k = 0; good && k < r->out_n[i]; k++) {
			int64_t row = row_of(r->out_rows[i], k);
			good = put(f, &row, sizeof(row)) && put(f, r->want[i] + row * w, (size_t)w * sizeof(float));
		}
	}
	good = fclose(f) == 0 && good;
	if (!good || rename(tmp, path) != 0) {
		unlink(tmp);
		return mb_error_set(err, MB_EIO, path, "cannot write the reference cache file");
	}
	return 0;
}

/* Whether the worker still runs: its pipe has no writer once it is gone. */
static bool worker_alive(void)
{
	struct pollfd p = {cache_alive_fd, POLLIN, 0};

	if (cache_alive_fd < 0)
		return false;
	return poll(&p, 1, 0) == 0;
}

static void *map_floats(int64_t n)
{
	size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(float);
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* The result in an open file: 1 when its key and rows are the group's. */
static int read_result(FILE *f, const mb_ref_result *r, mb_error *err)
{
	char magic[sizeof(MAGIC)] = {0};
	uint64_t key_len = 0;
	char *key = NULL;
	int rc = 1;

	if (!get(f, magic, strlen(MAGIC)) || memcmp(magic, MAGIC, strlen(MAGIC)) || !get(f, &key_len, sizeof(key_len))
		|| key_len != strlen(r->key))
		return 0;
	key = malloc(key_len + 1);
	if (!key)
		return mb_error_set(err, MB_ENOMEM, r->key, "out of memory reading the reference cache");
	if (!get(f, key, key_len) || memcmp(key, r->key, key_len))
		rc = 0;
	free(key);
	for (int i = r->n_inputs; rc == 1 && i < r->n_tensors; i++) {
		const int64_t w = r->spec[i].row_elems;
		int64_t n = -1;
		r->want[i] = map_floats(r->spec[i].rows * w);
		if (!r->want[i])
			return mb_error_set(err, MB_ENOMEM, r->key, "cannot map the reference output %s", r->spec[i].name);
		if (!get(f, &n, sizeof(n)) || n != r->out_n[i])
			rc = 0;
		for (int64_t k = 0; rc == 1 && k < n; k++) {
			int64_t row = -1;
			if (!get(f, &row, sizeof(row)) || row != row_of(r->out_rows[i], k)
				|| !get(f, r->want[i] + row * w, (size_t)w * sizeof(float)))
				rc = 0;
		}
	}
	return rc;
}

int mb_ref_cache_load(const mb_ref_result *r, int64_t *waited_ns, mb_error *err)
{
	char path[PATH_MAX + NAME_BYTES], failed[PATH_MAX + 2 * NAME_BYTES];
	int64_t t0 = mb_now_ns();
	FILE *f = NULL;
	int rc;

	*waited_ns = 0;
	if (!mb_ref_cache_attached())
		return 0;
	file_name(path, sizeof(path), cache_dir, r->key, "");
	file_name(failed, sizeof(failed), cache_dir, r->key, ".failed");
	/* a group nobody has started is the caller's to compute: it does not
	 * wait for the worker to come to it */
	if (!(f = fopen(path, "rb")) && mb_ref_cache_claim(NULL, r->key))
		return 0;
	/* the worker exiting right after its last rename is seen by one more
	 * look for the file */
	for (bool alive = true; !f && !(f = fopen(path, "rb")) && alive; alive = worker_alive()) {
		if (access(failed, F_OK) == 0 || claimer_gone(r->key))
			break;
		poll(NULL, 0, POLL_MS);
	}
	*waited_ns = mb_now_ns() - t0;
	if (!f)
		return 0;
	rc = read_result(f, r, err);
	fclose(f);
	if (rc != 1) {
		/* the caller computes it whole: nothing of the file is kept */
		for (int i = r->n_inputs; i < r->n_tensors; i++) {
			if (r->want[i])
				munmap(r->want[i], (size_t)(r->spec[i].rows * r->spec[i].row_elems > 0
					? r->spec[i].rows * r->spec[i].row_elems : 1) * sizeof(float));
			r->want[i] = NULL;
		}
	}
	return rc;
}
