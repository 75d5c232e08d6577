/* The bandwidths of cases across GPUs, as nccl-tests defines them for
 * all-to-all (src/alltoall.cu, AlltoAllGetBw, and src/common.cu):
 *
 *   algbw = size / time, where size is the bytes each rank sends in one
 *           call (to every rank, itself included: count x nranks x the
 *           element size), in GB/s of 10^9 bytes;
 *   busbw = algbw x (G - 1) / G: of what a rank sends, the share 1 / G to
 *           itself never crosses a link, so busbw is what each rank's links
 *           carry, comparable across G and with the hardware's bandwidth.
 *
 * Here a call is one dispatch and one combine; size is the mean over ranks
 * of the bytes each sends (the routing loads them unevenly: see
 * collective.bytes_definition), and time is the case's median call, each
 * call the slowest rank's (nccl-tests reports the mean). The receipt
 * carries the results; printers only show them (receipts/printer.h,
 * mb_print_alltoall).
 */
#ifndef MB_HARNESS_COLLECTIVE_H
#define MB_HARNESS_COLLECTIVE_H

#include <jansson.h>

/* nccl-tests' bus factor for all-to-all over G ranks. */
double mb_collective_alltoall_bus_factor(int gpus);

/* For every case of `cases` with a collective record and a time: its
 * algbw_gbps and busbw_gbps, `rows_per_rank` (the token rows each rank
 * sends per call, both legs, mean over ranks) and `wrong` (what nccl-tests'
 * #wrong counts: output elements over tolerance, NaN or Inf, and rows or
 * counts moved wrongly); then, among the cases of one shape and dtype, the
 * best busbw of a correct vendor case (NCCL's own all-to-all) as
 * vendor_busbw_gbps, and each case's busbw_fraction_of_vendor. */
void mb_collective_finish(json_t *cases);

#endif
