#include "receipts/provenance.h"

#include <dirent.h>
#include <errno.h>
#include <git2.h>
#include <stdlib.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Room for a work tree path and a sentence about it. */
#define REASON_BYTES (PATH_MAX + 256)
#define DESCRIBE_BYTES 256
#define DIRTY_SUFFIX "-dirty"
/* Open flags for discovery: 0 searches upward from start_dir and leaves
 * GIT_REPOSITORY_OPEN_FROM_ENV off, so GIT_DIR in the environment of a
 * benchmark run cannot point provenance at some other repository. */
#define DISCOVER_FLAGS 0

static const char *git_message(void)
{
	const git_error *e = git_error_last();

	return e && e->message ? e->message : "unknown libgit2 error";
}

static int git_fail(mb_error *err, const char *where, const char *what)
{
	return mb_error_set(err, MB_EIO, where, "%s: %s", what, git_message());
}

static void oid_hex(char out[MB_OID_HEX_LEN + 1], const git_oid *oid)
{
	git_oid_fmt(out, oid);
	out[MB_OID_HEX_LEN] = '\0';
}

/* {available: false, reason}: provenance that is missing is recorded, not
 * fatal, so a run from a tarball still produces a receipt. */
static int unavailable(json_t **out, const char *reason, mb_error *err)
{
	json_t *prov = json_object();
	int rc = 0;

	if (!prov
	    || json_object_set_new(prov, "available", json_false())
	    || json_object_set_new(prov, "reason", json_string(reason))) {
		rc = mb_error_set(err, MB_ENOMEM, "provenance",
			"out of memory (or the path is not UTF-8)");
		goto cleanup;
	}
	*out = prov;
	prov = NULL;

cleanup:
	json_decref(prov);
	return rc;
}

/* Dirty means what `git describe --dirty` means: a tracked file differs
 * between HEAD, the index and the work tree. Status flags 0 leave untracked
 * and ignored files out. */
static int status_dirty(int *out, git_repository *repo, const char *workdir, mb_error *err)
{
	git_status_options opts;
	git_status_list *list = NULL;
	int rc = 0;

	*out = 0;
	/* The _init functions, not the INIT macros, which leave fields to
	 * implicit zero and trip -Wmissing-field-initializers. */
	git_status_options_init(&opts, GIT_STATUS_OPTIONS_VERSION);
	opts.show = GIT_STATUS_SHOW_INDEX_AND_WORKDIR;
	opts.flags = 0;
	if (git_status_list_new(&list, repo, &opts) < 0) {
		rc = git_fail(err, workdir, "cannot read the status of the work tree");
		goto cleanup;
	}
	for (size_t i = 0; i < git_status_list_entrycount(list) && !*out; i++) {
		const git_status_entry *e = git_status_byindex(list, i);
		unsigned ignored = GIT_STATUS_WT_NEW | GIT_STATUS_IGNORED;

		*out = (e->status & ~ignored) != GIT_STATUS_CURRENT;
	}

cleanup:
	git_status_list_free(list);
	return rc;
}

/* git_describe_format appends dirty_suffix only to results of
 * git_describe_workdir, whose notion of dirty is not ours (it counts
 * untracked files); describing the commit and adding the suffix from
 * status_dirty keeps "describe" and "dirty" in agreement. */
static int describe_commit(char *out, size_t len, git_commit *commit, int dirty,
	const char *workdir, mb_error *err)
{
	git_describe_options opts;
	git_describe_format_options fmt;
	git_describe_result *result = NULL;
	git_buf buf = GIT_BUF_INIT;
	int rc = 0;

	git_describe_options_init(&opts, GIT_DESCRIBE_OPTIONS_VERSION);
	git_describe_format_options_init(&fmt, GIT_DESCRIBE_FORMAT_OPTIONS_VERSION);
	opts.describe_strategy = GIT_DESCRIBE_TAGS;
	opts.show_commit_oid_as_fallback = 1;
	if (git_describe_commit(&result, (git_object *)commit, &opts) < 0
	    || git_describe_format(&buf, result, &fmt) < 0) {
		rc = git_fail(err, workdir, "cannot describe HEAD");
		goto cleanup;
	}
	snprintf(out, len, "%s%s", buf.ptr, dirty ? DIRTY_SUFFIX : "");

cleanup:
	git_buf_dispose(&buf);
	git_describe_result_free(result);
	return rc;
}

/* One {path, blob_id, modified} entry, appended to `sources`; a path in
 * neither the work tree nor HEAD appends nothing (see the header). */
