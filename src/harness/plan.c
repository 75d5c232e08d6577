/* Expanding a loaded suite into the ordered list of cases a run executes.
 *
 * Order is part of the contract (receipts and progress lines follow it):
 * rows in file order, then families, then shapes (first axis slowest), then
 * dtypes, modes, and variants innermost, so that the variants of one shape
 * run next to each other.
 */
#include "harness/suite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/hostinfo.h"
#include "harness/suite_internal.h"

/* A plan this big is a typo in an axis list, not a benchmark. */
#define PLAN_MAX_CASES 1000000
#define PLAN_INITIAL_CAPACITY 64
/* The host holds every tensor in fp32 three times: inputs and outputs, the
 * reference's outputs, and the fp64 oracle's (rounded to fp32). */
#define HOST_COPIES 3
#define BYTES_PER_GIB (1024.0 * 1024.0 * 1024.0)

static const mb_dtype default_dtypes[] = {MB_BF16, MB_FP16, MB_FP32};

/* A comma-separated list from the command line, split in place. */
typedef struct name_list {
	char *buf;
	const char **items;
	size_t n;
	bool active;
} name_list;

static void name_list_free(name_list *l)
{
	free(l->buf);
	free(l->items);
	memset(l, 0, sizeof(*l));
}

static int name_list_parse(name_list *out, const char *text, const char *flag, mb_error *err)
{
	size_t cap = 1;
	char *tok;

	memset(out, 0, sizeof(*out));
	if (!text)
		return 0;
	for (const char *p = text; *p; p++)
		cap += *p == ',';
	out->active = true;
	out->buf = strdup(text);
	out->items = calloc(cap, sizeof(*out->items));
	if (!out->buf || !out->items)
		return mb_error_set(err, MB_ENOMEM, flag, "out of memory");
	/* strtok_r would skip empty items; an empty one is a mistake to report. */
	tok = out->buf;
	for (;;) {
		char *comma = strchr(tok, ',');
		if (comma)
			*comma = '\0';
		if (!*tok)
			return mb_error_set(err, MB_EINVAL, flag, "empty name in the list \"%s\"", text);
		out->items[out->n++] = tok;
		if (!comma)
			break;
		tok = comma + 1;
	}
	return 0;
}

static bool name_list_has(const name_list *l, const char *name)
{
	if (!l->active)
		return true;
	for (size_t i = 0; i < l->n; i++) {
		if (strcmp(l->items[i], name) == 0)
			return true;
	}
	return false;
}

/* A suite filter: NULL (absent) passes everything. */
static bool json_list_has(const json_t *list, const char *name)
{
	size_t i;
	const json_t *v;

	if (!json_is_array(list))
		return true;
	json_array_foreach(list, i, v) {
		if (json_is_string(v) && strcmp(json_string_value(v), name) == 0)
			return true;
	}
	return false;
}

typedef struct plan_filters {
	name_list rows, dtypes, variants, modes;
	const json_t *suite_rows, *suite_dtypes, *suite_variants;
} plan_filters;

static void plan_filters_free(plan_filters *f)
{
	name_list_free(&f->rows);
	name_list_free(&f->dtypes);
	name_list_free(&f->variants);
	name_list_free(&f->modes);
}

static int check_filter_names(const plan_filters *f, mb_error *err)
{
	char known[512];
	mb_dtype d;
	mb_mode m;

	for (size_t i = 0; i < f->rows.n; i++) {
		if (mb_catalog_find(f->rows.items[i]))
			continue;
		mb_catalog_names(known, sizeof(known));
		return mb_error_set(err, MB_ENOTFOUND, "--rows", "unknown row \"%s\"; known rows: %s",
			f->rows.items[i], known);
	}
	for (size_t i = 0; i < f->dtypes.n; i++) {
		if (mb_dtype_parse(f->dtypes.items[i], &d) == 0)
			continue;
		return mb_error_set(err, MB_ENOTFOUND, "--dtypes",
			"unknown dtype \"%s\"; known dtypes: %s, %s, %s", f->dtypes.items[i],
			mb_dtype_name(MB_FP32), mb_dtype_name(MB_FP16), mb_dtype_name(MB_BF16));
	}
	for (size_t i = 0; i < f->modes.n; i++) {
		if (mb_mode_parse(f->modes.items[i], &m) == 0)
			continue;
		return mb_error_set(err, MB_ENOTFOUND, "--modes",
			"unknown mode \"%s\"; known modes: %s, %s, %s", f->modes.items[i],
			mb_mode_name(MB_MODE_COLD), mb_mode_name(MB_MODE_HOT), mb_mode_name(MB_MODE_GRAPH));
	}
	for (size_t i = 0; i < f->variants.n; i++) {
		if (mb_variant_name_known(f->variants.items[i]))
			continue;
		mb_known_variants(known, sizeof(known));
		return mb_error_set(err, MB_ENOTFOUND, "--variants",
			"unknown variant \"%s\"; known variants: %s", f->variants.items[i], known);
	}
	return 0;
}

