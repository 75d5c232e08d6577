#include "testutil.h"

#include <stdlib.h>

int mb_test_failures;
int mb_test_checks;

int mb_test_finish(const char *name)
{
	printf("%s: %d checks, %d failed\n", name, mb_test_checks, mb_test_failures);
	return mb_test_failures ? 1 : 0;
}

const char *mb_test_src(const char *rel)
{
	static char buf[4096];
	const char *root = getenv("MB_SOURCE_ROOT");

	snprintf(buf, sizeof(buf), "%s/%s", root && *root ? root : ".", rel);
	return buf;
}
