/* Grouping and ordering receipts (receipt_group.h). */
#include "receipts/receipt_group.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "receipts/text.h"

#define JSON_SUFFIX ".json"
#define JSON_GZ_SUFFIX ".json.gz"

static json_int_t commit_time(const json_t *r)
{
	return json_integer_value(json_object_get(json_object_get(r, "provenance"), "commit_time"));
}

bool mb_receipt_same_group(const json_t *a, const json_t *b)
{
	return !strcmp(mb_text_get(json_object_get(a, "device"), "name"), mb_text_get(json_object_get(b, "device"), "name"))
		&& !strcmp(mb_text_get(a, "backend"), mb_text_get(b, "backend"))
		&& !strcmp(mb_text_get(json_object_get(a, "suite"), "name"), mb_text_get(json_object_get(b, "suite"), "name"));
}

bool mb_receipt_later(const json_t *a, const json_t *b)
{
	if (commit_time(a) != commit_time(b))
		return commit_time(a) > commit_time(b);
	return strcmp(mb_text_get(a, "started_at"), mb_text_get(b, "started_at")) > 0;
}

/* A receipt's place in time, for sorting. */
typedef struct order_key {
	json_int_t commit_time;
	const char *started_at;
	size_t index;
} order_key;

static int by_time(const void *pa, const void *pb)
{
	const order_key *a = pa, *b = pb;
	int c;

	if (a->commit_time != b->commit_time)
		return a->commit_time < b->commit_time ? -1 : 1;
	if ((c = strcmp(a->started_at, b->started_at)))
		return c;
	/* stable: equal receipts keep their input order */
	return a->index < b->index ? -1 : a->index > b->index;
}

int mb_receipt_order(size_t *idx, json_t *const *receipts, size_t n)
{
	order_key *keys = calloc(n + 1, sizeof(*keys));

	if (!keys)
		return MB_ENOMEM;
	for (size_t i = 0; i < n; i++)
		keys[i] = (order_key){commit_time(receipts[i]), mb_text_get(receipts[i], "started_at"), i};
	qsort(keys, n, sizeof(*keys), by_time);
	for (size_t i = 0; i < n; i++)
		idx[i] = keys[i].index;
	free(keys);
	return 0;
}

bool mb_receipt_complete(const json_t *receipt, char *why, size_t len)
{
	const char *status = mb_text_get(receipt, "status"), *error = mb_text_get(receipt, "error");
	const json_t *instrumented = json_object_get(receipt, "instrumented");

	if (strcmp(status, "complete")) {
		/* "interrupted after 28 of 94 cases" says its status already */
		if (!*error)
			snprintf(why, len, "not a complete run: status %s", status);
		else if (!strncmp(error, status, strlen(status)))
			snprintf(why, len, "not a complete run: %s", error);
		else
			snprintf(why, len, "not a complete run: %s: %s", status, error);
		return false;
	}
	if (!json_array_size(json_object_get(receipt, "cases"))) {
		snprintf(why, len, "no case (device %s)", mb_text_get(json_object_get(receipt, "device"), "name"));
		return false;
	}
	if (json_is_object(instrumented)) {
		snprintf(why, len, "timed under %s (%s=%s): its times measure the tool too",
			mb_text_get(instrumented, "tool"), mb_text_get(instrumented, "variable"), mb_text_get(instrumented, "by"));
		return false;
	}
	why[0] = '\0';
	return true;
}

int mb_run_set_init(mb_run_set *s, mb_error *err)
{
	s->first = json_object();
	return s->first ? 0 : mb_error_set(err, MB_ENOMEM, "receipts", "no memory");
}

int mb_run_set_add(const char **out_first, mb_run_set *s, const json_t *receipt, const char *name, mb_error *err)
{
	const char *id = mb_text_get(receipt, "run_id");
	const json_t *seen = json_object_get(s->first, id);

	*out_first = NULL;
	if (seen) {
		*out_first = json_string_value(seen);
		return 0;
	}
	if (json_object_set_new(s->first, id, json_string(name)))
		return mb_error_set(err, MB_ENOMEM, name, "no memory");
	return 0;
}

void mb_run_set_free(mb_run_set *s)
{
	if (!s)
		return;
	json_decref(s->first);
	s->first = NULL;
}

