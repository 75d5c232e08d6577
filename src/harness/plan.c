/* Expanding a loaded suite into the ordered list of cases a run executes.
 *
 * Order is part of the contract (receipts and progress lines follow it):
 * rows in file order, then families, then shapes (first axis slowest), then
 * dtypes, modes, and variants innermost, so that the variants of one shape
 * run next to each other.
 */
#include "harness/suite.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/hostinfo.h"
#include "harness/suite_internal.h"
#include "receipts/select.h"

#define PLAN_INITIAL_CAPACITY 64
/* The host holds every tensor in fp32 three times: inputs and outputs, the
 * reference's outputs, and the fp64 oracle's (rounded to fp32). */
#define HOST_COPIES 3
#define BYTES_PER_GIB (1024.0 * 1024.0 * 1024.0)
#define BYTES_PER_KIB 1024
#define MEMINFO_PATH "/proc/meminfo"
#define MEMINFO_LINE_BYTES 256

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

/* The command line's filters, in the order a case meets them; a case left
 * out is counted against the first that refuses it, so that an empty plan
 * can say which filter emptied it. */
typedef enum stage {
	STAGE_ROWS,
	STAGE_DTYPES,
	STAGE_MODES,
	STAGE_VARIANTS,
	STAGE_FILTER,
	STAGE_EXCLUDE,
	STAGE_COUNT
} stage;

static const char *const stage_flags[STAGE_COUNT] = {"--rows", "--dtypes", "--modes", "--variants", "--filter",
	"--exclude"};

typedef struct plan_filters {
	name_list rows, dtypes, variants, modes;
	regex_t filter_re, exclude_re;
	bool have_filter, have_exclude;
	const json_t *suite_rows, *suite_dtypes, *suite_variants;
} plan_filters;

static void plan_filters_free(plan_filters *f)
{
	name_list_free(&f->rows);
	name_list_free(&f->dtypes);
	name_list_free(&f->variants);
	name_list_free(&f->modes);
	if (f->have_filter)
		regfree(&f->filter_re);
	if (f->have_exclude)
		regfree(&f->exclude_re);
	f->have_filter = f->have_exclude = false;
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
	const mb_plan_filter *filter, const mb_plan_match *match, mb_error *err)
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
	if (!rc && match)
		rc = mb_select_regcomp(&out->filter_re, &out->have_filter, match->filter, "--filter", err);
	if (!rc && match)
		rc = mb_select_regcomp(&out->exclude_re, &out->have_exclude, match->exclude, "--exclude", err);
	return rc;
}

/* Everything the expansion loops share. */
typedef struct expander {
	const mb_suite *suite;
	const char *backend;
	const mb_plan_filter *cli;
	const mb_plan_match *match;
	plan_filters filters;
	mb_plan *plan;
	size_t cap;
	/* the first pass only counts, so that a suite of millions of cases is
	 * refused before it takes memory */
	bool counting;
	size_t counted;
	uint64_t host_bytes;     /* available now (0: unknown, no check) */
	uint64_t host_total_bytes;
	/* what the filters met, for the message of an empty plan */
	size_t candidates;
	size_t dropped[STAGE_COUNT];
	unsigned dtypes_met;     /* bit per dtype among cases that reached --dtypes */
	unsigned modes_met;
	char variants_met[256];  /* variant names that reached --variants */
	char first_id[256];      /* the first id that reached --filter */
	/* cases left out for host memory: the first one's needs, for an
	 * empty plan's message */
	size_t host_skipped;
	char host_first[MB_ERROR_TEXT_MAX / 2];
} expander;

