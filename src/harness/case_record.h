/* A case's record in the receipt: the object made when the case is
 * planned, with every result field null, and its status and findings as
 * the case goes. The results (correctness, timing, throughput) come from
 * check.h, sampler.h and throughput.h. */
#ifndef MB_HARNESS_CASE_RECORD_H
#define MB_HARNESS_CASE_RECORD_H

#include <jansson.h>

#include "harness/suite.h"

/* A fresh case object with status "ok" and every result field null. */
json_t *mb_case_json_new(const mb_case_plan *plan, const char *backend);
/* Set status and error text ("ok" clears error). */
void mb_case_json_set_status(json_t *c, const char *status, const char *error);
void mb_case_json_add_finding(json_t *c, const char *kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
