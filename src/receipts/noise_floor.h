/* The between-run noise floor, learned from A/A receipts: several runs of
 * one revision (same code, build, device model, backend, suite and timing
 * settings), each a separate process at a separate time. Whatever their
 * case medians differ by is noise the gate must not call a change.
 *
 * For every pair of receipts (a, b) and every case ok in both, the
 * deviation is max(r, 1/r) - 1 with r = median_b / median_a: symmetric, so
 * that a pair counts the same in either order, and never smaller than
 * |r - 1|, which is what the gate holds against the floor whichever side is
 * the base. Per row the floor is MB_NOISE_FLOOR_SAFETY times the largest
 * deviation over every pair and every case of the row; the policy's
 * top-level floor is the largest row floor, for rows the A/A receipts did
 * not cover.
 *
 * An mb_noise_floor owns its rows: release it with mb_noise_floor_free.
 */
#ifndef MB_RECEIPTS_NOISE_FLOOR_H
#define MB_RECEIPTS_NOISE_FLOOR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "receipts/error.h"

/* Why 1.5: the largest deviation seen is an estimate of a high quantile of
 * the A/A deviation, not its bound. For a roughly normal run-to-run
 * deviation, the largest of the 15 pairs six receipts give, over the
 * several cases of a row, sits 2 to 3 standard deviations out; 1.5 times
 * that is 3 to 4.5, which one further pair of one case crosses with
 * probability under 0.3%, so that a gate over the dozens of cases of a
 * suite still passes an A/A pair almost always. Heavier tails than normal
 * (a CPU shared with other work) are what the margin is for. A larger
 * factor would hide real regressions of that size; a smaller one trips on
 * the first run noisier than the ones it learned from. */
#define MB_NOISE_FLOOR_SAFETY 1.5
#define MB_NOISE_FLOOR_CASE_MAX 256

typedef struct mb_noise_floor_row {
	char *row;
	double max_deviation;     /* largest over pairs and cases */
	double floor;             /* max_deviation * MB_NOISE_FLOOR_SAFETY */
	size_t n_deviations;      /* case pairs seen */
	char worst_case[MB_NOISE_FLOOR_CASE_MAX]; /* the case of the largest deviation */
	size_t worst_a, worst_b;  /* and its pair of receipts (indices) */
} mb_noise_floor_row;

typedef struct mb_noise_floor {
	mb_noise_floor_row *rows; /* in the order rows first appear */
	size_t n_rows;
	double floor;             /* the largest row floor */
	size_t n_receipts, n_pairs;
} mb_noise_floor;

/* Whether `b` is an A/A partner of `a`: same backend, device model, suite,
 * timing modes and warm-up, and provenance available on both with the same
 * commit, the same source blobs and the same build. If not, the fields that
 * differ are appended to `reasons` ("; "-separated). */
bool mb_noise_floor_alike(const json_t *a, const json_t *b, char *reasons, size_t len);

/* The floor of `n` >= 2 receipts (`names` label them in errors). Unlike
 * receipts are refused: MB_EINVAL naming the receipt and the fields. */
int mb_noise_floor_compute(mb_noise_floor *out, json_t *const *receipts, const char *const *names, size_t n,
	mb_error *err);

/* The floor as a policy TOML (schemas/policy.schema.json): a comment
 * saying where it came from, noise_floor = the largest, and
 * [rows.NAME] noise_floor = ... per row. Values are rounded up, never
 * down. */
int mb_noise_floor_print_toml(FILE *out, const mb_noise_floor *nf, json_t *const *receipts,
	const char *const *names, mb_error *err);

void mb_noise_floor_free(mb_noise_floor *nf);

#endif
