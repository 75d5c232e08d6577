/* The catalog table: every row megabench knows, with its math, shapes,
 * bytes and FLOPs model, tolerances (and why) and variants. */
#include "kernels/catalog.h"

#include <stdio.h>
#include <string.h>

#include "mb_config.h"
#include "kernels/launch.h"
#include "kernels/test_rows_host.h"
#include "reference/reference.h"

#if MB_HAVE_CUDA
#define GPU_LAUNCH(fn) (fn)
#else
#define GPU_LAUNCH(fn) NULL
#endif

/* Bounds of the inputs the harness draws (see the tensor specs): normal
 * values stay under 8 in magnitude for every shape we run (P(|z| > 8) is
 * 1e-15 per element), cos and sin under 1. */
#define F32_EPS 0x1p-24 /* unit roundoff of fp32 */
#define F16_HALF_ULP 0x1p-11
#define BF16_HALF_ULP 0x1p-8

static const mb_variant reference_variant = {
	.name = "reference",
	.kind = MB_VARIANT_REFERENCE,
	.backend = "cpu",
	.description = "the fp32 C reference, timed on the host",
	.launches_per_call = 0,
	.dtype_mask = MB_DTYPE_ALL,
};

/* ---- rope_qk -------------------------------------------------------- */

enum { ROPE_T, ROPE_HQ, ROPE_HK, ROPE_D };

static int rope_check(const int64_t *axis, char *why, size_t len)
{
	if (axis[ROPE_D] % 2) {
		snprintf(why, len, "D must be even for rotate-half RoPE, got %lld", (long long)axis[ROPE_D]);
		return -1;
	}
	return 0;
}

static int rope_tensors(const int64_t *a, mb_tensor_spec *t)
{
	int64_t tok = a[ROPE_T], q = a[ROPE_HQ] * a[ROPE_D], k = a[ROPE_HK] * a[ROPE_D];

	t[0] = (mb_tensor_spec){"q", false, tok, q, MB_FILL_NORMAL, 0, 1};
	t[1] = (mb_tensor_spec){"k", false, tok, k, MB_FILL_NORMAL, 0, 1};
	t[2] = (mb_tensor_spec){"cos", false, tok, a[ROPE_D] / 2, MB_FILL_UNIFORM, -1, 1};
	t[3] = (mb_tensor_spec){"sin", false, tok, a[ROPE_D] / 2, MB_FILL_UNIFORM, -1, 1};
	t[4] = (mb_tensor_spec){"q_out", true, tok, q, MB_FILL_NORMAL, 0, 0};
	t[5] = (mb_tensor_spec){"k_out", true, tok, k, MB_FILL_NORMAL, 0, 0};
	return 6;
}

static uint64_t rope_bytes(const int64_t *a, mb_dtype dtype)
{
	uint64_t heads = (uint64_t)(a[ROPE_HQ] + a[ROPE_HK]);
	/* q and k read and written once, cos and sin read once */
	uint64_t elems = (uint64_t)a[ROPE_T] * (2 * heads * (uint64_t)a[ROPE_D] + (uint64_t)a[ROPE_D]);
	return elems * mb_dtype_size(dtype);
}

static uint64_t rope_flops(const int64_t *a)
{
	/* two multiplies and one add per output element */
	return 3ull * (uint64_t)a[ROPE_T] * (uint64_t)(a[ROPE_HQ] + a[ROPE_HK]) * (uint64_t)a[ROPE_D];
}

