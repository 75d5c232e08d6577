/* The attention-adjacent rotary rows (rope_qk_bwd, mla_partial_rope): their
 * fp32 references against values worked out by hand, against each other
 * and rope_qk where the math coincides, against their fp64 oracles at the
 * fp32 tolerance, and their tolerances against host emulations of the GPU
 * arithmetic (either product fused into an FMA, then one rounding to the
 * case dtype). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/check.h"
#include "harness/rng.h"
#include "reference/reference.h"
#include "refcheck.h"
#include "testutil.h"

enum { BWD_T, BWD_HQ, BWD_HK, BWD_D };
enum { MLA_T, MLA_H, MLA_DN, MLA_DR };

/* Random inputs for the property tests: enough rows to meet every case of
 * index math, small enough to run in milliseconds. */
#define PROP_TOKENS 5
#define PROP_HQ 3
#define PROP_HK 2
#define PROP_D 16
/* Relative slack of the fp64 property checks: sums of a few hundred fp64
 * products, and unit-circle cos/sin rounded to fp32 (2^-24 each). */
#define ADJOINT_REL 1e-12
#define INVERSE_REL 1e-6

static void rope_bwd_by_hand(void)
{
	/* T=2, Hq=1, Hk=1, D=4; token 0: g = (1, 2, 3, 4), cos = (0.5, 0),
	 * sin = (0.25, 1):
	 *   dq[0] = g1*c + g2*s = 1*0.5 + 3*0.25 = 1.25   dq[1] = 2*0 + 4*1 = 4
	 *   dq[2] = g2*c - g1*s = 3*0.5 - 1*0.25 = 1.25   dq[3] = 4*0 - 2*1 = -2
	 * dk from (-1, 0.5, 2, 8): -1*0.5 + 2*0.25 = 0; 0.5*0 + 8*1 = 8;
	 *   2*0.5 + 1*0.25 = 1.25; 8*0 - 0.5*1 = -0.5.
	 * Token 1 (cos = (1, -1), sin = (0, 0.5)): dq = (1, -2 + 2, 3, -4 - 1)
	 *   = (1, 0, 3, -5), and it is only computed when asked for. */
	int64_t axis[4] = {2, 1, 1, 4};
	float g[8] = {1, 2, 3, 4, 1, 2, 3, 4}, gk[8] = {-1, 0.5f, 2, 8, -1, 0.5f, 2, 8};
	float c[4] = {0.5f, 0, 1, -1}, s[4] = {0.25f, 1, 0, 0.5f};
	float dq[8], dk[8];
	const float *in[4] = {g, gk, c, s};
	float *out[2] = {dq, dk};
	double dqd[8], dkd[8];
	double *outd[2] = {dqd, dkd};
	int64_t second[1] = {1};

	memset(dq, 0, sizeof(dq));
	mb_ref_rope_qk_bwd(axis, in, out, NULL, 1);
	CHECK(dq[0] == 1.25f && dq[1] == 4.0f && dq[2] == 1.25f && dq[3] == -2.0f);
	CHECK(dk[0] == 0.0f && dk[1] == 8.0f && dk[2] == 1.25f && dk[3] == -0.5f);
	CHECK(dq[4] == 0 && dq[5] == 0 && dq[6] == 0 && dq[7] == 0); /* token 1 not asked for */
	mb_ref_rope_qk_bwd(axis, in, out, second, 1);
	CHECK(dq[4] == 1.0f && dq[5] == 0.0f && dq[6] == 3.0f && dq[7] == -5.0f);
	mb_oracle_rope_qk_bwd(axis, in, outd, NULL, 2);
	CHECK(dqd[0] == 1.25 && dqd[3] == -2.0 && dkd[1] == 8.0 && dqd[7] == -5.0);
}

