/* The tensor cores' view of a wgmma shared-memory descriptor, written
 * from the PTX ISA's canonical layouts (128-byte swizzle), for the host
 * tests that emulate sm_90a kernels through their own index arithmetic
 * (test_grouped_gemm_sm90.c, test_ssm_scan_sm90.c): which shared-memory
 * byte an operand element is read from. */
#ifndef MB_TESTS_WGMMA_EMU_H
#define MB_TESTS_WGMMA_EMU_H

#include <stdint.h>

typedef struct desc_fields {
	uint32_t start, lbo, sbo, base_offset, layout;
} desc_fields;

static desc_fields desc_decode(uint64_t d)
{
	desc_fields f;
	f.start = (uint32_t)(d & 0x3fff) << 4;
	f.lbo = (uint32_t)((d >> 16) & 0x3fff) << 4;
	f.sbo = (uint32_t)((d >> 32) & 0x3fff) << 4;
	f.base_offset = (uint32_t)((d >> 49) & 7);
	f.layout = (uint32_t)(d >> 62);
	return f;
}

/* The 128-byte swizzle acts on shared-memory address bits: bits 4-6 XOR
 * bits 7-9 (the stages are 1024-aligned, so this is gw_swizzle128 of the
 * offset; written out again here as the hardware's rule). */
static uint32_t sw128_address(uint32_t addr)
{
	return addr ^ (((addr >> 7) & 7u) << 4);
}

/* K-major, 128-byte swizzle: element (m, k) of an m64 x k16 operand. */
static uint32_t kmajor_address(uint64_t d, int m, int k)
{
	const desc_fields f = desc_decode(d);
	return sw128_address(f.start + (uint32_t)(m / 8) * f.sbo + (uint32_t)(m % 8) * 128u + (uint32_t)(k / 8) * 16u
		+ (uint32_t)(k % 8) * 2u);
}

/* MN-major, 128-byte swizzle: element (k, n) of a k16 x N operand. */
static uint32_t mnmajor_address(uint64_t d, int k, int n)
{
	const desc_fields f = desc_decode(d);
	return sw128_address(f.start + (uint32_t)(n / 64) * f.lbo + (uint32_t)((n % 64) / 8) * 16u + (uint32_t)(n % 8) * 2u
		+ (uint32_t)(k / 8) * f.sbo + (uint32_t)(k % 8) * 128u);
}

#endif
