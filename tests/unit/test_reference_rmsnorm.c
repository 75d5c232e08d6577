/* residual_rmsnorm and residual_rmsnorm_bwd: the fp32 references by hand,
 * against their fp64 oracles at hidden 8192 in every dtype, dw reduced
 * over every token whatever rows are asked for, and the GPU variants' dw
 * summation orders replayed in fp32 inside the row's tolerance. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/check.h"
#include "reference/reference.h"
#include "refcheck.h"
#include "testutil.h"

/* The claimed fp32 bound on dx alone (see the row's rationale): < 400u. */
#define DX_F32_ABS (400 * 0x1p-24)

static void bwd_by_hand(void)
{
	/* T=1, H=2: h = (3, 4): mean(h^2) = 12.5, rstd = 1/sqrt(12.5 + 1e-6).
	 * dy = (1, 2), w = (1, 0.5): g = (1, 1); mean(g*h) = (3 + 4) / 2 = 3.5.
	 * dx = dh_in + rstd * (g - h * rstd^2 * 3.5); dw = dy * h * rstd. */
	int64_t axis[2] = {1, 2};
	float dy[2] = {1, 2}, dh[2] = {0.5f, -1}, h[2] = {3, 4}, w[2] = {1, 0.5f};
	float dx[2], dw[2];
	const float *in[4] = {dy, dh, h, w};
	float *out[2] = {dx, dw};
	double rstd = 1.0 / sqrt(12.5 + 1e-6), c = rstd * rstd * 3.5;

	mb_ref_residual_rmsnorm_bwd(axis, in, out, NULL, 1);
	CHECK(fabs(dx[0] - (0.5 + rstd * (1 - 3 * c))) < 1e-6);
	CHECK(fabs(dx[1] - (-1 + rstd * (1 - 4 * c))) < 1e-6);
	CHECK(fabs(dw[0] - 3 * rstd) < 1e-6 && fabs(dw[1] - 8 * rstd) < 1e-6);
}

static void bwd_dw_covers_all_tokens(void)
{
	/* T=2, H=1: asking only for row 1's dx still sums dw over both tokens.
	 * Token 0: h = 2, rstd = 1/2 (to 1e-6); token 1: h = -1, rstd = 1. */
	int64_t axis[2] = {2, 1}, second[1] = {1};
	float dy[2] = {4, 3}, dh[2] = {1, 1}, h[2] = {2, -1}, w[1] = {2};
	float dx[2] = {0, 0}, dw[1] = {0};
	const float *in[4] = {dy, dh, h, w};
	float *out[2] = {dx, dw};

	mb_ref_residual_rmsnorm_bwd(axis, in, out, second, 1);
	/* dw = 4*2*(1/2) + 3*(-1)*1 = 1 */
	CHECK(fabs(dw[0] - 1.0f) < 1e-5);
	CHECK(dx[0] == 0.0f); /* row 0 was not asked for */
	/* H=1: g*h*rstd^2 = g exactly up to eps, so dx = dh_in: the norm's
	 * gradient vanishes when there is nothing to normalise against */
	CHECK(fabs(dx[1] - 1.0f) < 1e-5);
}

/* dx alone at its own, tighter bound (when *ctx is true), and every output
 * element written: no NaN left from the poison. */
static void dx_bound_and_written(refcheck_case *c, const void *ctx)
{
	const bool check_dx_alone = *(const bool *)ctx;
	const mb_host_tensors *t = &c->t;
	const char *row_name = c->plan.row->name;
	const int64_t rows = c->rows;
	mb_check chk;

	if (check_dx_alone) {
		mb_tolerance dx_tol = {DX_F32_ABS, 64 * 0x1p-24, "dx alone"};
		mb_check_init(&chk);
		mb_check_add(&chk, &t->spec[t->n_inputs], c->ref[t->n_inputs], c->orc[t->n_inputs], NULL, rows, rows,
			&dx_tol);
		CHECK_MSG(mb_check_passed(&chk), "%s %s: dx max abs %g over %g", row_name,
			mb_dtype_name(c->plan.dtype), chk.max_abs, DX_F32_ABS);
	}
	for (int i = t->n_inputs; i < t->n_tensors; i++) {
		uint64_t nans = 0;
		for (uint64_t j = 0; j < t->elems[i]; j++)
			nans += isnan(c->ref[i][j]);
		CHECK_MSG(nans == 0, "%s: %s has %llu unwritten", row_name, t->spec[i].name, (unsigned long long)nans);
	}
}

/* One element of the last output off by far more than the tolerance. */
static void plant_in_last_output(refcheck_case *c)
{
	c->ref[c->t.n_tensors - 1][0] += 1.0f;
}

/* Reference against oracle at the row's fp32 tolerance for every dtype's
 * rounded inputs (the checker compares dw [1,H] whole, as it has another
 * row count than the token rows), and dx alone at its own, tighter bound. */
static void against_oracle(const char *row_name, const int64_t *axis, bool check_dx_alone)
{
	const mb_row *row = mb_catalog_find(row_name);
	const refcheck_oracle_test test = {
		.seed = 4321, .more = dx_bound_and_written, .ctx = &check_dx_alone, .plant = plant_in_last_output};

	CHECK(row != NULL);
	if (row)
		refcheck_against_oracle(row, axis, &test);
}

/* Mirrors of the GPU kernels' dw summation orders (residual_rmsnorm_bwd.cu)
 * in fp32. Must track the kernels' constants. */
#define FUSED_BLOCKS_H200 132 /* one block per SM: the longest chain */
#define FUSED_MIN_TOKENS 32
#define FIN_ROWS 32
#define COLSUM_ROWS 16
#define COLSUM_ACCS 4

