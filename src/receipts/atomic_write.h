/* Crash-safe file replacement: a reader sees either the old bytes or the new
 * bytes at a path, never a half-written file.
 *
 * The data goes to a temporary file in the same directory (".NAME.XXXXXX",
 * with NAME cut short when the whole would pass the file system's name
 * limit), which is flushed to disk, closed and renamed over the path; the
 * directory is then flushed so the rename itself survives a crash. On any
 * failure before the rename the temporary is removed and the path is left as
 * it was.
 *
 * Signals: these functions do not block any. A caller whose handlers may
 * end the process (the default for SIGINT and SIGTERM) must block them
 * around the write, or a signal can leave the temporary file behind.
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

/* Flags of mb_atomic_write_ex and mb_atomic_write_probe. */
enum {
	/* Never replace an existing file: the rename is refused (MB_EIO,
	 * "already exists") when `path` exists, even if it appeared while the
	 * data was being written, so two writers of one path cannot silently
	 * replace each other. */
	MB_ATOMIC_NO_REPLACE = 1u << 0,
	/* mb_json_write_atomic_ex only: write the JSON gzip-compressed
	 * (receipts/gzip.h); refused where megabench was built without zlib. */
	MB_ATOMIC_GZIP = 1u << 1
};

/* mb_atomic_write with `flags`. */
int mb_atomic_write_ex(const char *path, const void *data, size_t len, unsigned flags, mb_error *err);

/* Prove, before the work whose result is to be written, that
 * mb_atomic_write_ex(path, ..., flags) could write now: the name fits the
 * file system, the directory exists and takes the real temporary file, and
 * a first block of data can be written and flushed to it (a full disk
 * fails here). The temporary is removed again; `path` is not touched.
 * With MB_ATOMIC_NO_REPLACE an existing `path` is refused ("already
 * exists"). "-" (standard output) always passes. */
int mb_atomic_write_probe(const char *path, unsigned flags, mb_error *err);

/* Make directory `dir` and every missing level above it (mkdir -p; new
 * levels get mode 0755 less the umask). Returns 0 when `dir` is a
 * directory afterwards. Errors are MB_EIO naming the level that failed and
 * why, as the system said it: "nightly/x: is a file, not a directory",
 * "nightly: cannot create directory: Read-only file system", "...:
 * Permission denied"; MB_EINVAL for an empty or too long path. */
int mb_make_dirs(const char *dir, mb_error *err);

/* Serialize `doc` the way every receipt is written (one space of indent per
 * level, members in insertion order, reals with 17 significant digits so that
 * they read back bit for bit, a trailing newline) and mb_atomic_write it. */
int mb_json_write_atomic(const json_t *doc, const char *path, mb_error *err);

/* mb_json_write_atomic with mb_atomic_write_ex's `flags`. */
int mb_json_write_atomic_ex(const json_t *doc, const char *path, unsigned flags, mb_error *err);

#endif
