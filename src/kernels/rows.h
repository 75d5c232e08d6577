/* Every row descriptor, each defined beside its reference in
 * src/reference/ROW.c and listed in the table in catalog.c. Adding a row:
 * one line here, one in the list of catalog.c. */
#ifndef MB_KERNELS_ROWS_H
#define MB_KERNELS_ROWS_H

#include "kernels/catalog.h"

extern const mb_row mb_row_rope_qk;
extern const mb_row mb_row_rope_qk_bwd;
extern const mb_row mb_row_mla_partial_rope;
extern const mb_row mb_row_residual_rmsnorm;
extern const mb_row mb_row_residual_rmsnorm_bwd;
extern const mb_row mb_row_relu2;
extern const mb_row mb_row_swiglu;
extern const mb_row mb_row_row_gather;
extern const mb_row mb_row_row_gather_pair;

/* test only: y = 2x, correct or broken in one way each */
#define MB_TEST_ROWS 5
extern const mb_row mb_test_rows[MB_TEST_ROWS];

#endif
