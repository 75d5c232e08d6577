/* gzip for receipts: a receipt read from a .json.gz file (or any file that
 * starts with gzip's magic bytes) is inflated before it is parsed, and a
 * receipt saved to a path ending in ".gz" is deflated before it is written.
 *
 * A compressed file is untrusted input like any other: inflating stops at
 * the same cap the plain file has (a receipt: MB_RECEIPT_MAX_BYTES), so a
 * small file that inflates to terabytes (a "zip bomb") is refused after
 * reading at most the cap, and a truncated or corrupt stream is an error
 * naming the file, never a partial document.
 *
 * Built without zlib (-Dzlib=disabled), a gzip file is refused with a
 * message that says to gunzip it, and ".gz" paths cannot be written.
 */
#ifndef MB_RECEIPTS_GZIP_H
#define MB_RECEIPTS_GZIP_H

#include <stdbool.h>
#include <stddef.h>

#include "receipts/error.h"

/* `len` bytes at `data` begin with gzip's magic number (1f 8b). */
bool mb_gzip_is(const void *data, size_t len);

/* `path` ends in ".gz": a receipt saved there is compressed. */
bool mb_gzip_path(const char *path);

/* Where *text (len bytes, NUL-terminated, from mb_read_file) is gzip data,
 * replace it with what it inflates to, NUL-terminated, freeing the old
 * buffer; plain text is left as it is. Several gzip members one after
 * another inflate to their concatenation, as gunzip does. Errors, each
 * "PATH: ..." with `what` naming the kind of file ("a receipt"):
 *   MB_EIO        inflates to more than `max_bytes` ("the limit for ...");
 *   MB_EINVAL     corrupt or truncated gzip data;
 *   MB_EUNSUPPORTED  built without zlib;
 *   MB_ENOMEM.
 * On failure *text is freed and NULL. */
int mb_gzip_decode(char **text, size_t *len, const char *path, size_t max_bytes, const char *what,
	mb_error *err);

/* `len` bytes of `data` as one gzip member in a new buffer (*out, *out_len)
 * the caller frees. Errors: MB_ENOMEM, MB_EUNSUPPORTED (no zlib), MB_EINVAL
 * (zlib refused). `path` names the file in the error. */
int mb_gzip_encode(char **out, size_t *out_len, const void *data, size_t len, const char *path, mb_error *err);

#endif
