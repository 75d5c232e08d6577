/* mb_receipt_load / mb_receipt_save: corrupt files and schema breaks are
 * reported with their place, invalid receipts are never written, and a valid
 * receipt survives load + save byte for byte. */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "harness/hostinfo.h"
#include "mb_config.h"
#include "receipts/atomic_write.h"
#include "receipts/provenance.h"
#include "receipts/read_file.h"
#include "receipts/receipt_io.h"
#include "testutil.h"

#define PATH_BYTES 4096
/* Short enough that every path built from it fits in PATH_BYTES. */
#define ROOT_BYTES 256
#define FILE_MAX_BYTES (1 << 20)
#define NFTW_FDS 16
#define SUITE_TEXT "name = \"smoke\"\n"

static char root[ROOT_BYTES];

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static const char *in_root(char *buf, const char *name)
{
	snprintf(buf, PATH_BYTES, "%s/%s", root, name);
	return buf;
}

/* The whole file in a static buffer; length in *out_len, -1 when unreadable. */
static const char *slurp(const char *path, long *out_len)
{
	static char buf[FILE_MAX_BYTES];
	FILE *f = fopen(path, "rb");
	size_t n;

	*out_len = -1;
	if (!f)
		return "";
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	*out_len = (long)n;
	return buf;
}

static void spit(const char *path, const char *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	CHECK_MSG(f != NULL, "cannot create %s: %s", path, strerror(errno));
	if (f) {
		fwrite(data, 1, len, f);
		fclose(f);
	}
}

/* A receipt with zero cases, every required member present; provenance and
 * host come from the real collectors, so their shape is checked against the
 * schema here too. */
static json_t *minimal_receipt(const mb_build_provenance *build, const char *checkout_dir)
{
	char suite_blob[MB_OID_HEX_LEN + 1];
	json_t *prov = NULL;
	json_t *checkout = NULL;
	json_t *host = NULL;
	mb_error err;
	int rc;

	/* a build's, and the checkout at checkout_dir (NULL: none) compared with it */
	rc = mb_provenance_binary(&prov, build, "/proc/self/exe", &err);
	CHECK_MSG(rc == 0, "%s: %s", err.where, err.text);
	if (checkout_dir) {
		rc = mb_provenance_checkout(&checkout, build, checkout_dir, "src/kernels/rows.def", &err);
		CHECK_MSG(rc == 0 && checkout, "%s: %s", err.where, err.text);
	}
	if (prov && checkout)
		json_object_set_new(prov, "checkout", checkout);
	else
		json_decref(checkout);
	rc = mb_host_identity(&host, &err);
	CHECK_MSG(rc == 0, "%s: %s", err.where, err.text);
	CHECK(mb_blob_id(suite_blob, SUITE_TEXT, strlen(SUITE_TEXT)) == 0);
	if (!prov || !host) {
		json_decref(prov);
		json_decref(host);
		return NULL;
	}
	return json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:s, s:{s:s, s:s}, s:[s, s, s],"
		" s:o, s:{s:s, s:s, s:s, s:s, s:{s:b, s:b, s:b}, s:[]}, s:o, s:{s:s, s:s},"
		" s:{s:s, s:s, s:s},"
		" s:{s:s, s:i, s:[s], s:f, s:i, s:f, s:f, s:i, s:i, s:[], s:[]},"
		" s:{s:n, s:n},"
		" s:{s:i, s:i, s:f, s:{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i}},"
		" s:{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i}, s:[]}",
		"kind", "megabench.receipt",
		"schema_version", MB_RECEIPT_SCHEMA_VERSION,
		"run_id", "0123456789abcdef0123456789abcdef",
		"status", "complete",
		"started_at", "2024-01-02T03:04:05Z",
		"finished_at", "2024-01-02T03:04:06.5Z",
		"backend", "cpu",
		"tool", "name", "megabench", "version", MB_VERSION,
		"command", "megabench", "run", "suites/smoke.toml",
		"provenance", prov,
		"build", "version", MB_VERSION, "c_compiler", MB_C_COMPILER, "c_args", MB_C_ARGS,
		"buildtype", MB_BUILDTYPE, "features", "cuda", 0, "cupti", 0, "nccl", 0, "cuda_archs",
		"host", host,
		"device", "backend", "cpu", "name", "host CPU",
		"suite", "path", "suites/smoke.toml", "name", "smoke", "blob_id", suite_blob,
		"settings", "backend_requested", "cpu", "seed", 42, "modes", "hot", "max_noise", 0.005,
		"min_samples", 5, "min_time_s", 0.25, "timeout_s", 60.0, "warmup", 2,
		"max_check_rows", 1024, "rows", "dtypes",
		"ceilings", "copy_gbps", "gemm_tflops",
		"goodput", "wall_ns", 1000, "goodput_ns", 250, "goodput_fraction", 0.25, "badput_ns",
		"context_load", 100, "ceilings", 100, "input_generation", 100, "reference", 100,
		"correctness", 100, "warmup", 100, "l2_flush", 100, "idle_host", 50,
		"summary", "cases", 0, "ok", 0, "failed", 0, "skipped", 0, "crashed", 0, "timeout", 0,
		"oom", 0, "converged", 0, "findings", 0,
		"cases");
}

