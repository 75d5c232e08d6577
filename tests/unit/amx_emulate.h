/* The AMX tile instructions that src/reference/linear_cross_entropy.c
 * uses, in C, for hosts without AMX (CI's): compiled into that file under
 * MB_LCE_AMX_EMULATE (tests/meson.build, test_reference_lce_amx), after
 * <immintrin.h>, so that the tile path's layouts and loops run and are
 * checked against the oracle everywhere. One thread's eight tiles of 16
 * rows of 64 bytes; TDPBF16PS as the Intel SDM writes it: per row m of
 * the destination and pair k, lane n adds a[m].bf16[2k] b[k].bf16[2n],
 * then a[m].bf16[2k+1] b[k].bf16[2n+1], each rounded to fp32. */
#ifndef MB_TESTS_AMX_EMULATE_H
#define MB_TESTS_AMX_EMULATE_H

#include <stdint.h>
#include <string.h>

#include "kernels/dtype.h"

static __thread unsigned char amx_emulated[8][16][64];

/* The bf16 stored (little-endian) at p. */
static inline float amx_emulated_bf16(const unsigned char *p)
{
	uint16_t u;

	memcpy(&u, p, sizeof(u));
	return mb_bf16_to_f32(u);
}

static inline void amx_emulated_dp(int c, int a, int b)
{
	for (int m = 0; m < 16; m++) {
		float acc[16];
		memcpy(acc, amx_emulated[c][m], sizeof(acc));
		for (int k = 0; k < 16; k++)
			for (int n = 0; n < 16; n++) {
				acc[n] += amx_emulated_bf16(&amx_emulated[a][m][4 * k]) * amx_emulated_bf16(&amx_emulated[b][k][4 * n]);
				acc[n] += amx_emulated_bf16(&amx_emulated[a][m][4 * k + 2])
					* amx_emulated_bf16(&amx_emulated[b][k][4 * n + 2]);
			}
		memcpy(amx_emulated[c][m], acc, sizeof(acc));
	}
}

static inline void amx_emulated_rows(void *dst, long dst_stride, const void *src, long src_stride)
{
	for (int r = 0; r < 16; r++)
		memcpy((char *)dst + r * dst_stride, (const char *)src + r * src_stride, 64);
}

#undef _tile_loadd
#undef _tile_stored
#undef _tile_zero
#undef _tile_dpbf16ps
#define _tile_loadconfig(config) ((void)(config))
#define _tile_release() ((void)0)
#define _tile_zero(t) memset(amx_emulated[t], 0, sizeof(amx_emulated[t]))
#define _tile_loadd(t, base, stride) amx_emulated_rows(amx_emulated[t], 64, (base), (long)(stride))
#define _tile_stored(t, base, stride) amx_emulated_rows((base), (long)(stride), amx_emulated[t], 64)
#define _tile_dpbf16ps(c, a, b) amx_emulated_dp((c), (a), (b))

#endif
