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

/* Everything after the repository is known to have a work tree and a HEAD. */
static int describe_head(json_t **out, git_repository *repo, const char *workdir, mb_error *err)
{
	git_reference *head = NULL;
	git_commit *commit = NULL;
	json_t *prov = NULL;
	json_t *branch;
	char hex[MB_OID_HEX_LEN + 1];
	char describe[DESCRIBE_BYTES];
	int dirty = 0;
	int rc = 0;

	if (git_repository_head(&head, repo) < 0
	    || git_reference_peel((git_object **)&commit, head, GIT_OBJECT_COMMIT) < 0) {
		rc = git_fail(err, workdir, "cannot read HEAD");
		goto cleanup;
	}
	rc = status_dirty(&dirty, repo, workdir, err);
	if (rc)
		goto cleanup;
	rc = describe_commit(describe, sizeof(describe), commit, dirty, workdir, err);
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
	    || json_object_set_new(prov, "describe", json_string(describe))) {
		rc = mb_error_set(err, MB_ENOMEM, workdir, "out of memory (or a name is not UTF-8)");
		goto cleanup;
	}
	*out = prov;
	prov = NULL;

cleanup:
	json_decref(prov);
	git_commit_free(commit);
	git_reference_free(head);
	return rc;
}

int mb_provenance_collect(json_t **out, const char *start_dir, mb_error *err)
{
	git_repository *repo = NULL;
	char reason[REASON_BYTES];
	char workdir[PATH_MAX];
	size_t workdir_len;
	int initialised = 0;
	int gr;
	int rc = 0;

	*out = NULL;
	if (!start_dir) {
		rc = mb_error_set(err, MB_EINVAL, "provenance", "no start directory");
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
	rc = describe_head(out, repo, workdir, err);

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

/* ---- the binary's provenance -------------------------------------------- */

/* libgit2 must be initialised. */
static int hash_file(char out[MB_OID_HEX_LEN + 1], const char *path, mb_error *err)
{
	git_oid oid;

	if (git_odb_hashfile(&oid, path, GIT_OBJECT_BLOB) < 0)
		return git_fail(err, path, "cannot hash the file");
	oid_hex(out, &oid);
	return 0;
}

static json_t *build_sources_json(const mb_build_provenance *b)
{
	json_t *sources = json_array(), *item;

	for (size_t i = 0; sources && i < b->n_sources; i++) {
		const mb_source_id *s = &b->sources[i];

		item = b->commit
			? json_pack("{s:s, s:s, s:b}", "path", s->path, "blob_id", s->blob_id, "modified", s->modified)
			: json_pack("{s:s, s:s}", "path", s->path, "blob_id", s->blob_id);
		if (json_array_append_new(sources, item)) {
			json_decref(sources);
			sources = NULL;
		}
	}
	return sources;
}

int mb_provenance_binary(json_t **out, const mb_build_provenance *b, const char *exe_path, mb_error *err)
{
	char hex[MB_OID_HEX_LEN + 1], resolved[PATH_MAX];
	json_t *prov = NULL;
	struct stat st;
	int initialised = 0, rc = 0;

	*out = NULL;
	if (!b || !exe_path) {
		rc = mb_error_set(err, MB_EINVAL, "provenance", "no build provenance or no executable");
		goto cleanup;
	}
	initialised = git_libgit2_init() >= 0;
	if (!initialised) {
		rc = git_fail(err, exe_path, "cannot initialise libgit2");
		goto cleanup;
	}
	if (stat(exe_path, &st) != 0) {
		rc = mb_error_set(err, MB_EIO, exe_path, "cannot stat the executable: %s", strerror(errno));
		goto cleanup;
	}
	if ((rc = hash_file(hex, exe_path, err)))
		goto cleanup;
	/* a replaced or deleted executable has no path left: keep the name */
	if (!realpath(exe_path, resolved))
		snprintf(resolved, sizeof(resolved), "%s", exe_path);
	prov = b->commit
		? json_pack("{s:b, s:s, s:s?, s:s, s:I, s:s?, s:b, s:s?}", "available", 1, "origin", "binary",
			"workdir", b->workdir, "commit", b->commit, "commit_time", (json_int_t)b->commit_time,
			"branch", b->branch, "dirty", b->dirty, "describe", b->describe)
		: json_pack("{s:b, s:s, s:s?, s:s}", "available", 0, "origin", "binary", "workdir", b->workdir,
			"reason", b->reason ? b->reason : "the build did not know its commit");
	if (!prov
	    || json_object_set_new(prov, "sources", build_sources_json(b))
	    || json_object_set_new(prov, "executable", json_pack("{s:s, s:s, s:I}", "path", resolved,
			"blob_id", hex, "bytes", (json_int_t)st.st_size))) {
		rc = mb_error_set(err, MB_ENOMEM, "provenance", "out of memory (or a path is not UTF-8)");
		goto cleanup;
	}
	*out = prov;
	prov = NULL;

cleanup:
	json_decref(prov);
	if (initialised)
		git_libgit2_shutdown();
	return rc;
}

/* ---- a checkout compared with the build ----------------------------------- */

/* Bounds a walk through a checkout whose folders link back into
 * themselves; megabench's own tree is three levels deep. */
#define CHECKOUT_MAX_DEPTH 32
#define CHANGE_MODIFIED "modified"
#define CHANGE_ADDED "added"
#define CHANGE_REMOVED "removed"
/* a file or folder of the checkout that cannot be read: reported, never
 * fatal, since the run must not depend on the working directory */
#define CHANGE_UNREADABLE "unreadable"

typedef struct checkout_file {
	char *path;
	const char *mark; /* NULL, or CHANGE_UNREADABLE */
} checkout_file;

typedef struct path_list {
	checkout_file *v;
	size_t n, cap;
} path_list;

static void path_list_free(path_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].path);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static int path_list_add(path_list *l, const char *path, const char *mark)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		checkout_file *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return MB_ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	if (!(l->v[l->n].path = strdup(path)))
		return MB_ENOMEM;
	l->v[l->n++].mark = mark;
	return 0;
}

