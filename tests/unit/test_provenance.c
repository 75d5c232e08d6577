/* mb_provenance_collect against a repository this test builds with libgit2:
 * commit, branch, tag, dirty work tree, detached HEAD, and no repository;
 * mb_provenance_binary from a build's embedded provenance (with and
 * without a commit) and an executable; mb_provenance_checkout: found from
 * a subfolder, each kind of change, hidden and unmatched files left out,
 * the checkout's own commit only at the top of its own repository. */
#include <errno.h>
#include <ftw.h>
#include <git2.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "receipts/provenance.h"
#include "testutil.h"

#define PATH_BYTES 4096
/* Short enough that every path built from it fits in PATH_BYTES. */
#define ROOT_BYTES 256
#define REPO_BYTES 512
#define NFTW_FDS 16
#define COMMIT_TIME 1700000000
#define SECOND_COMMIT_TIME 1700000600
#define HELLO_BLOB_ID "ce013625030ba8dba906f756967f9e9ca394464a"
#define EMPTY_BLOB_ID "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
#define SHORT_OID_LEN 7

static char root[ROOT_BYTES];
static char repo_dir[REPO_BYTES];

/* `text` into `dir`/`rel` (the folders must exist). */
static void write_at(const char *dir, const char *rel, const char *text)
{
	char path[PATH_BYTES];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	f = fopen(path, "wb");
	CHECK_MSG(f != NULL, "cannot create %s: %s", path, strerror(errno));
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void spit(const char *rel, const char *text)
{
	write_at(repo_dir, rel, text);
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void hex_of(char out[MB_OID_HEX_LEN + 1], const git_oid *oid)
{
	git_oid_tostr(out, MB_OID_HEX_LEN + 1, oid);
}

/* Stage `rel` and commit the index on HEAD with a fixed signature. */
static void commit_file(git_oid *out, git_repository *repo, const char *rel, git_time_t when)
{
	git_signature *sig = NULL;
	git_index *index = NULL;
	git_tree *tree = NULL;
	git_commit *parent = NULL;
	git_oid tree_id;
	git_oid parent_id;
	int have_parent = git_reference_name_to_id(&parent_id, repo, "HEAD") == 0;

	CHECK(git_signature_new(&sig, "Megabench Test", "test@megabench.invalid", when, 0) == 0);
	CHECK(git_repository_index(&index, repo) == 0);
	CHECK(git_index_add_bypath(index, rel) == 0);
	CHECK(git_index_write(index) == 0);
	CHECK(git_index_write_tree(&tree_id, index) == 0);
	CHECK(git_tree_lookup(&tree, repo, &tree_id) == 0);
	if (have_parent)
		CHECK(git_commit_lookup(&parent, repo, &parent_id) == 0);
	CHECK(git_commit_create_v(out, repo, "HEAD", sig, sig, NULL, "test commit", tree,
		have_parent ? 1 : 0, parent) == 0);
	git_commit_free(parent);
	git_tree_free(tree);
	git_index_free(index);
	git_signature_free(sig);
}

static json_t *collect(const char *dir)
{
	json_t *prov = NULL;
	mb_error err;
	int rc;

	mb_error_clear(&err);
	rc = mb_provenance_collect(&prov, dir, &err);
	CHECK_MSG(rc == 0 && prov, "%s: %s", err.where, err.text);
	return prov;
}

static const char *str(const json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));

	return s ? s : "(not a string)";
}

static int flag(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);

	return json_is_boolean(v) ? json_is_true(v) : -1;
}

static const json_t *source(const json_t *prov, size_t i)
{
	return json_array_get(json_object_get(prov, "sources"), i);
}

static void mkdir_at(const char *dir, const char *rel)
{
	char path[PATH_BYTES];

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	CHECK_MSG(mkdir(path, 0700) == 0, "mkdir %s: %s", path, strerror(errno));
}

static const char *const TOPS[] = { "meson.build", "src/" };
static const char *const PATTERNS[] = { "*.cu", "*.def", "meson.build" };

