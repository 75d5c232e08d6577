/* Error detail for every fallible call in megabench.
 *
 * A function that can fail returns 0 or a negative MB_E* code and, when the
 * caller passed an mb_error, fills it. The struct is caller-owned and fixed
 * size, so the failure path allocates nothing. `where` names the file, key
 * path or case the error is about; `text` says what is wrong.
 */
#ifndef MB_RECEIPTS_ERROR_H
#define MB_RECEIPTS_ERROR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
	MB_OK = 0,
	MB_EINVAL = -1,       /* bad input: suite, receipt, argument, shape */
	MB_EIO = -2,          /* a file could not be read or written */
	MB_ENOMEM = -3,       /* host allocation failed */
	MB_ESCHEMA = -4,      /* a document breaks its JSON schema */
	MB_ENOTFOUND = -5,    /* unknown row, dtype, variant or file */
	MB_EUNSUPPORTED = -6, /* feature not built in or not available here */
	MB_EDEVICE = -7,      /* the GPU or its runtime failed */
	MB_EINTERRUPTED = -8, /* the user asked to stop */
	MB_ECHILD = -9        /* an isolated child process failed */
};

#define MB_ERROR_WHERE_MAX 512
#define MB_ERROR_TEXT_MAX 1024

typedef struct mb_error {
	int code;
	char where[MB_ERROR_WHERE_MAX];
	char text[MB_ERROR_TEXT_MAX];
} mb_error;

/* Fill `err` (which may be NULL) and return `code`, so that a failure reads
 * `return mb_error_set(err, MB_EINVAL, path, "expected ...");`. */
int mb_error_set(mb_error *err, int code, const char *where, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Prefix `where` with `outer` ("suites/x.toml" + ": " + old where). */
void mb_error_prefix(mb_error *err, const char *outer);

void mb_error_clear(mb_error *err);

/* "where: text", or just "text" when where is empty. */
void mb_error_format(const mb_error *err, char *buf, size_t len);

const char *mb_error_code_name(int code);

#ifdef __cplusplus
}
#endif

#endif