static int push_case(expander *x, const mb_case_plan *c, mb_error *err)
{
	mb_case_plan *grown;

	if (x->counted >= MB_PLAN_MAX_CASES)
		return mb_error_set(err, MB_EINVAL, x->suite->path,
			"the suite expands into more than %d cases", MB_PLAN_MAX_CASES);
	x->counted++;
	if (x->counting)
		return 0;
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

/* Whether `v` is one of the cases the suite plans on this backend, before
 * the command line narrows them. On the CPU the reference is the only
 * variant, and the suite's variant lists, written for GPU runs, would only
 * empty the plan; so they apply to the CUDA backend alone ("any" counts
 * every variant, for validation). */
static bool variant_planned(const expander *x, const mb_variant *v, const json_t *row_variants)
{
	if (strcmp(x->backend, "cpu") == 0)
		return strcmp(v->backend, "cpu") == 0;
	if (strcmp(x->backend, "any") != 0 && (strcmp(v->backend, "cuda") != 0 || !v->launch))
		return false;
	return json_list_has(row_variants, v->name) && json_list_has(x->filters.suite_variants, v->name);
}

static void note_name(char *list, size_t len, const char *name)
{
	size_t n = strlen(name), used = strlen(list);

	for (const char *p = list; (p = strstr(p, name)); p += n) {
		if ((p == list || p[-2] == ',') && (p[n] == '\0' || p[n] == ','))
			return;
	}
	if (used + n + 3 < len)
		snprintf(list + used, len - used, "%s%s", used ? ", " : "", name);
}

/* The first command-line filter that refuses the case, or STAGE_COUNT. */
static stage refused_by(expander *x, bool row_wanted, mb_dtype dtype, mb_mode mode, const mb_variant *v,
	const char *id)
{
	const plan_filters *f = &x->filters;

	if (!row_wanted)
		return STAGE_ROWS;
	x->dtypes_met |= 1u << dtype;
	if (!name_list_has(&f->dtypes, mb_dtype_name(dtype)))
		return STAGE_DTYPES;
	x->modes_met |= 1u << mode;
	if (!name_list_has(&f->modes, mb_mode_name(mode)))
		return STAGE_MODES;
	note_name(x->variants_met, sizeof(x->variants_met), v->name);
	if (!name_list_has(&f->variants, v->name))
		return STAGE_VARIANTS;
	if (!x->first_id[0])
		snprintf(x->first_id, sizeof(x->first_id), "%s", id);
	if (f->have_filter && regexec(&f->filter_re, id, 0, NULL, 0) != 0)
		return STAGE_FILTER;
	if (f->have_exclude && regexec(&f->exclude_re, id, 0, NULL, 0) == 0)
		return STAGE_EXCLUDE;
	return STAGE_COUNT;
}

/* Whether the shape's host copies fit in the memory available now; when
 * not, `need` says how much they need. Always true where the host is not
 * checked ("any": validate) or its memory is unknown. */
static bool fits_host(const expander *x, const mb_row *row, const int64_t *axis, char *need, size_t len)
{
	uint64_t elems = 0, bytes = 0;
	double need_bytes;

	if (!x->host_bytes || strcmp(x->backend, "any") == 0 || mb_row_footprint(row, axis, MB_FP32, &elems, &bytes) < 0)
		return true;
	need_bytes = (double)elems * sizeof(float) * HOST_COPIES;
	if (need_bytes <= (double)x->host_bytes)
		return true;
	snprintf(need, len, "needs %.1f GiB", need_bytes / BYTES_PER_GIB);
	return false;
}

/* A case left out for host memory: counted, and named in the plan's note
 * (the first few). */
static void skip_for_memory(expander *x, const mb_case_plan *c, const char *need)
{
	char *note = x->plan->host_note;
	size_t len = sizeof(x->plan->host_note), used = strlen(note);

	if (x->counting)
		return;
	if (!x->host_skipped++)
		snprintf(x->host_first, sizeof(x->host_first), "%s %s", c->id, need);
	if (used + strlen(c->id) + strlen(need) + 32 < len)
		snprintf(note + used, len - used, "%s%s (%s)", used ? ", " : "", c->id, need);
	else if (!strstr(note, ", ..."))
		snprintf(note + used, len - used, ", ...");
}

int mb_plan_case(mb_case_plan *out, const mb_row *row, const mb_variant *v, mb_dtype dtype, mb_mode mode,
	const char *family, const int64_t *axis, const char *where, mb_error *err)
{
	char shape[192];
	int n;

	memset(out, 0, sizeof(*out));
	out->row = row;
	out->variant = v;
	out->dtype = dtype;
	out->mode = mode;
	out->weight = 1.0;
	snprintf(out->family, sizeof(out->family), "%s", family);
	memcpy(out->axis, axis, sizeof(out->axis));
	mb_shape_format(shape, sizeof(shape), row, axis);
	n = snprintf(out->id, sizeof(out->id), "%s/%s/%s/%s/%s/%s", row->name, v->name,
		mb_dtype_name(dtype), mb_mode_name(mode), out->family, shape);
	if (n < 0 || (size_t)n >= sizeof(out->id))
		return mb_error_set(err, MB_EINVAL, where, "case id \"%s...\" is longer than %zu characters",
			out->id, sizeof(out->id) - 1);
	return 0;
}

static int make_case(mb_case_plan *out, const mb_row *row, const mb_variant *v, mb_dtype dtype,
	mb_mode mode, const json_t *fam, const int64_t *axis, const char *where, mb_error *err)
{
	const json_t *weight = json_object_get(fam, "weight");
	int rc = mb_plan_case(out, row, v, dtype, mode, json_string_value(json_object_get(fam, "name")), axis, where,
		err);

	out->weight = json_is_number(weight) ? json_number_value(weight) : 1.0;
	out->weight_given = json_is_number(weight);
	return rc;
}

/* One shape of one family: dtypes x modes x variants. */
static int expand_shape(expander *x, const mb_row *row, bool row_wanted, const json_t *rowv, const json_t *fam,
	const int64_t *axis, const char *fampath, mb_error *err)
{
	const json_t *dtypes = json_object_get(rowv, "dtypes");
	const json_t *row_variants = json_object_get(rowv, "variants");
	size_t n_dtypes = json_is_array(dtypes) ? json_array_size(dtypes)
		: sizeof(default_dtypes) / sizeof(default_dtypes[0]);
	const mb_settings *s = &x->suite->settings;
	char where[MB_ERROR_WHERE_MAX], need[64] = "";
	bool fits = fits_host(x, row, axis, need, sizeof(need));
	mb_case_plan c;
	int rc = 0;

	mb_suite_where(where, sizeof(where), x->suite->path, fampath);
	for (size_t d = 0; d < n_dtypes && !rc; d++) {
		mb_dtype dtype = default_dtypes[d];
		if (json_is_array(dtypes) && mb_dtype_parse(json_string_value(json_array_get(dtypes, d)), &dtype))
			continue;
		if (!json_list_has(x->filters.suite_dtypes, mb_dtype_name(dtype)))
			continue;
		for (int m = 0; m < s->n_modes && !rc; m++) {
			for (int v = 0; v < row->n_variants && !rc; v++) {
				stage refused;
				if (!variant_planned(x, &row->variants[v], row_variants))
					continue;
				rc = make_case(&c, row, &row->variants[v], dtype, s->modes[m], fam, axis, where, err);
				if (rc)
					break;
				x->candidates++;
				refused = refused_by(x, row_wanted, dtype, s->modes[m], &row->variants[v], c.id);
				if (refused != STAGE_COUNT) {
					x->dropped[refused]++;
					continue;
				}
				if (fits)
					rc = push_case(x, &c, err);
				else
					skip_for_memory(x, &c, need);
			}
		}
	}
	return rc;
}

static int expand_row(expander *x, const mb_row *row, bool row_wanted, const json_t *rowv, mb_error *err)
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
			rc = expand_shape(x, row, row_wanted, rowv, fam, axis, fampath, err);
		if (rc)
			return rc;
	}
	return 0;
}

