#include "receipts/noise_floor.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "receipts/text.h"

/* Written floors are rounded up to this many decimals (0.0001 = 0.01%). */
#define TOML_DECIMALS 4
#define TOML_SCALE 1e4
#define REASONS_MAX 1024

static void differ(char *reasons, size_t len, const char *field, const char *a, const char *b)
{
	mb_text_appendf(reasons, len, "%s%s differs (%s vs %s)", reasons[0] ? "; " : "", field, a, b);
}

static void differ_json(char *reasons, size_t len, const char *field, const json_t *a, const json_t *b)
{
	char *ta, *tb;

	if ((!a && !b) || (a && b && json_equal(a, b)))
		return;
	ta = a ? json_dumps(a, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
	tb = b ? json_dumps(b, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
	differ(reasons, len, field, ta ? ta : "absent", tb ? tb : "absent");
	free(ta);
	free(tb);
}

/* The blob id `sources` lists for `path`, or NULL. */
static const json_t *blob_of(const json_t *sources, const char *path)
{
	size_t i;
	json_t *s;

	json_array_foreach(sources, i, s)
		if (!strcmp(mb_text_get(s, "path"), path))
			return json_object_get(s, "blob_id");
	return NULL;
}

/* The first source whose blob differs or that one side lacks, into reasons. */
static void sources_differ(char *reasons, size_t len, const json_t *sa, const json_t *sb)
{
	const json_t *pairs[2][2] = {{sa, sb}, {sb, sa}};

	for (int k = 0; k < 2; k++) {
		size_t i;
		json_t *s;

		json_array_foreach(pairs[k][0], i, s) {
			const char *path = mb_text_get(s, "path");
			const json_t *other = blob_of(pairs[k][1], path);

			if (!other || !json_equal(other, json_object_get(s, "blob_id"))) {
				mb_text_appendf(reasons, len, "%sprovenance.sources differ (%s: %s)", reasons[0] ? "; " : "",
					path, other ? "another blob" : "listed on one side only");
				return;
			}
		}
	}
}

bool mb_noise_floor_alike(const json_t *a, const json_t *b, char *reasons, size_t len)
{
	static const char *const build_keys[] = {"c_compiler", "cxx_compiler", "cuda_compiler", "c_args",
		"cuda_args", "cuda_archs", "buildtype", "features"};
	const json_t *pa = json_object_get(a, "provenance"), *pb = json_object_get(b, "provenance");
	const json_t *sa = json_object_get(a, "settings"), *sb = json_object_get(b, "settings");
	const json_t *ba = json_object_get(a, "build"), *bb = json_object_get(b, "build");
	size_t before = strlen(reasons);

	if (strcmp(mb_text_get(a, "backend"), mb_text_get(b, "backend")))
		differ(reasons, len, "backend", mb_text_get(a, "backend"), mb_text_get(b, "backend"));
	if (strcmp(mb_text_get(json_object_get(a, "device"), "name"), mb_text_get(json_object_get(b, "device"), "name")))
		differ(reasons, len, "device.name", mb_text_get(json_object_get(a, "device"), "name"),
			mb_text_get(json_object_get(b, "device"), "name"));
	if (strcmp(mb_text_get(json_object_get(a, "suite"), "name"), mb_text_get(json_object_get(b, "suite"), "name")))
		differ(reasons, len, "suite.name", mb_text_get(json_object_get(a, "suite"), "name"),
			mb_text_get(json_object_get(b, "suite"), "name"));
	differ_json(reasons, len, "settings.modes", json_object_get(sa, "modes"), json_object_get(sb, "modes"));
	differ_json(reasons, len, "settings.warmup", json_object_get(sa, "warmup"), json_object_get(sb, "warmup"));
	if (!json_is_true(json_object_get(pa, "available")) || !json_is_true(json_object_get(pb, "available"))) {
		/* without provenance nothing says the code was the same */
		mb_text_appendf(reasons, len, "%sprovenance unavailable on %s", reasons[0] ? "; " : "",
			!json_is_true(json_object_get(pa, "available")) ? "the first" : "the second");
	} else {
		if (strcmp(mb_text_get(pa, "commit"), mb_text_get(pb, "commit")))
			differ(reasons, len, "provenance.commit", mb_text_get(pa, "commit"), mb_text_get(pb, "commit"));
		sources_differ(reasons, len, json_object_get(pa, "sources"), json_object_get(pb, "sources"));
	}
	for (size_t k = 0; k < sizeof(build_keys) / sizeof(build_keys[0]); k++) {
		char field[64];

		snprintf(field, sizeof(field), "build.%s", build_keys[k]);
		differ_json(reasons, len, field, json_object_get(ba, build_keys[k]), json_object_get(bb, build_keys[k]));
	}
	return strlen(reasons) == before;
}

static const json_t *find_case(const json_t *receipt, const char *id)
{
	size_t i;
	json_t *c;

	json_array_foreach(json_object_get(receipt, "cases"), i, c)
		if (!strcmp(mb_text_get(c, "id"), id))
			return c;
	return NULL;
}

/* The case's median, or NaN when it is not ok or has none. */
static double case_median(const json_t *c)
{
	double m = json_number_value(json_object_get(json_object_get(c, "timing"), "median_ns"));

	return c && !strcmp(mb_text_get(c, "status"), "ok") && m > 0.0 ? m : NAN;
}

static mb_noise_floor_row *row_slot(mb_noise_floor *nf, const char *row, size_t cap, mb_error *err)
{
	for (size_t i = 0; i < nf->n_rows; i++)
		if (!strcmp(nf->rows[i].row, row))
			return &nf->rows[i];
	if (nf->n_rows == cap) {
		mb_error_set(err, MB_EINVAL, row, "more rows than cases");
		return NULL;
	}
	nf->rows[nf->n_rows].row = strdup(row);
	if (!nf->rows[nf->n_rows].row) {
		mb_error_set(err, MB_ENOMEM, row, "no memory");
		return NULL;
	}
	return &nf->rows[nf->n_rows++];
}

/* Every case of receipt i against the same case of receipt j. */
static int add_pair(mb_noise_floor *nf, json_t *const *receipts, size_t i, size_t j, size_t cap, mb_error *err)
{
	size_t k;
	json_t *c;

	json_array_foreach(json_object_get(receipts[i], "cases"), k, c) {
		double a = case_median(c), b = case_median(find_case(receipts[j], mb_text_get(c, "id"))), dev;
		mb_noise_floor_row *r;

		if (isnan(a) || isnan(b))
			continue;
		if (!(r = row_slot(nf, mb_text_get(c, "row"), cap, err)))
			return err ? err->code : MB_ENOMEM;
		dev = fmax(b / a, a / b) - 1.0;
		r->n_deviations++;
		if (r->n_deviations == 1 || dev > r->max_deviation) {
			r->max_deviation = dev;
			snprintf(r->worst_case, sizeof(r->worst_case), "%s", mb_text_get(c, "id"));
			r->worst_a = i;
			r->worst_b = j;
		}
	}
	return 0;
}

int mb_noise_floor_compute(mb_noise_floor *out, json_t *const *receipts, const char *const *names, size_t n,
	mb_error *err)
{
	size_t cap;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (n < 2)
		return mb_error_set(err, MB_EINVAL, "noise-floor", "need at least two receipts of one revision, got %zu", n);
	for (size_t i = 1; i < n; i++) {
		char reasons[REASONS_MAX] = "";

		if (!mb_noise_floor_alike(receipts[0], receipts[i], reasons, sizeof(reasons)))
			return mb_error_set(err, MB_EINVAL, names[i], "not an A/A run of %s: %s", names[0], reasons);
	}
	cap = json_array_size(json_object_get(receipts[0], "cases"));
	out->rows = calloc(cap ? cap : 1, sizeof(*out->rows));
	if (!out->rows) {
		rc = mb_error_set(err, MB_ENOMEM, "noise-floor", "no memory for rows");
		goto cleanup;
	}
	out->n_receipts = n;
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++) {
			if ((rc = add_pair(out, receipts, i, j, cap, err)))
				goto cleanup;
			out->n_pairs++;
		}
	for (size_t r = 0; r < out->n_rows; r++) {
		out->rows[r].floor = MB_NOISE_FLOOR_SAFETY * out->rows[r].max_deviation;
		out->floor = fmax(out->floor, out->rows[r].floor);
	}
cleanup:
	if (rc)
		mb_noise_floor_free(out);
	return rc;
}

/* Rounded up to TOML_DECIMALS, so that the written floor is never below
 * the computed one. */
static double round_up(double v)
{
	return ceil(v * TOML_SCALE - 1e-9) / TOML_SCALE;
}

int mb_noise_floor_print_toml(FILE *out, const mb_noise_floor *nf, json_t *const *receipts,
	const char *const *names, mb_error *err)
{
	const json_t *first = receipts[0];
	const json_t *prov = json_object_get(first, "provenance");

	fprintf(out, "# megabench noise-floor: %zu receipts (%zu pairs) of %s%s, %s backend on %s, suite %s\n",
		nf->n_receipts, nf->n_pairs, mb_text_get(prov, "commit"),
		json_is_true(json_object_get(prov, "dirty")) ? " (dirty tree, same sources)" : "",
		mb_text_get(first, "backend"), mb_text_get(json_object_get(first, "device"), "name"),
		mb_text_get(json_object_get(first, "suite"), "name"));
	fprintf(out, "# per row: %.1f x the largest max(r, 1/r) - 1 of case medians over every pair\n",
		MB_NOISE_FLOOR_SAFETY);
	fprintf(out, "# the top level: the largest row floor, for rows these receipts did not run\n");
	fprintf(out, "noise_floor = %.*f\n", TOML_DECIMALS, round_up(nf->floor));
	for (size_t r = 0; r < nf->n_rows; r++) {
		const mb_noise_floor_row *row = &nf->rows[r];

		fprintf(out, "\n# largest: %.2f%% over %zu case pairs, at %s (%s vs %s)\n", 100.0 * row->max_deviation,
			row->n_deviations, row->worst_case, names[row->worst_a], names[row->worst_b]);
		fprintf(out, "[rows.%s]\nnoise_floor = %.*f\n", row->row, TOML_DECIMALS, round_up(row->floor));
	}
	return ferror(out) ? mb_error_set(err, MB_EIO, "noise-floor", "write failed") : 0;
}

void mb_noise_floor_free(mb_noise_floor *nf)
{
	if (!nf)
		return;
	for (size_t i = 0; nf->rows && i < nf->n_rows; i++)
		free(nf->rows[i].row);
	free(nf->rows);
	memset(nf, 0, sizeof(*nf));
}
