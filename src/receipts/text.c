#include "receipts/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *mb_text_get(const json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));

	return s ? s : "";
}

void mb_text_appendf(char *buf, size_t len, const char *fmt, ...)
{
	size_t used = strlen(buf);
	va_list ap;

	/* a full buffer has nothing to give, and len - used must not wrap */
	if (used + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
}
