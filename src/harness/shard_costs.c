/* Finding the receipts a sharded run learns its costs from (`run --costs`,
 * or --save-to's store): files and folders read, receipts of another
 * backend or suite passed over; the learning itself is shard.c's. */
#include "harness/shard.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "receipts/receipt_group.h"
#include "receipts/receipt_io.h"
#include "receipts/text.h"

#define NOTE_BYTES 1024
/* How many of a store's newest receipts of the suite are tried before the
 * bytes model is taken: a store of nightlies holds hundreds. */
#define STORE_TRIES 8

typedef struct found {
	json_t *receipts[MB_SHARD_MAX_RECEIPTS];
	char *names[MB_SHARD_MAX_RECEIPTS];
	size_t n;
	json_t *notes;
} found;

static void note(found *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(found *f, const char *fmt, ...)
{
	char text[NOTE_BYTES];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	json_array_append_new(f->notes, json_string(text));
}

static int keep(found *f, json_t *receipt, const char *path, mb_error *err)
{
	if (f->n == MB_SHARD_MAX_RECEIPTS) {
		json_decref(receipt);
		return mb_error_set(err, MB_EINVAL, path, "more than %d receipts to learn costs from",
			MB_SHARD_MAX_RECEIPTS);
	}
	f->names[f->n] = strdup(path);
	if (!f->names[f->n]) {
		json_decref(receipt);
		return mb_error_set(err, MB_ENOMEM, path, "out of memory");
	}
	f->receipts[f->n++] = receipt;
	return 0;
}

/* Every receipt of `backend` in the folder; the rest named in notes. */
static int from_folder(found *f, const char *dir, const char *backend, mb_error *err)
{
	char **paths = NULL;
	size_t n = 0, before = f->n;
	int rc = mb_receipt_dir_list(&paths, &n, dir, err);

	for (size_t i = 0; rc == 0 && i < n; i++) {
		json_t *r = NULL;
		mb_error why;

		mb_error_clear(&why);
		if (mb_receipt_load(&r, paths[i], &why)) {
			note(f, "--costs %s: %s passed over: %s", dir, paths[i], why.text);
		} else if (strcmp(mb_text_get(r, "backend"), backend)) {
			note(f, "--costs %s: %s passed over: a receipt of the %s backend", dir, paths[i],
				mb_text_get(r, "backend"));
			json_decref(r);
		} else {
			rc = keep(f, r, paths[i], err);
		}
	}
	if (rc == 0 && f->n == before)
		note(f, "--costs %s: no receipt of the %s backend there", dir, backend);
	mb_receipt_paths_free(paths, n);
	return rc;
}

/* --save-to's store: the newest receipt of the suite and backend, by name
 * (DIR/YYYYMMDDTHHMMSS.mmmZ-SUITE-PID.json). A store not made yet has
 * none. */
static int from_store(found *f, const char *dir, const char *suite, const char *backend, mb_error *err)
{
	char **paths = NULL, infix[256];
	size_t n = 0, tried = 0;
	mb_error list_err;
	int rc = 0;

	mb_error_clear(&list_err);
	snprintf(infix, sizeof(infix), "Z-%s-", suite);
	if (mb_receipt_dir_list(&paths, &n, dir, &list_err) && list_err.code != MB_ENOTFOUND) {
		note(f, "--save-to %s: no receipt to learn costs from (%s): the bytes model", dir, list_err.text);
		return 0;
	}
	for (size_t i = n; i-- > 0 && tried < STORE_TRIES && f->n == 0 && rc == 0;) {
		const char *base = strrchr(paths[i], '/');
		json_t *r = NULL;
		mb_error why;

		if (!strstr(base ? base : paths[i], infix))
			continue;
		tried++;
		mb_error_clear(&why);
		if (mb_receipt_load(&r, paths[i], &why))
			note(f, "--save-to %s: %s passed over: %s", dir, paths[i], why.text);
		else if (strcmp(mb_text_get(r, "backend"), backend)
			|| strcmp(mb_text_get(json_object_get(r, "suite"), "name"), suite))
			json_decref(r);
		else
			rc = keep(f, r, paths[i], err);
	}
	if (rc == 0 && f->n == 0)
		note(f, "--save-to %s: no receipt of suite %s on the %s backend to learn costs from: the bytes model",
			dir, suite, backend);
	mb_receipt_paths_free(paths, n);
	return rc;
}

/* Whether the receipt read from `path` gave the costs a figure. */
static bool gave(const mb_shard_costs *c, const char *path)
{
	const json_t *r;
	size_t i;

	json_array_foreach(c->receipts, i, r)
		if (!strcmp(mb_text_get(r, "path"), path))
			return true;
	return false;
}

int mb_shard_costs_load(mb_shard_costs *out, const mb_plan *plan, const mb_suite *suite, const char *backend,
	const char *const *from, size_t n_from, const char *store, mb_error *err)
{
	found *f = calloc(1, sizeof(*f));
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!f || !(f->notes = json_array())) {
		free(f);
		return mb_error_set(err, MB_ENOMEM, "--costs", "out of memory");
	}
	for (size_t i = 0; i < n_from && rc == 0; i++) {
		struct stat st;
		json_t *r = NULL;

		if (stat(from[i], &st) == 0 && S_ISDIR(st.st_mode))
			rc = from_folder(f, from[i], backend, err);
		else if ((rc = mb_receipt_load(&r, from[i], err)) == 0)
			rc = keep(f, r, from[i], err);
	}
	if (rc == 0 && n_from == 0 && store)
		rc = from_store(f, store, suite->name, backend, err);
	if (rc == 0)
		rc = f->n ? mb_shard_costs_learn(out, plan, suite, backend, f->receipts, (const char *const *)f->names, f->n,
			err) : mb_shard_costs_model(out, plan, suite, backend, err);
	for (size_t i = 0; rc == 0 && i < f->n; i++)
		if (!gave(out, f->names[i]))
			note(f, "%s: no case or lane of this plan to learn from", f->names[i]);
	if (rc == 0 && json_array_size(f->notes)) {
		out->notes = f->notes;
		f->notes = NULL;
	}
	for (size_t i = 0; i < f->n; i++) {
		json_decref(f->receipts[i]);
		free(f->names[i]);
	}
	json_decref(f->notes);
	free(f);
	return rc;
}