static bool name_matches(const mb_build_provenance *b, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; i < b->n_patterns; i++) {
		const char *p = b->patterns[i];
		size_t k = strlen(p) - (p[0] == '*');

		if (p[0] == '*' ? n >= k && strcmp(name + n - k, p + 1) == 0 : strcmp(name, p) == 0)
			return true;
	}
	return false;
}

/* The files of folder `rel` (under `root`, no trailing '/') the rule takes,
 * down its subfolders; links to folders are not followed, links to files
 * are (as the build's generator walks). */
static int walk_rule(path_list *l, const mb_build_provenance *b, const char *root, const char *rel, int depth)
{
	char full[PATH_MAX], child[PATH_MAX];
	struct dirent *e;
	struct stat st;
	DIR *d;
	int rc = 0;

	if (snprintf(full, sizeof(full), "%s/%s", root, rel) >= (int)sizeof(full))
		return path_list_add(l, rel, CHANGE_UNREADABLE);
	if (!(d = opendir(full)))
		return errno == ENOENT ? 0 : path_list_add(l, rel, CHANGE_UNREADABLE);
	while (rc == 0 && (e = readdir(d))) {
		if (e->d_name[0] == '.'
		    || snprintf(child, sizeof(child), "%s/%s", rel, e->d_name) >= (int)sizeof(child)
		    || snprintf(full, sizeof(full), "%s/%s", root, child) >= (int)sizeof(full)
		    || lstat(full, &st) != 0)
			continue;
		if (S_ISDIR(st.st_mode))
			rc = depth < CHECKOUT_MAX_DEPTH ? walk_rule(l, b, root, child, depth + 1)
				: path_list_add(l, child, CHANGE_UNREADABLE);
		else if ((S_ISREG(st.st_mode) || (S_ISLNK(st.st_mode) && stat(full, &st) == 0 && S_ISREG(st.st_mode)))
			&& name_matches(b, e->d_name))
			rc = path_list_add(l, child, NULL);
	}
	closedir(d);
	return rc;
}

static int cmp_file(const void *a, const void *b)
{
	return strcmp(((const checkout_file *)a)->path, ((const checkout_file *)b)->path);
}

static int cmp_source(const void *a, const void *b)
{
	return strcmp((*(const mb_source_id *const *)a)->path, (*(const mb_source_id *const *)b)->path);
}

/* Every file of `root` the build's rule takes, sorted by strcmp. */
static int list_checkout(path_list *l, const mb_build_provenance *b, const char *root)
{
	char full[PATH_MAX], top[PATH_MAX];
	struct stat st;
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < b->n_tops; i++) {
		size_t n = strlen(b->tops[i]);

		if (n > 0 && b->tops[i][n - 1] == '/') {
			snprintf(top, sizeof(top), "%.*s", (int)(n - 1), b->tops[i]);
			rc = walk_rule(l, b, root, top, 0);
		} else if (snprintf(full, sizeof(full), "%s/%s", root, b->tops[i]) < (int)sizeof(full)
			&& stat(full, &st) == 0 && S_ISREG(st.st_mode)) {
			rc = path_list_add(l, b->tops[i], NULL);
		}
	}
	if (rc == 0 && l->n > 1)
		qsort(l->v, l->n, sizeof(*l->v), cmp_file);
	return rc;
}

/* A path JSON cannot hold (not UTF-8) is still a difference, and must
 * not stop the run. */
#define PATH_NOT_UTF8 "(a file name that is not UTF-8)"

static int add_change(json_t *differing, const char *path, const char *change)
{
	json_t *item = json_pack("{s:s, s:s}", "path", path, "change", change);

	if (!item)
		item = json_pack("{s:s, s:s}", "path", PATH_NOT_UTF8, "change", change);
	return json_array_append_new(differing, item) ? MB_ENOMEM : 0;
}

/* The build's sources against the checkout's files, both walked in strcmp
 * order. libgit2 must be initialised. */
