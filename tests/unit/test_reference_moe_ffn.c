/* The expert FFN rows (moe_ffn, moe_ffn_swiglu): their fp32 references and
 * fp64 oracles against the examples src/reference/moe_ffn.c works out by
 * hand (SwiGLU's W1 interleave, silu(0) = 0, a row sample that leaves the
 * other tokens alone), against each other at the fp32 tolerance on fresh
 * inputs of every dtype, and their descriptors: W1's width, the bytes and
 * FLOP models, the tolerances and the declared launches. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference/reference.h"
#include "refcheck.h"
#include "testutil.h"

enum { AX_T, AX_H, AX_E, AX_K, AX_F };

/* moe_ffn.c's router bias on expert 0 (every 8th expert): with logits
 * (0, 0) expert 0 ranks first, with weight 1 / (1 + e^-bias). */
#define BIAS_HEAVY 0.921875
/* The examples' fp32 results: a few roundings of values under 10. */
#define BY_HAND_F32_TOL 1e-5
#define BY_HAND_F64_TOL 1e-12

static double heavy_weight(void)
{
	return 1 / (1 + exp(-BIAS_HEAVY));
}

static double silu(double g)
{
	return g / (1 + exp(-g));
}

static void relu2_by_hand(void)
{
	/* T=1, H=1, E=2, K=2, F=1 (the math only: check_shape refuses it):
	 * x = 2, logits (0, 0), W1 = (1, -1), W2 = (3, 5). Expert 0:
	 * relu(2)^2 * 3 = 12; expert 1: relu(-2)^2 * 5 = 0; y = 12 w0 = 8.585. */
	int64_t axis[5] = {1, 1, 2, 2, 1};
	float x[1] = {2}, logits[2] = {0, 0}, w1[2] = {1, -1}, w2[2] = {3, 5}, y[1];
	double yd[1];
	const float *in[4] = {x, logits, w1, w2};
	float *out[1] = {y};
	double *outd[1] = {yd};
	const double want = 12 * heavy_weight();

	mb_ref_moe_ffn(axis, in, out, NULL, 1);
	mb_oracle_moe_ffn(axis, in, outd, NULL, 1);
	CHECK_MSG(fabs(y[0] - want) < BY_HAND_F32_TOL, "%.7g, want %.7g", y[0], want);
	CHECK_MSG(fabs(yd[0] - want) < BY_HAND_F64_TOL, "%.15g, want %.15g", yd[0], want);
}

#define GLU_F 16            /* two 8-column blocks: the interleave shows */
#define GLU_COLS (2 * GLU_F)

static void swiglu_by_hand(void)
{
	/* T=2, H=1, E=2, K=2, F=16 (W1 [2, 32], W2 [32, 1]), logits (0, 0) for
	 * both tokens. Token 0, x = 2: expert 0's gate/up of f = 0 sit at
	 * columns 0 and 8: g = 2, u = 3, a_0 = 3 silu(2); f = 8's up (column
	 * 24) is 5 but its gate (column 16) is 0: a_8 = silu(0) * 10 = 0, so
	 * W2's 7 on row 8 adds nothing; f = 9 (columns 17, 25): g = -2, u = 1,
	 * a_9 = silu(-2), times W2's 4. Expert 1: f = 0, g = ln 3, u = 2,
	 * a_0 = 1.5 ln 3, times W2's 2. y = w0 (3 silu(2) + 4 silu(-2))
	 * + w1 3 ln 3 = 4.03653; reading gate and up as the two halves of the
	 * row instead gives 143.1. Token 1, x = 0: every g and u is 0, y = 0
	 * exactly. */
	int64_t axis[5] = {2, 1, 2, 2, GLU_F};
	const float half_ln3 = (float)(log(3.0) / 2);
	float x[2] = {2, 0}, logits[4] = {0, 0, 0, 0}, w1[2 * GLU_COLS], w2[2 * GLU_F], y[2];
	double yd[2];
	const float *in[4] = {x, logits, w1, w2};
	float *out[1] = {y};
	double *outd[1] = {yd};
	int64_t second[1] = {1};

	memset(w1, 0, sizeof(w1));
	memset(w2, 0, sizeof(w2));
	w1[0] = 1, w1[8] = 1.5f, w1[24] = 5, w1[17] = -1, w1[25] = 0.5f;
	w1[GLU_COLS + 0] = half_ln3, w1[GLU_COLS + 8] = 1;
	w2[0] = 1, w2[8] = 7, w2[9] = 4;
	w2[GLU_F + 0] = 2;
	const double w0 = heavy_weight();
	const double want = w0 * (3 * silu(2) + 4 * silu(-2)) + (1 - w0) * 2 * 2 * silu(2.0 * half_ln3);

	/* the sample {1}: token 1 only, token 0 left as it was */
	y[0] = NAN, y[1] = NAN;
	mb_ref_moe_ffn_swiglu(axis, in, out, second, 1);
	CHECK(isnan(y[0]) && y[1] == 0);
	mb_ref_moe_ffn_swiglu(axis, in, out, NULL, 2);
	mb_oracle_moe_ffn_swiglu(axis, in, outd, NULL, 2);
	CHECK_MSG(fabs(y[0] - want) < BY_HAND_F32_TOL, "%.7g, want %.7g", y[0], want);
	CHECK_MSG(fabs(yd[0] - want) < BY_HAND_F64_TOL, "%.15g, want %.15g", yd[0], want);
	CHECK(fabs(want - 4.03653) < 1e-5 && y[1] == 0 && yd[1] == 0);
}

