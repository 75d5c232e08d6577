/* mb_provenance_collect against a repository this test builds with libgit2:
 * commit, branch, tag, dirty work tree, detached HEAD, and no repository. */
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

static void spit(const char *rel, const char *text)
{
	char path[PATH_BYTES];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", repo_dir, rel);
	f = fopen(path, "wb");
	CHECK_MSG(f != NULL, "cannot create %s: %s", path, strerror(errno));
	if (f) {
		fputs(text, f);
		fclose(f);
	}
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

static json_t *collect(const char *dir, const char *const *paths, size_t n)
{
	json_t *prov = NULL;
	mb_error err;
	int rc;

	mb_error_clear(&err);
	rc = mb_provenance_collect(&prov, dir, paths, n, &err);
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
	prov = collect(plain, NULL, 0);
	CHECK(flag(prov, "available") == 0);
	CHECK_MSG(strncmp(str(prov, "reason"), "not a git checkout: ", strlen("not a git checkout: ")) == 0
		&& strstr(str(prov, "reason"), plain), "reason: %s", str(prov, "reason"));
	CHECK(json_object_size(prov) == 2);
	json_decref(prov);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	const char *const sources[] = { "src/k.c", "not/there.c" };
	const char *const untracked[] = { "new.txt" };
	const char *const deleted[] = { "README" };
	const char *const absolute[] = { "/etc/hostname" };
	char sub[REPO_BYTES + ROOT_BYTES];
	char real[PATH_MAX];
	char hex1[MB_OID_HEX_LEN + 1];
	char hex2[MB_OID_HEX_LEN + 1];
	char expect_hex[MB_OID_HEX_LEN + 1];
	char expect_describe[64];
	git_repository *repo = NULL;
	git_object *target = NULL;
	git_reference *branch = NULL;
	git_commit *c1_obj = NULL;
	git_oid c1;
	git_oid c2;
	git_oid tag;
	git_oid blob;
	json_t *prov;
	mb_error err;

	git_libgit2_init();
	snprintf(root, sizeof(root), "%s/mb-prov-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(repo_dir, sizeof(repo_dir), "%s/repo", root);
	test_blob_id();
	test_not_a_checkout();

	CHECK(git_repository_init(&repo, repo_dir, 0) == 0);
	prov = collect(repo_dir, NULL, 0);
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
	prov = collect(sub, sources, 2);
	CHECK(flag(prov, "available") == 1);
	CHECK(realpath(repo_dir, real) != NULL);
	CHECK_MSG(strcmp(str(prov, "workdir"), real) == 0, "workdir %s", str(prov, "workdir"));
	CHECK_MSG(strcmp(str(prov, "commit"), hex1) == 0, "commit %s, made %s", str(prov, "commit"), hex1);
	CHECK(json_integer_value(json_object_get(prov, "commit_time")) == COMMIT_TIME);
	CHECK_MSG(strcmp(str(prov, "branch"), "feature") == 0, "branch %s", str(prov, "branch"));
	CHECK(flag(prov, "dirty") == 0);
	CHECK_MSG(strcmp(str(prov, "describe"), "v1.0") == 0, "describe %s", str(prov, "describe"));
	/* not/there.c is in neither the tree nor HEAD: skipped. */
	CHECK(json_array_size(json_object_get(prov, "sources")) == 1);
	CHECK(strcmp(str(source(prov, 0), "path"), "src/k.c") == 0);
	CHECK(strcmp(str(source(prov, 0), "blob_id"), HELLO_BLOB_ID) == 0);
	CHECK(flag(source(prov, 0), "modified") == 0);
	json_decref(prov);

	/* A folder stands for the regular files in it, in name order. */
	spit("src/a.h", "a\n");
	{
		const char *const folder[] = { "src/" };
		prov = collect(repo_dir, folder, 1);
		CHECK(json_array_size(json_object_get(prov, "sources")) == 2);
		CHECK(strcmp(str(source(prov, 0), "path"), "src/a.h") == 0 && flag(source(prov, 0), "modified") == 1);
		CHECK(strcmp(str(source(prov, 1), "path"), "src/k.c") == 0 && flag(source(prov, 1), "modified") == 0);
		json_decref(prov);
	}
	{
		char a_h[PATH_BYTES];
		snprintf(a_h, sizeof(a_h), "%s/src/a.h", repo_dir);
		CHECK(unlink(a_h) == 0);
	}

	/* Untracked files do not make a checkout dirty, but an untracked
	 * source differs from HEAD. */
	spit("new.txt", "new\n");
	prov = collect(repo_dir, untracked, 1);
	CHECK(flag(prov, "dirty") == 0);
	CHECK(flag(source(prov, 0), "modified") == 1);
	json_decref(prov);

	spit("src/k.c", "hello, world\n");
	prov = collect(repo_dir, sources, 1);
	CHECK(flag(prov, "dirty") == 1);
	CHECK_MSG(strcmp(str(prov, "describe"), "v1.0-dirty") == 0, "describe %s", str(prov, "describe"));
	CHECK(flag(source(prov, 0), "modified") == 1);
	CHECK(git_odb_hash(&blob, "hello, world\n", strlen("hello, world\n"), GIT_OBJECT_BLOB) == 0);
	hex_of(expect_hex, &blob);
	CHECK_MSG(strcmp(str(source(prov, 0), "blob_id"), expect_hex) == 0, "blob %s, want %s",
		str(source(prov, 0), "blob_id"), expect_hex);
	json_decref(prov);

	/* A tracked source deleted from the work tree has no bytes to name. */
	spit("src/k.c", "hello\n");
	{
		char readme[PATH_BYTES];

		snprintf(readme, sizeof(readme), "%s/README", repo_dir);
		CHECK(unlink(readme) == 0);
		prov = NULL;
		CHECK(mb_provenance_collect(&prov, repo_dir, deleted, 1, &err) == MB_ENOTFOUND);
		CHECK(prov == NULL);
		CHECK_MSG(strstr(err.where, "README") && strstr(err.text, "missing"), "%s: %s",
			err.where, err.text);
		spit("README", "readme\n");
	}
	CHECK(mb_provenance_collect(&prov, repo_dir, absolute, 1, &err) == MB_EINVAL);
	CHECK(prov == NULL);

	/* Work tree back to HEAD: clean again. */
	prov = collect(repo_dir, NULL, 0);
	CHECK(flag(prov, "dirty") == 0);
	CHECK(json_array_size(json_object_get(prov, "sources")) == 0);
	json_decref(prov);

	/* A second commit: describe counts from the tag. */
	spit("src/k.c", "second\n");
	commit_file(&c2, repo, "src/k.c", SECOND_COMMIT_TIME);
	hex_of(hex2, &c2);
	snprintf(expect_describe, sizeof(expect_describe), "v1.0-1-g%.*s", SHORT_OID_LEN, hex2);
	prov = collect(repo_dir, sources, 1);
	CHECK_MSG(strcmp(str(prov, "describe"), expect_describe) == 0, "describe %s, want %s",
		str(prov, "describe"), expect_describe);
	CHECK(strcmp(str(prov, "branch"), "feature") == 0);
	CHECK(json_integer_value(json_object_get(prov, "commit_time")) == SECOND_COMMIT_TIME);
	CHECK(flag(source(prov, 0), "modified") == 0);
	json_decref(prov);

	CHECK(git_repository_set_head_detached(repo, &c2) == 0);
	prov = collect(repo_dir, NULL, 0);
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