static void test_round_trip(const json_t *receipt, const char *name)
{
	char a[PATH_BYTES];
	char b[PATH_BYTES + sizeof(".again")];
	char first[FILE_MAX_BYTES];
	const char *text;
	json_t *loaded = NULL;
	long len_a;
	long len_b;
	mb_error err;
	int rc;

	in_root(a, name);
	rc = mb_receipt_save(receipt, a, &err);
	CHECK_MSG(rc == 0, "%s: %s", err.where, err.text);
	text = slurp(a, &len_a);
	CHECK(len_a > 0);
	memcpy(first, text, (size_t)len_a + 1);
	rc = mb_receipt_load(&loaded, a, &err);
	CHECK_MSG(rc == 0 && loaded, "%s: %s", err.where, err.text);
	CHECK(json_equal(loaded, receipt));
	snprintf(b, sizeof(b), "%s.again", a);
	rc = mb_receipt_save(loaded, b, &err);
	CHECK_MSG(rc == 0, "%s: %s", err.where, err.text);
	text = slurp(b, &len_b);
	CHECK_MSG(len_a == len_b && memcmp(first, text, (size_t)len_a) == 0,
		"%s and %s differ", a, b);
	json_decref(loaded);
}

static void test_truncated(void)
{
	char full[PATH_BYTES];
	char cut[PATH_BYTES];
	char empty[PATH_BYTES];
	char prefix[PATH_BYTES + 1];
	const char *text;
	json_t *loaded = (json_t *)1;
	long len;
	int line = 0;
	int column = 0;
	mb_error err;

	text = slurp(in_root(full, "valid.json"), &len);
	CHECK(len > 0);
	spit(in_root(cut, "truncated.json"), text, (size_t)len / 2);
	CHECK(mb_receipt_load(&loaded, cut, &err) == MB_EINVAL);
	CHECK(loaded == NULL);
	snprintf(prefix, sizeof(prefix), "%s:", cut);
	CHECK_MSG(strncmp(err.where, prefix, strlen(prefix)) == 0
		&& sscanf(err.where + strlen(prefix), "%d:%d", &line, &column) == 2
		&& line > 1 && column >= 0, "where: %s", err.where);
	CHECK_MSG(strncmp(err.text, "not valid JSON: ", strlen("not valid JSON: ")) == 0,
		"text: %s", err.text);

	spit(in_root(empty, "empty.json"), "", 0);
	CHECK(mb_receipt_load(&loaded, empty, &err) == MB_EINVAL);
	CHECK_MSG(strstr(err.where, empty) == err.where && strstr(err.text, "not valid JSON"),
		"%s: %s", err.where, err.text);

	CHECK(mb_receipt_load(&loaded, in_root(full, "does-not-exist.json"), &err) == MB_ENOTFOUND);
	CHECK_MSG(strcmp(err.where, full) == 0, "where: %s", err.where);
}

/* The host object's members map to what the system says; the schema check
 * of its shape happens in the round trip. */