static const mb_row rope_qk = {
	.name = "rope_qk",
	.block = 'A',
	.status = MB_ROW_EXPERIMENTAL,
	.summary = "rotate-half RoPE on Q [T,Hq,D] and K [T,Hk,D] with per-token cos/sin [T,D/2]",
	.n_axes = 4,
	.axes = {"T", "Hq", "Hk", "D"},
	.check_shape = rope_check,
	.tensors = rope_tensors,
	.bytes = rope_bytes,
	.flops = rope_flops,
	.reference = mb_ref_rope_qk,
	.oracle = mb_oracle_rope_qk,
	.reference_name = "mb_ref_rope_qk (fp32, src/reference/rope_qk.c)",
	.source_files = {"src/kernels/rope_qk.cu", "src/reference/rope_qk.c"},
	.tolerance = {
		[MB_FP32] = {16 * F32_EPS, 4 * F32_EPS,
			"x1*c - x2*s: two products and a sum of terms under 8, at most 3 roundings of 2^-24*8 each (FMA contraction moves them, not the bound)"},
		[MB_FP16] = {16 * F32_EPS, F16_HALF_ULP + 4 * F32_EPS,
			"the fp32 result rounded once to fp16: half an ulp is 2^-11 relative, plus the fp32 bound"},
		[MB_BF16] = {16 * F32_EPS, BF16_HALF_ULP + 4 * F32_EPS,
			"the fp32 result rounded once to bf16: half an ulp is 2^-8 relative, plus the fp32 bound"},
	},
	.n_variants = 3,
	.variants = {
		{"fused", MB_VARIANT_FUSED, "cuda", "one launch rotates Q and K, sharing the cos/sin loads",
			1, {"rope_qk_fused"}, GPU_LAUNCH(mb_rope_qk_fused_launch), MB_DTYPE_ALL},
		{"fallback", MB_VARIANT_FALLBACK, "cuda",
			"plain path: separate Q and K launches, rotate-half into a temporary, then multiply-add",
			4, {"rope_rotate_half", "rope_mul_add"}, GPU_LAUNCH(mb_rope_qk_fallback_launch), MB_DTYPE_ALL},
		reference_variant,
	},
};

/* ---- residual_rmsnorm ---------------------------------------------- */

enum { RMS_T, RMS_H };

static int rms_tensors(const int64_t *a, mb_tensor_spec *t)
{
	t[0] = (mb_tensor_spec){"x", false, a[RMS_T], a[RMS_H], MB_FILL_NORMAL, 0, 1};
	t[1] = (mb_tensor_spec){"r", false, a[RMS_T], a[RMS_H], MB_FILL_NORMAL, 0, 1};
	t[2] = (mb_tensor_spec){"w", false, 1, a[RMS_H], MB_FILL_UNIFORM, 0.5f, 1.5f};
	t[3] = (mb_tensor_spec){"y", true, a[RMS_T], a[RMS_H], MB_FILL_NORMAL, 0, 0};
	t[4] = (mb_tensor_spec){"h", true, a[RMS_T], a[RMS_H], MB_FILL_NORMAL, 0, 0};
	return 5;
}

static uint64_t rms_bytes(const int64_t *a, mb_dtype dtype)
{
	/* x and r read, y and h written, w read once */
	return ((uint64_t)a[RMS_T] * 4 + 1) * (uint64_t)a[RMS_H] * mb_dtype_size(dtype);
}

static uint64_t rms_flops(const int64_t *a)
{
	/* add, square, accumulate, scale, weight: 5 per element (the rsqrt per
	 * row is noise) */
	return 5ull * (uint64_t)a[RMS_T] * (uint64_t)a[RMS_H];
}

static const mb_row residual_rmsnorm = {
	.name = "residual_rmsnorm",
	.block = 'X',
	.status = MB_ROW_EXPERIMENTAL,
	.summary = "h = x + r; y = h / sqrt(mean(h^2) + 1e-6) * w over the hidden axis; outputs y and h",
	.n_axes = 2,
	.axes = {"T", "H"},
	.check_shape = NULL,
	.tensors = rms_tensors,
	.bytes = rms_bytes,
	.flops = rms_flops,
	.reference = mb_ref_residual_rmsnorm,
	.oracle = mb_oracle_residual_rmsnorm,
	.reference_name = "mb_ref_residual_rmsnorm (fp32, pairwise sum, src/reference/residual_rmsnorm.c)",
	.source_files = {"src/kernels/residual_rmsnorm.cu", "src/reference/residual_rmsnorm.c"},
	.tolerance = {
		[MB_FP32] = {16 * F32_EPS, 64 * F32_EPS,
			"sum of squares with <= 64 sequential adds per partial (2^-24*64 relative), halved by the rsqrt, plus ~4 roundings for h, scale and weight"},
		[MB_FP16] = {16 * F32_EPS, 3 * F16_HALF_ULP + 64 * F32_EPS,
			"the plain path rounds h to fp16 before the norm: half-ulp (2^-11) on h, on the mean of h^2 (worst case), and on y"},
		[MB_BF16] = {16 * F32_EPS, 3 * BF16_HALF_ULP + 64 * F32_EPS,
			"the plain path rounds h to bf16 before the norm: half-ulp (2^-8) on h, on the mean of h^2 (worst case), and on y"},
	},
	.n_variants = 3,
	.variants = {
		{"fused", MB_VARIANT_FUSED, "cuda", "one launch: add, reduce, normalise, store y and h",
			1, {"residual_rmsnorm_fused"}, GPU_LAUNCH(mb_residual_rmsnorm_fused_launch), MB_DTYPE_ALL},
		{"fallback", MB_VARIANT_FALLBACK, "cuda", "plain path: an add launch writes h, an RMSNorm launch reads it",
			2, {"residual_add", "rmsnorm"}, GPU_LAUNCH(mb_residual_rmsnorm_fallback_launch), MB_DTYPE_ALL},
		reference_variant,
	},
};

