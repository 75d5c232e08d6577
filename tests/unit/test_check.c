/* Which rows the reference checks, and the comparison with tolerances
 * (harness/check.h). Expected values are worked out by hand in the
 * comments. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/check.h"
#include "testutil.h"

static void test_rows_pick(void)
{
	int64_t *rows = NULL, n = 0;
	mb_error err;

	CHECK(mb_check_rows_pick(&rows, &n, 100, 200, 1, &err) == 0 && rows == NULL && n == 100);
	CHECK(mb_check_rows_pick(&rows, &n, 100000, 500, 1, &err) == 0 && rows && n == 500);
	for (int64_t i = 1; rows && i < n; i++)
		CHECK(rows[i] > rows[i - 1]); /* sorted and distinct */
	CHECK(rows && rows[0] >= 0 && rows[n - 1] < 100000);
	free(rows);
	/* every row can be drawn: picking all but one of 10 leaves one out */
	CHECK(mb_check_rows_pick(&rows, &n, 10, 9, 3, &err) == 0 && n == 9);
	free(rows);
}

static void test_check(void)
{
	mb_tensor_spec spec = {"y", true, 2, 3, MB_FILL_NORMAL, 0, 0};
	mb_tolerance tol = {0.01, 0.01, "unit"};
	float want[6] = {1, 2, 3, 4, 5, 6};
	float good[6] = {1.005f, 2, 3, 4, 5, 6.05f};  /* 0.05 <= 0.01 + 0.06 */
	float bad[6] = {1, 2, 3, 4.2f, 5, 6};           /* 0.2 > 0.01 + 0.04 */
	float nan[6] = {1, 2, NAN, 4, 5, 6};
	float zero[6] = {0};
	int64_t second_row[1] = {1};
	mb_check c;
	char why[256];

	mb_check_init(&c);
	mb_check_add(&c, &spec, good, want, NULL, 2, 2, &tol);
	CHECK(mb_check_passed(&c) && c.over_tolerance == 0 && c.compared == 6);
	CHECK(fabs(c.max_abs - 0.05) < 1e-6);

	mb_check_init(&c);
	mb_check_add(&c, &spec, bad, want, NULL, 2, 2, &tol);
	CHECK(!mb_check_passed(&c) && c.over_tolerance == 1);
	mb_check_describe(&c, why, sizeof(why));
	CHECK_MSG(strstr(why, "1 of 6 elements over tolerance") != NULL, "%s", why);

	/* row sampling: only row 0 checked, so the bad element in row 1 is not */
	mb_check_init(&c);
	mb_check_add(&c, &spec, bad, want, (int64_t[]){0}, 1, 2, &tol);
	CHECK(mb_check_passed(&c) && c.compared == 3);
	mb_check_init(&c);
	mb_check_add(&c, &spec, bad, want, second_row, 1, 2, &tol);
	CHECK(!mb_check_passed(&c));

	mb_check_init(&c);
	mb_check_add(&c, &spec, nan, want, NULL, 2, 2, &tol);
	CHECK(!mb_check_passed(&c) && c.nan_count == 1);

	/* all zeros never pass, even against an all-zero reference */
	mb_check_init(&c);
	mb_check_add(&c, &spec, zero, zero, NULL, 2, 2, &tol);
	CHECK(!mb_check_passed(&c));
	mb_check_describe(&c, why, sizeof(why));
	CHECK_MSG(strstr(why, "zero") != NULL, "%s", why);

	/* an output with another row count than the unit ([1, H] weight
	 * gradients) is compared whole, whatever the sample */
	{
		mb_tensor_spec dw = {"dw", true, 1, 3, MB_FILL_NORMAL, 0, 0};
		float dw_want[3] = {1, 2, 3}, dw_bad[3] = {1, 2, 3.5f};
		mb_check_init(&c);
		mb_check_add(&c, &dw, dw_bad, dw_want, second_row, 1, 2, &tol);
		CHECK(!mb_check_passed(&c) && c.compared == 3 && c.over_tolerance == 1);
	}
	/* ... unless its own rows are given, with its row count as the unit
	 * (a sampled output's, mb_output_rows) */
	{
		mb_tensor_spec dw = {"dW", true, 3, 1, MB_FILL_NORMAL, 0, 0};
		float dw_want[3] = {1, 2, 3}, dw_bad[3] = {1, 2, 3.5f};
		mb_check_init(&c);
		mb_check_add(&c, &dw, dw_bad, dw_want, (int64_t[]){0, 1}, 2, 3, &tol);
		CHECK(mb_check_passed(&c) && c.compared == 2);
		mb_check_init(&c);
		mb_check_add(&c, &dw, dw_bad, dw_want, (int64_t[]){2}, 1, 3, &tol);
		CHECK(!mb_check_passed(&c) && c.compared == 1);
	}

	/* nothing compared never passes */
	mb_check_init(&c);
	CHECK(!mb_check_passed(&c));
}

int main(void)
{
	test_rows_pick();
	test_check();
	return mb_test_finish("test_check");
}
