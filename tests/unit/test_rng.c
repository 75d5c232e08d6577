/* The case seeds (harness/rng.h). */
#include "harness/rng.h"
#include "testutil.h"

static void test_seeds(void)
{
	CHECK(mb_case_seed(1, "a") == mb_case_seed(1, "a"));
	CHECK(mb_case_seed(1, "a") != mb_case_seed(2, "a"));
	CHECK(mb_case_seed(1, "a") != mb_case_seed(1, "b"));
}

int main(void)
{
	test_seeds();
	return mb_test_finish("test_rng");
}
