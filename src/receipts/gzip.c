/* gzip for receipts (gzip.h). */
#include "receipts/gzip.h"

#include <stdlib.h>
#include <string.h>

#include "mb_config.h"

#if MB_HAVE_ZLIB
#include <zlib.h>
#endif

#define GZIP_MAGIC_0 0x1f
#define GZIP_MAGIC_1 0x8b
#define GZ_SUFFIX ".gz"
/* windowBits for zlib: the largest window, plus 16 for the gzip wrapper
 * (header and CRC-32) instead of zlib's own. */
#define GZIP_WINDOW_BITS (15 + 16)
#define GZIP_MEM_LEVEL 8
/* A receipt is repetitive JSON: the default level gets nearly all of what
 * level 9 would, at a fraction of the time. */
#define GZIP_LEVEL 6
/* The first output buffer: JSON receipts inflate about ten to twenty times. */
#define INFLATE_GUESS_RATIO 16
#define INFLATE_MIN_BYTES (64u << 10)
/* zlib counts in unsigned int: feed and drain it at most this much a call. */
#define ZLIB_STEP_BYTES (1u << 30)

bool mb_gzip_is(const void *data, size_t len)
{
	const unsigned char *p = data;

	return len >= 2 && p[0] == GZIP_MAGIC_0 && p[1] == GZIP_MAGIC_1;
}

bool mb_gzip_path(const char *path)
{
	size_t n = strlen(path), m = strlen(GZ_SUFFIX);

	return n > m && strcmp(path + n - m, GZ_SUFFIX) == 0;
}

#if MB_HAVE_ZLIB

static unsigned step(size_t n)
{
	return n > ZLIB_STEP_BYTES ? ZLIB_STEP_BYTES : (unsigned)n;
}

/* Inflate every gzip member of in[0..len) into *out (NUL-terminated). */
static int inflate_all(char **out, size_t *out_len, const unsigned char *in, size_t len, const char *path,
	size_t max_bytes, const char *what, mb_error *err)
{
	z_stream z;
	char *buf = NULL;
	size_t cap = len * INFLATE_GUESS_RATIO, used = 0, consumed = 0;
	int rc = 0, zrc = Z_OK;

	memset(&z, 0, sizeof(z));
	if (inflateInit2(&z, GZIP_WINDOW_BITS) != Z_OK)
		return mb_error_set(err, MB_ENOMEM, path, "cannot start inflating: out of memory");
	if (cap < INFLATE_MIN_BYTES)
		cap = INFLATE_MIN_BYTES;
	if (cap > max_bytes)
		cap = max_bytes;
	for (;;) {
		if (used == cap) {
			/* one byte past the limit tells "too large" from "exactly at it" */
			size_t grown_cap = cap >= max_bytes ? max_bytes + 1 : (cap * 2 > max_bytes ? max_bytes : cap * 2);
			char *grown;

			if (used > max_bytes) {
				rc = mb_error_set(err, MB_EIO, path, "inflates to more than %zu bytes, the limit for %s; "
					"is this the right file?", max_bytes, what);
				break;
			}
			grown = realloc(buf, grown_cap + 1);
			if (!grown) {
				rc = mb_error_set(err, MB_ENOMEM, path, "out of memory inflating the file");
				break;
			}
			buf = grown;
			cap = grown_cap;
		}
		if (!buf && !(buf = malloc(cap + 1))) {
			rc = mb_error_set(err, MB_ENOMEM, path, "out of memory inflating the file");
			break;
		}
		z.next_in = (unsigned char *)in + consumed;
		z.avail_in = step(len - consumed);
		z.next_out = (unsigned char *)buf + used;
		z.avail_out = step(cap - used);
		{
			unsigned in_before = z.avail_in, out_before = z.avail_out;

			zrc = inflate(&z, Z_NO_FLUSH);
			consumed += in_before - z.avail_in;
			used += out_before - z.avail_out;
		}
		if (used > max_bytes) {
			rc = mb_error_set(err, MB_EIO, path, "inflates to more than %zu bytes, the limit for %s; "
				"is this the right file?", max_bytes, what);
			break;
		}
		if (zrc == Z_STREAM_END) {
			/* another member follows, as `cat a.gz b.gz` makes */
			if (consumed < len && mb_gzip_is(in + consumed, len - consumed)) {
				inflateReset(&z);
				continue;
			}
			if (consumed < len)
				rc = mb_error_set(err, MB_EINVAL, path, "%zu bytes after the end of the gzip data", len - consumed);
			break;
		}
		if (zrc == Z_BUF_ERROR && consumed == len && used < cap) {
			rc = mb_error_set(err, MB_EINVAL, path, "truncated gzip data: the stream ends after %zu bytes "
				"without its end", len);
			break;
		}
		if (zrc != Z_OK && zrc != Z_BUF_ERROR) {
			rc = mb_error_set(err, zrc == Z_MEM_ERROR ? MB_ENOMEM : MB_EINVAL, path, "corrupt gzip data: %s",
				z.msg ? z.msg : "inflate failed");
			break;
		}
	}
	inflateEnd(&z);
	if (rc) {
		free(buf);
		return rc;
	}
	buf[used] = '\0';
	*out = buf;
	*out_len = used;
	return 0;
}