/* One element of the first output off by far more than the tolerance. */
static void plant_in_first_output(refcheck_case *c)
{
	c->ref[c->t.n_inputs][c->rows / 2] += 1e-3f;
}

static void descriptors(void)
{
	const mb_row *relu2 = mb_catalog_find("moe_ffn"), *glu = mb_catalog_find("moe_ffn_swiglu");
	/* nam56r's shape of record */
	const int64_t nam[5] = {16384, 2048, 64, 6, 1408};
	const uint64_t t = 16384, h = 2048, e = 64, k = 6, f = 1408;
	mb_tensor_spec spec[MB_MAX_TENSORS];
	const mb_variant *v;
	mb_error why;

	CHECK(relu2 && glu);
	if (!relu2 || !glu)
		return;
	/* W1 [E*H, F] and [E*H, 2F]; everything else alike */
	CHECK(relu2->tensors(nam, spec) == 5 && spec[2].rows == (int64_t)(e * h) && spec[2].row_elems == (int64_t)f);
	CHECK(glu->tensors(nam, spec) == 5 && spec[2].rows == (int64_t)(e * h) && spec[2].row_elems == (int64_t)(2 * f));
	CHECK(spec[3].rows == (int64_t)(e * f) && spec[3].row_elems == (int64_t)h && spec[4].is_output);
	/* bytes: x and y, logits, W1 and W2 (2EHF, and 3EHF with the gates) */
	CHECK(relu2->bytes(nam, MB_BF16) == (2 * t * h + t * e + 2 * e * h * f) * 2);
	CHECK(glu->bytes(nam, MB_BF16) == (2 * t * h + t * e + 3 * e * h * f) * 2);
	/* FLOPs: 2 TK H F per GEMM, GEMM1 twice as wide with SwiGLU */
	CHECK(relu2->flops(nam) == 4 * t * k * h * f && glu->flops(nam) == 6 * t * k * h * f);
	CHECK(glu->check_shape(nam, &why) == 0);
	CHECK(glu->check_shape((int64_t[]){16, 2048, 64, 6, 1400}, &why) == MB_EINVAL && strstr(why.text, "F"));
	/* bf16: 10 sigmas of 0.871 u_b; fp32 as moe_ffn */
	CHECK(fabs(glu->tolerance[MB_BF16].abs - 10 * 0.871 * 0x1p-8) < 1e-12);
	CHECK(glu->tolerance[MB_BF16].abs < relu2->tolerance[MB_BF16].abs);
	CHECK(glu->tolerance[MB_FP32].abs == relu2->tolerance[MB_FP32].abs);
	/* the launches mirror moe_ffn's, with the SwiGLU pass for relu^2's */
	const char *names[3] = {"fused", "standard", "cublas_grouped"};
	for (int i = 0; i < 3; i++) {
		const mb_variant *a = mb_row_find_variant(relu2, names[i]), *b = mb_row_find_variant(glu, names[i]);
		CHECK_MSG(a && b && a->launches_per_call == b->launches_per_call && a->syncs_host == b->syncs_host
			&& a->library_kernels == b->library_kernels && a->kind == b->kind, "%s", names[i]);
		/* every GPU variant runs both 2-byte dtypes, and not fp32 */
		const unsigned two_byte = (1u << MB_BF16) | (1u << MB_FP16);
		CHECK_MSG(a && b && a->dtype_mask == two_byte && b->dtype_mask == two_byte, "%s", names[i]);
	}
	CHECK((v = mb_row_find_variant(glu, "standard")) && strcmp(v->kernel_patterns[2], "moe_ffn_lib_swiglu") == 0);
	CHECK(mb_row_find_variant(glu, "reference") != NULL);
}

int main(void)
{
	relu2_by_hand();
	swiglu_by_hand();
	descriptors();
	/* the fp32 reference meets the fp64 oracle at the row's fp32 tolerance
	 * on fresh inputs of every dtype, and the check can fail; the smoke's
	 * axes but T: a few dozen routed rows per expert */
	const refcheck_oracle_test test = {.seed = 2468, .plant = plant_in_first_output};
	refcheck_against_oracle(mb_catalog_find("moe_ffn"), (int64_t[]){96, 256, 8, 2, 128}, &test);
	refcheck_against_oracle(mb_catalog_find("moe_ffn_swiglu"), (int64_t[]){96, 256, 8, 2, 128}, &test);
	return mb_test_finish("test_reference_moe_ffn");
}
