/* Where the code that produced a receipt came from: the receipt's
 * "provenance" object (schemas/receipt.schema.json, definitions/provenance).
 *
 * Since schema version 2 it is the binary's: what the build embedded about
 * the sources it compiled (mb_build_embedded, generated at build time by
 * src/receipts/embed_provenance.py), never what a working directory holds
 * at run time; a megabench checkout around the working directory is only
 * compared with it (mb_provenance_checkout). */
#ifndef MB_RECEIPTS_PROVENANCE_H
#define MB_RECEIPTS_PROVENANCE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "receipts/error.h"

/* Hex digits of a SHA-1 object id, without the terminator. */
#define MB_OID_HEX_LEN 40

/* One source file of a build: `path` relative to the source root,
 * '/'-separated; `blob_id` the git blob id of the bytes compiled; `modified`
 * whether they differ from the commit (false when the commit is unknown). */
typedef struct mb_source_id {
	const char *path;
	const char *blob_id;
	bool modified;
} mb_source_id;

/* What a build embedded about its sources. `commit` is NULL when the tree
 * was no git checkout of its own (a tarball): then `reason` says so, and
 * branch, describe and commit_time mean nothing. `dirty` is true when a
 * source differs from the commit (or the commit lacks one, or has one the
 * tree lacks); `describe` is `git describe --always --tags` of the commit
 * with "-dirty" then. `sources` are sorted by strcmp. The rule that chose
 * them: every path of `tops` under the root (one ending in '/' is a folder,
 * walked down, names starting with '.' left out), taking the files whose
 * name is one of `patterns` ("*.c": any name ending in ".c"). Everything
 * is static. */
typedef struct mb_build_provenance {
	const char *workdir;
	const char *commit;
	long long commit_time;
	const char *branch;
	bool dirty;
	const char *describe;
	const char *reason;
	const mb_source_id *sources;
	size_t n_sources;
	const char *const *tops;
	size_t n_tops;
	const char *const *patterns;
	size_t n_patterns;
} mb_build_provenance;

/* This build's, linked into every executable of it (the generated
 * mb_build_provenance.c in the build folder). */
extern const mb_build_provenance mb_build_embedded;

/* Fill `*out` with a new object the caller owns: the binary's provenance
 * from `build`, {available, origin: "binary", workdir, commit, commit_time,
 * branch, dirty, describe, sources: [{path, blob_id, modified}], executable:
 * {path, blob_id, bytes}}; without a commit, available is false with the
 * reason, and the sources have no `modified`. The executable is the file at
 * `exe_path` ("/proc/self/exe": the running one), hashed as a git blob;
 * its path is recorded resolved. Fails with MB_EIO naming the file when it
 * cannot be read. */
int mb_provenance_binary(json_t **out, const mb_build_provenance *build, const char *exe_path, mb_error *err);

/* A checkout of megabench around `start_dir` compared with `build`: the
 * nearest of start_dir and its parents that holds the file `marker`
 * ("src/kernels/rows.def"); *out is NULL when there is none (a checkout of
 * anything else is no business of a receipt). Otherwise a new object the
 * caller owns: {workdir, matches, differing: [{path, change}], commit,
 * describe}: every path of the build's rule that differs, in strcmp order,
 * as "modified" (other bytes), "removed" (the build has it, the checkout
 * not) or "added"; commit and describe are the checkout's own when it is a
 * git checkout of its own (read as mb_provenance_collect reads them), else
 * null. Fails only when a file of the checkout cannot be read or on
 * allocation. */
int mb_provenance_checkout(json_t **out, const mb_build_provenance *build, const char *start_dir,
	const char *marker, mb_error *err);

/* Fill `*out` with a new object the caller owns, describing the repository
 * that contains `start_dir` (searched upward; GIT_DIR and friends in the
 * environment are ignored, so the answer depends only on the directory):
 * what a checkout says of itself (mb_provenance_checkout records it).
 *
 * Available: {available: true, workdir, commit, commit_time, branch (null
 * when HEAD is detached), dirty (a tracked file is modified or staged;
 * untracked files do not count), describe (as `git describe --always --tags
 * --dirty`)}.
 *
 * Not available (never an error): {available: false, reason}, when start_dir
 * is not inside a work tree, the repository cannot be opened (for example
 * one owned by another user, refused by libgit2's safe.directory check), it
 * is bare, or it has no commits yet. Failures reading an opened repository
 * return MB_EIO with libgit2's message. */
int mb_provenance_collect(json_t **out, const char *start_dir, mb_error *err);

/* The git blob id of `len` bytes of `data` as 40 lowercase hex digits plus a
 * terminator: SHA-1 of "blob <len>\0" followed by the bytes. Returns 0, or
 * MB_EINVAL / MB_EIO when the arguments are unusable or hashing fails. */
int mb_blob_id(char out[MB_OID_HEX_LEN + 1], const void *data, size_t len);

#endif
