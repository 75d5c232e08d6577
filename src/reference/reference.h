/* fp32 C references and fp64 oracles, one pair per catalog row, named
 * mb_ref_ROW and mb_oracle_ROW. Contracts: see mb_reference_fn and
 * mb_oracle_fn in kernels/catalog.h. */
#ifndef MB_REFERENCE_REFERENCE_H
#define MB_REFERENCE_REFERENCE_H

#include <stdbool.h>
#include <stdint.h>

#define MB_DECLARE_REFERENCE(name) \
	void mb_ref_##name(const int64_t *axis, const float *const *in, float *const *out, \
		const int64_t *rows, int64_t n_rows); \
	void mb_oracle_##name(const int64_t *axis, const float *const *in, double *const *out, \
		const int64_t *rows, int64_t n_rows)

/* One pair per line of kernels/rows.def, defined in src/reference/ROW.c
 * (the row's descriptor gives its axes and tensors): adding a row adds no
 * line here. */
#define MB_ROW(name) MB_DECLARE_REFERENCE(name);
#include "kernels/rows.def"
#undef MB_ROW

/* The test-only rows' y = 2x on axes N, C (src/reference/test_scale.c,
 * built only into test catalogs; see kernels/test_rows_host.h). */
MB_DECLARE_REFERENCE(test_scale);

/* Which product linear_cross_entropy's reference computes its forward
 * GEMM with on this host, for inputs that hold bf16 values (`bf16`) or
 * not: "amx-bf16", "avx512-bf16", "avx2-fma" or "portable"
 * (src/reference/linear_cross_entropy.c says what each is). */
const char *mb_ref_linear_cross_entropy_forward(bool bf16);

/* The RMSNorm epsilon every variant must use. */
#define MB_RMSNORM_EPS 1e-6

/* The row index of the i-th checked row. */
static inline int64_t mb_ref_row(const int64_t *rows, int64_t i)
{
	return rows ? rows[i] : i;
}

#endif
