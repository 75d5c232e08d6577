/* Reading and writing receipt files. Both directions validate against the
 * builtin receipt schema (schemas/receipt.schema.json), so a receipt that
 * breaks the contract is never written and never compared. */
#ifndef MB_RECEIPTS_RECEIPT_IO_H
#define MB_RECEIPTS_RECEIPT_IO_H

#include <jansson.h>
#include <stddef.h>

#include "receipts/error.h"

/* The largest receipt read: a run of 200 cases at ten thousand samples each
 * is about 10 MiB, so this leaves room for a hundred times that, and stops
 * a mistaken path (/dev/zero, a disk image) before it takes the memory. */
#define MB_RECEIPT_MAX_BYTES ((size_t)1 << 30)

/* The schema version this build writes, and the oldest it reads: version 1
 * receipts carry a checkout's provenance, not their binary's (there is
 * nothing else they lack for reading). */
#define MB_RECEIPT_SCHEMA_VERSION 2
#define MB_RECEIPT_SCHEMA_VERSION_OLDEST 1

/* Read, parse and validate the receipt at `path` (gzip data, such as a
 * .json.gz file, is inflated first: receipts/gzip.h, capped at
 * MB_RECEIPT_MAX_BYTES inflated); `*out` is a new value the caller owns
 * (NULL on failure). Errors:
 *   MB_ENOTFOUND the file does not exist ("PATH: cannot open: ...");
 *   MB_EIO      the file cannot be read ("PATH: cannot open: ...");
 *   MB_EIO      larger than MB_RECEIPT_MAX_BYTES;
 *   MB_EIO      gzip data that inflates to more than that;
 *   MB_EINVAL   corrupt or truncated gzip data;
 *   MB_EINVAL   not JSON ("PATH:LINE:COLUMN: not valid JSON: ...");
 *   MB_ESCHEMA  not a receipt, or a receipt that breaks the schema:
 *               where = "PATH: /json/pointer", text = "keyword: message"
 *               of the first issue, then "(and N more)". */
int mb_receipt_load(json_t **out, const char *path, mb_error *err);

/* What the schema cannot say about a receipt's GPUs, for a document that
 * already passed it: every reference to a GPU (case.gpu, a topology
 * link's ends, a shard's gpu) names one of `gpus`, gpu_count counts them,
 * and no case spans more GPUs (case.collective.gpus) than gpu_count. MB_ESCHEMA
 * with where = "PATH: /json/pointer" on the first that does not hold.
 * mb_receipt_load and mb_receipt_save check it after the schema. */
int mb_receipt_check_gpus(const json_t *receipt, const char *path, mb_error *err);

/* Validate `receipt` exactly as mb_receipt_load does and, only if it passes,
 * write it with mb_json_write_atomic ("-" = standard output); a path ending
 * in ".gz" gets it gzip-compressed. */
int mb_receipt_save(const json_t *receipt, const char *path, mb_error *err);

/* mb_receipt_save with mb_atomic_write_ex's flags (MB_ATOMIC_NO_REPLACE:
 * never replace an existing file). */
int mb_receipt_save_ex(const json_t *receipt, const char *path, unsigned flags, mb_error *err);

#endif