static int plan_filters_init(plan_filters *out, const mb_suite *suite,
	const mb_plan_filter *filter, mb_error *err)
{
	const json_t *sf = json_object_get(suite->doc, "filters");
	int rc;

	memset(out, 0, sizeof(*out));
	out->suite_rows = json_object_get(sf, "rows");
	out->suite_dtypes = json_object_get(sf, "dtypes");
	out->suite_variants = json_object_get(sf, "variants");
	if (!filter)
		return 0;
	rc = name_list_parse(&out->rows, filter->rows, "--rows", err);
	if (!rc)
		rc = name_list_parse(&out->dtypes, filter->dtypes, "--dtypes", err);
	if (!rc)
		rc = name_list_parse(&out->variants, filter->variants, "--variants", err);
	if (!rc)
		rc = name_list_parse(&out->modes, filter->modes, "--modes", err);
	if (!rc)
		rc = check_filter_names(out, err);
	return rc;
}

/* Everything the expansion loops share. */
typedef struct expander {
	const mb_suite *suite;
	const char *backend;
	plan_filters filters;
	mb_plan *plan;
	size_t cap;
	uint64_t host_bytes;
} expander;

static int push_case(expander *x, const mb_case_plan *c, mb_error *err)
{
	mb_case_plan *grown;

	if (x->plan->n_cases >= PLAN_MAX_CASES)
		return mb_error_set(err, MB_EINVAL, x->suite->path,
			"the suite expands into more than %d cases", PLAN_MAX_CASES);
	if (x->plan->n_cases == x->cap) {
		size_t cap = x->cap ? x->cap * 2 : PLAN_INITIAL_CAPACITY;
		grown = realloc(x->plan->cases, cap * sizeof(*grown));
		if (!grown)
			return mb_error_set(err, MB_ENOMEM, x->suite->path, "out of memory planning cases");
		x->plan->cases = grown;
		x->cap = cap;
	}
	x->plan->cases[x->plan->n_cases++] = *c;
	return 0;
}

/* On the CPU the reference is the only variant, and narrowing by variant
 * names written for GPU runs would only empty the plan; so variant filters
 * apply to the CUDA backend alone. */
static bool variant_wanted(const expander *x, const mb_variant *v, const json_t *row_variants)
{
	if (strcmp(x->backend, "cpu") == 0)
		return strcmp(v->backend, "cpu") == 0;
	if (strcmp(v->backend, "cuda") != 0 || !v->launch)
		return false;
	return json_list_has(row_variants, v->name) && json_list_has(x->filters.suite_variants, v->name)
		&& name_list_has(&x->filters.variants, v->name);
}

static int check_memory(const expander *x, const mb_row *row, const int64_t *axis,
	const char *fampath, mb_error *err)
{
	uint64_t elems = 0, bytes = 0;
	double need_bytes;
	char where[MB_ERROR_WHERE_MAX], shape[256];

	if (!x->host_bytes || mb_row_footprint(row, axis, MB_FP32, &elems, &bytes) < 0)
		return 0;
	need_bytes = (double)elems * sizeof(float) * HOST_COPIES;
	if (need_bytes <= (double)x->host_bytes)
		return 0;
	mb_suite_where(where, sizeof(where), x->suite->path, fampath);
	mb_shape_format(shape, sizeof(shape), row, axis);
	return mb_error_set(err, MB_EINVAL, where,
		"shape %s needs %.1f GiB of host memory, this machine has %.1f GiB", shape,
		need_bytes / BYTES_PER_GIB, (double)x->host_bytes / BYTES_PER_GIB);
}

static int make_case(mb_case_plan *out, const mb_row *row, const mb_variant *v, mb_dtype dtype,
	mb_mode mode, const json_t *fam, const int64_t *axis, const char *where, mb_error *err)
{
	char shape[192];
	const json_t *weight = json_object_get(fam, "weight");
	int n;

	memset(out, 0, sizeof(*out));
	out->row = row;
	out->variant = v;
	out->dtype = dtype;
	out->mode = mode;
	out->weight = json_is_number(weight) ? json_number_value(weight) : 1.0;
	out->weight_given = json_is_number(weight);
	snprintf(out->family, sizeof(out->family), "%s", json_string_value(json_object_get(fam, "name")));
	memcpy(out->axis, axis, sizeof(out->axis));
	mb_shape_format(shape, sizeof(shape), row, axis);
	n = snprintf(out->id, sizeof(out->id), "%s/%s/%s/%s/%s/%s", row->name, v->name,
		mb_dtype_name(dtype), mb_mode_name(mode), out->family, shape);
	if (n < 0 || (size_t)n >= sizeof(out->id))
		return mb_error_set(err, MB_EINVAL, where, "case id \"%s...\" is longer than %zu characters",
			out->id, sizeof(out->id) - 1);
	return 0;
}

