/* Helpers that suite.c (loading and checking) and plan.c (expansion) share.
 * Private to the harness: nothing outside those two files includes this. */
#ifndef MB_HARNESS_SUITE_INTERNAL_H
#define MB_HARNESS_SUITE_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/catalog.h"

/* TOML key paths for messages: parent.key (quoted when not bare) and
 * parent[index]. `out` may be the same buffer as `parent`. */
void mb_keypath_key(char *out, size_t len, const char *parent, const char *key);
void mb_keypath_index(char *out, size_t len, const char *parent, size_t index);
/* "PATH: keypath", or "PATH: (top level)" for the empty key path. */
void mb_suite_where(char *out, size_t len, const char *path, const char *keypath);

/* "T=8,Hq=4,Hk=2,D=64", axes in row order. */
void mb_shape_format(char *out, size_t len, const mb_row *row, const int64_t *axis);

/* The shapes of one family: the cartesian product of its axis values, axes
 * in the order the file gives them, the first axis turning slowest. The
 * iterator borrows `axes` (a validated family's "axes" object). */
typedef struct mb_shape_iter {
	const mb_row *row;
	int n_axes;
	int order[MB_MAX_AXES];          /* file position -> row axis index */
	const json_t *values[MB_MAX_AXES];
	size_t count[MB_MAX_AXES];
	size_t pos[MB_MAX_AXES];
	uint64_t total;
	bool started;
} mb_shape_iter;

/* MB_EINVAL when an axis is not the row's or the family has too many shapes. */
int mb_family_shapes_init(mb_shape_iter *it, const mb_row *row, const json_t *axes);
/* Fill `axis` (row order) with the next shape; false when done. */
bool mb_family_shapes_next(mb_shape_iter *it, int64_t *axis);

/* Whether any catalog row has a variant of this name. */
bool mb_variant_name_known(const char *name);
/* "fused, fallback, reference": every variant name of the catalog, once. */
void mb_known_variants(char *out, size_t len);

#endif
