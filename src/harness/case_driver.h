/* The case driver: the one place where the sequence of a case lives, for
 * every backend.
 *
 * Cases of one row, shape and dtype form a group that shares one input
 * seed, one row sample and one reference result; each case still gets its
 * inputs written afresh on the device and its outputs poisoned. Per case:
 *
 *   fill inputs (device) -> poison outputs -> first call -> read the sampled
 *   rows back and check them -> arm the timed path (graph capture) ->
 *   warm-up -> timed batches until the noise target is met after the
 *   minimum samples and time, or the timeout or sample cap -> poison ->
 *   one more timed call -> read back and check -> the case's JSON.
 *
 * The host side of a group (the input rows the reference reads, made by
 * the generator's host twin, and the reference on them) runs on a thread
 * while the previous group's cases are timed, when the backend allows it;
 * the wall time the driver still waits for it is badput, the rest is
 * recorded as overlapped host work.
 *
 * The driver never prints: it reports through the hooks.
 */
#ifndef MB_HARNESS_CASE_DRIVER_H
#define MB_HARNESS_CASE_DRIVER_H

#include <jansson.h>
#include <stddef.h>

#include "harness/backend.h"
#include "harness/suite.h"
#include "receipts/error.h"

typedef struct mb_driver_hooks {
	void *ctx;
	void (*case_start)(void *ctx, size_t index);
	/* While a case samples, about twice a second. */
	void (*tick)(void *ctx, size_t index, int samples, double rel_noise, double elapsed_s);
	/* The finished case (borrowed) and the wall time it took, by phase.
	 * A non-zero return stops the driver after this case. */
	int (*case_done)(void *ctx, size_t index, const json_t *result, const mb_phase_ns *phases);
} mb_driver_hooks;

/* Run cases [begin, end) of `plan` in order. Returns 0 when every case was
 * reported or a hook asked to stop, or a negative MB_E* code when the
 * harness itself could not go on; then *failed_at is the case it was on. */
int mb_driver_run(const mb_backend *be, const mb_plan *plan, size_t begin, size_t end,
	const mb_settings *settings, const json_t *ceilings, const mb_driver_hooks *hooks,
	size_t *failed_at, mb_error *err);

/* The reference worker (ref_cache.h): the host side of every group of
 * `plan` that mb_ref_worker_wants, in plan order, each stored in `dir`.
 * Returns 0, or a negative MB_E* code when a result could not be
 * written. */
int mb_driver_prepare_groups(const mb_backend *be, const mb_plan *plan, const mb_settings *settings,
	const char *dir, mb_error *err);

/* The seeds of the group a case belongs to (its row, dtype, family and
 * shape): the inputs' and the row sample's. Exposed for tests that
 * reproduce a receipt's sample. */
void mb_driver_group_seeds(const mb_case_plan *plan, uint64_t run_seed, uint64_t *input_seed,
	uint64_t *row_seed);

#endif