/* A build's provenance over `sources` with the rule above. */
static mb_build_provenance build_of(const mb_source_id *sources, size_t n, const char *commit)
{
	mb_build_provenance b = {
		.workdir = "/src/megabench", .commit = commit, .commit_time = COMMIT_TIME, .branch = "main",
		.dirty = true, .describe = "v1.0-dirty", .reason = commit ? NULL : "built outside a git checkout",
		.sources = sources, .n_sources = n, .tops = TOPS, .n_tops = 2, .patterns = PATTERNS, .n_patterns = 3,
	};
	return b;
}

static void test_binary(void)
{
	static const mb_source_id sources[] = {
		{ "src/kernels/a.cu", HELLO_BLOB_ID, false },
		{ "src/kernels/rows.def", EMPTY_BLOB_ID, true },
	};
	mb_build_provenance b = build_of(sources, 2, "0123456789abcdef0123456789abcdef01234567");
	char exe[PATH_BYTES], real[PATH_MAX], missing[PATH_BYTES];
	const json_t *x;
	json_t *prov = NULL;
	mb_error err;

	mb_error_clear(&err);
	snprintf(exe, sizeof(exe), "%s/exe", root);
	write_at(root, "exe", "hello\n");
	CHECK_MSG(mb_provenance_binary(&prov, &b, exe, &err) == 0 && prov, "%s: %s", err.where, err.text);
	CHECK(flag(prov, "available") == 1 && strcmp(str(prov, "origin"), "binary") == 0);
	CHECK(strcmp(str(prov, "commit"), b.commit) == 0 && strcmp(str(prov, "describe"), "v1.0-dirty") == 0);
	CHECK(strcmp(str(prov, "workdir"), "/src/megabench") == 0 && flag(prov, "dirty") == 1);
	CHECK(json_integer_value(json_object_get(prov, "commit_time")) == COMMIT_TIME);
	CHECK(json_array_size(json_object_get(prov, "sources")) == 2);
	CHECK(strcmp(str(source(prov, 1), "path"), "src/kernels/rows.def") == 0 && flag(source(prov, 1), "modified") == 1);
	CHECK(strcmp(str(source(prov, 0), "blob_id"), HELLO_BLOB_ID) == 0 && flag(source(prov, 0), "modified") == 0);
	x = json_object_get(prov, "executable");
	CHECK(realpath(exe, real) != NULL);
	CHECK_MSG(strcmp(str(x, "path"), real) == 0, "executable path %s", str(x, "path"));
	CHECK_MSG(strcmp(str(x, "blob_id"), HELLO_BLOB_ID) == 0, "executable blob %s", str(x, "blob_id"));
	CHECK(json_integer_value(json_object_get(x, "bytes")) == 6);
	json_decref(prov);

	/* a tarball build: no commit, no "modified", the ids all the same */
	b = build_of(sources, 2, NULL);
	prov = NULL;
	CHECK(mb_provenance_binary(&prov, &b, exe, &err) == 0 && prov);
	CHECK(flag(prov, "available") == 0 && strcmp(str(prov, "reason"), "built outside a git checkout") == 0);
	CHECK(!json_object_get(prov, "commit") && !json_object_get(source(prov, 0), "modified"));
	CHECK(strcmp(str(source(prov, 0), "blob_id"), HELLO_BLOB_ID) == 0);
	CHECK(strcmp(str(prov, "origin"), "binary") == 0 && json_object_get(prov, "executable"));
	json_decref(prov);

	snprintf(missing, sizeof(missing), "%s/no-such-exe", root);
	prov = NULL;
	CHECK(mb_provenance_binary(&prov, &b, missing, &err) == MB_EIO && prov == NULL);
	CHECK_MSG(strstr(err.where, "no-such-exe") != NULL, "where: %s", err.where);
}

static const json_t *change(const json_t *co, size_t i)
{
	return json_array_get(json_object_get(co, "differing"), i);
}