/* One shape of one family: dtypes x modes x variants. */
static int expand_shape(expander *x, const mb_row *row, const json_t *rowv, const json_t *fam,
	const int64_t *axis, const char *fampath, mb_error *err)
{
	const json_t *dtypes = json_object_get(rowv, "dtypes");
	const json_t *row_variants = json_object_get(rowv, "variants");
	size_t n_dtypes = json_is_array(dtypes) ? json_array_size(dtypes)
		: sizeof(default_dtypes) / sizeof(default_dtypes[0]);
	const mb_settings *s = &x->suite->settings;
	char where[MB_ERROR_WHERE_MAX];
	bool memory_checked = false;
	mb_case_plan c;
	int rc = 0;

	mb_suite_where(where, sizeof(where), x->suite->path, fampath);
	for (size_t d = 0; d < n_dtypes && !rc; d++) {
		mb_dtype dtype = default_dtypes[d];
		if (json_is_array(dtypes) && mb_dtype_parse(json_string_value(json_array_get(dtypes, d)), &dtype))
			continue;
		if (!json_list_has(x->filters.suite_dtypes, mb_dtype_name(dtype)) ||
			!name_list_has(&x->filters.dtypes, mb_dtype_name(dtype)))
			continue;
		for (int m = 0; m < s->n_modes && !rc; m++) {
			if (!name_list_has(&x->filters.modes, mb_mode_name(s->modes[m])))
				continue;
			for (int v = 0; v < row->n_variants && !rc; v++) {
				if (!variant_wanted(x, &row->variants[v], row_variants))
					continue;
				if (!memory_checked) {
					rc = check_memory(x, row, axis, fampath, err);
					memory_checked = true;
				}
				if (!rc)
					rc = make_case(&c, row, &row->variants[v], dtype, s->modes[m], fam, axis,
						where, err);
				if (!rc)
					rc = push_case(x, &c, err);
			}
		}
	}
	return rc;
}

static int expand_row(expander *x, const mb_row *row, const json_t *rowv, mb_error *err)
{
	const json_t *families = json_object_get(rowv, "families");
	const json_t *fam;
	size_t i;
	char fampath[MB_ERROR_WHERE_MAX], where[MB_ERROR_WHERE_MAX];
	int64_t axis[MB_MAX_AXES] = {0};
	mb_shape_iter it;
	int rc = 0;

	json_array_foreach(families, i, fam) {
		mb_keypath_key(fampath, sizeof(fampath), "rows", row->name);
		mb_keypath_key(fampath, sizeof(fampath), fampath, "families");
		mb_keypath_index(fampath, sizeof(fampath), fampath, i);
		if (mb_family_shapes_init(&it, row, json_object_get(fam, "axes"))) {
			/* mb_suite_load checked this already; a hand-made suite may not. */
			mb_suite_where(where, sizeof(where), x->suite->path, fampath);
			return mb_error_set(err, MB_EINVAL, where, "axes do not match row %s", row->name);
		}
		while (!rc && mb_family_shapes_next(&it, axis))
			rc = expand_shape(x, row, rowv, fam, axis, fampath, err);
		if (rc)
			return rc;
	}
	return 0;
}

static void describe_filters(char *out, size_t len, const expander *x, const mb_plan_filter *f)
{
	size_t used = (size_t)snprintf(out, len, "backend %s", x->backend);
	const char *names[] = {"rows", "dtypes", "variants", "modes"};
	const char *values[] = {f ? f->rows : NULL, f ? f->dtypes : NULL, f ? f->variants : NULL,
		f ? f->modes : NULL};
	const char *suite_names[] = {"rows", "dtypes", "variants"};
	const json_t *suite_values[] = {x->filters.suite_rows, x->filters.suite_dtypes,
		x->filters.suite_variants};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && used < len; i++) {
		if (values[i])
			used += (size_t)snprintf(out + used, len - used, "; --%s=%s", names[i], values[i]);
	}
	for (size_t i = 0; i < sizeof(suite_names) / sizeof(suite_names[0]) && used < len; i++) {
		char *dumped = suite_values[i] ? json_dumps(suite_values[i], 0) : NULL;
		if (dumped)
			used += (size_t)snprintf(out + used, len - used, "; filters.%s = %s",
				suite_names[i], dumped);
		free(dumped);
	}
}

