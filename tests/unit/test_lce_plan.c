/* linear_cross_entropy's memory target, checked before any GPU runs: at
 * every shape of suites/nam56r.toml each fused variant's slots (its cuBLAS
 * workspace included, as the harness's tally counts them) hold at most
 * 1/32 of what materialized's hold, on an H100 SXM or H200 (132 SMs) and on
 * an H100 PCIe (114). The plans are host code in src/kernels/linear_cross_entropy.cu;
 * without CUDA there is nothing to check (exit 77, skipped). */
#include <stdint.h>
#include <stdio.h>

#include "mb_config.h"
#include "testutil.h"

#if MB_HAVE_CUDA
int64_t mb_lce_scratch_bytes(const int64_t *axis, const char *variant, int sms);

#define MEM_DIVISOR 32
/* the materialized variant's [T, V] bf16 logits, at least */
#define LOGITS_BYTES(t, v) (2 * (t) * (v))

static void test_nam56r_shapes(void)
{
	static const int64_t tokens[] = {8192, 16384}, hidden[] = {2048, 4096}, vocab[] = {65536, 128256};
	static const char *const fused[] = {"vocab_chunked", "token_chunked"};
	static const int sms[] = {132, 114};

	for (int a = 0; a < 2; a++)
		for (int b = 0; b < 2; b++)
			for (int c = 0; c < 2; c++) {
				const int64_t axis[3] = {tokens[a], hidden[b], vocab[c]};
				const int64_t mat = mb_lce_scratch_bytes(axis, "materialized", 132);
				CHECK_MSG(mat >= LOGITS_BYTES(axis[0], axis[2]), "T=%lld V=%lld: materialized holds %lld",
					(long long)axis[0], (long long)axis[2], (long long)mat);
				for (int f = 0; f < 2; f++)
					for (int s = 0; s < 2; s++) {
						const int64_t got = mb_lce_scratch_bytes(axis, fused[f], sms[s]);
						CHECK_MSG(got > 0 && got * MEM_DIVISOR <= mat,
							"%s at T=%lld H=%lld V=%lld (%d SMs): %lld bytes, 1/%.1f of materialized's %lld",
							fused[f], (long long)axis[0], (long long)axis[1], (long long)axis[2], sms[s],
							(long long)got, got > 0 ? (double)mat / (double)got : 0.0, (long long)mat);
					}
			}
	CHECK(mb_lce_scratch_bytes((const int64_t[]){8192, 2048, 65536}, "fused", 132) == -1);
}

int main(void)
{
	test_nam56r_shapes();
	return mb_test_finish("test_lce_plan");
}
#else
int main(void)
{
	puts("test_lce_plan: skipped, built without CUDA");
	return 77;
}
#endif