int mb_gzip_decode(char **text, size_t *len, const char *path, size_t max_bytes, const char *what,
	mb_error *err)
{
	char *plain = NULL;
	size_t plain_len = 0;
	int rc;

	if (!mb_gzip_is(*text, *len))
		return 0;
	rc = inflate_all(&plain, &plain_len, (const unsigned char *)*text, *len, path, max_bytes, what, err);
	free(*text);
	*text = plain;
	*len = rc ? 0 : plain_len;
	return rc;
}

int mb_gzip_encode(char **out, size_t *out_len, const void *data, size_t len, const char *path, mb_error *err)
{
	z_stream z;
	size_t cap, done = 0;
	char *buf;
	int zrc;

	*out = NULL;
	*out_len = 0;
	memset(&z, 0, sizeof(z));
	if (deflateInit2(&z, GZIP_LEVEL, Z_DEFLATED, GZIP_WINDOW_BITS, GZIP_MEM_LEVEL, Z_DEFAULT_STRATEGY) != Z_OK)
		return mb_error_set(err, MB_ENOMEM, path, "cannot start compressing: out of memory");
	cap = deflateBound(&z, (uLong)len);
	if (!(buf = malloc(cap ? cap : 1))) {
		deflateEnd(&z);
		return mb_error_set(err, MB_ENOMEM, path, "out of memory compressing the receipt");
	}
	z.next_out = (unsigned char *)buf;
	/* deflateBound leaves room for everything: Z_FINISH ends the stream
	 * once the last of the input is in */
	do {
		unsigned in_step = step(len - done);

		z.next_in = (unsigned char *)data + done;
		z.avail_in = in_step;
		z.avail_out = step(cap - z.total_out);
		zrc = deflate(&z, in_step == len - done ? Z_FINISH : Z_NO_FLUSH);
		done += in_step - z.avail_in;
	} while (zrc == Z_OK);
	*out_len = z.total_out;
	deflateEnd(&z);
	if (zrc != Z_STREAM_END) {
		free(buf);
		*out_len = 0;
		return mb_error_set(err, MB_EINVAL, path, "compressing failed (zlib %d)", zrc);
	}
	*out = buf;
	return 0;
}

#else /* !MB_HAVE_ZLIB */

int mb_gzip_decode(char **text, size_t *len, const char *path, size_t max_bytes, const char *what,
	mb_error *err)
{
	(void)max_bytes;
	if (!mb_gzip_is(*text, *len))
		return 0;
	free(*text);
	*text = NULL;
	*len = 0;
	return mb_error_set(err, MB_EUNSUPPORTED, path, "gzip data, and this megabench was built without zlib: "
		"gunzip the file first (%s)", what);
}

int mb_gzip_encode(char **out, size_t *out_len, const void *data, size_t len, const char *path, mb_error *err)
{
	(void)data;
	(void)len;
	*out = NULL;
	*out_len = 0;
	return mb_error_set(err, MB_EUNSUPPORTED, path, "this megabench was built without zlib: it cannot write "
		"gzip; name the file .json");
}

#endif
