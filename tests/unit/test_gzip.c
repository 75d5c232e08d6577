/* receipts/gzip.h: what a .json.gz receipt goes through before it is
 * parsed, and what a receipt saved to a .gz path goes through before it is
 * written. A gzip file is untrusted input: the inflated size is capped
 * (a small file that inflates past the cap is refused), a truncated or
 * corrupt stream is an error naming the file, and a receipt saved to
 * NAME.json.gz reads back the same. */
#include <stdlib.h>
#include <string.h>

#include "mb_config.h"
#include "receipts/atomic_write.h"
#include "receipts/gzip.h"
#include "receipts/read_file.h"
#include "receipts/receipt_io.h"
#include "testutil.h"

#define PLAIN "{\"kind\": \"megabench.receipt\"}\n"
/* A stream of zeros this long deflates to about a thousandth of it. */
#define BOMB_BYTES ((size_t)8 << 20)
#define BOMB_CAP ((size_t)1 << 20)

/* `len` bytes of `data` gzipped, in a malloc'd buffer that
 * mb_gzip_decode may take over. */
static char *packed(size_t *out_len, const void *data, size_t len)
{
	char *out = NULL;
	mb_error err;

	CHECK_MSG(mb_gzip_encode(&out, out_len, data, len, "test", &err) == 0, "%s", err.text);
	return out;
}

/* Decode a copy of `len` bytes at `data` with `cap`; *out is the caller's. */
static int decode(char **out, size_t *out_len, const char *data, size_t len, size_t cap, mb_error *err)
{
	char *copy = malloc(len + 1);

	memcpy(copy, data, len);
	copy[len] = '\0';
	*out = copy;
	*out_len = len;
	return mb_gzip_decode(out, out_len, "x.json.gz", cap, "a receipt", err);
}

static void test_round_trip(void)
{
	size_t len = 0, plain_len = 0;
	char *gz = packed(&len, PLAIN, strlen(PLAIN)), *text = NULL;
	mb_error err;

	CHECK(gz && mb_gzip_is(gz, len));
	CHECK(decode(&text, &plain_len, gz, len, 1024, &err) == 0);
	CHECK(text && plain_len == strlen(PLAIN) && strcmp(text, PLAIN) == 0);
	free(text);
	/* exactly at the cap reads; one byte under it does not */
	CHECK(decode(&text, &plain_len, gz, len, strlen(PLAIN), &err) == 0);
	free(text);
	CHECK(decode(&text, &plain_len, gz, len, strlen(PLAIN) - 1, &err) == MB_EIO);
	CHECK(text == NULL);
	free(gz);
	/* plain text is left as it is */
	CHECK(decode(&text, &plain_len, PLAIN, strlen(PLAIN), 1024, &err) == 0);
	CHECK(strcmp(text, PLAIN) == 0);
	free(text);
}

/* Two members one after another inflate to their concatenation (cat a.gz
 * b.gz); bytes after the last member that are no member are an error. */
static void test_members(void)
{
	size_t a_len = 0, b_len = 0, len = 0;
	char *a = packed(&a_len, "{\"kind\": ", 9), *b = packed(&b_len, "1}", 2), *both, *text = NULL;
	mb_error err;

	both = malloc(a_len + b_len + 4);
	memcpy(both, a, a_len);
	memcpy(both + a_len, b, b_len);
	CHECK(decode(&text, &len, both, a_len + b_len, 1024, &err) == 0);
	CHECK(text && strcmp(text, "{\"kind\": 1}") == 0);
	free(text);
	memcpy(both + a_len + b_len, "junk", 4);
	CHECK(decode(&text, &len, both, a_len + b_len + 4, 1024, &err) == MB_EINVAL);
	CHECK_MSG(strstr(err.text, "4 bytes after the end of the gzip data") != NULL, "%s", err.text);
	free(both);
	free(a);
	free(b);
}

static void test_broken(void)
{
	size_t len = 0, out_len = 0;
	char *gz = packed(&len, PLAIN, strlen(PLAIN)), *text = NULL;
	mb_error err;

	/* cut short: named, nothing returned */
	CHECK(decode(&text, &out_len, gz, len - 6, 1024, &err) == MB_EINVAL);
	CHECK_MSG(!strcmp(err.where, "x.json.gz") && strstr(err.text, "truncated gzip data") != NULL, "%s: %s",
		err.where, err.text);
	CHECK(text == NULL);
	/* a flipped byte in the deflate data or the CRC */
	gz[len - 5] ^= 0x5a;
	CHECK(decode(&text, &out_len, gz, len, 1024, &err) == MB_EINVAL);
	CHECK_MSG(strstr(err.text, "corrupt gzip data") != NULL, "%s", err.text);
	CHECK(text == NULL);
	free(gz);
}

/* A small file that inflates far past the cap stops at the cap. */
static void test_bomb(void)
{
	char *zeros = calloc(BOMB_BYTES, 1), *text = NULL;
	size_t len = 0, out_len = 0;
	char *gz = packed(&len, zeros, BOMB_BYTES);
	mb_error err;

	CHECK(len < BOMB_CAP / 64);
	CHECK(decode(&text, &out_len, gz, len, BOMB_CAP, &err) == MB_EIO);
	CHECK_MSG(strstr(err.text, "inflates to more than 1048576 bytes, the limit for a receipt") != NULL, "%s",
		err.text);
	CHECK(text == NULL);
	CHECK(decode(&text, &out_len, gz, len, BOMB_BYTES, &err) == 0);
	CHECK(out_len == BOMB_BYTES);
	free(text);
	free(gz);
	free(zeros);
}

/* A receipt saved to NAME.json.gz is gzip on disk and loads back equal. */
static void test_receipt(void)
{
	json_t *r = NULL, *back = NULL;
	char path[512], *text = NULL;
	size_t len = 0;
	mb_error err;

	CHECK_MSG(mb_receipt_load(&r, mb_test_src("tests/golden/gate/regression/base.json"), &err) == 0, "%s", err.text);
	snprintf(path, sizeof(path), "%s/test_gzip.json.gz", getenv("MB_BUILD_ROOT") ? getenv("MB_BUILD_ROOT") : ".");
	remove(path);
	CHECK_MSG(r && mb_receipt_save(r, path, &err) == 0, "%s", err.text);
	CHECK(mb_read_file(&text, &len, path, MB_RECEIPT_MAX_BYTES, "a receipt", &err) == 0);
	CHECK(text && mb_gzip_is(text, len));
	free(text);
	CHECK_MSG(mb_receipt_load(&back, path, &err) == 0, "%s", err.text);
	CHECK(back && json_equal(r, back));
	remove(path);
	json_decref(r);
	json_decref(back);
}

int main(void)
{
#if MB_HAVE_ZLIB
	test_round_trip();
	test_members();
	test_broken();
	test_bomb();
	test_receipt();
#else
	{
		char *gz = malloc(3), *copy;
		size_t len = 3;
		mb_error err;

		memcpy(gz, "\x1f\x8b\x08", 3);
		copy = gz;
		CHECK(mb_gzip_decode(&copy, &len, "x.gz", 1024, "a receipt", &err) == MB_EUNSUPPORTED);
		CHECK(strstr(err.text, "gunzip the file first") != NULL);
	}
#endif
	return mb_test_finish("test_gzip");
}
