/* The harness's random numbers: a small deterministic generator, and the
 * seeds that name a case's or a group's draws. Input elements are not
 * drawn here: they are a pure function of their index (input_rng.h), so
 * that host and device make the same bits. */
#ifndef MB_HARNESS_RNG_H
#define MB_HARNESS_RNG_H

#include <stdint.h>

/* splitmix64-seeded xoshiro256** generator: deterministic, fast. */
typedef struct mb_rng {
	uint64_t s[4];
} mb_rng;
void mb_rng_seed(mb_rng *r, uint64_t seed);
uint64_t mb_rng_next(mb_rng *r);
double mb_rng_uniform(mb_rng *r);   /* [0, 1) */
double mb_rng_normal(mb_rng *r);    /* N(0, 1) */
/* A seed from the run seed and a name (a case id, or the id of a shape
 * and dtype), below 2^63 so that a receipt can record it as a JSON
 * integer and a reader can use it as it is. */
uint64_t mb_case_seed(uint64_t run_seed, const char *name);

#endif
