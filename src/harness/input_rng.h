/* Inputs as a pure function of (seed, tensor, element index).
 *
 * The device fills whole tensors in one launch and the host computes only
 * the elements the reference reads; both call the functions below, so an
 * element has the same value wherever it is made. That needs the same bits
 * on both sides, so every step is exact or a single correctly rounded IEEE
 * operation: integer hashing (splitmix64's finaliser on a counter), an
 * integer sum, one int-to-float conversion that is exact, one multiply per
 * scale, one fused multiply-add (fmaf on the host, __fmaf_rn on the
 * device: both round once), then the round-to-nearest-even store in the
 * case dtype, which each side supplies (see MB_INPUT_VALUE).
 *
 * Distributions:
 *   normal:  the Irwin-Hall sum of four 16-bit uniforms, centred, scaled to
 *            unit variance and by `hi`: bell-shaped, |z| < 3.47 (a bounded
 *            stand-in for N(0, 1); the rows' tolerances assume |x| < 8).
 *   uniform: lo + (hi - lo) * u with u a 24-bit uniform in (0, 1).
 *   index:   an integer uniform in [lo, hi), from 64 bits (bias < 2^-40).
 * A value that is zero after rounding is drawn again with the next attempt
 * counter (zeros would hide unwritten outputs); after MB_INPUT_ATTEMPTS
 * tries, `hi` is used. An index may be zero: it is not a value.
 *
 * Included by C (the host twin) and CUDA (the fill kernel). */
#ifndef MB_HARNESS_INPUT_RNG_H
#define MB_HARNESS_INPUT_RNG_H

#include <stdint.h>

#ifdef __CUDACC__
#define MB_RNG_FN static __host__ __device__ __forceinline__
#else
#define MB_RNG_FN static inline
#endif
#ifdef __CUDA_ARCH__
/* the intrinsics round once and are never contracted with a neighbour */
#define MB_RNG_FMAF(a, b, c) __fmaf_rn((a), (b), (c))
#define MB_RNG_MULF(a, b) __fmul_rn((a), (b))
#else
#include <math.h>
#define MB_RNG_FMAF(a, b, c) fmaf((a), (b), (c))
#define MB_RNG_MULF(a, b) ((a) * (b))
#endif

/* Fill kinds; the same numbers as mb_fill in kernels/catalog.h. */
#define MB_INPUT_NORMAL 0
#define MB_INPUT_UNIFORM 1
#define MB_INPUT_INDEX 2

#define MB_INPUT_ATTEMPTS 8
/* The attempt number sits above every element index (2^56 elements is
 * far beyond any tensor). */
#define MB_INPUT_ATTEMPT_SHIFT 56
#define MB_RNG_GOLDEN 0x9e3779b97f4a7c15ull

/* Four 16-bit uniforms sum to S in [0, 4 * 65535]; 2 (S - 2 * 65535) + 1
 * is an odd integer (never zero) under 2^19 (exact in fp32), and its
 * standard deviation is 2 * sqrt(4 * (65536^2 - 1) / 12) = 75674.454...; the
 * scale is its reciprocal. */
#define MB_IRWIN_HALL_CENTRE (2 * 65535)
#define MB_IRWIN_HALL_SCALE 1.32144987e-05f
/* 24 bits of a uniform, as (k + 0.5) / 2^24: never 0 or 1, exact in fp32. */
#define MB_UNIFORM_BITS 24
#define MB_UNIFORM_ULP 5.9604645e-08f /* 2^-24 */

typedef struct mb_input_params {
	uint64_t key;  /* the tensor's stream: mb_input_key(seed, tensor) */
	int fill;      /* MB_INPUT_* */
	float lo, hi;
} mb_input_params;

/* splitmix64's output function on a counter: a strong 64-bit mix. */
MB_RNG_FN uint64_t mb_rng_mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The stream of tensor `tensor` of a case whose inputs come from `seed`. */
MB_RNG_FN uint64_t mb_input_key(uint64_t seed, int tensor)
{
	return mb_rng_mix(seed + MB_RNG_GOLDEN * (uint64_t)(tensor + 1));
}

MB_RNG_FN uint64_t mb_input_bits(uint64_t key, uint64_t index, int attempt)
{
	uint64_t counter = index | ((uint64_t)attempt << MB_INPUT_ATTEMPT_SHIFT);
	return mb_rng_mix(key + MB_RNG_GOLDEN * (counter + 1));
}

/* The parameters whose element i is element `first + i` of `p`'s: a slice
 * of a larger tensor, such as one rank's rows of a tensor stacked over
 * ranks. mb_input_bits mixes key + GOLDEN ((index | attempt << 56) + 1),
 * and while first + index stays under 2^56 no carry reaches the attempt's
 * bits, so adding GOLDEN * first to the key adds `first` to every index
 * (mod 2^64, both sides). */
MB_RNG_FN mb_input_params mb_input_params_at(const mb_input_params *p, uint64_t first)
{
	mb_input_params q = *p;

	q.key = p->key + MB_RNG_GOLDEN * first;
	return q;
}

/* Element `index`, attempt `attempt`, before rounding to the case dtype. */
MB_RNG_FN float mb_input_draw(const mb_input_params *p, uint64_t index, int attempt)
{
	uint64_t h = mb_input_bits(p->key, index, attempt);

	if (p->fill == MB_INPUT_INDEX) {
		int64_t lo = (int64_t)p->lo, span = (int64_t)p->hi - lo;
		return (float)(lo + (int64_t)(h % (uint64_t)(span > 0 ? span : 1)));
	}
	if (p->fill == MB_INPUT_UNIFORM) {
		float u = MB_RNG_MULF((float)(h >> (64 - MB_UNIFORM_BITS)) + 0.5f, MB_UNIFORM_ULP);
		return MB_RNG_FMAF(p->hi - p->lo, u, p->lo);
	}
	int32_t s = (int32_t)(h & 0xffff) + (int32_t)((h >> 16) & 0xffff) + (int32_t)((h >> 32) & 0xffff)
		+ (int32_t)(h >> 48);
	float z = MB_RNG_MULF((float)(2 * (s - MB_IRWIN_HALL_CENTRE) + 1), MB_IRWIN_HALL_SCALE);
	return MB_RNG_MULF(z, p->hi);
}

/* The stored value of element `index`: `round` is the side's
 * float -> dtype -> float rounding (an expression of `v`, written to OUT).
 * Used as a statement by both sides so that the retry rule lives once. */
#define MB_INPUT_VALUE(OUT, p, index, ROUND)                                        \
	do {                                                                        \
		float v_ = mb_input_draw((p), (index), 0);                          \
		if ((p)->fill != MB_INPUT_INDEX) {                                  \
			int a_ = 0;                                                 \
			float r_ = ROUND(v_);                                       \
			while (r_ == 0.0f && ++a_ < MB_INPUT_ATTEMPTS)               \
				r_ = ROUND(mb_input_draw((p), (index), a_));        \
			v_ = r_ != 0.0f ? r_ : ROUND((p)->hi);                      \
		}                                                                   \
		(OUT) = v_;                                                         \
	} while (0)

#endif