static void test_host(void)
{
	struct utsname uts;
	json_t *host = NULL;
	mb_error err;
	int rc = mb_host_identity(&host, &err);

	CHECK_MSG(rc == 0 && host, "%s: %s", err.where, err.text);
	CHECK(uname(&uts) == 0);
	CHECK(mb_host_memory_bytes() > 0);
	CHECK(json_integer_value(json_object_get(host, "memory_bytes"))
		== (json_int_t)mb_host_memory_bytes());
	CHECK(json_integer_value(json_object_get(host, "cpu_count")) >= 1);
	CHECK(strcmp(json_string_value(json_object_get(host, "arch")), uts.machine) == 0);
	CHECK(strcmp(json_string_value(json_object_get(host, "kernel")), uts.release) == 0);
	CHECK(json_string_length(json_object_get(host, "os")) > 0);
	CHECK(json_string_length(json_object_get(host, "cpu_model")) > 0);
	printf("host: %s, %s, %s\n", json_string_value(json_object_get(host, "os")),
		json_string_value(json_object_get(host, "cpu_model")),
		json_string_value(json_object_get(host, "hostname")));
	json_decref(host);
}

/* Write `doc` bypassing validation, load it back, expect MB_ESCHEMA. */
static void expect_load_rejects(const json_t *doc, const char *name, mb_error *err)
{
	char path[PATH_BYTES];
	json_t *loaded = (json_t *)1;
	mb_error werr;

	in_root(path, name);
	CHECK_MSG(mb_json_write_atomic(doc, path, &werr) == 0, "%s: %s", werr.where, werr.text);
	CHECK(mb_receipt_load(&loaded, path, err) == MB_ESCHEMA);
	CHECK(loaded == NULL);
}

static void test_schema_breaks(const json_t *receipt)
{
	char expect[PATH_BYTES + 64];
	json_t *doc = json_deep_copy(receipt);
	json_t *other = json_pack("{s:s, s:s}", "kind", "megabench.suite", "name", "smoke");
	json_t *array = json_pack("[i]", 1);
	mb_error err;

	json_object_set_new(json_object_get(doc, "settings"), "seed", json_integer(-1));
	expect_load_rejects(doc, "seed.json", &err);
	snprintf(expect, sizeof(expect), "%s/seed.json: /settings/seed", root);
	CHECK_MSG(strcmp(err.where, expect) == 0, "where: %s", err.where);
	CHECK_MSG(strncmp(err.text, "minimum: ", strlen("minimum: ")) == 0
		&& !strstr(err.text, "more)"), "text: %s", err.text);

	json_object_set_new(doc, "run_id", json_string("not-a-run-id"));
	expect_load_rejects(doc, "two.json", &err);
	CHECK_MSG(strstr(err.where, "/settings/seed") || strstr(err.where, "/run_id"),
		"where: %s", err.where);
	CHECK_MSG(strstr(err.text, " (and 1 more)"), "text: %s", err.text);

	expect_load_rejects(other, "suite.json", &err);
	CHECK_MSG(strstr(err.where, "/kind") && strstr(err.text, "not a megabench receipt")
		&& strstr(err.text, "megabench.suite"), "%s: %s", err.where, err.text);
	expect_load_rejects(array, "array.json", &err);
	CHECK_MSG(strstr(err.text, "not a megabench receipt"), "%s: %s", err.where, err.text);

	json_decref(array);
	json_decref(other);
	json_decref(doc);
}

static void test_save_refuses_invalid(const json_t *receipt)
{
	char fresh[PATH_BYTES];
	char existing[PATH_BYTES];
	char before[FILE_MAX_BYTES];
	const char *text;
	json_t *doc = json_deep_copy(receipt);
	long len_before;
	long len_after;
	mb_error err;

	json_object_set_new(doc, "run_id", json_string("XYZ"));
	CHECK(mb_receipt_save(doc, in_root(fresh, "never.json"), &err) == MB_ESCHEMA);
	CHECK_MSG(strstr(err.where, "/run_id") && strstr(err.where, fresh) == err.where,
		"where: %s", err.where);
	CHECK(access(fresh, F_OK) != 0);

	text = slurp(in_root(existing, "valid.json"), &len_before);
	CHECK(len_before > 0);
	memcpy(before, text, (size_t)len_before + 1);
	CHECK(mb_receipt_save(doc, existing, &err) == MB_ESCHEMA);
	text = slurp(existing, &len_after);
	CHECK(len_after == len_before && memcmp(before, text, (size_t)len_before) == 0);
	json_decref(doc);
}