static void mla_by_hand(void)
{
	/* T=1, H=2, Dn=2, Dr=4 (W=6); cos = (0.5, 0), sin = (0.25, 1), the
	 * values of rope_qk's hand case, so rope(1, 2, 3, 4) = (-0.25, -4, 1.75, 2)
	 * and rope(-1, 0.5, 2, 8) = (-1, -8, 0.75, 0.5):
	 *   q head 0 = (10, 11 | 1, 2, 3, 4)   -> (10, 11 | -0.25, -4, 1.75, 2)
	 *   q head 1 = (12, 13 | -1, 0.5, 2, 8) -> (12, 13 | -1, -8, 0.75, 0.5)
	 *   k_nope = (20, 21), (22, 23); k_pe = (1, 2, 3, 4), shared:
	 *   k head 0 = (20, 21 | -0.25, -4, 1.75, 2), k head 1 = (22, 23 | same) */
	int64_t axis[4] = {1, 2, 2, 4};
	float q[12] = {10, 11, 1, 2, 3, 4, 12, 13, -1, 0.5f, 2, 8};
	float kn[4] = {20, 21, 22, 23}, kpe[4] = {1, 2, 3, 4}, c[2] = {0.5f, 0}, s[2] = {0.25f, 1};
	const float want_q[12] = {10, 11, -0.25f, -4, 1.75f, 2, 12, 13, -1, -8, 0.75f, 0.5f};
	const float want_k[12] = {20, 21, -0.25f, -4, 1.75f, 2, 22, 23, -0.25f, -4, 1.75f, 2};
	float qo[12], ko[12];
	const float *in[5] = {q, kn, kpe, c, s};
	float *out[2] = {qo, ko};
	double qod[12], kod[12];
	double *outd[2] = {qod, kod};
	bool same = true;

	mb_ref_mla_partial_rope(axis, in, out, NULL, 1);
	mb_oracle_mla_partial_rope(axis, in, outd, NULL, 1);
	for (int i = 0; i < 12; i++) {
		same = same && qo[i] == want_q[i] && ko[i] == want_k[i];
		same = same && qod[i] == (double)want_q[i] && kod[i] == (double)want_k[i];
	}
	CHECK(same);
}

/* fwd is linear in x with the matrix R = [[c, -s], [s, c]] per pair; bwd
 * must apply R^T for any cos and sin, so <fwd(x), g> = <x, bwd(g)>. With
 * cos^2 + sin^2 = 1, R^T is also R's inverse: bwd(fwd(x)) = x. Checked in
 * fp64 through the oracles. */
static void rope_bwd_is_transpose(void)
{
	enum { N_Q = PROP_TOKENS * PROP_HQ * PROP_D, N_K = PROP_TOKENS * PROP_HK * PROP_D,
	       N_CS = PROP_TOKENS * PROP_D / 2 };
	int64_t axis[4] = {PROP_TOKENS, PROP_HQ, PROP_HK, PROP_D};
	static float x[N_Q], xk[N_K], g[N_Q], gk[N_K], c[N_CS], s[N_CS], uc[N_CS], us[N_CS];
	static float yq[N_Q], yk[N_K];
	static double fq[N_Q], fk[N_K], bq[N_Q], bk[N_K];
	mb_rng rng;
	double lhs = 0, rhs = 0, scale = 0, worst = 0;

	mb_rng_seed(&rng, 77);
	for (int i = 0; i < N_Q; i++) {
		x[i] = (float)mb_rng_normal(&rng);
		g[i] = (float)mb_rng_normal(&rng);
	}
	for (int i = 0; i < N_K; i++) {
		xk[i] = (float)mb_rng_normal(&rng);
		gk[i] = (float)mb_rng_normal(&rng);
	}
	for (int i = 0; i < N_CS; i++) {
		double theta = 2 * M_PI * mb_rng_uniform(&rng);
		c[i] = (float)(2 * mb_rng_uniform(&rng) - 1); /* independent, as the harness draws */
		s[i] = (float)(2 * mb_rng_uniform(&rng) - 1);
		uc[i] = (float)cos(theta); /* on the unit circle, up to fp32 rounding */
		us[i] = (float)sin(theta);
	}
	mb_oracle_rope_qk(axis, (const float *const[]){x, xk, c, s}, (double *const[]){fq, fk}, NULL, PROP_TOKENS);
	mb_oracle_rope_qk_bwd(axis, (const float *const[]){g, gk, c, s}, (double *const[]){bq, bk}, NULL, PROP_TOKENS);
	for (int i = 0; i < N_Q; i++) {
		lhs += fq[i] * g[i];
		rhs += (double)x[i] * bq[i];
		scale += fabs(fq[i] * g[i]);
	}
	for (int i = 0; i < N_K; i++) {
		lhs += fk[i] * gk[i];
		rhs += (double)xk[i] * bk[i];
		scale += fabs(fk[i] * gk[i]);
	}
	CHECK_MSG(fabs(lhs - rhs) <= ADJOINT_REL * scale, "<fwd x, g> = %.17g, <x, bwd g> = %.17g", lhs, rhs);

	/* the inverse, on the unit circle: fwd in fp32, bwd in fp64 */
	mb_ref_rope_qk(axis, (const float *const[]){x, xk, uc, us}, (float *const[]){yq, yk}, NULL, PROP_TOKENS);
	mb_oracle_rope_qk_bwd(axis, (const float *const[]){yq, yk, uc, us}, (double *const[]){bq, bk}, NULL,
		PROP_TOKENS);
	for (int i = 0; i < N_Q; i++)
		worst = fmax(worst, fabs(bq[i] - x[i]) / (1 + fabs(x[i])));
	for (int i = 0; i < N_K; i++)
		worst = fmax(worst, fabs(bk[i] - xk[i]) / (1 + fabs(xk[i])));
	CHECK_MSG(worst <= INVERSE_REL, "bwd(fwd(x)) - x: %g relative", worst);
}

