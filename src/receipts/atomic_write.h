/* Crash-safe file replacement: a reader sees either the old bytes or the new
 * bytes at a path, never a half-written file.
 *
 * The data goes to a temporary file in the same directory (".NAME.XXXXXX"),
 * which is flushed to disk, closed and renamed over the path; the directory is
 * then flushed so the rename itself survives a crash. On any failure before
 * the rename the temporary is removed and the path is left as it was.
 *
 * The path "-" means standard output: written in place, with no atomicity,
 * because a pipe or terminal cannot be replaced.
 */
#ifndef MB_RECEIPTS_ATOMIC_WRITE_H
#define MB_RECEIPTS_ATOMIC_WRITE_H

#include <jansson.h>
#include <stddef.h>

#include "receipts/error.h"

/* Replace the file at `path` with `len` bytes of `data`. A new file gets
 * mode 0644; an existing file keeps its permission bits. Errors name the path
 * and the step that failed ("r.json: write failed: File too large").
 * If the rename succeeded but the directory could not be flushed, the new
 * bytes are in place and MB_EIO says that durability is not guaranteed. */
int mb_atomic_write(const char *path, const void *data, size_t len, mb_error *err);

/* Serialize `doc` the way every receipt is written (one space of indent per
 * level, members in insertion order, reals with 17 significant digits so that
 * they read back bit for bit, a trailing newline) and mb_atomic_write it. */
int mb_json_write_atomic(const json_t *doc, const char *path, mb_error *err);

#endif
