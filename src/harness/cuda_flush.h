/* Cold mode's L2 flush, second half: read the flush buffer back.
 *
 * The flush first writes a buffer of twice the L2 (cudaMemsetAsync), which
 * evicts everything but leaves L2 full of dirty lines; the timed call would
 * then pay to write those back (2.2% on rope_qk at 173 us, measured against
 * ncu on an H200). Reading the buffer afterwards writes the dirty lines back
 * while the clock is not running, and leaves L2 clean, as ncu's own cache
 * control does. */
#ifndef MB_HARNESS_CUDA_FLUSH_H
#define MB_HARNESS_CUDA_FLUSH_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Queue a read of `bytes` (a multiple of 16) at `buf` on `stream`, a few
 * blocks per SM of the device's `sms`; `sink` is a device word the kernel
 * writes only in a case that never happens, so the loads cannot be
 * optimised away. Returns 0 or a cudaError_t value. */
int mb_l2_flush_read(void *stream, const void *buf, size_t bytes, unsigned *sink, int sms);

#ifdef __cplusplus
}
#endif

#endif