/* mla_partial_rope's rotated slices are rope_qk on q_pe (Hq = H) and k_pe
 * (Hk = 1) with D = Dr, bit for bit; its other columns are copies. */
static void mla_matches_rope_qk(void)
{
	enum { T = PROP_TOKENS, H = PROP_HQ, DN = 6, DR = 8, W = DN + DR };
	int64_t axis[4] = {T, H, DN, DR}, rope_axis[4] = {T, H, 1, DR};
	static float q[T * H * W], kn[T * H * DN], kpe[T * DR], c[T * DR / 2], s[T * DR / 2];
	static float qo[T * H * W], ko[T * H * W], qpe[T * H * DR], rq[T * H * DR], rk[T * DR];
	mb_rng rng;
	bool copies = true, rotated = true;

	mb_rng_seed(&rng, 78);
	for (int i = 0; i < T * H * W; i++)
		q[i] = (float)mb_rng_normal(&rng);
	for (int i = 0; i < T * H * DN; i++)
		kn[i] = (float)mb_rng_normal(&rng);
	for (int i = 0; i < T * DR; i++)
		kpe[i] = (float)mb_rng_normal(&rng);
	for (int i = 0; i < T * DR / 2; i++) {
		c[i] = (float)(2 * mb_rng_uniform(&rng) - 1);
		s[i] = (float)(2 * mb_rng_uniform(&rng) - 1);
	}
	for (int r = 0; r < T * H; r++)
		memcpy(qpe + r * DR, q + r * W + DN, DR * sizeof(float));
	mb_ref_mla_partial_rope(axis, (const float *const[]){q, kn, kpe, c, s}, (float *const[]){qo, ko}, NULL, T);
	mb_ref_rope_qk(rope_axis, (const float *const[]){qpe, kpe, c, s}, (float *const[]){rq, rk}, NULL, T);
	for (int r = 0; r < T * H; r++) {
		copies = copies && memcmp(qo + r * W, q + r * W, DN * sizeof(float)) == 0;
		copies = copies && memcmp(ko + r * W, kn + r * DN, DN * sizeof(float)) == 0;
		rotated = rotated && memcmp(qo + r * W + DN, rq + r * DR, DR * sizeof(float)) == 0;
		rotated = rotated && memcmp(ko + r * W + DN, rk + (r / H) * DR, DR * sizeof(float)) == 0;
	}
	CHECK(copies);
	CHECK(rotated);
}

/* One element of the last output off by far more than the tolerance. */
static void plant_in_last_output(refcheck_case *c)
{
	c->ref[c->t.n_tensors - 1][c->rows / 2] += 1e-3f;
}

/* The fp32 reference agrees with the fp64 oracle at the row's fp32
 * tolerance on fresh random inputs, for every dtype's rounded inputs; and
 * one element off by far more than the tolerance is caught. */
static void against_oracle(const char *row_name, const int64_t *axis)
{
	const mb_row *row = mb_catalog_find(row_name);
	const refcheck_oracle_test test = {.seed = 4321, .plant = plant_in_last_output};

	CHECK(row != NULL);
	if (row)
		refcheck_against_oracle(row, axis, &test);
}

/* a*b + sign*(e*f) as the GPU may evaluate it: either product fused into an
 * FMA, or neither (fused = 0, 1, 2), then rounded to the case dtype. */
