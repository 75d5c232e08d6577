/* The row gather rows (row_gather, row_gather_pair): their fp32 references
 * against gathers worked out by hand, against the fp64 oracles at the fp32
 * tolerance (zero: a copy is exact) on fresh inputs of every dtype, on row
 * samples, and their descriptors: tensors, the index fill, the bytes model
 * and the declared launches. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/check.h"
#include "reference/reference.h"
#include "refcheck.h"
#include "testutil.h"

enum { AX_B, AX_S, AX_N, AX_D };

static void gather_by_hand(void)
{
	/* B=2, S=3, N=2, D=2. src rows, batch 0: (1,2) (3,4) (5,6);
	 * batch 1: (7,8) (9,10) (11,12). idx = (2, 0 | 1, 1), so
	 * out = (5,6) (1,2) | (9,10) (9,10): batch 1's index 1 is its own
	 * second row (9,10), not batch 0's (3,4), and a repeated index copies
	 * the same row twice. */
	int64_t axis[4] = {2, 3, 2, 2};
	float src[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, idx[4] = {2, 0, 1, 1};
	float out[8];
	double outd[8];
	const float *in[2] = {src, idx};
	float *o[1] = {out};
	double *od[1] = {outd};
	const float want[8] = {5, 6, 1, 2, 9, 10, 9, 10};
	int64_t third[1] = {2};

	for (int i = 0; i < 8; i++)
		out[i] = NAN;
	/* output row 2 is (b=1, i=0): only it is written */
	mb_ref_row_gather(axis, in, o, third, 1);
	CHECK(out[4] == 9 && out[5] == 10);
	CHECK(isnan(out[0]) && isnan(out[3]) && isnan(out[6]) && isnan(out[7]));
	mb_ref_row_gather(axis, in, o, NULL, 4);
	mb_oracle_row_gather(axis, in, od, NULL, 4);
	for (int i = 0; i < 8; i++)
		CHECK_MSG(out[i] == want[i] && outd[i] == want[i], "element %d: %g, %g, want %g", i, out[i], outd[i],
			want[i]);
}

static void pair_by_hand(void)
{
	/* B=1, S=4, N=3, D=1: k = (10, 20, 30, 40), v = -k,
	 * idx = (3, 0, 3): k_out = (40, 10, 40), v_out = (-40, -10, -40).
	 * One index drives both: swapping k and v would flip every sign. */
	int64_t axis[4] = {1, 4, 3, 1};
	float k[4] = {10, 20, 30, 40}, v[4] = {-10, -20, -30, -40}, idx[3] = {3, 0, 3};
	float ko[3], vo[3];
	double kd[3], vd[3];
	const float *in[3] = {k, v, idx};
	float *o[2] = {ko, vo};
	double *od[2] = {kd, vd};

	mb_ref_row_gather_pair(axis, in, o, NULL, 3);
	mb_oracle_row_gather_pair(axis, in, od, NULL, 3);
	CHECK(ko[0] == 40 && ko[1] == 10 && ko[2] == 40);
	CHECK(vo[0] == -40 && vo[1] == -10 && vo[2] == -40);
	CHECK(kd[0] == 40 && kd[1] == 10 && kd[2] == 40 && vd[0] == -40 && vd[1] == -10 && vd[2] == -40);
}

/* Every output row is, bit for bit, its batch's source row at its index:
 * checked straight from the inputs, without the reference. */
static void check_rows_copied(const mb_host_tensors *t, const float *const *got, int n_sources)
{
	/* the index tensor follows the sources: [B, N] */
	int64_t batches = t->spec[n_sources].rows, n = t->spec[n_sources].row_elems;
	int64_t s = t->spec[0].rows / batches, d = t->spec[0].row_elems;
	const float *idx = t->data[n_sources];
	int64_t bad = 0;

	for (int64_t r = 0; r < batches * n; r++) {
		int64_t from = (r / n) * s + (int64_t)idx[r];
		for (int j = 0; j < n_sources; j++)
			bad += memcmp(got[j] + r * d, t->data[j] + from * d, (size_t)d * sizeof(float)) != 0;
	}
	CHECK_MSG(bad == 0, "%lld output rows differ from their source rows", (long long)bad);
}