static void describe_filters(char *out, size_t len, const expander *x, const mb_plan_filter *f)
{
	size_t used = (size_t)snprintf(out, len, "backend %s", x->backend);
	const char *names[] = {"rows", "dtypes", "variants", "modes", "filter", "exclude"};
	const char *values[] = {f ? f->rows : NULL, f ? f->dtypes : NULL, f ? f->variants : NULL,
		f ? f->modes : NULL, x->match ? x->match->filter : NULL, x->match ? x->match->exclude : NULL};
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

/* MemAvailable from /proc/meminfo: what a run can have without pushing
 * others out. 0 when the kernel does not say. */
static uint64_t available_memory_bytes(void)
{
	FILE *f = fopen(MEMINFO_PATH, "r");
	char line[MEMINFO_LINE_BYTES];
	unsigned long long kib = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
			break;
		kib = 0;
	}
	fclose(f);
	return (uint64_t)kib * BYTES_PER_KIB;
}

/* names in `list` (comma-separated) that are not among `have`. */
static void names_missing(char *out, size_t len, const name_list *list, const char *have)
{
	out[0] = '\0';
	for (size_t i = 0; i < list->n; i++) {
		char probe[256];
		snprintf(probe, sizeof(probe), "%s", have);
		note_name(probe, sizeof(probe), list->items[i]);
		if (strcmp(probe, have) != 0)
			note_name(out, len, list->items[i]);
	}
}

