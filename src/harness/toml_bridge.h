/* The one C++ file: parse TOML with toml++ into a jansson value.
 * Tables become objects (keys in file order), arrays arrays, integers
 * integers, floats reals, booleans booleans, strings strings; dates and
 * times become ISO 8601 strings. A syntax error sets `err` to
 * "PATH:LINE:COLUMN: message". */
#ifndef MB_HARNESS_TOML_BRIDGE_H
#define MB_HARNESS_TOML_BRIDGE_H

#include <jansson.h>

#include "harness/error.h"

#ifdef __cplusplus
extern "C" {
#endif

int mb_toml_parse_file(json_t **out, const char *path, mb_error *err);
int mb_toml_parse_string(json_t **out, const char *text, const char *name, mb_error *err);

#ifdef __cplusplus
}
#endif

#endif
