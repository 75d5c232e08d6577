/* Child processes that run device work, talking to the parent in JSON
 * lines over a pipe. The parent never initialises CUDA: every device call
 * happens in a child, so a kernel that faults, hangs or runs out of memory
 * takes down only its child, and the parent records what happened. */
#ifndef MB_HARNESS_ISOLATE_H
#define MB_HARNESS_ISOLATE_H

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "receipts/error.h"

typedef struct mb_child {
	pid_t pid;
	int fd;         /* read end of the child's message pipe */
	char *buf;      /* bytes read but not yet returned as lines */
	size_t len, cap;
	bool eof;
} mb_child;

/* Runs in the child with the write end of the pipe; its return value is the
 * child's exit status. SIGINT is ignored in the child (the parent decides),
 * and the child dies with the parent. */
typedef int (*mb_child_fn)(int fd, void *arg);

int mb_child_spawn(mb_child *out, mb_child_fn fn, void *arg, mb_error *err);

/* Write one JSON message as a line (child side). */
int mb_child_send(int fd, const json_t *msg);

enum {
	MB_CHILD_MESSAGE = 1, /* *out_msg holds a message (caller owns it) */
	MB_CHILD_EOF = 0,     /* the child closed its pipe (exited) */
	MB_CHILD_TIMEOUT = -100,
	MB_CHILD_STOPPED = -101 /* *stop became true while waiting */
};

/* Wait for the next message until `deadline_ns` (mb_now_ns clock). */
int mb_child_next(mb_child *c, json_t **out_msg, int64_t deadline_ns,
	volatile sig_atomic_t *stop, mb_error *err);

/* Reap the child, killing it first when `kill_first`; describe how it
 * ended ("exited with status 3", "killed by SIGSEGV (Segmentation fault)")
 * in `how`. Returns the raw wait status. */
int mb_child_finish(mb_child *c, bool kill_first, char *how, size_t how_len);

#endif
