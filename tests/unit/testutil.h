/* Minimal test helpers: every failed check prints file:line and the
 * expression, and the test exits non-zero at the end. */
#ifndef MB_TESTS_TESTUTIL_H
#define MB_TESTS_TESTUTIL_H

#include <stdio.h>

extern int mb_test_failures;
extern int mb_test_checks;

#define CHECK(cond) do { \
	mb_test_checks++; \
	if (!(cond)) { \
		mb_test_failures++; \
		fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
	} \
} while (0)

#define CHECK_MSG(cond, ...) do { \
	mb_test_checks++; \
	if (!(cond)) { \
		mb_test_failures++; \
		fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
		fprintf(stderr, __VA_ARGS__); \
		fputc('\n', stderr); \
	} \
} while (0)

/* Print "N checks, N failed" and return the exit code. */
int mb_test_finish(const char *name);

/* $MB_SOURCE_ROOT (or "." when unset) joined with `rel`, in a static buffer. */
const char *mb_test_src(const char *rel);

#endif
