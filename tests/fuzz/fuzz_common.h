/* What the fuzz targets share: the libFuzzer entry point every target
 * defines, inputs handed to path-taking loaders without touching the disk,
 * and the invariants a target checks beyond "no crash" (a broken one
 * aborts, which libFuzzer and the replay tests report as a failure). */
#ifndef MB_TESTS_FUZZ_COMMON_H
#define MB_TESTS_FUZZ_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Defined by each target (fuzz_*.c); called by libFuzzer, or by replay.c
 * in builds without it. Returns 0. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Defined by targets with something to set up once (libFuzzer's optional
 * hook; replay.c calls it too, when it is there). */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* `size` bytes at `data` in an anonymous in-memory file; `path` (`len`
 * bytes) receives a name that fopen reads it by (/proc/self/fd/N). Returns
 * the descriptor to close afterwards, or -1. */
int fuzz_memfile(const uint8_t *data, size_t size, char *path, size_t len);

/* Abort with a message when `ok` is false: an invariant broke. */
void fuzz_require(bool ok, const char *what);

/* A stream that discards what is written (printers need somewhere to go). */
FILE *fuzz_sink(void);


#endif