/* The row count, every output row copied from its source row, and a row
 * sample: it computes the sampled rows, and only those. */
static void rows_and_sample(refcheck_case *c, const void *ctx)
{
	const int64_t *axis = ctx;
	const mb_host_tensors *t = &c->t;
	const mb_tolerance *tol = &c->plan.row->tolerance[MB_FP32];
	const int64_t rows = c->rows;
	float *sampled[MB_MAX_TENSORS] = {NULL};
	int64_t *pick = NULL, n_pick = 0;
	mb_check chk;
	mb_error err;

	CHECK(rows == axis[AX_B] * axis[AX_N]);
	check_rows_copied(t, (const float *const *)(c->ref + t->n_inputs), t->n_inputs - 1);
	CHECK(mb_check_rows_pick(&pick, &n_pick, rows, rows / 3, 99, &err) == 0 && pick != NULL);
	CHECK(mb_reference_run(sampled, &c->plan, t, pick, n_pick, &err) == 0);
	mb_check_init(&chk);
	for (int i = t->n_inputs; i < t->n_tensors; i++)
		mb_check_add(&chk, &t->spec[i], sampled[i], c->orc[i], pick, n_pick, rows, tol);
	CHECK(mb_check_passed(&chk) && chk.compared == (uint64_t)(n_pick * axis[AX_D] * (t->n_tensors - t->n_inputs)));
	int64_t unsampled = pick[0] > 0 ? 0 : pick[1] > 1 ? 1 : -1;
	/* mb_reference_run leaves rows it did not ask for untouched (zero):
	 * the reference must not have written one (inputs are never zero) */
	if (unsampled >= 0)
		CHECK(sampled[t->n_inputs][unsampled * axis[AX_D]] == 0.0f);
	free(pick);
	mb_reference_free(sampled, t);
}

/* One element of the first output one fp32 ulp off: the tolerance is zero. */
static void plant_one_ulp(refcheck_case *c)
{
	float *x = &c->ref[c->t.n_inputs][c->rows / 2];

	*x = nextafterf(*x, INFINITY);
}

/* The fp32 reference agrees with the fp64 oracle at the row's fp32
 * tolerance (zero) on fresh random inputs of every dtype, whole and on a
 * row sample; a single element off by one fp32 ulp fails. */
static void against_oracle(const char *row_name, const int64_t *axis)
{
	const mb_row *row = mb_catalog_find(row_name);
	const refcheck_oracle_test test = {.seed = 4321, .exact = true, .more = rows_and_sample,
		.ctx = axis, .plant = plant_one_ulp};

	CHECK(row != NULL);
	if (row)
		refcheck_against_oracle(row, axis, &test);
}

/* The index tensor: integers in [0, S), both ends drawn, int32 on the
 * device whatever the case dtype, exact through the host's fp32 copy. */
static void index_fill(void)
{
	const mb_row *row = mb_catalog_find("row_gather");
	int64_t axis[4] = {4, 16, 512, 8};
	mb_case_plan p;
	mb_host_tensors t;
	mb_error err;
	bool integral = true, low = false, high = false;

	refcheck_plan(&p, row, MB_BF16, axis);
	CHECK(mb_host_tensors_make(&t, &p, 7, &err) == 0);
	CHECK(t.spec[1].fill == MB_FILL_INDEX && mb_tensor_elem_bytes(&t.spec[1], MB_BF16) == sizeof(int32_t));
	for (uint64_t i = 0; i < t.elems[1]; i++) {
		float f = t.data[1][i];
		integral = integral && f == floorf(f) && f >= 0 && f < (float)axis[AX_S];
		low = low || f == 0;
		high = high || f == (float)(axis[AX_S] - 1);
	}
	CHECK(integral && low && high);
	int32_t packed[4];
	float back[4], some[4] = {0, 1, 15, 8};
	mb_tensor_pack(&t.spec[1], MB_BF16, some, packed, 4);
	mb_tensor_unpack(&t.spec[1], MB_BF16, packed, back, 4);
	CHECK(packed[2] == 15 && memcmp(back, some, sizeof(some)) == 0);
	mb_host_tensors_free(&t);
}