static void bits_names(char *out, size_t len, unsigned bits, bool dtypes)
{
	out[0] = '\0';
	for (int i = 0; i < (dtypes ? MB_DTYPE_COUNT : MB_MODE_COUNT); i++)
		if (bits & (1u << i))
			note_name(out, len, dtypes ? mb_dtype_name((mb_dtype)i) : mb_mode_name((mb_mode)i));
}

/* Why no case is left, when a filter of the command line removed them;
 * false when the general message has to do (the suite's own lists left
 * nothing, or --modes, which `run` turns into timing.modes). */
static bool explain_empty(const expander *x, mb_error *err)
{
	const mb_plan_filter *f = x->cli;
	char names[256], where[MB_ERROR_WHERE_MAX];
	int only = -1;

	/* Every case that passed the filters before the last one that removed
	 * any was removed by that last one: it is the one that emptied the
	 * plan, given the others. */
	for (int k = 0; k < STAGE_COUNT; k++)
		if (x->dropped[k])
			only = k;
	switch (only) {
	case STAGE_ROWS:
		snprintf(where, sizeof(where), "--rows %s", f->rows);
		mb_error_set(err, MB_EINVAL, where, "the suite %s runs none of these rows (check its [rows] and "
			"filters.rows)", x->suite->path);
		return true;
	case STAGE_DTYPES:
		bits_names(names, sizeof(names), x->dtypes_met, true);
		snprintf(where, sizeof(where), "--dtypes %s", f->dtypes);
		mb_error_set(err, MB_EINVAL, where, "the selected rows list only %s (rows.NAME.dtypes in %s; "
			"--set rows.NAME.dtypes=%s runs it anyway)", names, x->suite->path, f->dtypes);
		return true;
	case STAGE_VARIANTS:
		if (strcmp(x->backend, "cpu") == 0) {
			snprintf(where, sizeof(where), "--variants %s", f->variants);
			mb_error_set(err, MB_EINVAL, where, "the cpu backend runs only the reference variant "
				"(the fp32 C reference); fused, fallback and vendor variants need --backend cuda");
			return true;
		}
		names_missing(names, sizeof(names), &x->filters.variants, x->variants_met);
		snprintf(where, sizeof(where), "--variants %s", f->variants);
		mb_error_set(err, MB_EINVAL, where, "the selected rows have no variant %s on the %s backend "
			"(they have: %s)", names[0] ? names : f->variants, x->backend, x->variants_met);
		return true;
	case STAGE_FILTER:
		snprintf(where, sizeof(where), "--filter %s", x->match->filter);
		mb_error_set(err, MB_EINVAL, where, "matches none of the %zu case ids left by the suite and the other "
			"filters (such as %s; --list prints them all)", x->dropped[STAGE_FILTER], x->first_id);
		return true;
	case STAGE_EXCLUDE:
		snprintf(where, sizeof(where), "--exclude %s", x->match->exclude);
		mb_error_set(err, MB_EINVAL, where, "removes every one of the %zu cases left by the suite and the "
			"other filters", x->dropped[STAGE_EXCLUDE]);
		return true;
	default:
		return false;
	}
}

