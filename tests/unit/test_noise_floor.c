/* megabench noise-floor's computation (src/receipts/noise_floor.c) on
 * hand-made A/A receipts whose answer is worked out below: the floor per
 * row is 1.5 x the largest max(r, 1/r) - 1 over every pair of receipts and
 * every case ok in both; the top level is the largest row floor; unlike
 * receipts are refused naming the field; the TOML it writes loads as a
 * policy with those floors, rounded up. The gate passing A/A pairs with a
 * learned policy is pinned by tests/golden/gate/noise_floor_learned. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "receipts/noise_floor.h"
#include "receipts/policy.h"
#include "testutil.h"

#define N_RECEIPTS 3
#define OID_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define OID_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static json_t *kase(const char *id, const char *row, const char *status, double median_ns)
{
	return json_pack("{s:s, s:s, s:s, s:{s:f}}", "id", id, "row", row, "status", status,
		"timing", "median_ns", median_ns);
}

/* The parts of a receipt noise-floor reads: identity and case medians. */
static json_t *receipt(double a1, double a2, double b1, const char *b1_status)
{
	json_t *r = json_pack("{s:s, s:{s:s}, s:{s:s}, s:{s:[s], s:i}, s:{s:b, s:s, s:b, s:[{s:s, s:s, s:b}]},"
		" s:{s:s, s:s}}",
		"backend", "cpu", "device", "name", "Xeon", "suite", "name", "smoke",
		"settings", "modes", "cold", "warmup", 2,
		"provenance", "available", 1, "commit", OID_A, "dirty", 0,
		"sources", "path", "src/kernels/rope_qk.cu", "blob_id", OID_B, "modified", 0,
		"build", "c_compiler", "gcc 12.2.0", "c_args", "-O2");

	json_object_set_new(r, "cases", json_pack("[o, o, o]", kase("alpha/1", "alpha", "ok", a1),
		kase("alpha/2", "alpha", "ok", a2), kase("beta/1", "beta", b1_status, b1)));
	return r;
}

static const mb_noise_floor_row *row_of(const mb_noise_floor *nf, const char *name)
{
	for (size_t i = 0; i < nf->n_rows; i++)
		if (!strcmp(nf->rows[i].row, name))
			return &nf->rows[i];
	return NULL;
}

static void test_floor(void)
{
	/* alpha/1: 100, 110, 95 -> pairs 110/100 - 1 = 0.1, 100/95 - 1 = 0.0526,
	 *          110/95 - 1 = 0.1579 (receipts 1 and 2): the largest;
	 * alpha/2: 200, 204, 198 -> at most 204/198 - 1 = 0.0303;
	 * beta/1:  50, 51, and a skipped case in the third receipt, which no
	 *          pair counts -> 51/50 - 1 = 0.02 */
	json_t *r[N_RECEIPTS] = {receipt(100, 200, 50, "ok"), receipt(110, 204, 51, "ok"), receipt(95, 198, 1, "skipped")};
	const char *names[N_RECEIPTS] = {"r0.json", "r1.json", "r2.json"};
	const mb_noise_floor_row *alpha, *beta;
	mb_noise_floor nf;
	mb_error err;

	CHECK(mb_noise_floor_compute(&nf, r, names, N_RECEIPTS, &err) == 0);
	CHECK(nf.n_receipts == 3 && nf.n_pairs == 3 && nf.n_rows == 2);
	alpha = row_of(&nf, "alpha");
	beta = row_of(&nf, "beta");
	CHECK(alpha && beta);
	if (alpha && beta) {
		CHECK_MSG(fabs(alpha->max_deviation - (110.0 / 95.0 - 1.0)) < 1e-12, "alpha %g", alpha->max_deviation);
		CHECK(fabs(alpha->floor - MB_NOISE_FLOOR_SAFETY * (110.0 / 95.0 - 1.0)) < 1e-12);
		CHECK(!strcmp(alpha->worst_case, "alpha/1") && alpha->worst_a == 1 && alpha->worst_b == 2);
		CHECK(alpha->n_deviations == 6);
		CHECK(fabs(beta->max_deviation - 0.02) < 1e-12 && beta->n_deviations == 1);
		CHECK(fabs(nf.floor - alpha->floor) < 1e-15);
	}

	/* the TOML loads as a policy, every floor rounded up to 4 decimals */
	{
		char path[] = "/tmp/mb_noise_floor_XXXXXX";
		int fd = mkstemp(path);
		FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
		mb_policy policy;

		CHECK(f != NULL);
		if (f) {
			CHECK(mb_noise_floor_print_toml(f, &nf, r, names, &err) == 0);
			fclose(f);
			CHECK_MSG(mb_policy_load(&policy, path, &err) == 0, "%s: %s", err.where, err.text);
			/* 1.5 * 0.157894... = 0.236842 -> 0.2369; 1.5 * 0.02 = 0.03 */
			CHECK_MSG(fabs(policy.t.noise_floor - 0.2369) < 1e-12, "top %g", policy.t.noise_floor);
			CHECK(fabs(mb_policy_for_row(&policy, "alpha")->noise_floor - 0.2369) < 1e-12);
			CHECK_MSG(fabs(mb_policy_for_row(&policy, "beta")->noise_floor - 0.03) < 1e-12, "beta %g",
				mb_policy_for_row(&policy, "beta")->noise_floor);
			CHECK(mb_policy_for_row(&policy, "beta")->min_effect == MB_POLICY_DEFAULT_MIN_EFFECT);
			mb_policy_free(&policy);
			unlink(path);
		}
	}
	mb_noise_floor_free(&nf);
	for (int i = 0; i < N_RECEIPTS; i++)
		json_decref(r[i]);
}

