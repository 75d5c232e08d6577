/* The examples that four heavy rows work out by hand in their reference
 * files (recurrent_scan, ssm_scan, mhc_sinkhorn, linear_cross_entropy):
 * each example's inputs exactly, every element of every output of the
 * row's fp32 reference against the hand values and of its fp64 oracle
 * against the hand formula, zeros included. The shapes are the examples'
 * own: linear_cross_entropy's check_shape refuses its T = H = 1, V = 2
 * (V < 16384, H < 64: its tolerance's derivation), so this is the math
 * only, as the references are called directly. */
#include <math.h>

#include "kernels/catalog.h"
#include "reference/reference.h"
#include "testutil.h"

/* Every element of one example's outputs, the outputs one after another
 * (ssm_scan's y [1, L*P] is the most). */
#define MAX_OUT_ELEMS 16

/* The fp32 references against the hand values. Each example's fp32 path
 * is at most ~30 roundings (expf, log1pf, expm1f, sqrtf within 1 ulp;
 * +, *, / within half an ulp; the inputs ln 3, ln 2 / 2, -ln 2 and
 * ln(e - 1) rounded once) of values under 4, and nothing amplifies them:
 * no result cancels, and mhc's 40 Sinkhorn half-steps, which in exact
 * arithmetic keep the cross-ratio of its 2 x 2 matrix, each move it by
 * <= 2u (u = 2^-24) through their divisions: 80u, which moves S by a
 * ninth of that (p(1-p)/2 at p = 2/3) and y by twice as much, 18u. The
 * summed worst cases stay under 8e-6 (ssm_scan's y_1: ~15 ulps of values
 * up to 4, 2^-21 each); the errors seen are under 1e-7. */
#define BY_HAND_F32_TOL 1e-5
/* The fp64 oracles against the same formulas in double at the inputs as
 * fp32 holds them (the oracles read fp32 inputs, and ln 3 in fp32 is 1e-8
 * from ln 3, far over this): a few dozen roundings of 2^-53 on values
 * under 4, under 1e-14; the errors seen are under 5e-16. */
#define BY_HAND_F64_TOL 1e-12

typedef struct example {
	const char *row;          /* the catalog row, for its tensor list */
	mb_reference_fn ref;
	mb_oracle_fn oracle;
	int64_t axis[MB_MAX_AXES];
	const float *in[MB_MAX_TENSORS];  /* in the row's tensor order */
	int n_out_elems;
	/* every output element, the outputs in the row's tensor order, one
	 * after another: by hand, and the hand formula in double at the
	 * inputs' fp32 values (NULL: the inputs are exact, as `hand`) */
	const double *hand, *at_inputs;
} example;

/* Run the reference and the oracle on every row of the example (rows NULL,
 * the row count of the first output) and check every output element. */
static void check_example(const example *e)
{
	const mb_row *row = mb_catalog_find(e->row);
	mb_tensor_spec spec[MB_MAX_TENSORS];
	float got[MAX_OUT_ELEMS], *out[MB_MAX_TENSORS];
	double got64[MAX_OUT_ELEMS], *out64[MB_MAX_TENSORS];
	int n_tensors, n_in = 0, total = 0;

	CHECK_MSG(row != NULL, "%s: not in the catalog", e->row);
	if (!row)
		return;
	n_tensors = row->tensors(e->axis, spec);
	while (n_in < n_tensors && !spec[n_in].is_output)
		n_in++;
	CHECK_MSG(n_in > 0 && e->in[n_in - 1] && (n_in == MB_MAX_TENSORS || !e->in[n_in]),
		"%s: the example gives other inputs than the row's %d", e->row, n_in);
	for (int k = n_in; k < n_tensors; k++) {
		out[k - n_in] = got + total;
		out64[k - n_in] = got64 + total;
		total += (int)(spec[k].rows * spec[k].row_elems);
		if (total > MAX_OUT_ELEMS)
			break;
	}
	CHECK_MSG(total == e->n_out_elems, "%s: the row's outputs hold %d elements, the example %d", e->row,
		total, e->n_out_elems);
	if (total != e->n_out_elems)
		return;
	for (int i = 0; i < total; i++)
		got[i] = NAN, got64[i] = NAN; /* an element left unwritten fails */
	e->ref(e->axis, e->in, out, NULL, spec[n_in].rows);
	e->oracle(e->axis, e->in, out64, NULL, spec[n_in].rows);

	for (int k = n_in, at = 0; k < n_tensors; k++) {
		for (int64_t i = 0; i < spec[k].rows * spec[k].row_elems; i++, at++) {
			const double want64 = e->at_inputs ? e->at_inputs[at] : e->hand[at];
			CHECK_MSG(fabs(got[at] - e->hand[at]) <= BY_HAND_F32_TOL, "%s: %s[%lld]: fp32 reference %.9g, want %.9g",
				e->row, spec[k].name, (long long)i, got[at], e->hand[at]);
			CHECK_MSG(fabs(got64[at] - want64) <= BY_HAND_F64_TOL, "%s: %s[%lld]: fp64 oracle %.17g, want %.17g",
				e->row, spec[k].name, (long long)i, got64[at], want64);
		}
	}
}