static json_t *checkout_at(const mb_build_provenance *b, const char *dir)
{
	json_t *co = NULL;
	mb_error err;

	mb_error_clear(&err);
	CHECK_MSG(mb_provenance_checkout(&co, b, dir, "src/kernels/rows.def", &err) == 0, "%s: %s", err.where, err.text);
	return co;
}

static void test_checkout(void)
{
	static const mb_source_id sources[] = {
		{ "meson.build", HELLO_BLOB_ID, false },
		{ "src/kernels/a.cu", HELLO_BLOB_ID, false },
		{ "src/kernels/rows.def", EMPTY_BLOB_ID, false },
	};
	mb_build_provenance b = build_of(sources, 3, NULL);
	char tree[REPO_BYTES], kernels[PATH_BYTES], path[PATH_BYTES], real[PATH_MAX];
	json_t *co;

	snprintf(tree, sizeof(tree), "%s/checkout", root);
	CHECK(mkdir(tree, 0700) == 0);
	mkdir_at(tree, "src");
	mkdir_at(tree, "src/kernels");
	mkdir_at(tree, "src/.hidden");
	write_at(tree, "meson.build", "hello\n");
	write_at(tree, "src/kernels/a.cu", "hello\n");
	write_at(tree, "src/kernels/rows.def", "");
	/* not the rule's: a hidden folder, a name no pattern takes */
	write_at(tree, "src/.hidden/x.cu", "x\n");
	write_at(tree, "src/kernels/notes.txt", "x\n");
	snprintf(kernels, sizeof(kernels), "%s/src/kernels", tree);

	/* from a subfolder, as built, no repository: matches, no commit */
	co = checkout_at(&b, kernels);
	CHECK(co != NULL);
	CHECK(realpath(tree, real) != NULL);
	CHECK_MSG(strcmp(str(co, "workdir"), real) == 0, "workdir %s", str(co, "workdir"));
	CHECK(flag(co, "matches") == 1 && json_array_size(json_object_get(co, "differing")) == 0);
	CHECK(json_is_null(json_object_get(co, "commit")) && json_is_null(json_object_get(co, "describe")));
	json_decref(co);

	/* every kind of change, in strcmp order */
	write_at(tree, "src/kernels/a.cu", "hello, world\n");
	write_at(tree, "src/kernels/b.cu", "new\n");
	snprintf(path, sizeof(path), "%s/meson.build", tree);
	CHECK(unlink(path) == 0);
	co = checkout_at(&b, tree);
	CHECK(flag(co, "matches") == 0 && json_array_size(json_object_get(co, "differing")) == 3);
	CHECK(strcmp(str(change(co, 0), "path"), "meson.build") == 0 && strcmp(str(change(co, 0), "change"), "removed") == 0);
	CHECK(strcmp(str(change(co, 1), "path"), "src/kernels/a.cu") == 0
		&& strcmp(str(change(co, 1), "change"), "modified") == 0);
	CHECK(strcmp(str(change(co, 2), "path"), "src/kernels/b.cu") == 0 && strcmp(str(change(co, 2), "change"), "added") == 0);
	json_decref(co);

	/* a file the run cannot read is said so, not fatal (root reads anything) */
	if (geteuid() != 0) {
		snprintf(path, sizeof(path), "%s/src/kernels/b.cu", tree);
		CHECK(chmod(path, 0) == 0);
		snprintf(path, sizeof(path), "%s/src/kernels/a.cu", tree);
		CHECK(chmod(path, 0) == 0);
		co = checkout_at(&b, tree);
		CHECK(strcmp(str(change(co, 1), "change"), "unreadable") == 0);
		CHECK(strcmp(str(change(co, 2), "change"), "added") == 0);
		CHECK(chmod(path, 0600) == 0);
		json_decref(co);
	}

	/* nowhere near a checkout: nothing to record */
	co = (json_t *)1;
	CHECK(mb_provenance_checkout(&co, &b, root, "src/kernels/rows.def", NULL) == 0 && co == NULL);
}

