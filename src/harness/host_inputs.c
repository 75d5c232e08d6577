/* Host tensors from the counter-based generator; see host_inputs.h. */
#include "harness/host_inputs.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "reference/parallel.h"

/* Work is handed out in pieces of about this many elements, so that the
 * split does not depend on the thread count (nor, therefore, the values:
 * they never do, each element being a function of its index). */
#define PIECE_ELEMS (1u << 20)
#define MAX_THREADS 32
/* A twin is made while the device times another shape, and the thread
 * that feeds the device must keep a core: it takes half of them. */
#define ALL_CORES 1.0
#define TWIN_CORES 0.5

/* ---- mapped arrays ------------------------------------------------------ */

/* A full-size array whose pages cost nothing until written: a twin writes
 * only the rows the reference reads. */
static void *map_array(uint64_t n, size_t elem)
{
	size_t bytes = (size_t)(n ? n : 1) * elem;
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static void unmap_array(void *p, uint64_t n, size_t elem)
{
	if (p)
		munmap(p, (size_t)(n ? n : 1) * elem);
}

/* ---- generation ------------------------------------------------------- */

mb_input_params mb_input_params_for(const mb_tensor_spec *spec, int tensor, uint64_t seed)
{
	mb_input_params p = {mb_input_key(seed, tensor), (int)spec->fill, spec->lo, spec->hi};

	return p;
}

/* Rows [from, to) of `rows` (NULL: the rows themselves), `width` elements
 * each, or for a flat fill the element range [from, to) (width 0). */
typedef struct fill_job {
	float *dst;
	const int64_t *rows;
	int64_t n_items, width, per_piece;
	mb_input_params p;
	mb_dtype dtype;
	int64_t next; /* taken with __atomic_fetch_add */
} fill_job;

static void fill_elems(const fill_job *job, uint64_t begin, uint64_t end)
{
	const mb_dtype dtype = job->dtype;
#define HOST_ROUND(x) mb_dtype_round(dtype, (x))
	for (uint64_t i = begin; i < end; i++)
		MB_INPUT_VALUE(job->dst[i], &job->p, i, HOST_ROUND);
#undef HOST_ROUND
}

static void fill_piece(const fill_job *job, int64_t piece)
{
	int64_t from = piece * job->per_piece, to = from + job->per_piece;

	if (to > job->n_items)
		to = job->n_items;
	if (job->width == 0) {
		fill_elems(job, (uint64_t)from, (uint64_t)to);
		return;
	}
	for (int64_t k = from; k < to; k++) {
		uint64_t r = (uint64_t)(job->rows ? job->rows[k] : k);
		fill_elems(job, r * (uint64_t)job->width, (r + 1) * (uint64_t)job->width);
	}
}

static void *fill_worker(void *arg)
{
	fill_job *job = arg;
	int64_t pieces = (job->n_items + job->per_piece - 1) / job->per_piece;

	for (;;) {
		int64_t piece = __atomic_fetch_add(&job->next, 1, __ATOMIC_RELAXED);
		if (piece >= pieces)
			return NULL;
		fill_piece(job, piece);
	}
}

/* `share` of the host's cores work on the job (the calling thread among
 * them). */
static void fill_run(fill_job *job, double share)
{
	pthread_t threads[MAX_THREADS];
	long cpus = (long)(share * (double)mb_cpus_usable());
	int64_t pieces = (job->n_items + job->per_piece - 1) / job->per_piece;
	int64_t n_threads = cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : cpus;
	int started = 0;

	if (n_threads > pieces)
		n_threads = pieces;
	/* the calling thread works too; a thread that cannot start only means
	 * fewer hands */
	for (int64_t i = 1; i < n_threads; i++) {
		if (pthread_create(&threads[started], NULL, fill_worker, job) == 0)
			started++;
	}
	fill_worker(job);
	for (int i = 0; i < started; i++)
		pthread_join(threads[i], NULL);
}

void mb_host_fill(float *dst, uint64_t n, const mb_input_params *p, mb_dtype dtype)
{
	fill_job job = {dst, NULL, (int64_t)n, 0, PIECE_ELEMS, *p, dtype, 0};

	fill_run(&job, ALL_CORES);
}

/* Rows `rows[0 .. n)` (NULL: 0 .. n-1) of a [*, width] tensor. */
static void fill_rows(float *dst, const int64_t *rows, int64_t n, int64_t width, const mb_input_params *p,
	mb_dtype dtype)
{
	int64_t per_piece = width >= (int64_t)PIECE_ELEMS ? 1 : (int64_t)PIECE_ELEMS / width;
	fill_job job = {dst, rows, n, width, per_piece, *p, dtype, 0};

	fill_run(&job, TWIN_CORES);
}

/* ---- whole tensors and twins ------------------------------------------- */

int64_t mb_host_unit_rows(const mb_host_tensors *t)
{
	return t->n_inputs < t->n_tensors ? t->spec[t->n_inputs].rows : 0;
}

int mb_output_rows(int64_t **out, int64_t *out_n, const mb_row *row, int tensor, const mb_tensor_spec *spec,
	const int64_t *rows, int64_t n_rows, int64_t unit_rows)
{
	int64_t *list = NULL, n;

	*out = NULL;
	*out_n = spec->rows;
	if (spec->rows == unit_rows) {
		*out_n = n_rows;
		if (rows == NULL)
			return 0;
	} else if (!(row->tensor_flags[tensor] & MB_TENSOR_SAMPLED) || rows == NULL) {
		return 0; /* whole */
	}
	list = malloc((size_t)(n_rows > 0 ? n_rows : 1) * sizeof(*list));
	if (!list)
		return -1;
	if (spec->rows == unit_rows) {
		memcpy(list, rows, (size_t)n_rows * sizeof(*list));
		n = n_rows;
	} else {
		n = mb_sample_derived(rows, n_rows, spec->rows, list);
	}
	*out = list;
	*out_n = n;
	return 0;
}

static int alloc_tensor(mb_host_tensors *t, int i, const mb_case_plan *plan, mb_error *err)
{
	t->data[i] = map_array(t->elems[i], sizeof(float));
	if (!t->data[i])
		return mb_error_set(err, MB_ENOMEM, plan->id, "cannot map %llu bytes for tensor %s",
			(unsigned long long)(t->elems[i] * sizeof(float)), t->spec[i].name);
	return 0;
}

static int tensors_init(mb_host_tensors *out, const mb_case_plan *plan)
{
	memset(out, 0, sizeof(*out));
	out->n_tensors = plan->row->tensors(plan->axis, out->spec);
	for (int i = 0; i < out->n_tensors; i++) {
		out->elems[i] = (uint64_t)out->spec[i].rows * (uint64_t)out->spec[i].row_elems;
		if (!out->spec[i].is_output)
			out->n_inputs = i + 1;
	}
	return 0;
}

int mb_host_tensors_alloc(mb_host_tensors *out, const mb_case_plan *plan, mb_error *err)
{
	int rc = tensors_init(out, plan);

	for (int i = 0; rc == 0 && i < out->n_tensors; i++)
		rc = alloc_tensor(out, i, plan, err);
	if (rc)
		mb_host_tensors_free(out);
	else
		mb_host_tensors_poison(out);
	return rc;
}

int mb_host_tensors_make(mb_host_tensors *out, const mb_case_plan *plan, uint64_t seed, mb_error *err)
{
	int rc = mb_host_tensors_alloc(out, plan, err);

	for (int i = 0; rc == 0 && i < out->n_inputs; i++) {
		mb_input_params p = mb_input_params_for(&out->spec[i], i, seed);
		mb_host_fill(out->data[i], out->elems[i], &p, mb_row_tensor_dtype(plan->row, i, plan->dtype));
		out->made_elems += out->elems[i];
	}
	return rc;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* The source rows an indexed input is read at, for output rows `rows`:
 * row b*N + i reads b * (src rows / B) + index[b*N + i]. Sorted, distinct;
 * *out owned by the caller. */
static int indexed_rows(int64_t **out, int64_t *out_n, const mb_host_tensors *t, int i, int index_input,
	const int64_t *rows, int64_t n_rows, const char *id, mb_error *err)
{
	const mb_tensor_spec *src = &t->spec[i], *idx = &t->spec[index_input];
	const float *index = t->data[index_input];
	int64_t per_batch = src->rows / idx->rows, n = 0;
	int64_t *pick = malloc((size_t)(n_rows ? n_rows : 1) * sizeof(*pick));

	if (!pick)
		return mb_error_set(err, MB_ENOMEM, id, "cannot list the rows of %s", src->name);
	for (int64_t k = 0; k < n_rows; k++) {
		int64_t r = rows ? rows[k] : k;
		int64_t at = (int64_t)index[r];
		if (at < 0 || at >= per_batch) {
			free(pick);
			return mb_error_set(err, MB_EINVAL, id, "index %s[%lld] = %lld is outside [0, %lld)",
				idx->name, (long long)r, (long long)at, (long long)per_batch);
		}
		pick[k] = (r / idx->row_elems) * per_batch + at;
	}
	qsort(pick, (size_t)n_rows, sizeof(*pick), cmp_i64);
	for (int64_t k = 0; k < n_rows; k++) {
		if (n == 0 || pick[k] != pick[n - 1])
			pick[n++] = pick[k];
	}
	*out = pick;
	*out_n = n;
	return 0;
}

/* Whether the reference reads all of input i (index inputs are always
 * made whole: an indexed input needs their values first). */
static bool reads_all(const mb_host_tensors *t, mb_reads reads, int i)
{
	const mb_tensor_spec *s = &t->spec[i];

	return reads == MB_READS_ALL || s->fill == MB_FILL_INDEX
		|| (reads == MB_READS_AUTO && s->rows != mb_host_unit_rows(t));
}

int mb_host_tensors_twin(mb_host_tensors *out, const mb_case_plan *plan, uint64_t seed,
	const int64_t *rows, int64_t n_rows, mb_error *err)
{
	int rc = tensors_init(out, plan);

	/* two passes: the inputs read by index come after those they need */
	for (int pass = 0; pass < 2 && rc == 0; pass++) {
		for (int i = 0; i < out->n_inputs && rc == 0; i++) {
			const mb_tensor_spec *s = &out->spec[i];
			mb_reads reads = plan->row->reads[i];
			mb_input_params p = mb_input_params_for(s, i, seed);
			mb_dtype dtype = mb_row_tensor_dtype(plan->row, i, plan->dtype);
			int64_t *picked = NULL, n_picked = 0;

			if ((reads == MB_READS_INDEXED) != (pass == 1))
				continue;
			if ((rc = alloc_tensor(out, i, plan, err)))
				break;
			if (reads_all(out, reads, i)) {
				fill_rows(out->data[i], NULL, s->rows, s->row_elems, &p, dtype);
				out->made_elems += out->elems[i];
			} else if (reads == MB_READS_INDEXED) {
				rc = indexed_rows(&picked, &n_picked, out, i, plan->row->index_input, rows, n_rows, plan->id,
					err);
				if (rc == 0)
					fill_rows(out->data[i], picked, n_picked, s->row_elems, &p, dtype);
				out->made_elems += (uint64_t)n_picked * (uint64_t)s->row_elems;
				free(picked);
			} else {
				fill_rows(out->data[i], rows, n_rows, s->row_elems, &p, dtype);
				out->made_elems += (uint64_t)n_rows * (uint64_t)s->row_elems;
			}
		}
	}
	if (rc)
		mb_host_tensors_free(out);
	return rc;
}

void mb_host_tensors_poison(mb_host_tensors *t)
{
	for (int i = t->n_inputs; i < t->n_tensors; i++) {
		for (uint64_t j = 0; t->data[i] && j < t->elems[i]; j++)
			t->data[i][j] = NAN;
	}
}

void mb_host_tensors_free(mb_host_tensors *t)
{
	if (!t)
		return;
	for (int i = 0; i < t->n_tensors; i++) {
		unmap_array(t->data[i], t->elems[i], sizeof(float));
		t->data[i] = NULL;
	}
	/* n_tensors and elems stay: mb_reference_free sizes want[] by them */
}

size_t mb_tensor_elem_bytes(const mb_tensor_spec *spec, mb_dtype dtype)
{
	return spec->fill == MB_FILL_INDEX ? sizeof(int32_t) : mb_dtype_size(dtype);
}

void mb_tensor_pack(const mb_tensor_spec *spec, mb_dtype dtype, const float *src, void *dst, size_t n)
{
	int32_t *idx = dst;

	if (spec->fill != MB_FILL_INDEX) {
		mb_dtype_pack(dtype, src, dst, n);
		return;
	}
	for (size_t i = 0; i < n; i++)
		idx[i] = (int32_t)src[i];
}

void mb_tensor_unpack(const mb_tensor_spec *spec, mb_dtype dtype, const void *src, float *dst, size_t n)
{
	const int32_t *idx = src;

	if (spec->fill != MB_FILL_INDEX) {
		mb_dtype_unpack(dtype, src, dst, n);
		return;
	}
	for (size_t i = 0; i < n; i++)
		dst[i] = (float)idx[i];
}

/* ---- reference and oracle ------------------------------------------------ */

/* Put NaN over rows `rows` (NULL: 0 .. n-1) of an output. */
#define DEFINE_POISON(fn, REAL) \
	static void fn(REAL *a, const mb_tensor_spec *s, const int64_t *rows, int64_t n) \
	{ \
		for (int64_t k = 0; k < n; k++) { \
			int64_t r = rows ? rows[k] : k; \
			for (int64_t j = 0; j < s->row_elems; j++) \
				a[r * s->row_elems + j] = (REAL)NAN; \
		} \
	}

DEFINE_POISON(poison_f32, float)
DEFINE_POISON(poison_f64, double)

static int out_rows_of(int64_t **out, int64_t *out_n, const mb_case_plan *plan, const mb_host_tensors *in,
	int i, const int64_t *rows, int64_t n_rows, mb_error *err)
{
	if (mb_output_rows(out, out_n, plan->row, i, &in->spec[i], rows, n_rows, mb_host_unit_rows(in)) != 0)
		return mb_error_set(err, MB_ENOMEM, plan->id, "cannot list the checked rows of %s", in->spec[i].name);
	return 0;
}

static int alloc_outputs(float **want, const mb_case_plan *plan, const mb_host_tensors *in,
	const int64_t *rows, int64_t n_rows, mb_error *err)
{
	for (int i = 0; i < MB_MAX_TENSORS; i++)
		want[i] = NULL;
	for (int i = in->n_inputs; i < in->n_tensors; i++) {
		int64_t *out = NULL, n = 0;
		int rc;
		want[i] = map_array(in->elems[i], sizeof(float));
		if (!want[i])
			return mb_error_set(err, MB_ENOMEM, plan->id, "cannot allocate the reference output %s",
				in->spec[i].name);
		if ((rc = out_rows_of(&out, &n, plan, in, i, rows, n_rows, err)) != 0)
			return rc;
		poison_f32(want[i], &in->spec[i], out, n);
		free(out);
	}
	return 0;
}

int mb_reference_run(float **want, const mb_case_plan *plan, const mb_host_tensors *in,
	const int64_t *rows, int64_t n_rows, mb_error *err)
{
	int rc = alloc_outputs(want, plan, in, rows, n_rows, err);

	if (rc == 0)
		plan->row->reference(plan->axis, (const float *const *)in->data, want + in->n_inputs, rows, n_rows);
	else
		mb_reference_free(want, in);
	return rc;
}

int mb_oracle_run(float **want, const mb_case_plan *plan, const mb_host_tensors *in,
	const int64_t *rows, int64_t n_rows, mb_error *err)
{
	double *wide[MB_MAX_TENSORS] = {0};
	int rc = alloc_outputs(want, plan, in, rows, n_rows, err);

	for (int i = in->n_inputs; rc == 0 && i < in->n_tensors; i++) {
		int64_t *out = NULL, n = 0;
		wide[i] = map_array(in->elems[i], sizeof(double));
		if (!wide[i])
			rc = mb_error_set(err, MB_ENOMEM, plan->id, "cannot allocate the oracle output %s",
				in->spec[i].name);
		else if ((rc = out_rows_of(&out, &n, plan, in, i, rows, n_rows, err)) == 0)
			poison_f64(wide[i], &in->spec[i], out, n);
		free(out);
	}
	if (rc == 0)
		plan->row->oracle(plan->axis, (const float *const *)in->data, wide + in->n_inputs, rows, n_rows);
	/* the checked rows, rounded to fp32 */
	for (int i = in->n_inputs; rc == 0 && i < in->n_tensors; i++) {
		const mb_tensor_spec *s = &in->spec[i];
		int64_t *out = NULL, n = 0;
		if ((rc = out_rows_of(&out, &n, plan, in, i, rows, n_rows, err)) != 0)
			break;
		for (int64_t k = 0; k < n; k++) {
			int64_t r = out ? out[k] : k;
			for (int64_t j = 0; j < s->row_elems; j++)
				want[i][r * s->row_elems + j] = (float)wide[i][r * s->row_elems + j];
		}
		free(out);
	}
	for (int i = in->n_inputs; i < in->n_tensors; i++)
		unmap_array(wide[i], in->elems[i], sizeof(double));
	if (rc)
		mb_reference_free(want, in);
	return rc;
}

void mb_reference_free(float **want, const mb_host_tensors *t)
{
	for (int i = 0; i < MB_MAX_TENSORS; i++) {
		if (want[i] && i < t->n_tensors)
			unmap_array(want[i], t->elems[i], sizeof(float));
		want[i] = NULL;
	}
}