static float gpu_pair(mb_dtype dtype, int fused, float a, float b, float sign, float e, float f)
{
	float v;
	if (fused == 1)
		v = fmaf(a, b, sign * (e * f));
	else if (fused == 2)
		v = fmaf(sign * e, f, a * b);
	else
		v = a * b + sign * (e * f);
	return mb_dtype_round(dtype, v);
}

/* The rotation of one pair (x1, x2) by (c, s) with sign +1 (forward) or -1
 * (backward), as every GPU variant computes it (the fallbacks too: their
 * rotate-half intermediate is an exact negated copy). */
static void gpu_rotate(mb_dtype dtype, int fused, float sign, float x1, float x2, float c, float s,
	float *lo, float *hi)
{
	*lo = gpu_pair(dtype, fused, x1, c, -sign, x2, s);
	*hi = gpu_pair(dtype, fused, x2, c, sign, x1, s);
}

/* For each dtype and each FMA choice, the emulated GPU output passes the
 * row's tolerance against the fp32 reference: the tolerance covers what the
 * hardware may do, not only what the reference does. */
static void tolerance_covers_gpu(const char *row_name, const int64_t *axis)
{
	const mb_row *row = mb_catalog_find(row_name);
	const bool mla = strcmp(row_name, "mla_partial_rope") == 0;
	const float sign = strcmp(row_name, "rope_qk_bwd") == 0 ? -1.0f : 1.0f;

	CHECK(row != NULL);
	for (int d = 0; row && d < MB_DTYPE_COUNT; d++) {
		for (int fused = 0; fused < 3; fused++) {
			refcheck_case c;
			const mb_host_tensors *t = &c.t;
			float *got[2];
			mb_check chk;

			CHECK(refcheck_case_make(&c, row, axis, (mb_dtype)d, 99 + (uint64_t)(3 * d + fused)) == 0);
			CHECK(refcheck_case_reference(&c) == 0);
			for (int o = 0; o < 2; o++)
				got[o] = t->data[t->n_inputs + o];
			for (int64_t tok = 0; tok < c.rows; tok++) {
				if (mla) {
					int64_t h_n = axis[MLA_H], dn = axis[MLA_DN], dr = axis[MLA_DR], w = dn + dr;
					const float *cs = t->data[3] + tok * dr / 2, *sn = t->data[4] + tok * dr / 2;
					for (int64_t h = 0; h < h_n; h++) {
						const float *qs = t->data[0] + (tok * h_n + h) * w, *kn = t->data[1] + (tok * h_n + h) * dn;
						const float *kp = t->data[2] + tok * dr;
						float *qo = got[0] + (tok * h_n + h) * w, *ko = got[1] + (tok * h_n + h) * w;
						memcpy(qo, qs, (size_t)dn * sizeof(float));
						memcpy(ko, kn, (size_t)dn * sizeof(float));
						for (int64_t i = 0; i < dr / 2; i++) {
							gpu_rotate(c.plan.dtype, fused, 1, qs[dn + i], qs[dn + i + dr / 2], cs[i], sn[i],
								&qo[dn + i], &qo[dn + i + dr / 2]);
							gpu_rotate(c.plan.dtype, fused, 1, kp[i], kp[i + dr / 2], cs[i], sn[i],
								&ko[dn + i], &ko[dn + i + dr / 2]);
						}
					}
				} else {
					int64_t dd = axis[BWD_D], half = dd / 2;
					const float *cs = t->data[2] + tok * half, *sn = t->data[3] + tok * half;
					for (int o = 0; o < 2; o++) {
						int64_t heads = axis[o == 0 ? BWD_HQ : BWD_HK];
						for (int64_t h = 0; h < heads; h++) {
							const float *x = t->data[o] + (tok * heads + h) * dd;
							float *y = got[o] + (tok * heads + h) * dd;
							for (int64_t i = 0; i < half; i++)
								gpu_rotate(c.plan.dtype, fused, sign, x[i], x[i + half], cs[i], sn[i],
									&y[i], &y[i + half]);
						}
					}
				}
			}
			CHECK_MSG(refcheck_outputs_pass(&chk, &c, (const float *const *)got,
					(const float *const *)(c.ref + t->n_inputs), &row->tolerance[d]),
				"%s %s fma %d: %llu over tolerance, max abs %g", row_name, mb_dtype_name((mb_dtype)d), fused,
				(unsigned long long)chk.over_tolerance, chk.max_abs);
			refcheck_case_free(&c);
		}
	}
}