/* ---- test-only rows ------------------------------------------------- */

enum { SCALE_N, SCALE_C };

static int scale_tensors(const int64_t *a, mb_tensor_spec *t)
{
	t[0] = (mb_tensor_spec){"x", false, a[SCALE_N], a[SCALE_C], MB_FILL_NORMAL, 0, 1};
	t[1] = (mb_tensor_spec){"y", true, a[SCALE_N], a[SCALE_C], MB_FILL_NORMAL, 0, 0};
	return 2;
}

static uint64_t scale_bytes(const int64_t *a, mb_dtype dtype)
{
	return 2ull * (uint64_t)a[SCALE_N] * (uint64_t)a[SCALE_C] * mb_dtype_size(dtype);
}

static uint64_t scale_flops(const int64_t *a)
{
	return (uint64_t)a[SCALE_N] * (uint64_t)a[SCALE_C];
}

#define SCALE_EXACT {0, 0, "doubling is exact in binary floating point: any difference is wrong"}

#define TEST_ROW(row_name, what, kernel, fn, host_fn) { \
	.name = row_name, .block = 'X', .status = MB_ROW_DROP, \
	.summary = "test only: y = 2x, " what, \
	.n_axes = 2, .axes = {"N", "C"}, .tensors = scale_tensors, .bytes = scale_bytes, \
	.flops = scale_flops, .reference = mb_ref_test_scale, .oracle = mb_oracle_test_scale, \
	.reference_name = "mb_ref_test_scale (src/reference/test_scale.c)", \
	.source_files = {"src/kernels/test_rows.cu", "src/reference/test_scale.c"}, \
	.tolerance = {SCALE_EXACT, SCALE_EXACT, SCALE_EXACT}, \
	.n_variants = 3, \
	.variants = { \
		{"fused", MB_VARIANT_FUSED, "cuda", what, 1, {kernel}, GPU_LAUNCH(fn), MB_DTYPE_ALL}, \
		{"host", MB_VARIANT_FUSED, "cpu", what " (on the host, for tests without a GPU)", 0, {NULL}, \
			host_fn, MB_DTYPE_ALL}, \
		reference_variant, \
	}, \
}

static const mb_row test_rows[] = {
	TEST_ROW("test_scale", "correct (control)", "test_scale", mb_test_scale_launch, mb_test_scale_host),
	TEST_ROW("test_wrong_element", "writes one wrong element", "test_wrong_element", mb_test_wrong_element_launch,
		mb_test_wrong_element_host),
	TEST_ROW("test_zeros", "writes zeros", "test_zeros", mb_test_zeros_launch, mb_test_zeros_host),
	TEST_ROW("test_fault", "writes to an illegal address", "test_fault", mb_test_fault_launch, mb_test_fault_host),
	TEST_ROW("test_hang", "never finishes", "test_hang", mb_test_hang_launch, mb_test_hang_host),
};

/* ---- the table ------------------------------------------------------ */

static const mb_row *const rows[] = {
	&rope_qk,
	&residual_rmsnorm,
};

static const mb_row *const rows_all[] = {
	&rope_qk,
	&residual_rmsnorm,
	&test_rows[0], &test_rows[1], &test_rows[2], &test_rows[3], &test_rows[4],
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

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