static void test_refusals(void)
{
	json_t *r[2] = {receipt(100, 200, 50, "ok"), receipt(100, 200, 50, "ok")};
	const char *names[2] = {"a.json", "b.json"};
	mb_noise_floor nf;
	mb_error err;

	/* one receipt is no pair */
	CHECK(mb_noise_floor_compute(&nf, r, names, 1, &err) == MB_EINVAL);
	/* another device */
	json_object_set_new(json_object_get(r[1], "device"), "name", json_string("EPYC"));
	CHECK(mb_noise_floor_compute(&nf, r, names, 2, &err) == MB_EINVAL);
	CHECK_MSG(strstr(err.text, "device.name differs (Xeon vs EPYC)") && !strcmp(err.where, "b.json"),
		"%s: %s", err.where, err.text);
	json_object_set_new(json_object_get(r[1], "device"), "name", json_string("Xeon"));
	/* another revision: a source blob, then the commit */
	json_object_set_new(json_array_get(json_object_get(json_object_get(r[1], "provenance"), "sources"), 0),
		"blob_id", json_string(OID_A));
	CHECK(mb_noise_floor_compute(&nf, r, names, 2, &err) == MB_EINVAL);
	CHECK_MSG(strstr(err.text, "provenance.sources differ (src/kernels/rope_qk.cu"), "%s", err.text);
	json_object_set_new(json_object_get(r[1], "provenance"), "commit", json_string(OID_B));
	CHECK(mb_noise_floor_compute(&nf, r, names, 2, &err) == MB_EINVAL);
	CHECK_MSG(strstr(err.text, "provenance.commit differs"), "%s", err.text);
	/* another backend and compiler, both named */
	json_decref(r[1]);
	r[1] = receipt(100, 200, 50, "ok");
	json_object_set_new(r[1], "backend", json_string("cuda"));
	json_object_set_new(json_object_get(r[1], "build"), "c_compiler", json_string("clang 16"));
	CHECK(mb_noise_floor_compute(&nf, r, names, 2, &err) == MB_EINVAL);
	CHECK_MSG(strstr(err.text, "backend differs") && strstr(err.text, "build.c_compiler differs"), "%s", err.text);
	/* no provenance: nothing says the code was the same */
	json_decref(r[1]);
	r[1] = receipt(100, 200, 50, "ok");
	json_object_set_new(json_object_get(r[1], "provenance"), "available", json_false());
	CHECK(mb_noise_floor_compute(&nf, r, names, 2, &err) == MB_EINVAL);
	CHECK_MSG(strstr(err.text, "provenance unavailable"), "%s", err.text);
	json_decref(r[0]);
	json_decref(r[1]);
}

int main(void)
{
	test_floor();
	test_refusals();
	return mb_test_finish("test_noise_floor");
}
