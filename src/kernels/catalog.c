/* The catalog table: every row megabench knows, with its math, shapes,
 * bytes and FLOPs model, tolerances (and why) and variants.
 *
 * Compiled twice: into the product catalog, and with MB_CATALOG_TEST_ROWS=1
 * into the test catalog that adds the test-only rows (megabench-test, the
 * test programs, and megabench itself with -Dtest_rows=true). */
#include "kernels/catalog.h"
#include "kernels/rows.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MB_CATALOG_TEST_ROWS
#define MB_CATALOG_TEST_ROWS 0
#endif

#if MB_CATALOG_TEST_ROWS
#include "kernels/test_rows_host.h"
#endif

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---- the table ------------------------------------------------------ */

/* One entry per line of kernels/rows.def, in its order; each descriptor
 * lives beside its reference (src/reference/ROW.c). Adding a row adds no
 * line here. */
#define MB_ROW(name) &mb_row_##name,

static const mb_row *const rows[] = {
#include "kernels/rows.def"
};

#if MB_CATALOG_TEST_ROWS
/* The test-only rows come last, listed only by mb_catalog_rows_all(). */
static const mb_row *const rows_all[] = {
#include "kernels/rows.def"
	&mb_test_rows[0], &mb_test_rows[1], &mb_test_rows[2], &mb_test_rows[3], &mb_test_rows[4],
};

_Static_assert(COUNT(rows_all) == COUNT(rows) + MB_TEST_ROWS, "rows_all must list every one of mb_test_rows");
#else
/* Without test rows, --all lists what the plain listing does. */
#define rows_all rows
#endif

#undef MB_ROW

const mb_row *const *mb_catalog_rows(size_t *count)
{
	*count = COUNT(rows);
	return rows;
}

const mb_row *const *mb_catalog_rows_all(size_t *count)
{
	*count = COUNT(rows_all);
	return rows_all;
}

const mb_row *mb_catalog_find(const char *name)
{
	for (size_t i = 0; name && i < COUNT(rows_all); i++) {
		if (strcmp(rows_all[i]->name, name) == 0)
			return rows_all[i];
	}
	return NULL;
}

const mb_variant *mb_row_find_variant(const mb_row *row, const char *name)
{
	for (int i = 0; name && i < row->n_variants; i++) {
		if (strcmp(row->variants[i].name, name) == 0)
			return &row->variants[i];
	}
	return NULL;
}

int mb_row_axis_index(const mb_row *row, const char *axis)
{
	for (int i = 0; axis && i < row->n_axes; i++) {
		if (strcmp(row->axes[i], axis) == 0)
			return i;
	}
	return -1;
}

const char *mb_row_status_name(mb_row_status status)
{
	static const char *const names[] = {"keep", "conditional", "experimental", "drop"};

	return (unsigned)status < COUNT(names) ? names[status] : "?";
}

const char *mb_row_trades_name(mb_row_trades trades)
{
	static const char *const names[] = {"time", "memory", "both"};

	return (unsigned)trades < COUNT(names) ? names[trades] : "?";
}

int mb_row_status_check(const mb_row *row, mb_error *err)
{
	bool conditional = row->status == MB_ROW_CONDITIONAL;
	bool named = row->condition && *row->condition;

	if (conditional == named)
		return 0;
	return mb_error_set(err, MB_EINVAL, row->name, "status %s %s", mb_row_status_name(row->status),
		conditional ? "needs a named condition (.condition)" : "takes no condition (only conditional does)");
}

const char *mb_variant_kind_name(mb_variant_kind kind)
{
	static const char *const names[] = {"fused", "fallback", "vendor", "reference"};

	return (unsigned)kind < COUNT(names) ? names[kind] : "?";
}

void mb_catalog_names(char *buf, size_t len)
{
	size_t used = 0;

	if (!len)
		return;
	buf[0] = '\0';
	for (size_t i = 0; i < COUNT(rows) && used < len; i++) {
		int n = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", rows[i]->name);
		if (n < 0)
			break;
		used += (size_t)n;
	}
}

mb_dtype mb_row_tensor_dtype(const mb_row *row, int tensor, mb_dtype dtype)
{
	return tensor >= 0 && tensor < MB_MAX_TENSORS && (row->tensor_flags[tensor] & MB_TENSOR_FP32) ? MB_FP32 : dtype;
}

/* ---- the rows of a sampled output ------------------------------------ */

/* splitmix64's finaliser: a bijection of 64-bit words that mixes every
 * input bit into every output bit. */
static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

int64_t mb_sample_derived(const int64_t *sample, int64_t n_rows, int64_t out_rows, int64_t *out)
{
	int64_t n = 0;

	if (sample == NULL)
		return -1;
	if (out_rows <= 0)
		return 0;
	for (int64_t i = 0; i < n_rows; i++)
		out[i] = (int64_t)(mix64((uint64_t)sample[i]) % (uint64_t)out_rows);
	qsort(out, (size_t)n_rows, sizeof(*out), cmp_i64);
	for (int64_t i = 0; i < n_rows; i++) {
		if (n == 0 || out[i] != out[n - 1])
			out[n++] = out[i];
	}
	return n;
}

static int mul_overflows(uint64_t a, uint64_t b, uint64_t *out)
{
	return __builtin_mul_overflow(a, b, out);
}

int mb_row_footprint(const mb_row *row, const int64_t *axis, mb_dtype dtype,
	uint64_t *out_elems, uint64_t *out_bytes)
{
	mb_tensor_spec spec[MB_MAX_TENSORS];
	uint64_t total = 0, n, bytes;
	int count;

	/* every axis product the row's models compute must fit: check the
	 * product of all axes first, which bounds each tensor's element count */
	n = 1;
	for (int i = 0; i < row->n_axes; i++) {
		if (axis[i] <= 0 || mul_overflows(n, (uint64_t)axis[i], &n) || n > INT64_MAX)
			return -1;
	}
	count = row->tensors(axis, spec);
	for (int i = 0; i < count; i++) {
		if (mul_overflows((uint64_t)spec[i].rows, (uint64_t)spec[i].row_elems, &n)
			|| __builtin_add_overflow(total, n, &total))
			return -1;
	}
	if (mul_overflows(total, mb_dtype_size(dtype), &bytes) || total > INT64_MAX / 8)
		return -1;
	*out_elems = total;
	*out_bytes = bytes;
	return 0;
}
