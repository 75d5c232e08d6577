#include "harness/isolate.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness/clock.h"

#define READ_CHUNK 65536
#define NS_PER_MS 1000000

int mb_child_spawn(mb_child *out, mb_child_fn fn, void *arg, mb_error *err)
{
	int fds[2];
	pid_t pid;

	memset(out, 0, sizeof(*out));
	out->fd = -1;
	if (pipe2(fds, O_CLOEXEC) != 0)
		return mb_error_set(err, MB_ECHILD, "isolation", "pipe failed: %s", strerror(errno));
	fflush(NULL); /* nothing buffered may be written twice */
	pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return mb_error_set(err, MB_ECHILD, "isolation", "fork failed: %s", strerror(errno));
	}
	if (pid == 0) {
		int status;

		close(fds[0]);
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_DFL);
		signal(SIGPIPE, SIG_IGN);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		status = fn(fds[1], arg);
		close(fds[1]);
		_exit(status);
	}
	close(fds[1]);
	out->pid = pid;
	out->fd = fds[0];
	return 0;
}

int mb_child_send(int fd, const json_t *msg)
{
	char *text = json_dumps(msg, JSON_COMPACT);
	size_t len, done = 0;
	int rc = 0;

	if (!text)
		return MB_ENOMEM;
	len = strlen(text);
	text[len] = '\n'; /* replaces the terminator: we write len + 1 bytes */
	while (done < len + 1) {
		ssize_t n = write(fd, text + done, len + 1 - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = MB_EIO;
			break;
		}
		done += (size_t)n;
	}
	free(text);
	return rc;
}

/* A complete line in the buffer becomes a message. */
static int take_line(mb_child *c, json_t **out_msg, mb_error *err)
{
	char *nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
	json_error_t jerr;
	size_t line_len;

	if (!nl)
		return 0;
	line_len = (size_t)(nl - c->buf);
	*out_msg = json_loadb(c->buf, line_len, 0, &jerr);
	memmove(c->buf, nl + 1, c->len - line_len - 1);
	c->len -= line_len + 1;
	if (!*out_msg)
		return mb_error_set(err, MB_ECHILD, "isolation", "child sent a malformed message: %s", jerr.text);
	return MB_CHILD_MESSAGE;
}

int mb_child_next(mb_child *c, json_t **out_msg, int64_t deadline_ns,
	volatile sig_atomic_t *stop, mb_error *err)
{
	*out_msg = NULL;
	for (;;) {
		int rc = take_line(c, out_msg, err);
		struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
		int64_t left_ns;
		ssize_t n;

		if (rc)
			return rc;
		if (c->eof)
			return MB_CHILD_EOF;
		if (stop && *stop)
			return MB_CHILD_STOPPED;
		left_ns = deadline_ns - mb_now_ns();
		if (left_ns <= 0)
			return MB_CHILD_TIMEOUT;
		/* wake at least every 100 ms to notice `stop` */
		rc = poll(&pfd, 1, (int)(left_ns / NS_PER_MS < 100 ? left_ns / NS_PER_MS + 1 : 100));
		if (rc < 0 && errno != EINTR)
			return mb_error_set(err, MB_ECHILD, "isolation", "poll failed: %s", strerror(errno));
		if (rc <= 0)
			continue;
		if (c->cap - c->len < READ_CHUNK) {
			size_t cap = c->cap ? c->cap * 2 : READ_CHUNK * 2;
			char *buf = realloc(c->buf, cap);
			if (!buf)
				return mb_error_set(err, MB_ENOMEM, "isolation", "cannot grow the message buffer");
			c->buf = buf;
			c->cap = cap;
		}
		n = read(c->fd, c->buf + c->len, c->cap - c->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return mb_error_set(err, MB_ECHILD, "isolation", "read failed: %s", strerror(errno));
		if (n == 0)
			c->eof = true;
		c->len += (size_t)n;
	}
}

int mb_child_finish(mb_child *c, bool kill_first, char *how, size_t how_len)
{
	int status = 0;

	if (c->pid > 0) {
		if (kill_first)
			kill(c->pid, SIGKILL);
		while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR)
			;
		if (WIFSIGNALED(status))
			snprintf(how, how_len, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
		else
			snprintf(how, how_len, "exited with status %d", WEXITSTATUS(status));
	}
	if (c->fd >= 0)
		close(c->fd);
	free(c->buf);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	return status;
}