/* mb_read_file: the one read-whole-file helper, with its cap. */
static void test_read_file(void)
{
	enum { cap = 16 };
	char path[PATH_BYTES], *text = NULL;
	size_t len = 0;
	mb_error err;
	FILE *f;

	in_root(path, "small.txt");
	f = fopen(path, "wb");
	CHECK(f != NULL);
	if (f) {
		fputs("0123456789abcdef", f); /* exactly the cap */
		fclose(f);
	}
	CHECK(mb_read_file(&text, &len, path, cap, "a test file", &err) == 0);
	CHECK(text && len == cap && strcmp(text, "0123456789abcdef") == 0);
	free(text);
	text = NULL;
	CHECK(mb_read_file(&text, &len, path, cap - 1, "a test file", &err) == MB_EIO);
	CHECK_MSG(strcmp(err.where, path) == 0 && strcmp(err.text, "larger than 15 bytes, the limit for a test file; "
		"is this the right file?") == 0, "%s: %s", err.where, err.text);
	CHECK(text == NULL);
	/* a device has no size to trust: refused unread, as is a FIFO, whose
	 * open must not wait for a writer */
	CHECK(mb_read_file(&text, &len, "/dev/zero", cap, "a test file", &err) == MB_EIO);
	CHECK_MSG(strcmp(err.text, "a character device, not a regular file: refused unread") == 0, "%s", err.text);
	CHECK(text == NULL);
	in_root(path, "fifo.json");
	CHECK(mkfifo(path, 0600) == 0);
	CHECK(mb_read_file(&text, &len, path, cap, "a test file", &err) == MB_EIO);
	CHECK_MSG(strcmp(err.text, "a FIFO, not a regular file: refused unread") == 0, "%s", err.text);
	CHECK(text == NULL);
	unlink(path);
	/* a file of size 0 that is not empty (as /proc's are) is read whole */
	CHECK(mb_read_file(&text, &len, "/proc/self/status", 1 << 20, "a test file", &err) == 0);
	CHECK(text && len > 0 && strlen(text) == len);
	free(text);
	text = NULL;
	CHECK(mb_read_file(&text, &len, in_root(path, "none.json"), cap, "a test file", &err) == MB_ENOTFOUND);
	CHECK(strstr(err.text, "No such file") != NULL);
}

/* Never replace unless asked: the receipt already there is untouched. */
static void test_save_no_replace(const json_t *receipt)
{
	char path[PATH_BYTES];
	long before_len = 0, after_len = 0;
	mb_error err;

	in_root(path, "keep.json");
	CHECK(mb_receipt_save_ex(receipt, path, MB_ATOMIC_NO_REPLACE, &err) == 0);
	CHECK(slurp(path, &before_len) != NULL);
	CHECK(mb_receipt_save_ex(receipt, path, MB_ATOMIC_NO_REPLACE, &err) == MB_EIO);
	CHECK_MSG(strstr(err.text, "already exists"), "%s", err.text);
	CHECK(slurp(path, &after_len) != NULL && after_len == before_len);
	CHECK(mb_receipt_save_ex(receipt, path, 0, &err) == 0);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	const char *src = getenv("MB_SOURCE_ROOT");
	mb_build_provenance tarball = mb_build_embedded;
	json_t *receipt;
	json_t *receipt_no_git;

	snprintf(root, sizeof(root), "%s/mb-rio-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	/* this build's provenance, and its source tree as the checkout */
	receipt = minimal_receipt(&mb_build_embedded, src && *src ? src : MB_SOURCE_ROOT);
	/* The "available": false branch of the provenance schema: a build
	 * from a tarball, run outside any checkout. */
	tarball.commit = NULL;
	tarball.reason = "built outside a git checkout";
	receipt_no_git = minimal_receipt(&tarball, NULL);
	CHECK(receipt && receipt_no_git);
	CHECK(json_is_false(json_object_get(json_object_get(receipt_no_git, "provenance"), "available")));
	test_host();
	if (receipt && receipt_no_git) {
		test_round_trip(receipt, "valid.json");
		test_round_trip(receipt_no_git, "no-git.json");
		test_truncated();
		test_schema_breaks(receipt);
		test_save_refuses_invalid(receipt);
		test_save_no_replace(receipt);
	}
	test_read_file();
	json_decref(receipt);
	json_decref(receipt_no_git);
	nftw(root, remove_one, NFTW_FDS, FTW_DEPTH | FTW_PHYS);
	return mb_test_finish("test_receipt_io");
}
