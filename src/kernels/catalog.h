/* The kernel catalog: one const descriptor per row.
 *
 * A row is a computation with a fixed math definition (its fp32 C reference),
 * named shape axes, a bytes and FLOPs model, a tolerance per dtype and a list
 * of variants that compute it (fused kernel, plain fallback, vendor library,
 * the C reference itself). Everything here is const and borrowed: rows live
 * for the life of the program.
 *
 * Adding a row touches three files: src/kernels/ROW.cu (its GPU variants),
 * src/reference/ROW.c (its fp32 reference, fp64 oracle and descriptor) and
 * one MB_ROW(ROW) line in src/kernels/rows.def, from which the declarations,
 * the table (catalog.c) and the build's source lists all follow.
 */
#ifndef MB_KERNELS_CATALOG_H
#define MB_KERNELS_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/dtype.h"
#include "receipts/error.h"

#define MB_MAX_AXES 8
#define MB_MAX_TENSORS 8
#define MB_MAX_VARIANTS 8
#define MB_MAX_KERNEL_PATTERNS 4

typedef enum mb_row_status {
	MB_ROW_KEEP,
	MB_ROW_CONDITIONAL,
	MB_ROW_EXPERIMENTAL,
	MB_ROW_DROP
} mb_row_status;

/* What a row's fused kernel is for, which decides what its verdict weighs
 * (src/receipts/verdict.h): time (the default), memory (it may be slower
 * and still earn a conditional by what it saves), or both. */
typedef enum mb_row_trades {
	MB_TRADES_TIME,
	MB_TRADES_MEMORY,
	MB_TRADES_BOTH
} mb_row_trades;

typedef enum mb_variant_kind {
	MB_VARIANT_FUSED,
	MB_VARIANT_FALLBACK,
	MB_VARIANT_VENDOR,
	MB_VARIANT_REFERENCE
} mb_variant_kind;

typedef enum mb_fill {
	MB_FILL_NORMAL,  /* bell-shaped, unit variance, scaled by `hi`, |x| < 3.5 hi
	                    (harness/input_rng.h) */
	MB_FILL_UNIFORM, /* U(lo, hi) */
	MB_FILL_INDEX    /* integers uniform in [lo, hi), stored as int32 on the
	                    device whatever the case dtype (row indices) */
} mb_fill;

/* |got - want| <= abs + rel * |want| for every checked element. */
typedef struct mb_tolerance {
	double abs;
	double rel;
	const char *rationale; /* one line: why these numbers follow from the math */
} mb_tolerance;

/* Which rows of an input the reference reads to compute a sample of output
 * rows (mb_row.reads). The host makes only those rows (the device makes
 * every element), so a wrong declaration shows up as a reference reading
 * unmade (zero) inputs; tests/unit/test_inputs.c checks every row's. */
typedef enum mb_reads {
	MB_READS_AUTO,    /* an input with the outputs' row count: the sampled
	                     rows; any other input (a weight): all of it */
	MB_READS_ALL,     /* every row, whatever is sampled (a reduction over
	                     tokens, such as a weight gradient) */
	MB_READS_INDEXED  /* rows picked by an index input [B, N] (see
	                     mb_row.index_input): output row b*N + i reads
	                     row b * (rows / B) + index[b, i] */
} mb_reads;

/* One tensor of a case. Tensors are row-major [rows, row_elems]; `rows` is
 * the unit the reference may sample (tokens, usually): the first output's
 * row count is the case's row unit. */
typedef struct mb_tensor_spec {
	const char *name;
	bool is_output;
	int64_t rows;
	int64_t row_elems;
	mb_fill fill;
	float lo, hi;
} mb_tensor_spec;

/* What sets a tensor apart (mb_row.tensor_flags, by position). */
enum {
	/* stored in fp32 whatever the case dtype: an output that an fp32
	 * accumulation writes into (a weight's main-grad buffer) */
	MB_TENSOR_FP32 = 1u << 0,
	/* an output whose row count is not the unit's, checked at rows of its
	 * own (mb_sample_derived) rather than whole: the reference computes
	 * only those (a weight gradient too dear to compute whole) */
	MB_TENSOR_SAMPLED = 1u << 1,
};

