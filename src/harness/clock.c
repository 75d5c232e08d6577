/* The monotonic clock and the trace; see clock.h. */
#include "harness/clock.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define NS_PER_S 1000000000LL

int64_t mb_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

bool mb_trace_on(void)
{
	static int on = -1;

	if (on < 0)
		on = getenv("MEGABENCH_TRACE") != NULL;
	return on;
}

void mb_trace(const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if (!mb_trace_on())
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "megabench trace %d %.3f: %s\n", (int)getpid(), (double)mb_now_ns() / 1e9, line);
}
