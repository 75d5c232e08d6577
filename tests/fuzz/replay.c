/* The fuzz targets without libFuzzer: every file named on the command line,
 * and every file under every folder named (recursively, in name order), is
 * passed once to LLVMFuzzerTestOneInput. `meson test` runs this over the
 * committed corpora (tests/fuzz/corpus/TARGET/, the regressions in it
 * included) and the seed folders, so any compiler's build replays every
 * input that ever crashed or hung a target.
 *
 * An input that takes longer than MB_FUZZ_REPLAY_MAX_S seconds (default
 * 10: far more than any needs, under AddressSanitizer too) fails the run:
 * that is how a hang found by the fuzzer stays fixed. Exit 0 when every
 * input ran within it, 1 otherwise, 64 on usage errors.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fuzz_common.h"

#define DEFAULT_MAX_S 10.0
#define PATH_BYTES 4096
#define EXIT_USAGE 64

typedef struct replay {
	double max_s;
	size_t inputs;
	size_t slow;
	double slowest_s;
	char slowest[PATH_BYTES];
} replay;

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int run_file(replay *r, const char *path)
{
	FILE *f = fopen(path, "rb");
	unsigned char *data = NULL, *grown;
	size_t len = 0, cap = 0, n;
	double t0, dt;

	if (!f) {
		perror(path);
		return 1;
	}
	do {
		if (len == cap) {
			cap = cap ? 2 * cap : 4096;
			grown = realloc(data, cap);
			if (!grown) {
				free(data);
				fclose(f);
				fprintf(stderr, "%s: out of memory\n", path);
				return 1;
			}
			data = grown;
		}
		n = fread(data + len, 1, cap - len, f);
		len += n;
	} while (n > 0);
	fclose(f);
	t0 = now_s();
	LLVMFuzzerTestOneInput(data, len);
	dt = now_s() - t0;
	free(data);
	r->inputs++;
	if (dt > r->slowest_s) {
		r->slowest_s = dt;
		snprintf(r->slowest, sizeof(r->slowest), "%s", path);
	}
	if (dt > r->max_s) {
		fprintf(stderr, "SLOW %s: %.1f s (limit %.1f s)\n", path, dt, r->max_s);
		r->slow++;
	}
	return 0;
}

static int name_filter(const struct dirent *e)
{
	return e->d_name[0] != '.';
}

static int run_path(replay *r, const char *path)
{
	struct dirent **names = NULL;
	char sub[PATH_BYTES];
	struct stat st;
	int i, n, rc = 0;

	if (stat(path, &st) != 0) {
		perror(path);
		return 1;
	}
	if (!S_ISDIR(st.st_mode))
		return run_file(r, path);
	n = scandir(path, &names, name_filter, alphasort);
	for (i = 0; i < n; i++) {
		snprintf(sub, sizeof(sub), "%s/%s", path, names[i]->d_name);
		rc |= run_path(r, sub);
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(int argc, char **argv)
{
	const char *limit = getenv("MB_FUZZ_REPLAY_MAX_S");
	replay r = { DEFAULT_MAX_S, 0, 0, 0.0, "" };
	int i, rc = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE_OR_FOLDER...\n", argv[0]);
		return EXIT_USAGE;
	}
	if (limit && atof(limit) > 0)
		r.max_s = atof(limit);
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (i = 1; i < argc; i++)
		rc |= run_path(&r, argv[i]);
	printf("%s: %zu inputs replayed, slowest %.3f s (%s), %zu over %.1f s\n", argv[0], r.inputs, r.slowest_s,
		r.slowest, r.slow, r.max_s);
	return rc || r.slow || r.inputs == 0 ? 1 : 0;
}
