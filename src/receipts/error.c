#include "receipts/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int mb_error_set(mb_error *err, int code, const char *where, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return code;
	err->code = code;
	snprintf(err->where, sizeof(err->where), "%s", where ? where : "");
	va_start(ap, fmt);
	vsnprintf(err->text, sizeof(err->text), fmt, ap);
	va_end(ap);
	return code;
}

void mb_error_prefix(mb_error *err, const char *outer)
{
	char old[MB_ERROR_WHERE_MAX];

	if (!err || !outer || !*outer)
		return;
	snprintf(old, sizeof(old), "%s", err->where);
	/* the outer part (a file name) is kept whole; the inner key path is
	 * what gets cut if the two do not fit */
	if (old[0])
		snprintf(err->where, sizeof(err->where), "%s: %.*s", outer,
			(int)(sizeof(old) - strlen(outer) > 2 ? sizeof(old) - strlen(outer) - 3 : 0), old);
	else
		snprintf(err->where, sizeof(err->where), "%s", outer);
}

void mb_error_clear(mb_error *err)
{
	if (!err)
		return;
	err->code = MB_OK;
	err->where[0] = '\0';
	err->text[0] = '\0';
}

void mb_error_format(const mb_error *err, char *buf, size_t len)
{
	if (!err || !len)
		return;
	if (err->where[0])
		snprintf(buf, len, "%s: %s", err->where, err->text);
	else
		snprintf(buf, len, "%s", err->text);
}

const char *mb_error_code_name(int code)
{
	switch (code) {
	case MB_OK: return "ok";
	case MB_EINVAL: return "invalid input";
	case MB_EIO: return "i/o error";
	case MB_ENOMEM: return "out of memory";
	case MB_ESCHEMA: return "schema violation";
	case MB_ENOTFOUND: return "not found";
	case MB_EUNSUPPORTED: return "unsupported";
	case MB_EDEVICE: return "device error";
	case MB_EINTERRUPTED: return "interrupted";
	case MB_ECHILD: return "child process failed";
	default: return "unknown error";
	}
}