/* A checkout that is the top of its own repository records its commit;
 * one inside another repository does not take that repository's. */
static void test_checkout_commit(const char *commit_hex)
{
	static const mb_source_id none[] = { { "src/kernels/rows.def", EMPTY_BLOB_ID, false } };
	mb_build_provenance b = build_of(none, 1, NULL);
	char inner[PATH_BYTES];
	json_t *co;

	mkdir_at(repo_dir, "src/kernels");
	write_at(repo_dir, "src/kernels/rows.def", "");
	co = checkout_at(&b, repo_dir);
	CHECK_MSG(strcmp(str(co, "commit"), commit_hex) == 0, "checkout commit %s, want %s", str(co, "commit"), commit_hex);
	json_decref(co);
	snprintf(inner, sizeof(inner), "%s/vendor", repo_dir);
	mkdir_at(repo_dir, "vendor");
	mkdir_at(repo_dir, "vendor/src");
	mkdir_at(repo_dir, "vendor/src/kernels");
	write_at(repo_dir, "vendor/src/kernels/rows.def", "");
	co = checkout_at(&b, inner);
	CHECK(strstr(str(co, "workdir"), "/vendor") != NULL);
	CHECK(json_is_null(json_object_get(co, "commit")));
	json_decref(co);
}

static void test_blob_id(void)
{
	char hex[MB_OID_HEX_LEN + 1];

	/* Constants from `git hash-object`: they tie mb_blob_id, and the
	 * git_odb_hash this test uses below, to git's actual blob ids. */
	CHECK(mb_blob_id(hex, "hello\n", strlen("hello\n")) == 0);
	CHECK_MSG(strcmp(hex, HELLO_BLOB_ID) == 0, "got %s", hex);
	CHECK(mb_blob_id(hex, NULL, 0) == 0);
	CHECK_MSG(strcmp(hex, EMPTY_BLOB_ID) == 0, "got %s", hex);
	CHECK(mb_blob_id(hex, NULL, 1) == MB_EINVAL);
}