/* The rows checked of a sampled output (MB_TENSOR_SAMPLED) of
 * `out_rows` rows, for the unit's sample `rows` (n_rows of them, sorted
 * and distinct): for each sampled unit row r, a row picked by a hash of r
 * (so each run's sample of the unit picks others), sorted and without
 * repeats, into `out` (room for n_rows). Returns how many. rows == NULL
 * (the unit checked whole) checks the output whole too: returns -1 and
 * writes nothing. The harness and the reference both call it, so they
 * agree on the rows without passing them. */
int64_t mb_sample_derived(const int64_t *rows, int64_t n_rows, int64_t out_rows, int64_t *out);

/* The fp32 reference: reads fp32 inputs (already rounded to the case dtype),
 * writes fp32 outputs, only for the n_rows listed rows (rows == NULL: rows
 * 0 .. n_rows-1). Inputs are always whole; rows index the outputs. */
typedef void (*mb_reference_fn)(const int64_t *axis, const float *const *in,
	float *const *out, const int64_t *rows, int64_t n_rows);

/* The same math in double precision, used to check the fp32 reference itself
 * on the CPU backend. Same contract, double outputs. */
typedef void (*mb_oracle_fn)(const int64_t *axis, const float *const *in,
	double *const *out, const int64_t *rows, int64_t n_rows);

/* A GPU launch: device pointers of the inputs then the outputs in tensor-spec
 * order, an opaque cudaStream_t. Returns 0 or a cudaError_t value. Declared
 * without CUDA types so that the catalog builds without the toolkit. */
typedef int (*mb_launch_fn)(void *stream, const int64_t *axis, mb_dtype dtype,
	const void *const *in, void *const *out);

/* What one launch of a variant moves, in its bytes model. */
typedef struct mb_launch_traffic {
	const char *kernel; /* the launch's kernel name pattern (one of the variant's) */
	uint64_t read_bytes;
	uint64_t write_bytes;
} mb_launch_traffic;

typedef struct mb_variant {
	const char *name;           /* "fused", "fallback", "cublas", "reference" */
	mb_variant_kind kind;
	const char *backend;        /* "cpu" or "cuda" */
	const char *description;
	/* What the variant declares it launches per call: kernel name substrings
	 * (matched against demangled names) and the launch count. */
	int launches_per_call;
	const char *kernel_patterns[MB_MAX_KERNEL_PATTERNS];
	mb_launch_fn launch;        /* NULL for the reference or without CUDA */
	unsigned dtype_mask;        /* bit (1u << mb_dtype) per supported dtype */
	/* A library (cuBLAS) picks some of the kernels by shape and device: the
	 * signature check then requires each declared pattern to run, accepts
	 * kernels it does not name, and takes launches_per_call as the least
	 * count (our own kernels) rather than the exact one. Its timed calls
	 * are queued without the blocker (the count is not known in advance). */
	bool library_kernels;
	/* The call waits for the device inside itself (it reads counts back to
	 * size library calls, as a framework's MoE path does): it cannot be
	 * captured in a graph or queued behind the harness's blocker, so graph
	 * mode skips it and its calls are queued one at a time. */
	bool syncs_host;
} mb_variant;

