/* Reading and writing receipt files. Both directions validate against the
 * builtin receipt schema (schemas/receipt.schema.json), so a receipt that
 * breaks the contract is never written and never compared. */
#ifndef MB_RECEIPTS_RECEIPT_IO_H
#define MB_RECEIPTS_RECEIPT_IO_H

#include <jansson.h>

#include "receipts/error.h"

/* Read, parse and validate the receipt at `path`; `*out` is a new value the
 * caller owns (NULL on failure). Errors:
 *   MB_EIO      the file cannot be read ("PATH: cannot open: ...");
 *   MB_EINVAL   not JSON ("PATH:LINE:COLUMN: not valid JSON: ...");
 *   MB_ESCHEMA  not a receipt, or a receipt that breaks the schema:
 *               where = "PATH: /json/pointer", text = "keyword: message"
 *               of the first issue, then "(and N more)". */
int mb_receipt_load(json_t **out, const char *path, mb_error *err);

/* Validate `receipt` exactly as mb_receipt_load does and, only if it passes,
 * write it with mb_json_write_atomic ("-" = standard output). */
int mb_receipt_save(const json_t *receipt, const char *path, mb_error *err);

#endif
