/* The generator and the case seeds; see rng.h. */
#include "harness/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void mb_rng_seed(mb_rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t mb_rng_next(mb_rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

double mb_rng_uniform(mb_rng *r)
{
	return (double)(mb_rng_next(r) >> 11) * 0x1p-53;
}

double mb_rng_normal(mb_rng *r)
{
	/* Box-Muller; 1 - u keeps the log argument in (0, 1] */
	double u = 1.0 - mb_rng_uniform(r), v = mb_rng_uniform(r);

	return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

uint64_t mb_case_seed(uint64_t run_seed, const char *name)
{
	/* FNV-1a over the name, mixed with the run seed: stable across runs
	 * and platforms, different for every name */
	uint64_t h = 0xcbf29ce484222325ull ^ run_seed;

	for (const char *p = name; *p; p++) {
		h ^= (unsigned char)*p;
		h *= 0x100000001b3ull;
	}
	return splitmix64(&h) & (uint64_t)INT64_MAX;
}
