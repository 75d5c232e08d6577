/* Where the code that produced a receipt came from, read with libgit2: the
 * receipt's "provenance" object (schemas/receipt.schema.json,
 * definitions/provenance). */
#ifndef MB_RECEIPTS_PROVENANCE_H
#define MB_RECEIPTS_PROVENANCE_H

#include <jansson.h>
#include <stddef.h>

#include "receipts/error.h"

/* Hex digits of a SHA-1 object id, without the terminator. */
#define MB_OID_HEX_LEN 40

/* Fill `*out` with a new object the caller owns, describing the repository
 * that contains `start_dir` (searched upward; GIT_DIR and friends in the
 * environment are ignored, so the answer depends only on the directory).
 *
 * Available: {available: true, workdir, commit, commit_time, branch (null
 * when HEAD is detached), dirty (a tracked file is modified or staged;
 * untracked files do not count), describe (as `git describe --always --tags
 * --dirty`), sources}. Each of `source_paths` (relative to the repository
 * root, "src/kernels/catalog.c"; a path ending in '/' stands for every
 * regular file directly in that folder, in name order) becomes
 * {path, blob_id, modified}: blob_id is
 * the git blob id of the working-tree bytes, modified says whether they
 * differ from HEAD. A path that is in neither the working tree nor HEAD is
 * skipped, so a list may name optional or generated files; a path tracked in
 * HEAD but deleted from the working tree has no bytes to identify and fails
 * with MB_ENOTFOUND, as does a path that is a directory.
 *
 * Not available (never an error): {available: false, reason}, when start_dir
 * is not inside a work tree, the repository cannot be opened (for example
 * one owned by another user, refused by libgit2's safe.directory check), it
 * is bare, or it has no commits yet. Failures reading an opened repository
 * return MB_EIO with libgit2's message. */
int mb_provenance_collect(json_t **out, const char *start_dir,
	const char *const *source_paths, size_t n_sources, mb_error *err);

/* The git blob id of `len` bytes of `data` as 40 lowercase hex digits plus a
 * terminator: SHA-1 of "blob <len>\0" followed by the bytes. Returns 0, or
 * MB_EINVAL / MB_EIO when the arguments are unusable or hashing fails. */
int mb_blob_id(char out[MB_OID_HEX_LEN + 1], const void *data, size_t len);

#endif