static int add_source(json_t *sources, git_repository *repo, const char *workdir,
	git_tree *tree, const char *path, mb_error *err)
{
	char full[PATH_MAX];
	char hex[MB_OID_HEX_LEN + 1];
	git_tree_entry *entry = NULL;
	struct stat st;
	git_oid raw;
	git_oid filtered;
	json_t *item = NULL;
	int modified = 1;
	int gr;
	int rc = 0;

	if (!path || !*path || path[0] == '/') {
		rc = mb_error_set(err, MB_EINVAL, path ? path : "",
			"source path must be relative to the repository root %s", workdir);
		goto cleanup;
	}
	if (snprintf(full, sizeof(full), "%s/%s", workdir, path) >= (int)sizeof(full)) {
		rc = mb_error_set(err, MB_EINVAL, path, "path is too long");
		goto cleanup;
	}
	gr = git_tree_entry_bypath(&entry, tree, path);
	if (gr < 0 && gr != GIT_ENOTFOUND) {
		rc = git_fail(err, full, "cannot look the file up in HEAD");
		goto cleanup;
	}
	if (stat(full, &st) != 0) {
		if (errno == ENOENT && entry)
			rc = mb_error_set(err, MB_ENOTFOUND, full,
				"tracked in HEAD but missing from the work tree");
		else if (errno != ENOENT)
			rc = mb_error_set(err, MB_EIO, full, "cannot stat: %s", strerror(errno));
		goto cleanup;
	}
	if (S_ISDIR(st.st_mode)) {
		rc = mb_error_set(err, MB_EINVAL, full, "expected a source file, got a directory");
		goto cleanup;
	}
	/* blob_id identifies the bytes the build compiled, so no filters;
	 * whether they differ from HEAD is asked the way git asks it, through
	 * the repository's filters (a CRLF checkout of an LF blob is clean). */
	if (git_odb_hashfile(&raw, full, GIT_OBJECT_BLOB) < 0) {
		rc = git_fail(err, full, "cannot hash the file");
		goto cleanup;
	}
	if (entry) {
		if (git_repository_hashfile(&filtered, repo, full, GIT_OBJECT_BLOB, path) < 0) {
			rc = git_fail(err, full, "cannot hash the file");
			goto cleanup;
		}
		modified = !git_oid_equal(&filtered, git_tree_entry_id(entry));
	}
	oid_hex(hex, &raw);
	item = json_object();
	if (!item
	    || json_object_set_new(item, "path", json_string(path))
	    || json_object_set_new(item, "blob_id", json_string(hex))
	    || json_object_set_new(item, "modified", json_boolean(modified))
	    || json_array_append(sources, item)) {
		rc = mb_error_set(err, MB_ENOMEM, full, "out of memory (or the path is not UTF-8)");
		goto cleanup;
	}

cleanup:
	json_decref(item);
	git_tree_entry_free(entry);
	return rc;
}

/* Every regular file directly in folder `path` ("src/kernels/"), in name
 * order, as add_source entries. */
static int add_folder(json_t *sources, git_repository *repo, const char *workdir,
	git_tree *tree, const char *path, mb_error *err)
{
	char dir[PATH_MAX], file[PATH_MAX];
	struct dirent **names = NULL;
	int n, rc = 0;

	if (snprintf(dir, sizeof(dir), "%s/%s", workdir, path) >= (int)sizeof(dir))
		return mb_error_set(err, MB_EINVAL, path, "path is too long");
	n = scandir(dir, &names, NULL, alphasort);
	if (n < 0)
		return mb_error_set(err, MB_EIO, dir, "cannot list: %s", strerror(errno));
	for (int i = 0; i < n; i++) {
		struct stat st;
		if (rc == 0 && names[i]->d_name[0] != '.'
		    && snprintf(file, sizeof(file), "%s%s", path, names[i]->d_name) < (int)sizeof(file)
		    && snprintf(dir, sizeof(dir), "%s/%s", workdir, file) < (int)sizeof(dir)
		    && stat(dir, &st) == 0 && S_ISREG(st.st_mode))
			rc = add_source(sources, repo, workdir, tree, file, err);
		free(names[i]);
	}
	free(names);
	return rc;
}