static void test_not_a_checkout(void)
{
	char plain[PATH_BYTES];
	json_t *prov;

	snprintf(plain, sizeof(plain), "%s/plain", root);
	CHECK(mkdir(plain, 0700) == 0);
	prov = collect(plain);
	CHECK(flag(prov, "available") == 0);
	CHECK_MSG(strncmp(str(prov, "reason"), "not a git checkout: ", strlen("not a git checkout: ")) == 0
		&& strstr(str(prov, "reason"), plain), "reason: %s", str(prov, "reason"));
	CHECK(json_object_size(prov) == 2);
	json_decref(prov);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	char sub[REPO_BYTES + ROOT_BYTES];
	char real[PATH_MAX];
	char hex1[MB_OID_HEX_LEN + 1];
	char hex2[MB_OID_HEX_LEN + 1];
	char expect_describe[64];
	git_repository *repo = NULL;
	git_object *target = NULL;
	git_reference *branch = NULL;
	git_commit *c1_obj = NULL;
	git_oid c1;
	git_oid c2;
	git_oid tag;
	json_t *prov;

	git_libgit2_init();
	snprintf(root, sizeof(root), "%s/mb-prov-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(repo_dir, sizeof(repo_dir), "%s/repo", root);
	test_blob_id();
	test_not_a_checkout();
	test_binary();
	test_checkout();

	CHECK(git_repository_init(&repo, repo_dir, 0) == 0);
	prov = collect(repo_dir);
	CHECK(flag(prov, "available") == 0);
	CHECK_MSG(strstr(str(prov, "reason"), "repository has no commits"), "reason: %s",
		str(prov, "reason"));
	json_decref(prov);

	snprintf(sub, sizeof(sub), "%s/src", repo_dir);
	CHECK(mkdir(sub, 0700) == 0);
	spit("src/k.c", "hello\n");
	spit("README", "readme\n");
	commit_file(&c1, repo, "src/k.c", COMMIT_TIME);
	commit_file(&c1, repo, "README", COMMIT_TIME);
	hex_of(hex1, &c1);
	/* A branch of our own naming, whatever init.defaultBranch says. */
	CHECK(git_commit_lookup(&c1_obj, repo, &c1) == 0);
	CHECK(git_branch_create(&branch, repo, "feature", c1_obj, 0) == 0);
	CHECK(git_repository_set_head(repo, "refs/heads/feature") == 0);
	CHECK(git_object_lookup(&target, repo, &c1, GIT_OBJECT_COMMIT) == 0);
	CHECK(git_tag_create_lightweight(&tag, repo, "v1.0", target, 0) == 0);

	/* Discovery walks up from a subdirectory. */
	prov = collect(sub);
	CHECK(flag(prov, "available") == 1);
	CHECK(realpath(repo_dir, real) != NULL);
	CHECK_MSG(strcmp(str(prov, "workdir"), real) == 0, "workdir %s", str(prov, "workdir"));
	CHECK_MSG(strcmp(str(prov, "commit"), hex1) == 0, "commit %s, made %s", str(prov, "commit"), hex1);
	CHECK(json_integer_value(json_object_get(prov, "commit_time")) == COMMIT_TIME);
	CHECK_MSG(strcmp(str(prov, "branch"), "feature") == 0, "branch %s", str(prov, "branch"));
	CHECK(flag(prov, "dirty") == 0);
	CHECK_MSG(strcmp(str(prov, "describe"), "v1.0") == 0, "describe %s", str(prov, "describe"));
	CHECK(!json_object_get(prov, "sources"));
	json_decref(prov);

	/* Untracked files do not make a checkout dirty. */
	spit("new.txt", "new\n");
	prov = collect(repo_dir);
	CHECK(flag(prov, "dirty") == 0);
	json_decref(prov);

	spit("src/k.c", "hello, world\n");
	prov = collect(repo_dir);
	CHECK(flag(prov, "dirty") == 1);
	CHECK_MSG(strcmp(str(prov, "describe"), "v1.0-dirty") == 0, "describe %s", str(prov, "describe"));
	json_decref(prov);

	/* Work tree back to HEAD: clean again. */
	spit("src/k.c", "hello\n");
	prov = collect(repo_dir);
	CHECK(flag(prov, "dirty") == 0);
	json_decref(prov);
	test_checkout_commit(hex1);

	/* A second commit: describe counts from the tag. */
	spit("src/k.c", "second\n");
	commit_file(&c2, repo, "src/k.c", SECOND_COMMIT_TIME);
	hex_of(hex2, &c2);
	snprintf(expect_describe, sizeof(expect_describe), "v1.0-1-g%.*s", SHORT_OID_LEN, hex2);
	prov = collect(repo_dir);
	CHECK_MSG(strcmp(str(prov, "describe"), expect_describe) == 0, "describe %s, want %s",
		str(prov, "describe"), expect_describe);
	CHECK(strcmp(str(prov, "branch"), "feature") == 0);
	CHECK(json_integer_value(json_object_get(prov, "commit_time")) == SECOND_COMMIT_TIME);
	json_decref(prov);

	CHECK(git_repository_set_head_detached(repo, &c2) == 0);
	prov = collect(repo_dir);
	CHECK(flag(prov, "available") == 1);
	CHECK(json_is_null(json_object_get(prov, "branch")));
	CHECK(strcmp(str(prov, "commit"), hex2) == 0);
	CHECK(flag(prov, "dirty") == 0);
	json_decref(prov);

	git_object_free(target);
	git_reference_free(branch);
	git_commit_free(c1_obj);
	git_repository_free(repo);
	git_libgit2_shutdown();
	nftw(root, remove_one, NFTW_FDS, FTW_DEPTH | FTW_PHYS);
	return mb_test_finish("test_provenance");
}
