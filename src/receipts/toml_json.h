/* TOML to JSON: the one C++ file parses TOML with toml++ into a jansson
 * value. It lives with the receipts (the lower layer) because both policies
 * (read here) and suites (read by the harness) are TOML.
 * Tables become objects (keys in file order), arrays arrays, integers
 * integers, floats reals, booleans booleans, strings strings; dates and
 * times become ISO 8601 strings. A syntax error sets `err` to
 * "PATH:LINE:COLUMN: message". */
#ifndef MB_RECEIPTS_TOML_JSON_H
#define MB_RECEIPTS_TOML_JSON_H

#include <jansson.h>
#include <stddef.h>

#include "receipts/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Read the TOML file at `path` through mb_read_file (receipts/read_file.h:
 * a regular file of at most `max_bytes`, `what` naming its kind in the
 * refusal: "a suite"), refuse a NUL byte (TOML is text), and parse it;
 * `*out` belongs to the caller (NULL on failure). */
int mb_toml_parse_file(json_t **out, const char *path, size_t max_bytes, const char *what, mb_error *err);
int mb_toml_parse_string(json_t **out, const char *text, const char *name, mb_error *err);

#ifdef __cplusplus
}
#endif

#endif
