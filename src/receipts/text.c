#include "receipts/text.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define NS_PER_US 1e3
#define NS_PER_MS 1e6
#define NS_PER_S 1e9
#define SHORT_COMMIT_LEN 12

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

void mb_text_bytes(char *buf, size_t len, double bytes)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double x = fabs(bytes);
	size_t u = 0;

	if (isnan(bytes)) {
		snprintf(buf, len, "-");
		return;
	}
	while (x >= 1024.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
		x /= 1024.0;
		u++;
	}
	/* three significant digits, whole bytes below a KiB */
	snprintf(buf, len, "%.*f %s", u == 0 || x >= 100.0 ? 0 : x >= 10.0 ? 1 : 2, x, units[u]);
}

void mb_text_duration(char *buf, size_t len, double ns)
{
	if (isnan(ns))
		snprintf(buf, len, "-");
	else if (fabs(ns) >= NS_PER_S)
		snprintf(buf, len, "%.3f s", ns / NS_PER_S);
	else if (fabs(ns) >= NS_PER_MS)
		snprintf(buf, len, "%.3f ms", ns / NS_PER_MS);
	else if (fabs(ns) >= NS_PER_US)
		snprintf(buf, len, "%.2f us", ns / NS_PER_US);
	else
		snprintf(buf, len, "%.0f ns", ns);
}

double mb_text_timing(const json_t *kase, const char *key)
{
	return mb_json_num(json_object_get(kase, "timing"), key);
}

double mb_text_median_ns(const json_t *kase)
{
	const json_t *t = json_object_get(kase, "timing");

	return json_is_object(t) ? json_number_value(json_object_get(t, "median_ns")) : NAN;
}

const char *mb_text_revision(const json_t *receipt, const char *fallback)
{
	static char shortened[2][SHORT_COMMIT_LEN + 1];
	static int slot;
	const json_t *prov = json_object_get(receipt, "provenance");
	const char *describe = json_string_value(json_object_get(prov, "describe"));
	const char *commit = json_string_value(json_object_get(prov, "commit"));

	if (describe && *describe)
		return describe;
	if (commit) {
		/* two slots: a printer shows base and head in one call */
		slot ^= 1;
		snprintf(shortened[slot], sizeof(shortened[slot]), "%s", commit);
		return shortened[slot];
	}
	return fallback ? fallback : "?";
}

json_t *mb_json_real_or_null(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

double mb_json_num(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);

	return json_is_number(v) ? json_number_value(v) : NAN;
}
