#include <stdarg.h>
#include <stdio.h>

#include "harness/cli.h"

void mb_cli_error(const mb_error *err)
{
	char text[MB_ERROR_WHERE_MAX + MB_ERROR_TEXT_MAX];

	mb_error_format(err, text, sizeof(text));
	fprintf(stderr, "megabench: %s\n", text);
}

int mb_cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "megabench %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(see 'megabench %s --help')\n", cmd);
	return MB_EXIT_USAGE;
}
