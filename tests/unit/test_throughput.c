/* Throughput against the ceilings (harness/throughput.h). Expected values
 * are worked out by hand in the comments. */
#include <math.h>
#include <string.h>

#include "harness/throughput.h"
#include "testutil.h"

static void test_throughput(void)
{
	json_t *ceil = json_pack("{s:f, s:n}", "copy_gbps", 1000.0, "gemm_tflops");
	mb_traffic whole = {.bytes = 1000000000u};
	/* 1e9 bytes in 2 ms = 500 GB/s = half the copy ceiling */
	json_t *t = mb_throughput_json(&whole, 10, 2e6, NULL, ceil);

	CHECK(fabs(json_real_value(json_object_get(t, "gbps")) - 500.0) < 1e-9);
	CHECK(strcmp(json_string_value(json_object_get(t, "ceiling")), "copy") == 0);
	CHECK(fabs(json_real_value(json_object_get(t, "fraction_of_ceiling")) - 0.5) < 1e-12);
	CHECK(!json_object_get(t, "read_bytes"));
	json_decref(t);
	t = mb_throughput_json(&whole, 10, 2e6, NULL, NULL);
	CHECK(json_is_null(json_object_get(t, "fraction_of_ceiling")));
	json_decref(t);
	json_decref(ceil);
}

/* The memory ceiling follows the read share: write-only 800, copy 1000,
 * read-only 1400 GB/s at shares 0, 1/2 and 1, straight lines between. */
static void test_memory_ceiling(void)
{
	json_t *ceil = json_pack("{s:f, s:f, s:f, s:n}", "copy_gbps", 1000.0, "read_gbps", 1400.0,
		"write_gbps", 800.0, "gemm_tflops");
	const char *which;
	mb_traffic two_to_one = {.split = true, .read_bytes = 2000000000u, .write_bytes = 1000000000u,
		.bytes = 3000000000u, .n_launches = 2,
		.launch = (mb_launch_traffic[]){{"a", 1000000000u, 1000000000u}, {"b", 1000000000u, 0}}};
	double launch_ns[2] = {2e6, NAN};

	CHECK(fabs(mb_memory_ceiling_gbps(ceil, 1, 0, true, &which) - 1400.0) < 1e-9 && !strcmp(which, "memory"));
	CHECK(fabs(mb_memory_ceiling_gbps(ceil, 0, 1, true, &which) - 800.0) < 1e-9);
	CHECK(fabs(mb_memory_ceiling_gbps(ceil, 1, 1, true, &which) - 1000.0) < 1e-9);
	/* two reads per write: 1000 + 400 * (2/3 - 1/2) / (1/2) = 1133.3 */
	CHECK(fabs(mb_memory_ceiling_gbps(ceil, 2, 1, true, &which) - 1000.0 - 400.0 / 3.0) < 1e-9);
	CHECK(fabs(mb_memory_ceiling_gbps(ceil, 2, 1, false, &which) - 1000.0) < 1e-9 && !strcmp(which, "copy"));
	/* 3e9 bytes in 3 ms: 1000 GB/s of a 1133.3 ceiling */
	json_t *t = mb_throughput_json(&two_to_one, 0, 3e6, launch_ns, ceil);
	CHECK(strcmp(json_string_value(json_object_get(t, "ceiling")), "memory") == 0);
	CHECK(fabs(json_real_value(json_object_get(t, "fraction_of_ceiling")) - 1000.0 / (1000.0 + 400.0 / 3.0)) < 1e-9);
	CHECK(json_integer_value(json_object_get(t, "read_bytes")) == 2000000000);
	json_t *l = json_object_get(t, "model_launches");
	CHECK(json_array_size(l) == 2);
	/* launch a: 2e9 bytes in 2 ms = 1000 GB/s, a copy: fraction 1 */
	CHECK(fabs(json_real_value(json_object_get(json_array_get(l, 0), "fraction_of_ceiling")) - 1.0) < 1e-9);
	CHECK(json_is_null(json_object_get(json_array_get(l, 1), "median_ns")));
	json_decref(t);
	json_decref(ceil);
}

int main(void)
{
	test_throughput();
	test_memory_ceiling();
	return mb_test_finish("test_throughput");
}