static int compare_checkout(json_t *differing, const mb_build_provenance *b, const char *root, const path_list *l)
{
	const mb_source_id **src = malloc((b->n_sources ? b->n_sources : 1) * sizeof(*src));
	char full[PATH_MAX], hex[MB_OID_HEX_LEN + 1];
	size_t i = 0, j = 0;
	int rc = 0;

	if (!src)
		return MB_ENOMEM;
	for (size_t k = 0; k < b->n_sources; k++)
		src[k] = &b->sources[k];
	qsort(src, b->n_sources, sizeof(*src), cmp_source);
	while (rc == 0 && (i < b->n_sources || j < l->n)) {
		int c = i == b->n_sources ? 1 : j == l->n ? -1 : strcmp(src[i]->path, l->v[j].path);
		const char *change = NULL;

		if (c < 0) {
			rc = add_change(differing, src[i++]->path, CHANGE_REMOVED);
			continue;
		}
		if (c > 0) {
			rc = add_change(differing, l->v[j].path, l->v[j].mark ? l->v[j].mark : CHANGE_ADDED);
			j++;
			continue;
		}
		change = l->v[j].mark;
		if (!change && (snprintf(full, sizeof(full), "%s/%s", root, l->v[j].path) >= (int)sizeof(full)
			|| hash_file(hex, full, NULL)))
			change = CHANGE_UNREADABLE;
		else if (!change && strcmp(hex, src[i]->blob_id) != 0)
			change = CHANGE_MODIFIED;
		if (change)
			rc = add_change(differing, l->v[j].path, change);
		i++;
		j++;
	}
	free(src);
	return rc;
}

/* The checkout's own commit and describe, when `root` is the top of a git
 * checkout (and not a folder inside some other repository); else nulls. */
static void checkout_git(json_t **commit, json_t **describe, const char *root)
{
	char dotgit[PATH_MAX], top[PATH_MAX];
	json_t *g = NULL;
	struct stat st;

	*commit = json_null();
	*describe = json_null();
	if (snprintf(dotgit, sizeof(dotgit), "%s/.git", root) >= (int)sizeof(dotgit) || lstat(dotgit, &st) != 0
	    || mb_provenance_collect(&g, root, NULL) != 0)
		return;
	if (json_is_true(json_object_get(g, "available"))
	    && realpath(json_string_value(json_object_get(g, "workdir")), top) && strcmp(top, root) == 0) {
		*commit = json_incref(json_object_get(g, "commit"));
		*describe = json_incref(json_object_get(g, "describe"));
	}
	json_decref(g);
}

/* The nearest of `dir` (resolved, PATH_MAX bytes) and its parents that
 * holds `marker`, in place; false when none does. */
static bool find_marked(char *dir, const char *marker)
{
	char probe[PATH_MAX];
	struct stat st;
	char *slash;

	for (;;) {
		if (snprintf(probe, sizeof(probe), "%s/%s", dir, marker) < (int)sizeof(probe)
		    && stat(probe, &st) == 0 && S_ISREG(st.st_mode))
			return true;
		slash = strrchr(dir, '/');
		if (!slash || (slash == dir && dir[1] == '\0'))
			return false;
		if (slash == dir)
			dir[1] = '\0'; /* "/a" -> "/" */
		else
			*slash = '\0';
	}
}

int mb_provenance_checkout(json_t **out, const mb_build_provenance *b, const char *start_dir,
	const char *marker, mb_error *err)
{
	char root[PATH_MAX];
	path_list files = {0};
	json_t *differing = NULL, *commit = NULL, *describe = NULL, *workdir;
	int initialised = 0, rc = 0;

	*out = NULL;
	if (!b || !start_dir || !marker) {
		rc = mb_error_set(err, MB_EINVAL, "provenance", "no build provenance, directory or marker");
		goto cleanup;
	}
	/* a working directory that is gone has no checkout around it */
	if (!realpath(start_dir, root) || !find_marked(root, marker))
		goto cleanup;
	initialised = git_libgit2_init() >= 0;
	if (!initialised) {
		rc = git_fail(err, root, "cannot initialise libgit2");
		goto cleanup;
	}
	if (!(differing = json_array()) || (rc = list_checkout(&files, b, root))
	    || (rc = compare_checkout(differing, b, root, &files))) {
		rc = mb_error_set(err, MB_ENOMEM, root, "out of memory comparing the checkout");
		goto cleanup;
	}
	checkout_git(&commit, &describe, root);
	workdir = json_string(root);
	*out = json_pack("{s:o, s:b, s:O, s:o, s:o}", "workdir", workdir ? workdir : json_string(PATH_NOT_UTF8),
		"matches", json_array_size(differing) == 0, "differing", differing, "commit", commit, "describe", describe);
	commit = describe = NULL;
	if (!*out)
		rc = mb_error_set(err, MB_ENOMEM, root, "out of memory");

cleanup:
	json_decref(differing);
	path_list_free(&files);
	if (initialised)
		git_libgit2_shutdown();
	return rc;
}