static void descriptors(void)
{
	const mb_row *g = mb_catalog_find("row_gather"), *pr = mb_catalog_find("row_gather_pair");
	int64_t small[4] = {2, 3, 2, 2}, big[4] = {8, 8192, 6144, 4096}, wide_s[4] = {1, (1 << 24) + 1, 1, 8};
	mb_tensor_spec spec[MB_MAX_TENSORS];
	mb_error why;

	CHECK(g && pr);
	if (!g || !pr)
		return;
	/* gather: src 6x2, idx 2x2, out 4x2 */
	CHECK(g->tensors(small, spec) == 3);
	CHECK(spec[0].rows == 6 && spec[1].rows == 2 && spec[1].row_elems == 2 && spec[1].hi == 3);
	CHECK(spec[2].is_output && spec[2].rows == 4 && spec[2].row_elems == 2);
	CHECK(pr->tensors(small, spec) == 5 && spec[3].rows == 4 && spec[4].rows == 4 && spec[2].fill == MB_FILL_INDEX);
	/* bytes: B*N*D = 8 gathered elements read and 8 written, and 4 int32
	 * indices: bf16 2*8*2 + 16 = 48, fp32 2*8*4 + 16 = 80; the pair moves
	 * twice the rows with the same index: bf16 4*8*2 + 16 = 80 */
	CHECK(g->bytes(small, MB_BF16) == 48 && g->bytes(small, MB_FP32) == 80);
	CHECK(pr->bytes(small, MB_BF16) == 80 && pr->bytes(small, MB_FP16) == 80);
	/* the largest nam56r shape: 2 * 201326592 * 2 + 49152 * 4 bytes in bf16,
	 * not depending on S (only the gathered rows of src are read) */
	CHECK(g->bytes(big, MB_BF16) == 2ull * 8 * 6144 * 4096 * 2 + 8ull * 6144 * 4);
	big[AX_S] = 4096;
	CHECK(g->bytes(big, MB_BF16) == 2ull * 8 * 6144 * 4096 * 2 + 8ull * 6144 * 4);
	CHECK(g->flops(small) == 0 && pr->flops(small) == 0);
	CHECK(g->check_shape(small, &why) == 0);
	CHECK(g->check_shape(wide_s, &why) == MB_EINVAL && strstr(why.text, "fp32"));
	CHECK(pr->check_shape(wide_s, &why) == MB_EINVAL);
	/* a copy is exact: zero tolerance, with a reason, in every dtype */
	for (int d = 0; d < MB_DTYPE_COUNT; d++) {
		CHECK(g->tolerance[d].abs == 0 && g->tolerance[d].rel == 0 && g->tolerance[d].rationale);
		CHECK(pr->tolerance[d].abs == 0 && pr->tolerance[d].rel == 0 && pr->tolerance[d].rationale);
	}
	/* declared launches: one fused launch each; the plain gather once, and
	 * once per tensor for the pair */
	const mb_variant *v;
	CHECK((v = mb_row_find_variant(g, "fused")) && v->launches_per_call == 1
		&& strcmp(v->kernel_patterns[0], "row_gather_fused") == 0);
	CHECK((v = mb_row_find_variant(g, "fallback")) && v->launches_per_call == 1);
	CHECK((v = mb_row_find_variant(pr, "fused")) && v->launches_per_call == 1
		&& strcmp(v->kernel_patterns[0], "row_gather_pair_fused") == 0);
	CHECK((v = mb_row_find_variant(pr, "fallback")) && v->launches_per_call == 2
		&& strcmp(v->kernel_patterns[0], "row_gather_fallback") == 0);
	CHECK(mb_row_find_variant(g, "reference") && mb_row_find_variant(pr, "reference"));
}

int main(void)
{
	gather_by_hand();
	pair_by_hand();
	/* D = 37 is no multiple of any vector width; N > S repeats indices */
	against_oracle("row_gather", (int64_t[]){3, 50, 40, 64});
	against_oracle("row_gather", (int64_t[]){2, 17, 33, 37});
	against_oracle("row_gather_pair", (int64_t[]){3, 50, 40, 64});
	against_oracle("row_gather_pair", (int64_t[]){2, 17, 33, 37});
	index_fill();
	descriptors();
	return mb_test_finish("test_reference_gather");
}