static void catalog_rules(void)
{
	const mb_row *bwd = mb_catalog_find("rope_qk_bwd"), *mla = mb_catalog_find("mla_partial_rope");
	mb_error why;
	uint64_t elems, bytes;

	CHECK(bwd && mla);
	if (!bwd || !mla)
		return;
	CHECK(bwd->block == 'A' && mla->block == 'A');
	CHECK(bwd->check_shape((int64_t[]){8, 2, 1, 7}, &why) == MB_EINVAL && strstr(why.text, "even"));
	CHECK(mla->check_shape((int64_t[]){8, 2, 128, 63}, &why) == MB_EINVAL && strstr(why.text, "Dr"));
	CHECK(mla->check_shape((int64_t[]){8, 16, 128, 64}, &why) == 0);
	/* rope_qk_bwd T=2, Hq=2, Hk=1, D=4: dq_out 16, dk_out 8, cos 4, sin 4,
	 * dq 16, dk 8 = 56 elements, each read or written once */
	CHECK(mb_row_footprint(bwd, (int64_t[]){2, 2, 1, 4}, MB_BF16, &elems, &bytes) == 0);
	CHECK(elems == 56 && bytes == 112);
	CHECK(bwd->bytes((int64_t[]){2, 2, 1, 4}, MB_FP32) == 56 * 4);
	/* mla T=2, H=3, Dn=4, Dr=6 (W=10): q 60, k_nope 24, k_pe 12, cos 6,
	 * sin 6, q_out 60, k_out 60 = 228 elements; k_pe counted once */
	CHECK(mb_row_footprint(mla, (int64_t[]){2, 3, 4, 6}, MB_BF16, &elems, &bytes) == 0);
	CHECK(elems == 228 && bytes == 456);
	CHECK(mla->bytes((int64_t[]){2, 3, 4, 6}, MB_FP16) == 228 * 2);
	/* the nam56r shape, bf16: per token 3*16*192 + 16*128 + 2*64 = 11392
	 * elements, 22784 bytes */
	CHECK(mla->bytes((int64_t[]){32768, 16, 128, 64}, MB_BF16) == 32768ull * 22784);
	/* declared kernels carry the row's name, fused is one launch */
	const mb_row *both[2] = {bwd, mla};
	for (int r = 0; r < 2; r++) {
		const mb_variant *f = mb_row_find_variant(both[r], "fused");
		const mb_variant *fb = mb_row_find_variant(both[r], "fallback");
		CHECK(f && fb && mb_row_find_variant(both[r], "reference"));
		if (!f || !fb)
			continue;
		CHECK(f->launches_per_call == 1 && fb->launches_per_call > 1);
		for (int k = 0; k < MB_MAX_KERNEL_PATTERNS && fb->kernel_patterns[k]; k++)
			CHECK(strncmp(fb->kernel_patterns[k], both[r]->name, strlen(both[r]->name)) == 0);
		CHECK(strncmp(f->kernel_patterns[0], both[r]->name, strlen(both[r]->name)) == 0);
		for (int d = 0; d < MB_DTYPE_COUNT; d++)
			CHECK(both[r]->tolerance[d].rationale && both[r]->tolerance[d].rel > 0);
	}
	CHECK(mb_row_find_variant(bwd, "fallback")->launches_per_call == 4);
	CHECK(mb_row_find_variant(mla, "fallback")->launches_per_call == 5);
}

int main(void)
{
	rope_bwd_by_hand();
	mla_by_hand();
	rope_bwd_is_transpose();
	mla_matches_rope_qk();
	against_oracle("rope_qk_bwd", (int64_t[]){257, 8, 2, 128});
	against_oracle("rope_qk_bwd", (int64_t[]){33, 3, 1, 6});
	against_oracle("mla_partial_rope", (int64_t[]){129, 16, 128, 64});
	against_oracle("mla_partial_rope", (int64_t[]){17, 3, 5, 6});
	tolerance_covers_gpu("rope_qk", (int64_t[]){129, 8, 2, 128});
	tolerance_covers_gpu("rope_qk_bwd", (int64_t[]){129, 8, 2, 128});
	tolerance_covers_gpu("mla_partial_rope", (int64_t[]){65, 16, 128, 64});
	catalog_rules();
	return mb_test_finish("test_reference_rope");
}
