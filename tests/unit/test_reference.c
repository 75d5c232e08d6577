/* The fp32 references against values worked out by hand, and against
 * their fp64 oracles on random inputs at each row's fp32 tolerance. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference/reference.h"
#include "refcheck.h"
#include "testutil.h"

static void rope_by_hand(void)
{
	/* T=1, Hq=1, Hk=1, D=4: x = (1, 2, 3, 4), cos = (0.5, 0), sin = (0.25, 1)
	 * q_out[0] = 1*0.5 - 3*0.25 = -0.25   q_out[2] = 3*0.5 + 1*0.25 = 1.75
	 * q_out[1] = 2*0   - 4*1    = -4      q_out[3] = 4*0   + 2*1    = 2 */
	int64_t axis[4] = {1, 1, 1, 4};
	float q[4] = {1, 2, 3, 4}, k[4] = {-1, 0.5f, 2, 8}, c[2] = {0.5f, 0}, s[2] = {0.25f, 1};
	float qo[4], ko[4];
	const float *in[4] = {q, k, c, s};
	float *out[2] = {qo, ko};

	mb_ref_rope_qk(axis, in, out, NULL, 1);
	CHECK(qo[0] == -0.25f && qo[1] == -4.0f && qo[2] == 1.75f && qo[3] == 2.0f);
	/* k: -1*0.5 - 2*0.25 = -1; 0.5*0 - 8*1 = -8; 2*0.5 + -1*0.25 = 0.75; 8*0 + 0.5*1 = 0.5 */
	CHECK(ko[0] == -1.0f && ko[1] == -8.0f && ko[2] == 0.75f && ko[3] == 0.5f);
}

static void rmsnorm_by_hand(void)
{
	/* T=1, H=2: h = (1, 2) + (2, 2) = (3, 4); mean(h^2) = 12.5;
	 * y = h / sqrt(12.5 + 1e-6) * w with w = (1, 0.5) */
	int64_t axis[2] = {2, 2};
	float x[4] = {1, 2, 0.5f, 0.5f}, r[4] = {2, 2, 0.5f, 0.5f}, w[2] = {1, 0.5f};
	float y[4], h[4];
	const float *in[3] = {x, r, w};
	float *out[2] = {y, h};
	double inv = 1.0 / sqrt(12.5 + 1e-6);
	int64_t second[1] = {1};

	memset(y, 0, sizeof(y));
	mb_ref_residual_rmsnorm(axis, in, out, NULL, 1); /* row 0 only */
	CHECK(h[0] == 3.0f && h[1] == 4.0f);
	CHECK(fabs(y[0] - 3 * inv) < 1e-6 && fabs(y[1] - 4 * inv * 0.5) < 1e-6);
	CHECK(y[2] == 0.0f && y[3] == 0.0f); /* row 1 was not asked for */
	/* row 1: h = (1, 1), mean 1, y = (1, 0.5) / sqrt(1 + 1e-6) */
	mb_ref_residual_rmsnorm(axis, in, out, second, 1);
	CHECK(fabs(y[2] - 1 / sqrt(1 + 1e-6)) < 1e-6 && fabs(y[3] - 0.5 / sqrt(1 + 1e-6)) < 1e-6);
}

/* One element of the first output off by far more than the tolerance. */
static void plant_in_first_output(refcheck_case *c)
{
	c->ref[c->t.n_inputs][c->rows / 2] += 1e-3f;
}

/* The fp32 reference agrees with the fp64 oracle at the row's fp32
 * tolerance on fresh random inputs, for every dtype's rounded inputs; and
 * the check can fail. */
static void against_oracle(const char *row_name, const int64_t *axis)
{
	const refcheck_oracle_test test = {.seed = 1234, .plant = plant_in_first_output};

	refcheck_against_oracle(mb_catalog_find(row_name), axis, &test);
}

static void catalog_rules(void)
{
	const mb_row *rope = mb_catalog_find("rope_qk");
	int64_t odd[4] = {8, 2, 1, 7}, huge[4] = {INT64_MAX / 2, 4, 2, 128};
	uint64_t elems, bytes;
	mb_error why;
	size_t n;

	CHECK(rope && rope->check_shape(odd, &why) == MB_EINVAL && strstr(why.text, "even"));
	CHECK(mb_row_footprint(rope, huge, MB_BF16, &elems, &bytes) == -1);
	CHECK(mb_row_footprint(rope, (int64_t[]){2, 2, 1, 4}, MB_BF16, &elems, &bytes) == 0);
	/* q 2x8, k 2x4, cos 2x2, sin 2x2, q_out 2x8, k_out 2x4 = 56 elements */
	CHECK(elems == 56 && bytes == 112);
	/* bytes model: each input read once, each output written once */
	CHECK(rope->bytes((int64_t[]){2, 2, 1, 4}, MB_FP32) == 56 * 4);
	CHECK(mb_catalog_find("test_hang") != NULL);
	mb_catalog_rows(&n);
	CHECK(n >= 2);
	/* every listed row has its three variants and a reasoned tolerance */
	for (size_t i = 0; i < n; i++) {
		const mb_row *r = mb_catalog_rows(&n)[i];
		for (int d = 0; d < MB_DTYPE_COUNT; d++)
			CHECK(r->tolerance[d].rationale && r->tolerance[d].rel >= 0 && r->tolerance[d].abs >= 0);
		bool fused = false, fallback = false;
		for (int k = 0; k < r->n_variants; k++) {
			fused = fused || r->variants[k].kind == MB_VARIANT_FUSED;
			fallback = fallback || r->variants[k].kind == MB_VARIANT_FALLBACK;
		}
		CHECK_MSG(fused && fallback && mb_row_find_variant(r, "reference"), "%s: a fused, a fallback and the "
			"reference variant", r->name);
	}
	/* a status is a reviewed claim: conditional names its condition,
	 * nothing else has one */
	mb_catalog_rows_all(&n);
	for (size_t i = 0; i < n; i++) {
		const mb_row *r = mb_catalog_rows_all(&n)[i];
		CHECK_MSG(mb_row_status_check(r, &why) == 0, "%s: %s", why.where, why.text);
	}
	{
		mb_row bad = *rope;
		bad.status = MB_ROW_CONDITIONAL;
		bad.condition = NULL;
		CHECK(mb_row_status_check(&bad, &why) == MB_EINVAL && strstr(why.text, "needs a named condition"));
		bad.status = MB_ROW_KEEP;
		bad.condition = "wins at T >= 32768";
		CHECK(mb_row_status_check(&bad, &why) == MB_EINVAL && strstr(why.text, "takes no condition"));
	}
}

int main(void)
{
	rope_by_hand();
	rmsnorm_by_hand();
	against_oracle("rope_qk", (int64_t[]){257, 8, 2, 128});
	against_oracle("residual_rmsnorm", (int64_t[]){33, 8192});
	against_oracle("residual_rmsnorm", (int64_t[]){64, 1000});
	catalog_rules();
	return mb_test_finish("test_reference");
}