int mb_plan_build(mb_plan **out, const mb_suite *suite, const mb_plan_filter *filter,
	const char *backend, mb_error *err)
{
	expander x;
	const char *name;
	const json_t *rowv;
	char why[MB_ERROR_TEXT_MAX / 2];
	int rc;

	*out = NULL;
	memset(&x, 0, sizeof(x));
	x.suite = suite;
	x.backend = backend;
	x.host_bytes = mb_host_memory_bytes();
	if (!backend || (strcmp(backend, "cpu") != 0 && strcmp(backend, "cuda") != 0)) {
		rc = mb_error_set(err, MB_EINVAL, "backend", "unknown backend \"%s\"; known backends: cpu, cuda",
			backend ? backend : "(null)");
		goto cleanup;
	}
	rc = plan_filters_init(&x.filters, suite, filter, err);
	if (rc)
		goto cleanup;
	x.plan = calloc(1, sizeof(*x.plan));
	if (!x.plan) {
		rc = mb_error_set(err, MB_ENOMEM, suite->path, "out of memory planning cases");
		goto cleanup;
	}
	json_object_foreach(json_object_get(suite->doc, "rows"), name, rowv) {
		const mb_row *row = mb_catalog_find(name);
		if (!row || !json_list_has(x.filters.suite_rows, name) || !name_list_has(&x.filters.rows, name))
			continue;
		rc = expand_row(&x, row, rowv, err);
		if (rc)
			goto cleanup;
	}
	if (x.plan->n_cases == 0) {
		describe_filters(why, sizeof(why), &x, filter);
		rc = mb_error_set(err, MB_EINVAL, suite->path, "no case left after filters (%s)", why);
		goto cleanup;
	}
	*out = x.plan;
	x.plan = NULL;
cleanup:
	plan_filters_free(&x.filters);
	mb_plan_free(x.plan);
	return rc;
}

void mb_plan_free(mb_plan *plan)
{
	if (!plan)
		return;
	free(plan->cases);
	free(plan);
}

/* The suite's list and the command line's; both narrow, so the receipt
 * records what passes both. An empty array means "no filter". */
static int merge_filter(json_t **out, const json_t *suite_list, const char *cli, const char *flag,
	mb_error *err)
{
	name_list l;
	json_t *arr = json_array();
	size_t i;
	const json_t *v;
	int rc;

	*out = NULL;
	rc = name_list_parse(&l, cli, flag, err);
	if (!rc && !arr)
		rc = mb_error_set(err, MB_ENOMEM, flag, "out of memory");
	if (rc)
		goto cleanup;
	if (json_is_array(suite_list)) {
		json_array_foreach(suite_list, i, v) {
			if (name_list_has(&l, json_string_value(v)) && json_array_append(arr, (json_t *)v)) {
				rc = mb_error_set(err, MB_ENOMEM, flag, "out of memory");
				goto cleanup;
			}
		}
	} else {
		for (i = 0; i < l.n; i++) {
			if (json_array_append_new(arr, json_string(l.items[i]))) {
				rc = mb_error_set(err, MB_ENOMEM, flag, "out of memory");
				goto cleanup;
			}
		}
	}
	*out = arr;
	arr = NULL;
cleanup:
	name_list_free(&l);
	json_decref(arr);
	return rc;
}

int mb_plan_filters_json(json_t **out_rows, json_t **out_dtypes, json_t **out_variants,
	const mb_suite *suite, const mb_plan_filter *filter, mb_error *err)
{
	const json_t *sf = json_object_get(suite->doc, "filters");
	json_t *rows = NULL, *dtypes = NULL, *variants = NULL;
	int rc;

	*out_rows = *out_dtypes = *out_variants = NULL;
	rc = merge_filter(&rows, json_object_get(sf, "rows"), filter ? filter->rows : NULL, "--rows", err);
	if (!rc)
		rc = merge_filter(&dtypes, json_object_get(sf, "dtypes"), filter ? filter->dtypes : NULL,
			"--dtypes", err);
	if (!rc)
		rc = merge_filter(&variants, json_object_get(sf, "variants"),
			filter ? filter->variants : NULL, "--variants", err);
	if (rc)
		goto cleanup;
	*out_rows = rows;
	*out_dtypes = dtypes;
	*out_variants = variants;
	rows = dtypes = variants = NULL;
cleanup:
	json_decref(rows);
	json_decref(dtypes);
	json_decref(variants);
	return rc;
}
