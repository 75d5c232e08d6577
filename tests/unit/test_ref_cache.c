/* The reference worker's cache files (harness/ref_cache.h):
 *  - a stored result loads back bit for bit at its checked rows, an output
 *    checked whole (rows NULL) included;
 *  - a file stands only for its own result: another key, other rows or
 *    another row count load nothing (the driver then computes the group);
 *  - a failure marker, no worker (liveness pipe closed), or a claim whose
 *    process is gone ends the wait with nothing loaded, and nothing is
 *    left mapped; a group is claimed once. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness/rng.h"
#include "harness/ref_cache.h"
#include "testutil.h"

#define ROWS 32
#define WIDTH 5
#define CHECKED 4

/* one input, two outputs: out A [ROWS, WIDTH] checked at rows, out B [2, 3] whole */
static mb_tensor_spec spec[3] = {
	{"x", false, ROWS, WIDTH, MB_FILL_NORMAL, 0, 0},
	{"a", true, ROWS, WIDTH, MB_FILL_NORMAL, 0, 0},
	{"b", true, 2, 3, MB_FILL_NORMAL, 0, 0},
};

static void unmap_outputs(float **want)
{
	for (int i = 1; i < 3; i++) {
		if (want[i])
			munmap(want[i], (size_t)(spec[i].rows * spec[i].row_elems) * sizeof(float));
		want[i] = NULL;
	}
}

int main(void)
{
	char dir[] = "/tmp/mb-test-ref-cache-XXXXXX";
	int64_t rows[CHECKED] = {1, 7, 8, 30}, other[CHECKED] = {1, 7, 9, 30};
	int64_t *out_rows[3] = {NULL, rows, NULL}, *other_rows[3] = {NULL, other, NULL};
	int64_t out_n[3] = {0, CHECKED, 2};
	float a[ROWS * WIDTH], b[6], *want[3] = {NULL, a, b}, *got[3] = {NULL, NULL, NULL};
	mb_ref_result stored = {"row/bf16/fam/T=32 seed=1", 1, 3, spec, out_rows, out_n, want};
	mb_ref_result r = stored;
	int64_t waited = 0;
	int alive[2];
	mb_error err;

	mb_error_clear(&err);
	for (int i = 0; i < ROWS * WIDTH; i++)
		a[i] = (float)i * 0.25f - 3;
	for (int i = 0; i < 6; i++)
		b[i] = 1.0f / (float)(i + 1);
	CHECK(mkdtemp(dir) != NULL);
	CHECK(pipe(alive) == 0);
	CHECK(mb_ref_cache_store(dir, &stored, true, &err) == 0);
	mb_ref_cache_attach(dir, alive[0]);

	/* the very result: every checked element equal */
	r.want = got;
	CHECK(mb_ref_cache_load(&r, &waited, &err) == 1);
	for (int k = 0; got[1] && k < CHECKED; k++)
		CHECK(memcmp(got[1] + rows[k] * WIDTH, a + rows[k] * WIDTH, WIDTH * sizeof(float)) == 0);
	CHECK(got[2] && memcmp(got[2], b, sizeof(b)) == 0);
	unmap_outputs(got);

	/* other rows, another count, another key: nothing taken, nothing mapped */
	r.out_rows = other_rows;
	CHECK(mb_ref_cache_load(&r, &waited, &err) == 0 && !got[1] && !got[2]);
	r.out_rows = out_rows;
	out_n[1] = CHECKED - 1;
	CHECK(mb_ref_cache_load(&r, &waited, &err) == 0 && !got[1] && !got[2]);
	out_n[1] = CHECKED;
	r.key = "row/bf16/fam/T=32 seed=2";
	close(alive[1]); /* the worker is gone: the missing file is not waited for */
	CHECK(mb_ref_cache_load(&r, &waited, &err) == 0 && !got[1]);

	/* a failure marker ends the wait while the worker still lives */
	CHECK(pipe(alive) == 0);
	mb_ref_cache_attach(dir, alive[0]);
	CHECK(mb_ref_cache_store(dir, &r, false, &err) == 0);
	CHECK(mb_ref_cache_load(&r, &waited, &err) == 0 && !got[1]);
	close(alive[1]);

	/* a group is claimed once; a claim whose process is gone ends the wait */
	CHECK(pipe(alive) == 0);
	mb_ref_cache_attach(dir, alive[0]);
	CHECK(mb_ref_cache_claim(NULL, "k3") == 1 && mb_ref_cache_claim(dir, "k3") == 0);
	{
		char cmd[sizeof(dir) + 128];
		/* a claim left by a process that has exited (a crashed row child) */
		snprintf(cmd, sizeof(cmd), "sh -c 'echo $$ > %s/%016llx.claim'", dir,
			(unsigned long long)mb_case_seed(0, "k4"));
		CHECK(system(cmd) == 0);
	}
	r.key = "k4";
	CHECK(mb_ref_cache_load(&r, &waited, &err) == 0 && !got[1]);
	close(alive[1]);

	/* detached: nothing to take */
	mb_ref_cache_attach(NULL, -1);
	r.key = stored.key;
	CHECK(mb_ref_cache_load(&r, &waited, &err) == 0 && !got[1]);
	{
		char cmd[sizeof(dir) + 16];
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		CHECK(system(cmd) == 0);
	}
	return mb_test_finish("test_ref_cache");
}