typedef struct mb_row {
	const char *name;
	char block;                 /* 'A' attention, 'M' state space, 'E' expert,
	                               'R' recurrent, 'X' cross-cutting */
	/* The promotion: a reviewed change of this line (README, the nightly
	 * gate). `megabench gate` fails when the head receipt's evidence on its
	 * device does not support it (receipts/promotion.h). */
	mb_row_status status;
	/* MB_ROW_CONDITIONAL only: the condition the row wins under, in the
	 * verdict's words ("wins at T >= 32768", "wins in isolated cases, not
	 * in every lane step"); the gate checks the verdict names the same.
	 * NULL for every other status. */
	const char *condition;
	mb_row_trades trades;
	const char *summary;
	/* GPUs one case needs; 0 or 1 for every row the case driver runs. A
	 * row across GPUs (moe_alltoall) is run by `megabench alltoall`, and
	 * `megabench run` plans it as skipped with that said. */
	int min_gpus;
	int n_axes;
	const char *axes[MB_MAX_AXES];
	/* Row-specific shape rules beyond "every axis is a positive integer"
	 * (D even, Hq a multiple of Hk...). Returns 0, or MB_EINVAL with
	 * `err`'s text saying which rule the shape breaks and its `where`
	 * empty: the caller names the suite, case or lane. */
	int (*check_shape)(const int64_t *axis, mb_error *err);
	/* Fill `out` (MB_MAX_TENSORS long); inputs first, then outputs.
	 * Returns the tensor count. */
	int (*tensors)(const int64_t *axis, mb_tensor_spec *out);
	/* The bytes model of the fused computation: each input read once,
	 * each output written once. */
	uint64_t (*bytes)(const int64_t *axis, mb_dtype dtype);
	/* The bytes model of variant `v`, launch by launch: what each launch
	 * must read and write at least (every tensor it touches, once; a
	 * fallback's intermediates count where they are written and where they
	 * are read back). Returns the launch count and fills `out` with that
	 * many entries; `out` NULL only counts them, so that a caller sizes
	 * `out` by the row and no row's launches are capped (harness/
	 * throughput.h, mb_traffic_model). The reference variant has the fused
	 * model. NULL: the row has only `bytes`, split neither by launch nor by
	 * direction. */
	int (*traffic)(const int64_t *axis, mb_dtype dtype, const struct mb_variant *v,
		struct mb_launch_traffic *out);
	uint64_t (*flops)(const int64_t *axis);
	mb_reference_fn reference;
	mb_oracle_fn oracle;
	/* Which rows of each input (by position) the reference reads; left
	 * out, MB_READS_AUTO. For MB_READS_INDEXED inputs, `index_input` is the
	 * position of the index input that picks their rows. */
	mb_reads reads[MB_MAX_TENSORS];
	int index_input;
	/* MB_TENSOR_* flags of each tensor (by position); left out, none. */
	unsigned tensor_flags[MB_MAX_TENSORS];
	const char *reference_name;  /* "mb_ref_rope_qk" */
	const char *source_files[4]; /* kernel and reference sources, repo-relative */
	mb_tolerance tolerance[MB_DTYPE_COUNT];
	int n_variants;
	mb_variant variants[MB_MAX_VARIANTS];
} mb_row;

/* The table. Borrowed, never NULL. Test-only rows (faults, wrong answers)
 * are listed only by mb_catalog_rows_all() and found by mb_catalog_find(),
 * and exist only in a test catalog (megabench-test, the test programs, or
 * megabench built with -Dtest_rows=true); elsewhere mb_catalog_rows_all()
 * lists what mb_catalog_rows() does. */
const mb_row *const *mb_catalog_rows(size_t *count);
const mb_row *const *mb_catalog_rows_all(size_t *count);
const mb_row *mb_catalog_find(const char *name);
const mb_variant *mb_row_find_variant(const mb_row *row, const char *name);
int mb_row_axis_index(const mb_row *row, const char *axis);

const char *mb_row_status_name(mb_row_status status);
/* "time", "memory", "both". */
const char *mb_row_trades_name(mb_row_trades trades);
/* Whether the row's status and condition agree: a conditional row names a
 * condition, no other row does. 0, or MB_EINVAL with `err` set (where: the
 * row's name). */
int mb_row_status_check(const mb_row *row, mb_error *err);
const char *mb_variant_kind_name(mb_variant_kind kind);
/* "rope_qk, residual_rmsnorm" for messages naming the known rows. */
void mb_catalog_names(char *buf, size_t len);

/* The dtype tensor `tensor` of the row is stored in: fp32 for an
 * MB_TENSOR_FP32 tensor, else the case's `dtype` (index tensors are int32
 * whatever this says: harness/host_inputs.h, mb_tensor_elem_bytes). */
mb_dtype mb_row_tensor_dtype(const mb_row *row, int tensor, mb_dtype dtype);

/* Total elements of all tensors, and bytes at `dtype` storage. Returns -1 on
 * 64-bit overflow. */
int mb_row_footprint(const mb_row *row, const int64_t *axis, mb_dtype dtype,
	uint64_t *out_elems, uint64_t *out_bytes);

#endif