static float fused_order(const float *dy, const float *h, const float *rstd, int64_t tokens,
	int64_t hidden, int64_t j, int64_t blocks)
{
	float fin[FIN_ROWS] = {0};

	for (int64_t b = 0; b < blocks; b++) {
		float acc = 0;
		for (int64_t t = b; t < tokens; t += blocks)
			acc += dy[t * hidden + j] * h[t * hidden + j] * rstd[t];
		fin[b % FIN_ROWS] += acc;
	}
	for (int half = FIN_ROWS / 2; half > 0; half /= 2)
		for (int y = 0; y < half; y++)
			fin[y] += fin[y + half];
	return fin[0];
}

static float fallback_order(const float *dy, const float *h, const float *rstd, int64_t tokens,
	int64_t hidden, int64_t j)
{
	float lane[COLSUM_ROWS];

	for (int y = 0; y < COLSUM_ROWS; y++) {
		float acc[COLSUM_ACCS] = {0};
		int64_t t = y;
		for (; t + (COLSUM_ACCS - 1) * COLSUM_ROWS < tokens; t += COLSUM_ACCS * COLSUM_ROWS)
			for (int a = 0; a < COLSUM_ACCS; a++) {
				int64_t u = t + a * COLSUM_ROWS;
				acc[a] += dy[u * hidden + j] * h[u * hidden + j] * rstd[u];
			}
		for (; t < tokens; t += COLSUM_ROWS)
			acc[0] += dy[t * hidden + j] * h[t * hidden + j] * rstd[t];
		lane[y] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
	}
	for (int half = COLSUM_ROWS / 2; half > 0; half /= 2)
		for (int y = 0; y < half; y++)
			lane[y] += lane[y + half];
	return lane[0];
}

static void gpu_dw_orders_within_tolerance(void)
{
	/* the largest token count of the suite, few columns to stay fast */
	const int64_t axis[2] = {32768, 256};
	const mb_row *row = mb_catalog_find("residual_rmsnorm_bwd");
	const mb_tolerance *tol = &row->tolerance[MB_FP32];
	int64_t tokens = axis[0], hidden = axis[1];
	mb_case_plan p;
	mb_host_tensors t;
	float *orc[MB_MAX_TENSORS], *rstd = malloc((size_t)tokens * sizeof(float));
	double worst_fused = 0, worst_fallback = 0;
	int64_t blocks = tokens / FUSED_MIN_TOKENS < FUSED_BLOCKS_H200 ? tokens / FUSED_MIN_TOKENS
		: FUSED_BLOCKS_H200;
	mb_error err;

	refcheck_plan(&p, row, MB_BF16, axis);
	CHECK(rstd && mb_host_tensors_make(&t, &p, 99, &err) == 0);
	CHECK(mb_oracle_run(orc, &p, &t, NULL, 1, &err) == 0);
	for (int64_t i = 0; i < tokens; i++) {
		const float *hr = t.data[2] + i * hidden;
		float ss = 0;
		for (int64_t j = 0; j < hidden; j++)
			ss += hr[j] * hr[j];
		rstd[i] = 1.0f / sqrtf(ss / (float)hidden + (float)MB_RMSNORM_EPS);
	}
	for (int64_t j = 0; j < hidden; j++) {
		double want = orc[5][j];
		double ef = fabs(fused_order(t.data[0], t.data[2], rstd, tokens, hidden, j, blocks) - want);
		double eb = fabs(fallback_order(t.data[0], t.data[2], rstd, tokens, hidden, j) - want);
		worst_fused = fmax(worst_fused, ef - tol->rel * fabs(want));
		worst_fallback = fmax(worst_fallback, eb - tol->rel * fabs(want));
	}
	CHECK_MSG(worst_fused <= tol->abs, "fused dw order: %g over the rel part, abs is %g", worst_fused, tol->abs);
	CHECK_MSG(worst_fallback <= tol->abs, "fallback dw order: %g over the rel part, abs is %g", worst_fallback,
		tol->abs);
	mb_reference_free(orc, &t);
	mb_host_tensors_free(&t);
	free(rstd);
}

static void bwd_models(void)
{
	const mb_row *row = mb_catalog_find("residual_rmsnorm_bwd");
	uint64_t elems, bytes;

	CHECK(row && row->n_axes == 2 && strcmp(row->axes[0], "T") == 0);
	/* dy, dh_in, h, dx: 4 x 3x8; w, dw: 2 x 8 = 112 elements */
	CHECK(mb_row_footprint(row, (int64_t[]){3, 8}, MB_BF16, &elems, &bytes) == 0);
	CHECK(elems == 112 && bytes == 224);
	CHECK(row->bytes((int64_t[]){3, 8}, MB_BF16) == 224);
	CHECK(row->flops((int64_t[]){3, 8}) == 12 * 24);
	for (int d = 0; d < MB_DTYPE_COUNT; d++)
		CHECK(row->tolerance[d].rationale && row->tolerance[d].abs > 0 && row->tolerance[d].rel > 0);
	CHECK(mb_row_find_variant(row, "fused")->launches_per_call == 2);
	CHECK(mb_row_find_variant(row, "fallback")->launches_per_call == 3);
}

int main(void)
{
	bwd_by_hand();
	bwd_dw_covers_all_tokens();
	bwd_models();
	against_oracle("residual_rmsnorm", (int64_t[]){17, 8192}, false);
	against_oracle("residual_rmsnorm_bwd", (int64_t[]){33, 8192}, true);
	against_oracle("residual_rmsnorm_bwd", (int64_t[]){300, 1000}, true);
	against_oracle("residual_rmsnorm_bwd", (int64_t[]){1, 64}, true);
	gpu_dw_orders_within_tolerance();
	return mb_test_finish("test_reference_rmsnorm");
}
