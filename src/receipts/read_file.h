/* Reading a whole file, with a cap on its size: suites, policies, schemas
 * and receipts all come through it. Below receipt_io.h and schema.h, which
 * both read files, so that neither reaches into the other for it. */
#ifndef MB_RECEIPTS_READ_FILE_H
#define MB_RECEIPTS_READ_FILE_H

#include <stddef.h>

#include "receipts/error.h"

/* The whole file at `path` into a new NUL-terminated buffer the caller
 * frees (`*out_len` bytes before the NUL), refusing more than `max_bytes`:
 * "PATH: larger than N bytes (the limit for ...)" with `what` naming the
 * kind of file ("a suite"). Only a regular file is read: a directory, a
 * device (/dev/zero, also through a symlink), a FIFO or a socket is refused
 * unread ("PATH: a FIFO, not a regular file: refused unread"), and the
 * open never waits for a FIFO's writer. A file whose size is over the limit
 * is refused unread too; otherwise the buffer is allocated once at the
 * file's size and grows geometrically only should the file grow while it is
 * read, so that a large receipt costs one copy, not one per 64 KiB. Errors:
 * MB_ENOTFOUND (no such file), MB_EIO (cannot open or read, not a regular
 * file, or too large: either way the file cannot be read), MB_ENOMEM. The
 * one read-whole-file helper: suites, policies and receipts all come
 * through it. */
int mb_read_file(char **out, size_t *out_len, const char *path, size_t max_bytes, const char *what,
	mb_error *err);

#endif
