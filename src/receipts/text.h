/* Small text helpers that the receipts code shares (diff reasons, verdict
 * reasons, report labels, every printed duration). The harness's console
 * formats its durations here too, so that a time reads the same on the
 * live line and in every report. */
#ifndef MB_RECEIPTS_TEXT_H
#define MB_RECEIPTS_TEXT_H

#include <jansson.h>
#include <stddef.h>

/* The string member `key` of `obj`, or "" when it is missing or not a
 * string, so that callers can print and compare it without NULL checks.
 * The pointer is borrowed from `obj`. */
const char *mb_text_get(const json_t *obj, const char *key);

/* Append printf-style text to the NUL-terminated string in `buf` (`len`
 * bytes in all). Text that does not fit is cut short, never overflows; a
 * full buffer is left as it is. */
void mb_text_appendf(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* "3.94 GiB", "101 MiB", "512 B" of |bytes| (the caller says which way);
 * "-" for NaN. */
void mb_text_bytes(char *buf, size_t len, double bytes);

/* "950 ns", "12.34 us", "1.234 ms", "2.500 s" (of |ns|, the sign kept);
 * "-" for NaN. The one duration formatter. */
void mb_text_duration(char *buf, size_t len, double ns);

/* A JSON number, or null where v is not finite (JSON has no NaN). */
json_t *mb_json_real_or_null(double v);
/* The number member `key` of `obj` (NULL allowed), or NaN where it is
 * missing or not a number. */
double mb_json_num(const json_t *obj, const char *key);

/* The number `key` of a case's timing object ("median_ns", "p90_ns",
 * "rel_noise"), or NaN where it is missing or not a number. */
double mb_text_timing(const json_t *kase, const char *key);

/* Median of a case from the receipt (NaN without timing). */
double mb_text_median_ns(const json_t *kase);

/* Short name of a receipt's revision: describe, else commit[0..12], else
 * `fallback`. The pointer is borrowed from the receipt, or from one of two
 * static slots (a printer shows base and head in one call). */
const char *mb_text_revision(const json_t *receipt, const char *fallback);

#endif