/* Everything after the repository is known to have a work tree and a HEAD. */
static int describe_head(json_t **out, git_repository *repo, const char *workdir,
	const char *const *source_paths, size_t n_sources, mb_error *err)
{
	git_reference *head = NULL;
	git_commit *commit = NULL;
	git_tree *tree = NULL;
	json_t *prov = NULL;
	json_t *sources = NULL;
	json_t *branch;
	char hex[MB_OID_HEX_LEN + 1];
	char describe[DESCRIBE_BYTES];
	int dirty = 0;
	int rc = 0;

	if (git_repository_head(&head, repo) < 0
	    || git_reference_peel((git_object **)&commit, head, GIT_OBJECT_COMMIT) < 0
	    || git_commit_tree(&tree, commit) < 0) {
		rc = git_fail(err, workdir, "cannot read HEAD");
		goto cleanup;
	}
	rc = status_dirty(&dirty, repo, workdir, err);
	if (rc)
		goto cleanup;
	rc = describe_commit(describe, sizeof(describe), commit, dirty, workdir, err);
	if (rc)
		goto cleanup;
	sources = json_array();
	if (!sources) {
		rc = mb_error_set(err, MB_ENOMEM, workdir, "out of memory");
		goto cleanup;
	}
	for (size_t i = 0; i < n_sources && !rc; i++) {
		size_t len = source_paths[i] ? strlen(source_paths[i]) : 0;
		rc = len > 0 && source_paths[i][len - 1] == '/'
			? add_folder(sources, repo, workdir, tree, source_paths[i], err)
			: add_source(sources, repo, workdir, tree, source_paths[i], err);
	}
	if (rc)
		goto cleanup;

	oid_hex(hex, git_commit_id(commit));
	branch = git_repository_head_detached(repo) == 1
		? json_null() : json_string(git_reference_shorthand(head));
	prov = json_object();
	if (!prov
	    || json_object_set_new(prov, "available", json_true())
	    || json_object_set_new(prov, "workdir", json_string(workdir))
	    || json_object_set_new(prov, "commit", json_string(hex))
	    || json_object_set_new(prov, "commit_time", json_integer(git_commit_time(commit)))
	    || json_object_set_new(prov, "branch", branch)
	    || json_object_set_new(prov, "dirty", json_boolean(dirty))
	    || json_object_set_new(prov, "describe", json_string(describe))
	    || json_object_set(prov, "sources", sources)) {
		rc = mb_error_set(err, MB_ENOMEM, workdir, "out of memory (or a name is not UTF-8)");
		goto cleanup;
	}
	*out = prov;
	prov = NULL;

cleanup:
	json_decref(prov);
	json_decref(sources);
	git_tree_free(tree);
	git_commit_free(commit);
	git_reference_free(head);
	return rc;
}

int mb_provenance_collect(json_t **out, const char *start_dir,
	const char *const *source_paths, size_t n_sources, mb_error *err)
{
	git_repository *repo = NULL;
	char reason[REASON_BYTES];
	char workdir[PATH_MAX];
	size_t workdir_len;
	int initialised = 0;
	int gr;
	int rc = 0;

	*out = NULL;
	if (!start_dir || (n_sources > 0 && !source_paths)) {
		rc = mb_error_set(err, MB_EINVAL, "provenance", "no start directory or no source list");
		goto cleanup;
	}
	initialised = git_libgit2_init() >= 0;
	if (!initialised) {
		rc = git_fail(err, start_dir, "cannot initialise libgit2");
		goto cleanup;
	}
	gr = git_repository_open_ext(&repo, start_dir, DISCOVER_FLAGS, NULL);
	if (gr == GIT_ENOTFOUND) {
		snprintf(reason, sizeof(reason), "not a git checkout: %s", start_dir);
		rc = unavailable(out, reason, err);
		goto cleanup;
	}
	if (gr < 0) {
		snprintf(reason, sizeof(reason), "cannot open the git repository containing %s: %s",
			start_dir, git_message());
		rc = unavailable(out, reason, err);
		goto cleanup;
	}
	if (git_repository_is_bare(repo)) {
		snprintf(reason, sizeof(reason), "bare repository without a work tree: %s",
			git_repository_path(repo));
		rc = unavailable(out, reason, err);
		goto cleanup;
	}
	/* libgit2 ends the work tree with '/'; receipts name directories
	 * without it. */
	snprintf(workdir, sizeof(workdir), "%s", git_repository_workdir(repo));
	workdir_len = strlen(workdir);
	if (workdir_len > 1 && workdir[workdir_len - 1] == '/')
		workdir[workdir_len - 1] = '\0';
	gr = git_repository_head_unborn(repo);
	if (gr < 0) {
		rc = git_fail(err, workdir, "cannot read HEAD");
		goto cleanup;
	}
	if (gr == 1) {
		snprintf(reason, sizeof(reason), "repository has no commits: %s", workdir);
		rc = unavailable(out, reason, err);
		goto cleanup;
	}
	rc = describe_head(out, repo, workdir, source_paths, n_sources, err);

cleanup:
	git_repository_free(repo);
	if (initialised)
		git_libgit2_shutdown();
	return rc;
}

int mb_blob_id(char out[MB_OID_HEX_LEN + 1], const void *data, size_t len)
{
	git_oid oid;
	int initialised = 0;
	int rc = 0;

	if (!out || (!data && len > 0)) {
		rc = MB_EINVAL;
		goto cleanup;
	}
	initialised = git_libgit2_init() >= 0;
	if (!initialised) {
		rc = MB_EIO;
		goto cleanup;
	}
	if (git_odb_hash(&oid, len ? data : "", len, GIT_OBJECT_BLOB) < 0) {
		rc = MB_EIO;
		goto cleanup;
	}
	oid_hex(out, &oid);

cleanup:
	if (initialised)
		git_libgit2_shutdown();
	return rc;
}