/* With more than one filter at work, how many cases each removed. */
static void describe_drops(char *out, size_t len, const expander *x)
{
	int stages = 0;

	for (int k = 0; k < STAGE_COUNT; k++)
		stages += x->dropped[k] > 0;
	if (stages < 2)
		return;
	for (int k = 0; k < STAGE_COUNT; k++) {
		size_t used = strlen(out);
		if (x->dropped[k] && used + 1 < len)
			snprintf(out + used, len - used, "; %s removed %zu", stage_flags[k], x->dropped[k]);
	}
}

static int expand_all(expander *x, mb_error *err)
{
	const char *name;
	const json_t *rowv;
	int rc;

	json_object_foreach(json_object_get(x->suite->doc, "rows"), name, rowv) {
		const mb_row *row = mb_catalog_find(name);
		if (!row || !json_list_has(x->filters.suite_rows, name))
			continue;
		rc = expand_row(x, row, name_list_has(&x->filters.rows, name), rowv, err);
		if (rc)
			return rc;
	}
	return 0;
}

int mb_plan_build(mb_plan **out, const mb_suite *suite, const mb_plan_filter *filter,
	const char *backend, mb_error *err)
{
	return mb_plan_build_ex(out, suite, filter, NULL, backend, err);
}

int mb_plan_build_ex(mb_plan **out, const mb_suite *suite, const mb_plan_filter *filter,
	const mb_plan_match *match, const char *backend, mb_error *err)
{
	static const mb_plan_filter no_filter;
	expander x;
	char why[MB_ERROR_TEXT_MAX / 2];
	int rc;

	*out = NULL;
	memset(&x, 0, sizeof(x));
	x.suite = suite;
	x.backend = backend;
	x.cli = filter ? filter : &no_filter;
	x.match = match;
	x.host_total_bytes = mb_host_memory_bytes();
	x.host_bytes = available_memory_bytes();
	if (!x.host_bytes)
		x.host_bytes = x.host_total_bytes;
	if (!backend || (strcmp(backend, "cpu") != 0 && strcmp(backend, "cuda") != 0 && strcmp(backend, "any") != 0)) {
		rc = mb_error_set(err, MB_EINVAL, "backend", "unknown backend \"%s\"; known backends: cpu, cuda",
			backend ? backend : "(null)");
		goto cleanup;
	}
	rc = plan_filters_init(&x.filters, suite, x.cli, match, err);
	if (rc)
		goto cleanup;
	x.plan = calloc(1, sizeof(*x.plan));
	if (!x.plan) {
		rc = mb_error_set(err, MB_ENOMEM, suite->path, "out of memory planning cases");
		goto cleanup;
	}
	x.counting = true;
	rc = expand_all(&x, err);
	if (rc)
		goto cleanup;
	if (x.counted) {
		x.plan->cases = calloc(x.counted, sizeof(*x.plan->cases));
		if (!x.plan->cases) {
			rc = mb_error_set(err, MB_ENOMEM, suite->path, "out of memory planning %zu cases", x.counted);
			goto cleanup;
		}
		x.cap = x.counted;
	}
	/* the second pass makes the cases (and names those left out) */
	x.counting = false;
	x.counted = 0;
	x.candidates = 0;
	memset(x.dropped, 0, sizeof(x.dropped));
	rc = expand_all(&x, err);
	if (rc)
		goto cleanup;
	x.plan->n_host_skipped = x.host_skipped;
	if (x.plan->n_cases == 0 && x.host_skipped) {
		rc = mb_error_set(err, MB_EINVAL, suite->path, "every case selected needs more host memory than this "
			"machine has available now (%.1f GiB of %.1f GiB): %s%s", (double)x.host_bytes / BYTES_PER_GIB,
			(double)x.host_total_bytes / BYTES_PER_GIB, x.host_first, x.host_skipped > 1 ? ", and the others" : "");
		goto cleanup;
	}
	if (x.host_skipped) {
		char names[MB_PLAN_NOTE_MAX];
		size_t used;

		memcpy(names, x.plan->host_note, sizeof(names));
		used = (size_t)snprintf(x.plan->host_note, sizeof(x.plan->host_note), "%zu case%s left out: %s more host "
			"memory than this machine has available now (%.1f GiB of %.1f GiB): ", x.host_skipped,
			x.host_skipped == 1 ? "" : "s", x.host_skipped == 1 ? "its shape needs" : "their shapes need",
			(double)x.host_bytes / BYTES_PER_GIB, (double)x.host_total_bytes / BYTES_PER_GIB);
		/* the names as far as they fit */
		for (size_t i = 0; names[i] && used + 1 < sizeof(x.plan->host_note); i++)
			x.plan->host_note[used++] = names[i];
		x.plan->host_note[used] = '\0';
	}
	if (x.plan->n_cases == 0) {
		if (x.candidates && explain_empty(&x, err)) {
			rc = MB_EINVAL;
			goto cleanup;
		}
		describe_filters(why, sizeof(why), &x, filter);
		describe_drops(why, sizeof(why), &x);
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

/* Whether the backend runs a variant of this name in some row ("any"
 * runs them all). */
static bool backend_has_variant(const char *backend, const char *name)
{
	size_t n_rows;
	const mb_row *const *rows = mb_catalog_rows(&n_rows);

	if (strcmp(backend, "any") == 0)
		return mb_variant_name_known(name);
	for (size_t r = 0; r < n_rows; r++) {
		const mb_variant *v = mb_row_find_variant(rows[r], name);
		if (v && strcmp(v->backend, backend) == 0)
			return true;
	}
	return false;
}

/* Drop the names `backend` cannot run from the array `list`. */
static void keep_applicable(json_t *list, const char *backend)
{
	for (size_t i = json_array_size(list); i-- > 0;)
		if (!backend_has_variant(backend, json_string_value(json_array_get(list, i))))
			json_array_remove(list, i);
}

int mb_plan_filters_json(json_t **out_rows, json_t **out_dtypes, json_t **out_variants,
	const mb_suite *suite, const mb_plan_filter *filter, mb_error *err)
{
	return mb_plan_filters_json_on(out_rows, out_dtypes, out_variants, suite, filter, NULL, err);
}

int mb_plan_filters_json_on(json_t **out_rows, json_t **out_dtypes, json_t **out_variants,
	const mb_suite *suite, const mb_plan_filter *filter, const char *backend, mb_error *err)
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
		rc = merge_filter(&variants, backend && strcmp(backend, "cpu") == 0 ? NULL
			: json_object_get(sf, "variants"), filter ? filter->variants : NULL, "--variants", err);
	if (rc)
		goto cleanup;
	/* the cpu backend runs the reference whatever the lists say: record
	 * only what applied */
	if (backend)
		keep_applicable(variants, backend);
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

void mb_plan_ignored_variants(char *out, size_t len, const mb_suite *suite, const mb_plan_filter *filter,
	const char *backend)
{
	const json_t *sf = json_object_get(suite->doc, "filters");
	const json_t *v;
	const char *name;
	const json_t *rowv;
	name_list l;
	size_t i;

	out[0] = '\0';
	if (name_list_parse(&l, filter ? filter->variants : NULL, "--variants", NULL) == 0) {
		for (i = 0; i < l.n; i++)
			if (!backend_has_variant(backend, l.items[i]))
				note_name(out, len, l.items[i]);
	}
	name_list_free(&l);
	if (strcmp(backend, "cpu") != 0)
		return;
	/* on the cpu backend the suite's own variant lists do not apply either */
	json_array_foreach(json_object_get(sf, "variants"), i, v)
		if (!backend_has_variant(backend, json_string_value(v)))
			note_name(out, len, json_string_value(v));
	json_object_foreach(json_object_get(suite->doc, "rows"), name, rowv)
		json_array_foreach(json_object_get(rowv, "variants"), i, v)
			if (!backend_has_variant(backend, json_string_value(v)))
				note_name(out, len, json_string_value(v));
}
