/* Every row descriptor, each defined beside its reference in
 * src/reference/ROW.c. Generated from the table in kernels/rows.def:
 * adding a row adds no line here. */
#ifndef MB_KERNELS_ROWS_H
#define MB_KERNELS_ROWS_H

#include "kernels/catalog.h"

#define MB_ROW(name) extern const mb_row mb_row_##name;
#include "kernels/rows.def"
#undef MB_ROW

#endif