int mb_receipt_groups_build(mb_receipt_groups *out, json_t *const *receipts, const char *const *names, size_t n,
	mb_error *err)
{
	memset(out, 0, sizeof(*out));
	out->order = calloc(n + 1, sizeof(*out->order));
	out->groups = calloc(n + 1, sizeof(*out->groups));
	out->group_of = calloc(n + 1, sizeof(*out->group_of));
	if (!out->order || !out->groups || !out->group_of || mb_receipt_order(out->order, receipts, n))
		return mb_error_set(err, MB_ENOMEM, "receipts", "no memory");
	for (size_t i = 0; i < n; i++) {
		size_t k = out->order[i], g;
		mb_receipt_group *grp;

		for (g = 0; g < out->n_groups && !mb_receipt_same_group(out->groups[g].first, receipts[k]); g++)
			;
		grp = &out->groups[g];
		if (g == out->n_groups) {
			grp->first = receipts[k];
			grp->revs = calloc(n, sizeof(*grp->revs));
			grp->names = calloc(n, sizeof(*grp->names));
			out->n_groups++;
			if (!grp->revs || !grp->names)
				return mb_error_set(err, MB_ENOMEM, "receipts", "no memory");
		}
		grp->revs[grp->n] = receipts[k];
		grp->names[grp->n++] = names[k];
		out->group_of[k] = (int)g;
	}
	return 0;
}

void mb_receipt_groups_free(mb_receipt_groups *g)
{
	if (!g)
		return;
	for (size_t i = 0; g->groups && i < g->n_groups; i++) {
		free(g->groups[i].revs);
		free(g->groups[i].names);
	}
	free(g->groups);
	free(g->order);
	free(g->group_of);
	memset(g, 0, sizeof(*g));
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool ends_with(const char *name, const char *suffix)
{
	size_t len = strlen(name), n = strlen(suffix);

	return len > n && !strcmp(name + len - n, suffix);
}

/* A receipt file's name: NAME.json or a gzipped NAME.json.gz. */
static bool json_name(const char *name)
{
	return name[0] != '.' && (ends_with(name, JSON_SUFFIX) || ends_with(name, JSON_GZ_SUFFIX));
}

int mb_receipt_group_verdicts(mb_verdict_set **sets, size_t *n_sets, mb_group_row **rows, size_t *n_rows,
	const mb_receipt_group *g, const mb_policy *policy, const char *who, mb_error *err)
{
	size_t cap = 0;

	*n_sets = *n_rows = 0;
	*rows = NULL;
	*sets = calloc(g->n + 1, sizeof(**sets));
	if (!*sets)
		return mb_error_set(err, MB_ENOMEM, who, "no memory");
	for (size_t k = 0; k < g->n; k++) {
		int rc = mb_verdict_compute(&(*sets)[k], g->revs[k], policy, err);

		if (rc) {
			mb_error_prefix(err, g->names[k]);
			return rc;
		}
		(*n_sets)++;
		cap += (*sets)[k].n_rows;
	}
	*rows = calloc(cap + 1, sizeof(**rows));
	if (!*rows)
		return mb_error_set(err, MB_ENOMEM, who, "no memory");
	for (size_t k = g->n; k-- > 0;)
		for (size_t i = 0; i < (*sets)[k].n_rows; i++) {
			const mb_row_verdict *v = &(*sets)[k].rows[i];
			size_t j;

			for (j = 0; j < *n_rows && strcmp((*rows)[j].v->row, v->row); j++)
				;
			if (j == *n_rows)
				(*rows)[(*n_rows)++] = (mb_group_row){v, k};
		}
	return 0;
}

int mb_receipt_dir_list(char ***out, size_t *n_out, const char *dir, mb_error *err)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **paths = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	*out = NULL;
	*n_out = 0;
	if (!d)
		return mb_error_set(err, errno == ENOENT ? MB_ENOTFOUND : MB_EIO, dir, "cannot open directory: %s",
			strerror(errno));
	while (!rc && (e = readdir(d))) {
		char *path;

		if (!json_name(e->d_name))
			continue;
		if (asprintf(&path, "%s/%s", dir, e->d_name) < 0) {
			rc = mb_error_set(err, MB_ENOMEM, dir, "no memory");
			break;
		}
		if (n == cap) {
			char **grown = realloc(paths, (cap = cap ? 2 * cap : 16) * sizeof(*paths));
			if (!grown) {
				free(path);
				rc = mb_error_set(err, MB_ENOMEM, dir, "no memory");
				break;
			}
			paths = grown;
		}
		paths[n++] = path;
	}
	closedir(d);
	if (rc) {
		mb_receipt_paths_free(paths, n);
		return rc;
	}
	if (n)
		qsort(paths, n, sizeof(*paths), by_name);
	*out = paths;
	*n_out = n;
	return 0;
}

void mb_receipt_paths_free(char **paths, size_t n)
{
	for (size_t i = 0; paths && i < n; i++)
		free(paths[i]);
	free(paths);
}
