/* Host time: the monotonic clock every host-side duration is read from,
 * and the opt-in trace that stamps the harness's own steps with it. */
#ifndef MB_HARNESS_CLOCK_H
#define MB_HARNESS_CLOCK_H

#include <stdbool.h>
#include <stdint.h>

/* Monotonic clock in ns. */
int64_t mb_now_ns(void);

/* With MEGABENCH_TRACE set in the environment, one line on stderr per
 * call: where the harness spends host time (each timed batch, each step of
 * a case), for diagnosing its own goodput. Nothing otherwise. */
bool mb_trace_on(void);
void mb_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