static void recurrent_scan_by_hand(void)
{
	/* B = D = 1, L = 2: w_a = b_a = w_i = b_i = lambda = 0 give
	 * r = i = 1/2, a = exp(-8 ln 2 / 2) = 1/16, m = sqrt(1 - a^2) =
	 * sqrt(255)/16; x = (2, -2): h_0 = m (1/2 * 2) = m, h_1 = h_0/16 - m =
	 * -15m/16. Every input is exact in fp32. */
	static const float x[2] = {2, -2}, zero[1] = {0};
	const double m = sqrt(255.0) / 16;
	const double hand[2] = {m, -15 * m / 16};

	check_example(&(example){"recurrent_scan", mb_ref_recurrent_scan, mb_oracle_recurrent_scan,
		.axis = {1, 2, 1}, .in = {x, zero, zero, zero, zero, zero}, .n_out_elems = 2, .hand = hand});
}

#define SSM_L 2
#define SSM_P 8
#define SSM_N 8

static void ssm_scan_by_hand(void)
{
	/* B = NH = 1, L = 2, P = N = 8, only p = 0 and n = 0 non-zero:
	 * dt_raw + dt_bias = ln(e - 1) gives dt = 1, lambda_raw = 0 gives
	 * lambda = 1/2 and A = -ln 2 gives a = 1/2, so b = dt a (1 - lambda) = 1/4, c = lambda dt
	 * = 1/2. x_0 = 2, x_1 = 4, B_0 = B_1 = 1, C_0 = 3, C_1 = 1:
	 * y_0 = C_0 c x_0 B_0 = 3 dt = 3, y_1 = C_1 (a h_0 + b x_0 B_0 +
	 * c x_1 B_1) = 2 dt (a + 1) = 3; every other p of y is 0. x, y
	 * [1, L*P] and B, C [1, L*N] hold step t at t*P (t*N). */
	float x[SSM_L * SSM_P] = {0}, b[SSM_L * SSM_N] = {0}, c[SSM_L * SSM_N] = {0};
	static const float raw[SSM_L] = {0, 0};
	const float a_h = (float)-log(2.0), dt_bias = (float)log(exp(1.0) - 1);
	const double dt = log1p(exp((double)dt_bias)), a = exp(dt * (double)a_h);
	double hand[SSM_L * SSM_P] = {0}, at_inputs[SSM_L * SSM_P] = {0};

	x[0] = 2, x[SSM_P] = 4;
	b[0] = 1, b[SSM_N] = 1;
	c[0] = 3, c[SSM_N] = 1;
	hand[0] = 3, hand[SSM_P] = 3;
	at_inputs[0] = 3 * dt, at_inputs[SSM_P] = 2 * dt * (a + 1);
	check_example(&(example){"ssm_scan", mb_ref_ssm_scan, mb_oracle_ssm_scan,
		.axis = {1, SSM_L, 1, SSM_P, SSM_N}, .in = {x, raw, raw, b, c, &a_h, &dt_bias},
		.n_out_elems = SSM_L * SSM_P, .hand = hand, .at_inputs = at_inputs});
}

/* The only iteration count mhc_sinkhorn's check_shape takes. */
#define MHC_ITERATIONS 20

static void mhc_sinkhorn_by_hand(void)
{
	/* n = 2, W = 1, x = (1, 3): xbar = 2, P = (ln 2 / 2, 0, 0, ln 2 / 2)
	 * gives phi = (ln 2, 0; 0, ln 2), M = (m, 1; 1, m) with m = 2. The
	 * first row step gives (m, 1; 1, m) / (m + 1), whose columns already
	 * sum to 1, so 20 iterations leave it: y = ((m + 3), (1 + 3m)) /
	 * (m + 1) = (5/3, 7/3). */
	static const float x[2] = {1, 3};
	const float half_ln2 = (float)(log(2.0) / 2);
	const float p[4] = {half_ln2, 0, 0, half_ln2};
	const double m = exp(2 * (double)half_ln2);
	const double hand[2] = {5.0 / 3, 7.0 / 3}, at_inputs[2] = {(m + 3) / (m + 1), (1 + 3 * m) / (m + 1)};

	check_example(&(example){"mhc_sinkhorn", mb_ref_mhc_sinkhorn, mb_oracle_mhc_sinkhorn,
		.axis = {1, 2, 1, MHC_ITERATIONS}, .in = {x, p}, .n_out_elems = 2, .hand = hand,
		.at_inputs = at_inputs});
}

static void linear_cross_entropy_by_hand(void)
{
	/* T = H = 1, V = 2, h = 1, W = (ln 3, 0), label 0: z = (ln 3, 0), with
	 * e = e^z_0 = 3 softmax (e, 1) / (e + 1), loss = log(1 + 1/e) =
	 * ln(4/3), G = (-1, 1) / (e + 1), dh = G W = -ln(3)/4, dW = G^T h =
	 * (-1/4, 1/4). The label is a float holding the integer, as the
	 * harness hands index inputs to references (mb_tensor_unpack). */
	static const float h[1] = {1}, label[1] = {0};
	const float ln3 = (float)log(3.0);
	const float w[2] = {ln3, 0};
	const double e = exp((double)ln3);
	/* loss [1, 1], dh [1, 1], dW [2, 1] */
	const double hand[4] = {log(4.0 / 3), -log(3.0) / 4, -0.25, 0.25};
	const double at_inputs[4] = {log1p(1 / e), -(double)ln3 / (e + 1), -1 / (e + 1), 1 / (e + 1)};

	check_example(&(example){"linear_cross_entropy", mb_ref_linear_cross_entropy,
		mb_oracle_linear_cross_entropy, .axis = {1, 1, 2}, .in = {h, w, label}, .n_out_elems = 4,
		.hand = hand, .at_inputs = at_inputs});
}

int main(void)
{
	recurrent_scan_by_hand();
	ssm_scan_by_hand();
	mhc_sinkhorn_by_hand();
	linear_cross_entropy_by_hand();
	return mb_test_finish("test_reference_heavy");
}
