/* One case from the passes of `megabench run --repetitions N`: each pass
 * ran the case in fresh child processes, so the spread of the passes'
 * medians is the between-run noise that one pass's samples cannot show.
 */
#ifndef MB_HARNESS_REPETITIONS_H
#define MB_HARNESS_REPETITIONS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Most passes one run makes (--repetitions). */
#define MB_MAX_REPETITIONS 64

/* Merge the case objects of one case from `n` passes (in pass order,
 * borrowed) into a new case object (the caller owns it):
 *  - status: the first that is not ok, with its error (a wrong answer in
 *    any pass is a wrong answer), and its correctness;
 *  - timing: every pass's samples in order in samples_ns, the statistics
 *    over all of them, `repetitions` with each pass's samples, median,
 *    noise and convergence, `between_run_noise` (standard deviation of the
 *    passes' medians over their mean), converged when every pass was;
 *  - throughput rescaled to the merged median (per-launch times are the
 *    first pass's), memory the largest, kernels and signature the first
 *    pass's (the signature matches only if it matched in every pass);
 *  - findings of every pass, those of later passes prefixed "pass K: ";
 *  - wall_ns, where passes record it: their sum (what the case cost the run).
 * The events and span medians are the first pass's. With n == 1 it returns
 * a new reference to the one case; n is at most MB_MAX_REPETITIONS. NULL on
 * allocation failure. */
json_t *mb_case_merge_repetitions(json_t *const *passes, size_t n);

/* The order in which pass `pass` (0, 1, ...) of --repetitions runs the
 * plan's `n` rows: a permutation of 0..n-1 drawn from `seed` and the pass,
 * so that the passes are interleaved in a shuffled order (as Google
 * Benchmark's random interleaving and asv do): no row always runs first,
 * or always after the same neighbour, whose heat or clocks it would
 * inherit. The same seed gives the same orders. */
void mb_repetition_order(size_t *order, size_t n, uint64_t seed, int pass);

#endif
