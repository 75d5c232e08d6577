/* Grouping and ordering receipts (receipt_group.h). */
#include "receipts/receipt_group.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

void mb_receipt_order(size_t *idx, json_t *const *receipts, size_t n)
{
	for (size_t i = 0; i < n; i++)
		idx[i] = i;
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && mb_receipt_later(receipts[idx[j - 1]], receipts[idx[j]]); j--) {
			size_t t = idx[j];
			idx[j] = idx[j - 1];
			idx[j - 1] = t;
		}
}

int mb_receipt_groups_build(mb_receipt_groups *out, json_t *const *receipts, const char *const *names, size_t n,
	mb_error *err)
{
	memset(out, 0, sizeof(*out));
	out->order = calloc(n + 1, sizeof(*out->order));
	out->groups = calloc(n + 1, sizeof(*out->groups));
	out->group_of = calloc(n + 1, sizeof(*out->group_of));
	if (!out->order || !out->groups || !out->group_of)
		return mb_error_set(err, MB_ENOMEM, "receipts", "no memory");
	mb_receipt_order(out->order, receipts, n);
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
		struct stat st;
		char *path;

		if (!json_name(e->d_name))
			continue;
		if (asprintf(&path, "%s/%s", dir, e->d_name) < 0) {
			rc = mb_error_set(err, MB_ENOMEM, dir, "no memory");
			break;
		}
		if (stat(path, &st) || !S_ISREG(st.st_mode)) {
			free(path);
			continue;
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
